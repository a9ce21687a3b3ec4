//! Claims (DESIGN §9): a lease on a remote saying which machine runs a stream now,
//! `refs/boulder/claims/<stream>` on the remote, pointing at a parentless commit whose tree holds
//! one file, `claim.json` (`{v, stream, actor, host, since, expires}`). It is taken, renewed and
//! released only with a compare-and-swap push (`--force-with-lease` against the value just
//! fetched), so two machines racing for a stream get exactly one winner. Locally, the last value
//! seen on each remote is kept in `refs/boulder-remotes/<remote>/claims/<stream>`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, ResultExt};
use crate::git::refs::{self, Expect, Writer};
use crate::git::{cli, identity, remote, ObjectId, Repo};

/// The content of `claim.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// Format version, always 1.
    pub v: u32,
    /// The stream claimed.
    pub stream: String,
    /// The actor (machine) holding it.
    pub actor: String,
    /// That machine's host name.
    pub host: String,
    /// When it was taken or last renewed (RFC 3339).
    pub since: String,
    /// When it lapses unless renewed (RFC 3339); after that anyone may take it over.
    pub expires: String,
}

impl Claim {
    /// Check a claim read from anywhere.
    pub fn validate(&self, stream: &str) -> std::result::Result<(), InvalidClaim> {
        if self.v != 1 {
            return Err(InvalidClaim::Version(self.v));
        }
        if self.stream != stream {
            return Err(InvalidClaim::OtherStream { named: self.stream.clone(), expected: stream.to_string() });
        }
        crate::state::op::valid_actor(&self.actor).map_err(InvalidClaim::Actor)?;
        if self.host.chars().count() > 255 || self.host.chars().any(char::is_control) {
            return Err(InvalidClaim::Host);
        }
        for (what, t) in [("since", &self.since), ("expires", &self.expires)] {
            if crate::time::parse_rfc3339(t).is_none() {
                return Err(InvalidClaim::Time { what, text: t.clone() });
            }
        }
        Ok(())
    }

    /// Lapsed, or not a valid lease at all ([`Claim::invalid`]): either way anyone may take it.
    pub fn expired(&self) -> bool {
        crate::time::parse_rfc3339(&self.expires).is_none_or(|e| e <= crate::time::now_secs())
            || self.invalid().is_some()
    }

    /// Why this claim is not a lease any worker honours, if it is not: its expiry lies more than
    /// [`MAX_LEASE`] after it was taken, or more than that (and [`SKEW`]) from now. A worker's
    /// claim lasts [`CLAIM_TTL`] and `stream claim --ttl` at most
    /// [`MAX_LEASE`], so only a forged or broken claim (one that would be waited on for years)
    /// is.
    pub fn invalid(&self) -> Option<String> {
        let (since, expires) = (crate::time::parse_rfc3339(&self.since)?, crate::time::parse_rfc3339(&self.expires)?);
        let max = MAX_LEASE.as_secs_f64();
        if expires - since > max {
            return Some(format!(
                "its expiry {} lies more than {} after it was taken ({})",
                self.expires,
                span(MAX_LEASE),
                self.since
            ));
        }
        let now = crate::time::now_secs();
        if expires - now > max + SKEW.as_secs_f64() {
            return Some(format!(
                "its expiry {} lies more than {} from now (it says it was taken at {})",
                self.expires,
                span(MAX_LEASE),
                self.since
            ));
        }
        None
    }

    /// `actor on host until T` for messages.
    pub fn describe(&self) -> String {
        format!("{} on {} (since {}, until {})", self.actor, self.host, self.since, self.expires)
    }
}

/// How long a claim taken by the worker (`git boulder work`) lasts; renewed when half of it has
/// passed.
pub const CLAIM_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// The longest lease a valid claim has: the worker's ([`CLAIM_TTL`], one
/// hour) times [`LEASE_FACTOR`]. A claim promising more is invalid and treated as expired.
pub const MAX_LEASE: std::time::Duration = std::time::Duration::from_secs(CLAIM_TTL.as_secs() * LEASE_FACTOR);

/// How many of the worker's leases a claim may span.
pub const LEASE_FACTOR: u64 = 2;

/// The clock difference between machines allowed for a claim's expiry seen from here.
pub const SKEW: std::time::Duration = std::time::Duration::from_secs(600);

/// `2h`, `90m`, `45s`: a duration as `--ttl` takes it.
fn span(d: std::time::Duration) -> String {
    match d.as_secs() {
        s if s % 3600 == 0 && s > 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 && s > 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

pub fn remote_ref(stream: &str) -> String {
    refs::claim_ref(stream)
}

/// The local copy of a remote's claim.
pub fn tracking_ref(key: &str, stream: &str) -> String {
    refs::claim_tracking_ref(key, stream)
}

/// Why a claim (its commit, or the `claim.json` in it) is not valid; the message names it.
#[derive(Debug, thiserror::Error)]
pub enum InvalidClaim {
    #[error("claim version {0} is not 1")]
    Version(u32),
    #[error("claim names stream {named:?}, not {expected:?}")]
    OtherStream { named: String, expected: String },
    /// The actor is not one (see [`crate::state::op::valid_actor`]).
    #[error("{0}")]
    Actor(#[source] crate::state::op::OpError),
    #[error("claim host is longer than 255 characters or has control characters")]
    Host,
    #[error("claim {what} {text:?} is not RFC 3339")]
    Time { what: &'static str, text: String },
    /// An object could not be read.
    #[error("claim {id}: {source}")]
    Unreadable { id: ObjectId, source: Box<dyn std::error::Error + Send + Sync> },
    /// The claim commit's tree or file could not be read.
    #[error("claim commit {id}: {source}")]
    Broken { id: ObjectId, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("{id} is not a claim commit: {source}")]
    NotACommit { id: ObjectId, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("claim commit {0} is too large")]
    CommitTooLarge(ObjectId),
    #[error("claim commit {0} has parents")]
    HasParents(ObjectId),
    #[error("claim commit {id} must hold exactly claim.json, found {names:?}")]
    Files { id: ObjectId, names: Vec<String> },
    #[error("no claim.json")]
    NoFile,
    #[error("claim commit {0}: claim.json is not a file")]
    NotAFile(ObjectId),
    #[error("claim commit {0}: claim.json is too large")]
    FileTooLarge(ObjectId),
    #[error("claim commit {id}: claim.json: {source}")]
    Json { id: ObjectId, source: serde_json::Error },
    /// The claim read is not valid for the stream.
    #[error("claim commit {id}: {source}")]
    Content {
        id: ObjectId,
        #[source]
        source: Box<InvalidClaim>,
    },
}

/// Read and check the claim commit `id` of `stream`. The error names the problem.
pub fn read(repo: &Repo, stream: &str, id: ObjectId) -> std::result::Result<Claim, InvalidClaim> {
    let g = repo.objects();
    // Sizes come from the object headers, before anything fetched is read whole.
    let size = |oid: ObjectId| {
        g.header(oid).map(|(_, size)| size).map_err(|e| InvalidClaim::Unreadable { id: oid, source: Box::new(e) })
    };
    if size(id)? > 16 * 1024 {
        return Err(InvalidClaim::CommitTooLarge(id));
    }
    let (tree, parents) = g.commit_parts(id).map_err(|e| InvalidClaim::NotACommit { id, source: Box::new(e) })?;
    if !parents.is_empty() {
        return Err(InvalidClaim::HasParents(id));
    }
    let entries = g.readable_entries(tree).map_err(|e| InvalidClaim::Broken { id, source: Box::new(e) })?;
    let names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
    if names != ["claim.json"] {
        return Err(InvalidClaim::Files { id, names });
    }
    let entry = entries.iter().find(|e| e.name == "claim.json").ok_or(InvalidClaim::NoFile)?;
    if !entry.kind.is_blob() {
        return Err(InvalidClaim::NotAFile(id));
    }
    if size(entry.id)? > 16 * 1024 {
        return Err(InvalidClaim::FileTooLarge(id));
    }
    let data = g.read(entry.id).map_err(|e| InvalidClaim::Broken { id, source: Box::new(e) })?;
    if data.len() > 16 * 1024 {
        return Err(InvalidClaim::FileTooLarge(id));
    }
    let claim: Claim = serde_json::from_slice(&data).map_err(|source| InvalidClaim::Json { id, source })?;
    claim.validate(stream).map_err(|e| InvalidClaim::Content { id, source: Box::new(e) })?;
    Ok(claim)
}

/// Write a claim commit (not moving any ref).
fn write(repo: &Repo, claim: &Claim) -> Result<ObjectId> {
    let g = repo.objects();
    let mut text = serde_json::to_vec_pretty(claim).internal("claim.json")?;
    text.push(b'\n');
    let blob = g.blob(&text, true).internal("cannot write claim.json")?;
    let tree = g.flat_tree(&[("claim.json", blob)], true).internal("cannot write a tree")?;
    let sig = identity::state_signature(&claim.since);
    let message = format!("claim {} by {}\n", claim.stream, claim.actor);
    g.commit(tree, &[], &sig, &sig, &message, true).internal("cannot write the claim commit")
}

/// What the remote says about `stream`'s claim right now (fetched), also updating the local copy.
pub fn current(repo: &Repo, remote: &remote::RemoteName, stream: &str) -> Result<Option<(ObjectId, Claim)>> {
    let spec = format!("+{}:{}", remote_ref(stream), tracking_ref(&remote.key, stream));
    let fetched = {
        let _fetching = super::fetch_lock(repo, remote, "git boulder stream claim")?;
        remote::fetch(repo, &remote.given, &[spec])?
    };
    let Some(f) = fetched.into_iter().find(|f| f.remote_ref == remote_ref(stream)) else {
        forget(repo, &remote.key, stream)?;
        return Ok(None);
    };
    let claim = read(repo, stream, f.id).map_err(|e| {
        Error::refused(format!("{} on {} is not a valid claim: {e}", remote_ref(stream), remote.given))
            .hint(format!("release it by force: git boulder stream release {stream} --remote {} --force", remote.given))
            .with_source(e)
    })?;
    Ok(Some((f.id, claim)))
}

/// Drop the local copy of a remote claim.
pub fn forget(repo: &Repo, key: &str, stream: &str) -> Result<()> {
    let name = tracking_ref(key, stream);
    if let Some(id) = repo.ref_id(&name)? {
        let _ = crate::git::delete_ref(repo, &name, id);
    }
    Ok(())
}

fn set_tracking(repo: &Repo, key: &str, stream: &str, id: ObjectId) -> Result<()> {
    refs::update(
        repo,
        &tracking_ref(key, stream),
        Expect::Anything,
        id,
        "boulder: claim seen on the remote",
        Writer::Configured,
    )?
    .internal("cannot record the claim locally")?;
    Ok(())
}

/// The outcome of a lease push.
enum Lease {
    Done,
    /// The remote's claim ref was not the value expected: another machine moved it meanwhile.
    LostRace,
    /// The server turned the push down for its own reasons (a hook, a `receive.*` rule).
    Refused(String),
}

fn lease_push(
    repo: &Repo,
    remote: &remote::RemoteName,
    stream: &str,
    expected: Option<ObjectId>,
    new: Option<ObjectId>,
) -> Result<Lease> {
    let dir = repo.run_dir();
    let r = remote_ref(stream);
    let lease = format!("--force-with-lease={r}:{}", expected.map(|e| e.to_string()).unwrap_or_default());
    let spec = match new {
        Some(n) => format!("{n}:{r}"),
        None => format!(":{r}"),
    };
    let pushed = cli::push(dir, &remote.given, &[lease], &[spec])?;
    let Some(p) = pushed.refs.iter().find(|p| p.remote_ref == r) else {
        return Ok(Lease::Refused(format!("git push reported nothing for {r}")));
    };
    if !p.rejected() {
        return Ok(Lease::Done);
    }
    if p.lost_race() {
        return Ok(Lease::LostRace);
    }
    // Two pushes that both passed the lease are told apart by the server's ref transaction
    // (`[remote rejected] (failed to update ref)`, "cannot lock ref", "reference already
    // exists"): when the claim moved meanwhile, it was a lost race all the same.
    if let Ok(now) = current(repo, remote, stream) {
        if now.map(|(id, _)| id) != expected {
            return Ok(Lease::LostRace);
        }
    }
    Ok(Lease::Refused(refusal(&p.summary, &pushed)))
}

/// `SUMMARY` and the server's `remote:` lines, one per line, for an error message.
pub(crate) fn refusal(summary: &str, pushed: &cli::Pushed) -> String {
    let said = pushed.server_said();
    if said.is_empty() {
        summary.to_string()
    } else {
        format!("{summary}\n{said}")
    }
}

fn server_refused(remote: &remote::RemoteName, what: String, why: &str) -> Error {
    Error::refused(format!("the remote {} refused {what}: {why}", remote.given))
        .hint(super::report::server_hint(why, "ask whoever runs it, or use another remote (--remote)"))
}

/// What [`take`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    New,
    Renewed,
    /// An expired claim of another actor was taken over.
    TakenOver(String),
}

/// Take (or renew) the claim on `stream` at `remote` for `ttl`, as `actor`. Refused (exit 1) when
/// another actor holds an unexpired claim, or wins the race to the remote.
pub fn take(
    repo: &Repo,
    remote: &remote::RemoteName,
    stream: &str,
    actor: &str,
    ttl: std::time::Duration,
) -> Result<(Claim, Taken)> {
    if ttl > MAX_LEASE {
        return Err(Error::usage(format!(
            "a claim lasts at most {} (--ttl {}): longer ones are treated as invalid by every machine",
            span(MAX_LEASE),
            span(ttl)
        ))
        .hint("claim it again (that renews it) before it expires"));
    }
    let now = crate::time::now_secs();
    let current = current(repo, remote, stream)?;
    let how = match &current {
        Some((_, c)) if c.actor != actor && !c.expired() => {
            return Err(Error::refused(format!("stream {stream} is claimed on {} by {}", remote.given, c.describe()))
                .hint(format!(
                    "wait for it to be released or to expire, or ask its holder to run `git boulder stream release {stream}`"
                )));
        }
        Some((_, c)) if c.actor == actor => Taken::Renewed,
        Some((_, c)) => Taken::TakenOver(c.describe()),
        None => Taken::New,
    };
    let claim = Claim {
        v: 1,
        stream: stream.to_string(),
        actor: actor.to_string(),
        host: identity::hostname(),
        since: crate::time::format_secs(now),
        expires: crate::time::format_secs(now + ttl.as_secs_f64()),
    };
    let id = write(repo, &claim)?;
    let pushed = lease_push(repo, remote, stream, current.as_ref().map(|(id, _)| *id), Some(id))?;
    if let Lease::Refused(why) = pushed {
        return Err(server_refused(remote, format!("the claim on stream {stream}"), &why));
    }
    if let Lease::LostRace = pushed {
        return Err(Error::refused(format!(
            "another machine claimed stream {stream} on {} at the same moment; it holds it now",
            remote.given
        ))
        .hint(format!(
            "see who: git boulder stream claim {stream} --remote {} again, or git boulder status",
            remote.given
        )));
    }
    set_tracking(repo, &remote.key, stream, id)?;
    Ok((claim, how))
}

/// Release this actor's claim on `stream` at `remote` (any actor's with `force`). Returns the
/// claim released, `None` when there was none.
pub fn release(
    repo: &Repo,
    remote: &remote::RemoteName,
    stream: &str,
    actor: &str,
    force: bool,
) -> Result<Option<Claim>> {
    let current = if force {
        match current(repo, remote, stream) {
            Ok(c) => c.map(|(id, c)| (id, Some(c))),
            // An invalid claim can still be removed by force: take its id from the local copy.
            Err(_) => repo.ref_id(&tracking_ref(&remote.key, stream))?.map(|id| (id, None)),
        }
    } else {
        current(repo, remote, stream)?.map(|(id, c)| (id, Some(c)))
    };
    let Some((id, claim)) = current else { return Ok(None) };
    if let Some(c) = &claim {
        if c.actor != actor && !force {
            return Err(Error::refused(format!(
                "stream {stream} is claimed by {}, not by this machine ({actor})",
                c.describe()
            ))
            .hint("pass --force to remove another machine's claim"));
        }
    }
    let pushed = lease_push(repo, remote, stream, Some(id), None)?;
    if let Lease::Refused(why) = pushed {
        return Err(server_refused(remote, format!("the release of the claim on stream {stream}"), &why));
    }
    if let Lease::LostRace = pushed {
        return Err(Error::refused(format!(
            "the claim on stream {stream} changed on {} meanwhile; nothing released",
            remote.given
        )));
    }
    forget(repo, &remote.key, stream)?;
    Ok(claim)
}

/// The claims last seen on the remote `key`, by stream, unexpired or not: what [`seen`] lists for
/// that remote, reading none of the other refs kept for it.
pub fn seen_on(repo: &Repo, key: &str) -> Result<Vec<(String, Claim)>> {
    let prefix = refs::claim_tracking_ref(key, "");
    let mut out = Vec::new();
    for (name, id) in refs::list(repo, &prefix)? {
        let Some(stream) = name.strip_prefix(&prefix).filter(|s| !s.contains('/')) else { continue };
        if let Ok(c) = read(repo, stream, id) {
            out.push((stream.to_string(), c));
        }
    }
    Ok(out)
}

/// The claims last seen on any remote, by stream: (remote key, claim), unexpired or not.
pub fn seen(repo: &Repo) -> Result<Vec<(String, String, Claim)>> {
    let store = crate::state::Store::new(repo)?;
    let mut out = Vec::new();
    for (name, id) in store.list(refs::REMOTES)? {
        let Some(rest) = name.strip_prefix(refs::REMOTES) else { continue };
        let mut parts = rest.split('/');
        let (Some(key), Some("claims"), Some(stream), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if let Ok(c) = read(repo, stream, id) {
            out.push((key.to_string(), stream.to_string(), c));
        }
    }
    Ok(out)
}
