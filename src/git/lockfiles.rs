//! git's own lock files (`*.lock` beside what a git process is rewriting) left behind by a
//! process that was killed: git never removes them itself, and every later write that needs the
//! same file fails until someone does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Repo;

pub use super::worktree::STALE_AFTER;

/// A lock file older than [`STALE_AFTER`] and how long it has been there.
#[derive(Debug, Clone)]
pub struct StaleLock {
    pub path: PathBuf,
    pub age: Duration,
}

/// The stale lock files that block git's and git-boulder's writes: every `*.lock` in the common
/// git dir and in each worktree's admin folder (`packed-refs.lock`, `index.lock`, `HEAD.lock`,
/// `config.lock`, `AUTO_MERGE.lock`…) and under `refs/heads`, `refs/boulder` and `refs/notes`
/// (the post-commit hook's notes). Sorted by path.
pub fn stale(repo: &Repo) -> Vec<StaleLock> {
    let mut found = Vec::new();
    let common = &repo.common_dir;
    let mut dirs = vec![common.clone()];
    if let Ok(regs) = super::worktree::registrations(repo) {
        dirs.extend(regs.into_iter().map(|r| r.admin));
    }
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            if e.file_name().to_str().is_some_and(|n| n.ends_with(".lock")) {
                consider(&e.path(), &mut found);
            }
        }
    }
    for dir in ["refs/heads", "refs/boulder", "refs/notes"] {
        walk(&common.join(dir), 0, &mut found);
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

fn consider(path: &Path, found: &mut Vec<StaleLock>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return };
    if !meta.is_file() {
        return;
    }
    let age = meta.modified().ok().and_then(|m| m.elapsed().ok()).unwrap_or_default();
    if age >= STALE_AFTER {
        found.push(StaleLock { path: path.to_path_buf(), age });
    }
}

/// `*.lock` files under `dir` (ref names nest; a hostile tree stops at a fixed depth).
fn walk(dir: &Path, depth: usize, found: &mut Vec<StaleLock>) {
    if depth > 32 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let Ok(kind) = e.file_type() else { continue };
        let path = e.path();
        if kind.is_dir() {
            walk(&path, depth + 1, found);
        } else if kind.is_file() && path.extension().is_some_and(|x| x == "lock") {
            consider(&path, found);
        }
    }
}
