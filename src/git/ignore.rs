//! A worktree's ignore rules (`.gitignore` files, `info/exclude`, `core.excludesFile`), asked
//! about one path at a time.

use std::path::{Path, PathBuf};

/// Why the ignore rules of a worktree could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IgnoreError {
    #[error("cannot open the main worktree: {source:#}")]
    Open { main: PathBuf, source: crate::error::Source },
    #[error("cannot read the ignore rules: {source:#}")]
    Rules { main: PathBuf, source: crate::error::Source },
}

/// An internal failure (exit 3).
impl From<IgnoreError> for crate::Error {
    fn from(e: IgnoreError) -> crate::Error {
        crate::Error::internal(e.to_string()).with_source(e)
    }
}

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
pub fn with_ignored<R, E: From<IgnoreError>>(
    main: &Path,
    f: impl FnOnce(&mut Ignored<'_>) -> Result<R, E>,
) -> Result<Option<R>, E> {
    let repo = gix::open(main).map_err(|e| IgnoreError::Open { main: main.to_owned(), source: Box::new(e) })?;
    let Some(tree) = repo.worktree() else { return Ok(None) };
    let stack = tree.excludes(None).map_err(|e| IgnoreError::Rules { main: main.to_owned(), source: Box::new(e) })?;
    f(&mut Ignored { stack }).map(Some)
}
