//! `git boulder work`: the worker. Round after round it picks the next ready stream — its
//! `depends_on` merged (as the remote's state says, when a remote is given: its state is pulled
//! first), not merged itself, no refused landing standing ([`crate::stream::attention`]), not
//! claimed by another machine, not run by another process here —
//! claims it on the remote, runs its loop (`git-boulder stream run NAME`, a child process in a
//! process group of its own), merges it when it completes (`git-boulder stream merge NAME`, through
//! the remote when one is given), releases the claim, pushes the state, and picks the next. A
//! stream whose review is required ([`crate::stream::gate`]) waits once complete: its claim is
//! let go, the worker looks at it again each time it pulls, lands it as soon as an approval of its
//! tip is there (from any machine), and gives it back to its agent when changes are requested. Up to
//! `parallel` streams at once, each in its own worktree with its own lock; every line the children
//! print is prefixed by `[stream] `.
//!
//! Ctrl-C (SIGINT, SIGTERM, SIGHUP) is passed to every child's process group (the agents stop, the
//! loops record STOPPED), then the claims are released: every stream is resumable by a rerun.
//!
//! It sits above `stream/` and `merge/`: it drives both, as child processes and through their
//! functions, and neither knows of it. [`Worker`] holds the state of a run; its children are in a
//! [`pool::Pool`], its claims in [`claims::Claims`]; what it does when a child ends is in
//! [`ended`], how it picks what to start in [`pick`], what it fetches and follows on the remote
//! in [`remote`].

mod claims;
mod ended;
mod pick;
mod pool;
mod remote;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::git::refs;
use crate::git::remote::RemoteName;
use crate::plan::Plan;
use crate::state::{self, Store, StreamState, StreamStatus};
use crate::workspace::Workspace;

pub use crate::sync::claim::CLAIM_TTL;

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Claim, merge and share state through this remote; `None`: one machine, local merges.
    pub remote: Option<String>,
    /// Streams run at once on this machine.
    pub parallel: usize,
    /// The agent command for every stream; empty: each stream's `agent` from the plan.
    pub command: Vec<String>,
    /// This program, run for `stream run` and `stream merge`.
    pub exe: PathBuf,
    /// Flags every child gets (`--trust`, `--quiet`, `--config PATH`).
    pub child_flags: Vec<String>,
    /// How often the remote's state is pulled while waiting for other machines.
    pub poll: Duration,
}

/// What became of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Run and merged by this worker.
    MergedHere,
    /// Merged meanwhile by another machine (the actor that recorded it).
    MergedElsewhere(String),
    /// Already merged when the worker started.
    MergedBefore,
    /// Its run or its merge failed.
    Failed(String),
    /// Stopped before its stories were done (max_iterations, `stream stop`, Ctrl-C).
    Stopped(String),
    /// Waits for these streams, which are not merged.
    Blocked(Vec<String>),
    /// Another machine holds it.
    ClaimedBy(String),
    /// Its landing was refused and nothing changed since: no worker takes it until its branch
    /// gets a new commit or `stream retry` (the reason, and what resolves it).
    NeedsAttention { reason: String, retry: String },
    /// Its budget or the plan's is spent: not claimed (which budget, by how much).
    BudgetSpent { why: String, reset: String },
    /// Complete, its review required and not landed: REVIEW (what is missing), APPROVED or
    /// CHANGES_REQUESTED, as the summary says it.
    Review(String),
}

impl Outcome {
    /// Merged, here or anywhere.
    pub fn is_merged(&self) -> bool {
        matches!(self, Outcome::MergedHere | Outcome::MergedElsewhere(_) | Outcome::MergedBefore)
    }

    /// The summary's words.
    pub fn describe(&self) -> String {
        match self {
            Outcome::MergedHere => "merged here".into(),
            Outcome::MergedElsewhere(by) => format!("merged by another machine ({by})"),
            Outcome::MergedBefore => "merged before this run".into(),
            Outcome::Failed(why) => format!("failed: {why}"),
            Outcome::Stopped(why) => format!("stopped: {why} (a rerun resumes it)"),
            Outcome::Blocked(by) => format!("blocked by {}", by.join(", ")),
            Outcome::ClaimedBy(by) => format!("claimed by {by}"),
            Outcome::BudgetSpent { why, reset } => {
                format!("budget spent: {why} (raise the budget in the plan, or `{reset}`)")
            }
            Outcome::NeedsAttention { reason, retry } => {
                format!("needs attention: {reason} (fixed by a new commit on its branch, or `{retry}`)")
            }
            Outcome::Review(what) => what.clone(),
        }
    }
}

/// The worker's result: each stream of the plan with its outcome, in dependency order.
#[derive(Debug, Clone)]
pub struct Summary {
    pub rows: Vec<(String, Outcome)>,
    /// Ctrl-C ended it.
    pub interrupted: bool,
}

impl Summary {
    /// Every stream merged, and not interrupted.
    pub fn success(&self) -> bool {
        !self.interrupted && self.rows.iter().all(|(_, o)| o.is_merged())
    }
}

/// Where the children's lines and the worker's own notes go.
pub trait Sink: Send + Sync {
    /// A line for stream `stream` (`None`: the worker's own), to stdout (`out`) or stderr.
    fn line(&self, stream: Option<&str>, out: bool, text: &str);
}

/// Run the worker until nothing is left that it can do; see the module docs.
pub fn work(ws: &Workspace, plan: &Plan, opts: &Options, sink: Arc<dyn Sink>) -> Result<Summary> {
    let mut env = Env::new(ws, plan, opts, sink)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    // A packed-refs.lock a killed process left blocks every ref update (claims, records, merges):
    // stop before claiming anything, rather than claim on the remote what cannot be recorded here.
    if let Some(e) = refs::stale_packed_lock(&ws.repo, "the state's refs") {
        return Err(e);
    }
    env.me = Store::new(&ws.repo)?.actor()?;
    // Held while this worker runs: `doctor` tells this machine's claims no live worker holds.
    let _worker = WorkerLock::take(ws)?;
    Worker::new(env, interrupted)?.run()
}

/// What a worker's run is given and never changes while it runs.
pub(crate) struct Env<'a> {
    ws: &'a Workspace,
    plan: &'a Plan,
    opts: &'a Options,
    sink: Arc<dyn Sink>,
    /// The remote claims, merges and state go through.
    remote: Option<RemoteName>,
    /// The plan's streams, in dependency order.
    order: Vec<String>,
    /// This machine's actor, as its claims and records name it (read once the refusals are past).
    me: String,
}

impl<'a> Env<'a> {
    /// Refuse up front what the run would be refused later: untrusted commands, a stream without
    /// an agent, a remote that does not resolve, dependencies in a circle.
    fn new(ws: &'a Workspace, plan: &'a Plan, opts: &'a Options, sink: Arc<dyn Sink>) -> Result<Env<'a>> {
        // The plan's agents (and verify, run by the merges) run only once trusted: refuse up front.
        // So do setup (a worktree made here) and the prompt, which every agent is given.
        let mut keys =
            [crate::trust::VERIFY, crate::trust::SETUP, crate::trust::PROMPT_TEMPLATE].map(String::from).to_vec();
        if opts.command.is_empty() {
            keys.extend(plan.streams.iter().filter_map(|s| s.agent.as_deref()).map(crate::trust::agent_key));
        }
        crate::trust::require(&ws.repo, plan, "work", &keys)?;
        if opts.command.is_empty() {
            if let Some(s) = plan.streams.iter().find(|s| s.agent.is_none()) {
                return Err(Error::usage(format!("stream {} has no agent and no command was given", s.name))
                    .hint("run `git boulder work -- CMD ARGS…`, or set `agent:` for every stream in the plan"));
            }
        }
        let remote = match &opts.remote {
            Some(r) => Some(crate::sync::resolve(&ws.repo, Some(r), &plan.settings.base_branch)?),
            None => None,
        };
        let names: Vec<String> = plan.streams.iter().map(|s| s.name.clone()).collect();
        let order = crate::plan::topo_order(plan, &names)
            .map_err(|e| Error::usage(e.to_string()).hint("fix depends_on in .boulder/streams.yaml"))?;
        Ok(Env { ws, plan, opts, sink, remote, order, me: String::new() })
    }

    /// The worker's own note (`stream`: about that stream), to stderr.
    fn say(&self, stream: Option<&str>, text: &str) {
        self.sink.line(stream, false, text)
    }

    fn stream(&self, name: &str) -> &'a crate::plan::StreamDef {
        self.plan.stream(name).expect("a stream of the plan")
    }
}

/// A worker's run: its children, its claims, and what it decided so far.
pub(crate) struct Worker<'a> {
    env: Env<'a>,
    /// Set by Ctrl-C.
    interrupted: Arc<AtomicBool>,
    /// Ctrl-C was seen and acted on.
    was_interrupted: bool,
    /// Streams merged or failed before this run: the first are done, the second may be retried.
    at_start: HashMap<String, StreamStatus>,
    /// What became of the streams decided so far (a failed or stopped stream is not run again).
    outcomes: BTreeMap<String, Outcome>,
    /// The children running: a stream's loop, merge or conflict resolution each.
    pool: pool::Pool,
    /// The claims this worker holds on the remote.
    claims: claims::Claims,
    /// Landings of each stream refused for a conflict and handed back to its agent.
    resolves: HashMap<String, u32>,
    /// The commit hooks of the streams' worktrees were checked (once, before the first start).
    hooks_checked: bool,
    last_pull: Instant,
    /// Streams whose child ended since their work was last shared.
    ended: Vec<String>,
    /// Streams that ended here whose work could not be shared yet: their claims are kept.
    unshared: Vec<String>,
    /// What was last said of each stream waiting for review (said again only when it changes).
    review_said: HashMap<String, String>,
    last_share: Instant,
}

impl<'a> Worker<'a> {
    fn new(env: Env<'a>, interrupted: Arc<AtomicBool>) -> Result<Worker<'a>> {
        if let Some(r) = &env.remote {
            remote::pull(&env, r);
        }
        let at_start: HashMap<String, StreamStatus> =
            env.order.iter().map(|n| Ok((n.clone(), status_of(env.ws, n)?))).collect::<Result<_>>()?;
        Ok(Worker {
            env,
            interrupted,
            was_interrupted: false,
            at_start,
            outcomes: BTreeMap::new(),
            pool: pool::Pool::default(),
            claims: claims::Claims::default(),
            resolves: HashMap::new(),
            hooks_checked: false,
            last_pull: Instant::now(),
            ended: Vec::new(),
            unshared: Vec::new(),
            review_said: HashMap::new(),
            last_share: Instant::now(),
        })
    }

    /// Rounds until nothing is left to do, then the summary. Any error on the way stops what runs
    /// and releases its claims before it is returned.
    fn run(mut self) -> Result<Summary> {
        if let Err(e) = self.rounds() {
            self.pool.stop_all(&self.env);
            let held = self.claims.held();
            claims::share_then_release(&self.env, &mut self.claims, held);
            return Err(e);
        }
        self.finish()
    }

    fn rounds(&mut self) -> Result<()> {
        loop {
            if self.interrupted.load(Ordering::SeqCst) {
                self.was_interrupted = true;
                self.env.say(None, "interrupted: stopping the agents, releasing the claims");
                self.pool.stop_all(&self.env);
                return Ok(());
            }
            while let Some((job, status)) = self.pool.next_ended()? {
                self.job_ended(job, status)?;
            }
            self.share_ended();
            self.claims.renew(&self.env);
            let picked = match self.pool.len() < self.env.opts.parallel {
                true => self.pick()?,
                false => pick::Picked { started: false, waiting_elsewhere: true },
            };
            if self.pool.is_empty() && !picked.started && !picked.waiting_elsewhere {
                return Ok(());
            }
            let nap = if self.pool.is_empty() { self.env.opts.poll } else { Duration::from_millis(100) };
            self.pool.nap(nap, &self.interrupted);
        }
    }

    /// The branch and the state go out before the claims are released: a machine that sees no
    /// claim on a stream also sees how it ended, and has its commits. Work that could not be
    /// shared keeps its claim, and is tried again each poll.
    fn share_ended(&mut self) {
        if self.ended.is_empty() && (self.unshared.is_empty() || self.last_share.elapsed() < self.env.opts.poll) {
            return;
        }
        let mut names = std::mem::take(&mut self.unshared);
        names.append(&mut self.ended);
        self.unshared = claims::share_then_release(&self.env, &mut self.claims, names);
        self.last_share = Instant::now();
    }

    /// Whatever ran here is stopped now: share its branch and state, release its claim (kept when
    /// its work could not be shared); the base follows the remote's. Then each stream's outcome.
    fn finish(mut self) -> Result<Summary> {
        let held = self.claims.held();
        let kept = claims::share_then_release(&self.env, &mut self.claims, held);
        if let Some(r) = &self.env.remote {
            for name in &kept {
                self.env.say(
                    Some(name),
                    &format!(
                        "warning: its work is not on {} yet, so this machine keeps the claim; rerun `git boulder work --remote {}` once {} takes pushes",
                        r.given, r.given, r.given
                    ),
                );
            }
            remote::follow_base(&self.env, r);
        }
        let seen = pick::Seen::now(&self.env)?;
        let mut rows = Vec::new();
        for name in &self.env.order {
            let outcome = match self.outcomes.remove(name) {
                Some(o) => o,
                None => match pick::view(&self.env, &self.at_start, self.env.stream(name), &seen)? {
                    pick::View::Done(o) => o,
                    pick::View::Elsewhere(by) => Outcome::ClaimedBy(by),
                    pick::View::Waiting(deps) => Outcome::Blocked(deps),
                    pick::View::Spent(why) => {
                        Outcome::BudgetSpent { why, reset: format!("git boulder spend reset {name}") }
                    }
                    pick::View::Review(what) => {
                        Outcome::Review(format!("REVIEW: waiting for review (`git boulder review {name}`): {what}"))
                    }
                    pick::View::Land => Outcome::Review("APPROVED: not landed yet (a rerun lands it)".into()),
                    pick::View::Changes => {
                        Outcome::Review("CHANGES_REQUESTED: its agent has not made them yet (a rerun runs it)".into())
                    }
                    pick::View::Ready if self.was_interrupted => Outcome::Stopped("interrupted".into()),
                    pick::View::Ready => Outcome::Stopped("not started".into()),
                },
            };
            rows.push((name.clone(), outcome));
        }
        Ok(Summary { rows, interrupted: self.was_interrupted })
    }
}

fn ws_state(ws: &Workspace, name: &str) -> Result<Option<StreamState>> {
    Ok(Store::new(&ws.repo)?.read::<StreamState>(&state::stream_ref(name))?.map(|e| e.state))
}

fn status_of(ws: &Workspace, name: &str) -> Result<StreamStatus> {
    Ok(ws_state(ws, name)?.map(|s| s.status).unwrap_or_default())
}

/// The lock `worker-<pid>` a worker holds while it runs (its file removed after).
struct WorkerLock(Option<crate::lock::LockGuard>);

impl WorkerLock {
    fn take(ws: &Workspace) -> Result<WorkerLock> {
        let name = format!("{WORKER_LOCK}{}", std::process::id());
        Ok(WorkerLock(Some(crate::lock::acquire(&ws.repo, &name, false, "git boulder work")?)))
    }
}

impl Drop for WorkerLock {
    fn drop(&mut self) {
        if let Some(g) = self.0.take() {
            let path = g.path().to_owned();
            drop(g);
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The name of a worker's lock, before its process id.
pub const WORKER_LOCK: &str = "worker-";

/// A [`Sink`] printing to this process's stdout and stderr, one whole line at a time.
pub struct Printer {
    pub quiet: bool,
}

impl Sink for Printer {
    fn line(&self, stream: Option<&str>, out: bool, text: &str) {
        let text = crate::text::inert(text);
        let line = match stream {
            Some(s) if text.is_empty() => format!("[{s}]\n"),
            Some(s) => format!("[{s}] {text}\n"),
            None => format!("work: {text}\n"),
        };
        if out {
            let _ = std::io::stdout().lock().write_all(line.as_bytes());
        } else if !self.quiet || stream.is_some() {
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }
}
