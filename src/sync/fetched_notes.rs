//! A fetched notes ref checked before it is used: bounded sizes, read from object headers first,
//! and every note it adds UTF-8 JSON lines.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::git::objects::{EntryKind, Failure, Kind};
use crate::git::{notes, ObjectId, Repo};
use crate::state::NOTES_REF;

/// Most notes a fetched notes ref may hold.
pub const MAX_NOTES: usize = 1_000_000;
/// Largest tree object of a fetched notes ref read.
const MAX_NOTES_TREE_BYTES: u64 = 8 * 1024 * 1024;
/// Largest notes commit read.
const MAX_NOTES_COMMIT_BYTES: u64 = 64 * 1024;
/// How many of the commits a fetched notes ref adds are size-checked first, walking back from its tip.
const NOTES_COMMITS_CHECKED: usize = 10_000;

/// Why a fetched notes ref is refused; the message names the object.
#[derive(Debug, thiserror::Error)]
pub enum InvalidNotes {
    /// An object of it could not be read.
    #[error("{id}: {source}")]
    Unreadable { id: ObjectId, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("{id} is a {found}, not a {expected}")]
    WrongKind { id: ObjectId, found: Kind, expected: Kind },
    #[error("{kind} {id} is {size} bytes, more than the limit of {limit}")]
    TooLarge { kind: Kind, id: ObjectId, size: u64, limit: u64 },
    #[error("more than {MAX_NOTES} notes and note folders")]
    TooMany,
    /// The notes tree could not be listed.
    #[error("{0}")]
    List(#[source] Error),
    #[error("the note of {object}: {source}")]
    NoteUnreadable { object: ObjectId, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("the note of {object} is {size} bytes, more than the limit of {}", notes::MAX_NOTE_BYTES)]
    NoteTooLarge { object: ObjectId, size: u64 },
    /// A note that is not UTF-8 JSON lines of small objects (see [`notes::check`]).
    #[error("the note of {object} {why}")]
    BadNote {
        object: ObjectId,
        #[source]
        why: notes::NoteError,
    },
}

/// Check from object headers, before anything is read whole, that a fetched notes ref is of
/// bounded size: the commits it adds over ours, and the trees of its tip.
pub(super) fn bound_notes(repo: &Repo, theirs: ObjectId) -> std::result::Result<(), InvalidNotes> {
    let g = repo.objects();
    let ours = repo.ref_id(NOTES_REF).ok().flatten();
    let unreadable = |id: ObjectId| move |e: Failure| InvalidNotes::Unreadable { id, source: Box::new(e) };
    let header = |id: ObjectId, kind: Kind, limit: u64| -> std::result::Result<(), InvalidNotes> {
        let (found, size) = g.header(id).map_err(unreadable(id))?;
        if found != kind {
            return Err(InvalidNotes::WrongKind { id, found, expected: kind });
        }
        if size > limit {
            return Err(InvalidNotes::TooLarge { kind, id, size, limit });
        }
        Ok(())
    };
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![theirs];
    while let Some(id) = todo.pop() {
        if Some(id) == ours || !seen.insert(id) {
            continue;
        }
        if seen.len() > NOTES_COMMITS_CHECKED {
            // A long shared history (the walk stops at our tip only): what follows reads little
            // of it, so the newest commits are what matter.
            break;
        }
        header(id, Kind::Commit, MAX_NOTES_COMMIT_BYTES)?;
        todo.extend(g.parents(id).map_err(unreadable(id))?);
    }
    let (tip_tree, _) = g.commit_parts(theirs).map_err(unreadable(theirs))?;
    let mut trees = vec![tip_tree];
    let mut notes = 0usize;
    while let Some(t) = trees.pop() {
        header(t, Kind::Tree, MAX_NOTES_TREE_BYTES)?;
        for e in g.entries(t).map_err(unreadable(t))? {
            // Every entry counts, subtrees too: a tree repeated under many names would otherwise
            // be walked again and again (exponentially) before any bound fired.
            notes += 1;
            if e.kind == EntryKind::Tree {
                trees.push(e.id);
            }
        }
        if notes > MAX_NOTES {
            return Err(InvalidNotes::TooMany);
        }
    }
    Ok(())
}

/// Check every note a fetched notes commit adds: UTF-8 JSON lines, each an object, small.
pub(super) fn validate_notes(repo: &Repo, theirs: ObjectId) -> std::result::Result<(), InvalidNotes> {
    bound_notes(repo, theirs)?;
    let objects = repo.objects();
    let theirs_all = notes::all(repo, theirs).map_err(InvalidNotes::List)?;
    let ours_all = match repo.ref_id(NOTES_REF).ok().flatten() {
        Some(o) => notes::all(repo, o).map_err(InvalidNotes::List)?,
        None => BTreeMap::new(),
    };
    for (object, blob) in theirs_all {
        if ours_all.get(&object) == Some(&blob) {
            continue;
        }
        // The size from the object header first: a fetched note is never read whole when too large.
        let unreadable = |e: Failure| InvalidNotes::NoteUnreadable { object, source: Box::new(e) };
        let (_, size) = objects.header(blob).map_err(unreadable)?;
        if size > notes::MAX_NOTE_BYTES {
            return Err(InvalidNotes::NoteTooLarge { object, size });
        }
        let data = objects.read(blob).map_err(unreadable)?;
        notes::check(&data).map_err(|why| InvalidNotes::BadNote { object, why })?;
    }
    Ok(())
}
