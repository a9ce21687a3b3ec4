//! The history of an op-log, newest first in replay order, streamed: [`Store::log`],
//! [`Store::history_iter`] and the [`History`] walk that reads ahead on long histories.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::git::objects::{CommitFiles, Failure};
use crate::git::ObjectId;
use crate::state::op::Op;

use super::{ChainError, LogEntry, Store};

impl<'r> Store<'r> {
    /// The history of an op-log, newest first (reverse replay order: by lamport clock, then time,
    /// actor and commit id, descending — the same on every machine).
    pub fn log(&self, refname: &str) -> Result<Vec<LogEntry>> {
        let Some(tip) = self.repo.ref_id(refname)? else { return Ok(Vec::new()) };
        self.history(tip).map_err(|e| e.context(refname))
    }

    /// The ops reachable from `tip`, newest first (see [`Store::log`]), all of them.
    pub fn history(&self, tip: ObjectId) -> Result<Vec<LogEntry>> {
        self.history_iter(tip).collect()
    }

    /// The ops reachable from `tip` in the order of [`Store::history`], read as they are met
    /// (see [`History`]): the first comes after reading one commit, and memory stays bounded by
    /// the width of the history, not its length.
    pub fn history_iter(&self, tip: ObjectId) -> History {
        History::new(self, tip)
    }

    pub(super) fn op_of(&self, commit: ObjectId) -> std::result::Result<Op, ChainError> {
        let (tree, _) = self.git().commit_parts(commit).map_err(|source| ChainError::Broken { commit, source })?;
        self.op_in(commit, tree)
    }

    /// The op of `commit`, whose tree is `tree`, read with `files`.
    fn read_op(files: &mut CommitFiles, commit: ObjectId, tree: ObjectId) -> std::result::Result<Op, ChainError> {
        let bytes =
            files.file(tree, "op.json").map_err(|source| ChainError::Unreadable { commit, what: "op.json", source })?;
        Self::parse_op(commit, bytes.ok_or(ChainError::NoFile { commit, name: "op.json" })?)
    }

    /// The op of `commit`, whose tree is `tree`.
    fn op_in(&self, commit: ObjectId, tree: ObjectId) -> std::result::Result<Op, ChainError> {
        let objects = self.git();
        let entries = objects.entries(tree).map_err(|source| ChainError::Broken { commit, source })?;
        let entry =
            entries.iter().find(|e| e.name == "op.json").ok_or(ChainError::NoFile { commit, name: "op.json" })?;
        let data =
            objects.read(entry.id).map_err(|source| ChainError::Unreadable { commit, what: "op.json", source })?;
        Self::parse_op(commit, &data)
    }
}

/// The ops of an op-log, newest first, read as they are met: [`Store::history_iter`].
///
/// Replay order sorts by `(lamport, at, actor, commit id)`. Along every parent link the clock
/// never grows (an op's clock is one more than its parent's; a merge's is one more than the
/// highest op it merges), so a walk that always takes the commit with the highest key among those
/// met meets them in that order, with one exception: a merge can share its clock with a parent.
/// So the walk takes all the commits of one clock at a time (their parents of the same clock
/// included), sorts that group, and yields it. Memory holds the walk's frontier, one group, and
/// the ids of commits met whose clock is not above the current one (a commit is met again only
/// through a child, and every child of a commit with a higher clock has been taken already).
///
/// Once a history proves long, threads read ahead along first parents — one the commits,
/// others (`OP_READERS`) each commit's `op.json`, taking batches of them in turn — at most
/// [`READ_AHEAD`] commits ahead, while this one orders and the caller prints: what a linear
/// history needs next is always the next one they read.
pub struct History {
    files: CommitFiles,
    tip: ObjectId,
    /// Commits met but not yet taken, by key.
    frontier: std::collections::BinaryHeap<Pending>,
    /// Commits met, with their clocks (pruned as the walk goes down).
    seen: HashMap<ObjectId, u64>,
    /// `seen`'s size after the last pruning.
    kept: usize,
    /// The sorted group being yielded, last first.
    ready: Vec<LogEntry>,
    /// Set once an error was returned: the walk ends there.
    failed: bool,
    /// Whether the tip was read.
    started: bool,
    /// Commits read so far.
    read: usize,
    /// The read-ahead, once started.
    ahead: Option<Ahead>,
}

/// Commits read before reading ahead starts: a short log is not worth the threads, and neither
/// is a reader that stops after the first lines (`git boulder log | head`: `log` prints its first
/// line after 64 ops, and a reader gone is noticed within a few lines more).
const READ_AHEAD_AFTER: usize = 512;
/// How far ahead of the walk the read-ahead threads go, in commits.
pub const READ_AHEAD: usize = 1024;

type Read = std::result::Result<(Op, Vec<ObjectId>), ChainError>;

/// Ops read ahead along first parents, in order, and the ones received but not taken yet.
struct Ahead {
    /// The readers' batches: batch `i` of the walk comes from `rx[i % rx.len()]`.
    rx: Vec<std::sync::mpsc::Receiver<Vec<(ObjectId, Read)>>>,
    /// Which receiver the next batch comes from.
    turn: usize,
    head: std::collections::VecDeque<(ObjectId, Read)>,
}

/// Commits the read-ahead threads hand on at a time (fewer wake-ups than one by one).
const BATCH: usize = 64;
/// Threads reading the ops of the commits read ahead, taking batches in turn (reading a commit's
/// tree and `op.json` and parsing it costs more than reading the commit: two keep up with one).
const OP_READERS: usize = 2;

impl Ahead {
    /// Start reading ahead from `from` down its first parents; `None` when no thread can start.
    fn start(files: &CommitFiles, from: ObjectId) -> Option<Ahead> {
        use std::sync::mpsc::{sync_channel, SyncSender};
        type Commit = (ObjectId, std::result::Result<(ObjectId, Vec<ObjectId>), Failure>);
        // At most READ_AHEAD commits in flight: queued to the readers, and read, in all.
        let depth = (READ_AHEAD / BATCH / 2 / OP_READERS).max(1);
        let mut to_readers: Vec<SyncSender<Vec<Commit>>> = Vec::new();
        let mut rx = Vec::new();
        for n in 0..OP_READERS {
            let (commits_tx, commits_rx) = sync_channel::<Vec<Commit>>(depth);
            let (tx, ops_rx) = sync_channel::<Vec<(ObjectId, Read)>>(depth);
            let mut ops = files.clone();
            let spawned = std::thread::Builder::new().name(format!("log-ops-{n}")).spawn(move || {
                for batch in commits_rx {
                    let read: Vec<(ObjectId, Read)> = batch
                        .into_iter()
                        .map(|(commit, read)| {
                            let op = read
                                .map_err(|source| ChainError::Broken { commit, source })
                                .and_then(|(tree, parents)| Ok((Store::read_op(&mut ops, commit, tree)?, parents)));
                            (commit, op)
                        })
                        .collect();
                    // A send fails when the walk is gone: the log ended or failed.
                    if tx.send(read).is_err() {
                        break;
                    }
                }
            });
            if spawned.is_err() {
                // Readers already started end as their senders drop.
                return None;
            }
            to_readers.push(commits_tx);
            rx.push(ops_rx);
        }
        let mut commits = files.clone();
        std::thread::Builder::new()
            .name("log-commits".into())
            .spawn(move || {
                let mut next = Some(from);
                let mut batch = Vec::with_capacity(BATCH);
                let mut turn = 0;
                while let Some(id) = next {
                    let read = commits.commit(id);
                    next = read.as_ref().ok().and_then(|(_, parents)| parents.first().copied());
                    batch.push((id, read));
                    if batch.len() == BATCH || next.is_none() {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                        // A send fails when the reader is gone: the log ended or failed.
                        if to_readers[turn].send(full).is_err() {
                            break;
                        }
                        turn = (turn + 1) % to_readers.len();
                    }
                }
            })
            .ok()?;
        Some(Ahead { rx, turn: 0, head: std::collections::VecDeque::new() })
    }

    /// The next batch read ahead, in the walk's order; `None` once the read-ahead has ended.
    fn recv(&mut self) -> Option<Vec<(ObjectId, Read)>> {
        let batch = self.rx[self.turn].recv().ok()?;
        self.turn = (self.turn + 1) % self.rx.len();
        Some(batch)
    }
}

/// A commit met by [`History`]: its op and parents, ordered by replay key.
struct Pending {
    op: Op,
    commit: ObjectId,
    parents: Vec<ObjectId>,
}

impl Pending {
    fn key(&self) -> (u64, &str, &str, &ObjectId) {
        (self.op.lamport, &self.op.at, &self.op.actor, &self.commit)
    }
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl History {
    fn new(store: &Store<'_>, tip: ObjectId) -> Self {
        History {
            files: store.git().commit_files(),
            tip,
            frontier: std::collections::BinaryHeap::new(),
            seen: HashMap::new(),
            kept: 0,
            ready: Vec::new(),
            failed: false,
            started: false,
            read: 0,
            ahead: None,
        }
    }

    /// The op and parents of `commit` from the read-ahead, when it is the next one there.
    fn take_ahead(&mut self, commit: ObjectId) -> Option<Read> {
        let ahead = self.ahead.as_mut()?;
        loop {
            if ahead.head.is_empty() {
                let batch = ahead.recv()?;
                ahead.head.extend(batch);
            }
            let id = ahead.head.front()?.0;
            if id == commit {
                return ahead.head.pop_front().map(|(_, read)| read);
            }
            if !self.seen.contains_key(&id) {
                // Not needed yet (the walk is on another branch): this one is read here.
                return None;
            }
            // Met already, through another path: drop it.
            ahead.head.pop_front();
        }
    }

    /// Read a commit met for the first time and put it on the frontier.
    fn meet(&mut self, commit: ObjectId) -> std::result::Result<(), ChainError> {
        if self.seen.contains_key(&commit) {
            return Ok(());
        }
        let (op, parents) = match self.take_ahead(commit) {
            Some(read) => read?,
            None => {
                let (tree, parents) =
                    self.files.commit(commit).map_err(|source| ChainError::Broken { commit, source })?;
                (Store::read_op(&mut self.files, commit, tree)?, parents)
            }
        };
        self.read += 1;
        if self.read == READ_AHEAD_AFTER {
            if let Some(first) = parents.first() {
                self.ahead = Ahead::start(&self.files, *first);
            }
        }
        self.seen.insert(commit, op.lamport);
        self.frontier.push(Pending { op, commit, parents });
        Ok(())
    }

    /// Take the next group of commits sharing the highest clock on the frontier into `ready`.
    fn next_group(&mut self) -> std::result::Result<(), ChainError> {
        if !self.started {
            self.started = true;
            self.meet(self.tip)?;
        }
        let Some(clock) = self.frontier.peek().map(|p| p.op.lamport) else { return Ok(()) };
        let mut group = Vec::new();
        while self.frontier.peek().is_some_and(|p| p.op.lamport == clock) {
            let p = self.frontier.pop().expect("peeked");
            for parent in &p.parents {
                self.meet(*parent)?;
            }
            group.push(p);
        }
        // Commits above this clock have all their children taken: they are not met again.
        if self.seen.len() > 2 * self.kept + 1024 {
            self.seen.retain(|_, c| *c <= clock);
            self.kept = self.seen.len();
        }
        group.sort();
        self.ready =
            group.into_iter().map(|p| LogEntry { commit: p.commit, is_merge: p.parents.len() > 1, op: p.op }).collect();
        Ok(())
    }
}

impl Iterator for History {
    type Item = Result<LogEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.ready.is_empty() {
            if let Err(e) = self.next_group() {
                self.failed = true;
                return Some(Err(Error::usage(e.to_string()).with_source(e)));
            }
        }
        self.ready.pop().map(Ok)
    }
}
