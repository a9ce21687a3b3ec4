//! Boulders: `create`, `list`, `switch`, `check`, `checkpoint`, `todo`, `resume`.

use std::io::Write;

use clap::Subcommand;
use serde_json::json;

use crate::boulder::enforce::Overrides;
use crate::boulder::tree;
use crate::error::{Error, Result};
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The new boulder's id (a single ref component).
    pub name: String,
    /// Its parent boulder (default: a root boulder).
    #[arg(long, value_name = "ID", add = super::complete::boulder_ids())]
    pub parent: Option<String>,
    /// The stream it belongs to (default: the parent's, else this worktree's stream).
    #[arg(long, value_name = "NAME", value_parser = super::values::stream_name(), add = super::complete::stream_names())]
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
    /// The boulder to check (default: this worktree's current boulder; in the main worktree, or
    /// without a plan, the project boulder).
    #[arg(long, value_name = "ID", add = super::complete::boulder_ids())]
    pub boulder: Option<String>,
    /// Print {enforce, gate, reason, variant, message, boulder, iteration, parent_iteration, depth}.
    #[arg(long)]
    pub json: bool,
    /// Override settings.boulder.idle_threshold (e.g. 30s).
    #[arg(long, value_name = "D", value_parser = super::values::duration())]
    pub idle_threshold: Option<std::time::Duration>,
    /// Override settings.boulder.cooldown.
    #[arg(long, value_name = "D", value_parser = super::values::duration())]
    pub cooldown: Option<std::time::Duration>,
    /// Override settings.boulder.max_failures.
    #[arg(long, value_name = "N")]
    pub max_failures: Option<u32>,
    /// Override settings.boulder.recovery_window.
    #[arg(long, value_name = "D", value_parser = super::values::duration())]
    pub recovery_window: Option<std::time::Duration>,
    /// Override settings.boulder.backoff_multiplier (1 to 1000).
    #[arg(long, value_name = "X", value_parser = super::values::multiplier())]
    pub backoff_multiplier: Option<f64>,
    /// The agent is already going on because of an enforcement: push it again only when a commit
    /// was recorded since the last enforcement, and fewer than --block-cap times in a row.
    #[arg(long)]
    pub continued: bool,
    /// With --continued: the enforcements in a row the harness honours (default 8).
    #[arg(long, value_name = "N", requires = "continued")]
    pub block_cap: Option<u32>,
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

pub fn create(ws: &Workspace, args: CreateArgs) -> Result<()> {
    let depth = tree::create(ws, &args.name, args.parent.as_deref(), args.stream.as_deref())?;
    crate::progress::note(&format!("created boulder {} (depth {depth})", args.name));
    Ok(())
}

pub fn list(ws: &Workspace, args: ListArgs) -> Result<()> {
    let rows = tree::listed(ws)?;
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
    tree::switch(ws, &args.id)?;
    eprintln!("commits in this worktree now count for boulder {} and its ancestors", args.id);
    Ok(())
}

pub fn check(ws: &Workspace, args: CheckArgs) -> Result<()> {
    let id = tree::target(ws, args.boulder.as_deref())?;
    let overrides = Overrides {
        idle_threshold: args.idle_threshold,
        cooldown: args.cooldown,
        max_failures: args.max_failures,
        recovery_window: args.recovery_window,
        backoff_multiplier: args.backoff_multiplier,
        gate: None,
    };
    let c = match args.continued {
        true if !args.subagent => crate::boulder::enforce::check_continued(
            ws,
            &id,
            args.block_cap.unwrap_or(crate::boulder::enforce::DEFAULT_BLOCK_CAP),
            args.message.as_deref(),
        )?,
        _ => crate::boulder::enforce::check(ws, &id, &overrides, args.subagent, args.message.as_deref())?,
    };
    let d = &c.decision;
    let mut out = std::io::stdout().lock();
    if args.json {
        let v = json!({"enforce": d.enforce, "gate": d.gate, "reason": d.reason, "variant": d.variant,
                       "message": if d.enforce { Some(&c.message) } else { None }, "boulder": c.boulder,
                       "iteration": c.iteration, "parent_iteration": c.parent_iteration, "depth": c.depth});
        return super::output::json(&mut out, &v);
    }
    if d.enforce {
        writeln!(out, "{}", crate::text::inert_lines(&c.message))?;
    } else {
        writeln!(out, "no enforcement ({}): {}", d.gate, crate::text::inert(&d.reason))?;
    }
    Ok(())
}

pub fn checkpoint(ws: &Workspace, args: CheckpointArgs) -> Result<()> {
    // Refused before anything is written (the project boulder is made on first use).
    if args.message.trim().is_empty() {
        return Err(Error::usage("the checkpoint message is empty")
            .hint("say where work stands: git boulder checkpoint -m \"login form done; tests next\""));
    }
    let id = tree::target(ws, args.boulder.as_deref())?;
    tree::checkpoint(ws, &id, &args.message)?;
    crate::progress::note(&format!("checkpoint recorded on boulder {id}"));
    Ok(())
}

pub fn todo(ws: &Workspace, cmd: TodoCommand) -> Result<()> {
    let id = tree::target(ws, None)?;
    let mut out = std::io::stdout().lock();
    match cmd {
        TodoCommand::Add { text } => {
            if let Some(t) = tree::todo_add(ws, &id, &text)? {
                writeln!(out, "{}", t.id)?;
            }
        }
        TodoCommand::Done { id: todo } => tree::todo_done(ws, &id, &todo)?,
        TodoCommand::List { json } => {
            let todos = tree::todos(ws, &id)?;
            if json {
                return super::output::json(&mut out, &todos);
            }
            for t in &todos {
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
    let r = crate::boulder::resume::resume(ws)?;
    let (b, next, stories, waves) = (&r.state, &r.next, &r.stories, &r.waves);
    let v = json!({
        "prd": r.prd.display().to_string(),
        "stream": r.stream, "boulder": r.boulder,
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
    writeln!(out, "PRD: {}", r.prd.display())?;
    if let Some(s) = &r.stream {
        writeln!(out, "stream: {}", crate::text::inert(s))?;
    }
    if let (Some(i), Some(b)) = (&r.boulder, b) {
        writeln!(out, "boulder: {} (iteration {})", crate::text::inert(i), b.iteration)?;
    }
    writeln!(out, "progress: {}/{}", v["progress"]["done"], v["progress"]["total"])?;
    for (w, d, t) in waves {
        if !w.is_empty() {
            writeln!(out, "  wave {}: {d}/{t}", crate::text::inert(w))?;
        }
    }
    match next {
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
    let id = tree::target(ws, args.id.as_deref())?;
    tree::finish(ws, &id)?;
    eprintln!("boulder {id} completed");
    Ok(())
}
