//! Reading and writing objects: commits, trees and blobs, by id, through [`Objects`] — the
//! repository's object store ([`Repo::objects`]) or an in-memory layer over it
//! ([`Repo::in_memory`]) that merges write to and read back, and that is written to disk in one
//! go ([`Objects::persist`]) only once the merge goes ahead.
//!
//! Readers of fetched (possibly hostile) objects check sizes with [`Objects::header`] before
//! reading anything whole.
//!
//! Here: the object types and the readers; the reader of long walks in `commit_files.rs`, the
//! writers in `write.rs`, the loose-object writer under them in `loose.rs`.

use std::borrow::Cow;

use gix::bstr::ByteSlice;

use super::{ObjectId, Repo};
use crate::error::{Error, Result, ResultExt};

mod commit_files;
mod loose;
mod write;

pub use commit_files::CommitFiles;
pub(crate) use commit_files::{find_as, tree_and_parents};
pub(crate) use loose::{Loose, WriteFresh};
pub use write::{Batch, Fresh};

/// An error of the object database or a config file: gix's error, kept as the cause.
#[derive(Debug)]
pub struct Failure(Box<dyn std::error::Error + Send + Sync + 'static>);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

pub(crate) fn failure(e: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Failure {
    Failure(e.into())
}

/// The kind of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Commit,
    Tree,
    Blob,
    Tag,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Commit => "commit",
            Kind::Tree => "tree",
            Kind::Blob => "blob",
            Kind::Tag => "tag",
        })
    }
}

impl From<gix::objs::Kind> for Kind {
    fn from(k: gix::objs::Kind) -> Self {
        match k {
            gix::objs::Kind::Commit => Kind::Commit,
            gix::objs::Kind::Tree => Kind::Tree,
            gix::objs::Kind::Blob => Kind::Blob,
            gix::objs::Kind::Tag => Kind::Tag,
        }
    }
}

/// The kind of a tree entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    Blob,
    /// An executable file.
    Executable,
    /// A symbolic link.
    Link,
    /// A subtree.
    Tree,
    /// A submodule commit.
    Commit,
}

impl EntryKind {
    /// A file, executable or not.
    pub fn is_blob(self) -> bool {
        matches!(self, EntryKind::Blob | EntryKind::Executable)
    }
}

impl From<gix::objs::tree::EntryKind> for EntryKind {
    fn from(k: gix::objs::tree::EntryKind) -> Self {
        use gix::objs::tree::EntryKind as G;
        match k {
            G::Blob => EntryKind::Blob,
            G::BlobExecutable => EntryKind::Executable,
            G::Link => EntryKind::Link,
            G::Tree => EntryKind::Tree,
            G::Commit => EntryKind::Commit,
        }
    }
}

/// One entry of a tree.
#[derive(Debug, Clone)]
pub struct TreeEntry {
    /// Its file name (UTF-8-lossy).
    pub name: String,
    pub id: ObjectId,
    pub kind: EntryKind,
}

/// One commit met by a walk: its id and parents.
#[derive(Debug, Clone)]
pub struct Walked {
    pub id: ObjectId,
    pub parents: Vec<ObjectId>,
}

/// The commits reachable from some tips and not from others, newest first ([`Objects::walk`]).
pub struct Walk<'r> {
    inner: gix::revision::Walk<'r>,
}

impl Iterator for Walk<'_> {
    type Item = std::result::Result<Walked, Failure>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|info| {
            info.map(|info| Walked { id: info.id, parents: info.parent_ids.iter().copied().collect() }).map_err(failure)
        })
    }
}

/// What a commit says, for a replay.
#[derive(Debug, Clone)]
pub struct CommitInfo {
    pub tree: ObjectId,
    pub parents: Vec<ObjectId>,
    /// The first line of its message, trimmed (UTF-8-lossy).
    pub subject: String,
}

/// What a revision spec names ([`Repo::rev_parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevSpec {
    /// One object (`HEAD~2`).
    One(ObjectId),
    /// `from..to`.
    Range { from: ObjectId, to: ObjectId },
    /// `theirs...ours`.
    Merge { theirs: ObjectId, ours: ObjectId },
    /// Another form (`A^@`, `A^!`, …).
    Other,
}

impl Repo {
    /// What `spec` names, as git reads it.
    pub fn rev_parse(&self, spec: &str) -> std::result::Result<RevSpec, Failure> {
        use gix::revision::plumbing::Spec;
        Ok(match self.repo.rev_parse(spec).map_err(failure)?.detach() {
            Spec::Include(id) => RevSpec::One(id),
            Spec::Range { from, to } => RevSpec::Range { from, to },
            Spec::Merge { theirs, ours } => RevSpec::Merge { theirs, ours },
            _ => RevSpec::Other,
        })
    }
}

/// An object store to read and write: the repository's own, or a layer in memory over it.
pub struct Objects<'r> {
    pub(crate) g: Cow<'r, gix::Repository>,
}

impl Repo {
    /// Every file path (blobs and links, recursively) in the tree of `commit`, as UTF-8-lossy text.
    pub fn tree_paths(&self, commit: gix::ObjectId) -> Result<Vec<String>> {
        let commit = self.repo.find_commit(commit).internal("cannot read commit")?;
        let tree = commit.tree().internal("cannot read tree")?;
        let mut rec = gix::traverse::tree::Recorder::default();
        tree.traverse().breadthfirst(&mut rec).internal("cannot walk tree")?;
        Ok(rec
            .records
            .into_iter()
            .filter(|e| !e.mode.is_tree())
            .map(|e| e.filepath.to_str_lossy().into_owned())
            .collect())
    }

    /// Which of `paths` (git's bytes) have no entry in the tree of `commit`: the files a commit
    /// that changed them deleted. A few are looked up one by one; many (a commit deleting most
    /// of the tree) against one listing of the tree.
    pub fn absent_at(&self, commit: gix::ObjectId, paths: &[&[u8]]) -> Result<Vec<usize>> {
        let c = self.repo.find_commit(commit).internal("cannot read commit")?;
        let tree = c.tree().internal("cannot read tree")?;
        if paths.len() <= 64 {
            let mut out = Vec::new();
            for (i, p) in paths.iter().enumerate() {
                let parts = p.split(|b| *b == b'/').map(gix::bstr::BString::from);
                let found = tree.lookup_entry(parts).internal("cannot look up a path")?;
                if found.is_none() {
                    out.push(i);
                }
            }
            return Ok(out);
        }
        let mut rec = gix::traverse::tree::Recorder::default();
        tree.traverse().breadthfirst(&mut rec).internal("cannot walk tree")?;
        let present: std::collections::HashSet<Vec<u8>> = rec.records.into_iter().map(|e| e.filepath.into()).collect();
        Ok(paths.iter().enumerate().filter(|(_, p)| !present.contains(**p)).map(|(i, _)| i).collect())
    }

    /// The bytes of the file at `path` in the tree of `commit`, if it exists there.
    pub fn file_at(&self, commit: gix::ObjectId, path: &str) -> Result<Option<Vec<u8>>> {
        let commit = self.repo.find_commit(commit).internal("cannot read commit")?;
        let tree = commit.tree().internal("cannot read tree")?;
        let entry = tree.lookup_entry_by_path(path).internal(format_args!("cannot look up {path}"))?;
        match entry {
            Some(e) if e.mode().is_blob() => {
                let obj = e.object().internal(format_args!("cannot read {path}"))?;
                Ok(Some(obj.detach().data))
            }
            _ => Ok(None),
        }
    }

    /// The id of the blob at `path` in the tree of `commit`, if there is one (the blob is not read).
    pub fn blob_id_at(&self, commit: gix::ObjectId, path: &str) -> Result<Option<gix::ObjectId>> {
        let commit = self.repo.find_commit(commit).internal("cannot read commit")?;
        let tree = commit.tree().internal("cannot read tree")?;
        let entry = tree.lookup_entry_by_path(path).internal(format_args!("cannot look up {path}"))?;
        Ok(entry.filter(|e| e.mode().is_blob()).map(|e| e.object_id()))
    }

    /// The repository's object store.
    pub fn objects(&self) -> Objects<'_> {
        Objects { g: Cow::Borrowed(&self.repo) }
    }

    /// A layer in memory over the object store: what is written to it stays in memory (and is
    /// read back from there) until [`Objects::persist`].
    pub fn in_memory(&self) -> Objects<'static> {
        Objects { g: Cow::Owned(self.repo.clone().with_object_memory()) }
    }
}

impl Objects<'_> {
    /// The kind and size of object `id`, from its header (nothing else is read).
    pub fn header(&self, id: ObjectId) -> std::result::Result<(Kind, u64), Failure> {
        let h = self.g.find_header(id).map_err(failure)?;
        Ok((h.kind().into(), h.size()))
    }

    /// Whether object `id` is in the store.
    pub fn has(&self, id: ObjectId) -> bool {
        self.g.has_object(id)
    }

    /// The tree and parents of `commit`.
    pub fn commit_parts(&self, commit: ObjectId) -> std::result::Result<(ObjectId, Vec<ObjectId>), Failure> {
        let c = self.g.find_commit(commit).map_err(failure)?;
        let tree = c.tree_id().map_err(failure)?.detach();
        Ok((tree, c.parent_ids().map(|p| p.detach()).collect()))
    }

    /// The parents of `commit`.
    pub fn parents(&self, commit: ObjectId) -> std::result::Result<Vec<ObjectId>, Failure> {
        let c = self.g.find_commit(commit).map_err(failure)?;
        Ok(c.parent_ids().map(|p| p.detach()).collect())
    }

    /// The tree, parents and subject of `commit`.
    pub fn commit_info(&self, commit: ObjectId) -> Result<CommitInfo> {
        let c = self.g.find_commit(commit).internal(format_args!("cannot read commit {commit}"))?;
        let parents = c.parent_ids().map(|p| p.detach()).collect();
        let subject = c.message_raw_sloppy().lines().next().unwrap_or_default().to_str_lossy().trim().to_string();
        let tree = c.tree_id().internal(format_args!("cannot read the tree of {commit}"))?.detach();
        Ok(CommitInfo { tree, parents, subject })
    }

    /// The tree of `commit`.
    pub fn tree_of(&self, commit: ObjectId) -> Result<ObjectId> {
        tree_of(&self.g, commit)
    }

    /// The entries of tree `tree`, in tree order.
    pub fn entries(&self, tree: ObjectId) -> std::result::Result<Vec<TreeEntry>, Failure> {
        let tree = self.g.find_tree(tree).map_err(failure)?;
        let mut out = Vec::new();
        for e in tree.iter() {
            let e = e.map_err(failure)?;
            out.push(TreeEntry { name: e.filename().to_string(), id: e.object_id(), kind: e.mode().kind().into() });
        }
        Ok(out)
    }

    /// The entries of tree `tree` that decode, in tree order, skipping any that do not.
    pub fn readable_entries(&self, tree: ObjectId) -> std::result::Result<Vec<TreeEntry>, Failure> {
        let tree = self.g.find_tree(tree).map_err(failure)?;
        Ok(tree
            .iter()
            .filter_map(|e| e.ok())
            .map(|e| TreeEntry { name: e.filename().to_string(), id: e.object_id(), kind: e.mode().kind().into() })
            .collect())
    }

    /// The bytes of object `id`.
    pub fn read(&self, id: ObjectId) -> std::result::Result<Vec<u8>, Failure> {
        Ok(self.g.find_object(id).map_err(failure)?.detach().data)
    }

    /// The committer time of `commit`, in seconds since the epoch.
    pub fn commit_time(&self, commit: ObjectId) -> Option<i64> {
        self.g.find_commit(commit).ok().and_then(|c| c.time().ok()).map(|t| t.seconds)
    }

    /// The commit `id` names, peeling tags; `None` when it is no commit or not in the store.
    pub fn peel_to_commit(&self, id: ObjectId) -> Option<ObjectId> {
        self.g.find_object(id).ok().and_then(|o| o.peel_to_commit().ok()).map(|c| c.id)
    }

    /// The blob at `path` in `tree` (id and bytes), if there is one.
    pub fn blob_at(&self, tree: ObjectId, path: &str) -> Result<Option<(ObjectId, Vec<u8>)>> {
        let tree = self.g.find_tree(tree).internal(format_args!("cannot read tree {tree}"))?;
        match tree.lookup_entry_by_path(path).internal(format_args!("cannot look up {path}"))? {
            Some(e) if e.mode().is_blob() => {
                let id = e.object_id();
                let data = e.object().internal(format_args!("cannot read {path}"))?.detach().data;
                Ok(Some((id, data)))
            }
            _ => Ok(None),
        }
    }

    /// Every file (blobs and links, recursively) in `tree`: path (git's bytes, not always UTF-8)
    /// and id.
    pub fn files(&self, tree: ObjectId) -> std::result::Result<Vec<(Vec<u8>, ObjectId)>, Failure> {
        let tree = self.g.find_tree(tree).map_err(failure)?;
        let mut rec = gix::traverse::tree::Recorder::default();
        tree.traverse().breadthfirst(&mut rec).map_err(failure)?;
        Ok(rec.records.into_iter().filter(|e| !e.mode.is_tree()).map(|e| (e.filepath.into(), e.oid)).collect())
    }

    /// The commits reachable from `tips` but not from `hidden`, newest first.
    pub fn walk(
        &self,
        tips: impl IntoIterator<Item = ObjectId>,
        hidden: impl IntoIterator<Item = ObjectId>,
    ) -> std::result::Result<Walk<'_>, Failure> {
        let inner = self.g.rev_walk(tips).with_hidden(hidden).all().map_err(failure)?;
        Ok(Walk { inner })
    }

    /// A merge base of `a` and `b` as git computes it (by commit time), if they have one.
    pub fn merge_base(&self, a: ObjectId, b: ObjectId) -> Option<ObjectId> {
        self.g.merge_base(a, b).ok().flatten().map(|id| id.detach())
    }

    /// Is `ancestor` reachable from `tip` (or equal)?
    pub fn is_ancestor(&self, ancestor: ObjectId, tip: ObjectId) -> Result<bool> {
        if ancestor == tip {
            return Ok(true);
        }
        let walk =
            self.walk([tip], []).map_err(|e| Error::internal(format!("cannot walk {tip}: {e}")).with_source(e))?;
        for info in walk {
            let info = info.map_err(|e| Error::internal(format!("cannot walk {tip}: {e}")).with_source(e))?;
            if info.id == ancestor {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The tree of `commit`.
pub fn tree_of(repo: &gix::Repository, commit: gix::ObjectId) -> Result<gix::ObjectId> {
    Ok(repo
        .find_commit(commit)
        .internal(format_args!("cannot read commit {commit}"))?
        .tree_id()
        .internal(format_args!("cannot read the tree of {commit}"))?
        .detach())
}

/// The id git gives a blob of `bytes` (SHA-1), without writing it.
pub fn blob_id(bytes: &[u8]) -> Option<ObjectId> {
    gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, bytes).ok()
}
