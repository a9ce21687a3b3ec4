//! Command-line definitions and dispatch: one file per command group, each an Args struct and a
//! `run` function. Commands are thin: parse, open the workspace, call the domain, print.

pub mod agent;
pub mod boulder;
pub mod complete;
pub mod demo;
pub mod doctor;
pub mod gc;
pub mod hooks;
pub mod log;
pub mod man;
mod man_examples;
pub mod merge;
pub mod output;
pub mod prd;
pub mod record;
pub mod review;
pub mod rollback;
pub mod spend;
pub mod status;
pub mod stream;
pub mod sync;
pub mod trust;
pub mod ui;
mod values;
pub mod watch;
pub mod work;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::workspace::Workspace;

/// Parallel, persistent streams of work in one git repository.
///
/// git-boulder gives each stream of a product plan its own branch and linked worktree, keeps all
/// of its state inside git (refs and notes), records activity with git hooks, and merges finished
/// streams back after checking for conflicts.
#[derive(Debug, Parser)]
#[command(
    name = "git-boulder",
    version,
    propagate_version = true,
    after_long_help = "History views: the state lives in refs/boulder/* and refs/notes/boulder. To leave it out of \
                       `git log --all`, gitk and tig, give them `--exclude='refs/boulder*' --exclude='refs/notes/*' \
                       --all` instead of `--all`; `git boulder remote setup` also sets log.excludeDecoration so \
                       state refs never label your commits."
)]
pub struct Cli {
    /// Use this stream plan instead of the main worktree's .boulder/streams.yaml.
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Say less: no progress or notes on stderr.
    #[arg(long, short, global = true)]
    pub quiet: bool,

    /// Trust the stream plan's commands for this run only ("I have read this plan"; also
    /// BOULDER_TRUST=1). For CI and scripts; `git boulder trust` records trust on this machine.
    #[arg(long, global = true)]
    pub trust: bool,

    /// Trust the plan's commands for this run only if their fingerprint is this one (`work
    /// --trust` passes the plan it read on to its `stream run` and `stream merge`).
    #[arg(long, global = true, hide = true, value_name = "FINGERPRINT")]
    pub trust_fingerprint: Option<String>,

    /// Trace what is done and how long each step takes, on stderr (also BOULDER_TRACE=1).
    #[arg(long, short, global = true)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan, inspect and manage streams.
    #[command(subcommand)]
    Stream(stream::StreamCommand),
    /// Show every stream: status, progress, branch, last activity, iteration.
    Status(status::StatusArgs),
    /// Read the PRD: show stories, the next open one, record completion.
    #[command(subcommand)]
    Prd(prd::PrdCommand),
    /// Create a boulder (a unit of continuous work), optionally under a parent.
    Create(boulder::CreateArgs),
    /// List the boulder tree with iterations.
    List(boulder::ListArgs),
    /// Make a boulder the current one of this worktree: commits count for it and its ancestors.
    Switch(boulder::SwitchArgs),
    /// Mark a boulder completed (a parent only enforces once all its children are).
    Finish(boulder::FinishArgs),
    /// Decide whether to push the agent on (the enforcement gates), and say how.
    Check(boulder::CheckArgs),
    /// Record where work stands, so the next session resumes there.
    Checkpoint(boulder::CheckpointArgs),
    /// Todos of the current boulder.
    #[command(subcommand)]
    Todo(boulder::TodoCommand),
    /// Everything the next session needs: plan, story, checkpoint, progress, todos.
    #[command(alias = "start-work")]
    Resume(boulder::ResumeArgs),
    /// Show the op history of a stream or boulder.
    Log(log::LogArgs),
    /// Tokens, cost and agent time the streams spent, against their budgets (add, reset).
    ///
    /// `spend add` records an amount by hand; `spend reset NAME` starts a stream's budget again.
    /// The figures are every machine's, as far as this one has pulled them. Cost is reported by
    /// the harness where it says, else priced from the plan's settings.prices or git config
    /// boulder.price.<model>.*; a model without a price shows its tokens and "cost unknown".
    Spend(spend::SpendArgs),
    /// Show what a reviewer needs to judge a stream, or record a decision on its tip.
    ///
    /// Without a decision: stories, commits, changes grouped by owner, the landing check against
    /// the base's tip, the last verify result, spend and the decisions. --approve,
    /// --request-changes -m TEXT and --withdraw record a decision naming you (git's user.name
    /// and user.email) and the exact tip of the stream's branch; `push`, `pull` and `sync` share
    /// it. With `settings.review.required` (or a stream's `review:`), no landing path lands a
    /// stream without enough approvals of its current tip (docs/review.md).
    Review(review::ReviewArgs),
    /// Pack git-boulder's loose state objects and add the op-logs to git's commit-graph (also
    /// done on a threshold by pull, push and merge).
    Gc(gc::GcArgs),
    /// Record commits made without the hooks (each once), as the post-commit hook would have.
    ///
    /// Default: the commits of this worktree's stream branch that the base lacks and that have no
    /// note on refs/notes/boulder, oldest first, each at its committer time. `doctor` finds them.
    Record(record::RecordArgs),
    /// Install, remove or inspect git-boulder's git hooks.
    #[command(subcommand)]
    Hooks(hooks::HooksCommand),
    /// Run one hook (called by the installed hook shims).
    #[command(hide = true)]
    Hook(hooks::HookArgs),
    /// Send git-boulder's state (op-logs and notes) to a remote; never forced.
    ///
    /// A rejected ref means the remote moved: pull, merge, push again, a bounded number of times.
    Push(sync::RemoteArgs),
    /// Fetch a remote's state and merge it into the local state (validated first).
    ///
    /// Fetches refs/boulder/* and refs/notes/boulder into refs/boulder-remotes/REMOTE/, then for
    /// each op-log: create, fast-forward, keep (local ahead) or merge deterministically; notes
    /// merge by union. A ref that fails validation is refused by name and the local one kept.
    Pull(sync::RemoteArgs),
    /// Pull, then push, until both sides agree.
    Sync(sync::RemoteArgs),
    /// Configure a remote for git-boulder's refs.
    #[command(subcommand)]
    Remote(sync::RemoteCommand),
    /// Find what is out of step (worktrees, state refs, hooks, locks) and say how to fix each.
    ///
    /// Exits 1 when something needs fixing.
    Doctor(doctor::DoctorArgs),
    /// Print the man page, or install every page with --install-dir DIR.
    Man(man::ManArgs),
    /// Print shell completions for bash, zsh or fish.
    ///
    /// The script asks git-boulder at each <TAB>, so stream names, boulder ids and story ids come
    /// from the repository. bash: `source <(git boulder completions bash)` in ~/.bashrc (also
    /// defines `_git_boulder`, which git's completion calls for `git boulder <TAB>`); zsh: the
    /// same with zsh in ~/.zshrc; fish: save in ~/.config/fish/completions/git-boulder.fish.
    Completions(man::CompletionsArgs),
    /// Let the stream plan's commands (setup, verify, agents) run on this machine.
    ///
    /// A cloned or pulled plan runs nothing until its exact command content is trusted here.
    /// Trust is kept in $GIT_COMMON_DIR/boulder/trust, never in a ref, never pushed; a change to
    /// any command needs trust again, a change to stories or paths does not.
    Trust(trust::TrustArgs),
    /// Run the whole flow on an embedded sample project in a temporary directory.
    Demo(demo::DemoArgs),
    /// The worker: claim the next ready stream, run its loop, merge it, and on to the next.
    ///
    /// A stream is ready when its depends_on are merged (as the remote's state says, with
    /// --remote: it is pulled each round), it is not merged, and no other machine claims it.
    /// Up to --parallel streams run at once, each in its own worktree (made when missing), their
    /// lines prefixed by `[stream] `. With --remote each stream is claimed there, merged through
    /// it (`stream merge --remote`), its claim released and the state pushed. Ctrl-C stops the
    /// agents and releases the claims; every stream stays resumable. Prints each stream's outcome;
    /// exits 0 when all are merged, 1 when some failed, stopped or stay blocked.
    Work(work::WorkArgs),
    /// Wire git-boulder into an agent harness: Claude Code, Codex, OpenCode.
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    /// Serve a live, read-only dashboard to a browser: streams by status, each stream's page,
    /// the dependency graph, the ownership map and the activity timeline.
    ///
    /// Listens on 127.0.0.1 (a free port unless --port) and prints the URL. Redraws when refs,
    /// locks, the plan or worktrees change (server-sent events; the state is looked at twice a
    /// second). Safe by default: GET and HEAD only (nothing can be changed through it), requests
    /// whose Host is not the address it listens on are refused, and with --bind beyond loopback
    /// the URL carries a random token every request must give. Ctrl-C stops it.
    Ui(ui::UiArgs),
}

/// `git-boulder hook NAME ARGS…` as the shell shims call it (or `git-boulder hook-file PATH ARGS…`
/// as a direct hook file is run by the kernel), run without building the whole
/// command-line parser (a hook runs on every commit; parsing is most of a small hook's start-up).
/// `None` when the command line is anything else (or could hold a flag): then parse it as usual.
pub fn run_hook_directly(args: &[std::ffi::OsString]) -> Option<Result<u8>> {
    let [_, word, name, rest @ ..] = args else { return None };
    if word == crate::hooks::DIRECT_WORD {
        return run_direct_hook(name, rest);
    }
    if word != "hook" {
        return None;
    }
    let name = name.to_str().filter(|n| crate::hooks::NAMES.contains(n))?;
    let rest: Vec<String> = rest.iter().map(|a| a.to_str().map(str::to_owned)).collect::<Option<_>>()?;
    if rest.iter().any(|a| a.starts_with('-')) {
        return None;
    }
    let _ctx = Context::new(false, false, false).install();
    let _span = crate::trace::span("the whole command");
    Some(hooks::hook(hooks::HookArgs { name: name.to_string(), args: rest }).map(|code| code as u8))
}

/// A hook file git ran directly (`#!…/git-boulder hook-file`, written by `hooks install`): the
/// kernel passed the hook's own path, then git's arguments. The hook is named by that path;
/// `BOULDER_SKIP_HOOKS=1` skips it, as the shell shim does.
fn run_direct_hook(path: &std::ffi::OsStr, rest: &[std::ffi::OsString]) -> Option<Result<u8>> {
    let Some(name) = crate::hooks::direct_hook_name(std::path::Path::new(path)) else {
        return Some(Err(Error::usage(format!(
            "{} is not a hook git-boulder knows (one of {})",
            std::path::Path::new(path).display(),
            crate::hooks::NAMES.join(", ")
        ))
        .hint("run `git boulder hooks install` to write git-boulder's hooks again")));
    };
    if std::env::var_os("BOULDER_SKIP_HOOKS").is_some_and(|v| v == "1") {
        return Some(Ok(0));
    }
    // git's arguments to a hook (a remote's name and URL, `amend`/`rebase`) are only shown.
    let rest: Vec<String> = rest.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let _ctx = Context::new(false, false, false).install();
    let _span = crate::trace::span("the whole command");
    Some(hooks::hook(hooks::HookArgs { name: name.to_string(), args: rest }).map(|code| code as u8))
}

/// Run a parsed command line: `Ok` holds the exit code (0, or a hook's own), `Err` an error for
/// the caller to print and map to its exit code ([`Error::exit_code`](crate::Error::exit_code)).
pub fn run(cli: Cli) -> Result<u8> {
    // Flags and the environment variables that stand for them, read once for the whole run.
    let ctx = Context::new(cli.quiet, cli.verbose, cli.trust).trusting_only(cli.trust_fingerprint.clone()).install();
    let _span = crate::trace::span("the whole command");
    match cli.command {
        Command::Demo(args) => demo::run(args, ctx).map(|()| 0),
        Command::Hooks(cmd) => hooks::run(cmd).map(|()| 0),
        Command::Man(args) => man::man(args).map(|()| 0),
        Command::Completions(args) => man::completions(args).map(|()| 0),
        // A hook's exit code is git's to act on; only its low byte reaches git, as with exit(2).
        Command::Hook(args) => hooks::hook(args).map(|code| code as u8),
        // Opens the workspace itself: a harness hook answers even outside a repository.
        Command::Agent(cmd) => agent::run(cmd),
        command => {
            let ws = Workspace::open(cli.config)?;
            match command {
                Command::Stream(cmd) => stream::run(&ws, ctx, cmd),
                Command::Status(args) => status::run(&ws, ctx, args),
                Command::Prd(cmd) => prd::run(&ws, cmd),
                Command::Log(args) => log::run(&ws, args),
                Command::Spend(args) => spend::run(&ws, args),
                Command::Review(args) => review::run(&ws, args),
                Command::Gc(args) => gc::run(&ws, args),
                Command::Record(args) => record::run(&ws, args),
                Command::Create(args) => boulder::create(&ws, args),
                Command::List(args) => boulder::list(&ws, args),
                Command::Switch(args) => boulder::switch(&ws, args),
                Command::Check(args) => boulder::check(&ws, args),
                Command::Finish(args) => boulder::finish(&ws, args),
                Command::Checkpoint(args) => boulder::checkpoint(&ws, args),
                Command::Todo(cmd) => boulder::todo(&ws, cmd),
                Command::Resume(args) => boulder::resume(&ws, args),
                Command::Doctor(args) => doctor::run(&ws, args),
                Command::Push(args) => sync::push(&ws, args),
                Command::Pull(args) => sync::pull(&ws, args),
                Command::Sync(args) => sync::sync_cmd(&ws, args),
                Command::Remote(cmd) => sync::remote(&ws, cmd),
                Command::Trust(args) => trust::run(&ws, args),
                Command::Work(args) => work::run(&ws, ctx, args),
                Command::Ui(args) => ui::run(&ws, ctx, args),
                Command::Demo(_)
                | Command::Hooks(_)
                | Command::Hook(_)
                | Command::Agent(_)
                | Command::Man(_)
                | Command::Completions(_) => {
                    unreachable!("handled above")
                }
            }
            .map(|()| 0)
        }
    }
}
