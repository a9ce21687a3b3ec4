//! `check`: run the gates of [`super::decide`] on a boulder as the op-log holds it (its children,
//! its parent's cooldown, a stream's completed stories), and record an enforcement.

use std::time::Duration;

use super::tree::{children, read};
use super::Decision;
use crate::error::{Error, Result};
use crate::state::{self, BoulderOp, BoulderState, BoulderStatus, Opt, Store};
use crate::workspace::Workspace;

/// Overrides of settings.boulder for one check (`--idle-threshold` …).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub idle_threshold: Option<Duration>,
    pub cooldown: Option<Duration>,
    pub max_failures: Option<u32>,
    pub recovery_window: Option<Duration>,
    pub backoff_multiplier: Option<f64>,
}

/// What a check decided about a boulder.
#[derive(Debug)]
pub struct Checked {
    pub decision: Decision,
    /// The enforcement message (recorded when enforcing).
    pub message: String,
    pub boulder: String,
    pub iteration: u64,
    pub parent_iteration: Option<u64>,
    pub depth: u32,
}

/// Decide whether to push the agent on boulder `id`, and record the enforcement when it is.
pub fn check(
    ws: &Workspace,
    id: &str,
    overrides: &Overrides,
    subagent: bool,
    message: Option<&str>,
) -> Result<Checked> {
    let plan = ws.plan().ok();
    let mut t = plan.as_ref().map(|p| p.settings.boulder.clone()).unwrap_or_default();
    if let Some(d) = overrides.idle_threshold {
        t.idle_threshold = d;
    }
    if let Some(d) = overrides.cooldown {
        t.cooldown = d;
    }
    if let Some(d) = overrides.recovery_window {
        t.recovery_window = d;
    }
    if let Some(n) = overrides.max_failures {
        t.max_failures = n;
    }
    if let Some(m) = overrides.backoff_multiplier {
        t.backoff_multiplier = m;
    }
    let store = Store::new(&ws.repo)?;
    let bref = state::boulder_ref(id);
    let b = read(&store, id)?.ok_or_else(|| {
        Error::usage(format!("no boulder {id:?}"))
            .hint("create it with `git boulder create`, or `git boulder stream init`")
    })?;
    let kids: Vec<BoulderState> = children(&store, id)?.into_iter().map(|(_, c)| c).collect();
    let parent = match &b.parent {
        Some(p) => read(&store, p)?.map(|s| (p.clone(), s)),
        None => None,
    };
    // inherit_cooldowns: a child waits out its parent's cooldown too.
    let mut gated = b.clone();
    // A stream's root boulder is done when the stream's stories are.
    if let (Some(plan), None) = (&plan, &b.parent) {
        if let Some(stream) = plan.stream(id).filter(|s| !s.stories.is_empty()) {
            if crate::merge::complete(ws, plan, stream).unwrap_or(false) {
                gated.status = BoulderStatus::Completed;
            }
        }
    }
    // The project boulder is done when the PRD's stories are.
    if b.parent.is_none()
        && id == crate::hooks::project_id(plan.as_ref())
        && super::tree::project_complete(ws, plan.as_ref())
    {
        gated.status = BoulderStatus::Completed;
    }
    if let (true, Some((_, p))) = (t.inherit_cooldowns, &parent) {
        if p.last_enforcement > gated.last_enforcement {
            gated.last_enforcement = p.last_enforcement.clone();
        }
        gated.failure_count = gated.failure_count.max(p.failure_count);
    }
    let mut d = super::decide(&gated, &kids, crate::time::now_secs(), &t, subagent, message);
    let mut chain: Vec<(String, &BoulderState)> = vec![(id.to_string(), &b)];
    if let Some((p, s)) = &parent {
        chain.push((p.clone(), s));
    }
    let failures = if d.reset_failures { 0 } else { b.failure_count };
    // The task: the story last worked on, else (when pushing on) this worktree's next open story,
    // else the boulder's name.
    let task = b
        .last_story
        .clone()
        .or_else(|| {
            let r = super::resume::resume(ws).ok().filter(|_| d.enforce)?;
            let s = r.next.filter(|_| r.boulder.as_deref() == Some(id))?;
            Some(format!("{}: {}", s.id, s.title))
        })
        .unwrap_or_else(|| id.to_string());
    let mut text = super::message(&chain, &task, failures, t.max_failures);
    if d.enforce {
        if b.last_message.as_deref() == Some(text.as_str()) {
            // Never the same message twice in a row.
            text.push_str(&format!("\n(iteration {} still waiting)", b.iteration));
        }
        // Two checks at once (two idle events of one turn, two harness hooks) decide on the same
        // state; only the first to record pushes the agent on, the other finds its enforcement
        // and answers with the cooldown.
        if d.reset_failures {
            store.append::<BoulderState>(&bref, BoulderOp::ResetFailures {})?;
        }
        let seen = b.last_enforcement.clone();
        let op = BoulderOp::Enforced { gate: Opt::Set(d.gate.to_string()), message: Opt::Set(text.clone()) };
        let recorded = store.append_if::<BoulderState>(&bref, |cur| {
            Ok((cur.map(|c| &c.last_enforcement) == Some(&seen)).then(|| op.clone()))
        })?;
        if recorded.is_none() {
            d = Decision {
                enforce: false,
                gate: "cooldown",
                reason: "another check enforced on this boulder a moment ago".into(),
                variant: None,
                reset_failures: false,
            };
        }
    }
    d.reset_failures = false;
    Ok(Checked {
        decision: d,
        message: text,
        boulder: id.to_string(),
        iteration: b.iteration,
        parent_iteration: parent.as_ref().map(|(_, s)| s.iteration),
        depth: b.depth,
    })
}
