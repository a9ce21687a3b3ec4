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
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, ResultExt};
use crate::git::objects::Objects;
use crate::git::remote::RemoteName;
use crate::git::{cli, identity, refs, ObjectId, Repo};
use crate::plan::{Plan, StreamDef};
use crate::state::{self, Opt, Store, StreamOp, StreamState, StreamStatus};
use crate::workspace::Workspace;
use crate::worktree::{self, checkout};

use super::journal;
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

/// How far an unmerge got. Each stage is done once its step finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The revert and the PRD reopening are written as objects; the base has not moved (with a
    /// remote: the push may have gone through, a rerun looks before pushing again).
    Planned,
    /// With a remote: its base holds the new tip.
    Pushed,
    /// The base branch here (and its worktree) holds the new tip, or stays where it was with a
    /// remote whose base it does not follow.
    BaseMoved,
    /// The stream branch is rebuilt on the new base (or left as it was, said why).
    Rebuilt,
    /// `unmerged` is recorded in the stream's state.
    Recorded,
}

/// The record of an unmerge in progress, `$GIT_COMMON_DIR/boulder/unmerge/<stream>.json`: what
/// it decided and how far it got, so that an unmerge killed at any step is finished by running
/// the same command again — never pushing twice, never reverting twice. Written atomically before
/// each step that moves a ref; removed when the unmerge is recorded (and, with a remote, its
/// state pushed).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journal {
    pub stream: String,
    pub stream_branch: String,
    pub base_branch: String,
    /// The remote as given, for an unmerge through the merge queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The recorded merge: the base tip it went from and the one it brought.
    #[serde(with = "crate::git::id::hex")]
    pub before: ObjectId,
    #[serde(with = "crate::git::id::hex")]
    pub landed: ObjectId,
    /// The base tip the revert was made on, and the tip it makes.
    #[serde(with = "crate::git::id::hex")]
    pub base_old: ObjectId,
    #[serde(with = "crate::git::id::hex")]
    pub base_new: ObjectId,
    #[serde(default, with = "crate::git::id::hex_opt")]
    pub revert: Option<ObjectId>,
    #[serde(default, with = "crate::git::id::hex_opt")]
    pub prd_commit: Option<ObjectId>,
    /// With a remote: the local base branch's tip when the push went through, if it is to follow
    /// the remote (it held nothing the remote lacks).
    #[serde(default, with = "crate::git::id::hex_opt", skip_serializing_if = "Option::is_none")]
    pub local_base: Option<ObjectId>,
    pub stage: Stage,
}

fn journal_path(repo: &Repo, stream: &str) -> PathBuf {
    repo.boulder_dir().join("unmerge").join(format!("{stream}.json"))
}

impl journal::Record for Journal {
    const KIND: &'static str = "unmerge";
    fn stream(&self) -> &str {
        &self.stream
    }
}

impl Journal {
    /// The record of an interrupted unmerge of `stream`, if one is pending.
    pub fn load(repo: &Repo, stream: &str) -> Result<Option<Journal>> {
        journal::read_record(&journal_path(repo, stream), stream)
    }

    /// Every pending unmerge record's stream, sorted.
    pub fn pending(repo: &Repo) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(repo.boulder_dir().join("unmerge")) else { return Vec::new() };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_owned))
            .collect();
        names.sort();
        names
    }

    /// The command that finishes this unmerge.
    pub fn command(&self) -> String {
        match &self.remote {
            Some(r) => format!("git boulder stream unmerge {} --remote {r}", self.stream),
            None => format!("git boulder stream unmerge {} --no-remote", self.stream),
        }
    }

    fn save(&self, repo: &Repo) -> Result<()> {
        journal::write_record(&journal_path(repo, &self.stream), self)
    }

    fn remove(&self, repo: &Repo) -> Result<()> {
        journal::remove_record::<Journal>(&journal_path(repo, &self.stream))
    }

    fn new(
        stream: &StreamDef,
        base: &str,
        remote: Option<&RemoteName>,
        (before, landed): (ObjectId, ObjectId),
        old: ObjectId,
        p: &Planned,
    ) -> Journal {
        Journal {
            stream: stream.name.clone(),
            stream_branch: stream.branch.clone(),
            base_branch: base.to_string(),
            remote: remote.map(|r| r.given.clone()),
            before,
            landed,
            base_old: old,
            base_new: p.tip,
            revert: p.revert,
            prd_commit: p.prd_commit,
            local_base: None,
            stage: Stage::Planned,
        }
    }
}

/// The first line of the revert commit's body names the merge it takes out: how `doctor`
/// recognises an unmerge that was not recorded.
pub fn revert_marker(before: &str, landed: &str) -> String {
    format!("{before}..{landed}.")
}

/// The unmerge reverts among the newest `limit` commits of `tip` (newest first): each with its
/// message, as [`Revert::of`] reads them.
pub fn reverts(repo: &Repo, tip: ObjectId, limit: usize) -> Vec<Revert> {
    let objects = repo.objects();
    let Ok(walk) = objects.walk([tip], []) else { return Vec::new() };
    let mut out = Vec::new();
    for info in walk.take(limit) {
        let Ok(info) = info else { break };
        let Ok(raw) = objects.read(info.id) else { continue };
        let text = String::from_utf8_lossy(&raw);
        let Some((_, message)) = text.split_once("\n\n") else { continue };
        if message.starts_with("Revert stream ") {
            out.push(Revert { id: info.id, message: message.to_string() });
        }
    }
    out
}

/// A revert commit `stream unmerge` made.
#[derive(Debug, Clone)]
pub struct Revert {
    pub id: ObjectId,
    pub message: String,
}

impl Revert {
    /// Is this the revert of stream `name`'s merge `before..landed`?
    pub fn of(&self, name: &str, before: ObjectId, landed: ObjectId) -> bool {
        self.message.starts_with(&format!("Revert stream {name} ("))
            && self.message.contains(&revert_marker(&before.to_string(), &landed.to_string()))
    }
}

/// Take stream `stream` back out of the base: locally, or with `remote` on that remote's base.
/// Each step is journalled: a run killed anywhere is finished by running it again.
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
    let mut pending = resumable(ws, stream, &base, remote.as_ref(), say)?;
    // A plan made before a kill, whose base is no longer where it was: start over.
    if let Some(j) = pending.as_mut().filter(|j| j.stage == Stage::Planned) {
        if !still_applies(ws, j, remote.as_ref(), say)? {
            say(&format!(
                "the record of an interrupted unmerge of stream {} no longer applies ({base} moved since); starting over",
                stream.name
            ));
            j.remove(repo)?;
            pending = None;
        }
    }
    let mut j = match pending {
        Some(j) => j,
        None => match start(ws, plan, stream, &base, remote.as_ref(), &mut out, say)? {
            Some(j) => j,
            None => return Ok(out),
        },
    };
    if let (Stage::Planned, Some(r)) = (j.stage, &remote) {
        // Resumed before its push: push it now, under the same lease.
        match push(ws, &j, r, stream)? {
            Ok(()) => {
                let new = j.base_new;
                pushed(ws, &mut j, r, new, say)?
            }
            Err(lost) => {
                j.remove(repo)?;
                return Err(lost.hint(format!("run `{}` again", j.command())));
            }
        }
    }
    let new_base = j.base_new;
    out.revert = j.revert;
    out.prd_commit = j.prd_commit;
    out.base_tip = Some(new_base);
    if j.stage < Stage::BaseMoved {
        move_base(ws, stream, &j, remote.as_ref(), &ours, say)?;
        j.stage = Stage::BaseMoved;
        j.save(repo)?;
    }
    crate::failpoint::hit("unmerge-base");
    if j.stage < Stage::Rebuilt {
        rebuild_stream(ws, plan, stream, j.before, new_base, &mut out)?;
        j.stage = Stage::Rebuilt;
        j.save(repo)?;
    }
    crate::failpoint::hit("unmerge-rebuilt");
    if j.stage < Stage::Recorded {
        record(ws, stream, &j, remote.as_ref())?;
        j.stage = Stage::Recorded;
        j.save(repo)?;
    }
    if let Some(r) = &remote {
        if let Err(e) = crate::sync::push(repo, r) {
            say(&format!("the state was not pushed ({}); run `git boulder sync {}`", e.message, r.given));
        }
    }
    crate::failpoint::hit("unmerge-state");
    j.remove(repo)?;
    Ok(out)
}

/// A plan made before a kill, not pushed yet: does it still apply — the base where the plan
/// left it (or, with a remote, the push gone through before the kill: then it is recorded as
/// pushed)?
fn still_applies(ws: &Workspace, j: &mut Journal, remote: Option<&RemoteName>, say: &dyn Fn(&str)) -> Result<bool> {
    let (old, new) = (j.base_old, j.base_new);
    Ok(match remote {
        None => {
            let tip = ws.repo.branch_tip(&j.base_branch)?;
            tip == Some(old) || tip == Some(new)
        }
        Some(r) => {
            let tip = fetch_base(ws, r, &j.base_branch)?;
            if ws.repo.objects().is_ancestor(new, tip)? {
                // The push went through before the kill.
                pushed(ws, j, r, new, say)?;
                true
            } else {
                tip == old
            }
        }
    })
}

/// Move the local base to the revert (with its worktree, compare-and-swap), or, after a push to
/// a remote, let it follow the remote's when it is to.
fn move_base(
    ws: &Workspace,
    stream: &StreamDef,
    j: &Journal,
    remote: Option<&RemoteName>,
    ours: &str,
    say: &dyn Fn(&str),
) -> Result<()> {
    let (old, new_base) = (j.base_old, j.base_new);
    match remote {
        None if new_base != old => checkout::move_branch(
            &ws.repo,
            &j.base_branch,
            old,
            new_base,
            ours,
            &format!("the unmerge of stream {}", stream.name),
            "unmerge-base-ref",
        ),
        None => Ok(()),
        Some(r) => {
            if let Some(local) = j.local_base {
                follow(ws, &stream.name, &j.base_branch, local, new_base, &r.given, say);
            }
            Ok(())
        }
    }
}

/// Record `unmerged` (once: a run killed after the record and before the journal knew it finds
/// it there).
fn record(ws: &Workspace, stream: &StreamDef, j: &Journal, remote: Option<&RemoteName>) -> Result<()> {
    let repo = &ws.repo;
    if let Some(r) = remote {
        // Another machine may have recorded it meanwhile (finishing what this one left).
        crate::sync::pull(repo, r)?;
    }
    let store = Store::new(repo)?;
    let st = store.read::<StreamState>(&state::stream_ref(&stream.name))?.map(|e| e.state);
    let landed = j.landed.to_string();
    let recorded_already =
        st.is_none_or(|s| s.status != StreamStatus::Merged || s.merged_landed.as_deref() != Some(landed.as_str()));
    if !recorded_already {
        store.append::<StreamState>(
            &state::stream_ref(&stream.name),
            StreamOp::Unmerged { commit: j.base_new.into(), reverted: Opt::Set(j.landed.into()) },
        )?;
    }
    crate::failpoint::hit("unmerge-record");
    Ok(())
}

/// The record of an interrupted unmerge of `stream` that this command finishes, if any; refused
/// when it is one made for another remote (or none).
fn resumable(
    ws: &Workspace,
    stream: &StreamDef,
    base: &str,
    remote: Option<&RemoteName>,
    say: &dyn Fn(&str),
) -> Result<Option<Journal>> {
    let repo = &ws.repo;
    let Some(j) = Journal::load(repo, &stream.name)? else { return Ok(None) };
    if j.remote.as_deref() != remote.map(|r| r.given.as_str()) {
        let here = match remote {
            Some(r) => format!("through {}", r.given),
            None => "locally".to_string(),
        };
        let there = match &j.remote {
            Some(r) => format!("through {r}"),
            None => "locally".to_string(),
        };
        return Err(Error::refused(format!(
            "an interrupted unmerge of stream {} {there} is pending; finish it before unmerging it {here}",
            stream.name
        ))
        .hint(format!("finish it with `{}`", j.command())));
    }
    if j.stream_branch != stream.branch || j.base_branch != base {
        say(&format!(
            "the record of an interrupted unmerge of stream {} names other branches than the plan does; starting over",
            stream.name
        ));
        j.remove(repo)?;
        return Ok(None);
    }
    say(&format!("finishing the interrupted unmerge of stream {}", stream.name));
    Ok(Some(j))
}

/// The remote's base tip, fetched into the queue's ref.
fn fetch_base(ws: &Workspace, r: &RemoteName, base: &str) -> Result<ObjectId> {
    let spec = format!("+{}:{}", refs::branch_ref(base), refs::queue_ref(&r.key, base));
    let fetched = crate::git::remote::fetch(&ws.repo, &r.given, &[spec])?;
    fetched.first().map(|f| f.id).ok_or_else(|| Error::usage(format!("the remote {} has no branch {base}", r.given)))
}

/// Push the journal's new base tip under the lease of its old one. `Ok(Err)`: a lost race (the
/// caller decides whether to go round again); `Err`: the remote turned it down for good (the
/// journal is dropped), or the push failed on the way (the journal stays: it may have landed).
fn push(ws: &Workspace, j: &Journal, r: &RemoteName, stream: &StreamDef) -> Result<std::result::Result<(), Error>> {
    let repo = &ws.repo;
    let lease = vec![(refs::branch_ref(&j.base_branch), Some(j.base_old.to_string()))];
    let pushed = cli::push_leased(
        repo.run_dir(),
        &r.given,
        &lease,
        &[format!("{}:{}", j.base_new, refs::branch_ref(&j.base_branch))],
    )?;
    if !pushed.refs.iter().any(cli::PushedRef::rejected) && !pushed.refs.is_empty() {
        return Ok(Ok(()));
    }
    let moved = fetch_base(ws, r, &j.base_branch)? != j.base_old;
    if !moved && !pushed.refs.iter().any(cli::PushedRef::lost_race) {
        // Turned down for good (a hook, a rule): nothing changed there, nothing to finish.
        j.remove(repo)?;
        return Err(Error::refused(format!(
            "{} refused the unmerge of stream {}; nothing was changed there\n{}",
            r.given,
            stream.name,
            pushed.server_said()
        ))
        .hint("`git push` of the base branch must be allowed from here"));
    }
    Ok(Err(Error::refused(format!(
        "{} on {} moved while this unmerge ran; nothing was changed there",
        j.base_branch, r.given
    ))))
}

/// The push went through: plan the local base's following, once, and journal it.
fn pushed(ws: &Workspace, j: &mut Journal, r: &RemoteName, new: ObjectId, say: &dyn Fn(&str)) -> Result<()> {
    crate::failpoint::hit("unmerge-push");
    let repo = &ws.repo;
    if let Some(local) = repo.branch_tip(&j.base_branch)? {
        if local != new && repo.objects().is_ancestor(local, new)? {
            j.local_base = Some(local);
        } else if local != new {
            say(&format!(
                "the local branch {} has commits {} lacks; it stays at {} (the remote's is at {})",
                j.base_branch,
                r.given,
                short(local),
                short(new)
            ));
        }
    }
    j.stage = Stage::Pushed;
    j.save(repo)?;
    crate::failpoint::hit("unmerge-pushed");
    Ok(())
}

/// Plan the unmerge (and, with a remote, push it, going round on lost races), journalled before
/// anything moves. `None`: the revert conflicts (in `out`); nothing changed.
fn start(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    base: &str,
    remote: Option<&RemoteName>,
    out: &mut Unmerged,
    say: &dyn Fn(&str),
) -> Result<Option<Journal>> {
    let repo = &ws.repo;
    let Some(r) = remote else {
        let merge = recorded(ws, stream)?;
        let tip =
            repo.branch_tip(base)?.ok_or_else(|| Error::usage(format!("the base branch {base:?} does not exist")))?;
        let p = match plan_revert(ws, plan, stream, tip, merge.0, merge.1)? {
            Ok(p) => p,
            Err(c) => {
                out.conflicts = c;
                return Ok(None);
            }
        };
        let j = Journal::new(stream, base, None, merge, tip, &p);
        p.mem.persist(repo)?;
        j.save(repo)?;
        crate::failpoint::hit("unmerge-journal");
        return Ok(Some(j));
    };
    let mut round = 0;
    loop {
        crate::sync::pull(repo, r)?;
        let merge = recorded(ws, stream)?;
        let tip = fetch_base(ws, r, base)?;
        let p = match plan_revert(ws, plan, stream, tip, merge.0, merge.1)? {
            Ok(p) => p,
            Err(c) => {
                out.conflicts = c;
                return Ok(None);
            }
        };
        let mut j = Journal::new(stream, base, Some(r), merge, tip, &p);
        let new = p.tip;
        p.mem.persist(repo)?;
        j.save(repo)?;
        crate::failpoint::hit("unmerge-journal");
        if new == tip {
            pushed(ws, &mut j, r, new, say)?;
            return Ok(Some(j));
        }
        match push(ws, &j, r, stream)? {
            Ok(()) => {
                pushed(ws, &mut j, r, new, say)?;
                return Ok(Some(j));
            }
            Err(_) => j.remove(repo)?,
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

/// The local base follows the remote's new tip from `local`, the tip it had when the push went
/// through (it held nothing the remote lacks); a failure is told, not fatal.
fn follow(ws: &Workspace, stream: &str, base: &str, local: ObjectId, new: ObjectId, remote: &str, say: &dyn Fn(&str)) {
    let repo = &ws.repo;
    let msg = format!("boulder unmerge: stream {stream}; {base} follows {remote}");
    if let Err(e) = checkout::move_branch(repo, base, local, new, &msg, "the unmerge", "unmerge-base-ref") {
        say(&format!("the local branch {base} was not brought to {}: {}", short(new), e.message));
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
