//! Histories of the op-logs. [`Merged`]: several op-logs read as one history, newest first, in
//! bounded memory (`git boulder log`).
//!
//! Keeping git's own history views readable: git-boulder's state lives in refs (`refs/boulder/*`,
//! `refs/boulder-remotes/*`) and notes (`refs/notes/boulder`) whose commits `git log --all`, gitk
//! and tig would otherwise draw beside the user's branches. [`exclude_decorations`] sets
//! `log.excludeDecoration` so those refs never label the user's commits, and [`HIDE_ARGS`] is what
//! to give `git log`, gitk or tig in place of a bare `--all`.

use std::collections::VecDeque;

use super::store::History;
use super::{LogEntry, Store};
use crate::error::{Error, Result};
use crate::git::config::ConfigFile;
use crate::git::{ObjectId, Repo};

pub use crate::git::refs::{DECORATION_EXCLUDES, HIDE_ARGS};

/// Add (with `undo`, remove) [`DECORATION_EXCLUDES`] to `log.excludeDecoration` in the
/// repository's config file, leaving every other value as it is. Returns the `±key value` lines
/// changed.
pub fn exclude_decorations(repo: &Repo, undo: bool) -> Result<Vec<String>> {
    let path = repo.common_dir.join("config");
    let mut file = ConfigFile::read(&path)?;
    let mut changed = Vec::new();
    let mut now_empty = false;
    {
        let mut section = file.section("log", None).map_err(|e| Error::internal(format!("cannot edit log.*: {e}")))?;
        let now: Vec<String> = section.values("excludeDecoration");
        if undo {
            let kept: Vec<&String> = now.iter().filter(|v| !DECORATION_EXCLUDES.contains(&v.as_str())).collect();
            if kept.len() != now.len() {
                section.remove_all("excludeDecoration");
                for v in &kept {
                    section.push("excludeDecoration", v)?;
                }
                for v in now.iter().filter(|v| DECORATION_EXCLUDES.contains(&v.as_str())) {
                    changed.push(format!("-log.excludeDecoration {v}"));
                }
                now_empty = section.num_values() == 0;
            }
        } else {
            for pattern in DECORATION_EXCLUDES.iter().filter(|p| !now.iter().any(|v| v == *p)) {
                section.push("excludeDecoration", pattern)?;
                changed.push(format!("+log.excludeDecoration {pattern}"));
            }
        }
    }
    if now_empty {
        // The section held only what setup added: remove it, so undo restores the file.
        file.remove_section("log", None);
    }
    if !changed.is_empty() {
        crate::fsutil::write_atomic(&path, &file.to_bytes()?)?;
    }
    Ok(changed)
}

/// Several op-logs read as one history, newest first; for equal times, in the order the logs
/// were given, each log's own order kept (a stable sort by time of the logs' histories one after
/// the other). Each log is read as its ops are taken, so memory stays bounded and the first op
/// comes at once however long the history.
///
/// Each history comes in its own (replay) order, merged by time as read; clocks that disagree can
/// still put a later time after an earlier one, so the ops read ahead wait in a window sorted by
/// that key and the newest of them is taken: the very same order whenever no op is read later
/// than its place by as many ops as the window holds. The window holds `FIRST_WINDOW` ops for
/// the first ops taken (so the first comes at once) and grows with the ops taken — as many ops as
/// taken so far — up to `WINDOW`: an op read `d` ops after its place is taken at its place when
/// `d` is below the window's size when it is due (below FIRST_WINDOW, or below the number of ops
/// before it, and always below WINDOW); later than that, it is taken as soon as it is read. For
/// the N newest only ([`Merged::newest`]), the window is WINDOW from the start, so they are the
/// same as further down. Kept sorted, newest first: an op read usually belongs at the end (one
/// comparison); one whose time is out of place is inserted where it belongs.
pub struct Merged {
    logs: Vec<Log>,
    window: VecDeque<Ranked>,
    /// Ops read of each log.
    read: Vec<usize>,
    done: bool,
    whole_window: bool,
    taken: usize,
    ops_read: usize,
}

/// One op-log being merged: its ref, its ops still to come, and the next one read.
struct Log {
    r: String,
    ops: History,
    head: Option<LogEntry>,
}

/// How many ops read ahead may wait to be taken, for the order by time (see [`Merged`]).
const WINDOW: usize = 4096;
/// The window for the first ops: what is read before the first is taken (see [`Merged`]).
const FIRST_WINDOW: usize = 64;

/// An op read, ranked: newest time first, then the earlier log, then the earlier position in its
/// log.
struct Ranked {
    log: usize,
    pos: usize,
    entry: LogEntry,
}

impl Ranked {
    /// Greater is taken first.
    fn key(&self) -> (&str, std::cmp::Reverse<usize>, std::cmp::Reverse<usize>) {
        (&self.entry.op.at, std::cmp::Reverse(self.log), std::cmp::Reverse(self.pos))
    }
}

impl Merged {
    /// The op-logs `logs` (each a ref and its tip) of `store`, merged.
    pub fn new(store: &Store, logs: Vec<(String, ObjectId)>) -> Merged {
        let logs: Vec<Log> =
            logs.into_iter().map(|(r, tip)| Log { r, ops: store.history_iter(tip), head: None }).collect();
        Merged {
            read: vec![0; logs.len()],
            logs,
            window: VecDeque::new(),
            done: false,
            whole_window: false,
            taken: 0,
            ops_read: 0,
        }
    }

    /// Only the newest ops will be taken (`log -n N`): the whole window from the first.
    pub fn newest(mut self) -> Merged {
        self.whole_window = true;
        self
    }

    /// How many ops were read so far (taken, or waiting in the window).
    pub fn ops_read(&self) -> usize {
        self.ops_read
    }

    /// The next op, newest first, with the index of its log among those given.
    pub fn next_op(&mut self) -> Result<Option<(usize, LogEntry)>> {
        let size = if self.whole_window { WINDOW } else { self.taken.clamp(FIRST_WINDOW, WINDOW) };
        while !self.done && self.window.len() < size {
            match self.read_next()? {
                Some((i, entry)) => {
                    let new = Ranked { log: i, pos: self.read[i], entry };
                    self.read[i] += 1;
                    self.ops_read += 1;
                    if self.window.back().is_none_or(|last| last.key() > new.key()) {
                        self.window.push_back(new);
                    } else {
                        let at = self.window.partition_point(|x| x.key() > new.key());
                        self.window.insert(at, new);
                    }
                }
                None => self.done = true,
            }
        }
        let Some(Ranked { log, entry, .. }) = self.window.pop_front() else { return Ok(None) };
        self.taken += 1;
        Ok(Some((log, entry)))
    }

    /// The newest next op read of all logs (for equal times, the first log's) and its log's
    /// index, or `None` when all are done.
    fn read_next(&mut self) -> Result<Option<(usize, LogEntry)>> {
        let logs = &mut self.logs;
        let mut best: Option<usize> = None;
        for i in 0..logs.len() {
            if logs[i].head.is_none() {
                logs[i].head = logs[i].ops.next().transpose().map_err(|e| e.context(&logs[i].r))?;
            }
            let Some(at) = logs[i].head.as_ref().map(|e| &e.op.at) else { continue };
            if best.is_none_or(|b| logs[b].head.as_ref().is_some_and(|o| *at > o.op.at)) {
                best = Some(i);
            }
        }
        Ok(best.and_then(|b| Some((b, logs[b].head.take()?))))
    }
}
