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

mod append;
mod log;
mod merge;
mod validate;

use crate::error::{Error, Result};
use std::time::Duration;

use crate::git::objects::{EntryKind, Failure, Kind, Objects, TreeEntry};
use crate::git::refs;
use crate::git::{ObjectId, Repo};
use crate::state::op::{self, Op, OpError, State, StateError, MERGE_ACTOR};

pub use append::Tip;
pub use log::{History, READ_AHEAD};
pub use merge::{Absorbed, Prepared};

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

/// One op-log commit: its id, its op and the state after it. Read back ([`Store::read`]), the
/// op's data is the JSON as stored; appended, it is the typed op that was written
/// ([`Appended`]).
#[derive(Debug, Clone)]
pub struct Entry<S, D = serde_json::Value> {
    pub commit: ObjectId,
    pub op: Op<D>,
    pub state: S,
}

/// An entry appended: its op is the typed op written.
pub type Appended<S> = Entry<S, <S as State>::Op>;

/// One commit of an op-log's history.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub commit: ObjectId,
    pub op: Op,
    /// A merge commit (two parents, op kind `merge`).
    pub is_merge: bool,
}

/// Reads and appends op-logs in one repository as one actor.
pub struct Store<'r> {
    pub repo: &'r Repo,
    /// This machine's actor id, written into every op it appends: read (or made) at the first
    /// append, so that reading state writes nothing ([`Store::actor`]).
    actor: std::cell::OnceCell<String>,
}

pub(super) fn internal(context: impl std::fmt::Display, e: impl std::fmt::Display) -> Error {
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

    pub(super) fn git(&self) -> Objects<'r> {
        self.repo.objects()
    }

    /// The two blobs of an op commit, checking its tree holds exactly `op.json` and `state.json`
    /// as regular files. `want_op` false skips reading `op.json`.
    pub(super) fn blobs(
        &self,
        commit: ObjectId,
        want_op: bool,
    ) -> std::result::Result<(Option<Vec<u8>>, Vec<u8>), ChainError> {
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
    pub(super) fn op_and_state(
        commit: ObjectId,
        entries: &[TreeEntry],
    ) -> std::result::Result<(ObjectId, ObjectId), ChainError> {
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

    pub(super) fn parse_op(commit: ObjectId, bytes: &[u8]) -> std::result::Result<Op, ChainError> {
        let op: Op =
            serde_json::from_slice(bytes).map_err(|source| ChainError::Json { commit, file: "op.json", source })?;
        op.validate().map_err(|source| ChainError::InvalidOp { commit, source })?;
        Ok(op)
    }

    pub(super) fn parse_state<S: State>(commit: ObjectId, bytes: &[u8]) -> std::result::Result<S, ChainError> {
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

    /// Refs under `prefix` (e.g. `refs/boulder/`) and the ids they point at, sorted by name.
    pub fn list(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
        refs::list(self.repo, prefix)
    }
}
