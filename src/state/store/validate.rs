//! Validating op-log chains from anywhere (a remote included): every new commit's objects
//! bounded and read strictly, and its state replayed from its parent's and compared.

use std::collections::{HashMap, HashSet};

use crate::git::chain::ChainReader;
use crate::git::objects::{Failure, Kind};
use crate::git::ObjectId;
use crate::state::op::{Op, State, MERGE_ACTOR};

use super::merge::{Dag, Plan};
use super::{ChainError, Store, MAX_COMMIT_BYTES, MAX_NEW_COMMITS, MAX_OP_BYTES, MAX_STATE_BYTES, MAX_TREE_BYTES};

/// New commits a validation checks before it reads their files on a second thread.
const CHECK_AHEAD_AFTER: usize = 512;
/// How many commits' files that thread reads ahead of the replay, at most.
const CHECK_AHEAD: usize = 1024;
/// Commits whose files that thread hands on at a time.
const CHECK_BATCH: usize = 64;

/// How many bytes of replayed states validation keeps in memory for commits whose children are
/// still to be checked (a chain that forks often keeps one per open fork); past it, a child
/// reads its parent's state back.
const KEPT_STATE_BYTES: usize = 64 * 1024 * 1024;

/// What a validation learned on the way ([`Store::validate_tip`]).
pub(super) struct Checked<S> {
    /// The state after the tip, when the tip was one of the commits checked: what its
    /// `state.json` holds (a strict read of it gives the same value).
    pub(super) state: Option<S>,
    /// The tip adds commits over the trusted tips and descends from one of them.
    pub(super) extends: bool,
}

/// A commit a validation checks: its id and parents.
struct NewCommit {
    id: ObjectId,
    parents: Vec<ObjectId>,
    /// Its place in the order the walk met the commits.
    seq: usize,
}

/// The ids of `op.json` and `state.json` in a commit's tree, checked ([`Store::tree_files`]).
type TreeFiles = std::result::Result<(ObjectId, ObjectId), Box<ChainError>>;

/// The op of a commit being validated and the id of its `state.json`.
type OpFiles = std::result::Result<(Op, ObjectId), ChainError>;

/// A [`Failure`] of a validation itself (not of the object store).
fn failure_of(what: impl std::fmt::Display) -> Failure {
    crate::git::objects::failure(what.to_string())
}

impl<'r> Store<'r> {
    /// Check every commit reachable from `tip`: its tree holds exactly
    /// `op.json` and `state.json`, both parse strictly, its op is valid, and its state is what
    /// its op makes of its parent's state (a merge commit: exactly the deterministic merge of its
    /// parents). The error names the commit and the problem.
    pub fn validate_chain<S: State>(&self, tip: ObjectId) -> std::result::Result<(), ChainError> {
        self.validate_since::<S>(tip, &[])
    }

    /// Like [`Store::validate_chain`], but trusting (not checking) what is reachable from
    /// `trusted`, e.g. the local tip before a pull.
    ///
    /// How: first the commits `tip` adds over `trusted` are listed from their headers and parent
    /// links ([`Store::new_commits`], every one a commit of bounded size), parents before
    /// children. Then they are replayed in that order from the state of where they start (a
    /// trusted commit's `state.json`, read strictly, or the empty state), keeping each state in
    /// memory until its last child is checked: each commit's op is applied to its parent's state
    /// and the result, serialized exactly as an append writes it, is hashed as a blob and compared
    /// with the id of the commit's `state.json` — equal ids are equal bytes, so the stored state
    /// is read only when the ids differ (then it is parsed strictly and compared as a value, and a
    /// state of other bytes but the same value is accepted as before). The trees and `op.json` of
    /// a long chain are read and parsed on a second thread, ahead of the replay.
    pub fn validate_since<S: State>(&self, tip: ObjectId, trusted: &[ObjectId]) -> std::result::Result<(), ChainError> {
        self.validate_tip::<S>(tip, trusted).map(|_| ())
    }

    /// [`Store::validate_since`], telling what the check learned on the way (see [`Checked`]).
    pub(super) fn validate_tip<S: State>(
        &self,
        tip: ObjectId,
        trusted: &[ObjectId],
    ) -> std::result::Result<Checked<S>, ChainError> {
        let mut reader = self.repo.chain_reader();
        // While the commits are listed, their trees are read: here for a short chain, on a
        // second thread once it proves long.
        let (listed, mut trees) = std::thread::scope(|scope| {
            let mut trees: Vec<Option<TreeFiles>> = Vec::new();
            let mut here = reader.clone();
            // Not tried yet; tried (`None`: no thread could be started, so read here).
            type ToRead = std::sync::mpsc::SyncSender<(ObjectId, ObjectId)>;
            let mut ahead: Option<Option<(ToRead, _)>> = None;
            let listed = Self::new_commits(&mut reader, tip, trusted, &mut |seq, id, tree| {
                let started = if seq < CHECK_AHEAD_AFTER {
                    None
                } else {
                    ahead
                        .get_or_insert_with(|| {
                            let (tx, rx) = std::sync::mpsc::sync_channel::<(ObjectId, ObjectId)>(CHECK_AHEAD);
                            let mut reader = here.clone();
                            let thread = std::thread::Builder::new().spawn_scoped(scope, move || {
                                rx.into_iter()
                                    .map(|(id, tree)| Some(Self::tree_files(&mut reader, id, tree)))
                                    .collect::<Vec<_>>()
                            });
                            thread.ok().map(|thread| (tx, thread))
                        })
                        .as_ref()
                };
                match started {
                    // The thread ends only when the sender is dropped.
                    Some((tx, _)) => drop(tx.send((id, tree))),
                    None => trees.push(Some(Self::tree_files(&mut here, id, tree))),
                }
            });
            if let Some(Some((tx, thread))) = ahead {
                drop(tx);
                trees.extend(thread.join().unwrap_or_default());
            }
            (listed, trees)
        });
        let commits = listed?;
        // Every commit listed stands on a trusted one (the listing reached no root), so the tip
        // descends from a trusted tip.
        let extends = !trusted.is_empty() && !commits.is_empty() && !commits.iter().any(|c| c.parents.is_empty());
        let commits = Self::not_held(&mut reader, commits, trusted)?;
        let state = std::thread::scope(|scope| {
            if commits.len() < CHECK_AHEAD_AFTER {
                let mut files = reader.clone();
                let files = commits
                    .iter()
                    .map(|c| Self::op_files(&mut files, c.id, trees.get_mut(c.seq).and_then(Option::take)));
                return self.replay_chain::<S>(&reader, &commits, files, tip);
            }
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<OpFiles>>(CHECK_AHEAD / CHECK_BATCH);
            let mut ahead = reader.clone();
            let list = &commits;
            let read_ahead = move || {
                for batch in list.chunks(CHECK_BATCH) {
                    let read = batch
                        .iter()
                        .map(|c| Self::op_files(&mut ahead, c.id, trees.get_mut(c.seq).and_then(Option::take)))
                        .collect();
                    // A send fails when the replay stopped (at an invalid commit).
                    if tx.send(read).is_err() {
                        break;
                    }
                }
            };
            // No thread to be had (the system is out of them): the replay finds no files read
            // and refuses the chain as unreadable, rather than the command panicking.
            let _ = std::thread::Builder::new().spawn_scoped(scope, read_ahead);
            let files = rx.into_iter().flatten();
            self.replay_chain::<S>(&reader, &commits, files, tip)
        })?;
        Ok(Checked { state, extends })
    }

    /// Replay `commits` (parents first, see [`Store::validate_since`]), whose op files `files`
    /// gives in the same order. Returns the state after `tip` when it is one of them.
    fn replay_chain<S: State>(
        &self,
        reader: &ChainReader,
        commits: &[NewCommit],
        files: impl Iterator<Item = OpFiles>,
        tip: ObjectId,
    ) -> std::result::Result<Option<S>, ChainError> {
        // How many children among the new commits each new commit has: its state is kept in
        // memory until the last of them is checked.
        let mut children: HashMap<ObjectId, usize> = HashMap::new();
        for c in commits {
            for p in &c.parents {
                *children.entry(*p).or_default() += 1;
            }
        }
        // The state after each new commit still needed, with its clock and size; at most
        // KEPT_STATE_BYTES of them (a state not kept is read back by the child that needs it).
        let mut states: HashMap<ObjectId, (u64, S, usize)> = HashMap::new();
        let mut kept = 0usize;
        let mut dag = Dag::new(self);
        let mut files = files;
        // States whose bytes were not the ones an append writes, read back and compared.
        let mut read_back = 0usize;
        let mut at_tip = None;
        for c in commits {
            let id = c.id;
            let Some(read) = files.next() else {
                return Err(ChainError::Unreadable { commit: id, what: "op.json", source: failure_of("not read") });
            };
            let (op, state_id) = read?;
            match c.parents.len() {
                0 | 1 => {
                    if op.is_merge() {
                        return Err(ChainError::MergeOpInLine { commit: id, parents: c.parents.len() });
                    }
                    let (mut expect, clock) = match c.parents.first() {
                        Some(p) => self.parent_state::<S>(*p, &mut states, &mut children, &mut kept)?,
                        None => (S::default(), 0),
                    };
                    if op.lamport != clock + 1 {
                        return Err(ChainError::Clock { commit: id, clock: op.lamport, parent: clock });
                    }
                    expect.apply(&op).map_err(|source| ChainError::Refused { commit: id, source })?;
                    expect.set_lamport(op.lamport);
                    let (was_read, size) = self.check_state(reader, id, state_id, &expect)?;
                    read_back += usize::from(was_read);
                    if id == tip {
                        at_tip = Some(expect);
                    } else if children.get(&id).is_some_and(|n| *n > 0) && kept + size <= KEPT_STATE_BYTES {
                        let clock = op.lamport.max(expect.lamport());
                        kept += size;
                        states.insert(id, (clock, expect, size));
                    }
                }
                2 => {
                    if !op.is_merge() || op.actor != MERGE_ACTOR {
                        return Err(ChainError::NotAMergeOp { commit: id });
                    }
                    match self.plan_in::<S>(&mut dag, c.parents[0], c.parents[1])? {
                        Plan::Merge { op, state, parents: ps } => {
                            let again = self
                                .write_op_commit(&op, &state, &ps, false)
                                .map_err(|source| ChainError::Recompute { commit: id, source })?;
                            if again != id {
                                return Err(ChainError::NotTheMerge { commit: id });
                            }
                            if id == tip {
                                at_tip = Some(state);
                            }
                        }
                        Plan::Contained(_) => {
                            return Err(ChainError::RedundantMerge { commit: id });
                        }
                    }
                    // Its children read its state back (a merge's state is checked through its id).
                    for p in &c.parents {
                        Self::release(*p, &mut states, &mut children, &mut kept);
                    }
                }
                n => return Err(ChainError::TooManyParents { commit: id, parents: n }),
            }
        }
        if crate::trace::enabled() && !commits.is_empty() {
            crate::trace::line(&format!("validate: {} new commits, {read_back} state.json read back", commits.len()));
        }
        Ok(at_tip)
    }

    /// One fewer child of `parent` left to check: its state is dropped after the last.
    fn release<S>(
        parent: ObjectId,
        states: &mut HashMap<ObjectId, (u64, S, usize)>,
        children: &mut HashMap<ObjectId, usize>,
        kept: &mut usize,
    ) {
        if let Some(n) = children.get_mut(&parent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                if let Some((_, _, size)) = states.remove(&parent) {
                    *kept -= size;
                }
            }
        }
    }

    /// The state after `parent` and its clock, for a child being checked: kept in memory when
    /// `parent` was replayed here (taken, not copied, by its last child), else read strictly
    /// from its `state.json` (a trusted commit, or a merge).
    fn parent_state<S: State>(
        &self,
        parent: ObjectId,
        states: &mut HashMap<ObjectId, (u64, S, usize)>,
        children: &mut HashMap<ObjectId, usize>,
        kept: &mut usize,
    ) -> std::result::Result<(S, u64), ChainError> {
        let last = children.get_mut(&parent).map(|n| {
            *n = n.saturating_sub(1);
            *n == 0
        });
        let held = if last == Some(true) {
            states.remove(&parent).inspect(|(_, _, size)| *kept -= size)
        } else {
            states.get(&parent).cloned()
        };
        if let Some((clock, state, _)) = held {
            return Ok((state, clock));
        }
        let e = self.entry::<S>(parent)?;
        let clock = e.op.lamport.max(e.state.lamport());
        Ok((e.state, clock))
    }

    /// Check that the `state.json` of `commit`, blob `stored`, is `expect`: its bytes as an
    /// append writes them hash to `stored`, or else the blob, read strictly, holds that value
    /// (`true`: it was read); and the size of those bytes.
    fn check_state<S: State>(
        &self,
        reader: &ChainReader,
        commit: ObjectId,
        stored: ObjectId,
        expect: &S,
    ) -> std::result::Result<(bool, usize), ChainError> {
        let bytes = Self::json(expect, "state.json").map_err(|source| ChainError::Recompute { commit, source })?;
        let same = reader.blob_id(&bytes).map_err(|source| ChainError::Broken { commit, source })? == stored;
        if same {
            let size = bytes.len() as u64;
            if size > MAX_STATE_BYTES {
                return Err(ChainError::TooLarge { commit, what: "state.json", size, limit: MAX_STATE_BYTES });
            }
            if !reader.has(stored) {
                return Err(ChainError::Unreadable {
                    commit,
                    what: "state.json",
                    source: failure_of(format!("{stored} is missing")),
                });
            }
            expect.validate().map_err(|source| ChainError::InvalidState { commit, source })?;
            return Ok((false, bytes.len()));
        }
        let mut reader = reader.clone();
        let (_, size) =
            reader.header(stored).map_err(|source| ChainError::Unreadable { commit, what: "state.json", source })?;
        if size > MAX_STATE_BYTES {
            return Err(ChainError::TooLarge { commit, what: "state.json", size, limit: MAX_STATE_BYTES });
        }
        let data =
            reader.blob(stored).map_err(|source| ChainError::Unreadable { commit, what: "state.json", source })?;
        let state = Self::parse_state::<S>(commit, data)?;
        if &state != expect {
            return Err(ChainError::NotItsOpsState { commit });
        }
        Ok((true, bytes.len()))
    }

    /// The ids of `op.json` and `state.json` in the tree `tree` of `commit`: the tree holds
    /// exactly those two files, as regular files, and is no larger than its limit (checked from
    /// its header before it is read).
    fn tree_files(reader: &mut ChainReader, commit: ObjectId, tree: ObjectId) -> TreeFiles {
        let (_, size) =
            reader.header(tree).map_err(|source| ChainError::Unreadable { commit, what: "its tree", source })?;
        if size > MAX_TREE_BYTES {
            return Err(Box::new(ChainError::TooLarge { commit, what: "its tree", size, limit: MAX_TREE_BYTES }));
        }
        let entries = reader.entries(tree).map_err(|source| ChainError::Broken { commit, source })?;
        Ok(Self::op_and_state(commit, &entries)?)
    }

    /// The op of `commit`, read strictly from the `op.json` its tree names (`files`, from
    /// [`Store::tree_files`]; no larger than its limit, checked from its header before it is
    /// read), and the id of its `state.json`.
    fn op_files(reader: &mut ChainReader, commit: ObjectId, files: Option<TreeFiles>) -> OpFiles {
        let (op_id, state_id) = match files {
            Some(Ok(ids)) => ids,
            Some(Err(e)) => return Err(*e),
            None => {
                return Err(ChainError::Unreadable { commit, what: "its tree", source: failure_of("not read") });
            }
        };
        let unreadable = |source| ChainError::Unreadable { commit, what: "op.json", source };
        let (_, size) = reader.header(op_id).map_err(unreadable)?;
        if size > MAX_OP_BYTES {
            return Err(ChainError::TooLarge { commit, what: "op.json", size, limit: MAX_OP_BYTES });
        }
        let data = reader.blob(op_id).map_err(unreadable)?;
        Ok((Self::parse_op(commit, data)?, state_id))
    }

    /// `commits` (listed by [`Store::new_commits`]) less those the trusted tips already hold:
    /// a fetched tip behind the local one, or beside it, adds only what is above their common
    /// ancestors, and what is below was checked when it was taken. When every listed commit
    /// stands on a trusted tip (the listing reached no root: a pull that only adds), none is
    /// below one, and nothing is walked. Otherwise the trusted side is walked down, the local
    /// commits read for their parents, the listed ones through the parents already read.
    fn not_held(
        reader: &mut ChainReader,
        commits: Vec<NewCommit>,
        trusted: &[ObjectId],
    ) -> std::result::Result<Vec<NewCommit>, ChainError> {
        if trusted.is_empty() || !commits.iter().any(|c| c.parents.is_empty()) {
            return Ok(commits);
        }
        let listed: HashMap<ObjectId, usize> = commits.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
        let mut held = vec![false; commits.len()];
        let mut seen: HashSet<ObjectId> = HashSet::new();
        let mut todo: Vec<ObjectId> = trusted.to_vec();
        while let Some(id) = todo.pop() {
            if !seen.insert(id) {
                continue;
            }
            match listed.get(&id) {
                Some(&i) => {
                    held[i] = true;
                    todo.extend(commits[i].parents.iter().copied());
                }
                None => {
                    let (_, parents) = reader.commit(id).map_err(|source| ChainError::Broken { commit: id, source })?;
                    todo.extend(parents);
                }
            }
        }
        Ok(commits.into_iter().zip(held).filter(|(_, held)| !held).map(|(c, _)| c).collect())
    }

    /// The commits `tip` adds over `trusted`, parents before children, each checked from its
    /// object header to be a commit of at most [`MAX_COMMIT_BYTES`] before it is read (at most
    /// [`MAX_NEW_COMMITS`] of them). The walk stops at `trusted`: when the fetched side extends
    /// the local tip, it reads only what is new.
    /// `found` is told of each commit as it is read (its place in the order met, its id and
    /// tree).
    fn new_commits(
        reader: &mut ChainReader,
        tip: ObjectId,
        trusted: &[ObjectId],
        found: &mut impl FnMut(usize, ObjectId, ObjectId),
    ) -> std::result::Result<Vec<NewCommit>, ChainError> {
        let trusted: HashSet<ObjectId> = trusted.iter().copied().collect();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        // Depth first, a commit put out once all its parents are: (commit, tree and parents
        // once read).
        let mut todo: Vec<(ObjectId, Option<NewCommit>)> = vec![(tip, None)];
        while let Some((id, read)) = todo.pop() {
            if let Some(commit) = read {
                out.push(commit);
                continue;
            }
            if trusted.contains(&id) || !seen.insert(id) {
                continue;
            }
            if seen.len() > MAX_NEW_COMMITS {
                return Err(ChainError::TooManyToCheck { tip });
            }
            let broken = |source| ChainError::Broken { commit: id, source };
            let (kind, size) = reader.header(id).map_err(broken)?;
            if kind != Kind::Commit {
                return Err(ChainError::NotACommit { id, kind });
            }
            if size > MAX_COMMIT_BYTES {
                return Err(ChainError::CommitTooLarge { commit: id, size });
            }
            let (tree, parents) = reader.commit(id).map_err(broken)?;
            let seq = seen.len() - 1;
            found(seq, id, tree);
            let next: Vec<ObjectId> =
                parents.iter().rev().filter(|p| !trusted.contains(*p) && !seen.contains(*p)).copied().collect();
            todo.push((id, Some(NewCommit { id, parents, seq })));
            todo.extend(next.into_iter().map(|p| (p, None)));
        }
        Ok(out)
    }
}
