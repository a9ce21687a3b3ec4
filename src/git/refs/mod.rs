//! Every ref name git-boulder owns, and the one way its refs move.
//!
//! * Names: `refs/boulder/streams/<stream>`, `refs/boulder/boulders/<id>`, `refs/boulder/prd`
//!   (op-logs), `refs/boulder/claims/<stream>` (claims, on remotes), `refs/notes/boulder` (the
//!   notes of recorded commits), `refs/boulder-remotes/<remote>/…` (what was last fetched from a
//!   remote), `refs/boulder-queue/<remote>/heads/<branch>` (branch tips the merge queue fetched).
//!   Nothing outside this file spells them.
//! * Moves: [`update`] is one compare-and-swap of a ref (expected old value, new value, reflog
//!   message); [`update_with_retry`] wraps it for writers that race other writers: it asks a
//!   closure for the update to make, tries it, and on a lost race (or a lock another writer
//!   holds) backs off and asks the closure again, with the fresh value of the ref.
//!
//! Here: the names and reading refs; the compare-and-swap in `update.rs`, with retry in
//! `retry.rs`; the rewrite of `packed-refs` and deletion under its lock in `packed.rs`; the lock
//! files that block an update in `locks.rs`.

use gix::bstr::ByteSlice;

use super::{ObjectId, Repo};
use crate::error::{Error, Result, ResultExt};

mod locks;
mod packed;
mod retry;
mod update;

pub use locks::{blocked, packed_lock_now, packed_lock_path, stale_packed_lock};
pub use packed::{delete, update_packed, PackedMove};
pub(crate) use retry::update_with_retry_in;
pub use retry::{update_with_retry, Backoff, GaveUp, Odd, Retry, Step};
pub(crate) use update::update_in;
pub use update::{move_ref, update, update_all, Expect, Swap, UpdateError, Writer};

/// Everything git-boulder keeps in refs, under one prefix (pushed and fetched as `refs/boulder/*`).
pub const BOULDER: &str = "refs/boulder/";
/// Ref prefix of stream op-logs.
pub const STREAMS: &str = "refs/boulder/streams/";
/// Ref prefix of boulder op-logs.
pub const BOULDERS: &str = "refs/boulder/boulders/";
/// The op-log of PRD completion records (`prd done`).
pub const PRD: &str = "refs/boulder/prd";
/// Ref prefix of claims on a remote.
pub const CLAIMS: &str = "refs/boulder/claims/";
/// The notes ref written by the post-commit hook.
pub const NOTES: &str = "refs/notes/boulder";
/// Ref prefix of what was last fetched from each remote: `refs/boulder-remotes/<key>/…`.
pub const REMOTES: &str = "refs/boulder-remotes/";
/// Ref prefix of local branches.
pub const HEADS: &str = "refs/heads/";

/// The op-log of stream `name`.
pub fn stream_ref(name: &str) -> String {
    format!("{STREAMS}{name}")
}

/// The op-log of boulder `id`.
pub fn boulder_ref(id: &str) -> String {
    format!("{BOULDERS}{id}")
}

/// The claim of `stream` (on a remote).
pub fn claim_ref(stream: &str) -> String {
    format!("{CLAIMS}{stream}")
}

/// Where the refs last fetched from the remote with key `key` are kept.
pub fn remote_prefix(key: &str) -> String {
    format!("{REMOTES}{key}/")
}

/// Where the notes ref fetched from a remote goes, below [`remote_prefix`].
pub const REMOTE_NOTES_TAIL: &str = "notes/boulder";

/// The local copy of a remote's claim on `stream`.
pub fn claim_tracking_ref(key: &str, stream: &str) -> String {
    format!("{REMOTES}{key}/claims/{stream}")
}

/// Ref prefix of the stream branch tips `stream rollback` (and `stream unmerge`) kept:
/// `refs/boulder/backup/<stream>/<n>`, n counting up from 1. Local: neither `push` nor the
/// refspecs of `remote setup` send them.
pub const BACKUPS: &str = "refs/boulder/backup/";

/// Backup number `n` of stream `stream`.
pub fn backup_ref(stream: &str, n: u64) -> String {
    format!("{BACKUPS}{stream}/{n}")
}

/// Ref prefix of the branch tips the merge queue last fetched from each remote:
/// `refs/boulder-queue/<key>/heads/<branch>`. Apart from `refs/boulder-remotes/` (the state a
/// pull brings in) and from the user's `refs/remotes/` (which only `git fetch` and `git push`
/// move, as the user expects).
pub const QUEUE: &str = "refs/boulder-queue/";

/// Where the merge queue keeps the tip of `branch` last fetched from the remote with key `key`.
pub fn queue_ref(key: &str, branch: &str) -> String {
    format!("{QUEUE}{key}/heads/{branch}")
}

/// The full name of local branch `branch`.
pub fn branch_ref(branch: &str) -> String {
    format!("{HEADS}{branch}")
}

/// The remote-tracking ref of `branch` on remote `remote`.
pub fn remote_branch_ref(remote: &str, branch: &str) -> String {
    format!("{REMOTE_BRANCHES}{remote}/{branch}")
}

/// The prefix of every remote-tracking ref.
pub const REMOTE_BRANCHES: &str = "refs/remotes/";

/// The prefix of every remote-tracking ref of `remote`.
pub fn remote_branches_prefix(remote: &str) -> String {
    format!("{REMOTE_BRANCHES}{remote}/")
}

/// A remote's default branch, as `git clone` records it.
pub const ORIGIN_HEAD: &str = "refs/remotes/origin/HEAD";

impl Repo {
    /// The object id a full ref name points at (peeled to its target), if the ref exists.
    pub fn ref_id(&self, name: &str) -> Result<Option<gix::ObjectId>> {
        match self.repo.try_find_reference(name) {
            // A symbolic ref to a branch with no commits yet (HEAD of an empty repository) is absent.
            Ok(Some(mut r)) if r.target().try_id().is_none() => Ok(r.peel_to_id().ok().map(|id| id.detach())),
            Ok(Some(mut r)) => Ok(Some(r.peel_to_id().internal(format_args!("cannot resolve {name}"))?.detach())),
            Ok(None) => Ok(None),
            Err(e) => Err(Error::internal(format!("cannot read ref {name}: {e}")).with_source(e)),
        }
    }

    /// The short name of the branch HEAD points at in this worktree, if any (`None` when detached
    /// or unborn is still named).
    pub fn head_branch(&self) -> Option<String> {
        let head = self.repo.head_name().ok()??;
        head.as_bstr().to_str().ok()?.strip_prefix(HEADS).map(str::to_owned)
    }

    /// The branch HEAD is on in this worktree (short name) and the commit it points at (`None`
    /// when it has no commits yet), read once; `None` when HEAD cannot be read or is detached.
    pub fn head_branch_and_id(&self) -> Option<(String, Option<gix::ObjectId>)> {
        let head = self.repo.head().ok()?;
        let branch = head.referent_name().and_then(|n| n.as_bstr().to_str().ok()?.strip_prefix(HEADS))?;
        Some((branch.to_string(), head.id().map(|id| id.detach())))
    }

    /// The newest entry of HEAD's reflog in this worktree: the commit it moved to and its message.
    pub fn head_reflog_newest(&self) -> Option<(gix::ObjectId, String)> {
        let head = self.repo.head().ok()?;
        let mut log = head.log_iter();
        let mut rev = log.rev().ok()??;
        match rev.next() {
            Some(Ok(line)) => Some((line.new_oid, line.message.to_str_lossy().into_owned())),
            _ => None,
        }
    }

    /// The commit the oldest entry of `name`'s reflog moved it to (where a branch was created).
    /// The newest reflog entry of ref `name`: (previous id, new id, message).
    pub fn reflog_newest(&self, name: &str) -> Option<(gix::ObjectId, gix::ObjectId, String)> {
        let r = self.repo.find_reference(name).ok()?;
        let mut platform = r.log_iter();
        let mut rev = platform.rev().ok()??;
        let line = rev.next()?.ok()?;
        Some((line.previous_oid, line.new_oid, line.message.to_str_lossy().into_owned()))
    }

    /// Whether `name` held `id` at some point its reflog remembers.
    pub fn reflog_contains(&self, name: &str, id: gix::ObjectId) -> bool {
        let Ok(r) = self.repo.find_reference(name) else { return false };
        let mut platform = r.log_iter();
        let Ok(Some(lines)) = platform.all() else { return false };
        lines.flatten().any(|l| l.new_oid() == id || l.previous_oid() == id)
    }

    pub fn reflog_oldest(&self, name: &str) -> Option<gix::ObjectId> {
        let r = self.repo.find_reference(name).ok()?;
        let mut platform = r.log_iter();
        let mut lines = platform.all().ok()??;
        let first = lines.next()?.ok()?;
        Some(first.new_oid())
    }

    /// The repository's default branch: the branch `origin/HEAD` names (the remote's default, as
    /// `git clone` records it), else the branch checked out in the main worktree.
    pub fn default_branch(&self) -> Option<String> {
        if let Some(name) = self.symbolic_target(ORIGIN_HEAD) {
            if let Some(b) = name.strip_prefix(&remote_branches_prefix("origin")) {
                if b != "HEAD" && !b.is_empty() {
                    return Some(b.to_string());
                }
            }
        }
        // HEAD of the main worktree lives in the common dir (a linked worktree has its own).
        let head = std::fs::read_to_string(self.common_dir.join("HEAD")).ok()?;
        head.trim().strip_prefix("ref:")?.trim().strip_prefix(HEADS).map(str::to_owned)
    }

    /// The ref a symbolic ref `name` points at (full name), if `name` exists and is symbolic.
    pub fn symbolic_target(&self, name: &str) -> Option<String> {
        let r = self.repo.try_find_reference(name).ok()??;
        match r.target() {
            gix::refs::TargetRef::Symbolic(target) => target.as_bstr().to_str().ok().map(str::to_owned),
            gix::refs::TargetRef::Object(_) => None,
        }
    }

    /// The commit a branch (short name) points at, if it exists.
    pub fn branch_tip(&self, branch: &str) -> Result<Option<gix::ObjectId>> {
        self.ref_id(&branch_ref(branch))
    }
}

/// Refs under `prefix` (e.g. `refs/boulder/`) and the ids they point at, sorted by name.
pub fn list(repo: &Repo, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
    let platform = repo.repo.references().internal("cannot list refs")?;
    let iter = platform.prefixed(prefix).internal(format_args!("cannot list refs under {prefix}"))?;
    let mut out = Vec::new();
    for r in iter {
        let mut r = r.internal("cannot list refs")?;
        let name = r.name().as_bstr().to_string();
        if let Ok(id) = r.peel_to_id() {
            out.push((name, id.detach()));
        }
    }
    out.sort();
    Ok(out)
}

/// `--all` without git-boulder's state: `git log $HIDE_ARGS`, `gitk $HIDE_ARGS`, `tig $HIDE_ARGS`.
pub const HIDE_ARGS: &str = "--exclude='refs/boulder*' --exclude='refs/notes/*' --all";

/// The `log.excludeDecoration` patterns git-boulder adds (`refs/boulder/*`, `refs/boulder-remotes/*`
/// and the notes). `refs/notes/*` is needed as well: once any exclusion is configured, git (2.40
/// and later) decorates every namespace, notes included.
pub const DECORATION_EXCLUDES: [&str; 2] = ["refs/boulder*", "refs/notes/*"];

/// The ids of the refs under `prefix` that can be read and peeled, skipping any that cannot (for
/// hiding commits from a walk, where a broken ref must not stop the walk).
pub fn ids_under(repo: &Repo, prefix: &str) -> Vec<ObjectId> {
    let mut out = Vec::new();
    if let Ok(refs) = repo.repo.references() {
        if let Ok(iter) = refs.prefixed(prefix) {
            for mut r in iter.flatten() {
                if let Ok(id) = r.peel_to_id() {
                    out.push(id.detach());
                }
            }
        }
    }
    out
}

/// `name` as a full ref name, or a usage error naming it.
pub(crate) fn full_name(name: &str) -> Result<gix::refs::FullName> {
    name.try_into().map_err(|e| Error::usage(format!("invalid ref name {name:?}: {e}")).with_source(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::identity::state_signature;

    /// A fresh repository (made with gix: a git child here could share other tests' lock files)
    /// and `n` distinct parentless commits in it.
    fn repo_with_commits(n: usize) -> (tempfile::TempDir, Repo, Vec<ObjectId>) {
        let dir = tempfile::tempdir().unwrap();
        crate::git::init(dir.path()).unwrap();
        let repo = Repo::open(dir.path()).unwrap();
        let sig = state_signature("2026-01-01T00:00:00Z");
        let objects = repo.objects();
        let tree = objects.flat_tree(&[], true).unwrap();
        let commits =
            (0..n).map(|i| objects.commit(tree, &[], &sig, &sig, &format!("c{i}\n"), true).unwrap()).collect();
        (dir, repo, commits)
    }

    const QUICK: Retry = Retry { tries: 5, odd: Odd::Count(0), backoff: Backoff::Growing };

    #[test]
    fn a_lost_race_is_planned_again_on_the_fresh_value() {
        let (_dir, repo, c) = repo_with_commits(3);
        let name = stream_ref("s");
        let mut seen = Vec::new();
        let out = update_with_retry(&repo, &name, QUICK, |attempt| {
            let tip = repo.ref_id(&name)?;
            seen.push(tip);
            if attempt == 0 {
                // Another writer creates the ref between this read and the swap.
                update(&repo, &name, Expect::Absent, c[0], "other", Writer::Configured)?.unwrap();
            }
            let message = format!("attempt {attempt}");
            Ok(Step::Update {
                expected: Expect::from_tip(tip),
                new: c[1],
                message,
                writer: None,
                moved: attempt,
                already: None,
            })
        })
        .unwrap()
        .unwrap();
        assert_eq!(out, 1, "the first swap lost, the second went through");
        assert_eq!(seen, vec![None, Some(c[0])], "the second plan saw the other writer's value");
        assert_eq!(repo.ref_id(&name).unwrap(), Some(c[1]));
    }

    #[test]
    fn done_writes_nothing_and_every_lost_race_gives_up() {
        let (_dir, repo, c) = repo_with_commits(2);
        let name = stream_ref("s");
        let out = update_with_retry(&repo, &name, QUICK, |_| Ok(Step::Done("nothing"))).unwrap().unwrap();
        assert_eq!(out, "nothing");
        assert_eq!(repo.ref_id(&name).unwrap(), None);
        // Always expecting a value the ref does not hold: every attempt loses.
        update(&repo, &name, Expect::Absent, c[1], "other", Writer::Configured).unwrap().unwrap();
        let mut tries = 0;
        let out = update_with_retry(&repo, &name, QUICK, |_| {
            tries += 1;
            Ok(Step::Update {
                expected: Expect::At(c[0]),
                new: c[0],
                message: "never".into(),
                writer: None,
                moved: (),
                already: None,
            })
        })
        .unwrap();
        assert!(matches!(out, Err(GaveUp::Exhausted(Some(_)))), "{out:?}");
        assert_eq!(tries, QUICK.tries);
        assert_eq!(repo.ref_id(&name).unwrap(), Some(c[1]));
    }

    #[test]
    fn a_creation_that_finds_the_same_value_is_not_a_move() {
        let (_dir, repo, c) = repo_with_commits(1);
        let name = stream_ref("s");
        assert!(update(&repo, &name, Expect::Absent, c[0], "first", Writer::Configured).unwrap().unwrap());
        let again = update(&repo, &name, Expect::Absent, c[0], "second", Writer::Configured).unwrap();
        assert!(matches!(again, Ok(false) | Err(_)), "{again:?}");
        assert!(!matches!(again, Ok(true)), "a creation must not report moving a ref that was already there");
    }

    #[test]
    fn reflog_entries_name_the_writer_given() {
        let (dir, repo, c) = repo_with_commits(1);
        // Branches have reflogs by default (refs/boulder/* only with core.logAllRefUpdates=always).
        let name = branch_ref("b");
        let sig = state_signature("2026-02-03T04:05:06Z");
        assert!(update(&repo, &name, Expect::Absent, c[0], "boulder: created", Writer::As(&sig)).unwrap().unwrap());
        let log = std::fs::read_to_string(dir.path().join(".git/logs").join(&name)).unwrap();
        assert!(
            log.trim_end().ends_with("git-boulder <git-boulder@localhost> 1770091506 +0000\tboulder: created"),
            "{log}"
        );
    }
}
