//! Commits in a stream's worktree are recorded by git-boulder's hooks: `stream init` installs
//! them when they are not (or, with `--no-hooks`, leaves them out). A hook another tool holds in
//! a way git-boulder cannot chain is reported, never a failed init.

use crate::error::Error;
use crate::git::Repo;

/// What [`ensure`] found or did.
#[derive(Debug)]
pub enum Ensured {
    /// Every default hook was installed already.
    Present,
    /// Hooks were missing and `--no-hooks` left them out.
    LeftOut,
    /// The missing hooks (by name) were installed in `dir`.
    Installed { missing: Vec<String>, dir: String },
    /// The hooks could not be looked at.
    Unknown(Error),
    /// Installing them failed.
    Failed(Error),
}

/// Install git-boulder's default hooks when some are missing, unless `no_hooks`.
pub fn ensure(repo: &Repo, no_hooks: bool) -> Ensured {
    let missing: Vec<String> = match super::status(repo) {
        Ok(list) => list.into_iter().filter(|h| h.default && h.state != "installed").map(|h| h.name).collect(),
        Err(e) => return Ensured::Unknown(e),
    };
    if missing.is_empty() {
        return Ensured::Present;
    }
    if no_hooks {
        return Ensured::LeftOut;
    }
    match super::install(repo, false) {
        Ok(report) => Ensured::Installed { missing, dir: report.dir },
        Err(e) => Ensured::Failed(e),
    }
}
