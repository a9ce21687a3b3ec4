//! Questions about the commit graph: how far two tips have gone apart.

use crate::git::{ObjectId, Repo};

/// The history from `tip` could not be walked.
#[derive(Debug, thiserror::Error)]
#[error("cannot walk history: {source:#}")]
pub struct WalkError {
    /// Where the walk started.
    pub tip: ObjectId,
    source: gix::Error,
}

/// An internal failure (exit 3): nothing a user asked for names a walk.
impl From<WalkError> for crate::Error {
    fn from(e: WalkError) -> crate::Error {
        crate::Error::internal(e.to_string()).with_source(e)
    }
}

/// Commits on `branch_tip` not on `base_tip` (ahead), and on `base_tip` not on `branch_tip` (behind).
pub fn ahead_behind(repo: &Repo, branch_tip: ObjectId, base_tip: ObjectId) -> Result<(usize, usize), WalkError> {
    if branch_tip == base_tip {
        return Ok((0, 0));
    }
    let count = |tip: ObjectId, hidden: ObjectId| -> Result<usize, WalkError> {
        let walk_err = |source: gix::Error| WalkError { tip, source };
        let walk = repo.repo.rev_walk([tip]).with_hidden([hidden]).all().map_err(walk_err)?;
        let mut n = 0;
        for info in walk {
            info.map_err(walk_err)?;
            n += 1;
        }
        Ok(n)
    };
    Ok((count(branch_tip, base_tip)?, count(base_tip, branch_tip)?))
}
