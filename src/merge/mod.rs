//! `git boulder stream merge` (DESIGN §9): check first, change after.
//!
//! 1. Refuse, changing nothing: stories not done (unless forced), `depends_on` not merged, local
//!    changes in the stream's or the base's checked-out worktree, `verify` set without a worktree.
//! 2. Check: replay the stream's commits onto the base tip in memory ([`replay`]); any conflict
//!    stops everything with a table of path, kind and commit. The PRD merges story by story.
//! 3. Change, each step resumable from the [`journal`]: write the objects and carry the notes,
//!    move the stream branch (compare-and-swap), update its worktree, run `verify`, fast-forward
//!    the base (compare-and-swap against the checked tip) and its worktree, sync completion into
//!    the base's PRD in one commit, record MERGED.
//!
//! Strategies: `rebase` moves both branches to the replayed tip; `merge` makes one merge commit
//! (parents: base tip, stream tip) that both branches move to; `squash` rebases the stream, then
//! puts one commit with the replayed tree on the base.

pub mod batch;
pub mod journal;
mod ownership;
pub mod prd;
pub mod queue;
pub mod recorded;
pub mod replay;
pub mod resolve;
pub mod unmerge;

use std::collections::BTreeSet;

use crate::error::{Error, Landing, Result, ResultExt};
use crate::failpoint;
use crate::git::{identity, notes, refs, ObjectId};
use crate::plan::{MergeStrategy, Plan, StreamDef};
use crate::state::{self, Opt, Store, StreamOp, StreamState, StreamStatus};
use crate::workspace::{load_prd, Workspace};
use crate::worktree;
use crate::worktree::checkout;
use journal::{Journal, Stage};
use ownership::ownership;
pub use ownership::violation_line;
pub use replay::{Conflict, ConflictKind, Step};

/// How to merge.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Overrides the stream's and the plan's `merge_strategy`.
    pub strategy: Option<MergeStrategy>,
    /// Print what would happen, change nothing.
    pub dry_run: bool,
    /// Merge even when the stream's stories are not all done.
    pub force: bool,
    /// Wait for the stream's lock instead of refusing.
    pub wait: bool,
    /// Land on this remote's base branch through the merge queue ([`queue`]) instead of the
    /// local base (a configured remote's name or a URL).
    pub remote: Option<String>,
}

/// What a merge did or would do.
#[derive(Debug, Clone)]
pub struct Report {
    pub stream: String,
    pub branch: String,
    pub base: String,
    pub strategy: MergeStrategy,
    /// The stream's commits and what became of them.
    pub steps: Vec<Step>,
    /// Unresolved conflicts (then nothing changed).
    pub conflicts: Vec<Conflict>,
    /// The base's tip afterwards (or, for a dry run, what it would be before the PRD sync).
    pub commit: Option<ObjectId>,
    /// Commits the base gains.
    pub gained: usize,
    /// A unified diff of the base's PRD, from the base tip to the result.
    pub prd_diff: Option<String>,
    /// The PRD sync commit, when one was made.
    pub prd_commit: Option<ObjectId>,
    /// Nothing to merge: the base already holds the stream.
    pub up_to_date: bool,
    /// A merge interrupted earlier was finished.
    pub resumed: bool,
    /// What the stream's commits change outside its own paths (the pre-push ownership check).
    pub ownership: Vec<crate::plan::ownership::Violation>,
    /// The remote whose base the stream landed on (the merge queue), if not the local base.
    pub remote: Option<String>,
    /// Rounds lost to other machines landing first before this one landed (the merge queue).
    pub rounds: usize,
    /// How many commits are recorded for the stream (notes naming it), when the check counted
    /// them: a landing of none of its own says whether any were ever recorded.
    pub recorded: Option<usize>,
}

pub fn strategy_name(s: MergeStrategy) -> &'static str {
    match s {
        MergeStrategy::Rebase => "rebase",
        MergeStrategy::Merge => "merge",
        MergeStrategy::Squash => "squash",
    }
}

pub use crate::git::id::short;

/// Story ids of `stream` that are done: as its own PRD says (worktree, else branch tip, else the
/// base's PRD at `base_prd`) or as `prd done` recorded.
fn done_ids(ws: &Workspace, plan: &Plan, stream: &StreamDef, base_prd: &crate::prd::Prd) -> Result<BTreeSet<String>> {
    let recorded = ws.recorded_done()?;
    Ok(ws
        .stream_stories(plan, stream, base_prd, &recorded)?
        .into_iter()
        .filter(|s| s.status.is_done())
        .map(|s| s.id)
        .collect())
}

pub(crate) fn prd_name(plan: &Plan) -> &str {
    plan.prd.rsplit('/').next().unwrap_or(&plan.prd)
}

/// The PRD text at `commit`, if it is there and UTF-8.
fn prd_at(ws: &Workspace, plan: &Plan, commit: ObjectId) -> Result<Option<String>> {
    Ok(ws.repo.file_at(commit, &plan.prd)?.and_then(|b| String::from_utf8(b).ok()))
}

/// Refusals that need no replay: stories, dependencies, local changes, verify without a worktree.
fn preflight(ws: &Workspace, plan: &Plan, stream: &StreamDef, opts: &Options) -> Result<()> {
    if !opts.force && !stream.stories.is_empty() {
        let (_, prd) = load_prd(&ws.prd_path(Some(plan), None)?)?;
        let done = ws.recorded_done()?;
        let open: Vec<String> = ws
            .stream_stories(plan, stream, &prd, &done)?
            .into_iter()
            .filter(|s| !s.status.is_done())
            .map(|s| format!("{} ({})", s.id, s.status.as_str()))
            .collect();
        let missing: Vec<&String> = stream.stories.iter().filter(|id| prd.story(id).is_none()).collect();
        if !open.is_empty() || !missing.is_empty() {
            let mut what = open;
            what.extend(missing.iter().map(|id| format!("{id} (not in the PRD)")));
            return Err(Error::refused(format!(
                "stream {} is not complete: {} not done ({})",
                stream.name,
                what.len(),
                what.join(", ")
            ))
            .hint("finish them (or record them with `git boulder prd done ID…`), or merge anyway with --force"));
        }
    }
    let store = Store::new(&ws.repo)?;
    for dep in &stream.depends_on {
        let st = store.read::<StreamState>(&state::stream_ref(dep))?;
        if st.map(|e| e.state.status) != Some(StreamStatus::Merged) {
            return Err(Error::refused(format!(
                "stream {} depends on stream {dep}, which is not merged yet",
                stream.name
            ))
            .hint(format!(
                "merge it first (`git boulder stream merge {dep}{}`), or use --all to merge in dependency order",
                opts.remote.as_deref().map(|r| format!(" --remote {r}")).unwrap_or_default()
            )));
        }
    }
    // Uncommitted work in the stream's own worktree is the stream's to resolve (recorded as a
    // refused landing); in the base's, this machine's.
    worktree::refuse_move(&ws.repo, &stream.branch, None).map_err(|e| match e.kind {
        crate::error::Kind::Refused => e.landing(Landing::Uncommitted),
        _ => e,
    })?;
    worktree::refuse_move(&ws.repo, &plan.settings.base_branch, None)?;
    if !plan.settings.verify.trim().is_empty() && worktree::checked_out(&ws.repo, &stream.branch)?.is_none() {
        return Err(Error::usage(format!(
            "settings.verify is set, but branch {} is not checked out in any worktree to run it in",
            stream.branch
        ))
        .hint(format!("create the stream's worktree with `git boulder stream init {}`", stream.name)));
    }
    Ok(())
}

/// The message of the commit a `merge` or `squash` strategy puts on the base.
fn message(strategy: MergeStrategy, stream: &StreamDef, base: &str, steps: &[Step]) -> String {
    let mut m = match strategy {
        MergeStrategy::Merge => format!("Merge stream {} (branch {}) into {base}\n", stream.name, stream.branch),
        _ => format!("Squash stream {} (branch {}) into {base}\n", stream.name, stream.branch),
    };
    if !stream.stories.is_empty() {
        m.push_str(&format!("\nStories: {}\n", stream.stories.join(", ")));
    }
    if strategy == MergeStrategy::Squash {
        let subjects: Vec<String> =
            steps.iter().filter(|s| s.new.is_some()).map(|s| format!("* {}", s.subject)).collect();
        if !subjects.is_empty() {
            m.push('\n');
            m.push_str(&subjects.join("\n"));
            m.push('\n');
        }
    }
    m
}

/// What [`check`] found: the report and, when the merge can go ahead, the planned tips (their
/// objects still in memory, in `mem`).
pub(crate) struct Checked {
    pub report: Report,
    pub mem: crate::git::objects::Objects<'static>,
    pub stream_tip: ObjectId,
    pub stream_new: ObjectId,
    pub base_new: ObjectId,
}

/// The strategy a merge of `stream` uses.
pub(crate) fn strategy_of(plan: &Plan, stream: &StreamDef, opts: &Options) -> MergeStrategy {
    opts.strategy.or(stream.merge_strategy).unwrap_or(plan.settings.merge_strategy)
}

/// The whole check against the base tip `base_tip`, changing nothing: refusals (stories,
/// dependencies, local changes, ownership), the replay in memory and its conflicts, the new tips
/// of both branches, and for a dry run the PRD diff.
pub(crate) fn check(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    opts: &Options,
    base_tip: ObjectId,
) -> Result<Checked> {
    let repo = &ws.repo;
    let base = plan.settings.base_branch.clone();
    let strategy = strategy_of(plan, stream, opts);
    let stream_tip = repo.branch_tip(&stream.branch)?.ok_or_else(|| {
        Error::usage(format!("stream {} has no branch {} yet", stream.name, stream.branch))
            .hint(format!("create it with `git boulder stream init {}`", stream.name))
    })?;
    preflight(ws, plan, stream, opts)?;
    let ownership = ownership(ws, plan, stream, base_tip, stream_tip, opts)?;

    // A partial clone fetches what the merge will read first, as git would on demand.
    repo.prefetch_for_merge(base_tip, stream_tip, &plan.prd)?;
    // Check, in memory: nothing is written unless the merge goes ahead.
    let mem = repo.in_memory();
    let who = identity::rewrite_committer(repo);
    let r = replay::replay(&mem, base_tip, stream_tip, Some(&plan.prd), &who)?;
    let mut report = Report {
        stream: stream.name.clone(),
        branch: stream.branch.clone(),
        base: base.clone(),
        strategy,
        steps: r.steps.clone(),
        conflicts: r.conflicts.clone(),
        commit: None,
        gained: 0,
        prd_diff: None,
        prd_commit: None,
        up_to_date: false,
        resumed: false,
        ownership,
        remote: None,
        rounds: 0,
        recorded: None,
    };
    if !r.conflicts.is_empty() {
        return Ok(Checked { report, mem, stream_tip, stream_new: stream_tip, base_new: base_tip });
    }
    let contained = r.steps.is_empty();
    let (stream_new, base_new) = match strategy {
        MergeStrategy::Rebase => (r.tip, r.tip),
        MergeStrategy::Merge if contained => (stream_tip, base_tip),
        MergeStrategy::Merge => {
            let parents = repo.objects().parents(stream_tip).internal("cannot read the stream tip")?;
            if parents.len() == 2 && parents[0] == base_tip {
                (stream_tip, stream_tip)
            } else {
                let tree = mem.tree_of(r.tip)?;
                let msg = message(MergeStrategy::Merge, stream, &base, &r.steps);
                let m = mem.new_commit(tree, vec![base_tip, stream_tip], &who, &msg)?;
                (m, m)
            }
        }
        MergeStrategy::Squash if r.tip == base_tip => (r.tip, base_tip),
        MergeStrategy::Squash => {
            let tree = mem.tree_of(r.tip)?;
            let msg = message(MergeStrategy::Squash, stream, &base, &r.steps);
            (r.tip, mem.new_commit(tree, vec![base_tip], &who, &msg)?)
        }
    };
    report.gained = if base_new == base_tip { 0 } else { replay::commits_to_replay(&mem, base_tip, base_new)?.len() };
    report.recorded = Some(landing_holds_work(ws, stream, &base, &r.steps, base_tip, opts)?);
    report.up_to_date = base_new == base_tip;
    report.commit = Some(base_new);

    if opts.dry_run {
        let before = prd_at(ws, plan, base_tip)?;
        let mut after = mem.blob_at(mem.tree_of(base_new)?, &plan.prd)?.and_then(|(_, b)| String::from_utf8(b).ok());
        if let Some(text) = &after {
            if let Ok(p) = crate::prd::parse(prd_name(plan), text) {
                let ids = done_ids(ws, plan, stream, &p)?;
                if let Some(synced) = prd::mark_done(prd_name(plan), text, &ids) {
                    after = Some(synced);
                }
            }
        }
        if let (Some(b), Some(a)) = (before, after) {
            if a != b {
                let diff = similar::TextDiff::from_lines(&b, &a)
                    .unified_diff()
                    .header(&format!("a/{}", plan.prd), &format!("b/{}", plan.prd))
                    .to_string();
                report.prd_diff = Some(diff);
            }
        }
    }
    Ok(Checked { report, mem, stream_tip, stream_new, base_new })
}

/// Refuse a landing that lacks commits recorded for the stream ([`recorded`]), unless forced;
/// the number of commits recorded for it otherwise.
fn landing_holds_work(
    ws: &Workspace,
    stream: &StreamDef,
    base: &str,
    steps: &[Step],
    base_tip: ObjectId,
    opts: &Options,
) -> Result<usize> {
    let work = recorded::check(&ws.repo, &stream.name, steps, base_tip)?;
    if work.missing.is_empty() || opts.force {
        return Ok(work.recorded);
    }
    let n = work.missing.len();
    let list: Vec<String> = work.missing.iter().take(20).map(|m| format!("  {}", m.line())).collect();
    let more = if n > 20 { format!("\n  …and {} more", n - 20) } else { String::new() };
    let target = match &opts.remote {
        Some(r) => format!("{base} on {}", crate::text::inert(r)),
        None => base.to_string(),
    };
    let message = format!(
        "stream {} cannot land: {n} commit(s) recorded for it would not be in {target}; nothing was changed:\n{}{more}",
        stream.name,
        list.join("\n")
    );
    let (name, branch) = (&stream.name, &stream.branch);
    let hint = if work.missing.iter().all(|m| m.subject.is_some()) {
        // Here, but off the branch (a reset, a rebase that left them out).
        let ids: Vec<String> = work.missing.iter().map(|m| short(m.commit)).collect();
        format!(
            "they are in this repository but not on {branch}: put them back with `cd \"$(git boulder stream path {name})\" && git cherry-pick {}`; or land without them with --force",
            ids.join(" ")
        )
    } else {
        let remote = match &opts.remote {
            Some(r) => crate::text::inert(r).into_owned(),
            None => crate::git::remote::default_remote(&ws.repo, base).unwrap_or_else(|_| "REMOTE".into()),
        };
        let machines: BTreeSet<String> = work
            .missing
            .iter()
            .filter_map(|m| m.actor.as_deref())
            .map(|a| crate::text::inert(a).into_owned())
            .collect();
        let there = if machines.is_empty() {
            "on the machine that has them".to_string()
        } else {
            format!("on {}", machines.into_iter().collect::<Vec<_>>().join(", "))
        };
        format!(
            "bring them onto its branch first: {there}, `git push {remote} {branch}`; then here, `cd \"$(git boulder stream path {name})\" && git pull --rebase {remote} {branch}`; or land without them with --force"
        )
    };
    Err(Error::refused(message).hint(hint).landing(crate::error::Landing::MissingWork))
}

/// Write what a check planned: its objects, after making sure nothing stands in the way of the
/// worktree updates of `moves` (branch, from, to), then the notes of the rewritten commits.
pub(crate) fn write_planned(ws: &Workspace, c: Checked, moves: &[(&str, ObjectId, ObjectId)]) -> Result<Report> {
    let repo = &ws.repo;
    c.mem.persist(repo)?;
    failpoint::hit("merge-objects");
    // Nothing may stand in the way of the worktree updates; refuse before any ref moves.
    for (branch, from, to) in moves {
        if let Some(wt) = worktree::checked_out(repo, branch)? {
            let found = checkout::blockers(&wt, repo.objects().tree_of(*from)?, repo.objects().tree_of(*to)?)?;
            if !found.is_empty() {
                return Err(checkout::refusal(&wt, &found));
            }
        }
    }
    // The merge strategy keeps the stream's own commits; the replayed ones only served the check.
    let pairs: Vec<(ObjectId, ObjectId)> =
        if c.report.strategy == MergeStrategy::Merge { Vec::new() } else { replay::rewritten(&c.report.steps) };
    if !pairs.is_empty() {
        notes::carry(repo, &pairs)?;
    }
    failpoint::hit("merge-notes");
    Ok(c.report)
}

/// Merge one stream (the caller holds the merge lock): into the local base, or with
/// `opts.remote` into that remote's base through the merge queue.
pub fn merge(ws: &Workspace, plan: &Plan, stream: &StreamDef, opts: &Options, say: &dyn Fn(&str)) -> Result<Report> {
    let repo = &ws.repo;
    let base = plan.settings.base_branch.clone();
    if stream.branch == base {
        return Err(Error::usage(format!("stream {} uses the base branch {base} as its own branch", stream.name))
            .hint("give the stream its own `branch:` in .boulder/streams.yaml"));
    }
    let strategy = strategy_of(plan, stream, opts);
    let _stream_lock = crate::lock::acquire(
        repo,
        &format!("stream-{}", stream.name),
        opts.wait,
        &format!("stream merge {}", stream.name),
    )?;
    if let Some(remote) = &opts.remote {
        return queue::merge(ws, plan, stream, opts, remote, say);
    }

    if let Some(j) = Journal::load(repo, &stream.name)? {
        if let Some(r) = &j.remote {
            return Err(Error::refused(format!(
                "an interrupted merge of stream {} into {r} is pending; finish it before merging locally",
                stream.name
            ))
            .hint(format!("finish it with `git boulder stream merge {} --remote {r}`", stream.name)));
        }
        if opts.dry_run {
            return Err(Error::refused(format!(
                "an interrupted merge of stream {} is pending, so a dry run cannot say what a merge would do",
                stream.name
            ))
            .hint(format!("finish it with `git boulder stream merge {}`", stream.name)));
        } else if let Some(report) = resume(ws, plan, stream, j, say)? {
            return Ok(report);
        }
    }

    let base_tip = base_tip(ws, &base)?;
    let c = check(ws, plan, stream, opts, base_tip)?;
    if c.report.conflicts.is_empty() {
        // Last of the refusals (a conflict is the agent's to resolve first, and moves the tip):
        // approvals of the tip that lands. A dry run refuses as the real run would.
        crate::stream::gate::require(ws, plan, &stream.name, c.stream_tip)?;
    }
    if !c.report.conflicts.is_empty() || opts.dry_run {
        return Ok(c.report);
    }
    let (stream_tip, stream_new, base_new) = (c.stream_tip, c.stream_new, c.base_new);
    let mut report =
        write_planned(ws, c, &[(stream.branch.as_str(), stream_tip, stream_new), (base.as_str(), base_tip, base_new)])?;
    let j = Journal {
        stream: stream.name.clone(),
        stream_branch: stream.branch.clone(),
        base_branch: base.clone(),
        strategy,
        stream_old: stream_tip,
        stream_new,
        base_old: base_tip,
        base_new,
        commits: report.gained,
        prd_from: None,
        prd_to: None,
        stage: Stage::Planned,
        remote: None,
        stream_seen: None,
        local_base: None,
    };
    j.save(repo)?;
    failpoint::hit("merge-journal");
    let done = execute(ws, plan, stream, j, say)?;
    report.prd_commit = done.prd_commit;
    Ok(report)
}

/// The local base branch's tip (a usage error naming the setting when it does not exist).
fn base_tip(ws: &Workspace, base: &str) -> Result<ObjectId> {
    ws.repo.branch_tip(base)?.ok_or_else(|| {
        Error::usage(format!("the base branch {base:?} does not exist"))
            .hint("set settings.base_branch in .boulder/streams.yaml to an existing branch")
    })
}

/// Finish an interrupted merge from its record. `None` when the record no longer applies (the
/// stream branch moved elsewhere): it is dropped and the merge starts over.
fn resume(ws: &Workspace, plan: &Plan, stream: &StreamDef, j: Journal, say: &dyn Fn(&str)) -> Result<Option<Report>> {
    let tip = ws.repo.branch_tip(&j.stream_branch)?;
    if tip != Some(j.stream_old) && tip != Some(j.stream_new)
        || j.stream_branch != stream.branch
        || j.base_branch != plan.settings.base_branch
    {
        say(&format!("the record of an interrupted merge of stream {} no longer applies; starting over", stream.name));
        j.remove(&ws.repo)?;
        return Ok(None);
    }
    say(&format!("finishing the interrupted merge of stream {}", stream.name));
    let resumed = Resumed::of(&j);
    let done = execute(ws, plan, stream, j, say)?;
    Ok(Some(resumed.report(plan, stream, done, None)))
}

/// What the report of a merge finished from its record says of the merge, read from the record
/// before the merge goes on.
pub(crate) struct Resumed {
    strategy: MergeStrategy,
    gained: usize,
    up_to_date: bool,
}

impl Resumed {
    pub(crate) fn of(j: &Journal) -> Resumed {
        Resumed { strategy: j.strategy, gained: j.commits, up_to_date: j.base_old == j.base_new }
    }

    /// The report once the merge is done (into `remote`'s base, if one is given).
    pub(crate) fn report(self, plan: &Plan, stream: &StreamDef, done: Done, remote: Option<String>) -> Report {
        Report {
            stream: stream.name.clone(),
            branch: stream.branch.clone(),
            base: plan.settings.base_branch.clone(),
            strategy: self.strategy,
            steps: Vec::new(),
            conflicts: Vec::new(),
            commit: Some(done.merged),
            gained: self.gained,
            prd_diff: None,
            prd_commit: done.prd_commit,
            up_to_date: self.up_to_date,
            resumed: true,
            ownership: Vec::new(),
            remote,
            rounds: 0,
            recorded: None,
        }
    }
}

pub(crate) struct Done {
    /// The base tip the stream brought (before the PRD sync commit).
    pub merged: ObjectId,
    pub prd_commit: Option<ObjectId>,
}

/// A step found the world not as planned (a branch moved, an index changed): drop the record so
/// that a rerun plans again from the new state, and say so. But when the branch that step moves
/// (`branch`, planned to `to`) is at `to` already, its move is under way — its worktree not yet
/// brought along, whatever stops that now (a lock still held, files changed since): the record is
/// kept, and the rerun finishes from it once that is dealt with.
pub(crate) fn stop<T>(ws: &Workspace, j: &Journal, branch: &str, to: ObjectId, e: Error) -> Result<T> {
    let under_way = ws.repo.branch_tip(branch).ok().flatten() == Some(to);
    if e.kind == crate::error::Kind::Refused && !under_way {
        j.remove(&ws.repo)?;
        let remote = j.remote.as_deref().map(|r| format!(" --remote {r}")).unwrap_or_default();
        return Err(e.hint(format!(
            "rerun `git boulder stream merge {}{remote}` to plan again from where things are now",
            j.stream
        )));
    }
    Err(e)
}

/// Steps 1 and 2 of a planned merge, skipping what is done: the stream branch and its worktree
/// (as one step no commit there can interleave with), then `verify` on the result.
pub(crate) fn advance_stream(ws: &Workspace, plan: &Plan, j: &mut Journal, say: &dyn Fn(&str)) -> Result<()> {
    let repo = &ws.repo;
    let (s_old, s_new) = (j.stream_old, j.stream_new);
    let (b_old, b_new) = (j.base_old, j.base_new);
    crate::progress::show(&format!("moving {} and its worktree", j.stream_branch));
    let what = format!("the merge of stream {}", j.stream);
    if j.stage < Stage::StreamUpdated {
        // The old tip is kept first, as rollback and unmerge keep it, when the branch moves to
        // commits rewritten from it (kept once: a rerun finds the backup holding it).
        if s_old != s_new && !repo.objects().is_ancestor(s_old, s_new)? {
            let kept = crate::stream::rollback::keep(
                repo,
                &j.stream,
                s_old,
                &format!("boulder merge: stream {} (old tip)", j.stream),
            )?;
            say(&format!("the old tip {} of {} is kept in {kept}", short(s_old), j.stream_branch));
            failpoint::hit("merge-backup");
        }
        let msg = format!("boulder merge: {} onto {}", strategy_label(j.strategy), j.base_branch);
        checkout::move_branch(repo, &j.stream_branch, s_old, s_new, &msg, &what, "merge-stream-ref")
            .or_else(|e| stop(ws, j, &j.stream_branch, s_new, e))?;
        if s_old == s_new {
            failpoint::hit("merge-stream-ref");
        }
        j.stage = Stage::StreamUpdated;
        j.save(repo)?;
    }
    failpoint::hit("merge-stream-worktree");
    if j.stage < Stage::Verified {
        let verify = plan.settings.verify.trim();
        if !verify.is_empty() && b_old != b_new {
            let wt = worktree::checked_out(repo, &j.stream_branch)?.ok_or_else(|| {
                Error::usage(format!("branch {} is not checked out anywhere to run verify in", j.stream_branch))
            })?;
            crate::progress::done();
            say(&format!("running verify in {}: {verify}", wt.display()));
            let env = crate::stream::shell::stream_env(ws, plan, &j.stream)?;
            if let Err(e) = crate::stream::shell::run_shell(verify, &wt, &env) {
                let (base, rerun) = match &j.remote {
                    Some(r) => (format!("{} on {r}", j.base_branch), format!(" --remote {r}")),
                    None => (j.base_branch.clone(), String::new()),
                };
                return Err(Error::refused(format!(
                    "verify failed for stream {}: {e}; the base branch {base} was not changed (the stream branch holds the rebased result)",
                    j.stream
                ))
                .hint(format!("fix it in {} and rerun `git boulder stream merge {}{rerun}`", wt.display(), j.stream))
                .landing(Landing::Verify));
            }
        }
        j.stage = Stage::Verified;
        j.save(repo)?;
    }
    failpoint::hit("merge-verify");
    Ok(())
}

/// Plan the PRD sync commit on top of `on` (the merged base tip): one commit touching only the
/// status marks of the stream's done stories, recorded in the journal (`prd_from`, `prd_to`).
/// Nothing when the base has no PRD or nothing to mark.
pub(crate) fn plan_prd_sync(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    j: &mut Journal,
    on: ObjectId,
) -> Result<()> {
    let repo = &ws.repo;
    if let Some(text) = prd_at(ws, plan, on)? {
        if let Ok(p) = crate::prd::parse(prd_name(plan), &text) {
            let ids = done_ids(ws, plan, stream, &p)?;
            if let Some(synced) = prd::mark_done(prd_name(plan), &text, &ids) {
                let objects = repo.objects();
                let blob = objects.blob(synced.as_bytes(), true).internal("cannot write the PRD")?;
                let tree = objects.with_file(objects.tree_of(on)?, &plan.prd, blob)?;
                let who = identity::rewrite_committer(repo);
                let msg = format!("chore(prd): sync completion from stream {}\n", j.stream);
                let p_commit = objects.new_commit(tree, vec![on], &who, &msg)?;
                j.prd_from = Some(on);
                j.prd_to = Some(p_commit);
                j.save(repo)?;
                failpoint::hit("merge-prd-commit");
            }
        }
    }
    Ok(())
}

/// Record the stream MERGED at `last` (once: nothing when it already is, at that commit).
pub(crate) fn record_merged(ws: &Workspace, j: &Journal, last: ObjectId) -> Result<()> {
    let store = Store::new(&ws.repo)?;
    let last_hex = last.to_string();
    let strategy = strategy_name(j.strategy).to_string();
    let s_new = j.stream_new;
    let (landed, before) = (j.base_new, j.base_old);
    store.append_if::<StreamState>(&state::stream_ref(&j.stream), |cur| {
        let already =
            cur.is_some_and(|s| s.status == StreamStatus::Merged && s.merged_commit.as_deref() == Some(&last_hex));
        Ok((!already).then(|| StreamOp::Merged {
            commit: last.into(),
            strategy: Opt::Set(strategy.clone()),
            stream_tip: Opt::Set(s_new.into()),
            landed: Opt::Set(landed.into()),
            base_before: Opt::Set(before.into()),
        }))
    })?;
    failpoint::hit("merge-record");
    Ok(())
}

/// Carry out a planned merge, step by step, skipping what is already done.
fn execute(ws: &Workspace, plan: &Plan, stream: &StreamDef, mut j: Journal, say: &dyn Fn(&str)) -> Result<Done> {
    let repo = &ws.repo;
    let (b_old, b_new) = (j.base_old, j.base_new);
    let base_ref = refs::branch_ref(&j.base_branch);
    let what = format!("the merge of stream {}", j.stream);
    advance_stream(ws, plan, &mut j, say)?;
    crate::progress::show(&format!("fast-forwarding {}", j.base_branch));
    // 3. The base branch (a fast-forward, compare-and-swap against the tip that was checked) and
    //    its worktree.
    let prd_to = j.prd_to;
    if j.stage < Stage::BaseUpdated {
        let past = prd_to.is_some() && repo.ref_id(&base_ref)? == prd_to;
        if b_old != b_new && !past {
            let msg = format!("boulder merge: stream {} ({})", j.stream, strategy_name(j.strategy));
            checkout::move_branch(repo, &j.base_branch, b_old, b_new, &msg, &what, "merge-base-ref")
                .or_else(|e| stop(ws, &j, &j.base_branch, b_new, e))?;
        } else if b_old == b_new {
            failpoint::hit("merge-base-ref");
        }
        j.stage = Stage::BaseUpdated;
        j.save(repo)?;
    }
    failpoint::hit("merge-base-worktree");
    // 4. Completion into the base's PRD: one commit touching only status marks.
    if j.stage < Stage::Synced {
        if j.prd_to.is_none() {
            plan_prd_sync(ws, plan, stream, &mut j, b_new)?;
        }
        if let (Some(from), Some(to)) = (j.prd_from, j.prd_to) {
            // Planned (perhaps before a crash): move the base and its worktree to it.
            let msg = format!("chore(prd): sync completion from stream {}", j.stream);
            checkout::move_branch(repo, &j.base_branch, from, to, &msg, &what, "merge-prd-ref")
                .or_else(|e| stop(ws, &j, &j.base_branch, to, e))?;
        }
        j.stage = Stage::Synced;
        j.save(repo)?;
    }
    failpoint::hit("merge-prd-worktree");
    crate::progress::done();
    // The base's worktree moved as under `git merge`: its post-merge hook runs, as git runs it.
    if b_old != b_new || prd_to.is_some() {
        if let Some(wt) = crate::worktree::checked_out(repo, &j.base_branch)? {
            crate::git::cli::post_merge(&wt);
        }
    }
    // 5. Record MERGED with the final commit (once).
    let prd_commit = j.prd_to;
    record_merged(ws, &j, j.final_tip())?;
    j.remove(repo)?;
    Ok(Done { merged: b_new, prd_commit })
}

pub(crate) fn strategy_label(s: MergeStrategy) -> &'static str {
    match s {
        MergeStrategy::Merge => "merge commit",
        MergeStrategy::Squash => "rebase before squash",
        MergeStrategy::Rebase => "rebase",
    }
}

/// The streams `--all` merges, in dependency order: every stream with a branch that is not
/// merged yet (or has commits since) — incomplete ones are skipped by the caller's check.
pub fn order(plan: &Plan, names: &[String]) -> Result<Vec<String>> {
    crate::plan::topo_order(plan, names)
        .map_err(|e| Error::usage(e.to_string()).hint("fix depends_on in .boulder/streams.yaml"))
}

/// Has the stream nothing new for the base: recorded MERGED and its branch holds nothing the base
/// (or the recorded merge) lacks.
pub fn already_merged(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<bool> {
    let store = Store::new(&ws.repo)?;
    let Some(st) = store.read::<StreamState>(&state::stream_ref(&stream.name))? else { return Ok(false) };
    if st.state.status != StreamStatus::Merged {
        return Ok(false);
    }
    let tip = ws.repo.branch_tip(&stream.branch)?;
    Ok(match tip {
        None => true,
        Some(t) => {
            st.state.merged_tip.as_deref() == Some(t.to_string().as_str())
                || crate::stream::lifecycle::is_merged(ws, plan, stream)?
        }
    })
}
