//! `stream unmerge NAME [--remote R]`: take a landed stream back out of the base.
//!
//! 1. The stream must be recorded MERGED, with the base tips of its merge (`merged_base`, the
//!    tip it was merged onto, and `merged_landed`, the tip it brought); the base must still hold
//!    the landed tip. With `--remote`, the remote's state and base branch are fetched first.
//! 2. In memory: one revert commit on the base tip whose tree undoes `merged_base..merged_landed`
//!    — whatever the strategy, the change the stream brought — by a three-way merge (ancestor:
//!    the landed tree, ours: the base tip, theirs: the tree before), keeping the base's PRD as it
//!    is; a conflict with what came after refuses with the table. Then one commit touching only
//!    the status marks of the PRD, reopening the stream's stories.
//! 3. The base moves there (locally, with its worktree, compare-and-swap; or through the merge
//!    queue's leased push, rounds on lost races, the local base following). The stream branch is
//!    rebuilt on the new base — its commits replayed again, so a later merge lands them anew —
//!    after its old tip is kept under a backup ref. Recorded `unmerged`: the stream is COMPLETED.
//!    Nothing is deleted.

use std::collections::BTreeSet;

use crate::error::{Error, Result, ResultExt};
use crate::git::objects::Objects;
use crate::git::remote::RemoteName;
use crate::git::{cli, identity, refs, ObjectId};
use crate::plan::{Plan, StreamDef};
use crate::state::{self, Opt, Store, StreamOp, StreamState, StreamStatus};
use crate::workspace::Workspace;
use crate::worktree::{self, checkout};

use super::replay::{self, Conflict};
use super::{prd, prd_name, short};

/// What an unmerge did (or, with conflicts, why it did nothing).
#[derive(Debug, Clone, Default)]
pub struct Unmerged {
    pub stream: String,
    pub base: String,
    pub remote: Option<String>,
    /// Conflicts of the revert with what the base gained since (then nothing changed).
    pub conflicts: Vec<Conflict>,
    /// The revert commit (none when the base no longer held the stream's changes).
    pub revert: Option<ObjectId>,
    /// The commit reopening the stream's stories in the base's PRD.
    pub prd_commit: Option<ObjectId>,
    /// The base's tip afterwards.
    pub base_tip: Option<ObjectId>,
    /// The stream branch's new tip (its commits replayed on the new base), when it was rebuilt.
    pub stream_tip: Option<ObjectId>,
    /// The backup ref keeping the stream branch's old tip.
    pub backup: Option<String>,
    /// Why the stream branch was left as it was, when it was.
    pub stream_kept: Option<String>,
    /// Lost races before the push went through (with a remote).
    pub rounds: usize,
}

/// The base tips a recorded merge went from and to.
fn recorded(ws: &Workspace, stream: &StreamDef) -> Result<(ObjectId, ObjectId)> {
    let store = Store::new(&ws.repo)?;
    let st = store.read::<StreamState>(&state::stream_ref(&stream.name))?.map(|e| e.state);
    let Some(st) = st.filter(|s| s.status == StreamStatus::Merged) else {
        return Err(Error::refused(format!("stream {} is not merged, so there is nothing to unmerge", stream.name))
            .hint(format!("see its state with `git boulder log {}`", stream.name)));
    };
    let id = |s: &str| ObjectId::from_hex(s.as_bytes()).map_err(|e| Error::internal(format!("bad id {s:?}: {e}")));
    match (st.merged_base.as_deref(), st.merged_landed.as_deref()) {
        (Some(b), Some(l)) => Ok((id(b)?, id(l)?)),
        _ => Err(Error::refused(format!(
            "stream {} was merged by an older git-boulder that did not record the base tips of the merge",
            stream.name
        ))
        .hint("revert its commits with `git revert`, then record it with `git boulder stream merge` when it is fixed")),
    }
}

/// The revert and the PRD reopening, in memory on `tip`: the new base tip, or the conflicts.
struct Planned {
    mem: Objects<'static>,
    revert: Option<ObjectId>,
    prd_commit: Option<ObjectId>,
    tip: ObjectId,
}

fn plan_revert(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    tip: ObjectId,
    before: ObjectId,
    landed: ObjectId,
) -> Result<std::result::Result<Planned, Vec<Conflict>>> {
    let repo = &ws.repo;
    if !repo.objects().is_ancestor(landed, tip)? {
        return Err(Error::refused(format!(
            "the base branch {} no longer holds stream {} (its merge {} is not in its history)",
            plan.settings.base_branch,
            stream.name,
            short(landed)
        ))
        .hint("nothing to take out; see `git log` of the base"));
    }
    let mem = repo.in_memory();
    let who = identity::rewrite_committer(repo);
    let (t_tip, t_landed, t_before) = (mem.tree_of(tip)?, mem.tree_of(landed)?, mem.tree_of(before)?);
    let mut tree = match mem.merge_trees(t_landed, t_tip, t_before)? {
        Ok(tree) => tree,
        Err(found) => {
            let subject = format!("revert of stream {}", stream.name);
            return Ok(Err(found
                .into_iter()
                .map(|(path, kind)| Conflict { path, kind, commit: landed.to_string(), subject: subject.clone() })
                .collect()));
        }
    };
    // The PRD keeps its text; the stories reopen in a commit of their own.
    if let Some((blob, _)) = mem.blob_at(t_tip, &plan.prd)? {
        tree = mem.with_file(tree, &plan.prd, blob)?;
    }
    let mut cur = tip;
    let revert = if tree == t_tip {
        None
    } else {
        let msg = format!(
            "Revert stream {} (branch {})\n\nThis takes out the changes it brought into {}: {}..{}.\n",
            stream.name, stream.branch, plan.settings.base_branch, before, landed
        );
        cur = mem.new_commit(tree, vec![tip], &who, &msg)?;
        Some(cur)
    };
    let mut prd_commit = None;
    if let Some((_, bytes)) = mem.blob_at(mem.tree_of(cur)?, &plan.prd)? {
        if let Ok(text) = String::from_utf8(bytes) {
            // The stream's stories, but those the base's PRD had done before the merge: the
            // merge did not tick them, so taking it out does not untick them.
            let done_before: BTreeSet<String> = mem
                .blob_at(t_before, &plan.prd)?
                .and_then(|(_, b)| String::from_utf8(b).ok())
                .and_then(|t| crate::prd::parse(prd_name(plan), &t).ok())
                .map(|p| p.stories.into_iter().filter(|s| s.status.is_done()).map(|s| s.id).collect())
                .unwrap_or_default();
            let ids: BTreeSet<String> =
                stream.stories.iter().filter(|id| !done_before.contains(*id)).cloned().collect();
            if let Some(open) = prd::mark_open(prd_name(plan), &text, &ids) {
                let blob = mem.blob(open.as_bytes(), true).internal("cannot write the PRD")?;
                let t = mem.with_file(mem.tree_of(cur)?, &plan.prd, blob)?;
                let msg = format!("chore(prd): reopen the stories of stream {}\n", stream.name);
                cur = mem.new_commit(t, vec![cur], &who, &msg)?;
                prd_commit = Some(cur);
            }
        }
    }
    Ok(Ok(Planned { mem, revert, prd_commit, tip: cur }))
}

/// Take stream `stream` back out of the base: locally, or with `remote` on that remote's base.
pub fn unmerge(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    remote: Option<&str>,
    say: &dyn Fn(&str),
) -> Result<Unmerged> {
    let repo = &ws.repo;
    let base = plan.settings.base_branch.clone();
    let _lock = crate::lock::acquire(repo, "merge", false, &format!("git boulder stream unmerge {}", stream.name))?;
    let _stream_lock = crate::lock::acquire(
        repo,
        &format!("stream-{}", stream.name),
        false,
        &format!("stream unmerge {}", stream.name),
    )?;
    let ours = format!("boulder unmerge: stream {}", stream.name);
    for branch in [&stream.branch, &base] {
        crate::stream::rollback::finish_interrupted(repo, branch, &ours)?;
    }
    for branch in [&stream.branch, &base] {
        worktree::refuse_move(&ws.repo, branch, None)?;
    }
    let mut out = Unmerged {
        stream: stream.name.clone(),
        base: base.clone(),
        remote: remote.map(str::to_string),
        ..Unmerged::default()
    };
    let remote = remote.map(|r| RemoteName::new(repo, r)).transpose()?;
    let planned = match &remote {
        None => {
            let (before, landed) = recorded(ws, stream)?;
            let tip = repo
                .branch_tip(&base)?
                .ok_or_else(|| Error::usage(format!("the base branch {base:?} does not exist")))?;
            let p = match plan_revert(ws, plan, stream, tip, before, landed)? {
                Ok(p) => p,
                Err(c) => {
                    out.conflicts = c;
                    return Ok(out);
                }
            };
            let new = p.tip;
            p.mem.persist(repo)?;
            if new != tip {
                let msg = format!("boulder unmerge: stream {}", stream.name);
                checkout::move_branch(
                    repo,
                    &base,
                    tip,
                    new,
                    &msg,
                    &format!("the unmerge of stream {}", stream.name),
                    "unmerge-base-ref",
                )?;
            }
            (p.revert, p.prd_commit, new, before, landed)
        }
        Some(r) => {
            let mut round = 0;
            loop {
                crate::sync::pull(repo, r)?;
                let (before, landed) = recorded(ws, stream)?;
                let spec = format!("+{}:{}", refs::branch_ref(&base), refs::queue_ref(&r.key, &base));
                let fetched = crate::git::remote::fetch(repo, &r.given, &[spec])?;
                let tip = fetched
                    .first()
                    .map(|f| f.id)
                    .ok_or_else(|| Error::usage(format!("the remote {} has no branch {base}", r.given)))?;
                let p = match plan_revert(ws, plan, stream, tip, before, landed)? {
                    Ok(p) => p,
                    Err(c) => {
                        out.conflicts = c;
                        return Ok(out);
                    }
                };
                let new = p.tip;
                p.mem.persist(repo)?;
                if new == tip {
                    break (p.revert, p.prd_commit, new, before, landed);
                }
                let lease = vec![(refs::branch_ref(&base), Some(tip.to_string()))];
                let pushed = cli::push_leased(
                    repo.run_dir(),
                    &r.given,
                    &lease,
                    &[format!("{new}:{}", refs::branch_ref(&base))],
                )?;
                if !pushed.refs.iter().any(cli::PushedRef::rejected) && !pushed.refs.is_empty() {
                    crate::failpoint::hit("unmerge-push");
                    break (p.revert, p.prd_commit, new, before, landed);
                }
                let moved = crate::git::remote::fetch(
                    repo,
                    &r.given,
                    &[format!("+{}:{}", refs::branch_ref(&base), refs::queue_ref(&r.key, &base))],
                )?
                .first()
                .map(|f| f.id)
                    != Some(tip);
                if !moved && !pushed.refs.iter().any(cli::PushedRef::lost_race) {
                    return Err(Error::refused(format!(
                        "{} refused the unmerge of stream {}; nothing was changed there\n{}",
                        r.given,
                        stream.name,
                        pushed.server_said()
                    ))
                    .hint("`git push` of the base branch must be allowed from here"));
                }
                round += 1;
                out.rounds = round;
                say(&format!(
                    "round {round}/{}: {base} on {} moved while this unmerge ran; fetching it and trying again",
                    super::queue::ROUNDS,
                    r.given
                ));
                if round >= super::queue::ROUNDS {
                    return Err(Error::refused(format!(
                        "the unmerge of stream {} lost the race for {base} on {} {round} times; nothing was changed there",
                        stream.name, r.given
                    ))
                    .hint("try again when the remote is quieter"));
                }
            }
        }
    };
    let (revert, prd_commit, new_base, before, landed) = planned;
    out.revert = revert;
    out.prd_commit = prd_commit;
    out.base_tip = Some(new_base);
    if let Some(r) = &remote {
        follow(ws, &stream.name, &base, new_base, &r.given, say);
    }
    rebuild_stream(ws, plan, stream, before, new_base, &mut out)?;
    let store = Store::new(repo)?;
    store.append::<StreamState>(
        &state::stream_ref(&stream.name),
        StreamOp::Unmerged { commit: new_base.to_string(), reverted: Opt::Set(landed.to_string()) },
    )?;
    if let Some(r) = &remote {
        if let Err(e) = crate::sync::push(repo, r) {
            say(&format!("the state was not pushed ({}); run `git boulder sync {}`", e.message, r.given));
        }
    }
    Ok(out)
}

/// The local base follows the remote's new tip when it holds nothing the remote lacks.
fn follow(ws: &Workspace, stream: &str, base: &str, new: ObjectId, remote: &str, say: &dyn Fn(&str)) {
    let repo = &ws.repo;
    let Ok(Some(local)) = repo.branch_tip(base) else { return };
    if local == new {
        return;
    }
    match repo.objects().is_ancestor(local, new) {
        Ok(true) => {
            let msg = format!("boulder unmerge: stream {stream}; {base} follows {remote}");
            if let Err(e) = checkout::move_branch(repo, base, local, new, &msg, "the unmerge", "unmerge-base-ref") {
                say(&format!("the local branch {base} was not brought to {}: {}", short(new), e.message));
            }
        }
        _ => say(&format!(
            "the local branch {base} has commits {remote} lacks; it stays at {} (the remote's is at {})",
            short(local),
            short(new)
        )),
    }
}

/// Replay the stream's own commits (those of its branch the base before the merge lacked) onto the
/// new base, so that merging it again brings its changes anew; the old tip is kept first.
fn rebuild_stream(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    before: ObjectId,
    new_base: ObjectId,
    out: &mut Unmerged,
) -> Result<()> {
    let repo = &ws.repo;
    let Some(old) = repo.branch_tip(&stream.branch)? else {
        out.stream_kept = Some(format!("there is no branch {}", stream.branch));
        return Ok(());
    };
    if repo.objects().is_ancestor(new_base, old)? && old != new_base {
        out.stream_kept = Some("it is rebuilt on the new base already".into());
        return Ok(());
    }
    let mem = repo.in_memory();
    let who = identity::rewrite_committer(repo);
    let commits = replay::commits_to_replay(&mem, before, old)?;
    let r = replay::replay_commits(&mem, new_base, commits, Some(&plan.prd), &who)?;
    if !r.conflicts.is_empty() {
        out.stream_kept = Some(format!(
            "replaying its commits on the new base conflicts at {} ({})",
            &r.conflicts[0].commit[..12],
            r.conflicts[0].path
        ));
        return Ok(());
    }
    mem.persist(repo)?;
    // The replayed commits carry their originals' notes, as a merge's and a rebase's do.
    let pairs = replay::rewritten(&r.steps);
    if !pairs.is_empty() {
        crate::git::notes::carry(repo, &pairs)?;
    }
    out.backup = Some(crate::stream::rollback::keep(
        repo,
        &stream.name,
        old,
        &format!("boulder unmerge: stream {}", stream.name),
    )?);
    let msg = format!("boulder unmerge: stream {} rebuilt on {}", stream.name, plan.settings.base_branch);
    checkout::move_branch(
        repo,
        &stream.branch,
        old,
        r.tip,
        &msg,
        &format!("the unmerge of stream {}", stream.name),
        "unmerge-stream-ref",
    )?;
    out.stream_tip = Some(r.tip);
    Ok(())
}
