//! `streams.yaml` text → [`Plan`], with errors that name the line.
//!
//! serde_yaml 0.9 keeps no positions in its values, so the plan is read with hand-written
//! visitors straight from the YAML events. Errors raised while a value is read carry that value's
//! position. Keys need their position too (for unknown and duplicate keys, and for
//! [`StreamDef::line`]): a key is read with a seed that stashes its text and then fails on
//! purpose, so serde_yaml stamps the key's mark on the error; the mapping goes on with the value
//! (serde_yaml's `MapAccess` has already consumed the key event). serde_yaml 0.9 is frozen
//! (deprecated), and the tests pin this behaviour.
//!
//! Choices:
//! * An empty file (or only comments, or `null`) is an error: "the plan is empty". A plan with
//!   `streams: {}` (or no `streams` key) is a valid plan without streams.
//! * `version` may be left out (it means 1); any other value than 1 is an error.
//! * A missing or `null` value means "the default"; so does an empty string for `branch`, `prd`,
//!   `agent` and the settings strings.
//! * `paths`, `creates`, `depends_on`, `shared_read` and `copy_into_worktree` take a list or a
//!   single string; a stream's `creates` globs are added to its `paths` (those it does not list
//!   already), and kept apart so that `validate` does not expect them in the tree;
//!   `stories` must be a list (entries may be numbers: their text is kept, `1.10` stays `1.10`).
//! * Durations are `30s`, `5m`, `1h30m`, … or a number of seconds.
//! * Booleans also accept `yes/no/on/off`; `backoff_multiplier` is 1 to 1000; `max_failures`,
//!   `max_depth`, `parallel_limit` and `max_iterations` are whole numbers ≥ 1.
//! * YAML anchors and aliases work; merge keys (`<<`) do not (they are an unknown key).
//! * Hostile input is bounded: at most 8 MiB of text, flow collections nested at most 200 deep,
//!   1000 streams and 100 000 list entries and keys all told (aliases count every time they are
//!   expanded). Nothing panics.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{
    AdhocStreams, BoulderSettings, Level, MergeStrategy, OnConflict, Plan, PlanError, Settings, StreamDef, DEFAULT_PRD,
};

pub(crate) const TOP_KEYS: &[&str] = &["version", "prd", "streams", "settings"];
pub(crate) const STREAM_KEYS: &[&str] =
    &["branch", "stories", "paths", "creates", "depends_on", "agent", "max_iterations", "merge_strategy"];
pub(crate) const SETTINGS_KEYS: &[&str] = &[
    "base_branch",
    "worktree_dir",
    "merge_strategy",
    "auto_merge",
    "path_overlap",
    "ownership",
    "undeclared_paths",
    "shared_read",
    "copy_into_worktree",
    "setup",
    "verify",
    "prompt_template",
    "port_base",
    "port_stride",
    "agents",
    "boulder",
    "claim_remote",
    "merge_remote",
    "on_conflict",
    "inherit_guardrails",
    "inherit_progress",
    "adhoc_streams",
];
pub(crate) const BOULDER_KEYS: &[&str] = &[
    "idle_threshold",
    "cooldown",
    "backoff_multiplier",
    "max_failures",
    "recovery_window",
    "max_depth",
    "parallel_limit",
    "inherit_cooldowns",
];

/// The message for an empty plan file.
pub const EMPTY_PLAN: &str = "the plan is empty; see `git boulder stream suggest` to propose one from the PRD";

const MAX_BYTES: usize = 8 << 20;
const MAX_STREAMS: usize = 1000;
const MAX_ENTRIES: usize = 1_000_000;
/// libyaml takes time quadratic in the nesting of flow mappings; no valid plan nests past a
/// handful of levels.
const MAX_FLOW_DEPTH: usize = 200;

/// The text of the deliberate error a key probe raises; control characters keep it unique.
const KEY_PROBE: &str = "\u{1}boulder-key-probe\u{1}";

/// Parse the plan text. Errors read like `line 9: unknown key "pahts" in stream "auth"; did you
/// mean "paths"?` (the caller prefixes the file name); YAML syntax errors also name the column.
pub fn parse(text: &str) -> Result<Plan, PlanError> {
    // A byte order mark (editors on Windows write one) is not part of the YAML.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.len() > MAX_BYTES {
        return Err(PlanError {
            message: format!("the plan is {} bytes long; at most {MAX_BYTES} are read", text.len()),
            line: None,
            column: None,
        });
    }
    if let Some(line) = too_deep(text) {
        return Err(PlanError {
            message: format!("line {line}: the plan nests lists and mappings more than {MAX_FLOW_DEPTH} deep"),
            line: Some(line),
            column: None,
        });
    }
    let ctx = Ctx::default();
    let result = PlanSeed { ctx: &ctx }.deserialize(serde_yaml::Deserializer::from_str(text));
    let err = match result {
        Ok(plan) => return Ok(plan),
        Err(err) => err,
    };
    // Syntax first: a syntax error further down is reported before any problem with the content
    // above it. A plan that parsed has none (serde_yaml reads the whole document's events before
    // the visitors run, and refuses a syntax error after them), so this cheap pass that follows
    // no aliases runs only when the parse failed.
    if let Err(err) = serde_yaml::from_str::<IgnoredAny>(text) {
        if err.location().is_none() {
            // "More than one document" is also what serde_yaml says when junk follows a complete
            // document (`{a: 1}` then `}`): the second "document" then has the syntax error.
            let second = serde_yaml::Deserializer::from_str(text).nth(1);
            if let Some(Err(err2)) = second.map(IgnoredAny::deserialize) {
                if err2.location().is_some() {
                    return Err(yaml_error(&err2, None, text));
                }
            }
        }
        return Err(yaml_error(&err, None, text));
    }
    let failure = ctx.failure.borrow_mut().take();
    Err(yaml_error(&err, failure, text))
}

// ---------------------------------------------------------------------------------------------
// Errors

/// A failure raised by our own visitors: the message, and where it is when we know better than
/// serde_yaml's mark (a key we read before deciding it is wrong).
struct Failure {
    message: String,
    at: Option<(usize, usize)>,
    /// The message names no place at all (the empty plan).
    bare: bool,
}

fn yaml_error(err: &serde_yaml::Error, failure: Option<Failure>, text: &str) -> PlanError {
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
fn too_deep(text: &str) -> Option<usize> {
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
fn second_document_line(text: &str) -> Option<usize> {
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

fn describe_found(found: &str) -> String {
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

fn unknown_key_message(key: &str, place: &str, valid: &[&str]) -> String {
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

// ---------------------------------------------------------------------------------------------
// Shared parse state

#[derive(Default)]
struct Ctx {
    failure: RefCell<Option<Failure>>,
    stashed_key: RefCell<Option<String>>,
    entries: Cell<usize>,
}

impl Ctx {
    /// Record our own error; `at` overrides serde_yaml's mark (used for keys read earlier).
    fn fail<E: de::Error>(&self, message: impl Into<String>, at: Option<(usize, usize)>) -> E {
        let message = message.into();
        let err = E::custom(&message);
        *self.failure.borrow_mut() = Some(Failure { message, at, bare: false });
        err
    }

    /// Record our own error that has no place in the file.
    fn fail_bare<E: de::Error>(&self, message: &str) -> E {
        *self.failure.borrow_mut() = Some(Failure { message: message.into(), at: None, bare: true });
        E::custom(message)
    }

    /// Count one list entry or key against the budget.
    fn count<E: de::Error>(&self) -> Result<(), E> {
        let n = self.entries.get() + 1;
        self.entries.set(n);
        if n > MAX_ENTRIES {
            return Err(self.fail(
                format!("the plan has more than {MAX_ENTRIES} keys and list entries (aliases count each time they are used)"),
                None,
            ));
        }
        Ok(())
    }
}

/// A mapping key with its 1-based position.
struct Key {
    name: String,
    line: usize,
    column: usize,
}

impl Key {
    fn at(&self) -> Option<(usize, usize)> {
        Some((self.line, self.column))
    }
}

/// Read the next key of a mapping together with its position (see the module docs).
fn next_key<'de, A: MapAccess<'de>>(map: &mut A, ctx: &Ctx) -> Result<Option<Key>, A::Error> {
    ctx.stashed_key.borrow_mut().take();
    match map.next_key_seed(KeyProbe { ctx }) {
        Ok(None) => Ok(None),
        Ok(Some(never)) => match never {},
        Err(err) => match ctx.stashed_key.borrow_mut().take() {
            Some(name) => {
                ctx.count()?;
                let (line, column) = probe_position(&err.to_string());
                Ok(Some(Key { name, line, column }))
            }
            None => Err(err),
        },
    }
}

/// The position serde_yaml appended to a key probe's message: ` at line L column C`, left out
/// only for the very first character of the document.
fn probe_position(display: &str) -> (usize, usize) {
    let Some(i) = display.rfind(KEY_PROBE) else { return (0, 0) };
    let rest = &display[i + KEY_PROBE.len()..];
    let Some(rest) = rest.strip_prefix(" at line ") else { return (1, 1) };
    let mut parts = rest.split(" column ");
    let line = parts.next().and_then(|p| p.trim().parse().ok()).unwrap_or(0);
    let column = parts.next().and_then(|p| p.trim().parse().ok()).unwrap_or(0);
    (line, column)
}

struct KeyProbe<'a> {
    ctx: &'a Ctx,
}

enum Never {}

impl<'de> DeserializeSeed<'de> for KeyProbe<'_> {
    type Value = Never;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Never, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyProbe<'_> {
    type Value = Never;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a plain key such as `paths`")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Never, E> {
        *self.ctx.stashed_key.borrow_mut() = Some(v.to_string());
        Err(E::custom(KEY_PROBE))
    }
}

/// Remember keys seen in one mapping; a repeat is an error at the repeat's line.
#[derive(Default)]
struct Seen(HashMap<String, usize>);

impl Seen {
    fn check<E: de::Error>(&mut self, ctx: &Ctx, key: &Key, what: impl FnOnce() -> String) -> Result<(), E> {
        if let Some(first) = self.0.get(&key.name) {
            return Err(ctx.fail(format!("{} (first at line {first})", what()), key.at()));
        }
        self.0.insert(key.name.clone(), key.line);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Scalars

/// A string value; `None` for null, `~` or an empty string.
struct Str<'a> {
    what: &'a str,
}

impl<'de> DeserializeSeed<'de> for Str<'_> {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Str<'_> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a string", self.what)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(match v {
            "" | "~" | "null" | "Null" | "NULL" => None,
            v => Some(v.to_string()),
        })
    }
}

/// A list of strings (or, when `single` is set, one string standing for a list of one).
struct StrList<'a> {
    ctx: &'a Ctx,
    what: &'a str,
    example: &'a str,
    single: bool,
}

impl<'de> DeserializeSeed<'de> for StrList<'_> {
    type Value = Vec<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrList<'_> {
    type Value = Vec<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a list, e.g. {}", self.what, self.example)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if !self.single {
            return Err(de::Error::invalid_type(de::Unexpected::Str(v), &self));
        }
        if v.is_empty() {
            return Err(self.ctx.fail(format!("{} holds an empty string", self.what), None));
        }
        self.ctx.count()?;
        Ok(vec![v.to_string()])
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element_seed(Entry { ctx: self.ctx, what: self.what })? {
            out.push(item);
        }
        Ok(out)
    }
}

/// One entry of a string list: the scalar's text as written (`1.10` stays `1.10`).
struct Entry<'a> {
    ctx: &'a Ctx,
    what: &'a str,
}

impl<'de> DeserializeSeed<'de> for Entry<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Entry<'_> {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "each entry of {} to be a string", self.what)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        self.ctx.count()?;
        if matches!(v, "" | "~" | "null" | "Null" | "NULL") {
            return Err(self.ctx.fail(format!("{} has an empty entry", self.what), None));
        }
        Ok(v.to_string())
    }
}

/// A boolean; `None` for null.
struct Bool<'a> {
    ctx: &'a Ctx,
    what: &'a str,
}

impl<'de> DeserializeSeed<'de> for Bool<'_> {
    type Value = Option<bool>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bool<'_> {
    type Value = Option<bool>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be true or false", self.what)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => Ok(Some(true)),
            "false" | "no" | "off" => Ok(Some(false)),
            _ => Err(self.ctx.fail(format!("{} must be true or false, not {}", self.what, quote(v)), None)),
        }
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(format!("{} must be true or false, not {v}", self.what), None))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(format!("{} must be true or false, not {v}", self.what), None))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(format!("{} must be true or false, not {v:?}", self.what), None))
    }
}

/// One of a fixed set of words; `None` for null.
struct Word<'a, T: Copy> {
    ctx: &'a Ctx,
    what: &'a str,
    /// Accepted spellings and their values; `shown` are the ones listed in messages.
    words: &'a [(&'a str, T)],
    shown: &'a str,
}

impl<'de, T: Copy> DeserializeSeed<'de> for Word<'_, T> {
    type Value = Option<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, T: Copy> Visitor<'de> for Word<'_, T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be one of {}", self.what, self.shown)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if matches!(v, "" | "~" | "null" | "Null" | "NULL") {
            return Ok(None);
        }
        let lower = v.to_ascii_lowercase();
        match self.words.iter().find(|(w, _)| *w == lower) {
            Some((_, t)) => Ok(Some(*t)),
            None => Err(self.ctx.fail(format!("{} must be one of {}, not {}", self.what, self.shown, quote(v)), None)),
        }
    }
}

const STRATEGIES: &[(&str, MergeStrategy)] =
    &[("rebase", MergeStrategy::Rebase), ("merge", MergeStrategy::Merge), ("squash", MergeStrategy::Squash)];
const ON_CONFLICT: &[(&str, OnConflict)] = &[("stop", OnConflict::Stop), ("agent", OnConflict::Agent)];
const ADHOC_STREAMS: &[(&str, AdhocStreams)] = &[("allow", AdhocStreams::Allow), ("refuse", AdhocStreams::Refuse)];
const LEVELS: &[(&str, Level)] = &[
    ("error", Level::Error),
    ("warn", Level::Warn),
    ("warning", Level::Warn),
    ("ignore", Level::Off),
    ("off", Level::Off),
    ("allow", Level::Off),
];

fn strategy<'a>(ctx: &'a Ctx, what: &'a str) -> Word<'a, MergeStrategy> {
    Word { ctx, what, words: STRATEGIES, shown: "rebase, merge or squash" }
}

fn level<'a>(ctx: &'a Ctx, what: &'a str, shown: &'a str) -> Word<'a, Level> {
    Word { ctx, what, words: LEVELS, shown }
}

/// A whole number in `min..=u32::MAX`; `None` for null.
struct Count<'a> {
    ctx: &'a Ctx,
    what: &'a str,
    min: u32,
}

impl Count<'_> {
    fn bad<E: de::Error>(&self, found: impl fmt::Display) -> E {
        self.ctx.fail(format!("{} must be a whole number of at least {}, not {found}", self.what, self.min), None)
    }
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = Option<u32>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = Option<u32>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a whole number", self.what)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        match u32::try_from(v) {
            Ok(n) if n >= self.min => Ok(Some(n)),
            _ => Err(self.bad(v)),
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        match u64::try_from(v) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(self.bad(v)),
        }
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v.fract() == 0.0 && v >= 0.0 && v <= u32::MAX as f64 {
            return self.visit_u64(v as u64);
        }
        Err(self.bad(format!("{v:?}")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim().parse::<u64>() {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(self.bad(quote(v))),
        }
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Err(self.bad(v))
    }
}

/// `backoff_multiplier`: a number from 1 to 1000; `None` for null.
struct Multiplier<'a> {
    ctx: &'a Ctx,
    what: &'a str,
}

impl Multiplier<'_> {
    fn check<E: de::Error>(&self, v: f64, shown: impl fmt::Display) -> Result<Option<f64>, E> {
        if v.is_finite() && (1.0..=1000.0).contains(&v) {
            Ok(Some(v))
        } else {
            Err(self.ctx.fail(format!("{} must be a number from 1 to 1000, not {shown}", self.what), None))
        }
    }
}

impl<'de> DeserializeSeed<'de> for Multiplier<'_> {
    type Value = Option<f64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Multiplier<'_> {
    type Value = Option<f64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a number", self.what)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.check(v as f64, v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.check(v as f64, v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.check(v, format!("{v:?}"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim().parse::<f64>() {
            Ok(n) => self.check(n, quote(v)),
            Err(_) => self.check(f64::NAN, quote(v)),
        }
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        self.check(f64::NAN, v)
    }
}

/// A duration: `30s`, `5m`, `1h30m`, or a number of seconds; `None` for null.
struct Dur<'a> {
    ctx: &'a Ctx,
    what: &'a str,
}

const MAX_SECS: f64 = 1e12;

impl Dur<'_> {
    fn bad<E: de::Error>(&self, found: impl fmt::Display) -> E {
        self.ctx.fail(
            format!("{} must be a duration such as 30s, 5m or 1h30m (or a number of seconds), not {found}", self.what),
            None,
        )
    }
    fn secs<E: de::Error>(&self, v: f64, shown: impl fmt::Display) -> Result<Option<Duration>, E> {
        if v.is_finite() && (0.0..=MAX_SECS).contains(&v) {
            // `max` turns -0.0 into 0.0.
            Ok(Some(Duration::from_secs_f64(v.max(0.0))))
        } else {
            Err(self.bad(shown))
        }
    }
}

impl<'de> DeserializeSeed<'de> for Dur<'_> {
    type Value = Option<Duration>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Dur<'_> {
    type Value = Option<Duration>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a duration such as 30s or 5m", self.what)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.secs(v as f64, v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.secs(v as f64, v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.secs(v, format!("{v:?}"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        // A bare number is handled here: `parse_duration` would hand any finite number to
        // `Duration::from_secs_f64`, which panics on overflow.
        if let Ok(n) = v.trim().parse::<f64>() {
            return self.secs(n, quote(v));
        }
        match crate::time::parse_duration(v) {
            Ok(d) => Ok(Some(d)),
            Err(_) => Err(self.bad(quote(v))),
        }
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Err(self.bad(v))
    }
}

// ---------------------------------------------------------------------------------------------
// The plan

struct PlanSeed<'a> {
    ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for PlanSeed<'_> {
    type Value = Plan;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Plan, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PlanSeed<'_> {
    type Value = Plan;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the plan to be a mapping with the keys version, prd, streams and settings")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Plan, E> {
        Err(self.ctx.fail_bare(EMPTY_PLAN))
    }
    fn visit_none<E: de::Error>(self) -> Result<Plan, E> {
        Err(self.ctx.fail_bare(EMPTY_PLAN))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Plan, A::Error> {
        let ctx = self.ctx;
        let mut plan = Plan { version: 1, prd: DEFAULT_PRD.into(), streams: Vec::new(), settings: Settings::default() };
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("duplicate key {} at the top level", quote(&key.name)))?;
            match key.name.as_str() {
                "version" => plan.version = map.next_value_seed(Version { ctx })?.unwrap_or(1),
                "prd" => {
                    if let Some(prd) = map.next_value_seed(Str { what: "prd" })? {
                        plan.prd = prd;
                    }
                }
                "streams" => plan.streams = map.next_value_seed(Streams { ctx })?,
                "settings" => plan.settings = map.next_value_seed(SettingsSeed { ctx })?,
                other => return Err(ctx.fail(unknown_key_message(other, "at the top level", TOP_KEYS), key.at())),
            }
        }
        Ok(plan)
    }
}

struct Version<'a> {
    ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for Version<'_> {
    type Value = Option<u32>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Version<'_> {
    type Value = Option<u32>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("version to be 1")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim() {
            "" | "~" | "null" => Ok(None),
            "1" => Ok(Some(1)),
            other => {
                let shown = if other.chars().count() > 20 { quote(other) } else { other.to_string() };
                Err(self.ctx.fail(format!("unsupported plan version {shown}; this git-boulder reads version 1"), None))
            }
        }
    }
}

struct Streams<'a> {
    ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for Streams<'_> {
    type Value = Vec<StreamDef>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Streams<'_> {
    type Value = Vec<StreamDef>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("streams to be a mapping from stream name to its settings, e.g. `auth: {stories: [US-001]}`")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let ctx = self.ctx;
        let mut out: Vec<StreamDef> = Vec::new();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("stream {} is defined twice", quote(&key.name)))?;
            if out.len() >= MAX_STREAMS {
                return Err(ctx.fail(format!("the plan defines more than {MAX_STREAMS} streams"), key.at()));
            }
            let mut stream = map.next_value_seed(StreamSeed { ctx, name: &key.name })?;
            stream.line = key.line;
            out.push(stream);
        }
        Ok(out)
    }
}

struct StreamSeed<'a> {
    ctx: &'a Ctx,
    name: &'a str,
}

impl<'de> DeserializeSeed<'de> for StreamSeed<'_> {
    type Value = StreamDef;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<StreamDef, D::Error> {
        d.deserialize_any(self)
    }
}

impl StreamSeed<'_> {
    fn empty(&self) -> StreamDef {
        StreamDef::empty(self.name)
    }
}

impl<'de> Visitor<'de> for StreamSeed<'_> {
    type Value = StreamDef;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "stream {} to be a mapping of {}", quote(self.name), STREAM_KEYS.join(", "))
    }
    fn visit_unit<E: de::Error>(self) -> Result<StreamDef, E> {
        Ok(self.empty())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StreamDef, A::Error> {
        let ctx = self.ctx;
        let mut s = self.empty();
        let place = format!("in stream {}", quote(self.name));
        let mut seen = Seen::default();
        let what = |key: &str| format!("{key} of stream {}", quote(self.name));
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("duplicate key {} {place}", quote(&key.name)))?;
            let w = what(&key.name);
            match key.name.as_str() {
                "branch" => {
                    if let Some(b) = map.next_value_seed(Str { what: &w })? {
                        s.branch = b;
                    }
                }
                "stories" => {
                    s.stories =
                        map.next_value_seed(StrList { ctx, what: &w, example: "[US-001, US-002]", single: false })?
                }
                "paths" => {
                    s.paths = map.next_value_seed(StrList {
                        ctx,
                        what: &w,
                        example: "[src/auth/**, tests/auth/**]",
                        single: true,
                    })?
                }
                "creates" => {
                    s.creates =
                        map.next_value_seed(StrList { ctx, what: &w, example: "[src/auth/session.rs]", single: true })?
                }
                "depends_on" => {
                    s.depends_on = map.next_value_seed(StrList { ctx, what: &w, example: "[api, db]", single: true })?
                }
                "agent" => s.agent = map.next_value_seed(Str { what: &w })?,
                "max_iterations" => s.max_iterations = map.next_value_seed(Count { ctx, what: &w, min: 1 })?,
                "merge_strategy" => s.merge_strategy = map.next_value_seed(strategy(ctx, &w))?,
                other => return Err(ctx.fail(unknown_key_message(other, &place, STREAM_KEYS), key.at())),
            }
        }
        // What a stream will create it owns too: one list of owned globs for every check.
        for g in &s.creates {
            if !s.paths.contains(g) {
                s.paths.push(g.clone());
            }
        }
        Ok(s)
    }
}

struct SettingsSeed<'a> {
    ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for SettingsSeed<'_> {
    type Value = Settings;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Settings, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SettingsSeed<'_> {
    type Value = Settings;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("settings to be a mapping, e.g. `base_branch: main`")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Settings, E> {
        Ok(Settings::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Settings, A::Error> {
        let ctx = self.ctx;
        let mut s = Settings::default();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("duplicate key {} in settings", quote(&key.name)))?;
            let w = format!("settings.{}", key.name);
            let w = w.as_str();
            match key.name.as_str() {
                "base_branch" => {
                    if let Some(v) = map.next_value_seed(Str { what: w })? {
                        s.base_branch = v;
                    }
                }
                "worktree_dir" => {
                    if let Some(v) = map.next_value_seed(Str { what: w })? {
                        s.worktree_dir = v;
                    }
                }
                "merge_strategy" => {
                    if let Some(v) = map.next_value_seed(strategy(ctx, w))? {
                        s.merge_strategy = v;
                    }
                }
                "auto_merge" => {
                    if let Some(v) = map.next_value_seed(Bool { ctx, what: w })? {
                        s.auto_merge = v;
                    }
                }
                "inherit_guardrails" => {
                    if let Some(v) = map.next_value_seed(Bool { ctx, what: w })? {
                        s.inherit_guardrails = v;
                    }
                }
                "inherit_progress" => {
                    if let Some(v) = map.next_value_seed(Bool { ctx, what: w })? {
                        s.inherit_progress = v;
                    }
                }
                "path_overlap" => {
                    if let Some(v) = map.next_value_seed(level(ctx, w, "error, warn or ignore"))? {
                        s.path_overlap = v;
                    }
                }
                "ownership" => {
                    if let Some(v) = map.next_value_seed(level(ctx, w, "error, warn or off"))? {
                        s.ownership = v;
                    }
                }
                "undeclared_paths" => {
                    if let Some(v) = map.next_value_seed(level(ctx, w, "error, warn or allow"))? {
                        s.undeclared_paths = v;
                    }
                }
                "shared_read" => {
                    s.shared_read =
                        map.next_value_seed(StrList { ctx, what: w, example: "[src/types/**]", single: true })?
                }
                "copy_into_worktree" => {
                    s.copy_into_worktree =
                        map.next_value_seed(StrList { ctx, what: w, example: "[.env]", single: true })?
                }
                "setup" => s.setup = map.next_value_seed(Str { what: w })?.unwrap_or_default(),
                "verify" => s.verify = map.next_value_seed(Str { what: w })?.unwrap_or_default(),
                "prompt_template" => {
                    let t = map.next_value_seed(Str { what: w })?.unwrap_or_default();
                    if let Err(why) = super::prompt::parse(&t) {
                        return Err(ctx.fail(format!("{w}: {why}"), key.at()));
                    }
                    s.prompt_template = t;
                }
                "port_base" | "port_stride" => {
                    if let Some(v) = map.next_value_seed(Count { ctx, what: w, min: 1 })? {
                        if v > 65535 {
                            return Err(
                                ctx.fail(format!("{w} must be a port number of at most 65535, not {v}"), key.at())
                            );
                        }
                        if key.name == "port_base" {
                            s.port_base = v;
                        } else {
                            s.port_stride = v;
                        }
                    }
                }
                "claim_remote" => s.claim_remote = map.next_value_seed(Str { what: w })?,
                "merge_remote" => s.merge_remote = map.next_value_seed(Str { what: w })?,
                "on_conflict" => {
                    if let Some(v) =
                        map.next_value_seed(Word { ctx, what: w, words: ON_CONFLICT, shown: "stop or agent" })?
                    {
                        s.on_conflict = v;
                    }
                }
                "adhoc_streams" => {
                    if let Some(v) =
                        map.next_value_seed(Word { ctx, what: w, words: ADHOC_STREAMS, shown: "allow or refuse" })?
                    {
                        s.adhoc_streams = v;
                    }
                }
                "agents" => s.agents = map.next_value_seed(Agents { ctx })?,
                "boulder" => s.boulder = map.next_value_seed(BoulderSeed { ctx })?,
                other => return Err(ctx.fail(unknown_key_message(other, "in settings", SETTINGS_KEYS), key.at())),
            }
        }
        Ok(s)
    }
}

struct Agents<'a> {
    ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for Agents<'_> {
    type Value = BTreeMap<String, String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Agents<'_> {
    type Value = BTreeMap<String, String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("settings.agents to be a mapping from agent name to command, e.g. `claude: 'claude -p \"$BOULDER_PROMPT\"'`")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(BTreeMap::new())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let ctx = self.ctx;
        let mut out = BTreeMap::new();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("agent {} is defined twice in settings.agents", quote(&key.name)))?;
            if matches!(key.name.as_str(), "" | "~" | "null") {
                return Err(ctx.fail("settings.agents has an entry without a name", key.at()));
            }
            let what = format!("settings.agents.{}", key.name);
            match map.next_value_seed(Str { what: &what })? {
                Some(cmd) => {
                    out.insert(key.name, cmd);
                }
                None => {
                    return Err(ctx.fail(
                        format!(
                            "agent {} in settings.agents has no command; give the command line to run",
                            quote(&key.name)
                        ),
                        key.at(),
                    ))
                }
            }
        }
        Ok(out)
    }
}

struct BoulderSeed<'a> {
    ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for BoulderSeed<'_> {
    type Value = BoulderSettings;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BoulderSeed<'_> {
    type Value = BoulderSettings;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("settings.boulder to be a mapping, e.g. `cooldown: 30s`")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(BoulderSettings::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let ctx = self.ctx;
        let mut b = BoulderSettings::default();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("duplicate key {} in settings.boulder", quote(&key.name)))?;
            let w = format!("settings.boulder.{}", key.name);
            let w = w.as_str();
            match key.name.as_str() {
                "idle_threshold" => {
                    if let Some(v) = map.next_value_seed(Dur { ctx, what: w })? {
                        b.idle_threshold = v;
                    }
                }
                "cooldown" => {
                    if let Some(v) = map.next_value_seed(Dur { ctx, what: w })? {
                        b.cooldown = v;
                    }
                }
                "recovery_window" => {
                    if let Some(v) = map.next_value_seed(Dur { ctx, what: w })? {
                        b.recovery_window = v;
                    }
                }
                "backoff_multiplier" => {
                    if let Some(v) = map.next_value_seed(Multiplier { ctx, what: w })? {
                        b.backoff_multiplier = v;
                    }
                }
                "max_failures" => {
                    if let Some(v) = map.next_value_seed(Count { ctx, what: w, min: 1 })? {
                        b.max_failures = v;
                    }
                }
                "max_depth" => {
                    if let Some(v) = map.next_value_seed(Count { ctx, what: w, min: 1 })? {
                        b.max_depth = v;
                    }
                }
                "parallel_limit" => {
                    if let Some(v) = map.next_value_seed(Count { ctx, what: w, min: 1 })? {
                        b.parallel_limit = v;
                    }
                }
                "inherit_cooldowns" => {
                    if let Some(v) = map.next_value_seed(Bool { ctx, what: w })? {
                        b.inherit_cooldowns = v;
                    }
                }
                other => {
                    return Err(ctx.fail(unknown_key_message(other, "in settings.boulder", BOULDER_KEYS), key.at()))
                }
            }
        }
        Ok(b)
    }
}
