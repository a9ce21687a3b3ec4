//! Op records and state types, and how each op changes its state. Pure: no git here.
//!
//! Here: the envelope [`Op`], the field readers and checks every log shares, [`CommitId`],
//! [`Payload`] and [`State`], and [`replay`]. One file per log: `stream.rs` ([`StreamOp`],
//! [`StreamState`]), `boulder.rs` ([`BoulderOp`], [`BoulderState`]), `prd.rs` ([`PrdOp`],
//! [`PrdState`]).
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
//! fail: everything an op is refused for is found when it is parsed, or, for an op appended
//! typed (written once, never through a JSON value), by [`Payload::check`].
//!
//! ### Adding an op kind
//!
//! Add a variant to the state's op enum (its fields named as in the JSON and declared in the
//! order of those names sorted), read it in that enum's `parse`, check it in `check` (the same
//! fields in the same order), name it in `kind`, handle it in the state's `apply_op` (the
//! compiler lists the matches to complete), and document it in docs/state-format.md.

use serde::{Deserialize, Serialize, Serializer};

use crate::git::ObjectId;

mod boulder;
mod prd;
mod review;
mod spend;
mod stream;
#[cfg(test)]
mod tests;

pub use boulder::{
    BoulderOp, BoulderState, BoulderStatus, Checkpoint, Todo, BOULDER_STATUSES, MAX_DEPTH, RECENT_COMMITS,
};
pub use prd::{PrdOp, PrdState};
pub use review::{Review, MAX_REVIEWER, MAX_REVIEWERS, REVIEW_DECISIONS};
pub use spend::{
    micros, Spend, SpendAmount, SpendRow, MAX_AMOUNTS, MAX_KEY, MAX_MODEL, MAX_SECONDS, MAX_TOKENS, MAX_USD, SOURCES,
};
pub use stream::{Refusal, Rollback, RunInfo, StreamOp, StreamState, StreamStatus, MAX_INDEX, STREAM_STATUSES};

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
    #[error("{kind} op: data.{key}: {why}")]
    Bad { kind: String, key: &'static str, why: String },
    #[error("{kind} op: data.{key} {value:?} is not a full commit id (40 hex digits)")]
    NotAFullCommitId { kind: String, key: &'static str, value: String },
    #[error("reviewed op: data.decision {value:?} is not approve, request_changes or withdraw")]
    BadDecision { value: String },
    #[error("reviewed op: data.reviewer is longer than {MAX_REVIEWER} bytes, blank or has control characters")]
    BadReviewer,
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
    #[error("spend holds a key or model that is empty, longer than {MAX_KEY} bytes or has control characters")]
    SpendKey,
    #[error("reviews holds more than {MAX_REVIEWERS} reviewers")]
    TooManyReviews,
    #[error("the review of {reviewer:?} is not a valid decision")]
    BadReview { reviewer: String },
    #[error("depth {depth} is above {MAX_DEPTH}")]
    Depth { depth: u64 },
    #[error("recent_commits holds more than {RECENT_COMMITS} ids")]
    TooManyRecentCommits,
    #[error("todo id {id:?} appears twice")]
    DuplicateTodo { id: String },
    #[error("done holds {id:?}, not a story id")]
    NotAStoryId { id: String },
}

/// One operation: the content of `op.json`, the envelope of a typed op. Read back, its data is
/// the JSON as stored (`Op`); appended, it is the typed op (`Op<StreamOp>`, …), written once,
/// in the same bytes (the typed ops' fields are declared in the order of their sorted keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Op<D = serde_json::Value> {
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
    pub data: D,
}

impl Op {
    /// Check the fields of an op read from anywhere (a remote included).
    pub fn validate(&self) -> Result<(), OpError> {
        self.validate_envelope()?;
        if !self.data.is_object() {
            return Err(OpError::DataNotAnObject { kind: self.kind.clone() });
        }
        Ok(())
    }
}

impl<D> Op<D> {
    /// Check the fields of the envelope (all but the data).
    pub fn validate_envelope(&self) -> Result<(), OpError> {
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
        valid_actor(&self.actor)
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

    /// Check a typed op as [`Payload::parse`] checks what it reads, field by field in the same
    /// order, so an op appended typed is refused exactly when the JSON it writes would be (a
    /// property test holds the two together).
    fn check(&self) -> Result<(), OpError>;

    /// The data object as written in `op.json`, as a JSON value (keys sorted, as in every object
    /// git-boulder has written there). An append does not go through it: it writes the typed op.
    fn data(&self) -> serde_json::Value {
        // A struct of strings, numbers, booleans and lists always converts.
        serde_json::to_value(self).unwrap_or_else(|_| serde_json::Value::Object(Default::default()))
    }
}

/// The data of a `merge` op, written only by the store's deterministic merge (fields in the order
/// of their sorted keys, as written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergeData {
    /// How many ops only one side had.
    pub ops: usize,
    /// The two merged tips, sorted by id.
    #[serde(serialize_with = "hex_pair")]
    pub parents: [ObjectId; 2],
}

fn hex_pair<S: Serializer>(ids: &[ObjectId; 2], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ids.iter().map(|id| id.to_hex().to_string()))
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
        Some(serde_json::Value::String(s)) => check_text(&op.kind, key, s).map(|()| Some(s.clone())),
        Some(_) => Err(OpError::NotAString { kind: op.kind.clone(), key }),
    }
}

fn required(op: &Op, key: &'static str) -> Result<String, OpError> {
    match string(op, key)? {
        Some(s) => check_required(&op.kind, key, &s).map(|()| s),
        None => Err(OpError::MissingField { kind: op.kind.clone(), key }),
    }
}

// The checks of a field's value, shared by what `parse` reads and what `check` is given.

/// A string of an op's data: at most [`MAX_TEXT`] bytes.
fn check_text(kind: &str, key: &'static str, s: &str) -> Result<(), OpError> {
    if s.len() > MAX_TEXT {
        return Err(OpError::TooLong { kind: kind.to_string(), key });
    }
    Ok(())
}

/// A required string: at most [`MAX_TEXT`] bytes, not empty.
fn check_required(kind: &str, key: &'static str, s: &str) -> Result<(), OpError> {
    check_text(kind, key, s)?;
    if s.is_empty() {
        return Err(OpError::EmptyField { kind: kind.to_string(), key });
    }
    Ok(())
}

/// An optional string, when given.
fn check_opt_text(kind: &str, key: &'static str, s: &Opt<String>) -> Result<(), OpError> {
    s.get().map_or(Ok(()), |s| check_text(kind, key, s))
}

/// A short lowercase word: 1 to 64 of `a-z`, `0-9`, `_`.
fn check_word(kind: &str, key: &'static str, w: &str) -> Result<(), OpError> {
    check_required(kind, key, w)?;
    if w.len() > 64 || !w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return Err(OpError::NotAWord { kind: kind.to_string(), key, value: w.to_string() });
    }
    Ok(())
}

/// A stream index: a whole number 1..=[`MAX_INDEX`].
fn check_index(kind: &str, n: u64) -> Result<(), OpError> {
    if !(1..=MAX_INDEX).contains(&n) {
        return Err(OpError::BadIndex { kind: kind.to_string() });
    }
    Ok(())
}

/// A commit id given typed: one made from an [`ObjectId`] is always one; one read was checked
/// as it was read ([`commit_id`], [`loose_commit`]).
fn check_commit(kind: &str, key: &'static str, c: &CommitId) -> Result<(), OpError> {
    match &c.0 {
        Written::Id(_) => Ok(()),
        Written::Text(t) => check_required(kind, key, t),
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
fn commit_id(op: &Op, key: &'static str) -> Result<CommitId, OpError> {
    let c = required(op, key)?;
    if !(4..=64).contains(&c.len()) || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(OpError::NotACommitId { kind: op.kind.clone(), key, value: c });
    }
    Ok(CommitId::read(c))
}

/// A commit id as an `activity` op has always taken it: any non-empty text (kept as written).
fn loose_commit(op: &Op, key: &'static str) -> Result<CommitId, OpError> {
    required(op, key).map(CommitId::read)
}

/// A short lowercase word as data (a kind of something): 1 to 64 of `a-z`, `0-9`, `_`.
fn word(op: &Op, key: &'static str) -> Result<String, OpError> {
    let w = required(op, key)?;
    check_word(&op.kind, key, &w).map(|()| w)
}

/// A stream index as data: a whole number 1..=[`MAX_INDEX`].
fn index(op: &Op) -> Result<u64, OpError> {
    let n = field(op, "index").and_then(|v| v.as_u64()).ok_or_else(|| OpError::BadIndex { kind: op.kind.clone() })?;
    check_index(&op.kind, n).map(|()| n)
}

/// A commit id in an op's data. git-boulder writes full ids, made from an [`ObjectId`]
/// (`CommitId::from(id)`), written as 40 lowercase hex digits. What an op read from anywhere
/// holds is taken as the format always took it (`merged`, `rolled_back`, `unmerged`, `refused`:
/// 4 to 64 hex digits in either case; `activity`: any non-empty text) and kept as written, so
/// that the op writes back the same JSON; only text that is a full id in lowercase reads back
/// as an [`ObjectId`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitId(Written);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Written {
    /// A full id (written as 40 lowercase hex digits).
    Id(ObjectId),
    /// Any other text the op's kind takes for the field (checked as it was read).
    Text(String),
}

impl CommitId {
    /// The text of an op's field, checked already: a full id in lowercase reads as one.
    fn read(text: String) -> CommitId {
        match crate::git::id::parse(&text).filter(|_| !text.bytes().any(|b| b.is_ascii_uppercase())) {
            Some(id) => CommitId(Written::Id(id)),
            None => CommitId(Written::Text(text)),
        }
    }

    /// The full id, when the op holds one.
    pub fn id(&self) -> Option<ObjectId> {
        match &self.0 {
            Written::Id(id) => Some(*id),
            Written::Text(_) => None,
        }
    }

    /// In lower case, as states keep the ids of `merged`, `rolled_back`, `unmerged` and
    /// `refused`.
    pub fn to_lowercase(&self) -> String {
        self.to_string().to_ascii_lowercase()
    }
}

impl From<ObjectId> for CommitId {
    fn from(id: ObjectId) -> Self {
        CommitId(Written::Id(id))
    }
}

/// As written in the op.
impl std::fmt::Display for CommitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Written::Id(id) => write!(f, "{}", id.to_hex()),
            Written::Text(t) => f.write_str(t),
        }
    }
}

impl Serialize for CommitId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Written::Id(id) => crate::git::id::hex::serialize(id, s),
            Written::Text(t) => s.serialize_str(t),
        }
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
