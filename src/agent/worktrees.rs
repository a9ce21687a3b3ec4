//! Claude Code's own worktrees (`claude --worktree NAME`, subagents with `isolation: worktree`):
//! its `WorktreeCreate` hook replaces Claude Code's `git worktree add` and must print the
//! worktree's absolute path on stdout; its `WorktreeRemove` hook replaces the removal. With a plan,
//! git-boulder answers both with streams:
//!
//! * a name of the plan's streams (or of a recorded ad-hoc stream) is that stream's worktree, made
//!   by `stream init` ([`lifecycle::init`]) when it is not there yet;
//! * any other valid name becomes an ad-hoc stream (branch `boulder/<name>` from the base branch,
//!   recorded `initialized` with `adhoc: true`, owning no paths), or is refused under
//!   `settings.adhoc_streams: refuse`;
//! * removal is `stream cleanup NAME` ([`lifecycle::cleanup`]): never with uncommitted work or
//!   commits that are neither merged nor pushed; an ad-hoc stream's branch goes with it.
//!
//! Without a plan it does what Claude Code would have done itself: a worktree at
//! `.claude/worktrees/<name>` of the main worktree on a new branch `worktree-<name>`, and removal
//! of a clean worktree (its branch kept).

use std::path::{Path, PathBuf};

use super::hook::Payload;
use crate::error::{Error, Result};
use crate::git::Repo;
use crate::plan::{AdhocStreams, Plan, StreamDef};
use crate::stream::lifecycle::{self, CleanupOptions};
use crate::workspace::Workspace;
use crate::worktree;

/// Whether `event` is one this module answers.
pub fn is_worktree_event(event: &str) -> bool {
    matches!(event, "WorktreeCreate" | "WorktreeRemove")
}

/// The answer to a `WorktreeCreate` or `WorktreeRemove` payload: the text to print on stdout (the
/// worktree's path for `WorktreeCreate`, nothing for `WorktreeRemove`). An error is a refusal:
/// Claude Code then makes no worktree, or keeps it.
pub fn answer(p: &Payload) -> Result<Option<String>> {
    match p.event()? {
        "WorktreeCreate" => create(p).map(|path| Some(path.display().to_string())),
        "WorktreeRemove" => remove(p).map(|()| None),
        _ => Ok(None),
    }
}

/// The folder of the session: `$CLAUDE_PROJECT_DIR`, else (or when that folder is gone: the
/// worktree being removed) the payload's `cwd`.
fn session(p: &Payload) -> Result<PathBuf> {
    match super::claude::project_dir() {
        Some(dir) if dir.is_dir() => Ok(dir),
        _ => p.cwd(),
    }
}

fn open(dir: &Path) -> Result<Workspace> {
    let repo = Repo::discover_at(dir).map_err(|e| {
        Error::usage(format!(
            "{} is not in a git repository, so git-boulder cannot make a worktree: {}",
            dir.display(),
            e
        ))
        .with_source(e)
    })?;
    Ok(Workspace::from_repo(repo, None))
}

/// `WorktreeCreate`: the worktree for `name`, made if needed; its real absolute path.
fn create(p: &Payload) -> Result<PathBuf> {
    let name = p
        .str("name")
        .or_else(|| p.str("worktree_name"))
        .ok_or_else(|| Error::usage("the WorktreeCreate payload has no name"))?;
    let ws = open(&session(p)?)?;
    crate::names::validate("worktree", name)?;
    let path = match ws.plan_if_any()? {
        Some(plan) => stream_worktree(&ws, &plan, name)?,
        None => plain_worktree(&ws, name)?,
    };
    // Claude Code wants the folder's real path: no `.` or `..`, no symlink on the way.
    std::fs::canonicalize(&path)
        .map_err(|e| Error::internal(format!("cannot resolve the new worktree {}: {e}", path.display())))
}

/// The worktree of the plan's stream `name`, or of a new (or recorded) ad-hoc stream.
fn stream_worktree(ws: &Workspace, plan: &Plan, name: &str) -> Result<PathBuf> {
    if let Some(stream) = plan.stream(name) {
        return Ok(lifecycle::init(ws, plan, stream)?.path);
    }
    if plan.settings.adhoc_streams == AdhocStreams::Refuse {
        return Err(Error::refused(format!(
            "the plan has no stream {name:?}, and settings.adhoc_streams is refuse: no worktree is made for it"
        ))
        .hint(format!("ask for a stream of the plan ({}), add {name} to .boulder/streams.yaml, or set settings.adhoc_streams: allow", names(plan))));
    }
    let stream = StreamDef::adhoc(name);
    if let Some(owner) = plan.stream_for_branch(&stream.branch) {
        return Err(Error::refused(format!(
            "branch {} belongs to stream {}, so no ad-hoc stream {name} can be made",
            stream.branch, owner.name
        ))
        .hint("ask for a worktree under another name"));
    }
    let store = crate::state::Store::new(&ws.repo)?;
    if let Some(e) = store.read::<crate::state::StreamState>(&crate::state::stream_ref(name))? {
        if !e.state.adhoc && e.state.status.is_live() {
            return Err(Error::refused(format!(
                "stream {name} is recorded as a stream the plan no longer has; git-boulder will not reuse it as an ad-hoc stream"
            ))
            .hint(format!("add {name} back to .boulder/streams.yaml, or clean it up: git boulder stream cleanup {name}")));
        }
    }
    // The id of a boulder that is not this stream's root (the project boulder `project`, one made
    // with `git boulder create`): the stream's root boulder would be that one.
    if let Some(b) = store.read::<crate::state::BoulderState>(&crate::state::boulder_ref(name))? {
        if b.state.stream.as_deref() != Some(name) || b.state.parent.is_some() {
            return Err(Error::refused(format!(
                "{name} is the id of boulder {name}, which is not a stream's; an ad-hoc stream of that name would share it"
            ))
            .hint("ask for a worktree under another name"));
        }
    }
    // A branch of that name made outside git-boulder with commits of its own would land through
    // the merge queue as the ad-hoc stream's work: refused.
    if let (Some(tip), Some(base)) =
        (ws.repo.branch_tip(&stream.branch)?, ws.repo.branch_tip(&plan.settings.base_branch)?)
    {
        let recorded = store.read::<crate::state::StreamState>(&crate::state::stream_ref(name))?.is_some();
        if !recorded && worktree::ahead_behind(&ws.repo, tip, base)?.0 > 0 {
            return Err(Error::refused(format!(
                "branch {} exists with commits {} does not have, and is no stream's",
                stream.branch, plan.settings.base_branch
            ))
            .hint("ask for a worktree under another name, or rename that branch"));
        }
    }
    Ok(lifecycle::init(ws, plan, &stream)?.path)
}

/// Whether the stream's branch is merged, or holds no commit its base lacks.
fn nothing_to_land(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<bool> {
    if lifecycle::is_merged(ws, plan, stream)? {
        return Ok(true);
    }
    Ok(match (ws.repo.branch_tip(&stream.branch)?, ws.repo.branch_tip(&plan.settings.base_branch)?) {
        (Some(tip), Some(base)) => worktree::ahead_behind(&ws.repo, tip, base)?.0 == 0,
        _ => false,
    })
}

fn names(plan: &Plan) -> String {
    let names: Vec<&str> = plan.streams.iter().map(|s| s.name.as_str()).collect();
    if names.is_empty() {
        "none yet".to_string()
    } else {
        names.join(", ")
    }
}

/// Without a plan: what Claude Code does itself, `.claude/worktrees/<name>` on a new branch
/// `worktree-<name>` from the session's branch (the folder added to `info/exclude`).
fn plain_worktree(ws: &Workspace, name: &str) -> Result<PathBuf> {
    let root = ws.root()?;
    let path = root.join(".claude").join("worktrees").join(name);
    let base = ws.repo.head_branch().ok_or_else(|| {
        Error::usage("HEAD is detached, so there is no branch to start the worktree's branch from")
            .hint("switch to a branch, then start Claude Code again")
    })?;
    // Kept out of the main worktree's `git status`, as git-boulder keeps its own worktree folder.
    worktree::exclude(&ws.repo, ".claude/worktrees")?;
    worktree::add(&ws.repo, &path, &format!("worktree-{name}"), &base)?;
    Ok(path)
}

/// `WorktreeRemove`: the worktree at `worktree_path` removed when nothing would be lost.
fn remove(p: &Payload) -> Result<()> {
    let target = p
        .str("worktree_path")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| Error::usage("the WorktreeRemove payload has no worktree_path"))?;
    if !target.is_absolute() {
        return Err(Error::usage(format!("the worktree_path {} is not absolute", target.display())));
    }
    let ws = open(&session(p)?)?;
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let want = real(&target);
    if let Some(plan) = ws.plan_if_any()? {
        for stream in &plan.streams {
            let at = lifecycle::locate(&ws, &plan, stream)?;
            if real(&at.path) == want && (at.info.is_some() || at.path.exists()) {
                // An ad-hoc stream's branch goes too when it holds nothing the base lacks (a
                // pushed but unmerged branch is kept: cleanup would refuse it after the removal).
                let delete_branch = stream.adhoc && nothing_to_land(&ws, &plan, stream)?;
                let opts = CleanupOptions { delete_branch, ..CleanupOptions::default() };
                lifecycle::cleanup(&ws, &plan, std::slice::from_ref(&stream.name), &opts)?;
                return Ok(());
            }
        }
    }
    // Not a stream's worktree: removed as `git worktree remove` would (refused with uncommitted
    // work); its branch is kept, whatever it holds.
    let known = worktree::list(&ws.repo)?.into_iter().find(|w| real(&w.path) == want);
    match known {
        Some(w) if w.missing => {
            worktree::prune_missing(&ws.repo)?;
            Ok(())
        }
        Some(w) => worktree::remove(&ws.repo, &w.path, false),
        None => Err(Error::usage(format!(
            "{} is not a linked worktree of this repository; git-boulder will not delete it",
            target.display()
        ))),
    }
}
