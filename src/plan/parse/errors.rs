//! The plan's errors as a user reads them: a line (and column for YAML syntax), the key that
//! was meant when a key is unknown.

use super::{BOULDER_KEYS, EMPTY_PLAN, MAX_FLOW_DEPTH, SETTINGS_KEYS};
use crate::plan::PlanError;

/// A failure raised by our own visitors: the message, and where it is when we know better than
/// serde_yaml's mark (a key we read before deciding it is wrong).
pub(super) struct Failure {
    pub(super) message: String,
    pub(super) at: Option<(usize, usize)>,
    /// The message names no place at all (the empty plan).
    pub(super) bare: bool,
}

pub(super) fn yaml_error(err: &serde_yaml::Error, failure: Option<Failure>, text: &str) -> PlanError {
    let location = err.location().map(|l| (l.line(), l.column()));
    if let Some(Failure { message, at, bare }) = failure {
        if bare {
            return PlanError { message, line: None, column: None };
        }
        let at = at.or(location);
        return PlanError {
            message: match at {
                Some((line, _)) => format!("line {line}: {message}"),
                None => message,
            },
            line: at.map(|a| a.0),
            column: at.map(|a| a.1),
        };
    }
    let raw = err.to_string();
    let Some((line, column)) = location else {
        let message = if raw.contains("more than one document") {
            if let Some(line) = second_document_line(text) {
                return PlanError {
                    message: format!("line {line}: the plan holds more than one YAML document; keep it to one"),
                    line: Some(line),
                    column: None,
                };
            }
            "the plan holds more than one YAML document (a second `---` line); keep it to one".to_string()
        } else if raw.contains("EOF while parsing") {
            EMPTY_PLAN.to_string()
        } else if raw.contains("repetition limit") {
            "the plan expands aliases too often (repetition limit exceeded); write the values out".to_string()
        } else {
            raw
        };
        return PlanError { message, line: None, column: None };
    };
    let mut message = raw.replacen(&format!(" at line {line} column {column}"), "", 1);
    if let Some(i) = message.find("invalid type: ").or_else(|| message.find("invalid value: ")) {
        // serde's wording, possibly after a `path.to.key: ` prefix: turn it around.
        let body = &message[i..];
        let body = body.split_once(": ").map(|(_, b)| b).unwrap_or(body);
        let reworded = match body.split_once(", expected ") {
            Some((found, expected)) => format!("expected {expected}, found {}", describe_found(found)),
            None => body.to_string(),
        };
        return PlanError { message: format!("line {line}: {reworded}"), line: Some(line), column: Some(column) };
    }
    if message.contains("recursion limit exceeded") {
        message = "the plan is nested too deeply (recursion limit exceeded)".into();
    }
    let line_text = text.lines().nth(line.saturating_sub(1)).unwrap_or("");
    if line_text.contains('\t') {
        message.push_str(" (YAML does not allow tabs for indentation; use spaces)");
    }
    PlanError { message: format!("line {line}, column {column}: {message}"), line: Some(line), column: Some(column) }
}

/// The line where `[` and `{` (outside comments) first nest deeper than [`MAX_FLOW_DEPTH`].
/// Brackets inside quoted strings count too: no real plan has hundreds of them unbalanced.
pub(super) fn too_deep(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, line) in text.lines().enumerate() {
        let mut after_space = true;
        for c in line.chars() {
            match c {
                '#' if after_space => break,
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        return Some(i + 1);
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            after_space = c == ' ' || c == '\t';
        }
    }
    None
}

/// The line of the `---` that starts a second document, when a simple scan finds one.
pub(super) fn second_document_line(text: &str) -> Option<usize> {
    let mut content = false;
    for (i, line) in text.lines().enumerate() {
        let marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        if marker && content {
            return Some(i + 1);
        }
        let t = line.trim();
        if marker || (!t.is_empty() && !t.starts_with('#') && !t.starts_with('%')) {
            content = true;
        }
    }
    None
}

pub(super) fn describe_found(found: &str) -> String {
    match found {
        "map" => "a mapping".into(),
        "sequence" => "a list".into(),
        "unit value" | "Option value" => "nothing (null)".into(),
        "enum" => "a tagged value".into(),
        // serde names the type it held a number too large for 64 bits in.
        other => other.trim_end_matches(" as u128").trim_end_matches(" as i128").into(),
    }
}

/// Closest candidate to `key` by edit distance (case and `-`/`_` ignored), when close enough to
/// be a likely typo.
pub(crate) fn closest<'a>(key: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let norm = |s: &str| s.to_lowercase().replace('-', "_");
    let k = norm(key);
    if k.chars().count() > 100 {
        return None;
    }
    let limit = 2.max(k.chars().count() / 3);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edit_distance(&k, &norm(c));
        if d <= limit && d < k.chars().count().max(1) && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// Optimal string alignment distance: insertions, deletions, substitutions and transpositions.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1).min(d[i * w + j - 1] + 1).min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

pub(super) fn unknown_key_message(key: &str, place: &str, valid: &[&str]) -> String {
    let shown = quote(key);
    if key == "<<" {
        return format!("YAML merge keys (`<<`) are not supported {place}; write the keys out");
    }
    if let Some(c) = closest(key, valid.iter().copied()) {
        return format!("unknown key {shown} {place}; did you mean \"{c}\"?");
    }
    // A key one level off: `cooldown` directly under settings, `base_branch` at the top.
    let (deeper, under) = match place {
        "in settings" => (BOULDER_KEYS, "settings.boulder"),
        "at the top level" => (SETTINGS_KEYS, "settings"),
        _ => (&[][..], ""),
    };
    if let Some(c) = closest(key, deeper.iter().copied()) {
        return format!("unknown key {shown} {place}; \"{c}\" belongs under `{under}`");
    }
    format!("unknown key {shown} {place}; valid keys: {}", valid.join(", "))
}

/// A name quoted for a message, shortened when it is huge.
pub(crate) fn quote(s: &str) -> String {
    if s.chars().count() > 80 {
        let cut: String = s.chars().take(77).collect();
        format!("{:?}", format!("{cut}..."))
    } else {
        format!("{s:?}")
    }
}
