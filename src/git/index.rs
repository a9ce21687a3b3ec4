//! The index (staging area) of a worktree: the entries of the one a command runs in; an index
//! built from a tree, compared with a tree, written; and the files of index entries checked out
//! by gix (filters, modes, symlinks), recording their stat data.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use gix::bstr::ByteSlice;

use crate::error::{Error, Result, ResultExt};
use crate::git::{ObjectId, Repo};

impl Repo {
    /// Every entry of this worktree's index: path (git's bytes, not always UTF-8) and blob id;
    /// none when there is no index yet.
    pub fn index_entries(&self) -> Result<Vec<(Vec<u8>, ObjectId)>> {
        let index = self
            .repo
            .index_or_empty()
            .map_err(|e| Error::internal(format!("cannot read the index: {e}")).with_source(e))?;
        Ok(index.entries().iter().map(|e| (e.path(&index).to_vec(), e.id)).collect())
    }
}

/// An index file read into memory.
pub struct Index(pub(super) gix::index::File);

impl Index {
    /// Write the index (with its checksum) to `out`.
    pub fn write_to(&self, out: &mut impl std::io::Write) -> Result<()> {
        self.0
            .write_to(out, Default::default())
            .map_err(|e| Error::internal(format!("cannot write the index: {e:#}")).with_source(e))?;
        Ok(())
    }
}

fn gix_err(context: impl std::fmt::Display, e: gix::Error) -> Error {
    Error::internal(format!("{context}: {e:#}")).with_source(e)
}

/// Does the index hold exactly the files of `tree` (path, mode, id; nothing staged, no conflict)?
/// Stat data and flags such as skip-worktree do not count.
pub(super) fn index_is_tree(wt: &gix::Repository, index: &gix::index::File, tree: ObjectId) -> Result<bool> {
    let want = wt.index_from_tree(&tree).internal("cannot build the index of a tree")?;
    let (a, b) = (index.entries(), want.entries());
    if a.len() != b.len() {
        return Ok(false);
    }
    Ok(a.iter().zip(b).all(|(x, y)| {
        x.stage_raw() == 0
            && !x.flags.contains(gix::index::entry::Flags::INTENT_TO_ADD)
            && x.id == y.id
            && x.mode == y.mode
            && x.path(index) == y.path(&want)
    }))
}

/// Rebuild the missing index of the worktree at `work_dir` from its HEAD tree, checking out only
/// the files that are missing (existing files are never overwritten; they keep a zero stat so git
/// and gix compare their content). Returns how many files were written.
pub fn rebuild_index(work_dir: &Path) -> Result<usize> {
    let wt = crate::git::worktree::open_worktree(work_dir)?;
    let work_dir = wt.workdir().ok_or_else(|| Error::internal("worktree has no work dir"))?.to_owned();
    let tree = wt.head_tree_id().map_err(|e| gix_err("cannot read the worktree's HEAD tree", e))?.detach();
    let mut full = wt.index_from_tree(&tree).map_err(|e| gix_err("cannot build an index from HEAD", e))?;
    let mut missing = full.clone();
    missing.remove_entries(|_, path, _| {
        let Ok(rel) = gix::path::from_bstr(path) else { return true };
        std::fs::symlink_metadata(work_dir.join(rel)).is_ok()
    });
    let mut written = 0;
    if !missing.entries().is_empty() {
        // Exclusive creation: never overwrite.
        written = check_out(&wt, &mut missing, &work_dir, false)?;
        let stats: Vec<(Vec<u8>, gix::index::entry::Stat)> =
            missing.entries().iter().map(|e| (e.path(&missing).to_vec(), e.stat)).collect();
        for (path, stat) in stats {
            if let Some(idx) =
                full.entry_index_by_path_and_stage(path.as_bstr(), gix::index::entry::Stage::Unconflicted)
            {
                full.entries_mut()[idx].stat = stat;
            }
        }
    }
    full.write(Default::default()).map_err(|e| gix_err("cannot write the worktree index", e))?;
    Ok(written)
}

/// Whether the worktree at `work_dir` lacks its index, or has an empty one while its HEAD commit
/// has files: what a checkout killed before it wrote the index leaves (git reads a missing index
/// as an empty one, so `git add -A` there stages the deletion of every file not yet written).
pub fn index_missing_or_empty(work_dir: &Path) -> Result<bool> {
    let wt = crate::git::worktree::open_worktree(work_dir)?;
    if !wt.index_path().exists() {
        return Ok(true);
    }
    let index = wt.open_index().map_err(|e| gix_err("cannot read the worktree index", e))?;
    if !index.entries().is_empty() {
        return Ok(false);
    }
    let tree = match wt.head_tree_id() {
        Ok(t) => t.detach(),
        // An unborn HEAD has no files to miss.
        Err(_) => return Ok(false),
    };
    Ok(tree != ObjectId::empty_tree(wt.object_hash()))
}

/// Write the files of `index`'s entries into `work_dir` through gix's checkout (filters, modes,
/// symlinks), recording their stat data in `index`. `overwrite` replaces existing files; without
/// it files are created exclusively and an existing one is an error. Returns the files written.
pub(super) fn check_out(
    wt: &gix::Repository,
    index: &mut gix::index::File,
    work_dir: &Path,
    overwrite: bool,
) -> Result<usize> {
    let mut opts = wt
        .checkout_options(gix::worktree::stack::state::attributes::Source::IdMapping)
        .internal("cannot read checkout options")?;
    opts.destination_is_initially_empty = !overwrite;
    opts.overwrite_existing = overwrite;
    let objects = wt.objects.clone().into_arc().internal("cannot open the object database")?;
    let outcome = gix::worktree::state::checkout(
        index,
        work_dir,
        objects,
        &gix::progress::Discard,
        &gix::progress::Discard,
        &AtomicBool::new(false),
        opts,
    )
    .internal("cannot check out files")?;
    if let Some(err) = outcome.errors.first() {
        return Err(Error::internal(format!("cannot check out {}: {:#}", err.path, err.error)));
    }
    if let Some(c) = outcome.collisions.first() {
        return Err(Error::internal(format!("checkout collided at {} ({:?})", c.path, c.error_kind)));
    }
    Ok(outcome.files_updated)
}

/// Is `rel` (a path relative to the worktree root, `/`-separated) in the index of the worktree
/// at `work_dir`? A worktree without an index tracks nothing.
pub fn is_tracked(work_dir: &Path, rel: &str) -> Result<bool> {
    let wt = crate::git::worktree::open_worktree(work_dir)?;
    let index = wt
        .index_or_empty()
        .map_err(|e| Error::internal(format!("cannot read the index of {}: {e}", work_dir.display())).with_source(e))?;
    Ok(index.entry_by_path(rel.as_bytes().as_bstr()).is_some())
}
