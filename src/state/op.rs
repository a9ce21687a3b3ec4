//! Op records and state types. Pure: no git here.

use serde::{Deserialize, Serialize};

/// One operation: the content of `op.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Op {
    pub v: u32,
    pub kind: String,
    pub lamport: u64,
    pub at: String,
    pub actor: String,
    #[serde(default)]
    pub data: serde_json::Value,
}

/// A state type kept in an op-log.
pub trait State: Default + Clone + PartialEq + Serialize + for<'de> Deserialize<'de> {
    /// Apply one op; an op this state does not know is an error naming its kind.
    fn apply(&mut self, op: &Op) -> Result<(), String>;
}

/// State of one stream (`refs/boulder/streams/<name>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamState {
    pub status: String,
}

impl State for StreamState {
    fn apply(&mut self, op: &Op) -> Result<(), String> {
        Err(format!("unknown stream op {:?}", op.kind))
    }
}

/// State of one boulder (`refs/boulder/boulders/<id>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BoulderState {
    pub iteration: u64,
}

impl State for BoulderState {
    fn apply(&mut self, op: &Op) -> Result<(), String> {
        Err(format!("unknown boulder op {:?}", op.kind))
    }
}

/// Completion records (`refs/boulder/prd`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrdState {
    pub done: std::collections::BTreeSet<String>,
}

impl State for PrdState {
    fn apply(&mut self, op: &Op) -> Result<(), String> {
        Err(format!("unknown prd op {:?}", op.kind))
    }
}
