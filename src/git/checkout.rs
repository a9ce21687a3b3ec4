//! Moving a checked-out worktree's files from one tree to another, the way `git merge --ff-only`
//! or `git reset --keep` updates them: only the paths that differ between the two trees are
//! touched, a path holding local work is found before anything is written, files are written by
//! git itself (checkout filters, LFS, `eol`, `ident`), and the new index keeps the stat data of
//! unchanged entries so git stays fast. When to move, and what to refuse, is decided by
//! `worktree::checkout`, above this layer.
//!
//! A path counts as safe when it holds either the old or the new content. Files are written whole:
//! git writes them into a staging folder in the git dir, and each is renamed into place, so a
//! killed move leaves every path with its old or its new file, never half of one. Before the
//! worktree is touched, a record names each file to be deleted and each staged file (inode, size,
//! modification time, which a rename keeps), so a move killed half-way is recognised as its own
//! work — whatever filters did to the files — and finished by doing it again with the same trees.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;

use crate::error::{Error, Result, ResultExt};
use crate::git::diff::FileChange;
use crate::git::index::Index;
use crate::git::ObjectId;

fn gix_err(context: impl std::fmt::Display, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::internal(format!("{context}: {e:#}")).with_source(e)
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
    /// What an interrupted run of this move already did, by path.
    done_before: HashMap<BString, Done>,
}

/// What a move did to one path, as its record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Done {
    Deleted,
    /// A file put in place by renaming the staged one: which file that is. `ino` is 0 for a file
    /// copied across file systems (the copy is another inode; it keeps the staged file's size and
    /// modification time).
    Written {
        ino: u64,
        size: u64,
        mtime: (i64, i64),
    },
}

impl Done {
    fn of(path: &Path) -> Option<Done> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(Done::Written { ino: m.ino(), size: m.size(), mtime: (m.mtime(), m.mtime_nsec()) })
    }

    /// Whether the path `full` is as this record left it.
    fn still(&self, full: &Path) -> bool {
        match (self, Done::of(full)) {
            (Done::Deleted, _) => matches!(
                std::fs::symlink_metadata(full),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory)
            ),
            (Done::Written { ino: 0, size, mtime }, Some(Done::Written { size: s, mtime: m, .. })) => {
                // The copy's time, as the worktree's file system keeps it: to the nanosecond, or
                // cut down to what it stores (100 ns on NTFS and CIFS, 2 s on FAT). A file written
                // since has a later time.
                let nanos = |t: (i64, i64)| i128::from(t.0) * 1_000_000_000 + i128::from(t.1);
                let (want, now) = (nanos(*mtime), nanos(m));
                *size == s && now <= want && want - now < 2_000_000_000
            }
            (written, now) => now.as_ref() == Some(written),
        }
    }
}

/// The record of a move: `D<path>\0` for a deletion, `W<ino> <size> <secs> <nanos> <path>\0` for
/// a written file (paths are bytes without NUL).
fn encode(record: &[(BString, Done)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (path, done) in record {
        match done {
            Done::Deleted => out.push(b'D'),
            Done::Written { ino, size, mtime } => out.extend(format!("W{ino} {size} {} {} ", mtime.0, mtime.1).bytes()),
        }
        out.extend_from_slice(path);
        out.push(0);
    }
    out
}

fn decode(bytes: &[u8]) -> HashMap<BString, Done> {
    let mut out = HashMap::new();
    for item in bytes.split(|b| *b == 0).filter(|i| !i.is_empty()) {
        match item.split_first() {
            Some((b'D', path)) => {
                out.insert(BString::from(path), Done::Deleted);
            }
            Some((b'W', rest)) => {
                let mut parts = rest.splitn(5, |b| *b == b' ');
                let mut word = || parts.next().and_then(|p| std::str::from_utf8(p).ok());
                let (ino, size, secs, nanos) = (word(), word(), word(), word());
                let parsed = (
                    ino.and_then(|v| v.parse().ok()),
                    size.and_then(|v| v.parse().ok()),
                    secs.and_then(|v| v.parse().ok()),
                    nanos.and_then(|v| v.parse().ok()),
                );
                if let ((Some(ino), Some(size), Some(secs), Some(nanos)), Some(path)) = (parsed, parts.next()) {
                    out.insert(BString::from(path), Done::Written { ino, size, mtime: (secs, nanos) });
                }
            }
            _ => {}
        }
    }
    out
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
        Ok(Move { new_tree: to, changes, before: old_entries(&index.0), done_before: HashMap::new() })
    }

    fn scratch(&self) -> PathBuf {
        self.git_dir.join("index.boulder-checkout")
    }

    fn stage(&self) -> PathBuf {
        self.git_dir.join("boulder-checkout.stage")
    }

    fn record(&self) -> PathBuf {
        self.git_dir.join("boulder-checkout.record")
    }

    /// Remove what a run of a move leaves until its index is in place (record, staging folder,
    /// scratch index, a copy killed half-way across file systems): once the index is there, they
    /// record nothing that is still to do.
    pub fn forget_interrupted(&self) {
        self.drop_record();
        let _ = std::fs::remove_file(self.scratch());
        let _ = std::fs::remove_dir_all(self.stage());
    }

    /// Remove the record, and beside each file it copied across file systems the partial copy a
    /// kill may have left there.
    fn drop_record(&self) {
        if let Ok(bytes) = std::fs::read(self.record()) {
            for (path, done) in decode(&bytes) {
                if matches!(done, Done::Written { ino: 0, .. }) {
                    let _ = std::fs::remove_file(copy_beside(&in_worktree(&self.work_dir, path.as_bstr())));
                }
            }
        }
        let _ = std::fs::remove_file(self.record());
    }

    /// Recognise what an interrupted run of `mv` already did (the branch moved, the index not
    /// yet), by its record; `fresh` when no run can have started (the record is then a leftover
    /// and is removed).
    pub fn recall_interrupted(&self, mv: &mut Move, fresh: bool) {
        if fresh {
            self.drop_record();
        }
        mv.done_before = std::fs::read(self.record()).map(|b| decode(&b)).unwrap_or_default();
    }

    /// Paths that stop `mv`: a changed path holding neither its old nor its new content (local
    /// modifications, an untracked file in the way), or a checked-out submodule a file is to
    /// replace. Paths outside a sparse checkout's cone, and submodules, are not looked at.
    pub fn obstacles(&self, mv: &Move) -> Vec<(String, Obstacle)> {
        let work_dir = &self.work_dir;
        let ids: HashMap<BString, (ObjectId, gix::index::entry::Stat)> =
            mv.before.iter().map(|(p, e)| (p.clone(), (e.id, e.stat))).collect();
        // Tracked paths this move takes away (each checked below for local changes): a file
        // replaced by a folder, or a folder of them replaced by a file, is in nobody's way.
        let removed: HashSet<&BStr> =
            mv.changes.iter().filter(|c| c.old.is_some() && c.new.is_none()).map(|c| c.path.as_bstr()).collect();
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
            if c.new.is_some() {
                // What git's checkout would remove to make room: a file or symlink where a folder
                // of the new path is to be, or a folder where the new file is to be. Only what
                // this move takes away may go; anything else is the user's (git refuses too).
                if let Some(blocker) = in_the_way(work_dir, c, &removed) {
                    found.push((blocker, Obstacle::Untracked));
                    continue;
                }
            }
            let ours = mv.done_before.get(&c.path).is_some_and(|d| d.still(&in_worktree(work_dir, c.path.as_bstr())));
            if ours
                || holds(&self.repo, work_dir, &c.path, c.old, &ids)
                || holds(&self.repo, work_dir, &c.path, c.new, &ids)
                || c.old.is_none() && is_real_dir(&in_worktree(work_dir, c.path.as_bstr()))
            {
                continue;
            }
            let why = if c.old.is_none() { Obstacle::Untracked } else { Obstacle::LocalChanges };
            found.push((c.path.to_str_lossy().into_owned(), why));
        }
        found
    }

    /// Write the files of `mv`: deletions first, then the changed files through git's checkout
    /// (skip-worktree entries stay unwritten, submodules are not entered), each staged whole and
    /// renamed into place, all of it recorded before the worktree is touched. Returns the new
    /// index, which the caller puts in place (through the index lock it holds), then calls
    /// [`Self::finish`].
    pub fn apply(&self, mv: &Move) -> Result<Moved> {
        let (work_dir, git_dir) = (&self.work_dir, &self.git_dir);
        // 1. The new index, and what of it is written or removed.
        let NewIndex { mut next, paths, to_write, submodules, new_sparse_paths } = self.new_index(mv)?;
        let deleted = deletions(mv);

        // 2. The files, written by git through the checkout filters into the staging folder
        //    (.gitattributes files first, as git does, so the others are converted by the new rules).
        let scratch = self.scratch();
        if !to_write.is_empty() {
            let mut f = std::io::BufWriter::new(
                std::fs::File::create(&scratch)
                    .map_err(|e| Error::internal(format!("cannot write {}: {e}", scratch.display())).with_source(e))?,
            );
            next.write_to(&mut f, Default::default()).map_err(|e| gix_err("cannot write the index", e))?;
            std::io::Write::flush(&mut f)?;
        }
        let stage = self.stage();
        let _ = std::fs::remove_dir_all(&stage);
        let (attrs, rest): (Vec<&BString>, Vec<&BString>) =
            to_write.iter().map(|&i| &paths[i]).partition(|p| p.ends_with(b".gitattributes"));
        let mut record: Vec<(BString, Done)> = deleted.iter().map(|c| (c.path.clone(), Done::Deleted)).collect();
        for (round, batch) in [attrs, rest].into_iter().enumerate() {
            if !batch.is_empty() {
                std::fs::create_dir_all(&stage)
                    .map_err(|e| Error::internal(format!("cannot create {}: {e}", stage.display())).with_source(e))?;
                let list: Vec<&[u8]> = batch.iter().map(|p| p.as_slice()).collect();
                crate::git::cli::checkout_index(git_dir, work_dir, &scratch, &stage, &list)?;
                // A worktree on another file system than its git dir gets copies (see `put_in_place`).
                let across = device(&stage) != device(work_dir);
                for p in &batch {
                    let staged = in_worktree(&stage, p.as_bstr());
                    let mut done = Done::of(&staged).ok_or_else(|| {
                        Error::internal(format!("git checkout-index did not write {}", staged.display()))
                    })?;
                    if let (true, Done::Written { ino, .. }) = (across, &mut done) {
                        *ino = 0;
                    }
                    record.push(((*p).clone(), done));
                }
            }
            // 3. The record, before the worktree changes; then the deletions and the files.
            crate::fsutil::write_atomic(&self.record(), &encode(&record))?;
            crate::failpoint::hit("checkout-recorded");
            if round == 0 {
                delete_files(work_dir, &deleted)?;
                for &i in &submodules {
                    let _ = std::fs::create_dir_all(in_worktree(work_dir, paths[i].as_bstr()));
                }
            }
            for (i, p) in batch.iter().enumerate() {
                put_in_place(&in_worktree(&stage, p.as_bstr()), &in_worktree(work_dir, p.as_bstr()))?;
                if i == 0 {
                    crate::failpoint::hit("checkout-first-file");
                }
            }
        }
        let _ = std::fs::remove_dir_all(&stage);

        // 4. The written files' stat data, as they are now in place.
        for &i in &to_write {
            let full = in_worktree(work_dir, paths[i].as_bstr());
            if let Some(stat) = gix::index::fs::Metadata::from_path_no_follow(&full)
                .ok()
                .and_then(|m| gix::index::entry::Stat::from_fs(&m).ok())
            {
                next.entries_mut()[i].stat = stat;
            }
        }
        Ok(Moved { index: Index(next), new_sparse_paths })
    }

    /// The index of the new tree, keeping skip-worktree flags and unchanged files' stat data, with
    /// the entries whose files [`Self::apply`] writes and the submodules whose folders it makes.
    fn new_index(&self, mv: &Move) -> Result<NewIndex> {
        let (changes, before) = (&mv.changes, &mv.before);
        let mut next = self.repo.index_from_tree(&mv.new_tree).internal("cannot build the index of the new tree")?;
        let changed: HashSet<&BStr> = changes.iter().map(|c| c.path.as_bstr()).collect();
        let paths: Vec<BString> = next.entries().iter().map(|e| e.path(&next).to_owned()).collect();
        let (mut to_write, mut submodules, mut new_sparse_paths) = (Vec::new(), Vec::new(), false);
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
                    submodules.push(i);
                } else {
                    to_write.push(i);
                    new_sparse_paths |= prev.is_none();
                }
            } else if let Some(p) = prev.filter(|p| p.id == e.id) {
                e.stat = p.stat;
            }
        }
        Ok(NewIndex { next, paths, to_write, submodules, new_sparse_paths })
    }

    /// After the new index is in place: drop the record of written files, and let git apply the
    /// sparse patterns to new paths of a sparse checkout.
    pub fn finish(&self, mv: &Move, moved: &Moved) -> Result<()> {
        self.forget_interrupted();
        let sparse = mv.before.values().any(|e| e.skip_worktree) || sparse_checkout(&self.repo);
        if moved.new_sparse_paths && sparse {
            crate::git::cli::sparse_reapply(&self.work_dir)?;
        }
        Ok(())
    }
}

/// What [`Worktree::apply`] builds first: the new index, its paths, the entries (by index) whose
/// files are written, the submodules whose folder is made once the deletions have made room, and
/// whether a path is new (for the sparse patterns).
struct NewIndex {
    next: gix::index::File,
    paths: Vec<BString>,
    to_write: Vec<usize>,
    submodules: Vec<usize>,
    new_sparse_paths: bool,
}

/// The files `mv` removes: deletions, and paths whose kind changes (skip-worktree entries have
/// no file to remove).
fn deletions(mv: &Move) -> Vec<&FileChange> {
    mv.changes
        .iter()
        .filter(|c| c.old.is_some())
        .filter(|c| {
            let kind_changes = c.new.is_some_and(|(_, k)| Some(k) != c.old.map(|(_, k)| k));
            (c.new.is_none() || kind_changes) && !mv.before.get(&c.path).is_some_and(|e| e.skip_worktree)
        })
        .collect()
}

/// Remove the files of `deleted` from the worktree `work_dir`, and the folders they leave empty.
fn delete_files(work_dir: &Path, deleted: &[&FileChange]) -> Result<()> {
    for c in deleted {
        let full = in_worktree(work_dir, c.path.as_bstr());
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() && !m.file_type().is_symlink() => {
                // A submodule's folder: removed only when empty, as git does without --recurse-submodules.
                let _ = std::fs::remove_dir(&full);
            }
            Ok(_) => std::fs::remove_file(&full)
                .map_err(|e| Error::internal(format!("cannot delete {}: {e}", full.display())).with_source(e))?,
            Err(_) => {}
        }
        if let Some(parent) = full.parent() {
            remove_empty_dirs(parent.to_owned(), work_dir);
        }
    }
    Ok(())
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
        // Under a file or symlink, the path is absent too (that one is checked by `in_the_way`).
        return matches!(&meta, Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory));
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

/// A folder, not a symlink to one.
fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// What stands where the new side of `c` is to be written and would have to be removed first,
/// when it is not all in `removed` (the tracked paths the move takes away): a file or symlink
/// where one of the path's folders is to be, or a folder (holding anything else) where the file
/// is to be. Returns the first such path, relative.
fn in_the_way(work_dir: &Path, c: &FileChange, removed: &HashSet<&BStr>) -> Option<String> {
    let path = c.path.as_bstr();
    // The folders leading to it: each must be a folder, absent, or a tracked file going away.
    for i in path.find_iter("/") {
        let folder = &path[..i];
        match std::fs::symlink_metadata(in_worktree(work_dir, folder)) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) if removed.contains(folder) => break,
            Ok(_) => return Some(folder.to_str_lossy().into_owned()),
            Err(_) => break,
        }
    }
    // A folder where a file (or symlink) is to be: it may hold only tracked files going away.
    if c.new.is_some_and(|(_, k)| k != EntryKind::Commit) {
        let full = in_worktree(work_dir, path);
        if is_real_dir(&full) {
            return first_kept(&full, path.to_owned(), removed);
        }
    }
    None
}

/// The first file under the folder `dir` (worktree-relative `rel`) that is not in `removed`.
fn first_kept(dir: &Path, rel: BString, removed: &HashSet<&BStr>) -> Option<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Some(rel.to_str_lossy().into_owned()) };
    for e in entries {
        let Ok(e) = e else { return Some(rel.to_str_lossy().into_owned()) };
        let mut child = rel.clone();
        child.push(b'/');
        let name = e.file_name();
        match gix::path::os_str_into_bstr(&name) {
            Ok(n) => child.extend_from_slice(n),
            Err(_) => return Some(child.to_str_lossy().into_owned()),
        }
        if is_real_dir(&e.path()) {
            if let Some(kept) = first_kept(&e.path(), child, removed) {
                return Some(kept);
            }
        } else if !removed.contains(child.as_bstr()) {
            return Some(child.to_str_lossy().into_owned());
        }
    }
    None
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

/// The device of the file system `path` is on.
fn device(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.dev())
}

/// Where the copy of a file put in place across file systems is made before it is renamed.
fn copy_beside(to: &Path) -> PathBuf {
    let name = to.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    to.with_file_name(format!(".{name}.boulder-copy"))
}

/// Rename the staged file `from` to `to`, making its folders, or taking the place of a folder
/// the move emptied. Across file systems (a worktree on another disk than its git dir), a copy
/// beside `to`, given the staged file's modification time as the record expects, is renamed
/// instead, so the file still appears whole.
fn put_in_place(from: &Path, to: &Path) -> Result<()> {
    let fail = |e: std::io::Error| Error::internal(format!("cannot put {} in place: {e}", to.display())).with_source(e);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    if std::fs::symlink_metadata(to).is_ok_and(|m| m.is_dir()) {
        // Only empty folders are left where a file goes (see `in_the_way`).
        remove_empty_tree(to);
    }
    match std::fs::rename(from, to) {
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
            let tmp = copy_beside(to);
            let _ = std::fs::remove_file(&tmp);
            let meta = std::fs::symlink_metadata(from).map_err(fail)?;
            if meta.file_type().is_symlink() {
                std::os::unix::fs::symlink(std::fs::read_link(from).map_err(fail)?, &tmp).map_err(fail)?;
            } else {
                std::fs::copy(from, &tmp).map_err(fail)?;
                let copy = std::fs::File::options().write(true).open(&tmp).map_err(fail)?;
                copy.set_modified(meta.modified().map_err(fail)?).map_err(fail)?;
            }
            crate::failpoint::hit("checkout-copied");
            std::fs::rename(&tmp, to).map_err(fail)
        }
        other => other.map_err(fail),
    }
}

/// Remove the folder `dir` when it holds only (nested) empty folders.
fn remove_empty_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    /// A copy made across file systems is known by its size and time, as the worktree's file
    /// system keeps the time (cut to whole seconds here); a file written since is not.
    #[test]
    fn a_copy_is_known_by_size_and_time_at_the_precision_its_file_system_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "copied\n").unwrap();
        let staged = (1_700_000_000, 123_456_789);
        let done = Done::Written { ino: 0, size: 7, mtime: staged };
        let set = |secs: u64, nanos: u32| {
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(UNIX_EPOCH + Duration::new(secs, nanos)).unwrap();
        };
        set(1_700_000_000, 123_456_789);
        assert!(done.still(&path), "to the nanosecond");
        set(1_700_000_000, 0);
        assert!(done.still(&path), "cut to the second");
        set(1_700_000_000, 123_456_800);
        assert!(!done.still(&path), "later: written since");
        set(1_699_999_997, 0);
        assert!(!done.still(&path), "far earlier: another file");
        std::fs::write(&path, "copied!\n").unwrap();
        set(1_700_000_000, 123_456_789);
        assert!(!done.still(&path), "another size");
        // A file renamed into place is known by its inode too.
        let renamed = Done::of(&path).unwrap();
        assert!(renamed.still(&path));
    }
}
