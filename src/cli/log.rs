//! `git boulder log [NAME] [-n N]`: the op history of a stream and its root boulder (or a
//! boulder); without a name, the stream of the worktree it runs in, else every op-log.

use std::io::Write;

use crate::error::{Error, Result};
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
    let mut entries = Vec::new();
    for r in &refs {
        if ws.repo.ref_id(r)?.is_some() {
            for e in store.log(r)? {
                entries.push((r.clone(), e));
            }
        }
    }
    if entries.is_empty() {
        return Err(Error::usage(format!("no history for {label:?}: no op-log of it exists"))
            .hint("state is recorded once a stream is initialized or a commit is made on its branch"));
    }
    // Newest first across the refs (each ref's own order kept for equal times).
    entries.sort_by(|a, b| b.1.op.at.cmp(&a.1.op.at));
    if let Some(n) = args.max_count {
        entries.truncate(n);
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let v: Vec<_> = entries
            .iter()
            .map(|(r, e)| serde_json::json!({"ref": r, "commit": e.commit.to_string(), "op": e.op}))
            .collect();
        return super::output::json(&mut out, &v);
    }
    for (r, e) in &entries {
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
        let data = if e.op.data.is_null() { String::new() } else { e.op.data.to_string() };
        writeln!(
            out,
            "{}  {}  {:<8} {:<12} {}  {}",
            &e.commit.to_string()[..10],
            crate::text::inert(&e.op.at),
            crate::text::inert(&which),
            crate::text::inert(&e.op.kind),
            crate::text::inert(&e.op.actor),
            crate::text::inert(&data)
        )?;
    }
    Ok(())
}
