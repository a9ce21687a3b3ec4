//! `git boulder prd …`: show the PRD, the next open story, record completion.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use crate::error::{Error, Result};
use crate::prd::{Prd, Status, Story};
use crate::state::{PrdOp, PrdState, Store, PRD_REF};
use crate::workspace::Workspace;

#[derive(Debug, Subcommand)]
pub enum PrdCommand {
    /// Show the PRD's stories with their status (a stream's view shows only its stories).
    Show(ShowArgs),
    /// Show the first open story and its text.
    ///
    /// Open means pending or in progress; blocked stories and stories whose dependsOn are not done
    /// are skipped. JSON: {id, title, status, text, total, remaining} (id null when none is left).
    Next(ShowArgs),
    /// Record stories as done in git-boulder's state, without touching the PRD file.
    Done(DoneArgs),
    /// Take back `prd done` records (a story ticked in the PRD file itself stays done there).
    Undone(DoneArgs),
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Only this stream's stories, with its view of their status (default in a stream's
    /// worktree: that stream).
    #[arg(long, value_name = "NAME", value_parser = super::values::stream_name(), add = super::complete::stream_names())]
    pub stream: Option<String>,
    /// The whole PRD, also in a stream's worktree.
    #[arg(long, conflicts_with = "stream")]
    pub all: bool,
    /// Read this PRD instead of the one the plan names.
    #[arg(long, value_name = "PATH")]
    pub prd: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct DoneArgs {
    /// Story ids, as the PRD spells them.
    #[arg(required = true, value_name = "ID", add = super::complete::story_ids())]
    pub ids: Vec<String>,
    /// Read this PRD instead of the one the plan names (to check the ids).
    #[arg(long, value_name = "PATH")]
    pub prd: Option<PathBuf>,
}

pub fn run(ws: &Workspace, cmd: PrdCommand) -> Result<()> {
    match cmd {
        PrdCommand::Show(args) => show(ws, args),
        PrdCommand::Next(args) => next(ws, args),
        PrdCommand::Done(args) => done(ws, args, true),
        PrdCommand::Undone(args) => done(ws, args, false),
    }
}

/// The stories in view: the whole PRD or one stream's, with recorded completion applied.
/// The PRD, the stories in view, and the stream they are the view of (`--stream`, or the stream
/// of the worktree the command runs in). The whole PRD's view takes the PRD's stories (moved,
/// not copied: 100,000 stories are 10 MB of text); the PRD returned then holds none.
fn stories(ws: &Workspace, args: &ShowArgs) -> Result<(Prd, Vec<Story>, Option<String>)> {
    // A plan is needed for --stream; otherwise a missing plan just means the default PRD path.
    let plan = match (&args.stream, ws.plan()) {
        (_, Ok(plan)) => Some(plan),
        (Some(_), Err(e)) => return Err(e),
        (None, Err(e)) if args.prd.is_none() && !e.message.starts_with("no stream plan") => return Err(e),
        (None, Err(_)) => None,
    };
    let (_, mut prd) = ws.load_prd(plan.as_ref(), args.prd.as_deref())?;
    let done = ws.recorded_done()?;
    // In a stream's worktree, that stream is the default view.
    let here = match (&args.stream, &plan) {
        (None, Some(plan)) if !args.all && args.prd.is_none() => ws.here_stream(plan).map(|s| s.name.clone()),
        _ => None,
    };
    let view = args.stream.clone().or(here);
    let list = match (&view, &plan) {
        (Some(name), Some(plan)) => {
            let stream = ws.stream(plan, name)?;
            ws.stream_stories(plan, stream, &prd, &done)?
        }
        _ => {
            let mut all = std::mem::take(&mut prd.stories);
            for s in &mut all {
                if done.contains(&s.id) {
                    s.status = Status::Completed;
                }
            }
            all
        }
    };
    Ok((prd, list, view))
}

fn show(ws: &Workspace, args: ShowArgs) -> Result<()> {
    let (prd, list, view) = stories(ws, &args)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let done = list.iter().filter(|s| s.status.is_done()).count();
        let stories = StoriesJson(&list);
        let show = ShowJson { done, format: prd.format, stories, stream: &view, title: &prd.title, total: list.len() };
        return super::output::json(&mut out, &show);
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| vec![s.id.clone(), s.status.as_str().into(), s.wave.clone().unwrap_or_default(), s.title.clone()])
        .collect();
    super::output::table(&mut out, &["ID", "STATUS", "WAVE", "TITLE"], &rows, |col, cell| {
        if col == 1 {
            super::output::status_colour(cell)
        } else {
            None
        }
    })?;
    let done = list.iter().filter(|s| s.status.is_done()).count();
    writeln!(out, "{done}/{} done", list.len())?;
    Ok(())
}

/// `prd show --json`, serialized straight from the parsed stories (no JSON tree of 100,000
/// stories in between). Fields are in alphabetical order, at every level, as the output has
/// always had them.
#[derive(serde::Serialize)]
struct ShowJson<'a> {
    done: usize,
    format: crate::prd::Format,
    stories: StoriesJson<'a>,
    stream: &'a Option<String>,
    title: &'a Option<String>,
    total: usize,
}

/// The stories of `prd show --json`, each as [`StoryJson`].
struct StoriesJson<'a>(&'a [Story]);

impl serde::Serialize for StoriesJson<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        ser.collect_seq(self.0.iter().map(story_json))
    }
}

/// One story in `prd show --json`, borrowed from the parsed PRD.
#[derive(serde::Serialize)]
struct StoryJson<'a> {
    depends_on: &'a [String],
    id: &'a str,
    priority: Option<i64>,
    span: SpanJson,
    status: crate::prd::Status,
    title: &'a str,
    wave: &'a Option<String>,
}

/// Where a story sits: `{"lines": {"end", "start"}}` or `{"index": {"index"}}`.
#[derive(serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum SpanJson {
    Lines { end: usize, start: usize },
    Index { index: usize },
}

fn story_json(s: &Story) -> StoryJson<'_> {
    StoryJson {
        depends_on: &s.depends_on,
        id: &s.id,
        priority: s.priority,
        span: match s.span {
            crate::prd::Span::Lines { start, end } => SpanJson::Lines { end, start },
            crate::prd::Span::Index { index } => SpanJson::Index { index },
        },
        status: s.status,
        title: &s.title,
        wave: &s.wave,
    }
}

fn next(ws: &Workspace, args: ShowArgs) -> Result<()> {
    let (_, list, _) = stories(ws, &args)?;
    let remaining = list.iter().filter(|s| !s.status.is_done()).count();
    let story = crate::prd::next_open(&list);
    let mut out = std::io::stdout().lock();
    if args.json {
        let v = match story {
            Some(s) => json!({"id": s.id, "title": s.title, "status": s.status, "text": s.text,
                              "total": list.len(), "remaining": remaining}),
            None => json!({"id": null, "title": null, "status": null, "text": null,
                           "total": list.len(), "remaining": remaining}),
        };
        return super::output::json(&mut out, &v);
    }
    match story {
        Some(s) => {
            writeln!(
                out,
                "{}: {} [{}] ({remaining} of {} open)",
                crate::text::inert(&s.id),
                crate::text::inert(&s.title),
                s.status.as_str(),
                list.len()
            )?;
            writeln!(out)?;
            out.write_all(crate::text::inert_lines(&s.text).as_bytes())?;
            if !s.text.ends_with('\n') {
                writeln!(out)?;
            }
        }
        None if remaining == 0 => writeln!(out, "all {} stories are done", list.len())?,
        None => writeln!(out, "no story is ready: {remaining} open, all blocked or waiting on dependencies")?,
    }
    Ok(())
}

/// `prd done` (`done`) or `prd undone`: record or take back completion of stories.
fn done(ws: &Workspace, args: DoneArgs, done: bool) -> Result<()> {
    let plan = ws.plan().ok();
    let (_, prd) = ws.load_prd(plan.as_ref(), args.prd.as_deref())?;
    let place = match ws.prd_path(plan.as_ref(), args.prd.as_deref()) {
        Ok(path) => path.display().to_string(),
        Err(_) => "the PRD".to_string(),
    };
    let unknown: Vec<&String> = args.ids.iter().filter(|id| prd.story(id).is_none()).collect();
    if !unknown.is_empty() {
        return Err(Error::usage(format!(
            "no story {} in {}",
            unknown.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", "),
            place
        ))
        .hint("see the ids with `git boulder prd show`"));
    }
    let store = Store::new(&ws.repo)?;
    if done {
        store.append::<PrdState>(PRD_REF, PrdOp::Done { ids: args.ids.clone() })?;
        crate::progress::note(&format!("recorded done: {}", args.ids.join(", ")));
        return Ok(());
    }
    let recorded = ws.recorded_done()?;
    let (had, not): (Vec<&String>, Vec<&String>) = args.ids.iter().partition(|id| recorded.contains(*id));
    if !had.is_empty() {
        store.append::<PrdState>(PRD_REF, PrdOp::Undone { ids: had.iter().map(|s| s.to_string()).collect() })?;
        let list: Vec<&str> = had.iter().map(|s| s.as_str()).collect();
        crate::progress::note(&format!("took back done: {}", list.join(", ")));
    }
    if !not.is_empty() {
        let list: Vec<&str> = not.iter().map(|s| s.as_str()).collect();
        crate::progress::note(&format!("not recorded done (nothing to take back): {}", list.join(", ")));
    }
    let ticked: Vec<&str> =
        args.ids.iter().filter(|id| prd.story(id).is_some_and(|s| s.status.is_done())).map(|s| s.as_str()).collect();
    if !ticked.is_empty() {
        eprintln!("still done in {place} itself: {} (untick them there)", crate::text::inert(&ticked.join(", ")));
    }
    Ok(())
}
