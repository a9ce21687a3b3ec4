//! A person's decision on a stream (`reviewed` op, `git boulder review`): its fields' bounds and
//! the standing decision a stream's state keeps per reviewer ([`Review`]).

use serde::{Deserialize, Serialize};

use super::{check_required, required, CommitId, Op, OpError};

/// The decisions a `reviewed` op takes.
pub const REVIEW_DECISIONS: &[&str] = &["approve", "request_changes", "withdraw"];
/// The longest reviewer (`Name <email>`) a `reviewed` op takes, in bytes.
pub const MAX_REVIEWER: usize = 512;
/// The most reviewers whose decisions a stream's state keeps: past it, the oldest decision is
/// dropped (a log from anywhere cannot grow the state without bound).
pub const MAX_REVIEWERS: usize = 100;

/// A `reviewed` op's decision: one of [`REVIEW_DECISIONS`].
pub(super) fn check_decision(d: &str) -> Result<(), OpError> {
    check_required("reviewed", "decision", d)?;
    if !REVIEW_DECISIONS.contains(&d) {
        return Err(OpError::BadDecision { value: d.chars().take(80).collect() });
    }
    Ok(())
}

pub(super) fn decision(op: &Op) -> Result<String, OpError> {
    let d = required(op, "decision")?;
    check_decision(&d).map(|()| d)
}

/// A `reviewed` op's reviewer: not empty, at most [`MAX_REVIEWER`] bytes, no control characters.
pub(super) fn check_reviewer(r: &str) -> Result<(), OpError> {
    check_required("reviewed", "reviewer", r)?;
    if r.len() > MAX_REVIEWER || r.chars().any(char::is_control) || r.trim().is_empty() {
        return Err(OpError::BadReviewer);
    }
    Ok(())
}

pub(super) fn reviewer(op: &Op) -> Result<String, OpError> {
    let r = required(op, "reviewer")?;
    check_reviewer(&r).map(|()| r)
}

/// A full commit id in lowercase, as git-boulder writes one (a decision names exactly one
/// commit: an abbreviation could name another one tomorrow).
pub(super) fn check_full_commit(kind: &str, key: &'static str, c: &CommitId) -> Result<(), OpError> {
    match c.id() {
        Some(_) => Ok(()),
        None => {
            let text = c.to_string();
            check_required(kind, key, &text)?;
            Err(OpError::NotAFullCommitId { kind: kind.to_string(), key, value: text.chars().take(80).collect() })
        }
    }
}

pub(super) fn full_commit(op: &Op, key: &'static str) -> Result<CommitId, OpError> {
    let c = CommitId::read(required(op, key)?);
    check_full_commit(&op.kind, key, &c).map(|()| c)
}

/// One reviewer's standing decision on a stream (`reviewed` op): the last one they recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Review {
    /// `approve` or `request_changes` (a `withdraw` removes the entry).
    pub decision: String,
    /// The reviewer's text (required with `request_changes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The stream tip the decision is about (40 lowercase hex digits).
    pub tip: String,
    /// When, and on which machine (actor) it was recorded.
    pub at: String,
    pub actor: String,
}
