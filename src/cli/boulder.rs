//! Boulders: `create`, `list`, `switch`, `check`, `checkpoint`, `todo`, `resume`.

use std::io::Write;

use clap::Subcommand;
use serde_json::json;

use crate::error::{Error, Result};
use crate::state::{self, BoulderOp, BoulderState, BoulderStatus, Opt, Store};
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The new boulder's id (a single ref component).
    pub name: String,
    /// Its parent boulder (default: a root boulder).
    #[arg(long, value_name = "ID", add = super::complete::boulder_ids())]
    pub parent: Option<String>,
    /// The stream it belongs to (default: the parent's, else this worktree's stream).
    #[arg(long, value_name = "NAME", add = super::complete::stream_names())]
    pub stream: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print [{id, parent, depth, path, stream, iteration, status, last_activity}].
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct SwitchArgs {
    /// The boulder this worktree's commits count for from now on.
    #[arg(add = super::complete::boulder_ids())]
    pub id: String,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The agent's last message, for completion detection.
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// The caller is a subagent: never enforce.
    #[arg(long)]
    pub subagent: bool,
    /// The boulder to check (default: this worktree's current boulder).
    #[arg(long, value_name = "ID", add = super::complete::boulder_ids())]
    pub boulder: Option<String>,
    /// Print {enforce, gate, reason, variant, message, boulder, iteration, parent_iteration, depth}.
    #[arg(long)]
    pub json: bool,
    /// Override settings.boulder.idle_threshold (e.g. 30s).
    #[arg(long, value_name = "D")]
    pub idle_threshold: Option<String>,
    /// Override settings.boulder.cooldown.
    #[arg(long, value_name = "D")]
    pub cooldown: Option<String>,
    /// Override settings.boulder.max_failures.
    #[arg(long, value_name = "N")]
    pub max_failures: Option<u32>,
    /// Override settings.boulder.recovery_window.
    #[arg(long, value_name = "D")]
    pub recovery_window: Option<String>,
    /// Override settings.boulder.backoff_multiplier.
    #[arg(long, value_name = "X")]
    pub backoff_multiplier: Option<f64>,
}

#[derive(Debug, clap::Args)]
pub struct CheckpointArgs {
    /// Where work stands, for the next session.
    #[arg(short, long, value_name = "MESSAGE")]
    pub message: String,
    #[arg(long, value_name = "ID")]
    pub boulder: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum TodoCommand {
    /// Add a todo to the current boulder.
    Add { text: String },
    /// Mark a todo done.
    Done { id: String },
    /// List the todos.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// Print {prd, stream, boulder, iteration, wave, story, checkpoint, progress, waves, stories, todos}.
    #[arg(long)]
    pub json: bool,
}

fn read(store: &Store, id: &str) -> Result<Option<BoulderState>> {
    Ok(store.read::<BoulderState>(&state::boulder_ref(id))?.map(|e| e.state))
}

/// The boulder a command acts on: the one named, else this worktree's current one.
pub fn target(ws: &Workspace, named: Option<&str>) -> Result<String> {
    if let Some(id) = named {
        crate::names::validate("boulder", id)?;
        return Ok(id.to_string());
    }
    let plan = ws.plan().ok();
    let stream = ws.repo.head_branch().and_then(|b| plan.as_ref()?.stream_for_branch(&b).map(|s| s.name.clone()));
    match stream {
        Some(s) => Ok(crate::hooks::current_boulder(&ws.repo, &s)),
        None => std::fs::read_to_string(ws.repo.git_dir.join("boulder-current"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                Error::usage("no boulder here: this worktree is not on a stream's branch")
                    .hint("pass --boulder ID, or run `git boulder switch ID`")
            }),
    }
}

pub fn create(ws: &Workspace, args: CreateArgs) -> Result<()> {
    crate::names::validate("boulder", &args.name)?;
    let plan = ws.plan().ok();
    let settings = plan.as_ref().map(|p| p.settings.boulder.clone()).unwrap_or_default();
    let store = Store::new(&ws.repo)?;
    let (depth, stream) = match &args.parent {
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
            (depth, args.stream.clone().or(parent.stream))
        }
        None => (0, args.stream.clone().or_else(|| target(ws, None).ok())),
    };
    let created = store.append_if::<BoulderState>(&state::boulder_ref(&args.name), |cur| {
        Ok(match cur {
            Some(_) => None,
            None => Some(BoulderOp::Created {
                id: Opt::Absent,
                stream: stream.clone().into(),
                parent: args.parent.clone().into(),
                depth: Opt::Set(u64::from(depth)),
            }),
        })
    })?;
    if created.is_none() {
        return Err(Error::usage(format!("boulder {} already exists", args.name)).hint("pick another name"));
    }
    eprintln!("created boulder {} (depth {depth})", args.name);
    Ok(())
}

/// Every boulder: (id, state).
fn all(store: &Store) -> Result<Vec<(String, BoulderState)>> {
    let mut out = Vec::new();
    for (name, _) in store.list(state::BOULDERS)? {
        let id = name.trim_start_matches(state::BOULDERS).to_string();
        if let Ok(Some(b)) = read(store, &id) {
            out.push((id, b));
        }
    }
    Ok(out)
}

fn children(store: &Store, id: &str) -> Result<Vec<(String, BoulderState)>> {
    Ok(all(store)?.into_iter().filter(|(_, b)| b.parent.as_deref() == Some(id)).collect())
}

/// `auth.oauth`: the ids from the root down.
fn path_of(all: &[(String, BoulderState)], id: &str) -> String {
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

pub fn list(ws: &Workspace, args: ListArgs) -> Result<()> {
    let store = Store::new(&ws.repo)?;
    let mut items = all(&store)?;
    let paths: Vec<String> = items.iter().map(|(id, _)| path_of(&items, id)).collect();
    let mut rows: Vec<(String, String, BoulderState)> =
        items.drain(..).zip(paths).map(|((id, b), p)| (p, id, b)).collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = std::io::stdout().lock();
    if args.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(p, id, b)| {
                json!({"id": id, "parent": b.parent, "depth": b.depth, "path": p, "stream": b.stream,
                       "iteration": b.iteration, "status": b.status, "last_activity": b.last_activity})
            })
            .collect();
        return super::output::json(&mut out, &v);
    }
    if rows.is_empty() {
        writeln!(out, "no boulders yet (a stream's root boulder appears at `git boulder stream init`)")?;
        return Ok(());
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(p, _, b)| {
            vec![
                format!("{}{}", "  ".repeat(b.depth as usize), p.rsplit('.').next().unwrap_or(p)),
                p.clone(),
                b.iteration.to_string(),
                b.status.to_string(),
                crate::stream::status::ago(b.last_activity.as_deref()),
            ]
        })
        .collect();
    super::output::table(&mut out, &["BOULDER", "PATH", "ITERATION", "STATUS", "LAST ACTIVITY"], &table, |_, _| None)
}

pub fn switch(ws: &Workspace, args: SwitchArgs) -> Result<()> {
    crate::names::validate("boulder", &args.id)?;
    let store = Store::new(&ws.repo)?;
    if read(&store, &args.id)?.is_none() {
        return Err(Error::usage(format!("no boulder {:?}", args.id)).hint("create it with `git boulder create`"));
    }
    crate::fsutil::write_atomic(&ws.repo.git_dir.join("boulder-current"), format!("{}\n", args.id).as_bytes())?;
    eprintln!("commits in this worktree now count for boulder {} and its ancestors", args.id);
    Ok(())
}

pub fn check(ws: &Workspace, args: CheckArgs) -> Result<()> {
    let id = target(ws, args.boulder.as_deref())?;
    let plan = ws.plan().ok();
    let mut t = plan.as_ref().map(|p| p.settings.boulder.clone()).unwrap_or_default();
    let dur = |s: &Option<String>, what: &str| -> Result<Option<std::time::Duration>> {
        s.as_deref()
            .map(|v| crate::time::parse_duration(v).map_err(|e| Error::usage(format!("--{what}: {e}"))))
            .transpose()
    };
    if let Some(d) = dur(&args.idle_threshold, "idle-threshold")? {
        t.idle_threshold = d;
    }
    if let Some(d) = dur(&args.cooldown, "cooldown")? {
        t.cooldown = d;
    }
    if let Some(d) = dur(&args.recovery_window, "recovery-window")? {
        t.recovery_window = d;
    }
    if let Some(n) = args.max_failures {
        t.max_failures = n;
    }
    if let Some(m) = args.backoff_multiplier {
        t.backoff_multiplier = m;
    }
    let store = Store::new(&ws.repo)?;
    let bref = state::boulder_ref(&id);
    let b = read(&store, &id)?.ok_or_else(|| {
        Error::usage(format!("no boulder {id:?}"))
            .hint("create it with `git boulder create`, or `git boulder stream init`")
    })?;
    let kids: Vec<BoulderState> = children(&store, &id)?.into_iter().map(|(_, c)| c).collect();
    let parent = match &b.parent {
        Some(p) => read(&store, p)?.map(|s| (p.clone(), s)),
        None => None,
    };
    // inherit_cooldowns: a child waits out its parent's cooldown too.
    let mut gated = b.clone();
    // A stream's root boulder is done when the stream's stories are.
    if let (Some(plan), None) = (&plan, &b.parent) {
        if let Some(stream) = plan.stream(&id).filter(|s| !s.stories.is_empty()) {
            if crate::merge::complete(ws, plan, stream).unwrap_or(false) {
                gated.status = BoulderStatus::Completed;
            }
        }
    }
    if let (true, Some((_, p))) = (t.inherit_cooldowns, &parent) {
        if p.last_enforcement > gated.last_enforcement {
            gated.last_enforcement = p.last_enforcement.clone();
        }
        gated.failure_count = gated.failure_count.max(p.failure_count);
    }
    let mut d =
        crate::boulder::decide(&gated, &kids, crate::time::now_secs(), &t, args.subagent, args.message.as_deref());
    let mut chain: Vec<(String, &BoulderState)> = vec![(id.clone(), &b)];
    if let Some((p, s)) = &parent {
        chain.push((p.clone(), s));
    }
    let failures = if d.reset_failures { 0 } else { b.failure_count };
    let task = b.last_story.clone().unwrap_or_else(|| id.clone());
    let mut text = crate::boulder::message(&chain, &task, failures, t.max_failures);
    if d.enforce {
        if b.last_message.as_deref() == Some(text.as_str()) {
            // Never the same message twice in a row.
            text.push_str(&format!("\n(iteration {} still waiting)", b.iteration));
        }
        if d.reset_failures {
            store.append::<BoulderState>(&bref, BoulderOp::ResetFailures {})?;
        }
        store.append::<BoulderState>(
            &bref,
            BoulderOp::Enforced { gate: Opt::Set(d.gate.to_string()), message: Opt::Set(text.clone()) },
        )?;
    }
    d.reset_failures = false;
    let v = json!({"enforce": d.enforce, "gate": d.gate, "reason": d.reason, "variant": d.variant,
                   "message": if d.enforce { Some(&text) } else { None }, "boulder": id,
                   "iteration": b.iteration, "parent_iteration": parent.as_ref().map(|(_, s)| s.iteration),
                   "depth": b.depth});
    let mut out = std::io::stdout().lock();
    if args.json {
        return super::output::json(&mut out, &v);
    }
    if d.enforce {
        writeln!(out, "{}", crate::text::inert_lines(&text))?;
    } else {
        writeln!(out, "no enforcement ({}): {}", d.gate, crate::text::inert(&d.reason))?;
    }
    Ok(())
}

pub fn checkpoint(ws: &Workspace, args: CheckpointArgs) -> Result<()> {
    let id = target(ws, args.boulder.as_deref())?;
    let store = Store::new(&ws.repo)?;
    ensure(&store, &id)?;
    store.append::<BoulderState>(&state::boulder_ref(&id), BoulderOp::Checkpoint { message: args.message.clone() })?;
    eprintln!("checkpoint recorded on boulder {id}");
    Ok(())
}

fn ensure(store: &Store, id: &str) -> Result<()> {
    if read(store, id)?.is_none() {
        return Err(Error::usage(format!("no boulder {id:?}")).hint("create it with `git boulder create`"));
    }
    Ok(())
}

pub fn todo(ws: &Workspace, cmd: TodoCommand) -> Result<()> {
    let id = target(ws, None)?;
    let store = Store::new(&ws.repo)?;
    ensure(&store, &id)?;
    let bref = state::boulder_ref(&id);
    let mut out = std::io::stdout().lock();
    match cmd {
        TodoCommand::Add { text } => {
            let e = store.append_if::<BoulderState>(&bref, |cur| {
                let n = cur.map_or(0, |b| b.todos.len()) + 1;
                Ok(Some(BoulderOp::TodoAdd { id: format!("t{n}"), text: text.clone() }))
            })?;
            if let Some(t) = e.and_then(|e| e.state.todos.last().cloned()) {
                writeln!(out, "{}", t.id)?;
            }
        }
        TodoCommand::Done { id: todo } => {
            let b = read(&store, &id)?.unwrap_or_default();
            if !b.todos.iter().any(|t| t.id == todo) {
                return Err(Error::usage(format!("no todo {todo:?} on boulder {id}"))
                    .hint("see them with `git boulder todo list`"));
            }
            store.append::<BoulderState>(&bref, BoulderOp::TodoDone { id: todo.clone() })?;
        }
        TodoCommand::List { json } => {
            let b = read(&store, &id)?.unwrap_or_default();
            if json {
                return super::output::json(&mut out, &b.todos);
            }
            for t in &b.todos {
                writeln!(
                    out,
                    "[{}] {}  {}",
                    if t.done { 'x' } else { ' ' },
                    crate::text::inert(&t.id),
                    crate::text::inert(&t.text)
                )?;
            }
        }
    }
    Ok(())
}

pub fn resume(ws: &Workspace, args: ResumeArgs) -> Result<()> {
    let plan = ws.plan().ok();
    let id = target(ws, None).ok();
    let store = Store::new(&ws.repo)?;
    let b = match &id {
        Some(i) => read(&store, i)?,
        None => None,
    };
    let stream = b.as_ref().and_then(|b| b.stream.clone());
    let prd_path = ws.prd_path(plan.as_ref(), None)?;
    let prd = crate::workspace::load_prd(&prd_path).ok().map(|(_, p)| p);
    let done = ws.recorded_done()?;
    let stories: Vec<crate::prd::Story> = match (&plan, &prd, &stream) {
        (Some(plan), Some(prd), Some(s)) if plan.stream(s).is_some() => {
            ws.stream_stories(plan, plan.stream(s).expect("checked"), prd, &done)?
        }
        (_, Some(prd), _) => prd.stories.clone(),
        _ => Vec::new(),
    };
    let next = super::prd::next_open(&stories).cloned();
    let mut waves: Vec<(String, usize, usize)> = Vec::new();
    for s in &stories {
        let w = s.wave.clone().unwrap_or_default();
        if let Some(e) = waves.iter_mut().find(|(x, _, _)| *x == w) {
            e.2 += 1;
            e.1 += s.status.is_done() as usize;
        } else {
            waves.push((w, s.status.is_done() as usize, 1));
        }
    }
    let v = json!({
        "prd": prd_path.display().to_string(),
        "stream": stream, "boulder": id,
        "iteration": b.as_ref().map(|b| b.iteration),
        "wave": next.as_ref().and_then(|s| s.wave.clone()),
        "story": next.as_ref().map(|s| json!({"id": s.id, "title": s.title, "status": s.status})),
        "checkpoint": b.as_ref().and_then(|b| b.checkpoint.clone()),
        "progress": {"done": stories.iter().filter(|s| s.status.is_done()).count(), "total": stories.len()},
        "waves": waves.iter().map(|(w, d, t)| json!({"wave": if w.is_empty() { None } else { Some(w) }, "done": d, "total": t})).collect::<Vec<_>>(),
        "stories": stories.iter().map(|s| json!({"id": s.id, "status": s.status})).collect::<Vec<_>>(),
        "todos": b.as_ref().map(|b| b.todos.iter().filter(|t| !t.done).cloned().collect::<Vec<_>>()).unwrap_or_default(),
    });
    let mut out = std::io::stdout().lock();
    if args.json {
        return super::output::json(&mut out, &v);
    }
    writeln!(out, "PRD: {}", prd_path.display())?;
    if let Some(s) = &stream {
        writeln!(out, "stream: {}", crate::text::inert(s))?;
    }
    if let (Some(i), Some(b)) = (&id, &b) {
        writeln!(out, "boulder: {} (iteration {})", crate::text::inert(i), b.iteration)?;
    }
    writeln!(out, "progress: {}/{}", v["progress"]["done"], v["progress"]["total"])?;
    for (w, d, t) in &waves {
        if !w.is_empty() {
            writeln!(out, "  wave {}: {d}/{t}", crate::text::inert(w))?;
        }
    }
    match &next {
        Some(s) => writeln!(
            out,
            "next story: {}: {} [{}]",
            crate::text::inert(&s.id),
            crate::text::inert(&s.title),
            s.status.as_str()
        )?,
        None => writeln!(out, "no open story")?,
    }
    if let Some(c) = b.as_ref().and_then(|b| b.checkpoint.clone()) {
        writeln!(out, "last checkpoint ({}): {}", crate::text::inert(&c.at), crate::text::inert(&c.message))?;
    }
    for t in b.iter().flat_map(|b| b.todos.iter()).filter(|t| !t.done) {
        writeln!(out, "todo {}: {}", crate::text::inert(&t.id), crate::text::inert(&t.text))?;
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct FinishArgs {
    /// The boulder (default: this worktree's current boulder).
    #[arg(add = super::complete::boulder_ids())]
    pub id: Option<String>,
}

/// Mark a boulder completed: its parent's enforcement waits for completed children only.
pub fn finish(ws: &Workspace, args: FinishArgs) -> Result<()> {
    let id = target(ws, args.id.as_deref())?;
    let store = Store::new(&ws.repo)?;
    ensure(&store, &id)?;
    store.append::<BoulderState>(&state::boulder_ref(&id), BoulderOp::Status { status: BoulderStatus::Completed })?;
    eprintln!("boulder {id} completed");
    Ok(())
}
