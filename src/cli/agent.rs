//! `agent`: wire git-boulder into Claude Code, Codex and OpenCode.

use clap::Subcommand;

use std::io::Write;

use crate::error::Result;
use crate::git::Repo;
use crate::harness::{install, Harness};
use crate::text::inert;

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
    /// Instead of the untracked per-worktree files: merge the hooks into (or out of) the tracked
    /// project file of this worktree (.claude/settings.json, .codex/hooks.json,
    /// .opencode/plugins/git-boulder.js) and commit it.
    #[arg(long)]
    pub commit: bool,
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

/// Installs into the main worktree and every linked worktree (stream init adds new ones), each
/// file untracked and kept out of `git status` by `info/exclude`.
pub fn install(args: InstallArgs) -> Result<()> {
    let repo = Repo::discover()?;
    if args.commit {
        match install::commit(&repo, args.harness, false)? {
            Some(line) => eprintln!("{}", inert(&line)),
            None => eprintln!("{}: the project file already runs git-boulder's hooks", args.harness),
        }
        return Ok(());
    }
    let report = install::install(&repo, args.harness)?;
    print_report(&report, &format!("{} already installed in every worktree", args.harness));
    if args.harness == Harness::Codex {
        // Codex skips an untrusted or changed hook without a word: say what it does with ours.
        let status = install::status(&repo)?;
        if let Some(t) = status.harnesses.iter().find_map(|h| h.trust.as_ref()) {
            let line = match t.state {
                "trusted" => format!("note: {}", t.detail),
                "unknown" => format!(
                    "note: Codex runs a project's hooks only once the project and each hook are trusted in Codex, \
                     and skips an untrusted or changed hook without a word ({}): {}",
                    t.detail.split(';').next().unwrap_or(&t.detail),
                    crate::harness::codex_trust::steps(repo.main_work_dir.as_deref())
                ),
                _ => format!("note: {}", t.detail),
            };
            eprintln!("{}", inert(&line));
        }
    }
    Ok(())
}

pub fn uninstall(args: InstallArgs) -> Result<()> {
    let repo = Repo::discover()?;
    if args.commit {
        match install::commit(&repo, args.harness, true)? {
            Some(line) => eprintln!("{}", inert(&line)),
            None => eprintln!("{}: the project file holds none of git-boulder's hooks", args.harness),
        }
        return Ok(());
    }
    let report = install::uninstall(&repo, args.harness)?;
    print_report(&report, &format!("{}: nothing to restore", args.harness));
    Ok(())
}

fn print_report(report: &install::Report, nothing: &str) {
    for w in &report.warnings {
        eprintln!("warning: {}", inert(w));
    }
    for c in &report.changes {
        eprintln!("{}", inert(c));
    }
    if report.changes.is_empty() && report.warnings.is_empty() {
        eprintln!("{nothing}");
    }
}

pub fn status(args: StatusArgs) -> Result<()> {
    let repo = Repo::discover()?;
    let status = install::status(&repo)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        return super::output::json(&mut out, &status);
    }
    match &status.on_path {
        Some(p) => writeln!(out, "git-boulder on PATH: {}", inert(&p.display().to_string()))?,
        None => writeln!(out, "git-boulder on PATH: no (the installed hooks run `git boulder`)")?,
    }
    for h in &status.harnesses {
        let how = match (h.installed, h.committed) {
            (true, true) => "installed, and committed in this worktree",
            (true, false) => "installed",
            (false, true) => "committed in this worktree",
            (false, false) => "not installed",
        };
        writeln!(out, "{}: {how}", h.harness)?;
        for f in &h.files {
            let detail = f.detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
            let trust = f.trust.map(|t| format!(" [codex: {}]", t.as_str())).unwrap_or_default();
            writeln!(
                out,
                "  {:<9} {}{trust}",
                f.state,
                inert(&format!("{}/{}{detail}", f.worktree.display(), f.file))
            )?;
        }
        if let Some(t) = &h.trust {
            let asked = t.codex.as_ref().map(|c| format!(", asked {}", c.display())).unwrap_or_default();
            writeln!(out, "  Codex trust: {}{} ({})", t.state, inert(&asked), inert(&t.detail))?;
        }
    }
    Ok(())
}

/// The exit code is the harness's to act on: 0 with the answer on stdout. Never 2, which Claude
/// Code and Codex read as "block with stderr": a payload git-boulder cannot read, or an error of
/// its own, is one line on stderr and exit 1 (a non-blocking error: the agent goes on).
pub fn hook(args: HookArgs) -> Result<u8> {
    use std::io::Write;
    let raw = crate::agent::hook::read_raw(std::io::stdin().lock()).unwrap_or_default();
    // Claude Code's WorktreeCreate / WorktreeRemove: a path on stdout, or an error and exit 1
    // (Claude Code then makes no worktree, or keeps it); never the edit hook's fallback answer.
    if args.harness == Harness::Claude {
        if let Ok(payload) = crate::agent::hook::Payload::parse(&raw) {
            if payload.event().is_ok_and(crate::agent::worktrees::is_worktree_event) {
                return worktree_hook(&payload);
            }
        }
    }
    let answered = crate::agent::hook::Payload::parse(&raw).and_then(|payload| match args.harness {
        Harness::Claude => crate::agent::claude::answer(&payload),
        Harness::Codex => crate::agent::codex::answer(&payload).map(Some),
        Harness::Opencode => crate::agent::opencode::answer(&payload).map(Some),
    });
    // A payload git-boulder cannot read, or cannot answer, may be an edit: in a stream's worktree
    // under `ownership: error` it is denied (fail closed); anywhere else the error lets it go.
    let answered = answered.or_else(|e| {
        let denied = match args.harness {
            Harness::Claude => crate::agent::claude::unreadable(&raw, &e.message),
            Harness::Codex => crate::agent::codex::unreadable(&raw, &e.message),
            Harness::Opencode => crate::agent::opencode::unreadable(&raw, &e.message),
        };
        denied.map(Some).ok_or(e)
    });
    match answered {
        Ok(Some(v)) => {
            let mut out = std::io::stdout().lock();
            // A harness that stopped reading gets no answer; nothing else to do.
            let _ = writeln!(out, "{v}").and_then(|()| out.flush());
            Ok(0)
        }
        Ok(None) => Ok(0),
        Err(e) => {
            eprintln!("git-boulder agent hook {}: {}", args.harness, crate::text::inert(&e.message));
            Ok(1)
        }
    }
}

/// Claude Code's `WorktreeCreate` / `WorktreeRemove` ([`crate::agent::worktrees`]).
fn worktree_hook(payload: &crate::agent::hook::Payload) -> Result<u8> {
    use std::io::Write;
    match crate::agent::worktrees::answer(payload) {
        Ok(Some(text)) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}").and_then(|()| out.flush());
            Ok(0)
        }
        Ok(None) => Ok(0),
        Err(e) => {
            let mut line = format!("git-boulder: {}", crate::text::inert(&e.message));
            for h in &e.hints {
                line.push_str(&format!(" ({})", crate::text::inert(h)));
            }
            eprintln!("{line}");
            Ok(1)
        }
    }
}
