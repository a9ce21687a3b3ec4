//! Linked worktrees of streams, made and removed through [`crate::git::worktree`] so that plain git
//! accepts them as its own (`git worktree list`, `git status`, `git worktree remove/prune`), plus
//! the questions the dashboard asks of them: dirty or clean, ahead/behind the base branch. This
//! module decides what to do with what it finds (repair, refuse, remove) and says so.
//!
//! Layout is git's: a worktree at `path` has a `.git` file (`gitdir: <admin dir>`) and an admin dir
//! `$GIT_COMMON_DIR/worktrees/<id>` (`gitdir`, `commondir`, `HEAD`, `index`, …). git names `<id>`
//! after the destination's basename and appends `1`, `2`, … when that name is taken — e.g. by the
//! leftover admin dir of a killed run, which [`add`] removes first so the id stays the stream name.
//!
//! Callers serialize [`add`] and [`remove`] of one path (the stream lock of [`crate::lock`]).
//!
//! Here: listing, dirt, removal and the refusals to move a branch; making a worktree in `add.rs`,
//! the files put beside git's in `files.rs`, moving one between commits in `checkout.rs`.

mod add;
pub mod checkout;
pub mod dirty;
mod files;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::git::status::{changed_paths, Changed, Look};
pub use crate::git::worktree::Known;
use crate::git::worktree::{normalize, read_trimmed, registrations, Removal};
use crate::git::{ObjectId, Repo};

pub use crate::git::graph::ahead_behind;
pub use add::{add, add_known, not_whole, start_point, widen_sparse};
pub use files::{copy_files, copy_included, exclude, worktree_include, WORKTREE_INCLUDE};

/// What [`add`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddOutcome {
    /// A new worktree was made. `recovered` lists leftovers of an earlier, killed run that were
    /// removed first (empty normally).
    Created { branch_created: bool, files: usize, recovered: Vec<String> },
    /// A worktree of this branch was already registered at the path but incomplete (killed run);
    /// it was finished in place. `what` says what was repaired.
    Repaired { branch_created: bool, what: Vec<String> },
    /// A complete worktree of this branch is already there; nothing changed.
    AlreadyPresent,
}

/// One linked worktree as git knows it (`$GIT_COMMON_DIR/worktrees/<admin_id>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeInfo {
    /// The worktree folder (from the admin dir's `gitdir` file); may not exist.
    pub path: PathBuf,
    /// The short branch name HEAD is attached to (`None` when detached or unreadable).
    pub branch: Option<String>,
    /// The commit HEAD resolves to (`None` when unborn or unreadable).
    pub head: Option<ObjectId>,
    /// The admin dir's name under `$GIT_COMMON_DIR/worktrees/`.
    pub admin_id: String,
    /// `Some(reason)` (possibly empty) when the worktree is locked (`git worktree lock`; also
    /// `initializing` while — or after a killed — `worktree add`).
    pub locked: Option<String>,
    /// The worktree folder (or its `.git` file) is missing.
    pub missing: bool,
    /// `git worktree prune` would remove it: missing and not locked.
    pub prunable: bool,
}

/// Uncommitted work in a worktree, as `git status --porcelain` would list it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dirt {
    /// Tracked paths that differ from HEAD or the index (staged, modified, deleted, conflicted).
    pub modified: Vec<String>,
    /// Untracked paths (an untracked folder is one entry ending in `/`); ignored files never count.
    pub untracked: Vec<String>,
    /// More changes exist than were collected (the limit was reached).
    pub more: bool,
}

impl From<Changed> for Dirt {
    fn from(c: Changed) -> Dirt {
        Dirt { modified: c.modified, untracked: c.untracked, more: c.more }
    }
}

impl Dirt {
    pub fn is_clean(&self) -> bool {
        self.modified.is_empty() && self.untracked.is_empty() && !self.more
    }

    /// `modified: a, b; untracked: c/` — for messages.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if !self.modified.is_empty() {
            let _ = write!(s, "modified: {}", self.modified.join(", "));
        }
        if !self.untracked.is_empty() {
            if !s.is_empty() {
                s.push_str("; ");
            }
            let _ = write!(s, "untracked: {}", self.untracked.join(", "));
        }
        if self.more {
            s.push_str(" …and more");
        }
        s
    }
}

/// The linked worktrees git knows (`git worktree list` without the main worktree), sorted by admin id.
pub fn list(repo: &Repo) -> Result<Vec<WorktreeInfo>> {
    Ok(registrations(repo)?
        .into_iter()
        .map(|r| {
            let missing = match &r.base {
                Some(b) => std::fs::symlink_metadata(b.join(".git")).is_err(),
                None => true,
            };
            WorktreeInfo {
                path: r.base.clone().unwrap_or_default(),
                branch: r.branch(),
                head: r.head_id,
                admin_id: r.id.clone(),
                prunable: missing && r.locked.is_none(),
                locked: r.locked.clone(),
                missing,
            }
        })
        .collect())
}

/// The worktree (main or linked) whose HEAD is attached to `branch` and whose folder exists, if any.
pub fn checked_out(repo: &Repo, branch: &str) -> Result<Option<PathBuf>> {
    let full = crate::git::refs::branch_ref(branch);
    if let Some(main) = &repo.main_work_dir {
        let head = read_trimmed(&repo.common_dir.join("HEAD"));
        if head.as_deref().and_then(|h| h.strip_prefix("ref:")).map(str::trim) == Some(full.as_str()) {
            return Ok(Some(main.clone()));
        }
    }
    Ok(registrations(repo)?
        .into_iter()
        .find(|r| r.head_ref.as_deref() == Some(full.as_str()))
        .and_then(|r| r.base)
        .filter(|b| b.join(".git").exists()))
}

/// The registered worktree whose folder is `path`, if any.
pub fn find(repo: &Repo, path: &Path) -> Result<Option<WorktreeInfo>> {
    let target = normalize(path);
    Ok(list(repo)?.into_iter().find(|w| w.path == target))
}

fn collect_dirt(path: &Path, limit: usize, look: Look) -> Result<Dirt> {
    changed_paths(path, limit, look).map(Dirt::from)
}

/// Uncommitted work in the worktree at `path`, up to `limit` paths (then `more` is set). Untracked
/// files always count here (even with `status.showUntrackedFiles=no`): they would be lost by removal.
pub fn dirt(path: &Path, limit: usize) -> Result<Dirt> {
    collect_dirt(path, limit.max(1), Look { all_untracked: true, want_more: true, submodules: true })
}

/// Tracked changes that stop a merge from moving the worktree at `path`, up to `limit` paths: as
/// for `git merge --ff-only`, a submodule whose checkout is ahead of or behind its gitlink is not
/// one (the merge does not enter submodules), and neither is a path outside a sparse checkout.
pub fn tracked_dirt_for_merge(path: &Path, limit: usize) -> Result<Dirt> {
    collect_dirt(path, limit.max(1), Look { all_untracked: false, want_more: true, submodules: false })
}

/// True when `git status --porcelain` in the worktree at `path` would print anything: staged or
/// unstaged changes, conflicts, untracked files (ignored files do not count). Stops at the first
/// change found.
pub fn dirty(path: &Path) -> Result<bool> {
    Ok(!collect_dirt(path, 1, Look { all_untracked: false, want_more: false, submodules: true })?.is_clean())
}

/// [`dirty`] for many worktrees at once, checked in parallel; results in the order of `paths`.
pub fn dirty_many(paths: &[PathBuf]) -> Vec<Result<bool>> {
    if paths.len() <= 1 {
        return paths.iter().map(|p| dirty(p)).collect();
    }
    let workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8).min(paths.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<bool>>>> =
        paths.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= paths.len() {
                    break;
                }
                let r = dirty(&paths[i]);
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|m| {
            m.into_inner().unwrap_or_else(|e| e.into_inner()).unwrap_or_else(|| Err(Error::internal("not checked")))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// remove, prune

/// Remove the linked worktree at `path` the way `git worktree remove` does: its folder and its
/// admin dir `$GIT_COMMON_DIR/worktrees/<id>`; the branch is kept. Refuses (exit 1) when the
/// worktree has modified or untracked files, listing up to 10 of them, unless `force`; refuses a
/// worktree locked with `git worktree lock` (a lock left by a killed `add` does not count).
pub fn remove(repo: &Repo, path: &Path, force: bool) -> Result<()> {
    let target = normalize(path);
    let shown = target.display().to_string();
    let regs = registrations(repo)?;
    let Some(reg) = regs.iter().find(|r| r.base.as_deref() == Some(target.as_path())) else {
        return Err(Error::usage(format!("{shown} is not a registered worktree of this repository"))
            .hint("`git worktree list` shows the registered worktrees"));
    };
    if reg.user_locked() {
        let why = reg.locked.as_deref().filter(|r| !r.is_empty()).map(|r| format!(" ({r})")).unwrap_or_default();
        return Err(Error::refused(format!("the worktree {shown} is locked{why}"))
            .hint(format!("unlock it first with `git worktree unlock {shown}`")));
    }
    let present = target.join(".git").exists();
    if present && !force && !reg.initializing() {
        let d = dirt(&target, 10)?;
        if !d.is_clean() {
            return Err(Error::refused(format!(
                "the worktree {shown} has uncommitted work that removing it would lose — {}",
                d.describe()
            ))
            .hint("commit or stash it in that worktree, or rerun with --force to discard it"));
        }
    }
    match crate::git::worktree::remove_linked(repo, &reg.admin, reg.initializing())? {
        Removal::Removed => {}
        Removal::Corrupted(e) => {
            return Err(Error::usage(format!("cannot remove the worktree {shown}: {e}"))
                .with_source(e)
                .hint(format!("`git worktree repair {shown}` fixes the links between the folder and git")));
        }
        Removal::Failed(e) => {
            return Err(Error::internal(format!("cannot remove the worktree {shown}: {e}")).with_source(e))
        }
        // No readable `gitdir` file: only the admin dir is left to remove.
        Removal::NotFound => reg.remove_admin()?,
    }
    Ok(())
}

/// Forget worktrees whose folder is gone (what `git worktree prune` does): remove their admin
/// dirs, except locked ones. Returns the admin ids removed.
pub fn prune_missing(repo: &Repo) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for r in registrations(repo)? {
        if r.locked.is_some() {
            continue;
        }
        let missing = match &r.base {
            Some(b) => std::fs::symlink_metadata(b.join(".git")).is_err(),
            None => true,
        };
        if missing {
            r.remove_admin()?;
            removed.push(r.id);
        }
    }
    Ok(removed)
}

/// Refuse (exit 1) to move `branch` while a worktree is rebasing or bisecting it
/// ([`refuse_busy`]), or while the worktree that has it checked out holds uncommitted changes to
/// tracked files, naming up to 10 of them; `overwriting` says what would overwrite them
/// ("the rollback"). Merge, unmerge and rollback ask this before they move a branch.
pub fn refuse_move(repo: &Repo, branch: &str, overwriting: Option<&str>) -> Result<()> {
    refuse_busy(repo, branch)?;
    let Some(wt) = checked_out(repo, branch)? else { return Ok(()) };
    let dirt = tracked_dirt_for_merge(&wt, 10)?;
    if dirt.modified.is_empty() {
        return Ok(());
    }
    let what = overwriting.map(|w| format!("; {w} would overwrite them")).unwrap_or_default();
    Err(Error::refused(format!(
        "the worktree {} (branch {branch}) has uncommitted changes: {}{what}",
        wt.display(),
        dirt.modified.join(", ")
    ))
    .hint(format!("commit or stash them in {}, then rerun", wt.display())))
}

/// Refuse to move `branch` while a worktree is rebasing it or bisecting from it, as git refuses
/// (`git branch -f`, `git worktree add`): the rebase would end by moving the branch from where it
/// started — away from what was merged — or fail to (git's `is_worktree_being_rebased` and
/// `is_worktree_being_bisected`: `rebase-merge/head-name`, `rebase-apply/head-name` unless `am`
/// is applying, `BISECT_START`).
fn refuse_busy(repo: &Repo, branch: &str) -> Result<()> {
    let full = crate::git::refs::branch_ref(branch);
    let mut worktrees: Vec<(PathBuf, String)> = Vec::new();
    if let Some(main) = &repo.main_work_dir {
        worktrees.push((repo.common_dir.clone(), main.display().to_string()));
    }
    for r in registrations(repo)? {
        let shown = r.base.as_ref().map_or_else(|| r.id.clone(), |b| b.display().to_string());
        worktrees.push((r.admin, shown));
    }
    for (git_dir, shown) in worktrees {
        let rebasing = ["rebase-merge", "rebase-apply"].iter().any(|d| {
            let dir = git_dir.join(d);
            !(*d == "rebase-apply" && dir.join("applying").exists())
                && read_trimmed(&dir.join("head-name")).as_deref() == Some(full.as_str())
        });
        let bisecting = read_trimmed(&git_dir.join("BISECT_START")).as_deref() == Some(branch);
        if !(rebasing || bisecting) {
            continue;
        }
        let (what, finish) = if rebasing {
            ("being rebased", "finish it (`git rebase --continue`) or abort it (`git rebase --abort`)")
        } else {
            ("being bisected", "end it with `git bisect reset`")
        };
        return Err(Error::refused(format!("branch {branch} is {what} in the worktree {shown}; nothing was changed"))
            .hint(format!("{finish} there, then rerun")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worktree_dirt_describe() {
        let d = Dirt { modified: vec!["a".into()], untracked: vec!["b/".into()], more: false };
        assert_eq!(d.describe(), "modified: a; untracked: b/");
        assert!(!d.is_clean());
        assert!(Dirt::default().is_clean());
    }
}
