//! What the dashboard shows, as one JSON document made whenever the state changes: the rows of
//! `status --json` (the same code makes them), each stream's stories, commits, checkpoint and op
//! history, its dependencies, the ownership of the base's tree and the commits recorded per
//! stream over time. Every list is bounded, and says when it was cut. Every string in it is made
//! inert ([`crate::text::inert_lines`]) before it leaves: the page shows text, never acts on it.

use serde_json::{json, Value};

use crate::error::Result;
use crate::plan::{Plan, StreamDef};
use crate::prd::Prd;
use crate::state::{self, BoulderState, Store, StreamStatus};
use crate::stream::status::{collect, queue, RowStatus, StreamRow};
use crate::workspace::Workspace;

/// Commits of a stream's branch shown on its page.
const MAX_COMMITS: usize = 50;
/// Ops of a stream's history shown on its page (of each op-log: the stream's and its boulder's).
const MAX_OPS: usize = 50;
/// Recorded commits per stream on the timeline.
const MAX_ACTIVITY: usize = 500;
/// Ops read back from one op-log at most, whatever its length.
const MAX_OPS_READ: usize = 5_000;
/// Files of the base's tree on the ownership map.
pub const MAX_FILES: usize = 4_000;

/// One made snapshot: the whole document for the page, and `status --json`'s own.
pub struct Built {
    pub snapshot: String,
    pub status: String,
}

/// Statuses beyond the recorded ones, in the order the board shows them after those.
const FOUND: [RowStatus; 9] = [
    RowStatus::Review,
    RowStatus::ChangesRequested,
    RowStatus::Approved,
    RowStatus::NeedsAttention,
    RowStatus::BudgetSpent,
    RowStatus::Interrupted,
    RowStatus::SetupFailed,
    RowStatus::Stale,
    RowStatus::Invalid,
];

/// Every status a row can have, in board order: the recorded ones, then what the dashboard finds.
pub fn every_status() -> Vec<&'static str> {
    // A status added to RowStatus stops this match from compiling until FOUND lists it.
    let _listed = |s: RowStatus| match s {
        RowStatus::Recorded(_)
        | RowStatus::Review
        | RowStatus::ChangesRequested
        | RowStatus::Approved
        | RowStatus::NeedsAttention
        | RowStatus::BudgetSpent
        | RowStatus::Interrupted
        | RowStatus::SetupFailed
        | RowStatus::Stale
        | RowStatus::Invalid => (),
    };
    StreamStatus::ALL.iter().map(|s| s.as_str()).chain(FOUND.iter().map(|s| s.as_str())).collect()
}

/// What is kept from one snapshot to the next: the ownership map, made again only when the
/// base's tip or the plan changes (a big tree takes a while to walk; a commit in a stream's
/// worktree changes neither).
#[derive(Default)]
pub struct Cache {
    ownership: Option<(crate::git::ObjectId, Plan, Value)>,
}

/// Make the snapshot. `extra` (what the server knows: the last pull) goes in as it is.
pub fn build(ws: &Workspace, extra: Value, cache: &mut Cache) -> Result<Built> {
    let plan = ws.plan()?;
    let prd = ws.load_prd(Some(&plan), None).ok().map(|(_, p)| p);
    let rows = collect(ws, &plan, prd.as_ref())?;
    let status = to_string(&json!({ "streams": rows }))?;
    let positions = queue(&plan, &rows);
    let done = ws.recorded_done()?;
    let store = Store::new(&ws.repo)?;
    let base_tip = ws.repo.branch_tip(&plan.settings.base_branch)?;
    let mut streams = Vec::with_capacity(rows.len());
    for (row, position) in rows.iter().zip(positions) {
        let Some(def) = plan.stream(&row.name) else { continue };
        streams.push(stream(ws, &store, &plan, def, row, position, prd.as_ref(), &done, base_tip)?);
    }
    let repo = ws.root().ok().and_then(|r| r.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let now = crate::time::now_secs();
    let mut doc = json!({
        "repo": repo,
        "host": crate::git::identity::hostname(),
        "base_branch": plan.settings.base_branch,
        "now": now,
        "generated_at": crate::time::format_secs(now),
        "statuses": every_status(),
        "streams": streams,
        "ownership": cached_ownership(ws, &plan, base_tip, cache)?,
        "server": extra,
        "spend": spend(ws, &plan),
        "review": reviews(ws, &plan),
    });
    make_inert(&mut doc);
    Ok(Built { snapshot: to_string(&doc)?, status })
}

/// The figures of `git boulder spend` (docs/spend.md): by stream, in total, against the plan's
/// budget; `null` when nothing was spent and no budget is set (or a price cannot be read).
fn spend(ws: &Workspace, plan: &Plan) -> Value {
    let Some(ledger) = crate::spend::Ledger::read(ws, plan).ok().filter(|l| l.shown(plan)) else { return Value::Null };
    let streams: serde_json::Map<String, Value> =
        plan.streams.iter().filter_map(|s| ledger.view(plan, &s.name).map(|v| (s.name.clone(), json!(v)))).collect();
    let total = ledger.plan_current();
    let all = ledger.groups(crate::spend::ledger::By::Stream, None, None).into_iter().fold(
        crate::spend::Figures::default(),
        |mut t, (_, f)| {
            t.add(&f);
            t
        },
    );
    json!({
        "streams": streams,
        "total": all,
        "usd": all.usd(),
        "plan_budget": crate::spend::BudgetView::of(&plan.settings.budget, &total),
        "spent": ledger.plan_verdict(plan).line(),
    })
}

/// Where each stream that needs review stands (`null` when the plan asks for none): `{streams:
/// {NAME: {required, status, approvals, by, changes_requested}}}`, as `review::verdict` says at
/// the tip of the stream's branch here.
fn reviews(ws: &Workspace, plan: &Plan) -> Value {
    let mut out = serde_json::Map::new();
    for def in &plan.streams {
        let need = crate::review::required(plan, &def.name);
        if need == 0 {
            continue;
        }
        // A state that cannot be read shows as holding no decisions (the row says INVALID).
        let verdict =
            crate::review::verdict_here(ws, plan, def).unwrap_or(crate::review::Verdict::Waiting { have: 0, need });
        let (by, changes) = match &verdict {
            crate::review::Verdict::Approved { by } => (by.clone(), Value::Null),
            crate::review::Verdict::ChangesRequested { reviewer, message } => {
                (Vec::new(), json!({ "reviewer": reviewer, "message": message }))
            }
            _ => (Vec::new(), Value::Null),
        };
        let approvals = match &verdict {
            crate::review::Verdict::Waiting { have, .. } => *have as usize,
            _ => by.len(),
        };
        out.insert(
            def.name.clone(),
            json!({ "required": need, "status": verdict.status(), "approvals": approvals, "by": by, "changes_requested": changes }),
        );
    }
    if out.is_empty() {
        Value::Null
    } else {
        json!({ "streams": out })
    }
}

/// A snapshot saying only why none could be made (a broken plan, say), for the page to show.
pub fn failed(message: &str, extra: Value) -> String {
    let mut doc =
        json!({ "error": message, "now": crate::time::now_secs(), "server": extra, "statuses": every_status() });
    make_inert(&mut doc);
    doc.to_string()
}

fn to_string(v: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(v)
        .map_err(|e| crate::error::Error::internal("cannot write the dashboard's JSON").with_source(e))
}

/// One stream: its `status --json` row, its queue position, and what its page shows.
#[allow(clippy::too_many_arguments)]
fn stream(
    ws: &Workspace,
    store: &Store,
    plan: &Plan,
    def: &StreamDef,
    row: &StreamRow,
    position: String,
    prd: Option<&Prd>,
    done: &std::collections::BTreeSet<String>,
    base_tip: Option<crate::git::ObjectId>,
) -> Result<Value> {
    let stories: Vec<Value> = match prd {
        Some(prd) => ws
            .stream_stories(plan, def, prd, done)?
            .into_iter()
            .map(|s| json!({ "id": s.id, "title": s.title, "status": s.status.as_str(), "done": s.status.is_done() }))
            .collect(),
        None => def.stories.iter().map(|id| json!({ "id": id, "done": done.contains(id) })).collect(),
    };
    let (commits, commits_more) = commits(ws, &def.branch, base_tip)?;
    let checkpoint = store
        .read::<BoulderState>(&state::boulder_ref(&def.name))
        .ok()
        .flatten()
        .and_then(|b| b.state.checkpoint)
        .map(|c| json!({ "message": c.message, "at": c.at }));
    let (mut ops, _) = history(ws, store, &state::stream_ref(&def.name), "stream")?;
    let (boulder_ops, activity) = history(ws, store, &state::boulder_ref(&def.name), "boulder")?;
    ops.extend(boulder_ops);
    // Newest first, by time as recorded (RFC 3339 in UTC sorts as text).
    ops.sort_by(|a, b| b["at"].as_str().cmp(&a["at"].as_str()));
    ops.truncate(MAX_OPS);
    Ok(json!({
        "row": row,
        "queue": position,
        "depends_on": def.depends_on,
        "paths": def.paths,
        "stories": stories,
        "commits": commits,
        "commits_more": commits_more,
        "checkpoint": checkpoint,
        "ops": ops,
        "activity": activity,
    }))
}

/// The newest commits of `branch` the base lacks: id, subject, time; and whether there are more.
fn commits(ws: &Workspace, branch: &str, base_tip: Option<crate::git::ObjectId>) -> Result<(Vec<Value>, bool)> {
    use crate::error::ResultExt;
    let Some(tip) = ws.repo.branch_tip(branch)? else { return Ok((Vec::new(), false)) };
    let objects = ws.repo.objects();
    let mut out = Vec::new();
    for walked in objects.walk([tip], base_tip).internal(format_args!("cannot walk the history of {branch}"))? {
        let walked = walked.internal(format_args!("cannot walk the history of {branch}"))?;
        if out.len() == MAX_COMMITS {
            return Ok((out, true));
        }
        let info = objects.commit_info(walked.id)?;
        let time = objects.commit_time(walked.id).map(|t| crate::time::format_secs(t as f64));
        out.push(json!({ "id": walked.id.to_string(), "subject": info.subject, "time": time }));
    }
    Ok((out, false))
}

/// The newest ops of op-log `refname` (at most [`MAX_OPS`]), and (for a boulder's) the times of
/// the commits it records (`activity` ops; at most [`MAX_ACTIVITY`]), in seconds.
fn history(ws: &Workspace, store: &Store, refname: &str, which: &str) -> Result<(Vec<Value>, Vec<f64>)> {
    let max_activity = if which == "boulder" { MAX_ACTIVITY } else { 0 };
    let Some(tip) = ws.repo.ref_id(refname)? else { return Ok((Vec::new(), Vec::new())) };
    let mut ops = Vec::new();
    let mut activity = Vec::new();
    for entry in store.history_iter(tip).take(MAX_OPS_READ) {
        // A broken op-log shows what could be read; `doctor` and `log` say what is wrong.
        let Ok(entry) = entry else { break };
        let op = entry.op;
        if op.kind == "activity" && activity.len() < max_activity {
            let at = op.data.get("at").and_then(Value::as_str).unwrap_or(&op.at);
            if let Some(secs) = crate::time::parse_rfc3339(at) {
                activity.push(secs);
            }
        }
        if ops.len() < MAX_OPS {
            ops.push(json!({ "log": which, "at": op.at, "actor": op.actor, "kind": op.kind, "data": op.data }));
        }
        if ops.len() == MAX_OPS && activity.len() == max_activity {
            break;
        }
    }
    Ok((ops, activity))
}

fn cached_ownership(
    ws: &Workspace,
    plan: &Plan,
    base_tip: Option<crate::git::ObjectId>,
    cache: &mut Cache,
) -> Result<Value> {
    if let (Some(tip), Some((at, for_plan, map))) = (base_tip, &cache.ownership) {
        if *at == tip && for_plan == plan {
            return Ok(map.clone());
        }
    }
    let map = ownership(ws, plan, base_tip)?;
    cache.ownership = base_tip.map(|tip| (tip, plan.clone(), map.clone()));
    Ok(map)
}

/// The base's tree, each file with what owns it: a stream (the first whose globs match), the
/// `shared_read` globs, the PRD, or nothing. At most [`MAX_FILES`] files, in path order.
fn ownership(ws: &Workspace, plan: &Plan, base_tip: Option<crate::git::ObjectId>) -> Result<Value> {
    use crate::plan::ownership::{Checker, Rule, Verdict};
    let Some(tip) = base_tip else { return Ok(json!({ "files": [], "total": 0, "shown": 0 })) };
    let mut paths = ws.repo.tree_paths(tip)?;
    paths.sort();
    let total = paths.len();
    paths.truncate(MAX_FILES);
    let checker = Checker::new(plan);
    let files: Vec<Value> = paths
        .iter()
        .map(|p| {
            // Judged as a change by no stream (an empty name is none): whoever owns it shows.
            let (kind, owner) = match checker.verdict("", p) {
                Verdict::Allowed if *p == plan.prd => ("prd", None),
                Verdict::Violation(Rule::SharedRead, _) => ("shared_read", None),
                Verdict::Violation(Rule::OtherStream, owner) => ("stream", owner),
                _ => ("unowned", None),
            };
            json!({ "path": crate::text::quote_path(p.as_bytes()), "kind": kind, "owner": owner })
        })
        .collect();
    Ok(json!({ "commit": tip.to_string(), "files": files, "total": total, "shown": files.len() }))
}

/// Every string of `v` (keys included) made inert: control characters shown as escapes.
fn make_inert(v: &mut Value) {
    match v {
        Value::String(s) => {
            if let std::borrow::Cow::Owned(o) = crate::text::inert_lines(s) {
                *s = o;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(make_inert),
        Value::Object(map) => {
            let old = std::mem::take(map);
            for (k, mut item) in old {
                make_inert(&mut item);
                map.insert(crate::text::inert(&k).into_owned(), item);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_leave_inert() {
        let mut v = json!({ "a\u{1b}": ["x\u{1b}[31m<b>", { "t": "\u{202e}y" }], "n": 1 });
        make_inert(&mut v);
        assert_eq!(v, json!({ "a\\e": ["x\\e[31m<b>", { "t": "\\u{202e}y" }], "n": 1 }));
    }

    #[test]
    fn every_status_is_listed_once() {
        let all = every_status();
        assert_eq!(all.len(), StreamStatus::ALL.len() + FOUND.len());
        assert!(all.contains(&"NEEDS_ATTENTION") && all.contains(&"MERGED") && all.contains(&"DEFINED"));
    }
}
