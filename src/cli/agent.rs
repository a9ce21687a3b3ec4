//! `agent`: wire git-boulder into Claude Code, Codex and OpenCode.

use clap::Subcommand;

use crate::agent::Harness;
use crate::error::{Error, Result};

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Make an agent harness run git-boulder's hooks in this repository's worktrees.
    Install(InstallArgs),
    /// Take git-boulder's hooks out of a harness's files, restoring what was there.
    Uninstall(InstallArgs),
    /// Which harnesses are wired in, in which worktrees, and whether anything is stale.
    Status(StatusArgs),
    /// Answer one harness hook (called by the installed hooks; the payload is read on stdin).
    #[command(hide = true)]
    Hook(HookArgs),
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// The harness.
    #[arg(value_enum)]
    pub harness: Harness,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// The harness whose payload arrives on stdin.
    #[arg(value_enum)]
    pub harness: Harness,
}

pub fn run(cmd: AgentCommand) -> Result<u8> {
    match cmd {
        AgentCommand::Install(args) => install(args).map(|()| 0),
        AgentCommand::Uninstall(args) => uninstall(args).map(|()| 0),
        AgentCommand::Status(args) => status(args).map(|()| 0),
        AgentCommand::Hook(args) => hook(args),
    }
}

pub fn install(args: InstallArgs) -> Result<()> {
    let _ = args;
    Err(Error::internal("agent install: not yet"))
}

pub fn uninstall(args: InstallArgs) -> Result<()> {
    let _ = args;
    Err(Error::internal("agent uninstall: not yet"))
}

pub fn status(args: StatusArgs) -> Result<()> {
    let _ = args;
    Err(Error::internal("agent status: not yet"))
}

/// The exit code is the harness's to act on: 0 with the answer on stdout. Never 2, which Claude
/// Code and Codex read as "block with stderr".
pub fn hook(args: HookArgs) -> Result<u8> {
    let _ = args;
    Err(Error::internal("agent hook: not yet"))
}
