//! Replaying a stream's commits onto the base tip with gix's tree merge, in memory: what
//! `git rebase` would do, without a worktree, an index or rebase state. Each commit `C` with parent
//! `P` becomes `merge_trees(P, current tip, C)` committed with `C`'s author and message; a commit
//! already sitting on the current tip is kept as it is, a commit whose changes are already there
//! is dropped. A merge commit keeps what it changed beyond its parents: the three-way merge of
//! its parents (what `git merge` would have made without help) is compared with the merge
//! commit's tree, and that difference is replayed as one commit (none when there is none: its
//! parents' changes are replayed as they come). A merge commit whose parents do not merge
//! cleanly (it resolved conflicts) or that has more than two parents is refused, named: a
//! replay cannot tell its resolution from its parents' changes. The PRD is merged story by
//! story (see [`super::prd`]). The first commit with a conflict stops the replay.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::error::{Error, Result, ResultExt};
pub use crate::git::merge::ConflictKind;
use crate::git::objects::Objects;
use crate::git::{identity::Signature, ObjectId};

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
    /// A merge commit: `new` holds what it changed beyond its parents, `None` when that is
    /// nothing.
    pub merge: bool,
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

/// Each commit a replay rewrote, with the commit that replaced it (kept and dropped ones left
/// out): whose notes the new ones carry.
pub fn rewritten(steps: &[Step]) -> Vec<(ObjectId, ObjectId)> {
    steps.iter().filter_map(|s| s.new.filter(|n| *n != s.original).map(|n| (s.original, n))).collect()
}

/// The stream's commits the base lacks, parents before children (ties in walk order).
pub fn commits_to_replay(repo: &Objects, base: ObjectId, tip: ObjectId) -> Result<Vec<ObjectId>> {
    let walk = repo.walk([tip], [base]).internal("cannot walk the stream's history")?;
    let mut order = Vec::new();
    let mut parents: HashMap<ObjectId, Vec<ObjectId>> = HashMap::new();
    for info in walk {
        let info = info.internal("cannot walk the stream's history")?;
        parents.insert(info.id, info.parents);
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

/// The replay stopped at commit `id` (`subject`) on the conflicts `found`, with `steps` made and
/// `tip` the last commit replayed.
fn stopped(
    steps: Vec<Step>,
    tip: ObjectId,
    found: Vec<(String, ConflictKind)>,
    id: ObjectId,
    subject: &str,
) -> Replayed {
    let conflicts = found
        .into_iter()
        .map(|(path, kind)| Conflict { path, kind, commit: id.to_string(), subject: subject.to_string() })
        .collect();
    crate::progress::done();
    Replayed { steps, tip, conflicts }
}

/// The merge of three trees, with the PRD at `prd` (if given) merged story by story. Returns the
/// merged tree, or the unresolved conflicts.
pub fn merge_trees(
    repo: &Objects,
    ancestor: ObjectId,
    ours: ObjectId,
    theirs: ObjectId,
    prd: Option<&str>,
) -> Result<std::result::Result<ObjectId, Vec<(String, ConflictKind)>>> {
    let (mut ours_t, mut theirs_t) = (ours, theirs);
    let mut prd_texts = None;
    if let Some(path) = prd {
        let (a, o, t) = (repo.blob_at(ancestor, path)?, repo.blob_at(ours, path)?, repo.blob_at(theirs, path)?);
        if let (Some((a_id, a)), Some((o_id, o)), Some((t_id, t))) = (a, o, t) {
            if a_id != o_id && a_id != t_id && o_id != t_id {
                if let (Ok(a), Ok(o), Ok(t)) = (String::from_utf8(a), String::from_utf8(o), String::from_utf8(t)) {
                    let name = path.rsplit('/').next().unwrap_or(path);
                    if let (Some(on), Some(tn)) =
                        (super::prd::normalize(name, &a, &o), super::prd::normalize(name, &a, &t))
                    {
                        ours_t = repo.with_blob(ours, path, &on)?;
                        theirs_t = repo.with_blob(theirs, path, &tn)?;
                        prd_texts = Some((name.to_string(), a, o, t));
                    }
                }
            }
        }
    }
    let mut tree = match repo.merge_trees(ancestor, ours_t, theirs_t)? {
        Err(unresolved) => return Ok(Err(unresolved)),
        Ok(tree) => tree,
    };
    if let (Some(path), Some((name, a, o, t))) = (prd, prd_texts) {
        if let Some((_, merged)) = repo.blob_at(tree, path)? {
            if let Ok(merged) = String::from_utf8(merged) {
                let resolved = super::prd::resolve(&name, &merged, &a, &o, &t);
                if resolved != merged {
                    tree = repo.with_blob(tree, path, &resolved)?;
                }
            }
        }
    }
    Ok(Ok(tree))
}

/// The tree `git merge` would make of the two commits `parents` without help (their merge base
/// as the ancestor, the PRD merged story by story); `None` when they conflict, or are not two.
fn parents_merged(repo: &Objects, parents: &[ObjectId], prd: Option<&str>) -> Result<Option<ObjectId>> {
    let [a, b] = parents else { return Ok(None) };
    let ancestor = match repo.merge_base(*a, *b) {
        Some(m) => repo.tree_of(m)?,
        None => repo.empty_tree(),
    };
    Ok(merge_trees(repo, ancestor, repo.tree_of(*a)?, repo.tree_of(*b)?, prd)?.ok())
}

/// Replay the commits of `tip` that `base` lacks onto `base`.
pub fn replay(
    repo: &Objects,
    base: ObjectId,
    tip: ObjectId,
    prd: Option<&str>,
    committer: &Signature,
) -> Result<Replayed> {
    let commits = commits_to_replay(repo, base, tip)?;
    replay_commits(repo, base, commits, prd, committer)
}

/// Replay `commits` (parents before children) onto `base`, each as the change it makes to its
/// first parent.
pub fn replay_commits(
    repo: &Objects,
    base: ObjectId,
    commits: Vec<ObjectId>,
    prd: Option<&str>,
    committer: &Signature,
) -> Result<Replayed> {
    let total = commits.len();
    let mut cur = base;
    let mut cur_tree = repo.tree_of(base)?;
    let mut steps = Vec::new();
    for (n, id) in commits.into_iter().enumerate() {
        crate::progress::show(&format!("checking commit {}/{total} {}", n + 1, id.to_hex_with_len(8)));
        let c = repo.commit_info(id)?;
        let (parent_ids, subject, tree) = (c.parents, c.subject, c.tree);
        if parent_ids.len() > 1 {
            // What the merge commit changed beyond its parents, on top of the parents' merge.
            let Some(auto) = parents_merged(repo, &parent_ids, prd)? else {
                crate::progress::done();
                return Err(Error::refused(format!(
                    "merge commit {} ({}) on the stream's branch {}; a replay cannot tell its own changes from its parents', so nothing was changed",
                    id.to_hex_with_len(8),
                    crate::text::inert(&subject),
                    if parent_ids.len() > 2 { "has more than two parents" } else { "resolved conflicts between its parents" },
                ))
                .hint(format!(
                    "flatten the branch: in the stream's worktree, `git rebase {}` replays its commits without the merge (resolve the conflicts again, and redo what the merge commit changed), then merge again",
                    base.to_hex_with_len(8)
                )));
            };
            if auto == tree {
                steps.push(Step { original: id, new: None, subject, merge: true });
                continue;
            }
            match merge_trees(repo, auto, cur_tree, tree, prd)? {
                Err(found) => return Ok(stopped(steps, cur, found, id, &subject)),
                Ok(merged) if merged == cur_tree => steps.push(Step { original: id, new: None, subject, merge: true }),
                Ok(merged) => {
                    let new = repo.rewrite(id, merged, vec![cur], committer)?;
                    cur = new;
                    cur_tree = merged;
                    steps.push(Step { original: id, new: Some(new), subject, merge: true });
                }
            }
            continue;
        }
        if parent_ids.first() == Some(&cur) {
            cur = id;
            cur_tree = tree;
            steps.push(Step { original: id, new: Some(id), subject, merge: false });
            continue;
        }
        let ancestor = match parent_ids.first() {
            Some(p) => repo.tree_of(*p)?,
            None => repo.empty_tree(),
        };
        match merge_trees(repo, ancestor, cur_tree, tree, prd)? {
            Err(found) => return Ok(stopped(steps, cur, found, id, &subject)),
            Ok(merged) => {
                if merged == cur_tree && tree != ancestor {
                    steps.push(Step { original: id, new: None, subject, merge: false });
                    continue;
                }
                let new = repo.rewrite(id, merged, vec![cur], committer)?;
                cur = new;
                cur_tree = merged;
                steps.push(Step { original: id, new: Some(new), subject, merge: false });
            }
        }
    }
    crate::progress::done();
    Ok(Replayed { steps, tip: cur, conflicts: Vec::new() })
}
