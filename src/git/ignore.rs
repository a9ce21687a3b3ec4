//! A worktree's ignore rules (`.gitignore` files, `info/exclude`, `core.excludesFile`), asked
//! about one path at a time.

use std::path::Path;

use crate::error::{Error, Result};

/// The ignore rules of one worktree, read lazily as paths are asked about.
pub struct Ignored<'repo> {
    stack: gix::AttributeStack<'repo>,
}

impl Ignored<'_> {
    /// Is `rel` (relative to the worktree; a folder when `is_dir`) ignored?
    pub fn is_excluded(&mut self, rel: &Path, is_dir: bool) -> bool {
        let mode = if is_dir { gix::index::entry::Mode::DIR } else { gix::index::entry::Mode::FILE };
        self.stack.at_path(rel, Some(mode)).is_ok_and(|p| p.is_excluded())
    }
}

/// Call `f` with the ignore rules of the main worktree at `main`. `None` when the repository there
/// has no worktree.
pub fn with_ignored<R>(main: &Path, f: impl FnOnce(&mut Ignored<'_>) -> Result<R>) -> Result<Option<R>> {
    let repo =
        gix::open(main).map_err(|e| Error::internal(format!("cannot open the main worktree: {e:#}")).with_source(e))?;
    let Some(tree) = repo.worktree() else { return Ok(None) };
    let stack = tree
        .excludes(None)
        .map_err(|e| Error::internal(format!("cannot read the ignore rules: {e:#}")).with_source(e))?;
    f(&mut Ignored { stack }).map(Some)
}
