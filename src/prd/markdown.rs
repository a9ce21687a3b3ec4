//! Markdown PRDs: Ralph story headings (`### [ ] US-001: Title`), the wave form (`## Wave 1 — …`
//! with `### S01: …` stories and `- [ ]` items, or checklist items as the tasks of a wave without
//! story headings), and task lists (`## TODOs` with `- [x] 1. Title`) in plans without either.
//!
//! Rules:
//! * Nothing inside fenced code blocks (```` ``` ```` or `~~~`) counts.
//! * A story heading is a heading of level 2–4 whose text is an optional box (`[ ]`, `[x]`, `[~]`
//!   in progress, `[!]` blocked) then an id (letters, digits, `-`, `_`, `.`, starting with a
//!   letter, with at least one digit) then `:` or a dash. `### Week 1: …`, `### Phase 2 …`,
//!   `#### Acceptance Criteria` are not stories.
//! * A story's block runs from its heading to the line before the next heading of the same or a
//!   higher level.
//! * Under a wave, a story without a box takes its status from the `- [ ]` items in its block:
//!   all checked → completed, some → in_progress, none → pending; the word "blocked" in the
//!   heading or an unchecked item → blocked.
//! * A wave without story headings has its top-level checklist items as tasks, with ids
//!   `W<label>-T<n>` unless an item starts with its own id (`US-004: …`).
//! * A repeated story id keeps the first; the repeat is reported in `Prd::warnings`.

use super::{Format, Marks, Prd, Span, Status, Story};

#[derive(Debug)]
struct Line<'a> {
    /// Byte offset of the line's start.
    start: usize,
    /// The line without its line ending.
    text: &'a str,
    /// The line with its ending.
    raw: &'a str,
    in_fence: bool,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut offset = 0;
    let mut fence: Option<(char, usize)> = None;
    for raw in text.split_inclusive('\n') {
        let mut t = raw.strip_suffix('\n').unwrap_or(raw);
        t = t.strip_suffix('\r').unwrap_or(t);
        let start = offset;
        offset += raw.len();
        let (t_line, start_adj) = if start == 0 && t.starts_with('\u{feff}') { (&t[3..], 3) } else { (t, 0) };
        let trimmed = t_line.trim_start();
        let indent = t_line.len() - trimmed.len();
        let fence_marker = if indent <= 3 {
            ['`', '~'].into_iter().find_map(|c| {
                let n = trimmed.chars().take_while(|x| *x == c).count();
                (n >= 3).then_some((c, n))
            })
        } else {
            None
        };
        let in_fence = match (fence, fence_marker) {
            (None, Some(m)) => {
                fence = Some(m);
                true
            }
            (Some((c, n)), Some((c2, n2))) if c == c2 && n2 >= n && trimmed.trim_end().chars().all(|x| x == c) => {
                fence = None;
                true
            }
            (Some(_), _) => true,
            (None, None) => false,
        };
        out.push(Line { start: start + start_adj, text: t_line, raw, in_fence });
    }
    out
}

/// `(level, text after the hashes)` of an ATX heading.
fn heading<'a>(line: &Line<'a>) -> Option<(usize, &'a str)> {
    if line.in_fence {
        return None;
    }
    let t = line.text;
    let indent = t.len() - t.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let t = &t[indent..];
    let level = t.chars().take_while(|c| *c == '#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &t[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some((level, rest.trim().trim_end_matches('#').trim_end()))
}

/// A box `[c]` at the start of `s`: (status char, byte offset of the char within `s`, rest).
fn leading_box(s: &str) -> Option<(char, usize, &str)> {
    let b = s.as_bytes();
    if b.len() >= 3 && b[0] == b'[' && b[2] == b']' {
        let c = s[1..].chars().next()?;
        if c.len_utf8() == 1 && matches!(c, ' ' | 'x' | 'X' | '~' | '-' | '!' | '/') {
            return Some((c, 1, &s[3..]));
        }
    }
    None
}

fn box_status(c: char) -> Status {
    match c {
        'x' | 'X' => Status::Completed,
        '~' | '-' | '/' => Status::InProgress,
        '!' => Status::Blocked,
        _ => Status::Pending,
    }
}

fn is_id(tok: &str) -> bool {
    tok.len() <= 64
        && tok.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && tok.chars().any(|c| c.is_ascii_digit())
        && tok.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !tok.ends_with(['.', '-'])
}

/// Split `US-001: Title` / `S01 - Title` / `US-001 — Title` into (id, title).
fn id_and_title(s: &str, box_present: bool) -> Option<(String, String)> {
    let s = s.trim_start();
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))).unwrap_or(s.len());
    let (tok, rest) = s.split_at(end);
    let tok = tok.trim_end_matches('.');
    if !is_id(tok) {
        return None;
    }
    let rest_t = rest.trim_start();
    let title = if let Some(r) = rest_t.strip_prefix(':') {
        r
    } else if let Some(r) = rest_t.strip_prefix("—").or_else(|| rest_t.strip_prefix("–")) {
        r
    } else if rest_t.starts_with("- ") || rest_t == "-" {
        &rest_t[1..]
    } else if rest_t.is_empty() || (box_present && rest.starts_with([' ', '\t'])) {
        rest_t
    } else {
        return None;
    };
    Some((tok.to_string(), title.trim().to_string()))
}

fn says_blocked(s: &str) -> bool {
    s.split(|c: char| !c.is_ascii_alphabetic()).any(|w| w.eq_ignore_ascii_case("blocked"))
}

/// A wave heading's label: `Wave 1 — Title` → `1`, `Wave A: …` → `A`.
fn wave_label(text: &str) -> Option<String> {
    let rest =
        text.strip_prefix("Wave ").or_else(|| text.strip_prefix("wave ")).or_else(|| text.strip_prefix("WAVE "))?;
    let label: String = rest.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    (!label.is_empty() && label.len() <= 16).then_some(label)
}

/// A top-level checklist item: (offset of the box char within the line, box char, item text).
fn checklist_item(line: &Line<'_>, max_indent: usize) -> Option<(usize, char, String)> {
    if line.in_fence {
        return None;
    }
    let t = line.text;
    let indent = t.len() - t.trim_start_matches([' ', '\t']).len();
    if indent > max_indent {
        return None;
    }
    let rest = &t[indent..];
    let after = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("* ")).or_else(|| rest.strip_prefix("+ "))?;
    let (c, off, text) = leading_box(after)?;
    let box_off = indent + 2 + off;
    Some((box_off, c, text.trim().to_string()))
}

/// Whether a section heading names a task list (`TODOs`, `Tasks`).
fn is_task_section(text: &str) -> bool {
    let t = text.trim().trim_end_matches(':').to_ascii_lowercase();
    matches!(t.as_str(), "todos" | "todo" | "to do" | "to-do" | "tasks" | "task list" | "tasklist" | "work items")
}

pub fn parse(text: &str) -> Prd {
    let ls = lines(text);
    let headings: Vec<Option<(usize, &str)>> = ls.iter().map(heading).collect();
    let title = headings.iter().flatten().find(|(l, _)| *l == 1).map(|(_, t)| t.to_string());

    // Block end (exclusive line index) for a heading at `i` of `level`.
    let block_end = |i: usize, level: usize| -> usize {
        (i + 1..ls.len()).find(|&j| headings[j].is_some_and(|(l, _)| l <= level)).unwrap_or(ls.len())
    };
    let block_text = |a: usize, b: usize| -> String { ls[a..b].iter().map(|l| l.raw).collect() };

    let mut stories: Vec<Story> = Vec::new();
    let mut warnings = Vec::new();
    let mut push = |stories: &mut Vec<Story>, story: Story, line: usize| {
        if let Some(first) = stories.iter().find(|s| s.id == story.id) {
            let first_line = match first.span {
                Span::Lines { start, .. } => start,
                Span::Index { index } => index,
            };
            warnings.push(format!(
                "story {} appears again at line {line} (first at line {first_line}); the first counts",
                story.id
            ));
        } else {
            stories.push(story);
        }
    };

    // Waves: (start line, end line, label, level).
    let mut waves: Vec<(usize, usize, String, usize)> = Vec::new();
    for (i, h) in headings.iter().enumerate() {
        if let Some((level, t)) = h {
            if *level <= 3 {
                if let Some(label) = wave_label(t) {
                    waves.push((i, block_end(i, *level), label, *level));
                }
            }
        }
    }
    let wave_at = |i: usize| waves.iter().rev().find(|w| w.0 <= i && i < w.1);

    // Story headings.
    let mut story_in_wave = vec![false; waves.len()];
    for (i, h) in headings.iter().enumerate() {
        let Some((level, t)) = h else { continue };
        if !(2..=4).contains(level) || wave_label(t).is_some() {
            continue;
        }
        let (bx, rest) = match leading_box(t) {
            Some((c, _, rest)) => (Some(c), rest),
            None => (None, *t),
        };
        let Some((id, title)) = id_and_title(rest, bx.is_some()) else { continue };
        let end = block_end(i, *level);
        let line = &ls[i];
        let wave = wave_at(i);
        if let Some(w) = wave {
            if let Some(k) = waves.iter().position(|x| x.0 == w.0) {
                story_in_wave[k] = true;
            }
        }
        let mut marks = Marks::default();
        let status = match bx {
            Some(c) => {
                let off = line.text.find('[').unwrap_or(0) + 1;
                marks.boxes.push(line.start + off);
                let mut st = box_status(c);
                if st == Status::Pending && says_blocked(&title) {
                    st = Status::Blocked;
                }
                st
            }
            None if wave.is_some() => {
                // Wave story: its items decide.
                let mut done = 0;
                let mut total = 0;
                let mut blocked = says_blocked(&title);
                for l in &ls[i + 1..end] {
                    if let Some((off, c, item)) = checklist_item(l, usize::MAX) {
                        total += 1;
                        marks.boxes.push(l.start + off);
                        if box_status(c) == Status::Completed {
                            done += 1;
                        } else if says_blocked(&item) {
                            blocked = true;
                        }
                    }
                }
                if total > 0 && done == total {
                    Status::Completed
                } else if blocked {
                    Status::Blocked
                } else if done > 0 {
                    Status::InProgress
                } else {
                    Status::Pending
                }
            }
            None => {
                let hashes = line.text.find('#').unwrap_or(0) + level;
                marks.insert_at = Some(line.start + hashes + 1);
                if says_blocked(&title) {
                    Status::Blocked
                } else {
                    Status::Pending
                }
            }
        };
        let story = Story {
            id,
            title,
            status,
            wave: wave.map(|w| w.2.clone()),
            text: block_text(i, end),
            span: Span::Lines { start: i + 1, end },
            depends_on: Vec::new(),
            priority: None,
            marks,
        };
        push(&mut stories, story, i + 1);
    }

    // Waves without story headings: their top-level checklist items are tasks.
    for (k, w) in waves.iter().enumerate() {
        if story_in_wave[k] {
            continue;
        }
        for (k, (id, title, status, i, end, off)) in items(&ls, &headings, w.0 + 1, w.1).into_iter().enumerate() {
            let n = k + 1;
            let id = id.unwrap_or_else(|| format!("W{}-T{n}", w.2));
            let story = Story {
                id,
                title,
                status,
                wave: Some(w.2.clone()),
                text: block_text(i, end),
                span: Span::Lines { start: i + 1, end },
                depends_on: Vec::new(),
                priority: None,
                marks: Marks { boxes: vec![ls[i].start + off], ..Marks::default() },
            };
            push(&mut stories, story, i + 1);
        }
    }

    // Plans with neither: the checklist items of task-list sections.
    if stories.is_empty() && waves.is_empty() {
        for (i, h) in headings.iter().enumerate() {
            let Some((level, t)) = h else { continue };
            if !is_task_section(t) {
                continue;
            }
            let end = block_end(i, *level);
            for (k, (id, title, status, j, e, off)) in items(&ls, &headings, i + 1, end).into_iter().enumerate() {
                let n = k + 1;
                let story = Story {
                    id: id.unwrap_or_else(|| format!("T{n}")),
                    title,
                    status,
                    wave: None,
                    text: block_text(j, e),
                    span: Span::Lines { start: j + 1, end: e },
                    depends_on: Vec::new(),
                    priority: None,
                    marks: Marks { boxes: vec![ls[j].start + off], ..Marks::default() },
                };
                push(&mut stories, story, j + 1);
            }
        }
    }

    // Keep file order.
    stories.sort_by_key(|s| match s.span {
        Span::Lines { start, .. } => start,
        Span::Index { index } => index,
    });
    Prd { format: Format::Markdown, title, stories, warnings }
}

/// Top-level checklist items between lines `a` and `b`: (own id, title, status, line, block end,
/// box offset in line). A numbered item `1. Title` gets the id `T1`.
#[allow(clippy::type_complexity)]
fn items(
    ls: &[Line],
    headings: &[Option<(usize, &str)>],
    a: usize,
    b: usize,
) -> Vec<(Option<String>, String, Status, usize, usize, usize)> {
    let mut out = Vec::new();
    let starts: Vec<(usize, usize, char, String)> = (a..b)
        .filter(|&i| headings[i].is_none())
        .filter_map(|i| checklist_item(&ls[i], 1).map(|(off, c, t)| (i, off, c, t)))
        .collect();
    for (k, (i, off, c, text)) in starts.iter().enumerate() {
        // The item's block: until the next top-level item, heading or unindented text.
        let mut end = starts.get(k + 1).map(|s| s.0).unwrap_or(b);
        if let Some(stop) = (i + 1..end).find(|&j| {
            headings[j].is_some()
                || (!ls[j].text.trim().is_empty() && !ls[j].text.starts_with([' ', '\t']) && !ls[j].in_fence)
        }) {
            end = stop;
        }
        let body = text.strip_prefix("Task:").or_else(|| text.strip_prefix("TASK:")).unwrap_or(text).trim();
        let (id, title) = if let Some((num, rest)) = body
            .split_once(". ")
            .filter(|(n, _)| !n.is_empty() && n.len() <= 4 && n.chars().all(|c| c.is_ascii_digit()))
        {
            (Some(format!("T{num}")), rest.trim().to_string())
        } else if let Some((id, title)) = id_and_title(body, false).filter(|(_, t)| !t.is_empty()) {
            (Some(id), title)
        } else {
            (None, body.to_string())
        };
        let mut status = box_status(*c);
        if status == Status::Pending && says_blocked(&title) {
            status = Status::Blocked;
        }
        out.push((id, title, status, *i, end, *off));
    }
    out
}

/// Change only the marks of `story`.
pub fn set_status(text: &str, story: &Story, status: Status) -> Result<String, super::PrdError> {
    let mark = match status {
        Status::Completed => 'x',
        Status::Pending => ' ',
        Status::InProgress => '~',
        Status::Blocked => '!',
    };
    let marks = &story.marks;
    let mut out = text.as_bytes().to_vec();
    if let Some(at) = marks.insert_at {
        if status == Status::Pending {
            return Ok(text.to_string());
        }
        let mut s = String::with_capacity(text.len() + 4);
        s.push_str(&text[..at]);
        s.push('[');
        s.push(mark);
        s.push_str("] ");
        s.push_str(&text[at..]);
        return Ok(s);
    }
    let multi = marks.boxes.len() > 1;
    if multi && !matches!(status, Status::Completed | Status::Pending) {
        return Err(super::PrdError::Invalid(format!(
            "story {} takes its status from its checklist; it can only be set to completed or pending",
            story.id
        )));
    }
    for &at in &marks.boxes {
        match out.get(at) {
            Some(b' ' | b'x' | b'X' | b'~' | b'-' | b'!' | b'/') => out[at] = mark as u8,
            _ => {
                return Err(super::PrdError::Invalid(format!(
                    "story {}: the text changed since it was parsed (no status mark at byte {at})",
                    story.id
                )))
            }
        }
    }
    String::from_utf8(out).map_err(|_| super::PrdError::Invalid("rewrite broke UTF-8".into()))
}
