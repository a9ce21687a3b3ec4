//! Sharing state through any git remote (DESIGN §9): `push`, `pull`, `sync`, and the refspecs
//! of `remote setup`.
//!
//! * **pull** fetches (git CLI, which brings the objects; the refs are written here, see
//!   [`remote::fetch`]) `refs/boulder/*` and `refs/notes/boulder` into
//!   `refs/boulder-remotes/<remote>/…`, then brings each op-log in: created, fast-forwarded, kept
//!   (local ahead) or merged deterministically ([`crate::state::Store::absorb`]); notes merge by
//!   union; claims are kept as the remote's last word. Everything fetched is validated before it
//!   is used; a ref that fails is refused by name and the local ref is kept as it was. An
//!   op-log tip refused for what it holds is remembered (`refused.json`), so later pulls refuse it
//!   again without walking it until the remote's ref moves.
//! * **push** sends the op-logs and notes (git CLI, never forced). A ref rejected because the remote
//!   moved (a lost race): pull, merge, push again, a bounded number of rounds. A ref the server
//!   refuses for its own reasons (a hook, a `receive.*` rule) stops the push at once.
//! * **sync** is pull then push until both sides agree.

pub mod claim;
mod report;

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::git::config::ConfigFile;
use crate::git::objects::{EntryKind, Failure, Kind};
use crate::git::remote::{self, RemoteName};
use crate::git::{cli, notes, refs, ObjectId, Repo};
use crate::state::{self, Absorbed, BoulderState, PrdState, State, Store, StreamState, NOTES_REF};

/// A remote that cannot be used is a usage error, with how to name one that can.
impl From<remote::RemoteError> for Error {
    fn from(e: remote::RemoteError) -> Error {
        let hint = match &e {
            remote::RemoteError::NotARemote { .. } => "name a remote (`git remote -v`) or a URL".to_string(),
            remote::RemoteError::NotConfigured { setting, .. } => format!(
                "add the remote yourself (`git remote add NAME URL`) and name it in {setting}, or pass --remote URL on the command line"
            ),
            remote::RemoteError::NoDefault => {
                "name one (`git boulder push REMOTE`), or add one with `git remote add origin URL`".to_string()
            }
        };
        Error::usage(e.to_string()).hint(hint).with_source(e)
    }
}

/// How many pull-and-push rounds a push or sync tries before giving up.
pub const ROUNDS: usize = 6;

/// What happened to one ref.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RefOutcome {
    /// The local ref (`refs/boulder/streams/auth`, `refs/notes/boulder`).
    pub name: String,
    /// What the pull or push did with it.
    pub result: RefResult,
    /// Why, for refused and rejected refs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// What a pull or a push did with one ref; written in `--json` as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefResult {
    /// Pull: the ref did not exist here and was taken as fetched.
    Created,
    /// Pull or push: both sides already agree.
    UpToDate,
    /// Pull: moved forward to what was fetched.
    FastForward,
    /// Pull: merged with what was fetched.
    Merged,
    /// Pull: not taken (invalid, over a limit, or a lasting conflict); `why` says why.
    Refused,
    /// Pull: not a git-boulder ref.
    Ignored,
    /// Pull: another machine's claim, tracked.
    Claim,
    /// Pull: another machine's claim, released.
    ClaimReleased,
    /// Push: moved on the remote.
    Pushed,
    /// Push: created on the remote.
    New,
    /// Push: the remote refused it; `why` has git's summary.
    Rejected,
}

impl RefResult {
    /// As written in `--json` and counted in the summary line (`2 up to date`, with spaces).
    pub fn as_str(self) -> &'static str {
        match self {
            RefResult::Created => "created",
            RefResult::UpToDate => "up_to_date",
            RefResult::FastForward => "fast_forward",
            RefResult::Merged => "merged",
            RefResult::Refused => "refused",
            RefResult::Ignored => "ignored",
            RefResult::Claim => "claim",
            RefResult::ClaimReleased => "claim_released",
            RefResult::Pushed => "pushed",
            RefResult::New => "new",
            RefResult::Rejected => "rejected",
        }
    }
}

impl std::fmt::Display for RefResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn outcome(name: &str, result: RefResult, why: Option<String>) -> RefOutcome {
    RefOutcome { name: name.to_string(), result, why }
}

/// The lock held while fetching into `refs/boulder-remotes/<remote>/` (waited for).
pub(crate) fn fetch_lock(repo: &Repo, remote: &RemoteName, command: &str) -> Result<crate::lock::LockGuard> {
    crate::lock::acquire(repo, &format!("fetch-{}", remote.key), true, command)
}

/// Resolve `REMOTE` (or the default remote).
pub fn resolve(repo: &Repo, given: Option<&str>, base_branch: &str) -> Result<RemoteName> {
    let name = match given {
        Some(g) => g.to_string(),
        None => remote::default_remote(repo, base_branch)?,
    };
    Ok(RemoteName::new(repo, &name)?)
}

fn tracking_prefix(key: &str) -> String {
    refs::remote_prefix(key)
}

/// The fetch refspecs of pull (also written by `remote setup`).
pub fn fetch_specs(key: &str) -> Vec<String> {
    vec![
        format!("+{}*:{}*", refs::BOULDER, refs::remote_prefix(key)),
        format!("+{NOTES_REF}*:{}{}*", refs::remote_prefix(key), refs::REMOTE_NOTES_TAIL),
    ]
}

/// Where a ref fetched from the remote goes locally, by its name on the remote.
enum Target {
    Stream(String),
    Boulder(String),
    Prd,
    Notes,
    Claim(String),
}

fn target(remote_ref: &str) -> Option<Target> {
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

/// Most notes a fetched notes ref may hold.
pub const MAX_NOTES: usize = 1_000_000;
/// Largest tree object of a fetched notes ref read.
const MAX_NOTES_TREE_BYTES: u64 = 8 * 1024 * 1024;
/// Largest notes commit read.
const MAX_NOTES_COMMIT_BYTES: u64 = 64 * 1024;
/// How many of the commits a fetched notes ref adds are size-checked first, walking back from its tip.
const NOTES_COMMITS_CHECKED: usize = 10_000;

/// Why a fetched notes ref is refused; the message names the object.
#[derive(Debug, thiserror::Error)]
pub enum InvalidNotes {
    /// An object of it could not be read.
    #[error("{id}: {source}")]
    Unreadable { id: ObjectId, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("{id} is a {found}, not a {expected}")]
    WrongKind { id: ObjectId, found: Kind, expected: Kind },
    #[error("{kind} {id} is {size} bytes, more than the limit of {limit}")]
    TooLarge { kind: Kind, id: ObjectId, size: u64, limit: u64 },
    #[error("more than {MAX_NOTES} notes and note folders")]
    TooMany,
    /// The notes tree could not be listed.
    #[error("{0}")]
    List(#[source] Error),
    #[error("the note of {object}: {source}")]
    NoteUnreadable { object: ObjectId, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("the note of {object} is {size} bytes, more than the limit of {}", notes::MAX_NOTE_BYTES)]
    NoteTooLarge { object: ObjectId, size: u64 },
    /// A note that is not UTF-8 JSON lines of small objects (see [`notes::check`]).
    #[error("the note of {object} {why}")]
    BadNote {
        object: ObjectId,
        #[source]
        why: notes::NoteError,
    },
}

/// Check from object headers, before anything is read whole, that a fetched notes ref is of
/// bounded size: the commits it adds over ours, and the trees of its tip.
fn bound_notes(repo: &Repo, theirs: ObjectId) -> std::result::Result<(), InvalidNotes> {
    let g = repo.objects();
    let ours = repo.ref_id(NOTES_REF).ok().flatten();
    let unreadable = |id: ObjectId| move |e: Failure| InvalidNotes::Unreadable { id, source: Box::new(e) };
    let header = |id: ObjectId, kind: Kind, limit: u64| -> std::result::Result<(), InvalidNotes> {
        let (found, size) = g.header(id).map_err(unreadable(id))?;
        if found != kind {
            return Err(InvalidNotes::WrongKind { id, found, expected: kind });
        }
        if size > limit {
            return Err(InvalidNotes::TooLarge { kind, id, size, limit });
        }
        Ok(())
    };
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![theirs];
    while let Some(id) = todo.pop() {
        if Some(id) == ours || !seen.insert(id) {
            continue;
        }
        if seen.len() > NOTES_COMMITS_CHECKED {
            // A long shared history (the walk stops at our tip only): what follows reads little
            // of it, so the newest commits are what matter.
            break;
        }
        header(id, Kind::Commit, MAX_NOTES_COMMIT_BYTES)?;
        todo.extend(g.parents(id).map_err(unreadable(id))?);
    }
    let (tip_tree, _) = g.commit_parts(theirs).map_err(unreadable(theirs))?;
    let mut trees = vec![tip_tree];
    let mut notes = 0usize;
    while let Some(t) = trees.pop() {
        header(t, Kind::Tree, MAX_NOTES_TREE_BYTES)?;
        for e in g.entries(t).map_err(unreadable(t))? {
            // Every entry counts, subtrees too: a tree repeated under many names would otherwise
            // be walked again and again (exponentially) before any bound fired.
            notes += 1;
            if e.kind == EntryKind::Tree {
                trees.push(e.id);
            }
        }
        if notes > MAX_NOTES {
            return Err(InvalidNotes::TooMany);
        }
    }
    Ok(())
}

/// Check every note a fetched notes commit adds: UTF-8 JSON lines, each an object, small.
fn validate_notes(repo: &Repo, theirs: ObjectId) -> std::result::Result<(), InvalidNotes> {
    bound_notes(repo, theirs)?;
    let objects = repo.objects();
    let theirs_all = notes::all(repo, theirs).map_err(InvalidNotes::List)?;
    let ours_all = match repo.ref_id(NOTES_REF).ok().flatten() {
        Some(o) => notes::all(repo, o).map_err(InvalidNotes::List)?,
        None => BTreeMap::new(),
    };
    for (object, blob) in theirs_all {
        if ours_all.get(&object) == Some(&blob) {
            continue;
        }
        // The size from the object header first: a fetched note is never read whole when too large.
        let unreadable = |e: Failure| InvalidNotes::NoteUnreadable { object, source: Box::new(e) };
        let (_, size) = objects.header(blob).map_err(unreadable)?;
        if size > notes::MAX_NOTE_BYTES {
            return Err(InvalidNotes::NoteTooLarge { object, size });
        }
        let data = objects.read(blob).map_err(unreadable)?;
        notes::check(&data).map_err(|why| InvalidNotes::BadNote { object, why })?;
    }
    Ok(())
}

/// Why a fetched op-log whose state records another name than its ref's is refused, if it does.
fn misnamed(recorded: Option<String>, refname: &str, what: &str) -> Option<String> {
    recorded
        .filter(|r| r != refname)
        .map(|r| format!("its state records {what} {:?}, not {refname:?} as its ref name says", crate::text::inert(&r)))
}

/// Most refs one pull (or one absorb of fetched refs) takes in; the rest are refused by name.
pub const MAX_REFS_PER_PULL: usize = 10_000;

fn over_limit(name: &str) -> RefOutcome {
    outcome(name, RefResult::Refused, Some(format!("more than {MAX_REFS_PER_PULL} refs in one pull; not taken")))
}

/// The word a pull reports for what was done with an op-log.
fn absorbed_word(how: Absorbed) -> RefResult {
    match how {
        Absorbed::Created => RefResult::Created,
        Absorbed::UpToDate => RefResult::UpToDate,
        Absorbed::FastForward => RefResult::FastForward,
        Absorbed::Merged => RefResult::Merged,
    }
}

/// The kind of state an op-log ref holds.
#[derive(Debug, Clone, Copy)]
enum LogKind {
    Stream,
    Boulder,
    Prd,
}

/// A fetched op-log checked and ready to move: its ref moves with the others of the pull in one
/// transaction.
struct Pending {
    kind: LogKind,
    id: ObjectId,
    swap: refs::Swap,
    how: Absorbed,
}

/// What taking in one fetched ref comes to: done (an outcome, or nothing for a ref that is not
/// git-boulder's), or an op-log ref to move.
enum Taken {
    Done(Option<RefOutcome>),
    Pending(Pending),
    /// An op-log refused for what it holds (the same tip is refused again, whatever this machine
    /// does): remembered by its tip, see [`Refusals`].
    Refused(RefOutcome),
}

/// Bring the fetched op-log `id` into the ref `name` on its own (compare-and-swap with retry).
fn absorb_kind(store: &Store, kind: LogKind, name: &str, id: ObjectId) -> RefOutcome {
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

/// Op-log tips a pull refused for what they hold, per remote and remote ref, in
/// `$GIT_COMMON_DIR/boulder/refused.json` (this machine's only, never pushed): a later pull that
/// fetches the same tip refuses it again at no cost, until the remote's ref moves.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Refusals(BTreeMap<String, BTreeMap<String, RefusedTip>>);

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct RefusedTip {
    tip: String,
    why: String,
}

impl RefusedTip {
    fn is(&self, id: ObjectId) -> bool {
        ObjectId::from_hex(self.tip.as_bytes()).ok() == Some(id)
    }
}

fn refusals_path(repo: &Repo) -> std::path::PathBuf {
    repo.boulder_dir().join("refused.json")
}

impl Refusals {
    /// What is recorded (nothing when the file is missing or does not parse: each tip is then
    /// checked again, the cost of a first pull).
    fn load(repo: &Repo) -> Refusals {
        std::fs::read(refusals_path(repo)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    fn save(&self, repo: &Repo) {
        if let Ok(text) = serde_json::to_vec_pretty(self) {
            let _ = std::fs::create_dir_all(repo.boulder_dir());
            let _ = crate::fsutil::write_atomic(&refusals_path(repo), &text);
        }
    }

    /// Why the op-log tip `id` of `remote_ref` on the remote `key` was refused before, if it was.
    fn of(&self, key: &str, remote_ref: &str, id: ObjectId) -> Option<&str> {
        let r = self.0.get(key)?.get(remote_ref)?;
        r.is(id).then_some(r.why.as_str())
    }
}

/// The local op-log ref a fetched op-log ref goes to.
fn log_ref(remote_ref: &str) -> Option<String> {
    match target(remote_ref)? {
        Target::Stream(n) => Some(state::stream_ref(&n)),
        Target::Boulder(n) => Some(state::boulder_ref(&n)),
        Target::Prd => Some(state::PRD_REF.to_string()),
        Target::Notes | Target::Claim(_) => None,
    }
}

/// Bring one fetched ref in on its own. `Ok(None)` for a ref that is not git-boulder's.
fn absorb_one(repo: &Repo, store: &Store, key: &str, remote_ref: &str, id: ObjectId) -> Result<Option<RefOutcome>> {
    Ok(match take_one(repo, store, key, remote_ref, id)? {
        Taken::Done(o) => o,
        Taken::Refused(o) => Some(o),
        Taken::Pending(p) => Some(absorb_kind(store, p.kind, &p.swap.name, p.id)),
    })
}

/// Take in one fetched ref: notes and claims at once, an op-log checked and left to move.
fn take_one(repo: &Repo, store: &Store, key: &str, remote_ref: &str, id: ObjectId) -> Result<Taken> {
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

/// The result of a pull.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PullReport {
    pub remote: String,
    pub refs: Vec<RefOutcome>,
}

impl PullReport {
    pub fn refused(&self) -> Vec<&RefOutcome> {
        self.refs.iter().filter(|r| r.result == RefResult::Refused).collect()
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
fn check_logs(
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

/// Fetch the remote's state and bring it in.
pub fn pull(repo: &Repo, remote: &RemoteName) -> Result<PullReport> {
    // One fetch into refs/boulder-remotes/<remote>/ at a time on this machine: two at once (a
    // worker and the merge it started) fail on each other's ref locks.
    let _fetching = fetch_lock(repo, remote, "git boulder pull")?;
    // A `packed-refs.lock` a killed writer left blocks every ref this pull would write (each
    // waiting out git's timeout): say so once, up front, with the fix.
    if let Some(e) = refs::stale_packed_lock(repo, &format!("the refs of {}", remote.given)) {
        return Err(e);
    }
    crate::progress::show(&format!("fetching git-boulder state from {}", remote.given));
    let span = crate::trace::span("pull: git fetch");
    let running = remote::start_fetch(repo, &remote.given, &fetch_specs(&remote.key))?;
    // While git fetches (mostly waiting for the remote to pack): what does not depend on what it
    // brings. Claims seen before the fetch are the ones seen after it, less those it brings
    // (refs are never pruned by it, and it runs under the fetch lock).
    let prepared = (|| -> Result<_> {
        let store = Store::new(repo)?;
        let claims_before = crate::sync::claim::seen_on(repo, &remote.key)?;
        repo.settle_committer();
        Ok((store, claims_before))
    })();
    let mut fetched = running.finish(repo)?;
    let (store, claims_before) = prepared?;
    // A partial clone gets the state's files too (its filter keeps them back), as far as they
    // are new: what the local state holds is had already.
    let tips: Vec<String> = fetched.iter().map(|f| f.id.to_string()).collect();
    if !tips.is_empty() {
        let had = ["--not".to_string(), format!("--glob={}*", refs::BOULDER), "--glob=refs/notes/boulder*".into()];
        let revs: Vec<String> = tips.into_iter().chain(had).collect();
        repo.prefetch(&revs, &[])?;
    }
    if fetched.len() > MAX_REFS_PER_PULL {
        // Past the limit, what this machine already holds is taken first — the notes, the PRD's
        // and streams' state, boulders it knows — so refs others pushed by the thousand cannot
        // crowd it out.
        let known: std::collections::HashSet<String> =
            store.list(refs::BOULDERS)?.into_iter().map(|(name, _)| name).collect();
        fetched.sort_by_key(|f| match target(&f.remote_ref) {
            Some(Target::Notes | Target::Prd | Target::Stream(_)) => 0,
            _ if known.contains(&f.remote_ref) => 1,
            _ => 2,
        });
    }
    drop(span);
    let _span = crate::trace::span(format!("pull: check and take in {} refs", fetched.len()));
    let mut report = PullReport { remote: remote.given.clone(), refs: Vec::new() };
    let mut claims_seen = Vec::new();
    // Op-logs checked and ready to move, with their place in the report.
    let mut pending: Vec<(usize, Pending)> = Vec::new();
    // Op-log tips refused before for what they hold: refused again without a walk.
    let refusals = Refusals::load(repo);
    let mut known_refused: BTreeMap<usize, Result<Taken>> = BTreeMap::new();
    for (n, f) in fetched.iter().enumerate().take(MAX_REFS_PER_PULL) {
        if let (Some(why), Some(local)) = (refusals.of(&remote.key, &f.remote_ref, f.id), log_ref(&f.remote_ref)) {
            let why = format!(
                "refused before at this tip, not checked again until {} changes on {}: {why}",
                f.remote_ref, remote.given
            );
            known_refused.insert(n, Ok(Taken::Refused(outcome(&local, RefResult::Refused, Some(why)))));
        }
    }
    if crate::trace::enabled() && !known_refused.is_empty() {
        crate::trace::line(&format!("pull: {} op-log tip(s) refused before, not checked again", known_refused.len()));
    }
    let span = crate::trace::span("pull: check the op-logs");
    let mut checked =
        check_logs(repo, &store, &remote.key, &fetched[..fetched.len().min(MAX_REFS_PER_PULL)], &known_refused);
    drop(span);
    let mut lasting: BTreeMap<String, RefusedTip> = BTreeMap::new();
    for (n, f) in fetched.iter().enumerate() {
        if let Some(Target::Claim(s)) = target(&f.remote_ref) {
            claims_seen.push(s);
        }
        if n >= MAX_REFS_PER_PULL {
            report.refs.push(over_limit(&f.remote_ref));
            continue;
        }
        crate::progress::show(&format!("merging {}/{} {}", n + 1, fetched.len(), f.remote_ref));
        let taken = match known_refused.remove(&n).or_else(|| checked.remove(&n)) {
            Some(taken) => taken,
            None => take_one(repo, &store, &remote.key, &f.remote_ref, f.id),
        };
        match taken? {
            Taken::Done(Some(o)) => report.refs.push(o),
            Taken::Refused(o) => {
                // Remembered with the first reason given for this tip.
                let why = match refusals.0.get(&remote.key).and_then(|m| m.get(&f.remote_ref)) {
                    Some(r) if r.is(f.id) => r.why.clone(),
                    _ => o.why.clone().unwrap_or_default(),
                };
                lasting.insert(f.remote_ref.clone(), RefusedTip { tip: f.id.to_string(), why });
                report.refs.push(o);
            }
            Taken::Done(None) => {}
            Taken::Pending(p) => {
                report.refs.push(outcome(&p.swap.name, absorbed_word(p.how), None));
                pending.push((report.refs.len() - 1, p));
            }
        }
    }
    // Every op-log ref moves at once: those only packed-refs holds in one rewrite of it, the
    // others (a hook wrote them loose) in one transaction. One that fails (a local writer moved it
    // meanwhile, or holds its lock) is taken in on its own, with retries.
    let swaps: Vec<refs::Swap> = pending.iter().map(|(_, p)| p.swap.clone()).collect();
    let writer = Store::absorb_writer();
    let span = crate::trace::span(format!("pull: move {} op-log refs in one transaction", swaps.len()));
    // Without a lock file per ref where only packed-refs holds them (see refs::update_packed);
    // one a local writer took meanwhile is taken in again on its own, on top of what it wrote.
    let (left, mut redo) = match refs::update_packed(repo, &swaps)? {
        Some(moved) => (moved.left, moved.raced),
        None => ((0..swaps.len()).collect(), Vec::new()),
    };
    let rest: Vec<refs::Swap> = left.iter().map(|&n| swaps[n].clone()).collect();
    if refs::update_all(repo, &rest, &writer)?.is_err() {
        redo.extend(left);
    }
    drop(span);
    for n in redo {
        let (i, p) = &pending[n];
        report.refs[*i] = absorb_kind(&store, p.kind, &p.swap.name, p.id);
    }
    // Claims the remote no longer has were released there.
    for (stream, _) in claims_before {
        if !claims_seen.contains(&stream) {
            crate::sync::claim::forget(repo, &remote.key, &stream)?;
            report.refs.push(outcome(
                &crate::sync::claim::tracking_ref(&remote.key, &stream),
                RefResult::ClaimReleased,
                None,
            ));
        }
    }
    crate::progress::done();
    // Refs refused because a `packed-refs.lock` here blocked their update (one that appeared
    // after the check above) are this repository's problem, not the remote's: say that.
    if !report.refused().is_empty() {
        if let Some(e) = refs::packed_lock_now(repo, &format!("the refs of {}", remote.given)) {
            return Err(e);
        }
    }
    remember(repo, &remote.key, &fetched.iter().filter_map(|f| Some((f.local_ref.clone()?, f.id))).collect::<Vec<_>>());
    // The refused tips of this remote are those refused now: a ref that moved is checked anew.
    if refusals.0.get(&remote.key).map_or(!lasting.is_empty(), |before| *before != lasting) {
        let mut refusals = refusals;
        if lasting.is_empty() {
            refusals.0.remove(&remote.key);
        } else {
            refusals.0.insert(remote.key.clone(), lasting);
        }
        refusals.save(repo);
    }
    // A command that is slow anyway packs the state's loose objects past the threshold.
    crate::state::pack::auto(repo);
    Ok(report)
}

/// The local refs a push sends: every op-log and the notes, never claims.
fn push_specs(repo: &Repo) -> Result<Vec<String>> {
    let store = Store::new(repo)?;
    let mut specs = Vec::new();
    for prefix in [state::STREAMS, state::BOULDERS] {
        if !store.list(prefix)?.is_empty() {
            specs.push(format!("{prefix}*:{prefix}*"));
        }
    }
    for single in [state::PRD_REF, NOTES_REF] {
        if repo.ref_id(single)?.is_some() {
            specs.push(format!("{single}:{single}"));
        }
    }
    Ok(specs)
}

/// The result of a push (after any pull rounds).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PushReport {
    pub remote: String,
    pub refs: Vec<RefOutcome>,
    /// Pull-and-retry rounds it took (0: the first push went through); at most [`ROUNDS`] - 1.
    pub rounds: usize,
    /// What the pulls in between brought in.
    pub pulled: Vec<RefOutcome>,
    /// The server refused refs for its own reasons (a hook, a `receive.*` rule), not because
    /// another machine pushed first: the push stopped at once, without pulling and retrying.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub refused_by_server: bool,
    /// What the server printed on the last push (its `remote:` lines, e.g. a hook's reason).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remote_messages: Vec<String>,
}

fn push_word(p: &cli::PushedRef) -> RefResult {
    match p.flag {
        cli::PushFlag::UpToDate => RefResult::UpToDate,
        cli::PushFlag::New => RefResult::New,
        cli::PushFlag::Rejected => RefResult::Rejected,
        cli::PushFlag::FastForward | cli::PushFlag::Forced | cli::PushFlag::Deleted => RefResult::Pushed,
    }
}

/// Push the state; on rejections pull, merge and push again, at most [`ROUNDS`] times. Never
/// forces. The report lists each ref's last result; rejected refs remain only when the bound was hit.
pub fn push(repo: &Repo, remote: &RemoteName) -> Result<PushReport> {
    let dir = repo.run_dir();
    let mut report = PushReport { remote: remote.given.clone(), ..Default::default() };
    // A command that is slow anyway packs the state's loose objects past the threshold (before
    // pushing: sending objects from a pack is cheaper).
    crate::state::pack::auto(repo);
    for round in 0..ROUNDS {
        let specs = push_specs(repo)?;
        if specs.is_empty() {
            return Ok(report);
        }
        crate::progress::show(&format!("pushing git-boulder state to {}", remote.given));
        let pushed = cli::push(dir, &remote.given, &[], &specs)?;
        crate::progress::done();
        report.rounds = round;
        report.remote_messages = pushed.remote_lines.clone();
        let pushed = pushed.refs;
        report.refs = pushed
            .iter()
            .map(|p| outcome(&p.remote_ref, push_word(p), p.rejected().then(|| p.summary.clone())))
            .collect();
        if !pushed.iter().any(cli::PushedRef::rejected) {
            return Ok(report);
        }
        // The server said no for its own reasons: asking again gets the same answer.
        if pushed.iter().any(cli::PushedRef::refused) {
            report.refused_by_server = true;
            return Ok(report);
        }
        if round + 1 < ROUNDS {
            let pulled = pull(repo, remote)?;
            // A ref the remote holds invalid state for stays rejected however often we retry.
            let hopeless = pushed
                .iter()
                .filter(|p| p.rejected())
                .all(|p| pulled.refs.iter().any(|r| r.name == p.remote_ref && r.result == RefResult::Refused));
            report.pulled.extend(pulled.refs);
            if hopeless {
                return Ok(report);
            }
        }
    }
    Ok(report)
}

/// Pull, then push (which pulls again on rejection), so both sides agree.
pub fn sync(repo: &Repo, remote: &RemoteName) -> Result<(PullReport, PushReport)> {
    let pulled = pull(repo, remote)?;
    let pushed = push(repo, remote)?;
    Ok((pulled, pushed))
}

// ---------------------------------------------------------------------------------------------
// Refs fetched by plain `git fetch` (after `remote setup`): brought in by the next command.

fn absorbed_path(repo: &Repo) -> std::path::PathBuf {
    repo.boulder_dir().join("absorbed.json")
}

fn load_absorbed(repo: &Repo) -> BTreeMap<String, String> {
    std::fs::read(absorbed_path(repo)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// Record that these tracking refs were brought in at these ids.
fn remember(repo: &Repo, key: &str, refs: &[(String, ObjectId)]) {
    let mut map = load_absorbed(repo);
    map.retain(|k, _| !k.starts_with(&tracking_prefix(key)));
    for (name, id) in refs {
        map.insert(name.clone(), id.to_string());
    }
    if let Ok(text) = serde_json::to_vec_pretty(&map) {
        let _ = crate::fsutil::write_atomic(&absorbed_path(repo), &text);
    }
}

/// Bring in whatever plain `git fetch` put under `refs/boulder-remotes/` since the last time.
/// Cheap when nothing is new: one ref listing and one small file. Returns what it did.
pub fn absorb_pending(repo: &Repo) -> Result<Vec<RefOutcome>> {
    let store = Store::new(repo)?;
    let tracked = store.list(refs::REMOTES)?;
    if tracked.is_empty() {
        return Ok(Vec::new());
    }
    let seen = load_absorbed(repo);
    let mut out = Vec::new();
    let mut done: BTreeMap<String, Vec<(String, ObjectId)>> = BTreeMap::new();
    let mut taken = 0usize;
    for (name, id) in tracked {
        if seen.get(&name).map(String::as_str) == Some(id.to_string().as_str()) {
            continue;
        }
        taken += 1;
        if taken > MAX_REFS_PER_PULL {
            out.push(over_limit(&name));
            continue;
        }
        let Some(rest) = name.strip_prefix(refs::REMOTES) else { continue };
        let Some((key, tail)) = rest.split_once('/') else { continue };
        let remote_ref =
            if tail == refs::REMOTE_NOTES_TAIL { NOTES_REF.to_string() } else { format!("{}{tail}", refs::BOULDER) };
        if let Some(o) = absorb_one(repo, &store, key, &remote_ref, id)? {
            out.push(o);
        }
        done.entry(key.to_string()).or_default().push((name, id));
    }
    let mut map = seen;
    for (_, refs) in done {
        for (name, id) in refs {
            map.insert(name, id.to_string());
        }
    }
    if let Ok(text) = serde_json::to_vec_pretty(&map) {
        let _ = crate::fsutil::write_atomic(&absorbed_path(repo), &text);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// `remote setup`: refspecs so that plain `git fetch` and `git push` carry the state too.

/// The push refspecs `remote setup` adds (globs, so a ref that does not exist yet is no error).
pub fn setup_push_specs() -> Vec<String> {
    vec![
        format!("{}*:{}*", state::STREAMS, state::STREAMS),
        format!("{}*:{}*", state::BOULDERS, state::BOULDERS),
        format!("{}*:{}*", state::PRD_REF, state::PRD_REF),
        format!("{NOTES_REF}*:{NOTES_REF}*"),
    ]
}

/// Add (or with `undo`, remove) the refspecs of `remote` in the repository's config file. When
/// the remote had no push refspecs, `HEAD` is added first so a plain `git push` still pushes the
/// current branch (as `push.default=current` would). Returns the `key value` lines changed.
pub fn setup(repo: &Repo, remote: &str, undo: bool) -> Result<Vec<String>> {
    if !repo.has_remote(remote) {
        return Err(Error::usage(format!("no remote named {remote:?}"))
            .hint("`git remote -v` lists them; add one with `git remote add NAME URL`"));
    }
    let r = RemoteName::new(repo, remote)?;
    let path = repo.common_dir.join("config");
    let mut file = ConfigFile::read(&path)?;
    let marker_key = "boulderSetup";
    let fetch = fetch_specs(&r.key);
    let push = setup_push_specs();
    let mut changed = Vec::new();
    {
        let mut section = file
            .section("remote", Some(remote))
            .map_err(|e| Error::internal(format!("cannot edit remote.{remote}: {e}")).with_source(e))?;
        let fetch_now = section.values("fetch");
        let push_now = section.values("push");
        let added_head = section.values(marker_key).iter().any(|v| v == "head");
        if undo {
            let keep = |now: &[String], ours: &[String]| -> Vec<String> {
                now.iter().filter(|v| !ours.contains(v)).cloned().collect()
            };
            let mut ours_push = push.clone();
            if added_head {
                ours_push.push("HEAD".into());
            }
            for (key, now, ours) in [("fetch", &fetch_now, &fetch), ("push", &push_now, &ours_push)] {
                let kept = keep(now, ours);
                if kept.len() == now.len() {
                    continue;
                }
                section.remove_all(key);
                for v in &kept {
                    section.push(key, v)?;
                }
                for v in now.iter().filter(|v| !kept.contains(v)) {
                    changed.push(format!("-remote.{remote}.{key} {v}"));
                }
            }
            section.remove_all(marker_key);
        } else {
            for spec in fetch.iter().filter(|s| !fetch_now.contains(s)) {
                section.push("fetch", spec)?;
                changed.push(format!("+remote.{remote}.fetch {spec}"));
            }
            let missing: Vec<&String> = push.iter().filter(|s| !push_now.contains(s)).collect();
            if !missing.is_empty() && push_now.is_empty() {
                section.push("push", "HEAD")?;
                section.push(marker_key, "head")?;
                changed.push(format!("+remote.{remote}.push HEAD"));
            }
            for spec in missing {
                section.push("push", spec)?;
                changed.push(format!("+remote.{remote}.push {spec}"));
            }
        }
    }
    if !changed.is_empty() {
        crate::fsutil::write_atomic(&path, &file.to_bytes()?)?;
    }
    Ok(changed)
}
