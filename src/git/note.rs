//! One note of `refs/notes/boulder` as git-boulder writes it: a record per line, as JSON. Pure:
//! read by `notes.rs` (writing, union merges) and `notes_index.rs` (which streams a note
//! names), so notes fetched from anywhere are checked the same way.

use gix::bstr::ByteSlice;

/// Largest note git-boulder reads from a fetched notes ref.
pub const MAX_NOTE_BYTES: u64 = 64 * 1024;

/// Why a note's bytes are refused; the message completes "the note of <commit> …".
#[derive(Debug, thiserror::Error)]
pub enum NoteError {
    #[error("is larger than 64 KiB")]
    TooLarge,
    #[error("is not UTF-8")]
    NotUtf8(#[source] std::str::Utf8Error),
    #[error("is not JSON lines: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("is not a git-boulder record (an object with a stream)")]
    NotARecord(#[source] serde_json::Error),
}

/// One record of a note: what the post-commit hook knew of a commit when it recorded it. A
/// note is one record per line, as JSON (several records when commits squashed into one carried
/// theirs along, see `notes::carry`). Built and read only in `git/`.
///
/// The fields are in alphabetical order: the key order every git-boulder has written. Reading is
/// lenient beyond `stream`, so records of other versions (missing fields, or more) still read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Note {
    /// The machine (actor id) that recorded it; absent in records of versions before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// When the commit was recorded: now for the hook, the committer time for `git boulder record`.
    pub at: Option<String>,
    /// The boulder it counted for (and that boulder's ancestors).
    pub boulder: Option<String>,
    /// The host name of the machine that recorded it (absent as `actor` is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// That boulder's iteration after it.
    pub iteration: Option<u64>,
    /// Not a record of work but a mark: a `stream rollback` set the commit aside from the
    /// stream (the backup ref that keeps it, or the tip the branch went back to), so a landing
    /// does not require it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_aside: Option<String>,
    /// The story it was for (`BOULDER_STORY`), when said.
    pub story: Option<String>,
    /// The stream whose work it is.
    pub stream: String,
}

impl Note {
    /// The text of a note holding this one record: one JSON line.
    pub fn text(&self) -> String {
        // A struct of strings and a number always serializes.
        format!("{}\n", serde_json::to_string(self).unwrap_or_default())
    }

    /// The records of a note's bytes, checked as [`check`] says.
    pub fn parse(data: &[u8]) -> std::result::Result<Vec<Note>, NoteError> {
        if data.len() as u64 > MAX_NOTE_BYTES {
            return Err(NoteError::TooLarge);
        }
        let text = std::str::from_utf8(data).map_err(NoteError::NotUtf8)?;
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).map_err(NoteError::NotJson)?;
            let note: Note = serde_json::from_value(v).map_err(NoteError::NotARecord)?;
            out.push(note);
        }
        Ok(out)
    }
}

/// Check a note's bytes as git-boulder writes them: at most 64 KiB of UTF-8, one JSON object per
/// non-empty line, each a [`Note`] (a string `stream`, and its other fields, where given, of
/// their types). Pure, so notes fetched from anywhere can be checked (and fuzzed). The error
/// completes "the note of <commit> …".
pub fn check(data: &[u8]) -> std::result::Result<(), NoteError> {
    Note::parse(data).map(|_| ())
}

/// The lines of a note, for union merges: each record once, in order.
pub(super) fn lines(data: &[u8]) -> Vec<Vec<u8>> {
    data.lines().filter(|l| !l.trim().is_empty()).map(|l| l.to_vec()).collect()
}
