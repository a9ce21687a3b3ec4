//! `git boulder work [--remote R] [--parallel N] [-- CMD…]`: the worker; the scheduling is in
//! [`crate::worker`].

use std::sync::Arc;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::worker::{self as work, Outcome};
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct WorkArgs {
    /// Claim streams, merge them and share state through this remote (the merge queue); without
    /// it, one machine with local merges
    /// (default: settings.merge_remote).
    #[arg(long, value_name = "REMOTE", conflicts_with = "no_remote")]
    pub remote: Option<String>,
    /// Work on this machine alone with local merges, even when settings.merge_remote is set.
    #[arg(long)]
    pub no_remote: bool,
    /// Streams run at once on this machine (default: settings.boulder.parallel_limit).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub parallel: Option<u32>,
    /// How long to wait between looks at the remote while other machines hold what is left
    /// (e.g. 500ms, 5s).
    #[arg(long, value_name = "D", value_parser = super::values::duration(), default_value = "1s")]
    pub poll: std::time::Duration,
    /// The agent command and its arguments for every stream (after `--`); without it, each
    /// stream's `agent` from settings.agents.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn run(ws: &Workspace, ctx: &Context, args: WorkArgs) -> Result<()> {
    let plan = ws.plan()?;
    if plan.streams.is_empty() {
        return Err(Error::usage("the plan has no streams to work on").hint("add streams to .boulder/streams.yaml"));
    }
    let exe = std::env::current_exe().map_err(|e| {
        Error::internal(format!("cannot find this program: {e}")).with_source(e).hint("reinstall git-boulder")
    })?;
    let mut child_flags = Vec::new();
    // `--trust` is for the plan read now: the children trust its commands only, not those of a
    // plan a pull brings in while the worker runs.
    if let (true, Some(fp)) = (ctx.trust, crate::trust::fingerprint(&plan)) {
        child_flags.extend(["--trust-fingerprint".to_string(), fp]);
    }
    if let Some(c) = &ws.config_override {
        child_flags.push("--config".to_string());
        child_flags.push(crate::git::absolute(c).display().to_string());
    }
    let opts = work::Options {
        remote: crate::git::remote::for_merge(
            &ws.repo,
            plan.settings.merge_remote.as_deref(),
            args.remote,
            args.no_remote,
        )?,
        parallel: args.parallel.unwrap_or(plan.settings.boulder.parallel_limit).max(1) as usize,
        command: args.command,
        exe,
        child_flags,
        poll: args.poll,
    };
    let summary = work::work(ws, &plan, &opts, Arc::new(work::Printer { quiet: ctx.quiet }))?;
    let rows: Vec<Vec<String>> = summary.rows.iter().map(|(n, o)| vec![n.clone(), o.describe()]).collect();
    let mut out = std::io::stdout().lock();
    super::output::table(&mut out, &["STREAM", "OUTCOME"], &rows, |col, cell| match col {
        1 if cell.starts_with("merged") => Some("32"),
        1 if cell.starts_with("failed") => Some("31"),
        1 => Some("33"),
        _ => None,
    })?;
    if summary.success() {
        return Ok(());
    }
    let open: Vec<&str> = summary.rows.iter().filter(|(_, o)| !o.is_merged()).map(|(n, _)| n.as_str()).collect();
    let failed = summary.rows.iter().any(|(_, o)| matches!(o, Outcome::Failed(_)));
    let mut e = if summary.interrupted {
        Error::refused(format!("interrupted; not merged: {}", open.join(", ")))
            .hint("every stream is resumable: run `git boulder work` again")
    } else {
        Error::refused(format!("not merged: {}", open.join(", ")))
    };
    if failed {
        e = e.hint("see why with `git boulder log NAME`; fix it, then run `git boulder work` again");
    }
    Err(e)
}
