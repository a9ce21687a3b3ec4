//! `refs/notes/boulder`: one note per recorded commit (JSON lines), written with gix's notes
//! trees (`gix::note`), every ref update a compare-and-swap retried on a lost race.
//!
//! * [`write`] and [`read`]: one note (the post-commit hook).
//! * [`carry`]: carry the notes of rewritten commits onto their new ids in one notes commit,
//!   concatenating the records of commits squashed into one (post-rewrite, merges that rebase).
//! * [`union`]: merge another notes commit into ours (pull): a commit noted on one side keeps its
//!   note, a commit noted differently on both sides keeps both records, one line each.

use std::collections::BTreeMap;
use std::time::Duration;

use gix::bstr::ByteSlice;
use gix::note::plumbing::State;
use gix::refs::transaction::{PreviousValue, RefEdit};
use gix::ObjectId;

use crate::error::{Error, Result};
use crate::state::NOTES_REF;

/// How often a notes update is retried after losing a race.
const TRIES: u32 = 200;

/// The repository, with a committer identity set in memory when git config has none (notes
/// commits need one; state must never depend on a configured identity).
pub fn with_identity(repo: &gix::Repository) -> gix::Repository {
    let mut g = repo.clone();
    if g.committer().is_none() {
        let mut config = g.config_snapshot_mut();
        let _ = config.set_raw_value(gix::config::tree::User::NAME, "git-boulder");
        let _ = config.set_raw_value(gix::config::tree::User::EMAIL, "git-boulder@localhost");
    }
    g
}

fn backoff() {
    std::thread::sleep(Duration::from_micros(fastrand::u64(200..3000)));
}

/// The message of the notes commit [`write`] makes.
const WRITE_MESSAGE: &str = "Notes added by git-boulder";

/// Write (or replace) the note of `commit`, retrying when another writer moved the notes ref.
/// The note holds the one record `note`.
///
/// The hot path of the post-commit hook: one blob, the notes tree(s) and a commit, then a
/// compare-and-swap of the ref; the identity comes from [`identity_now`].
pub fn write(repo: &gix::Repository, commit: ObjectId, note: &Note) -> Result<()> {
    let text = &note.text();
    let Some((committer, author)) = identity_now(repo) else { return write_as_configured(repo, commit, text) };
    let blob =
        repo.write_blob(text.as_bytes()).map_err(|e| Error::internal(format!("cannot write a note: {e}")))?.detach();
    let name: gix::refs::FullName = NOTES_REF.try_into().map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")))?;
    let mut last = String::new();
    for _ in 0..TRIES {
        let tip = tip(repo)?;
        let mut state = state_at(repo, tip)?;
        state.edit(commit, Some(blob), repo).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")))?;
        let tree = state.write(repo).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")))?;
        let id = repo
            .write_object(&gix::objs::Commit {
                tree,
                parents: tip.into_iter().collect(),
                author: author.clone(),
                committer: committer.clone(),
                encoding: None,
                message: WRITE_MESSAGE.into(),
                extra_headers: Vec::new(),
            })
            .map_err(|e| Error::internal(format!("cannot write a notes commit: {e}")))?
            .detach();
        let expected = match tip {
            Some(e) => PreviousValue::MustExistAndMatch(gix::refs::Target::Object(e)),
            None => PreviousValue::MustNotExist,
        };
        let edit = RefEdit::update(name.clone(), id, expected, format!("notes: {WRITE_MESSAGE}"));
        let mut buf = gix::date::parse::TimeBuf::default();
        match repo.edit_references_as([edit], Some(committer.to_ref(&mut buf))) {
            Ok(_) => return Ok(()),
            Err(e) => {
                last = e.to_string();
                backoff();
            }
        }
    }
    Err(Error::internal(format!("cannot write the note of {commit}: {last}")))
}

/// [`write`] through gix's notes API, gix resolving the identity and the time: when a date
/// override is in a form only gix can read (a relative date such as `2 days ago`).
fn write_as_configured(repo: &gix::Repository, commit: ObjectId, text: &str) -> Result<()> {
    let repo = with_identity(repo);
    let mut last = String::new();
    for _ in 0..TRIES {
        let mut notes =
            repo.notes().map_err(|e| Error::internal(format!("notes: {e}")))?.with_commit_message(WRITE_MESSAGE);
        match notes.replace(NOTES_REF, commit, text.as_bytes()) {
            Ok(_) => return Ok(()),
            Err(e) => {
                last = e.to_string();
                backoff();
            }
        }
    }
    Err(Error::internal(format!("cannot write the note of {commit}: {last}")))
}

/// The committer and author of a notes commit: the identity git would use (`GIT_COMMITTER_*` and
/// `GIT_AUTHOR_*`, `committer.*` and `author.*`, `user.*`, `EMAIL`), or git-boulder's when no
/// committer is configured, as [`with_identity`] does; at the time `GIT_COMMITTER_DATE` and
/// `GIT_AUTHOR_DATE` say (git sets the latter for its hooks), else now (in UTC). `None` when such
/// a date needs the local time zone to be read.
///
/// Read from the config snapshot on purpose: gix's `committer()` also works out the local time
/// zone, which walks the whole time zone database on every call (over a millisecond, paid on
/// every commit by the post-commit hook).
fn identity_now(repo: &gix::Repository) -> Option<(gix::actor::Signature, gix::actor::Signature)> {
    let config = repo.config_snapshot();
    let s = |key: &str| config.string(key);
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let time = |key: &str| -> Option<gix::date::Time> {
        match s(key) {
            Some(date) => gix::date::parse(date.to_str().ok()?, None).ok(),
            None => Some(gix::date::Time { seconds: now, offset: 0 }),
        }
    };
    let (committer_time, author_time) = (time("gitoxide.commit.committerDate")?, time("gitoxide.commit.authorDate")?);
    type Who = (Option<gix::bstr::BString>, Option<gix::bstr::BString>);
    let role = |role: &str, user: &Who| -> Who {
        (
            s(&format!("{role}.name"))
                .or_else(|| user.0.clone())
                .or_else(|| s(&format!("gitoxide.{role}.nameFallback"))),
            s(&format!("{role}.email"))
                .or_else(|| user.1.clone())
                .or_else(|| s(&format!("gitoxide.{role}.emailFallback"))),
        )
    };
    let user: Who = (s("user.name"), s("user.email").or_else(|| s("gitoxide.user.emailFallback")));
    let mut committer = role("committer", &user);
    let mut author = role("author", &user);
    if committer.0.is_none() || committer.1.is_none() {
        let fallback: Who = (Some("git-boulder".into()), Some("git-boulder@localhost".into()));
        committer = role("committer", &fallback);
        author = role("author", &fallback);
    }
    let sign = |(name, email): Who, other: &Who, time| gix::actor::Signature {
        name: name.or_else(|| other.0.clone()).unwrap_or_default(),
        email: email.or_else(|| other.1.clone()).unwrap_or_default(),
        time,
    };
    let author = sign(author, &committer, author_time);
    let committer = sign(committer, &(None, None), committer_time);
    Some((committer, author))
}

/// The note of `commit`, if it has one.
pub fn read(repo: &gix::Repository, commit: ObjectId) -> Option<Vec<u8>> {
    let mut notes = repo.notes().ok()?.with_refs([NOTES_REF]).ok()?;
    let found = notes.get(commit).ok()?;
    found.into_iter().next().map(|n| n.blob.data.clone())
}

/// Which commits have a note: the notes tree at the tip of `refs/notes/boulder`, read once and
/// looked up per commit (a few tree reads each, however many notes there are).
pub struct Noted {
    state: Option<State>,
}

impl Noted {
    pub fn new(repo: &gix::Repository) -> Result<Self> {
        let state = match tip(repo)? {
            Some(t) => Some(state_at(repo, Some(t))?),
            None => None,
        };
        Ok(Noted { state })
    }

    /// Whether `commit` has a note.
    pub fn has(&mut self, repo: &gix::Repository, commit: ObjectId) -> Result<bool> {
        let Some(state) = self.state.as_mut() else { return Ok(false) };
        let found = state
            .get(&commit, repo)
            .map_err(|e| Error::internal(format!("{NOTES_REF}: cannot look up {commit}: {e}")))?;
        Ok(found.is_some())
    }
}

fn tip(repo: &gix::Repository) -> Result<Option<ObjectId>> {
    match repo.try_find_reference(NOTES_REF) {
        Ok(Some(mut r)) => {
            Ok(Some(r.peel_to_id().map_err(|e| Error::internal(format!("cannot resolve {NOTES_REF}: {e}")))?.detach()))
        }
        Ok(None) => Ok(None),
        Err(e) => Err(Error::internal(format!("cannot read {NOTES_REF}: {e}"))),
    }
}

fn state_at(repo: &gix::Repository, commit: Option<ObjectId>) -> Result<State> {
    let tree = match commit {
        Some(c) => repo
            .find_commit(c)
            .and_then(|c| c.tree_id().map(|t| t.detach()))
            .map_err(|e| Error::internal(format!("{NOTES_REF}: commit {c}: {e}")))?,
        None => ObjectId::empty_tree(repo.object_hash()),
    };
    State::new(tree, repo).map_err(|e| Error::internal(format!("{NOTES_REF}: cannot read the notes tree {tree}: {e}")))
}

/// Commit `tree` on top of `parents` and move the notes ref from `expected` to it. `Ok(false)` on
/// a lost race.
fn commit(
    repo: &gix::Repository,
    message: &str,
    tree: ObjectId,
    parents: &[ObjectId],
    expected: Option<ObjectId>,
) -> Result<bool> {
    let id = repo
        .new_commit(message, tree, parents.iter().copied())
        .map_err(|e| Error::internal(format!("cannot write a notes commit: {e}")))?
        .id;
    let prev = match expected {
        Some(e) => PreviousValue::MustExistAndMatch(gix::refs::Target::Object(e)),
        None => PreviousValue::MustNotExist,
    };
    Ok(repo.reference(NOTES_REF, id, prev, format!("notes: {message}")).is_ok())
}

/// Carry the notes of rewritten commits onto their new ids, in one notes commit, the way
/// `notes.rewriteRef` with `notes.rewriteMode = concatenate` does: when several old commits map to
/// one new commit (squash and fixup in `rebase -i`), the new commit's note holds the records of
/// all of them (and any it had already), each record once, in order. Returns how many new
/// commits got a note or a changed one.
pub fn carry(repo: &gix::Repository, pairs: &[(ObjectId, ObjectId)]) -> Result<usize> {
    // The old commits of each new commit, in the order git reported them.
    let mut olds: Vec<(ObjectId, Vec<ObjectId>)> = Vec::new();
    for (old, new) in pairs {
        if old == new {
            continue;
        }
        match olds.iter_mut().find(|(n, _)| n == new) {
            Some((_, list)) => list.push(*old),
            None => olds.push((*new, vec![*old])),
        }
    }
    for _ in 0..TRIES {
        let Some(tip) = tip(repo)? else { return Ok(0) };
        let mut state = state_at(repo, Some(tip))?;
        let mut n = 0;
        for (new, list) in &olds {
            let mut get = |id: &ObjectId| {
                state.get(id, repo).map_err(|e| Error::internal(format!("{NOTES_REF}: cannot look up {id}: {e}")))
            };
            let current = get(new)?;
            let mut blobs: Vec<ObjectId> = current.into_iter().collect();
            for old in list {
                if let Some(blob) = get(old)? {
                    if !blobs.contains(&blob) {
                        blobs.push(blob);
                    }
                }
            }
            let merged = match blobs.as_slice() {
                [] => continue,
                [one] => *one,
                _ => {
                    let mut records: Vec<Vec<u8>> = Vec::new();
                    for blob in &blobs {
                        let data = repo
                            .find_object(*blob)
                            .map_err(|e| Error::internal(format!("note blob {blob}: {e}")))?
                            .detach()
                            .data;
                        for l in lines(&data) {
                            if !records.contains(&l) {
                                records.push(l);
                            }
                        }
                    }
                    let mut text = records.join(&b'\n');
                    text.push(b'\n');
                    repo.write_blob(&text).map_err(|e| Error::internal(format!("cannot write a note: {e}")))?.detach()
                }
            };
            if current != Some(merged) {
                state.edit(*new, Some(merged), repo).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")))?;
                n += 1;
            }
        }
        if n == 0 {
            return Ok(0);
        }
        let tree = state.write(repo).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")))?;
        if commit(repo, "Notes carried over rewritten commits by git-boulder", tree, &[tip], Some(tip))? {
            return Ok(n);
        }
        backoff();
    }
    Err(Error::refused(format!("cannot update {NOTES_REF}: lost the race to other writers {TRIES} times")))
}

/// Every note of the notes commit `commit`: annotated object → note blob.
pub fn all(repo: &gix::Repository, commit: ObjectId) -> Result<BTreeMap<ObjectId, ObjectId>> {
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(|e| Error::internal(format!("notes commit {commit}: {e}")))?;
    let mut rec = gix::traverse::tree::Recorder::default();
    tree.traverse().breadthfirst(&mut rec).map_err(|e| Error::internal(format!("notes commit {commit}: {e}")))?;
    let mut out = BTreeMap::new();
    for e in rec.records {
        if e.mode.is_tree() {
            continue;
        }
        // Fanout paths (`ab/cdef…`) spell the annotated id with slashes.
        let hex: Vec<u8> = e.filepath.iter().copied().filter(|b| *b != b'/').collect();
        if let Ok(id) = ObjectId::from_hex(&hex) {
            out.insert(id, e.oid);
        }
    }
    Ok(out)
}

/// Largest note git-boulder reads from a fetched notes ref.
pub const MAX_NOTE_BYTES: u64 = 64 * 1024;

/// One record of a note: what the post-commit hook knew of a commit when it recorded it. A
/// note is one record per line, as JSON (several records when commits squashed into one carried
/// theirs along, see [`carry`]). Built and read only here.
///
/// The fields are in alphabetical order: the key order every git-boulder has written. Reading is
/// lenient beyond `stream`, so records of other versions (missing fields, or more) still read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Note {
    /// When the commit was recorded: now for the hook, the committer time for `git boulder record`.
    pub at: Option<String>,
    /// The boulder it counted for (and that boulder's ancestors).
    pub boulder: Option<String>,
    /// That boulder's iteration after it.
    pub iteration: Option<u64>,
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
    pub fn parse(data: &[u8]) -> std::result::Result<Vec<Note>, String> {
        if data.len() as u64 > MAX_NOTE_BYTES {
            return Err("is larger than 64 KiB".into());
        }
        let text = std::str::from_utf8(data).map_err(|_| "is not UTF-8".to_string())?;
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("is not JSON lines: {e}"))?;
            let note: Note = serde_json::from_value(v)
                .map_err(|_| "is not a git-boulder record (an object with a stream)".to_string())?;
            out.push(note);
        }
        Ok(out)
    }
}

/// Check a note's bytes as git-boulder writes them: at most 64 KiB of UTF-8, one JSON object per
/// non-empty line, each a [`Note`] (a string `stream`, and its other fields, where given, of
/// their types). Pure, so notes fetched from anywhere can be checked (and fuzzed). The error
/// completes "the note of <commit> …".
pub fn check(data: &[u8]) -> std::result::Result<(), String> {
    Note::parse(data).map(|_| ())
}

/// The lines of a note, for union merges: each record once, in order.
fn lines(data: &[u8]) -> Vec<Vec<u8>> {
    data.lines().filter(|l| !l.trim().is_empty()).map(|l| l.to_vec()).collect()
}

/// What [`union`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Union {
    /// Nothing to take: ours already holds every note of theirs.
    UpToDate,
    /// Ours did not exist: the ref was created at theirs.
    Created,
    /// Theirs contains ours: the ref moved to theirs.
    FastForward,
    /// A merge commit with both as parents.
    Merged,
}

/// Merge the notes commit `theirs` into `refs/notes/boulder`: notes only one side has are kept,
/// a commit noted on both sides with different records keeps the records of both (ours first,
/// then theirs' lines ours lacks). A compare-and-swap, retried when a local writer wins.
pub fn union(repo: &gix::Repository, theirs: ObjectId) -> Result<Union> {
    for _ in 0..TRIES {
        let ours = tip(repo)?;
        let Some(ours) = ours else {
            if commit_ref(repo, theirs, None)? {
                return Ok(Union::Created);
            }
            backoff();
            continue;
        };
        if ours == theirs || is_ancestor(repo, theirs, ours)? {
            return Ok(Union::UpToDate);
        }
        if is_ancestor(repo, ours, theirs)? {
            if commit_ref(repo, theirs, Some(ours))? {
                return Ok(Union::FastForward);
            }
            backoff();
            continue;
        }
        let mine = all(repo, ours)?;
        let other = all(repo, theirs)?;
        let mut state = state_at(repo, Some(ours))?;
        for (object, blob) in &other {
            match mine.get(object) {
                Some(b) if b == blob => {}
                Some(b) => {
                    let read = |id: &ObjectId| -> Result<Vec<u8>> {
                        Ok(repo
                            .find_object(*id)
                            .map_err(|e| Error::internal(format!("note blob {id}: {e}")))?
                            .detach()
                            .data)
                    };
                    let mut merged = lines(&read(b)?);
                    for l in lines(&read(blob)?) {
                        if !merged.contains(&l) {
                            merged.push(l);
                        }
                    }
                    let mut text = merged.join(&b'\n');
                    text.push(b'\n');
                    let id = repo
                        .write_blob(&text)
                        .map_err(|e| Error::internal(format!("cannot write a note: {e}")))?
                        .detach();
                    if id != *b {
                        state
                            .edit(*object, Some(id), repo)
                            .map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")))?;
                    }
                }
                None => {
                    state.edit(*object, Some(*blob), repo).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")))?;
                }
            }
        }
        let tree = state.write(repo).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")))?;
        if commit(repo, "Notes merged by git-boulder (union)", tree, &[ours, theirs], Some(ours))? {
            return Ok(Union::Merged);
        }
        backoff();
    }
    Err(Error::refused(format!("cannot update {NOTES_REF}: lost the race to other writers {TRIES} times")))
}

fn commit_ref(repo: &gix::Repository, to: ObjectId, expected: Option<ObjectId>) -> Result<bool> {
    let prev = match expected {
        Some(e) => PreviousValue::MustExistAndMatch(gix::refs::Target::Object(e)),
        None => PreviousValue::MustNotExist,
    };
    Ok(repo.reference(NOTES_REF, to, prev, "notes: fast-forward by git-boulder").is_ok())
}

/// Is `ancestor` reachable from `tip` (or equal)?
pub fn is_ancestor(repo: &gix::Repository, ancestor: ObjectId, tip: ObjectId) -> Result<bool> {
    if ancestor == tip {
        return Ok(true);
    }
    let walk = repo.rev_walk([tip]).all().map_err(|e| Error::internal(format!("cannot walk {tip}: {e}")))?;
    for info in walk {
        let info = info.map_err(|e| Error::internal(format!("cannot walk {tip}: {e}")))?;
        if info.id == ancestor {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_one_json_line_with_sorted_keys_and_reads_back() {
        let note = Note {
            at: Some("2026-01-01T00:00:00.000Z".into()),
            boulder: Some("auth".into()),
            iteration: Some(3),
            story: None,
            stream: "auth".into(),
        };
        let text = note.text();
        assert_eq!(
            text,
            "{\"at\":\"2026-01-01T00:00:00.000Z\",\"boulder\":\"auth\",\"iteration\":3,\"story\":null,\"stream\":\"auth\"}\n"
        );
        assert_eq!(Note::parse(text.as_bytes()).unwrap(), vec![note.clone()]);
        // Several records, one a line; fields other versions leave out or add are fine.
        let two = format!("{text}{{\"stream\":\"api\",\"extra\":[1]}}\n");
        let read = Note::parse(two.as_bytes()).unwrap();
        assert_eq!((read.len(), read[1].stream.as_str(), read[1].iteration), (2, "api", None));
        // What is refused, and how it is said.
        assert_eq!(check(b"{\"boulder\":\"x\"}").unwrap_err(), "is not a git-boulder record (an object with a stream)");
        assert!(check(b"{\"stream\":\"a\",\"iteration\":\"3\"}").is_err());
        assert!(check(b"[1]").unwrap_err().contains("not a git-boulder record"));
        assert!(check(b"rm -rf /").unwrap_err().starts_with("is not JSON lines"));
        assert_eq!(check(&[0xff]).unwrap_err(), "is not UTF-8");
    }
}
