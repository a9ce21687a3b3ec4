//! `git boulder log NAME`: the op history of a stream and its root boulder (or a boulder).

use std::io::Write;

use crate::error::{Error, Result};
use crate::state::{self, Store};
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// A stream or boulder name; `prd` for the completion records.
    #[arg(add = super::complete::log_names())]
    pub name: String,
    /// Print a JSON array of {ref, commit, op}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ws: &Workspace, args: LogArgs) -> Result<()> {
    let refs: Vec<String> = if args.name == "prd" {
        vec![state::PRD_REF.to_string()]
    } else {
        crate::names::validate("stream or boulder", &args.name)?;
        vec![state::stream_ref(&args.name), state::boulder_ref(&args.name)]
    };
    let store = Store::new(&ws.repo)?;
    let mut entries = Vec::new();
    for r in &refs {
        if ws.repo.ref_id(r)?.is_some() {
            for e in store.log(r)? {
                entries.push((r.clone(), e));
            }
        }
    }
    if entries.is_empty() {
        return Err(Error::usage(format!("no history for {:?}: neither {} exists", args.name, refs.join(" nor ")))
            .hint("state is recorded once a stream is initialized or a commit is made on its branch"));
    }
    // Newest first across both refs.
    entries.sort_by(|a, b| b.1.op.at.cmp(&a.1.op.at));
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
        let data = if e.op.data.is_null() { String::new() } else { e.op.data.to_string() };
        writeln!(
            out,
            "{}  {}  {:<8} {:<12} {}  {}",
            &e.commit.to_string()[..10],
            crate::text::inert(&e.op.at),
            which,
            crate::text::inert(&e.op.kind),
            crate::text::inert(&e.op.actor),
            crate::text::inert(&data)
        )?;
    }
    Ok(())
}
