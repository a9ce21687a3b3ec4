//! JSON PRDs as people write them: Ralph's `prd.json` (`userStories[]` with `id`, `title`,
//! `priority`, `passes`), `prd-*.json` (`stories[]` with `status` open/in_progress/done and
//! `dependsOn`, or with Ralph's `passes`), stories grouped in phases (`phases[].stories[]`) and a
//! task list (`tasks[]` with `status`, `dependencies`). The rewrite replaces only the bytes of one
//! story's `passes`/`status` value, found with a small scanner that records where each value
//! sits, so every other byte stays as it was.
//!
//! Rules:
//! * The first array found wins, in this order: `userStories`, `stories`, `phases` (when one of
//!   its objects has a `stories` array), `tasks`. The title is the first string of `project`,
//!   `title`, `branchName`, `name`.
//! * `userStories`: `passes: true` → completed; `false`, `null` or missing → pending (blocked
//!   with `"blocked": true`). Another `passes` value is [`PrdError::Invalid`].
//! * The other forms read `status` when the story has one, else `passes` as above. `status` (any
//!   case): open/pending/todo/new/not_started → pending, in_progress/in-progress/started/doing/
//!   review → in_progress, done/completed/complete/closed/finished → completed, blocked/deferred →
//!   blocked; missing → pending; anything else is [`PrdError::Invalid`].
//! * Phases: a story's `wave` is its phase's `phase`/`id`/`number`, else its `name`/`title`,
//!   else its 1-based position. `span` is the story's index in the flattened list.
//! * A story without an id is [`PrdError::Invalid`] naming the entry (`phases[1].stories[0]`) and
//!   its title.
//! * A story's `text` is its whole object pretty-printed (description, acceptanceCriteria, notes
//!   included).
//! * A repeated id keeps the first and adds a warning naming both entries.

use serde_json::{Map, Value};

use super::{Format, Marks, Prd, PrdError, Span, Status, Story};

fn syntax(e: serde_json::Error) -> PrdError {
    PrdError::Syntax { line: e.line(), column: e.column(), message: e.to_string() }
}

fn id_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The forms, in the order they are looked for, for messages.
pub const FORMS: &str = "JSON `userStories[]`, `stories[]`, `phases[].stories[]` or `tasks[]` with an `id` each";

/// The form of a parsed JSON object, if it has one.
fn form_of(obj: &Map<String, Value>) -> Option<Format> {
    let is_array = |k: &str| obj.get(k).is_some_and(Value::is_array);
    if is_array("userStories") {
        Some(Format::UserStoriesJson)
    } else if is_array("stories") {
        Some(Format::StoriesJson)
    } else if obj
        .get("phases")
        .and_then(Value::as_array)
        .is_some_and(|p| p.iter().any(|ph| ph.get("stories").is_some_and(Value::is_array)))
    {
        Some(Format::PhasesJson)
    } else if is_array("tasks") {
        Some(Format::TasksJson)
    } else {
        None
    }
}

/// One story entry: where it is named in messages, its phase (for the wave) and its value.
struct Entry<'a> {
    label: String,
    wave: Option<String>,
    value: &'a Value,
}

fn entries<'a>(obj: &'a Map<String, Value>, format: Format) -> Vec<Entry<'a>> {
    let list = |key: &str, v: &'a Value, wave: Option<String>, prefix: &str| -> Vec<Entry<'a>> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .enumerate()
                    .map(|(i, value)| Entry { label: format!("{prefix}{key}[{i}]"), wave: wave.clone(), value })
                    .collect()
            })
            .unwrap_or_default()
    };
    match format {
        Format::PhasesJson => {
            let mut out = Vec::new();
            for (p, phase) in obj["phases"].as_array().into_iter().flatten().enumerate() {
                let Some(stories) = phase.get("stories").filter(|s| s.is_array()) else { continue };
                let wave = ["phase", "id", "number"]
                    .iter()
                    .find_map(|k| phase.get(*k).and_then(id_of))
                    .or_else(|| ["name", "title"].iter().find_map(|k| phase.get(*k).and_then(id_of)))
                    .unwrap_or_else(|| (p + 1).to_string());
                out.extend(list("stories", stories, Some(wave), &format!("phases[{p}].")));
            }
            out
        }
        _ => list(format.json_key(), &obj[format.json_key()], None, ""),
    }
}

fn status_word(label: &str, id: &str, v: &str) -> Result<Status, PrdError> {
    Ok(match v.trim().to_ascii_lowercase().replace([' ', '-'], "_").as_str() {
        "open" | "pending" | "todo" | "new" | "not_started" | "" => Status::Pending,
        "in_progress" | "inprogress" | "started" | "doing" | "review" | "in_review" => Status::InProgress,
        "done" | "completed" | "complete" | "closed" | "finished" => Status::Completed,
        "blocked" | "deferred" => Status::Blocked,
        _ => {
            return Err(PrdError::Invalid(format!(
                "{label} ({id}): unknown status {:?} (use open, in_progress, done or blocked)",
                v.trim()
            )))
        }
    })
}

fn passes_status(label: &str, id: &str, s: &Map<String, Value>) -> Result<Status, PrdError> {
    match s.get("passes") {
        Some(Value::Bool(true)) => Ok(Status::Completed),
        Some(Value::Bool(false)) | None | Some(Value::Null) => {
            if s.get("blocked").and_then(Value::as_bool) == Some(true) {
                Ok(Status::Blocked)
            } else {
                Ok(Status::Pending)
            }
        }
        Some(other) => Err(PrdError::Invalid(format!("{label} ({id}): \"passes\" must be true or false, not {other}"))),
    }
}

pub fn parse(text: &str) -> Result<Prd, PrdError> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root: Value = serde_json::from_str(body).map_err(syntax)?;
    let Value::Object(obj) = &root else {
        return Err(PrdError::Invalid(format!("a JSON PRD must be an object; git-boulder reads {FORMS}")));
    };
    let Some(format) = form_of(obj) else {
        return Err(PrdError::Invalid(format!("the JSON PRD has none of the forms git-boulder reads: {FORMS}")));
    };
    let title = ["project", "title", "branchName", "name"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .map(str::to_string);
    let layout = layout(body, format).unwrap_or_default();
    let offset = text.len() - body.len();
    let shift = |span: Option<(usize, usize)>| span.map(|(a, b)| (a + offset, b + offset));
    let entries = entries(obj, format);
    // Where a story has neither field, the one the file's other stories use is added.
    let objects = || entries.iter().filter_map(|e| e.value.as_object());
    let default_passes = format == Format::UserStoriesJson
        || (objects().any(|s| s.contains_key("passes")) && !objects().any(|s| s.contains_key("status")));
    let mut stories: Vec<Story> = Vec::new();
    let mut first_at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut warnings = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let label = &entry.label;
        let Value::Object(s) = entry.value else {
            return Err(PrdError::Invalid(format!("{label} is not an object")));
        };
        let Some(id) = s.get("id").and_then(id_of) else {
            let named = ["title", "name"].iter().find_map(|k| s.get(*k).and_then(Value::as_str));
            let named = named.map(|t| format!(" ({t:?})")).unwrap_or_default();
            return Err(PrdError::Invalid(format!("{label}{named} has no \"id\"")));
        };
        let loc = layout.get(index);
        let use_status = format != Format::UserStoriesJson && s.contains_key("status");
        let use_passes = !use_status && (s.contains_key("passes") || default_passes);
        let status = if use_status {
            match s.get("status").and_then(Value::as_str) {
                Some(v) => status_word(label, &id, v)?,
                None => Status::Pending,
            }
        } else {
            passes_status(label, &id, s)?
        };
        let value = loc.and_then(|l| {
            if use_status {
                l.status
            } else if use_passes {
                l.passes
            } else {
                None
            }
        });
        let depends_on = match s.get("dependsOn").or_else(|| s.get("depends_on")).or_else(|| s.get("dependencies")) {
            Some(Value::Array(a)) => a.iter().filter_map(id_of).collect(),
            _ => Vec::new(),
        };
        if let Some(first) = first_at.get(&id).map(|&i| &stories[i]) {
            let first = &entries[match first.span {
                Span::Index { index } => index,
                Span::Lines { start, .. } => start,
            }]
            .label;
            warnings.push(format!("story {id} appears again at {label} (first at {first}); the first counts"));
            continue;
        }
        first_at.insert(id.clone(), stories.len());
        stories.push(Story {
            title: ["title", "name"]
                .iter()
                .find_map(|k| s.get(*k).and_then(Value::as_str))
                .unwrap_or_default()
                .to_string(),
            status,
            wave: entry.wave.clone(),
            text: serde_json::to_string_pretty(entry.value).unwrap_or_default() + "\n",
            span: Span::Index { index },
            depends_on,
            priority: s.get("priority").and_then(Value::as_i64),
            marks: Marks {
                value: shift(value),
                insert_at: loc.and_then(|l| l.open).map(|o| o + offset + 1),
                passes: use_passes,
                ..Marks::default()
            },
            id,
        });
    }
    Ok(Prd { format, title, stories, warnings, by_id: first_at.into() })
}

pub fn set_status(text: &str, story: &Story, status: Status) -> Result<String, PrdError> {
    let replacement = match (story.marks.passes, status) {
        (true, Status::Completed) => "true",
        (true, _) => "false",
        (false, Status::Completed) => "\"done\"",
        (false, Status::Pending) => "\"open\"",
        (false, Status::InProgress) => "\"in_progress\"",
        (false, Status::Blocked) => "\"blocked\"",
    };
    match (story.marks.value, story.marks.insert_at) {
        (Some((a, b)), _) if b <= text.len() && text.is_char_boundary(a) && text.is_char_boundary(b) => {
            Ok(format!("{}{replacement}{}", &text[..a], &text[b..]))
        }
        // No value yet: insert one right after the story object's opening brace.
        (None, Some(at)) if at <= text.len() && text.is_char_boundary(at) && text[..at].ends_with('{') => {
            let field = if story.marks.passes { "passes" } else { "status" };
            Ok(format!("{}\"{field}\": {replacement}, {}", &text[..at], &text[at..]))
        }
        _ => Err(PrdError::Invalid(format!("cannot find story {} in the JSON", story.id))),
    }
}

/// Where one story object sits: its `{`, and the spans of its `status` and `passes` values.
#[derive(Debug, Default, Clone, Copy)]
struct Loc {
    open: Option<usize>,
    status: Option<(usize, usize)>,
    passes: Option<(usize, usize)>,
}

/// A tiny JSON scanner that records byte spans.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn string(&mut self) -> Option<String> {
        self.ws();
        let start = self.i;
        if self.b.get(self.i) != Some(&b'"') {
            return None;
        }
        self.i += 1;
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return serde_json::from_slice(&self.b[start..self.i]).ok();
                }
                _ => self.i += 1,
            }
        }
        None
    }
    /// Skip one value; return its span.
    fn value(&mut self) -> Option<(usize, usize)> {
        self.ws();
        let start = self.i;
        match *self.b.get(self.i)? {
            b'"' => {
                self.string()?;
            }
            b'{' => {
                self.i += 1;
                loop {
                    self.ws();
                    if self.b.get(self.i) == Some(&b'}') {
                        self.i += 1;
                        break;
                    }
                    self.string()?;
                    self.ws();
                    if self.b.get(self.i) != Some(&b':') {
                        return None;
                    }
                    self.i += 1;
                    self.value()?;
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                loop {
                    self.ws();
                    if self.b.get(self.i) == Some(&b']') {
                        self.i += 1;
                        break;
                    }
                    self.value()?;
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
            }
            _ => {
                while self.i < self.b.len()
                    && !matches!(self.b[self.i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                {
                    self.i += 1;
                }
            }
        }
        Some((start, self.i))
    }
    /// In an object at the cursor, visit each key; `f` may consume the value (return true) or not.
    fn object(&mut self, mut f: impl FnMut(&mut Self, &str) -> Option<bool>) -> Option<()> {
        self.ws();
        if self.b.get(self.i) != Some(&b'{') {
            return None;
        }
        self.i += 1;
        loop {
            self.ws();
            if self.b.get(self.i) == Some(&b'}') {
                self.i += 1;
                return Some(());
            }
            let key = self.string()?;
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return None;
            }
            self.i += 1;
            if !f(self, &key)? {
                self.value()?;
            }
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
    /// In an array at the cursor, call `f` for each element (which must consume it).
    fn array(&mut self, mut f: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.ws();
        if self.b.get(self.i) != Some(&b'[') {
            return None;
        }
        self.i += 1;
        loop {
            self.ws();
            if self.b.get(self.i) == Some(&b']') {
                self.i += 1;
                return Some(());
            }
            f(self)?;
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

/// A story object (or any value, which gives an empty [`Loc`]) at the cursor.
fn story_loc(sc: &mut Scan) -> Option<Loc> {
    sc.ws();
    let mut loc = Loc::default();
    if sc.b.get(sc.i) == Some(&b'{') {
        loc.open = Some(sc.i);
        sc.object(|sc, k| match k {
            "status" => {
                loc.status = Some(sc.value()?);
                Some(true)
            }
            "passes" => {
                loc.passes = Some(sc.value()?);
                Some(true)
            }
            _ => Some(false),
        })?;
    } else {
        sc.value()?;
    }
    Some(loc)
}

/// The story objects of an array at the cursor, or `None` (value skipped) when it is not one.
fn story_list(sc: &mut Scan) -> Option<Option<Vec<Loc>>> {
    sc.ws();
    if sc.b.get(sc.i) != Some(&b'[') {
        sc.value()?;
        return Some(None);
    }
    let mut out = Vec::new();
    sc.array(|sc| {
        out.push(story_loc(sc)?);
        Some(())
    })?;
    Some(Some(out))
}

/// Each story's [`Loc`], in the order [`entries`] lists them. With duplicate keys, the last one
/// wins, as serde_json reads it.
fn layout(text: &str, format: Format) -> Option<Vec<Loc>> {
    let top = format.json_key();
    let mut out = Vec::new();
    let mut sc = Scan { b: text.as_bytes(), i: 0 };
    sc.object(|sc, k| {
        if k != top {
            return Some(false);
        }
        out.clear();
        if format != Format::PhasesJson {
            out = story_list(sc)?.unwrap_or_default();
            return Some(true);
        }
        sc.ws();
        if sc.b.get(sc.i) != Some(&b'[') {
            sc.value()?;
            return Some(true);
        }
        sc.array(|sc| {
            sc.ws();
            if sc.b.get(sc.i) != Some(&b'{') {
                return sc.value().map(|_| ());
            }
            let mut items = None;
            sc.object(|sc, k| {
                if k != "stories" {
                    return Some(false);
                }
                items = story_list(sc)?;
                Some(true)
            })?;
            out.extend(items.unwrap_or_default());
            Some(())
        })?;
        Some(true)
    })?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::super::{parse, set_status, Status};

    /// The rewrite writes the field each form uses, in place, and the result reads back.
    #[test]
    fn set_status_in_each_form() {
        let text = "{\"stories\": [{\"id\": \"A\", \"passes\": true}, {\"id\": \"B\"}]}";
        let prd = parse("prd.json", text).unwrap();
        let out = set_status(text, &prd, "B", Status::Completed).unwrap();
        assert_eq!(out, "{\"stories\": [{\"id\": \"A\", \"passes\": true}, {\"passes\": true, \"id\": \"B\"}]}");
        let out = set_status(text, &prd, "A", Status::Pending).unwrap();
        assert_eq!(out, text.replacen("true", "false", 1));

        let text = "{\"phases\": [{\"name\": \"x\"}, {\"phase\": 2, \"stories\": [{\"id\": \"P1\", \"status\": \"open\"}, {\"id\": \"P2\"}]}]}";
        let prd = parse("prd.json", text).unwrap();
        assert_eq!(prd.stories[1].wave.as_deref(), Some("2"));
        let out = set_status(text, &prd, "P1", Status::Completed).unwrap();
        assert_eq!(out, text.replace("\"open\"", "\"done\""));
        let out = set_status(text, &prd, "P2", Status::InProgress).unwrap();
        assert_eq!(out, text.replace("{\"id\": \"P2\"}", "{\"status\": \"in_progress\", \"id\": \"P2\"}"));
        assert_eq!(parse("prd.json", &out).unwrap().stories[1].status, Status::InProgress);

        let text = "\u{feff}{\"tasks\": [{\"id\": 7, \"status\": \"pending\", \"subtasks\": [{\"id\": 1, \"status\": \"done\"}]}]}";
        let prd = parse("tasks.json", text).unwrap();
        let out = set_status(text, &prd, "7", Status::Completed).unwrap();
        assert_eq!(out, text.replacen("\"pending\"", "\"done\"", 1));
    }
}
