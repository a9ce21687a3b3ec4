//! Reading and writing objects: commits, trees and blobs, by id, through [`Objects`] — the
//! repository's object store ([`Repo::objects`]) or an in-memory layer over it
//! ([`Repo::in_memory`]) that merges write to and read back, and that is written to disk in one
//! go ([`Objects::persist`]) only once the merge goes ahead.
//!
//! Readers of fetched (possibly hostile) objects check sizes with [`Objects::header`] before
//! reading anything whole.

use std::borrow::Cow;

use gix::bstr::ByteSlice;

use super::identity::Signature;
use super::{ObjectId, Repo};
use crate::error::{Error, Result, ResultExt};

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

/// Reads commits one after another and one file of each one's tree, for walks that read every
/// object once (a log of a long history): no object cache (nothing is read twice, so caching
/// only costs a copy), the buffers reused, nothing decoded beyond what is asked. A commit's tree
/// and parents come from the repository's commit-graph when it has the commit (as git's own walks
/// take them, `core.commitGraph` respected), without inflating the commit. Sizes are not checked:
/// it reads local history (what a pull brings in is checked before it is taken). It can be sent
/// to another thread.
pub struct CommitFiles {
    odb: gix::OdbHandle,
    hash: gix::hash::Kind,
    graph: Option<std::sync::Arc<gix::commitgraph::Graph>>,
    commit: Vec<u8>,
    tree: Vec<u8>,
    file: Vec<u8>,
}

impl Clone for CommitFiles {
    fn clone(&self) -> Self {
        let mut odb = self.odb.clone();
        odb.unset_object_cache();
        CommitFiles {
            odb,
            hash: self.hash,
            graph: self.graph.clone(),
            commit: Vec::new(),
            tree: Vec::new(),
            file: Vec::new(),
        }
    }
}

impl CommitFiles {
    /// The tree and the parents of `commit`.
    pub fn commit(&mut self, commit: ObjectId) -> std::result::Result<(ObjectId, Vec<ObjectId>), Failure> {
        if let Some(found) = self.in_graph(commit) {
            return Ok(found);
        }
        tree_and_parents(find_as(&self.odb, commit, &mut self.commit, gix::objs::Kind::Commit)?, self.hash)
    }

    /// The tree and the parents of `commit` from the commit-graph, if it holds the commit.
    fn in_graph(&self, commit: ObjectId) -> Option<(ObjectId, Vec<ObjectId>)> {
        let graph = self.graph.as_deref()?;
        let c = graph.commit_by_id(commit)?;
        let tree = c.root_tree_id().to_owned();
        let parents = c.iter_parents().map(|p| p.ok().map(|pos| graph.id_at(pos).to_owned())).collect::<Option<_>>()?;
        Some((tree, parents))
    }

    /// The content of the regular file `name` at the top of `tree` (`None`: no such file).
    pub fn file(&mut self, tree: ObjectId, name: &str) -> std::result::Result<Option<&[u8]>, Failure> {
        let data = find_as(&self.odb, tree, &mut self.tree, gix::objs::Kind::Tree)?;
        let mut found = None;
        for e in gix::objs::TreeRefIter::from_bytes(data, self.hash) {
            let e = e.map_err(failure)?;
            if e.filename == name.as_bytes() {
                if e.mode.is_blob() {
                    found = Some(e.oid.to_owned());
                }
                break;
            }
        }
        let Some(id) = found else { return Ok(None) };
        find_as(&self.odb, id, &mut self.file, gix::objs::Kind::Blob).map(Some)
    }
}

/// Object `id` read from `odb` into `buf`: its data, when it is a `want` (else an error naming
/// what it is). For the readers that walk every object once ([`CommitFiles`],
/// [`super::chain::ChainReader`]).
pub(crate) fn find_as<'b>(
    odb: &gix::OdbHandle,
    id: ObjectId,
    buf: &'b mut Vec<u8>,
    want: gix::objs::Kind,
) -> std::result::Result<&'b [u8], Failure> {
    use gix::objs::Find;
    let data = odb.try_find(&id, buf).map_err(failure)?.ok_or_else(|| failure(format!("{want} {id} is missing")))?;
    if data.kind != want {
        return Err(failure(format!("{id} is a {}, not a {want}", data.kind)));
    }
    Ok(data.data)
}

/// The tree and the parents of the commit whose bytes are `data`: they lead the commit, and
/// nothing after them is parsed.
pub(crate) fn tree_and_parents(
    data: &[u8],
    hash: gix::hash::Kind,
) -> std::result::Result<(ObjectId, Vec<ObjectId>), Failure> {
    use gix::objs::commit::ref_iter::Token;
    let mut parsed = gix::objs::CommitRefIter::from_bytes(data, hash);
    let tree = parsed.tree_id().map_err(failure)?;
    let mut parents = Vec::new();
    for token in parsed {
        match token {
            Ok(Token::Parent { id }) => parents.push(id),
            _ => break,
        }
    }
    Ok((tree, parents))
}

impl<'r> Objects<'r> {
    /// A reader of commits and one file of each, for walks that read every object once.
    pub fn commit_files(&self) -> CommitFiles {
        let mut odb = self.g.objects.clone();
        odb.unset_object_cache();
        // A commit-graph that cannot be read is only not used: the commits themselves are read.
        let graph = self.g.commit_graph_if_enabled().ok().flatten().map(std::sync::Arc::new);
        CommitFiles { odb, hash: self.g.object_hash(), graph, commit: Vec::new(), tree: Vec::new(), file: Vec::new() }
    }

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

    /// Write a blob (with `write` false, only compute its id).
    pub fn blob(&self, bytes: &[u8], write: bool) -> std::result::Result<ObjectId, Failure> {
        if write {
            Ok(self.g.write_blob(bytes).map_err(failure)?.detach())
        } else {
            gix::objs::compute_hash(self.g.object_hash(), gix::objs::Kind::Blob, bytes).map_err(failure)
        }
    }

    /// Write a tree of regular files `(name, blob)`, names in tree order (with `write` false,
    /// only compute its id).
    pub fn flat_tree(&self, files: &[(&str, ObjectId)], write: bool) -> std::result::Result<ObjectId, Failure> {
        self.put(&flat(files), write)
    }

    /// Write a commit of `tree` on `parents` by `author` and `committer` (with `write` false, only
    /// compute its id).
    pub fn commit(
        &self,
        tree: ObjectId,
        parents: &[ObjectId],
        author: &Signature,
        committer: &Signature,
        message: &str,
        write: bool,
    ) -> std::result::Result<ObjectId, Failure> {
        self.put(&commit_object(tree, parents, author, committer, message), write)
    }

    /// [`Objects::blob`], [`Objects::flat_tree`] and [`Objects::commit`] for objects that are new
    /// by construction (they hold a fresh time and clock): written without first asking the
    /// store whether it holds them. Another writer making the very same object meanwhile is
    /// harmless: the same bytes replace the same bytes, atomically.
    ///
    /// On disk they go through one [`Loose`] writer, whose compressor all of them share; in an
    /// in-memory layer, to the layer.
    pub fn fresh(&self) -> Fresh<'_, '_> {
        let loose = match &self.g {
            Cow::Borrowed(g) => Sink::Own(Loose::new(g)),
            Cow::Owned(_) => Sink::Memory,
        };
        Fresh { objects: self, loose }
    }

    /// [`Objects::fresh`] writing into `batch` (over an in-memory layer: to the layer).
    pub fn fresh_in<'o>(&'o self, batch: &'o Batch) -> Fresh<'o, 'r> {
        let loose = match &self.g {
            Cow::Borrowed(_) => Sink::Batch(&batch.loose),
            Cow::Owned(_) => Sink::Memory,
        };
        Fresh { objects: self, loose }
    }

    fn put<T: gix::objs::WriteTo>(&self, object: &T, write: bool) -> std::result::Result<ObjectId, Failure> {
        if write {
            return Ok(self.g.write_object(object).map_err(failure)?.detach());
        }
        let mut buf = Vec::new();
        object.write_to(&mut buf).map_err(failure)?;
        gix::objs::compute_hash(self.g.object_hash(), object.kind(), &buf).map_err(failure)
    }

    /// Write `object` straight to the store (the in-memory layer, or the disk), without first
    /// asking whether the store already holds it: for objects that are new by construction (a
    /// replayed commit, a rewritten tree), where asking costs a lookup on disk. Duplicates in an
    /// in-memory layer are dropped by [`Objects::persist`].
    pub fn put_unchecked<T: gix::objs::WriteTo>(&self, object: &T) -> std::result::Result<ObjectId, Failure> {
        gix::objs::Write::write(&self.g.objects, object).map_err(failure)
    }

    /// A new commit by `who` (author and committer).
    pub fn new_commit(
        &self,
        tree: ObjectId,
        parents: Vec<ObjectId>,
        who: &Signature,
        message: &str,
    ) -> Result<ObjectId> {
        self.commit(tree, &parents, who, who, message, true).internal("cannot write a commit")
    }

    /// `tree` with the file at `path` set to a new blob of `text`.
    pub fn with_blob(&self, tree: ObjectId, path: &str, text: &str) -> Result<ObjectId> {
        let blob = self.g.write_blob(text.as_bytes()).internal("cannot write a blob")?.detach();
        self.with_file(tree, path, blob)
    }

    /// `tree` with the file at `path` set to the blob `blob`.
    pub fn with_file(&self, tree: ObjectId, path: &str, blob: ObjectId) -> Result<ObjectId> {
        let mut editor = self.g.edit_tree(tree).internal("cannot edit a tree")?;
        editor.upsert(path, gix::objs::tree::EntryKind::Blob, blob).internal("cannot edit a tree")?;
        Ok(editor.write().internal("cannot write a tree")?.detach())
    }

    /// Write a commit like `original` (author, message, encoding) with a new tree, parents and
    /// committer. Signatures (`gpgsig`) are dropped: they no longer match.
    pub fn rewrite(
        &self,
        original: ObjectId,
        tree: ObjectId,
        parents: Vec<ObjectId>,
        committer: &Signature,
    ) -> Result<ObjectId> {
        let c = self.g.find_commit(original).internal(format_args!("cannot read commit {original}"))?;
        let mut commit: gix::objs::Commit = c
            .decode()
            .internal(format_args!("cannot decode commit {original}"))?
            .try_into()
            .map_err(|e| Error::internal(format!("cannot decode commit {original}: {e:?}")).with_source(e))?;
        commit.tree = tree;
        commit.parents = parents.into();
        commit.committer = committer.0.clone();
        commit.extra_headers.retain(|(k, _)| k != "gpgsig" && k != "gpgsig-sha256" && k != "mergetag");
        self.put_unchecked(&commit).internal("cannot write a commit")
    }

    /// The empty tree's id.
    pub fn empty_tree(&self) -> ObjectId {
        ObjectId::empty_tree(self.g.object_hash())
    }

    /// Write what this in-memory layer holds into `repo`'s object store (nothing for the store
    /// itself), each object once: one the store already holds is not written again.
    pub fn persist(mut self, repo: &Repo) -> Result<()> {
        if let Cow::Owned(g) = &mut self.g {
            if let Some(storage) = g.objects.take_object_memory() {
                for (id, (kind, data)) in storage.iter() {
                    if repo.repo.objects.exists_without_refresh(id) {
                        continue;
                    }
                    gix::objs::Write::write_buf_with_known_id(&repo.repo.objects, *kind, data, *id)
                        .internal("cannot write an object")?;
                }
            }
        }
        Ok(())
    }
}

/// Writes of objects new by construction ([`Objects::fresh`], [`Objects::fresh_in`]).
pub struct Fresh<'o, 'r> {
    objects: &'o Objects<'r>,
    loose: Sink<'o>,
}

/// Where a [`Fresh`] writes.
enum Sink<'o> {
    /// The in-memory layer.
    Memory,
    /// Its own writer to disk.
    Own(Loose),
    /// A [`Batch`]'s writer.
    Batch(&'o Loose),
}

impl Sink<'_> {
    fn loose(&self) -> Option<&Loose> {
        match self {
            Sink::Memory => None,
            Sink::Own(l) => Some(l),
            Sink::Batch(l) => Some(l),
        }
    }
}

/// New objects kept in memory until [`Batch::flush`] writes them: as one pack when the object
/// folder allows (two files, however many objects; see [`super::packfile`]), else loose. For
/// the post-commit hook, whose objects all have to be in place only before its refs move.
///
/// The pack has a `.keep` beside it from [`Batch::flush`] until [`Batch::settle`] (or the batch
/// is dropped), as a fetch keeps its pack until its refs are updated: until refs name the
/// objects, `git repack -a -d` would drop them as unreachable.
pub struct Batch {
    loose: Loose,
    keep: std::cell::RefCell<Option<std::path::PathBuf>>,
}

impl Batch {
    /// Whether the objects go into one pack (else they are written loose, at once).
    pub fn packs(&self) -> bool {
        self.loose.pending.is_some()
    }

    /// Write the objects kept so far, as one pack; loose if the pack cannot be written.
    pub fn flush(&self) -> Result<()> {
        let keep = self.loose.flush().internal("cannot write the new objects")?;
        if let Some(keep) = keep {
            self.settle();
            *self.keep.borrow_mut() = Some(keep);
        }
        Ok(())
    }

    /// Refs name the objects now (or never will): the pack needs its `.keep` no more.
    pub fn settle(&self) {
        if let Some(keep) = self.keep.borrow_mut().take() {
            let _ = std::fs::remove_file(keep);
        }
    }

    pub(crate) fn loose(&self) -> &Loose {
        &self.loose
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.settle();
    }
}

impl Repo {
    /// A [`Batch`] of new objects for this repository's object folder.
    pub fn batch(&self) -> Batch {
        Batch { loose: Loose::batch(&self.repo), keep: Default::default() }
    }
}

impl Fresh<'_, '_> {
    /// Write a blob.
    pub fn blob(&self, bytes: &[u8]) -> std::result::Result<ObjectId, Failure> {
        match self.loose.loose() {
            Some(loose) => loose.write_buf(gix::objs::Kind::Blob, bytes).map_err(failure),
            None => gix::objs::Write::write_buf(&self.objects.g.objects, gix::objs::Kind::Blob, bytes).map_err(failure),
        }
    }

    /// Write a tree of regular files `(name, blob)`, names in tree order.
    pub fn flat_tree(&self, files: &[(&str, ObjectId)]) -> std::result::Result<ObjectId, Failure> {
        self.put(&flat(files))
    }

    fn put(&self, object: &impl gix::objs::WriteTo) -> std::result::Result<ObjectId, Failure> {
        match self.loose.loose() {
            Some(loose) => loose.write(object).map_err(failure),
            None => self.objects.put_unchecked(object),
        }
    }

    /// Write a commit of `tree` on `parents` by `author` and `committer`.
    pub fn commit(
        &self,
        tree: ObjectId,
        parents: &[ObjectId],
        author: &Signature,
        committer: &Signature,
        message: &str,
    ) -> std::result::Result<ObjectId, Failure> {
        self.put(&commit_object(tree, parents, author, committer, message))
    }
}

/// A writer of loose objects for objects new by construction (an op's blobs, tree and commit, a
/// note's blob, notes trees and commit): each is hashed and written as git writes a loose
/// object, a temporary file in the object's own fan-out folder renamed onto its name. Nothing
/// asks the store first whether it holds the object; a writer making the very same object
/// meanwhile replaces it with the same bytes.
///
/// The zlib stream is stored, not compressed, as git writes with `core.looseCompression=0`:
/// these objects are a few hundred bytes, a file system block either way, and packing
/// compresses them. A compressor costs more than the object: gix's makes and zeroes some
/// 400 KiB of state per object (a page fault per 4 KiB), more than the whole write.
///
/// A batch writer ([`Loose::batch`]) keeps the objects instead, for [`Loose::flush`] to write as
/// one pack.
pub(crate) struct Loose {
    /// The object directory.
    dir: std::path::PathBuf,
    hash: gix::hash::Kind,
    /// The objects kept for one pack; `None`: each is written loose at once.
    pending: Option<std::cell::RefCell<Vec<super::packfile::Object>>>,
}

impl Loose {
    pub(crate) fn new(g: &gix::Repository) -> Loose {
        Loose { dir: g.objects.store_ref().path().to_path_buf(), hash: g.object_hash(), pending: None }
    }

    /// A writer that keeps its objects for [`Loose::flush`], where the object folder takes a new
    /// pack ([`super::packfile::usable`]); else one like [`Loose::new`].
    pub(crate) fn batch(g: &gix::Repository) -> Loose {
        let mut loose = Loose::new(g);
        if super::packfile::usable(&loose.dir) {
            loose.pending = Some(Default::default());
        }
        loose
    }

    /// Write the objects kept so far as one pack (loose, each, if that fails); the pack's `.keep`,
    /// for the caller to remove once refs name its objects.
    pub(crate) fn flush(&self) -> std::io::Result<Option<std::path::PathBuf>> {
        let Some(pending) = &self.pending else { return Ok(None) };
        let mut list = std::mem::take(&mut *pending.borrow_mut());
        if list.is_empty() {
            return Ok(None);
        }
        let options = super::packfile::Options { keep: true, sync: false };
        match super::packfile::write(&self.dir, self.hash, &mut list, options) {
            Ok((_, keep)) => Ok(keep),
            Err(e) => {
                crate::trace::line(&format!("new objects written loose: no pack: {e}"));
                for o in &list {
                    self.write_loose(o.kind, &o.data)?;
                }
                Ok(None)
            }
        }
    }

    /// A kept object, by id.
    pub(crate) fn kept(&self, id: &gix::hash::oid) -> Option<(gix::objs::Kind, Vec<u8>)> {
        let pending = self.pending.as_ref()?.borrow();
        pending.iter().find(|o| o.id == id).map(|o| (o.kind, o.data.clone()))
    }

    /// Write `object`; its id.
    pub(crate) fn write(&self, object: &dyn gix::objs::WriteTo) -> std::io::Result<ObjectId> {
        let mut data = Vec::with_capacity(object.size() as usize);
        object.write_to(&mut data)?;
        self.write_buf(object.kind(), &data)
    }

    /// Write the object of `kind` whose bytes are `data`; its id.
    pub(crate) fn write_buf(&self, kind: gix::objs::Kind, data: &[u8]) -> std::io::Result<ObjectId> {
        if let Some(pending) = &self.pending {
            let id = gix::objs::compute_hash(self.hash, kind, data).map_err(std::io::Error::other)?;
            pending.borrow_mut().push(super::packfile::Object { kind, data: data.to_vec(), id });
            return Ok(id);
        }
        self.write_loose(kind, data)
    }

    fn write_loose(&self, kind: gix::objs::Kind, data: &[u8]) -> std::io::Result<ObjectId> {
        use std::io::Write;
        let header = gix::objs::encode::loose_header(kind, data.len() as u64);
        let mut hasher = gix::hash::hasher(self.hash);
        hasher.update(&header);
        hasher.update(data);
        let id = hasher.try_finalize().map_err(std::io::Error::other)?;
        let bytes = super::packfile::stored_zlib(&header, data);

        let hex = id.to_hex().to_string();
        let folder = self.dir.join(&hex[..2]);
        let path = folder.join(&hex[2..]);
        let tmp = folder.join(format!("tmp_obj_{:016x}", fastrand::u64(..)));
        let create = || {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o444);
            options.open(&tmp)
        };
        // The fan-out folder may be missing, or go between making it and using it
        // (`git prune-packed` removes empty ones): make it and try again, a few times.
        let mut tries = 0;
        let mut file = loop {
            match create() {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 5 => {
                    tries += 1;
                    match std::fs::create_dir(&folder) {
                        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
                        _ => {}
                    }
                }
                other => break other?,
            }
        };
        let written = file.write_all(&bytes).and_then(|()| {
            drop(file);
            std::fs::rename(&tmp, &path)
        });
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map(|()| id)
    }
}

/// The repository's objects for reading, [`Loose`] for writing: for gix's notes trees, which
/// are new whenever a note is new.
pub(crate) struct WriteFresh<'a> {
    pub(crate) repo: &'a gix::Repository,
    pub(crate) loose: &'a Loose,
}

impl gix::objs::Find for WriteFresh<'_> {
    fn try_find<'a>(&self, id: &gix::hash::oid, buffer: &'a mut Vec<u8>) -> gix::Result<Option<gix::objs::Data<'a>>> {
        if let Some((kind, data)) = self.loose.kept(id) {
            *buffer = data;
            return Ok(Some(gix::objs::Data { kind, data: buffer, object_hash: self.repo.object_hash() }));
        }
        gix::objs::Find::try_find(self.repo, id, buffer)
    }
}

impl gix::objs::Write for WriteFresh<'_> {
    fn write(&self, object: &dyn gix::objs::WriteTo) -> gix::Result<ObjectId> {
        self.loose.write(object).map_err(gix::Error::from_error)
    }

    fn write_buf(&self, kind: gix::objs::Kind, from: &[u8]) -> gix::Result<ObjectId> {
        self.loose.write_buf(kind, from).map_err(gix::Error::from_error)
    }

    fn write_buf_with_known_id(&self, kind: gix::objs::Kind, from: &[u8], _id: ObjectId) -> gix::Result<ObjectId> {
        self.write_buf(kind, from)
    }

    fn write_stream(&self, kind: gix::objs::Kind, _size: u64, from: &mut dyn std::io::Read) -> gix::Result<ObjectId> {
        let mut data = Vec::new();
        from.read_to_end(&mut data).map_err(gix::Error::from_error)?;
        self.write_buf(kind, &data)
    }

    fn write_stream_with_known_id(
        &self,
        kind: gix::objs::Kind,
        size: u64,
        from: &mut dyn std::io::Read,
        _id: ObjectId,
    ) -> gix::Result<ObjectId> {
        self.write_stream(kind, size, from)
    }
}

/// The tree of regular files `(name, blob)`.
fn flat(files: &[(&str, ObjectId)]) -> gix::objs::Tree {
    gix::objs::Tree {
        entries: files
            .iter()
            .map(|(name, oid)| gix::objs::tree::Entry {
                mode: gix::objs::tree::EntryKind::Blob.into(),
                filename: (*name).into(),
                oid: *oid,
            })
            .collect(),
    }
}

fn commit_object(
    tree: ObjectId,
    parents: &[ObjectId],
    author: &Signature,
    committer: &Signature,
    message: &str,
) -> gix::objs::Commit {
    gix::objs::Commit {
        tree,
        parents: parents.iter().copied().collect(),
        author: author.0.clone(),
        committer: committer.0.clone(),
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_of_a_known_text() {
        use crate::git::packfile::adler32;
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
        // Long enough for the sums to be reduced along the way.
        let long = vec![0xffu8; 100_000];
        let (mut a, mut b) = (1u64, 0u64);
        for &x in &long {
            a = (a + u64::from(x)) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(adler32(&long), ((b << 16) | a) as u32);
    }

    #[test]
    fn loose_objects_read_back_as_gix_writes_them() {
        let dir = tempfile::tempdir().unwrap();
        crate::git::init(dir.path()).unwrap();
        let repo = Repo::open(dir.path()).unwrap();
        let loose = Loose::new(&repo.repo);
        // Small, empty, and over one stored block (64 KiB) of data.
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for data in [&b"{\"a\": 1}\n"[..], b"", &big] {
            let id = loose.write_buf(gix::objs::Kind::Blob, data).unwrap();
            let expected = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, data).unwrap();
            assert_eq!(id, expected);
            let reopened = Repo::open(dir.path()).unwrap();
            assert_eq!(reopened.objects().read(id).unwrap(), data, "{} bytes", data.len());
        }
        // Writing the same object again replaces it with the same bytes.
        let again = loose.write_buf(gix::objs::Kind::Blob, b"").unwrap();
        assert_eq!(Repo::open(dir.path()).unwrap().objects().read(again).unwrap(), b"");
        let leftovers: Vec<_> =
            std::fs::read_dir(dir.path().join(".git/objects").join(&again.to_hex().to_string()[..2]))
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("tmp_obj_"))
                .collect();
        assert!(leftovers.is_empty(), "no temporary files are left behind");
    }
}
