//! `git boulder status` (also `stream list`, `stream status`): the dashboard.

use std::io::Write;

use crate::error::Result;
use crate::status::{ago, collect};
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print {"streams":[{name, status, branch, progress:{done,total}, iteration, last_activity,
    /// worktree, ahead, behind, dirty, claim}]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ws: &Workspace, args: StatusArgs) -> Result<()> {
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
    let rows = collect(ws, &plan, prd.as_ref())?;
    let mut out = std::io::stdout().lock();
    if args.json {
        return super::output::json(&mut out, &serde_json::json!({ "streams": rows }));
    }
    if rows.is_empty() {
        writeln!(out, "no streams in the plan")?;
        return Ok(());
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                r.status.clone(),
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
            ]
        })
        .collect();
    super::output::table(
        &mut out,
        &[
            "STREAM",
            "STATUS",
            "PROGRESS",
            "BRANCH",
            "AHEAD/BEHIND",
            "WORKTREE",
            "LAST ACTIVITY",
            "ITERATION",
            "CLAIMED BY",
        ],
        &table,
        |col, cell| match col {
            1 => super::output::status_colour(cell),
            5 if cell == "dirty" => Some("33"),
            _ => None,
        },
    )
}
