//! Talking to remotes. Both directions go through the git CLI ([`super::cli::fetch`],
//! [`super::cli::push`]), so every transport, credential helper, ssh and proxy setting and
//! `insteadOf` rewrite of the user's git applies unchanged; this module names remotes, maps
//! what git reports back to the remote's own ref names, and writes the refs a fetch brought
//! (git brings only the objects: its ref updates, one transaction per ref, were a third of the
//! fetch).

use gix::bstr::ByteSlice;
use gix::ObjectId;

use crate::error::{Error, Result};
use crate::git::{cli, identity, packfile, refs, Repo};

/// Why no remote can be used, naming what was given; the domain that meets it says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// Given empty, or as an option (`-x`): never passed to git.
    #[error("{given:?} is not a remote")]
    NotARemote { given: String },
    /// A plan's `setting` names something that is not a remote of this repository ([`of_plan`]).
    #[error(
        "{setting} is {:?}, which is not a remote of this repository; a plan names remotes, not URLs or paths, so that a cloned plan cannot reach a repository of its choosing",
        crate::text::inert(value)
    )]
    NotConfigured { setting: String, value: String },
    /// None named, the base branch has no upstream and there is no `origin`.
    #[error("no remote to use: the base branch has no upstream and there is no remote named origin")]
    NoDefault,
}

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
    pub fn new(repo: &Repo, given: &str) -> std::result::Result<RemoteName, RemoteError> {
        if given.is_empty() || given.starts_with('-') {
            return Err(RemoteError::NotARemote { given: given.to_string() });
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

/// The remote a plan's `setting` (`settings.claim_remote`, `settings.merge_remote`) names, when it
/// names one: only a remote configured in this repository (`git remote -v`). The plan is
/// committed content, written by whoever can push the branch, and git runs the hooks of a
/// repository reached by path (its `pre-receive` on a push): a URL or path there would let a
/// cloned plan run code nobody trusted (DESIGN §11). A remote's URL is the user's own choice.
pub fn of_plan(repo: &Repo, setting: &str, value: Option<&str>) -> std::result::Result<Option<String>, RemoteError> {
    let Some(value) = value else { return Ok(None) };
    if repo.repo.remote_names().iter().any(|n| n.as_bytes() == value.as_bytes()) {
        return Ok(Some(value.to_string()));
    }
    Err(RemoteError::NotConfigured { setting: setting.to_string(), value: value.to_string() })
}

/// The remote a merge lands on: `--remote` as given, none with `--no-remote`, else the plan's
/// `settings.merge_remote` (`merge_remote`, checked by [`of_plan`]).
pub fn for_merge(
    repo: &Repo,
    merge_remote: Option<&str>,
    given: Option<String>,
    no_remote: bool,
) -> std::result::Result<Option<String>, RemoteError> {
    match (no_remote, given) {
        (true, _) => Ok(None),
        (false, Some(r)) => Ok(Some(r)),
        (false, None) => of_plan(repo, "settings.merge_remote", merge_remote),
    }
}

/// The remote to use when none is named: the base branch's upstream remote, else `origin`.
pub fn default_remote(repo: &Repo, base_branch: &str) -> std::result::Result<String, RemoteError> {
    if let Some(r) = repo.config_string(&format!("branch.{base_branch}.remote")).filter(|r| !r.is_empty() && r != ".") {
        return Ok(r);
    }
    if repo.repo.remote_names().iter().any(|n| n.as_bytes() == b"origin") {
        return Ok("origin".into());
    }
    Err(RemoteError::NoDefault)
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
///
/// git brings the objects; the local refs are then written here in one ref transaction, each a
/// compare-and-swap from what it held before the fetch (see [`write_fetched`]).
pub fn fetch(repo: &Repo, remote: &str, refspecs: &[String]) -> Result<Vec<Fetched>> {
    start_fetch(repo, remote, refspecs)?.finish(repo)
}

/// A [`fetch`] under way (see [`cli::RunningFetch`]).
pub struct RunningFetch {
    running: cli::RunningFetch,
    /// The packs there were before (see [`packfile::keep_new`]).
    packs: Vec<String>,
    remote: String,
    refspecs: Vec<String>,
}

/// Start [`fetch`]; `git fetch` runs until [`RunningFetch::finish`] waits for it.
pub fn start_fetch(repo: &Repo, remote: &str, refspecs: &[String]) -> Result<RunningFetch> {
    let packs = packfile::pack_names(&repo.objects_dir());
    Ok(RunningFetch {
        running: cli::start_fetch(repo.run_dir(), remote, refspecs, true)?,
        packs,
        remote: remote.to_string(),
        refspecs: refspecs.to_vec(),
    })
}

impl RunningFetch {
    /// Wait for the fetch and write the local refs: what [`fetch`] returns.
    pub fn finish(self, repo: &Repo) -> Result<Vec<Fetched>> {
        let RunningFetch { running, packs, remote, refspecs } = self;
        let got = fetched(running.finish()?, &refspecs)?;
        let _span = crate::trace::span(format!("fetch: write {} refs", got.len()));
        // Until the refs name them, nothing else keeps the objects git just brought.
        let tips: Vec<ObjectId> = got.iter().map(|(f, _)| f.id).collect();
        let _kept = packfile::keep_new(&repo.objects_dir(), &packs, &tips, repo.repo.object_hash());
        crate::failpoint::hit("fetch-objects");
        if write_fetched(repo, &remote, &got)? {
            return Ok(got.into_iter().map(|(f, _)| f).collect());
        }
        // git writes them itself, the way a plain `git fetch` does (the objects are here by now).
        let again = fetched(cli::fetch(repo.run_dir(), &remote, &refspecs)?, &refspecs)?;
        Ok(again.into_iter().map(|(f, _)| f).collect())
    }
}

/// Write the local refs of `fetched` that git left as they were (a dry run: it brought their
/// objects and wrote no ref) — into `packed-refs` in one rewrite where only it holds them, the
/// others in one ref transaction ([`refs::update_packed`], [`refs::update_all`]) — each a
/// compare-and-swap from what it held when git read it, as git's own fetch moves each. `false`,
/// with nothing written, when that cannot be done and git must write them: an object is missing
/// (a git whose dry run does not fetch), or a ref moved meanwhile (a plain `git fetch` with the
/// same refspecs) or cannot be written as named.
///
/// Nothing is lost if the command is killed before: the objects sit in the object store until the
/// next fetch names them again (or `git gc` prunes them, weeks later); the refs are unchanged.
fn write_fetched(repo: &Repo, remote: &str, fetched: &[(Fetched, cli::Local)]) -> Result<bool> {
    let objects = repo.objects();
    let mut swaps = Vec::new();
    for (f, local) in fetched {
        let (Some(name), cli::Local::Left(before)) = (&f.local_ref, local) else { continue };
        let before = match before {
            Some(hex) => Some(ObjectId::from_hex(hex.as_bytes()).map_err(|e| bad_id(hex, e))?),
            None => None,
        };
        if before == Some(f.id) {
            continue;
        }
        if !objects.has(f.id) {
            return Ok(false);
        }
        swaps.push(refs::Swap {
            name: name.clone(),
            expected: refs::Expect::from_tip(before),
            new: f.id,
            message: format!("fetch {remote}"),
        });
    }
    // A plain `git fetch` that wrote one of them meanwhile (`raced`) wrote what the remote had.
    // What update_packed cannot do (a ref that moved meanwhile, a name that clashes with a folder
    // of refs, which gix's transaction would write where git refuses it) is left to git.
    let Some(moved) = refs::update_packed(repo, &swaps)? else { return Ok(false) };
    let left: Vec<refs::Swap> = moved.left.iter().map(|&i| swaps[i].clone()).collect();
    let writer = identity::state_signature(&crate::time::now_rfc3339());
    Ok(refs::update_all(repo, &left, &writer)?.is_ok())
}

fn bad_id(hex: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::internal(format!("git fetch printed a bad id {hex:?}: {e}")).with_source(e)
}

/// The fetched refs the refspecs map back to a remote ref, with what git did with each local ref.
fn fetched(fetched: Vec<cli::FetchedRef>, refspecs: &[String]) -> Result<Vec<(Fetched, cli::Local)>> {
    fetched
        .into_iter()
        .filter_map(|f| {
            let remote_ref = cli::refspecs_unmap(refspecs, &f.local_ref)?;
            Some((remote_ref, f))
        })
        .map(|(remote_ref, f)| {
            let id = ObjectId::from_hex(f.id.as_bytes()).map_err(|e| bad_id(&f.id, e))?;
            Ok((Fetched { remote_ref, id, local_ref: Some(f.local_ref) }, f.local))
        })
        .collect()
}
