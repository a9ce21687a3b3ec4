//! Moving a checked-out worktree from one commit's tree to another's, with gix, the way
//! `git merge --ff-only` or `git reset --keep` updates files: only the paths that differ between
//! the two trees are touched, a path holding local work is never overwritten, and the index is
//! rewritten to the new tree (keeping the stat data of unchanged entries so git stays fast).
//!
//! [`apply`] is idempotent: a run killed half-way (some files written, the index not yet) is
//! finished by running it again with the same trees, because a path counts as safe when it holds
//! either the old or the new content.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::bstr::{BStr, BString, ByteSlice};
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
    let index = wt.open_index().internal("cannot read the index")?;
    let old = old_entries(&index);
    let ids: HashMap<BString, (ObjectId, gix::index::entry::Stat)> =
        old.iter().map(|(p, e)| (p.clone(), (e.id, e.stat))).collect();
    let mut out = Vec::new();
    for c in changes {
        // Outside a sparse checkout's cone, and submodules, are not the worktree's files to check.
        let sparse = old.get(&c.path).is_some_and(|e| e.skip_worktree);
        if sparse || is_gitlink(c) {
            continue;
        }
        if submodule_in_the_way(work_dir, c) {
            out.push(Blocker { path: c.path.to_str_lossy().into_owned(), why: "a submodule's files are in the way" });
            continue;
        }
        if holds(wt, work_dir, &c.path, c.old, &ids) || holds(wt, work_dir, &c.path, c.new, &ids) {
            continue;
        }
        let why = if c.old.is_none() { "an untracked file is in the way" } else { "it has local changes" };
        out.push(Blocker { path: c.path.to_str_lossy().into_owned(), why });
    }
    Ok(out)
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

/// A held `index.lock` of one worktree. git takes this lock before it writes the index and keeps
/// it through `git commit`'s ref update, so while it is held no git command can stage or commit in
/// that worktree: moving its branch and its files is one step as far as git is concerned.
///
/// Released by renaming it over the index (the way git commits an index) or, when dropped
/// unused, by deleting it. Its holder is recorded beside the other per-machine files, so that a
/// lock left by a killed git-boulder (and only such a lock) is recognised and taken over by the
/// rerun.
pub struct IndexLock {
    path: PathBuf,
    record: PathBuf,
    file: Option<std::fs::File>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct LockRecord {
    lock: String,
    pid: u32,
    host: String,
    dev: u64,
    ino: u64,
    /// The lock file's change time (seconds, nanoseconds): an inode number can be reused by a
    /// lock git creates after ours was removed; its change time then differs.
    #[serde(default)]
    ctime: (i64, i64),
}

/// Device, inode and change time of a file: which file it is.
fn file_id(path: &Path) -> Option<(u64, u64, (i64, i64))> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino(), (m.ctime(), m.ctime_nsec())))
}

impl IndexLock {
    /// Take `index.lock` of the worktree whose git dir is `git_dir`; refuse, as git does, while
    /// another process holds it.
    pub fn acquire(repo: &crate::git::Repo, git_dir: &Path, work_dir: &Path) -> Result<IndexLock> {
        let path = git_dir.join("index.lock");
        let key = git_dir.strip_prefix(&repo.common_dir).ok().map(|r| r.to_string_lossy().replace('/', "-"));
        let key = key.filter(|k| !k.is_empty()).unwrap_or_else(|| "main".into());
        let record = repo.boulder_dir().join("index-locks").join(format!("{key}.json"));
        for attempt in 0..2 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    let (dev, ino, ctime) = file_id(&path).unwrap_or_default();
                    let rec = LockRecord {
                        lock: path.display().to_string(),
                        pid: std::process::id(),
                        host: crate::git::identity::hostname(),
                        dev,
                        ino,
                        ctime,
                    };
                    let json = serde_json::to_vec(&rec).map_err(|e| Error::internal(format!("lock record: {e}")))?;
                    let lock = IndexLock { path, record: record.clone(), file: Some(file) };
                    crate::fsutil::write_atomic(&record, &json)?;
                    return Ok(lock);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if attempt == 0 && Self::left_by_a_killed_run(&path, &record) {
                        let _ = std::fs::remove_file(&path);
                        let _ = std::fs::remove_file(&record);
                        continue;
                    }
                    return Err(Error::refused(format!(
                        "cannot update the worktree {}: {} exists, so a git command is running there",
                        work_dir.display(),
                        path.display()
                    ))
                    .hint(format!(
                        "wait for it to finish and rerun; if no git process is running in {}, remove {} (as git itself advises)",
                        work_dir.display(),
                        path.display()
                    )));
                }
                Err(e) => return Err(Error::internal(format!("cannot create {}: {e}", path.display()))),
            }
        }
        unreachable!("the second attempt returns")
    }

    /// Is the lock at `path` the one a git-boulder process that has since died took?
    fn left_by_a_killed_run(path: &Path, record: &Path) -> bool {
        let Some(rec) = std::fs::read(record).ok().and_then(|b| serde_json::from_slice::<LockRecord>(&b).ok()) else {
            return false;
        };
        let dead = rec.host == crate::git::identity::hostname()
            && Path::new("/proc/self").exists()
            && !Path::new("/proc").join(rec.pid.to_string()).exists();
        dead && rec.lock == path.display().to_string() && file_id(path) == Some((rec.dev, rec.ino, rec.ctime))
    }

    /// Write `index` through the lock and put it in place of the worktree's index.
    pub fn commit(mut self, index: &gix::index::File) -> Result<()> {
        let file = self.file.take().expect("a held lock has its file");
        let mut out = std::io::BufWriter::new(file);
        index.write_to(&mut out, Default::default()).map_err(|e| gix_err("cannot write the index", e))?;
        let file = out.into_inner().map_err(|e| Error::internal(format!("cannot write the index: {e}")))?;
        drop(file);
        let target = self.path.with_file_name("index");
        std::fs::rename(&self.path, &target)
            .map_err(|e| Error::internal(format!("cannot put {} in place: {e}", self.path.display())))?;
        let _ = std::fs::remove_file(&self.record);
        Ok(())
    }
}

impl Drop for IndexLock {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
            let _ = std::fs::remove_file(&self.record);
        }
    }
}

/// Does the index hold exactly the files of `tree` (path, mode, id; nothing staged, no conflict)?
/// Stat data and flags such as skip-worktree do not count.
fn index_is_tree(wt: &gix::Repository, index: &gix::index::File, tree: ObjectId) -> Result<bool> {
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

/// The refusal when `branch` no longer points where a plan expected.
pub fn moved_error(branch: &str, planned: ObjectId, now: Option<ObjectId>, what: &str) -> Error {
    let now = now.map(|n| n.to_hex_with_len(8).to_string()).unwrap_or_else(|| "nowhere (deleted)".into());
    Error::refused(format!(
        "branch {branch} moved from {} to {now} while {what} ran (a commit landed); nothing more was changed",
        planned.to_hex_with_len(8)
    ))
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

/// Move `branch` from commit `old` to commit `new` with a compare-and-swap, and bring the worktree
/// where it is checked out (if any) along, the way `git merge --ff-only` / `git reset --keep`
/// would: only paths that differ are touched, files are written by git itself (checkout filters,
/// LFS, `eol`, `ident`), skip-worktree (sparse) entries stay unwritten, submodules are not
/// entered, and a path holding local work stops everything before the branch moves.
///
/// The worktree's `index.lock` is held from the checks to the new index, so no commit can land
/// there half-way. Refused, changing nothing more, when the branch is neither at `old` nor at
/// `new`, when HEAD left the branch, or when the index is neither `old`'s tree nor `new`'s (work
/// was staged or committed since the plan). Rerunning after a crash finishes the move.
/// `failpoint` is hit between the ref update and the files (test builds of crashes).
pub fn move_branch(
    repo: &crate::git::Repo,
    branch: &str,
    old: ObjectId,
    new: ObjectId,
    reflog: &str,
    what: &str,
    failpoint: &str,
) -> Result<()> {
    let full = format!("refs/heads/{branch}");
    let cas = |now: Option<ObjectId>| -> Result<()> {
        match now {
            Some(n) if n == new => Ok(()),
            Some(n) if n == old => {
                if crate::git::move_ref(repo, &full, old, new, reflog)? {
                    Ok(())
                } else {
                    Err(moved_error(branch, old, repo.ref_id(&full)?, what))
                }
            }
            other => Err(moved_error(branch, old, other, what)),
        }
    };
    let Some(work_dir) = crate::worktree::checked_out(repo, branch)? else {
        cas(repo.ref_id(&full)?)?;
        crate::failpoint::hit(failpoint);
        return Ok(());
    };
    let wt = open(&work_dir)?;
    let git_dir = crate::git::absolute(wt.git_dir());
    let work_dir = wt.workdir().map(crate::git::absolute).unwrap_or(work_dir);
    let lock = IndexLock::acquire(repo, &git_dir, &work_dir)?;

    let head = std::fs::read_to_string(git_dir.join("HEAD")).unwrap_or_default();
    if head.trim().strip_prefix("ref:").map(str::trim) != Some(full.as_str()) {
        return Err(Error::refused(format!(
            "the worktree {} left branch {branch} while {what} ran; nothing more was changed",
            work_dir.display()
        )));
    }
    let now = repo.ref_id(&full)?;
    let (old_tree, new_tree) = (crate::git::tree_of(&wt, old)?, crate::git::tree_of(&wt, new)?);
    let index = wt.open_index().internal("cannot read the worktree's index")?;
    let at_old = index_is_tree(&wt, &index, old_tree)?;
    let at_new = old_tree == new_tree || (!at_old && index_is_tree(&wt, &index, new_tree)?);
    if now == Some(new) && at_new {
        return Ok(()); // finished by an earlier run
    }
    if !at_old || (now != Some(old) && now != Some(new)) {
        if now != Some(old) && now != Some(new) {
            return Err(moved_error(branch, old, now, what));
        }
        return Err(Error::refused(format!(
            "the index of the worktree {} changed (work was staged or committed) while {what} ran; nothing more was changed",
            work_dir.display()
        ))
        .hint(format!("commit or unstage it in {}, then rerun", work_dir.display())));
    }

    let changes = changes(&wt, old_tree, new_tree)?;
    let before = old_entries(&index);
    // Files an interrupted run of this move already wrote (the branch moved, the index not yet)
    // are recognised by the stat data it recorded.
    let scratch = git_dir.join("index.boulder-checkout");
    if now == Some(old) {
        let _ = std::fs::remove_file(&scratch);
    }
    let written_before: HashMap<BString, gix::index::entry::Stat> =
        gix::index::File::at(&scratch, wt.object_hash(), false, Default::default())
            .map(|f| f.entries().iter().map(|e| (e.path(&f).to_owned(), e.stat)).collect())
            .unwrap_or_default();
    let ids: HashMap<BString, (ObjectId, gix::index::entry::Stat)> =
        before.iter().map(|(p, e)| (p.clone(), (e.id, e.stat))).collect();
    let mut found = Vec::new();
    for c in &changes {
        let sparse = before.get(&c.path).is_some_and(|e| e.skip_worktree);
        if sparse || is_gitlink(c) {
            continue;
        }
        if submodule_in_the_way(&work_dir, c) {
            found.push(Blocker { path: c.path.to_str_lossy().into_owned(), why: "a submodule's files are in the way" });
            continue;
        }
        let ours = written_before.get(&c.path).is_some_and(|stat| {
            let full = in_worktree(&work_dir, c.path.as_bstr());
            gix::index::fs::Metadata::from_path_no_follow(&full)
                .ok()
                .and_then(|m| gix::index::entry::Stat::from_fs(&m).ok())
                .is_some_and(|now| now.matches(stat, Default::default()))
        });
        if ours || holds(&wt, &work_dir, &c.path, c.old, &ids) || holds(&wt, &work_dir, &c.path, c.new, &ids) {
            continue;
        }
        let why = if c.old.is_none() { "an untracked file is in the way" } else { "it has local changes" };
        found.push(Blocker { path: c.path.to_str_lossy().into_owned(), why });
    }
    if !found.is_empty() {
        return Err(refusal(&work_dir, &found));
    }

    cas(now)?;
    crate::failpoint::hit(failpoint);

    // 1. Deletions (and paths whose kind changes), then the folders they leave empty.
    for c in changes.iter().filter(|c| c.old.is_some()) {
        let kind_changes = c.new.is_some_and(|(_, k)| Some(k) != c.old.map(|(_, k)| k));
        if (c.new.is_some() && !kind_changes) || before.get(&c.path).is_some_and(|e| e.skip_worktree) {
            continue;
        }
        let full = in_worktree(&work_dir, c.path.as_bstr());
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
            remove_empty_dirs(parent.to_owned(), &work_dir);
        }
    }

    // 2. The new index: the new tree, keeping skip-worktree flags and unchanged files' stat data.
    let mut next = wt.index_from_tree(&new_tree).internal("cannot build the index of the new tree")?;
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
                let full = in_worktree(&work_dir, path.as_bstr());
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
                crate::git::cli::checkout_index(&git_dir, &work_dir, &scratch, &list)?;
            }
        }
        let written = gix::index::File::at(&scratch, wt.object_hash(), false, Default::default())
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

    // 4. The index, through the lock.
    lock.commit(&next)?;
    let _ = std::fs::remove_file(&scratch);
    let sparse = before.values().any(|e| e.skip_worktree) || sparse_checkout(&wt);
    if added_sparse_candidates && sparse {
        // New paths of a sparse checkout: let git apply the sparse patterns to them.
        crate::git::cli::sparse_reapply(&work_dir)?;
    }
    Ok(())
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
