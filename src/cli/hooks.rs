//! `git boulder hooks …` (install, uninstall, status) and `git boulder hook NAME` (run by shims).

use std::io::Write;

use clap::Subcommand;

use crate::error::Result;
use crate::git::Repo;

#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Install the post-commit, post-rewrite and pre-push shims (and pre-commit with --pre-commit).
    ///
    /// Written into the directory git uses (core.hooksPath, else the common dir's hooks/); one
    /// install serves every worktree. A hook already there is kept and runs first with the same
    /// arguments and stdin. Installing twice changes nothing.
    Install(InstallArgs),
    /// Remove the shims and restore, byte for byte, the hooks that were there before.
    Uninstall,
    /// Say which hooks are installed, where, and what they chain to.
    Status(StatusArgs),
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Also install the pre-commit check of staged paths against ownership.
    #[arg(long)]
    pub pre_commit: bool,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print [{name, path, state, chained, default, not_running_in}].
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// The hook: post-commit, post-rewrite, pre-push or pre-commit.
    pub name: String,
    /// The arguments git gave the hook.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

pub fn run(cmd: HooksCommand) -> Result<()> {
    let repo = Repo::discover()?;
    let mut out = std::io::stdout().lock();
    match cmd {
        HooksCommand::Install(args) => {
            let r = crate::hooks::install(&repo, args.pre_commit)?;
            writeln!(out, "hooks in {}:", r.dir)?;
            for l in r.lines {
                writeln!(out, "  {l}")?;
            }
        }
        HooksCommand::Uninstall => {
            let r = crate::hooks::uninstall(&repo)?;
            if r.lines.is_empty() {
                writeln!(out, "no git-boulder hooks in {}", r.dir)?;
            }
            for l in r.lines {
                writeln!(out, "{l}")?;
            }
        }
        HooksCommand::Status(args) => {
            let list = crate::hooks::status(&repo)?;
            if args.json {
                return super::output::json(&mut out, &list);
            }
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|h| {
                    vec![
                        h.name.clone(),
                        h.state.clone(),
                        h.path.clone(),
                        h.chained.clone().map(|c| format!("runs {c} first")).unwrap_or_default(),
                    ]
                })
                .collect();
            super::output::table(&mut out, &["HOOK", "STATE", "PATH", "CHAINED"], &rows, |col, cell| {
                (col == 1).then(|| if cell == "installed" { "32" } else { "33" })
            })?;
            for h in &list {
                if h.not_running_in.is_empty() {
                    continue;
                }
                // Why, as doctor says it: another folder, another tool's hook in its place, …
                let (what, fix) = h.problem().unwrap_or_else(|| {
                    (
                        format!("git-boulder's {} hook would not run in {}", h.name, h.not_running_in.join(", ")),
                        "git boulder hooks install".into(),
                    )
                });
                writeln!(out, "{}; fix: {fix}", crate::text::inert_lines(&what))?;
            }
        }
    }
    Ok(())
}

/// Run one hook; returns its exit code.
pub fn hook(args: HookArgs) -> Result<i32> {
    crate::hooks::run(&args.name, &args.args)
}
