//! The index (staging area) of the worktree a command runs in.

use gix::bstr::ByteSlice;

use super::{ObjectId, Repo};
use crate::error::{Error, Result};

impl Repo {
    /// Every entry of this worktree's index: path (UTF-8-lossy) and blob id; none when there is
    /// no index yet.
    pub fn index_entries(&self) -> Result<Vec<(String, ObjectId)>> {
        let index = self.repo.index_or_empty().map_err(|e| Error::internal(format!("cannot read the index: {e}")))?;
        Ok(index.entries().iter().map(|e| (e.path(&index).to_str_lossy().into_owned(), e.id)).collect())
    }
}
