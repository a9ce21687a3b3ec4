//! Moving a checked-out worktree along with its branch, the way `git merge --ff-only` or
//! `git reset --keep` would: when to move, what to refuse and the messages; the files and the
//! index are moved by [`crate::git::checkout`]. The worktree's `index.lock` ([`IndexLock`]) is held
//! throughout, so no git command can stage or commit there half-way.
//!
//! [`move_branch`] is idempotent: a run killed half-way (some files written, the index not yet) is
//! finished by running it again with the same commits, because a path counts as safe when it holds
//! either the old or the new content.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::git::checkout::{Obstacle, Worktree};
use crate::git::index::Index;
use crate::git::ObjectId;

/// A path that stops the move, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocker {
    pub path: String,
    pub why: &'static str,
}

/// Paths that stop moving the worktree at `work_dir` from tree `from` to tree `to`: a changed path
/// holding neither its old nor its new content (local modifications, an untracked file in the way).
pub fn blockers(work_dir: &Path, from: ObjectId, to: ObjectId) -> Result<Vec<Blocker>> {
    let wt = Worktree::open(work_dir)?;
    let index = wt.index("cannot read the index")?;
    let mv = wt.plan_move(&index, from, to)?;
    Ok(found(&wt, &mv))
}

fn found(wt: &Worktree, mv: &crate::git::checkout::Move) -> Vec<Blocker> {
    wt.obstacles(mv)
        .into_iter()
        .map(|(path, why)| {
            let why = match why {
                Obstacle::Submodule => "a submodule's files are in the way",
                Obstacle::Untracked => "an untracked file is in the way",
                Obstacle::LocalChanges => "it has local changes",
            };
            Blocker { path, why }
        })
        .collect()
}

/// The blockers as a message names them: the first ten with why, then how many more.
fn listed(found: &[Blocker]) -> String {
    let list: Vec<String> = found.iter().take(10).map(|b| format!("{} ({})", b.path, b.why)).collect();
    let more = if found.len() > 10 { format!(" …and {} more", found.len() - 10) } else { String::new() };
    format!("{}{more}", list.join(", "))
}

/// The refusal for blockers in the worktree at `work_dir`.
pub fn refusal(work_dir: &Path, found: &[Blocker]) -> Error {
    Error::refused(format!(
        "cannot update the worktree {}: updating would overwrite {}",
        work_dir.display(),
        listed(found)
    ))
    .hint(format!("commit, stash or move those files in {}, then rerun", work_dir.display()))
}

/// A held `index.lock` of one worktree. git takes this lock before it writes the index and keeps
/// it through `git commit`'s ref update, so while it is held no git command can stage or commit in
/// that worktree: moving its branch and its files is one step as far as git is concerned.
///
/// Released, once the new index is renamed into place beside it, by deleting it (and by deleting
/// it when dropped unused). Its holder is recorded beside the other per-machine files, so that a
/// lock left by a killed git-boulder (and only such a lock) is recognised and taken over by the
/// rerun.
pub struct IndexLock {
    path: PathBuf,
    record: PathBuf,
    file: Option<std::fs::File>,
    /// Which file the lock is (device, inode, modification time): only that file is removed.
    id: Option<FileId>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct LockRecord {
    lock: String,
    pid: u32,
    host: String,
    dev: u64,
    ino: u64,
    /// The lock file's modification time (seconds, nanoseconds): an inode number can be reused
    /// by a lock git creates after ours was removed; its time then differs.
    #[serde(default)]
    mtime: (i64, i64),
}

/// Device, inode and modification time (seconds, nanoseconds) of a file.
type FileId = (u64, u64, (i64, i64));

/// Which file `path` is (linking and renaming it keep its id; a lock file is never written).
fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino(), (m.mtime(), m.mtime_nsec())))
}

/// The name, before its process id, of the file a taker of the lock links into place.
const TAKER: &str = "index.lock.boulder-";

/// Record this process as the holder of the lock at `lock`, the file now at `file`.
fn note(record: &Path, lock: &Path, file: &Path) -> std::io::Result<()> {
    let (dev, ino, mtime) = file_id(file).unwrap_or_default();
    let rec = LockRecord {
        lock: lock.display().to_string(),
        pid: std::process::id(),
        host: crate::git::identity::hostname(),
        dev,
        ino,
        mtime,
    };
    let json = serde_json::to_vec(&rec).map_err(std::io::Error::other)?;
    crate::fsutil::write_atomic(record, &json).map_err(|e| std::io::Error::other(e.message))
}

/// Where the new index is written while the lock is held (beside the index, so the rename that
/// puts it in place stays on one file system).
const NEXT_INDEX: &str = "index.boulder-new";

/// The records of one worktree's lock: one per process that took it or is taking it,
/// `<dir>/<key>.<pid>.json`, so a taker never overwrites the record of the lock it finds.
struct Records {
    dir: PathBuf,
    key: String,
}

impl Records {
    fn of(&self, pid: u32) -> PathBuf {
        self.dir.join(format!("{}.{pid}.json", self.key))
    }

    /// Every record of this lock, with its process id.
    fn all(&self) -> Vec<(u32, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let prefix = format!("{}.", self.key);
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                let pid = name.to_str()?.strip_prefix(&prefix)?.strip_suffix(".json")?.parse().ok()?;
                Some((pid, e.path()))
            })
            .collect()
    }

    /// The record of a git-boulder process, since dead, that holds the lock at `path`, and which
    /// file that lock is.
    fn left_by_a_killed_run(&self, path: &Path) -> Option<(PathBuf, FileId)> {
        let here = crate::git::identity::hostname();
        self.all().into_iter().find_map(|(_, record)| {
            let rec = serde_json::from_slice::<LockRecord>(&std::fs::read(&record).ok()?).ok()?;
            let dead = rec.host == here && can_tell_the_dead() && !crate::lock::running(rec.pid);
            let id = (rec.dev, rec.ino, rec.mtime);
            let same = rec.lock == path.display().to_string() && file_id(path) == Some(id);
            (dead && same).then_some((record, id))
        })
    }

    /// Remove the records of this machine's processes that are gone (called by the holder of the
    /// lock: none of them holds it).
    fn forget_dead(&self) {
        if !can_tell_the_dead() {
            return;
        }
        let here = crate::git::identity::hostname();
        for (pid, record) in self.all() {
            let ours = std::fs::read(&record).ok().and_then(|b| serde_json::from_slice::<LockRecord>(&b).ok());
            if pid != std::process::id() && ours.is_some_and(|r| r.host == here) && !crate::lock::running(pid) {
                let _ = std::fs::remove_file(record);
            }
        }
    }
}

/// Whether a process of this machine that is gone can be told from one that runs (`/proc`):
/// where it cannot, no lock, record or file of another process is ever taken for a dead one's.
fn can_tell_the_dead() -> bool {
    Path::new("/proc/self").exists()
}

/// Remove `path` if it is still the file `id` names (another process may have taken the lock
/// since, if ours was removed by hand).
fn remove_if_same(path: &Path, id: Option<FileId>) {
    if id.is_some() && file_id(path) == id {
        let _ = std::fs::remove_file(path);
    }
}

/// Remove the files that killed takers of a lock in `git_dir` left before linking them.
fn forget_killed_takers(git_dir: &Path) {
    if !can_tell_the_dead() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(git_dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix(TAKER)).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| p != std::process::id() && !crate::lock::running(p)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

impl IndexLock {
    /// Take `index.lock` of the worktree whose git dir is `git_dir`; refuse, as git does, while
    /// another process holds it. A lock a killed git-boulder left (recorded, its process gone) is
    /// taken over.
    pub fn acquire(repo: &crate::git::Repo, git_dir: &Path, work_dir: &Path) -> Result<IndexLock> {
        let path = git_dir.join("index.lock");
        let key = git_dir.strip_prefix(&repo.common_dir).ok().map(|r| r.to_string_lossy().replace('/', "-"));
        let key = key.filter(|k| !k.is_empty()).unwrap_or_else(|| "main".into());
        let records = Records { dir: repo.boulder_dir().join("index-locks"), key };
        let record = records.of(std::process::id());
        for attempt in 0..2 {
            match Self::take(&path, &record) {
                Ok(file) => {
                    // What killed holders and takers left; only the holder of the lock writes them.
                    let _ = std::fs::remove_file(path.with_file_name(NEXT_INDEX));
                    forget_killed_takers(git_dir);
                    records.forget_dead();
                    let id = file_id(&path);
                    return Ok(IndexLock { path, record, file: Some(file), id });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let _ = std::fs::remove_file(&record);
                    if attempt == 0 {
                        if let Some((theirs, id)) = records.left_by_a_killed_run(&path) {
                            remove_if_same(&path, Some(id));
                            let _ = std::fs::remove_file(theirs);
                            continue;
                        }
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
                Err(e) => return Err(Error::internal(format!("cannot create {}: {e}", path.display())).with_source(e)),
            }
        }
        unreachable!("the second attempt returns")
    }

    /// Create the lock file at `path` already recorded in `record`: a new file is made beside it
    /// and recorded, then linked to `path` (which fails, as creating it would, when a lock is
    /// there). Killed at any point, there is either no lock or a recorded one. Where hard links
    /// are not supported the lock is created in place and recorded after.
    fn take(path: &Path, record: &Path) -> std::io::Result<std::fs::File> {
        let new = |p: &Path| std::fs::OpenOptions::new().write(true).create_new(true).open(p);
        let beside = path.with_file_name(format!("{TAKER}{}", std::process::id()));
        let _ = std::fs::remove_file(&beside);
        let file = new(&beside)?;
        let noted = note(record, path, &beside);
        crate::failpoint::hit("index-lock-noted");
        let linked = noted.and_then(|()| match std::fs::hard_link(&beside, path) {
            // Over NFS a link that was made can be reported as failed: it is ours if it is this file.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let same = |p: &Path| file_id(p).map(|(dev, ino, _)| (dev, ino));
                if same(path).is_some() && same(path) == same(&beside) {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            other => other,
        });
        crate::failpoint::hit("index-lock-linked");
        let _ = std::fs::remove_file(&beside);
        match linked {
            Ok(()) => Ok(file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
            Err(_) => {
                let file = new(path)?;
                if let Err(e) = note(record, path, path) {
                    let _ = std::fs::remove_file(path);
                    return Err(e);
                }
                Ok(file)
            }
        }
    }

    /// Put `index` in place of the worktree's index, then release the lock. The lock file itself
    /// is never written, so the record of it stays true until it is gone: a run killed at any
    /// point of this leaves either the old index or the new one, and a lock the rerun knows as its
    /// own.
    pub fn commit(mut self, index: &Index) -> Result<()> {
        let next = self.path.with_file_name(NEXT_INDEX);
        let fail = |e: std::io::Error| Error::internal(format!("cannot write {}: {e}", next.display())).with_source(e);
        let mut out = std::io::BufWriter::new(std::fs::File::create(&next).map_err(fail)?);
        index.write_to(&mut out)?;
        drop(out.into_inner().map_err(|e| fail(e.into_error()))?);
        crate::failpoint::hit("index-lock-written");
        let target = self.path.with_file_name("index");
        std::fs::rename(&next, &target)
            .map_err(|e| Error::internal(format!("cannot put {} in place: {e}", target.display())).with_source(e))?;
        crate::failpoint::hit("index-in-place");
        drop(self.file.take());
        remove_if_same(&self.path, self.id);
        let _ = std::fs::remove_file(&self.record);
        Ok(())
    }
}

impl Drop for IndexLock {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            remove_if_same(&self.path, self.id);
            let _ = std::fs::remove_file(&self.record);
        }
    }
}

/// The refusal when `branch` no longer points where a plan expected.
pub fn moved_error(branch: &str, planned: ObjectId, now: Option<ObjectId>, what: &str) -> Error {
    let now = now.map(|n| n.to_hex_with_len(8).to_string()).unwrap_or_else(|| "nowhere (deleted)".into());
    Error::refused(format!(
        "branch {branch} moved from {} to {now} while {what} ran (a commit landed); nothing more was changed",
        planned.to_hex_with_len(8)
    ))
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
    let full = crate::git::refs::branch_ref(branch);
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
    let wt = Worktree::open(&work_dir)?;
    let (git_dir, work_dir) = (wt.git_dir().to_owned(), wt.work_dir().to_owned());
    let lock = IndexLock::acquire(repo, &git_dir, &work_dir)?;

    let head = std::fs::read_to_string(git_dir.join("HEAD")).unwrap_or_default();
    if head.trim().strip_prefix("ref:").map(str::trim) != Some(full.as_str()) {
        return Err(Error::refused(format!(
            "the worktree {} left branch {branch} while {what} ran; nothing more was changed",
            work_dir.display()
        )));
    }
    let now = repo.ref_id(&full)?;
    let (old_tree, new_tree) = (wt.tree_of(old)?, wt.tree_of(new)?);
    let index = wt.index("cannot read the worktree's index")?;
    let at_old = wt.index_is_tree(&index, old_tree)?;
    let at_new = old_tree == new_tree || (!at_old && wt.index_is_tree(&index, new_tree)?);
    if now == Some(new) && at_new {
        // Finished by an earlier run, perhaps killed before it cleared up after itself.
        wt.forget_interrupted();
        return Ok(());
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

    let mut mv = wt.plan_move(&index, old_tree, new_tree)?;
    // Files an interrupted run of this move already wrote (the branch moved, the index not yet)
    // are recognised by the stat data it recorded.
    wt.recall_interrupted(&mut mv, now == Some(old));
    let found = found(&wt, &mv);
    if !found.is_empty() {
        if now == Some(new) {
            // An earlier run moved the branch and was stopped before its files all followed; what
            // it left is recognised, so these paths were changed since.
            return Err(Error::new(
                crate::error::Kind::Unfinished,
                format!(
                    "{what} was interrupted after it moved branch {branch} to {}, before the worktree {} followed; \
                     these paths changed since and hold neither side: {}",
                    new.to_hex_with_len(8),
                    work_dir.display(),
                    listed(&found)
                ),
            )
            .hint(format!(
                "move those files away (or restore them: git -C {} checkout {} -- PATH), then rerun to finish",
                work_dir.display(),
                old.to_hex_with_len(12)
            )));
        }
        return Err(refusal(&work_dir, &found));
    }

    cas(now)?;
    crate::failpoint::hit(failpoint);

    // The files, then the index through the lock.
    let moved = wt.apply(&mv)?;
    lock.commit(&moved.index)?;
    crate::failpoint::hit("checkout-index-in-place");
    wt.finish(&mv, &moved)
}
