//! Op records and state types, and how each op changes its state. Pure: no git here.
//!
//! These JSON shapes are a public format (see docs/state-format.md): every field is documented,
//! and parsing is strict (unknown fields are refused) so garbage from a remote is caught.
//!
//! ### Rules every `apply` follows
//!
//! * An op is refused only because of its own data (unknown kind, a missing or mistyped field),
//!   never because of the state it meets. So ops that were valid when appended can be replayed in
//!   any order by a merge without failing (a `todo_done` for an unknown todo is a no-op, a status
//!   change is accepted from any status).
//! * `apply` never reads the `lamport` field: the store sets it after each op, so a state's clock
//!   does not change what later ops do.
//! * The `merge` op (written only by the store's deterministic merge) is accepted and changes
//!   nothing.
//!
//! ### Typed ops
//!
//! On disk every op is the envelope [`Op`] `{v, kind, lamport, at, actor, data}`. What its
//! `kind` and `data` say is typed per state: [`StreamOp`], [`BoulderOp`] and [`PrdOp`], one
//! variant per kind. [`Payload::parse`] reads an envelope's data into one (refusing an unknown
//! kind or a missing or mistyped field, naming it); [`Payload::data`] writes it back as the very
//! JSON git-boulder has always written (keys sorted, a field given as `null` kept `null`, a field
//! left out left out: see [`Opt`]). [`State::apply_op`] is an exhaustive match on it, and cannot
//! fail: everything an op is refused for is found when it is parsed.
//!
//! ### Adding an op kind
//!
//! Add a variant to the state's op enum (its fields named as in the JSON), read it in that
//! enum's `parse`, name it in `kind`, handle it in the state's `apply_op` (the compiler lists the
//! matches to complete), and document it in docs/state-format.md.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize, Serializer};

/// The op kind of a deterministic merge commit (accepted everywhere, changes nothing).
pub const MERGE_KIND: &str = "merge";
/// The actor of merge commits.
pub const MERGE_ACTOR: &str = "merge";
/// The largest lamport clock accepted (2^53: JSON readers in any language hold it exactly).
pub const MAX_LAMPORT: u64 = 1 << 53;
/// The longest string accepted in an op's data.
pub const MAX_TEXT: usize = 64 * 1024;

/// Why an op record is refused: its envelope, or the data of its kind. The message names the
/// kind and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OpError {
    #[error("op version {0} is not 1")]
    Version(u32),
    #[error("op kind {kind:?} is not a short lowercase word")]
    BadKind { kind: String },
    #[error("op lamport clock {0} is out of range (1..=2^53)")]
    Lamport(u64),
    #[error("op time {at:?} is not RFC 3339")]
    Time { at: String },
    #[error("actor {actor:?} is empty, longer than 200 characters or has control characters")]
    BadActor { actor: String },
    #[error("{actor:?} is reserved for merges")]
    ReservedActor { actor: String },
    #[error("op data of {kind:?} is not a JSON object")]
    DataNotAnObject { kind: String },
    #[error("unknown {what} op {kind:?}")]
    UnknownOp { what: &'static str, kind: String },
    #[error("{kind} op: data.{key} is missing")]
    MissingField { kind: String, key: &'static str },
    #[error("{kind} op: data.{key} is empty")]
    EmptyField { kind: String, key: &'static str },
    #[error("{kind} op: data.{key} must be a string")]
    NotAString { kind: String, key: &'static str },
    #[error("{kind} op: data.{key} is longer than {MAX_TEXT} bytes")]
    TooLong { kind: String, key: &'static str },
    #[error("{kind} op: data.{key} must be true or false")]
    NotABool { kind: String, key: &'static str },
    #[error("{kind} op: data.{key} {value:?} is not a commit id")]
    NotACommitId { kind: String, key: &'static str, value: String },
    #[error("{kind} op: data.{key} {value:?} is not a short lowercase word")]
    NotAWord { kind: String, key: &'static str, value: String },
    #[error("{kind} op: data.index must be a whole number 1..={MAX_INDEX}")]
    BadIndex { kind: String },
    #[error("created op: data.depth must be a whole number up to {MAX_DEPTH}")]
    BadDepth,
    #[error("status op: unknown {what} status {status:?} (one of {})", .known.join(", "))]
    UnknownStatus { what: &'static str, status: String, known: &'static [&'static str] },
    #[error("{kind} op: data.ids holds {value}, not a story id")]
    NotAStoryId { kind: String, value: serde_json::Value },
}

/// Why a state (a `state.json`) is refused beyond what parsing checks, or a status it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("unknown {what} status {status:?}")]
    UnknownStatus { what: &'static str, status: String },
    #[error("{what} {value:?} is not RFC 3339")]
    Time { what: &'static str, value: String },
    #[error("stream index {index:?} is out of range (1..={MAX_INDEX})")]
    Index { index: Option<u64> },
    #[error("setup_failed is longer than {MAX_TEXT} bytes")]
    SetupFailedTooLong,
    #[error("refused.{0} is longer than {MAX_TEXT} bytes")]
    RefusedTooLong(&'static str),
    #[error("depth {depth} is above {MAX_DEPTH}")]
    Depth { depth: u64 },
    #[error("recent_commits holds more than {RECENT_COMMITS} ids")]
    TooManyRecentCommits,
    #[error("todo id {id:?} appears twice")]
    DuplicateTodo { id: String },
    #[error("done holds {id:?}, not a story id")]
    NotAStoryId { id: String },
}

/// One operation: the content of `op.json`, the envelope of a typed op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Op {
    /// Format version, always 1.
    pub v: u32,
    /// What happened (`initialized`, `activity`, `done`, `merge`, …): a short lowercase word.
    pub kind: String,
    /// Lamport clock: one more than the clock of the state the op was applied to (a merge: one
    /// more than the highest clock of the ops it merges).
    pub lamport: u64,
    /// RFC 3339 time the op was made.
    pub at: String,
    /// The actor (machine) that made it; `merge` for merge commits.
    pub actor: String,
    /// The op's arguments, a JSON object: [`Payload::data`] of the typed op (or [`MergeData`]).
    #[serde(default)]
    pub data: serde_json::Value,
}

impl Op {
    /// Check the fields of an op read from anywhere (a remote included).
    pub fn validate(&self) -> Result<(), OpError> {
        if self.v != 1 {
            return Err(OpError::Version(self.v));
        }
        if self.kind.is_empty()
            || self.kind.len() > 64
            || !self.kind.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
        {
            return Err(OpError::BadKind { kind: self.kind.clone() });
        }
        if self.lamport == 0 || self.lamport > MAX_LAMPORT {
            return Err(OpError::Lamport(self.lamport));
        }
        if crate::time::parse_rfc3339(&self.at).is_none() {
            return Err(OpError::Time { at: self.at.clone() });
        }
        valid_actor(&self.actor)?;
        if !self.data.is_object() {
            return Err(OpError::DataNotAnObject { kind: self.kind.clone() });
        }
        Ok(())
    }

    /// True for the op of a merge commit.
    pub fn is_merge(&self) -> bool {
        self.kind == MERGE_KIND
    }
}

/// Check an actor id: non-empty, at most 200 characters, no control characters.
pub fn valid_actor(actor: &str) -> Result<(), OpError> {
    if actor.trim().is_empty() || actor.chars().count() > 200 || actor.chars().any(char::is_control) {
        return Err(OpError::BadActor { actor: actor.to_string() });
    }
    Ok(())
}

/// An optional field of an op's data, as it was written: left out, `null`, or a value. `apply`
/// takes left out and `null` alike; they are kept apart so that an op read back serializes to
/// the JSON it was written with (some writers always write a key, `null` when there is nothing
/// to say; others leave it out).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Opt<T> {
    /// The key is not in the data.
    #[default]
    Absent,
    /// The key is there, `null`.
    Null,
    /// The key holds a value.
    Set(T),
}

impl<T> Opt<T> {
    /// Whether the key is left out (for `skip_serializing_if`).
    pub fn is_absent(&self) -> bool {
        matches!(self, Opt::Absent)
    }

    /// The value, if there is one.
    pub fn get(&self) -> Option<&T> {
        match self {
            Opt::Set(v) => Some(v),
            Opt::Absent | Opt::Null => None,
        }
    }
}

/// `None` is written as `null`.
impl<T> From<Option<T>> for Opt<T> {
    fn from(o: Option<T>) -> Self {
        o.map_or(Opt::Null, Opt::Set)
    }
}

impl<T: Serialize> Serialize for Opt<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Opt::Set(v) => v.serialize(s),
            Opt::Absent | Opt::Null => s.serialize_none(),
        }
    }
}

/// The typed ops of one state: one variant per kind.
pub trait Payload: Serialize + Clone + PartialEq + std::fmt::Debug + Sized {
    /// The kind written in the envelope.
    fn kind(&self) -> &'static str;

    /// Read the kind and data of an envelope (not a `merge`): an unknown kind, or a missing or
    /// mistyped field, is an error naming it.
    fn parse(op: &Op) -> Result<Self, OpError>;

    /// The data object as written in `op.json`: keys sorted, as in every object git-boulder has
    /// written there.
    fn data(&self) -> serde_json::Value {
        // A struct of strings, numbers, booleans and lists always converts.
        serde_json::to_value(self).unwrap_or_else(|_| serde_json::Value::Object(Default::default()))
    }
}

/// The data of a `merge` op, written only by the store's deterministic merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergeData {
    /// The two merged tips, sorted by id.
    pub parents: [String; 2],
    /// How many ops only one side had.
    pub ops: usize,
}

impl MergeData {
    /// The data object as written in `op.json` (keys sorted).
    pub fn data(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_else(|_| serde_json::Value::Object(Default::default()))
    }
}

/// A state type kept in an op-log.
pub trait State: Default + Clone + PartialEq + std::fmt::Debug + Serialize + for<'de> Deserialize<'de> {
    /// What this state is called in messages (`stream`, `boulder`, `prd`).
    const WHAT: &'static str;
    /// The ops this state takes.
    type Op: Payload;
    /// Apply one typed op made at `at` by `actor`: an exhaustive match on its kinds.
    fn apply_op(&mut self, op: &Self::Op, at: &str, actor: &str);
    /// Apply one op record: a `merge` changes nothing; any other kind is read into
    /// [`State::Op`] (an unknown kind or bad data is an error naming it) and applied.
    fn apply(&mut self, op: &Op) -> Result<(), OpError> {
        if op.is_merge() {
            return Ok(());
        }
        let typed = Self::Op::parse(op)?;
        self.apply_op(&typed, &op.at, &op.actor);
        Ok(())
    }
    /// Check a state read from anywhere (a remote included) beyond what parsing checks.
    fn validate(&self) -> Result<(), StateError> {
        Ok(())
    }
    /// Complete an op from the ref it is appended to, before it is applied (a stream's
    /// `initialized` records the stream's name, a boulder's `created` its id, when not given).
    /// `leaf` is the part of the ref name after the state's prefix, or `None` when the ref is
    /// elsewhere.
    fn complete_op(_leaf: Option<&str>, _op: &mut Self::Op) {}
    /// The lamport clock of the last op applied.
    fn lamport(&self) -> u64;
    fn set_lamport(&mut self, lamport: u64);
}

fn field<'a>(op: &'a Op, key: &str) -> Option<&'a serde_json::Value> {
    op.data.get(key).filter(|v| !v.is_null())
}

fn string(op: &Op, key: &'static str) -> Result<Option<String>, OpError> {
    match field(op, key) {
        None => Ok(None),
        Some(serde_json::Value::String(s)) if s.len() <= MAX_TEXT => Ok(Some(s.clone())),
        Some(serde_json::Value::String(_)) => Err(OpError::TooLong { kind: op.kind.clone(), key }),
        Some(_) => Err(OpError::NotAString { kind: op.kind.clone(), key }),
    }
}

fn required(op: &Op, key: &'static str) -> Result<String, OpError> {
    match string(op, key)? {
        Some(s) if !s.is_empty() => Ok(s),
        Some(_) => Err(OpError::EmptyField { kind: op.kind.clone(), key }),
        None => Err(OpError::MissingField { kind: op.kind.clone(), key }),
    }
}

fn boolean(op: &Op, key: &'static str) -> Result<bool, OpError> {
    match field(op, key) {
        None => Ok(false),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(_) => Err(OpError::NotABool { kind: op.kind.clone(), key }),
    }
}

/// A commit id as data: 4 to 64 hex digits (kept as written; states keep it in lowercase).
fn commit_id(op: &Op, key: &'static str) -> Result<String, OpError> {
    let c = required(op, key)?;
    if !(4..=64).contains(&c.len()) || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(OpError::NotACommitId { kind: op.kind.clone(), key, value: c });
    }
    Ok(c)
}

/// A short lowercase word as data (a kind of something): 1 to 64 of `a-z`, `0-9`, `_`.
fn word(op: &Op, key: &'static str) -> Result<String, OpError> {
    let w = required(op, key)?;
    if w.len() > 64 || !w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return Err(OpError::NotAWord { kind: op.kind.clone(), key, value: w });
    }
    Ok(w)
}

/// A stream index as data: a whole number 1..=[`MAX_INDEX`].
fn index(op: &Op) -> Result<u64, OpError> {
    match field(op, "index").and_then(|v| v.as_u64()) {
        Some(n) if (1..=MAX_INDEX).contains(&n) => Ok(n),
        _ => Err(OpError::BadIndex { kind: op.kind.clone() }),
    }
}

/// An optional field, as written: `read` checks a value that is there and not `null`.
fn opt<T>(op: &Op, key: &str, read: impl FnOnce() -> Result<T, OpError>) -> Result<Opt<T>, OpError> {
    Ok(match op.data.get(key) {
        None => Opt::Absent,
        Some(serde_json::Value::Null) => Opt::Null,
        Some(_) => Opt::Set(read()?),
    })
}

/// An optional string field, as written.
fn opt_string(op: &Op, key: &'static str) -> Result<Opt<String>, OpError> {
    opt(op, key, || Ok(string(op, key)?.unwrap_or_default()))
}

fn unknown(what: &'static str, op: &Op) -> OpError {
    OpError::UnknownOp { what, kind: op.kind.clone() }
}

/// True when time `a` is at or after time `b` (RFC 3339; compared as instants when both parse).
fn at_or_after(a: &str, b: &str) -> bool {
    match (crate::time::parse_rfc3339(a), crate::time::parse_rfc3339(b)) {
        (Some(x), Some(y)) if x != y => x > y,
        _ => a >= b,
    }
}

fn check_time(what: &'static str, t: &Option<String>) -> Result<(), StateError> {
    match t {
        Some(t) if crate::time::parse_rfc3339(t).is_none() => Err(StateError::Time { what, value: t.clone() }),
        _ => Ok(()),
    }
}

/// The largest stream index accepted.
pub const MAX_INDEX: u64 = 65535;

/// Stream statuses, as written ([`StreamStatus::as_str`]).
pub const STREAM_STATUSES: &[&str] =
    &["DEFINED", "INITIALIZED", "RUNNING", "STOPPED", "COMPLETED", "FAILED", "MERGED", "CLEANED"];

/// The status of a stream, written in capitals (`"RUNNING"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE", try_from = "String")]
pub enum StreamStatus {
    /// In the plan, never initialized.
    #[default]
    Defined,
    /// Its branch and worktree were made.
    Initialized,
    /// The run loop is running it.
    Running,
    /// The run loop stopped (asked to, or at its iteration limit).
    Stopped,
    /// The run loop finished its stories.
    Completed,
    /// The run loop gave up.
    Failed,
    /// Merged into the base branch.
    Merged,
    /// Its worktree was removed (a merged stream stays [`StreamStatus::Merged`]).
    Cleaned,
}

impl StreamStatus {
    /// Every status, in the order of [`STREAM_STATUSES`].
    pub const ALL: [StreamStatus; 8] = [
        StreamStatus::Defined,
        StreamStatus::Initialized,
        StreamStatus::Running,
        StreamStatus::Stopped,
        StreamStatus::Completed,
        StreamStatus::Failed,
        StreamStatus::Merged,
        StreamStatus::Cleaned,
    ];

    /// As written in state and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamStatus::Defined => "DEFINED",
            StreamStatus::Initialized => "INITIALIZED",
            StreamStatus::Running => "RUNNING",
            StreamStatus::Stopped => "STOPPED",
            StreamStatus::Completed => "COMPLETED",
            StreamStatus::Failed => "FAILED",
            StreamStatus::Merged => "MERGED",
            StreamStatus::Cleaned => "CLEANED",
        }
    }

    /// The status written `text`, if it is one.
    pub fn parse(text: &str) -> Option<StreamStatus> {
        StreamStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// A status in which the stream's worktree is expected to exist.
    pub fn is_live(self) -> bool {
        match self {
            StreamStatus::Initialized
            | StreamStatus::Running
            | StreamStatus::Stopped
            | StreamStatus::Completed
            | StreamStatus::Failed => true,
            StreamStatus::Defined | StreamStatus::Merged | StreamStatus::Cleaned => false,
        }
    }
}

impl TryFrom<String> for StreamStatus {
    type Error = StateError;
    fn try_from(text: String) -> Result<Self, StateError> {
        StreamStatus::parse(&text).ok_or(StateError::UnknownStatus { what: "stream", status: text })
    }
}

impl std::fmt::Display for StreamStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run of `git boulder stream run`, as far as the stream's op-log knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunInfo {
    /// When the run recorded RUNNING.
    pub started_at: String,
    /// The actor (machine) that ran it.
    pub actor: String,
    /// When it recorded how it ended (`null` while running, or when it never said).
    #[serde(default)]
    pub ended_at: Option<String>,
    /// How it ended: `STOPPED`, `COMPLETED`, `FAILED` (or `MERGED`), `null` while running.
    #[serde(default)]
    pub outcome: Option<StreamStatus>,
    /// The reason it gave when it ended.
    #[serde(default)]
    pub reason: Option<String>,
}

/// The ops of a stream's op-log (`refs/boulder/streams/<name>`), by kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StreamOp {
    /// `initialized`: `stream init` made (or repaired) the branch and worktree. `name` is filled
    /// in from the ref when left out.
    Initialized {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        name: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        branch: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        worktree: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        base: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        index: Opt<u64>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        setup_failed: Opt<String>,
        /// `true`: an ad-hoc stream, made for a worktree an agent harness asked for under a name
        /// the plan does not have (left out for the plan's streams).
        #[serde(skip_serializing_if = "Opt::is_absent")]
        adhoc: Opt<bool>,
    },
    /// `status`: the run loop's status changes, with why.
    Status {
        status: StreamStatus,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        reason: Opt<String>,
    },
    /// `stop_requested`: `stream stop` asks the run loop to stop after its iteration.
    StopRequested {},
    /// `indexed`: a stream initialized without an index gets one.
    Indexed { index: u64 },
    /// `merged`: merged into the base branch, which then was at `commit`.
    Merged {
        commit: String,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        strategy: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        stream_tip: Opt<String>,
        /// The base tip the stream brought, before the PRD sync commit (missing in older records).
        #[serde(skip_serializing_if = "Opt::is_absent")]
        landed: Opt<String>,
        /// The base tip the merge was made on (missing in older records).
        #[serde(skip_serializing_if = "Opt::is_absent")]
        base_before: Opt<String>,
    },
    /// `rolled_back`: `stream rollback` moved the branch from `from` to `to`, keeping `from` under
    /// the backup ref `backup` (`restored`: it brought a backup back).
    RolledBack {
        from: String,
        to: String,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        backup: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        restored: Opt<bool>,
    },
    /// `unmerged`: `stream unmerge` took the stream back out of the base, which then was at
    /// `commit`; the stream is COMPLETED again.
    Unmerged {
        commit: String,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        reverted: Opt<String>,
    },
    /// `cleaned`: `stream cleanup` removed the worktree (and maybe the branch).
    Cleaned {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        worktree_removed: Opt<bool>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        branch_deleted: Opt<bool>,
    },
    /// `refused`: a landing (`stream merge`, the merge queue, `work`, auto_merge) was refused for
    /// a reason only a person or a new commit can fix. Until the branch moves past `stream_tip`
    /// (and `stream_before`), or a `retried` op, no worker takes the stream.
    Refused {
        /// The kind of refusal: `conflict`, `ownership`, `verify`, `uncommitted`,
        /// `missing_work`; any short lowercase word is accepted (newer writers may add kinds).
        refusal: String,
        /// The refusal's message.
        reason: String,
        /// The stream branch's tip when it was refused.
        stream_tip: String,
        /// The branch's tip before the refused attempt, when the attempt moved it (a failed
        /// `verify` leaves the rebased result on the branch).
        #[serde(skip_serializing_if = "Opt::is_absent")]
        stream_before: Opt<String>,
        /// What resolves it, as the refusal's hint said.
        #[serde(skip_serializing_if = "Opt::is_absent")]
        hint: Opt<String>,
        /// The remote whose base the landing was refused on (absent: the local base).
        #[serde(skip_serializing_if = "Opt::is_absent")]
        remote: Opt<String>,
    },
    /// `retried`: `stream retry` cleared a refusal: workers may take the stream again.
    Retried {},
}

impl Payload for StreamOp {
    fn kind(&self) -> &'static str {
        match self {
            StreamOp::Initialized { .. } => "initialized",
            StreamOp::Status { .. } => "status",
            StreamOp::StopRequested {} => "stop_requested",
            StreamOp::Indexed { .. } => "indexed",
            StreamOp::Merged { .. } => "merged",
            StreamOp::RolledBack { .. } => "rolled_back",
            StreamOp::Unmerged { .. } => "unmerged",
            StreamOp::Cleaned { .. } => "cleaned",
            StreamOp::Refused { .. } => "refused",
            StreamOp::Retried {} => "retried",
        }
    }

    fn parse(op: &Op) -> Result<Self, OpError> {
        Ok(match op.kind.as_str() {
            "initialized" => StreamOp::Initialized {
                name: opt_string(op, "name")?,
                branch: opt_string(op, "branch")?,
                worktree: opt_string(op, "worktree")?,
                base: opt_string(op, "base")?,
                index: opt(op, "index", || index(op))?,
                setup_failed: opt_string(op, "setup_failed")?,
                adhoc: opt(op, "adhoc", || boolean(op, "adhoc"))?,
            },
            "status" => {
                let status = required(op, "status")?;
                let Some(status) = StreamStatus::parse(&status) else {
                    return Err(OpError::UnknownStatus { what: "stream", status, known: STREAM_STATUSES });
                };
                StreamOp::Status { status, reason: opt_string(op, "reason")? }
            }
            "stop_requested" => StreamOp::StopRequested {},
            "indexed" => StreamOp::Indexed { index: index(op)? },
            "merged" => StreamOp::Merged {
                commit: commit_id(op, "commit")?,
                strategy: opt_string(op, "strategy")?,
                stream_tip: opt(op, "stream_tip", || commit_id(op, "stream_tip"))?,
                landed: opt(op, "landed", || commit_id(op, "landed"))?,
                base_before: opt(op, "base_before", || commit_id(op, "base_before"))?,
            },
            "rolled_back" => StreamOp::RolledBack {
                from: commit_id(op, "from")?,
                to: commit_id(op, "to")?,
                backup: opt_string(op, "backup")?,
                restored: opt(op, "restored", || boolean(op, "restored"))?,
            },
            "unmerged" => StreamOp::Unmerged {
                commit: commit_id(op, "commit")?,
                reverted: opt(op, "reverted", || commit_id(op, "reverted"))?,
            },
            "cleaned" => StreamOp::Cleaned {
                // `worktree_removed` is checked but not kept in the state: the worktree path is
                // dropped either way (paths are computed locally).
                worktree_removed: opt(op, "worktree_removed", || boolean(op, "worktree_removed"))?,
                branch_deleted: opt(op, "branch_deleted", || boolean(op, "branch_deleted"))?,
            },
            "refused" => StreamOp::Refused {
                refusal: word(op, "refusal")?,
                reason: required(op, "reason")?,
                stream_tip: commit_id(op, "stream_tip")?,
                stream_before: opt(op, "stream_before", || commit_id(op, "stream_before"))?,
                hint: opt_string(op, "hint")?,
                remote: opt_string(op, "remote")?,
            },
            "retried" => StreamOp::Retried {},
            _ => return Err(unknown(StreamState::WHAT, op)),
        })
    }
}

/// A stream's last rollback (`rolled_back` op).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rollback {
    /// The branch's tip before.
    pub from: String,
    /// The branch's tip after.
    pub to: String,
    /// The ref that keeps `from` (none when `from` needed no keeping).
    #[serde(default)]
    pub backup: Option<String>,
    /// It brought a backup back (`--restore`).
    #[serde(default)]
    pub restored: bool,
    pub at: String,
}

/// A stream's standing refusal (`refused` op): the last landing was refused, and until the
/// branch moves on or `stream retry` clears it the stream needs a person (`NEEDS_ATTENTION`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// `conflict`, `ownership`, `verify`, `uncommitted`, `missing_work` (or a newer kind).
    pub refusal: String,
    /// The refusal's message.
    pub reason: String,
    /// The stream branch's tip when it was refused (lower case).
    pub stream_tip: String,
    /// The branch's tip before the refused attempt, when the attempt moved it.
    #[serde(default)]
    pub stream_before: Option<String>,
    /// What resolves it.
    #[serde(default)]
    pub hint: Option<String>,
    /// The remote whose base refused it (`null`: the local base).
    #[serde(default)]
    pub remote: Option<String>,
    /// When, and by which actor (machine).
    pub at: String,
    pub actor: String,
}

impl Refusal {
    /// Whether `tip` is one of the tips the refusal was made at.
    pub fn at_tip(&self, tip: &str) -> bool {
        let tip = tip.to_ascii_lowercase();
        self.stream_tip == tip || self.stream_before.as_deref() == Some(tip.as_str())
    }
}

/// State of one stream (`refs/boulder/streams/<name>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamState {
    /// The stream's name, as recorded by its `initialized` op (`null` before).
    #[serde(default)]
    pub name: Option<String>,
    /// `DEFINED` until it is initialized.
    pub status: StreamStatus,
    /// The stream's branch (short name) as recorded at init.
    #[serde(default)]
    pub branch: Option<String>,
    /// The worktree path as recorded at init (informational: paths are always computed locally).
    #[serde(default)]
    pub worktree: Option<String>,
    /// The base branch at init.
    #[serde(default)]
    pub base: Option<String>,
    /// The actor (machine) that last initialized it: a worktree is expected on that machine only.
    #[serde(default)]
    pub initialized_by: Option<String>,
    /// The stream's small index on the machine that initialized it (1, 2, …; `null` for a stream
    /// initialized before indexes were recorded): `BOULDER_STREAM_INDEX`, and `BOULDER_PORT` is
    /// derived from it. Kept across plan edits; recorded by `initialized`.
    #[serde(default)]
    pub index: Option<u64>,
    /// How the setup command failed at the last `initialized` (`null`: it ran, or there is none).
    #[serde(default)]
    pub setup_failed: Option<String>,
    /// The commit the base branch was at after the stream merged.
    #[serde(default)]
    pub merged_commit: Option<String>,
    /// The strategy it was merged with (`rebase`, `merge`, `squash`).
    #[serde(default)]
    pub merge_strategy: Option<String>,
    /// The stream branch's tip when it was merged (for `squash`, the rebased tip the base's
    /// squashed commit was made from).
    #[serde(default)]
    pub merged_tip: Option<String>,
    /// The base tip the stream brought when it merged, before the PRD sync commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_landed: Option<String>,
    /// The base tip the merge was made on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_base: Option<String>,
    /// The base tip after `stream unmerge` last took the stream out of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmerged_commit: Option<String>,
    /// The last `stream rollback` (or `--restore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rollback: Option<Rollback>,
    /// The last landing was refused (`refused` op); cleared by `retried` and `merged`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
    /// `git boulder stream stop` asked the run loop to stop after its iteration; cleared when a
    /// run starts or ends.
    #[serde(default)]
    pub stop_requested: bool,
    /// Why the status last changed, when said.
    #[serde(default)]
    pub reason: Option<String>,
    /// The last run of the loop: started, by whom, and how it ended.
    #[serde(default)]
    pub last_run: Option<RunInfo>,
    /// When the worktree was last cleaned up (`null` if never since init).
    #[serde(default)]
    pub cleaned_at: Option<String>,
    /// The cleanup also deleted the branch.
    #[serde(default)]
    pub branch_deleted: bool,
    /// An ad-hoc stream: made for a worktree an agent harness asked for (Claude Code's
    /// `WorktreeCreate`) under a name the plan does not have. It owns no paths and has no stories
    /// until the plan names it. Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adhoc: bool,
    /// Time of the last op.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Lamport clock of the last op.
    #[serde(default)]
    pub lamport: u64,
}

impl Default for StreamState {
    fn default() -> Self {
        StreamState {
            name: None,
            status: StreamStatus::Defined,
            branch: None,
            worktree: None,
            base: None,
            initialized_by: None,
            index: None,
            setup_failed: None,
            merged_commit: None,
            merge_strategy: None,
            merged_tip: None,
            merged_landed: None,
            merged_base: None,
            unmerged_commit: None,
            last_rollback: None,
            refused: None,
            stop_requested: false,
            reason: None,
            last_run: None,
            cleaned_at: None,
            branch_deleted: false,
            adhoc: false,
            updated_at: None,
            lamport: 0,
        }
    }
}

impl State for StreamState {
    const WHAT: &'static str = "stream";
    type Op = StreamOp;

    fn apply_op(&mut self, op: &StreamOp, at: &str, actor: &str) {
        match op {
            StreamOp::Initialized { name, branch, worktree, base, index, setup_failed, adhoc } => {
                self.name = name.get().cloned().or(self.name.take());
                self.adhoc = adhoc.get().copied().unwrap_or(false);
                self.index = index.get().copied();
                self.setup_failed = setup_failed.get().cloned();
                self.status = StreamStatus::Initialized;
                self.branch = branch.get().cloned().or(self.branch.take());
                self.worktree = worktree.get().cloned();
                self.base = base.get().cloned().or(self.base.take());
                self.initialized_by = Some(actor.to_string());
                self.stop_requested = false;
                self.reason = None;
                self.cleaned_at = None;
                self.branch_deleted = false;
            }
            StreamOp::Status { status, reason } => {
                let reason = reason.get().cloned();
                match status {
                    StreamStatus::Running => {
                        self.stop_requested = false;
                        self.last_run = Some(RunInfo {
                            started_at: at.to_string(),
                            actor: actor.to_string(),
                            ended_at: None,
                            outcome: None,
                            reason: None,
                        });
                    }
                    StreamStatus::Stopped | StreamStatus::Completed | StreamStatus::Failed => {
                        self.stop_requested = false;
                        if let Some(run) = self.last_run.as_mut().filter(|r| r.ended_at.is_none()) {
                            run.ended_at = Some(at.to_string());
                            run.outcome = Some(*status);
                            run.reason = reason.clone();
                        }
                    }
                    StreamStatus::Defined
                    | StreamStatus::Initialized
                    | StreamStatus::Merged
                    | StreamStatus::Cleaned => {}
                }
                self.status = *status;
                self.reason = reason;
            }
            StreamOp::StopRequested {} => self.stop_requested = true,
            StreamOp::Indexed { index } => self.index = Some(*index),
            StreamOp::Merged { commit, strategy, stream_tip, landed, base_before } => {
                self.status = StreamStatus::Merged;
                self.merged_commit = Some(commit.to_ascii_lowercase());
                self.merge_strategy = strategy.get().cloned();
                self.merged_tip = stream_tip.get().map(|t| t.to_ascii_lowercase());
                self.merged_landed = landed.get().map(|t| t.to_ascii_lowercase());
                self.merged_base = base_before.get().map(|t| t.to_ascii_lowercase());
                self.unmerged_commit = None;
                self.refused = None;
                self.stop_requested = false;
                self.reason = None;
            }
            StreamOp::RolledBack { from, to, backup, restored } => {
                self.last_rollback = Some(Rollback {
                    from: from.to_ascii_lowercase(),
                    to: to.to_ascii_lowercase(),
                    backup: backup.get().cloned(),
                    restored: restored.get().copied().unwrap_or(false),
                    at: at.to_string(),
                });
            }
            StreamOp::Unmerged { commit, reverted: _ } => {
                self.status = StreamStatus::Completed;
                self.unmerged_commit = Some(commit.to_ascii_lowercase());
                self.merged_commit = None;
                self.merge_strategy = None;
                self.merged_tip = None;
                self.merged_landed = None;
                self.merged_base = None;
                self.reason = Some("unmerged: taken back out of the base".into());
            }
            StreamOp::Cleaned { worktree_removed: _, branch_deleted } => {
                // A merged stream stays MERGED: that it was merged matters more than that its
                // worktree is gone.
                if self.status != StreamStatus::Merged {
                    self.status = StreamStatus::Cleaned;
                }
                self.worktree = None;
                self.cleaned_at = Some(at.to_string());
                self.branch_deleted = self.branch_deleted || branch_deleted.get().copied().unwrap_or(false);
                self.stop_requested = false;
            }
            StreamOp::Refused { refusal, reason, stream_tip, stream_before, hint, remote } => {
                self.refused = Some(Refusal {
                    refusal: refusal.clone(),
                    reason: reason.clone(),
                    stream_tip: stream_tip.to_ascii_lowercase(),
                    stream_before: stream_before.get().map(|t| t.to_ascii_lowercase()),
                    hint: hint.get().cloned(),
                    remote: remote.get().cloned(),
                    at: at.to_string(),
                    actor: actor.to_string(),
                });
            }
            StreamOp::Retried {} => self.refused = None,
        }
        self.updated_at = Some(at.to_string());
    }

    fn validate(&self) -> Result<(), StateError> {
        check_time("updated_at", &self.updated_at)?;
        check_time("cleaned_at", &self.cleaned_at)?;
        if self.index.is_some_and(|i| !(1..=MAX_INDEX).contains(&i)) {
            return Err(StateError::Index { index: self.index });
        }
        if self.setup_failed.as_ref().is_some_and(|s| s.len() > MAX_TEXT) {
            return Err(StateError::SetupFailedTooLong);
        }
        if let Some(run) = &self.last_run {
            check_time("last_run.started_at", &Some(run.started_at.clone()))?;
            check_time("last_run.ended_at", &run.ended_at)?;
        }
        if let Some(r) = &self.refused {
            check_time("refused.at", &Some(r.at.clone()))?;
            for (what, text) in [("reason", Some(&r.reason)), ("hint", r.hint.as_ref()), ("remote", r.remote.as_ref())]
            {
                if text.is_some_and(|t| t.len() > MAX_TEXT) {
                    return Err(StateError::RefusedTooLong(what));
                }
            }
        }
        Ok(())
    }

    fn complete_op(leaf: Option<&str>, op: &mut StreamOp) {
        if let (Some(leaf), StreamOp::Initialized { name: name @ Opt::Absent, .. }) = (leaf, op) {
            *name = Opt::Set(leaf.to_string());
        }
    }

    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn set_lamport(&mut self, lamport: u64) {
        self.lamport = lamport;
    }
}

/// A checkpoint: where work stands, for the next session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The message given to `git boulder checkpoint -m`.
    pub message: String,
    /// When it was recorded (RFC 3339).
    pub at: String,
}

/// An open or finished todo of a boulder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Todo {
    /// Its id within the boulder (`t1`, `t2`, …).
    pub id: String,
    /// What is to be done.
    pub text: String,
    /// Whether it is done.
    pub done: bool,
}

/// How many recorded commit ids a boulder keeps, so an activity seen twice counts once.
pub const RECENT_COMMITS: usize = 64;
/// Boulder statuses, as written ([`BoulderStatus::as_str`]).
pub const BOULDER_STATUSES: &[&str] = &["active", "completed", "stopped", "failed"];
/// The deepest nesting a boulder state accepts (configurations use far less).
pub const MAX_DEPTH: u64 = 1000;

/// State of one boulder (`refs/boulder/boulders/<id>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoulderState {
    /// The boulder's id, as recorded by its `created` op (`null` before).
    #[serde(default)]
    pub id: Option<String>,
    /// The stream it belongs to.
    #[serde(default)]
    pub stream: Option<String>,
    /// Parent boulder id (`None` for a stream's root boulder).
    #[serde(default)]
    pub parent: Option<String>,
    /// 0 for a root boulder.
    #[serde(default)]
    pub depth: u32,
    /// `active`, `completed`, `stopped` or `failed`.
    pub status: BoulderStatus,
    /// Distinct commits recorded for it (and, through parents, its descendants).
    pub iteration: u64,
    /// Time of the latest recorded commit.
    #[serde(default)]
    pub last_activity: Option<String>,
    /// Time of the last enforcement.
    #[serde(default)]
    pub last_enforcement: Option<String>,
    /// Enforcements since the last progress.
    #[serde(default)]
    pub failure_count: u32,
    /// The user asked it to stop; cleared by new activity.
    #[serde(default)]
    pub stop_requested: bool,
    /// The latest recorded commit id.
    #[serde(default)]
    pub last_commit: Option<String>,
    /// The story of the latest recorded commit, when known.
    #[serde(default)]
    pub last_story: Option<String>,
    /// The gate that decided the last enforcement.
    #[serde(default)]
    pub last_gate: Option<String>,
    /// The last enforcement message.
    #[serde(default)]
    pub last_message: Option<String>,
    /// The last checkpoint, if any.
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    /// Todos, in the order they were added.
    #[serde(default)]
    pub todos: Vec<Todo>,
    /// The last [`RECENT_COMMITS`] recorded commit ids, oldest first: an activity op for one of
    /// them is not counted again (and changes nothing).
    #[serde(default)]
    pub recent_commits: Vec<String>,
    /// Time of the last op.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Lamport clock of the last op.
    #[serde(default)]
    pub lamport: u64,
}

/// The status of a boulder, written in lowercase (`"active"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum BoulderStatus {
    /// Being worked on (enforced).
    #[default]
    Active,
    /// Finished (`git boulder finish`, or its stream completed).
    Completed,
    /// Stopped.
    Stopped,
    /// Given up.
    Failed,
}

impl BoulderStatus {
    /// Every status, in the order of [`BOULDER_STATUSES`].
    pub const ALL: [BoulderStatus; 4] =
        [BoulderStatus::Active, BoulderStatus::Completed, BoulderStatus::Stopped, BoulderStatus::Failed];

    /// As written in state and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            BoulderStatus::Active => "active",
            BoulderStatus::Completed => "completed",
            BoulderStatus::Stopped => "stopped",
            BoulderStatus::Failed => "failed",
        }
    }

    /// The status written `text`, if it is one.
    pub fn parse(text: &str) -> Option<BoulderStatus> {
        BoulderStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

impl TryFrom<String> for BoulderStatus {
    type Error = StateError;
    fn try_from(text: String) -> Result<Self, StateError> {
        BoulderStatus::parse(&text).ok_or(StateError::UnknownStatus { what: "boulder", status: text })
    }
}

impl std::fmt::Display for BoulderStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Default for BoulderState {
    fn default() -> Self {
        BoulderState {
            id: None,
            stream: None,
            parent: None,
            depth: 0,
            status: BoulderStatus::Active,
            iteration: 0,
            last_activity: None,
            last_enforcement: None,
            failure_count: 0,
            stop_requested: false,
            last_commit: None,
            last_story: None,
            last_gate: None,
            last_message: None,
            checkpoint: None,
            todos: Vec::new(),
            recent_commits: Vec::new(),
            updated_at: None,
            lamport: 0,
        }
    }
}

/// The ops of a boulder's op-log (`refs/boulder/boulders/<id>`), by kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum BoulderOp {
    /// `created`: the boulder is made, under `parent` at `depth`. `id` is filled in from the ref
    /// when left out.
    Created {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        id: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        stream: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        parent: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        depth: Opt<u64>,
    },
    /// `activity`: a commit was recorded for it (`at`: the commit's time when recorded after
    /// the fact, else the op's).
    Activity {
        commit: String,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        story: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        at: Opt<String>,
    },
    /// `enforced`: `git boulder check` pushed the agent on.
    Enforced {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        gate: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        message: Opt<String>,
    },
    /// `reset_failures`: the failure count starts again.
    ResetFailures {},
    /// `stop`: the user asked it to stop (until new activity).
    Stop {},
    /// `status`: its status changes.
    Status { status: BoulderStatus },
    /// `checkpoint`: where work stands.
    Checkpoint { message: String },
    /// `todo_add`: a todo (an id seen before is not added again).
    TodoAdd { id: String, text: String },
    /// `todo_done`: a todo is done (an unknown id changes nothing).
    TodoDone { id: String },
    /// `denied`: an agent harness hook refused an edit of `path`, which the stream does not own
    /// (`rule`: `other_stream`, `shared_read` or `undeclared`; `owner`: the owning stream). A
    /// record only: it changes nothing but `updated_at`.
    Denied {
        path: String,
        rule: String,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        owner: Opt<String>,
    },
}

impl Payload for BoulderOp {
    fn kind(&self) -> &'static str {
        match self {
            BoulderOp::Created { .. } => "created",
            BoulderOp::Activity { .. } => "activity",
            BoulderOp::Enforced { .. } => "enforced",
            BoulderOp::ResetFailures {} => "reset_failures",
            BoulderOp::Stop {} => "stop",
            BoulderOp::Status { .. } => "status",
            BoulderOp::Checkpoint { .. } => "checkpoint",
            BoulderOp::TodoAdd { .. } => "todo_add",
            BoulderOp::TodoDone { .. } => "todo_done",
            BoulderOp::Denied { .. } => "denied",
        }
    }

    fn parse(op: &Op) -> Result<Self, OpError> {
        Ok(match op.kind.as_str() {
            "created" => BoulderOp::Created {
                id: opt_string(op, "id")?,
                stream: opt_string(op, "stream")?,
                parent: opt_string(op, "parent")?,
                depth: opt(op, "depth", || {
                    field(op, "depth").and_then(|d| d.as_u64()).filter(|d| *d <= MAX_DEPTH).ok_or(OpError::BadDepth)
                })?,
            },
            "activity" => BoulderOp::Activity {
                commit: required(op, "commit")?,
                story: opt_string(op, "story")?,
                at: opt_string(op, "at")?,
            },
            "enforced" => BoulderOp::Enforced { gate: opt_string(op, "gate")?, message: opt_string(op, "message")? },
            "reset_failures" => BoulderOp::ResetFailures {},
            "stop" => BoulderOp::Stop {},
            "status" => {
                let status = required(op, "status")?;
                let Some(status) = BoulderStatus::parse(&status) else {
                    return Err(OpError::UnknownStatus { what: "boulder", status, known: BOULDER_STATUSES });
                };
                BoulderOp::Status { status }
            }
            "checkpoint" => BoulderOp::Checkpoint { message: required(op, "message")? },
            "todo_add" => BoulderOp::TodoAdd { id: required(op, "id")?, text: required(op, "text")? },
            "todo_done" => BoulderOp::TodoDone { id: required(op, "id")? },
            "denied" => BoulderOp::Denied {
                path: required(op, "path")?,
                rule: required(op, "rule")?,
                owner: opt_string(op, "owner")?,
            },
            _ => return Err(unknown(BoulderState::WHAT, op)),
        })
    }
}

impl BoulderState {
    /// The iteration at which `commit` was counted: each distinct commit adds one and joins the
    /// end of `recent_commits`, so one less than now for each counted after it; now when it is
    /// not among them (counted long ago, or not at all).
    pub fn iteration_of(&self, commit: &str) -> u64 {
        match self.recent_commits.iter().rposition(|c| c == commit) {
            Some(p) => self.iteration.saturating_sub((self.recent_commits.len() - 1 - p) as u64),
            None => self.iteration,
        }
    }
}

impl State for BoulderState {
    const WHAT: &'static str = "boulder";
    type Op = BoulderOp;

    fn apply_op(&mut self, op: &BoulderOp, at: &str, _actor: &str) {
        match op {
            BoulderOp::Created { id, stream, parent, depth } => {
                self.id = id.get().cloned().or(self.id.take());
                self.stream = stream.get().cloned();
                self.parent = parent.get().cloned();
                self.depth = depth.get().copied().unwrap_or(0) as u32;
            }
            BoulderOp::Activity { commit, story, at: when } => {
                // A commit seen before is counted once, however often it is seen.
                if !self.recent_commits.contains(commit) {
                    self.iteration = self.iteration.saturating_add(1);
                    self.recent_commits.push(commit.clone());
                    if self.recent_commits.len() > RECENT_COMMITS {
                        let extra = self.recent_commits.len() - RECENT_COMMITS;
                        self.recent_commits.drain(..extra);
                    }
                    // The commit's time when the op carries it (a commit recorded after the
                    // fact), else the op's.
                    let when = when
                        .get()
                        .filter(|t| crate::time::parse_rfc3339(t).is_some())
                        .cloned()
                        .unwrap_or_else(|| at.to_string());
                    if self.last_activity.as_deref().is_none_or(|t| at_or_after(&when, t)) {
                        self.last_activity = Some(when);
                        self.last_commit = Some(commit.clone());
                        self.last_story = story.get().cloned();
                    }
                    self.failure_count = 0;
                    self.stop_requested = false;
                    if self.status == BoulderStatus::Stopped {
                        self.status = BoulderStatus::Active;
                    }
                }
            }
            BoulderOp::Enforced { gate, message } => {
                self.last_enforcement = Some(at.to_string());
                self.failure_count = self.failure_count.saturating_add(1);
                self.last_gate = gate.get().cloned();
                self.last_message = message.get().cloned();
            }
            BoulderOp::ResetFailures {} => self.failure_count = 0,
            BoulderOp::Stop {} => self.stop_requested = true,
            BoulderOp::Status { status } => self.status = *status,
            BoulderOp::Checkpoint { message } => {
                self.checkpoint = Some(Checkpoint { message: message.clone(), at: at.to_string() });
            }
            BoulderOp::TodoAdd { id, text } => {
                if !self.todos.iter().any(|t| t.id == *id) {
                    self.todos.push(Todo { id: id.clone(), text: text.clone(), done: false });
                }
            }
            BoulderOp::TodoDone { id } => {
                if let Some(t) = self.todos.iter_mut().find(|t| t.id == *id) {
                    t.done = true;
                }
            }
            BoulderOp::Denied { .. } => {}
        }
        self.updated_at = Some(at.to_string());
    }

    fn validate(&self) -> Result<(), StateError> {
        if u64::from(self.depth) > MAX_DEPTH {
            return Err(StateError::Depth { depth: u64::from(self.depth) });
        }
        if self.recent_commits.len() > RECENT_COMMITS {
            return Err(StateError::TooManyRecentCommits);
        }
        let mut ids = BTreeSet::new();
        for t in &self.todos {
            if !ids.insert(t.id.as_str()) {
                return Err(StateError::DuplicateTodo { id: t.id.clone() });
            }
        }
        check_time("updated_at", &self.updated_at)?;
        check_time("last_activity", &self.last_activity)?;
        check_time("last_enforcement", &self.last_enforcement)?;
        if let Some(c) = &self.checkpoint {
            check_time("checkpoint.at", &Some(c.at.clone()))?;
        }
        Ok(())
    }

    fn complete_op(leaf: Option<&str>, op: &mut BoulderOp) {
        if let (Some(leaf), BoulderOp::Created { id: id @ Opt::Absent, .. }) = (leaf, op) {
            *id = Opt::Set(leaf.to_string());
        }
    }

    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn set_lamport(&mut self, lamport: u64) {
        self.lamport = lamport;
    }
}

/// Completion records (`refs/boulder/prd`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrdState {
    /// Story ids recorded done with `git boulder prd done` (or by a merge), sorted, each once.
    pub done: BTreeSet<String>,
    /// Time of the last op.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Lamport clock of the last op.
    #[serde(default)]
    pub lamport: u64,
}

/// The ops of the completion records (`refs/boulder/prd`), by kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PrdOp {
    /// `done`: stories recorded done (`git boulder prd done`, or a merge).
    Done { ids: Vec<String> },
    /// `undone`: records taken back (`git boulder prd undone`).
    Undone { ids: Vec<String> },
}

impl Payload for PrdOp {
    fn kind(&self) -> &'static str {
        match self {
            PrdOp::Done { .. } => "done",
            PrdOp::Undone { .. } => "undone",
        }
    }

    fn parse(op: &Op) -> Result<Self, OpError> {
        let ids = || -> Result<Vec<String>, OpError> {
            let list = field(op, "ids")
                .and_then(|v| v.as_array())
                .ok_or_else(|| OpError::MissingField { kind: op.kind.clone(), key: "ids" })?;
            list.iter()
                .map(|v| match v.as_str() {
                    Some(s) if !s.is_empty() && s.len() <= 200 => Ok(s.to_owned()),
                    _ => Err(OpError::NotAStoryId { kind: op.kind.clone(), value: v.clone() }),
                })
                .collect()
        };
        Ok(match op.kind.as_str() {
            "done" => PrdOp::Done { ids: ids()? },
            "undone" => PrdOp::Undone { ids: ids()? },
            _ => return Err(unknown(PrdState::WHAT, op)),
        })
    }
}

impl State for PrdState {
    const WHAT: &'static str = "prd";
    type Op = PrdOp;

    fn apply_op(&mut self, op: &PrdOp, at: &str, _actor: &str) {
        match op {
            PrdOp::Done { ids } => self.done.extend(ids.iter().cloned()),
            PrdOp::Undone { ids } => {
                for id in ids {
                    self.done.remove(id);
                }
            }
        }
        self.updated_at = Some(at.to_string());
    }

    fn validate(&self) -> Result<(), StateError> {
        if let Some(id) = self.done.iter().find(|id| id.is_empty() || id.len() > 200) {
            return Err(StateError::NotAStoryId { id: id.clone() });
        }
        check_time("updated_at", &self.updated_at)
    }

    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn set_lamport(&mut self, lamport: u64) {
        self.lamport = lamport;
    }
}

/// Replay ops on a state in the deterministic order of merges: by `(lamport, at, actor, id)`,
/// where `id` is whatever identifies the op uniquely (the store uses the op's commit id). Merge
/// ops are skipped. The result's clock is the last op's. Pure: the store's merge and the tests'
/// reference model both use it.
pub fn replay<S: State, I: Ord>(mut state: S, mut ops: Vec<(Op, I)>) -> Result<S, OpError> {
    ops.sort_by(|(a, ia), (b, ib)| (a.lamport, &a.at, &a.actor, ia).cmp(&(b.lamport, &b.at, &b.actor, ib)));
    for (op, _) in ops.iter().filter(|(op, _)| !op.is_merge()) {
        state.apply(op)?;
        state.set_lamport(op.lamport);
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn op(kind: &str, lamport: u64, data: serde_json::Value) -> Op {
        Op {
            v: 1,
            kind: kind.into(),
            lamport,
            at: format!("2026-01-01T00:00:{:02}Z", lamport % 60),
            actor: "a".into(),
            data,
        }
    }

    fn run<S: State>(ops: &[Op]) -> Result<S, String> {
        let mut s = S::default();
        for o in ops {
            o.validate().map_err(|e| e.to_string())?;
            s.apply(o).map_err(|e| e.to_string())?;
            s.set_lamport(o.lamport);
            s.validate().map_err(|e| e.to_string())?;
        }
        Ok(s)
    }

    #[test]
    fn op_validation() {
        let good = op("activity", 1, json!({"commit": "abc1"}));
        good.validate().unwrap();
        let bad = |f: &dyn Fn(&mut Op)| {
            let mut o = good.clone();
            f(&mut o);
            o.validate().unwrap_err().to_string()
        };
        assert!(bad(&|o| o.v = 2).contains("version"));
        assert!(bad(&|o| o.kind = String::new()).contains("kind"));
        assert!(bad(&|o| o.kind = "Activity".into()).contains("kind"));
        assert!(bad(&|o| o.kind = "héllo".into()).contains("kind"));
        assert!(bad(&|o| o.lamport = 0).contains("lamport"));
        assert!(bad(&|o| o.at = "yesterday".into()).contains("RFC 3339"));
        assert!(bad(&|o| o.actor = String::new()).contains("actor"));
        assert!(bad(&|o| o.actor = "x".repeat(201)).contains("actor"));
        assert!(bad(&|o| o.actor = "a\nb".into()).contains("actor"));
        assert!(bad(&|o| o.data = json!([1])).contains("object"));
        // Strict parsing.
        let text = r#"{"v":1,"kind":"stop","lamport":1,"at":"2026-01-01T00:00:00Z","actor":"a","data":{},"x":1}"#;
        assert!(serde_json::from_str::<Op>(text).unwrap_err().to_string().contains("unknown field"));
    }

    #[test]
    fn an_activity_recorded_after_the_fact_keeps_the_commits_time() {
        let created = op("created", 1, json!({"stream": "auth"}));
        // A commit of 2025 recorded now: the last activity is the commit's time, not the op's.
        let old = op("activity", 2, json!({"commit": "abc1", "at": "2025-06-01T00:00:00.000Z"}));
        let s = run::<BoulderState>(&[created.clone(), old.clone()]).unwrap();
        assert_eq!(s.last_activity.as_deref(), Some("2025-06-01T00:00:00.000Z"));
        assert_eq!(s.iteration, 1);
        // A newer commit after it moves the last activity; an older one does not, but counts.
        let newer = op("activity", 3, json!({"commit": "abc2"}));
        let older = op("activity", 4, json!({"commit": "abc3", "at": "2024-01-01T00:00:00Z"}));
        let s = run::<BoulderState>(&[created.clone(), old.clone(), newer, older]).unwrap();
        assert_eq!(s.last_activity.as_deref(), Some("2026-01-01T00:00:03Z"));
        assert_eq!(s.last_commit.as_deref(), Some("abc2"));
        assert_eq!(s.iteration, 3);
        // A time that does not parse falls back to the op's; a non-string is refused.
        let odd = op("activity", 2, json!({"commit": "abc1", "at": "yesterday"}));
        let s = run::<BoulderState>(&[created.clone(), odd]).unwrap();
        assert_eq!(s.last_activity.as_deref(), Some("2026-01-01T00:00:02Z"));
        assert!(run::<BoulderState>(&[created, op("activity", 2, json!({"commit": "abc1", "at": 5}))]).is_err());
    }

    /// Refusals are typed, and say what they always said (messages are compared by scripts and
    /// snapshots).
    #[test]
    fn typed_refusals_keep_their_messages() {
        let parse_err = |kind: &str, data| StreamOp::parse(&op(kind, 1, data)).unwrap_err();
        let e = parse_err("merged", json!({"commit": "xyz"}));
        assert_eq!(e, OpError::NotACommitId { kind: "merged".into(), key: "commit", value: "xyz".into() });
        assert_eq!(e.to_string(), r#"merged op: data.commit "xyz" is not a commit id"#);
        let e = parse_err("status", json!({"status": "DONE"}));
        assert_eq!(
            e.to_string(),
            r#"status op: unknown stream status "DONE" (one of DEFINED, INITIALIZED, RUNNING, STOPPED, COMPLETED, FAILED, MERGED, CLEANED)"#
        );
        assert_eq!(
            parse_err("indexed", json!({})).to_string(),
            "indexed op: data.index must be a whole number 1..=65535"
        );
        assert_eq!(parse_err("explode", json!({})).to_string(), r#"unknown stream op "explode""#);
        assert_eq!(parse_err("status", json!({"status": 1})).to_string(), "status op: data.status must be a string");
        assert_eq!(parse_err("status", json!({"status": ""})).to_string(), "status op: data.status is empty");
        assert_eq!(parse_err("status", json!({})).to_string(), "status op: data.status is missing");
        let e = PrdOp::parse(&op("done", 1, json!({"ids": [1]}))).unwrap_err();
        assert_eq!(e.to_string(), "done op: data.ids holds 1, not a story id");
        let e = BoulderOp::parse(&op("created", 1, json!({"depth": -1}))).unwrap_err();
        assert_eq!(e.to_string(), "created op: data.depth must be a whole number up to 1000");
        let mut o = op("stop", 1, json!({}));
        o.v = 2;
        assert_eq!(o.validate().unwrap_err(), OpError::Version(2));
        assert_eq!(o.validate().unwrap_err().to_string(), "op version 2 is not 1");
        let s = StreamState { index: Some(0), ..StreamState::default() };
        assert_eq!(s.validate().unwrap_err().to_string(), "stream index Some(0) is out of range (1..=65535)");
        let s = PrdState { updated_at: Some("never".into()), ..PrdState::default() };
        assert_eq!(s.validate().unwrap_err(), StateError::Time { what: "updated_at", value: "never".into() });
        assert_eq!(s.validate().unwrap_err().to_string(), r#"updated_at "never" is not RFC 3339"#);
    }

    #[test]
    fn unknown_kinds_name_the_kind() {
        for e in [
            run::<StreamState>(&[op("explode", 1, json!({}))]).unwrap_err(),
            run::<BoulderState>(&[op("explode", 1, json!({}))]).unwrap_err(),
            run::<PrdState>(&[op("explode", 1, json!({}))]).unwrap_err(),
        ] {
            assert!(e.contains("\"explode\""), "{e}");
        }
    }

    #[test]
    fn stream_lifecycle() {
        let s: StreamState = run(&[
            op(
                "initialized",
                1,
                json!({"name": "auth", "branch": "boulder/auth", "worktree": "/w/auth", "base": "main"}),
            ),
            op("stop_requested", 2, json!({})),
            op("status", 3, json!({"status": "RUNNING"})),
            op("stop_requested", 4, json!({})),
        ])
        .unwrap();
        assert_eq!(s.status, StreamStatus::Running);
        assert!(s.stop_requested, "a stop asked during a run is kept");
        assert_eq!(s.name.as_deref(), Some("auth"));
        assert_eq!(s.last_run.as_ref().unwrap().started_at, "2026-01-01T00:00:03Z");
        assert!(s.last_run.as_ref().unwrap().ended_at.is_none());
        let mut s2 = s.clone();
        s2.apply(&op("status", 5, json!({"status": "STOPPED", "reason": "asked"}))).unwrap();
        assert!(!s2.stop_requested);
        let last = s2.last_run.clone().unwrap();
        assert_eq!((last.outcome, last.reason.as_deref()), (Some(StreamStatus::Stopped), Some("asked")));
        s2.apply(&op("merged", 6, json!({"commit": "ABCDEF12", "strategy": "rebase"}))).unwrap();
        assert_eq!((s2.status.as_str(), s2.merged_commit.as_deref()), ("MERGED", Some("abcdef12")));
        s2.apply(&op("cleaned", 7, json!({"worktree_removed": true, "branch_deleted": true}))).unwrap();
        assert_eq!(s2.status, StreamStatus::Merged);
        assert!(s2.worktree.is_none() && s2.branch_deleted && s2.cleaned_at.is_some());
        s2.validate().unwrap();
        // Bad data is refused naming the field.
        assert!(run::<StreamState>(&[op("status", 1, json!({"status": "DONE"}))]).unwrap_err().contains("DONE"));
        assert!(run::<StreamState>(&[op("merged", 1, json!({"commit": "xyz"}))]).unwrap_err().contains("commit"));
        assert!(run::<StreamState>(&[op("cleaned", 1, json!({"branch_deleted": "yes"}))])
            .unwrap_err()
            .contains("branch_deleted"));
        // A stream that was never initialized is DEFINED.
        assert_eq!(run::<StreamState>(&[op("stop_requested", 1, json!({}))]).unwrap().status, StreamStatus::Defined);
    }

    #[test]
    fn boulder_ops() {
        let b: BoulderState = run(&[
            op("created", 1, json!({"id": "auth", "stream": "auth", "parent": null, "depth": 0})),
            op("enforced", 2, json!({"gate": "idle", "message": "keep going"})),
            op("enforced", 3, json!({"gate": "idle", "message": "really"})),
            op("stop", 4, json!({})),
            op("activity", 5, json!({"commit": "c1", "story": "US-1"})),
            op("activity", 6, json!({"commit": "c1", "story": "US-2"})),
            op("checkpoint", 7, json!({"message": "half way"})),
            op("todo_add", 8, json!({"id": "t1", "text": "tests"})),
            op("todo_add", 9, json!({"id": "t1", "text": "again"})),
            op("todo_done", 10, json!({"id": "t1"})),
            op("todo_done", 11, json!({"id": "t9"})),
            op("enforced", 12, json!({"gate": "idle", "message": "m"})),
            op("reset_failures", 13, json!({})),
            op("status", 14, json!({"status": "completed"})),
        ])
        .unwrap();
        assert_eq!(b.id.as_deref(), Some("auth"));
        assert_eq!(b.iteration, 1, "the same commit counts once");
        assert_eq!(b.last_story.as_deref(), Some("US-1"));
        assert_eq!(b.failure_count, 0);
        assert!(!b.stop_requested);
        assert_eq!(b.last_message.as_deref(), Some("m"));
        assert_eq!(b.checkpoint.as_ref().unwrap().message, "half way");
        assert_eq!(b.todos, vec![Todo { id: "t1".into(), text: "tests".into(), done: true }]);
        assert_eq!(b.status, BoulderStatus::Completed);
        assert_eq!(b.lamport, 14);
        assert!(run::<BoulderState>(&[op("activity", 1, json!({}))]).unwrap_err().contains("commit"));
        assert!(run::<BoulderState>(&[op("created", 1, json!({"depth": -1}))]).unwrap_err().contains("depth"));
        assert!(run::<BoulderState>(&[op("status", 1, json!({"status": "zzz"}))]).unwrap_err().contains("zzz"));
    }

    #[test]
    fn activity_keeps_the_latest_time() {
        let mut b = BoulderState::default();
        let mut late = op("activity", 1, json!({"commit": "c1"}));
        late.at = "2026-01-01T10:00:00+02:00".into(); // 08:00Z
        let mut early = op("activity", 2, json!({"commit": "c2"}));
        early.at = "2026-01-01T09:00:00Z".into();
        b.apply(&late).unwrap();
        b.apply(&early).unwrap();
        assert_eq!(b.last_commit.as_deref(), Some("c2"), "09:00Z is after 10:00+02:00");
        assert_eq!(b.iteration, 2);
    }

    #[test]
    fn prd_ops() {
        let p: PrdState = run(&[
            op("done", 1, json!({"ids": ["US-2", "US-1", "US-2"]})),
            op("undone", 2, json!({"ids": ["US-2"]})),
            op("merge", 3, json!({"parents": [], "ops": 0})),
        ])
        .unwrap();
        assert_eq!(p.done.iter().collect::<Vec<_>>(), ["US-1"]);
        assert!(run::<PrdState>(&[op("done", 1, json!({"ids": [1]}))]).unwrap_err().contains("ids"));
        assert!(run::<PrdState>(&[op("done", 1, json!({}))]).unwrap_err().contains("ids"));
    }

    #[test]
    fn states_are_strict_and_round_trip() {
        let b: BoulderState =
            run(&[op("created", 1, json!({"stream": "s"})), op("activity", 2, json!({"commit": "c"}))]).unwrap();
        let text = serde_json::to_string(&b).unwrap();
        assert_eq!(serde_json::from_str::<BoulderState>(&text).unwrap(), b);
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["surprise"] = json!(1);
        assert!(serde_json::from_value::<BoulderState>(v).is_err());
        assert!(serde_json::from_str::<StreamState>(r#"{"status":"RUNNING","extra":1}"#).is_err());
        // An unknown status is refused as the state is read, naming it.
        let e = serde_json::from_str::<StreamState>(r#"{"status":"NOPE"}"#).unwrap_err().to_string();
        assert!(e.contains("unknown stream status \"NOPE\""), "{e}");
        let e = serde_json::from_str::<BoulderState>(r#"{"status":"zzz","iteration":0}"#).unwrap_err().to_string();
        assert!(e.contains("unknown boulder status \"zzz\""), "{e}");
        assert!(serde_json::from_str::<PrdState>(r#"{"done":["a"],"x":1}"#).is_err());
    }

    #[test]
    fn merge_ops_change_nothing() {
        let b: BoulderState = run(&[op("created", 1, json!({"stream": "s"}))]).unwrap();
        let mut after = b.clone();
        after.apply(&op("merge", 5, json!({"parents": ["a", "b"], "ops": 3}))).unwrap();
        assert_eq!(after, b);
    }

    #[test]
    fn complete_op_fills_names() {
        let parse = |kind: &str, data| op(kind, 1, data);
        let mut d = StreamOp::parse(&parse("initialized", json!({"branch": "b"}))).unwrap();
        StreamState::complete_op(Some("auth"), &mut d);
        assert_eq!(d.data()["name"], "auth");
        let mut d = BoulderOp::parse(&parse("created", json!({"id": "given"}))).unwrap();
        BoulderState::complete_op(Some("x"), &mut d);
        assert_eq!(d.data()["id"], "given");
        let mut d = BoulderOp::parse(&parse("activity", json!({"commit": "c"}))).unwrap();
        BoulderState::complete_op(Some("x"), &mut d);
        assert!(d.data().get("id").is_none());
    }

    /// Each op kind, with its data as git-boulder's writers write it, reads into its typed op and
    /// writes back the same JSON; the typed op applies as the record does.
    #[test]
    fn typed_ops_write_back_what_they_read() {
        let stream = [
            (
                "initialized",
                json!({"base": "main", "branch": "boulder/a", "index": 1, "name": "a", "setup_failed": null, "worktree": "/w"}),
            ),
            ("initialized", json!({"branch": "boulder/a"})),
            ("status", json!({"reason": "stream run started", "status": "RUNNING"})),
            ("stop_requested", json!({})),
            ("indexed", json!({"index": 3})),
            ("merged", json!({"commit": "abcd12", "strategy": "rebase", "stream_tip": "ef01"})),
            ("cleaned", json!({"branch_deleted": false, "worktree_removed": true})),
            ("refused", json!({"reason": "conflicts", "refusal": "conflict", "stream_tip": "abcd12"})),
            (
                "refused",
                json!({"hint": "rebase it", "reason": "verify failed", "refusal": "verify", "remote": "origin", "stream_before": "0123ab", "stream_tip": "abcd12"}),
            ),
            ("retried", json!({})),
        ];
        for (kind, data) in stream {
            let o = op(kind, 1, data.clone());
            let typed = StreamOp::parse(&o).unwrap();
            assert_eq!((typed.kind(), typed.data()), (kind, data.clone()));
            assert_eq!(serde_json::to_string(&typed.data()).unwrap(), serde_json::to_string(&data).unwrap());
            let (mut a, mut b) = (StreamState::default(), StreamState::default());
            a.apply(&o).unwrap();
            b.apply_op(&typed, &o.at, &o.actor);
            assert_eq!(a, b);
        }
        let boulder = [
            ("created", json!({"depth": 0, "id": "a", "parent": null, "stream": "a"})),
            ("created", json!({"depth": 0, "id": "a", "stream": "a"})),
            ("created", json!({"depth": 1, "id": "s", "parent": "a", "stream": null})),
            ("activity", json!({"at": "2026-01-01T00:00:00.000Z", "commit": "c1", "story": null})),
            ("activity", json!({"commit": "c1"})),
            ("enforced", json!({"gate": "enforce", "message": "go on"})),
            ("reset_failures", json!({})),
            ("stop", json!({})),
            ("status", json!({"status": "completed"})),
            ("checkpoint", json!({"message": "half way"})),
            ("todo_add", json!({"id": "t1", "text": "tests"})),
            ("todo_done", json!({"id": "t1"})),
            ("denied", json!({"owner": "api", "path": "src/api/a.rs", "rule": "other_stream"})),
            ("denied", json!({"path": "src/types/u.rs", "rule": "shared_read"})),
        ];
        for (kind, data) in boulder {
            let typed = BoulderOp::parse(&op(kind, 1, data.clone())).unwrap();
            assert_eq!((typed.kind(), typed.data()), (kind, data));
        }
        for (kind, data) in [("done", json!({"ids": ["B", "A"]})), ("undone", json!({"ids": []}))] {
            let typed = PrdOp::parse(&op(kind, 1, data.clone())).unwrap();
            assert_eq!((typed.kind(), typed.data()), (kind, data));
        }
        let merge = MergeData { parents: ["a".into(), "b".into()], ops: 2 }.data();
        assert_eq!(serde_json::to_string(&merge).unwrap(), r#"{"ops":2,"parents":["a","b"]}"#);
        // Statuses are written as they always were.
        assert_eq!(StreamStatus::ALL.map(StreamStatus::as_str), STREAM_STATUSES);
        assert_eq!(BoulderStatus::ALL.map(BoulderStatus::as_str), BOULDER_STATUSES);
        for s in StreamStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
        }
        for s in BoulderStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
        }
    }

    #[test]
    fn a_refusal_stands_until_retried_or_merged() {
        let refused = |lamport, tip: &str| {
            op(
                "refused",
                lamport,
                json!({"refusal": "conflict", "reason": "2 conflicts", "stream_tip": tip, "hint": "rebase"}),
            )
        };
        let s: StreamState = run(&[
            op("initialized", 1, json!({"branch": "boulder/a"})),
            op("status", 2, json!({"status": "COMPLETED"})),
            refused(3, "ABCDEF12"),
        ])
        .unwrap();
        let r = s.refused.clone().unwrap();
        assert_eq!(
            (r.refusal.as_str(), r.stream_tip.as_str(), r.hint.as_deref()),
            ("conflict", "abcdef12", Some("rebase"))
        );
        assert_eq!(s.status, StreamStatus::Completed, "a refusal leaves the status as it was");
        assert!(r.at_tip("ABCDEF12") && !r.at_tip("abcdef13"));
        s.validate().unwrap();
        let mut retried = s.clone();
        retried.apply(&op("retried", 4, json!({}))).unwrap();
        assert!(retried.refused.is_none());
        let mut merged = s.clone();
        merged.apply(&op("merged", 4, json!({"commit": "abcd"}))).unwrap();
        assert!(merged.refused.is_none());
        // A state without a refusal is written as before: no `refused` key.
        let text = serde_json::to_string(&retried).unwrap();
        assert!(!text.contains("refused"), "{text}");
        assert_eq!(serde_json::from_str::<StreamState>(&serde_json::to_string(&s).unwrap()).unwrap(), s);
        // Bad data is refused naming the field; a kind of refusal this version does not know is taken.
        for (data, field) in [
            (json!({"refusal": "conflict", "reason": "x"}), "stream_tip"),
            (json!({"refusal": "conflict", "stream_tip": "abcd"}), "reason"),
            (json!({"refusal": "Conflict!", "reason": "x", "stream_tip": "abcd"}), "refusal"),
            (
                json!({"refusal": "conflict", "reason": "x", "stream_tip": "abcd", "stream_before": "zz"}),
                "stream_before",
            ),
            (json!({"refusal": "conflict", "reason": 3, "stream_tip": "abcd"}), "reason"),
        ] {
            let e = run::<StreamState>(&[op("refused", 1, data)]).unwrap_err();
            assert!(e.contains(field), "{e}");
        }
        let newer = run::<StreamState>(&[op(
            "refused",
            1,
            json!({"refusal": "flaky_ci", "reason": "x", "stream_tip": "abcd", "extra": 1}),
        )]);
        assert_eq!(newer.unwrap().refused.unwrap().refusal, "flaky_ci");
    }

    /// Ops for the replay property: activity on a small set of commits and the others.
    fn gen_op() -> impl Strategy<Value = (u64, u8, u8, u8)> {
        (1u64..8, 0u8..3, 0u8..6, 0u8..12)
    }

    fn make(i: usize, (lamport, actor, kind, arg): (u64, u8, u8, u8)) -> (Op, usize) {
        let (k, data) = match kind {
            0 | 1 => ("activity", json!({"commit": format!("c{arg}")})),
            2 => ("enforced", json!({"gate": "idle", "message": format!("m{arg}")})),
            3 => ("stop", json!({})),
            4 => ("checkpoint", json!({"message": format!("cp{arg}")})),
            _ => ("todo_add", json!({"id": format!("t{}", arg % 4), "text": format!("x{arg}")})),
        };
        let mut o = op(k, lamport, data);
        o.actor = format!("actor{actor}");
        o.at = format!("2026-01-01T00:00:{:02}Z", arg);
        (o, i)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// The replay order is total: any presentation order gives the same state, and the
        /// iteration counts each distinct commit once.
        #[test]
        fn replay_is_order_independent(ops in prop::collection::vec(gen_op(), 0..40), seed in any::<u64>()) {
            let ops: Vec<(Op, usize)> = ops.into_iter().enumerate().map(|(i, g)| make(i, g)).collect();
            let mut shuffled = ops.clone();
            let mut rng = fastrand::Rng::with_seed(seed);
            rng.shuffle(&mut shuffled);
            let a = replay(BoulderState::default(), ops.clone()).unwrap();
            let b = replay(BoulderState::default(), shuffled).unwrap();
            prop_assert_eq!(&a, &b);
            let distinct: BTreeSet<String> = ops
                .iter()
                .filter(|(o, _)| o.kind == "activity")
                .map(|(o, _)| o.data["commit"].as_str().unwrap().to_string())
                .collect();
            prop_assert_eq!(a.iteration, distinct.len() as u64);
            a.validate().unwrap();
        }

        /// Each commit still among `recent_commits` is given the iteration that counted it, however
        /// often it was seen again and however far the window has slid.
        #[test]
        fn iteration_of_is_the_iteration_that_counted_the_commit(seen in prop::collection::vec(0u8..90, 0..300)) {
            let mut s = BoulderState::default();
            let mut counted = std::collections::HashMap::new();
            for c in &seen {
                let commit = format!("{c:040}");
                let op = BoulderOp::Activity { commit: commit.clone(), story: Opt::Absent, at: Opt::Absent };
                let before = s.iteration;
                s.apply_op(&op, "2026-01-01T00:00:00Z", "a");
                if s.iteration > before {
                    counted.insert(commit.clone(), s.iteration);
                }
                prop_assert_eq!(s.iteration_of(&commit), counted[&commit]);
            }
            for c in &s.recent_commits {
                prop_assert_eq!(s.iteration_of(c), counted[c]);
            }
            prop_assert_eq!(s.iteration_of("not seen"), s.iteration);
        }

        /// Any `refused` data either parses into an op that writes back the JSON it was read from
        /// (keys sorted) and applies as the record does, or is refused naming one of its fields.
        #[test]
        fn refused_ops_parse_or_name_the_field(
            refusal in "[a-z_]{1,8}|[A-Z ]{1,3}|",
            reason in ".{0,20}",
            tip in "[0-9a-f]{0,12}|[g-z]{4}",
            before in prop::option::of("[0-9a-fA-F]{3,10}"),
            hint in prop::option::of(".{0,10}"),
            remote in prop::option::of("[a-z]{1,6}"),
        ) {
            let mut data = json!({"refusal": refusal, "reason": reason, "stream_tip": tip});
            if let Some(b) = &before { data["stream_before"] = json!(b); }
            if let Some(h) = &hint { data["hint"] = json!(h); }
            if let Some(r) = &remote { data["remote"] = json!(r); }
            let o = op("refused", 1, data.clone());
            match StreamOp::parse(&o) {
                Ok(typed) => {
                    prop_assert_eq!(typed.kind(), "refused");
                    prop_assert_eq!(serde_json::to_string(&typed.data()).unwrap(), serde_json::to_string(&data).unwrap());
                    let (mut a, mut b) = (StreamState::default(), StreamState::default());
                    a.apply(&o).unwrap();
                    b.apply_op(&typed, &o.at, &o.actor);
                    prop_assert_eq!(&a, &b);
                    let r = a.refused.clone().unwrap();
                    prop_assert!(r.at_tip(&tip));
                    prop_assert_eq!(r.reason, reason);
                    a.validate().unwrap();
                }
                Err(e) => {
                    let e = e.to_string();
                    prop_assert!(
                        ["refusal", "reason", "stream_tip", "stream_before"].iter().any(|f| e.contains(&format!("data.{f}"))),
                        "{}", e
                    );
                }
            }
        }

        /// Replaying a prefix, then the rest, equals replaying everything when the rest sorts
        /// after the prefix (the fast path of the store's merge).
        #[test]
        fn replay_resumes_from_a_base(ops in prop::collection::vec(gen_op(), 0..30), cut in 0u64..8) {
            let ops: Vec<(Op, usize)> = ops.into_iter().enumerate().map(|(i, g)| make(i, g)).collect();
            let (before, after): (Vec<_>, Vec<_>) = ops.iter().cloned().partition(|(o, _)| o.lamport <= cut);
            let base = replay(BoulderState::default(), before).unwrap();
            let resumed = replay(base, after.clone()).unwrap();
            let whole = replay(BoulderState::default(), ops).unwrap();
            prop_assert_eq!(resumed, whole);
        }
    }
}
