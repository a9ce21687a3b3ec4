//! What each harness says it spent, read from what it already writes, as [`Amount`]s keyed so
//! that reading the same entry twice records it once (docs/spend.md, "Where the numbers come
//! from"): Claude Code's transcript ([`claude`]), Codex's session rollout ([`codex`]), OpenCode's
//! session messages, which its plugin hands over ([`opencode`]).
//!
//! A hook must never fail or stall because of what it reads here, so reading is bounded and
//! forgiving: at most the last [`MAX_READ`] bytes of a file are read (a Stop runs at the end of
//! every turn, so the tail holds what is new), at most [`MAX_AMOUNTS`] amounts are kept, and a
//! line that is not JSON, an entry whose numbers are negative, not whole or absurd (over
//! [`MAX_TOKENS`]) is skipped and counted in [`Skipped`], which [`note`] keeps for `doctor`.

pub mod claude;
pub mod codex;
pub mod opencode;

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spend::Amount;
use crate::state::op::MAX_KEY;
pub use crate::state::op::MAX_TOKENS;

/// The most of a file read: its last 16 MiB. A turn rarely writes more than a few megabytes of
/// transcript; what lies before the tail was there at an earlier Stop, which read it then.
pub const MAX_READ: u64 = 16 << 20;

/// The most amounts one read keeps (the newest): a Stop records a turn's worth, not a history.
pub const MAX_AMOUNTS: usize = 10_000;

/// What one read could not count, and why. All zero and false: everything was read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The file named was not there (or could not be opened).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    /// The file was larger than [`MAX_READ`]: only its tail was read (bytes not read).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unread_bytes: u64,
    /// Lines (or entries) that were not JSON, or not of the shape the harness writes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_json: u64,
    /// Entries claiming negative usage (or a negative cost).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub negative: u64,
    /// Entries claiming absurd usage: not a whole number, more than [`MAX_TOKENS`] tokens of a
    /// kind, a cost out of bounds, a key too long.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub absurd: u64,
    /// Amounts past [`MAX_AMOUNTS`] (the oldest) left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub over_limit: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Skipped {
    /// Whether anything was skipped.
    pub fn any(&self) -> bool {
        *self != Skipped::default()
    }

    /// Add what another read skipped.
    pub fn add(&mut self, o: &Skipped) {
        self.missing |= o.missing;
        self.unread_bytes = self.unread_bytes.saturating_add(o.unread_bytes);
        self.not_json = self.not_json.saturating_add(o.not_json);
        self.negative = self.negative.saturating_add(o.negative);
        self.absurd = self.absurd.saturating_add(o.absurd);
        self.over_limit = self.over_limit.saturating_add(o.over_limit);
    }

    /// For people: `3 lines not JSON, 1 entry with negative usage`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.missing {
            parts.push("the file is missing".to_string());
        }
        if self.unread_bytes > 0 {
            parts.push(format!("larger than {} MiB: its first {} bytes not read", MAX_READ >> 20, self.unread_bytes));
        }
        for (n, what) in [
            (self.not_json, "line(s) not JSON or not usage"),
            (self.negative, "entry(ies) with negative usage"),
            (self.absurd, "entry(ies) with absurd usage"),
            (self.over_limit, "amount(s) past the limit of one read"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        parts.join(", ")
    }
}

/// What one read found: the amounts, what it skipped, and where it read (a file's path, or
/// what handed the entries over), for a report.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub amounts: Vec<Amount>,
    pub skipped: Skipped,
    pub from: String,
}

impl Usage {
    /// Keep at most [`MAX_AMOUNTS`], the newest (the last read).
    pub fn bound(&mut self) {
        if self.amounts.len() > MAX_AMOUNTS {
            let over = self.amounts.len() - MAX_AMOUNTS;
            self.amounts.drain(..over);
            self.skipped.over_limit += over as u64;
        }
    }

    /// Add another read's amounts and skips.
    pub fn extend(&mut self, o: Usage) {
        self.amounts.extend(o.amounts);
        self.skipped.add(&o.skipped);
        self.bound();
    }
}

/// The file of the reads' reports, per machine: `$GIT_COMMON_DIR/boulder/spend-skipped.json`.
pub const NOTES: &str = "spend-skipped.json";

/// The most reports kept (the newest).
pub const MAX_NOTES: usize = 16;

/// A read that skipped something, as `doctor` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// What was read: `claude usage of stream auth`.
    pub what: String,
    /// Where: the file, or what handed the entries over.
    pub from: String,
    /// When (RFC 3339).
    pub at: String,
    pub skipped: Skipped,
    /// Why the amounts read were not recorded, when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// Keep what the read of `usage` skipped for `doctor`: a report per `what` and `from` (the
/// newest replaces an older one; a read that skipped nothing removes it), at most
/// [`MAX_NOTES`]; `failed` says why the amounts were not recorded. Said under `-v`, never on
/// the harness's stderr. The file is small and rewritten whole, atomically; two hooks writing at once
/// may lose one report, never corrupt the file. Never an error: a report is not worth a failed
/// hook.
pub fn note(ws: &crate::workspace::Workspace, what: &str, usage: &Usage, failed: Option<String>) {
    let path = ws.repo.boulder_dir().join(NOTES);
    let mut notes = notes(ws);
    let before = notes.len();
    notes.retain(|n| !(n.what == what && n.from == usage.from));
    let bad = usage.skipped.any() || failed.is_some();
    if !bad && notes.len() == before {
        return;
    }
    if bad {
        let at = crate::time::now_rfc3339();
        let skipped = usage.skipped.clone();
        crate::trace::line(&format!("{what}: {} {failed:?} ({})", skipped.describe(), usage.from));
        notes.push(Note { what: what.to_string(), from: usage.from.clone(), at, skipped, failed });
    }
    let over = notes.len().saturating_sub(MAX_NOTES);
    notes.drain(..over);
    let written = std::fs::create_dir_all(ws.repo.boulder_dir())
        .map_err(|e| crate::error::Error::refused(e.to_string()))
        .and_then(|()| crate::fsutil::write_atomic(&path, &serde_json::to_vec_pretty(&notes).unwrap_or_default()));
    if let Err(e) = written {
        crate::trace::line(&format!("{}: {}", path.display(), e.message));
    }
}

/// The reports [`note`] kept (none when the file is missing or unreadable: at most
/// [`MAX_NOTES`] are read).
pub fn notes(ws: &crate::workspace::Workspace) -> Vec<Note> {
    let path = ws.repo.boulder_dir().join(NOTES);
    let Ok(file) = std::fs::File::open(path) else { return Vec::new() };
    let mut bytes = Vec::new();
    if file.take(1 << 20).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let mut notes: Vec<Note> = serde_json::from_slice(&bytes).unwrap_or_default();
    let over = notes.len().saturating_sub(MAX_NOTES);
    notes.drain(..over);
    notes
}

/// The last [`MAX_READ`] bytes of a file, to be read line by line ([`Tail::lines`]).
#[derive(Debug, Default)]
pub struct Tail {
    bytes: Vec<u8>,
    /// Where the first whole line starts (past a line the tail cut).
    from: usize,
}

impl Tail {
    /// The lines that are not blank, without their newline.
    pub fn lines(&self) -> impl Iterator<Item = &[u8]> {
        self.bytes[self.from..].split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace))
    }
}

/// The last [`MAX_READ`] bytes of `path` (a cut first line left out, counted in
/// `skipped.unread_bytes`). A missing file gives no lines and `skipped.missing`.
pub fn tail(path: &Path, skipped: &mut Skipped) -> Tail {
    let Ok(mut file) = std::fs::File::open(path) else {
        skipped.missing = true;
        return Tail::default();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(MAX_READ);
    let mut bytes = Vec::new();
    if (start > 0 && file.seek(SeekFrom::Start(start)).is_err()) || file.take(MAX_READ).read_to_end(&mut bytes).is_err()
    {
        skipped.missing = true;
        return Tail::default();
    }
    let mut from = 0;
    if start > 0 {
        // The first line was cut: what it held was read at an earlier Stop, or is lost to it.
        from = bytes.iter().position(|b| *b == b'\n').map_or(bytes.len(), |n| n + 1);
        skipped.unread_bytes = start + from as u64;
    }
    Tail { bytes, from }
}

/// Whether `line` contains `needle` (a cheap test before parsing a line as JSON).
pub fn contains(line: &[u8], needle: &[u8]) -> bool {
    line.windows(needle.len()).any(|w| w == needle)
}

/// A JSON line, or `None` counted in `skipped.not_json`.
pub fn parse_line(line: &[u8], skipped: &mut Skipped) -> Option<Value> {
    match serde_json::from_slice::<Value>(line) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => {
            skipped.not_json += 1;
            None
        }
    }
}

/// Why a count was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    Negative,
    Absurd,
}

impl Bad {
    /// Count it in `skipped`.
    pub fn count(self, skipped: &mut Skipped) {
        match self {
            Bad::Negative => skipped.negative += 1,
            Bad::Absurd => skipped.absurd += 1,
        }
    }
}

/// A token count at `v`: missing or `null` is 0; negative, fractional, not a number or over
/// [`MAX_TOKENS`] is [`Bad`].
pub fn tokens(v: Option<&Value>) -> Result<u64, Bad> {
    match v {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(t), _, _) if t <= MAX_TOKENS => Ok(t),
            (Some(_), _, _) => Err(Bad::Absurd),
            (None, Some(_), _) => Err(Bad::Negative),
            (None, None, Some(f)) if f < 0.0 => Err(Bad::Negative),
            _ => Err(Bad::Absurd),
        },
        Some(_) => Err(Bad::Absurd),
    }
}

/// A key `source:id` within the op's bounds, or [`Bad::Absurd`].
pub fn key(source: &str, id: &str) -> Result<String, Bad> {
    let key = format!("{source}:{id}");
    if id.is_empty() || key.len() > MAX_KEY || key.chars().any(char::is_control) {
        return Err(Bad::Absurd);
    }
    Ok(key)
}

/// A model name within the op's bounds (else left out: the amount still counts, unpriced).
pub fn model(name: Option<&str>) -> crate::state::Opt<String> {
    match name {
        Some(m) if !m.is_empty() && m.len() <= crate::state::op::MAX_MODEL && !m.chars().any(char::is_control) => {
            crate::state::Opt::Set(m.to_string())
        }
        _ => crate::state::Opt::Absent,
    }
}

/// `Set(n)` for a count above 0, else absent (an amount says only what it has).
pub fn some(n: u64) -> crate::state::Opt<u64> {
    if n > 0 {
        crate::state::Opt::Set(n)
    } else {
        crate::state::Opt::Absent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn token_counts_are_whole_bounded_numbers() {
        assert_eq!(tokens(None), Ok(0));
        assert_eq!(tokens(Some(&json!(null))), Ok(0));
        assert_eq!(tokens(Some(&json!(12))), Ok(12));
        assert_eq!(tokens(Some(&json!(-3))), Err(Bad::Negative));
        assert_eq!(tokens(Some(&json!(-0.5))), Err(Bad::Negative));
        assert_eq!(tokens(Some(&json!(1.5))), Err(Bad::Absurd));
        assert_eq!(tokens(Some(&json!(MAX_TOKENS + 1))), Err(Bad::Absurd));
        assert_eq!(tokens(Some(&json!(1e300))), Err(Bad::Absurd));
        assert_eq!(tokens(Some(&json!("12"))), Err(Bad::Absurd));
    }

    #[test]
    fn a_large_file_is_read_from_its_tail() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let line = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(1 << 20));
        let mut text = String::new();
        for _ in 0..20 {
            text.push_str(&line);
        }
        text.push_str("{\"last\":1}\n");
        std::fs::write(&path, &text).unwrap();
        let mut skipped = Skipped::default();
        let t = tail(&path, &mut skipped);
        let lines: Vec<&[u8]> = t.lines().collect();
        assert!(skipped.unread_bytes > 0 && skipped.unread_bytes < text.len() as u64);
        assert!(lines.iter().map(|l| l.len()).sum::<usize>() as u64 <= MAX_READ);
        assert_eq!(*lines.last().unwrap(), b"{\"last\":1}");
        let mut skipped = Skipped::default();
        assert_eq!(tail(&tmp.path().join("gone"), &mut skipped).lines().count(), 0);
        assert!(skipped.missing);
    }
}
