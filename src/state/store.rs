//! Reading and writing op-logs with gix: compare-and-swap appends with retry, history, validation,
//! and the deterministic merge of two diverged chains.
//!
//! ### Performance
//! Reading current state is one ref lookup, one commit, one tree and the tip's blobs
//! ([`Store::read_state`]: exactly one blob, `state.json`; [`Store::read`]: `op.json` too) — no
//! history walk. An append writes two blobs, a tree and a commit and moves the ref once (plus
//! retries on lost races).
//!
//! ### Identity
//! Every state commit is made by the fixed identity `git-boulder <git-boulder@localhost>` with the
//! op's time, and ref updates log as that identity too: no git identity needs to be configured.
//!
//! ### Merges
//! Every stored state is the replay of all the ops reachable from its commit, in the total order
//! `(lamport, at, actor, op commit id)` (see [`crate::state::op::replay`]). An append keeps that
//! true because its clock is one more than everything it has seen; [`Store::merge`] keeps it true
//! by construction. So two diverged chains merge into the same `state.json` whatever the order or
//! grouping of merges, and the same pair always gives the same merge commit.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::git::chain::ChainReader;
use crate::git::identity;
use crate::git::objects::{Batch, CommitFiles, EntryKind, Failure, Fresh, Kind, Objects, TreeEntry};
use crate::git::refs::{self, Backoff, Expect, GaveUp, Odd, Retry, Step};
use crate::git::{ObjectId, Repo};
use crate::state::op::{self, MergeData, Op, OpError, Payload, State, StateError, MERGE_ACTOR, MERGE_KIND};
use crate::state::{BOULDERS, STREAMS};

/// How often an append tries a compare-and-swap before giving up.
const MAX_TRIES: u32 = 400;
/// How often an append retries an error that is neither a lost race nor a held lock.
const MAX_ODD_TRIES: u32 = 3;
/// Most new commits one validation checks (what a pull adds over the state it already holds):
/// a bound on the time and memory a hostile remote can make a pull take, counted while the
/// commits are listed (from their headers, before any op or state is read), and far above any
/// real history (twice the ops of 100,000 stories recorded one by one). The history already held
/// is not walked again, and a tip refused once is not walked again either (see `sync`).
pub const MAX_NEW_COMMITS: usize = 200_000;
/// Largest op commit (headers and message) read; checked before the object is read.
pub const MAX_COMMIT_BYTES: u64 = 64 * 1024;
/// Largest op commit tree (it holds two entries).
pub const MAX_TREE_BYTES: u64 = 4 * 1024;
/// Largest `op.json` read; checked before the blob is read.
pub const MAX_OP_BYTES: u64 = 1024 * 1024;
/// Largest `state.json` read; checked before the blob is read.
pub const MAX_STATE_BYTES: u64 = 4 * 1024 * 1024;
/// The identity of every state commit: state never needs a configured git identity.
pub use crate::git::identity::{COMMITTER_EMAIL, COMMITTER_NAME};

/// Why an op-log commit, or a chain of them, is refused: the message names the commit (or the
/// tip) and the problem.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// An object of the commit could not be read (`what`: the commit, its tree, a file).
    #[error("commit {commit}: {what}: {source}")]
    Unreadable { commit: ObjectId, what: &'static str, source: Failure },
    /// The commit, its tree or its parents could not be read.
    #[error("commit {commit}: {source}")]
    Broken { commit: ObjectId, source: Failure },
    #[error("commit {commit}: {what} is {size} bytes, more than the limit of {limit}")]
    TooLarge { commit: ObjectId, what: &'static str, size: u64, limit: u64 },
    #[error("commit {commit}: {name} is not a regular file")]
    NotAFile { commit: ObjectId, name: String },
    #[error("commit {commit}: its tree must hold exactly op.json and state.json, found {names:?}")]
    Files { commit: ObjectId, names: Vec<String> },
    #[error("commit {commit}: no {name}")]
    NoFile { commit: ObjectId, name: &'static str },
    /// `op.json` or `state.json` is not the JSON of its type.
    #[error("commit {commit}: {file}: {source}")]
    Json { commit: ObjectId, file: &'static str, source: serde_json::Error },
    #[error("commit {commit}: op.json: {source}")]
    InvalidOp { commit: ObjectId, source: OpError },
    #[error("commit {commit}: state.json: {source}")]
    InvalidState { commit: ObjectId, source: StateError },
    #[error("cannot walk {tip}: {source}")]
    Walk { tip: ObjectId, source: Failure },
    #[error("{tip}: more than {MAX_NEW_COMMITS} new commits, too many to check in one pull")]
    TooManyToCheck { tip: ObjectId },
    #[error("{id} is a {kind}, not an op commit")]
    NotACommit { id: ObjectId, kind: Kind },
    #[error("commit {commit} is {size} bytes, more than the limit of {MAX_COMMIT_BYTES}")]
    CommitTooLarge { commit: ObjectId, size: u64 },
    #[error("commit {commit}: a merge op in a commit with {parents} parent(s)")]
    MergeOpInLine { commit: ObjectId, parents: usize },
    #[error("commit {commit}: op clock {clock} does not follow its parent's clock {parent}")]
    Clock { commit: ObjectId, clock: u64, parent: u64 },
    /// The commit's op does not apply to its parent's state.
    #[error("commit {commit}: {source}")]
    Refused { commit: ObjectId, source: OpError },
    #[error("commit {commit}: state.json does not follow from its op")]
    NotItsOpsState { commit: ObjectId },
    #[error("commit {commit}: a commit with two parents must hold a merge op")]
    NotAMergeOp { commit: ObjectId },
    /// The merge commit its parents make could not be computed.
    #[error("commit {commit}: {source}")]
    Recompute { commit: ObjectId, source: Error },
    #[error(
        "commit {commit}: state.json does not follow from its op: it is not the deterministic merge of its parents"
    )]
    NotTheMerge { commit: ObjectId },
    #[error("commit {commit}: merges two commits where one contains the other")]
    RedundantMerge { commit: ObjectId },
    #[error("commit {commit}: {parents} parents; op-log commits have at most two")]
    TooManyParents { commit: ObjectId, parents: usize },
    /// Replaying the ops of two sides failed.
    #[error("merging {ours} and {theirs}: {source}")]
    Merge { ours: ObjectId, theirs: ObjectId, source: OpError },
}

/// One op-log commit read back: its id, its op and the state after it.
#[derive(Debug, Clone)]
pub struct Entry<S> {
    pub commit: ObjectId,
    pub op: Op,
    pub state: S,
}

/// New commits a validation checks before it reads their files on a second thread.
const CHECK_AHEAD_AFTER: usize = 512;
/// How many commits' files that thread reads ahead of the replay, at most.
const CHECK_AHEAD: usize = 1024;
/// Commits whose files that thread hands on at a time.
const CHECK_BATCH: usize = 64;

/// How many bytes of replayed states validation keeps in memory for commits whose children are
/// still to be checked (a chain that forks often keeps one per open fork); past it, a child
/// reads its parent's state back.
const KEPT_STATE_BYTES: usize = 64 * 1024 * 1024;

/// What a validation learned on the way ([`Store::validate_tip`]).
struct Checked<S> {
    /// The state after the tip, when the tip was one of the commits checked: what its
    /// `state.json` holds (a strict read of it gives the same value).
    state: Option<S>,
    /// The tip adds commits over the trusted tips and descends from one of them.
    extends: bool,
}

/// A commit a validation checks: its id and parents.
struct NewCommit {
    id: ObjectId,
    parents: Vec<ObjectId>,
    /// Its place in the order the walk met the commits.
    seq: usize,
}

/// The ids of `op.json` and `state.json` in a commit's tree, checked ([`Store::tree_files`]).
type TreeFiles = std::result::Result<(ObjectId, ObjectId), Box<ChainError>>;

/// The op of a commit being validated and the id of its `state.json`.
type OpFiles = std::result::Result<(Op, ObjectId), ChainError>;

/// A [`Failure`] of a validation itself (not of the object store).
fn failure_of(what: impl std::fmt::Display) -> Failure {
    crate::git::objects::failure(what.to_string())
}

/// One commit of an op-log's history.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub commit: ObjectId,
    pub op: Op,
    /// A merge commit (two parents, op kind `merge`).
    pub is_merge: bool,
}

/// What [`Store::absorb`] did with a fetched tip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absorbed {
    /// The ref did not exist; it now points at the fetched tip.
    Created,
    /// The ref already contained the fetched tip; nothing changed.
    UpToDate,
    /// The fetched tip contained the ref; the ref moved forward to it.
    FastForward,
    /// Both had ops of their own; the ref now points at their deterministic merge.
    Merged,
}

/// Reads and appends op-logs in one repository as one actor.
pub struct Store<'r> {
    pub repo: &'r Repo,
    /// This machine's actor id, written into every op it appends: read (or made) at the first
    /// append, so that reading state writes nothing ([`Store::actor`]).
    actor: std::cell::OnceCell<String>,
}

fn internal(context: impl std::fmt::Display, e: impl std::fmt::Display) -> Error {
    Error::internal(format!("{context}: {e}"))
}

/// The actor id of this machine: `git config boulder.actor`, else `$GIT_COMMON_DIR/boulder/actor`
/// (made once with a random id; processes racing to make it agree on the first one written).
pub fn actor_id(repo: &Repo) -> Result<String> {
    if let Some(a) = repo.config_string("boulder.actor").filter(|a| !a.is_empty()) {
        op::valid_actor(&a)
            .and_then(|()| if a == MERGE_ACTOR { Err(OpError::ReservedActor { actor: a.clone() }) } else { Ok(()) })
            .map_err(|e| {
                Error::usage(format!("git config boulder.actor: {e}"))
                    .hint("set it to a short name for this machine: git config boulder.actor my-laptop")
                    .with_source(e)
            })?;
        return Ok(a);
    }
    let dir = repo.boulder_dir();
    let path = dir.join("actor");
    if let Some(id) = read_actor(&path)? {
        return Ok(id);
    }
    std::fs::create_dir_all(&dir).map_err(|e| internal(format_args!("cannot create {}", dir.display()), e))?;
    let id = format!("{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff);
    let tmp = dir.join(format!("actor.{}.{:08x}.tmp", std::process::id(), fastrand::u32(..)));
    std::fs::write(&tmp, format!("{id}\n")).map_err(|e| internal("cannot write the actor id", e))?;
    // Publishing a complete file with a hard link is atomic and fails when another process won
    // the race: then its id is the one. Where hard links are not supported, an exclusive create.
    let won = match std::fs::hard_link(&tmp, &path) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            if std::fs::read_to_string(&path).is_ok_and(|t| t.trim().is_empty()) {
                // An empty leftover of a crash: replace it.
                std::fs::rename(&tmp, &path).is_ok()
            } else {
                false
            }
        }
        Err(_) => {
            use std::io::Write;
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut f) => f.write_all(format!("{id}\n").as_bytes()).is_ok(),
                Err(_) => false,
            }
        }
    };
    let _ = std::fs::remove_file(&tmp);
    if won {
        return Ok(id);
    }
    // Another process won; its file may be a moment from complete (exclusive-create fallback).
    for _ in 0..100 {
        if let Some(id) = read_actor(&path)? {
            return Ok(id);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Err(Error::internal(format!("cannot read the actor id from {}", path.display())))
}

fn read_actor(path: &std::path::Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(None),
        Ok(text) => {
            let id = text.trim().to_string();
            op::valid_actor(&id).map_err(|e| {
                Error::usage(format!("{}: {e}", path.display()))
                    .hint(format!("delete {} and a new actor id is made", path.display()))
            })?;
            Ok(Some(id))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(internal(format_args!("cannot read {}", path.display()), e)),
    }
}

/// The part of a ref name after the stream or boulder prefix, if it has one.
fn leaf(refname: &str) -> Option<&str> {
    refname.strip_prefix(STREAMS).or_else(|| refname.strip_prefix(BOULDERS)).filter(|l| !l.is_empty())
}

/// The later of two RFC 3339 times (as instants; equal instants by text), whatever the argument order.
fn later<'a>(a: &'a str, b: &'a str) -> &'a str {
    let key = |t: &'a str| (crate::time::parse_rfc3339(t).unwrap_or(f64::NEG_INFINITY), t);
    let (ka, kb) = (key(a), key(b));
    match ka.0.partial_cmp(&kb.0) {
        Some(std::cmp::Ordering::Greater) => a,
        Some(std::cmp::Ordering::Less) => b,
        _ => std::cmp::max(ka.1, kb.1),
    }
}

/// The result of computing a merge, before anything is written.
enum Plan<S> {
    /// One side contains the other (or they are the same): this is the result.
    Contained(ObjectId),
    /// A merge commit is needed.
    Merge { op: Op, state: S, parents: [ObjectId; 2] },
}

impl<'r> Store<'r> {
    pub fn new(repo: &'r Repo) -> Result<Self> {
        Ok(Store { repo, actor: std::cell::OnceCell::new() })
    }

    /// A store appending as `actor` (several actors in one repository: tests, tools).
    pub fn with_actor(repo: &'r Repo, actor: String) -> Self {
        Store { repo, actor: actor.into() }
    }

    /// This machine's actor id ([`actor_id`]), made the first time one is needed.
    pub fn actor(&self) -> Result<String> {
        if let Some(a) = self.actor.get() {
            return Ok(a.clone());
        }
        let a = actor_id(self.repo)?;
        Ok(self.actor.get_or_init(|| a).clone())
    }

    /// This machine's actor id if it has one, without making one (a machine that has none has
    /// written no op); `None` too when the configured one is invalid.
    pub fn known_actor(&self) -> Option<String> {
        if let Some(a) = self.actor.get() {
            return Some(a.clone());
        }
        let configured = self.repo.config_string("boulder.actor").filter(|a| !a.is_empty());
        let made = || read_actor(&self.repo.boulder_dir().join("actor")).ok().flatten();
        if configured.is_some() || made().is_some() {
            self.actor().ok()
        } else {
            None
        }
    }

    fn git(&self) -> Objects<'r> {
        self.repo.objects()
    }

    /// The two blobs of an op commit, checking its tree holds exactly `op.json` and `state.json`
    /// as regular files. `want_op` false skips reading `op.json`.
    fn blobs(&self, commit: ObjectId, want_op: bool) -> std::result::Result<(Option<Vec<u8>>, Vec<u8>), ChainError> {
        // Sizes are checked from the object headers before anything is read whole: fetched
        // state may be hostile.
        let bounded = |id: ObjectId, limit: u64, what: &'static str| -> std::result::Result<(), ChainError> {
            let (_, size) = self.git().header(id).map_err(|source| ChainError::Unreadable { commit, what, source })?;
            if size > limit {
                return Err(ChainError::TooLarge { commit, what, size, limit });
            }
            Ok(())
        };
        bounded(commit, MAX_COMMIT_BYTES, "the commit")?;
        let (tree_id, _) = self.git().commit_parts(commit).map_err(|source| ChainError::Broken { commit, source })?;
        bounded(tree_id, MAX_TREE_BYTES, "its tree")?;
        let entries = self.git().entries(tree_id).map_err(|source| ChainError::Broken { commit, source })?;
        let (op_id, state_id) = Self::op_and_state(commit, &entries)?;
        let blob = |id: ObjectId, name: &'static str, limit: u64| -> std::result::Result<Vec<u8>, ChainError> {
            bounded(id, limit, name)?;
            self.git().read(id).map_err(|source| ChainError::Unreadable { commit, what: name, source })
        };
        let op = if want_op { Some(blob(op_id, "op.json", MAX_OP_BYTES)?) } else { None };
        Ok((op, blob(state_id, "state.json", MAX_STATE_BYTES)?))
    }

    /// The ids of `op.json` and `state.json` in the tree of `commit` whose entries are `entries`:
    /// it holds exactly those two files, as regular files.
    fn op_and_state(commit: ObjectId, entries: &[TreeEntry]) -> std::result::Result<(ObjectId, ObjectId), ChainError> {
        let mut names = Vec::with_capacity(entries.len());
        for e in entries {
            if e.kind != EntryKind::Blob {
                return Err(ChainError::NotAFile { commit, name: e.name.clone() });
            }
            names.push(e.name.clone());
        }
        names.sort();
        if names != ["op.json", "state.json"] {
            return Err(ChainError::Files { commit, names });
        }
        let id_of = |name: &'static str| {
            entries.iter().find(|e| e.name == name).map(|e| e.id).ok_or(ChainError::NoFile { commit, name })
        };
        Ok((id_of("op.json")?, id_of("state.json")?))
    }

    fn parse_op(commit: ObjectId, bytes: &[u8]) -> std::result::Result<Op, ChainError> {
        let op: Op =
            serde_json::from_slice(bytes).map_err(|source| ChainError::Json { commit, file: "op.json", source })?;
        op.validate().map_err(|source| ChainError::InvalidOp { commit, source })?;
        Ok(op)
    }

    fn parse_state<S: State>(commit: ObjectId, bytes: &[u8]) -> std::result::Result<S, ChainError> {
        let state: S =
            serde_json::from_slice(bytes).map_err(|source| ChainError::Json { commit, file: "state.json", source })?;
        state.validate().map_err(|source| ChainError::InvalidState { commit, source })?;
        Ok(state)
    }

    /// Read `op.json` and `state.json` of one op commit, strictly. The error names the commit.
    pub fn entry<S: State>(&self, commit: ObjectId) -> std::result::Result<Entry<S>, ChainError> {
        let (op, state) = self.blobs(commit, true)?;
        let op = Self::parse_op(commit, &op.unwrap_or_default())?;
        let state = Self::parse_state(commit, &state)?;
        Ok(Entry { commit, op, state })
    }

    fn invalid(refname: &str, e: ChainError) -> Error {
        Error::usage(format!("{refname} holds invalid state: {e}"))
            .hint("see `git boulder doctor`")
            .hint(format!("`git update-ref -d {refname}` drops it"))
            .with_source(e)
    }

    /// The tip of an op-log and the state there, or `None` when the ref does not exist.
    pub fn read<S: State>(&self, refname: &str) -> Result<Option<Entry<S>>> {
        let Some(tip) = self.repo.ref_id(refname)? else { return Ok(None) };
        self.entry(tip).map(Some).map_err(|e| Self::invalid(refname, e))
    }

    /// The state at the tip of an op-log (and the tip), reading exactly one blob: the fastest way
    /// to answer "what is the state now".
    pub fn read_state<S: State>(&self, refname: &str) -> Result<Option<(ObjectId, S)>> {
        let Some(tip) = self.repo.ref_id(refname)? else { return Ok(None) };
        let (_, state) = self.blobs(tip, false).map_err(|e| Self::invalid(refname, e))?;
        Ok(Some((tip, Self::parse_state(tip, &state).map_err(|e| Self::invalid(refname, e))?)))
    }

    /// Append one op (compare-and-swap with retry on a lost race).
    pub fn append<S: State>(&self, refname: &str, op: S::Op) -> Result<Entry<S>> {
        let entry = self.append_if::<S>(refname, |_| Ok(Some(op.clone())))?;
        entry.ok_or_else(|| Error::internal("append: nothing was appended"))
    }

    /// Append an op given as its kind and JSON data, read exactly as an op read from a ref is
    /// (for tools and tests that write ops from outside; git-boulder itself writes typed ops).
    /// An unknown kind or bad data is a usage error and nothing is written.
    pub fn append_raw<S: State>(&self, refname: &str, kind: &str, data: serde_json::Value) -> Result<Entry<S>> {
        if kind == MERGE_KIND {
            return Err(Error::usage(format!("{refname}: merge ops are written only by merging two op-logs")));
        }
        let data = if data.is_null() { serde_json::json!({}) } else { data };
        let op =
            Op { v: 1, kind: kind.to_string(), lamport: 1, at: crate::time::now_rfc3339(), actor: self.actor()?, data };
        op.validate().map_err(|e| Error::usage(format!("{refname}: {e}")).with_source(e))?;
        let typed = S::Op::parse(&op).map_err(|e| Error::usage(format!("{refname}: {e}")).with_source(e))?;
        self.append::<S>(refname, typed)
    }

    /// Append the op `decide` returns for the current state (asked again, with the fresh state,
    /// after each lost race), or nothing when it returns `None`.
    ///
    /// An op the state refuses (bad data) is a usage error and nothing is written.
    pub fn append_if<S: State>(
        &self,
        refname: &str,
        mut decide: impl FnMut(Option<&S>) -> Result<Option<S::Op>>,
    ) -> Result<Option<Entry<S>>> {
        let retry = Retry { tries: MAX_TRIES, odd: Odd::Count(MAX_ODD_TRIES), backoff: Backoff::Growing };
        // A lost race, or another writer holding the ref's lock, is retried on the fresh tip; so
        // is a creation that found another writer's very same commit (same op, same millisecond):
        // that op is theirs, and `decide` is asked again on the fresh state.
        let appended = refs::update_with_retry(self.repo, refname, retry, |_| {
            let tip = self.read::<S>(refname)?;
            let Some(typed) = decide(tip.as_ref().map(|e| &e.state))? else { return Ok(Step::Done(None)) };
            let objects = self.git();
            let entry = self.next_entry(refname, tip.as_ref(), typed, &objects.fresh())?;
            Ok(Step::Update {
                expected: Expect::from_tip(tip.as_ref().map(|e| e.commit)),
                new: entry.commit,
                message: format!("boulder: {}", entry.op.kind),
                writer: Some(identity::state_signature(&entry.op.at)),
                moved: Some(entry),
                already: None,
            })
        })?;
        appended.map_err(|e| match e {
            GaveUp::Failed(e) => internal(format_args!("cannot update {refname}"), e),
            GaveUp::Exhausted(_) => {
                Error::refused(format!("cannot update {refname}: lost the race to other writers {MAX_TRIES} times"))
                    .hint("something is writing to it in a tight loop; try again")
            }
        })
    }

    /// The entry `typed` makes on top of `tip` of the op-log `refname`: the op completed, clocked
    /// and checked, the state after it, and its commit, whose objects go through `fresh`.
    ///
    /// An op the state refuses (bad data) is a usage error and nothing is written.
    fn next_entry<S: State>(
        &self,
        refname: &str,
        tip: Option<&Entry<S>>,
        mut typed: S::Op,
        fresh: &Fresh,
    ) -> Result<Entry<S>> {
        S::complete_op(leaf(refname), &mut typed);
        let (kind, data) = (typed.kind().to_string(), typed.data());
        let lamport = tip.map_or(0, |e| e.op.lamport.max(e.state.lamport())) + 1;
        let op = Op { v: 1, kind, lamport, at: crate::time::now_rfc3339(), actor: self.actor()?, data };
        op.validate().map_err(|e| Error::usage(format!("{refname}: {e}")).with_source(e))?;
        let mut state = tip.map(|e| e.state.clone()).unwrap_or_default();
        state.apply(&op).map_err(|e| Error::usage(format!("{refname}: {e}")).with_source(e))?;
        state.set_lamport(op.lamport);
        state.validate().map_err(|e| {
            Error::internal(format!("{refname}: {} op made an invalid state: {e}", op.kind)).with_source(e)
        })?;
        let parents: Vec<ObjectId> = tip.map(|e| e.commit).into_iter().collect();
        let commit = Self::fresh_op_commit(fresh, &op, &state, &parents)?;
        Ok(Entry { commit, op, state })
    }

    /// Plan appending `op` to the op-log `refname` whose tip is `tip` (read with [`Store::read`]):
    /// the entry it makes, whose objects go into `batch`. Nothing moves until [`Store::swap`].
    pub fn plan_append<S: State>(
        &self,
        refname: &str,
        tip: Option<&Entry<S>>,
        op: S::Op,
        batch: &Batch,
    ) -> Result<Entry<S>> {
        let objects = self.git();
        self.next_entry(refname, tip, op, &objects.fresh_in(batch))
    }

    /// Move the op-log `refname` from `expected` to `entry` (planned with [`Store::plan_append`],
    /// its objects written), by one compare-and-swap: false when it moved meanwhile or another
    /// writer holds its lock (then append again with [`Store::append_if`]).
    pub fn swap<S: State>(&self, refname: &str, expected: Option<ObjectId>, entry: &Entry<S>) -> Result<bool> {
        let moved = refs::update(
            self.repo,
            refname,
            Expect::from_tip(expected),
            entry.commit,
            &format!("boulder: {}", entry.op.kind),
            refs::Writer::As(&identity::state_signature(&entry.op.at)),
        )?;
        Ok(moved.is_ok())
    }

    /// Write the blobs, tree and commit of one new op through `fresh`; returns the commit id.
    fn fresh_op_commit<S: State>(fresh: &Fresh, op: &Op, state: &S, parents: &[ObjectId]) -> Result<ObjectId> {
        let (op_json, state_json) = (Self::json(op, "op.json")?, Self::json(state, "state.json")?);
        let put = |bytes: &[u8], name: &str| -> Result<ObjectId> {
            fresh.blob(bytes).map_err(|e| internal(format_args!("cannot write {name}"), e))
        };
        let files = [("op.json", put(&op_json, "op.json")?), ("state.json", put(&state_json, "state.json")?)];
        let tree_id = fresh.flat_tree(&files).map_err(|e| internal("cannot write a state object", e))?;
        let sig = identity::state_signature(&op.at);
        fresh
            .commit(tree_id, parents, &sig, &sig, &Self::message(op))
            .map_err(|e| internal("cannot write a state object", e))
    }

    /// Build (and when `write`, store) the blobs, tree and commit of one op; returns the commit id.
    /// For a merge commit, the same on every machine, which may already be there and is looked up
    /// first, and for checking a fetched op's commit; an appended op's objects, new by
    /// construction, go through [`Store::fresh_op_commit`].
    fn write_op_commit<S: State>(&self, op: &Op, state: &S, parents: &[ObjectId], write: bool) -> Result<ObjectId> {
        let repo = self.git();
        let (op_json, state_json) = (Self::json(op, "op.json")?, Self::json(state, "state.json")?);
        let blob = |bytes: &[u8], name: &str| -> Result<ObjectId> {
            if write {
                repo.blob(bytes, true).map_err(|e| internal(format_args!("cannot write {name}"), e))
            } else {
                repo.blob(bytes, false).map_err(|e| internal(name, e))
            }
        };
        let files = [("op.json", blob(&op_json, "op.json")?), ("state.json", blob(&state_json, "state.json")?)];
        let tree_id = repo.flat_tree(&files, write).map_err(|e| self.put_error(write, e))?;
        let sig = identity::state_signature(&op.at);
        repo.commit(tree_id, parents, &sig, &sig, &Self::message(op), write).map_err(|e| self.put_error(write, e))
    }

    /// The bytes of `op.json` or `state.json`: pretty JSON and a newline.
    fn json(value: &impl serde::Serialize, name: &str) -> Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| internal(name, e))?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// The message of an op commit: `boulder: KIND`, then its data (cut at 200 bytes).
    fn message(op: &Op) -> String {
        let summary = serde_json::to_string(&op.data).unwrap_or_default();
        let summary = if summary.len() > 200 {
            let cut = summary.char_indices().map(|(i, _)| i).take_while(|i| *i <= 200).last().unwrap_or(0);
            format!("{}…", &summary[..cut])
        } else {
            summary
        };
        format!("boulder: {}\n\n{summary}\n", op.kind)
    }

    /// The error of writing a state object, or of only computing its id.
    fn put_error(&self, write: bool, e: impl std::fmt::Display) -> Error {
        if write {
            internal("cannot write a state object", e)
        } else {
            internal("hash", e)
        }
    }

    /// The history of an op-log, newest first (reverse replay order: by lamport clock, then time,
    /// actor and commit id, descending — the same on every machine).
    pub fn log(&self, refname: &str) -> Result<Vec<LogEntry>> {
        let Some(tip) = self.repo.ref_id(refname)? else { return Ok(Vec::new()) };
        self.history(tip).map_err(|e| e.context(refname))
    }

    /// The ops reachable from `tip`, newest first (see [`Store::log`]), all of them.
    pub fn history(&self, tip: ObjectId) -> Result<Vec<LogEntry>> {
        self.history_iter(tip).collect()
    }

    /// The ops reachable from `tip` in the order of [`Store::history`], read as they are met
    /// (see [`History`]): the first comes after reading one commit, and memory stays bounded by
    /// the width of the history, not its length.
    pub fn history_iter(&self, tip: ObjectId) -> History {
        History::new(self, tip)
    }

    fn op_of(&self, commit: ObjectId) -> std::result::Result<Op, ChainError> {
        let (tree, _) = self.git().commit_parts(commit).map_err(|source| ChainError::Broken { commit, source })?;
        self.op_in(commit, tree)
    }

    /// The op of `commit`, whose tree is `tree`, read with `files`.
    fn read_op(files: &mut CommitFiles, commit: ObjectId, tree: ObjectId) -> std::result::Result<Op, ChainError> {
        let bytes =
            files.file(tree, "op.json").map_err(|source| ChainError::Unreadable { commit, what: "op.json", source })?;
        Self::parse_op(commit, bytes.ok_or(ChainError::NoFile { commit, name: "op.json" })?)
    }

    /// The op of `commit`, whose tree is `tree`.
    fn op_in(&self, commit: ObjectId, tree: ObjectId) -> std::result::Result<Op, ChainError> {
        let objects = self.git();
        let entries = objects.entries(tree).map_err(|source| ChainError::Broken { commit, source })?;
        let entry =
            entries.iter().find(|e| e.name == "op.json").ok_or(ChainError::NoFile { commit, name: "op.json" })?;
        let data =
            objects.read(entry.id).map_err(|source| ChainError::Unreadable { commit, what: "op.json", source })?;
        Self::parse_op(commit, &data)
    }

    /// Refs under `prefix` (e.g. `refs/boulder/`) and the ids they point at, sorted by name.
    pub fn list(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
        refs::list(self.repo, prefix)
    }

    /// Check every commit reachable from `tip`: its tree holds exactly
    /// `op.json` and `state.json`, both parse strictly, its op is valid, and its state is what
    /// its op makes of its parent's state (a merge commit: exactly the deterministic merge of its
    /// parents). The error names the commit and the problem.
    pub fn validate_chain<S: State>(&self, tip: ObjectId) -> std::result::Result<(), ChainError> {
        self.validate_since::<S>(tip, &[])
    }

    /// Like [`Store::validate_chain`], but trusting (not checking) what is reachable from
    /// `trusted`, e.g. the local tip before a pull.
    ///
    /// How: first the commits `tip` adds over `trusted` are listed from their headers and parent
    /// links ([`Store::new_commits`], every one a commit of bounded size), parents before
    /// children. Then they are replayed in that order from the state of where they start (a
    /// trusted commit's `state.json`, read strictly, or the empty state), keeping each state in
    /// memory until its last child is checked: each commit's op is applied to its parent's state
    /// and the result, serialized exactly as an append writes it, is hashed as a blob and compared
    /// with the id of the commit's `state.json` — equal ids are equal bytes, so the stored state
    /// is read only when the ids differ (then it is parsed strictly and compared as a value, and a
    /// state of other bytes but the same value is accepted as before). The trees and `op.json` of
    /// a long chain are read and parsed on a second thread, ahead of the replay.
    pub fn validate_since<S: State>(&self, tip: ObjectId, trusted: &[ObjectId]) -> std::result::Result<(), ChainError> {
        self.validate_tip::<S>(tip, trusted).map(|_| ())
    }

    /// [`Store::validate_since`], telling what the check learned on the way (see [`Checked`]).
    fn validate_tip<S: State>(
        &self,
        tip: ObjectId,
        trusted: &[ObjectId],
    ) -> std::result::Result<Checked<S>, ChainError> {
        let mut reader = self.repo.chain_reader();
        // While the commits are listed, their trees are read: here for a short chain, on a
        // second thread once it proves long.
        let (listed, mut trees) = std::thread::scope(|scope| {
            let mut trees: Vec<Option<TreeFiles>> = Vec::new();
            let mut here = reader.clone();
            // Not tried yet; tried (`None`: no thread could be started, so read here).
            type ToRead = std::sync::mpsc::SyncSender<(ObjectId, ObjectId)>;
            let mut ahead: Option<Option<(ToRead, _)>> = None;
            let listed = Self::new_commits(&mut reader, tip, trusted, &mut |seq, id, tree| {
                let started = if seq < CHECK_AHEAD_AFTER {
                    None
                } else {
                    ahead
                        .get_or_insert_with(|| {
                            let (tx, rx) = std::sync::mpsc::sync_channel::<(ObjectId, ObjectId)>(CHECK_AHEAD);
                            let mut reader = here.clone();
                            let thread = std::thread::Builder::new().spawn_scoped(scope, move || {
                                rx.into_iter()
                                    .map(|(id, tree)| Some(Self::tree_files(&mut reader, id, tree)))
                                    .collect::<Vec<_>>()
                            });
                            thread.ok().map(|thread| (tx, thread))
                        })
                        .as_ref()
                };
                match started {
                    // The thread ends only when the sender is dropped.
                    Some((tx, _)) => drop(tx.send((id, tree))),
                    None => trees.push(Some(Self::tree_files(&mut here, id, tree))),
                }
            });
            if let Some(Some((tx, thread))) = ahead {
                drop(tx);
                trees.extend(thread.join().unwrap_or_default());
            }
            (listed, trees)
        });
        let commits = listed?;
        // Every commit listed stands on a trusted one (the listing reached no root), so the tip
        // descends from a trusted tip.
        let extends = !trusted.is_empty() && !commits.is_empty() && !commits.iter().any(|c| c.parents.is_empty());
        let commits = Self::not_held(&mut reader, commits, trusted)?;
        let state = std::thread::scope(|scope| {
            if commits.len() < CHECK_AHEAD_AFTER {
                let mut files = reader.clone();
                let files = commits
                    .iter()
                    .map(|c| Self::op_files(&mut files, c.id, trees.get_mut(c.seq).and_then(Option::take)));
                return self.replay_chain::<S>(&reader, &commits, files, tip);
            }
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<OpFiles>>(CHECK_AHEAD / CHECK_BATCH);
            let mut ahead = reader.clone();
            let list = &commits;
            let read_ahead = move || {
                for batch in list.chunks(CHECK_BATCH) {
                    let read = batch
                        .iter()
                        .map(|c| Self::op_files(&mut ahead, c.id, trees.get_mut(c.seq).and_then(Option::take)))
                        .collect();
                    // A send fails when the replay stopped (at an invalid commit).
                    if tx.send(read).is_err() {
                        break;
                    }
                }
            };
            // No thread to be had (the system is out of them): the replay finds no files read
            // and refuses the chain as unreadable, rather than the command panicking.
            let _ = std::thread::Builder::new().spawn_scoped(scope, read_ahead);
            let files = rx.into_iter().flatten();
            self.replay_chain::<S>(&reader, &commits, files, tip)
        })?;
        Ok(Checked { state, extends })
    }

    /// Replay `commits` (parents first, see [`Store::validate_since`]), whose op files `files`
    /// gives in the same order. Returns the state after `tip` when it is one of them.
    fn replay_chain<S: State>(
        &self,
        reader: &ChainReader,
        commits: &[NewCommit],
        files: impl Iterator<Item = OpFiles>,
        tip: ObjectId,
    ) -> std::result::Result<Option<S>, ChainError> {
        // How many children among the new commits each new commit has: its state is kept in
        // memory until the last of them is checked.
        let mut children: HashMap<ObjectId, usize> = HashMap::new();
        for c in commits {
            for p in &c.parents {
                *children.entry(*p).or_default() += 1;
            }
        }
        // The state after each new commit still needed, with its clock and size; at most
        // KEPT_STATE_BYTES of them (a state not kept is read back by the child that needs it).
        let mut states: HashMap<ObjectId, (u64, S, usize)> = HashMap::new();
        let mut kept = 0usize;
        let mut dag = Dag::new(self);
        let mut files = files;
        // States whose bytes were not the ones an append writes, read back and compared.
        let mut read_back = 0usize;
        let mut at_tip = None;
        for c in commits {
            let id = c.id;
            let Some(read) = files.next() else {
                return Err(ChainError::Unreadable { commit: id, what: "op.json", source: failure_of("not read") });
            };
            let (op, state_id) = read?;
            match c.parents.len() {
                0 | 1 => {
                    if op.is_merge() {
                        return Err(ChainError::MergeOpInLine { commit: id, parents: c.parents.len() });
                    }
                    let (mut expect, clock) = match c.parents.first() {
                        Some(p) => self.parent_state::<S>(*p, &mut states, &mut children, &mut kept)?,
                        None => (S::default(), 0),
                    };
                    if op.lamport != clock + 1 {
                        return Err(ChainError::Clock { commit: id, clock: op.lamport, parent: clock });
                    }
                    expect.apply(&op).map_err(|source| ChainError::Refused { commit: id, source })?;
                    expect.set_lamport(op.lamport);
                    let (was_read, size) = self.check_state(reader, id, state_id, &expect)?;
                    read_back += usize::from(was_read);
                    if id == tip {
                        at_tip = Some(expect);
                    } else if children.get(&id).is_some_and(|n| *n > 0) && kept + size <= KEPT_STATE_BYTES {
                        let clock = op.lamport.max(expect.lamport());
                        kept += size;
                        states.insert(id, (clock, expect, size));
                    }
                }
                2 => {
                    if !op.is_merge() || op.actor != MERGE_ACTOR {
                        return Err(ChainError::NotAMergeOp { commit: id });
                    }
                    match self.plan_in::<S>(&mut dag, c.parents[0], c.parents[1])? {
                        Plan::Merge { op, state, parents: ps } => {
                            let again = self
                                .write_op_commit(&op, &state, &ps, false)
                                .map_err(|source| ChainError::Recompute { commit: id, source })?;
                            if again != id {
                                return Err(ChainError::NotTheMerge { commit: id });
                            }
                            if id == tip {
                                at_tip = Some(state);
                            }
                        }
                        Plan::Contained(_) => {
                            return Err(ChainError::RedundantMerge { commit: id });
                        }
                    }
                    // Its children read its state back (a merge's state is checked through its id).
                    for p in &c.parents {
                        Self::release(*p, &mut states, &mut children, &mut kept);
                    }
                }
                n => return Err(ChainError::TooManyParents { commit: id, parents: n }),
            }
        }
        if crate::trace::enabled() && !commits.is_empty() {
            crate::trace::line(&format!("validate: {} new commits, {read_back} state.json read back", commits.len()));
        }
        Ok(at_tip)
    }

    /// One fewer child of `parent` left to check: its state is dropped after the last.
    fn release<S>(
        parent: ObjectId,
        states: &mut HashMap<ObjectId, (u64, S, usize)>,
        children: &mut HashMap<ObjectId, usize>,
        kept: &mut usize,
    ) {
        if let Some(n) = children.get_mut(&parent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                if let Some((_, _, size)) = states.remove(&parent) {
                    *kept -= size;
                }
            }
        }
    }

    /// The state after `parent` and its clock, for a child being checked: kept in memory when
    /// `parent` was replayed here (taken, not copied, by its last child), else read strictly
    /// from its `state.json` (a trusted commit, or a merge).
    fn parent_state<S: State>(
        &self,
        parent: ObjectId,
        states: &mut HashMap<ObjectId, (u64, S, usize)>,
        children: &mut HashMap<ObjectId, usize>,
        kept: &mut usize,
    ) -> std::result::Result<(S, u64), ChainError> {
        let last = children.get_mut(&parent).map(|n| {
            *n = n.saturating_sub(1);
            *n == 0
        });
        let held = if last == Some(true) {
            states.remove(&parent).inspect(|(_, _, size)| *kept -= size)
        } else {
            states.get(&parent).cloned()
        };
        if let Some((clock, state, _)) = held {
            return Ok((state, clock));
        }
        let e = self.entry::<S>(parent)?;
        let clock = e.op.lamport.max(e.state.lamport());
        Ok((e.state, clock))
    }

    /// Check that the `state.json` of `commit`, blob `stored`, is `expect`: its bytes as an
    /// append writes them hash to `stored`, or else the blob, read strictly, holds that value
    /// (`true`: it was read); and the size of those bytes.
    fn check_state<S: State>(
        &self,
        reader: &ChainReader,
        commit: ObjectId,
        stored: ObjectId,
        expect: &S,
    ) -> std::result::Result<(bool, usize), ChainError> {
        let bytes = Self::json(expect, "state.json").map_err(|source| ChainError::Recompute { commit, source })?;
        let same = reader.blob_id(&bytes).map_err(|source| ChainError::Broken { commit, source })? == stored;
        if same {
            let size = bytes.len() as u64;
            if size > MAX_STATE_BYTES {
                return Err(ChainError::TooLarge { commit, what: "state.json", size, limit: MAX_STATE_BYTES });
            }
            if !reader.has(stored) {
                return Err(ChainError::Unreadable {
                    commit,
                    what: "state.json",
                    source: failure_of(format!("{stored} is missing")),
                });
            }
            expect.validate().map_err(|source| ChainError::InvalidState { commit, source })?;
            return Ok((false, bytes.len()));
        }
        let mut reader = reader.clone();
        let (_, size) =
            reader.header(stored).map_err(|source| ChainError::Unreadable { commit, what: "state.json", source })?;
        if size > MAX_STATE_BYTES {
            return Err(ChainError::TooLarge { commit, what: "state.json", size, limit: MAX_STATE_BYTES });
        }
        let data =
            reader.blob(stored).map_err(|source| ChainError::Unreadable { commit, what: "state.json", source })?;
        let state = Self::parse_state::<S>(commit, data)?;
        if &state != expect {
            return Err(ChainError::NotItsOpsState { commit });
        }
        Ok((true, bytes.len()))
    }

    /// The ids of `op.json` and `state.json` in the tree `tree` of `commit`: the tree holds
    /// exactly those two files, as regular files, and is no larger than its limit (checked from
    /// its header before it is read).
    fn tree_files(reader: &mut ChainReader, commit: ObjectId, tree: ObjectId) -> TreeFiles {
        let (_, size) =
            reader.header(tree).map_err(|source| ChainError::Unreadable { commit, what: "its tree", source })?;
        if size > MAX_TREE_BYTES {
            return Err(Box::new(ChainError::TooLarge { commit, what: "its tree", size, limit: MAX_TREE_BYTES }));
        }
        let entries = reader.entries(tree).map_err(|source| ChainError::Broken { commit, source })?;
        Ok(Self::op_and_state(commit, &entries)?)
    }

    /// The op of `commit`, read strictly from the `op.json` its tree names (`files`, from
    /// [`Store::tree_files`]; no larger than its limit, checked from its header before it is
    /// read), and the id of its `state.json`.
    fn op_files(reader: &mut ChainReader, commit: ObjectId, files: Option<TreeFiles>) -> OpFiles {
        let (op_id, state_id) = match files {
            Some(Ok(ids)) => ids,
            Some(Err(e)) => return Err(*e),
            None => {
                return Err(ChainError::Unreadable { commit, what: "its tree", source: failure_of("not read") });
            }
        };
        let unreadable = |source| ChainError::Unreadable { commit, what: "op.json", source };
        let (_, size) = reader.header(op_id).map_err(unreadable)?;
        if size > MAX_OP_BYTES {
            return Err(ChainError::TooLarge { commit, what: "op.json", size, limit: MAX_OP_BYTES });
        }
        let data = reader.blob(op_id).map_err(unreadable)?;
        Ok((Self::parse_op(commit, data)?, state_id))
    }

    /// `commits` (listed by [`Store::new_commits`]) less those the trusted tips already hold:
    /// a fetched tip behind the local one, or beside it, adds only what is above their common
    /// ancestors, and what is below was checked when it was taken. When every listed commit
    /// stands on a trusted tip (the listing reached no root: a pull that only adds), none is
    /// below one, and nothing is walked. Otherwise the trusted side is walked down, the local
    /// commits read for their parents, the listed ones through the parents already read.
    fn not_held(
        reader: &mut ChainReader,
        commits: Vec<NewCommit>,
        trusted: &[ObjectId],
    ) -> std::result::Result<Vec<NewCommit>, ChainError> {
        if trusted.is_empty() || !commits.iter().any(|c| c.parents.is_empty()) {
            return Ok(commits);
        }
        let listed: HashMap<ObjectId, usize> = commits.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
        let mut held = vec![false; commits.len()];
        let mut seen: HashSet<ObjectId> = HashSet::new();
        let mut todo: Vec<ObjectId> = trusted.to_vec();
        while let Some(id) = todo.pop() {
            if !seen.insert(id) {
                continue;
            }
            match listed.get(&id) {
                Some(&i) => {
                    held[i] = true;
                    todo.extend(commits[i].parents.iter().copied());
                }
                None => {
                    let (_, parents) = reader.commit(id).map_err(|source| ChainError::Broken { commit: id, source })?;
                    todo.extend(parents);
                }
            }
        }
        Ok(commits.into_iter().zip(held).filter(|(_, held)| !held).map(|(c, _)| c).collect())
    }

    /// The commits `tip` adds over `trusted`, parents before children, each checked from its
    /// object header to be a commit of at most [`MAX_COMMIT_BYTES`] before it is read (at most
    /// [`MAX_NEW_COMMITS`] of them). The walk stops at `trusted`: when the fetched side extends
    /// the local tip, it reads only what is new.
    /// `found` is told of each commit as it is read (its place in the order met, its id and
    /// tree).
    fn new_commits(
        reader: &mut ChainReader,
        tip: ObjectId,
        trusted: &[ObjectId],
        found: &mut impl FnMut(usize, ObjectId, ObjectId),
    ) -> std::result::Result<Vec<NewCommit>, ChainError> {
        let trusted: HashSet<ObjectId> = trusted.iter().copied().collect();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        // Depth first, a commit put out once all its parents are: (commit, tree and parents
        // once read).
        let mut todo: Vec<(ObjectId, Option<NewCommit>)> = vec![(tip, None)];
        while let Some((id, read)) = todo.pop() {
            if let Some(commit) = read {
                out.push(commit);
                continue;
            }
            if trusted.contains(&id) || !seen.insert(id) {
                continue;
            }
            if seen.len() > MAX_NEW_COMMITS {
                return Err(ChainError::TooManyToCheck { tip });
            }
            let broken = |source| ChainError::Broken { commit: id, source };
            let (kind, size) = reader.header(id).map_err(broken)?;
            if kind != Kind::Commit {
                return Err(ChainError::NotACommit { id, kind });
            }
            if size > MAX_COMMIT_BYTES {
                return Err(ChainError::CommitTooLarge { commit: id, size });
            }
            let (tree, parents) = reader.commit(id).map_err(broken)?;
            let seq = seen.len() - 1;
            found(seq, id, tree);
            let next: Vec<ObjectId> =
                parents.iter().rev().filter(|p| !trusted.contains(*p) && !seen.contains(*p)).copied().collect();
            todo.push((id, Some(NewCommit { id, parents, seq })));
            todo.extend(next.into_iter().map(|p| (p, None)));
        }
        Ok(out)
    }

    /// Compute the merge of two tips without writing anything.
    fn plan<S: State>(&self, ours: ObjectId, theirs: ObjectId) -> std::result::Result<Plan<S>, ChainError> {
        self.plan_in(&mut Dag::new(self), ours, theirs)
    }

    /// [`Store::plan`] on a graph that may already know some of the history (validation reuses
    /// one for every merge commit it checks).
    ///
    /// Reachability is computed here from the parent links, not with gix's merge-base or hidden
    /// walks: those paint by commit time, and op-log commits share their second so often that
    /// gix 0.90 answered wrongly (a redundant merge base, so an ancestor looked like a diverged
    /// side). gix's merge base is only taken as a candidate for the fast path, after checking it.
    fn plan_in<S: State>(
        &self,
        dag: &mut Dag<'_, '_>,
        ours: ObjectId,
        theirs: ObjectId,
    ) -> std::result::Result<Plan<S>, ChainError> {
        if ours == theirs {
            return Ok(Plan::Contained(ours));
        }
        // One side containing the other (a pull that only adds, or brings nothing new) is told
        // from the ops since the older tip alone, not from both whole histories.
        if dag.reaches(theirs, ours)? {
            return Ok(Plan::Contained(theirs));
        }
        if dag.reaches(ours, theirs)? {
            return Ok(Plan::Contained(ours));
        }
        let a = dag.ancestors(ours)?;
        let t = dag.ancestors(theirs)?;
        if t.contains(&ours) {
            return Ok(Plan::Contained(theirs));
        }
        if a.contains(&theirs) {
            return Ok(Plan::Contained(ours));
        }
        let ours_e = self.entry::<S>(ours)?;
        let theirs_e = self.entry::<S>(theirs)?;
        // Fast path: replay the ops a merge base does not hold on the base's state. That equals a
        // replay of everything only when all of them sort after everything the base holds, i.e.
        // have a higher clock. Otherwise (criss-cross histories, a base that is not the join point
        // of everything merged, or no common history), replay every op from the start.
        let base = self.git().merge_base(ours, theirs).filter(|b| a.contains(b) && t.contains(b));
        let mut replayed = None;
        if let Some(b) = base {
            let held = dag.ancestors(b)?;
            let ids: Vec<ObjectId> = a.union(&t).filter(|id| !held.contains(*id)).copied().collect();
            let ops = dag.ops(&ids)?;
            let base_e = self.entry::<S>(b)?;
            if !ops.is_empty() && ops.iter().all(|(o, _)| o.lamport > base_e.state.lamport()) {
                replayed = Some((base_e.state, ops));
            }
        }
        let (start, ops) = match replayed {
            Some(r) => r,
            None => {
                let ids: Vec<ObjectId> = a.union(&t).copied().collect();
                (S::default(), dag.ops(&ids)?)
            }
        };
        let top = ops.iter().map(|(o, _)| o.lamport).max().unwrap_or(0);
        // The merged state's clock is the highest op clock merged (like any state's: the clock of
        // the last op in replay order), so it does not depend on how merges were grouped; the
        // merge op itself comes after all of them.
        let lamport = top + 1;
        let mut state = op::replay(start, ops).map_err(|source| ChainError::Merge { ours, theirs, source })?;
        state.set_lamport(top);
        let mut parents = [ours, theirs];
        parents.sort();
        // Ops only one side had: the same whichever merge base is found.
        let only: Vec<ObjectId> = a.symmetric_difference(&t).copied().collect();
        let mut n = 0;
        for id in only {
            n += usize::from(!dag.is_merge(id)?);
        }
        let op = Op {
            v: 1,
            kind: MERGE_KIND.into(),
            lamport,
            at: later(&ours_e.op.at, &theirs_e.op.at).to_string(),
            actor: MERGE_ACTOR.into(),
            data: MergeData { parents: [parents[0].to_string(), parents[1].to_string()], ops: n }.data(),
        };
        Ok(Plan::Merge { op, state, parents })
    }

    /// Merge two op-logs deterministically and return the merged tip (moving no ref).
    ///
    /// When one side contains the other, the descendant is the result. Otherwise the result is
    /// one new merge commit: its parents are the two tips sorted by id, its `state.json` the replay
    /// of every op either side holds in the order `(lamport, at, actor, op commit id)` (computed
    /// from the merge base when that is exact), its `op.json` a `merge` op by actor `merge` at the
    /// later tip's time with clock one above the highest op merged and data
    /// `{"parents": [a, b], "ops": N}` (N: ops only one side had). Every machine merging the same
    /// pair, in either order, writes the very same commit.
    ///
    /// Activity ops carry the commit they record and count once however often they are seen, as
    /// long as a repeat comes within the last [`crate::state::op::RECENT_COMMITS`] distinct
    /// commits in replay order — the window a boulder's state keeps, so a merge and a chain of
    /// appends always agree.
    pub fn merge<S: State>(&self, ours: ObjectId, theirs: ObjectId) -> Result<ObjectId> {
        match self.plan::<S>(ours, theirs).map_err(|e| Error::usage(e.to_string()).with_source(e))? {
            Plan::Contained(id) => Ok(id),
            Plan::Merge { op, state, parents } => self.write_op_commit(&op, &state, &parents, true),
        }
    }

    /// Bring a fetched tip into `refname`: check what it adds (trusting what the ref already
    /// holds), then create the ref, fast-forward it, or move it to the deterministic merge — with
    /// a compare-and-swap, retried when a local writer moves the ref meanwhile. An invalid
    /// fetched chain is refused and the ref is left as it was.
    pub fn absorb<S: State>(&self, refname: &str, theirs: ObjectId) -> Result<Absorbed> {
        let mut checked = false;
        // A local writer moving the ref meanwhile is retried: what it gained is local, so only
        // the fetched side needed checking, which is done.
        let retry = Retry { tries: MAX_TRIES, odd: Odd::FirstAttempts(MAX_ODD_TRIES), backoff: Backoff::Growing };
        let absorbed = refs::update_with_retry(self.repo, refname, retry, |_| {
            let ours = self.repo.ref_id(refname)?;
            if !checked {
                self.check_fetched::<S>(refname, ours, theirs)?;
                checked = true;
            }
            Ok(match self.absorb_step::<S>(refname, ours, theirs)? {
                Prepared::UpToDate => Step::Done(Absorbed::UpToDate),
                Prepared::Move { swap, how } => Step::Update {
                    expected: swap.expected,
                    new: swap.new,
                    message: swap.message,
                    writer: Some(Self::absorb_writer()),
                    moved: how,
                    already: Some(Absorbed::UpToDate),
                },
            })
        })?;
        absorbed.map_err(|e| match e {
            GaveUp::Failed(e) => internal(format_args!("cannot update {refname}"), e),
            GaveUp::Exhausted(_) => {
                Error::refused(format!("cannot update {refname}: lost the race to other writers {MAX_TRIES} times"))
            }
        })
    }
}

/// What bringing a fetched tip into a ref comes to ([`Store::prepare_absorb`]), checked and
/// computed (a merge commit written) but the ref not moved yet.
#[derive(Debug, Clone)]
pub enum Prepared {
    /// The ref already holds everything fetched.
    UpToDate,
    /// Move the ref: created, fast-forwarded or merged (`how`).
    Move { swap: refs::Swap, how: Absorbed },
}

impl<'r> Store<'r> {
    /// The first half of [`Store::absorb`] for one ref of many moved together: check what the
    /// fetched tip adds over the ref's current value, and work out where the ref goes (writing a
    /// merge commit when one is needed), without moving it. The caller moves every prepared ref
    /// in one transaction ([`refs::update_all`], as [`Store::absorb_writer`]), and falls back to
    /// [`Store::absorb`] per ref if that transaction fails.
    pub fn prepare_absorb<S: State>(&self, refname: &str, theirs: ObjectId) -> Result<Prepared> {
        let ours = self.repo.ref_id(refname)?;
        self.check_fetched::<S>(refname, ours, theirs)?;
        self.absorb_step::<S>(refname, ours, theirs)
    }

    /// Who the reflog entries of absorbed refs name: git-boulder, now.
    pub fn absorb_writer() -> crate::git::identity::Signature {
        identity::state_signature(&crate::time::now_rfc3339())
    }

    /// Check what a fetched tip adds over `ours`, refusing it by name when invalid.
    fn check_fetched<S: State>(&self, refname: &str, ours: Option<ObjectId>, theirs: ObjectId) -> Result<()> {
        self.validate_since::<S>(theirs, &ours.into_iter().collect::<Vec<_>>())
            .map_err(|e| Self::fetched_invalid(refname, e))
    }

    fn fetched_invalid(refname: &str, e: ChainError) -> Error {
        Error::refused(format!("{refname}: the fetched state is invalid and was not taken: {e}"))
            .hint("the local state is unchanged; fix or delete the ref on the other machine")
            .with_source(e)
    }

    /// [`Store::prepare_absorb`] for a pull, which first refuses a fetched tip whose state says it
    /// belongs elsewhere: `refuse` gives why (`Ok(Err(why))`), given the tip's state when it reads
    /// strictly. The same answers as calling `refuse` on [`Store::entry`] of the tip and then
    /// `prepare_absorb`, with less read twice: the tip's state is taken from the validation when
    /// it replayed the tip (otherwise its `state.json` alone is read, and its `op.json` only when
    /// that state is refused), and a tip that descends from the ref's is a fast-forward without
    /// looking at the history again.
    pub fn prepare_pull<S: State>(
        &self,
        refname: &str,
        theirs: ObjectId,
        refuse: impl Fn(&S) -> Option<String>,
    ) -> Result<std::result::Result<Prepared, String>> {
        // What `refuse` says of `entry` of the tip, reading its `state.json` alone unless that is
        // refused (an entry that does not read strictly is refused by nobody).
        let refused_tip = || -> Option<String> {
            let (_, bytes) = self.blobs(theirs, false).ok()?;
            refuse(&Self::parse_state::<S>(theirs, &bytes).ok()?)?;
            refuse(&self.entry::<S>(theirs).ok()?.state)
        };
        let ours = self.repo.ref_id(refname)?;
        let checked = match self.validate_tip::<S>(theirs, &ours.into_iter().collect::<Vec<_>>()) {
            Ok(checked) => checked,
            Err(e) => {
                if let Some(why) = refused_tip() {
                    return Ok(Err(why));
                }
                return Err(Self::fetched_invalid(refname, e));
            }
        };
        let why = match &checked.state {
            Some(state) => refuse(state),
            None => refused_tip(),
        };
        if let Some(why) = why {
            return Ok(Err(why));
        }
        if let (Some(ours), true) = (ours, checked.extends) {
            return Ok(Ok(Self::moved(refname, Expect::At(ours), theirs, Absorbed::FastForward)));
        }
        self.absorb_step::<S>(refname, ours, theirs).map(Ok)
    }

    /// The move of `refname` from `expected` to `new`.
    fn moved(refname: &str, expected: Expect, new: ObjectId, how: Absorbed) -> Prepared {
        let message = format!("boulder: {how:?}").to_lowercase();
        Prepared::Move { swap: refs::Swap { name: refname.to_string(), expected, new, message }, how }
    }

    /// Where `refname`, holding `ours`, goes to take in the (checked) fetched tip `theirs`.
    fn absorb_step<S: State>(&self, refname: &str, ours: Option<ObjectId>, theirs: ObjectId) -> Result<Prepared> {
        let (new, how, expected) = match ours {
            None => (theirs, Absorbed::Created, Expect::Absent),
            Some(ours) => {
                let merged = self.merge::<S>(ours, theirs).map_err(|e| e.context(refname))?;
                let how = if merged == ours {
                    return Ok(Prepared::UpToDate);
                } else if merged == theirs {
                    Absorbed::FastForward
                } else {
                    Absorbed::Merged
                };
                (merged, how, Expect::At(ours))
            }
        };
        Ok(Self::moved(refname, expected, new, how))
    }
}

/// The commit graph of op-logs, read lazily (each commit and each op once) and kept for one
/// operation.
struct Dag<'s, 'r> {
    store: &'s Store<'r>,
    parents: HashMap<ObjectId, Vec<ObjectId>>,
    ops: HashMap<ObjectId, Op>,
    /// Clocks of commits whose op was read only for its clock.
    clocks: HashMap<ObjectId, u64>,
}

impl<'s, 'r> Dag<'s, 'r> {
    fn new(store: &'s Store<'r>) -> Self {
        Dag { store, parents: HashMap::new(), ops: HashMap::new(), clocks: HashMap::new() }
    }

    fn parents(&mut self, id: ObjectId) -> std::result::Result<&[ObjectId], ChainError> {
        if !self.parents.contains_key(&id) {
            let ps = self.store.git().parents(id).map_err(|source| ChainError::Broken { commit: id, source })?;
            self.parents.insert(id, ps);
        }
        Ok(&self.parents[&id])
    }

    fn is_merge(&mut self, id: ObjectId) -> std::result::Result<bool, ChainError> {
        Ok(self.parents(id)?.len() > 1)
    }

    /// `tip` and every commit reachable from it.
    fn ancestors(&mut self, tip: ObjectId) -> std::result::Result<HashSet<ObjectId>, ChainError> {
        let mut seen = HashSet::from([tip]);
        let mut todo = vec![tip];
        while let Some(id) = todo.pop() {
            for p in self.parents(id)?.to_vec() {
                if seen.insert(p) {
                    todo.push(p);
                }
            }
        }
        Ok(seen)
    }

    /// The clock of the op of commit `id` (a merge's included).
    fn clock(&mut self, id: ObjectId) -> std::result::Result<u64, ChainError> {
        if let Some(op) = self.ops.get(&id) {
            return Ok(op.lamport);
        }
        if let Some(c) = self.clocks.get(&id) {
            return Ok(*c);
        }
        let clock = self.store.op_of(id)?.lamport;
        self.clocks.insert(id, clock);
        Ok(clock)
    }

    /// Is `target` reachable from `from` (or equal)? Along a valid history's parent links the
    /// clock never grows, so only the commits whose clock is at least `target`'s are walked: the
    /// ops since `target`, not the whole history.
    fn reaches(&mut self, from: ObjectId, target: ObjectId) -> std::result::Result<bool, ChainError> {
        let floor = self.clock(target)?;
        let mut seen = HashSet::from([from]);
        let mut todo = vec![from];
        while let Some(id) = todo.pop() {
            if id == target {
                return Ok(true);
            }
            if self.clock(id)? < floor {
                continue;
            }
            for p in self.parents(id)?.to_vec() {
                if seen.insert(p) {
                    todo.push(p);
                }
            }
        }
        Ok(false)
    }

    /// The ops of the non-merge commits among `ids`, with their commit ids.
    fn ops(&mut self, ids: &[ObjectId]) -> std::result::Result<Vec<(Op, ObjectId)>, ChainError> {
        let mut out = Vec::new();
        for &id in ids {
            if self.is_merge(id)? {
                continue;
            }
            if !self.ops.contains_key(&id) {
                let op = self.store.op_of(id)?;
                self.ops.insert(id, op);
            }
            out.push((self.ops[&id].clone(), id));
        }
        Ok(out)
    }
}

/// The ops of an op-log, newest first, read as they are met: [`Store::history_iter`].
///
/// Replay order sorts by `(lamport, at, actor, commit id)`. Along every parent link the clock
/// never grows (an op's clock is one more than its parent's; a merge's is one more than the
/// highest op it merges), so a walk that always takes the commit with the highest key among those
/// met meets them in that order, with one exception: a merge can share its clock with a parent.
/// So the walk takes all the commits of one clock at a time (their parents of the same clock
/// included), sorts that group, and yields it. Memory holds the walk's frontier, one group, and
/// the ids of commits met whose clock is not above the current one (a commit is met again only
/// through a child, and every child of a commit with a higher clock has been taken already).
///
/// Once a history proves long, threads read ahead along first parents — one the commits,
/// others (`OP_READERS`) each commit's `op.json`, taking batches of them in turn — at most
/// [`READ_AHEAD`] commits ahead, while this one orders and the caller prints: what a linear
/// history needs next is always the next one they read.
pub struct History {
    files: CommitFiles,
    tip: ObjectId,
    /// Commits met but not yet taken, by key.
    frontier: std::collections::BinaryHeap<Pending>,
    /// Commits met, with their clocks (pruned as the walk goes down).
    seen: HashMap<ObjectId, u64>,
    /// `seen`'s size after the last pruning.
    kept: usize,
    /// The sorted group being yielded, last first.
    ready: Vec<LogEntry>,
    /// Set once an error was returned: the walk ends there.
    failed: bool,
    /// Whether the tip was read.
    started: bool,
    /// Commits read so far.
    read: usize,
    /// The read-ahead, once started.
    ahead: Option<Ahead>,
}

/// Commits read before reading ahead starts: a short log is not worth the threads, and neither
/// is a reader that stops after the first lines (`git boulder log | head`: `log` prints its first
/// line after 64 ops, and a reader gone is noticed within a few lines more).
const READ_AHEAD_AFTER: usize = 512;
/// How far ahead of the walk the read-ahead threads go, in commits.
pub const READ_AHEAD: usize = 1024;

type Read = std::result::Result<(Op, Vec<ObjectId>), ChainError>;

/// Ops read ahead along first parents, in order, and the ones received but not taken yet.
struct Ahead {
    /// The readers' batches: batch `i` of the walk comes from `rx[i % rx.len()]`.
    rx: Vec<std::sync::mpsc::Receiver<Vec<(ObjectId, Read)>>>,
    /// Which receiver the next batch comes from.
    turn: usize,
    head: std::collections::VecDeque<(ObjectId, Read)>,
}

/// Commits the read-ahead threads hand on at a time (fewer wake-ups than one by one).
const BATCH: usize = 64;
/// Threads reading the ops of the commits read ahead, taking batches in turn (reading a commit's
/// tree and `op.json` and parsing it costs more than reading the commit: two keep up with one).
const OP_READERS: usize = 2;

impl Ahead {
    /// Start reading ahead from `from` down its first parents; `None` when no thread can start.
    fn start(files: &CommitFiles, from: ObjectId) -> Option<Ahead> {
        use std::sync::mpsc::{sync_channel, SyncSender};
        type Commit = (ObjectId, std::result::Result<(ObjectId, Vec<ObjectId>), Failure>);
        // At most READ_AHEAD commits in flight: queued to the readers, and read, in all.
        let depth = (READ_AHEAD / BATCH / 2 / OP_READERS).max(1);
        let mut to_readers: Vec<SyncSender<Vec<Commit>>> = Vec::new();
        let mut rx = Vec::new();
        for n in 0..OP_READERS {
            let (commits_tx, commits_rx) = sync_channel::<Vec<Commit>>(depth);
            let (tx, ops_rx) = sync_channel::<Vec<(ObjectId, Read)>>(depth);
            let mut ops = files.clone();
            let spawned = std::thread::Builder::new().name(format!("log-ops-{n}")).spawn(move || {
                for batch in commits_rx {
                    let read: Vec<(ObjectId, Read)> = batch
                        .into_iter()
                        .map(|(commit, read)| {
                            let op = read
                                .map_err(|source| ChainError::Broken { commit, source })
                                .and_then(|(tree, parents)| Ok((Store::read_op(&mut ops, commit, tree)?, parents)));
                            (commit, op)
                        })
                        .collect();
                    // A send fails when the walk is gone: the log ended or failed.
                    if tx.send(read).is_err() {
                        break;
                    }
                }
            });
            if spawned.is_err() {
                // Readers already started end as their senders drop.
                return None;
            }
            to_readers.push(commits_tx);
            rx.push(ops_rx);
        }
        let mut commits = files.clone();
        std::thread::Builder::new()
            .name("log-commits".into())
            .spawn(move || {
                let mut next = Some(from);
                let mut batch = Vec::with_capacity(BATCH);
                let mut turn = 0;
                while let Some(id) = next {
                    let read = commits.commit(id);
                    next = read.as_ref().ok().and_then(|(_, parents)| parents.first().copied());
                    batch.push((id, read));
                    if batch.len() == BATCH || next.is_none() {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                        // A send fails when the reader is gone: the log ended or failed.
                        if to_readers[turn].send(full).is_err() {
                            break;
                        }
                        turn = (turn + 1) % to_readers.len();
                    }
                }
            })
            .ok()?;
        Some(Ahead { rx, turn: 0, head: std::collections::VecDeque::new() })
    }

    /// The next batch read ahead, in the walk's order; `None` once the read-ahead has ended.
    fn recv(&mut self) -> Option<Vec<(ObjectId, Read)>> {
        let batch = self.rx[self.turn].recv().ok()?;
        self.turn = (self.turn + 1) % self.rx.len();
        Some(batch)
    }
}

/// A commit met by [`History`]: its op and parents, ordered by replay key.
struct Pending {
    op: Op,
    commit: ObjectId,
    parents: Vec<ObjectId>,
}

impl Pending {
    fn key(&self) -> (u64, &str, &str, &ObjectId) {
        (self.op.lamport, &self.op.at, &self.op.actor, &self.commit)
    }
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl History {
    fn new(store: &Store<'_>, tip: ObjectId) -> Self {
        History {
            files: store.git().commit_files(),
            tip,
            frontier: std::collections::BinaryHeap::new(),
            seen: HashMap::new(),
            kept: 0,
            ready: Vec::new(),
            failed: false,
            started: false,
            read: 0,
            ahead: None,
        }
    }

    /// The op and parents of `commit` from the read-ahead, when it is the next one there.
    fn take_ahead(&mut self, commit: ObjectId) -> Option<Read> {
        let ahead = self.ahead.as_mut()?;
        loop {
            if ahead.head.is_empty() {
                let batch = ahead.recv()?;
                ahead.head.extend(batch);
            }
            let id = ahead.head.front()?.0;
            if id == commit {
                return ahead.head.pop_front().map(|(_, read)| read);
            }
            if !self.seen.contains_key(&id) {
                // Not needed yet (the walk is on another branch): this one is read here.
                return None;
            }
            // Met already, through another path: drop it.
            ahead.head.pop_front();
        }
    }

    /// Read a commit met for the first time and put it on the frontier.
    fn meet(&mut self, commit: ObjectId) -> std::result::Result<(), ChainError> {
        if self.seen.contains_key(&commit) {
            return Ok(());
        }
        let (op, parents) = match self.take_ahead(commit) {
            Some(read) => read?,
            None => {
                let (tree, parents) =
                    self.files.commit(commit).map_err(|source| ChainError::Broken { commit, source })?;
                (Store::read_op(&mut self.files, commit, tree)?, parents)
            }
        };
        self.read += 1;
        if self.read == READ_AHEAD_AFTER {
            if let Some(first) = parents.first() {
                self.ahead = Ahead::start(&self.files, *first);
            }
        }
        self.seen.insert(commit, op.lamport);
        self.frontier.push(Pending { op, commit, parents });
        Ok(())
    }

    /// Take the next group of commits sharing the highest clock on the frontier into `ready`.
    fn next_group(&mut self) -> std::result::Result<(), ChainError> {
        if !self.started {
            self.started = true;
            self.meet(self.tip)?;
        }
        let Some(clock) = self.frontier.peek().map(|p| p.op.lamport) else { return Ok(()) };
        let mut group = Vec::new();
        while self.frontier.peek().is_some_and(|p| p.op.lamport == clock) {
            let p = self.frontier.pop().expect("peeked");
            for parent in &p.parents {
                self.meet(*parent)?;
            }
            group.push(p);
        }
        // Commits above this clock have all their children taken: they are not met again.
        if self.seen.len() > 2 * self.kept + 1024 {
            self.seen.retain(|_, c| *c <= clock);
            self.kept = self.seen.len();
        }
        group.sort();
        self.ready =
            group.into_iter().map(|p| LogEntry { commit: p.commit, is_merge: p.parents.len() > 1, op: p.op }).collect();
        Ok(())
    }
}

impl Iterator for History {
    type Item = Result<LogEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.ready.is_empty() {
            if let Err(e) = self.next_group() {
                self.failed = true;
                return Some(Err(Error::usage(e.to_string()).with_source(e)));
            }
        }
        self.ready.pop().map(Ok)
    }
}
