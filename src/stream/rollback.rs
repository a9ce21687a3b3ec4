//! `stream rollback NAME [--to REV] [--restore]`: move a stream's branch back to where it forked
//! from the base (or to REV, a commit of its own history), keeping the old tip under a backup ref
//! (`refs/boulder/backup/<stream>/<n>`); `--restore` brings the latest backup back. The
//! checked-out worktree moves with the branch, only when it has no uncommitted changes. Nothing
//! is ever deleted: every tip a rollback or restore leaves is kept under a backup ref first, and
//! the move is recorded (`rolled_back`).

use crate::error::{Error, Result, ResultExt};
use crate::failpoint;
use crate::git::refs::{self, Expect, Writer};
use crate::git::{notes, ObjectId, Repo};
use crate::plan::{Plan, StreamDef};
use crate::state::{self, Opt, Store, StreamOp, StreamState};
use crate::workspace::Workspace;
use crate::worktree::{self, checkout};

/// What a rollback or restore did.
#[derive(Debug, Clone)]
pub struct Rolled {
    pub stream: String,
    pub branch: String,
    pub from: ObjectId,
    pub to: ObjectId,
    /// The backup ref that keeps `from` (none when nothing needed keeping).
    pub backup: Option<String>,
    pub restored: bool,
}

/// The stream's backups, oldest first: (number, ref, tip).
pub fn backups(repo: &Repo, stream: &str) -> Result<Vec<(u64, String, ObjectId)>> {
    let prefix = format!("{}{stream}/", refs::BACKUPS);
    let mut out: Vec<(u64, String, ObjectId)> = refs::list(repo, &prefix)?
        .into_iter()
        .filter_map(|(name, id)| Some((name.strip_prefix(&prefix)?.parse().ok()?, name, id)))
        .collect();
    out.sort();
    Ok(out)
}

/// Keep `tip` under the next backup ref of `stream` (none when an existing backup already holds
/// exactly it). Returns the ref that holds it.
pub fn keep(repo: &Repo, stream: &str, tip: ObjectId, why: &str) -> Result<String> {
    for _ in 0..20 {
        let all = backups(repo, stream)?;
        if let Some((_, name, _)) = all.iter().rev().find(|(_, _, id)| *id == tip) {
            return Ok(name.clone());
        }
        let n = all.last().map_or(1, |(n, _, _)| n + 1);
        let name = refs::backup_ref(stream, n);
        match refs::update(repo, &name, Expect::Absent, tip, why, Writer::Configured)? {
            Ok(_) => return Ok(name),
            Err(e) => {
                // A lock file left in the way: named, with git's advice.
                if let Some(refusal) = refs::blocked(repo, &name) {
                    return Err(refusal);
                }
                if e.transient {
                    continue;
                }
                return Err(Error::internal(format!("cannot write {name}: {e}")));
            }
        }
    }
    Err(Error::internal(format!("cannot find a free backup ref for stream {stream}")))
}

/// A command killed after it moved `branch` but before the files of its worktree followed: the
/// branch's newest reflog entry is that command's own (its message `ours`, alone or followed by
/// a space or `;`). Bring the worktree along, as the killed run would have, so the rerun finds it
/// clean; refused, naming the paths, when what that run left was changed since.
pub fn finish_interrupted(repo: &Repo, branch: &str, ours: &str) -> Result<()> {
    let Some((old, new, message)) = repo.reflog_newest(&refs::branch_ref(branch)) else { return Ok(()) };
    let message = message.trim();
    let mine = message.strip_prefix(ours).is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', ';']));
    if !mine || old == new || !matches!(repo.branch_tip(branch), Ok(Some(t)) if t == new) {
        return Ok(());
    }
    if matches!(worktree::checked_out(repo, branch), Ok(Some(_))) {
        checkout::move_branch(repo, branch, old, new, message, "an interrupted command", "finish-move")?;
    }
    Ok(())
}

/// Move the stream branch (and its worktree) from `from` to `to`, keeping `from` first, and
/// record it.
fn move_to(ws: &Workspace, stream: &StreamDef, from: ObjectId, to: ObjectId, restored: bool) -> Result<Rolled> {
    let repo = &ws.repo;
    let word = if restored { "restore" } else { "rollback" };
    let what = format!("the {word}");
    worktree::refuse_move(repo, &stream.branch, Some(&what))?;
    // Kept before anything moves: the old tip is never lost, whatever happens next.
    let reachable_from_to = repo.objects().is_ancestor(from, to)?;
    let backup = if reachable_from_to {
        None
    } else {
        Some(keep(repo, &stream.name, from, &format!("boulder {word}: stream {}", stream.name))?)
    };
    failpoint::hit("rollback-backup");
    let msg = format!("boulder {word}: stream {}", stream.name);
    checkout::move_branch(
        repo,
        &stream.branch,
        from,
        to,
        &msg,
        &format!("{what} of stream {}", stream.name),
        "rollback-ref",
    )?;
    failpoint::hit("rollback-moved");
    let rolled = Rolled { stream: stream.name.clone(), branch: stream.branch.clone(), from, to, backup, restored };
    let store = Store::new(repo)?;
    mark_set_aside(repo, &store, &rolled)?;
    record(&store, &rolled)?;
    Ok(rolled)
}

/// A rollback sets the stream's recorded commits it leaves out aside, in their notes, so that no
/// landing — on any machine the notes reach — requires them (DESIGN §14). Before the op is
/// recorded: a rollback killed between the two marks again when its rerun records it, and
/// marking twice changes nothing. A restore marks nothing: what it brings back is on the branch.
fn mark_set_aside(repo: &Repo, store: &Store, r: &Rolled) -> Result<()> {
    if r.restored {
        return Ok(());
    }
    let mut left_out = Vec::new();
    for info in repo.objects().walk([r.from], [r.to]).internal("cannot walk the commits the rollback leaves out")? {
        left_out.push(info.internal("cannot walk the commits the rollback leaves out")?.id);
    }
    if left_out.is_empty() {
        return Ok(());
    }
    let (actor, host) = state::recorder(store);
    let mark = notes::Note {
        actor,
        at: Some(crate::time::now_rfc3339()),
        boulder: None,
        host,
        iteration: None,
        set_aside: Some(r.backup.clone().unwrap_or_else(|| r.to.to_string())),
        story: None,
        stream: r.stream.clone(),
    };
    notes::set_aside(repo, &r.stream, &left_out, &mark)?;
    failpoint::hit("rollback-set-aside");
    Ok(())
}

/// Record a rollback or restore in the stream's op-log.
fn record(store: &Store, r: &Rolled) -> Result<()> {
    store.append::<StreamState>(
        &state::stream_ref(&r.stream),
        StreamOp::RolledBack {
            from: r.from.into(),
            to: r.to.into(),
            backup: r.backup.clone().map_or(Opt::Absent, Opt::Set),
            restored: if r.restored { Opt::Set(true) } else { Opt::Absent },
        },
    )?;
    Ok(())
}

/// The stream's tip, after finishing a rollback or restore killed between moving the branch and
/// its worktree, or before it was recorded (then returned as done).
fn tip(ws: &Workspace, stream: &StreamDef) -> Result<(ObjectId, Option<Rolled>)> {
    for word in ["rollback", "restore"] {
        finish_interrupted(&ws.repo, &stream.branch, &format!("boulder {word}: stream {}", stream.name))?;
    }
    let tip = ws.repo.branch_tip(&stream.branch)?.ok_or_else(|| {
        Error::usage(format!("stream {} has no branch {} yet", stream.name, stream.branch))
            .hint(format!("create it with `git boulder stream init {}`", stream.name))
    })?;
    Ok((tip, record_interrupted(ws, stream, tip)?))
}

/// A rollback or restore killed after it moved the branch but before it recorded the move: the
/// branch's newest reflog entry is its own and the op-log's last rollback is not that move.
/// Record it now, as that run would have.
fn record_interrupted(ws: &Workspace, stream: &StreamDef, tip: ObjectId) -> Result<Option<Rolled>> {
    let repo = &ws.repo;
    let Some((from, to, message)) = repo.reflog_newest(&refs::branch_ref(&stream.branch)) else { return Ok(None) };
    let restored = match message.trim() {
        m if m == format!("boulder rollback: stream {}", stream.name) => false,
        m if m == format!("boulder restore: stream {}", stream.name) => true,
        _ => return Ok(None),
    };
    if from == to || to != tip {
        return Ok(None);
    }
    let store = Store::new(repo)?;
    let last = store.read::<StreamState>(&state::stream_ref(&stream.name))?.and_then(|e| e.state.last_rollback);
    if last.is_some_and(|r| r.from.parse::<ObjectId>().ok() == Some(from) && r.to.parse::<ObjectId>().ok() == Some(to))
    {
        return Ok(None);
    }
    let backup = backups(repo, &stream.name)?.into_iter().rev().find(|(_, _, id)| *id == from).map(|(_, n, _)| n);
    let rolled = Rolled { stream: stream.name.clone(), branch: stream.branch.clone(), from, to, backup, restored };
    mark_set_aside(repo, &store, &rolled)?;
    record(&store, &rolled)?;
    Ok(Some(rolled))
}

/// Move the stream branch back to `to` (a commit of its history), else to its fork point with
/// the base branch. `None` when the branch is there already.
pub fn rollback(ws: &Workspace, plan: &Plan, stream: &StreamDef, to: Option<&str>) -> Result<Option<Rolled>> {
    let repo = &ws.repo;
    let _lock = crate::lock::acquire(
        repo,
        &format!("stream-{}", stream.name),
        false,
        &format!("stream rollback {}", stream.name),
    )?;
    let (from, finished) = tip(ws, stream)?;
    let target = match to {
        Some(rev) => {
            let id = match repo.rev_parse(rev) {
                Ok(crate::git::objects::RevSpec::One(id)) => id,
                _ => {
                    return Err(Error::usage(format!("{rev:?} does not name one commit"))
                        .hint(format!("name a commit of the stream's history: git log {}", stream.branch)))
                }
            };
            // An annotated tag names its commit, as it does for `git reset`.
            let id = repo.objects().peel_to_commit(id).ok_or_else(|| {
                Error::usage(format!("{rev:?} does not name a commit"))
                    .hint(format!("name a commit of the stream's history: git log {}", stream.branch))
            })?;
            if !repo.objects().is_ancestor(id, from)? {
                return Err(Error::refused(format!(
                    "{rev} is not in the history of branch {}: a rollback only goes back",
                    stream.branch
                ))
                .hint(format!("name a commit of `git log {}`, or bring a backup back with --restore", stream.branch)));
            }
            id
        }
        None => {
            let base = &plan.settings.base_branch;
            let base_tip = repo.branch_tip(base)?.ok_or_else(|| {
                Error::usage(format!("the base branch {base:?} does not exist"))
                    .hint("set settings.base_branch in .boulder/streams.yaml to an existing branch")
            })?;
            repo.objects().merge_base(from, base_tip).ok_or_else(|| {
                Error::refused(format!("branch {} has no common history with {base}", stream.branch))
                    .hint("name the commit to go back to with --to REV")
            })?
        }
    };
    if target == from {
        return Ok(finished);
    }
    move_to(ws, stream, from, target, false).map(Some)
}

/// Bring the newest backup of the stream that holds commits its branch lacks back (keeping the
/// tip it replaces). `None` when the branch holds every backup already.
pub fn restore(ws: &Workspace, stream: &StreamDef) -> Result<Option<Rolled>> {
    let repo = &ws.repo;
    let _lock = crate::lock::acquire(
        repo,
        &format!("stream-{}", stream.name),
        false,
        &format!("stream rollback {} --restore", stream.name),
    )?;
    let (from, finished) = tip(ws, stream)?;
    if finished.as_ref().is_some_and(|f| f.restored) {
        return Ok(finished);
    }
    let all = backups(repo, &stream.name)?;
    if all.is_empty() {
        return Err(Error::refused(format!("stream {} has no backup to restore", stream.name))
            .hint(format!("backups are made by `git boulder stream rollback {}`", stream.name)));
    }
    // The newest backup holding commits the branch lacks: restoring again after a restore goes on
    // to the backup before (two rollbacks, two restores: the branch is back where it began).
    let mut target = None;
    for (_, _, kept) in all.into_iter().rev() {
        if !repo.objects().is_ancestor(kept, from)? {
            target = Some(kept);
            break;
        }
    }
    let Some(target) = target else { return Ok(None) };
    move_to(ws, stream, from, target, true).map(Some)
}
