//! Completion candidates read from the repository at `<TAB>` time (clap_complete's dynamic
//! engine, driven by the script `git boulder completions SHELL` prints): stream names from the
//! plan, boulder ids from the state refs, story ids from the PRD. Any failure gives no candidates.

use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};

use crate::workspace::Workspace;

/// The environment variable the completion scripts set when they call git-boulder.
pub const ENV_VAR: &str = "BOULDER_COMPLETE";

fn candidates(list: impl IntoIterator<Item = (String, String)>) -> Vec<CompletionCandidate> {
    list.into_iter().map(|(value, help)| CompletionCandidate::new(value).help(Some(help.into()))).collect()
}

/// The plan's stream names.
pub fn streams() -> Vec<CompletionCandidate> {
    let Ok(ws) = Workspace::open(None) else { return Vec::new() };
    let Ok(plan) = ws.plan() else { return Vec::new() };
    candidates(plan.streams.iter().map(|s| (s.name.clone(), format!("{} stories", s.stories.len()))))
}

/// The ids of the boulders in the state refs.
pub fn boulders() -> Vec<CompletionCandidate> {
    let Ok(ws) = Workspace::open(None) else { return Vec::new() };
    let Ok(store) = crate::state::Store::new(&ws.repo) else { return Vec::new() };
    let Ok(refs) = store.list(crate::state::BOULDERS) else { return Vec::new() };
    candidates(
        refs.into_iter()
            .map(|(name, _)| (name.trim_start_matches(crate::state::BOULDERS).to_string(), "boulder".into())),
    )
}

/// Streams and boulders, for `log`.
pub fn streams_and_boulders() -> Vec<CompletionCandidate> {
    let mut out = streams();
    out.extend(boulders());
    out
}

/// The PRD's story ids, open ones first.
pub fn stories() -> Vec<CompletionCandidate> {
    let Ok(ws) = Workspace::open(None) else { return Vec::new() };
    let plan = ws.plan().ok();
    let Ok((_, prd)) = ws.load_prd(plan.as_ref(), None) else { return Vec::new() };
    let mut list: Vec<_> = prd.stories.iter().collect();
    list.sort_by_key(|s| s.status.is_done());
    candidates(list.into_iter().map(|s| (s.id.clone(), s.title.clone())))
}

/// `#[arg(add = …)]` helpers.
pub fn stream_names() -> ArgValueCandidates {
    ArgValueCandidates::new(streams)
}
pub fn boulder_ids() -> ArgValueCandidates {
    ArgValueCandidates::new(boulders)
}
pub fn story_ids() -> ArgValueCandidates {
    ArgValueCandidates::new(stories)
}
pub fn log_names() -> ArgValueCandidates {
    ArgValueCandidates::new(streams_and_boulders)
}
