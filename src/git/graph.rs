//! Questions about the commit graph: how far two tips have gone apart.

use crate::error::{Error, Result};
use crate::git::{ObjectId, Repo};

/// Commits on `branch_tip` not on `base_tip` (ahead), and on `base_tip` not on `branch_tip` (behind).
pub fn ahead_behind(repo: &Repo, branch_tip: ObjectId, base_tip: ObjectId) -> Result<(usize, usize)> {
    if branch_tip == base_tip {
        return Ok((0, 0));
    }
    let walk_err = |e: gix::Error| Error::internal(format!("cannot walk history: {e:#}")).with_source(e);
    let count = |tip: ObjectId, hidden: ObjectId| -> Result<usize> {
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
