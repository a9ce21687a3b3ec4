//! `refs/notes/boulder`: one note per recorded commit (JSON lines), written with gix's notes
//! trees (`gix::note`), every ref update a compare-and-swap retried on a lost race.
//!
//! * [`write`] and [`read`]: one note (the post-commit hook).
//! * [`carry`]: carry the notes of rewritten commits onto their new ids in one notes commit,
//!   concatenating the records of commits squashed into one (post-rewrite, merges that rebase).
//! * [`union`]: merge another notes commit into ours (pull): a commit noted on one side keeps its
//!   note, a commit noted differently on both sides keeps both records, one line each.

use std::collections::BTreeMap;

use gix::note::plumbing::State;
use gix::prelude::Find;

use super::identity::{self, Signature};
use super::note::lines;
pub use super::note::{check, Note, NoteError, MAX_NOTE_BYTES};
use super::objects::{Loose, WriteFresh};
use super::refs::{self, Backoff, Expect, GaveUp, Odd, Retry, Step, NOTES as NOTES_REF};
use super::{ObjectId, Repo};
use crate::error::{Error, Result};

/// How often a notes update is retried after losing a race.
const TRIES: u32 = 200;

/// Every notes update: any failed compare-and-swap is taken for a lost race, after a pause of up
/// to 3 ms.
const RETRY: Retry = Retry { tries: TRIES, odd: Odd::Always, backoff: Backoff::Flat };

fn lost_the_race() -> Error {
    Error::refused(format!("cannot update {NOTES_REF}: lost the race to other writers {TRIES} times"))
}

/// The message of the notes commit [`write`] makes.
const WRITE_MESSAGE: &str = "Notes added by git-boulder";

/// Write (or replace) the note of `commit`, retrying when another writer moved the notes ref.
/// The note holds the one record `note`.
///
/// The hot path of the post-commit hook: one blob, the notes tree(s) and a commit, then a
/// compare-and-swap of the ref; the identity comes from `identity::notes_identity`.
pub fn write(repo: &Repo, commit: ObjectId, note: &Note) -> Result<()> {
    let text = &note.text();
    let repo = &repo.repo;
    let Some((committer, author)) = identity::notes_identity(repo) else {
        return write_as_configured(repo, commit, text);
    };
    // The note's blob, the notes trees holding it and the commit hold the time of the record:
    // new objects, written without first asking the store whether it holds them, through one
    // writer.
    let loose = Loose::new(repo);
    let blob = note_blob(&loose, text)?;
    let who = Signature(committer.clone());
    let written = refs::update_with_retry_in(repo, NOTES_REF, RETRY, |_| {
        let tip = tip(repo)?;
        let id = notes_commit_of(repo, &loose, tip, commit, blob, &author, &committer)?;
        Ok(Step::Update {
            expected: Expect::from_tip(tip),
            new: id,
            message: format!("notes: {WRITE_MESSAGE}"),
            writer: Some(who.clone()),
            moved: (),
            already: Some(()),
        })
    })?;
    written.map_err(|e| {
        let last = match e {
            GaveUp::Exhausted(last) => last.map(|e| e.to_string()).unwrap_or_default(),
            GaveUp::Failed(e) => e.to_string(),
        };
        Error::internal(format!("cannot write the note of {commit}: {last}"))
    })
}

fn note_blob(loose: &Loose, text: &str) -> Result<ObjectId> {
    loose
        .write_buf(gix::objs::Kind::Blob, text.as_bytes())
        .map_err(|e| Error::internal(format!("cannot write a note: {e}")).with_source(e))
}

/// The notes commit on `tip` that gives `commit` the note `blob`, its trees and itself written
/// through `loose`.
fn notes_commit_of(
    repo: &gix::Repository,
    loose: &Loose,
    tip: Option<ObjectId>,
    commit: ObjectId,
    blob: ObjectId,
    author: &gix::actor::Signature,
    committer: &gix::actor::Signature,
) -> Result<ObjectId> {
    let fresh = WriteFresh { repo, loose };
    let mut state = state_at(repo, tip)?;
    state.edit(commit, Some(blob), repo).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")).with_source(e))?;
    let tree = state.write(&fresh).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")).with_source(e))?;
    let notes_commit = gix::objs::Commit {
        tree,
        parents: tip.into_iter().collect(),
        author: author.clone(),
        committer: committer.clone(),
        encoding: None,
        message: WRITE_MESSAGE.into(),
        extra_headers: Vec::new(),
    };
    loose.write(&notes_commit).map_err(|e| Error::internal(format!("cannot write a notes commit: {e}")).with_source(e))
}

/// A note [`plan`]ned on the tip of the notes ref, for [`apply`] once its objects are written.
pub struct Planned {
    expected: Option<ObjectId>,
    new: ObjectId,
    who: Signature,
}

/// Plan [`write`] on the current tip: the note's objects go into `batch`; `None` when the
/// identity is one only gix's notes API resolves (then [`write`] it).
pub fn plan(repo: &Repo, commit: ObjectId, note: &Note, batch: &super::objects::Batch) -> Result<Option<Planned>> {
    let repo = &repo.repo;
    let Some((committer, author)) = identity::notes_identity(repo) else { return Ok(None) };
    let loose = batch.loose();
    let blob = note_blob(loose, &note.text())?;
    let expected = tip(repo)?;
    let new = notes_commit_of(repo, loose, expected, commit, blob, &author, &committer)?;
    Ok(Some(Planned { expected, new, who: Signature(committer) }))
}

/// Move the notes ref as `planned` (its objects written), by one compare-and-swap: false when
/// it moved meanwhile or another writer holds its lock (then [`write`] the note).
pub fn apply(repo: &Repo, planned: &Planned) -> Result<bool> {
    let moved = refs::update(
        repo,
        NOTES_REF,
        Expect::from_tip(planned.expected),
        planned.new,
        &format!("notes: {WRITE_MESSAGE}"),
        refs::Writer::As(&planned.who),
    )?;
    Ok(moved.is_ok())
}

/// [`write`] through gix's notes API (which moves the ref itself, failing on a lost race), gix
/// resolving the identity and the time: when a date
/// override is in a form only gix can read (a relative date such as `2 days ago`).
fn write_as_configured(repo: &gix::Repository, commit: ObjectId, text: &str) -> Result<()> {
    let repo = identity::with_notes_identity(repo);
    let mut last = String::new();
    for _ in 0..TRIES {
        let mut notes = repo
            .notes()
            .map_err(|e| Error::internal(format!("notes: {e}")).with_source(e))?
            .with_commit_message(WRITE_MESSAGE);
        match notes.replace(NOTES_REF, commit, text.as_bytes()) {
            Ok(_) => return Ok(()),
            Err(e) => {
                last = e.to_string();
                Backoff::Flat.pause(0);
            }
        }
    }
    Err(Error::internal(format!("cannot write the note of {commit}: {last}")))
}

/// The note of `commit`, if it has one.
pub fn read(repo: &Repo, commit: ObjectId) -> Option<Vec<u8>> {
    let mut notes = repo.repo.notes().ok()?.with_refs([NOTES_REF]).ok()?;
    let found = notes.get(commit).ok()?;
    found.into_iter().next().map(|n| n.blob.data.clone())
}

/// Which commits have a note: the notes tree at the tip of `refs/notes/boulder`, read once and
/// looked up per commit (a few tree reads each, however many notes there are).
pub struct Noted {
    state: Option<State>,
}

impl Noted {
    pub fn new(repo: &Repo) -> Result<Self> {
        let state = match tip(&repo.repo)? {
            Some(t) => Some(state_at(&repo.repo, Some(t))?),
            None => None,
        };
        Ok(Noted { state })
    }

    /// Whether `commit` has a note.
    pub fn has(&mut self, repo: &Repo, commit: ObjectId) -> Result<bool> {
        let Some(state) = self.state.as_mut() else { return Ok(false) };
        let found = state
            .get(&commit, &repo.repo)
            .map_err(|e| Error::internal(format!("{NOTES_REF}: cannot look up {commit}: {e}")).with_source(e))?;
        Ok(found.is_some())
    }
}

fn tip(repo: &gix::Repository) -> Result<Option<ObjectId>> {
    match repo.try_find_reference(NOTES_REF) {
        Ok(Some(mut r)) => Ok(Some(
            r.peel_to_id()
                .map_err(|e| Error::internal(format!("cannot resolve {NOTES_REF}: {e}")).with_source(e))?
                .detach(),
        )),
        Ok(None) => Ok(None),
        Err(e) => Err(Error::internal(format!("cannot read {NOTES_REF}: {e}")).with_source(e)),
    }
}

fn state_at(repo: &gix::Repository, commit: Option<ObjectId>) -> Result<State> {
    let tree = match commit {
        Some(c) => repo
            .find_commit(c)
            .and_then(|c| c.tree_id().map(|t| t.detach()))
            .map_err(|e| Error::internal(format!("{NOTES_REF}: commit {c}: {e}")).with_source(e))?,
        None => ObjectId::empty_tree(repo.object_hash()),
    };
    State::new(tree, repo)
        .map_err(|e| Error::internal(format!("{NOTES_REF}: cannot read the notes tree {tree}: {e}")).with_source(e))
}

/// Commit `tree` on top of `parents` as the configured identity.
fn notes_commit(repo: &gix::Repository, message: &str, tree: ObjectId, parents: &[ObjectId]) -> Result<ObjectId> {
    Ok(repo
        .new_commit(message, tree, parents.iter().copied())
        .map_err(|e| Error::internal(format!("cannot write a notes commit: {e}")).with_source(e))?
        .id)
}

/// A move of the notes ref to `new`, logged as the configured identity.
fn step<T: Clone>(expected: Expect, new: ObjectId, message: String, then: T) -> Step<T> {
    Step::Update { expected, new, message, writer: None, moved: then.clone(), already: Some(then) }
}

/// Carry the notes of rewritten commits onto their new ids, in one notes commit, the way
/// `notes.rewriteRef` with `notes.rewriteMode = concatenate` does: when several old commits map to
/// one new commit (squash and fixup in `rebase -i`), the new commit's note holds the records of
/// all of them (and any it had already), each record once, in order. Returns how many new
/// commits got a note or a changed one.
pub fn carry(repo: &Repo, pairs: &[(ObjectId, ObjectId)]) -> Result<usize> {
    let repo = &identity::with_notes_identity(&repo.repo);
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
    let carried = refs::update_with_retry_in(repo, NOTES_REF, RETRY, |_| {
        let Some(tip) = tip(repo)? else { return Ok(Step::Done(0)) };
        let mut state = state_at(repo, Some(tip))?;
        let mut n = 0;
        for (new, list) in &olds {
            let mut get = |id: &ObjectId| {
                state
                    .get(id, repo)
                    .map_err(|e| Error::internal(format!("{NOTES_REF}: cannot look up {id}: {e}")).with_source(e))
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
                            .map_err(|e| Error::internal(format!("note blob {blob}: {e}")).with_source(e))?
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
                    repo.write_blob(&text)
                        .map_err(|e| Error::internal(format!("cannot write a note: {e}")).with_source(e))?
                        .detach()
                }
            };
            if current != Some(merged) {
                state
                    .edit(*new, Some(merged), repo)
                    .map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")).with_source(e))?;
                n += 1;
            }
        }
        if n == 0 {
            return Ok(Step::Done(0));
        }
        let tree = state.write(repo).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")).with_source(e))?;
        let message = "Notes carried over rewritten commits by git-boulder";
        let id = notes_commit(repo, message, tree, &[tip])?;
        Ok(step(Expect::At(tip), id, format!("notes: {message}"), n))
    })?;
    carried.map_err(|_| lost_the_race())
}

/// Every note of the notes commit `commit`: annotated object → note blob.
pub fn all(repo: &Repo, commit: ObjectId) -> Result<BTreeMap<ObjectId, ObjectId>> {
    all_in(&repo.repo, commit)
}

fn all_in(repo: &gix::Repository, commit: ObjectId) -> Result<BTreeMap<ObjectId, ObjectId>> {
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(|e| Error::internal(format!("notes commit {commit}: {e}")).with_source(e))?;
    let mut rec = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut rec)
        .map_err(|e| Error::internal(format!("notes commit {commit}: {e}")).with_source(e))?;
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

/// A record of a note, with its line as written.
pub type Record = (Note, Vec<u8>);

/// A commit whose note holds records of one stream ([`recorded_for`]).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub commit: ObjectId,
    /// The note's records of that stream, each with its line as written: a commit rewritten
    /// by a rebase carries the same lines (see [`carry`]).
    pub records: Vec<Record>,
    /// A `stream rollback` set it aside from the stream ([`set_aside`]).
    pub set_aside: bool,
}

/// Every commit whose note in `refs/notes/boulder` holds a record of `stream`, by id.
///
/// ### Performance
/// Which notes name the stream comes from this machine's index of the notes
/// ([`super::notes_index`]), brought up to date by reading only the notes new since; then only
/// those notes are read.
pub fn recorded_for(repo: &Repo, stream: &str) -> Result<Vec<Recorded>> {
    let Some(tip) = tip(&repo.repo)? else { return Ok(Vec::new()) };
    let tree = repo
        .repo
        .find_commit(tip)
        .and_then(|c| c.tree_id().map(|t| t.detach()))
        .map_err(|e| Error::internal(format!("{NOTES_REF}: commit {tip}: {e}")).with_source(e))?;
    let commits = super::notes_index::index(repo, tree)?.commits_of(stream);
    if commits.is_empty() {
        return Ok(Vec::new());
    }
    let mut state = state_at(&repo.repo, Some(tip))?;
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for commit in commits {
        let Some(blob) = state
            .get(&commit, &repo.repo)
            .map_err(|e| Error::internal(format!("{NOTES_REF}: cannot look up {commit}: {e}")).with_source(e))?
        else {
            continue;
        };
        let data = match repo.repo.objects.try_find(&blob, &mut buf) {
            Ok(Some(d)) if d.kind == gix::object::Kind::Blob => d.data,
            // A note that cannot be read is no record; pull checked every note it brought.
            _ => continue,
        };
        let (marks, records): (Vec<Record>, Vec<Record>) = lines(data)
            .into_iter()
            .filter_map(|l| serde_json::from_slice::<Note>(&l).ok().map(|n| (n, l)))
            .filter(|(n, _)| n.stream == stream)
            .partition(|(n, _)| n.set_aside.is_some());
        if !records.is_empty() {
            out.push(Recorded { commit, records, set_aside: !marks.is_empty() });
        }
    }
    Ok(out)
}

/// Add the mark `mark` (a record of `stream` with `set_aside`) to the note of each of `commits`
/// that holds a record of `stream`, in one notes commit; a note that has a mark of the stream
/// with the same `set_aside` already is left as it is, so marking again changes nothing.
/// Returns how many notes changed.
pub fn set_aside(repo: &Repo, stream: &str, commits: &[ObjectId], mark: &Note) -> Result<usize> {
    let repo = &identity::with_notes_identity(&repo.repo);
    let line =
        serde_json::to_vec(mark).map_err(|e| Error::internal(format!("cannot write a note: {e}")).with_source(e))?;
    let changed = refs::update_with_retry_in(repo, NOTES_REF, RETRY, |_| {
        let Some(tip) = tip(repo)? else { return Ok(Step::Done(0)) };
        let mut state = state_at(repo, Some(tip))?;
        let mut n = 0;
        for commit in commits {
            let Some(blob) = state
                .get(commit, repo)
                .map_err(|e| Error::internal(format!("{NOTES_REF}: cannot look up {commit}: {e}")).with_source(e))?
            else {
                continue;
            };
            let data = repo
                .find_object(blob)
                .map_err(|e| Error::internal(format!("note blob {blob}: {e}")).with_source(e))?
                .detach()
                .data;
            let mut records = lines(&data);
            let parsed: Vec<Note> = records.iter().filter_map(|l| serde_json::from_slice(l).ok()).collect();
            let ours = parsed.iter().any(|r| r.stream == stream && r.set_aside.is_none());
            let marked = parsed.iter().any(|r| r.stream == stream && r.set_aside == mark.set_aside);
            if !ours || marked {
                continue;
            }
            records.push(line.clone());
            let mut text = records.join(&b'\n');
            text.push(b'\n');
            let id = repo
                .write_blob(&text)
                .map_err(|e| Error::internal(format!("cannot write a note: {e}")).with_source(e))?
                .detach();
            state
                .edit(*commit, Some(id), repo)
                .map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")).with_source(e))?;
            n += 1;
        }
        if n == 0 {
            return Ok(Step::Done(0));
        }
        let tree = state.write(repo).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")).with_source(e))?;
        let message = "Notes marked set aside by git-boulder";
        let id = notes_commit(repo, message, tree, &[tip])?;
        Ok(step(Expect::At(tip), id, format!("notes: {message}"), n))
    })?;
    changed.map_err(|_| lost_the_race())
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
pub fn union(repo: &Repo, theirs: ObjectId) -> Result<Union> {
    let repo = &identity::with_notes_identity(&repo.repo);
    const FAST_FORWARD: &str = "notes: fast-forward by git-boulder";
    let merged = refs::update_with_retry_in(repo, NOTES_REF, RETRY, |_| {
        let ours = tip(repo)?;
        let Some(ours) = ours else {
            return Ok(step(Expect::Absent, theirs, FAST_FORWARD.into(), Union::Created));
        };
        if ours == theirs || is_ancestor(repo, theirs, ours)? {
            return Ok(Step::Done(Union::UpToDate));
        }
        if is_ancestor(repo, ours, theirs)? {
            return Ok(step(Expect::At(ours), theirs, FAST_FORWARD.into(), Union::FastForward));
        }
        let mine = all_in(repo, ours)?;
        let other = all_in(repo, theirs)?;
        let mut state = state_at(repo, Some(ours))?;
        for (object, blob) in &other {
            match mine.get(object) {
                Some(b) if b == blob => {}
                Some(b) => {
                    let read = |id: &ObjectId| -> Result<Vec<u8>> {
                        Ok(repo
                            .find_object(*id)
                            .map_err(|e| Error::internal(format!("note blob {id}: {e}")).with_source(e))?
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
                        .map_err(|e| Error::internal(format!("cannot write a note: {e}")).with_source(e))?
                        .detach();
                    if id != *b {
                        state
                            .edit(*object, Some(id), repo)
                            .map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")).with_source(e))?;
                    }
                }
                None => {
                    state
                        .edit(*object, Some(*blob), repo)
                        .map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")).with_source(e))?;
                }
            }
        }
        let tree = state.write(repo).map_err(|e| Error::internal(format!("{NOTES_REF}: {e}")).with_source(e))?;
        let message = "Notes merged by git-boulder (union)";
        let id = notes_commit(repo, message, tree, &[ours, theirs])?;
        Ok(step(Expect::At(ours), id, format!("notes: {message}"), Union::Merged))
    })?;
    merged.map_err(|_| lost_the_race())
}

/// Is `ancestor` reachable from `tip` (or equal)?
fn is_ancestor(repo: &gix::Repository, ancestor: ObjectId, tip: ObjectId) -> Result<bool> {
    if ancestor == tip {
        return Ok(true);
    }
    let walk =
        repo.rev_walk([tip]).all().map_err(|e| Error::internal(format!("cannot walk {tip}: {e}")).with_source(e))?;
    for info in walk {
        let info = info.map_err(|e| Error::internal(format!("cannot walk {tip}: {e}")).with_source(e))?;
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
            actor: None,
            at: Some("2026-01-01T00:00:00.000Z".into()),
            boulder: Some("auth".into()),
            host: None,
            iteration: Some(3),
            set_aside: None,
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
        assert_eq!(
            check(b"{\"boulder\":\"x\"}").unwrap_err().to_string(),
            "is not a git-boulder record (an object with a stream)"
        );
        assert!(check(b"{\"stream\":\"a\",\"iteration\":\"3\"}").is_err());
        assert!(check(b"[1]").unwrap_err().to_string().contains("not a git-boulder record"));
        assert!(check(b"rm -rf /").unwrap_err().to_string().starts_with("is not JSON lines"));
        assert_eq!(check(&[0xff]).unwrap_err().to_string(), "is not UTF-8");
    }
}
