//! Appending to an op-log: the op completed, clocked and checked, its commit written, and the ref
//! moved by compare-and-swap (retried on a lost race); and the bytes of an op commit.

use crate::error::{Error, Result};
use crate::git::identity;
use crate::git::objects::{Batch, Fresh};
use crate::git::refs::{self, Backoff, Expect, GaveUp, Odd, Retry, Step};
use crate::git::ObjectId;
use crate::state::op::{Op, Payload, State, MERGE_KIND};
use crate::state::{BOULDERS, STREAMS};

use super::{internal, Entry, Store};

/// How often an append tries a compare-and-swap before giving up.
pub(super) const MAX_TRIES: u32 = 400;
/// How often an append retries an error that is neither a lost race nor a held lock.
pub(super) const MAX_ODD_TRIES: u32 = 3;

/// The part of a ref name after the stream or boulder prefix, if it has one.
fn leaf(refname: &str) -> Option<&str> {
    refname.strip_prefix(STREAMS).or_else(|| refname.strip_prefix(BOULDERS)).filter(|l| !l.is_empty())
}

impl<'r> Store<'r> {
    /// Append one op (compare-and-swap with retry on a lost race).
    pub fn append<S: State>(&self, refname: &str, op: S::Op) -> Result<Entry<S>> {
        let entry = self.append_if::<S>(refname, |_| Ok(Some(op.clone())))?;
        entry.ok_or_else(|| Error::internal("append: nothing was appended"))
    }

    /// Append an op given as its kind and JSON data, read exactly as an op read from a ref is
    /// (for tools and tests that write ops from outside; git-boulder itself writes typed ops).
    /// An unknown kind or bad data is a usage error and nothing is written.
    pub fn append_raw<S: State>(&self, refname: &str, kind: &str, data: serde_json::Value) -> Result<Entry<S>> {
        if kind == MERGE_KIND {
            return Err(Error::usage(format!("{refname}: merge ops are written only by merging two op-logs")));
        }
        let data = if data.is_null() { serde_json::json!({}) } else { data };
        let op =
            Op { v: 1, kind: kind.to_string(), lamport: 1, at: crate::time::now_rfc3339(), actor: self.actor()?, data };
        op.validate().map_err(|e| Error::usage(format!("{refname}: {e}")).with_source(e))?;
        let typed = S::Op::parse(&op).map_err(|e| Error::usage(format!("{refname}: {e}")).with_source(e))?;
        self.append::<S>(refname, typed)
    }

    /// Append the op `decide` returns for the current state (asked again, with the fresh state,
    /// after each lost race), or nothing when it returns `None`.
    ///
    /// An op the state refuses (bad data) is a usage error and nothing is written.
    pub fn append_if<S: State>(
        &self,
        refname: &str,
        mut decide: impl FnMut(Option<&S>) -> Result<Option<S::Op>>,
    ) -> Result<Option<Entry<S>>> {
        let retry = Retry { tries: MAX_TRIES, odd: Odd::Count(MAX_ODD_TRIES), backoff: Backoff::Growing };
        // A lost race, or another writer holding the ref's lock, is retried on the fresh tip; so
        // is a creation that found another writer's very same commit (same op, same millisecond):
        // that op is theirs, and `decide` is asked again on the fresh state.
        let appended = refs::update_with_retry(self.repo, refname, retry, |_| {
            let tip = self.read::<S>(refname)?;
            let Some(typed) = decide(tip.as_ref().map(|e| &e.state))? else { return Ok(Step::Done(None)) };
            let objects = self.git();
            let entry = self.next_entry(refname, tip.as_ref(), typed, &objects.fresh())?;
            Ok(Step::Update {
                expected: Expect::from_tip(tip.as_ref().map(|e| e.commit)),
                new: entry.commit,
                message: format!("boulder: {}", entry.op.kind),
                writer: Some(identity::state_signature(&entry.op.at)),
                moved: Some(entry),
                already: None,
            })
        })?;
        appended.map_err(|e| match e {
            GaveUp::Failed(e) => internal(format_args!("cannot update {refname}"), e),
            GaveUp::Exhausted(_) => {
                Error::refused(format!("cannot update {refname}: lost the race to other writers {MAX_TRIES} times"))
                    .hint("something is writing to it in a tight loop; try again")
            }
        })
    }

    /// The entry `typed` makes on top of `tip` of the op-log `refname`: the op completed, clocked
    /// and checked, the state after it, and its commit, whose objects go through `fresh`.
    ///
    /// An op the state refuses (bad data) is a usage error and nothing is written.
    fn next_entry<S: State>(
        &self,
        refname: &str,
        tip: Option<&Entry<S>>,
        mut typed: S::Op,
        fresh: &Fresh,
    ) -> Result<Entry<S>> {
        S::complete_op(leaf(refname), &mut typed);
        let (kind, data) = (typed.kind().to_string(), typed.data());
        let lamport = tip.map_or(0, |e| e.op.lamport.max(e.state.lamport())) + 1;
        let op = Op { v: 1, kind, lamport, at: crate::time::now_rfc3339(), actor: self.actor()?, data };
        op.validate().map_err(|e| Error::usage(format!("{refname}: {e}")).with_source(e))?;
        let mut state = tip.map(|e| e.state.clone()).unwrap_or_default();
        state.apply(&op).map_err(|e| Error::usage(format!("{refname}: {e}")).with_source(e))?;
        state.set_lamport(op.lamport);
        state.validate().map_err(|e| {
            Error::internal(format!("{refname}: {} op made an invalid state: {e}", op.kind)).with_source(e)
        })?;
        let parents: Vec<ObjectId> = tip.map(|e| e.commit).into_iter().collect();
        let commit = Self::fresh_op_commit(fresh, &op, &state, &parents)?;
        Ok(Entry { commit, op, state })
    }

    /// Plan appending `op` to the op-log `refname` whose tip is `tip` (read with [`Store::read`]):
    /// the entry it makes, whose objects go into `batch`. Nothing moves until [`Store::swap`].
    pub fn plan_append<S: State>(
        &self,
        refname: &str,
        tip: Option<&Entry<S>>,
        op: S::Op,
        batch: &Batch,
    ) -> Result<Entry<S>> {
        let objects = self.git();
        self.next_entry(refname, tip, op, &objects.fresh_in(batch))
    }

    /// Move the op-log `refname` from `expected` to `entry` (planned with [`Store::plan_append`],
    /// its objects written), by one compare-and-swap: false when it moved meanwhile or another
    /// writer holds its lock (then append again with [`Store::append_if`]).
    pub fn swap<S: State>(&self, refname: &str, expected: Option<ObjectId>, entry: &Entry<S>) -> Result<bool> {
        let moved = refs::update(
            self.repo,
            refname,
            Expect::from_tip(expected),
            entry.commit,
            &format!("boulder: {}", entry.op.kind),
            refs::Writer::As(&identity::state_signature(&entry.op.at)),
        )?;
        Ok(moved.is_ok())
    }

    /// Write the blobs, tree and commit of one new op through `fresh`; returns the commit id.
    fn fresh_op_commit<S: State>(fresh: &Fresh, op: &Op, state: &S, parents: &[ObjectId]) -> Result<ObjectId> {
        let (op_json, state_json) = (Self::json(op, "op.json")?, Self::json(state, "state.json")?);
        let put = |bytes: &[u8], name: &str| -> Result<ObjectId> {
            fresh.blob(bytes).map_err(|e| internal(format_args!("cannot write {name}"), e))
        };
        let files = [("op.json", put(&op_json, "op.json")?), ("state.json", put(&state_json, "state.json")?)];
        let tree_id = fresh.flat_tree(&files).map_err(|e| internal("cannot write a state object", e))?;
        let sig = identity::state_signature(&op.at);
        fresh
            .commit(tree_id, parents, &sig, &sig, &Self::message(op))
            .map_err(|e| internal("cannot write a state object", e))
    }

    /// Build (and when `write`, store) the blobs, tree and commit of one op; returns the commit id.
    /// For a merge commit, the same on every machine, which may already be there and is looked up
    /// first, and for checking a fetched op's commit; an appended op's objects, new by
    /// construction, go through [`Store::fresh_op_commit`].
    pub(super) fn write_op_commit<S: State>(
        &self,
        op: &Op,
        state: &S,
        parents: &[ObjectId],
        write: bool,
    ) -> Result<ObjectId> {
        let repo = self.git();
        let (op_json, state_json) = (Self::json(op, "op.json")?, Self::json(state, "state.json")?);
        let blob = |bytes: &[u8], name: &str| -> Result<ObjectId> {
            if write {
                repo.blob(bytes, true).map_err(|e| internal(format_args!("cannot write {name}"), e))
            } else {
                repo.blob(bytes, false).map_err(|e| internal(name, e))
            }
        };
        let files = [("op.json", blob(&op_json, "op.json")?), ("state.json", blob(&state_json, "state.json")?)];
        let tree_id = repo.flat_tree(&files, write).map_err(|e| self.put_error(write, e))?;
        let sig = identity::state_signature(&op.at);
        repo.commit(tree_id, parents, &sig, &sig, &Self::message(op), write).map_err(|e| self.put_error(write, e))
    }

    /// The bytes of `op.json` or `state.json`: pretty JSON and a newline.
    pub(super) fn json(value: &impl serde::Serialize, name: &str) -> Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| internal(name, e))?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// The message of an op commit: `boulder: KIND`, then its data (cut at 200 bytes).
    fn message(op: &Op) -> String {
        let summary = serde_json::to_string(&op.data).unwrap_or_default();
        let summary = if summary.len() > 200 {
            let cut = summary.char_indices().map(|(i, _)| i).take_while(|i| *i <= 200).last().unwrap_or(0);
            format!("{}…", &summary[..cut])
        } else {
            summary
        };
        format!("boulder: {}\n\n{summary}\n", op.kind)
    }

    /// The error of writing a state object, or of only computing its id.
    fn put_error(&self, write: bool, e: impl std::fmt::Display) -> Error {
        if write {
            internal("cannot write a state object", e)
        } else {
            internal("hash", e)
        }
    }
}
