//! The record of a merge in progress, `$GIT_COMMON_DIR/boulder/merge/<stream>.json`: what the
//! merge decided (old and new tips of both branches, the PRD sync commit) and how far it got, so
//! a merge killed at any step is finished by running it again. Written atomically before each
//! step that moves a ref or a worktree; removed when the merge is recorded.

use std::path::{Path, PathBuf};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::git::{ObjectId, Repo};
use crate::plan::MergeStrategy;

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
    /// Written as its name; a name this version does not know makes the record invalid (never a
    /// rebase by default).
    pub strategy: MergeStrategy,
    #[serde(with = "crate::git::id::hex")]
    pub stream_old: ObjectId,
    #[serde(with = "crate::git::id::hex")]
    pub stream_new: ObjectId,
    #[serde(with = "crate::git::id::hex")]
    pub base_old: ObjectId,
    #[serde(with = "crate::git::id::hex")]
    pub base_new: ObjectId,
    /// Commits the base gained from the stream.
    pub commits: usize,
    #[serde(default, with = "crate::git::id::hex_opt")]
    pub prd_from: Option<ObjectId>,
    #[serde(default, with = "crate::git::id::hex_opt")]
    pub prd_to: Option<ObjectId>,
    pub stage: Stage,
    /// A merge into a remote's base (the merge queue): the remote as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// For a merge into a remote: the remote's stream branch as the check saw it, the lease its
    /// push is made under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_seen: Option<StreamSeen>,
    /// For a merge into a remote: the local base branch's tip when the push went through, if it
    /// is to follow the remote (it held nothing the remote lacks).
    #[serde(default, with = "crate::git::id::hex_opt", skip_serializing_if = "Option::is_none")]
    pub local_base: Option<ObjectId>,
}

/// The remote's stream branch as a merge into a remote saw it. Written as the tip's hex, or `""`
/// when the remote had no such branch (as records have always been written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamSeen {
    /// The remote had no branch of that name: the push creates it.
    Absent,
    /// The remote's branch was at this commit.
    At(ObjectId),
}

impl StreamSeen {
    /// The tip seen, if there was one.
    pub fn tip(self) -> Option<ObjectId> {
        match self {
            StreamSeen::Absent => None,
            StreamSeen::At(id) => Some(id),
        }
    }
}

impl From<Option<ObjectId>> for StreamSeen {
    fn from(tip: Option<ObjectId>) -> StreamSeen {
        tip.map_or(StreamSeen::Absent, StreamSeen::At)
    }
}

impl Serialize for StreamSeen {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            StreamSeen::Absent => s.serialize_str(""),
            StreamSeen::At(id) => crate::git::id::hex::serialize(id, s),
        }
    }
}

impl<'de> Deserialize<'de> for StreamSeen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<StreamSeen, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        if text.is_empty() {
            return Ok(StreamSeen::Absent);
        }
        crate::git::id::parse(&text)
            .map(StreamSeen::At)
            .ok_or_else(|| serde::de::Error::custom(format!("not a commit id: {text:?}")))
    }
}

fn path(repo: &Repo, stream: &str) -> PathBuf {
    repo.boulder_dir().join("merge").join(format!("{stream}.json"))
}

impl Record for Journal {
    const KIND: &'static str = "merge";
    fn stream(&self) -> &str {
        &self.stream
    }
}

impl Journal {
    /// The record of an interrupted merge of `stream`, if one is pending.
    pub fn load(repo: &Repo, stream: &str) -> Result<Option<Journal>> {
        read_record(&path(repo, stream), stream)
    }

    pub fn save(&self, repo: &Repo) -> Result<()> {
        write_record(&path(repo, &self.stream), self)
    }

    pub fn remove(&self, repo: &Repo) -> Result<()> {
        remove_record::<Journal>(&path(repo, &self.stream))
    }

    /// The tip the base gets: the PRD sync commit, else the merged tip.
    pub fn final_tip(&self) -> ObjectId {
        self.prd_to.unwrap_or(self.base_new)
    }
}

/// A record of work in progress on one stream, kept in a file of its own until the work is done.
pub(crate) trait Record: Serialize + DeserializeOwned {
    /// What it records, in messages: "merge", "unmerge".
    const KIND: &'static str;
    /// The stream it is of.
    fn stream(&self) -> &str;
}

/// Why a record file is not a valid record.
#[derive(Debug, thiserror::Error)]
enum Invalid {
    /// Not JSON of the record's shape (a field missing or unknown, a bad commit id, a strategy
    /// this version does not know).
    #[error("{0}")]
    Shape(#[from] serde_json::Error),
    /// A record of another stream under this stream's name.
    #[error("it names stream {0:?}")]
    OtherStream(String),
}

/// The record of `stream` at `p`: `None` when there is none; a usage error naming the file and the
/// fix when it is not a valid record of that stream (saying why).
pub(crate) fn read_record<T: Record>(p: &Path, stream: &str) -> Result<Option<T>> {
    let bytes = match std::fs::read(p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::internal(format!("cannot read {}: {e}", p.display()))),
    };
    let record = serde_json::from_slice::<T>(&bytes).map_err(Invalid::from).and_then(|r| match r.stream() == stream {
        true => Ok(r),
        false => Err(Invalid::OtherStream(r.stream().to_string())),
    });
    record.map(Some).map_err(|why| {
        Error::usage(format!("{} is not a valid {} record: {why}", p.display(), T::KIND))
            .hint(format!("delete it (`rm {}`) and check the branches with `git log`", p.display()))
    })
}

/// Write a record file atomically.
pub(crate) fn write_record<T: Record>(p: &Path, record: &T) -> Result<()> {
    let text = serde_json::to_vec_pretty(record).map_err(|e| Error::internal(format!("{} record: {e}", T::KIND)))?;
    crate::fsutil::write_atomic(p, &text)
}

/// Remove a record file (gone already is fine).
pub(crate) fn remove_record<T: Record>(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::internal(format!("cannot remove the {} record: {e}", T::KIND))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef01234567";
    const B: &str = "89abcdef0123456789abcdef0123456789abcdef";

    /// The record as the versions that kept ids as strings wrote it (`serde_json::to_vec_pretty`
    /// of this struct): the format on disk, which must not change.
    #[derive(Serialize)]
    struct Written {
        stream: &'static str,
        stream_branch: &'static str,
        base_branch: &'static str,
        strategy: &'static str,
        stream_old: &'static str,
        stream_new: &'static str,
        base_old: &'static str,
        base_new: &'static str,
        commits: usize,
        prd_from: Option<&'static str>,
        prd_to: Option<&'static str>,
        stage: Stage,
        #[serde(skip_serializing_if = "Option::is_none")]
        remote: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        stream_seen: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        local_base: Option<&'static str>,
    }

    fn local() -> Written {
        Written {
            stream: "auth",
            stream_branch: "boulder/auth",
            base_branch: "main",
            strategy: "squash",
            stream_old: A,
            stream_new: B,
            base_old: A,
            base_new: B,
            commits: 2,
            prd_from: None,
            prd_to: None,
            stage: Stage::StreamUpdated,
            remote: None,
            stream_seen: None,
            local_base: None,
        }
    }

    fn remote(seen: &'static str) -> Written {
        Written {
            strategy: "merge",
            prd_from: Some(B),
            prd_to: Some(A),
            stage: Stage::Pushed,
            remote: Some("origin"),
            stream_seen: Some(seen),
            local_base: Some(A),
            ..local()
        }
    }

    fn read(text: &[u8]) -> Result<Option<Journal>> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("auth.json");
        std::fs::write(&p, text).unwrap();
        read_record(&p, "auth")
    }

    #[test]
    fn a_record_written_before_ids_were_typed_reads_and_writes_back_byte_for_byte() {
        for old in [local(), remote(""), remote(B)] {
            let bytes = serde_json::to_vec_pretty(&old).unwrap();
            let j = read(&bytes).unwrap().unwrap();
            assert_eq!(serde_json::to_vec_pretty(&j).unwrap(), bytes, "{}", String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn ids_strategy_and_the_stream_seen_read_typed() {
        let j = read(&serde_json::to_vec_pretty(&local()).unwrap()).unwrap().unwrap();
        assert_eq!(
            (j.strategy, j.stream_old.to_string(), j.base_new.to_string()),
            (MergeStrategy::Squash, A.into(), B.into())
        );
        assert_eq!((j.prd_to, j.stream_seen, j.local_base), (None, None, None));
        assert_eq!(j.final_tip(), j.base_new);
        let j = read(&serde_json::to_vec_pretty(&remote("")).unwrap()).unwrap().unwrap();
        assert_eq!((j.strategy, j.stream_seen), (MergeStrategy::Merge, Some(StreamSeen::Absent)));
        assert_eq!(j.final_tip().to_string(), A);
        let j = read(&serde_json::to_vec_pretty(&remote(B)).unwrap()).unwrap().unwrap();
        assert_eq!(j.stream_seen.and_then(StreamSeen::tip).map(|t| t.to_string()), Some(B.to_string()));
    }

    /// An unknown strategy is never read as a rebase: the record is refused, naming the file,
    /// the strategies there are, and the fix.
    #[test]
    fn an_unknown_strategy_or_a_bad_id_makes_the_record_invalid() {
        let bad = [
            Written { strategy: "octopus", ..local() },
            Written { strategy: "", ..local() },
            Written { base_new: "not-a-commit", ..local() },
            remote("0123"),
        ];
        for w in bad {
            let e = read(&serde_json::to_vec_pretty(&w).unwrap()).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::Usage, "{}", e.message);
            assert!(e.message.contains("auth.json is not a valid merge record: "), "{}", e.message);
            assert!(e.hints.iter().any(|h| h.contains("delete it")), "{:?}", e.hints);
        }
        let e = read(&serde_json::to_vec_pretty(&Written { strategy: "octopus", ..local() }).unwrap()).unwrap_err();
        assert!(
            e.message.contains("unknown variant `octopus`, expected one of `rebase`, `merge`, `squash`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_record_of_another_stream_is_invalid() {
        let e = read(&serde_json::to_vec_pretty(&Written { stream: "api", ..local() }).unwrap()).unwrap_err();
        assert!(e.message.ends_with("is not a valid merge record: it names stream \"api\""), "{}", e.message);
    }
}
