//! Replaying a stream's commits onto the base tip with gix's tree merge, in memory: what
//! `git rebase` would do, without a worktree, an index or rebase state. Each commit `C` with parent
//! `P` becomes `merge_trees(P, current tip, C)` committed with `C`'s author and message; a commit
//! already sitting on the current tip is kept as it is, a commit whose changes are already there
//! is dropped, merge commits are dropped (their parents' changes are replayed). The PRD is merged
//! story by story (see [`super::prd`]). The first commit with a conflict stops the replay.

use std::collections::{HashMap, HashSet};

use gix::bstr::{BString, ByteSlice};
use gix::merge::tree::{Resolution, ResolutionFailure, TreatAsUnresolved};
use gix::ObjectId;
use serde::Serialize;

use crate::error::{Error, Result, ResultExt};

/// The kinds of conflict the check reports. Sides are named as in a rebase: the base branch's
/// version first, the stream commit's second (`DELETED_MODIFIED`: the base deleted the file, the
/// stream modified it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConflictKind {
    BothModified,
    DeletedModified,
    ModifiedDeleted,
    AddedBoth,
    Rename,
    TypeChange,
}

impl ConflictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictKind::BothModified => "BOTH_MODIFIED",
            ConflictKind::DeletedModified => "DELETED_MODIFIED",
            ConflictKind::ModifiedDeleted => "MODIFIED_DELETED",
            ConflictKind::AddedBoth => "ADDED_BOTH",
            ConflictKind::Rename => "RENAME",
            ConflictKind::TypeChange => "TYPE_CHANGE",
        }
    }
}

/// One conflicting path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    pub path: String,
    pub kind: ConflictKind,
    /// The stream commit whose replay conflicts.
    pub commit: String,
    /// Its subject line.
    pub subject: String,
}

/// One stream commit and what became of it.
#[derive(Debug, Clone)]
pub struct Step {
    pub original: ObjectId,
    /// The replayed commit; the same id when it was kept; `None` when dropped (its changes are
    /// already on the base).
    pub new: Option<ObjectId>,
    pub subject: String,
}

/// The outcome of a replay.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub steps: Vec<Step>,
    /// The new tip (the base tip when nothing was replayed).
    pub tip: ObjectId,
    /// Conflicts of the first conflicting commit; empty when the replay is clean.
    pub conflicts: Vec<Conflict>,
}

/// The committer of rewritten commits: the user's git identity (falling back to `$USER` at this
/// host, as git would guess), at the time the repository was opened.
pub fn committer(repo: &gix::Repository) -> gix::actor::Signature {
    let now = gix::date::Time::now_local_or_utc();
    if let Some(Ok(sig)) = repo.committer() {
        if let Ok(sig) = sig.to_owned() {
            return sig;
        }
    }
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "git-boulder".into());
    gix::actor::Signature {
        name: user.clone().into(),
        email: format!("{user}@{}", crate::lock::hostname()).into(),
        time: now,
    }
}

fn subject_of(message: &[u8]) -> String {
    message.lines().next().unwrap_or_default().to_str_lossy().trim().to_string()
}

/// The stream's commits the base lacks, parents before children (ties in walk order).
pub fn commits_to_replay(repo: &gix::Repository, base: ObjectId, tip: ObjectId) -> Result<Vec<ObjectId>> {
    let walk = repo.rev_walk([tip]).with_hidden([base]).all().internal("cannot walk the stream's history")?;
    let mut order = Vec::new();
    let mut parents: HashMap<ObjectId, Vec<ObjectId>> = HashMap::new();
    for info in walk {
        let info = info.internal("cannot walk the stream's history")?;
        parents.insert(info.id, info.parent_ids.iter().copied().collect());
        order.push(info.id);
    }
    // Kahn's algorithm over the walked set, emitting parents first; ties by reverse walk order.
    let set: HashSet<ObjectId> = order.iter().copied().collect();
    let mut children: HashMap<ObjectId, Vec<ObjectId>> = HashMap::new();
    let mut pending: HashMap<ObjectId, usize> = HashMap::new();
    for id in &order {
        let ps: Vec<ObjectId> = parents[id].iter().copied().filter(|p| set.contains(p)).collect();
        pending.insert(*id, ps.len());
        for p in ps {
            children.entry(p).or_default().push(*id);
        }
    }
    let rank: HashMap<ObjectId, usize> = order.iter().rev().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut ready: std::collections::BTreeSet<(usize, ObjectId)> =
        order.iter().filter(|id| pending[*id] == 0).map(|id| (rank[id], *id)).collect();
    let mut out = Vec::with_capacity(order.len());
    while let Some(first) = ready.iter().next().copied() {
        ready.remove(&first);
        out.push(first.1);
        for c in children.get(&first.1).cloned().unwrap_or_default() {
            let n = pending.get_mut(&c).expect("child in set");
            *n -= 1;
            if *n == 0 {
                ready.insert((rank[&c], c));
            }
        }
    }
    Ok(out)
}

/// The tree of `commit`.
pub use crate::git::tree_of;

/// The blob at `path` in `tree` (id and bytes), if there is one.
pub fn blob_at(repo: &gix::Repository, tree: ObjectId, path: &str) -> Result<Option<(ObjectId, Vec<u8>)>> {
    let tree = repo.find_tree(tree).internal(format_args!("cannot read tree {tree}"))?;
    match tree.lookup_entry_by_path(path).internal(format_args!("cannot look up {path}"))? {
        Some(e) if e.mode().is_blob() => {
            let id = e.object_id();
            let data = e.object().internal(format_args!("cannot read {path}"))?.detach().data;
            Ok(Some((id, data)))
        }
        _ => Ok(None),
    }
}

fn with_blob(repo: &gix::Repository, tree: ObjectId, path: &str, text: &str) -> Result<ObjectId> {
    let blob = repo.write_blob(text.as_bytes()).internal("cannot write a blob")?.detach();
    let mut editor = repo.edit_tree(tree).internal("cannot edit a tree")?;
    editor.upsert(path, gix::objs::tree::EntryKind::Blob, blob).internal("cannot edit a tree")?;
    Ok(editor.write().internal("cannot write a tree")?.detach())
}

/// What a gix conflict is in the terms of the report, from the base's (ours) and the stream's
/// (theirs) point of view.
fn kind_of(c: &gix::merge::tree::Conflict) -> ConflictKind {
    // `changes_in_resolution` may swap the sides to match the description; find out whether it did.
    let swapped = !std::ptr::eq(c.changes_in_resolution().0, &c.ours);
    match &c.resolution {
        Ok(Resolution::OursModifiedTheirsModifiedThenBlobContentMerge { .. }) => {
            if c.entries()[0].is_none() {
                ConflictKind::AddedBoth
            } else {
                ConflictKind::BothModified
            }
        }
        Ok(Resolution::SourceLocationAffectedByRename { .. })
        | Ok(Resolution::OursModifiedTheirsRenamedAndChangedThenRename { .. }) => ConflictKind::Rename,
        Ok(Resolution::Forced(f)) | Err(f) => match f {
            ResolutionFailure::OursModifiedTheirsDeleted => {
                if swapped {
                    ConflictKind::DeletedModified
                } else {
                    ConflictKind::ModifiedDeleted
                }
            }
            ResolutionFailure::OursRenamedTheirsRenamedDifferently { .. }
            | ResolutionFailure::OursRenamedTheirsRenamedToSameLocation
            | ResolutionFailure::OursDeletedTheirsRenamed => ConflictKind::Rename,
            ResolutionFailure::OursModifiedTheirsDirectoryThenOursRenamed { .. }
            | ResolutionFailure::OursDirectoryTheirsNonDirectoryTheirsRenamed { .. }
            | ResolutionFailure::OursAddedTheirsAddedTypeMismatch { .. }
            | ResolutionFailure::OursModifiedTheirsRenamedTypeMismatch => ConflictKind::TypeChange,
            ResolutionFailure::SubmoduleAddAdd => ConflictKind::AddedBoth,
            ResolutionFailure::SubmoduleMerge | ResolutionFailure::Unknown => ConflictKind::BothModified,
        },
    }
}

/// The merge of three trees, with the PRD at `prd` (if given) merged story by story. Returns the
/// merged tree, or the unresolved conflicts.
pub fn merge_trees(
    repo: &gix::Repository,
    ancestor: ObjectId,
    ours: ObjectId,
    theirs: ObjectId,
    prd: Option<&str>,
) -> Result<std::result::Result<ObjectId, Vec<(BString, ConflictKind)>>> {
    let (mut ours_t, mut theirs_t) = (ours, theirs);
    let mut prd_texts = None;
    if let Some(path) = prd {
        let (a, o, t) = (blob_at(repo, ancestor, path)?, blob_at(repo, ours, path)?, blob_at(repo, theirs, path)?);
        if let (Some((a_id, a)), Some((o_id, o)), Some((t_id, t))) = (a, o, t) {
            if a_id != o_id && a_id != t_id && o_id != t_id {
                if let (Ok(a), Ok(o), Ok(t)) = (String::from_utf8(a), String::from_utf8(o), String::from_utf8(t)) {
                    let name = path.rsplit('/').next().unwrap_or(path);
                    if let (Some(on), Some(tn)) =
                        (super::prd::normalize(name, &a, &o), super::prd::normalize(name, &a, &t))
                    {
                        ours_t = with_blob(repo, ours, path, &on)?;
                        theirs_t = with_blob(repo, theirs, path, &tn)?;
                        prd_texts = Some((name.to_string(), a, o, t));
                    }
                }
            }
        }
    }
    let options = repo.tree_merge_options().internal("cannot read merge options")?;
    let labels = gix::merge::blob::builtin_driver::text::Labels {
        ancestor: Some("ancestor".into()),
        current: Some("base".into()),
        other: Some("stream".into()),
    };
    let mut outcome = repo.merge_trees(ancestor, ours_t, theirs_t, labels, options).internal("cannot merge trees")?;
    let unresolved: Vec<(BString, ConflictKind)> = outcome
        .conflicts
        .iter()
        .filter(|c| c.is_unresolved(TreatAsUnresolved::git()))
        .map(|c| (c.theirs.location().to_owned(), kind_of(c)))
        .collect();
    if !unresolved.is_empty() {
        return Ok(Err(unresolved));
    }
    let mut tree = outcome.tree.write().internal("cannot write the merged tree")?.detach();
    if let (Some(path), Some((name, a, o, t))) = (prd, prd_texts) {
        if let Some((_, merged)) = blob_at(repo, tree, path)? {
            if let Ok(merged) = String::from_utf8(merged) {
                let resolved = super::prd::resolve(&name, &merged, &a, &o, &t);
                if resolved != merged {
                    tree = with_blob(repo, tree, path, &resolved)?;
                }
            }
        }
    }
    Ok(Ok(tree))
}

/// Write a commit like `original` (author, message, encoding) with a new tree, parents and committer.
/// Signatures (`gpgsig`) are dropped: they no longer match.
pub fn rewrite(
    repo: &gix::Repository,
    original: ObjectId,
    tree: ObjectId,
    parents: Vec<ObjectId>,
    committer: &gix::actor::Signature,
) -> Result<ObjectId> {
    let c = repo.find_commit(original).internal(format_args!("cannot read commit {original}"))?;
    let mut commit: gix::objs::Commit = c
        .decode()
        .internal(format_args!("cannot decode commit {original}"))?
        .try_into()
        .map_err(|e| Error::internal(format!("cannot decode commit {original}: {e:?}")))?;
    commit.tree = tree;
    commit.parents = parents.into();
    commit.committer = committer.clone();
    commit.extra_headers.retain(|(k, _)| k != "gpgsig" && k != "gpgsig-sha256" && k != "mergetag");
    Ok(repo.write_object(&commit).internal("cannot write a commit")?.detach())
}

/// A new commit by `who` (author and committer).
pub fn new_commit(
    repo: &gix::Repository,
    tree: ObjectId,
    parents: Vec<ObjectId>,
    who: &gix::actor::Signature,
    message: &str,
) -> Result<ObjectId> {
    let commit = gix::objs::Commit {
        tree,
        parents: parents.into(),
        author: who.clone(),
        committer: who.clone(),
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    Ok(repo.write_object(&commit).internal("cannot write a commit")?.detach())
}

/// Replay the commits of `tip` that `base` lacks onto `base`.
pub fn replay(
    repo: &gix::Repository,
    base: ObjectId,
    tip: ObjectId,
    prd: Option<&str>,
    committer: &gix::actor::Signature,
) -> Result<Replayed> {
    let commits = commits_to_replay(repo, base, tip)?;
    let total = commits.len();
    let mut cur = base;
    let mut cur_tree = tree_of(repo, base)?;
    let mut steps = Vec::new();
    for (n, id) in commits.into_iter().enumerate() {
        crate::progress::show(&format!("checking commit {}/{total} {}", n + 1, id.to_hex_with_len(8)));
        let c = repo.find_commit(id).internal(format_args!("cannot read commit {id}"))?;
        let parent_ids: Vec<ObjectId> = c.parent_ids().map(|p| p.detach()).collect();
        let subject = subject_of(c.message_raw_sloppy());
        if parent_ids.len() > 1 {
            steps.push(Step { original: id, new: None, subject });
            continue;
        }
        let tree = c.tree_id().internal(format_args!("cannot read the tree of {id}"))?.detach();
        if parent_ids.first() == Some(&cur) {
            cur = id;
            cur_tree = tree;
            steps.push(Step { original: id, new: Some(id), subject });
            continue;
        }
        let ancestor = match parent_ids.first() {
            Some(p) => tree_of(repo, *p)?,
            None => ObjectId::empty_tree(repo.object_hash()),
        };
        match merge_trees(repo, ancestor, cur_tree, tree, prd)? {
            Err(found) => {
                let conflicts = found
                    .into_iter()
                    .map(|(path, kind)| Conflict {
                        path: path.to_str_lossy().into_owned(),
                        kind,
                        commit: id.to_string(),
                        subject: subject.clone(),
                    })
                    .collect();
                crate::progress::done();
                return Ok(Replayed { steps, tip: cur, conflicts });
            }
            Ok(merged) => {
                if merged == cur_tree && tree != ancestor {
                    steps.push(Step { original: id, new: None, subject });
                    continue;
                }
                let new = rewrite(repo, id, merged, vec![cur], committer)?;
                cur = new;
                cur_tree = merged;
                steps.push(Step { original: id, new: Some(new), subject });
            }
        }
    }
    crate::progress::done();
    Ok(Replayed { steps, tip: cur, conflicts: Vec::new() })
}
