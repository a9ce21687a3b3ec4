//! `git boulder log [NAME] [-n N]`: the op history of a stream and its root boulder (or a
//! boulder); without a name, the stream of the worktree it runs in, else every op-log.

use std::fmt::Write as _;
use std::io::Write;

use crate::error::{Error, Result};
use crate::state::history::Merged;
use crate::state::{self, Store};
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// A stream or boulder name; `prd` for the completion records. Default: the stream of the
    /// worktree the command runs in, else every op-log.
    #[arg(add = super::complete::log_names())]
    pub name: Option<String>,
    /// Show at most N ops (the newest).
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    pub max_count: Option<usize>,
    /// Print a JSON array of {ref, commit, op}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ws: &Workspace, args: LogArgs) -> Result<()> {
    let store = Store::new(&ws.repo)?;
    let here = match &args.name {
        Some(_) => None,
        None => ws.plan().ok().and_then(|p| ws.here_stream(&p).map(|s| s.name.clone())),
    };
    let all = args.name.is_none() && here.is_none();
    let (label, refs): (String, Vec<String>) = match args.name.as_deref().or(here.as_deref()) {
        Some("prd") => ("prd".into(), vec![state::PRD_REF.to_string()]),
        Some(name) => {
            crate::names::validate("stream or boulder", name)?;
            (name.to_string(), vec![state::stream_ref(name), state::boulder_ref(name)])
        }
        None => {
            let mut all: Vec<String> = store.list(state::STREAMS)?.into_iter().map(|(r, _)| r).collect();
            all.extend(store.list(state::BOULDERS)?.into_iter().map(|(r, _)| r));
            all.push(state::PRD_REF.to_string());
            ("any stream or boulder".into(), all)
        }
    };
    // Each op-log is read as it is printed, newest first, merged by time (`state::history::Merged`),
    // so the first line comes at once however long the history.
    let (mut logs, mut which) = (Vec::new(), Vec::new());
    for r in refs {
        if let Some(tip) = ws.repo.ref_id(&r)? {
            let kind = if r.starts_with(state::STREAMS) {
                "stream"
            } else if r.starts_with(state::BOULDERS) {
                "boulder"
            } else {
                "prd"
            };
            // Every op-log at once: say whose op each line is.
            let whose = match (all, r.rsplit('/').next()) {
                (true, Some(name)) if kind != "prd" => format!("{kind} {name}"),
                _ => kind.to_string(),
            };
            which.push(crate::text::inert(&whose).into_owned());
            logs.push((r, tip));
        }
    }
    if logs.is_empty() {
        return Err(Error::usage(format!("no history for {label:?}: no op-log of it exists"))
            .hint("state is recorded once a stream is initialized or a commit is made on its branch"));
    }
    let names: Vec<String> = logs.iter().map(|(r, _)| r.clone()).collect();
    let mut history = Merged::new(&store, logs);
    if args.max_count.is_some() {
        // `-n N` asks for the N newest: the same as further down.
        history = history.newest();
    }
    let limit = args.max_count.unwrap_or(usize::MAX);
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut printed = 0usize;
    let (mut hex, mut data) = (String::new(), String::new());
    while printed < limit {
        let Some((i, e)) = history.next_op()? else { break };
        let r = &names[i];
        if args.json {
            let v = serde_json::json!({"ref": r, "commit": e.commit.to_string(), "op": e.op});
            let mut text = Vec::new();
            super::output::json(&mut text, &v)?;
            let text = String::from_utf8_lossy(&text);
            out.write_all(if printed == 0 { b"[\n" } else { b",\n" })?;
            let body = text.trim_end_matches('\n');
            for (i, line) in body.lines().enumerate() {
                if i > 0 {
                    out.write_all(b"\n")?;
                }
                write!(out, "  {line}")?;
            }
        } else {
            // The buffers are reused from line to line: nothing is allocated for a plain op.
            hex.clear();
            // Writing to a string cannot fail.
            let _ = write!(hex, "{}", e.commit);
            data.clear();
            if !e.op.data.is_null() {
                let _ = write!(data, "{}", e.op.data);
            }
            writeln!(
                out,
                "{}  {}  {:<8} {:<12} {}  {}",
                &hex[..10],
                crate::text::inert(&e.op.at),
                which[i],
                crate::text::inert(&e.op.kind),
                crate::text::inert(&e.op.actor),
                crate::text::inert(&data)
            )?;
        }
        printed += 1;
        if printed == 1 {
            crate::trace::line(&format!("log: the first line after {} ops read", history.ops_read()));
        }
        if printed.is_power_of_two() && printed <= FLUSHED_LINES {
            // The first lines at once, however long the rest takes; then as the buffer fills (a
            // reader gone after the first lines is noticed within a few of them).
            out.flush()?;
        }
    }
    if args.json {
        out.write_all(if printed == 0 { b"[]\n" } else { b"\n]\n" })?;
    }
    out.flush()?;
    Ok(())
}

/// Lines up to this many are flushed at each power of two (1, 2, 4, …); later ones as the buffer
/// fills.
const FLUSHED_LINES: usize = 1024;
