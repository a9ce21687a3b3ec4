//! Sharing state through any git remote (DESIGN §9): `push`, `pull`, `sync`, and the refspecs
//! of `remote setup`.
//!
//! * **pull** fetches (git CLI, which brings the objects; the refs are written here, see
//!   [`remote::fetch`]) `refs/boulder/*` and `refs/notes/boulder` into
//!   `refs/boulder-remotes/<remote>/…`, then brings each op-log in: created, fast-forwarded, kept
//!   (local ahead) or merged deterministically ([`crate::state::Store::absorb`]); notes merge by
//!   union; claims are kept as the remote's last word. Everything fetched is validated before it
//!   is used; a ref that fails is refused by name and the local ref is kept as it was. An
//!   op-log tip refused for what it holds is remembered (`refused.json`), so later pulls refuse it
//!   again without walking it until the remote's ref moves.
//! * **push** sends the op-logs and notes (git CLI, never forced). A ref rejected because the remote
//!   moved (a lost race): pull, merge, push again, a bounded number of rounds. A ref the server
//!   refuses for its own reasons (a hook, a `receive.*` rule) stops the push at once.
//! * **sync** is pull then push until both sides agree.
//!
//! Here: the outcomes, push and sync; pull in `pull.rs`, taking in one fetched ref in `take.rs`,
//! fetched notes checked in `fetched_notes.rs`, refused tips remembered in `refused.rs`, `remote setup` in
//! `setup.rs`.

pub mod claim;
mod fetched_notes;
mod pull;
mod refused;
mod report;
mod setup;
mod take;

use crate::error::{Error, Result};
use crate::git::remote::{self, RemoteName};
use crate::git::{cli, refs, Repo};
use crate::state::{self, Store, NOTES_REF};

pub use fetched_notes::{InvalidNotes, MAX_NOTES};
pub use pull::{absorb_pending, pull};
pub use setup::{setup, setup_push_specs};

/// A remote that cannot be used is a usage error, with how to name one that can.
impl From<remote::RemoteError> for Error {
    fn from(e: remote::RemoteError) -> Error {
        let hint = match &e {
            remote::RemoteError::NotARemote { .. } => "name a remote (`git remote -v`) or a URL".to_string(),
            remote::RemoteError::NotConfigured { setting, .. } => format!(
                "add the remote yourself (`git remote add NAME URL`) and name it in {setting}, or pass --remote URL on the command line"
            ),
            remote::RemoteError::NoDefault => {
                "name one (`git boulder push REMOTE`), or add one with `git remote add origin URL`".to_string()
            }
        };
        Error::usage(e.to_string()).hint(hint).with_source(e)
    }
}

/// How many pull-and-push rounds a push or sync tries before giving up.
pub const ROUNDS: usize = 6;

/// What happened to one ref.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RefOutcome {
    /// The local ref (`refs/boulder/streams/auth`, `refs/notes/boulder`).
    pub name: String,
    /// What the pull or push did with it.
    pub result: RefResult,
    /// Why, for refused and rejected refs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// What a pull or a push did with one ref; written in `--json` as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefResult {
    /// Pull: the ref did not exist here and was taken as fetched.
    Created,
    /// Pull or push: both sides already agree.
    UpToDate,
    /// Pull: moved forward to what was fetched.
    FastForward,
    /// Pull: merged with what was fetched.
    Merged,
    /// Pull: not taken (invalid, over a limit, or a lasting conflict); `why` says why.
    Refused,
    /// Pull: not a git-boulder ref.
    Ignored,
    /// Pull: another machine's claim, tracked.
    Claim,
    /// Pull: another machine's claim, released.
    ClaimReleased,
    /// Push: moved on the remote.
    Pushed,
    /// Push: created on the remote.
    New,
    /// Push: the remote refused it; `why` has git's summary.
    Rejected,
}

impl RefResult {
    /// As written in `--json` and counted in the summary line (`2 up to date`, with spaces).
    pub fn as_str(self) -> &'static str {
        match self {
            RefResult::Created => "created",
            RefResult::UpToDate => "up_to_date",
            RefResult::FastForward => "fast_forward",
            RefResult::Merged => "merged",
            RefResult::Refused => "refused",
            RefResult::Ignored => "ignored",
            RefResult::Claim => "claim",
            RefResult::ClaimReleased => "claim_released",
            RefResult::Pushed => "pushed",
            RefResult::New => "new",
            RefResult::Rejected => "rejected",
        }
    }
}

impl std::fmt::Display for RefResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn outcome(name: &str, result: RefResult, why: Option<String>) -> RefOutcome {
    RefOutcome { name: name.to_string(), result, why }
}

/// The lock held while fetching into `refs/boulder-remotes/<remote>/` (waited for).
pub(crate) fn fetch_lock(repo: &Repo, remote: &RemoteName, command: &str) -> Result<crate::lock::LockGuard> {
    crate::lock::acquire(repo, &format!("fetch-{}", remote.key), true, command)
}

/// Most refs one pull (or one absorb of fetched refs) takes in; the rest are refused by name.
pub const MAX_REFS_PER_PULL: usize = 10_000;

/// The result of a pull.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PullReport {
    pub remote: String,
    pub refs: Vec<RefOutcome>,
}

impl PullReport {
    pub fn refused(&self) -> Vec<&RefOutcome> {
        self.refs.iter().filter(|r| r.result == RefResult::Refused).collect()
    }
}

/// Resolve `REMOTE` (or the default remote).
pub fn resolve(repo: &Repo, given: Option<&str>, base_branch: &str) -> Result<RemoteName> {
    let name = match given {
        Some(g) => g.to_string(),
        None => remote::default_remote(repo, base_branch)?,
    };
    Ok(RemoteName::new(repo, &name)?)
}

fn tracking_prefix(key: &str) -> String {
    refs::remote_prefix(key)
}

/// The fetch refspecs of pull (also written by `remote setup`).
pub fn fetch_specs(key: &str) -> Vec<String> {
    vec![
        format!("+{}*:{}*", refs::BOULDER, refs::remote_prefix(key)),
        format!("+{NOTES_REF}*:{}{}*", refs::remote_prefix(key), refs::REMOTE_NOTES_TAIL),
    ]
}

/// The local refs a push sends: every op-log and the notes, never claims.
fn push_specs(repo: &Repo) -> Result<Vec<String>> {
    let store = Store::new(repo)?;
    let mut specs = Vec::new();
    for prefix in [state::STREAMS, state::BOULDERS] {
        if !store.list(prefix)?.is_empty() {
            specs.push(format!("{prefix}*:{prefix}*"));
        }
    }
    for single in [state::PRD_REF, NOTES_REF] {
        if repo.ref_id(single)?.is_some() {
            specs.push(format!("{single}:{single}"));
        }
    }
    Ok(specs)
}

/// The result of a push (after any pull rounds).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PushReport {
    pub remote: String,
    pub refs: Vec<RefOutcome>,
    /// Pull-and-retry rounds it took (0: the first push went through); at most [`ROUNDS`] - 1.
    pub rounds: usize,
    /// What the pulls in between brought in.
    pub pulled: Vec<RefOutcome>,
    /// The server refused refs for its own reasons (a hook, a `receive.*` rule), not because
    /// another machine pushed first: the push stopped at once, without pulling and retrying.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub refused_by_server: bool,
    /// What the server printed on the last push (its `remote:` lines, e.g. a hook's reason).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remote_messages: Vec<String>,
}

fn push_word(p: &cli::PushedRef) -> RefResult {
    match p.flag {
        cli::PushFlag::UpToDate => RefResult::UpToDate,
        cli::PushFlag::New => RefResult::New,
        cli::PushFlag::Rejected => RefResult::Rejected,
        cli::PushFlag::FastForward | cli::PushFlag::Forced | cli::PushFlag::Deleted => RefResult::Pushed,
    }
}

/// Push the state; on rejections pull, merge and push again, at most [`ROUNDS`] times. Never
/// forces. The report lists each ref's last result; rejected refs remain only when the bound was hit.
pub fn push(repo: &Repo, remote: &RemoteName) -> Result<PushReport> {
    let dir = repo.run_dir();
    let mut report = PushReport { remote: remote.given.clone(), ..Default::default() };
    // A command that is slow anyway packs the state's loose objects past the threshold (before
    // pushing: sending objects from a pack is cheaper).
    crate::state::pack::auto(repo);
    for round in 0..ROUNDS {
        let specs = push_specs(repo)?;
        if specs.is_empty() {
            return Ok(report);
        }
        crate::progress::show(&format!("pushing git-boulder state to {}", remote.given));
        let pushed = cli::push(dir, &remote.given, &[], &specs)?;
        crate::progress::done();
        report.rounds = round;
        report.remote_messages = pushed.remote_lines.clone();
        let pushed = pushed.refs;
        report.refs = pushed
            .iter()
            .map(|p| outcome(&p.remote_ref, push_word(p), p.rejected().then(|| p.summary.clone())))
            .collect();
        if !pushed.iter().any(cli::PushedRef::rejected) {
            return Ok(report);
        }
        // The server said no for its own reasons: asking again gets the same answer.
        if pushed.iter().any(cli::PushedRef::refused) {
            report.refused_by_server = true;
            return Ok(report);
        }
        if round + 1 < ROUNDS {
            let pulled = pull(repo, remote)?;
            // A ref the remote holds invalid state for stays rejected however often we retry.
            let hopeless = pushed
                .iter()
                .filter(|p| p.rejected())
                .all(|p| pulled.refs.iter().any(|r| r.name == p.remote_ref && r.result == RefResult::Refused));
            report.pulled.extend(pulled.refs);
            if hopeless {
                return Ok(report);
            }
        }
    }
    Ok(report)
}

/// Pull, then push (which pulls again on rejection), so both sides agree.
pub fn sync(repo: &Repo, remote: &RemoteName) -> Result<(PullReport, PushReport)> {
    let pulled = pull(repo, remote)?;
    let pushed = push(repo, remote)?;
    Ok((pulled, pushed))
}
