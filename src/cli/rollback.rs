//! `git boulder stream rollback` and `git boulder stream unmerge`: taking a stream's work back,
//! from its branch or from the base; the work is in [`crate::stream::rollback`] and
//! [`crate::merge::unmerge`].

use std::io::Write;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::merge::short;
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The stream.
    #[arg(value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub name: String,
    /// Go back to this commit of the branch's history instead of the fork point with the base.
    #[arg(long, value_name = "REV", conflicts_with = "restore")]
    pub to: Option<String>,
    /// Bring the latest backup back (the tip it replaces is kept under a new backup).
    #[arg(long)]
    pub restore: bool,
}

#[derive(Debug, clap::Args)]
pub struct UnmergeArgs {
    /// The stream.
    #[arg(value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub name: String,
    /// Take it out of this remote's base branch, through the merge queue (default:
    /// settings.merge_remote).
    #[arg(long, value_name = "REMOTE", conflicts_with = "no_remote")]
    pub remote: Option<String>,
    /// Take it out of the local base branch even when settings.merge_remote is set.
    #[arg(long)]
    pub no_remote: bool,
}

pub fn rollback(ws: &Workspace, args: RollbackArgs) -> Result<()> {
    let plan = ws.plan()?;
    let stream = ws.stream(&plan, &args.name)?;
    let done = if args.restore {
        crate::stream::rollback::restore(ws, stream)?
    } else {
        crate::stream::rollback::rollback(ws, &plan, stream, args.to.as_deref())?
    };
    let mut out = std::io::stdout().lock();
    match done {
        None => writeln!(out, "{}: branch {} is there already; nothing changed", stream.name, stream.branch)?,
        Some(r) => {
            let verb = if r.restored { "restored" } else { "rolled back" };
            writeln!(out, "{}: {verb} branch {} from {} to {}", r.stream, r.branch, short(r.from), short(r.to))?;
            if let Some(b) = &r.backup {
                writeln!(out, "{}: the old tip {} is kept in {b}", r.stream, short(r.from))?;
            }
        }
    }
    Ok(())
}

pub fn unmerge(ws: &Workspace, ctx: &Context, args: UnmergeArgs) -> Result<()> {
    let plan = ws.plan()?;
    let stream = ws.stream(&plan, &args.name)?;
    let remote =
        crate::git::remote::for_merge(&ws.repo, plan.settings.merge_remote.as_deref(), args.remote, args.no_remote)?;
    let say = |line: &str| {
        if !ctx.quiet {
            eprintln!("{}", crate::text::inert_lines(line));
        }
    };
    let u = crate::merge::unmerge::unmerge(ws, &plan, stream, remote.as_deref(), &say)?;
    let mut out = std::io::stdout().lock();
    let base = match &u.remote {
        Some(r) => format!("{} on {}", u.base, crate::text::inert(r)),
        None => u.base.clone(),
    };
    if !u.conflicts.is_empty() {
        writeln!(out, "stream {} ← {base}: the revert conflicts with what came after", u.stream)?;
        let rows: Vec<Vec<String>> = u
            .conflicts
            .iter()
            .map(|c| vec![crate::text::quote_path(c.path.as_bytes()).into_owned(), c.kind.as_str().to_string()])
            .collect();
        super::output::table(&mut out, &["PATH", "KIND"], &rows, |col, _| (col == 1).then_some("31"))?;
        return Err(Error::refused(format!(
            "stream {} cannot be taken out of {base}: {} conflict(s) with later commits; nothing was changed",
            u.stream,
            u.conflicts.len()
        ))
        .hint("revert it by hand (`git revert`) and resolve"));
    }
    match u.revert {
        Some(c) => writeln!(out, "{}: taken out of {base} by revert {}", u.stream, short(c))?,
        None => writeln!(out, "{}: {base} no longer held its changes; nothing to revert", u.stream)?,
    }
    if let Some(p) = u.prd_commit {
        writeln!(out, "{}: stories reopened in the PRD in {}", u.stream, short(p))?;
    }
    match (u.stream_tip, &u.stream_kept) {
        (Some(t), _) => {
            writeln!(out, "{}: branch {} rebuilt on the new base at {}", u.stream, stream.branch, short(t))?
        }
        (None, Some(why)) => writeln!(out, "{}: branch {} left as it was: {why}", u.stream, stream.branch)?,
        (None, None) => {}
    }
    if let Some(b) = &u.backup {
        writeln!(out, "{}: the branch's old tip is kept in {b}", u.stream)?;
    }
    writeln!(out, "{}: recorded COMPLETED; fix it and merge it again", u.stream)?;
    Ok(())
}
