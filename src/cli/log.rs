//! `git boulder log [NAME] [-n N]`: the op history of a stream and its root boulder (or a
//! boulder); without a name, the stream of the worktree it runs in, else every op-log.

use std::fmt::Write as _;
use std::io::Write;

use crate::error::{Error, Result};
use crate::state::{self, LogEntry, Store};
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
    // Each op-log is read as it is printed, newest first; several are merged by time (newest
    // first; for equal times, in the order of `refs`), so memory stays bounded and the first line
    // comes at once however long the history.
    let mut logs = Vec::new();
    for r in &refs {
        if let Some(tip) = ws.repo.ref_id(r)? {
            let which = if r.starts_with(state::STREAMS) {
                "stream"
            } else if r.starts_with(state::BOULDERS) {
                "boulder"
            } else {
                "prd"
            };
            // Every op-log at once: say whose op each line is.
            let which = match (all, r.rsplit('/').next()) {
                (true, Some(name)) if which != "prd" => format!("{which} {name}"),
                _ => which.to_string(),
            };
            let which = crate::text::inert(&which).into_owned();
            logs.push(Log { r: r.as_str(), which, ops: store.history_iter(tip), head: None });
        }
    }
    if logs.is_empty() {
        return Err(Error::usage(format!("no history for {label:?}: no op-log of it exists"))
            .hint("state is recorded once a stream is initialized or a commit is made on its branch"));
    }
    let limit = args.max_count.unwrap_or(usize::MAX);
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut printed = 0usize;
    // The order is by time, newest first, each ref's own order kept for equal times (a stable
    // sort by time of the refs' histories one after the other). Each history comes in its own
    // (replay) order, merged by time as read; clocks that disagree can still put a later time
    // after an earlier one, so the ops read ahead wait in a window sorted by that key and the
    // newest of them is printed: the very same order whenever no op is read later than its place
    // by as many ops as the window holds, in bounded memory. The window holds FIRST_WINDOW ops
    // for the first lines (so the first line comes at once) and grows with the lines printed —
    // as many ops as lines printed so far — up to WINDOW: an op read `d` ops after its place is
    // printed at its place when `d` is below the window's size when its line is due (below
    // FIRST_WINDOW, or below the number of lines before it, and always below WINDOW); later than
    // that, it is printed as soon as it is read. With `-n` the window is WINDOW from the start.
    // Kept sorted, newest first: an op read usually belongs at the end (one comparison); one
    // whose time is out of place is inserted where it belongs.
    let mut window: std::collections::VecDeque<Ranked> = std::collections::VecDeque::new();
    let mut read = vec![0usize; logs.len()];
    let (mut hex, mut data) = (String::new(), String::new());
    let mut done = false;
    let mut ops_read = 0usize;
    while printed < limit {
        // `-n N` asks for the N newest: the whole window from the first line, so they are the
        // same as further down.
        let size = if args.max_count.is_some() { WINDOW } else { printed.clamp(FIRST_WINDOW, WINDOW) };
        while !done && window.len() < size {
            match next_op(&mut logs)? {
                Some((i, entry)) => {
                    let new = Ranked { log: i, pos: read[i], entry };
                    read[i] += 1;
                    ops_read += 1;
                    if window.back().is_none_or(|last| last.key() > new.key()) {
                        window.push_back(new);
                    } else {
                        let at = window.partition_point(|x| x.key() > new.key());
                        window.insert(at, new);
                    }
                }
                None => done = true,
            }
        }
        let Some(Ranked { log: i, entry: e, .. }) = window.pop_front() else { break };
        let r = logs[i].r;
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
                logs[i].which,
                crate::text::inert(&e.op.kind),
                crate::text::inert(&e.op.actor),
                crate::text::inert(&data)
            )?;
        }
        printed += 1;
        if printed == 1 {
            crate::trace::line(&format!("log: the first line after {ops_read} ops read"));
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

/// One op-log being printed: its ref, its ops still to come, and the next one read.
struct Log<'a> {
    r: &'a str,
    /// Whose op-log it is, as printed (`stream`, `boulder`, `prd`; with the name when every
    /// op-log is printed).
    which: String,
    ops: state::store::History,
    head: Option<LogEntry>,
}

/// How many ops read ahead may wait to be printed, for the order by time (see `run`).
const WINDOW: usize = 4096;
/// The window for the first lines: what is read before the first line (see `run`).
const FIRST_WINDOW: usize = 64;
/// Lines up to this many are flushed at each power of two (1, 2, 4, …); later ones as the buffer
/// fills.
const FLUSHED_LINES: usize = 1024;

/// An op read, ranked for printing: newest time first, then the earlier log, then the earlier
/// position in its log.
struct Ranked {
    log: usize,
    pos: usize,
    entry: LogEntry,
}

impl Ranked {
    /// Greater prints first.
    fn key(&self) -> (&str, std::cmp::Reverse<usize>, std::cmp::Reverse<usize>) {
        (&self.entry.op.at, std::cmp::Reverse(self.log), std::cmp::Reverse(self.pos))
    }
}

/// The newest next op of all `logs` (for equal times, the first log's) and its log's index, or
/// `None` when all are done.
fn next_op(logs: &mut [Log<'_>]) -> Result<Option<(usize, LogEntry)>> {
    let mut best: Option<usize> = None;
    for i in 0..logs.len() {
        if logs[i].head.is_none() {
            logs[i].head = logs[i].ops.next().transpose().map_err(|e| e.context(logs[i].r))?;
        }
        let Some(at) = logs[i].head.as_ref().map(|e| &e.op.at) else { continue };
        if best.is_none_or(|b| logs[b].head.as_ref().is_some_and(|o| *at > o.op.at)) {
            best = Some(i);
        }
    }
    Ok(best.and_then(|b| Some((b, logs[b].head.take()?))))
}
