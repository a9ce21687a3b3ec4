//! "Does this worktree have uncommitted work?" for many worktrees at once, fast enough for the
//! dashboard: the fast check of [`crate::git::refresh`] (index against HEAD, `lstat` against the
//! index, a walk for untracked files), and the full status ([`crate::worktree::dirty`]) for what it
//! cannot decide. Nothing is written: the index is only read.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::git::refresh::{fast, fast_with, Fast, Monitor};
use crate::git::Repo;

pub use crate::git::refresh::Trees;

/// The fast path alone: `Some(dirty)` when it could decide, `None` when only the full status can.
pub fn decide(repo: &Repo, wt: &Path, trees: &Trees) -> Result<Option<bool>> {
    Ok(match fast(repo, wt, trees)? {
        Fast::Clean => Some(false),
        Fast::Dirty => Some(true),
        Fast::Unsure => None,
    })
}

/// True when `git status --porcelain` in the worktree at `wt` would print anything.
pub fn dirty(repo: &Repo, wt: &Path, trees: &Trees) -> Result<bool> {
    dirty_with(repo, wt, trees, None)
}

/// [`dirty`], with the file system monitor (if any) asked once for many worktrees.
fn dirty_with(repo: &Repo, wt: &Path, trees: &Trees, monitor: Option<&Monitor>) -> Result<bool> {
    let _span = crate::trace::span(format!("dirty check of {}", wt.display()));
    let decided = fast_with(repo, wt, trees, monitor)?;
    if matches!(decided, Fast::Unsure) {
        crate::trace::line(&format!("{}: the fast check cannot decide; full status", wt.display()));
    }
    match decided {
        Fast::Clean => Ok(false),
        Fast::Dirty => Ok(true),
        Fast::Unsure => crate::worktree::dirty(wt),
    }
}

/// [`dirty`] for many worktrees, checked in parallel; results in the order of `paths`.
pub fn dirty_many(repo: &Repo, paths: &[PathBuf]) -> Vec<Result<bool>> {
    let mut monitor = Early::none();
    let out = dirty_many_with(repo, paths, &mut monitor);
    monitor.finish();
    out
}

/// [`dirty_many`] with the file system monitor of `early` (started ahead, or asked now when one
/// of `paths` is below the main worktree), kept for more checks until [`Early::finish`].
pub fn dirty_many_with(repo: &Repo, paths: &[PathBuf], early: &mut Early) -> Vec<Result<bool>> {
    let trees = Trees::default();
    let monitor = early.monitor_for(repo, paths);
    if paths.len() <= 1 {
        return paths.iter().map(|p| dirty_with(repo, p, &trees, monitor)).collect();
    }
    on_threads(&repo.common_dir, paths, &trees, monitor)
}

/// The file system monitor's hook for the dirty checks of one command: started ahead (so that
/// it runs while the caller reads what it needs first, see [`dirty_many_meanwhile`]) or when
/// first needed, asked once for every worktree below the main worktree whichever call checks
/// it. Worktrees elsewhere ask their own (the hook answers for the folder it runs in), so it is
/// asked in the main worktree only when a worktree below it is checked. Dropped, it waits for a
/// hook still running: no hook outlives the command (an error included).
pub struct Early {
    /// `None` until asked (or decided: `Some(None)` without a hook).
    monitor: Option<Option<Monitor>>,
    /// Whether it served a check, so that what it said is kept.
    used: bool,
}

impl Early {
    /// Nothing started ahead: the checks ask the monitor when they need it.
    pub fn none() -> Early {
        Early { monitor: None, used: false }
    }

    /// Start the hook now (if `core.fsmonitor` names one) when a linked worktree lies below the
    /// main worktree (where the plan puts stream worktrees): a repository without one never runs
    /// the hook in the main worktree.
    pub fn start(repo: &Repo) -> Early {
        let mut early = Early::none();
        if Monitor::configured(repo) && linked_below_main(repo) {
            early.monitor = Some(Monitor::ask(repo));
        }
        early
    }

    /// The monitor for checking `paths`: `None` when none of them is below the main worktree
    /// (the one started ahead then waits for a later call).
    fn monitor_for(&mut self, repo: &Repo, paths: &[PathBuf]) -> Option<&Monitor> {
        let root = repo.main_work_dir.as_deref()?;
        if !paths.iter().any(|p| p.starts_with(root) && p != root) {
            return None;
        }
        self.used = true;
        self.monitor.get_or_insert_with(|| Monitor::ask(repo)).as_ref()
    }

    /// Keep what the monitor said for next time, when it served a check.
    pub fn finish(self) {
        if let (true, Some(Some(m))) = (self.used, &self.monitor) {
            m.keep();
        }
    }
}

/// Whether a linked worktree of the repository lies below its main worktree (git records each
/// one's `.git` file, by its real path, in `$GIT_COMMON_DIR/worktrees/<id>/gitdir`).
fn linked_below_main(repo: &Repo) -> bool {
    let Some(root) = repo.main_work_dir.as_deref() else { return false };
    let Ok(dir) = std::fs::read_dir(repo.common_dir.join("worktrees")) else { return false };
    let real = std::fs::canonicalize(root).ok();
    dir.flatten().any(|entry| {
        let Ok(text) = std::fs::read_to_string(entry.path().join("gitdir")) else { return false };
        let Some(wt) = Path::new(text.trim()).parent() else { return false };
        [Some(root), real.as_deref()].into_iter().flatten().any(|r| wt.starts_with(r) && wt != r)
    })
}

/// [`dirty_many_with`] on threads of their own while the caller runs `meanwhile` (reading state
/// that does not depend on the worktrees' files): the file system monitor's hook, if one is set
/// (or already started, `early`), and the checks run while `meanwhile` does. Returns what
/// `meanwhile` returned and the results in the order of `paths`.
pub fn dirty_many_meanwhile<R>(
    repo: &Repo,
    paths: &[PathBuf],
    early: &mut Early,
    meanwhile: impl FnOnce() -> R,
) -> (R, Vec<Result<bool>>) {
    if paths.is_empty() {
        // A hook started ahead waits for the checks of later calls.
        return (meanwhile(), Vec::new());
    }
    let trees = Trees::default();
    // Started first: the hook is a child process that runs while everything else does.
    let monitor = early.monitor_for(repo, paths);
    let common = repo.common_dir.as_path();
    std::thread::scope(|s| {
        let checks = s.spawn(|| on_threads(common, paths, &trees, monitor));
        let r = meanwhile();
        let out = checks.join().unwrap_or_else(|_| paths.iter().map(|_| Err(Error::internal("not checked"))).collect());
        (r, out)
    })
}

/// The checks of `paths` on up to one thread per core (at least two, at most eight), each with
/// its own repository handle (handles are not shared across threads).
fn on_threads(common: &Path, paths: &[PathBuf], trees: &Trees, monitor: Option<&Monitor>) -> Vec<Result<bool>> {
    let workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8).min(paths.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<bool>>>> = paths.iter().map(|_| Mutex::new(None)).collect();
    let work = || {
        let local = Repo::open(common);
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= paths.len() {
                break;
            }
            let r = match &local {
                Ok(l) => dirty_with(l, &paths[i], trees, monitor),
                Err(e) => Err(Error::internal(e.to_string())),
            };
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        }
    };
    std::thread::scope(|s| {
        // The calling thread is one of the workers.
        for _ in 1..workers {
            s.spawn(work);
        }
        work();
    });
    results
        .into_iter()
        .map(|m| {
            m.into_inner().unwrap_or_else(|e| e.into_inner()).unwrap_or_else(|| Err(Error::internal("not checked")))
        })
        .collect()
}
