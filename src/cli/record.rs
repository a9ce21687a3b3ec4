//! `git boulder record [RANGE]`: record commits made without the hooks, each once.

use std::io::Write;

use crate::error::Result;
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The commits to record: one commit or a range (A..B, A...B) as `git log` takes them.
    /// Default: the commits the base branch lacks of the stream (--stream, else the worktree's
    /// own); outside a stream's worktree, of every stream (those `git boulder doctor` lists).
    #[arg(value_name = "RANGE")]
    pub range: Option<String>,

    /// Record them as this stream's work (default: the stream whose branch holds each commit, the
    /// worktree's own stream first).
    #[arg(long, value_name = "NAME", add = super::complete::stream_names())]
    pub stream: Option<String>,
}

pub fn run(ws: &Workspace, args: RecordArgs) -> Result<()> {
    let outcome = crate::boulder::record::record(ws, args.range.as_deref(), args.stream.as_deref())?;
    let mut out = std::io::stdout().lock();
    for (commit, stream) in &outcome.recorded {
        writeln!(out, "recorded {} for stream {stream}", commit.to_hex_with_len(12))?;
    }
    let already = match outcome.already {
        0 => String::new(),
        n => format!(" ({n} already recorded)"),
    };
    writeln!(out, "{} commit(s) recorded{already}", outcome.recorded.len())?;
    Ok(())
}
