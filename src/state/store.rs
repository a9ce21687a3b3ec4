//! Reading and writing op-logs with gix: compare-and-swap appends with retry, and merges.

use crate::error::{Error, Result};
use crate::git::Repo;
use crate::state::op::{Op, State};

/// One op-log commit read back: its id, its op and the state after it.
#[derive(Debug, Clone)]
pub struct Entry<S> {
    pub commit: gix::ObjectId,
    pub op: Op,
    pub state: S,
}

/// Reads and appends op-logs in one repository as one actor.
pub struct Store<'r> {
    pub repo: &'r Repo,
    pub actor: String,
}

impl<'r> Store<'r> {
    pub fn new(repo: &'r Repo) -> Result<Self> {
        Ok(Store { repo, actor: String::from("unknown") })
    }

    pub fn read<S: State>(&self, refname: &str) -> Result<Option<Entry<S>>> {
        let _ = refname;
        Err(Error::internal("state store not built yet"))
    }
}
