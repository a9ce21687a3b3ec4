//! Moving a checked-out worktree's files from one tree to another, the way `git merge --ff-only`
//! or `git reset --keep` updates them: only the paths that differ between the two trees are
//! touched, a path holding local work is found before anything is written, files are written by
//! git itself (checkout filters, LFS, `eol`, `ident`), and the new index keeps the stat data of
//! unchanged entries so git stays fast. When to move, and what to refuse, is decided by
//! `worktree::checkout`, above this layer.
//!
//! A path counts as safe when it holds either the old or the new content, and files written by an
//! interrupted move are recognised by the stat data it recorded in a scratch index, so a move
//! killed half-way is finished by doing it again with the same trees.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;

use crate::error::{Error, Result, ResultExt};
use crate::git::diff::FileChange;
use crate::git::index::Index;
use crate::git::ObjectId;

fn gix_err(context: impl std::fmt::Display, e: impl std::fmt::Display) -> Error {
    Error::internal(format!("{context}: {e:#}"))
}

/// Why a path stops a move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Obstacle {
    /// A checked-out submodule's files are where a file is to go.
    Submodule,
    /// An untracked file is where a new file is to go.
    Untracked,
    /// The file holds neither its old nor its new content.
    LocalChanges,
}

/// A worktree opened to move its files.
pub struct Worktree {
    repo: gix::Repository,
    git_dir: PathBuf,
    work_dir: PathBuf,
}

/// What is in the worktree's index now, by path.
struct OldEntry {
    id: ObjectId,
    stat: gix::index::entry::Stat,
    skip_worktree: bool,
}

fn old_entries(index: &gix::index::File) -> HashMap<BString, OldEntry> {
    index
        .entries()
        .iter()
        .filter(|e| e.stage_raw() == 0)
        .map(|e| {
            let skip_worktree = e.flags.contains(gix::index::entry::Flags::SKIP_WORKTREE);
            (e.path(index).to_owned(), OldEntry { id: e.id, stat: e.stat, skip_worktree })
        })
        .collect()
}

/// A planned move from one tree to another: what differs and what the index holds now.
pub struct Move {
    new_tree: ObjectId,
    changes: Vec<FileChange>,
    before: HashMap<BString, OldEntry>,
    /// Stat data of the files an interrupted run of this move already wrote.
    written_before: HashMap<BString, gix::index::entry::Stat>,
}

/// The index after [`Worktree::apply`], to be put in place; `new_sparse_paths` when paths that a
/// sparse checkout may exclude were added.
pub struct Moved {
    pub index: Index,
    new_sparse_paths: bool,
}

impl Worktree {
    /// Open the worktree (main or linked) at `work_dir`.
    pub fn open(work_dir: &Path) -> Result<Worktree> {
        let repo = gix::open(work_dir)
            .map_err(|e| gix_err(format_args!("cannot open the worktree {}", work_dir.display()), e))?;
        let git_dir = crate::git::absolute(repo.git_dir());
        let work_dir = repo.workdir().map(crate::git::absolute).unwrap_or_else(|| work_dir.to_owned());
        Ok(Worktree { repo, git_dir, work_dir })
    }

    /// Its git dir (`.git`, or the admin dir of a linked worktree), absolute.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// Its folder, absolute.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The tree of `commit`.
    pub fn tree_of(&self, commit: ObjectId) -> Result<ObjectId> {
        crate::git::tree_of(&self.repo, commit)
    }

    /// Its index as it is on disk; `context` names it in the error.
    pub fn index(&self, context: &str) -> Result<Index> {
        Ok(Index(self.repo.open_index().internal(context)?))
    }

    /// Does `index` hold exactly the files of `tree` (path, mode, id; nothing staged, no
    /// conflict)? Stat data and flags such as skip-worktree do not count.
    pub fn index_is_tree(&self, index: &Index, tree: ObjectId) -> Result<bool> {
        crate::git::index::index_is_tree(&self.repo, &index.0, tree)
    }

    /// Plan moving the files of `index` (at tree `from`) to tree `to`.
    pub fn plan_move(&self, index: &Index, from: ObjectId, to: ObjectId) -> Result<Move> {
        let changes = crate::git::diff::changes(&self.repo, from, to)?;
        Ok(Move { new_tree: to, changes, before: old_entries(&index.0), written_before: HashMap::new() })
    }

    fn scratch(&self) -> PathBuf {
        self.git_dir.join("index.boulder-checkout")
    }

    /// Recognise the files an interrupted run of `mv` already wrote (the branch moved, the index
    /// not yet), by the stat data it recorded; `fresh` when no run can have started (the record
    /// is then a leftover and is removed).
    pub fn recall_interrupted(&self, mv: &mut Move, fresh: bool) {
        let scratch = self.scratch();
        if fresh {
            let _ = std::fs::remove_file(&scratch);
        }
        mv.written_before = gix::index::File::at(&scratch, self.repo.object_hash(), false, Default::default())
            .map(|f| f.entries().iter().map(|e| (e.path(&f).to_owned(), e.stat)).collect())
            .unwrap_or_default();
    }

    /// Paths that stop `mv`: a changed path holding neither its old nor its new content (local
    /// modifications, an untracked file in the way), or a checked-out submodule a file is to
    /// replace. Paths outside a sparse checkout's cone, and submodules, are not looked at.
    pub fn obstacles(&self, mv: &Move) -> Vec<(String, Obstacle)> {
        let work_dir = &self.work_dir;
        let ids: HashMap<BString, (ObjectId, gix::index::entry::Stat)> =
            mv.before.iter().map(|(p, e)| (p.clone(), (e.id, e.stat))).collect();
        let mut found = Vec::new();
        for c in &mv.changes {
            if is_gitlink(c) {
                continue;
            }
            // A skip-worktree entry is not written; its file, when there, is checked as git
            // checks it (`verify_uptodate` ignores the bit): one holding something else than
            // either side would be hidden behind the new index entry — git refuses that.
            if mv.before.get(&c.path).is_some_and(|e| e.skip_worktree) {
                let full = in_worktree(work_dir, c.path.as_bstr());
                if std::fs::symlink_metadata(&full).is_ok()
                    && !holds(&self.repo, work_dir, &c.path, c.old, &ids)
                    && !holds(&self.repo, work_dir, &c.path, c.new, &ids)
                {
                    found.push((c.path.to_str_lossy().into_owned(), Obstacle::LocalChanges));
                }
                continue;
            }
            if submodule_in_the_way(work_dir, c) {
                found.push((c.path.to_str_lossy().into_owned(), Obstacle::Submodule));
                continue;
            }
            let ours = mv.written_before.get(&c.path).is_some_and(|stat| {
                let full = in_worktree(work_dir, c.path.as_bstr());
                gix::index::fs::Metadata::from_path_no_follow(&full)
                    .ok()
                    .and_then(|m| gix::index::entry::Stat::from_fs(&m).ok())
                    .is_some_and(|now| now.matches(stat, Default::default()))
            });
            if ours
                || holds(&self.repo, work_dir, &c.path, c.old, &ids)
                || holds(&self.repo, work_dir, &c.path, c.new, &ids)
            {
                continue;
            }
            let why = if c.old.is_none() { Obstacle::Untracked } else { Obstacle::LocalChanges };
            found.push((c.path.to_str_lossy().into_owned(), why));
        }
        found
    }

    /// Write the files of `mv`: deletions first, then the changed files through git's checkout
    /// (skip-worktree entries stay unwritten, submodules are not entered). Returns the new index,
    /// which the caller puts in place (through the index lock it holds), then calls [`Self::finish`].
    pub fn apply(&self, mv: &Move) -> Result<Moved> {
        let (work_dir, git_dir) = (&self.work_dir, &self.git_dir);
        let (changes, before) = (&mv.changes, &mv.before);
        let scratch = self.scratch();
        // 1. Deletions (and paths whose kind changes), then the folders they leave empty.
        for c in changes.iter().filter(|c| c.old.is_some()) {
            let kind_changes = c.new.is_some_and(|(_, k)| Some(k) != c.old.map(|(_, k)| k));
            if (c.new.is_some() && !kind_changes) || before.get(&c.path).is_some_and(|e| e.skip_worktree) {
                continue;
            }
            let full = in_worktree(work_dir, c.path.as_bstr());
            match std::fs::symlink_metadata(&full) {
                Ok(m) if m.is_dir() && !m.file_type().is_symlink() => {
                    // A submodule's folder: removed only when empty, as git does without --recurse-submodules.
                    let _ = std::fs::remove_dir(&full);
                }
                Ok(_) => std::fs::remove_file(&full)
                    .map_err(|e| Error::internal(format!("cannot delete {}: {e}", full.display())))?,
                Err(_) => {}
            }
            if let Some(parent) = full.parent() {
                remove_empty_dirs(parent.to_owned(), work_dir);
            }
        }

        // 2. The new index: the new tree, keeping skip-worktree flags and unchanged files' stat data.
        let mut next = self.repo.index_from_tree(&mv.new_tree).internal("cannot build the index of the new tree")?;
        let changed: HashSet<&BStr> = changes.iter().map(|c| c.path.as_bstr()).collect();
        let paths: Vec<BString> = next.entries().iter().map(|e| e.path(&next).to_owned()).collect();
        let mut to_write: Vec<BString> = Vec::new();
        let mut added_sparse_candidates = false;
        for (i, path) in paths.iter().enumerate() {
            let e = &mut next.entries_mut()[i];
            let prev = before.get(path);
            if prev.is_some_and(|p| p.skip_worktree) {
                // Extended flags are only written when the entry says it has them.
                e.flags.insert(gix::index::entry::Flags::SKIP_WORKTREE | gix::index::entry::Flags::EXTENDED);
                continue;
            }
            if changed.contains(path.as_bstr()) {
                if e.mode == gix::index::entry::Mode::COMMIT {
                    let full = in_worktree(work_dir, path.as_bstr());
                    let _ = std::fs::create_dir_all(full);
                } else {
                    to_write.push(path.clone());
                    added_sparse_candidates |= prev.is_none();
                }
            } else if let Some(p) = prev.filter(|p| p.id == e.id) {
                e.stat = p.stat;
            }
        }

        // 3. The files, written by git through the checkout filters (.gitattributes files first, as
        //    git does, so the others are converted by the new rules).
        if !to_write.is_empty() {
            {
                let mut f = std::io::BufWriter::new(
                    std::fs::File::create(&scratch)
                        .map_err(|e| Error::internal(format!("cannot write {}: {e}", scratch.display())))?,
                );
                next.write_to(&mut f, Default::default()).map_err(|e| gix_err("cannot write the index", e))?;
                std::io::Write::flush(&mut f)?;
            }
            let (attrs, rest): (Vec<&BString>, Vec<&BString>) =
                to_write.iter().partition(|p| p.ends_with(b".gitattributes"));
            for batch in [attrs, rest] {
                if !batch.is_empty() {
                    let list: Vec<&[u8]> = batch.iter().map(|p| p.as_slice()).collect();
                    crate::git::cli::checkout_index(git_dir, work_dir, &scratch, &list)?;
                }
            }
            let written = gix::index::File::at(&scratch, self.repo.object_hash(), false, Default::default())
                .map_err(|e| gix_err("cannot read back the checked-out files' index", e))?;
            let stats: HashMap<&BStr, gix::index::entry::Stat> =
                written.entries().iter().map(|e| (e.path(&written), e.stat)).collect();
            for (i, path) in paths.iter().enumerate() {
                if let Some(stat) = stats.get(path.as_bstr()) {
                    if changed.contains(path.as_bstr()) {
                        next.entries_mut()[i].stat = *stat;
                    }
                }
            }
        }
        Ok(Moved { index: Index(next), new_sparse_paths: added_sparse_candidates })
    }

    /// After the new index is in place: drop the record of written files, and let git apply the
    /// sparse patterns to new paths of a sparse checkout.
    pub fn finish(&self, mv: &Move, moved: &Moved) -> Result<()> {
        let _ = std::fs::remove_file(self.scratch());
        let sparse = mv.before.values().any(|e| e.skip_worktree) || sparse_checkout(&self.repo);
        if moved.new_sparse_paths && sparse {
            crate::git::cli::sparse_reapply(&self.work_dir)?;
        }
        Ok(())
    }
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

/// Both sides of the change are submodules (or absent): the merge moves a gitlink and never
/// enters the submodule, so there is nothing in the worktree to check.
fn is_gitlink(c: &FileChange) -> bool {
    let sub = |side: Option<(ObjectId, EntryKind)>| side.is_none_or(|(_, k)| k == EntryKind::Commit);
    sub(c.old) && sub(c.new) && (c.old.is_some() || c.new.is_some())
}

/// A submodule's folder that a file is to replace: refused while it holds anything (a checked-out
/// submodule), as git refuses to lose it.
fn submodule_in_the_way(work_dir: &Path, c: &FileChange) -> bool {
    let was_sub = c.old.is_some_and(|(_, k)| k == EntryKind::Commit);
    let becomes_file = c.new.is_some_and(|(_, k)| k != EntryKind::Commit);
    was_sub
        && becomes_file
        && std::fs::read_dir(in_worktree(work_dir, c.path.as_bstr())).is_ok_and(|mut d| d.next().is_some())
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

/// The file of worktree-relative `rel` (git paths are bytes; on Unix every one is a path).
fn in_worktree(work_dir: &Path, rel: &BStr) -> PathBuf {
    match gix::path::from_bstr(rel) {
        Ok(p) => work_dir.join(p),
        Err(_) => work_dir.join(rel.to_str_lossy().as_ref()),
    }
}

/// `core.sparseCheckout` (set in the worktree's own config by `git sparse-checkout`, which gix may
/// not read; skip-worktree entries in the index tell the same).
fn sparse_checkout(wt: &gix::Repository) -> bool {
    wt.config_snapshot().boolean("core.sparseCheckout").unwrap_or(false)
}
