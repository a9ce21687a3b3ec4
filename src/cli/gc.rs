//! `git boulder gc [--auto]`: pack the state's loose objects, and add the op-logs to git's
//! commit-graph.

use std::io::Write;

use crate::error::Result;
use crate::state::pack;
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// Pack only when the loose objects are above the threshold (`boulder.gcAuto`, else
    /// `gc.auto`, else 6700), as pull, push and merge do by themselves.
    #[arg(long)]
    pub auto: bool,
    /// Print {"refs": N, "objects": N, "packed": bool}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ws: &Workspace, args: GcArgs) -> Result<()> {
    let done = if args.auto { pack::auto(&ws.repo) } else { Some(pack::pack(&ws.repo)?) };
    let mut out = std::io::stdout().lock();
    if args.json {
        let p = done.unwrap_or_default();
        return super::output::json(
            &mut out,
            &serde_json::json!({"refs": p.refs, "objects": p.objects, "packed": done.is_some()}),
        );
    }
    match done {
        None => writeln!(out, "nothing to pack: {} loose objects (estimated)", pack::loose_estimate(&ws.repo))?,
        Some(p) if p.objects == 0 => writeln!(out, "the state of {} refs is packed already", p.refs)?,
        Some(p) => writeln!(out, "packed {} objects of {} state refs", p.objects, p.refs)?,
    }
    Ok(())
}
