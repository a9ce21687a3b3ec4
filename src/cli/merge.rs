//! `git boulder stream merge (NAME…|--all)`: check first, then change; the work is in
//! [`crate::merge`].

use std::io::Write;

use crate::context::Context;
use crate::error::Result;
use crate::merge::batch::Batch;
use crate::merge::{self, Options, Report};
use crate::plan::MergeStrategy;
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// Streams to merge, in the order given.
    #[arg(value_name = "NAME", required_unless_present = "all", conflicts_with = "all", value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub names: Vec<String>,
    /// Merge every complete stream in depends_on order; stop at the first that cannot merge.
    #[arg(long)]
    pub all: bool,
    /// Print the commits, the conflict check and the PRD diff; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How the base receives the stream (default: the stream's merge_strategy, else settings).
    #[arg(long, value_enum, value_name = "STRATEGY")]
    pub strategy: Option<StrategyArg>,
    /// Merge even when the stream's stories are not all done.
    #[arg(long)]
    pub force: bool,
    /// Wait for the merge lock (and the stream's lock) instead of refusing when busy.
    #[arg(long)]
    pub wait: bool,
    /// Land on this remote's base branch through the merge queue (default: settings.merge_remote).
    ///
    /// Fetches the remote's base and state, checks and replays against the remote's tip, runs
    /// verify, then pushes the base with a compare-and-swap; a lost race is tried again from a
    /// fresh fetch. The local base follows when it is behind.
    #[arg(long, value_name = "REMOTE", conflicts_with = "no_remote")]
    pub remote: Option<String>,
    /// Merge into the local base branch even when settings.merge_remote is set.
    #[arg(long)]
    pub no_remote: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum StrategyArg {
    /// Replay the stream's commits onto the base, then fast-forward the base.
    Rebase,
    /// One merge commit of the base tip and the stream tip.
    Merge,
    /// One commit on the base with the stream's changes and its story ids in the message.
    Squash,
}

/// A note on stderr, unless quiet.
fn say(ctx: &Context, line: &str) {
    if !ctx.quiet {
        eprintln!("{}", crate::text::inert_lines(line));
    }
}

pub fn run(ws: &Workspace, ctx: &Context, args: MergeArgs) -> Result<()> {
    let say = |line: &str| say(ctx, line);
    let plan = ws.plan()?;
    let batch = Batch {
        names: args.names,
        all: args.all,
        opts: Options {
            strategy: args.strategy.map(|s| match s {
                StrategyArg::Rebase => MergeStrategy::Rebase,
                StrategyArg::Merge => MergeStrategy::Merge,
                StrategyArg::Squash => MergeStrategy::Squash,
            }),
            dry_run: args.dry_run,
            force: args.force,
            wait: args.wait,
            remote: crate::git::remote::for_merge(
                &ws.repo,
                plan.settings.merge_remote.as_deref(),
                args.remote,
                args.no_remote,
            )?,
        },
    };
    let mut out = std::io::stdout().lock();
    let merged = merge::batch::run(ws, &plan, &batch, &say, |report| print(ctx, &mut out, report, args.dry_run))?;
    if args.all && merged.is_empty() {
        writeln!(out, "nothing to merge: no complete stream has unmerged work")?;
    }
    if !args.dry_run && !merged.is_empty() && batch.opts.remote.is_none() {
        if let Some(line) = crate::stream::status::push_hint(ws, &plan)? {
            say(&line);
        }
    }
    Ok(())
}

/// `settings.auto_merge`: merge a stream its run loop just completed, as `stream merge NAME` would.
pub fn auto(ws: &Workspace, ctx: &Context, plan: &crate::plan::Plan, stream: &crate::plan::StreamDef) -> Result<()> {
    let say = |line: &str| say(ctx, line);
    merge::batch::auto(ws, plan, stream, &say, |report| print(ctx, &mut std::io::stdout().lock(), report, false))
}

/// The base a report names: `main`, or `main on origin` for a merge into a remote.
fn base_shown(r: &Report) -> String {
    match &r.remote {
        Some(remote) => format!("{} on {}", r.base, crate::text::inert(remote)),
        None => r.base.clone(),
    }
}

fn print(ctx: &Context, out: &mut impl Write, r: &Report, dry_run: bool) -> Result<()> {
    let strategy = merge::strategy_name(r.strategy);
    if !r.ownership.is_empty() {
        let lines: Vec<String> = r.ownership.iter().map(|v| format!("  {}", merge::violation_line(v))).collect();
        let text = format!("ownership: stream {} changes paths it does not own:\n{}", r.stream, lines.join("\n"));
        if dry_run {
            writeln!(out, "{}", crate::text::inert_lines(&text))?;
        } else {
            say(ctx, &text);
        }
    }
    if !r.conflicts.is_empty() {
        writeln!(out, "stream {} → {} ({strategy}): conflicts", r.stream, base_shown(r))?;
        let rows: Vec<Vec<String>> = r
            .conflicts
            .iter()
            .map(|c| {
                vec![
                    crate::text::quote_path(c.path.as_bytes()).into_owned(),
                    c.kind.as_str().to_string(),
                    c.commit[..12].to_string(),
                    c.subject.clone(),
                ]
            })
            .collect();
        return super::output::table(out, &["PATH", "KIND", "COMMIT", "SUBJECT"], &rows, |col, _| {
            (col == 1).then_some("31")
        });
    }
    if dry_run {
        writeln!(out, "stream {} → {} ({strategy}), dry run: nothing changed", r.stream, base_shown(r))?;
        if r.steps.is_empty() && r.recorded == Some(0) {
            writeln!(out, "commits: none (no commits of its own were recorded for this stream)")?;
        } else if r.steps.is_empty() {
            writeln!(out, "commits: none (the base already holds the stream)")?;
        } else {
            writeln!(out, "commits:")?;
            for s in &r.steps {
                let to = match (s.new, s.merge) {
                    (Some(n), false) if n == s.original => "kept".to_string(),
                    (Some(n), false) => format!("→ {}", merge::short(n)),
                    (None, false) => "dropped (already on the base)".to_string(),
                    (Some(n), true) => {
                        format!(
                            "→ {} (a merge commit: what it changed beyond its parents, as one commit)",
                            merge::short(n)
                        )
                    }
                    (None, true) => {
                        "dropped (a merge commit that changed nothing beyond its parents, whose commits are replayed)"
                            .to_string()
                    }
                };
                writeln!(out, "  {} {to}  {}", merge::short(s.original), crate::text::inert(&s.subject))?;
            }
        }
        writeln!(out, "check: clean")?;
        match &r.prd_diff {
            Some(d) => {
                writeln!(out, "PRD changes:")?;
                out.write_all(crate::text::inert_lines(d).as_bytes())?;
            }
            None => writeln!(out, "PRD changes: none")?,
        }
        return Ok(());
    }
    let at = r.commit.map(merge::short).unwrap_or_default();
    if r.up_to_date && r.prd_commit.is_none() {
        writeln!(out, "{}: already in {} ({at}); recorded MERGED", r.stream, base_shown(r))?;
    } else {
        let resumed = if r.resumed { " (finished an interrupted merge)" } else { "" };
        let rounds = if r.rounds > 0 { format!(" after {} lost round(s)", r.rounds) } else { String::new() };
        writeln!(
            out,
            "{}: merged into {} at {at} ({strategy}, {} commit(s)){resumed}{rounds}",
            r.stream,
            base_shown(r),
            r.gained
        )?;
    }
    if r.steps.is_empty() && r.recorded == Some(0) {
        writeln!(out, "{}: no commits of its own were recorded for this stream", r.stream)?;
    }
    if let Some(p) = r.prd_commit {
        writeln!(out, "{}: PRD completion synced in {}", r.stream, merge::short(p))?;
    }
    Ok(())
}
