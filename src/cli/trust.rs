//! `git boulder trust [--show|--revoke]`: let the stream plan's commands run on this machine.

use std::io::Write;

use crate::error::{Error, Result};
use crate::text::inert;
use crate::trust;
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// Show the plan's commands and whether they are trusted here; change nothing.
    #[arg(long, conflicts_with = "revoke")]
    pub show: bool,
    /// Forget every trust recorded for this repository on this machine.
    #[arg(long)]
    pub revoke: bool,
}

pub fn run(ws: &Workspace, args: TrustArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if args.revoke {
        let n = trust::revoke(&ws.repo)?;
        writeln!(out, "revoked {n} trusted command set(s); plan commands will not run until `git boulder trust`")?;
        return Ok(());
    }
    let plan = ws.plan()?;
    let (_, source) = ws.plan_text()?;
    let cmds = trust::commands(&plan);
    let Some(fp) = trust::fingerprint(&plan) else {
        writeln!(out, "the stream plan ({}) runs no commands: nothing to trust", inert(&source.label))?;
        return Ok(());
    };
    let list = |out: &mut dyn Write| -> Result<()> {
        for c in &cmds {
            writeln!(out, "  {}: {}", inert(&c.key), inert(&c.command))?;
        }
        Ok(())
    };
    if args.show {
        let state = if trust::is_recorded(&ws.repo, &plan)? { "trusted" } else { "NOT trusted" };
        writeln!(out, "the stream plan ({}) runs these commands ({state} on this machine):", inert(&source.label))?;
        list(&mut out)?;
        writeln!(out, "fingerprint {fp}")?;
        return Ok(());
    }
    trust::record(&ws.repo, &plan)?.ok_or_else(|| Error::internal("a plan with commands has no fingerprint"))?;
    writeln!(out, "trusted on this machine: the commands of {}:", inert(&source.label))?;
    list(&mut out)?;
    writeln!(out, "fingerprint {fp}; a change to any of them needs `git boulder trust` again")?;
    Ok(())
}
