//! JSON PRDs: Ralph's `prd.json` (`userStories[]` with `id`, `title`, `priority`, `passes`) and
//! `prd-*.json` (`stories[]` with `status` open/in_progress/done and `dependsOn`). The rewrite
//! replaces only the bytes of one story's `passes`/`status` value, found with a small scanner that
//! records where each value sits, so every other byte stays as it was.
//!
//! Rules:
//! * `userStories` wins over `stories` when both are arrays. The title is the first string of
//!   `project`, `title`, `branchName`, `name`.
//! * `passes: true` → completed; `false`, `null` or missing → pending (blocked with
//!   `"blocked": true`). Another `passes` value is [`PrdError::Invalid`].
//! * `status` (any case): open/pending/todo → pending, in_progress/in-progress/started/doing →
//!   in_progress, done/completed/complete/closed → completed, blocked → blocked; missing →
//!   pending; anything else is [`PrdError::Invalid`].
//! * A story's `text` is its whole object pretty-printed (description, acceptanceCriteria, notes
//!   included); `span` is its index in the array.
//! * A repeated id keeps the first and adds a warning naming both indexes.

use serde_json::Value;

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

pub fn parse(text: &str) -> Result<Prd, PrdError> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root: Value = serde_json::from_str(body).map_err(syntax)?;
    let Value::Object(obj) = &root else {
        return Err(PrdError::Invalid("a JSON PRD must be an object with userStories or stories".into()));
    };
    let (format, key) = if obj.get("userStories").is_some_and(Value::is_array) {
        (Format::UserStoriesJson, "userStories")
    } else if obj.get("stories").is_some_and(Value::is_array) {
        (Format::StoriesJson, "stories")
    } else {
        return Err(PrdError::Invalid("the JSON PRD has no \"userStories\" or \"stories\" array".into()));
    };
    let title = ["project", "title", "branchName", "name"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .map(str::to_string);
    let spans = value_spans(body, key).unwrap_or_default();
    let offset = text.len() - body.len();
    let mut stories: Vec<Story> = Vec::new();
    let mut first_at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut warnings = Vec::new();
    for (index, item) in obj[key].as_array().expect("checked above").iter().enumerate() {
        let Value::Object(s) = item else {
            return Err(PrdError::Invalid(format!("{key}[{index}] is not an object")));
        };
        let Some(id) = s.get("id").and_then(id_of) else {
            return Err(PrdError::Invalid(format!("{key}[{index}] has no \"id\"")));
        };
        let status = match format {
            Format::UserStoriesJson => match s.get("passes") {
                Some(Value::Bool(true)) => Status::Completed,
                Some(Value::Bool(false)) | None | Some(Value::Null) => {
                    if s.get("blocked").and_then(Value::as_bool) == Some(true) {
                        Status::Blocked
                    } else {
                        Status::Pending
                    }
                }
                Some(other) => {
                    return Err(PrdError::Invalid(format!(
                        "{key}[{index}] ({id}): \"passes\" must be true or false, not {other}"
                    )))
                }
            },
            _ => match s.get("status").and_then(Value::as_str).map(|v| v.trim().to_ascii_lowercase()) {
                None => Status::Pending,
                Some(v) => match v.as_str() {
                    "open" | "pending" | "todo" | "" => Status::Pending,
                    "in_progress" | "in-progress" | "inprogress" | "started" | "doing" => Status::InProgress,
                    "done" | "completed" | "complete" | "closed" => Status::Completed,
                    "blocked" => Status::Blocked,
                    other => {
                        return Err(PrdError::Invalid(format!(
                            "{key}[{index}] ({id}): unknown status {other:?} (use open, in_progress, done or blocked)"
                        )))
                    }
                },
            },
        };
        let depends_on = match s.get("dependsOn").or_else(|| s.get("depends_on")) {
            Some(Value::Array(a)) => a.iter().filter_map(id_of).collect(),
            _ => Vec::new(),
        };
        if let Some(first) = first_at.get(&id).map(|&i| &stories[i]) {
            let first = match first.span {
                Span::Index { index } => index,
                Span::Lines { start, .. } => start,
            };
            warnings.push(format!(
                "story {id} appears again at {key}[{index}] (first at {key}[{first}]); the first counts"
            ));
            continue;
        }
        first_at.insert(id.clone(), stories.len());
        stories.push(Story {
            title: s.get("title").and_then(Value::as_str).unwrap_or_default().to_string(),
            status,
            wave: None,
            text: serde_json::to_string_pretty(item).unwrap_or_default() + "\n",
            span: Span::Index { index },
            depends_on,
            priority: s.get("priority").and_then(Value::as_i64),
            marks: Marks {
                value: spans.get(index).copied().flatten().map(|(a, b)| (a + offset, b + offset)),
                ..Marks::default()
            },
            id,
        });
    }
    Ok(Prd { format, title, stories, warnings, by_id: Default::default() })
}

pub fn set_status(text: &str, format: Format, story: &Story, status: Status) -> Result<String, PrdError> {
    let replacement = match format {
        Format::UserStoriesJson => match status {
            Status::Completed => "true",
            Status::Pending | Status::InProgress | Status::Blocked => "false",
        },
        _ => match status {
            Status::Completed => "\"done\"",
            Status::Pending => "\"open\"",
            Status::InProgress => "\"in_progress\"",
            Status::Blocked => "\"blocked\"",
        },
    };
    match story.marks.value {
        Some((a, b)) if b <= text.len() => Ok(format!("{}{replacement}{}", &text[..a], &text[b..])),
        _ => {
            // No value yet: insert one right after the story object's opening brace.
            let Span::Index { index } = story.span else { return Err(PrdError::Invalid("not a JSON story".into())) };
            let key = if format == Format::UserStoriesJson { "userStories" } else { "stories" };
            let body_off = text.len() - text.strip_prefix('\u{feff}').unwrap_or(text).len();
            let open = object_starts(&text[body_off..], key)
                .and_then(|v| v.get(index).copied())
                .ok_or_else(|| PrdError::Invalid(format!("cannot find story {} in the JSON", story.id)))?;
            let at = body_off + open + 1;
            let field = if format == Format::UserStoriesJson { "passes" } else { "status" };
            Ok(format!("{}\"{field}\": {replacement}, {}", &text[..at], &text[at..]))
        }
    }
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

/// For each story of the array `key`: the span of its `passes` (userStories) or `status` value.
/// With duplicate keys, the last one wins, as serde_json reads it.
fn value_spans(text: &str, key: &str) -> Option<Vec<Option<(usize, usize)>>> {
    let field = if key == "userStories" { "passes" } else { "status" };
    let mut out = Vec::new();
    let mut sc = Scan { b: text.as_bytes(), i: 0 };
    sc.object(|sc, k| {
        if k != key {
            return Some(false);
        }
        out.clear();
        sc.array(|sc| {
            let mut span = None;
            sc.ws();
            if sc.b.get(sc.i) == Some(&b'{') {
                sc.object(|sc, k| {
                    if k == field {
                        span = Some(sc.value()?);
                        Some(true)
                    } else {
                        Some(false)
                    }
                })?;
            } else {
                sc.value()?;
            }
            out.push(span);
            Some(())
        })?;
        Some(true)
    })?;
    Some(out)
}

/// Byte offset of each story object's `{` in the array `key`.
fn object_starts(text: &str, key: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    let mut sc = Scan { b: text.as_bytes(), i: 0 };
    sc.object(|sc, k| {
        if k != key {
            return Some(false);
        }
        out.clear();
        sc.array(|sc| {
            sc.ws();
            out.push(sc.i);
            sc.value().map(|_| ())
        })?;
        Some(true)
    })?;
    Some(out)
}
