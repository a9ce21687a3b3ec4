//! `stream run`: the loop that ties it together. Hold the stream lock, record RUNNING, and per
//! iteration pick the next open story, run the agent in the stream's worktree with `BOULDER_*`
//! variables, and judge: a new commit or a finished story is progress; none is a failure, followed
//! by a wait of cooldown × multiplier^(failures − 1).

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::error::{Error, Result};
use crate::plan::{Plan, StreamDef};
use crate::state::{self, Store, StreamState};
use crate::workspace::{load_prd, Workspace};

/// How the loop runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub max_iterations: Option<u32>,
    pub cooldown: Duration,
    pub multiplier: f64,
    pub max_failures: u32,
    /// The command and its arguments, run without a shell; empty means the stream's `agent`.
    pub command: Vec<String>,
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `COMPLETED`, `FAILED` or `STOPPED`.
    pub status: String,
    pub reason: String,
    pub iterations: u32,
}

fn record(store: &Store, stream: &str, status: &str, reason: &str) -> Result<()> {
    store.append::<StreamState>(&state::stream_ref(stream), "status", json!({"status": status, "reason": reason}))?;
    Ok(())
}

/// Run the loop for `stream` until it completes, fails, is stopped or runs out of iterations.
pub fn run(ws: &Workspace, plan: &Plan, stream: &StreamDef, opts: &Options, say: impl Fn(&str)) -> Result<Outcome> {
    let wt = ws.worktree_path(plan, &stream.name)?;
    if !wt.join(".git").exists() {
        return Err(Error::usage(format!("stream {} has no worktree at {}", stream.name, wt.display()))
            .hint(format!("create it with `git boulder stream init {}`", stream.name)));
    }
    let command = if opts.command.is_empty() {
        let agent = stream.agent.as_ref().ok_or_else(|| {
            Error::usage(format!("stream {} has no agent and no command was given", stream.name))
                .hint(format!("run `git boulder stream run {} -- CMD ARGS…`, or set `agent:` in the plan", stream.name))
        })?;
        let line = plan.settings.agents.get(agent).ok_or_else(|| {
            Error::usage(format!("agent {agent:?} is not in settings.agents")).hint("add it to settings.agents")
        })?;
        // The plan's agent line is a shell command by design (it uses "$BOULDER_PROMPT").
        vec!["sh".to_string(), "-c".to_string(), line.clone()]
    } else {
        opts.command.clone()
    };
    let _lock = crate::lock::acquire(&ws.repo, &format!("stream-{}", stream.name), false, "stream run")?;
    // Ctrl-C (or SIGTERM) reaches the agent too; the loop then records STOPPED and returns, and
    // the lock is released with the process.
    let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        let _ = ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::SeqCst));
    }
    let stopped_by_signal = || interrupted.load(std::sync::atomic::Ordering::SeqCst);
    let store = Store::new(&ws.repo)?;
    record(&store, &stream.name, "RUNNING", "stream run started")?;
    let prd_path = ws.prd_path(Some(plan), None)?;
    let mut failures = 0u32;
    let mut iteration = 0u32;
    let story_file = tempfile::NamedTempFile::new()?;
    loop {
        if stopped_by_signal() {
            record(&store, &stream.name, "STOPPED", "interrupted")?;
            return Ok(Outcome { status: "STOPPED".into(), reason: "interrupted".into(), iterations: iteration });
        }
        if store.read::<StreamState>(&state::stream_ref(&stream.name))?.is_some_and(|e| e.state.stop_requested) {
            record(&store, &stream.name, "STOPPED", "stopped by git boulder stream stop")?;
            return Ok(Outcome { status: "STOPPED".into(), reason: "stop requested".into(), iterations: iteration });
        }
        let (_, prd) = load_prd(&prd_path)?;
        let done = ws.recorded_done()?;
        let stories = ws.stream_stories(plan, stream, &prd, &done)?;
        let open = stories.iter().filter(|s| !s.status.is_done()).count();
        if open == 0 {
            record(&store, &stream.name, "COMPLETED", "all stories done")?;
            store.append::<crate::state::BoulderState>(
                &state::boulder_ref(&stream.name),
                "status",
                json!({"status": "completed"}),
            )?;
            return Ok(Outcome {
                status: "COMPLETED".into(),
                reason: "all stories done".into(),
                iterations: iteration,
            });
        }
        if opts.max_iterations.is_some_and(|m| iteration >= m) {
            record(&store, &stream.name, "STOPPED", "max_iterations reached")?;
            return Ok(Outcome {
                status: "STOPPED".into(),
                reason: "max_iterations reached".into(),
                iterations: iteration,
            });
        }
        let Some(story) = crate::cli::prd::next_open(&stories).cloned() else {
            record(&store, &stream.name, "FAILED", "no story is ready: the rest are blocked")?;
            return Ok(Outcome {
                status: "FAILED".into(),
                reason: "the open stories are blocked".into(),
                iterations: iteration,
            });
        };
        iteration += 1;
        std::fs::write(story_file.path(), &story.text)?;
        let prompt = format!(
            "You are working on stream {stream} of this repository. Work on story {id}: {title}.\n\
             The story's text is in {file}. Commit your progress with git; mark the story done in {prd} when \
             its acceptance criteria are met.\n\nThe boulder never stops: keep going until the story is done.",
            stream = stream.name,
            id = story.id,
            title = story.title,
            file = story_file.path().display(),
            prd = plan.prd,
        );
        say(&format!("iteration {iteration}: {} {}", story.id, story.title));
        let tip_before = ws.repo.branch_tip(&stream.branch)?;
        let done_before = stories.len() - open;
        let status = Command::new(&command[0])
            .args(&command[1..])
            .current_dir(&wt)
            .env("BOULDER_STREAM", &stream.name)
            .env("BOULDER_STORY", &story.id)
            .env("BOULDER_STORY_TITLE", &story.title)
            .env("BOULDER_STORY_FILE", story_file.path())
            .env("BOULDER_PRD", wt.join(&plan.prd))
            .env("BOULDER_ITERATION", iteration.to_string())
            .env("BOULDER_PROMPT", &prompt)
            .status()
            .map_err(|e| {
                Error::usage(format!("cannot run {:?}: {e}", command[0])).hint("check the command and PATH")
            })?;
        let tip_after = ws.repo.branch_tip(&stream.branch)?;
        let (_, prd) = load_prd(&prd_path)?;
        let done = ws.recorded_done()?;
        let after = ws.stream_stories(plan, stream, &prd, &done)?;
        let done_after = after.iter().filter(|s| s.status.is_done()).count();
        if tip_after != tip_before || done_after > done_before {
            failures = 0;
            say(&format!("  progress (agent exited {})", status.code().unwrap_or(-1)));
            continue;
        }
        failures += 1;
        if failures >= opts.max_failures {
            record(&store, &stream.name, "FAILED", &format!("{failures} iterations without progress"))?;
            return Ok(Outcome {
                status: "FAILED".into(),
                reason: format!("{failures} iterations without progress"),
                iterations: iteration,
            });
        }
        if opts.max_iterations.is_some_and(|m| iteration >= m) {
            continue; // No wait before an ending the loop is about to record.
        }
        let wait = opts.cooldown.mul_f64(opts.multiplier.powi(failures as i32 - 1));
        say(&format!("  no progress ({failures}/{}); waiting {:.1}s", opts.max_failures, wait.as_secs_f64()));
        let until = std::time::Instant::now() + wait;
        while std::time::Instant::now() < until && !stopped_by_signal() {
            std::thread::sleep(Duration::from_millis(20).min(until - std::time::Instant::now()));
        }
    }
}

/// Ask a running loop to stop after its current iteration.
pub fn stop(ws: &Workspace, name: &str) -> Result<()> {
    let store = Store::new(&ws.repo)?;
    store.append::<StreamState>(&state::stream_ref(name), "stop_requested", json!({}))?;
    Ok(())
}
