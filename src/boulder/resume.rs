//! `resume`: everything the next session needs, gathered from the plan, the PRD and the current
//! boulder's state.

use std::path::PathBuf;

use super::tree::{read, target};
use crate::error::Result;
use crate::prd::Story;
use crate::state::{BoulderState, Store};
use crate::workspace::Workspace;

/// Where work stands for this worktree's current boulder.
#[derive(Debug)]
pub struct Resume {
    /// The PRD the stories come from.
    pub prd: PathBuf,
    pub stream: Option<String>,
    pub boulder: Option<String>,
    pub state: Option<BoulderState>,
    /// The stream's stories (the whole PRD's without a stream), recorded completion applied.
    pub stories: Vec<Story>,
    /// The next open story.
    pub next: Option<Story>,
    /// (wave, done, total) in the order the waves first appear; the wave is empty for none.
    pub waves: Vec<(String, usize, usize)>,
}

/// Gather [`Resume`] for this worktree.
pub fn resume(ws: &Workspace) -> Result<Resume> {
    let plan = ws.plan().ok();
    // Where the PRD is first: a bare repository has none, and nothing is made for it.
    let prd_path = ws.prd_path(plan.as_ref(), None)?;
    let id = target(ws, None).ok();
    let store = Store::new(&ws.repo)?;
    let b = match &id {
        Some(i) => read(&store, i)?,
        None => None,
    };
    let stream = b.as_ref().and_then(|b| b.stream.clone());
    let prd = crate::workspace::load_prd(&prd_path).ok().map(|(_, p)| p);
    let done = ws.recorded_done()?;
    let stories: Vec<Story> = match (&plan, &prd, &stream) {
        (Some(plan), Some(prd), Some(s)) if plan.stream(s).is_some() => {
            ws.stream_stories(plan, plan.stream(s).expect("checked"), prd, &done)?
        }
        (_, Some(prd), _) => prd
            .stories
            .iter()
            .cloned()
            .map(|mut s| {
                if done.contains(&s.id) {
                    s.status = crate::prd::Status::Completed;
                }
                s
            })
            .collect(),
        _ => Vec::new(),
    };
    let next = crate::prd::next_open(&stories).cloned();
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
    Ok(Resume { prd: prd_path, stream, boulder: id, state: b, stories, next, waves })
}
