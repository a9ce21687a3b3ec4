//! `stream run`: the loop that ties it together. Hold the stream lock, record RUNNING, and per
//! iteration pick the next open story, run the agent in the stream's worktree with `BOULDER_*`
//! variables, and judge: a new commit or a finished story is progress; none is a failure, followed
//! by a wait of cooldown × multiplier^(failures − 1).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::plan::{Plan, StreamDef};
use crate::prd::Story;
use crate::state::{self, Opt, Store, StreamOp, StreamState, StreamStatus};
use crate::sync::claim::CLAIM_TTL;
use crate::workspace::{load_prd_settled, Workspace};

/// How the loop runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub max_iterations: Option<u32>,
    pub cooldown: Duration,
    pub multiplier: f64,
    pub max_failures: u32,
    /// The command and its arguments, run without a shell; empty means the stream's `agent`.
    pub command: Vec<String>,
    /// The caller (`git boulder work`) holds the stream's claim: take none here.
    pub claim_held: bool,
    /// Share the work in progress with this remote after each iteration that made progress: the
    /// branch under a lease, then the state ([`crate::stream::share`]).
    pub push_to: Option<String>,
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `COMPLETED`, `FAILED` or `STOPPED`.
    pub status: StreamStatus,
    pub reason: String,
    pub iterations: u32,
}

/// A run started by `git boulder work` stops, as on Ctrl-C, once the worker is gone (killed with
/// SIGKILL, or by the out-of-memory killer): its agent is stopped and STOPPED recorded, instead of
/// running on unsupervised while other machines wait for its claim to expire. The worker's end is
/// seen as this process getting a new parent.
fn stop_with_the_worker() {
    #[cfg(unix)]
    {
        let worker = rustix::process::getppid();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            if rustix::process::getppid() != worker {
                // The run and its agent share a process group of their own (the worker made it).
                let _ = rustix::process::kill_current_process_group(rustix::process::Signal::INT);
                return;
            }
        });
    }
}

fn record(store: &Store, stream: &str, status: StreamStatus, reason: &str) -> Result<()> {
    store.append::<StreamState>(
        &state::stream_ref(stream),
        StreamOp::Status { status, reason: Opt::Set(reason.into()) },
    )?;
    Ok(())
}

/// A claim on `settings.claim_remote` held for the length of a run.
struct Held {
    remote: crate::git::remote::RemoteName,
    actor: String,
    expires: std::cell::Cell<f64>,
}

/// Run the loop for `stream` until it completes, fails, is stopped or runs out of iterations.
/// With `settings.claim_remote` set, the stream is claimed there first (refused while another
/// machine holds it), renewed as the run goes on, and released when it ends.
pub fn run(ws: &Workspace, plan: &Plan, stream: &StreamDef, opts: &Options, say: impl Fn(&str)) -> Result<Outcome> {
    // The plan's agent line (and verify, with auto_merge) runs only when trusted: refuse before
    // the lock is taken or anything is recorded.
    let mut keys = Vec::new();
    if let (true, Some(agent)) = (opts.command.is_empty(), &stream.agent) {
        keys.push(crate::trust::agent_key(agent));
    }
    if plan.settings.auto_merge {
        keys.push(crate::trust::VERIFY.to_string());
    }
    if !plan.settings.prompt_template.trim().is_empty() {
        keys.push(crate::trust::PROMPT_TEMPLATE.to_string());
    }
    crate::trust::require(&ws.repo, plan, "stream run", &keys)?;
    // One run per stream on this machine (the lock), then one per stream anywhere (the claim).
    let _lock = crate::lock::try_acquire(&ws.repo, &format!("stream-{}", stream.name), "stream run")?;
    let claim_remote = plan.settings.claim_remote.as_deref().filter(|_| !opts.claim_held);
    let claim_remote = crate::git::remote::of_plan(&ws.repo, "settings.claim_remote", claim_remote)?;
    let Some(remote) = claim_remote else { return run_loop(ws, plan, stream, opts, &say, None) };
    let remote = crate::sync::resolve(&ws.repo, Some(&remote), &plan.settings.base_branch)?;
    let actor = Store::new(&ws.repo)?.actor()?;
    let (claim, _) = crate::sync::claim::take(&ws.repo, &remote, &stream.name, &actor, CLAIM_TTL)?;
    say(&format!("claimed stream {} on {} until {}", stream.name, remote.given, claim.expires));
    let held = Held {
        remote,
        actor,
        expires: std::cell::Cell::new(crate::time::parse_rfc3339(&claim.expires).unwrap_or(0.0)),
    };
    let result = run_loop(ws, plan, stream, opts, &say, Some(&held));
    match crate::sync::claim::release(&ws.repo, &held.remote, &stream.name, &held.actor, false) {
        Ok(_) => say(&format!("released the claim on stream {}", stream.name)),
        Err(e) => say(&format!("warning: could not release the claim on stream {}: {}", stream.name, e.message)),
    }
    result
}

fn renew_if_due(ws: &Workspace, stream: &str, held: Option<&Held>) -> Result<()> {
    let Some(h) = held else { return Ok(()) };
    if h.expires.get() - crate::time::now_secs() > CLAIM_TTL.as_secs_f64() / 2.0 {
        return Ok(());
    }
    let (claim, _) = crate::sync::claim::take(&ws.repo, &h.remote, stream, &h.actor, CLAIM_TTL)?;
    h.expires.set(crate::time::parse_rfc3339(&claim.expires).unwrap_or(0.0));
    Ok(())
}

fn run_loop(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    opts: &Options,
    say: &dyn Fn(&str),
    held: Option<&Held>,
) -> Result<Outcome> {
    let wt = ws.worktree_path(plan, &stream.name)?;
    finish_worktree(ws, plan, stream, &wt, say)?;
    let command = crate::stream::shell::agent_command(plan, stream, &opts.command, "stream run")?;
    let interrupted = on_interrupt();
    let stopped_by_signal = || interrupted.load(std::sync::atomic::Ordering::SeqCst);
    if opts.claim_held {
        stop_with_the_worker();
    }
    // Uncommitted changes an earlier run left (its agent killed before it committed) are work to
    // continue: the agent is run on them as they are, never on a cleaned worktree.
    let left = crate::worktree::tracked_dirt_for_merge(&wt, 10)?;
    if !left.is_clean() {
        let what = left.describe();
        say(&format!(
            "the worktree has uncommitted changes an earlier run left ({what}); the agent continues with them"
        ));
    }
    let share_to = match &opts.push_to {
        Some(r) => Some(crate::git::remote::RemoteName::new(&ws.repo, r)?),
        None => None,
    };
    let store = Store::new(&ws.repo)?;
    record(&store, &stream.name, StreamStatus::Running, "stream run started")?;
    let prd_path = ws.prd_path(Some(plan), None)?;
    let mut failures = 0u32;
    let mut iteration = 0u32;
    let story_file = tempfile::NamedTempFile::new()?;
    loop {
        renew_if_due(ws, &stream.name, held)?;
        if stopped_by_signal() {
            return end(&store, stream, StreamStatus::Stopped, "interrupted", "interrupted", iteration);
        }
        if store.read::<StreamState>(&state::stream_ref(&stream.name))?.is_some_and(|e| e.state.stop_requested) {
            let by = "stopped by git boulder stream stop";
            return end(&store, stream, StreamStatus::Stopped, by, "stop requested", iteration);
        }
        let (_, prd) = load_prd_settled(&prd_path)?;
        let done = ws.recorded_done()?;
        let stories = ws.stream_stories(plan, stream, &prd, &done)?;
        let open = stories.iter().filter(|s| !s.status.is_done()).count();
        let (uncommitted, changes) = left_when_done(ws, plan, stream, &wt, open)?;
        if open == 0 && uncommitted.is_none() && changes.is_none() {
            let why = "all stories done";
            record(&store, &stream.name, StreamStatus::Completed, why)?;
            store.append::<crate::state::BoulderState>(
                &state::boulder_ref(&stream.name),
                crate::state::BoulderOp::Status { status: crate::state::BoulderStatus::Completed },
            )?;
            return Ok(Outcome { status: StreamStatus::Completed, reason: why.into(), iterations: iteration });
        }
        if opts.max_iterations.is_some_and(|m| iteration >= m) {
            let why = "max_iterations reached";
            return end(&store, stream, StreamStatus::Stopped, why, why, iteration);
        }
        if let Some(why) = budget_spent(ws, plan, stream, share_to.as_ref(), say)? {
            let reason = format!("{BUDGET_SPENT}{why}");
            record(&store, &stream.name, StreamStatus::Stopped, &reason)?;
            return Ok(Outcome { status: StreamStatus::Stopped, reason, iterations: iteration });
        }
        let finishing = uncommitted.as_ref().map(|d| d.describe());
        let story = match next_story(&wt, &stories, finishing.as_deref(), changes.is_some(), say) {
            Ok(story) => story,
            Err((status, recorded, reason)) => return end(&store, stream, status, &recorded, &reason, iteration),
        };
        iteration += 1;
        std::fs::write(story_file.path(), &story.text)?;
        let prompt = match &changes {
            Some((_, task)) => task.clone(),
            None => task(plan, stream, &story, story_file.path(), iteration),
        };
        match &changes {
            Some((by, _)) => say(&format!("iteration {iteration}: changes requested by {by}")),
            None => say(&format!("iteration {iteration}: {} {}", story.id, story.title)),
        }
        let tip_before = ws.repo.branch_tip(&stream.branch)?;
        let done_before = stories.len() - open;
        let started = std::time::Instant::now();
        let status = run_agent(ws, plan, stream, &command, &wt, &story, story_file.path(), iteration, &prompt)?;
        record_run(ws, &stream.name, iteration, started.elapsed(), status, say);
        // Interrupted while the agent ran: the agent's end is not judged (it was stopped, not idle).
        if stopped_by_signal() {
            return end(&store, stream, StreamStatus::Stopped, "interrupted", "interrupted", iteration);
        }
        if progressed(ws, plan, stream, &prd_path, tip_before, done_before)? {
            failures = 0;
            say(&format!("  progress (agent exited {})", status.code().unwrap_or(-1)));
            share_progress(ws, stream, share_to.as_ref(), say);
            continue;
        }
        failures += 1;
        if let (Some(what), true) = (&finishing, failures >= opts.max_failures) {
            let reason = uncommitted_reason(&wt, what);
            return end(&store, stream, StreamStatus::Failed, &reason, &reason, iteration);
        }
        if failures >= opts.max_failures {
            let why = format!("{failures} iterations without progress");
            return end(&store, stream, StreamStatus::Failed, &why, &why, iteration);
        }
        if opts.max_iterations.is_some_and(|m| iteration >= m) {
            continue; // No wait before an ending the loop is about to record.
        }
        cool_down(opts, failures, &stopped_by_signal, say);
    }
}

/// What is left when no story is open: work its stories' agent did not commit, or changes a
/// reviewer requested. Stories done but their work not committed (an agent killed after `prd
/// done` or after ticking the PRD, before its commit) are not complete — the merge would refuse
/// it: the agent is run once more on the worktree as it was left, on the last story done, to
/// commit it; nothing is ever discarded here. Changes a reviewer requested on the branch's tip
/// go back to the agent as its task.
#[allow(clippy::type_complexity)] // the two answers, each used once by the loop
fn left_when_done(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    wt: &std::path::Path,
    open: usize,
) -> Result<(Option<crate::worktree::Dirt>, Option<(String, String)>)> {
    if open > 0 {
        return Ok((None, None));
    }
    let uncommitted = Some(crate::worktree::tracked_dirt_for_merge(wt, 10)?).filter(|d| !d.is_clean());
    let changes = match &uncommitted {
        None => crate::stream::gate::changes(ws, plan, stream)?,
        Some(_) => None,
    };
    Ok((uncommitted, changes))
}

/// Whether the agent's run made progress: a new commit on the branch, or more stories done.
fn progressed(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    prd_path: &std::path::Path,
    tip_before: Option<crate::git::ObjectId>,
    done_before: usize,
) -> Result<bool> {
    let tip_after = ws.repo.branch_tip(&stream.branch)?;
    let (_, prd) = load_prd_settled(prd_path)?;
    let done = ws.recorded_done()?;
    let after = ws.stream_stories(plan, stream, &prd, &done)?;
    let done_after = after.iter().filter(|s| s.status.is_done()).count();
    Ok(tip_after != tip_before || done_after > done_before)
}

/// The wait after a run without progress, longer after each (`cooldown`, times `multiplier`
/// per failure); an interrupt cuts it short.
fn cool_down(opts: &Options, failures: u32, stopped_by_signal: &dyn Fn() -> bool, say: &dyn Fn(&str)) {
    let wait = opts.cooldown.mul_f64(opts.multiplier.powi(failures as i32 - 1));
    say(&format!("  no progress ({failures}/{}); waiting {:.1}s", opts.max_failures, wait.as_secs_f64()));
    let until = std::time::Instant::now() + wait;
    while std::time::Instant::now() < until && !stopped_by_signal() {
        std::thread::sleep(Duration::from_millis(20).min(until - std::time::Instant::now()));
    }
}

/// Only a whole worktree reaches the agent: one whose making was interrupted (a killed `stream
/// init`: no index, files missing) is finished first, as a rerun of `stream init` does.
fn finish_worktree(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    wt: &std::path::Path,
    say: &dyn Fn(&str),
) -> Result<()> {
    if !wt.join(".git").exists() {
        return Err(Error::usage(format!("stream {} has no worktree at {}", stream.name, wt.display()))
            .hint(format!("create it with `git boulder stream init {}`", stream.name)));
    }
    if let Some(why) = crate::worktree::not_whole(&ws.repo, wt)? {
        say(&format!("the worktree {} is not whole ({why}); finishing it first", wt.display()));
        let report = crate::stream::lifecycle::init_with(ws, plan, stream, true)?;
        if let Some(e) = report.setup_failed {
            return Err(Error::refused(format!("stream {}: setup failed: {e}", stream.name))
                .hint(format!("fix it, then rerun `git boulder stream init {}`", stream.name)));
        }
        for c in &report.changes {
            say(&format!("  {c}"));
        }
        if let Some(why) = crate::worktree::not_whole(&ws.repo, &report.path)? {
            return Err(Error::refused(format!(
                "stream {}: the worktree {} is not whole: {why}",
                stream.name,
                wt.display()
            ))
            .hint(format!("run `git boulder stream init {}`", stream.name)));
        }
    }
    Ok(())
}

/// The story the agent works on next: the last one done when it finishes uncommitted work or
/// makes requested changes, else the next open one. `Err`: how the run ends instead (the
/// status, what is recorded, what is said).
fn next_story(
    wt: &std::path::Path,
    stories: &[Story],
    finishing: Option<&str>,
    changes: bool,
    say: &dyn Fn(&str),
) -> std::result::Result<Story, (StreamStatus, String, String)> {
    let last_done = || stories.iter().rev().find(|s| s.status.is_done()).cloned();
    let next = match finishing {
        Some(what) => {
            let last = last_done();
            if let Some(last) = &last {
                say(&format!(
                    "all stories are done, but the worktree has uncommitted changes ({what}); the agent goes on with {} to commit them",
                    last.id
                ));
            }
            last
        }
        None if changes => last_done(),
        None => crate::prd::next_open(stories).cloned(),
    };
    match (next, finishing) {
        (Some(story), _) => Ok(story),
        (None, Some(what)) => {
            let reason = uncommitted_reason(wt, what);
            Err((StreamStatus::Failed, reason.clone(), reason))
        }
        (None, None) => Err((
            StreamStatus::Failed,
            "no story is ready: the rest are blocked".into(),
            "the open stories are blocked".into(),
        )),
    }
}

/// Ctrl-C (or SIGTERM) reaches the agent too; the loop then records STOPPED and returns, and
/// the lock is released with the process.
fn on_interrupt() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = interrupted.clone();
    let _ = ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::SeqCst));
    interrupted
}

/// The task the agent gets for `story` (the plan's prompt template, rendered).
fn task(plan: &Plan, stream: &StreamDef, story: &Story, story_file: &std::path::Path, iteration: u32) -> String {
    crate::stream::prompt::render(
        plan,
        &crate::stream::prompt::Vars {
            stream: &stream.name,
            story_id: &story.id,
            story_title: &story.title,
            story_file: &story_file.to_string_lossy(),
            prd: &plan.prd,
            iteration,
            owned_paths: crate::stream::prompt::owned_paths(plan, &stream.name),
            read_only_paths: crate::stream::prompt::read_only_paths(plan),
        },
    )
}

/// Record how the run ends (`recorded`, in the op-log) and say it (`reason`).
fn end(
    store: &Store,
    stream: &StreamDef,
    status: StreamStatus,
    recorded: &str,
    reason: &str,
    iterations: u32,
) -> Result<Outcome> {
    record(store, &stream.name, status, recorded)?;
    Ok(Outcome { status, reason: reason.into(), iterations })
}

/// Run the agent once in the worktree, with the story and the task in its environment.
#[allow(clippy::too_many_arguments)] // each is one thing the agent is told; a struct would only rename them
fn run_agent(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    command: &[String],
    wt: &std::path::Path,
    story: &Story,
    story_file: &std::path::Path,
    iteration: u32,
    prompt: &str,
) -> Result<std::process::ExitStatus> {
    let iteration = std::ffi::OsString::from(iteration.to_string());
    let extra: [(&str, &std::ffi::OsStr); 4] = [
        ("BOULDER_STORY", story.id.as_ref()),
        ("BOULDER_STORY_TITLE", story.title.as_ref()),
        ("BOULDER_STORY_FILE", story_file.as_os_str()),
        ("BOULDER_ITERATION", &iteration),
    ];
    crate::stream::shell::run_agent(ws, plan, &stream.name, command, wt, prompt, &extra)
}

/// How the reason of a run a spent budget ended starts (`work` tells it from other stops).
pub const BUDGET_SPENT: &str = "budget spent: ";

/// Whether the stream's budget or the plan's is spent, checked before each iteration (none is
/// started then: docs/spend.md). With a budget and a remote to share with, the state is synced
/// with it first, so the fleet's spend counts: what can still be missed is the iterations other
/// machines are running, one per running worker at most. A failed sync is said, and what is
/// here counts.
fn budget_spent(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    remote: Option<&crate::git::remote::RemoteName>,
    say: &dyn Fn(&str),
) -> Result<Option<String>> {
    if !stream.budget.is_set() && !plan.settings.budget.is_set() {
        return Ok(None);
    }
    if let Some(r) = remote {
        if let Err(e) = crate::sync::sync(&ws.repo, r) {
            say(&format!(
                "  warning: the spend on {} was not synced: {}; the budget counts what is here",
                r.given, e.message
            ));
        }
    }
    Ok(crate::spend::verdict(ws, plan, &stream.name)?.line())
}

/// Record the agent's run — its wall time and how it exited — as an amount of `source: run`,
/// keyed by this process, the time it started and the iteration (docs/spend.md). A failure to
/// record is said and never ends the loop.
fn record_run(
    ws: &Workspace,
    stream: &str,
    iteration: u32,
    took: Duration,
    status: std::process::ExitStatus,
    say: &dyn Fn(&str),
) {
    use std::os::unix::process::ExitStatusExt;
    let since = std::time::SystemTime::now().checked_sub(took).unwrap_or(std::time::UNIX_EPOCH);
    let nanos = since.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let key = format!("run:{nanos:x}-{}-{iteration}", std::process::id());
    let mut amount = crate::spend::Amount::tokens(key, "run", 0, 0);
    amount.seconds = Opt::Set(took.as_secs().min(crate::state::op::MAX_SECONDS));
    let exit = status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(-1);
    amount.exit = Opt::Set(i64::from(exit));
    if let Err(e) = crate::spend::record(ws, stream, vec![amount]) {
        say(&format!("  warning: the agent's run time was not recorded: {}", e.message));
    }
}

/// Why a stream whose stories are done is not complete: its work is not committed.
fn uncommitted_reason(wt: &std::path::Path, what: &str) -> String {
    format!(
        "its stories are done but its worktree has uncommitted changes ({what}); commit them (cd {} && git add -A && git commit) or discard them, then rerun",
        wt.display()
    )
}

/// Share an iteration's progress with `remote` (see [`crate::stream::share`]). A failure is told,
/// not fatal: the loop goes on, and the worker keeps the claim until the work is shared.
fn share_progress(
    ws: &Workspace,
    stream: &StreamDef,
    remote: Option<&crate::git::remote::RemoteName>,
    say: &dyn Fn(&str),
) {
    let Some(r) = remote else { return };
    match crate::stream::share::share(ws, stream, r) {
        Ok(crate::stream::share::Branch::Pushed(tip)) => {
            say(&format!("  shared on {}: {} at {}", r.given, stream.branch, crate::git::id::short(tip)))
        }
        Ok(_) => {}
        Err(e) => say(&format!(
            "  warning: the progress was not shared with {}: {}; this machine keeps the claim",
            r.given, e.message
        )),
    }
}

/// Ask a running loop to stop after its current iteration.
pub fn stop(ws: &Workspace, name: &str) -> Result<()> {
    let store = Store::new(&ws.repo)?;
    store.append::<StreamState>(&state::stream_ref(name), StreamOp::StopRequested {})?;
    // The stream's root boulder stops being enforced too, until new activity.
    if store.read::<crate::state::BoulderState>(&state::boulder_ref(name))?.is_some() {
        store.append::<crate::state::BoulderState>(&state::boulder_ref(name), crate::state::BoulderOp::Stop {})?;
    }
    Ok(())
}
