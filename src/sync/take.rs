//! Taking in one fetched ref: where it goes ([`Target`]), notes and claims at once, an op-log
//! checked (on two threads for many) and left to move with the others of the pull.

use std::collections::BTreeMap;

use super::fetched_notes::validate_notes;
use super::{outcome, RefOutcome, RefResult, MAX_REFS_PER_PULL};
use crate::error::{Error, Result};
use crate::git::remote::{self};
use crate::git::{notes, refs, ObjectId, Repo};
use crate::state::{self, Absorbed, BoulderState, PrdState, State, Store, StreamState, NOTES_REF};

/// Where a ref fetched from the remote goes locally, by its name on the remote.
pub(super) enum Target {
    Stream(String),
    Boulder(String),
    Prd,
    Notes,
    Claim(String),
}

pub(super) fn target(remote_ref: &str) -> Option<Target> {
    if remote_ref == NOTES_REF {
        return Some(Target::Notes);
    }
    if remote_ref == refs::PRD {
        return Some(Target::Prd);
    }
    let named = |prefix: &str| remote_ref.strip_prefix(prefix).filter(|name| crate::names::problem(name).is_none());
    if let Some(name) = named(refs::STREAMS) {
        Some(Target::Stream(name.to_string()))
    } else if let Some(name) = named(refs::BOULDERS) {
        Some(Target::Boulder(name.to_string()))
    } else {
        named(refs::CLAIMS).map(|name| Target::Claim(name.to_string()))
    }
}

/// Why a fetched op-log whose state records another name than its ref's is refused, if it does.
fn misnamed(recorded: Option<String>, refname: &str, what: &str) -> Option<String> {
    recorded
        .filter(|r| r != refname)
        .map(|r| format!("its state records {what} {:?}, not {refname:?} as its ref name says", crate::text::inert(&r)))
}

pub(super) fn over_limit(name: &str) -> RefOutcome {
    outcome(name, RefResult::Refused, Some(format!("more than {MAX_REFS_PER_PULL} refs in one pull; not taken")))
}

/// The word a pull reports for what was done with an op-log.
pub(super) fn absorbed_word(how: Absorbed) -> RefResult {
    match how {
        Absorbed::Created => RefResult::Created,
        Absorbed::UpToDate => RefResult::UpToDate,
        Absorbed::FastForward => RefResult::FastForward,
        Absorbed::Merged => RefResult::Merged,
    }
}

/// The kind of state an op-log ref holds.
#[derive(Debug, Clone, Copy)]
pub(super) enum LogKind {
    Stream,
    Boulder,
    Prd,
}

/// A fetched op-log checked and ready to move: its ref moves with the others of the pull in one
/// transaction.
pub(super) struct Pending {
    pub(super) kind: LogKind,
    pub(super) id: ObjectId,
    pub(super) swap: refs::Swap,
    pub(super) how: Absorbed,
}

/// What taking in one fetched ref comes to: done (an outcome, or nothing for a ref that is not
/// git-boulder's), or an op-log ref to move.
pub(super) enum Taken {
    Done(Option<RefOutcome>),
    Pending(Pending),
    /// An op-log refused for what it holds (the same tip is refused again, whatever this machine
    /// does): remembered by its tip, see [`Refusals`].
    Refused(RefOutcome),
}

/// Bring the fetched op-log `id` into the ref `name` on its own (compare-and-swap with retry).
pub(super) fn absorb_kind(store: &Store, kind: LogKind, name: &str, id: ObjectId) -> RefOutcome {
    let absorbed = match kind {
        LogKind::Stream => store.absorb::<StreamState>(name, id),
        LogKind::Boulder => store.absorb::<BoulderState>(name, id),
        LogKind::Prd => store.absorb::<PrdState>(name, id),
    };
    match absorbed {
        Ok(how) => outcome(name, absorbed_word(how), None),
        Err(e) => outcome(name, RefResult::Refused, Some(e.message)),
    }
}

/// Check the fetched op-log `id` for the ref `name` and work out its move, unless `misnamed` says
/// why it is not that ref's (its state records another name).
fn prepare_log<S: State>(
    store: &Store,
    kind: LogKind,
    name: &str,
    id: ObjectId,
    misnamed: impl Fn(&S) -> Option<String>,
) -> Taken {
    let refused = |why: String| Taken::Done(Some(outcome(name, RefResult::Refused, Some(why))));
    let lasting = |why: String| Taken::Refused(outcome(name, RefResult::Refused, Some(why)));
    match store.prepare_pull::<S, _>(name, id, misnamed) {
        Ok(Err(why)) => lasting(why),
        Ok(Ok(state::Prepared::UpToDate)) => Taken::Done(Some(outcome(name, RefResult::UpToDate, None))),
        Ok(Ok(state::Prepared::Move { swap, how })) => Taken::Pending(Pending { kind, id, swap, how }),
        Err(e) if verdict(&e) => lasting(e.message),
        Err(e) => refused(e.message),
    }
}

/// Is `e` a verdict on what a fetched op-log holds (its commits, sizes, ops, states), which the
/// same tip earns again, rather than a failure to read or write here?
fn verdict(e: &Error) -> bool {
    use crate::state::store::ChainError as C;
    let chain = std::error::Error::source(e).and_then(|s| s.downcast_ref::<C>());
    chain.is_some_and(|c| !matches!(c, C::Unreadable { .. } | C::Broken { .. } | C::Walk { .. } | C::Recompute { .. }))
}

/// The local op-log ref a fetched op-log ref goes to.
pub(super) fn log_ref(remote_ref: &str) -> Option<String> {
    match target(remote_ref)? {
        Target::Stream(n) => Some(state::stream_ref(&n)),
        Target::Boulder(n) => Some(state::boulder_ref(&n)),
        Target::Prd => Some(state::PRD_REF.to_string()),
        Target::Notes | Target::Claim(_) => None,
    }
}

/// Bring one fetched ref in on its own. `Ok(None)` for a ref that is not git-boulder's.
pub(super) fn absorb_one(
    repo: &Repo,
    store: &Store,
    key: &str,
    remote_ref: &str,
    id: ObjectId,
) -> Result<Option<RefOutcome>> {
    Ok(match take_one(repo, store, key, remote_ref, id)? {
        Taken::Done(o) => o,
        Taken::Refused(o) => Some(o),
        Taken::Pending(p) => Some(absorb_kind(store, p.kind, &p.swap.name, p.id)),
    })
}

/// Take in one fetched ref: notes and claims at once, an op-log checked and left to move.
pub(super) fn take_one(repo: &Repo, store: &Store, key: &str, remote_ref: &str, id: ObjectId) -> Result<Taken> {
    let Some(t) = target(remote_ref) else {
        return Ok(Taken::Done(Some(outcome(remote_ref, RefResult::Ignored, Some("not a git-boulder ref".into())))));
    };
    let refused = |name: &str, e: Error| Ok(Taken::Done(Some(outcome(name, RefResult::Refused, Some(e.message)))));
    let done = |o: RefOutcome| Ok(Taken::Done(Some(o)));
    match t {
        Target::Stream(n) => {
            let why = |s: &StreamState| misnamed(s.name.clone(), &n, "stream");
            Ok(prepare_log::<StreamState>(store, LogKind::Stream, &state::stream_ref(&n), id, why))
        }
        Target::Boulder(n) => {
            let why = |s: &BoulderState| misnamed(s.id.clone(), &n, "boulder");
            Ok(prepare_log::<BoulderState>(store, LogKind::Boulder, &state::boulder_ref(&n), id, why))
        }
        Target::Prd => Ok(prepare_log::<PrdState>(store, LogKind::Prd, state::PRD_REF, id, |_| None)),
        Target::Notes => {
            if let Err(why) = validate_notes(repo, id) {
                return done(outcome(
                    NOTES_REF,
                    RefResult::Refused,
                    Some(format!("the fetched notes are invalid: {why}")),
                ));
            }
            match notes::union(repo, id) {
                Ok(notes::Union::UpToDate) => done(outcome(NOTES_REF, RefResult::UpToDate, None)),
                Ok(notes::Union::Created) => done(outcome(NOTES_REF, RefResult::Created, None)),
                Ok(notes::Union::FastForward) => done(outcome(NOTES_REF, RefResult::FastForward, None)),
                Ok(notes::Union::Merged) => done(outcome(NOTES_REF, RefResult::Merged, None)),
                Err(e) => refused(NOTES_REF, e),
            }
        }
        Target::Claim(stream) => {
            let local = crate::sync::claim::tracking_ref(key, &stream);
            match crate::sync::claim::read(repo, &stream, id) {
                Ok(_) => done(outcome(&local, RefResult::Claim, None)),
                Err(why) => {
                    // Keep no copy of an invalid claim.
                    crate::sync::claim::forget(repo, key, &stream)?;
                    done(outcome(&local, RefResult::Refused, Some(why.to_string())))
                }
            }
        }
    }
}

/// Op-log refs of one pull checked on a second thread too, from this many on (fewer are not
/// worth starting one).
const TWO_THREADS_FROM: usize = 8;

/// Is a fetched ref an op-log (checked without writing anything but a merge commit, so on any
/// thread), rather than notes or a claim (taken in on the pull's own thread, in order)?
fn is_log(remote_ref: &str) -> bool {
    matches!(target(remote_ref), Some(Target::Stream(_) | Target::Boulder(_) | Target::Prd))
}

/// Check the fetched op-logs among `fetched` (each at its index), on two threads when there are
/// enough of them: each ref is taken by whichever thread is free, on its own handle on the
/// repository. Returns what [`take_one`] returns for each op-log, by index.
pub(super) fn check_logs(
    repo: &Repo,
    store: &Store,
    key: &str,
    fetched: &[remote::Fetched],
    skip: &BTreeMap<usize, Result<Taken>>,
) -> BTreeMap<usize, Result<Taken>> {
    let logs: Vec<usize> =
        (0..fetched.len()).filter(|&n| is_log(&fetched[n].remote_ref) && !skip.contains_key(&n)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = |repo: &Repo, store: &Store| {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&n) = logs.get(i) else { break };
            let f = &fetched[n];
            out.push((n, take_one(repo, store, key, &f.remote_ref, f.id)));
        }
        out
    };
    let mut checked: BTreeMap<usize, Result<Taken>> = BTreeMap::new();
    std::thread::scope(|scope| {
        let other = (logs.len() >= TWO_THREADS_FROM)
            .then(|| {
                let (handle, work) = (repo.handle(), &work);
                let check = move || Store::new(&handle).map(|store| work(&handle, &store)).unwrap_or_default();
                std::thread::Builder::new().spawn_scoped(scope, check).ok()
            })
            .flatten();
        checked.extend(work(repo, store));
        if let Some(Ok(done)) = other.map(|t| t.join()) {
            checked.extend(done);
        }
    });
    // A ref the second thread took but could not hand back (it panicked): checked again here.
    for &n in &logs {
        if let std::collections::btree_map::Entry::Vacant(v) = checked.entry(n) {
            let f = &fetched[n];
            v.insert(take_one(repo, store, key, &f.remote_ref, f.id));
        }
    }
    checked
}
