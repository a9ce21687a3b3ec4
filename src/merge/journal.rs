//! The record of a merge in progress, `$GIT_COMMON_DIR/boulder/merge/<stream>.json`: what the
//! merge decided (old and new tips of both branches, the PRD sync commit) and how far it got, so
//! a merge killed at any step is finished by running it again. Written atomically before each
//! step that moves a ref or a worktree; removed when the merge is recorded.

use std::path::{Path, PathBuf};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::git::{ObjectId, Repo};

/// How far a merge got. Each stage is done once its step finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Objects and notes written; nothing moved yet (or the stream ref only).
    Planned,
    /// The stream's checked-out worktree holds the new stream tip.
    StreamUpdated,
    /// `verify` passed (or is not set).
    Verified,
    /// A merge into a remote: the remote's base holds the new tip (and the stream branch was
    /// pushed with it).
    Pushed,
    /// The base's checked-out worktree holds the new base tip.
    BaseUpdated,
    /// The PRD sync commit (if any) is on the base and in its worktree.
    Synced,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journal {
    pub stream: String,
    pub stream_branch: String,
    pub base_branch: String,
    pub strategy: String,
    pub stream_old: String,
    pub stream_new: String,
    pub base_old: String,
    pub base_new: String,
    /// Commits the base gained from the stream.
    pub commits: usize,
    #[serde(default)]
    pub prd_from: Option<String>,
    #[serde(default)]
    pub prd_to: Option<String>,
    pub stage: Stage,
    /// A merge into a remote's base (the merge queue): the remote as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// For a merge into a remote: the remote's stream branch as the check saw it ("" when the
    /// remote had none), the lease its push is made under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_seen: Option<String>,
    /// For a merge into a remote: the local base branch's tip when the push went through, if it
    /// is to follow the remote (it held nothing the remote lacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_base: Option<String>,
}

fn path(repo: &Repo, stream: &str) -> PathBuf {
    repo.boulder_dir().join("merge").join(format!("{stream}.json"))
}

pub fn id(hex: &str) -> Result<ObjectId> {
    ObjectId::from_hex(hex.as_bytes()).map_err(|e| Error::usage(format!("merge record: bad commit id {hex:?}: {e}")))
}

impl Journal {
    /// The record of an interrupted merge of `stream`, if one is pending.
    pub fn load(repo: &Repo, stream: &str) -> Result<Option<Journal>> {
        read_record(&path(repo, stream), "merge", |j: &Journal| {
            if j.stream != stream {
                return Err(format!("it names stream {:?}", j.stream));
            }
            [&j.stream_old, &j.stream_new, &j.base_old, &j.base_new]
                .into_iter()
                .chain(j.prd_from.iter())
                .chain(j.prd_to.iter())
                .chain(j.local_base.iter())
                .chain(j.stream_seen.iter().filter(|s| !s.is_empty()))
                .try_for_each(|h| id(h).map(|_| ()).map_err(|e| e.message))
        })
    }

    pub fn save(&self, repo: &Repo) -> Result<()> {
        write_record(&path(repo, &self.stream), "merge", self)
    }

    pub fn remove(&self, repo: &Repo) -> Result<()> {
        remove_record(&path(repo, &self.stream), "merge")
    }
}

/// The record file of a `kind` ("merge", "unmerge") of work in progress at `p`: `None` when there
/// is none; a usage error naming the file and the fix when it does not read as JSON of `T` or
/// `check` finds it wrong (its reason).
pub(crate) fn read_record<T: DeserializeOwned>(
    p: &Path,
    kind: &str,
    check: impl FnOnce(&T) -> std::result::Result<(), String>,
) -> Result<Option<T>> {
    let bytes = match std::fs::read(p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::internal(format!("cannot read {}: {e}", p.display()))),
    };
    let bad = |why: String| {
        Error::usage(format!("{} is not a valid {kind} record: {why}", p.display()))
            .hint(format!("delete it (`rm {}`) and check the branches with `git log`", p.display()))
    };
    let record: T = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    check(&record).map_err(bad)?;
    Ok(Some(record))
}

/// Write a record file atomically.
pub(crate) fn write_record(p: &Path, kind: &str, record: &impl Serialize) -> Result<()> {
    let text = serde_json::to_vec_pretty(record).map_err(|e| Error::internal(format!("{kind} record: {e}")))?;
    crate::fsutil::write_atomic(p, &text)
}

/// Remove a record file (gone already is fine).
pub(crate) fn remove_record(p: &Path, kind: &str) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::internal(format!("cannot remove the {kind} record: {e}"))),
    }
}
