//! `git boulder work`: the worker. Round after round it picks the next ready stream — its
//! `depends_on` merged (as the remote's state says, when a remote is given: its state is pulled
//! first), not merged itself, no refused landing standing ([`crate::stream::attention`]), not
//! claimed by another machine, not run by another process here —
//! claims it on the remote, runs its loop (`git-boulder stream run NAME`, a child process in a
//! process group of its own), merges it when it completes (`git-boulder stream merge NAME`, through
//! the remote when one is given), releases the claim, pushes the state, and picks the next. Up to
//! `parallel` streams at once, each in its own worktree with its own lock; every line the children
//! print is prefixed by `[stream] `.
//!
//! Ctrl-C (SIGINT, SIGTERM, SIGHUP) is passed to every child's process group (the agents stop, the
//! loops record STOPPED), then the claims are released: every stream is resumable by a rerun.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::git::refs;
use crate::git::remote::RemoteName;
use crate::plan::{Plan, StreamDef};
use crate::state::{self, Store, StreamState, StreamStatus};
use crate::sync::claim::CLAIM_TTL;
use crate::workspace::Workspace;

/// Claims of one stream that may fail in a row (not taken by another machine meanwhile) before
/// the worker gives it up.
const MAX_CLAIM_ERRORS: u32 = 10;

/// How long the children get to stop after Ctrl-C before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(20);

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
            Outcome::NeedsAttention { reason, retry } => {
                format!("needs attention: {reason} (fixed by a new commit on its branch, or `{retry}`)")
            }
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

enum Phase {
    Run,
    Merge,
    /// `stream resolve` after a landing refused for a conflict (`on_conflict: agent`), from the
    /// branch's tip then.
    Resolve(Option<crate::git::ObjectId>),
}

struct Job {
    stream: String,
    phase: Phase,
    child: Child,
    pumps: Vec<std::thread::JoinHandle<()>>,
}

/// A stream as this round sees it.
enum View {
    Done(Outcome),
    Ready,
    /// Another machine holds it, or another process here runs it.
    Elsewhere(String),
    Waiting(Vec<String>),
}

/// Run the worker until nothing is left that it can do; see the module docs.
pub fn work(ws: &Workspace, plan: &Plan, opts: &Options, sink: Arc<dyn Sink>) -> Result<Summary> {
    let say = |stream: Option<&str>, text: &str| sink.line(stream, false, text);
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
    let me = Store::new(&ws.repo)?.actor()?;
    // Held while this worker runs: `doctor` tells this machine's claims no live worker holds.
    let _worker = WorkerLock::take(ws)?;
    if let Some(r) = &remote {
        pull(ws, plan, r, &say);
    }
    // Streams merged or failed before this run: the first are done, the second may be retried.
    let at_start: HashMap<String, StreamStatus> =
        names.iter().map(|n| Ok((n.clone(), status_of(ws, n)?))).collect::<Result<_>>()?;
    let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut jobs: Vec<Job> = Vec::new();
    let mut claims: HashMap<String, f64> = HashMap::new();
    let mut claim_errors: HashMap<String, u32> = HashMap::new();
    // Landings of each stream refused for a conflict and handed back to its agent.
    let mut resolves: HashMap<String, u32> = HashMap::new();
    let mut hooks_checked = false;
    let mut warned: BTreeSet<(String, String)> = BTreeSet::new();
    let mut last_pull = Instant::now();
    let mut ended: Vec<String> = Vec::new();
    // Streams that ended here whose work could not be shared yet: their claims are kept.
    let mut unshared: Vec<String> = Vec::new();
    let mut last_share = Instant::now();
    let mut was_interrupted = false;
    // Any error on the way stops what runs and releases its claims before it is returned.
    let ran = (|| -> Result<()> {
        loop {
            if interrupted.load(Ordering::SeqCst) {
                was_interrupted = true;
                say(None, "interrupted: stopping the agents, releasing the claims");
                stop_all(&mut jobs, &say);
                break;
            }
            // Children that ended.
            let mut i = 0;
            while i < jobs.len() {
                let Some(status) = jobs[i].child.try_wait()? else {
                    i += 1;
                    continue;
                };
                let mut job = jobs.remove(i);
                for p in job.pumps.drain(..) {
                    let _ = p.join();
                }
                let name = job.stream.clone();
                match job.phase {
                    Phase::Run => {
                        let st = ws_state(ws, &name)?;
                        let reason =
                            |default: &str| st.as_ref().and_then(|s| s.reason.clone()).unwrap_or(default.into());
                        let outcome = match st.as_ref().map(|s| s.status) {
                            Some(StreamStatus::Completed) => {
                                say(Some(&name), "run completed; merging");
                                match spawn_merge(opts, remote.as_ref(), &name, &sink) {
                                    Ok(j) => {
                                        jobs.push(j);
                                        continue;
                                    }
                                    Err(e) => Outcome::Failed(format!("merge: {}", e.message)),
                                }
                            }
                            Some(StreamStatus::Stopped) => Outcome::Stopped(reason("stopped")),
                            Some(StreamStatus::Failed) => Outcome::Failed(reason("failed")),
                            _ => Outcome::Failed(format!("stream run exited with {}", exit_text(status))),
                        };
                        say(Some(&name), &outcome.describe());
                        outcomes.insert(name.clone(), outcome);
                    }
                    Phase::Merge => {
                        let merged = status_of(ws, &name)? == StreamStatus::Merged;
                        let stream = plan.stream(&name).expect("a stream of the plan");
                        let outcome = if status.success() && merged {
                            Outcome::MergedHere
                        } else if let Some(job) =
                            hand_back(ws, plan, stream, opts, remote.as_ref(), &mut resolves, &sink)
                        {
                            // A conflict, handed back to the agent (on_conflict: agent): the
                            // refusal recorded stands until the branch moves past it.
                            jobs.push(job);
                            continue;
                        } else if let Some(o) = needs_attention(ws, stream)? {
                            o
                        } else {
                            Outcome::Failed(format!("stream merge exited with {}", exit_text(status)))
                        };
                        say(Some(&name), &outcome.describe());
                        outcomes.insert(name.clone(), outcome);
                    }
                    Phase::Resolve(before) => {
                        let stream = plan.stream(&name).expect("a stream of the plan");
                        let after = ws.repo.branch_tip(&stream.branch)?;
                        let outcome = if status.success() && after != before {
                            say(Some(&name), "conflict resolved by the agent; landing again");
                            match spawn_merge(opts, remote.as_ref(), &name, &sink) {
                                Ok(j) => {
                                    jobs.push(j);
                                    continue;
                                }
                                Err(e) => Outcome::Failed(format!("merge: {}", e.message)),
                            }
                        } else if let Some(o) = needs_attention(ws, stream)? {
                            say(Some(&name), "the agent did not resolve the conflict; the refusal stands");
                            o
                        } else {
                            Outcome::Failed(format!(
                                "the landing met a conflict the agent did not resolve (stream resolve exited with {})",
                                exit_text(status)
                            ))
                        };
                        say(Some(&name), &outcome.describe());
                        outcomes.insert(name.clone(), outcome);
                    }
                }
                ended.push(name);
            }
            // The branch and the state go out before the claims are released: a machine that sees
            // no claim on a stream also sees how it ended, and has its commits. Work that could not
            // be shared keeps its claim, and is tried again each poll.
            if !ended.is_empty() || (!unshared.is_empty() && last_share.elapsed() >= opts.poll) {
                let mut names = std::mem::take(&mut unshared);
                names.append(&mut ended);
                unshared = share_then_release(ws, plan, remote.as_ref(), &me, names, &mut claims, &say);
                last_share = Instant::now();
            }
            renew(ws, remote.as_ref(), &me, &mut claims, &say);
            // Pick what is ready, up to the limit.
            let mut waiting_elsewhere = false;
            let mut started = false;
            if jobs.len() < opts.parallel {
                if let Some(r) = &remote {
                    if jobs.is_empty() || last_pull.elapsed() >= opts.poll {
                        pull(ws, plan, r, &say);
                        last_pull = Instant::now();
                    }
                }
                let seen: Vec<(String, String, crate::sync::claim::Claim)> = match &remote {
                    Some(_) => crate::sync::claim::seen(&ws.repo)?,
                    None => Vec::new(),
                };
                if let Some(r) = &remote {
                    warn_invalid_claims(r, &seen, &mut warned, &say);
                }
                let locked: BTreeSet<String> = crate::lock::holders(&ws.repo).into_iter().map(|(n, _)| n).collect();
                for name in &order {
                    if jobs.len() >= opts.parallel {
                        break;
                    }
                    // Decided already (a failed or stopped stream is not run again by this worker).
                    if outcomes.contains_key(name) || jobs.iter().any(|j| j.stream == *name) {
                        continue;
                    }
                    let stream = plan.stream(name).expect("a stream of the plan");
                    let view = view(ws, stream, &at_start, &seen, remote.as_ref(), &me, &locked)?;
                    match view {
                        View::Done(o) => {
                            if let Outcome::MergedElsewhere(by) = &o {
                                say(Some(name), &format!("merged by another machine ({by})"));
                            }
                            // A claim of this machine's left on a merged stream (its worker was
                            // killed after the merge): released, not left for an hour.
                            if let Some(r) = remote.as_ref().filter(|_| o.is_merged()) {
                                if seen.iter().any(|(key, s, c)| *key == r.key && s == name && c.actor == me) {
                                    match crate::sync::claim::release(&ws.repo, r, name, &me, false) {
                                        Ok(_) => say(
                                            Some(name),
                                            &format!("released this machine's claim left on {}", r.given),
                                        ),
                                        Err(e) => say(
                                            Some(name),
                                            &format!("warning: could not release the claim left: {}", e.message),
                                        ),
                                    }
                                }
                            }
                            outcomes.insert(name.clone(), o);
                        }
                        View::Elsewhere(_) => {
                            claim_errors.remove(name);
                            waiting_elsewhere = true;
                        }
                        View::Waiting(_) => {}
                        View::Ready => {
                            if !hooks_checked {
                                // Commits in the worktrees are recorded by the hooks, as `stream init` sets up.
                                let _ = crate::hooks::streams::ensure(&ws.repo, false);
                                hooks_checked = true;
                            }
                            match start(ws, plan, stream, opts, remote.as_ref(), &me, &mut claims, &sink) {
                                Ok(job) => {
                                    jobs.push(job);
                                    started = true;
                                }
                                Err(NotStarted::Merged) => waiting_elsewhere = true,
                                Err(NotStarted::Failed(e)) => {
                                    say(Some(name), &format!("not started: {}", e.message));
                                    outcomes.insert(name.clone(), Outcome::Failed(e.message));
                                }
                                Err(NotStarted::Claim(e)) => {
                                    // Mostly another machine won the race for it: look again next round. A remote
                                    // that keeps turning claims down ends it.
                                    let n = claim_errors.entry(name.clone()).or_default();
                                    *n += 1;
                                    say(Some(name), &format!("not started: {}", e.message));
                                    if *n >= MAX_CLAIM_ERRORS {
                                        outcomes.insert(name.clone(), Outcome::Failed(e.message));
                                    } else {
                                        waiting_elsewhere = true;
                                    }
                                }
                            }
                        }
                    }
                }
            } else {
                waiting_elsewhere = true;
            }
            if jobs.is_empty() && !started && !waiting_elsewhere {
                break;
            }
            let nap = if jobs.is_empty() { opts.poll } else { Duration::from_millis(100) };
            let until = Instant::now() + nap;
            while Instant::now() < until && !interrupted.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(25));
                if jobs.iter_mut().any(|j| matches!(j.child.try_wait(), Ok(Some(_)))) {
                    break;
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = ran {
        stop_all(&mut jobs, &say);
        let held: Vec<String> = claims.keys().cloned().collect();
        share_then_release(ws, plan, remote.as_ref(), &me, held, &mut claims, &say);
        return Err(e);
    }
    // Whatever ran here is stopped now: share its branch and state, release its claim (kept when
    // its work could not be shared); the base follows the remote's.
    let held: Vec<String> = claims.keys().cloned().collect();
    let kept = share_then_release(ws, plan, remote.as_ref(), &me, held, &mut claims, &say);
    if let Some(r) = &remote {
        for name in &kept {
            say(
                Some(name),
                &format!(
                    "warning: its work is not on {} yet, so this machine keeps the claim; rerun `git boulder work --remote {}` once {} takes pushes",
                    r.given, r.given, r.given
                ),
            );
        }
        follow_base(ws, plan, r, &say);
    }
    let seen: Vec<(String, String, crate::sync::claim::Claim)> = match &remote {
        Some(_) => crate::sync::claim::seen(&ws.repo)?,
        None => Vec::new(),
    };
    let locked: BTreeSet<String> = crate::lock::holders(&ws.repo).into_iter().map(|(n, _)| n).collect();
    let mut rows = Vec::new();
    for name in &order {
        let outcome = match outcomes.remove(name) {
            Some(o) => o,
            None => {
                let stream = plan.stream(name).expect("a stream of the plan");
                match view(ws, stream, &at_start, &seen, remote.as_ref(), &me, &locked)? {
                    View::Done(o) => o,
                    View::Elsewhere(by) => Outcome::ClaimedBy(by),
                    View::Waiting(deps) => Outcome::Blocked(deps),
                    View::Ready if was_interrupted => Outcome::Stopped("interrupted".into()),
                    View::Ready => Outcome::Stopped("not started".into()),
                }
            }
        };
        rows.push((name.clone(), outcome));
    }
    Ok(Summary { rows, interrupted: was_interrupted })
}

/// The outcome of a stream whose refusal stands.
fn attention_outcome(stream: &StreamDef, r: &crate::state::Refusal) -> Outcome {
    let reason = format!("refused ({}): {}", r.refusal, r.reason.lines().next().unwrap_or_default());
    Outcome::NeedsAttention { reason, retry: crate::stream::attention::retry_command(&stream.name) }
}

/// [`attention_outcome`] of `stream`, when its refusal stands.
fn needs_attention(ws: &Workspace, stream: &StreamDef) -> Result<Option<Outcome>> {
    let Some(st) = ws_state(ws, &stream.name)? else { return Ok(None) };
    Ok(crate::stream::attention::standing(&ws.repo, stream, &st)?.map(|r| attention_outcome(stream, r)))
}

fn ws_state(ws: &Workspace, name: &str) -> Result<Option<StreamState>> {
    Ok(Store::new(&ws.repo)?.read::<StreamState>(&state::stream_ref(name))?.map(|e| e.state))
}

fn status_of(ws: &Workspace, name: &str) -> Result<StreamStatus> {
    Ok(ws_state(ws, name)?.map(|s| s.status).unwrap_or_default())
}

fn view(
    ws: &Workspace,
    stream: &StreamDef,
    at_start: &HashMap<String, StreamStatus>,
    seen: &[(String, String, crate::sync::claim::Claim)],
    remote: Option<&RemoteName>,
    me: &str,
    locked: &BTreeSet<String>,
) -> Result<View> {
    let store = Store::new(&ws.repo)?;
    let entry = store.read::<StreamState>(&state::stream_ref(&stream.name))?;
    let status = entry.as_ref().map(|e| e.state.status).unwrap_or_default();
    if status == StreamStatus::Merged {
        if at_start.get(&stream.name) == Some(&StreamStatus::Merged) {
            return Ok(View::Done(Outcome::MergedBefore));
        }
        // The machine that ran it last merged it (the worker merges what it ran).
        let by = entry.map(|e| e.state.last_run.map(|r| r.actor).unwrap_or(e.op.actor)).unwrap_or_default();
        return Ok(View::Done(Outcome::MergedElsewhere(by)));
    }
    // A refused landing nothing changed since: left for a person.
    if let Some(st) = entry.as_ref().map(|e| &e.state) {
        if let Some(r) = crate::stream::attention::standing(&ws.repo, stream, st)? {
            return Ok(View::Done(attention_outcome(stream, r)));
        }
    }
    if status == StreamStatus::Failed && at_start.get(&stream.name) != Some(&StreamStatus::Failed) {
        // Failed during this run, run by another machine or process: not tried again by this
        // worker.
        let why = entry.and_then(|e| e.state.reason).unwrap_or_else(|| "failed".into());
        return Ok(View::Done(Outcome::Failed(format!("{why} (run elsewhere)"))));
    }
    if let Some(r) = remote {
        if let Some((_, _, c)) =
            seen.iter().find(|(key, s, c)| *key == r.key && *s == stream.name && c.actor != me && !c.expired())
        {
            return Ok(View::Elsewhere(format!("{} on {}", c.actor, c.host)));
        }
    }
    if locked.contains(&format!("stream-{}", stream.name)) {
        return Ok(View::Elsewhere("another process on this machine".into()));
    }
    let mut waiting = Vec::new();
    for dep in &stream.depends_on {
        let merged =
            store.read::<StreamState>(&state::stream_ref(dep))?.is_some_and(|e| e.state.status == StreamStatus::Merged);
        if !merged {
            waiting.push(dep.clone());
        }
    }
    Ok(if waiting.is_empty() { View::Ready } else { View::Waiting(waiting) })
}

/// Claim `stream` (with a remote), make its worktree when missing, and start its loop.
#[allow(clippy::too_many_arguments)]
fn start(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    opts: &Options,
    remote: Option<&RemoteName>,
    me: &str,
    claims: &mut HashMap<String, f64>,
    sink: &Arc<dyn Sink>,
) -> std::result::Result<Job, NotStarted> {
    let name = &stream.name;
    if let Some(r) = remote {
        let (claim, _) = crate::sync::claim::take(&ws.repo, r, name, me, CLAIM_TTL).map_err(NotStarted::Claim)?;
        sink.line(Some(name), false, &format!("claimed on {} until {}", r.given, claim.expires));
        claims.insert(name.clone(), crate::time::parse_rfc3339(&claim.expires).unwrap_or(0.0));
    }
    let started = (|| {
        if let Some(r) = remote {
            // Claimed: what the remote says of the stream now is final until the claim is let go.
            crate::sync::pull(&ws.repo, r).map_err(NotStarted::Claim)?;
            if status_of(ws, name).map_err(NotStarted::Failed)? == StreamStatus::Merged {
                return Err(NotStarted::Merged);
            }
            // Refused meanwhile on another machine: the next round reports it.
            if needs_attention(ws, stream).map_err(NotStarted::Failed)?.is_some() {
                return Err(NotStarted::Merged);
            }
            follow_base(ws, plan, r, &|s, t| sink.line(s, false, t));
            adopt_branch(ws, stream, r, &|s, t| sink.line(s, false, t)).map_err(NotStarted::Failed)?;
        }
        let wt = ws.worktree_path(plan, name).map_err(NotStarted::Failed)?;
        // Only a whole worktree reaches an agent: one missing, or whose making was interrupted
        // (a killed `stream init`), is made or finished first, as a rerun of `stream init` does.
        let unfinished = crate::worktree::not_whole(&ws.repo, &wt).map_err(NotStarted::Failed)?;
        if let Some(why) = unfinished {
            let existed = wt.join(".git").exists();
            let report = crate::stream::lifecycle::init(ws, plan, stream).map_err(NotStarted::Failed)?;
            if let Some(e) = report.setup_failed {
                return Err(NotStarted::Failed(Error::refused(format!("setup failed: {e}"))));
            }
            let what = match existed {
                true => format!("worktree finished at {} ({why})", report.path.display()),
                false => format!("worktree made at {}", report.path.display()),
            };
            sink.line(Some(name), false, &what);
        }
        let mut args: Vec<String> = opts.child_flags.clone();
        args.extend(["stream".into(), "run".into(), name.clone(), "--worker".into()]);
        if let Some(r) = remote {
            args.extend(["--push-to".into(), r.given.clone()]);
        }
        if !opts.command.is_empty() {
            args.push("--".into());
            args.extend(opts.command.iter().cloned());
        }
        spawn(opts, name, Phase::Run, &args, sink).map_err(NotStarted::Failed)
    })();
    if started.is_err() {
        release(ws, remote, me, name, claims, &|s, t| sink.line(s, false, t));
    }
    started
}

/// Why a ready stream was not started.
enum NotStarted {
    /// Not claimed: another machine took it first, or the remote turned the claim down.
    Claim(Error),
    /// Merged (or its landing refused) by another machine meanwhile.
    Merged,
    /// Claimed, but its worktree or its loop could not be started.
    Failed(Error),
}

/// Under `settings.on_conflict: agent`, a landing refused for a conflict with what landed first
/// goes back to the stream's agent: `stream resolve` rebases the branch onto the base's tip in the
/// stream's worktree and runs the agent where the rebase stops; then the landing is tried again.
/// At most `max_failures` times per stream; `None` when the refusal is not handed back.
fn hand_back(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    opts: &Options,
    remote: Option<&RemoteName>,
    resolves: &mut HashMap<String, u32>,
    sink: &Arc<dyn Sink>,
) -> Option<Job> {
    if plan.settings.on_conflict != crate::plan::OnConflict::Agent {
        return None;
    }
    let tries = resolves.entry(stream.name.clone()).or_default();
    if *tries >= plan.settings.boulder.max_failures.max(1) {
        return None;
    }
    match crate::merge::resolve::conflicts(ws, plan, stream, remote.map(|r| r.key.as_str())) {
        Ok(true) => {}
        Ok(false) => return None,
        Err(e) => {
            sink.line(
                Some(&stream.name),
                false,
                &format!("warning: cannot check the refusal for conflicts: {}", e.message),
            );
            return None;
        }
    }
    *tries += 1;
    let before = ws.repo.branch_tip(&stream.branch).ok().flatten();
    let mut args: Vec<String> = opts.child_flags.clone();
    args.extend(["stream".into(), "resolve".into(), stream.name.clone()]);
    match remote {
        Some(r) => args.extend(["--remote".into(), r.given.clone()]),
        None => args.push("--no-remote".into()),
    }
    if !opts.command.is_empty() {
        args.push("--".into());
        args.extend(opts.command.iter().cloned());
    }
    sink.line(
        Some(&stream.name),
        false,
        &format!(
            "the landing met a conflict: handing it to the agent (on_conflict: agent, {tries}/{})",
            plan.settings.boulder.max_failures.max(1)
        ),
    );
    match spawn(opts, &stream.name, Phase::Resolve(before), &args, sink) {
        Ok(job) => Some(job),
        Err(e) => {
            sink.line(Some(&stream.name), false, &format!("warning: cannot start stream resolve: {}", e.message));
            None
        }
    }
}

fn spawn_merge(opts: &Options, remote: Option<&RemoteName>, name: &str, sink: &Arc<dyn Sink>) -> Result<Job> {
    let mut args: Vec<String> = opts.child_flags.clone();
    args.extend(["stream".into(), "merge".into(), name.to_string(), "--wait".into()]);
    match remote {
        Some(r) => args.extend(["--remote".into(), r.given.clone()]),
        // Local merges, whatever settings.merge_remote says.
        None => args.push("--no-remote".into()),
    }
    spawn(opts, name, Phase::Merge, &args, sink)
}

/// Start our own program (never through a shell) in a process group of its own, its lines
/// prefixed.
fn spawn(opts: &Options, name: &str, phase: Phase, args: &[String], sink: &Arc<dyn Sink>) -> Result<Job> {
    let mut cmd = Command::new(&opts.exe);
    crate::context::export(&mut cmd);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().map_err(|e| {
        Error::internal(format!("cannot start {}: {e}", opts.exe.display())).hint("reinstall git-boulder")
    })?;
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        pumps.push(pump(out, name.to_string(), true, sink.clone()));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(pump(err, name.to_string(), false, sink.clone()));
    }
    Ok(Job { stream: name.to_string(), phase, child, pumps })
}

fn pump(from: impl Read + Send + 'static, name: String, out: bool, sink: Arc<dyn Sink>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(from);
        let mut line = Vec::new();
        while let Ok(n) = reader.read_until(b'\n', &mut line) {
            if n == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&line);
            sink.line(Some(&name), out, text.trim_end_matches(['\n', '\r']));
            line.clear();
        }
    })
}

/// Pass Ctrl-C to every child's process group, wait for them (killing what outlives the grace).
fn stop_all(jobs: &mut Vec<Job>, say: &dyn Fn(Option<&str>, &str)) {
    for j in jobs.iter() {
        if let Some(pid) = rustix::process::Pid::from_raw(j.child.id() as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::INT);
        }
    }
    let until = Instant::now() + STOP_GRACE;
    for j in jobs.iter_mut() {
        loop {
            match j.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= until => {
                    say(Some(&j.stream), "did not stop in time: killed");
                    if let Some(pid) = rustix::process::Pid::from_raw(j.child.id() as i32) {
                        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                    }
                    let _ = j.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(25)),
            }
        }
        for p in j.pumps.drain(..) {
            let _ = p.join();
        }
    }
    jobs.clear();
}

/// Share the branches of `names` that are not merged (see [`crate::stream::share`]) and the state
/// with `remote`, then release their claims. A stream whose branch (or the state) could not be
/// pushed keeps its claim: it is returned, and the next call tries again.
fn share_then_release(
    ws: &Workspace,
    plan: &Plan,
    remote: Option<&RemoteName>,
    me: &str,
    names: Vec<String>,
    claims: &mut HashMap<String, f64>,
    say: &dyn Fn(Option<&str>, &str),
) -> Vec<String> {
    let Some(r) = remote else {
        for name in names {
            release(ws, remote, me, &name, claims, say);
        }
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut shared = Vec::new();
    for name in names {
        let merged = status_of(ws, &name).is_ok_and(|s| s == StreamStatus::Merged);
        let Some(stream) = plan.stream(&name).filter(|_| !merged) else {
            shared.push(name);
            continue;
        };
        match crate::stream::share::branch(ws, stream, r) {
            Ok(crate::stream::share::Branch::Pushed(tip)) => {
                say(Some(&name), &format!("shared on {}: {} at {}", r.given, stream.branch, crate::merge::short(tip)));
                shared.push(name);
            }
            Ok(_) => shared.push(name),
            Err(e) => {
                say(
                    Some(&name),
                    &format!(
                        "warning: its branch was not shared with {}: {}; this machine keeps the claim",
                        r.given, e.message
                    ),
                );
                kept.push(name);
            }
        }
    }
    crate::failpoint::hit("progress-branch-pushed");
    let state = crate::sync::push(&ws.repo, r).and_then(|p| {
        let rejected: Vec<String> =
            p.refs.iter().filter(|o| o.result == crate::sync::RefResult::Rejected).map(|o| o.name.clone()).collect();
        match rejected.is_empty() {
            true => Ok(()),
            false => Err(Error::refused(format!("{} rejected", rejected.join(", ")))),
        }
    });
    if let Err(e) = state {
        say(
            None,
            &format!("warning: cannot push the state to {}: {}; the claims of what ended are kept", r.given, e.message),
        );
        kept.append(&mut shared);
        return kept;
    }
    crate::failpoint::hit("progress-state-pushed");
    for name in shared {
        release(ws, remote, me, &name, claims, say);
    }
    kept
}

fn release(
    ws: &Workspace,
    remote: Option<&RemoteName>,
    me: &str,
    name: &str,
    claims: &mut HashMap<String, f64>,
    say: &dyn Fn(Option<&str>, &str),
) {
    let (Some(r), Some(_)) = (remote, claims.remove(name)) else { return };
    match crate::sync::claim::release(&ws.repo, r, name, me, false) {
        Ok(_) => say(Some(name), &format!("released the claim on {}", r.given)),
        Err(e) => say(Some(name), &format!("warning: could not release the claim: {}", e.message)),
    }
}

fn renew(
    ws: &Workspace,
    remote: Option<&RemoteName>,
    me: &str,
    claims: &mut HashMap<String, f64>,
    say: &dyn Fn(Option<&str>, &str),
) {
    let Some(r) = remote else { return };
    let now = crate::time::now_secs();
    for (name, expires) in claims.iter_mut() {
        if *expires - now > CLAIM_TTL.as_secs_f64() / 2.0 {
            continue;
        }
        match crate::sync::claim::take(&ws.repo, r, name, me, CLAIM_TTL) {
            Ok((c, _)) => *expires = crate::time::parse_rfc3339(&c.expires).unwrap_or(0.0),
            Err(e) => say(Some(name), &format!("warning: could not renew the claim: {}", e.message)),
        }
    }
}

/// Bring the local base branch (and its worktree) to the remote's base when it is behind it —
/// never losing a local commit — so new stream branches start from what landed, and the dashboard
/// reads the PRD the remote has. The remote's tip is kept where `git fetch` keeps it
/// (`refs/remotes/<remote>/<base>`); a remote given as a URL has no such place and is left alone.
fn follow_base(ws: &Workspace, plan: &Plan, remote: &RemoteName, say: &dyn Fn(Option<&str>, &str)) {
    let base = &plan.settings.base_branch;
    let followed = (|| -> Result<()> {
        if remote.key != remote.given {
            return Ok(());
        }
        let spec = format!("+{}:{}", refs::branch_ref(base), refs::remote_branch_ref(&remote.given, base));
        let fetched = crate::git::remote::fetch(&ws.repo, &remote.given, &[spec])?;
        let Some(tip) = fetched.first().map(|f| f.id) else { return Ok(()) };
        // Merges write the base's worktree too (and first check it is clean): not while one runs.
        let _merging = crate::lock::acquire(&ws.repo, "merge", true, "git boulder work: following the remote")?;
        let Some(local) = ws.repo.branch_tip(base)? else { return Ok(()) };
        if local == tip || !ws.repo.objects().is_ancestor(local, tip)? {
            return Ok(());
        }
        let reflog = format!("boulder work: {base} follows {}", remote.given);
        crate::worktree::checkout::move_branch(&ws.repo, base, local, tip, &reflog, "following the remote", "work-base")
    })();
    if let Err(e) = followed {
        say(None, &format!("warning: {base} was not brought to {}'s: {}", remote.given, e.message));
    }
}

/// The stream continues from the remote's branch, where the machines that ran it before shared
/// their work in progress: the local branch is made at the remote's tip when this clone has none,
/// and brought up to it (with its worktree, as `git merge --ff-only` would) when it is behind.
/// Branches that diverged are refused, naming both tips and the fix: running on either would
/// leave the other's commits out. A local branch ahead of the remote's, or one rewritten here
/// from what the remote holds (a rebase), is used as it is.
fn adopt_branch(
    ws: &Workspace,
    stream: &StreamDef,
    remote: &RemoteName,
    say: &dyn Fn(Option<&str>, &str),
) -> Result<()> {
    let full = refs::branch_ref(&stream.branch);
    let spec = format!("+{full}:{}", refs::queue_ref(&remote.key, &stream.branch));
    let fetched = crate::git::remote::fetch(&ws.repo, &remote.given, &[spec]).map_err(|e| {
        Error::refused(format!(
            "stream {}: cannot fetch its branch {} from {}: {}",
            stream.name, stream.branch, remote.given, e.message
        ))
        .hint("check that `git fetch` from that remote works here, then rerun")
    })?;
    let Some(theirs) = fetched.iter().find(|f| f.remote_ref == full).map(|f| f.id) else { return Ok(()) };
    let continuing = |tip| {
        say(
            Some(&stream.name),
            &format!("continuing from {}'s {} ({})", remote.given, stream.branch, crate::merge::short(tip)),
        )
    };
    let Some(ours) = ws.repo.branch_tip(&stream.branch)? else {
        let reflog = format!("boulder work: branch: Created from {} {}", remote.given, stream.branch);
        refs::update(&ws.repo, &full, refs::Expect::Absent, theirs, &reflog, refs::Writer::Configured)?
            .map_err(|e| Error::internal(format!("cannot create {}: {e}", stream.branch)))?;
        continuing(theirs);
        return Ok(());
    };
    if ours == theirs || crate::stream::share::own_history(ws, stream, ours, theirs)? {
        return Ok(());
    }
    if ws.repo.objects().is_ancestor(ours, theirs)? {
        let reflog = format!("boulder work: {} follows {}", stream.branch, remote.given);
        crate::worktree::checkout::move_branch(
            &ws.repo,
            &stream.branch,
            ours,
            theirs,
            &reflog,
            "continuing from the remote",
            "work-branch",
        )?;
        continuing(theirs);
        return Ok(());
    }
    Err(Error::refused(format!(
        "stream {}: its branch {} here ({}) and on {} ({}) have diverged; running on either would leave the other's commits out. Bring them together, then rerun: cd \"$(git boulder stream path {})\" && git pull --rebase {} {} && git push {} {}",
        stream.name,
        stream.branch,
        crate::merge::short(ours),
        remote.given,
        crate::merge::short(theirs),
        stream.name,
        remote.given,
        stream.branch,
        remote.given,
        stream.branch
    )))
}

/// Say once per claim that a claim seen on `remote` is invalid (an expiry beyond any lease): it is
/// treated as expired, never waited on.
fn warn_invalid_claims(
    remote: &RemoteName,
    seen: &[(String, String, crate::sync::claim::Claim)],
    warned: &mut BTreeSet<(String, String)>,
    say: &dyn Fn(Option<&str>, &str),
) {
    for (_, stream, c) in seen.iter().filter(|(key, _, _)| *key == remote.key) {
        let Some(why) = c.invalid() else { continue };
        if warned.insert((stream.clone(), c.expires.clone())) {
            say(
                Some(stream),
                &format!(
                    "warning: the claim on {} by {} on {} until {} is invalid ({why}); treating it as expired",
                    remote.given, c.actor, c.host, c.expires
                ),
            );
        }
    }
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

/// Pull the remote's state, and the branches of the streams a refusal was recorded for (a new
/// commit pushed there lets them be taken again).
fn pull(ws: &Workspace, plan: &Plan, remote: &RemoteName, say: &dyn Fn(Option<&str>, &str)) {
    if let Err(e) = crate::sync::pull(&ws.repo, remote) {
        say(None, &format!("warning: cannot pull the state of {}: {}", remote.given, e.message));
    }
    let refused: Vec<&StreamDef> = plan
        .streams
        .iter()
        .filter(|s| ws_state(ws, &s.name).ok().flatten().is_some_and(|st| st.refused.is_some()))
        .collect();
    if let Err(e) = crate::stream::attention::refresh(&ws.repo, remote, &refused) {
        say(None, &format!("warning: cannot fetch the refused streams' branches from {}: {}", remote.given, e.message));
    }
}

fn exit_text(status: std::process::ExitStatus) -> String {
    match status.code() {
        Some(c) => format!("exit code {c}"),
        None => "a signal".into(),
    }
}

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
