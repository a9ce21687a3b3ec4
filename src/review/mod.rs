//! Review before landing (docs/review.md): how many approvals a stream needs (the plan's
//! `settings.review` and a stream's `review:`), which recorded decisions count for its tip
//! ([`verdict`]), and recording a decision as a `reviewed` op in the stream's op-log
//! ([`record`]), so that decisions travel with `push`, `pull` and `sync` like every other op.
//!
//! ### Who may approve
//!
//! An approval counts when it names the stream's current tip and was not recorded on the machine
//! (actor) that ran the stream's agent: the actor of the stream's last run, or, for a stream never
//! run, the one that initialized it ([`author_actor`]). A person approving work their own machine's
//! agent made is not a second pair of eyes; `settings.review.allow_self: true` lets a person who
//! works alone approve anyway. Each reviewer (`Name <email>`, as git names them) counts once: their
//! last decision is the one that stands, and `withdraw` takes it back.
//!
//! A `request_changes` on the current tip blocks the stream whoever recorded it, until it is
//! withdrawn or the stream gets a new commit (decisions about older tips do not count either
//! way).

use crate::error::{Error, Result};
use crate::failpoint;
use crate::git::ObjectId;
use crate::plan::{Plan, StreamDef};
use crate::state::op::{MAX_REVIEWER, MAX_TEXT};
use crate::state::{self, Opt, Review, Store, StreamOp, StreamState};
use crate::workspace::Workspace;

/// Where a stream stands with its reviews, at one tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The plan asks for no review of this stream.
    NotRequired,
    /// Fewer valid approvals than needed (`REVIEW`).
    Waiting { have: u32, need: u32 },
    /// A reviewer asked for changes on this tip (`CHANGES_REQUESTED`): the newest such request.
    ChangesRequested { reviewer: String, message: String },
    /// Enough valid approvals (`APPROVED`), by these reviewers, sorted.
    Approved { by: Vec<String> },
}

impl Verdict {
    /// Whether the gate lets the stream land.
    pub fn may_land(&self) -> bool {
        matches!(self, Verdict::NotRequired | Verdict::Approved { .. })
    }

    /// The status word shown for it (`None` when no review is required).
    pub fn status(&self) -> Option<&'static str> {
        match self {
            Verdict::NotRequired => None,
            Verdict::Waiting { .. } => Some("REVIEW"),
            Verdict::ChangesRequested { .. } => Some("CHANGES_REQUESTED"),
            Verdict::Approved { .. } => Some("APPROVED"),
        }
    }
}

/// A decision a reviewer records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    RequestChanges,
    Withdraw,
}

impl Decision {
    /// As written in the `reviewed` op.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::RequestChanges => "request_changes",
            Decision::Withdraw => "withdraw",
        }
    }
}

/// How many approvals `stream` needs: its own `review:`, else `settings.review.required`
/// (a stream the plan does not name takes the setting).
pub fn required(plan: &Plan, stream: &str) -> u32 {
    plan.streams.iter().find(|s| s.name == stream).and_then(|s| s.review).unwrap_or(plan.settings.review.required)
}

/// The actor (machine) that ran the stream's agent: its last run's, else the one that
/// initialized it. Its approvals do not count unless `settings.review.allow_self`.
pub fn author_actor(state: &StreamState) -> Option<&str> {
    state.last_run.as_ref().map(|r| r.actor.as_str()).or(state.initialized_by.as_deref())
}

/// Why a standing decision does or does not count at a tip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// An approval of the tip, by someone who may approve.
    Counts,
    /// A request for changes on the tip: it blocks.
    Blocks,
    /// About an older tip: the stream changed since.
    Stale,
    /// An approval recorded on the machine that ran the stream's agent.
    OwnMachine,
}

impl Standing {
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Counts => "counts",
            Standing::Blocks => "blocks",
            Standing::Stale => "stale",
            Standing::OwnMachine => "own machine",
        }
    }
}

/// How a reviewer's standing decision weighs at `tip`.
pub fn standing(plan: &Plan, review: &Review, tip: ObjectId, author_actor: Option<&str>) -> Standing {
    if !review.tip.eq_ignore_ascii_case(&tip.to_string()) {
        return Standing::Stale;
    }
    match review.decision.as_str() {
        "request_changes" => Standing::Blocks,
        _ if !plan.settings.review.allow_self && author_actor == Some(review.actor.as_str()) => Standing::OwnMachine,
        _ => Standing::Counts,
    }
}

/// Where `stream_name` stands at `tip` with the decisions `state` holds (see the module docs for
/// who may approve). Pure: the gate of every landing path, the statuses and the review screen
/// use it alike.
pub fn verdict(
    plan: &Plan,
    stream_name: &str,
    state: &StreamState,
    tip: ObjectId,
    author_actor: Option<&str>,
) -> Verdict {
    let need = required(plan, stream_name);
    if need == 0 {
        return Verdict::NotRequired;
    }
    let mut by = Vec::new();
    let mut blocking: Option<(&String, &Review)> = None;
    for (reviewer, review) in &state.reviews {
        match standing(plan, review, tip, author_actor) {
            Standing::Counts => by.push(reviewer.clone()),
            Standing::Blocks => {
                // The newest request is the one shown (ties: the first reviewer by name).
                if blocking.is_none_or(|(_, b)| review.at > b.at) {
                    blocking = Some((reviewer, review));
                }
            }
            Standing::Stale | Standing::OwnMachine => {}
        }
    }
    if let Some((reviewer, review)) = blocking {
        return Verdict::ChangesRequested {
            reviewer: reviewer.clone(),
            message: review.message.clone().unwrap_or_default(),
        };
    }
    let have = u32::try_from(by.len()).unwrap_or(u32::MAX);
    if have >= need {
        Verdict::Approved { by }
    } else {
        Verdict::Waiting { have, need }
    }
}

/// Where `stream` stands here: [`verdict`] at the tip of its local branch with the decisions of
/// its local op-log (a stream without a branch waits for its first approval).
pub fn verdict_here(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<Verdict> {
    let need = required(plan, &stream.name);
    if need == 0 {
        return Ok(Verdict::NotRequired);
    }
    let Some(tip) = ws.repo.branch_tip(&stream.branch)? else { return Ok(Verdict::Waiting { have: 0, need }) };
    let store = Store::new(&ws.repo)?;
    let st = store.read::<StreamState>(&state::stream_ref(&stream.name))?.map(|e| e.state).unwrap_or_default();
    Ok(verdict(plan, &stream.name, &st, tip, author_actor(&st)))
}

/// The person recording a decision, as git names them when they commit: `user.name
/// <user.email>` (or `GIT_COMMITTER_NAME` and `GIT_COMMITTER_EMAIL`). A usage error with the fix
/// when there is none.
pub fn reviewer(ws: &Workspace) -> Result<String> {
    let Some((name, email)) = crate::git::identity::person(&ws.repo) else {
        return Err(Error::usage("a review names its reviewer, and git has no user.name and user.email here").hint(
            "set them: git config --global user.name \"Your Name\" && git config --global user.email you@example.com",
        ));
    };
    let who = format!("{name} <{email}>");
    if who.len() > MAX_REVIEWER || who.chars().any(char::is_control) {
        return Err(Error::usage(format!(
            "git's user.name and user.email make a reviewer longer than {MAX_REVIEWER} bytes or with control characters"
        ))
        .hint("set a shorter name: git config user.name \"Your Name\""));
    }
    Ok(who)
}

/// A decision recorded by [`record`].
#[derive(Debug, Clone)]
pub struct Recorded {
    pub reviewer: String,
    pub tip: ObjectId,
    pub decision: Decision,
    /// The stream's verdict at `tip` once it was recorded.
    pub verdict: Verdict,
    /// `withdraw` found no standing decision of this reviewer (nothing was recorded).
    pub nothing_to_withdraw: bool,
}

/// Record `decision` on `stream` by `reviewer` at the tip of the stream's local branch, as one
/// `reviewed` op (a compare-and-swap of the stream's op-log: a process killed at any point leaves
/// the decision whole or absent). `request_changes` needs a message; a message is at most
/// [`MAX_TEXT`] bytes.
pub fn record(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    reviewer: &str,
    decision: Decision,
    message: Option<String>,
) -> Result<Recorded> {
    let message = message.filter(|m| !m.trim().is_empty());
    if decision == Decision::RequestChanges && message.is_none() {
        return Err(Error::usage("--request-changes needs a message: what should change")
            .hint(format!("git boulder review {} --request-changes -m \"what to change\"", stream.name)));
    }
    if let Some(m) = &message {
        if m.len() > MAX_TEXT {
            return Err(Error::usage(format!(
                "the review message is {} bytes long; at most {MAX_TEXT} are recorded",
                m.len()
            ))
            .hint("shorten it, and point to a longer text (an issue, a file in the stream) from it"));
        }
    }
    let tip = ws.repo.branch_tip(&stream.branch)?.ok_or_else(|| {
        Error::usage(format!("stream {} has no branch {} here, so there is nothing to review", stream.name, stream.branch))
            .hint(format!(
                "bring it here with `git boulder pull` (or `git fetch REMOTE {0}:{0}`), or start it with `git boulder stream init {1}`",
                stream.branch, stream.name
            ))
    })?;
    let base = &plan.settings.base_branch;
    if let Some(base_tip) = ws.repo.branch_tip(base)? {
        if decision != Decision::Withdraw && ws.repo.objects().merge_base(tip, base_tip) == Some(tip) {
            return Err(Error::usage(format!(
                "stream {} has no commits beyond {base}: there is nothing to review",
                stream.name
            ))
            .hint("review it once its agent has committed work"));
        }
    }
    let store = Store::new(&ws.repo)?;
    let sref = state::stream_ref(&stream.name);
    let current = store.read::<StreamState>(&sref)?.map(|e| e.state).unwrap_or_default();
    if decision == Decision::Withdraw && !current.reviews.contains_key(reviewer) {
        let verdict = verdict(plan, &stream.name, &current, tip, author_actor(&current));
        return Ok(Recorded { reviewer: reviewer.to_string(), tip, decision, verdict, nothing_to_withdraw: true });
    }
    let op = StreamOp::Reviewed {
        decision: decision.as_str().to_string(),
        message: message.map_or(Opt::Absent, Opt::Set),
        reviewer: reviewer.to_string(),
        tip: tip.into(),
    };
    failpoint::hit("review-record");
    let appended = store.append::<StreamState>(&sref, op)?;
    failpoint::hit("review-recorded");
    let st = &appended.state;
    let verdict = verdict(plan, &stream.name, st, tip, author_actor(st));
    Ok(Recorded { reviewer: reviewer.to_string(), tip, decision, verdict, nothing_to_withdraw: false })
}

#[cfg(test)]
mod tests;
