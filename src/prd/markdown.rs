//! Markdown PRDs: Ralph story headings (`### [ ] US-001: Title`), the wave form (`## Wave 1 — …`
//! with `### S01: …` stories and `- [ ]` items, or checklist items as the tasks of a wave without
//! story headings), and task lists (`## TODOs` with `- [x] 1. Title`) in plans without either.
//!
//! Rules:
//! * Nothing inside fenced code blocks (```` ``` ```` or `~~~`, at any indentation) or multi-line
//!   HTML comments counts.
//! * A story heading is a heading of level 2–4 whose text is an optional box (`[ ]`, `[x]`/`[X]`
//!   completed, `[~]`/`[-]`/`[/]` in progress, `[!]` blocked) then an id, then `:`, ` - `, ` — `
//!   or ` – ` (after a box, a plain space will do). An id is letters, digits, `-`, `_` and `.`,
//!   starting with a letter, whose last `-`/`_`/`.` separated part holds a digit: `US-001`,
//!   `US-AUTH-01`, `S01`, `T-12`, `STORY-3`. So `### Week 1: …`, `### Phase 2 …`,
//!   `### L2-Squad: …`, `#### Acceptance Criteria` are not stories.
//! * A wave is a heading of level 1–3 starting with `Wave ` and a label: `## Wave 1 — Title` →
//!   `1`, `## Wave A: …` → `A`. Its section runs to the next heading of the same or a higher
//!   level or the next wave.
//! * A story's block runs from its heading to the line before the next heading of the same or a
//!   higher level, the next story heading or the next wave, whichever comes first.
//! * Outside waves, a story heading's box decides its status; no box means pending. The heading
//!   marks it blocked when its box is open and its title says `BLOCKED` in capitals, starts with
//!   "blocked", or has `[blocked]`/`(blocked)` in any case.
//! * Under a wave, a heading's box still decides (its checklist items are then acceptance
//!   criteria and are ignored). A story without a box takes its status from the `- [ ]` items in
//!   its block (at any depth): all checked → completed; else the word "blocked" (any case) in the
//!   heading or an unchecked item → blocked; some checked → in_progress; none → pending.
//! * A wave with no story heading has its top-level checklist items (indent ≤ 1) as tasks. A
//!   task's id is its own leading id (`US-004: …`, `T1: …`) or its number (`1. …` → `T1`,
//!   `6.5. …` → `T6.5`), else `W<label>-T<position>`. Its box decides; an open box whose text says
//!   blocked as for headings above is blocked.
//! * When neither gives any story, the checklist items of task-list sections (`## TODOs`,
//!   `## Tasks`, …) are the tasks, with the same ids (`T<number>`, else `T<position>`). A wave
//!   section with no tasks of its own that lists `N. …` gives its label to task `TN`.
//! * A repeated story id keeps the first; the repeat is reported in `Prd::warnings`.

use super::{Format, Marks, Prd, PrdError, Span, Status, Story};

#[derive(Debug)]
struct Line<'a> {
    /// Byte offset of the line's start (after a BOM on the first line).
    start: usize,
    /// The line without its line ending (and without a BOM).
    text: &'a str,
    /// The line with its ending.
    raw: &'a str,
    /// Inside (or delimiting) a fenced code block or a multi-line HTML comment.
    hidden: bool,
    /// The line opens such a block.
    opens: bool,
}

/// A fence opener/closer: (char, run length, rest of the line).
fn fence_marker(trimmed: &str) -> Option<(char, usize, &str)> {
    ['`', '~'].into_iter().find_map(|c| {
        let n = trimmed.chars().take_while(|x| *x == c).count();
        let rest = &trimmed[n..];
        // A backtick fence's info string may not contain a backtick (CommonMark), which keeps
        // inline code like ```` ```x``` ```` at a line start from opening a fence.
        (n >= 3 && !(c == '`' && rest.contains('`'))).then_some((c, n, rest))
    })
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::with_capacity(text.bytes().filter(|b| *b == b'\n').count() + 1);
    let mut offset = 0;
    let mut fence: Option<(char, usize)> = None;
    let mut comment = false;
    for raw in text.split_inclusive('\n') {
        let mut t = raw.strip_suffix('\n').unwrap_or(raw);
        t = t.strip_suffix('\r').unwrap_or(t);
        let mut start = offset;
        offset += raw.len();
        if start == 0 {
            if let Some(rest) = t.strip_prefix('\u{feff}') {
                t = rest;
                start = '\u{feff}'.len_utf8();
            }
        }
        let trimmed = t.trim_start_matches([' ', '\t']);
        let was_hidden = fence.is_some() || comment;
        let hidden = if let Some((c, n)) = fence {
            if let Some((c2, n2, rest)) = fence_marker(trimmed) {
                if c2 == c && n2 >= n && rest.trim().is_empty() {
                    fence = None;
                }
            }
            true
        } else if comment {
            if t.contains("-->") {
                comment = false;
            }
            true
        } else if let Some((c, n, _)) = fence_marker(trimmed) {
            fence = Some((c, n));
            true
        } else if let Some(after) = trimmed.strip_prefix("<!--") {
            if !after.contains("-->") {
                comment = true;
            }
            true
        } else {
            false
        };
        out.push(Line { start, text: t, raw, hidden, opens: hidden && !was_hidden });
    }
    out
}

/// `(level, text after the hashes)` of an ATX heading.
fn heading<'a>(line: &Line<'a>) -> Option<(usize, &'a str)> {
    if line.hidden {
        return None;
    }
    let t = line.text;
    let indent = t.len() - t.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let t = &t[indent..];
    let level = t.bytes().take_while(|c| *c == b'#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &t[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim();
    // A closing sequence of `#`s (preceded by a space) is not part of the text.
    let without = rest.trim_end_matches('#');
    let text = if without.is_empty() || without.ends_with([' ', '\t']) { without.trim_end() } else { rest };
    Some((level, text))
}

/// A box `[c]` at the start of `s`: (status char, rest after the box).
fn leading_box(s: &str) -> Option<(char, &str)> {
    let b = s.as_bytes();
    if b.len() >= 3 && b[0] == b'[' && b[2] == b']' && matches!(b[1], b' ' | b'x' | b'X' | b'~' | b'-' | b'!' | b'/') {
        return Some((b[1] as char, &s[3..]));
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
        && tok.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !tok.ends_with(['.', '-', '_'])
        && tok.rsplit(['-', '_', '.']).next().is_some_and(|last| last.chars().any(|c| c.is_ascii_digit()))
}

/// Split `US-001: Title` / `S01 - Title` / `US-001 — Title` into (id, title). With `loose`
/// (after a box), `US-001 Title` will do too.
fn id_and_title(s: &str, loose: bool) -> Option<(String, String)> {
    let s = s.trim_start();
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))).unwrap_or(s.len());
    let tok = &s[..end];
    // `US-001.` or `US-001-` before the separator: the trailing mark is punctuation.
    let tok = tok.trim_end_matches(['.', '-']);
    if !is_id(tok) {
        return None;
    }
    let rest = &s[tok.len()..];
    let rest_t = rest.trim_start();
    let title = if let Some(r) = rest_t.strip_prefix(':') {
        r
    } else if let Some(r) = rest_t.strip_prefix('—').or_else(|| rest_t.strip_prefix('–')) {
        r
    } else if let Some(r) = rest_t.strip_prefix("- ").or_else(|| rest_t.strip_prefix("-\t")) {
        r
    } else if rest_t == "-" || rest_t.is_empty() {
        ""
    } else if loose && rest.starts_with([' ', '\t']) {
        rest_t
    } else {
        // `US-005. Title` after a box.
        rest.strip_prefix(". ").filter(|_| loose)?
    };
    Some((tok.to_string(), title.trim().to_string()))
}

/// The word "blocked" in any case (the wave-form rule).
fn says_blocked(s: &str) -> bool {
    s.split(|c: char| !c.is_ascii_alphabetic()).any(|w| w.eq_ignore_ascii_case("blocked"))
}

/// A title that marks its story blocked: `BLOCKED` in capitals, a leading "blocked", or
/// `[blocked]`/`(blocked)` in any case — not a title that merely mentions blocked users.
fn marked_blocked(s: &str) -> bool {
    // Every form below has the word in it, in some case; most titles do not.
    if !s.as_bytes().windows(7).any(|w| w.eq_ignore_ascii_case(b"blocked")) {
        return false;
    }
    let t = s.trim_start_matches(|c: char| !c.is_alphanumeric());
    let lower = s.to_ascii_lowercase();
    s.split(|c: char| !c.is_ascii_alphabetic()).any(|w| w == "BLOCKED")
        || (t.len() >= 7
            && t.is_char_boundary(7)
            && t[..7].eq_ignore_ascii_case("blocked")
            && !t[7..].starts_with(|c: char| c.is_ascii_alphabetic()))
        || ["[blocked", "(blocked"].iter().any(|p| {
            lower.match_indices(p).any(|(i, _)| !lower[i + p.len()..].starts_with(|c: char| c.is_ascii_alphabetic()))
        })
}

/// A wave heading's label: `Wave 1 — Title` → `1`, `Wave A: …` → `A`.
fn wave_label(text: &str) -> Option<String> {
    let head = text.get(..5)?;
    if !head.eq_ignore_ascii_case("wave ") {
        return None;
    }
    let label: String = text[5..].trim_start().chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    (!label.is_empty() && label.len() <= 16).then_some(label)
}

/// A checklist item: (byte offset of the box char within the line, box char, item text).
fn checklist_item(line: &Line<'_>, max_indent: usize) -> Option<(usize, char, String)> {
    if line.hidden {
        return None;
    }
    let t = line.text;
    let indent = t.len() - t.trim_start_matches([' ', '\t']).len();
    if indent > max_indent {
        return None;
    }
    let rest = &t[indent..];
    let after = rest.strip_prefix(['-', '*', '+'])?;
    let after = after.strip_prefix(' ')?;
    let (c, text) = leading_box(after)?;
    if !(text.is_empty() || text.starts_with([' ', '\t'])) {
        return None;
    }
    Some((indent + 3, c, text.trim().to_string()))
}

/// A task number at the start of `s`: `1. Title`, `6.5. Title`, `9.1 Title`, `2) Title` →
/// (`"6.5"`, rest).
fn task_number(s: &str) -> Option<(&str, &str)> {
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let tok = &s[..end];
    let rest = &s[end..];
    let (num, rest) = if let Some(r) = rest.strip_prefix(')') {
        (tok, r)
    } else if let Some(n) = tok.strip_suffix('.') {
        (n, rest)
    } else if tok.contains('.') {
        (tok, rest)
    } else {
        return None;
    };
    let ok = !num.is_empty()
        && num.len() <= 12
        && num.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    (ok && (rest.is_empty() || rest.starts_with([' ', '\t']))).then(|| (num, rest.trim()))
}

/// Whether a section heading names a task list (`TODOs`, `Tasks`).
fn is_task_section(text: &str) -> bool {
    let t = text.trim_start_matches(|c: char| !c.is_alphabetic()).trim_end_matches(|c: char| !c.is_alphanumeric());
    let t = t.to_lowercase();
    matches!(
        t.as_str(),
        "todos"
            | "todo"
            | "to do"
            | "to-do"
            | "to dos"
            | "tasks"
            | "task list"
            | "tasklist"
            | "work items"
            | "implementation tasks"
    )
}

/// A story heading: (box char and its byte offset in the text, id, title).
struct StoryHead {
    line: usize,
    level: usize,
    bx: Option<(char, usize)>,
    id: String,
    title: String,
}

fn story_head(line: &Line<'_>, i: usize, h: Option<(usize, &str)>) -> Option<StoryHead> {
    let (level, t) = h?;
    if !(2..=4).contains(&level) || wave_label(t).is_some() {
        return None;
    }
    let (bx, rest) = match leading_box(t) {
        Some((c, rest)) => {
            // `t` is a sub-slice of `line.text`, so the box char's offset is found by address.
            let off = t.as_ptr() as usize - line.text.as_ptr() as usize + 1;
            (Some((c, line.start + off)), rest)
        }
        None => (None, t),
    };
    let (id, title) = id_and_title(rest, bx.is_some())?;
    Some(StoryHead { line: i, level, bx, id, title })
}

/// A task item: (id it names, title, status, line, block end, box byte offset).
struct Task {
    id: Option<String>,
    title: String,
    status: Status,
    line: usize,
    end: usize,
    at: usize,
}

/// Top-level checklist items between lines `a` and `b`.
fn tasks(ls: &[Line], headings: &[Option<(usize, &str)>], a: usize, b: usize) -> Vec<Task> {
    let starts: Vec<(usize, usize, char, String)> = (a..b)
        .filter(|&i| headings[i].is_none())
        .filter_map(|i| checklist_item(&ls[i], 1).map(|(off, c, t)| (i, off, c, t)))
        .collect();
    let mut out = Vec::new();
    for (k, (i, off, c, text)) in starts.iter().enumerate() {
        // The item's block: until the next top-level item, a heading or unindented text.
        let mut end = starts.get(k + 1).map(|s| s.0).unwrap_or(b);
        if let Some(stop) = (i + 1..end).find(|&j| {
            headings[j].is_some()
                || ((!ls[j].hidden || ls[j].opens)
                    && !ls[j].text.trim().is_empty()
                    && !ls[j].text.starts_with([' ', '\t']))
        }) {
            end = stop;
        }
        let body = ["Task:", "TASK:", "task:"].iter().find_map(|p| text.strip_prefix(p)).unwrap_or(text).trim();
        let (id, title) = if let Some((num, rest)) = task_number(body) {
            (Some(format!("T{num}")), rest.to_string())
        } else if let Some((id, title)) = id_and_title(body, false).filter(|(_, t)| !t.is_empty()) {
            (Some(id), title)
        } else {
            (None, body.to_string())
        };
        let mut status = box_status(*c);
        if status == Status::Pending && marked_blocked(&title) {
            status = Status::Blocked;
        }
        out.push(Task { id, title, status, line: *i, end, at: ls[*i].start + off });
    }
    out
}

/// Parse markdown. Never fails: text without stories gives a PRD without stories.
pub fn parse(text: &str) -> Prd {
    let ls = lines(text);
    let headings: Vec<Option<(usize, &str)>> = ls.iter().map(heading).collect();
    let title = headings.iter().flatten().find(|(l, _)| *l == 1).map(|(_, t)| t.to_string());
    let heads: Vec<StoryHead> = (0..ls.len()).filter_map(|i| story_head(&ls[i], i, headings[i])).collect();
    let is_wave = |i: usize| headings[i].is_some_and(|(l, t)| l <= 3 && wave_label(t).is_some());
    let head_lines: Vec<usize> = heads.iter().map(|h| h.line).collect();
    let is_head = |i: usize| head_lines.binary_search(&i).is_ok();
    // Where the section of the heading at `i` (of `level`) ends (exclusive).
    let block_end = |i: usize, level: usize| -> usize {
        (i + 1..ls.len())
            .find(|&j| headings[j].is_some_and(|(l, _)| l <= level) || is_head(j) || is_wave(j))
            .unwrap_or(ls.len())
    };
    let block_text = |a: usize, b: usize| -> String { raw_text(text, &ls[a..b]).to_string() };

    let mut waves: Vec<Wave> = Vec::new();
    for (i, h) in headings.iter().enumerate() {
        if let Some((level, t)) = h {
            if let Some(label) = wave_label(t).filter(|_| *level <= 3) {
                let end = (i + 1..ls.len())
                    .find(|&j| headings[j].is_some_and(|(l, _)| l <= *level) || is_wave(j))
                    .unwrap_or(ls.len());
                waves.push(Wave { line: i, end, label, has_heads: false });
            }
        }
    }
    let wave_at = |waves: &[Wave], i: usize| waves.iter().rposition(|w| w.line < i && i < w.end);
    for h in &heads {
        if let Some(k) = wave_at(&waves, h.line) {
            waves[k].has_heads = true;
        }
    }

    let mut stories: Vec<Story> = Vec::with_capacity(heads.len());

    // Story headings.
    for h in heads {
        let i = h.line;
        let end = block_end(i, h.level);
        let wave = wave_at(&waves, i);
        let mut marks = Marks::default();
        let status = match (h.bx, wave) {
            (Some((c, at)), _) => {
                marks.boxes.push(at);
                let blocked = if wave.is_some() { says_blocked(&h.title) } else { marked_blocked(&h.title) };
                match box_status(c) {
                    Status::Pending if blocked => Status::Blocked,
                    st => st,
                }
            }
            // Wave story: its items decide.
            (None, Some(_)) => wave_story_status(&ls, i, end, &h.title, &mut marks),
            (None, None) => {
                marks.insert_at = Some(insert_point(&ls[i]));
                if marked_blocked(&h.title) {
                    Status::Blocked
                } else {
                    Status::Pending
                }
            }
        };
        let story = Story {
            id: h.id,
            title: h.title,
            status,
            wave: wave.map(|k| waves[k].label.clone()),
            text: block_text(i, end),
            span: Span::Lines { start: i + 1, end },
            depends_on: Vec::new(),
            priority: None,
            marks,
        };
        stories.push(story);
    }

    // Waves without story headings: their top-level checklist items are tasks.
    let mut empty_waves = Vec::new();
    for w in &waves {
        if w.has_heads {
            continue;
        }
        let found = tasks(&ls, &headings, w.line + 1, w.end);
        if found.is_empty() {
            empty_waves.push(w);
        }
        for (k, t) in found.into_iter().enumerate() {
            let id = t.id.clone().unwrap_or_else(|| format!("W{}-T{}", w.label, k + 1));
            stories.push(task_story(&ls, t, id, Some(w.label.clone())));
        }
    }

    // Plans with neither: the checklist items of task-list sections.
    if stories.is_empty() {
        stories = task_list_stories(&ls, &headings, &empty_waves);
    }

    let (kept, warnings, by_id) = first_of_each_id(stories);
    Prd { format: Format::Markdown, title, stories: kept, warnings, by_id }
}

/// A wave heading (`## Wave 1`, up to level 3) and the lines it spans.
struct Wave {
    line: usize,
    end: usize,
    label: String,
    has_heads: bool,
}

/// The status of a story heading inside a wave, without a box of its own: its checklist items
/// decide (all checked: completed; one says blocked: blocked; some checked: in progress). Every
/// item's box is marked; without items, where a status would be written is.
fn wave_story_status(ls: &[Line], i: usize, end: usize, title: &str, marks: &mut Marks) -> Status {
    let (mut done, mut total, mut blocked) = (0, 0, says_blocked(title));
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
    if total == 0 {
        marks.insert_at = Some(insert_point(&ls[i]));
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

/// The stories of a PRD with neither story headings nor wave tasks: the checklist items of its
/// task-list sections. `N. …` lines listed under a wave without tasks of its own put task `TN`
/// in that wave.
fn task_list_stories(ls: &[Line], headings: &[Option<(usize, &str)>], empty_waves: &[&Wave]) -> Vec<Story> {
    let mut wave_of = std::collections::HashMap::new();
    for w in empty_waves {
        for l in &ls[w.line + 1..w.end] {
            let t = l.text.trim_start_matches([' ', '\t']);
            if l.hidden || l.text.len() - t.len() > 3 {
                continue;
            }
            if let Some((num, _)) = task_number(t) {
                wave_of.entry(format!("T{num}")).or_insert_with(|| w.label.clone());
            }
        }
    }
    let mut stories = Vec::new();
    for (i, h) in headings.iter().enumerate() {
        let Some((level, t)) = h else { continue };
        if !is_task_section(t) {
            continue;
        }
        let end = (i + 1..ls.len()).find(|&j| headings[j].is_some_and(|(l, _)| l <= *level)).unwrap_or(ls.len());
        for (k, t) in tasks(ls, headings, i + 1, end).into_iter().enumerate() {
            let id = t.id.clone().unwrap_or_else(|| format!("T{}", k + 1));
            let wave = wave_of.get(&id).cloned();
            stories.push(task_story(ls, t, id, wave));
        }
    }
    stories
}

/// A checklist task as a story `id` (in `wave`): its lines are its text, its box its mark.
fn task_story(ls: &[Line], t: Task, id: String, wave: Option<String>) -> Story {
    Story {
        id,
        title: t.title,
        status: t.status,
        wave,
        text: ls[t.line..t.end].iter().map(|l| l.raw).collect(),
        span: Span::Lines { start: t.line + 1, end: t.end },
        depends_on: Vec::new(),
        priority: None,
        marks: Marks { boxes: vec![t.at], ..Marks::default() },
    }
}

/// The text of consecutive lines of `text`, line endings included: one slice of it.
fn raw_text<'a>(text: &'a str, ls: &[Line<'a>]) -> &'a str {
    match (ls.first(), ls.last()) {
        (Some(a), Some(b)) => {
            // `raw` is a sub-slice of `text`: its offset is found by address.
            let start = a.raw.as_ptr() as usize - text.as_ptr() as usize;
            let end = b.raw.as_ptr() as usize - text.as_ptr() as usize + b.raw.len();
            &text[start..end]
        }
        _ => "",
    }
}

/// The stories in file order, each id once: a repeated id keeps the first, with a warning. The
/// positions by id found on the way are the PRD's index.
fn first_of_each_id(mut stories: Vec<Story>) -> (Vec<Story>, Vec<String>, super::StoryIndex) {
    stories.sort_by_key(line_of);
    let mut kept: Vec<Story> = Vec::with_capacity(stories.len());
    let mut first_at: std::collections::HashMap<String, usize> =
        std::collections::HashMap::with_capacity(stories.len());
    let mut warnings = Vec::new();
    for story in stories {
        if let Some(&first) = first_at.get(&story.id) {
            warnings.push(format!(
                "story {} appears again at line {} (first at line {}); the first counts",
                story.id,
                line_of(&story),
                line_of(&kept[first])
            ));
        } else {
            first_at.insert(story.id.clone(), kept.len());
            kept.push(story);
        }
    }
    (kept, warnings, super::StoryIndex::from(first_at))
}

fn line_of(s: &Story) -> usize {
    match s.span {
        Span::Lines { start, .. } => start,
        Span::Index { index } => index,
    }
}

/// Where `[x] ` goes in a heading without a box: after the `#`s and the whitespace that follows.
fn insert_point(line: &Line<'_>) -> usize {
    let t = line.text;
    let hashes = t.find('#').unwrap_or(0);
    let after = &t[hashes..];
    let n = after.bytes().take_while(|b| *b == b'#').count();
    let ws = after[n..].bytes().take_while(|b| matches!(b, b' ' | b'\t')).count();
    line.start + hashes + n + ws
}

/// Change only the marks of `story`: its heading box, or its checklist items (a wave story), or
/// insert `[x] ` (`[~] `, `[!] `) before the id of a heading without a box. Setting a heading
/// without a box to pending changes nothing. The result is parsed again and must give the story
/// the new status; when its text decides otherwise (a title saying BLOCKED, a wave story asked to
/// be in progress) the rewrite is refused with [`PrdError::Invalid`].
pub fn set_status(text: &str, story: &Story, status: Status) -> Result<String, PrdError> {
    let mark = match status {
        Status::Completed => 'x',
        Status::Pending => ' ',
        Status::InProgress => '~',
        Status::Blocked => '!',
    };
    let marks = &story.marks;
    let out = if let Some(at) = marks.insert_at {
        if status == Status::Pending {
            text.to_string()
        } else if text.is_char_boundary(at) {
            format!("{}[{mark}] {}", &text[..at], &text[at..])
        } else {
            return Err(changed(story, at));
        }
    } else {
        if marks.boxes.len() > 1 && !matches!(status, Status::Completed | Status::Pending) {
            return Err(PrdError::Invalid(format!(
                "story {} takes its status from its checklist items; it can be set only to completed or pending",
                story.id
            )));
        }
        let mut out = text.as_bytes().to_vec();
        for &at in &marks.boxes {
            match out.get(at) {
                Some(b' ' | b'x' | b'X' | b'~' | b'-' | b'!' | b'/') => out[at] = mark as u8,
                _ => return Err(changed(story, at)),
            }
        }
        String::from_utf8(out).map_err(|_| changed(story, 0))?
    };
    let again = parse(&out);
    match again.story(&story.id) {
        Some(s) if s.status == status => Ok(out),
        Some(s) => Err(PrdError::Invalid(format!(
            "story {} would still read as {} (its text decides that); edit it by hand",
            story.id,
            s.status.as_str()
        ))),
        None => Err(PrdError::Invalid(format!("story {} would be lost by the rewrite", story.id))),
    }
}

fn changed(story: &Story, at: usize) -> PrdError {
    PrdError::Invalid(format!("story {}: the text changed since it was parsed (no status mark at byte {at})", story.id))
}
