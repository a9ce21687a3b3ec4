//! Who git-boulder writes as, computed here and nowhere else: this machine's host name, the fixed
//! identity of state commits, the committer of rewritten commits (merges), the identity of notes
//! commits, and the repository handles that write refs with a fallback identity when git config
//! has none.
//!
//! | writes | identity |
//! |---|---|
//! | op-log and claim commits, their reflogs | [`state_signature`]: `git-boulder <git-boulder@localhost>` at the op's time |
//! | notes commits | `notes_identity`: git's own (`GIT_COMMITTER_*`, `user.*` …), else git-boulder's |
//! | commits rewritten by a merge | [`rewrite_committer`]: git's own, else `$USER <$USER@host>` |
//! | branch and worktree reflogs | [`with_identity`]: git's own, else `$USER <$USER@host>` |

use std::borrow::Cow;

use gix::bstr::ByteSlice;

use super::Repo;
use crate::error::{Error, Result};

/// The name of the fixed identity of every state commit: state never needs a configured git identity.
pub const COMMITTER_NAME: &str = "git-boulder";
/// The email of the fixed identity of every state commit.
pub const COMMITTER_EMAIL: &str = "git-boulder@localhost";

/// A commit identity with its time, opaque outside `git/`.
#[derive(Debug, Clone)]
pub struct Signature(pub(crate) gix::actor::Signature);

/// This machine's host name: `/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `unknown`.
pub fn hostname() -> String {
    if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let h = h.trim();
        if !h.is_empty() {
            return h.to_owned();
        }
    }
    match std::env::var("HOSTNAME") {
        Ok(h) if !h.trim().is_empty() => h.trim().to_owned(),
        _ => "unknown".into(),
    }
}

/// The login name git would guess an identity from: `$USER`, else `$LOGNAME`, else `git-boulder`.
fn user() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "git-boulder".into())
}

/// The fixed identity of state commits and ref updates, at an op's time (RFC 3339, whole seconds, UTC).
pub fn state_signature(at: &str) -> Signature {
    let secs = crate::time::parse_rfc3339(at).unwrap_or(0.0).floor() as i64;
    Signature(gix::actor::Signature {
        name: COMMITTER_NAME.into(),
        email: COMMITTER_EMAIL.into(),
        time: gix::date::Time { seconds: secs, offset: 0 },
    })
}

/// The committer of rewritten commits: the user's git identity (falling back to `$USER` at this
/// host, as git would guess), at the time the repository was opened.
pub fn rewrite_committer(repo: &Repo) -> Signature {
    let now = gix::date::Time::now_local_or_utc();
    if let Some(Ok(sig)) = repo.repo.committer() {
        if let Ok(sig) = sig.to_owned() {
            return Signature(sig);
        }
    }
    let user = user();
    Signature(gix::actor::Signature {
        name: user.clone().into(),
        email: format!("{user}@{}", hostname()).into(),
        time: now,
    })
}

/// The repository to write refs with: `repo` itself when a committer identity is configured, else
/// the repository reopened with a fallback identity (`$USER <$USER@host>`, as git would guess) for
/// the reflog entries of new branches, moved branches and worktree HEADs.
pub fn with_identity(repo: &Repo) -> Result<Cow<'_, gix::Repository>> {
    if matches!(repo.repo.committer(), Some(Ok(_))) {
        return Ok(Cow::Borrowed(&repo.repo));
    }
    let user = user();
    let host = hostname();
    let opts = repo.repo.open_options().clone().config_overrides([
        format!("gitoxide.committer.nameFallback={user}"),
        format!("gitoxide.committer.emailFallback={user}@{host}"),
    ]);
    let reopened = gix::open_opts(&repo.common_dir, opts)
        .map_err(|e| Error::internal(format!("cannot open {}: {e:#}", repo.common_dir.display())).with_source(e))?;
    Ok(Cow::Owned(reopened))
}

/// The repository, with git-boulder's identity set in memory when git config has no committer
/// (notes commits need one; state must never depend on a configured identity).
pub(crate) fn with_notes_identity(repo: &gix::Repository) -> gix::Repository {
    let mut g = repo.clone();
    if g.committer().is_none() {
        let mut config = g.config_snapshot_mut();
        let _ = config.set_raw_value(gix::config::tree::User::NAME, COMMITTER_NAME);
        let _ = config.set_raw_value(gix::config::tree::User::EMAIL, COMMITTER_EMAIL);
    }
    g
}

/// The committer and author of a notes commit: the identity git would use (`GIT_COMMITTER_*` and
/// `GIT_AUTHOR_*`, `committer.*` and `author.*`, `user.*`, `EMAIL`), or git-boulder's when no
/// committer is configured, as [`with_notes_identity`] does; at the time `GIT_COMMITTER_DATE` and
/// `GIT_AUTHOR_DATE` say (git sets the latter for its hooks), else now (in UTC). `None` when such
/// a date needs the local time zone to be read.
///
/// Read from the config snapshot on purpose: gix's `committer()` also works out the local time
/// zone, which walks the whole time zone database on every call (over a millisecond, paid on
/// every commit by the post-commit hook).
pub(crate) fn notes_identity(repo: &gix::Repository) -> Option<(gix::actor::Signature, gix::actor::Signature)> {
    let config = repo.config_snapshot();
    let s = |key: &str| config.string(key);
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let time = |key: &str| -> Option<gix::date::Time> {
        match s(key) {
            Some(date) => gix::date::parse(date.to_str().ok()?, None).ok(),
            None => Some(gix::date::Time { seconds: now, offset: 0 }),
        }
    };
    let (committer_time, author_time) = (time("gitoxide.commit.committerDate")?, time("gitoxide.commit.authorDate")?);
    type Who = (Option<gix::bstr::BString>, Option<gix::bstr::BString>);
    let role = |role: &str, user: &Who| -> Who {
        (
            s(&format!("{role}.name"))
                .or_else(|| user.0.clone())
                .or_else(|| s(&format!("gitoxide.{role}.nameFallback"))),
            s(&format!("{role}.email"))
                .or_else(|| user.1.clone())
                .or_else(|| s(&format!("gitoxide.{role}.emailFallback"))),
        )
    };
    let user: Who = (s("user.name"), s("user.email").or_else(|| s("gitoxide.user.emailFallback")));
    let mut committer = role("committer", &user);
    let mut author = role("author", &user);
    if committer.0.is_none() || committer.1.is_none() {
        let fallback: Who = (Some(COMMITTER_NAME.into()), Some(COMMITTER_EMAIL.into()));
        committer = role("committer", &fallback);
        author = role("author", &fallback);
    }
    let sign = |(name, email): Who, other: &Who, time| gix::actor::Signature {
        name: name.or_else(|| other.0.clone()).unwrap_or_default(),
        email: email.or_else(|| other.1.clone()).unwrap_or_default(),
        time,
    };
    let author = sign(author, &committer, author_time);
    let committer = sign(committer, &(None, None), committer_time);
    Some((committer, author))
}

/// Whether git config (or the environment) gives a committer identity.
pub fn has_configured_committer(repo: &Repo) -> bool {
    repo.repo.committer().is_some()
}

/// The person git commits as here, `(name, email)`, as git reads them (`GIT_COMMITTER_NAME` and
/// `GIT_COMMITTER_EMAIL`, else `committer.*`, else `user.name` and `user.email`); `None` when
/// either is missing (never a guess: a record naming a person must name them as they set it).
pub fn person(repo: &Repo) -> Option<(String, String)> {
    let sig = repo.repo.committer()?.ok()?;
    let (name, email) = (sig.name.to_string(), sig.email.to_string());
    (!name.trim().is_empty() && !email.trim().is_empty()).then_some((name, email))
}
