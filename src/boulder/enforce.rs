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
    /// Record an enforcement under this gate instead of the one the gates decided (`progress`,
    /// for [`check_continued`]).
    pub gate: Option<&'static str>,
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
    // No plan: the default gates. A plan that does not parse is an error, never default gates
    // (a stop let through that the plan's settings would have held).
    let plan = ws.plan_if_any()?;
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
            if crate::stream::lifecycle::complete(ws, plan, stream).unwrap_or(false) {
                gated.status = BoulderStatus::Completed;
            }
        }
    }
    // The project boulder is done when the PRD's stories are.
    if b.parent.is_none()
        && id == super::tree::project_id(plan.as_ref())
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
        if let Some(g) = overrides.gate {
            d.gate = g;
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

/// The gate an enforcement of [`check_continued`] is recorded under.
pub const PROGRESS_GATE: &str = "progress";

/// The cap on enforcements in a row a harness honours when nobody has written since (Claude
/// Code's `CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`, 8 by default).
pub const DEFAULT_BLOCK_CAP: u32 = 8;

/// The agent stops while it is already going on because of an enforcement (Claude Code's and
/// Codex's `stop_hook_active`, an OpenCode session pushed by the plugin). It is held again — the
/// gates of [`check`] without the idle threshold and cooldown, recorded under the gate
/// `progress` — only when a commit was recorded on the boulder since its last enforcement (new
/// work), and while the enforcements in a row stay below `cap` (a chain starts with an
/// enforcement of another gate: the first push of a turn). Otherwise it is let stop: gate
/// `no_progress` or `block_cap`. Every hold needs a new commit, so the chain cannot go on
/// without work, and it is cut before the harness's own cap.
pub fn check_continued(ws: &Workspace, id: &str, cap: u32, message: Option<&str>) -> Result<Checked> {
    let store = Store::new(&ws.repo)?;
    let bref = state::boulder_ref(id);
    let b = read(&store, id)?.ok_or_else(|| Error::usage(format!("no boulder {id:?}")))?;
    let let_stop = |gate: &'static str, reason: String| Checked {
        decision: Decision { enforce: false, gate, reason, variant: None, reset_failures: false },
        message: String::new(),
        boulder: id.to_string(),
        iteration: b.iteration,
        parent_iteration: None,
        depth: b.depth,
    };
    let Some(tip) = ws.repo.ref_id(&bref)? else {
        return Ok(let_stop("no_progress", "no enforcement on this boulder to go on from".into()));
    };
    let mut last: Option<crate::git::ObjectId> = None;
    let mut chain = 0u32;
    for entry in store.history_iter(tip) {
        let entry = entry?;
        if entry.op.kind != "enforced" {
            continue;
        }
        last.get_or_insert(entry.commit);
        chain += 1;
        let gate = entry.op.data.get("gate").and_then(serde_json::Value::as_str);
        if gate != Some(PROGRESS_GATE) || chain >= cap {
            break;
        }
    }
    let Some(last) = last else {
        return Ok(let_stop("no_progress", "no enforcement on this boulder to go on from".into()));
    };
    let then = store.entry::<BoulderState>(last).map_err(|e| Error::internal(format!("{bref}: {e}")))?.state;
    if b.iteration <= then.iteration {
        return Ok(let_stop(
            "no_progress",
            "no commit recorded since the last enforcement: the agent may stop (new work holds it again)".into(),
        ));
    }
    if chain.saturating_add(1) >= cap {
        return Ok(let_stop(
            "block_cap",
            format!("{chain} enforcements in a row; the harness honours fewer than {cap} (its cap)"),
        ));
    }
    let overrides = Overrides {
        idle_threshold: Some(Duration::ZERO),
        cooldown: Some(Duration::ZERO),
        gate: Some(PROGRESS_GATE),
        ..Overrides::default()
    };
    check(ws, id, &overrides, false, message)
}
