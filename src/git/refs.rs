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

use std::time::Duration;

use gix::bstr::ByteSlice;

use super::identity::Signature;
use super::{ObjectId, Repo};
use crate::error::{Error, Result, ResultExt};

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

/// What a ref must hold for an update to go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The ref must not exist (a creation).
    Absent,
    /// The ref must point at this object.
    At(ObjectId),
    /// Whatever the ref holds, or nothing.
    Anything,
}

impl Expect {
    /// [`Expect::At`] the value, or [`Expect::Absent`] when there is none.
    pub fn from_tip(tip: Option<ObjectId>) -> Self {
        tip.map_or(Expect::Absent, Expect::At)
    }

    fn previous(self) -> gix::refs::transaction::PreviousValue {
        use gix::refs::transaction::PreviousValue;
        match self {
            Expect::Absent => PreviousValue::MustNotExist,
            Expect::At(id) => PreviousValue::MustExistAndMatch(gix::refs::Target::Object(id)),
            Expect::Anything => PreviousValue::Any,
        }
    }
}

/// Who a ref update's reflog entry names.
#[derive(Clone, Copy)]
pub enum Writer<'a> {
    /// This identity.
    As(&'a Signature),
    /// The committer git config gives (the repository handle's own).
    Configured,
}

/// How a ref update failed.
#[derive(Debug)]
pub struct UpdateError {
    /// Worth retrying: the ref did not hold the expected value, or another writer holds its lock.
    pub transient: bool,
    /// gix's error.
    pub cause: super::objects::Failure,
}

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.cause.fmt(f)
    }
}

impl std::error::Error for UpdateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.cause)
    }
}

pub(crate) fn full_name(name: &str) -> Result<gix::refs::FullName> {
    name.try_into().map_err(|e| Error::usage(format!("invalid ref name {name:?}: {e}")).with_source(e))
}

/// Move `name` to `new` if it holds what `expected` says (compare-and-swap), with a reflog entry
/// `message` by `writer`, on the gix handle `g`. `Ok(false)`: the ref was to be created but
/// already held `new` (another writer made the very same object first), so this call did not
/// create it.
pub(crate) fn update_in(
    g: &gix::Repository,
    name: &gix::refs::FullName,
    expected: Expect,
    new: ObjectId,
    message: &str,
    writer: Writer<'_>,
) -> std::result::Result<bool, UpdateError> {
    use gix::refs::transaction::{Change, PreviousValue, RefEdit};
    let edit = RefEdit::update(name.clone(), new, expected.previous(), message);
    let mut buf = gix::date::parse::TimeBuf::default();
    let edited = match writer {
        Writer::As(sig) => g.edit_references_as([edit], Some(sig.0.to_ref(&mut buf))),
        Writer::Configured => g.edit_reference(edit),
    };
    match edited {
        // A creation that found the ref already there (with the same value) reports the value it
        // found as the expected one.
        Ok(edits) => Ok(!(expected == Expect::Absent
            && edits
                .iter()
                .any(|e| matches!(e.change, Change::Update { expected: PreviousValue::MustExistAndMatch(_), .. })))),
        Err(e) => Err(UpdateError {
            transient: e.is_conflict() || e.can_retry() || e.is_retryable(),
            cause: super::objects::failure(e),
        }),
    }
}

/// One compare-and-swap of `name` (see [`update_with_retry`] for writers that race): move it to
/// `new` if it holds what `expected` says, with a reflog entry `message` by `writer`. `Ok(false)`:
/// the ref was to be created but already held `new`.
pub fn update(
    repo: &Repo,
    name: &str,
    expected: Expect,
    new: ObjectId,
    message: &str,
    writer: Writer<'_>,
) -> Result<std::result::Result<bool, UpdateError>> {
    Ok(update_in(&repo.repo, &full_name(name)?, expected, new, message, writer))
}

/// One compare-and-swap of [`update_all`].
#[derive(Debug, Clone)]
pub struct Swap {
    pub name: String,
    pub expected: Expect,
    pub new: ObjectId,
    /// The reflog message.
    pub message: String,
}

/// Several compare-and-swaps in one ref transaction, written into `packed-refs` (as
/// `git pack-refs` leaves refs): every ref moves or none does (a ref that no longer holds what it
/// was expected to, or whose lock another writer holds, fails them all; the error says whether
/// that is worth retrying). One lock and one file for all of them, where a loose ref each would
/// create a lock file and a ref file per ref; a loose copy of a moved ref is deleted, so the
/// packed value is the one read. Reflog entries name `writer`.
pub fn update_all(repo: &Repo, swaps: &[Swap], writer: &Signature) -> Result<std::result::Result<(), UpdateError>> {
    use gix::lock::acquire::Fail;
    use gix::refs::file::transaction::PackedRefs;
    use gix::refs::transaction::RefEdit;
    if swaps.is_empty() {
        return Ok(Ok(()));
    }
    let mut edits = Vec::with_capacity(swaps.len());
    for s in swaps {
        edits.push(RefEdit::update(full_name(&s.name)?, s.new, s.expected.previous(), s.message.as_str()));
    }
    let g = &repo.repo;
    let fail = |e: gix::Error| UpdateError {
        transient: e.is_conflict() || e.can_retry() || e.is_retryable(),
        cause: super::objects::failure(e),
    };
    // Lock waits as git's defaults (core.filesRefLockTimeout 100 ms, core.packedRefsTimeout 1 s).
    let (files, packed) = (
        Fail::AfterDurationWithBackoff(Duration::from_millis(100)),
        Fail::AfterDurationWithBackoff(Duration::from_millis(1000)),
    );
    let mut buf = gix::date::parse::TimeBuf::default();
    let prepared = g
        .refs
        .transaction()
        .packed_refs(PackedRefs::DeletionsAndNonSymbolicUpdatesRemoveLooseSourceReference(Box::new(g.objects.clone())))
        .prepare(edits, files, packed);
    Ok(match prepared {
        Ok(t) => t.commit(Some(writer.0.to_ref(&mut buf))).map(|_| ()).map_err(fail),
        Err(e) => Err(fail(e)),
    })
}

/// The first line of `packed-refs` as git writes it (and the traits it must name for
/// [`update_packed`] to rewrite the file).
const PACKED_HEADER: &[u8] = b"# pack-refs with: peeled fully-peeled sorted \n";

/// What [`update_packed`] did: the indexes of the swaps it left to [`update_all`] (`left`: a loose
/// file, a lock or a reflog), and of those it wrote that a loose writer touched meanwhile (`raced`).
#[derive(Debug, Default)]
pub struct PackedMove {
    pub left: Vec<usize>,
    pub raced: Vec<usize>,
}

/// [`update_all`] without a lock file per ref, for the refs that only `packed-refs` holds: under
/// `packed-refs.lock` alone (the one lock `git pack-refs` takes), each checked against what it was
/// expected to hold, the file rewritten whole — one file created where [`update_all`] creates one
/// per ref (on this kind of disk the creations are most of its time).
///
/// Why that is still a compare-and-swap against git-boulder's other writers: a gix ref
/// transaction that updates refs holds `packed-refs.lock` from before it reads the loose refs it
/// moves until it has written them, whenever `packed-refs` or its lock exists when it starts — so
/// it cannot write between this check and this write — and [`delete`] reads and rewrites
/// `packed-refs` under that lock, as git does. A writer that started while neither existed (or
/// git's own CLI, which never takes that lock for a loose ref) can slip in, and its loose file
/// would hide the packed value; so a ref with a loose file or lock is left out (`left`, with a ref
/// that has a reflog, which is owed an entry), and each written ref is looked at again after the
/// write (`raced`): the caller redoes those through [`update`], on top of whatever that writer
/// wrote. One hole is gix's own and as old as its transactions: it reads `packed-refs` just
/// before it takes that lock, so a writer that read it before this rewrite and then waited for the
/// lock compares against the old value — as it would after any other transaction's rewrite. For
/// an op-log the next pull brings back what such a write hid.
///
/// Also left to the transaction: a ref git keeps a reflog of (one that has a reflog, and under
/// `core.logAllRefUpdates`, read as git reads it, the branches, remote-tracking branches and
/// notes; every ref when it is `always`), a new value that is not a commit (a tag needs its
/// peeled value written), and all of them when `packed-refs` was written by something that does
/// not sort and peel it (its header says so).
///
/// `None`, with nothing written, when this cannot be done and a ref transaction would not do it
/// the way git does: a ref is not where it was expected, a name clashes with another as file and
/// folder (`a/b` beside `a/b/c`), or the lock is held past git's wait (`core.packedRefsTimeout`,
/// a second).
pub fn update_packed(repo: &Repo, swaps: &[Swap]) -> Result<Option<PackedMove>> {
    let common = &repo.common_dir;
    let objects = repo.objects();
    let mut moved = PackedMove::default();
    let mut edits: Vec<(&str, ObjectId, usize)> = Vec::with_capacity(swaps.len());
    // Every ref update logged (`core.logAllRefUpdates=always`): all of them to the transaction.
    let all_left = || Ok(Some(PackedMove { left: (0..swaps.len()).collect(), raced: Vec::new() }));
    let logged = match repo.config_string("core.logAllRefUpdates").map(|v| v.to_ascii_lowercase()).as_deref() {
        Some("always") => return all_left(),
        // As git reads it: a boolean (a bare key is true); unset, true where there is a worktree —
        // in a linked worktree of a bare repository too.
        _ => match repo.repo.config_snapshot().try_boolean("core.logAllRefUpdates") {
            Ok(Some(on)) => on,
            Err(_) => true,
            Ok(None) => repo.repo.workdir().is_some(),
        },
    };
    // The refs git gives a reflog of their own: branches, remote-tracking branches, notes.
    let owed_a_log = |name: &str| {
        logged && ["refs/heads/", "refs/remotes/", "refs/notes/"].iter().any(|p| name.starts_with(p))
            || std::fs::symlink_metadata(common.join("logs").join(name)).is_ok()
    };
    for (i, s) in swaps.iter().enumerate() {
        full_name(&s.name)?;
        // A value other than a commit (a tag) would need its peeled value written: gix does that.
        if loose_or_locked(common, &s.name)
            || owed_a_log(&s.name)
            || !matches!(objects.header(s.new), Ok((super::objects::Kind::Commit, _)))
        {
            moved.left.push(i);
        } else {
            edits.push((s.name.as_str(), s.new, i));
        }
    }
    if edits.is_empty() {
        return Ok(Some(moved));
    }
    let Some((lock, packed)) = lock_packed(repo)? else { return Ok(None) };
    let buffer = match packed {
        Packed::Read(buffer) => buffer,
        Packed::Unsorted => return all_left(),
    };
    let path = common.join("packed-refs");
    let failed = |e: crate::error::Source| packed_failed(&path, e);
    for &(name, _, i) in &edits {
        let now = match &buffer {
            Some(b) => b.try_find(name).map_err(|e| failed(e.into()))?.map(|r| r.target()),
            None => None,
        };
        let as_expected = match swaps[i].expected {
            Expect::Absent => now.is_none(),
            Expect::At(id) => now == Some(id),
            Expect::Anything => true,
        };
        // A loose writer that came since the first look is refused too, before anything is written.
        if !as_expected || loose_or_locked(common, name) {
            return Ok(None);
        }
    }
    edits.sort_unstable_by(|a, b| a.0.cmp(b.0));
    if edits.windows(2).any(|w| w[0].0 == w[1].0) {
        return Ok(None);
    }
    // Names that clash with another as file and folder (`a/b` beside `a/b/c`) are left to a ref
    // transaction, which refuses them as git does.
    let edited = |n: &str| edits.binary_search_by(|(e, ..)| (*e).cmp(n)).is_ok();
    let named = |n: &str| -> Result<bool> {
        let packed = match &buffer {
            Some(b) => b.try_find(n).map_err(|e| failed(e.into()))?.is_some(),
            None => false,
        };
        Ok(packed || edited(n) || common.join(n).is_file())
    };
    for &(name, ..) in &edits {
        for (slash, _) in name.match_indices('/').skip(1) {
            if named(&name[..slash])? {
                return Ok(None);
            }
        }
        let folder = format!("{name}/");
        let below = match &buffer {
            Some(b) => b.iter_prefixed(folder.as_str().into()).map_err(|e| failed(e.into()))?.next().is_some(),
            None => false,
        };
        let first_below = edits.partition_point(|(e, ..)| *e < folder.as_str());
        if below || edits.get(first_below).is_some_and(|(e, ..)| e.starts_with(&folder)) {
            return Ok(None);
        }
    }
    let lines: Vec<(&str, Option<ObjectId>)> = edits.iter().map(|&(n, id, _)| (n, Some(id))).collect();
    write_packed(repo, lock, buffer.as_ref(), &lines)?;
    crate::failpoint::hit("packed-refs-written");
    moved.raced = edits.iter().filter(|(name, ..)| loose_or_locked(common, name)).map(|&(.., i)| i).collect();
    moved.raced.sort_unstable();
    Ok(Some(moved))
}

/// `packed-refs` as read under its lock ([`lock_packed`]).
enum Packed {
    /// Its refs (`None`: no file, or an empty one).
    Read(Option<gix::refs::packed::Buffer>),
    /// Written by something that does not sort and peel it (its header says so): left to gix,
    /// which reads it as git does.
    Unsorted,
}

/// Take `packed-refs.lock` — waiting as git does, `core.packedRefsTimeout` (a second); `None`
/// past that — and read `packed-refs` under it: what every other writer of it has finished
/// writing, never a copy read before.
fn lock_packed(repo: &Repo) -> Result<Option<(gix::lock::File, Packed)>> {
    use gix::lock::acquire::Fail;
    let path = repo.common_dir.join("packed-refs");
    let wait = Fail::AfterDurationWithBackoff(Duration::from_millis(1000));
    let Ok(lock) = gix::lock::File::acquire_to_update_resource(&path, wait, None, 0) else { return Ok(None) };
    let packed = match std::fs::read(&path) {
        Ok(bytes) if bytes.is_empty() => Packed::Read(None),
        Ok(bytes) => {
            let header = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
            let traits: Vec<&[u8]> = header.split(|&b| b == b' ').collect();
            if !header.starts_with(b"# pack-refs with:")
                || !traits.contains(&&b"fully-peeled"[..])
                || !traits.contains(&&b"sorted"[..])
            {
                Packed::Unsorted
            } else {
                let buffer = gix::refs::packed::Buffer::from_bytes(&bytes, repo.repo.object_hash())
                    .map_err(|e| packed_failed(&path, e))?;
                Packed::Read(Some(buffer))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Packed::Read(None),
        Err(e) => return Err(packed_failed(&path, e)),
    };
    Ok(Some((lock, packed)))
}

fn packed_failed(path: &std::path::Path, e: impl Into<crate::error::Source>) -> Error {
    Error::caused(crate::error::Kind::Internal, format_args!("cannot update {}", path.display()), e)
}

/// Write `packed-refs` through its `lock`: what `buffer` (read under that lock) holds with the
/// `edits` (sorted by name, each name once) applied — `Some` a new value, `None` the ref gone —
/// then have gix read it again.
fn write_packed(
    repo: &Repo,
    mut lock: gix::lock::File,
    buffer: Option<&gix::refs::packed::Buffer>,
    edits: &[(&str, Option<ObjectId>)],
) -> Result<()> {
    let path = repo.common_dir.join("packed-refs");
    let failed = |e: crate::error::Source| packed_failed(&path, e);
    let mut out = Vec::with_capacity(buffer.map_or(0, |b| b.as_ref().len()) + 64 * edits.len() + 64);
    out.extend_from_slice(PACKED_HEADER);
    let line = |out: &mut Vec<u8>, id: &dyn std::fmt::Display, name: &[u8]| {
        out.extend_from_slice(id.to_string().as_bytes());
        out.push(b' ');
        out.extend_from_slice(name);
        out.push(b'\n');
    };
    let mut next = edits.iter().peekable();
    if let Some(b) = buffer {
        for r in b.iter().map_err(|e| failed(e.into()))? {
            let r = r.map_err(|e| failed(e.into()))?;
            let name = r.name.as_bstr().as_bytes();
            while let Some((n, id)) = next.next_if(|(n, _)| n.as_bytes() < name) {
                if let Some(id) = id {
                    line(&mut out, id, n.as_bytes());
                }
            }
            if let Some((n, id)) = next.next_if(|(n, _)| n.as_bytes() == name) {
                if let Some(id) = id {
                    line(&mut out, id, n.as_bytes());
                }
                continue;
            }
            line(&mut out, &r.target, name);
            if let Some(peeled) = r.object {
                out.push(b'^');
                out.extend_from_slice(peeled);
                out.push(b'\n');
            }
        }
    }
    for (n, id) in next {
        if let Some(id) = id {
            line(&mut out, id, n.as_bytes());
        }
    }
    std::io::Write::write_all(&mut lock, &out).map_err(|e| failed(e.into()))?;
    // Renamed into place whole, as git and gix write it.
    lock.commit().map_err(|e| failed(e.into()))?;
    // gix keeps the file it read last and rereads it only when its modification time differs,
    // which a rewrite within the same clock tick does not change: read it again now, or the next
    // transaction here would rewrite packed-refs from the old copy and drop these refs.
    repo.repo.refs.force_refresh_packed_buffer().map_err(|e| failed(e.into()))?;
    Ok(())
}

/// Whether the ref `name` has a loose file or a loose lock in the common git dir `common`.
fn loose_or_locked(common: &std::path::Path, name: &str) -> bool {
    let path = common.join(name);
    let mut lock = path.clone().into_os_string();
    lock.push(".lock");
    std::fs::symlink_metadata(&path).is_ok() || std::fs::symlink_metadata(lock).is_ok()
}

/// Delete a ref only if it still points at `expected` (compare-and-swap), with its reflog, the
/// way git's own `update-ref -d` does: under the ref's lock, its `packed-refs` line goes first —
/// that file read and rewritten under its own lock — then the loose file, so the old packed value
/// never shows through. (A gix transaction that only deletes reads `packed-refs` before it takes
/// that file's lock, and would write back a copy without the refs another writer packed
/// meanwhile — as a pull does.)
pub fn delete(repo: &Repo, name: &str, expected: ObjectId) -> Result<()> {
    use gix::lock::acquire::Fail;
    let full = full_name(name)?;
    let moved = || Error::refused(format!("cannot delete {name}: it moved meanwhile")).hint("look again");
    let common = &repo.common_dir;
    let path = common.join(name);
    let refs_dir = common.join("refs");
    let wait = Fail::AfterDurationWithBackoff(Duration::from_millis(1000));
    let held = gix::lock::Marker::acquire_to_hold_resource(&path, wait, Some(refs_dir.clone()), 0).map_err(|e| {
        Error::refused(format!("cannot delete {name}: {e}")).with_source(e).hint("another command is moving it; rerun")
    })?;
    let loose = match repo.repo.refs.try_find_loose(full.as_ref()) {
        Ok(Some(r)) => match r.target {
            gix::refs::Target::Object(id) => Some(id),
            gix::refs::Target::Symbolic(_) => return Err(moved()),
        },
        Ok(None) => None,
        Err(e) => return Err(Error::internal(format!("cannot read {name}: {e}")).with_source(e)),
    };
    let Some((lock, packed)) = lock_packed(repo)? else {
        return Err(locked(name, &common.join("packed-refs.lock")));
    };
    let buffer = match packed {
        Packed::Read(buffer) => buffer,
        Packed::Unsorted => {
            drop((lock, held));
            return delete_in_transaction(repo, name, expected);
        }
    };
    let in_packed = match &buffer {
        Some(b) => b.try_find(name).map_err(|e| packed_failed(&common.join("packed-refs"), e))?.map(|r| r.target()),
        None => None,
    };
    if loose.or(in_packed) != Some(expected) {
        return Err(moved());
    }
    if in_packed.is_some() {
        write_packed(repo, lock, buffer.as_ref(), &[(name, None)])?;
    } else {
        drop(lock);
    }
    crate::failpoint::hit("ref-unpacked");
    let logs = common.join("logs").join(name);
    for file in [&path, &logs] {
        match std::fs::remove_file(file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::internal(format!("cannot delete {}: {e}", file.display())).with_source(e))
            }
            _ => {}
        }
    }
    drop(held);
    // The folders the ref and its log leave empty go too, as git removes them (`refs/` stays).
    for (file, top) in [(&path, refs_dir), (&logs, common.join("logs").join("refs"))] {
        let mut dir = file.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(&top) && *d != top.as_path()) {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
    Ok(())
}

/// [`delete`] through a gix ref transaction, for a `packed-refs` that is not sorted and peeled.
fn delete_in_transaction(repo: &Repo, name: &str, expected: ObjectId) -> Result<()> {
    use gix::refs::transaction::{Change, PreviousValue, RefEdit, RefLog};
    let full = full_name(name)?;
    repo.repo
        .edit_reference(RefEdit {
            change: Change::Delete {
                expected: PreviousValue::MustExistAndMatch(gix::refs::Target::Object(expected)),
                log: RefLog::AndReference,
            },
            name: full,
            deref: false,
        })
        .map_err(|e| {
            Error::refused(format!("cannot delete {name}: {e}")).with_source(e).hint("it moved meanwhile; look again")
        })?;
    Ok(())
}

/// How long a `packed-refs.lock` may sit untouched before it is taken for one a killed writer left
/// behind: git's own writers wait for it at most `core.packedRefsTimeout` (a second by default).
const STALE_LOCK: Duration = Duration::from_secs(5);

/// `packed-refs.lock` of the repository, when it exists and is older than [`STALE_LOCK`]
/// (`fresh`: whatever its age). gix takes that lock for every compare-and-swap of a ref while
/// `packed-refs` exists, so one left by a process killed mid-update (`kill -9`) blocks every ref
/// update until it is removed — as it blocks git's own.
pub(crate) fn packed_lock(g: &gix::Repository, fresh: bool) -> Option<std::path::PathBuf> {
    lock_left(g, "packed-refs.lock", fresh)
}

/// `file` of the repository's common dir (absolute, for messages), when it exists and is older
/// than [`STALE_LOCK`] (`fresh`: whatever its age). Looked at by gix's own path first: it is made
/// absolute only once found (the hooks ask on every commit).
fn lock_left(g: &gix::Repository, file: &str, fresh: bool) -> Option<std::path::PathBuf> {
    let age = std::fs::metadata(g.common_dir().join(file)).ok()?.modified().ok()?.elapsed().unwrap_or_default();
    (fresh || age > STALE_LOCK).then(|| super::absolute(g.common_dir()).join(file))
}

/// The lock file that blocks updating the ref `name`: `packed-refs.lock`, or the ref's own
/// `<name>.lock`, when it is there — however new (`fresh`), or old enough to be a killed writer's
/// (see [`packed_lock`]).
pub(crate) fn blocking_lock(
    g: &gix::Repository,
    name: &gix::refs::FullName,
    fresh: bool,
) -> Option<std::path::PathBuf> {
    packed_lock(g, fresh).or_else(|| lock_left(g, &format!("{}.lock", name.as_bstr().to_str_lossy()), fresh))
}

/// The `packed-refs.lock` of the repository when it is there and (unless `fresh`) old enough to be
/// a killed writer's (see [`packed_lock`]).
pub fn packed_lock_path(repo: &Repo, fresh: bool) -> Option<std::path::PathBuf> {
    packed_lock(&repo.repo, fresh)
}

/// The refusal for updating `what` while a `packed-refs.lock` a killed writer left behind (see
/// [`packed_lock`]) blocks every ref update: `None` when there is none.
pub fn stale_packed_lock(repo: &Repo, what: &str) -> Option<Error> {
    packed_lock(&repo.repo, false).map(|lock| locked(what, &lock))
}

/// The refusal for updating `what` while any `packed-refs.lock` is there, however new.
pub fn packed_lock_now(repo: &Repo, what: &str) -> Option<Error> {
    packed_lock(&repo.repo, true).map(|lock| locked(what, &lock))
}

/// The refusal for an update of `name` blocked by the lock file `lock`, with git's advice.
pub(crate) fn locked(name: &str, lock: &std::path::Path) -> Error {
    Error::refused(format!(
        "cannot update {name}: {} exists, so a git command is updating refs in this repository",
        lock.display()
    ))
    .hint(format!(
        "wait for it to finish and rerun; if no git process is running in this repository (one killed earlier leaves it behind), remove {} (as git itself advises)",
        lock.display()
    ))
}

/// Move a ref from `expected` to `new` (compare-and-swap) with a reflog `message`, logged as the
/// configured committer or `$USER <$USER@host>`. `Ok(false)` when the ref no longer points at
/// `expected` (someone moved it meanwhile).
pub fn move_ref(repo: &Repo, name: &str, expected: ObjectId, new: ObjectId, message: &str) -> Result<bool> {
    let full = full_name(name)?;
    let writer = super::identity::with_identity(repo)?;
    match update_in(&writer, &full, Expect::At(expected), new, message, Writer::Configured) {
        Ok(_) => Ok(true),
        Err(_) if repo.ref_id(name)? != Some(expected) => Ok(false),
        Err(e) => Err(match blocking_lock(&repo.repo, &full, true) {
            Some(lock) => locked(name, &lock),
            None => Error::internal(format!("cannot update {name}: {e}")).with_source(e),
        }),
    }
}

/// The update [`update_with_retry`]'s closure asks for, or its answer without one.
pub enum Step<T> {
    /// Nothing to write: return this.
    Done(T),
    /// Move the ref from `expected` to `new` with reflog `message` by `writer`; then return `moved`.
    Update {
        expected: Expect,
        new: ObjectId,
        message: String,
        writer: Option<Signature>,
        moved: T,
        /// What to return when a creation finds the ref already holding `new`; `None`: plan again.
        already: Option<T>,
    },
}

/// How [`update_with_retry`] retries.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Most compare-and-swap attempts.
    pub tries: u32,
    /// Errors that are neither a lost race nor a held lock: [`Odd::Count`] retries that many in
    /// all; [`Odd::FirstAttempts`] retries them only in the first attempts; [`Odd::Always`] treats
    /// them like a lost race.
    pub odd: Odd,
    /// The pause after a lost race.
    pub backoff: Backoff,
}

/// See [`Retry::odd`].
#[derive(Debug, Clone, Copy)]
pub enum Odd {
    Count(u32),
    FirstAttempts(u32),
    Always,
}

/// See [`Retry::backoff`].
#[derive(Debug, Clone, Copy)]
pub enum Backoff {
    /// A random pause of 20 µs up to 100 µs + 200 µs per attempt so far (at most 40 attempts' worth).
    Growing,
    /// A random pause of 200 µs to 3 ms.
    Flat,
}

impl Backoff {
    pub(crate) fn pause(self, attempt: u32) {
        let micros = match self {
            Backoff::Growing => fastrand::u64(20..=100 + 200 * u64::from(attempt.min(40))),
            Backoff::Flat => fastrand::u64(200..3000),
        };
        std::thread::sleep(Duration::from_micros(micros));
    }
}

/// Why [`update_with_retry`] gave up.
#[derive(Debug)]
pub enum GaveUp {
    /// Every attempt lost the race; the last error, if an attempt failed with one.
    Exhausted(Option<UpdateError>),
    /// An error that is not a lost race, more often than [`Retry::odd`] allows.
    Failed(UpdateError),
}

/// Compare-and-swap `name` with retry: `plan` is asked (with the attempt number) what to write
/// given the ref's current value, which it reads itself; its update is tried; on a lost race the
/// pause of `retry.backoff` and `plan` is asked again. Errors of `plan` end it at once.
pub fn update_with_retry<T>(
    repo: &Repo,
    name: &str,
    retry: Retry,
    plan: impl FnMut(u32) -> Result<Step<T>>,
) -> Result<std::result::Result<T, GaveUp>> {
    update_with_retry_in(&repo.repo, name, retry, plan)
}

/// [`update_with_retry`] on the gix handle `g` (one with an identity set in memory).
pub(crate) fn update_with_retry_in<T>(
    g: &gix::Repository,
    name: &str,
    retry: Retry,
    mut plan: impl FnMut(u32) -> Result<Step<T>>,
) -> Result<std::result::Result<T, GaveUp>> {
    let full = full_name(name)?;
    let mut odd = 0;
    let mut last = None;
    for attempt in 0..retry.tries {
        let (expected, new, message, writer, moved, already) = match plan(attempt)? {
            Step::Done(t) => return Ok(Ok(t)),
            Step::Update { expected, new, message, writer, moved, already } => {
                (expected, new, message, writer, moved, already)
            }
        };
        let who = match &writer {
            Some(sig) => Writer::As(sig),
            None => Writer::Configured,
        };
        match update_in(g, &full, expected, new, &message, who) {
            Ok(true) => return Ok(Ok(moved)),
            Ok(false) => match already {
                Some(t) => return Ok(Ok(t)),
                // Another writer created the ref with the very same object: plan again on it.
                None => continue,
            },
            Err(e) => {
                if let Some(lock) = blocking_lock(g, &full, false) {
                    // Left by a killed writer: waiting will not free it.
                    return Err(locked(name, &lock));
                }
                if !e.transient {
                    let give_up = match retry.odd {
                        Odd::Count(n) => {
                            odd += 1;
                            odd > n
                        }
                        Odd::FirstAttempts(n) => attempt >= n,
                        Odd::Always => false,
                    };
                    if give_up {
                        return match blocking_lock(g, &full, true) {
                            Some(lock) => Err(locked(name, &lock)),
                            None => Ok(Err(GaveUp::Failed(e))),
                        };
                    }
                }
                last = Some(e);
                retry.backoff.pause(attempt);
            }
        }
    }
    // A lock file is still in the way after every attempt: say which, not "lost the race".
    if let Some(lock) = blocking_lock(g, &full, true) {
        return Err(locked(name, &lock));
    }
    Ok(Err(GaveUp::Exhausted(last)))
}

/// The refusal for updating `name` while a lock file (its own or `packed-refs.lock`) is there.
pub fn blocked(repo: &Repo, name: &str) -> Option<Error> {
    let full = full_name(name).ok()?;
    blocking_lock(&repo.repo, &full, true).map(|lock| locked(name, &lock))
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
