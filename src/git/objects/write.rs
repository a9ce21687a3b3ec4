//! Writing objects through [`Objects`]: one by one (asking the store first, or only computing
//! the id), objects new by construction ([`Fresh`]), a [`Batch`] of them kept for one pack, and
//! writing an in-memory layer to disk ([`Objects::persist`]).

use std::borrow::Cow;

use super::loose::Loose;
use super::{failure, Failure, Objects};
use crate::error::{Error, Result, ResultExt};
use crate::git::identity::Signature;
use crate::git::{ObjectId, Repo};

impl<'r> Objects<'r> {
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
/// folder allows (two files, however many objects; see [`crate::git::packfile`]), else loose. For
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
