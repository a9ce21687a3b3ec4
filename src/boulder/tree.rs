//! The boulder tree as the op-log holds it: which boulder a command acts on, reading one or all,
//! the path of ids from the root, and the ops that create, switch, checkpoint, finish and keep
//! todos.

use crate::error::{Error, Result};
use crate::state::{self, BoulderOp, BoulderState, BoulderStatus, Opt, Store, Todo};
use crate::workspace::Workspace;

/// The state of boulder `id`, `None` when it was never created.
pub fn read(store: &Store, id: &str) -> Result<Option<BoulderState>> {
    Ok(store.read::<BoulderState>(&state::boulder_ref(id))?.map(|e| e.state))
}

/// The boulder a command acts on: the one named, else this worktree's current one — its stream's
/// (or the one `switch` made current), else the project boulder (made on first use) when the
/// repository has no plan or this is its main worktree.
pub fn target(ws: &Workspace, named: Option<&str>) -> Result<String> {
    let (id, project) = locate(ws, named)?;
    if project {
        ensure_project(&Store::new(&ws.repo)?, &id)?;
    }
    Ok(id)
}

/// [`target`] without making the project boulder: the id, and whether it is the project boulder.
fn locate(ws: &Workspace, named: Option<&str>) -> Result<(String, bool)> {
    if let Some(id) = named {
        crate::names::validate("boulder", id)?;
        return Ok((id.to_string(), false));
    }
    let plan = ws.plan_if_any()?;
    let stream = ws.repo.head_branch().and_then(|b| plan.as_ref()?.stream_for_branch(&b).map(|s| s.name.clone()));
    if let Some(s) = stream {
        return Ok((current_boulder(&ws.repo, &s), false));
    }
    let switched = std::fs::read_to_string(ws.repo.git_dir.join("boulder-current"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    if let Some(id) = switched {
        return Ok((id, false));
    }
    let no_plan = ws.plan_text().is_err();
    if !(no_plan || ws.repo.git_dir == ws.repo.common_dir) {
        return Err(Error::usage("no boulder here: this worktree is not on a stream's branch")
            .hint("pass --boulder ID, or run `git boulder switch ID`"));
    }
    Ok((project_id(plan.as_ref()).to_string(), true))
}

/// The boulder this worktree's commits count for: `$GIT_DIR/boulder-current` when set (by
/// `git boulder switch`), else the stream's root boulder.
pub fn current_boulder(repo: &crate::git::Repo, stream: &str) -> String {
    switched(repo).unwrap_or_else(|| stream.to_string())
}

/// The boulder `git boulder switch` made current in this worktree (`$GIT_DIR/boulder-current`),
/// when it names one validly.
pub fn switched(repo: &crate::git::Repo) -> Option<String> {
    std::fs::read_to_string(repo.git_dir.join("boulder-current"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| crate::names::problem(s).is_none())
}

/// The id of the project boulder: the one boulder of a repository without a plan, and of the main
/// worktree of one with a plan. `_project` when the plan has a stream named `project` (whose root
/// boulder is `project`).
pub fn project_id(plan: Option<&crate::plan::Plan>) -> &'static str {
    project_id_beside(plan.is_some_and(|p| p.stream(PROJECT).is_some()))
}

/// [`project_id`], given whether the plan has a stream named `project`.
pub fn project_id_beside(project_stream: bool) -> &'static str {
    if project_stream {
        "_project"
    } else {
        PROJECT
    }
}

/// The project boulder's id when no stream of the plan is named so.
pub const PROJECT: &str = "project";

/// Create the project boulder `id` when it does not exist yet.
fn ensure_project(store: &Store, id: &str) -> Result<()> {
    store.append_if::<BoulderState>(&state::boulder_ref(id), |cur| {
        Ok(match cur {
            Some(_) => None,
            None => Some(BoulderOp::Created {
                id: Opt::Absent,
                stream: Opt::Absent,
                parent: Opt::Absent,
                depth: Opt::Set(0),
            }),
        })
    })?;
    Ok(())
}

/// Whether the project boulder's work is done: a PRD exists and all its stories are done
/// (`prd done` records counted). Without a PRD it never is.
pub fn project_complete(ws: &Workspace, plan: Option<&crate::plan::Plan>) -> bool {
    let Ok(path) = ws.prd_path(plan, None) else { return false };
    let Ok((_, prd)) = crate::workspace::load_prd(&path) else { return false };
    let done = ws.recorded_done().unwrap_or_default();
    !prd.stories.is_empty() && prd.stories.iter().all(|s| s.status.is_done() || done.contains(&s.id))
}

/// Create boulder `name` under `parent` (a root boulder when `None`) for `stream` (default: the
/// parent's, else this worktree's stream), within settings.boulder's max_depth and
/// parallel_limit. Returns its depth.
pub fn create(ws: &Workspace, name: &str, parent: Option<&str>, stream: Option<&str>) -> Result<u32> {
    crate::names::validate("boulder", name)?;
    let plan = ws.plan().ok();
    let settings = plan.as_ref().map(|p| p.settings.boulder.clone()).unwrap_or_default();
    let store = Store::new(&ws.repo)?;
    let (depth, stream) = match parent {
        Some(p) => {
            crate::names::validate("boulder", p)?;
            let parent = read(&store, p)?.ok_or_else(|| {
                Error::usage(format!("no boulder {p:?}")).hint("see the boulders with `git boulder list`")
            })?;
            let depth = parent.depth + 1;
            if depth >= settings.max_depth {
                return Err(Error::refused(format!(
                    "boulder {p} is at depth {}; a child would exceed max_depth {}",
                    parent.depth, settings.max_depth
                ))
                .hint("raise settings.boulder.max_depth, or attach it higher up"));
            }
            let active = children(&store, p)?.iter().filter(|(_, c)| c.status == BoulderStatus::Active).count();
            if active as u32 >= settings.parallel_limit {
                return Err(Error::refused(format!(
                    "boulder {p} already has {active} active children (parallel_limit {})",
                    settings.parallel_limit
                ))
                .hint("finish one first, or raise settings.boulder.parallel_limit"));
            }
            (depth, stream.map(str::to_owned).or(parent.stream))
        }
        // The project boulder is no stream.
        None => (
            0,
            stream
                .map(str::to_owned)
                .or_else(|| locate(ws, None).ok().filter(|(_, project)| !project).map(|(id, _)| id)),
        ),
    };
    let created = store.append_if::<BoulderState>(&state::boulder_ref(name), |cur| {
        Ok(match cur {
            Some(_) => None,
            None => Some(BoulderOp::Created {
                id: Opt::Absent,
                stream: stream.clone().into(),
                parent: parent.map(str::to_owned).into(),
                depth: Opt::Set(u64::from(depth)),
            }),
        })
    })?;
    if created.is_none() {
        return Err(Error::usage(format!("boulder {name} already exists")).hint("pick another name"));
    }
    Ok(depth)
}

/// Every boulder: (id, state).
pub fn all(store: &Store) -> Result<Vec<(String, BoulderState)>> {
    let mut out = Vec::new();
    for (name, _) in store.list(state::BOULDERS)? {
        let id = name.trim_start_matches(state::BOULDERS).to_string();
        if let Ok(Some(b)) = read(store, &id) {
            out.push((id, b));
        }
    }
    Ok(out)
}

/// The boulders whose parent is `id`.
pub fn children(store: &Store, id: &str) -> Result<Vec<(String, BoulderState)>> {
    Ok(all(store)?.into_iter().filter(|(_, b)| b.parent.as_deref() == Some(id)).collect())
}

/// `auth.oauth`: the ids from the root down.
pub fn path_of(all: &[(String, BoulderState)], id: &str) -> String {
    let mut parts = vec![id.to_string()];
    let mut cur = all.iter().find(|(i, _)| i == id).and_then(|(_, b)| b.parent.clone());
    while let Some(p) = cur {
        if parts.contains(&p) || parts.len() > 64 {
            break;
        }
        parts.push(p.clone());
        cur = all.iter().find(|(i, _)| *i == p).and_then(|(_, b)| b.parent.clone());
    }
    parts.reverse();
    parts.join(".")
}

/// Every boulder as (path, id, state), sorted by path: the tree in display order.
pub fn listed(ws: &Workspace) -> Result<Vec<(String, String, BoulderState)>> {
    let store = Store::new(&ws.repo)?;
    let mut items = all(&store)?;
    let paths: Vec<String> = items.iter().map(|(id, _)| path_of(&items, id)).collect();
    let mut rows: Vec<(String, String, BoulderState)> =
        items.drain(..).zip(paths).map(|((id, b), p)| (p, id, b)).collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(rows)
}

/// Make boulder `id` this worktree's current one.
pub fn switch(ws: &Workspace, id: &str) -> Result<()> {
    crate::names::validate("boulder", id)?;
    let store = Store::new(&ws.repo)?;
    if read(&store, id)?.is_none() {
        return Err(Error::usage(format!("no boulder {id:?}")).hint("create it with `git boulder create`"));
    }
    crate::fsutil::write_atomic(&ws.repo.git_dir.join("boulder-current"), format!("{id}\n").as_bytes())?;
    Ok(())
}

/// Refuse a boulder that was never created.
pub fn ensure(store: &Store, id: &str) -> Result<()> {
    if read(store, id)?.is_none() {
        return Err(Error::usage(format!("no boulder {id:?}")).hint("create it with `git boulder create`"));
    }
    Ok(())
}

/// Record where work on boulder `id` stands.
pub fn checkpoint(ws: &Workspace, id: &str, message: &str) -> Result<()> {
    let store = Store::new(&ws.repo)?;
    ensure(&store, id)?;
    store.append::<BoulderState>(&state::boulder_ref(id), BoulderOp::Checkpoint { message: message.to_string() })?;
    Ok(())
}

/// Mark boulder `id` completed: its parent's enforcement waits for completed children only.
pub fn finish(ws: &Workspace, id: &str) -> Result<()> {
    let store = Store::new(&ws.repo)?;
    ensure(&store, id)?;
    store.append::<BoulderState>(&state::boulder_ref(id), BoulderOp::Status { status: BoulderStatus::Completed })?;
    Ok(())
}

/// The todos of boulder `id` (which must exist).
pub fn todos(ws: &Workspace, id: &str) -> Result<Vec<Todo>> {
    let store = Store::new(&ws.repo)?;
    ensure(&store, id)?;
    Ok(read(&store, id)?.unwrap_or_default().todos)
}

/// Add a todo to boulder `id`; returns the new todo.
pub fn todo_add(ws: &Workspace, id: &str, text: &str) -> Result<Option<Todo>> {
    let store = Store::new(&ws.repo)?;
    ensure(&store, id)?;
    let e = store.append_if::<BoulderState>(&state::boulder_ref(id), |cur| {
        let n = cur.map_or(0, |b| b.todos.len()) + 1;
        Ok(Some(BoulderOp::TodoAdd { id: format!("t{n}"), text: text.to_string() }))
    })?;
    Ok(e.and_then(|e| e.state.todos.last().cloned()))
}

/// Mark todo `todo` of boulder `id` done.
pub fn todo_done(ws: &Workspace, id: &str, todo: &str) -> Result<()> {
    let store = Store::new(&ws.repo)?;
    ensure(&store, id)?;
    let b = read(&store, id)?.unwrap_or_default();
    if !b.todos.iter().any(|t| t.id == todo) {
        return Err(
            Error::usage(format!("no todo {todo:?} on boulder {id}")).hint("see them with `git boulder todo list`")
        );
    }
    store.append::<BoulderState>(&state::boulder_ref(id), BoulderOp::TodoDone { id: todo.to_string() })?;
    Ok(())
}
