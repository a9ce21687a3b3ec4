//! Reading the objects of a fetched op-log chain once each, for its validation
//! ([`crate::state::Store::validate_since`]): object headers (kind and size, before anything is
//! read whole), commits, flat trees and small blobs, each into a buffer that is reused. No object
//! cache (every object is read once, so caching would only cost a copy); the pack's delta-base
//! cache is kept (the `op.json` of neighbouring ops are deltas of each other). It can be sent to
//! another thread: validation reads the files of the ops on one thread while it replays them on
//! another.

use super::objects::{failure, find_as, tree_and_parents, EntryKind, Failure, Kind, TreeEntry};
use super::{ObjectId, Repo};

/// A reader of op-log commits, their trees and files (see the module docs).
pub struct ChainReader {
    odb: gix::OdbHandle,
    hash: gix::hash::Kind,
    buf: Vec<u8>,
}

impl Clone for ChainReader {
    fn clone(&self) -> Self {
        let mut odb = self.odb.clone();
        odb.unset_object_cache();
        ChainReader { odb, hash: self.hash, buf: Vec::new() }
    }
}

impl Repo {
    /// A reader for validating op-log chains (see [`ChainReader`]).
    pub fn chain_reader(&self) -> ChainReader {
        let mut odb = self.repo.objects.clone();
        odb.unset_object_cache();
        ChainReader { odb, hash: self.repo.object_hash(), buf: Vec::new() }
    }
}

impl ChainReader {
    /// The kind and size of object `id`, from its header (nothing else is read).
    pub fn header(&self, id: ObjectId) -> std::result::Result<(Kind, u64), Failure> {
        use gix::prelude::HeaderExt;
        let h = self.odb.header(id).map_err(failure)?;
        Ok((h.kind().into(), h.size()))
    }

    /// Whether object `id` is in the store.
    pub fn has(&self, id: ObjectId) -> bool {
        use gix::objs::Exists;
        self.odb.exists(&id)
    }

    fn find(&mut self, id: ObjectId, want: gix::objs::Kind) -> std::result::Result<&[u8], Failure> {
        find_as(&self.odb, id, &mut self.buf, want)
    }

    /// The tree and the parents of `commit`.
    pub fn commit(&mut self, commit: ObjectId) -> std::result::Result<(ObjectId, Vec<ObjectId>), Failure> {
        let hash = self.hash;
        tree_and_parents(self.find(commit, gix::objs::Kind::Commit)?, hash)
    }

    /// The entries of tree `tree`, in tree order.
    pub fn entries(&mut self, tree: ObjectId) -> std::result::Result<Vec<TreeEntry>, Failure> {
        use gix::bstr::ByteSlice;
        let hash = self.hash;
        let data = self.find(tree, gix::objs::Kind::Tree)?;
        let mut out = Vec::with_capacity(2);
        for e in gix::objs::TreeRefIter::from_bytes(data, hash) {
            let e = e.map_err(failure)?;
            out.push(TreeEntry {
                name: e.filename.to_str_lossy().into_owned(),
                id: e.oid.to_owned(),
                kind: EntryKind::from(e.mode.kind()),
            });
        }
        Ok(out)
    }

    /// The bytes of blob `id`.
    pub fn blob(&mut self, id: ObjectId) -> std::result::Result<&[u8], Failure> {
        self.find(id, gix::objs::Kind::Blob)
    }

    /// The id of a blob holding `bytes` (nothing is written).
    pub fn blob_id(&self, bytes: &[u8]) -> std::result::Result<ObjectId, Failure> {
        gix::objs::compute_hash(self.hash, gix::objs::Kind::Blob, bytes).map_err(failure)
    }
}
