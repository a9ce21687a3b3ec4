//! `git boulder doctor`: find what is out of step and say how to fix each.

use std::io::Write;

use crate::error::{Error, Result};
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print {"ok", "problems":[{area, message, fix}]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ws: &Workspace, args: DoctorArgs) -> Result<()> {
    let problems = crate::doctor::examine(ws)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        super::output::json(&mut out, &serde_json::json!({"ok": problems.is_empty(), "problems": problems}))?;
    } else if problems.is_empty() {
        writeln!(out, "all good: worktrees, state refs, hooks and locks agree")?;
    } else {
        for p in &problems {
            writeln!(out, "{}: {}", p.area, crate::text::inert_lines(&p.message))?;
            writeln!(out, "  fix: {}", crate::text::inert_lines(&p.fix))?;
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::refused(format!("{} problem(s) need fixing", problems.len())))
    }
}
