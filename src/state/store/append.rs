//! Appending to an op-log: the op completed, clocked and checked, its commit written, and the ref
//! moved by compare-and-swap (retried on a lost race); and the bytes of an op commit.

use crate::error::{Error, Result};
use crate::git::identity;
use crate::git::objects::{Batch, Fresh};
use crate::git::refs::{self, Backoff, Expect, GaveUp, Odd, Retry, Step};
use crate::git::ObjectId;
use serde::Serialize;

use crate::state::op::{Op, OpError, Payload, State, MERGE_KIND};
use crate::state::{BOULDERS, STREAMS};

use super::{internal, Appended, Entry, Store};

/// How often an append tries a compare-and-swap before giving up.
pub(super) const MAX_TRIES: u32 = 400;
/// How often an append retries an error that is neither a lost race nor a held lock.
pub(super) const MAX_ODD_TRIES: u32 = 3;

/// The part of a ref name after the stream or boulder prefix, if it has one.
fn leaf(refname: &str) -> Option<&str> {
    refname.strip_prefix(STREAMS).or_else(|| refname.strip_prefix(BOULDERS)).filter(|l| !l.is_empty())
}

/// What an append builds on: the tip of the op-log, read back ([`Store::read`]) or planned
/// ([`Store::plan_append`]).
pub trait Tip<S> {
    /// The tip's commit.
    fn commit(&self) -> ObjectId;
    /// The state after it.
    fn state(&self) -> &S;
    /// The clock the next op follows.
    fn clock(&self) -> u64;
}

impl<S: State, D> Tip<S> for Entry<S, D> {
    fn commit(&self) -> ObjectId {
        self.commit
    }
    fn state(&self) -> &S {
        &self.state
    }
    fn clock(&self) -> u64 {
        self.op.lamport.max(self.state.lamport())
    }
}

impl<'r> Store<'r> {
    /// Append one op (compare-and-swap with retry on a lost race).
    pub fn append<S: State>(&self, refname: &str, op: S::Op) -> Result<Appended<S>> {
        let entry = self.append_if::<S>(refname, |_| Ok(Some(op.clone())))?;
        entry.ok_or_else(|| Error::internal("append: nothing was appended"))
    }

    /// Append an op given as its kind and JSON data, read exactly as an op read from a ref is
    /// (for tools and tests that write ops from outside; git-boulder itself writes typed ops).
    /// An unknown kind or bad data is a usage error and nothing is written.
    pub fn append_raw<S: State>(&self, refname: &str, kind: &str, data: serde_json::Value) -> Result<Appended<S>> {
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
    ) -> Result<Option<Appended<S>>> {
        let retry = Retry { tries: MAX_TRIES, odd: Odd::Count(MAX_ODD_TRIES), backoff: Backoff::Growing };
        // A lost race, or another writer holding the ref's lock, is retried on the fresh tip; so
        // is a creation that found another writer's very same commit (same op, same millisecond):
        // that op is theirs, and `decide` is asked again on the fresh state.
        let appended = refs::update_with_retry(self.repo, refname, retry, |_| {
            let tip = self.read::<S>(refname)?;
            let Some(typed) = decide(tip.as_ref().map(|e| &e.state))? else { return Ok(Step::Done(None)) };
            let objects = self.git();
            let entry = self.next_entry(refname, tip.as_ref().map(|t| t as &dyn Tip<S>), typed, &objects.fresh())?;
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
    /// and checked, the state after it, and its commit, whose objects go through `fresh`. The
    /// typed op is applied as it is and written once: refused exactly when its JSON, read back,
    /// would be ([`Payload::check`]).
    ///
    /// An op the state refuses (bad data) is a usage error and nothing is written.
    fn next_entry<S: State>(
        &self,
        refname: &str,
        tip: Option<&dyn Tip<S>>,
        mut typed: S::Op,
        fresh: &Fresh,
    ) -> Result<Appended<S>> {
        S::complete_op(leaf(refname), &mut typed);
        let kind = typed.kind().to_string();
        let lamport = tip.map_or(0, |t| t.clock()) + 1;
        let op = Op { v: 1, kind, lamport, at: crate::time::now_rfc3339(), actor: self.actor()?, data: typed };
        let usage = |e: OpError| Error::usage(format!("{refname}: {e}")).with_source(e);
        op.validate_envelope().map_err(usage)?;
        op.data.check().map_err(usage)?;
        let mut state = tip.map(|t| t.state().clone()).unwrap_or_default();
        state.apply_op(&op.data, &op.at, &op.actor);
        state.set_lamport(op.lamport);
        state.validate().map_err(|e| {
            Error::internal(format!("{refname}: {} op made an invalid state: {e}", op.kind)).with_source(e)
        })?;
        let parents: Vec<ObjectId> = tip.map(|t| t.commit()).into_iter().collect();
        let commit = Self::fresh_op_commit(fresh, &op, &state, &parents)?;
        Ok(Entry { commit, op, state })
    }

    /// Plan appending `op` to the op-log `refname` whose tip is `tip` (read with [`Store::read`],
    /// or planned here): the entry it makes, whose objects go into `batch`. Nothing moves until
    /// [`Store::swap`].
    pub fn plan_append<S: State>(
        &self,
        refname: &str,
        tip: Option<&dyn Tip<S>>,
        op: S::Op,
        batch: &Batch,
    ) -> Result<Appended<S>> {
        let objects = self.git();
        self.next_entry(refname, tip, op, &objects.fresh_in(batch))
    }

    /// Move the op-log `refname` from `expected` to `entry` (planned with [`Store::plan_append`],
    /// its objects written), by one compare-and-swap: false when it moved meanwhile or another
    /// writer holds its lock (then append again with [`Store::append_if`]).
    pub fn swap<S, D>(&self, refname: &str, expected: Option<ObjectId>, entry: &Entry<S, D>) -> Result<bool> {
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
    fn fresh_op_commit<S: State, D: Serialize>(
        fresh: &Fresh,
        op: &Op<D>,
        state: &S,
        parents: &[ObjectId],
    ) -> Result<ObjectId> {
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
    pub(super) fn write_op_commit<S: State, D: Serialize>(
        &self,
        op: &Op<D>,
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
    pub(super) fn message<D: Serialize>(op: &Op<D>) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::op::{BoulderOp, MergeData, PrdOp, StreamOp};
    use serde_json::json;

    const H1: &str = "0123456789abcdef0123456789abcdef01234567";
    const H2: &str = "89abcdef0123456789abcdef0123456789abcdef";
    const H3: &str = "fedcba9876543210fedcba9876543210fedcba98";
    const H4: &str = "00000000000000000000000000000000000000ff";

    fn envelope<D>(kind: &str, data: D) -> Op<D> {
        Op { v: 1, kind: kind.into(), lamport: 7, at: "2026-01-02T03:04:05.678Z".into(), actor: "laptop".into(), data }
    }

    /// `op.json` and the commit message of `op`, as an append writes them.
    fn written<D: Serialize>(out: &mut String, op: &Op<D>) {
        out.push_str(&format!("== {}\n", op.kind));
        out.push_str(std::str::from_utf8(&Store::json(op, "op.json").unwrap()).unwrap());
        out.push_str(&Store::message(op));
    }

    /// Each op kind, typed, is written as the bytes the append path wrote before ops were
    /// appended typed (`testdata/appended-ops.txt`, captured from that code: the typed op turned
    /// into a JSON value, parsed back and written): the same `op.json` and commit message.
    #[test]
    fn typed_ops_are_written_as_before() {
        let mut out = String::new();
        let long = "x".repeat(300);
        let stream = [
            (
                "initialized",
                json!({"adhoc": true, "base": "main", "branch": "boulder/a", "index": 1, "name": "a", "setup_failed": null, "worktree": "/w"}),
            ),
            (
                "initialized",
                json!({"base": "main", "branch": "boulder/a", "index": 2, "name": "b", "setup_failed": "exit 1: \"npm\" failed\n", "worktree": "/w/b"}),
            ),
            ("initialized", json!({"branch": "boulder/a", "name": "a"})),
            ("status", json!({"reason": "stream run started", "status": "RUNNING"})),
            ("status", json!({"status": "FAILED"})),
            ("status", json!({"reason": null, "status": "STOPPED"})),
            ("stop_requested", json!({})),
            ("indexed", json!({"index": 3})),
            ("merged", json!({"base_before": H1, "commit": H2, "landed": H3, "strategy": "rebase", "stream_tip": H4})),
            ("merged", json!({"commit": H2, "strategy": "squash", "stream_tip": H4})),
            ("merged", json!({"commit": H2})),
            ("rolled_back", json!({"backup": "refs/boulder/backup/a/1", "from": H1, "restored": true, "to": H2})),
            ("rolled_back", json!({"from": H1, "to": H2})),
            ("unmerged", json!({"commit": H1, "reverted": H2})),
            ("unmerged", json!({"commit": H1})),
            ("cleaned", json!({"branch_deleted": false, "worktree_removed": true})),
            ("cleaned", json!({})),
            (
                "refused",
                json!({"hint": "rebase it", "reason": "verify failed", "refusal": "verify", "remote": "origin", "stream_before": H1, "stream_tip": H2}),
            ),
            ("refused", json!({"reason": "2 conflicts: é ✓", "refusal": "conflict", "stream_tip": H2})),
            ("refused", json!({"reason": long, "refusal": "conflict", "stream_tip": H2})),
            ("retried", json!({})),
        ];
        for (kind, data) in stream {
            let typed = StreamOp::parse(&envelope(kind, data)).unwrap();
            written(&mut out, &envelope(typed.kind(), typed));
        }
        let boulder = [
            ("created", json!({"depth": 0, "stream": "a"})),
            ("created", json!({"depth": 0, "id": "a", "parent": null, "stream": "a"})),
            ("created", json!({"depth": 1, "id": "s", "parent": "a", "stream": null})),
            ("activity", json!({"at": "2026-01-01T00:00:00.000Z", "commit": H1, "story": null})),
            ("activity", json!({"at": "2026-01-01T00:00:00.000Z", "commit": H1, "story": "US-1"})),
            ("activity", json!({"commit": H3})),
            ("enforced", json!({"gate": "idle", "message": "keep \"going\"\n\ttab"})),
            ("enforced", json!({})),
            ("reset_failures", json!({})),
            ("stop", json!({})),
            ("status", json!({"status": "completed"})),
            ("checkpoint", json!({"message": "half way"})),
            ("todo_add", json!({"id": "t1", "text": "tests"})),
            ("todo_done", json!({"id": "t1"})),
            ("denied", json!({"owner": "api", "path": "src/api/a.rs", "rule": "other_stream"})),
            ("denied", json!({"path": "src/types/u.rs", "rule": "shared_read"})),
        ];
        for (kind, data) in boulder {
            let typed = BoulderOp::parse(&envelope(kind, data)).unwrap();
            written(&mut out, &envelope(typed.kind(), typed));
        }
        for (kind, data) in [("done", json!({"ids": ["US-2", "US-1"]})), ("undone", json!({"ids": []}))] {
            let typed = PrdOp::parse(&envelope(kind, data)).unwrap();
            written(&mut out, &envelope(typed.kind(), typed));
        }
        let parents = [H1, H2].map(|h| crate::git::id::parse(h).unwrap());
        written(&mut out, &envelope(MERGE_KIND, MergeData { ops: 3, parents }));
        let before = include_str!("../testdata/appended-ops.txt");
        assert_eq!(out, before);
        // Ops git-boulder makes from ids (not read from JSON) write the same bytes.
        let id = |h: &str| crate::state::CommitId::from(crate::git::id::parse(h).unwrap());
        let made = StreamOp::Merged {
            base_before: crate::state::Opt::Set(id(H1)),
            commit: id(H2),
            landed: crate::state::Opt::Set(id(H3)),
            strategy: crate::state::Opt::Set("rebase".into()),
            stream_tip: crate::state::Opt::Set(id(H4)),
        };
        let mut one = String::new();
        written(&mut one, &envelope(made.kind(), made));
        assert!(before.contains(&one), "{one}");
    }
}
