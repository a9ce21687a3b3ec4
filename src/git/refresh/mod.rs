//! The fast answer to "does this worktree have uncommitted work?" — the same answer as
//! `git status --porcelain` being non-empty, computed the way git's own refresh does it:
//!
//! 1. **staged**: the index against HEAD's tree, entry by entry (HEAD trees are flattened once and
//!    shared between worktrees on the same commit); conflicts and intent-to-add entries count.
//! 2. **modified**: one `lstat` per tracked file compared with the stat data in the index; only a
//!    file whose stat differs (or is racily clean) is read and hashed.
//! 3. **untracked**: a walk of the folders, descending only into folders that hold tracked files
//!    or are not ignored, asking the ignore rules only about names the index lacks. Folders found
//!    free of untracked files are remembered by mtime in the worktree's git dir.
//!
//! Whatever this cannot decide exactly (a sparse index, content filters that make a changed file
//! hash differently, an unborn HEAD) is left to the full status of [`crate::git::status`].
//! Nothing is written to the index: it is only read.
//!
//! Here: the check itself; comparing tracked files with their index entries in `look.rs`, the
//! untracked walk and its cache in `untracked.rs`, the file system monitor in `monitor.rs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gix::bstr::{BString, ByteSlice};

use crate::error::{Error, Result};
use crate::git::{ObjectId, Repo};
use look::Look;
use monitor::monitored;
use untracked::untracked;

mod look;
mod monitor;
mod untracked;

pub use monitor::{fast_with, Monitor};

/// A tree's files: (path, blob id, mode), sorted by path.
type Flat = Arc<Vec<(BString, ObjectId, u32)>>;

/// Flattened HEAD trees, shared between the worktrees of one status run. A tree is flattened
/// once: a thread that needs it while another flattens it waits for that one.
#[derive(Default)]
pub struct Trees {
    flat: Mutex<HashMap<ObjectId, Arc<Mutex<Option<Flat>>>>>,
}

impl Trees {
    fn get(&self, repo: &gix::Repository, tree: ObjectId) -> Result<Flat> {
        let slot = self.flat.lock().unwrap_or_else(|e| e.into_inner()).entry(tree).or_default().clone();
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = &*slot {
            return Ok(f.clone());
        }
        let t = repo
            .find_tree(tree)
            .map_err(|e| Error::internal(format!("cannot read tree {tree}: {e}")).with_source(e))?;
        let mut rec = gix::traverse::tree::Recorder::default();
        t.traverse()
            .breadthfirst(&mut rec)
            .map_err(|e| Error::internal(format!("cannot walk tree {tree}: {e}")).with_source(e))?;
        let mut flat: Vec<(BString, ObjectId, u32)> = rec
            .records
            .into_iter()
            .filter(|e| !e.mode.is_tree())
            .map(|e| (e.filepath, e.oid, u32::from(e.mode.value())))
            .collect();
        flat.sort_by(|a, b| a.0.cmp(&b.0));
        let flat = Arc::new(flat);
        *slot = Some(flat.clone());
        Ok(flat)
    }
}

/// The answer of the fast path: decided, or "ask the full status".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fast {
    /// `git status --porcelain` would print nothing.
    Clean,
    /// It would print something.
    Dirty,
    /// Only the full status can tell (sparse index, content filters, unborn HEAD, …).
    Unsure,
}

/// The git dir of the worktree at `wt` (its `.git` file's target, or `.git` itself).
fn git_dir_of(wt: &Path) -> Option<PathBuf> {
    let dot = wt.join(".git");
    let meta = std::fs::symlink_metadata(&dot).ok()?;
    if meta.is_dir() {
        return Some(dot);
    }
    let text = std::fs::read_to_string(&dot).ok()?;
    let target = text.trim().strip_prefix("gitdir:")?.trim();
    let p = Path::new(target);
    Some(if p.is_relative() { wt.join(p) } else { p.to_path_buf() })
}

/// The commit HEAD of that git dir points at.
fn head_of(repo: &Repo, git_dir: &Path) -> Option<ObjectId> {
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let head = head.trim();
    match head.strip_prefix("ref:") {
        Some(r) => repo.ref_id(r.trim()).ok().flatten(),
        None => ObjectId::from_hex(head.as_bytes()).ok(),
    }
}

/// The fast check of the worktree at `wt`; `trees` caches flattened HEAD trees between worktrees.
///
/// With `core.fsmonitor` naming a hook, the monitor is asked first: when the worktree was found
/// clean before (same HEAD, index and ignore files) and the monitor reports no change since, it
/// is clean without looking at any file; reported paths alone are looked at. Anything else (no
/// earlier clean check, the monitor answering "everything", or failing) runs the full check.
pub fn fast(repo: &Repo, wt: &Path, trees: &Trees) -> Result<Fast> {
    let Some(git_dir) = git_dir_of(wt) else { return Ok(Fast::Unsure) };
    let Some(head) = head_of(repo, &git_dir) else { return Ok(Fast::Unsure) };
    match crate::git::fsmonitor::hook(&repo.repo) {
        Some(hook) => monitored(repo, wt, trees, &git_dir, head, &hook),
        None => check(repo, wt, trees, &git_dir, head),
    }
}

/// The full check of the worktree at `wt` (git dir `git_dir`, HEAD at `head`).
fn check(repo: &Repo, wt: &Path, trees: &Trees, git_dir: &Path, head: ObjectId) -> Result<Fast> {
    use gix::index::entry::{Flags, Mode, Stage};
    let git_dir = git_dir.to_path_buf();
    let g = &repo.repo;
    let head_tree = match g.find_commit(head).and_then(|c| c.tree_id().map(|t| t.detach())) {
        Ok(t) => t,
        Err(_) => return Ok(Fast::Unsure),
    };
    let index_path = git_dir.join("index");
    let index_mtime = match std::fs::metadata(&index_path).and_then(|m| m.modified()) {
        Ok(t) => gix::index::entry::stat::Time::try_from(t).ok(),
        Err(_) => return Ok(Fast::Unsure),
    };
    let index = match gix::index::File::at(&index_path, g.object_hash(), true, Default::default()) {
        Ok(i) => i,
        Err(_) => return Ok(Fast::Unsure),
    };
    // 1. Staged: the index must list exactly HEAD's tree.
    let span = crate::trace::span("dirty: flatten HEAD's tree");
    let flat = trees.get(g, head_tree)?;
    drop(span);
    let span = crate::trace::span("dirty: index vs HEAD, lstat of every tracked file");
    let entries = index.entries();
    if entries.len() != flat.len() {
        return Ok(Fast::Dirty);
    }
    for (e, (path, id, mode)) in entries.iter().zip(flat.iter()) {
        if e.mode == Mode::DIR {
            return Ok(Fast::Unsure); // a sparse index
        }
        if e.stage() != Stage::Unconflicted || e.flags.contains(Flags::INTENT_TO_ADD) {
            return Ok(Fast::Dirty);
        }
        if e.path(&index) != path.as_bstr() || e.id != *id || e.mode.bits() != *mode {
            return Ok(Fast::Dirty);
        }
    }
    // 2. Modified: stat, then content where the stat cannot tell.
    let mut look = Look::new(g, wt, &index, index_mtime);
    for e in entries {
        if let Some(decided) = look.entry(e) {
            return Ok(decided);
        }
    }
    drop(span);
    if look.hashed > 0 {
        crate::trace::line(&format!("dirty: {} files read and hashed (stat changed or racily clean)", look.hashed));
    }
    // 3. Untracked (unless git is told not to show them).
    let _span = crate::trace::span("dirty: untracked walk");
    let show = g.config_snapshot().string("status.showUntrackedFiles").map(|v| v.to_str_lossy().to_lowercase());
    if show.as_deref() == Some("no") {
        return Ok(Fast::Clean);
    }
    if untracked(wt, &git_dir, g, &index)? {
        return Ok(Fast::Dirty);
    }
    Ok(Fast::Clean)
}
