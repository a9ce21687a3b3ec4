//! `git boulder review NAME`: the one screen a reviewer needs ([`crate::inspect::view`]), and
//! recording a decision on the stream's tip ([`crate::review::record`]).

use std::io::Write;

use crate::error::{Error, Result};
use crate::git::id::short;
use crate::inspect::View;
use crate::review::{Decision, Recorded, Verdict};
use crate::workspace::Workspace;

/// The arguments of `git boulder review` (its help text is the `Review` command's, in `cli/mod.rs`).
#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// The stream.
    #[arg(value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub name: String,
    /// Approve the stream's current tip.
    #[arg(long, group = "decision")]
    pub approve: bool,
    /// Ask for changes to the current tip (needs -m: the text its agent is given).
    #[arg(long, group = "decision", requires = "message")]
    pub request_changes: bool,
    /// Take your standing decision on the stream back.
    #[arg(long, group = "decision")]
    pub withdraw: bool,
    /// The decision's message (at most 64 KiB).
    #[arg(long, short, value_name = "TEXT")]
    pub message: Option<String>,
    /// Add the full diff, from where the stream forked from the base to its tip, through git's
    /// pager (none when stdout is not a terminal).
    #[arg(long, conflicts_with_all = ["approve", "request_changes", "withdraw", "json"])]
    pub diff: bool,
    /// Print the screen (or the recorded decision) as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ws: &Workspace, args: ReviewArgs) -> Result<()> {
    let plan = ws.plan()?;
    let stream = ws.stream(&plan, &args.name)?;
    let decision = match (args.approve, args.request_changes, args.withdraw) {
        (true, _, _) => Some(Decision::Approve),
        (_, true, _) => Some(Decision::RequestChanges),
        (_, _, true) => Some(Decision::Withdraw),
        _ => None,
    };
    let Some(decision) = decision else {
        if args.message.is_some() {
            return Err(Error::usage("-m gives a decision its message, and no decision was given")
                .hint(format!("git boulder review {} --approve -m TEXT (or --request-changes)", stream.name)));
        }
        let view = crate::inspect::view(ws, &plan, stream)?;
        let mut out = std::io::stdout().lock();
        if args.json {
            return super::output::json(&mut out, &view);
        }
        show(&mut out, &view)?;
        if args.diff {
            if let (Some(t), Some(b)) = (view.tip.as_deref(), view.base_tip.as_deref()) {
                writeln!(out)?;
                out.flush()?;
                drop(out);
                let id = |h: &str| h.parse().map_err(|_| Error::internal(format!("not a commit id: {h}")));
                crate::git::cli::diff_paged(ws.repo.run_dir(), id(b)?, id(t)?)?;
            }
        }
        return Ok(());
    };
    let reviewer = crate::review::reviewer(ws)?;
    let r = crate::review::record(ws, &plan, stream, &reviewer, decision, args.message)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        return super::output::json(&mut out, &recorded_json(&stream.name, &r));
    }
    recorded(&mut out, &stream.name, &r)
}

fn recorded_json(stream: &str, r: &Recorded) -> serde_json::Value {
    serde_json::json!({
        "stream": stream,
        "reviewer": r.reviewer,
        "decision": r.decision.as_str(),
        "tip": r.tip.to_string(),
        "recorded": !r.nothing_to_withdraw,
        "status": r.verdict.status(),
    })
}

fn recorded(out: &mut impl Write, stream: &str, r: &Recorded) -> Result<()> {
    let who = crate::text::inert(&r.reviewer);
    let tip = short(r.tip);
    if r.nothing_to_withdraw {
        writeln!(out, "{stream}: {who} has no decision standing; nothing was recorded")?;
        return Ok(());
    }
    let what = match r.decision {
        Decision::Approve => format!("approved {tip}"),
        Decision::RequestChanges => format!("requested changes to {tip}"),
        Decision::Withdraw => "withdrew their decision".to_string(),
    };
    writeln!(out, "{stream}: {who} {what}")?;
    writeln!(out, "{stream}: {}", verdict_line(&r.verdict, &tip))?;
    writeln!(out, "{stream}: `git boulder push` shares the decision")?;
    Ok(())
}

fn verdict_line(v: &Verdict, tip: &str) -> String {
    match v {
        Verdict::NotRequired => "the plan asks for no review of this stream".into(),
        Verdict::Waiting { have, need } => format!("REVIEW: {have} of {need} approval(s) of {tip}"),
        Verdict::ChangesRequested { reviewer, .. } => {
            format!("CHANGES_REQUESTED by {}", crate::text::inert(reviewer))
        }
        Verdict::Approved { by } => format!("APPROVED by {}", crate::text::inert(&by.join(", "))),
    }
}

/// Short ids and one-line text, as the screen shows them.
fn sh(hex: &str) -> &str {
    &hex[..hex.len().min(8)]
}

fn show(out: &mut impl Write, v: &View) -> Result<()> {
    let tip = v.tip.as_deref().map_or("(not here yet)".to_string(), |t| format!("at {}", sh(t)));
    let base = v.base_tip.as_deref().map_or("missing".to_string(), |t| format!("at {}", sh(t)));
    writeln!(out, "stream {}  branch {} {tip}  base {} {base}", v.stream, v.branch, v.base)?;
    let r = &v.review;
    let status = match (r.status, v.tip.as_deref()) {
        (None, _) => "not required".to_string(),
        (Some(s), Some(t)) => {
            format!("{s}  {} of {} approval(s) of {}", r.approvals, r.required, sh(t))
        }
        (Some(s), None) => format!("{s}  {} approval(s) needed", r.required),
    };
    writeln!(out, "review: {status}")?;

    stories_and_commits(out, v)?;
    changes(out, v)?;
    landing_check(out, v)?;
    decisions(out, v)
}

fn stories_and_commits(out: &mut impl Write, v: &View) -> Result<()> {
    writeln!(out, "\nstories")?;
    if v.stories.is_empty() {
        writeln!(out, "  (none)")?;
    }
    let rows: Vec<Vec<String>> =
        v.stories.iter().map(|s| vec![format!("  {}", s.id), s.status.clone(), s.title.clone()]).collect();
    table(out, &rows)?;
    if let Some(why) = &v.stories_unread {
        writeln!(out, "  (status unknown: {})", crate::text::inert(why))?;
    }

    writeln!(out, "\ncommits ({} on {} not on {})", v.commits_total, v.branch, v.base)?;
    let rows: Vec<Vec<String>> =
        v.commits.iter().map(|c| vec![format!("  {}", sh(&c.id)), c.subject.clone()]).collect();
    table(out, &rows)?;
    if v.commits_total > v.commits.len() {
        writeln!(out, "  …and {} more", v.commits_total - v.commits.len())?;
    }
    Ok(())
}

fn changes(out: &mut impl Write, v: &View) -> Result<()> {
    let files: usize = v.changes.iter().map(|g| g.files.len()).sum();
    let (added, deleted): (u64, u64) = v.changes.iter().fold((0, 0), |(a, d), g| (a + g.added, d + g.deleted));
    writeln!(out, "\nchanges ({files} file(s), +{added} -{deleted}, since it forked from {})", v.base)?;
    for g in &v.changes {
        let title = match (g.group, &g.owner) {
            ("own", _) => "its own paths".to_string(),
            ("shared_read", _) => "shared_read (no stream may change them)".to_string(),
            ("undeclared", _) => "undeclared (no stream owns them)".to_string(),
            (_, Some(o)) => format!("owned by stream {o}"),
            (other, None) => other.to_string(),
        };
        writeln!(out, "  {title}: +{} -{}", g.added, g.deleted)?;
        let rows: Vec<Vec<String>> = g
            .files
            .iter()
            .map(|f| {
                let n = |x: Option<u64>, s: char| x.map_or("binary".to_string(), |x| format!("{s}{x}"));
                vec![format!("    {}", f.path), n(f.added, '+'), n(f.deleted, '-')]
            })
            .collect();
        table(out, &rows)?;
    }

    Ok(())
}

fn landing_check(out: &mut impl Write, v: &View) -> Result<()> {
    writeln!(out, "\nlanding check")?;
    match &v.check {
        None => writeln!(out, "  not made: the stream or its base has no branch here")?,
        Some(c) => {
            writeln!(out, "  against {} at {}", v.base, sh(&c.base_tip))?;
            if let Some(why) = &c.refused {
                writeln!(out, "  refused: {}", crate::text::inert_lines(why))?;
            } else if c.up_to_date {
                writeln!(out, "  the base already holds it")?;
            } else if c.conflicts.is_empty() {
                writeln!(out, "  no conflicts")?;
            } else {
                writeln!(out, "  {} conflict(s):", c.conflicts.len())?;
                let rows: Vec<Vec<String>> = c
                    .conflicts
                    .iter()
                    .map(|x| {
                        vec![
                            format!("    {}", x.path),
                            x.kind.to_string(),
                            sh(&x.commit).to_string(),
                            x.subject.clone(),
                        ]
                    })
                    .collect();
                table(out, &rows)?;
            }
            if c.ownership.is_empty() {
                writeln!(out, "  ownership: nothing outside its own paths")?;
            } else {
                writeln!(out, "  ownership: {} path(s) outside its own:", c.ownership.len())?;
                for o in &c.ownership {
                    writeln!(out, "    {}", crate::text::inert(&crate::merge::violation_line(o)))?;
                }
            }
        }
    }

    Ok(())
}

fn decisions(out: &mut impl Write, v: &View) -> Result<()> {
    match &v.verify {
        Some(r) => writeln!(
            out,
            "\nverify: failed at {} ({}): {}",
            sh(&r.tip),
            r.at,
            crate::text::inert(r.reason.lines().next().unwrap_or(""))
        )?,
        None => writeln!(out, "\nverify: no result recorded (it runs when the stream lands)")?,
    }
    match &v.spend {
        Some(s) => writeln!(out, "spend: {}", super::status::spend_cell(Some(s)))?,
        None => writeln!(out, "spend: none recorded")?,
    }

    let r = &v.review;
    writeln!(out, "\ndecisions")?;
    if r.decisions.is_empty() {
        writeln!(out, "  (none)")?;
    }
    let rows: Vec<Vec<String>> = r
        .decisions
        .iter()
        .map(|d| {
            vec![
                format!("  {}", d.reviewer),
                d.decision.clone(),
                sh(&d.tip).to_string(),
                d.standing.to_string(),
                format!("{} on {}", d.at, d.actor),
            ]
        })
        .collect();
    table(out, &rows)?;
    for d in r.decisions.iter().filter(|d| d.message.is_some()) {
        let m = d.message.as_deref().unwrap_or_default();
        writeln!(out, "  {}: {}", crate::text::inert(&d.reviewer), crate::text::inert(m.lines().next().unwrap_or("")))?;
    }
    if v.history.len() > r.decisions.len() {
        writeln!(out, "\nearlier decisions (newest first)")?;
        let rows: Vec<Vec<String>> = v
            .history
            .iter()
            .map(|d| vec![format!("  {}", d.at), d.reviewer.clone(), d.decision.clone(), sh(&d.tip).to_string()])
            .collect();
        table(out, &rows)?;
    }
    if matches!(r.status, Some("REVIEW" | "CHANGES_REQUESTED")) && v.tip.is_some() {
        writeln!(out, "\nto decide: git boulder review {} --approve, or --request-changes -m TEXT", v.stream)?;
    }
    Ok(())
}

/// Rows aligned in columns, without a header (the section's title says what they are).
fn table(out: &mut impl Write, rows: &[Vec<String>]) -> Result<()> {
    let Some(n) = rows.first().map(Vec::len) else { return Ok(()) };
    let rows: Vec<Vec<std::borrow::Cow<'_, str>>> =
        rows.iter().map(|r| r.iter().map(|c| crate::text::inert(c)).collect()).collect();
    let mut widths = vec![0; n];
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    for row in &rows {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(c);
            } else {
                line.push_str(c);
                line.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}
