//! The PRD: stories in Ralph markdown, the wave form, or Ralph JSON, behind one [`Story`] model,
//! and a status rewrite that changes only status marks; next-story selection ([`next_open`]).
//!
//! Parsing is pure (text in, [`Prd`] or [`PrdError`] out) so property tests can hammer it; the
//! file itself is read by [`read_file`] (a regular file of bounded size).

mod file;
mod json;
mod markdown;
mod next;
#[cfg(test)]
mod tests;

pub use file::{read_file, ReadRefusal, MAX_BYTES};
pub use next::next_open;

use serde::{Deserialize, Serialize};

/// A story's status in all output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    InProgress,
    Completed,
    Blocked,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Blocked => "blocked",
        }
    }
    /// Done means completed.
    pub fn is_done(self) -> bool {
        self == Status::Completed
    }
}

/// Which form the PRD was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `### [ ] US-001: Title` headings (and/or the wave form) in markdown.
    Markdown,
    /// Ralph `prd.json`: `userStories[]` with `passes`.
    UserStoriesJson,
    /// `prd-*.json`: `stories[]` with `status` (or `passes`) and `dependsOn`.
    StoriesJson,
    /// `phases[].stories[]`: stories grouped in phases (the phase is the story's wave).
    PhasesJson,
    /// `tasks[]` with `status` and `dependencies`.
    TasksJson,
}

impl Format {
    /// The top-level JSON key of a JSON form.
    pub fn json_key(self) -> &'static str {
        match self {
            Format::Markdown => "",
            Format::UserStoriesJson => "userStories",
            Format::StoriesJson => "stories",
            Format::PhasesJson => "phases",
            Format::TasksJson => "tasks",
        }
    }
}

/// Where a story sits in its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Span {
    /// Markdown: 1-based inclusive line range of the story's block (heading to the line before the next story/section).
    Lines { start: usize, end: usize },
    /// JSON: index in the stories array.
    Index { index: usize },
}

/// One story of the PRD.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Story {
    pub id: String,
    pub title: String,
    pub status: Status,
    /// The wave (e.g. `Wave 1 — Foundation` → `1`) the story belongs to, if any.
    pub wave: Option<String>,
    /// The story's whole block of text (markdown) or its JSON object pretty-printed.
    pub text: String,
    pub span: Span,
    /// Story ids this one depends on (JSON `dependsOn`), empty otherwise.
    pub depends_on: Vec<String>,
    /// JSON `priority`, when present.
    pub priority: Option<i64>,
    /// Where the status marks are, for [`set_status`].
    #[serde(skip)]
    pub marks: Marks,
}

/// Byte offsets of a story's status marks in the text it was parsed from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marks {
    /// Offsets of the character inside each `[ ]` box that decides the status (heading box or
    /// checklist items).
    pub boxes: Vec<usize>,
    /// A heading without a box: where `[x] ` would be inserted. JSON: the byte after the story
    /// object's `{`, where a missing `passes`/`status` field is inserted.
    pub insert_at: Option<usize>,
    /// JSON: the byte range of the `passes`/`status` value.
    pub value: Option<(usize, usize)>,
    /// JSON: the status is Ralph's `passes` boolean (not a `status` word).
    pub passes: bool,
}

/// A parsed PRD.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prd {
    pub format: Format,
    /// The document's title (first `# ` heading or JSON `project`/`title`/`branchName`), if any.
    pub title: Option<String>,
    pub stories: Vec<Story>,
    /// Things worth telling the user that did not stop parsing (e.g. a repeated story id).
    pub warnings: Vec<String>,
    /// Story positions by id, built on the first lookup.
    #[serde(skip)]
    pub by_id: StoryIndex,
}

/// Story positions by id for [`Prd::story`], built once on first use, so that looking up every
/// story of a plan costs linear time, not quadratic. Never part of equality or output.
#[derive(Debug, Clone, Default)]
pub struct StoryIndex(std::sync::OnceLock<std::collections::HashMap<String, usize>>);

impl From<std::collections::HashMap<String, usize>> for StoryIndex {
    /// An index already built (by a parser that found every id's first story on the way).
    fn from(map: std::collections::HashMap<String, usize>) -> StoryIndex {
        StoryIndex(std::sync::OnceLock::from(map))
    }
}

impl PartialEq for StoryIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Why a PRD could not be parsed or rewritten; messages name the line (and column) involved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PrdError {
    #[error("line {line}, column {column}: {message}")]
    Syntax { line: usize, column: usize, message: String },
    #[error("{0}")]
    Invalid(String),
    #[error("no story {0:?} in the PRD")]
    NoSuchStory(String),
}

impl Prd {
    /// The story with this id (ids are unique: the parsers keep the first of repeated ones).
    pub fn story(&self, id: &str) -> Option<&Story> {
        let index = self.by_id.0.get_or_init(|| {
            let mut m = std::collections::HashMap::with_capacity(self.stories.len());
            for (i, s) in self.stories.iter().enumerate() {
                m.entry(s.id.clone()).or_insert(i);
            }
            m
        });
        index.get(id).and_then(|&i| self.stories.get(i)).filter(|s| s.id == id)
    }
}

/// Parse a PRD. `name` is the file name (used only to prefer JSON for `*.json`); content that
/// starts with `{` is parsed as JSON whatever its name. The forms and their rules are described
/// in the `markdown` and `json` submodules.
///
/// A story id that appears twice never fails the parse and never panics: the first story (in
/// file order) is kept, and a warning in [`Prd::warnings`] names the id and both lines (JSON:
/// array indexes), so a half-edited PRD still drives the loop while the user is told.
///
/// Markdown never fails (text without stories gives no stories); JSON fails with
/// [`PrdError::Syntax`] (serde_json's line and column) or [`PrdError::Invalid`] (no stories
/// array, a story without an id, an unknown status).
///
/// A PRD that yields no story at all gets a warning saying which forms are read and that none
/// matched (see [`NO_STORIES`]), so an empty result is never silent.
pub fn parse(name: &str, text: &str) -> Result<Prd, PrdError> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut prd = if body.trim_start().starts_with('{') || (name.ends_with(".json") && !body.trim().is_empty()) {
        json::parse(text)?
    } else {
        markdown::parse(text)
    };
    if prd.stories.is_empty() {
        let found = match prd.format {
            Format::Markdown => "no story heading or task list matched".to_string(),
            f => format!("its \"{}\" list is empty", f.json_key()),
        };
        prd.warnings.push(format!("no stories: {found}. {NO_STORIES}"));
    }
    Ok(prd)
}

/// The forms git-boulder reads, for the message about a PRD without stories.
pub const NO_STORIES: &str = "git-boulder reads markdown story headings `### [ ] US-001: Title` (box optional, \
an id such as `US-001`, `S01` or `T-12`), wave sections `## Wave 1` with `- [ ]` task lists, a `## TODOs` list, \
and JSON `userStories[]`, `stories[]`, `phases[].stories[]` or `tasks[]` with an `id` each";

/// Return `text` with story `id`'s status changed to `status`, touching only its status marks.
/// Every other byte (line endings, a missing trailing newline, a BOM) is kept.
///
/// * Markdown: the heading box (`[ ]`, `[x]`, `[~]`, `[!]`), or for a wave story without a box
///   all of its `- [ ]` items (`[x]` for completed, `[ ]` for pending; other statuses are
///   refused, the items decide them). A heading without a box gets one only when needed:
///   `[x] ` (or `[~] `, `[!] `) is inserted right after the `###` and its space; pending leaves
///   it alone. The result is parsed again and must show the new status, else
///   [`PrdError::Invalid`] (e.g. a title saying BLOCKED cannot be set to pending by marks).
/// * JSON: only the bytes of that story's `passes`/`status` value are replaced (found by a small
///   span scanner; the JSON is never re-serialized). `userStories` has only `passes`, so anything
///   but completed writes `false`. A story without the field gets `"passes": …, ` /
///   `"status": …, ` inserted after its `{`.
pub fn set_status(text: &str, prd: &Prd, id: &str, status: Status) -> Result<String, PrdError> {
    let story = prd.story(id).ok_or_else(|| PrdError::NoSuchStory(id.to_string()))?;
    match prd.format {
        Format::Markdown => markdown::set_status(text, story, status),
        Format::UserStoriesJson | Format::StoriesJson | Format::PhasesJson | Format::TasksJson => {
            json::set_status(text, story, status)
        }
    }
}
