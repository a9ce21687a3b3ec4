//! Talking to remotes. Fetch is gix's (local paths and `file://` through `git upload-pack`,
//! `git://`, `ssh://` through the user's ssh, smart HTTP(S) through reqwest with rustls, all with
//! the user's git config and credential helpers); push is the git CLI's ([`super::cli::push`]),
//! because gix 0.90 cannot push.

use std::sync::atomic::AtomicBool;

use gix::bstr::ByteSlice;
use gix::ObjectId;

use crate::error::{Error, Result};
use crate::git::Repo;

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

/// Fetch with gix: `refspecs` (e.g. `+refs/boulder/*:refs/boulder-remotes/origin/*`) from the
/// remote `remote` (a configured name or a URL/path), no tags. Returns every remote ref the specs
/// matched, so callers know exactly what the remote holds (also refs it no longer has: absent).
pub fn fetch(repo: &Repo, remote: &str, refspecs: &[String]) -> Result<Vec<Fetched>> {
    let g = &repo.repo;
    let fail = |e: &dyn std::fmt::Display| {
        Error::refused(format!("cannot fetch from {remote}: {e}"))
            .hint("check the remote's URL (`git remote -v`) and that `git fetch` works from here")
    };
    let mut r = match g.try_find_remote(remote.as_bytes().as_bstr()) {
        Some(Ok(r)) => r,
        Some(Err(e)) => return Err(fail(&e)),
        None => {
            let url = gix::url::parse(remote.as_bytes().as_bstr()).map_err(|e| {
                Error::usage(format!("{remote:?} is neither a configured remote nor a URL: {e}"))
                    .hint("see `git remote -v`")
            })?;
            g.remote_at(url).map_err(|e| fail(&e))?
        }
    };
    r.replace_refspecs(refspecs.iter().map(|s| s.as_bytes().as_bstr()), gix::remote::Direction::Fetch)
        .map_err(|e| Error::internal(format!("bad refspec: {e}")))?;
    let r = r.with_fetch_tags(gix::remote::fetch::Tags::None);
    let interrupt = AtomicBool::new(false);
    let connection = r.connect(gix::remote::Direction::Fetch).map_err(|e| fail(&format_args!("{e:#}")))?;
    let prepared = connection
        .prepare_fetch(gix::progress::Discard, Default::default())
        .map_err(|e| fail(&format_args!("{e:#}")))?;
    if prepared.ref_map().mappings.is_empty() {
        // The remote has none of these refs (yet): nothing to fetch.
        return Ok(Vec::new());
    }
    let outcome = prepared.receive(gix::progress::Discard, &interrupt).map_err(|e| fail(&format_args!("{e:#}")))?;
    Ok(outcome
        .ref_map
        .mappings
        .iter()
        .filter_map(|m| {
            Some(Fetched {
                remote_ref: m.remote.as_name()?.to_str_lossy().into_owned(),
                id: m.remote.as_id()?.to_owned(),
                local_ref: m.local.as_ref().map(|l| l.to_str_lossy().into_owned()),
            })
        })
        .collect())
}
