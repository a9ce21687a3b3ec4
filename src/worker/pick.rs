//! Each round, the worker looks at every stream it has not decided yet, in dependency order, and
//! starts those ready, up to `parallel` at once.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::plan::StreamDef;
use crate::review::Verdict;
use crate::state::{self, Store, StreamState, StreamStatus};
use crate::stream::gate;
use crate::sync::claim::Claim;

use super::ended::{attention_outcome, needs_attention};
use super::pool::{self, Job, Phase};
use super::{remote, status_of, Env, Outcome, Worker};

/// A stream as this round sees it.
pub(super) enum View {
    Done(Outcome),
    Ready,
    /// Another machine holds it, or another process here runs it.
    Elsewhere(String),
    Waiting(Vec<String>),
    /// Its budget or the plan's is spent (which, by how much): not claimed.
    Spent(String),
    /// Complete, its review required and its tip short of approvals (what is missing).
    Review(String),
    /// Complete and approved: to be landed, without running its agent again.
    Land,
    /// Complete, and a reviewer asked for changes on its tip: its agent is run with them.
    Changes,
}

/// What a round saw of the others: the claims on the remote, the locks held here.
pub(super) struct Seen {
    claims: Vec<(String, String, Claim)>,
    locked: BTreeSet<String>,
    /// Every stream's spend as this round sees it (after its pull), for the budgets.
    ledger: crate::spend::Ledger,
}

impl Seen {
    pub fn now(env: &Env) -> Result<Seen> {
        let claims = match &env.remote {
            Some(_) => crate::sync::claim::seen(&env.ws.repo)?,
            None => Vec::new(),
        };
        let locked = crate::lock::holders(&env.ws.repo).into_iter().map(|(n, _)| n).collect();
        let budgets = env.plan.settings.budget.is_set() || env.plan.streams.iter().any(|s| s.budget.is_set());
        let ledger = match budgets {
            true => crate::spend::Ledger::read(env.ws, env.plan)?,
            false => crate::spend::Ledger::default(),
        };
        Ok(Seen { claims, locked, ledger })
    }

    /// Does the remote hold a claim of this machine on `name`?
    fn mine(&self, env: &Env, name: &str) -> bool {
        let Some(r) = &env.remote else { return false };
        self.claims.iter().any(|(key, s, c)| *key == r.key && s == name && c.actor == env.me)
    }
}

/// What a round did.
#[derive(Default)]
pub(super) struct Picked {
    pub started: bool,
    /// Something is left that another machine or process holds, or that may be started later.
    pub waiting_elsewhere: bool,
}

pub(super) fn view(
    env: &Env,
    at_start: &HashMap<String, StreamStatus>,
    stream: &StreamDef,
    seen: &Seen,
) -> Result<View> {
    let store = Store::new(&env.ws.repo)?;
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
        if let Some(r) = crate::stream::attention::standing(&env.ws.repo, stream, st)? {
            return Ok(View::Done(attention_outcome(stream, r)));
        }
    }
    if status == StreamStatus::Failed && at_start.get(&stream.name) != Some(&StreamStatus::Failed) {
        // Failed during this run, run by another machine or process: not tried again by this
        // worker.
        let why = entry.and_then(|e| e.state.reason).unwrap_or_else(|| "failed".into());
        return Ok(View::Done(Outcome::Failed(format!("{why} (run elsewhere)"))));
    }
    if let Some(r) = &env.remote {
        if let Some((_, _, c)) = seen
            .claims
            .iter()
            .find(|(key, s, c)| *key == r.key && *s == stream.name && c.actor != env.me && !c.expired())
        {
            return Ok(View::Elsewhere(format!("{} on {}", c.actor, c.host)));
        }
    }
    if seen.locked.contains(&format!("stream-{}", stream.name)) {
        return Ok(View::Elsewhere("another process on this machine".into()));
    }
    // A spent budget: no iteration is started, so the stream is not claimed (one complete can
    // still land: landing spends nothing).
    if status != StreamStatus::Completed {
        if let Some(why) = seen.ledger.verdict(env.plan, &stream.name).line() {
            return Ok(View::Spent(why));
        }
    }
    let mut waiting = Vec::new();
    for dep in &stream.depends_on {
        let merged =
            store.read::<StreamState>(&state::stream_ref(dep))?.is_some_and(|e| e.state.status == StreamStatus::Merged);
        if !merged {
            waiting.push(dep.clone());
        }
    }
    if !waiting.is_empty() {
        return Ok(View::Waiting(waiting));
    }
    review_view(env, stream, status)
}

/// A complete stream whose review is required waits for approvals of its tip (the remote's, when
/// this clone's branch is behind it), lands once they are there, and goes back to its agent when
/// changes are requested; any other stream is ready.
fn review_view(env: &Env, stream: &StreamDef, status: StreamStatus) -> Result<View> {
    let (ws, plan) = (env.ws, env.plan);
    if !gate::required(plan, &stream.name)
        || !(status == StreamStatus::Completed || crate::stream::lifecycle::complete(ws, plan, stream)?)
    {
        return Ok(View::Ready);
    }
    let Some(tip) = remote::landing_tip(env, stream)? else { return Ok(View::Ready) };
    Ok(match gate::verdict_at(ws, plan, &stream.name, tip)? {
        Verdict::Approved { .. } => View::Land,
        Verdict::ChangesRequested { .. } => View::Changes,
        Verdict::NotRequired => View::Ready,
        v @ Verdict::Waiting { .. } => View::Review(gate::describe(&stream.name, tip, &v).unwrap_or_default()),
    })
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

impl Worker<'_> {
    /// Start what is ready, up to the limit (the remote's state pulled first, when it is time).
    pub(super) fn pick(&mut self) -> Result<Picked> {
        if let Some(r) = &self.env.remote {
            if self.pool.is_empty() || self.last_pull.elapsed() >= self.env.opts.poll {
                remote::pull(&self.env, r);
                self.last_pull = Instant::now();
            }
        }
        let seen = Seen::now(&self.env)?;
        if let Some(r) = &self.env.remote {
            self.claims.warn_invalid(&self.env, r, &seen.claims);
        }
        let mut picked = Picked::default();
        for name in self.env.order.clone() {
            if self.pool.len() >= self.env.opts.parallel {
                break;
            }
            // Decided already (a failed or stopped stream is not run again by this worker).
            if self.outcomes.contains_key(&name) || self.pool.runs(&name) {
                continue;
            }
            let stream = self.env.stream(&name);
            match view(&self.env, &self.at_start, stream, &seen)? {
                View::Done(o) => self.done(&name, o, &seen),
                View::Elsewhere(_) => {
                    self.claims.held_elsewhere(&name);
                    picked.waiting_elsewhere = true;
                }
                View::Waiting(_) | View::Spent(_) => {}
                View::Review(what) => {
                    self.waiting_for_review(&name, what);
                    picked.waiting_elsewhere = true;
                }
                View::Land => {
                    self.env.say(Some(&name), "APPROVED: landing");
                    self.review_said.remove(&name);
                    self.try_land(stream, &mut picked);
                }
                View::Changes => {
                    self.review_said.remove(&name);
                    self.env.say(Some(&name), "CHANGES_REQUESTED: its agent gets the reviewer's text");
                    self.try_start(stream, &mut picked)
                }
                View::Ready => {
                    self.review_said.remove(&name);
                    self.try_start(stream, &mut picked)
                }
            }
        }
        Ok(picked)
    }

    /// A stream found decided (merged, refused, failed elsewhere).
    fn done(&mut self, name: &str, o: Outcome, seen: &Seen) {
        if let Outcome::MergedElsewhere(by) = &o {
            self.env.say(Some(name), &format!("merged by another machine ({by})"));
        }
        // A claim of this machine's left on a merged stream (its worker was killed after the
        // merge): released, not left for an hour.
        if let Some(r) = self.env.remote.as_ref().filter(|_| o.is_merged() && seen.mine(&self.env, name)) {
            match crate::sync::claim::release(&self.env.ws.repo, r, name, &self.env.me, false) {
                Ok(_) => self.env.say(Some(name), &format!("released this machine's claim left on {}", r.given)),
                Err(e) => {
                    self.env.say(Some(name), &format!("warning: could not release the claim left: {}", e.message))
                }
            }
        }
        self.outcomes.insert(name.to_string(), o);
    }

    /// Say that `name` waits for review, once for each thing it waits for.
    pub(super) fn waiting_for_review(&mut self, name: &str, what: String) {
        if self.review_said.get(name) != Some(&what) {
            self.env.say(Some(name), &format!("REVIEW: waiting for review: git boulder review {name} ({what})"));
            self.review_said.insert(name.to_string(), what);
        }
    }

    /// Claim an approved stream, bring its branch up to the remote's, and land it when its tip
    /// (now this clone's) is still approved; else it waits again.
    fn try_land(&mut self, stream: &StreamDef, picked: &mut Picked) {
        let name = &stream.name;
        if let Some(r) = &self.env.remote {
            if let Err(e) = self.claims.take(&self.env, r, name) {
                self.env.say(Some(name), &format!("not landed yet: {}", e.message));
                picked.waiting_elsewhere = true;
                return;
            }
        }
        let approved = self.prepare(stream).and_then(|()| {
            gate::verdict(self.env.ws, self.env.plan, stream).map_err(NotStarted::Failed).map(|v| match v {
                Some((_, v)) => v.may_land(),
                None => false,
            })
        });
        match approved {
            Ok(true) => match self.merge_job(name) {
                Ok(job) => {
                    self.pool.push(job);
                    picked.started = true;
                    return;
                }
                Err(e) => {
                    self.outcomes.insert(name.clone(), Outcome::Failed(format!("merge: {}", e.message)));
                }
            },
            Ok(false) | Err(NotStarted::Merged) | Err(NotStarted::Claim(_)) => picked.waiting_elsewhere = true,
            Err(NotStarted::Failed(e)) => {
                self.env.say(Some(name), &format!("not landed: {}", e.message));
                self.outcomes.insert(name.clone(), Outcome::Failed(e.message));
            }
        }
        self.claims.release(&self.env, name);
    }

    fn try_start(&mut self, stream: &StreamDef, picked: &mut Picked) {
        let name = &stream.name;
        if !self.hooks_checked {
            // Commits in the worktrees are recorded by the hooks, as `stream init` sets up.
            let _ = crate::hooks::streams::ensure(&self.env.ws.repo, false);
            self.hooks_checked = true;
        }
        match self.start(stream) {
            Ok(job) => {
                self.pool.push(job);
                picked.started = true;
            }
            Err(NotStarted::Merged) => picked.waiting_elsewhere = true,
            Err(NotStarted::Failed(e)) => {
                self.env.say(Some(name), &format!("not started: {}", e.message));
                self.outcomes.insert(name.clone(), Outcome::Failed(e.message));
            }
            Err(NotStarted::Claim(e)) => {
                // Mostly another machine won the race for it: look again next round. A remote
                // that keeps turning claims down ends it.
                self.env.say(Some(name), &format!("not started: {}", e.message));
                if self.claims.turned_down(name) {
                    self.outcomes.insert(name.clone(), Outcome::Failed(e.message));
                } else {
                    picked.waiting_elsewhere = true;
                }
            }
        }
    }

    /// Claim `stream` (with a remote), make its worktree when missing, and start its loop; the
    /// claim is let go when it does not start.
    fn start(&mut self, stream: &StreamDef) -> std::result::Result<Job, NotStarted> {
        if let Some(r) = &self.env.remote {
            self.claims.take(&self.env, r, &stream.name).map_err(NotStarted::Claim)?;
        }
        let started = self.prepare(stream).and_then(|()| {
            let env = &self.env;
            let mut args: Vec<String> = env.opts.child_flags.clone();
            args.extend(["stream".into(), "run".into(), stream.name.clone(), "--worker".into()]);
            if let Some(r) = &env.remote {
                args.extend(["--push-to".into(), r.given.clone()]);
            }
            if !env.opts.command.is_empty() {
                args.push("--".into());
                args.extend(env.opts.command.iter().cloned());
            }
            pool::spawn(env.opts, &stream.name, Phase::Run, &args, &env.sink).map_err(NotStarted::Failed)
        });
        if started.is_err() {
            self.claims.release(&self.env, &stream.name);
        }
        started
    }

    /// Claimed: bring the stream's state and branch up to the remote's, and make (or finish) its
    /// worktree.
    fn prepare(&self, stream: &StreamDef) -> std::result::Result<(), NotStarted> {
        let (env, ws, name) = (&self.env, self.env.ws, &stream.name);
        if let Some(r) = &env.remote {
            // Claimed: what the remote says of the stream now is final until the claim is let go.
            crate::sync::pull(&ws.repo, r).map_err(NotStarted::Claim)?;
            if status_of(ws, name).map_err(NotStarted::Failed)? == StreamStatus::Merged {
                return Err(NotStarted::Merged);
            }
            // Refused meanwhile on another machine: the next round reports it.
            if needs_attention(ws, stream).map_err(NotStarted::Failed)?.is_some() {
                return Err(NotStarted::Merged);
            }
            remote::follow_base(env, r);
            remote::adopt_branch(env, stream, r).map_err(NotStarted::Failed)?;
        }
        let wt = ws.worktree_path(env.plan, name).map_err(NotStarted::Failed)?;
        // Only a whole worktree reaches an agent: one missing, or whose making was interrupted
        // (a killed `stream init`), is made or finished first, as a rerun of `stream init` does.
        let unfinished = crate::worktree::not_whole(&ws.repo, &wt).map_err(NotStarted::Failed)?;
        if let Some(why) = unfinished {
            let existed = wt.join(".git").exists();
            let report = crate::stream::lifecycle::init(ws, env.plan, stream).map_err(NotStarted::Failed)?;
            if let Some(e) = report.setup_failed {
                return Err(NotStarted::Failed(Error::refused(format!("setup failed: {e}"))));
            }
            let what = match existed {
                true => format!("worktree finished at {} ({why})", report.path.display()),
                false => format!("worktree made at {}", report.path.display()),
            };
            env.say(Some(name), &what);
        }
        Ok(())
    }
}
