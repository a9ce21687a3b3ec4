//! The deterministic merge of two diverged op-logs, and taking a fetched tip into a ref
//! (created, fast-forwarded or merged).

use std::collections::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::git::identity;
use crate::git::refs::{self, Backoff, Expect, GaveUp, Odd, Retry, Step};
use crate::git::ObjectId;
use crate::state::op::{self, MergeData, Op, State, MERGE_ACTOR, MERGE_KIND};

use super::append::MAX_ODD_TRIES;
use super::append::MAX_TRIES;
use super::{internal, ChainError, Store};

/// What [`Store::absorb`] did with a fetched tip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absorbed {
    /// The ref did not exist; it now points at the fetched tip.
    Created,
    /// The ref already contained the fetched tip; nothing changed.
    UpToDate,
    /// The fetched tip contained the ref; the ref moved forward to it.
    FastForward,
    /// Both had ops of their own; the ref now points at their deterministic merge.
    Merged,
}

/// The later of two RFC 3339 times (as instants; equal instants by text), whatever the argument order.
fn later<'a>(a: &'a str, b: &'a str) -> &'a str {
    let key = |t: &'a str| (crate::time::parse_rfc3339(t).unwrap_or(f64::NEG_INFINITY), t);
    let (ka, kb) = (key(a), key(b));
    match ka.0.partial_cmp(&kb.0) {
        Some(std::cmp::Ordering::Greater) => a,
        Some(std::cmp::Ordering::Less) => b,
        _ => std::cmp::max(ka.1, kb.1),
    }
}

/// The result of computing a merge, before anything is written.
pub(super) enum Plan<S> {
    /// One side contains the other (or they are the same): this is the result.
    Contained(ObjectId),
    /// A merge commit is needed.
    Merge { op: Op<MergeData>, state: S, parents: [ObjectId; 2] },
}

impl<'r> Store<'r> {
    /// Compute the merge of two tips without writing anything.
    fn plan<S: State>(&self, ours: ObjectId, theirs: ObjectId) -> std::result::Result<Plan<S>, ChainError> {
        self.plan_in(&mut Dag::new(self), ours, theirs)
    }

    /// [`Store::plan`] on a graph that may already know some of the history (validation reuses
    /// one for every merge commit it checks).
    ///
    /// Reachability is computed here from the parent links, not with gix's merge-base or hidden
    /// walks: those paint by commit time, and op-log commits share their second so often that
    /// gix 0.90 answered wrongly (a redundant merge base, so an ancestor looked like a diverged
    /// side). gix's merge base is only taken as a candidate for the fast path, after checking it.
    pub(super) fn plan_in<S: State>(
        &self,
        dag: &mut Dag<'_, '_>,
        ours: ObjectId,
        theirs: ObjectId,
    ) -> std::result::Result<Plan<S>, ChainError> {
        if ours == theirs {
            return Ok(Plan::Contained(ours));
        }
        // One side containing the other (a pull that only adds, or brings nothing new) is told
        // from the ops since the older tip alone, not from both whole histories.
        if dag.reaches(theirs, ours)? {
            return Ok(Plan::Contained(theirs));
        }
        if dag.reaches(ours, theirs)? {
            return Ok(Plan::Contained(ours));
        }
        let a = dag.ancestors(ours)?;
        let t = dag.ancestors(theirs)?;
        if t.contains(&ours) {
            return Ok(Plan::Contained(theirs));
        }
        if a.contains(&theirs) {
            return Ok(Plan::Contained(ours));
        }
        let ours_e = self.entry::<S>(ours)?;
        let theirs_e = self.entry::<S>(theirs)?;
        // Fast path: replay the ops a merge base does not hold on the base's state. That equals a
        // replay of everything only when all of them sort after everything the base holds, i.e.
        // have a higher clock. Otherwise (criss-cross histories, a base that is not the join point
        // of everything merged, or no common history), replay every op from the start.
        let base = self.git().merge_base(ours, theirs).filter(|b| a.contains(b) && t.contains(b));
        let mut replayed = None;
        if let Some(b) = base {
            let held = dag.ancestors(b)?;
            let ids: Vec<ObjectId> = a.union(&t).filter(|id| !held.contains(*id)).copied().collect();
            let ops = dag.ops(&ids)?;
            let base_e = self.entry::<S>(b)?;
            if !ops.is_empty() && ops.iter().all(|(o, _)| o.lamport > base_e.state.lamport()) {
                replayed = Some((base_e.state, ops));
            }
        }
        let (start, ops) = match replayed {
            Some(r) => r,
            None => {
                let ids: Vec<ObjectId> = a.union(&t).copied().collect();
                (S::default(), dag.ops(&ids)?)
            }
        };
        let top = ops.iter().map(|(o, _)| o.lamport).max().unwrap_or(0);
        // The merged state's clock is the highest op clock merged (like any state's: the clock of
        // the last op in replay order), so it does not depend on how merges were grouped; the
        // merge op itself comes after all of them.
        let lamport = top + 1;
        let mut state = op::replay(start, ops).map_err(|source| ChainError::Merge { ours, theirs, source })?;
        state.set_lamport(top);
        let mut parents = [ours, theirs];
        parents.sort();
        // Ops only one side had: the same whichever merge base is found.
        let only: Vec<ObjectId> = a.symmetric_difference(&t).copied().collect();
        let mut n = 0;
        for id in only {
            n += usize::from(!dag.is_merge(id)?);
        }
        let op = Op {
            v: 1,
            kind: MERGE_KIND.into(),
            lamport,
            at: later(&ours_e.op.at, &theirs_e.op.at).to_string(),
            actor: MERGE_ACTOR.into(),
            data: MergeData { ops: n, parents },
        };
        Ok(Plan::Merge { op, state, parents })
    }

    /// Merge two op-logs deterministically and return the merged tip (moving no ref).
    ///
    /// When one side contains the other, the descendant is the result. Otherwise the result is
    /// one new merge commit: its parents are the two tips sorted by id, its `state.json` the replay
    /// of every op either side holds in the order `(lamport, at, actor, op commit id)` (computed
    /// from the merge base when that is exact), its `op.json` a `merge` op by actor `merge` at the
    /// later tip's time with clock one above the highest op merged and data
    /// `{"parents": [a, b], "ops": N}` (N: ops only one side had). Every machine merging the same
    /// pair, in either order, writes the very same commit.
    ///
    /// Activity ops carry the commit they record and count once however often they are seen, as
    /// long as a repeat comes within the last [`crate::state::op::RECENT_COMMITS`] distinct
    /// commits in replay order — the window a boulder's state keeps, so a merge and a chain of
    /// appends always agree.
    pub fn merge<S: State>(&self, ours: ObjectId, theirs: ObjectId) -> Result<ObjectId> {
        match self.plan::<S>(ours, theirs).map_err(|e| Error::usage(e.to_string()).with_source(e))? {
            Plan::Contained(id) => Ok(id),
            Plan::Merge { op, state, parents } => self.write_op_commit(&op, &state, &parents, true),
        }
    }

    /// Bring a fetched tip into `refname`: check what it adds (trusting what the ref already
    /// holds), then create the ref, fast-forward it, or move it to the deterministic merge — with
    /// a compare-and-swap, retried when a local writer moves the ref meanwhile. An invalid
    /// fetched chain is refused and the ref is left as it was.
    pub fn absorb<S: State>(&self, refname: &str, theirs: ObjectId) -> Result<Absorbed> {
        let mut checked = false;
        // A local writer moving the ref meanwhile is retried: what it gained is local, so only
        // the fetched side needed checking, which is done.
        let retry = Retry { tries: MAX_TRIES, odd: Odd::FirstAttempts(MAX_ODD_TRIES), backoff: Backoff::Growing };
        let absorbed = refs::update_with_retry(self.repo, refname, retry, |_| {
            let ours = self.repo.ref_id(refname)?;
            if !checked {
                self.check_fetched::<S>(refname, ours, theirs)?;
                checked = true;
            }
            Ok(match self.absorb_step::<S>(refname, ours, theirs)? {
                Prepared::UpToDate => Step::Done(Absorbed::UpToDate),
                Prepared::Move { swap, how } => Step::Update {
                    expected: swap.expected,
                    new: swap.new,
                    message: swap.message,
                    writer: Some(Self::absorb_writer()),
                    moved: how,
                    already: Some(Absorbed::UpToDate),
                },
            })
        })?;
        absorbed.map_err(|e| match e {
            GaveUp::Failed(e) => internal(format_args!("cannot update {refname}"), e),
            GaveUp::Exhausted(_) => {
                Error::refused(format!("cannot update {refname}: lost the race to other writers {MAX_TRIES} times"))
            }
        })
    }
}

/// What bringing a fetched tip into a ref comes to ([`Store::prepare_absorb`]), checked and
/// computed (a merge commit written) but the ref not moved yet.
#[derive(Debug, Clone)]
pub enum Prepared {
    /// The ref already holds everything fetched.
    UpToDate,
    /// Move the ref: created, fast-forwarded or merged (`how`).
    Move { swap: refs::Swap, how: Absorbed },
}

impl<'r> Store<'r> {
    /// The first half of [`Store::absorb`] for one ref of many moved together: check what the
    /// fetched tip adds over the ref's current value, and work out where the ref goes (writing a
    /// merge commit when one is needed), without moving it. The caller moves every prepared ref
    /// in one transaction ([`refs::update_all`], as [`Store::absorb_writer`]), and falls back to
    /// [`Store::absorb`] per ref if that transaction fails.
    pub fn prepare_absorb<S: State>(&self, refname: &str, theirs: ObjectId) -> Result<Prepared> {
        let ours = self.repo.ref_id(refname)?;
        self.check_fetched::<S>(refname, ours, theirs)?;
        self.absorb_step::<S>(refname, ours, theirs)
    }

    /// Who the reflog entries of absorbed refs name: git-boulder, now.
    pub fn absorb_writer() -> crate::git::identity::Signature {
        identity::state_signature(&crate::time::now_rfc3339())
    }

    /// Check what a fetched tip adds over `ours`, refusing it by name when invalid.
    fn check_fetched<S: State>(&self, refname: &str, ours: Option<ObjectId>, theirs: ObjectId) -> Result<()> {
        self.validate_since::<S>(theirs, &ours.into_iter().collect::<Vec<_>>())
            .map_err(|e| Self::fetched_invalid(refname, e))
    }

    fn fetched_invalid(refname: &str, e: ChainError) -> Error {
        Error::refused(format!("{refname}: the fetched state is invalid and was not taken: {e}"))
            .hint("the local state is unchanged; fix or delete the ref on the other machine")
            .with_source(e)
    }

    /// [`Store::prepare_absorb`] for a pull, which first refuses a fetched tip whose state says it
    /// belongs elsewhere: `refuse` gives why (`Ok(Err(why))`), given the tip's state when it reads
    /// strictly. The same answers as calling `refuse` on [`Store::entry`] of the tip and then
    /// `prepare_absorb`, with less read twice: the tip's state is taken from the validation when
    /// it replayed the tip (otherwise its `state.json` alone is read, and its `op.json` only when
    /// that state is refused), and a tip that descends from the ref's is a fast-forward without
    /// looking at the history again.
    pub fn prepare_pull<S: State, R>(
        &self,
        refname: &str,
        theirs: ObjectId,
        refuse: impl Fn(&S) -> Option<R>,
    ) -> Result<std::result::Result<Prepared, R>> {
        // What `refuse` says of `entry` of the tip, reading its `state.json` alone unless that is
        // refused (an entry that does not read strictly is refused by nobody).
        let refused_tip = || -> Option<R> {
            let (_, bytes) = self.blobs(theirs, false).ok()?;
            refuse(&Self::parse_state::<S>(theirs, &bytes).ok()?)?;
            refuse(&self.entry::<S>(theirs).ok()?.state)
        };
        let ours = self.repo.ref_id(refname)?;
        let checked = match self.validate_tip::<S>(theirs, &ours.into_iter().collect::<Vec<_>>()) {
            Ok(checked) => checked,
            Err(e) => {
                if let Some(why) = refused_tip() {
                    return Ok(Err(why));
                }
                return Err(Self::fetched_invalid(refname, e));
            }
        };
        let why = match &checked.state {
            Some(state) => refuse(state),
            None => refused_tip(),
        };
        if let Some(why) = why {
            return Ok(Err(why));
        }
        if let (Some(ours), true) = (ours, checked.extends) {
            return Ok(Ok(Self::moved(refname, Expect::At(ours), theirs, Absorbed::FastForward)));
        }
        self.absorb_step::<S>(refname, ours, theirs).map(Ok)
    }

    /// The move of `refname` from `expected` to `new`.
    fn moved(refname: &str, expected: Expect, new: ObjectId, how: Absorbed) -> Prepared {
        let message = format!("boulder: {how:?}").to_lowercase();
        Prepared::Move { swap: refs::Swap { name: refname.to_string(), expected, new, message }, how }
    }

    /// Where `refname`, holding `ours`, goes to take in the (checked) fetched tip `theirs`.
    fn absorb_step<S: State>(&self, refname: &str, ours: Option<ObjectId>, theirs: ObjectId) -> Result<Prepared> {
        let (new, how, expected) = match ours {
            None => (theirs, Absorbed::Created, Expect::Absent),
            Some(ours) => {
                let merged = self.merge::<S>(ours, theirs).map_err(|e| e.context(refname))?;
                let how = if merged == ours {
                    return Ok(Prepared::UpToDate);
                } else if merged == theirs {
                    Absorbed::FastForward
                } else {
                    Absorbed::Merged
                };
                (merged, how, Expect::At(ours))
            }
        };
        Ok(Self::moved(refname, expected, new, how))
    }
}

/// The commit graph of op-logs, read lazily (each commit and each op once) and kept for one
/// operation.
pub(super) struct Dag<'s, 'r> {
    store: &'s Store<'r>,
    parents: HashMap<ObjectId, Vec<ObjectId>>,
    ops: HashMap<ObjectId, Op>,
    /// Clocks of commits whose op was read only for its clock.
    clocks: HashMap<ObjectId, u64>,
}

impl<'s, 'r> Dag<'s, 'r> {
    pub(super) fn new(store: &'s Store<'r>) -> Self {
        Dag { store, parents: HashMap::new(), ops: HashMap::new(), clocks: HashMap::new() }
    }

    fn parents(&mut self, id: ObjectId) -> std::result::Result<&[ObjectId], ChainError> {
        if !self.parents.contains_key(&id) {
            let ps = self.store.git().parents(id).map_err(|source| ChainError::Broken { commit: id, source })?;
            self.parents.insert(id, ps);
        }
        Ok(&self.parents[&id])
    }

    fn is_merge(&mut self, id: ObjectId) -> std::result::Result<bool, ChainError> {
        Ok(self.parents(id)?.len() > 1)
    }

    /// `tip` and every commit reachable from it.
    fn ancestors(&mut self, tip: ObjectId) -> std::result::Result<HashSet<ObjectId>, ChainError> {
        let mut seen = HashSet::from([tip]);
        let mut todo = vec![tip];
        while let Some(id) = todo.pop() {
            for p in self.parents(id)?.to_vec() {
                if seen.insert(p) {
                    todo.push(p);
                }
            }
        }
        Ok(seen)
    }

    /// The clock of the op of commit `id` (a merge's included).
    fn clock(&mut self, id: ObjectId) -> std::result::Result<u64, ChainError> {
        if let Some(op) = self.ops.get(&id) {
            return Ok(op.lamport);
        }
        if let Some(c) = self.clocks.get(&id) {
            return Ok(*c);
        }
        let clock = self.store.op_of(id)?.lamport;
        self.clocks.insert(id, clock);
        Ok(clock)
    }

    /// Is `target` reachable from `from` (or equal)? Along a valid history's parent links the
    /// clock never grows, so only the commits whose clock is at least `target`'s are walked: the
    /// ops since `target`, not the whole history.
    fn reaches(&mut self, from: ObjectId, target: ObjectId) -> std::result::Result<bool, ChainError> {
        let floor = self.clock(target)?;
        let mut seen = HashSet::from([from]);
        let mut todo = vec![from];
        while let Some(id) = todo.pop() {
            if id == target {
                return Ok(true);
            }
            if self.clock(id)? < floor {
                continue;
            }
            for p in self.parents(id)?.to_vec() {
                if seen.insert(p) {
                    todo.push(p);
                }
            }
        }
        Ok(false)
    }

    /// The ops of the non-merge commits among `ids`, with their commit ids.
    fn ops(&mut self, ids: &[ObjectId]) -> std::result::Result<Vec<(Op, ObjectId)>, ChainError> {
        let mut out = Vec::new();
        for &id in ids {
            if self.is_merge(id)? {
                continue;
            }
            if !self.ops.contains_key(&id) {
                let op = self.store.op_of(id)?;
                self.ops.insert(id, op);
            }
            out.push((self.ops[&id].clone(), id));
        }
        Ok(out)
    }
}
