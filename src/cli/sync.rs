//! `git boulder push | pull | sync [REMOTE]`, `git boulder remote setup`, and
//! `git boulder stream claim | release`: sharing state through a git remote ([`crate::sync`],
//! [`crate::sync::claim`]).

use std::io::Write;

use clap::Subcommand;

use crate::error::Result;
use crate::state::Store;
use crate::sync::{self, PullReport, PushReport, RefOutcome, RefResult};
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct RemoteArgs {
    /// The remote (a name or a URL); default: the base branch's upstream remote, else origin.
    #[arg(value_name = "REMOTE")]
    pub remote: Option<String>,
    /// Print the per-ref results as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum RemoteCommand {
    /// Add refspecs so plain `git fetch` and `git push` also carry git-boulder's refs (opt-in).
    ///
    /// Fetch: refs/boulder/* and refs/notes/boulder into refs/boulder-remotes/REMOTE/ (the next
    /// git-boulder command brings them in). Push: the op-logs and notes, plus HEAD when the remote
    /// had no push refspecs (so `git push` still pushes the current branch). --undo removes
    /// exactly what was added. Also sets log.excludeDecoration (refs/boulder*, refs/notes/*) so
    /// state refs never label commits in `git log`; `git log --exclude='refs/boulder*'
    /// --exclude='refs/notes/*' --all` (gitk and tig take the same) leaves their commits out.
    Setup(SetupArgs),
}

#[derive(Debug, clap::Args)]
pub struct SetupArgs {
    /// A configured remote; default: the base branch's upstream remote, else origin.
    #[arg(value_name = "REMOTE")]
    pub remote: Option<String>,
    /// Remove the refspecs setup added.
    #[arg(long)]
    pub undo: bool,
}

#[derive(Debug, clap::Args)]
pub struct ClaimArgs {
    /// The stream.
    #[arg(value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub name: String,
    /// The remote that holds the lease (default: settings.claim_remote, else the default remote).
    #[arg(long, value_name = "REMOTE")]
    pub remote: Option<String>,
    /// How long the lease lasts unless renewed (claiming again renews it).
    #[arg(long, value_name = "D", default_value = "1h", value_parser = super::values::duration())]
    pub ttl: std::time::Duration,
}

#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    /// The stream.
    #[arg(value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub name: String,
    /// The remote that holds the lease (default: settings.claim_remote, else the default remote).
    #[arg(long, value_name = "REMOTE")]
    pub remote: Option<String>,
    /// Remove the claim even when another machine holds it (or it is invalid).
    #[arg(long)]
    pub force: bool,
}

fn base_branch(ws: &Workspace) -> String {
    ws.plan().map(|p| p.settings.base_branch).unwrap_or_else(|_| "main".into())
}

fn counts(refs: &[RefOutcome]) -> String {
    let mut by: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for r in refs {
        *by.entry(r.result.as_str()).or_default() += 1;
    }
    if by.is_empty() {
        return "nothing to do".into();
    }
    by.iter().map(|(k, n)| format!("{n} {}", k.replace('_', " "))).collect::<Vec<_>>().join(", ")
}

fn print_pull(out: &mut impl Write, r: &PullReport) -> Result<()> {
    writeln!(out, "pulled from {}: {}", r.remote, counts(&r.refs))?;
    for x in r.refs.iter().filter(|x| x.result == RefResult::Refused || x.result == RefResult::Ignored) {
        writeln!(
            out,
            "  {} {}: {}",
            x.result,
            crate::text::inert(&x.name),
            crate::text::inert(x.why.as_deref().unwrap_or(""))
        )?;
    }
    Ok(())
}

fn print_push(out: &mut impl Write, r: &PushReport) -> Result<()> {
    let rounds = if r.rounds > 0 { format!(" (after {} pull-and-merge round(s))", r.rounds) } else { String::new() };
    writeln!(out, "pushed to {}: {}{rounds}", r.remote, counts(&r.refs))?;
    for x in r.refs.iter().filter(|x| x.result == RefResult::Rejected) {
        writeln!(
            out,
            "  rejected {}: {}",
            crate::text::inert(&x.name),
            crate::text::inert(x.why.as_deref().unwrap_or(""))
        )?;
    }
    if r.refs.iter().any(|x| x.result == RefResult::Rejected) {
        for line in &r.remote_messages {
            writeln!(out, "  {}", crate::text::inert(line))?;
        }
    }
    Ok(())
}

pub fn pull(ws: &Workspace, args: RemoteArgs) -> Result<()> {
    let remote = sync::resolve(&ws.repo, args.remote.as_deref(), &base_branch(ws))?;
    let report = sync::pull(&ws.repo, &remote)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        super::output::json(&mut out, &report)?;
    } else {
        print_pull(&mut out, &report)?;
    }
    report.refusal().map_or(Ok(()), Err)
}

pub fn push(ws: &Workspace, args: RemoteArgs) -> Result<()> {
    let remote = sync::resolve(&ws.repo, args.remote.as_deref(), &base_branch(ws))?;
    let report = sync::push(&ws.repo, &remote)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        super::output::json(&mut out, &report)?;
    } else {
        print_push(&mut out, &report)?;
    }
    report.refusal().map_or(Ok(()), Err)
}

pub fn sync_cmd(ws: &Workspace, args: RemoteArgs) -> Result<()> {
    let remote = sync::resolve(&ws.repo, args.remote.as_deref(), &base_branch(ws))?;
    super::output::progress(&format!("syncing with {}", remote.given));
    let (pulled, pushed) = sync::sync(&ws.repo, &remote)?;
    super::output::progress_done();
    let mut out = std::io::stdout().lock();
    if args.json {
        super::output::json(&mut out, &serde_json::json!({"pull": pulled, "push": pushed}))?;
    } else {
        print_pull(&mut out, &pulled)?;
        print_push(&mut out, &pushed)?;
    }
    if let Some(e) = pulled.refusal() {
        return Err(e);
    }
    pushed.refusal().map_or(Ok(()), Err)
}

pub fn remote(ws: &Workspace, cmd: RemoteCommand) -> Result<()> {
    match cmd {
        RemoteCommand::Setup(args) => {
            let name = match args.remote {
                Some(r) => r,
                None => crate::git::remote::default_remote(&ws.repo, &base_branch(ws))?,
            };
            let mut changed = sync::setup(&ws.repo, &name, args.undo)?;
            // The state refs fetched and pushed from now on never label the user's commits.
            changed.extend(crate::state::history::exclude_decorations(&ws.repo, args.undo)?);
            let mut out = std::io::stdout().lock();
            if changed.is_empty() {
                writeln!(out, "remote {name}: nothing to change")?;
            }
            for line in changed {
                writeln!(out, "{line}")?;
            }
            Ok(())
        }
    }
}

/// The remote a claim lives on: --remote, else settings.claim_remote, else the default remote.
fn claim_remote(ws: &Workspace, given: Option<String>) -> Result<crate::git::remote::RemoteName> {
    let plan = ws.plan()?;
    let given = match given {
        Some(g) => Some(g),
        None => crate::git::remote::of_plan(&ws.repo, "settings.claim_remote", plan.settings.claim_remote.as_deref())?,
    };
    sync::resolve(&ws.repo, given.as_deref(), &plan.settings.base_branch)
}

pub fn claim(ws: &Workspace, args: ClaimArgs) -> Result<()> {
    let plan = ws.plan()?;
    let stream = ws.stream(&plan, &args.name)?;
    let remote = claim_remote(ws, args.remote)?;
    let actor = Store::new(&ws.repo)?.actor()?;
    let (c, how) = crate::sync::claim::take(&ws.repo, &remote, &stream.name, &actor, args.ttl)?;
    let (how, note) = match how {
        crate::sync::claim::Taken::New => ("claimed", String::new()),
        crate::sync::claim::Taken::Renewed => ("renewed the claim on", String::new()),
        crate::sync::claim::Taken::TakenOver(prev) => ("claimed", format!("; took over the expired claim of {prev}")),
    };
    writeln!(
        std::io::stdout().lock(),
        "{how} stream {} on {} until {} (actor {}){note}",
        c.stream,
        remote.given,
        c.expires,
        c.actor
    )?;
    Ok(())
}

pub fn release(ws: &Workspace, args: ReleaseArgs) -> Result<()> {
    let plan = ws.plan()?;
    let stream = ws.stream(&plan, &args.name)?;
    let remote = claim_remote(ws, args.remote)?;
    let actor = Store::new(&ws.repo)?.actor()?;
    let mut out = std::io::stdout().lock();
    match crate::sync::claim::release(&ws.repo, &remote, &stream.name, &actor, args.force)? {
        Some(_) => writeln!(out, "released stream {} on {}", stream.name, remote.given)?,
        None => writeln!(out, "stream {} is not claimed on {}", stream.name, remote.given)?,
    }
    Ok(())
}
