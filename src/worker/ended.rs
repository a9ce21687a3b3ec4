//! What the worker does when a child ends: a completed run is merged, a landing refused for a
//! conflict may go back to the agent (`on_conflict: agent`), anything else is the stream's
//! outcome.

use std::process::ExitStatus;

use crate::error::Result;
use crate::git::ObjectId;
use crate::plan::StreamDef;
use crate::state::StreamStatus;
use crate::workspace::Workspace;

use super::pool::{self, exit_text, Job, Phase};
use super::{status_of, ws_state, Outcome, Worker};

impl Worker<'_> {
    /// Decide what follows the end of `job`: the stream's next child, or its outcome.
    pub(super) fn job_ended(&mut self, job: Job, status: ExitStatus) -> Result<()> {
        let name = job.stream;
        let outcome = match job.phase {
            Phase::Run => self.run_ended(&name, status)?,
            Phase::Merge => self.merge_ended(&name, status)?,
            Phase::Resolve(before) => self.resolve_ended(&name, before, status)?,
        };
        // None: another child of the stream runs now.
        if let Some(outcome) = outcome {
            self.env.say(Some(&name), &outcome.describe());
            self.outcomes.insert(name.clone(), outcome);
            self.ended.push(name);
        }
        Ok(())
    }

    fn run_ended(&mut self, name: &str, status: ExitStatus) -> Result<Option<Outcome>> {
        let st = ws_state(self.env.ws, name)?;
        let reason = |default: &str| st.as_ref().and_then(|s| s.reason.clone()).unwrap_or(default.into());
        Ok(Some(match st.as_ref().map(|s| s.status) {
            Some(StreamStatus::Completed) => {
                self.env.say(Some(name), "run completed; merging");
                return Ok(self.merge(name));
            }
            Some(StreamStatus::Stopped) => match reason("stopped").strip_prefix(crate::stream::runloop::BUDGET_SPENT) {
                // Ended by a spent budget: a rerun alone does not resume it.
                Some(why) => {
                    Outcome::BudgetSpent { why: why.to_string(), reset: format!("git boulder spend reset {name}") }
                }
                None => Outcome::Stopped(reason("stopped")),
            },
            Some(StreamStatus::Failed) => Outcome::Failed(reason("failed")),
            _ => Outcome::Failed(format!("stream run exited with {}", exit_text(status))),
        }))
    }

    fn merge_ended(&mut self, name: &str, status: ExitStatus) -> Result<Option<Outcome>> {
        let merged = status_of(self.env.ws, name)? == StreamStatus::Merged;
        let stream = self.env.stream(name);
        if status.success() && merged {
            return Ok(Some(Outcome::MergedHere));
        }
        if let Some(job) = self.hand_back(stream) {
            // A conflict, handed back to the agent (on_conflict: agent): the refusal recorded
            // stands until the branch moves past it.
            self.pool.push(job);
            return Ok(None);
        }
        Ok(Some(match needs_attention(self.env.ws, stream)? {
            Some(o) => o,
            None => Outcome::Failed(format!("stream merge exited with {}", exit_text(status))),
        }))
    }

    fn resolve_ended(&mut self, name: &str, before: Option<ObjectId>, status: ExitStatus) -> Result<Option<Outcome>> {
        let stream = self.env.stream(name);
        let after = self.env.ws.repo.branch_tip(&stream.branch)?;
        if status.success() && after != before {
            self.env.say(Some(name), "conflict resolved by the agent; landing again");
            return Ok(self.merge(name));
        }
        if let Some(o) = needs_attention(self.env.ws, stream)? {
            self.env.say(Some(name), "the agent did not resolve the conflict; the refusal stands");
            return Ok(Some(o));
        }
        Ok(Some(Outcome::Failed(format!(
            "the landing met a conflict the agent did not resolve (stream resolve exited with {})",
            exit_text(status)
        ))))
    }

    /// Start the merge of `name` (`None`), or the outcome when it cannot start.
    fn merge(&mut self, name: &str) -> Option<Outcome> {
        let env = &self.env;
        let mut args: Vec<String> = env.opts.child_flags.clone();
        args.extend(["stream".into(), "merge".into(), name.to_string(), "--wait".into()]);
        match &env.remote {
            Some(r) => args.extend(["--remote".into(), r.given.clone()]),
            // Local merges, whatever settings.merge_remote says.
            None => args.push("--no-remote".into()),
        }
        match pool::spawn(env.opts, name, Phase::Merge, &args, &env.sink) {
            Ok(job) => {
                self.pool.push(job);
                None
            }
            Err(e) => Some(Outcome::Failed(format!("merge: {}", e.message))),
        }
    }

    /// Under `settings.on_conflict: agent`, a landing refused for a conflict with what landed
    /// first goes back to the stream's agent: `stream resolve` rebases the branch onto the base's
    /// tip in the stream's worktree and runs the agent where the rebase stops; then the landing is
    /// tried again. At most `max_failures` times per stream; `None` when the refusal is not
    /// handed back.
    fn hand_back(&mut self, stream: &StreamDef) -> Option<Job> {
        let (env, plan) = (&self.env, self.env.plan);
        if plan.settings.on_conflict != crate::plan::OnConflict::Agent {
            return None;
        }
        let most = plan.settings.boulder.max_failures.max(1);
        let tries = self.resolves.entry(stream.name.clone()).or_default();
        if *tries >= most {
            return None;
        }
        let remote = env.remote.as_ref();
        match crate::merge::resolve::conflicts(env.ws, plan, stream, remote.map(|r| r.key.as_str())) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                let why = format!("warning: cannot check the refusal for conflicts: {}", e.message);
                env.say(Some(&stream.name), &why);
                return None;
            }
        }
        *tries += 1;
        let before = env.ws.repo.branch_tip(&stream.branch).ok().flatten();
        let mut args: Vec<String> = env.opts.child_flags.clone();
        args.extend(["stream".into(), "resolve".into(), stream.name.clone()]);
        match remote {
            Some(r) => args.extend(["--remote".into(), r.given.clone()]),
            None => args.push("--no-remote".into()),
        }
        if !env.opts.command.is_empty() {
            args.push("--".into());
            args.extend(env.opts.command.iter().cloned());
        }
        let handing =
            format!("the landing met a conflict: handing it to the agent (on_conflict: agent, {tries}/{most})");
        env.say(Some(&stream.name), &handing);
        match pool::spawn(env.opts, &stream.name, Phase::Resolve(before), &args, &env.sink) {
            Ok(job) => Some(job),
            Err(e) => {
                env.say(Some(&stream.name), &format!("warning: cannot start stream resolve: {}", e.message));
                None
            }
        }
    }
}

/// The outcome of a stream whose refusal stands.
pub(super) fn attention_outcome(stream: &StreamDef, r: &crate::state::Refusal) -> Outcome {
    let reason = format!("refused ({}): {}", r.refusal, r.reason.lines().next().unwrap_or_default());
    Outcome::NeedsAttention { reason, retry: crate::stream::attention::retry_command(&stream.name) }
}

/// [`attention_outcome`] of `stream`, when its refusal stands.
pub(super) fn needs_attention(ws: &Workspace, stream: &StreamDef) -> Result<Option<Outcome>> {
    let Some(st) = ws_state(ws, &stream.name)? else { return Ok(None) };
    Ok(crate::stream::attention::standing(&ws.repo, stream, &st)?.map(|r| attention_outcome(stream, r)))
}
