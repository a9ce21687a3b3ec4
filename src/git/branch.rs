//! Branches: whether a name can be one, which remotes and commits there are to start one from,
//! and creating one without ever moving an existing branch.

use gix::bstr::ByteSlice;

use super::refs::{self, Expect, Writer};
use crate::error::{Error, Result};
use crate::git::{ObjectId, Repo};

/// Why `full` (e.g. `refs/heads/x`) is not a valid ref name, or `None` when it is one.
pub fn ref_name_problem(full: &str) -> Option<String> {
    gix::refs::FullName::try_from(full).err().map(|e| e.to_string())
}

/// The names of the configured remotes.
pub fn remote_names(repo: &Repo) -> Vec<String> {
    repo.repo.remote_names().into_iter().map(|n| n.to_str_lossy().into_owned()).collect()
}

/// True when the repository has a commit to branch from: HEAD resolves, or a local branch exists.
pub fn has_commits(repo: &Repo) -> bool {
    repo.repo.head_id().is_ok()
        || repo
            .repo
            .references()
            .ok()
            .and_then(|r| r.local_branches().ok().map(|mut b| b.next().is_some()))
            .unwrap_or(false)
}

/// Create `refs/heads/<branch>` at `tip` with the reflog `message`, only if it does not exist.
/// `Ok(false)` when it could not be created because it exists now (someone else created it
/// meanwhile: it is left where it is).
pub fn create(repo: &Repo, branch: &str, tip: ObjectId, message: &str) -> Result<bool> {
    let name = refs::full_name(&refs::branch_ref(branch))?;
    let writer = super::identity::with_identity(repo)?;
    match refs::update_in(&writer, &name, Expect::Absent, tip, message, Writer::Configured) {
        Ok(_) => Ok(true),
        Err(_) if repo.branch_tip(branch)?.is_some() => Ok(false),
        Err(e) => match refs::blocked(repo, &refs::branch_ref(branch)) {
            // Its `.lock` (or packed-refs.lock), left by a killed writer or held by a running one.
            Some(lock) => Err(lock),
            None => Err(Error::internal(format!("cannot create branch {branch}: {e:#}")).with_source(e)),
        },
    }
}
