//! The review gate (docs/review.md): may a stream land at a tip? Every landing path asks it —
//! `stream merge` (into the local base, and `--remote`, where the merge queue asks again after
//! pulling the remote's state, about the tip it lands), `--all`, `settings.auto_merge` and
//! `work` — and the dashboard shows its answer as REVIEW, CHANGES_REQUESTED or APPROVED.
//!
//! A stream without its approvals waits; it is not refused the way a conflict is: nothing is
//! recorded in its op-log (no `refused` op, no NEEDS_ATTENTION, no `stream retry` needed), a
//! worker lands it as soon as an approval of its tip reaches it, and changes requested go back to
//! its agent as the task ([`changes_task`]).

use crate::error::Error;
use crate::error::Result;
use crate::git::ObjectId;
use crate::plan::{Plan, StreamDef};
use crate::review::Verdict;
use crate::state::{self, Store, StreamState};
use crate::workspace::Workspace;

/// The gate's refusal, kept as the cause of the [`Error`] it makes so that callers (`--all`)
/// can tell it from refusals a person has to resolve.
#[derive(Debug, thiserror::Error)]
#[error("needs review: git boulder review {stream}")]
pub struct NeedsReview {
    pub stream: String,
}

/// Does `stream` need review at all (its `review:`, else `settings.review.required`)?
pub fn required(plan: &Plan, stream: &str) -> bool {
    crate::review::required(plan, stream) > 0
}

/// The verdict on `stream` at `tip`, from the decisions this machine's state holds.
pub fn verdict_at(ws: &Workspace, plan: &Plan, stream: &str, tip: ObjectId) -> Result<Verdict> {
    if !required(plan, stream) {
        return Ok(Verdict::NotRequired);
    }
    let st = Store::new(&ws.repo)?.read::<StreamState>(&state::stream_ref(stream))?.map(|e| e.state);
    let st = st.unwrap_or_default();
    Ok(crate::review::verdict(plan, stream, &st, tip, crate::review::author_actor(&st)))
}

/// The verdict at the tip of the stream's branch here, with that tip (`None`: no branch).
pub fn verdict(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<Option<(ObjectId, Verdict)>> {
    let Some(tip) = ws.repo.branch_tip(&stream.branch)? else { return Ok(None) };
    Ok(Some((tip, verdict_at(ws, plan, &stream.name, tip)?)))
}

/// Refuse landing `stream` at `tip` unless enough valid approvals name that tip.
pub fn require(ws: &Workspace, plan: &Plan, stream: &str, tip: ObjectId) -> Result<()> {
    let v = verdict_at(ws, plan, stream, tip)?;
    match v.may_land() {
        true => Ok(()),
        false => Err(refusal(stream, tip, &v)),
    }
}

/// `needs review: git boulder review NAME` (exit 1), a hint saying what is missing.
pub fn refusal(stream: &str, tip: ObjectId, v: &Verdict) -> Error {
    let e = Error::refused(format!("needs review: git boulder review {stream}"))
        .with_source(NeedsReview { stream: stream.to_string() });
    match describe(stream, tip, v) {
        Some(why) => e.hint(why),
        None => e,
    }
}

/// What the verdict lacks, in one line (`None` when it lets the stream land).
pub fn describe(stream: &str, tip: ObjectId, v: &Verdict) -> Option<String> {
    let at = crate::git::id::short(tip);
    match v {
        Verdict::Waiting { have, need } => Some(format!(
            "stream {stream} has {have} of the {need} approval(s) its tip {at} needs (a new commit needs new approvals)"
        )),
        Verdict::ChangesRequested { reviewer, message } => Some(format!(
            "{reviewer} requested changes on {at}: {}; `git boulder stream run {stream}` (or `git boulder work`) gives them to its agent",
            message.lines().next().unwrap_or_default()
        )),
        Verdict::NotRequired | Verdict::Approved { .. } => None,
    }
}

/// Is `e` the gate's refusal ([`refusal`])?
pub fn is_refusal(e: &Error) -> bool {
    std::error::Error::source(e).is_some_and(|s| s.downcast_ref::<NeedsReview>().is_some())
}

/// The task an agent is given for the changes `reviewer` requested on `tip` (docs/review.md
/// quotes it): the reviewer's text, whole.
pub fn changes_task(reviewer: &str, tip: ObjectId, message: &str) -> String {
    format!(
        "Changes requested by {reviewer} on {}:\n\n{}\n\nMake these changes, commit them, and stop.",
        crate::git::id::short(tip),
        message.trim_end()
    )
}

/// The task for `stream`'s agent when a reviewer requested changes on its branch's tip, with the
/// reviewer (`None`: no changes requested there).
pub fn changes(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<Option<(String, String)>> {
    Ok(match verdict(ws, plan, stream)? {
        Some((tip, Verdict::ChangesRequested { reviewer, message })) => {
            let task = changes_task(&reviewer, tip, &message);
            Some((reviewer, task))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_quotes_the_reviewer_and_the_tip() {
        let tip = crate::git::id::parse("0123456789abcdef0123456789abcdef01234567").unwrap();
        assert_eq!(
            changes_task("Ann <ann@example.com>", tip, "Rename the table.\nAnd test it.\n"),
            "Changes requested by Ann <ann@example.com> on 01234567:\n\nRename the table.\nAnd test it.\n\nMake these changes, commit them, and stop."
        );
    }

    #[test]
    fn the_refusal_is_told_apart_by_its_cause() {
        let tip = crate::git::id::parse("0123456789abcdef0123456789abcdef01234567").unwrap();
        let e = refusal("auth", tip, &Verdict::Waiting { have: 0, need: 1 });
        assert_eq!(e.message, "needs review: git boulder review auth");
        assert_eq!(e.exit_code(), 1);
        assert!(e.landing.is_none(), "a wait, not a refusal recorded for a person");
        assert!(is_refusal(&e));
        assert!(!is_refusal(&Error::refused("needs review: git boulder review auth")));
    }
}
