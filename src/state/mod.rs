//! State as op-logs in refs (DESIGN §4). Each `refs/boulder/streams/<name>`,
//! `refs/boulder/boulders/<id>` and `refs/boulder/prd` points at a chain of commits, one per
//! operation, whose tree holds `op.json` and `state.json` (the whole state after the op).
//!
//! * [`op`]: the op record, the typed ops and statuses, and the state types with their `apply`
//!   (pure).
//! * [`store`]: read, append (compare-and-swap with retry), log, validation of chains from
//!   anywhere, and the deterministic merge of two diverged chains (gix).

pub mod history;

pub mod op;
pub mod store;

pub use op::{
    replay, BoulderOp, BoulderState, BoulderStatus, Checkpoint, Op, Opt, Payload, PrdOp, PrdState, RunInfo, State,
    StreamOp, StreamState, StreamStatus, Todo,
};
pub use store::{Absorbed, Entry, LogEntry, Store};

/// Ref prefix of stream op-logs.
pub const STREAMS: &str = "refs/boulder/streams/";
/// Ref prefix of boulder op-logs.
pub const BOULDERS: &str = "refs/boulder/boulders/";
/// The op-log of PRD completion records (`prd done`).
pub const PRD_REF: &str = "refs/boulder/prd";
/// The notes ref written by the post-commit hook.
pub const NOTES_REF: &str = "refs/notes/boulder";

pub fn stream_ref(name: &str) -> String {
    format!("{STREAMS}{name}")
}

pub fn boulder_ref(id: &str) -> String {
    format!("{BOULDERS}{id}")
}
