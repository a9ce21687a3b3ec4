//! Reading and writing op-logs with gix: compare-and-swap appends with retry, history, validation,
//! and the deterministic merge of two diverged chains.
//!
//! ### Performance
//! Reading current state is one ref lookup and one blob read (`state.json` at the tip); an append
//! writes two blobs, a tree and a commit and moves the ref once (plus retries on lost races).

use std::time::Duration;

use gix::bstr::BString;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::ObjectId;

use crate::error::{Error, Result};
use crate::git::Repo;
use crate::state::op::{Op, State};

/// How often an append retries a lost compare-and-swap race before giving up.
const MAX_TRIES: u32 = 500;
/// Most commits [`Store::validate_chain`] and merges will walk.
const MAX_WALK: usize = 1_000_000;
/// The identity of every state commit: state never needs a configured git identity.
const NAME: &str = "git-boulder";
const EMAIL: &str = "git-boulder@localhost";

/// One op-log commit read back: its id, its op and the state after it.
#[derive(Debug, Clone)]
pub struct Entry<S> {
    pub commit: ObjectId,
    pub op: Op,
    pub state: S,
}

/// One commit of an op-log's history.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub commit: ObjectId,
    pub op: Op,
    pub is_merge: bool,
}

/// Reads and appends op-logs in one repository as one actor.
pub struct Store<'r> {
    pub repo: &'r Repo,
    pub actor: String,
}

fn internal(context: impl std::fmt::Display, e: impl std::fmt::Display) -> Error {
    Error::internal(format!("{context}: {e}"))
}

/// The actor id of this machine: `git config boulder.actor`, else `$GIT_COMMON_DIR/boulder/actor`
/// (made once with a random id; racing processes agree on the first one written).
pub fn actor_id(repo: &Repo) -> Result<String> {
    if let Some(a) = repo.config_string("boulder.actor").filter(|a| !a.is_empty()) {
        return Ok(a);
    }
    let dir = repo.boulder_dir();
    let path = dir.join("actor");
    if let Ok(text) = std::fs::read_to_string(&path) {
        let id = text.trim();
        if !id.is_empty() {
            return Ok(id.to_string());
        }
    }
    std::fs::create_dir_all(&dir).map_err(|e| internal(format_args!("cannot create {}", dir.display()), e))?;
    let id = format!("{:016x}", fastrand::u64(..));
    let tmp = dir.join(format!("actor.{}.tmp", std::process::id()));
    std::fs::write(&tmp, format!("{id}\n")).map_err(|e| internal("cannot write the actor id", e))?;
    // A hard link fails when another process won the race; then its id is the one.
    let won = std::fs::hard_link(&tmp, &path).is_ok();
    let _ = std::fs::remove_file(&tmp);
    if won {
        return Ok(id);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| internal("cannot read the actor id", e))?;
    Ok(text.trim().to_string())
}

impl<'r> Store<'r> {
    pub fn new(repo: &'r Repo) -> Result<Self> {
        Ok(Store { repo, actor: actor_id(repo)? })
    }

    fn git(&self) -> &gix::Repository {
        &self.repo.repo
    }

    /// Read `op.json` and `state.json` of one op commit.
    pub fn entry<S: State>(&self, commit: ObjectId) -> std::result::Result<Entry<S>, String> {
        let c = self.git().find_commit(commit).map_err(|e| format!("commit {commit}: {e}"))?;
        let tree = c.tree().map_err(|e| format!("commit {commit}: {e}"))?;
        let mut names = Vec::new();
        for e in tree.iter() {
            let e = e.map_err(|e| format!("commit {commit}: {e}"))?;
            names.push(e.filename().to_string());
        }
        names.sort();
        if names != ["op.json", "state.json"] {
            return Err(format!("commit {commit}: tree must hold exactly op.json and state.json, found {names:?}"));
        }
        let blob = |name: &str| -> std::result::Result<Vec<u8>, String> {
            let entry = tree.find_entry(name).ok_or_else(|| format!("commit {commit}: no {name}"))?;
            if !entry.mode().is_blob() {
                return Err(format!("commit {commit}: {name} is not a file"));
            }
            let obj = entry.object().map_err(|e| format!("commit {commit}: {name}: {e}"))?;
            Ok(obj.detach().data)
        };
        let op: Op = serde_json::from_slice(&blob("op.json")?).map_err(|e| format!("commit {commit}: op.json: {e}"))?;
        op.validate().map_err(|e| format!("commit {commit}: op.json: {e}"))?;
        let state: S =
            serde_json::from_slice(&blob("state.json")?).map_err(|e| format!("commit {commit}: state.json: {e}"))?;
        Ok(Entry { commit, op, state })
    }

    /// The tip of an op-log and the state there, or `None` when the ref does not exist.
    pub fn read<S: State>(&self, refname: &str) -> Result<Option<Entry<S>>> {
        let Some(tip) = self.repo.ref_id(refname)? else { return Ok(None) };
        self.entry(tip).map(Some).map_err(|e| {
            Error::usage(format!("{refname} holds invalid state: {e}"))
                .hint(format!("see `git boulder doctor`; `git update-ref -d {refname}` drops it"))
        })
    }

    /// Append one op (compare-and-swap with retry on a lost race).
    pub fn append<S: State>(&self, refname: &str, kind: &str, data: serde_json::Value) -> Result<Entry<S>> {
        let kind = kind.to_string();
        let entry = self.append_if::<S>(refname, |_| Ok(Some((kind.clone(), data.clone()))))?;
        Ok(entry.expect("the closure always appends"))
    }

    /// Append the op `decide` returns for the current state (asked again after each lost race),
    /// or nothing when it returns `None`.
    pub fn append_if<S: State>(
        &self,
        refname: &str,
        mut decide: impl FnMut(Option<&S>) -> Result<Option<(String, serde_json::Value)>>,
    ) -> Result<Option<Entry<S>>> {
        let full: gix::refs::FullName =
            refname.try_into().map_err(|e| Error::usage(format!("invalid ref name {refname:?}: {e}")))?;
        for attempt in 0..MAX_TRIES {
            let tip = self.read::<S>(refname)?;
            let Some((kind, data)) = decide(tip.as_ref().map(|e| &e.state))? else { return Ok(None) };
            let mut state = tip.as_ref().map(|e| e.state.clone()).unwrap_or_default();
            let op = Op {
                v: 1,
                kind,
                lamport: state.lamport() + 1,
                at: crate::time::now_rfc3339(),
                actor: self.actor.clone(),
                data,
            };
            state.apply(&op).map_err(|e| Error::usage(format!("{refname}: {e}")))?;
            state.set_lamport(op.lamport);
            let parents: Vec<ObjectId> = tip.as_ref().map(|e| e.commit).into_iter().collect();
            let commit = self.write_op_commit(&op, &state, &parents)?;
            let expected = match &tip {
                Some(e) => PreviousValue::MustExistAndMatch(gix::refs::Target::Object(e.commit)),
                None => PreviousValue::MustNotExist,
            };
            match self.set_ref(&full, commit, expected, &format!("boulder: {}", op.kind)) {
                Ok(()) => return Ok(Some(Entry { commit, op, state })),
                Err(_) if attempt + 1 < MAX_TRIES => {
                    // Lost the race (or the ref was locked by another writer): back off and retry.
                    std::thread::sleep(Duration::from_micros(fastrand::u64(100..2_000 + 500 * attempt.min(40) as u64)));
                }
                Err(e) => return Err(Error::internal(format!("cannot update {refname} after {MAX_TRIES} tries: {e}"))),
            }
        }
        unreachable!("the loop returns")
    }

    /// Move `name` to `new` if it still holds what `expected` says.
    pub fn set_ref(
        &self,
        name: &gix::refs::FullName,
        new: ObjectId,
        expected: PreviousValue,
        message: &str,
    ) -> std::result::Result<(), String> {
        self.git()
            .edit_reference(RefEdit {
                change: Change::Update {
                    log: LogChange { mode: RefLog::AndReference, force_create_reflog: false, message: message.into() },
                    expected,
                    new: gix::refs::Target::Object(new),
                },
                name: name.clone(),
                deref: false,
            })
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// Write the blobs, tree and commit of one op.
    fn write_op_commit<S: State>(&self, op: &Op, state: &S, parents: &[ObjectId]) -> Result<ObjectId> {
        let repo = self.git();
        let mut op_json = serde_json::to_vec_pretty(op).map_err(|e| internal("op.json", e))?;
        op_json.push(b'\n');
        let mut state_json = serde_json::to_vec_pretty(state).map_err(|e| internal("state.json", e))?;
        state_json.push(b'\n');
        let op_id = repo.write_blob(&op_json).map_err(|e| internal("cannot write op.json", e))?.detach();
        let state_id = repo.write_blob(&state_json).map_err(|e| internal("cannot write state.json", e))?.detach();
        let entry = |name: &str, oid| gix::objs::tree::Entry {
            mode: gix::objs::tree::EntryKind::Blob.into(),
            filename: name.into(),
            oid,
        };
        let tree = gix::objs::Tree { entries: vec![entry("op.json", op_id), entry("state.json", state_id)] };
        let tree_id = repo.write_object(&tree).map_err(|e| internal("cannot write the state tree", e))?.detach();
        let secs = crate::time::parse_rfc3339(&op.at).unwrap_or(0.0).floor() as i64;
        let sig = gix::actor::Signature {
            name: NAME.into(),
            email: EMAIL.into(),
            time: gix::date::Time { seconds: secs, offset: 0 },
        };
        let summary = match &op.data {
            serde_json::Value::Object(m) if !m.is_empty() => {
                let s = serde_json::to_string(&op.data).unwrap_or_default();
                if s.len() > 200 {
                    format!("{}…", &s[..s.char_indices().take_while(|(i, _)| *i < 200).last().map_or(0, |(i, _)| i)])
                } else {
                    s
                }
            }
            _ => String::new(),
        };
        let commit = gix::objs::Commit {
            tree: tree_id,
            parents: parents.iter().copied().collect(),
            author: sig.clone(),
            committer: sig,
            encoding: None,
            message: BString::from(format!("boulder: {}\n\n{summary}\n", op.kind)),
            extra_headers: Vec::new(),
        };
        Ok(repo.write_object(&commit).map_err(|e| internal("cannot write the state commit", e))?.detach())
    }

    /// The history of an op-log, newest first.
    pub fn log(&self, refname: &str) -> Result<Vec<LogEntry>> {
        let Some(tip) = self.repo.ref_id(refname)? else { return Ok(Vec::new()) };
        let walk = self.git().rev_walk([tip]).all().map_err(|e| internal(format_args!("cannot walk {refname}"), e))?;
        let mut out = Vec::new();
        for info in walk.take(MAX_WALK) {
            let info = info.map_err(|e| internal(format_args!("cannot walk {refname}"), e))?;
            let is_merge = info.parent_ids.len() > 1;
            let op = self.op_of(info.id).map_err(|e| Error::usage(format!("{refname}: {e}")))?;
            out.push(LogEntry { commit: info.id, op, is_merge });
        }
        Ok(out)
    }

    fn op_of(&self, commit: ObjectId) -> std::result::Result<Op, String> {
        let c = self.git().find_commit(commit).map_err(|e| format!("commit {commit}: {e}"))?;
        let tree = c.tree().map_err(|e| format!("commit {commit}: {e}"))?;
        let entry = tree.find_entry("op.json").ok_or_else(|| format!("commit {commit}: no op.json"))?;
        let obj = entry.object().map_err(|e| format!("commit {commit}: op.json: {e}"))?;
        let op: Op = serde_json::from_slice(&obj.data).map_err(|e| format!("commit {commit}: op.json: {e}"))?;
        op.validate().map_err(|e| format!("commit {commit}: {e}"))?;
        Ok(op)
    }

    /// Refs under `prefix` (e.g. `refs/boulder/`) and their ids, sorted by name.
    pub fn list(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
        let platform = self.git().references().map_err(|e| internal("cannot list refs", e))?;
        let iter = platform.prefixed(prefix).map_err(|e| internal("cannot list refs", e))?;
        let mut out = Vec::new();
        for r in iter {
            let mut r = r.map_err(|e| internal("cannot list refs", e))?;
            let name = r.name().as_bstr().to_string();
            if let Ok(id) = r.peel_to_id() {
                out.push((name, id.detach()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Check every commit reachable from `tip`: exactly op.json + state.json, both strict, ops
    /// valid, and each state what its op says. The error names the commit and the problem.
    pub fn validate_chain<S: State>(&self, tip: ObjectId) -> std::result::Result<(), String> {
        let walk = self.git().rev_walk([tip]).all().map_err(|e| format!("cannot walk {tip}: {e}"))?;
        for (n, info) in walk.enumerate() {
            if n >= MAX_WALK {
                return Err(format!("more than {MAX_WALK} commits"));
            }
            let info = info.map_err(|e| format!("cannot walk {tip}: {e}"))?;
            let entry = self.entry::<S>(info.id)?;
            if info.parent_ids.len() > 2 {
                return Err(format!("commit {}: more than two parents", info.id));
            }
            // Replaying a single op on its parent's state must give the recorded state.
            if info.parent_ids.len() == 1 {
                let parent = self.entry::<S>(info.parent_ids[0])?;
                let mut expect = parent.state.clone();
                expect.apply(&entry.op).map_err(|e| format!("commit {}: {e}", info.id))?;
                expect.set_lamport(entry.op.lamport);
                if expect != entry.state {
                    return Err(format!("commit {}: state.json does not follow from its op", info.id));
                }
            } else if info.parent_ids.is_empty() {
                let mut expect = S::default();
                expect.apply(&entry.op).map_err(|e| format!("commit {}: {e}", info.id))?;
                expect.set_lamport(entry.op.lamport);
                if expect != entry.state {
                    return Err(format!("commit {}: state.json does not follow from its op", info.id));
                }
            }
        }
        Ok(())
    }

    /// Merge two op-logs deterministically and return the merged tip (not moving any ref).
    ///
    /// When one side contains the other, the descendant is the result. Otherwise the ops since
    /// the merge base on both sides (merge commits excluded) are ordered by
    /// `(lamport, at, actor, commit id)` and replayed on the base state; the result is one merge
    /// commit whose parents are sorted and whose time is the later tip's, so every machine that
    /// merges the same pair writes the very same commit.
    pub fn merge<S: State>(&self, ours: ObjectId, theirs: ObjectId) -> Result<ObjectId> {
        if ours == theirs {
            return Ok(ours);
        }
        let repo = self.git();
        let base =
            repo.merge_base(ours, theirs).map_err(|e| internal("cannot find the merge base", e))?.map(|id| id.detach());
        if base == Some(ours) {
            return Ok(theirs);
        }
        if base == Some(theirs) {
            return Ok(ours);
        }
        let base_state = match base {
            Some(b) => self.entry::<S>(b).map_err(Error::usage)?.state,
            None => S::default(),
        };
        let walk = repo
            .rev_walk([ours, theirs])
            .with_hidden(base)
            .all()
            .map_err(|e| internal("cannot walk the op-logs", e))?;
        let mut ops: Vec<(Op, ObjectId)> = Vec::new();
        for info in walk.take(MAX_WALK) {
            let info = info.map_err(|e| internal("cannot walk the op-logs", e))?;
            if info.parent_ids.len() > 1 {
                continue;
            }
            let op = self.op_of(info.id).map_err(Error::usage)?;
            ops.push((op, info.id));
        }
        ops.sort_by(|(a, ia), (b, ib)| (a.lamport, &a.at, &a.actor, ia).cmp(&(b.lamport, &b.at, &b.actor, ib)));
        let mut state = base_state;
        // The clock after a merge is the highest of all ops merged: the same whatever the order
        // or grouping of merges, and below whatever is appended next.
        let mut lamport = state.lamport();
        for (op, id) in &ops {
            state.apply(op).map_err(|e| Error::usage(format!("op {id}: {e}")))?;
            lamport = lamport.max(op.lamport);
        }
        let ours_e = self.entry::<S>(ours).map_err(Error::usage)?;
        let theirs_e = self.entry::<S>(theirs).map_err(Error::usage)?;
        state.set_lamport(lamport);
        let mut parents = [ours, theirs];
        parents.sort();
        let at = std::cmp::max(&ours_e.op.at, &theirs_e.op.at).clone();
        let op = Op {
            v: 1,
            kind: "merge".into(),
            lamport,
            at,
            actor: "merge".into(),
            data: serde_json::json!({"parents": [parents[0].to_string(), parents[1].to_string()], "ops": ops.len()}),
        };
        self.write_op_commit(&op, &state, &parents)
    }
}
