//! State as op-logs in refs (DESIGN §4). Each `refs/boulder/streams/<name>`,
//! `refs/boulder/boulders/<id>` and `refs/boulder/prd` points at a chain of commits, one per
//! operation, whose tree holds `op.json` and `state.json` (the whole state after the op).
//!
//! * [`op`]: the op record, the typed ops and statuses, and the state types with their `apply`
//!   (pure), one file per log.
//! * [`store`]: read; append (compare-and-swap with retry); the streamed log; validation of
//!   chains from anywhere; the deterministic merge of two diverged chains (gix), a file each.
//! * [`pack`]: packing the state objects (`git boulder gc`, and on a threshold).

pub mod history;

pub mod op;
pub mod pack;
pub mod store;

pub use op::{
    replay, BoulderOp, BoulderState, BoulderStatus, Checkpoint, CommitId, Op, Opt, Payload, PrdOp, PrdState, Refusal,
    RunInfo, Spend, SpendAmount, SpendRow, State, StreamOp, StreamState, StreamStatus, Todo,
};
pub use store::{Absorbed, Appended, Entry, LogEntry, Prepared, Store};

/// The op-log refs, named in [`crate::git::refs`]: stream and boulder prefixes, the PRD op-log,
/// the notes ref.
pub use crate::git::refs::{boulder_ref, stream_ref, BOULDERS, NOTES as NOTES_REF, PRD as PRD_REF, STREAMS};

/// The machine a note names as the one that recorded its commit: this one's actor id and host.
pub fn recorder(store: &Store) -> (Option<String>, Option<String>) {
    (store.known_actor(), Some(crate::git::identity::hostname()))
}
