//! Moving a checked-out worktree from one commit's tree to another's, with gix, the way
//! `git merge --ff-only` or `git reset --keep` updates files: only the paths that differ between
//! the two trees are touched, a path holding local work is never overwritten, and the index is
//! rewritten to the new tree (keeping the stat data of unchanged entries so git stays fast).
//!
//! [`apply`] is idempotent: a run killed half-way (some files written, the index not yet) is
//! finished by running it again with the same trees, because a path counts as safe when it holds
//! either the old or the new content.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::bstr::{BString, ByteSlice};
use gix::objs::tree::EntryKind;
use gix::ObjectId;

use crate::error::{Error, Result, ResultExt};

/// One path that differs between the two trees. `None` means absent on that side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: BString,
    pub old: Option<(ObjectId, EntryKind)>,
    pub new: Option<(ObjectId, EntryKind)>,
}

/// A path that stops the move, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocker {
    pub path: String,
    pub why: &'static str,
}

fn gix_err(context: impl std::fmt::Display, e: impl std::fmt::Display) -> Error {
    Error::internal(format!("{context}: {e:#}"))
}

/// The non-tree paths that differ from `from` to `to` (no rename tracking: a rename is a deletion
/// and an addition), sorted by path.
pub fn changes(repo: &gix::Repository, from: ObjectId, to: ObjectId) -> Result<Vec<FileChange>> {
    if from == to {
        return Ok(Vec::new());
    }
    let old = repo.find_tree(from).internal(format_args!("cannot read tree {from}"))?;
    let new = repo.find_tree(to).internal(format_args!("cannot read tree {to}"))?;
    let mut out = Vec::new();
    let mut platform = old.changes().internal("cannot diff trees")?;
    platform.options(|o| {
        o.track_path().track_rewrites(None);
    });
    platform
        .for_each_to_obtain_tree(&new, |ch| {
            use gix::object::tree::diff::Change;
            let (path, old, new) = match ch {
                Change::Addition { location, entry_mode, id, .. } => {
                    (location, None, Some((id.detach(), entry_mode.kind())))
                }
                Change::Deletion { location, entry_mode, id, .. } => {
                    (location, Some((id.detach(), entry_mode.kind())), None)
                }
                Change::Modification { location, previous_entry_mode, previous_id, entry_mode, id } => (
                    location,
                    Some((previous_id.detach(), previous_entry_mode.kind())),
                    Some((id.detach(), entry_mode.kind())),
                ),
                Change::Rewrite { .. } => unreachable!("rewrite tracking is off"),
            };
            let old = old.filter(|(_, k)| *k != EntryKind::Tree);
            let new = new.filter(|(_, k)| *k != EntryKind::Tree);
            if old.is_some() || new.is_some() {
                out.push(FileChange { path: path.to_owned(), old, new });
            }
            Ok(std::ops::ControlFlow::Continue(()))
        })
        .internal("cannot diff trees")?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn open(work_dir: &Path) -> Result<gix::Repository> {
    gix::open(work_dir).map_err(|e| gix_err(format_args!("cannot open the worktree {}", work_dir.display()), e))
}

/// The old index's entries by path: (id, stat), for unchanged files and the safety check.
fn index_entries(wt: &gix::Repository) -> Result<HashMap<BString, (ObjectId, gix::index::entry::Stat)>> {
    let index = wt.index_or_empty().internal("cannot read the index")?;
    Ok(index
        .entries()
        .iter()
        .filter(|e| e.stage_raw() == 0)
        .map(|e| (e.path(&index).to_owned(), (e.id, e.stat)))
        .collect())
}

/// Does the file at `path` hold `want` (absent, or that blob as file or symlink)? True also when
/// its stat still matches an index entry of that same blob (content written through filters).
fn holds(
    wt: &gix::Repository,
    work_dir: &Path,
    rel: &BString,
    want: Option<(ObjectId, EntryKind)>,
    index: &HashMap<BString, (ObjectId, gix::index::entry::Stat)>,
) -> bool {
    let Ok(rel_path) = gix::path::from_bstr(rel.as_bstr()) else { return false };
    let full = work_dir.join(rel_path);
    let meta = std::fs::symlink_metadata(&full);
    let Some((id, kind)) = want else {
        return matches!(&meta, Err(e) if e.kind() == std::io::ErrorKind::NotFound);
    };
    let Ok(meta) = meta else { return false };
    let bytes = match kind {
        EntryKind::Commit => return meta.is_dir(),
        EntryKind::Link if meta.file_type().is_symlink() => match std::fs::read_link(&full) {
            Ok(t) => match gix::path::into_bstr(t) {
                Ok(b) => b.into_owned().into(),
                Err(_) => return false,
            },
            Err(_) => return false,
        },
        EntryKind::Blob | EntryKind::BlobExecutable if meta.is_file() => match std::fs::read(&full) {
            Ok(b) => b,
            Err(_) => return false,
        },
        _ => return false,
    };
    if gix::objs::compute_hash(wt.object_hash(), gix::objs::Kind::Blob, &bytes).is_ok_and(|h| h == id) {
        return true;
    }
    // Filters (eol, ident) make the file differ from the blob: trust an unchanged stat.
    match (index.get(rel), gix::index::fs::Metadata::from_path_no_follow(&full)) {
        (Some((iid, stat)), Ok(m)) if *iid == id => gix::index::entry::Stat::from_fs(&m)
            .is_ok_and(|now| now.matches(stat, gix::index::entry::stat::Options::default())),
        _ => false,
    }
}

/// Paths that stop moving the worktree at `work_dir` from tree `from` to tree `to`: a changed path
/// holding neither its old nor its new content (local modifications, an untracked file in the way).
pub fn blockers(work_dir: &Path, from: ObjectId, to: ObjectId) -> Result<Vec<Blocker>> {
    let wt = open(work_dir)?;
    let changes = changes(&wt, from, to)?;
    blockers_in(&wt, work_dir, &changes)
}

fn blockers_in(wt: &gix::Repository, work_dir: &Path, changes: &[FileChange]) -> Result<Vec<Blocker>> {
    let index = index_entries(wt)?;
    let mut out = Vec::new();
    for c in changes {
        if holds(wt, work_dir, &c.path, c.old, &index) || holds(wt, work_dir, &c.path, c.new, &index) {
            continue;
        }
        let why = if c.old.is_none() { "an untracked file is in the way" } else { "it has local changes" };
        out.push(Blocker { path: c.path.to_str_lossy().into_owned(), why });
    }
    Ok(out)
}

/// The refusal for blockers in the worktree at `work_dir`.
pub fn refusal(work_dir: &Path, found: &[Blocker]) -> Error {
    let list: Vec<String> = found.iter().take(10).map(|b| format!("{} ({})", b.path, b.why)).collect();
    let more = if found.len() > 10 { format!(" …and {} more", found.len() - 10) } else { String::new() };
    Error::refused(format!(
        "cannot update the worktree {}: updating would overwrite {}{more}",
        work_dir.display(),
        list.join(", ")
    ))
    .hint(format!("commit, stash or move those files in {}, then rerun", work_dir.display()))
}

/// Remove `dir` and its parents up to (not including) `stop` while they are empty.
fn remove_empty_dirs(mut dir: PathBuf, stop: &Path) {
    while dir != stop && dir.starts_with(stop) {
        if std::fs::remove_dir(&dir).is_err() {
            break;
        }
        if !dir.pop() {
            break;
        }
    }
}

/// Move the worktree at `work_dir` from tree `from` to tree `to`: refuse (changing nothing) when a
/// changed path holds local work, else delete, write and rewrite the index. Returns the number of
/// paths touched. The caller moves HEAD's branch (before or after; rerunning finishes either way).
pub fn apply(work_dir: &Path, from: ObjectId, to: ObjectId) -> Result<usize> {
    let wt = open(work_dir)?;
    let changes = changes(&wt, from, to)?;
    let found = blockers_in(&wt, work_dir, &changes)?;
    if !found.is_empty() {
        return Err(refusal(work_dir, &found));
    }
    let old_index = index_entries(&wt)?;
    let work_dir = wt.workdir().map(Path::to_owned).unwrap_or_else(|| work_dir.to_owned());

    // 1. Deletions (and paths whose kind changes), then the folders they leave empty.
    for c in changes.iter().filter(|c| c.old.is_some()) {
        let kind_changes = c.new.is_some_and(|(_, k)| Some(k) != c.old.map(|(_, k)| k));
        if c.new.is_some() && !kind_changes {
            continue;
        }
        let Ok(rel) = gix::path::from_bstr(c.path.as_bstr()) else { continue };
        let full = work_dir.join(rel);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() && !m.file_type().is_symlink() => {
                // A submodule's folder, or a path turned into a folder by the new tree's other
                // entries: never delete a folder's content here.
                let _ = std::fs::remove_dir(&full);
            }
            Ok(_) => {
                std::fs::remove_file(&full).map_err(|e| gix_err(format_args!("cannot delete {}", full.display()), e))?
            }
            Err(_) => {}
        }
        if let Some(parent) = full.parent() {
            remove_empty_dirs(parent.to_owned(), &work_dir);
        }
    }

    // 2. New and changed files, checked out through gix (filters, modes, symlinks).
    let mut full = wt.index_from_tree(&to).internal("cannot build the index of the new tree")?;
    let writes: std::collections::HashSet<&gix::bstr::BStr> = changes
        .iter()
        .filter(|c| c.new.is_some_and(|(_, k)| k != EntryKind::Commit))
        .map(|c| c.path.as_bstr())
        .collect();
    let mut subset = full.clone();
    subset.remove_entries(|_, path, _| !writes.contains(path));
    if !subset.entries().is_empty() {
        check_out(&wt, &mut subset, &work_dir, true)?;
    }

    // 3. The index of the new tree: fresh stats for written files, the old ones for the rest.
    let written: HashMap<BString, gix::index::entry::Stat> =
        subset.entries().iter().map(|e| (e.path(&subset).to_owned(), e.stat)).collect();
    let paths: Vec<(usize, BString, ObjectId)> =
        full.entries().iter().enumerate().map(|(i, e)| (i, e.path(&full).to_owned(), e.id)).collect();
    for (i, path, id) in paths {
        let stat = match written.get(&path) {
            Some(s) => Some(*s),
            None => old_index.get(&path).filter(|(oid, _)| *oid == id).map(|(_, s)| *s),
        };
        if let Some(stat) = stat {
            full.entries_mut()[i].stat = stat;
        }
    }
    full.write(Default::default()).internal("cannot write the index")?;
    Ok(changes.len())
}

/// Write the files of `index`'s entries into `work_dir` through gix's checkout (filters, modes,
/// symlinks), recording their stat data in `index`. `overwrite` replaces existing files; without
/// it files are created exclusively and an existing one is an error. Returns the files written.
pub fn check_out(
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
