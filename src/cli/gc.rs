//! `git boulder gc [--auto]`: pack the state's loose objects, roll up the small packs the
//! post-commit hook writes, and add the op-logs to git's commit-graph.

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
    /// Print {"refs": N, "objects": N, "rolled_up": N, "packed": bool} (`rolled_up`: small packs
    /// the post-commit hook wrote, rolled up into one).
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
            &serde_json::json!({"refs": p.refs, "objects": p.objects, "rolled_up": p.rolled_up, "packed": done.is_some()}),
        );
    }
    let rolled = |p: &pack::Packed| match p.rolled_up {
        0 => String::new(),
        n => format!("; rolled up {n} small packs into one"),
    };
    match done {
        None => writeln!(out, "nothing to pack: {} loose objects (estimated)", pack::loose_estimate(&ws.repo))?,
        Some(p) if p.objects == 0 => writeln!(out, "the state of {} refs is packed already{}", p.refs, rolled(&p))?,
        Some(p) => writeln!(out, "packed {} objects of {} state refs{}", p.objects, p.refs, rolled(&p))?,
    }
    Ok(())
}
