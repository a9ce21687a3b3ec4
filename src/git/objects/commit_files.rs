//! Reading every object of a long walk once: [`CommitFiles`] and the plain readers it shares with
//! [`crate::git::chain::ChainReader`], which take an object's bytes without gix's object cache.

use super::{failure, Failure, Objects};
use crate::git::ObjectId;

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
/// [`crate::git::chain::ChainReader`]).
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
}
