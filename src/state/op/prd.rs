//! The completion records (`refs/boulder/prd`): [`PrdOp`] and [`PrdState`].

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{check_time, field, unknown, Op, OpError, Payload, State, StateError};

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

/// A story id as the records take it: 1 to 200 bytes.
fn story_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 200
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
                    Some(s) if story_id(s) => Ok(s.to_owned()),
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

    fn check(&self) -> Result<(), OpError> {
        let (PrdOp::Done { ids } | PrdOp::Undone { ids }) = self;
        match ids.iter().find(|s| !story_id(s)) {
            Some(bad) => Err(OpError::NotAStoryId { kind: self.kind().to_string(), value: bad.as_str().into() }),
            None => Ok(()),
        }
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
        if let Some(id) = self.done.iter().find(|id| !story_id(id)) {
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
