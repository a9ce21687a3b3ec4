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
    let trees = Trees::default();
    // A file system monitor is asked once for all the worktrees below the main worktree.
    let monitor = if paths.is_empty() { None } else { Monitor::ask(repo) };
    let monitor = monitor.as_ref();
    if paths.len() <= 1 {
        let out = paths.iter().map(|p| dirty_with(repo, p, &trees, monitor)).collect();
        finish(monitor);
        return out;
    }
    let out = on_threads(&repo.common_dir, paths, &trees, monitor);
    finish(monitor);
    out
}

/// The file system monitor's hook started ahead of the dirty checks, so that it runs while the
/// caller reads what it needs first (see [`dirty_many_meanwhile`]).
pub struct Early(Option<Option<Monitor>>);

impl Early {
    /// Nothing started ahead: [`dirty_many_meanwhile`] starts the hook itself.
    pub fn none() -> Early {
        Early(None)
    }

    /// Start the hook now (if `core.fsmonitor` names one), when the repository has linked
    /// worktrees at all (stream worktrees are linked worktrees): a repository without any never
    /// waits for a hook.
    pub fn start(repo: &Repo) -> Early {
        let linked = std::fs::read_dir(repo.common_dir.join("worktrees")).is_ok_and(|mut d| d.next().is_some());
        Early(linked.then(|| Monitor::ask(repo)))
    }
}

/// [`dirty_many`] on threads of their own while the caller runs `meanwhile` (reading state that
/// does not depend on the worktrees' files): the file system monitor's hook, if one is set (or
/// already started, `early`), and the checks run while `meanwhile` does. Returns what `meanwhile`
/// returned and the results in the order of `paths`.
pub fn dirty_many_meanwhile<R>(
    repo: &Repo,
    paths: &[PathBuf],
    early: Early,
    meanwhile: impl FnOnce() -> R,
) -> (R, Vec<Result<bool>>) {
    if paths.is_empty() {
        // A hook started ahead is not waited for: its answer is not needed.
        return (meanwhile(), Vec::new());
    }
    let trees = Trees::default();
    // Started first: the hook is a child process that runs while everything else does.
    let monitor = early.0.unwrap_or_else(|| Monitor::ask(repo));
    let monitor = monitor.as_ref();
    let common = repo.common_dir.as_path();
    let (r, out) = std::thread::scope(|s| {
        let checks = s.spawn(|| on_threads(common, paths, &trees, monitor));
        let r = meanwhile();
        let out = checks.join().unwrap_or_else(|_| paths.iter().map(|_| Err(Error::internal("not checked"))).collect());
        (r, out)
    });
    finish(monitor);
    (r, out)
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
                Err(e) => Err(Error::internal(e.message.clone())),
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

/// Keep what the monitor said for next time.
fn finish(monitor: Option<&Monitor>) {
    if let Some(m) = monitor {
        m.keep();
    }
}
