//! `git boulder status` (also `stream list`, `stream status`): the dashboard.

use std::io::Write;

use crate::context::Context;
use crate::error::Result;
use crate::state::StreamStatus;
use crate::stream::status::{ago, collect_with, RowStatus};
use crate::workspace::Workspace;
use crate::worktree::dirty::Early;

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print {"streams":[{name, status, branch, progress:{done,total}, iteration, last_activity,
    /// worktree, ahead, behind, dirty, claim}]}.
    #[arg(long)]
    pub json: bool,
    /// Keep watching: redraw when refs change (or every second on a terminal), one line per
    /// stream with status, claim holder, queue position, progress and last activity. Not on a
    /// terminal, a new block per change (with --json, one JSON document per line). `q` or Ctrl-C
    /// ends it.
    #[arg(long)]
    pub watch: bool,
}

pub fn run(ws: &Workspace, ctx: &Context, args: StatusArgs) -> Result<()> {
    // The file system monitor's hook (a child process) runs while the plan, the PRD and the
    // state are read.
    let early = if args.watch { Early::none() } else { Early::start(&ws.repo) };
    let plan = ws.plan()?;
    // State that plain `git fetch` brought (after `git boulder remote setup`) comes in first.
    if let Err(e) = crate::sync::absorb_pending(&ws.repo) {
        eprintln!("warning: {}", crate::text::inert_lines(&e.message));
    }
    let prd = match ws.load_prd(Some(&plan), None) {
        Ok((_, prd)) => Some(prd),
        Err(e) => {
            eprintln!("warning: {}; progress counts only `prd done` records", crate::text::inert_lines(&e.message));
            None
        }
    };
    if args.watch {
        return super::watch::run(ws, &plan, args.json);
    }
    let rows = collect_with(ws, &plan, prd.as_ref(), early)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        return super::output::json(&mut out, &serde_json::json!({ "streams": rows }));
    }
    if rows.is_empty() {
        writeln!(out, "no streams in the plan")?;
        return Ok(());
    }
    // Like `git branch`: a `*` before the stream whose worktree this is, when there is one.
    let gutter = rows.iter().any(|r| r.current);
    // A SPEND column only once some stream spent something or has a budget.
    let spending = rows.iter().any(|r| r.spend.is_some());
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![
                match (gutter, r.current) {
                    (false, _) => r.name.clone(),
                    (true, true) => format!("* {}", r.name),
                    (true, false) => format!("  {}", r.name),
                },
                r.status.to_string(),
                format!("{}/{}", r.progress.done, r.progress.total),
                r.branch.clone(),
                match (r.ahead, r.behind) {
                    (Some(a), Some(b)) => format!("+{a}/-{b}"),
                    _ => "-".into(),
                },
                match r.dirty {
                    Some(true) => "dirty".into(),
                    Some(false) => "clean".into(),
                    None => "-".into(),
                },
                ago(r.last_activity.as_deref()),
                r.iteration.to_string(),
                match &r.claim {
                    Some(c) if c.mine => "this machine".into(),
                    Some(c) => format!("{}@{}", c.actor, c.host),
                    None => "-".into(),
                },
            ];
            if spending {
                row.push(spend_cell(r.spend.as_ref()));
            }
            row
        })
        .collect();
    let notes = hints(ws, &plan, &rows)?;
    let mut header = vec![
        "STREAM",
        "STATUS",
        "PROGRESS",
        "BRANCH",
        "AHEAD/BEHIND",
        "WORKTREE",
        "LAST ACTIVITY",
        "COMMITS",
        "CLAIMED BY",
    ];
    if spending {
        header.push("SPEND");
    }
    super::output::table(&mut out, &header, &table, |col, cell| match col {
        1 => super::output::status_colour(cell),
        5 if cell == "dirty" => Some("33"),
        _ => None,
    })?;
    if !ctx.quiet {
        for line in notes {
            eprintln!("{line}");
        }
    }
    Ok(())
}

/// The SPEND cell: the cost of all it spent (or `unknown`), then its budget's figures.
pub(crate) fn spend_cell(v: Option<&crate::spend::StreamView>) -> String {
    let Some(v) = v else { return "-".into() };
    let mut text = match v.total.is_empty() {
        true => "-".to_string(),
        false => crate::spend::budget::cost(&v.total),
    };
    if let Some(b) = &v.budget {
        text.push_str(&format!(" (budget {})", b.text()));
    }
    text
}

/// What to do next, under the table: resume interrupted runs, merge completed streams, push a
/// base that holds merges its upstream lacks.
fn hints(ws: &Workspace, plan: &crate::plan::Plan, rows: &[crate::stream::status::StreamRow]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    // The plan's budget is said once, not once per stream.
    let mut plan_said = false;
    for r in rows {
        match r.status {
            RowStatus::Interrupted => {
                // Without an agent in the plan, the run needs its command again.
                let cmd = match plan.stream(&r.name).and_then(|s| s.agent.as_ref()) {
                    Some(_) => format!("git boulder stream run {}", r.name),
                    None => format!("git boulder stream run {} -- CMD…", r.name),
                };
                out.push(format!("{}: its run was interrupted; resume it with `{cmd}`", r.name))
            }
            RowStatus::NeedsAttention => {
                if let Some(a) = &r.attention {
                    out.push(format!("{}: needs attention: {}", r.name, a.summary()));
                    if let Some(h) = &a.hint {
                        out.push(format!("  fix: {}", h.lines().next().unwrap_or_default()));
                    }
                    out.push(format!("  then commit on its branch, or run `{}`", a.command));
                }
            }
            RowStatus::BudgetSpent => match r.spend.as_ref().map(|v| (&v.spent, v.spent_budget)) {
                Some((Some(why), Some(crate::spend::Why::Stream))) => out.push(format!(
                    "{}: {why}; no worker starts another iteration of it until its budget is raised in the plan or `git boulder spend reset {}`",
                    r.name, r.name
                )),
                Some((Some(why), _)) if !plan_said => {
                    plan_said = true;
                    out.push(format!(
                        "{why}; no worker starts another iteration until settings.budget is raised in the plan or the streams' spend is reset (`git boulder spend reset NAME`)"
                    ))
                }
                _ => {}
            },
            RowStatus::SetupFailed => out.push(format!(
                "{}: its setup command failed; fix it and set it up again with `git boulder stream init {}`",
                r.name, r.name
            )),
            RowStatus::Recorded(StreamStatus::Completed) if r.progress.done < r.progress.total => out.push(format!(
                "{}: recorded complete, but {} of its {} stories are open (reopened since?): `git boulder prd show --stream {}`",
                r.name,
                r.progress.total - r.progress.done,
                r.progress.total,
                r.name
            )),
            RowStatus::Recorded(StreamStatus::Completed) => {
                out.push(format!("{}: all stories done, ready to merge: `git boulder stream merge {}`", r.name, r.name))
            }
            RowStatus::Review => out.push(format!(
                "{}: all stories done, waiting for review: `git boulder review {}` (approve with --approve)",
                r.name, r.name
            )),
            RowStatus::ChangesRequested => out.push(format!(
                "{}: changes requested (`git boulder review {}`); `git boulder stream run {}` or `git boulder work` gives them to its agent",
                r.name, r.name, r.name
            )),
            RowStatus::Approved => {
                out.push(format!("{}: approved, ready to merge: `git boulder stream merge {}`", r.name, r.name))
            }
            _ => {}
        }
    }
    // Claims no worker honours (an expiry beyond any lease): shown with their holder, not as held.
    for (remote, stream, c) in crate::sync::claim::seen(&ws.repo)? {
        if let Some(why) = c.invalid() {
            out.push(format!(
                "{stream}: the claim seen on {remote} (by {} on {}, until {}) is invalid: {why}; workers treat it as \
                 expired (`git boulder stream release {stream} --remote {remote} --force` removes it)",
                c.actor, c.host, c.expires
            ));
        }
    }
    if let Some(line) = crate::stream::status::push_hint(ws, plan)? {
        out.push(line);
    }
    Ok(out)
}
