//! Talking to remotes. Both directions go through the git CLI ([`super::cli::fetch`],
//! [`super::cli::push`]), so every transport, credential helper, ssh and proxy setting and
//! `insteadOf` rewrite of the user's git applies unchanged; this module names remotes and maps
//! what git reports back to the remote's own ref names.

use gix::bstr::ByteSlice;
use gix::ObjectId;

use crate::error::{Error, Result};
use crate::git::{cli, Repo};

/// A remote as the user named it: a configured remote's name, or a URL or path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteName {
    /// What the user gave (passed to `git push` as is).
    pub given: String,
    /// The single ref component it is filed under in `refs/boulder-remotes/<key>/`: the remote's
    /// name when that is a valid component, else `url-` and a hash of the URL.
    pub key: String,
}

impl RemoteName {
    pub fn new(repo: &Repo, given: &str) -> Result<RemoteName> {
        if given.is_empty() || given.starts_with('-') {
            return Err(
                Error::usage(format!("{given:?} is not a remote")).hint("name a remote (`git remote -v`) or a URL")
            );
        }
        let named = repo.repo.remote_names().iter().any(|n| n.as_bytes() == given.as_bytes());
        let key = if named && crate::names::problem(given).is_none() {
            given.to_string()
        } else {
            let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, given.as_bytes())
                .map(|h| h.to_hex_with_len(12).to_string())
                .unwrap_or_else(|_| "unknown".into());
            format!("url-{id}")
        };
        Ok(RemoteName { given: given.to_string(), key })
    }
}

/// The remote to use when none is named: the base branch's upstream remote, else `origin`.
pub fn default_remote(repo: &Repo, base_branch: &str) -> Result<String> {
    if let Some(r) = repo.config_string(&format!("branch.{base_branch}.remote")).filter(|r| !r.is_empty() && r != ".") {
        return Ok(r);
    }
    if repo.repo.remote_names().iter().any(|n| n.as_bytes() == b"origin") {
        return Ok("origin".into());
    }
    Err(Error::usage("no remote to use: the base branch has no upstream and there is no remote named origin")
        .hint("name one (`git boulder push REMOTE`), or add one with `git remote add origin URL`"))
}

/// One ref the remote has that a fetch refspec matched, with the local ref it was written to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub remote_ref: String,
    pub id: ObjectId,
    pub local_ref: Option<String>,
}

/// Fetch `refspecs` (e.g. `+refs/boulder/*:refs/boulder-remotes/origin/*`) from the remote
/// `remote` (a configured name or a URL/path), no tags, through the git CLI ([`cli::fetch`] says
/// why). Returns every remote ref the specs matched, so callers know exactly what the remote holds
/// (also refs it no longer has: absent).
pub fn fetch(repo: &Repo, remote: &str, refspecs: &[String]) -> Result<Vec<Fetched>> {
    start_fetch(repo, remote, refspecs)?.finish()
}

/// A [`fetch`] under way (see [`cli::RunningFetch`]).
pub struct RunningFetch {
    running: cli::RunningFetch,
    refspecs: Vec<String>,
}

/// Start [`fetch`]; `git fetch` runs until [`RunningFetch::finish`] waits for it.
pub fn start_fetch(repo: &Repo, remote: &str, refspecs: &[String]) -> Result<RunningFetch> {
    Ok(RunningFetch { running: cli::start_fetch(repo.run_dir(), remote, refspecs)?, refspecs: refspecs.to_vec() })
}

impl RunningFetch {
    /// Wait for the fetch: what [`fetch`] returns.
    pub fn finish(self) -> Result<Vec<Fetched>> {
        let refspecs = self.refspecs;
        fetched(self.running.finish()?, &refspecs)
    }
}

fn fetched(fetched: Vec<cli::FetchedRef>, refspecs: &[String]) -> Result<Vec<Fetched>> {
    fetched
        .into_iter()
        .filter_map(|f| {
            let remote_ref = cli::refspecs_unmap(refspecs, &f.local_ref)?;
            Some((remote_ref, f))
        })
        .map(|(remote_ref, f)| {
            let id = ObjectId::from_hex(f.id.as_bytes())
                .map_err(|e| Error::internal(format!("git fetch printed a bad id {:?}: {e}", f.id)))?;
            Ok(Fetched { remote_ref, id, local_ref: Some(f.local_ref) })
        })
        .collect()
}
