//! `git boulder stream …`: plan, validate and inspect streams.

use std::io::Write;

use clap::Subcommand;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::plan::{self, Severity};
use crate::state::StreamStatus;
use crate::workspace::Workspace;

#[derive(Debug, Subcommand)]
pub enum StreamCommand {
    /// Propose a stream plan from the PRD.
    ///
    /// Each stream owns the files and folders of HEAD's tree its stories name (in full, by a
    /// unique path end or basename) and, under `creates:`, the new files they name below a
    /// folder that exists; prose never becomes a path. Stories are grouped by id prefix
    /// (US-AUTH-* → auth), else by the area of their files (at most 8 a stream, or an eighth of
    /// the PRD); a path several streams name goes to the one needing it first, and `depends_on`
    /// follows it and the PRD's dependsOn. Prints the proposed .boulder/streams.yaml; --write
    /// saves it.
    Suggest(SuggestArgs),
    /// Add a stream to the plan, for ad-hoc work.
    ///
    /// Appends NAME with its stories and paths to the `streams:` of .boulder/streams.yaml (made
    /// when there is none), editing the text in place: comments, order and quoting stay as they
    /// were. Refused when the name is taken; then run `git boulder stream validate`.
    Add(AddArgs),
    /// Check the stream plan against itself, the PRD and HEAD's tree.
    ///
    /// Checks names, stories the PRD lacks, stories in two streams, globs, depends_on (unknown or
    /// cyclic) and path overlap between streams (per settings.path_overlap). Exits 2 on errors.
    Validate(ValidateArgs),
    /// Create each stream's branch and linked worktree (all streams when none is named).
    ///
    /// The branch is made from the base branch when it does not exist (an existing one is reused
    /// and never moved); the worktree goes to worktree_dir/NAME, is added to info/exclude, gets the
    /// copy_into_worktree files, and runs setup once. Idempotent: a second run changes nothing.
    Init(InitArgs),
    /// Print a stream's worktree path, for `cd "$(git boulder stream path NAME)"`.
    Path(PathArgs),
    /// Remove stream worktrees the way `git worktree remove` would.
    ///
    /// Refuses a worktree with uncommitted work, or a branch with commits neither merged nor
    /// pushed, unless --force, saying what would be lost. --delete-branch deletes merged branches
    /// only (any with --force).
    Cleanup(CleanupArgs),
    /// The loop: next story → run the agent in the worktree → judge progress → back off.
    ///
    /// Holds the stream lock (a second run of the same stream is refused), records RUNNING, and
    /// ends COMPLETED when the stream's stories are done, FAILED after --max-failures iterations
    /// without a commit or a finished story, or STOPPED at --max-iterations or after
    /// `git boulder stream stop`. CMD runs without a shell, with BOULDER_STREAM,
    /// BOULDER_STREAM_INDEX, BOULDER_PORT, BOULDER_STORY, BOULDER_STORY_TITLE, BOULDER_STORY_FILE,
    /// BOULDER_PRD, BOULDER_ITERATION and BOULDER_PROMPT set; without CMD the stream's `agent`
    /// from settings.agents runs.
    #[command(alias = "start")]
    Run(RunArgs),
    /// Ask a running loop to stop after its current iteration.
    Stop(PathArgs),
    /// Merge finished streams into the base branch: check for conflicts first, then change.
    ///
    /// Refuses (changing nothing) a stream whose stories are not all done (unless --force),
    /// whose depends_on streams are not merged, or whose or the base's checked-out worktree has
    /// uncommitted changes. Replays the stream's commits onto the base tip in memory; any
    /// conflict prints a table of path, kind and commit and exits 1. The PRD never conflicts: it
    /// merges story by story. Then rewrites the commits (notes carried over), moves the stream
    /// branch, runs settings.verify in its worktree, fast-forwards the base, syncs story
    /// completion into the base's PRD in one commit, and records MERGED. A merge killed at any
    /// step is finished by running it again.
    Merge(super::merge::MergeArgs),
    /// Rebase a stream onto the base's tip, handing conflicts to its agent.
    ///
    /// What `git boulder work` does under settings.on_conflict: agent when a landing meets a
    /// conflict with what landed first. The stream's branch is rebased with git's own `git rebase`
    /// in its worktree onto the base's tip (with --remote, that remote's, fetched first). Where
    /// the rebase stops on conflicts, the PRD is settled story by story and the agent (the
    /// stream's `agent`, or CMD) is run with BOULDER_PROMPT naming the conflicting files and the
    /// streams whose landings changed them, and BOULDER_CONFLICTS listing the files; once no
    /// file is left unmerged and no conflict marker is left, the rebase goes on. An agent that
    /// leaves conflicts --max-failures times in a row ends it (exit 1): the rebase is aborted and
    /// the branch is as it was. Killed, the rebase stays stopped in the worktree; run the same
    /// command again to go on.
    Resolve(ResolveArgs),
    /// Move a stream's branch back to its fork point with the base (or to REV), keeping the old tip.
    ///
    /// REV must be in the branch's history. The old tip is kept under
    /// refs/boulder/backup/NAME/N (local: never pushed); --restore brings the latest backup back.
    /// The stream's worktree moves with the branch, and is refused when it has uncommitted
    /// changes. Recorded as a rolled_back op. Nothing is deleted.
    Rollback(super::rollback::RollbackArgs),
    /// Take a merged stream back out of the base with a revert commit; it is COMPLETED again.
    ///
    /// One revert commit undoes what the merge brought (for any strategy), then one commit
    /// reopens the stream's stories in the base's PRD (status marks only). With --remote the
    /// remote's base is changed through the merge queue (fetch, leased push, rounds on lost
    /// races). The stream's commits are replayed onto the new base (the old tip kept under a
    /// backup ref), ready to fix and merge anew. Refused on conflicts with later commits.
    Unmerge(super::rollback::UnmergeArgs),
    /// Let workers take a stream whose landing was refused (NEEDS_ATTENTION) again.
    ///
    /// A landing refused for a conflict, an ownership violation, a failed verify, uncommitted
    /// changes or missing work is recorded in the stream's op-log, and no `git boulder work`
    /// takes the stream again until its branch gets a new commit, here or on a remote. Once the
    /// cause is dealt with some other way (the base changed, verify was fixed on the base, the
    /// changes were committed elsewhere), `retry` records a `retried` op that clears it. With
    /// --remote (default: settings.merge_remote) the remote's state is pulled first and the op
    /// pushed there, so every machine sees it.
    Retry(RetryArgs),
    /// Take a lease on a stream on a remote, so no other machine runs it meanwhile.
    ///
    /// The lease is refs/boulder/claims/NAME on the remote, taken with a compare-and-swap push:
    /// of two machines racing, exactly one wins. Claiming again renews it; an expired lease of
    /// another machine is taken over. Refused (exit 1) while another machine holds it.
    Claim(super::sync::ClaimArgs),
    /// Give up this machine's lease on a stream (any machine's with --force).
    Release(super::sync::ReleaseArgs),
    /// List the streams with their status (the same table as `git boulder status`).
    List(super::status::StatusArgs),
    /// Show every stream's status (alias of `git boulder status`).
    Status(super::status::StatusArgs),
}

#[derive(Debug, clap::Args)]
pub struct SuggestArgs {
    /// Write the proposal to .boulder/streams.yaml (refused when one exists, unless --force).
    #[arg(long)]
    pub write: bool,
    /// Overwrite an existing .boulder/streams.yaml with --write.
    #[arg(long)]
    pub force: bool,
    /// Read this PRD instead of the default .agents/tasks/prd.md.
    #[arg(long, value_name = "PATH")]
    pub prd: Option<std::path::PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The new stream's name (its branch is boulder/NAME).
    #[arg(value_parser = super::values::stream_name())]
    pub name: String,
    /// Story ids the stream works on, as the PRD spells them.
    #[arg(long = "story", value_name = "ID", num_args = 1.., add = super::complete::story_ids())]
    pub stories: Vec<String>,
    /// Globs of the paths the stream owns (e.g. src/auth/**).
    #[arg(long = "path", value_name = "GLOB", num_args = 1..)]
    pub paths: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Streams to initialize; all streams of the plan when none is named.
    #[arg(value_name = "NAME", value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub names: Vec<String>,
    /// Do not install git-boulder's hooks (commits in the worktrees are then not recorded).
    #[arg(long)]
    pub no_hooks: bool,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The stream.
    #[arg(value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub name: String,
    /// Stop after this many iterations (default: the stream's max_iterations, else no limit).
    #[arg(long, value_name = "N")]
    pub max_iterations: Option<u32>,
    /// Base wait after an iteration without progress (default: settings.boulder.cooldown).
    #[arg(long, value_name = "D", value_parser = super::values::duration())]
    pub cooldown: Option<std::time::Duration>,
    /// Iterations without progress before the run fails (default: settings.boulder.max_failures).
    #[arg(long, value_name = "N")]
    pub max_failures: Option<u32>,
    /// Run for `git boulder work`, which holds the stream's claim and merges it: take no claim and
    /// leave settings.auto_merge to the worker.
    #[arg(long, hide = true)]
    pub worker: bool,
    /// Run for `git boulder work --remote R`: share the branch and the state with R after each
    /// iteration that made progress.
    #[arg(long, hide = true, value_name = "REMOTE", requires = "worker")]
    pub push_to: Option<String>,
    /// The agent command and its arguments (after `--`).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct ResolveArgs {
    /// The stream.
    #[arg(value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub name: String,
    /// Rebase onto this remote's base branch (default: settings.merge_remote; else the local base).
    #[arg(long, value_name = "REMOTE", conflicts_with = "no_remote")]
    pub remote: Option<String>,
    /// Rebase onto the local base branch even when settings.merge_remote is set.
    #[arg(long)]
    pub no_remote: bool,
    /// Agent runs in a row that leave conflicts before giving up (default:
    /// settings.boulder.max_failures).
    #[arg(long, value_name = "N")]
    pub max_failures: Option<u32>,
    /// The agent command and its arguments (after `--`); default: the stream's `agent`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct PathArgs {
    /// The stream.
    #[arg(value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub name: String,
}

#[derive(Debug, clap::Args)]
pub struct RetryArgs {
    /// The stream.
    #[arg(value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub name: String,
    /// Pull the state from this remote first and push the cleared refusal there (default:
    /// settings.merge_remote).
    #[arg(long, value_name = "REMOTE", conflicts_with = "no_remote")]
    pub remote: Option<String>,
    /// Record it here only, even when settings.merge_remote is set.
    #[arg(long)]
    pub no_remote: bool,
}

#[derive(Debug, clap::Args)]
pub struct CleanupArgs {
    /// Streams to clean up.
    #[arg(value_name = "NAME", value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub names: Vec<String>,
    /// Every merged stream: merged by git-boulder, or its branch has commits of its own, all in the
    /// base branch (never a stream that has not started).
    #[arg(long)]
    pub merged: bool,
    /// Every stream git has no worktree for whose folder exists (a moved worktree is not stale).
    #[arg(long)]
    pub stale: bool,
    /// Every stream.
    #[arg(long)]
    pub all: bool,
    /// Also delete the stream's branch (merged branches only, unless --force).
    #[arg(long)]
    pub delete_branch: bool,
    /// Discard uncommitted or unmerged work.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Print the findings as JSON: {"ok", "streams", "findings":[{severity, code, message, hint}]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ws: &Workspace, ctx: &Context, cmd: StreamCommand) -> Result<()> {
    match cmd {
        StreamCommand::Suggest(args) => suggest(ws, args),
        StreamCommand::Add(args) => add(ws, args),
        StreamCommand::Validate(args) => validate(ws, args),
        StreamCommand::Init(args) => init(ws, args),
        StreamCommand::Path(args) => path(ws, args),
        StreamCommand::Run(args) => run_loop(ws, ctx, args),
        StreamCommand::Stop(args) => {
            let plan = ws.plan()?;
            let stream = ws.stream(&plan, &args.name)?;
            crate::stream::runloop::stop(ws, &stream.name)?;
            crate::progress::note(&format!("asked stream {} to stop after its current iteration", stream.name));
            Ok(())
        }
        StreamCommand::Cleanup(args) => cleanup(ws, args),
        StreamCommand::Merge(args) => super::merge::run(ws, ctx, args),
        StreamCommand::Resolve(args) => resolve(ws, args),
        StreamCommand::Rollback(args) => super::rollback::rollback(ws, args),
        StreamCommand::Unmerge(args) => super::rollback::unmerge(ws, ctx, args),
        StreamCommand::Retry(args) => retry(ws, args),
        StreamCommand::Claim(args) => super::sync::claim(ws, args),
        StreamCommand::Release(args) => super::sync::release(ws, args),
        StreamCommand::List(args) | StreamCommand::Status(args) => super::status::run(ws, ctx, args),
    }
}

fn init(ws: &Workspace, args: InitArgs) -> Result<()> {
    let plan = ws.plan()?;
    let streams: Vec<_> = if args.names.is_empty() {
        plan.streams.iter().collect()
    } else {
        args.names.iter().map(|n| ws.stream(&plan, n)).collect::<Result<_>>()?
    };
    if streams.is_empty() {
        return Err(Error::usage("the plan has no streams to initialize").hint("add streams to .boulder/streams.yaml"));
    }
    if let Some(bad) = streams.iter().find_map(|s| crate::names::problem(&s.name).map(|why| (s, why))) {
        return Err(Error::usage(format!("invalid stream name {:?}: {}", bad.0.name, bad.1))
            .hint("fix it in .boulder/streams.yaml; `git boulder stream validate` lists every problem"));
    }
    let mut out = std::io::stdout().lock();
    let mut failed_setup = Vec::new();
    let total = streams.len();
    let mut batch = crate::stream::lifecycle::Batch::default();
    for (i, stream) in streams.into_iter().enumerate() {
        super::output::progress(&format!("[{}/{total}] {}", i + 1, stream.name));
        let report = crate::stream::lifecycle::init_batch(ws, &plan, stream, &mut batch)?;
        if report.changes.is_empty() {
            writeln!(out, "{}: already initialized at {} (nothing to do)", report.name, report.path.display())?;
        } else {
            writeln!(out, "{}: {}", report.name, crate::text::inert(&report.changes.join("; ")))?;
        }
        if let Some(e) = report.setup_failed {
            writeln!(out, "{}: setup failed: {} (the worktree is kept)", report.name, crate::text::inert(&e))?;
            failed_setup.push(report.name);
        }
    }
    super::output::progress_done();
    hooks_for_init(ws, args.no_hooks);
    if !failed_setup.is_empty() {
        return Err(Error::refused(format!("setup failed in: {}", failed_setup.join(", ")))
            .hint("fix the setup command in settings.setup, then run it by hand in the worktree"));
    }
    Ok(())
}

/// Say what `stream init` did about git-boulder's hooks (see [`crate::hooks::streams`]).
fn hooks_for_init(ws: &Workspace, no_hooks: bool) {
    use crate::hooks::streams::Ensured;
    match crate::hooks::streams::ensure(&ws.repo, no_hooks) {
        Ensured::Present => {}
        Ensured::Unknown(e) => {
            eprintln!("warning: cannot look at the hooks: {}", crate::text::inert_lines(&e.message))
        }
        Ensured::LeftOut => eprintln!(
            "git-boulder's hooks are not installed (--no-hooks): commits in the stream worktrees will not be recorded; \
             `git boulder hooks install` records them from now on, `git boulder doctor` finds commits left unrecorded"
        ),
        Ensured::Installed { missing, dir } => crate::progress::note(&format!(
            "installed git-boulder's hooks ({}) in {}, so commits in the stream worktrees are recorded",
            missing.join(", "),
            dir
        )),
        Ensured::Failed(e) => eprintln!(
            "warning: git-boulder's hooks are not installed, so commits will not be recorded: {}\n  {}",
            crate::text::inert_lines(&e.message),
            e.hints.iter().map(|h| crate::text::inert_lines(h).into_owned()).collect::<Vec<_>>().join("\n  ")
        ),
    }
}

fn run_loop(ws: &Workspace, ctx: &Context, args: RunArgs) -> Result<()> {
    let plan = ws.plan()?;
    let stream = ws.stream(&plan, &args.name)?;
    let b = &plan.settings.boulder;
    let cooldown = args.cooldown.unwrap_or(b.cooldown);
    let opts = crate::stream::runloop::Options {
        max_iterations: args.max_iterations.or(stream.max_iterations),
        cooldown,
        multiplier: b.backoff_multiplier,
        max_failures: args.max_failures.unwrap_or(b.max_failures).max(1),
        command: args.command,
        claim_held: args.worker,
        push_to: args.push_to,
    };
    let outcome =
        crate::stream::runloop::run(ws, &plan, stream, &opts, |line| eprintln!("{}", crate::text::inert_lines(line)))?;
    writeln!(
        std::io::stdout().lock(),
        "{}: {} after {} iteration(s) ({})",
        stream.name,
        outcome.status,
        outcome.iterations,
        crate::text::inert(&outcome.reason)
    )?;
    if outcome.status == StreamStatus::Failed {
        return Err(Error::refused(format!("stream {} failed: {}", stream.name, outcome.reason)));
    }
    if outcome.status == StreamStatus::Completed && plan.settings.auto_merge && !args.worker {
        eprintln!("settings.auto_merge: merging stream {}", stream.name);
        super::merge::auto(ws, ctx, &plan, stream)?;
    }
    Ok(())
}

fn resolve(ws: &Workspace, args: ResolveArgs) -> Result<()> {
    use crate::merge::resolve::{self, Resolved};
    let plan = ws.plan()?;
    let stream = ws.stream(&plan, &args.name)?;
    let remote =
        crate::git::remote::for_merge(&ws.repo, plan.settings.merge_remote.as_deref(), args.remote, args.no_remote)?;
    let opts = resolve::Options {
        remote,
        command: args.command,
        max_failures: args.max_failures.unwrap_or(plan.settings.boulder.max_failures).max(1),
    };
    let done = resolve::resolve(ws, &plan, stream, &opts, &|line| eprintln!("{}", crate::text::inert_lines(line)))?;
    let mut out = std::io::stdout().lock();
    match done {
        Resolved::UpToDate { onto } => writeln!(
            out,
            "{}: already on the base's tip {}: nothing to resolve",
            stream.name,
            crate::git::id::short(onto)
        )?,
        Resolved::Rebased { onto, tip, stops, agent_runs } => writeln!(
            out,
            "{}: rebased onto {} (now {}); {stops} conflict stop(s), {agent_runs} agent run(s)",
            stream.name,
            crate::git::id::short(onto),
            crate::git::id::short(tip)
        )?,
    }
    Ok(())
}

fn retry(ws: &Workspace, args: RetryArgs) -> Result<()> {
    use crate::stream::attention::{retry, Retried};
    let plan = ws.plan()?;
    let stream = ws.stream(&plan, &args.name)?;
    let remote =
        crate::git::remote::for_merge(&ws.repo, plan.settings.merge_remote.as_deref(), args.remote, args.no_remote)?;
    let mut out = std::io::stdout().lock();
    match retry(ws, stream, remote.as_deref())? {
        Retried::Cleared(r) => {
            let shared = remote.map(|r| format!(" (pushed to {})", crate::text::inert(&r))).unwrap_or_default();
            writeln!(
                out,
                "{}: cleared the refusal ({}, at {}){shared}; workers may take it again",
                stream.name,
                crate::text::inert(&r.refusal),
                &r.stream_tip[..r.stream_tip.len().min(12)]
            )?;
        }
        Retried::NothingToClear => writeln!(out, "{}: no refused landing recorded; nothing to clear", stream.name)?,
    }
    Ok(())
}

fn path(ws: &Workspace, args: PathArgs) -> Result<()> {
    let plan = ws.plan()?;
    let stream = ws.stream(&plan, &args.name)?;
    let p = ws.worktree_path(&plan, &stream.name)?;
    if !p.exists() {
        return Err(Error::usage(format!("stream {} has no worktree at {}", stream.name, p.display()))
            .hint(format!("create it with `git boulder stream init {}`", stream.name)));
    }
    writeln!(std::io::stdout().lock(), "{}", p.display())?;
    Ok(())
}

fn cleanup(ws: &Workspace, args: CleanupArgs) -> Result<()> {
    // Run from a linked worktree, which it may remove (as `git worktree remove` may remove the one
    // it runs in): from the main worktree instead, since the repository as opened here reaches
    // its objects and refs through this worktree's admin folder. The plan is the main
    // worktree's either way.
    let from_main;
    let ws = match (&ws.repo.main_work_dir, ws.repo.git_dir != ws.repo.common_dir) {
        (Some(main), true) => {
            std::env::set_current_dir(main)
                .map_err(|e| Error::internal(format!("cannot change to {}: {e}", main.display())))?;
            from_main = Workspace::from_repo(crate::git::Repo::discover_at(main)?, ws.config_override.clone());
            &from_main
        }
        _ => ws,
    };
    let plan = ws.plan()?;
    let opts = crate::stream::lifecycle::CleanupOptions {
        merged: args.merged,
        stale: args.stale,
        all: args.all,
        delete_branch: args.delete_branch,
        force: args.force,
    };
    let reports = crate::stream::lifecycle::cleanup(ws, &plan, &args.names, &opts)?;
    let mut out = std::io::stdout().lock();
    if reports.is_empty() {
        writeln!(out, "nothing to clean up")?;
    }
    for r in reports {
        let mut what = Vec::new();
        if r.worktree_removed {
            what.push("worktree removed".to_string());
        }
        if r.branch_deleted {
            what.push("branch deleted".to_string());
        }
        if let Some(n) = r.note {
            what.push(n);
        }
        writeln!(out, "{}: {}", r.name, crate::text::inert(&what.join("; ")))?;
    }
    Ok(())
}

fn suggest(ws: &Workspace, args: SuggestArgs) -> Result<()> {
    let text = ws.suggest_plan(args.prd.as_deref())?;
    let root = ws.root()?;
    if !args.write {
        std::io::stdout().lock().write_all(text.as_bytes())?;
        return Ok(());
    }
    plan::edit::write_proposed(&root.join(plan::PLAN_PATH), &text, args.force)?;
    // Written here by the user through git-boulder: its commands are theirs.
    crate::trust::trust_written(&ws.repo, &text)?;
    eprintln!("wrote {}; check it with `git boulder stream validate`", plan::PLAN_PATH);
    Ok(())
}

fn add(ws: &Workspace, args: AddArgs) -> Result<()> {
    let path = match &ws.config_override {
        Some(p) => p.clone(),
        None => ws
            .repo
            .main_work_dir
            .as_ref()
            .ok_or_else(|| {
                Error::usage("a bare repository has no work tree to write the plan in")
                    .hint("run `git boulder stream add` in a clone or worktree")
            })?
            .join(plan::PLAN_PATH),
    };
    if !args.stories.is_empty() {
        let plan = ws.plan_if_any()?;
        let prd = ws.load_prd(plan.as_ref(), None).ok().map(|(_, prd)| prd);
        plan::edit::stories_free(plan.as_ref(), prd.as_ref(), &args.stories)?;
    }
    let stream = plan::edit::NewStream { name: &args.name, stories: &args.stories, paths: &args.paths };
    plan::edit::add_stream(&path, &stream)?;
    crate::progress::note(&format!(
        "added stream {} to {}; check it with `git boulder stream validate`",
        args.name,
        path.display()
    ));
    Ok(())
}

fn validate(ws: &Workspace, args: ValidateArgs) -> Result<()> {
    let (plan, findings) = ws.validate_plan()?;
    let errors = findings.iter().filter(|f| f.severity == Severity::Error).count();
    let mut out = std::io::stdout().lock();
    if args.json {
        super::output::json(
            &mut out,
            &serde_json::json!({"ok": errors == 0, "streams": plan.streams.len(), "findings": findings}),
        )?;
    } else {
        let on = super::output::color_stdout();
        for f in &findings {
            let (label, code) = match f.severity {
                Severity::Error => ("error", "31"),
                Severity::Warning => ("warning", "33"),
            };
            writeln!(out, "{}: {}", super::output::paint(on, code, label), crate::text::inert_lines(&f.message))?;
            if let Some(h) = &f.hint {
                writeln!(out, "  hint: {}", crate::text::inert_lines(h))?;
            }
        }
        let warnings = findings.len() - errors;
        let stories: usize = plan.streams.iter().map(|s| s.stories.len()).sum();
        writeln!(
            out,
            "{}: {} streams, {} stories assigned, {errors} errors, {warnings} warnings",
            if errors == 0 { "plan ok" } else { "plan has errors" },
            plan.streams.len(),
            stories
        )?;
    }
    if errors > 0 {
        return Err(Error::usage(format!("the stream plan has {errors} error(s)"))
            .hint("fix them in .boulder/streams.yaml and run `git boulder stream validate` again"));
    }
    Ok(())
}
