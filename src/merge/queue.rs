//! `stream merge NAME --remote R`: the serverless merge queue (DESIGN §13). No server: the
//! remote's base branch is the queue, and a push with a lease is its lock.
//!
//! Each round: pull the remote's state (so `depends_on` and MERGED are as the remote says),
//! fetch its base branch and the stream's branch into `refs/boulder-queue/<remote>/heads/…`, run
//! the whole check of a local merge against the remote's base tip, replay, move the stream
//! branch and its worktree, run `verify`, plan the PRD sync commit, then push the new base tip
//! and the stream branch in one atomic push, each under a lease on the tip the check saw. A lost
//! race (the remote's base moved meanwhile) drops the plan and starts the next round from a fresh
//! fetch, at most [`ROUNDS`] rounds; a conflict with what landed meanwhile stops with the
//! conflict table before anything is pushed. After the push: the local base follows when it is
//! behind (never losing a local commit), MERGED is recorded and the state pushed.
//!
//! Crash safety is the local merge's journal, with one more stage ([`Stage::Pushed`]): a rerun
//! that finds a plan not yet marked pushed fetches first and, when the remote's base already
//! holds the planned tip, only finishes (records, syncs) — it never pushes twice.

use crate::error::{Error, Result};
use crate::failpoint;
use crate::git::remote::{self, RemoteName};
use crate::git::{cli, refs, ObjectId};
use crate::plan::{Plan, StreamDef};
use crate::workspace::Workspace;
use crate::worktree::checkout;

use super::journal::{Journal, Stage, StreamSeen};
use super::{check, short, Options, Report};

/// Most rounds (fetch, check, push) a merge into a remote tries before giving up on lost races.
pub const ROUNDS: usize = 5;

/// The remote's tips as fetched: its base branch and the stream's branch (if it has one).
struct Seen {
    base: ObjectId,
    stream: Option<ObjectId>,
}

/// Fetch the remote's base branch and the stream's branch into the queue's private refs.
fn fetch_tips(ws: &Workspace, remote: &RemoteName, base: &str, branch: &str) -> Result<Seen> {
    let specs: Vec<String> = [base, branch]
        .iter()
        .map(|b| format!("+{}:{}", refs::branch_ref(b), refs::queue_ref(&remote.key, b)))
        .collect();
    crate::progress::show(&format!("fetching {base} from {}", remote.given));
    let fetched = remote::fetch(&ws.repo, &remote.given, &specs)?;
    crate::progress::done();
    let tip = |b: &str| fetched.iter().find(|f| f.remote_ref == refs::branch_ref(b)).map(|f| f.id);
    let base_tip = tip(base).ok_or_else(|| {
        Error::usage(format!("the remote {} has no branch {base} to merge into", remote.given))
            .hint(format!("push it there first: git push {} {base}", remote.given))
    })?;
    Ok(Seen { base: base_tip, stream: tip(branch) })
}

/// How one attempt to land ended.
enum Landed {
    /// On the remote, recorded: the merged base tip and the PRD sync commit on it, if any.
    Done { merged: ObjectId, prd_commit: Option<ObjectId> },
    /// The remote's base moved since the check (another machine landed first): plan again.
    LostRace,
}

/// Merge `stream` into the base branch of the remote `given` (the caller holds the merge lock and
/// the stream's lock).
pub fn merge(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    opts: &Options,
    given: &str,
    say: &dyn Fn(&str),
) -> Result<Report> {
    let repo = &ws.repo;
    let remote = RemoteName::new(repo, given)?;
    let base = plan.settings.base_branch.clone();
    let mut rounds = 0usize;
    // A lost round leaves the branch rebased here: (the tip its approvals name, the rebased tip).
    let mut rewritten: Option<(ObjectId, ObjectId)> = None;

    if let Some(j) = pending(ws, plan, stream, opts, given, say)? {
        say(&format!("finishing the interrupted merge of stream {} into {base} on {given}", stream.name));
        let resumed = super::Resumed::of(&j);
        let (old, new) = (j.stream_old, j.stream_new);
        match land(ws, plan, stream, j, &remote, true, say)? {
            Landed::Done { merged, prd_commit } => {
                let done = super::Done { merged, prd_commit };
                return Ok(resumed.report(plan, stream, done, Some(given.to_string())));
            }
            Landed::LostRace => {
                rounds += 1;
                rewritten = Some((old, new));
                lost(say, &base, given, rounds);
            }
        }
    }

    // The stream's tip before any round rewrote it: a lost round leaves the branch rebased.
    let tip_before = repo.branch_tip(&stream.branch)?;
    while rounds < ROUNDS {
        if let Some(report) = round(ws, plan, stream, opts, &remote, tip_before, &mut rewritten, rounds, say)? {
            return Ok(report);
        }
        rounds += 1;
        lost(say, &base, given, rounds);
    }
    Err(Error::refused(format!(
        "stream {} could not land on {base} on {given}: the branch moved under it {ROUNDS} times in a row; nothing was changed there",
        stream.name
    ))
    .hint(format!("try again when the remote is quieter: git boulder stream merge {} --remote {given}", stream.name)))
}

/// The record of an interrupted merge of `stream` into `given` that this run finishes: refused
/// when it is of a local merge or one into another remote, or for a dry run; dropped (`None`)
/// when the stream branch moved elsewhere since.
fn pending(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    opts: &Options,
    given: &str,
    say: &dyn Fn(&str),
) -> Result<Option<Journal>> {
    let repo = &ws.repo;
    let Some(j) = Journal::load(repo, &stream.name)? else { return Ok(None) };
    match j.remote.as_deref() {
        None => {
            return Err(Error::refused(format!(
                "an interrupted local merge of stream {} is pending; finish it before merging into {given}",
                stream.name
            ))
            .hint(format!("finish it with `git boulder stream merge {} --no-remote`", stream.name)))
        }
        Some(r) if r != given => {
            return Err(Error::refused(format!(
                "an interrupted merge of stream {} into {r} is pending; finish it before merging into {given}",
                stream.name
            ))
            .hint(format!("finish it with `git boulder stream merge {} --remote {r}`", stream.name)))
        }
        Some(_) => {}
    }
    if opts.dry_run {
        return Err(Error::refused(format!(
            "an interrupted merge of stream {} is pending, so a dry run cannot say what a merge would do",
            stream.name
        ))
        .hint(format!("finish it with `git boulder stream merge {} --remote {given}`", stream.name)));
    }
    let tip = repo.branch_tip(&j.stream_branch)?;
    if tip != Some(j.stream_old) && tip != Some(j.stream_new)
        || j.stream_branch != stream.branch
        || j.base_branch != plan.settings.base_branch
    {
        say(&format!("the record of an interrupted merge of stream {} no longer applies; starting over", stream.name));
        j.remove(repo)?;
        return Ok(None);
    }
    Ok(Some(j))
}

/// One round: fetch, check, plan, land. `None`: the race for the remote's base was lost.
/// `rewritten`: the branch rebased by a round lost before (the tip approved, the rebased tip).
#[allow(clippy::too_many_arguments)]
fn round(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    opts: &Options,
    remote: &RemoteName,
    tip_before: Option<ObjectId>,
    rewritten: &mut Option<(ObjectId, ObjectId)>,
    rounds: usize,
    say: &dyn Fn(&str),
) -> Result<Option<Report>> {
    let (repo, given, base) = (&ws.repo, &remote.given, &plan.settings.base_branch);
    if !opts.dry_run {
        // The remote's state decides depends_on and MERGED: bring it in first.
        crate::sync::pull(repo, remote)?;
    }
    let seen = fetch_tips(ws, remote, base, &stream.branch)?;
    review_newer_there(ws, plan, stream, &seen)?;
    refuse_commits_unknown_here(ws, stream, &seen, tip_before, given)?;
    let c = check(ws, plan, stream, opts, seen.base)?;
    // Approvals as the remote's state (pulled above) has them, of the tip that lands: the one
    // before this command rebased it in a lost round, else the branch's.
    let approved = match *rewritten {
        Some((before, to)) if to == c.stream_tip => before,
        _ => c.stream_tip,
    };
    if c.report.conflicts.is_empty() {
        crate::stream::gate::require(ws, plan, &stream.name, approved)?;
    }
    // A dry run stops here, after every refusal the real run makes before it changes anything.
    if !c.report.conflicts.is_empty() || opts.dry_run {
        let mut report = c.report;
        report.remote = Some(given.to_string());
        report.rounds = rounds;
        return Ok(Some(report));
    }
    let (stream_tip, stream_new, base_new) = (c.stream_tip, c.stream_new, c.base_new);
    let mut report = super::write_planned(ws, c, &[(stream.branch.as_str(), stream_tip, stream_new)])?;
    let j = Journal {
        stream: stream.name.clone(),
        stream_branch: stream.branch.clone(),
        base_branch: base.clone(),
        strategy: report.strategy,
        stream_old: stream_tip,
        stream_new,
        base_old: seen.base,
        base_new,
        commits: report.gained,
        prd_from: None,
        prd_to: None,
        stage: Stage::Planned,
        remote: Some(given.to_string()),
        stream_seen: Some(StreamSeen::from(seen.stream)),
        local_base: None,
    };
    j.save(repo)?;
    failpoint::hit("merge-journal");
    match land(ws, plan, stream, j, remote, false, say)? {
        Landed::Done { prd_commit, .. } => {
            report.prd_commit = prd_commit;
            report.remote = Some(given.to_string());
            report.rounds = rounds;
            Ok(Some(report))
        }
        Landed::LostRace => {
            *rewritten = Some((approved, stream_new));
            Ok(None)
        }
    }
}

/// A tip of the stream's branch on the remote that this machine lacks is what other machines
/// would see landed: it needs its own approvals first (a commit pushed after an approval puts the
/// stream back to review), before this machine is told to bring it in.
fn review_newer_there(ws: &Workspace, plan: &Plan, stream: &StreamDef, seen: &Seen) -> Result<()> {
    let Some(theirs) = seen.stream.filter(|_| crate::stream::gate::required(plan, &stream.name)) else {
        return Ok(());
    };
    let ours = ws.repo.branch_tip(&stream.branch)?;
    if ours == Some(theirs) || ours.map(|o| ws.repo.objects().is_ancestor(theirs, o)).transpose()?.unwrap_or(false) {
        return Ok(());
    }
    crate::stream::gate::require(ws, plan, &stream.name, theirs)
}

/// Commits of the remote's stream branch come here first: refused before the check, whose
/// refusals (work recorded but missing) would point elsewhere. (Without a local branch, the check
/// says how to make one.)
fn refuse_commits_unknown_here(
    ws: &Workspace,
    stream: &StreamDef,
    seen: &Seen,
    tip_before: Option<ObjectId>,
    given: &str,
) -> Result<()> {
    let repo = &ws.repo;
    let (Some(theirs), Some(local)) = (seen.stream, repo.branch_tip(&stream.branch)?) else { return Ok(()) };
    let objects = repo.objects();
    // Known here when this branch, the remote's base or a backup of the stream (a rollback's, an
    // unmerge's) holds it.
    let mut known = objects.is_ancestor(theirs, local)?
        || objects.is_ancestor(theirs, seen.base)?
        || tip_before.map(|t| objects.is_ancestor(theirs, t)).transpose()?.unwrap_or(false);
    for (_, _, kept) in crate::stream::rollback::backups(repo, &stream.name)? {
        known = known || objects.is_ancestor(theirs, kept)?;
    }
    // A tip this branch had here, rewritten here since (a rebase: `stream resolve`, the agent's
    // own): its commits are on the branch in their new form.
    known = known || crate::stream::share::own_history(ws, stream, local, theirs)?;
    if known {
        return Ok(());
    }
    Err(Error::refused(format!(
        "the branch {} on {given} has commits this machine's branch lacks ({}); nothing was changed",
        stream.branch,
        short(theirs)
    ))
    .hint(format!(
        "bring them in first: cd \"$(git boulder stream path {})\" && git pull --rebase {given} {}",
        stream.name, stream.branch
    )))
}

fn lost(say: &dyn Fn(&str), base: &str, remote: &str, round: usize) {
    say(&format!(
        "round {round}/{ROUNDS}: {base} on {remote} moved while this merge ran (another machine landed first); fetching it and checking again"
    ));
}

/// Carry out a planned merge into the remote, step by step, skipping what is already done.
/// `resumed`: the plan comes from an interrupted run, so the push may have gone through already.
fn land(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    mut j: Journal,
    remote: &RemoteName,
    resumed: bool,
    say: &dyn Fn(&str),
) -> Result<Landed> {
    let repo = &ws.repo;
    let b_new = j.base_new;
    super::advance_stream(ws, plan, &mut j, say)?;
    if j.stage < Stage::Pushed {
        if j.prd_to.is_none() {
            super::plan_prd_sync(ws, plan, stream, &mut j, b_new)?;
        }
        if !push_once(ws, &j, remote, resumed)? {
            j.remove(repo)?;
            return Ok(Landed::LostRace);
        }
        failpoint::hit("queue-push");
        follow_later(ws, &mut j, &remote.given, say)?;
        j.stage = Stage::Pushed;
        j.save(repo)?;
    }
    failpoint::hit("queue-pushed");
    let fin = j.final_tip();
    if j.stage < Stage::BaseUpdated {
        if let Some(local) = j.local_base {
            let msg = format!("boulder merge: stream {} landed on {}", j.stream, remote.given);
            let what = format!("the merge of stream {}", j.stream);
            bring_up(repo, &j.base_branch, local, fin, &msg, &what, &remote.given, say);
        }
        j.stage = Stage::BaseUpdated;
        j.save(repo)?;
    }
    failpoint::hit("merge-base-worktree");
    super::record_merged(ws, &j, fin)?;
    match crate::sync::push(repo, remote) {
        Ok(p) if p.refs.iter().any(|r| r.result == crate::sync::RefResult::Rejected) => say(&format!(
            "stream {} landed on {}, but its state was not all pushed; run `git boulder sync {}`",
            j.stream, remote.given, remote.given
        )),
        Ok(_) => {}
        Err(e) => say(&format!(
            "stream {} landed on {}, but its state was not pushed ({}); run `git boulder sync {}`",
            j.stream, remote.given, e.message, remote.given
        )),
    }
    failpoint::hit("queue-state");
    j.remove(repo)?;
    Ok(Landed::Done { merged: b_new, prd_commit: j.prd_to })
}

/// Push the planned tips once: `false` when the race for the remote's base is lost (the caller
/// drops the plan). `resumed`: after a crash the push may have happened; look before pushing
/// again.
fn push_once(ws: &Workspace, j: &Journal, remote: &RemoteName, resumed: bool) -> Result<bool> {
    let fin = j.final_tip();
    if resumed {
        let seen = fetch_tips(ws, remote, &j.base_branch, &j.stream_branch)?;
        if ws.repo.objects().is_ancestor(fin, seen.base)? {
            return Ok(true);
        } else if seen.base != j.base_old {
            return Ok(false);
        }
    }
    if fin == j.base_old {
        return Ok(true);
    }
    push(ws, j, remote, fin)
}

/// The new base tip `fin` and the stream branch, in one atomic push, each under a lease on the
/// tip the check saw. `false`: a lost race; a refusal by the server is an error (after which the
/// caller's plan is dropped as well).
fn push(ws: &Workspace, j: &Journal, remote: &RemoteName, fin: ObjectId) -> Result<bool> {
    let repo = &ws.repo;
    let (b_old, s_new) = (j.base_old, j.stream_new);
    crate::progress::show(&format!("pushing {} to {}", j.base_branch, remote.given));
    let seen_stream = j.stream_seen.and_then(StreamSeen::tip).map(|id| id.to_string());
    let leases = vec![
        (refs::branch_ref(&j.base_branch), Some(b_old.to_string())),
        (refs::branch_ref(&j.stream_branch), seen_stream.clone()),
    ];
    let specs = vec![
        format!("{fin}:{}", refs::branch_ref(&j.base_branch)),
        format!("{s_new}:{}", refs::branch_ref(&j.stream_branch)),
    ];
    if crate::stream::share::uses_lfs(repo) {
        // The push skips the hooks, git-lfs's among them: send the LFS files first.
        let updates = [
            (refs::branch_ref(&j.base_branch), fin, Some(b_old.to_string())),
            (refs::branch_ref(&j.stream_branch), s_new, seen_stream.clone()),
        ]
        .map(|(name, local, remote)| cli::PushUpdate {
            local_ref: name.clone(),
            local: local.to_string(),
            remote_ref: name,
            remote,
        });
        cli::lfs_pre_push(repo.run_dir(), &remote.given, &updates)?;
    }
    let pushed = cli::push_leased(repo.run_dir(), &remote.given, &leases, &specs)?;
    crate::progress::done();
    if pushed.refs.iter().any(cli::PushedRef::lost_race) {
        return Ok(false);
    }
    let rejected: Vec<String> =
        pushed.refs.iter().filter(|p| p.rejected()).map(|p| format!("{} {}", p.remote_ref, p.summary)).collect();
    if rejected.is_empty() && !pushed.refs.is_empty() {
        return Ok(true);
    }
    j.remove(repo)?;
    // Two pushes that passed the lease together are told apart by the server's ref transaction
    // (`[remote rejected] (atomic transaction failed)`, "cannot lock ref"): if the base moved, it
    // was a lost race all the same.
    if fetch_tips(ws, remote, &j.base_branch, &j.stream_branch)?.base != b_old {
        return Ok(false);
    }
    let said = pushed.server_said();
    let said = if said.is_empty() { String::new() } else { format!("\n{said}") };
    Err(Error::refused(format!(
        "{} refused the merge of stream {}: {}; nothing was changed there (the stream branch here holds the rebased result){said}",
        remote.given,
        j.stream,
        rejected.join(", ")
    ))
    .hint("see what the server said above; `git push` of the base branch must be allowed from here"))
}

/// The local base follows when it holds nothing the remote lacks: plan it now, once (in
/// `j.local_base`); else say why it stays.
fn follow_later(ws: &Workspace, j: &mut Journal, given: &str, say: &dyn Fn(&str)) -> Result<()> {
    let repo = &ws.repo;
    let fin = j.final_tip();
    let Some(local) = repo.branch_tip(&j.base_branch)? else { return Ok(()) };
    if local != fin && repo.objects().is_ancestor(local, fin)? {
        j.local_base = Some(local);
    } else if local != fin {
        say(&format!(
            "the local branch {} has commits {given} lacks; it stays at {} (the remote's is at {}): reconcile it with `git pull --rebase {given} {}`",
            j.base_branch,
            short(local),
            short(fin),
            j.base_branch
        ));
    }
    Ok(())
}

/// Move the local base branch (and its worktree, the way `git merge --ff-only` does) from `local`
/// up to `tip`, which holds it. A failure (a stale `index.lock` in its worktree, say) is told, not
/// fatal: the remote already has the merge, and the next `stream merge --remote` brings it up.
#[allow(clippy::too_many_arguments)]
fn bring_up(
    repo: &crate::git::Repo,
    base: &str,
    local: ObjectId,
    tip: ObjectId,
    msg: &str,
    what: &str,
    given: &str,
    say: &dyn Fn(&str),
) {
    if let Err(e) = checkout::move_branch(repo, base, local, tip, msg, what, "merge-base-ref") {
        say(&format!(
            "the local branch {base} was not brought to {}: {}; once that is fixed, `git boulder stream merge --all --remote {given}` brings it up",
            short(tip),
            e.message
        ));
    }
}

/// `stream merge --all --remote R` with nothing left to land: a local base behind the remote's
/// (an earlier landing could not move it) is brought up to it, as after a landing — never losing a
/// local commit.
pub fn follow(ws: &Workspace, plan: &Plan, given: &str, say: &dyn Fn(&str)) -> Result<()> {
    let repo = &ws.repo;
    let remote = RemoteName::new(repo, given)?;
    let base = &plan.settings.base_branch;
    let spec = format!("+{}:{}", refs::branch_ref(base), refs::queue_ref(&remote.key, base));
    let fetched = remote::fetch(repo, &remote.given, &[spec])?;
    let tip = fetched.iter().find(|f| f.remote_ref == refs::branch_ref(base)).map(|f| f.id);
    let (Some(tip), Some(local)) = (tip, repo.branch_tip(base)?) else { return Ok(()) };
    if local == tip || !repo.objects().is_ancestor(local, tip)? {
        return Ok(());
    }
    say(&format!("bringing the local branch {base} up to {given}'s ({})", short(tip)));
    let msg = format!("boulder merge: {base} follows {given}");
    bring_up(repo, base, local, tip, &msg, &format!("bringing {base} up to {given}"), &remote.given, say);
    Ok(())
}
