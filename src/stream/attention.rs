//! Refused landings (`NEEDS_ATTENTION`): a landing refused for a reason only a person or a new
//! commit can fix — a conflict, an ownership violation, a failed `verify`, uncommitted changes,
//! missing work ([`crate::error::Landing`]) — is recorded as a `refused` op in the stream's
//! op-log ([`record`]) and, for a landing on a remote, pushed there. Until the stream's branch
//! moves past the tip it was refused at (here, or on a remote) or `git boulder stream retry`
//! records a `retried` op ([`retry`]), the refusal stands ([`standing`]): the dashboard shows the
//! stream as `NEEDS_ATTENTION` and no worker takes it.
//!
//! ### Crash safety
//! The refusal is one op, appended with one compare-and-swap: a command killed while recording
//! it leaves it whole or absent. A rerun that meets the same refusal (same kind, reason and tip)
//! appends nothing and pushes what is there.

use crate::error::{Error, Result};
use crate::failpoint;
use crate::git::remote::RemoteName;
use crate::git::{refs, ObjectId, Repo};
use crate::plan::StreamDef;
use crate::state::{self, Opt, Refusal, Store, StreamOp, StreamState};
use crate::workspace::Workspace;

/// The command that clears a refusal by hand.
pub fn retry_command(stream: &str) -> String {
    format!("git boulder stream retry {stream}")
}

/// Record the refused landing `e` of `stream` (when it is one: [`Error::landing`]) and, for a
/// landing on `remote`, push the state there. `before` is the branch's tip before the attempt.
/// Returns `e`, with a hint saying what was recorded; a failure to record is said, never
/// returned in its place.
pub fn record(
    ws: &Workspace,
    stream: &StreamDef,
    before: Option<ObjectId>,
    remote: Option<&str>,
    e: Error,
    say: &dyn Fn(&str),
) -> Error {
    let Some(landing) = e.landing else { return e };
    match record_op(ws, stream, before, remote, &e, landing) {
        // No branch to record a tip of: nothing a worker could take either.
        Ok(false) => e,
        Ok(true) => {
            let shared = remote.map(|r| format!(" and on {r}")).unwrap_or_default();
            let command = retry_command(&stream.name);
            e.hint(format!(
                "recorded here{shared}: no worker takes stream {} again until its branch gets a new commit, or `{command}`",
                stream.name
            ))
        }
        Err(failed) => {
            say(&format!("warning: the refusal of stream {} was not recorded: {}", stream.name, failed.message));
            e
        }
    }
}

fn record_op(
    ws: &Workspace,
    stream: &StreamDef,
    before: Option<ObjectId>,
    remote: Option<&str>,
    e: &Error,
    landing: crate::error::Landing,
) -> Result<bool> {
    let repo = &ws.repo;
    let Some(tip) = repo.branch_tip(&stream.branch)? else { return Ok(false) };
    let store = Store::new(repo)?;
    let sref = state::stream_ref(&stream.name);
    let reason = clip(&e.message);
    let hint = e.hints.first().map(|h| clip(h));
    let standing = store.read::<StreamState>(&sref)?.and_then(|s| s.state.refused);
    let same = standing.as_ref().is_some_and(|r| {
        r.refusal == landing.as_str()
            && r.reason == reason
            && r.at_tip(&tip.to_string())
            && r.remote.as_deref() == remote
    });
    if !same {
        failpoint::hit("refusal-record");
        let op = StreamOp::Refused {
            refusal: landing.as_str().to_string(),
            reason,
            stream_tip: tip.into(),
            stream_before: before.filter(|b| *b != tip).map(state::CommitId::from).into(),
            hint: hint.map_or(Opt::Absent, Opt::Set),
            remote: remote.map_or(Opt::Absent, |r| Opt::Set(r.to_string())),
        };
        store.append::<StreamState>(&sref, op)?;
    }
    failpoint::hit("refusal-recorded");
    if let Some(r) = remote {
        push(repo, r)?;
    }
    Ok(true)
}

/// Text kept within what an op's data accepts.
fn clip(text: &str) -> String {
    let max = state::op::MAX_TEXT;
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Push the state to `remote`, as `git boulder push` does; a ref the remote would not take is an
/// error.
fn push(repo: &Repo, remote: &str) -> Result<()> {
    let r = RemoteName::new(repo, remote)?;
    let report = crate::sync::push(repo, &r)?;
    let rejected: Vec<String> =
        report.refs.iter().filter(|o| o.result == crate::sync::RefResult::Rejected).map(|o| o.name.clone()).collect();
    if !rejected.is_empty() {
        return Err(Error::refused(format!("{remote} did not take {}", rejected.join(", ")))
            .hint(format!("run `git boulder sync {remote}`")));
    }
    Ok(())
}

/// The stream's refusal, when it still stands: the state records one and no tip of its branch
/// seen here has moved past it. The tips looked at: the local branch, and the branch on each
/// remote as last fetched (`refs/remotes/<remote>/<branch>`, and the merge queue's and the
/// worker's `refs/boulder-queue/<key>/heads/<branch>`).
///
/// A tip has moved past the refusal when it is neither of the tips the refusal was made at nor
/// in their history. A machine that does not have the refused tip cannot tell its history: its
/// own branch then never counts (it was not built on the refused work), and a remote's counts
/// when its commit is no older than the refusal.
pub fn standing<'s>(repo: &Repo, stream: &StreamDef, st: &'s StreamState) -> Result<Option<&'s Refusal>> {
    let Some(r) = &st.refused else { return Ok(None) };
    let objects = repo.objects();
    let known: Vec<ObjectId> = [Some(&r.stream_tip), r.stream_before.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|t| ObjectId::from_hex(t.as_bytes()).ok())
        .filter(|id| objects.has(*id))
        .collect();
    let tip_known = !known.is_empty();
    let refused_at = crate::time::parse_rfc3339(&r.at).unwrap_or(0.0);
    let moved = |t: ObjectId, local: bool| -> Result<bool> {
        if r.at_tip(&t.to_string()) {
            return Ok(false);
        }
        if !tip_known {
            return Ok(!local && objects.commit_time(t).is_some_and(|secs| secs as f64 >= refused_at.floor()));
        }
        for k in &known {
            if objects.is_ancestor(t, *k)? {
                return Ok(false);
            }
        }
        Ok(true)
    };
    if let Some(t) = repo.branch_tip(&stream.branch)? {
        if moved(t, true)? {
            return Ok(None);
        }
    }
    for t in remote_tips(repo, &stream.branch)? {
        if moved(t, false)? {
            return Ok(None);
        }
    }
    Ok(Some(r))
}

/// The stream branch's tips on remotes, as last fetched here.
fn remote_tips(repo: &Repo, branch: &str) -> Result<Vec<ObjectId>> {
    let mut out = Vec::new();
    let tracking_tail = format!("/{branch}");
    for (name, id) in refs::list(repo, refs::REMOTE_BRANCHES)? {
        let rest = &name[refs::REMOTE_BRANCHES.len()..];
        if rest.strip_suffix(&tracking_tail).is_some_and(|remote| !remote.is_empty() && !remote.contains('/')) {
            out.push(id);
        }
    }
    let queue_tail = format!("/heads/{branch}");
    for (name, id) in refs::list(repo, refs::QUEUE)? {
        let rest = &name[refs::QUEUE.len()..];
        if rest.strip_suffix(&queue_tail).is_some_and(|key| !key.is_empty() && !key.contains('/')) {
            out.push(id);
        }
    }
    Ok(out)
}

/// Fetch the branches of `streams` from `remote` (where the merge queue keeps them), so that
/// [`standing`] sees new commits pushed there. Branches the remote lacks are no error.
pub fn refresh(repo: &Repo, remote: &RemoteName, streams: &[&StreamDef]) -> Result<()> {
    if streams.is_empty() {
        return Ok(());
    }
    let specs: Vec<String> = streams
        .iter()
        .map(|s| format!("+{}:{}", refs::branch_ref(&s.branch), refs::queue_ref(&remote.key, &s.branch)))
        .collect();
    crate::git::remote::fetch(repo, &remote.given, &specs)?;
    Ok(())
}

/// What `stream retry` did.
#[derive(Debug)]
pub enum Retried {
    /// The refusal was cleared (a `retried` op appended).
    Cleared(Refusal),
    /// No refusal was recorded.
    NothingToClear,
}

/// `git boulder stream retry NAME`: clear the stream's refusal (pulling `remote` first and pushing
/// to it after, when given).
pub fn retry(ws: &Workspace, stream: &StreamDef, remote: Option<&str>) -> Result<Retried> {
    let repo = &ws.repo;
    let r = remote.map(|r| RemoteName::new(repo, r)).transpose()?;
    if let Some(r) = &r {
        // A refusal recorded on another machine comes in first.
        crate::sync::pull(repo, r)?;
    }
    let store = Store::new(repo)?;
    let sref = state::stream_ref(&stream.name);
    let Some(refusal) = store.read::<StreamState>(&sref)?.and_then(|s| s.state.refused) else {
        return Ok(Retried::NothingToClear);
    };
    store.append::<StreamState>(&sref, StreamOp::Retried {})?;
    if let Some(r) = remote {
        push(repo, r)?;
    }
    Ok(Retried::Cleared(refusal))
}
