//! Op records and state types, and how each op changes its state. Pure: no git here.
//!
//! These JSON shapes are a public format (see docs/state-format.md): every field is documented,
//! and parsing is strict (unknown fields are refused) so garbage from a remote is caught.
//!
//! ### Rules every `apply` follows
//!
//! * An op is refused only because of its own data (unknown kind, a missing or mistyped field),
//!   never because of the state it meets. So ops that were valid when appended can be replayed in
//!   any order by a merge without failing (a `todo_done` for an unknown todo is a no-op, a status
//!   change is accepted from any status).
//! * `apply` never reads the `lamport` field: the store sets it after each op, so a state's clock
//!   does not change what later ops do.
//! * The `merge` op (written only by the store's deterministic merge) is accepted and changes
//!   nothing.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The op kind of a deterministic merge commit (accepted everywhere, changes nothing).
pub const MERGE_KIND: &str = "merge";
/// The actor of merge commits.
pub const MERGE_ACTOR: &str = "merge";
/// The largest lamport clock accepted (2^53: JSON readers in any language hold it exactly).
pub const MAX_LAMPORT: u64 = 1 << 53;
/// The longest string accepted in an op's data.
pub const MAX_TEXT: usize = 64 * 1024;

/// One operation: the content of `op.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Op {
    /// Format version, always 1.
    pub v: u32,
    /// What happened (`initialized`, `activity`, `done`, `merge`, …): a short lowercase word.
    pub kind: String,
    /// Lamport clock: one more than the clock of the state the op was applied to (a merge: one
    /// more than the highest clock of the ops it merges).
    pub lamport: u64,
    /// RFC 3339 time the op was made.
    pub at: String,
    /// The actor (machine) that made it; `merge` for merge commits.
    pub actor: String,
    /// The op's arguments, a JSON object.
    #[serde(default)]
    pub data: serde_json::Value,
}

impl Op {
    /// Check the fields of an op read from anywhere (a remote included).
    pub fn validate(&self) -> Result<(), String> {
        if self.v != 1 {
            return Err(format!("op version {} is not 1", self.v));
        }
        if self.kind.is_empty()
            || self.kind.len() > 64
            || !self.kind.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
        {
            return Err(format!("op kind {:?} is not a short lowercase word", self.kind));
        }
        if self.lamport == 0 || self.lamport > MAX_LAMPORT {
            return Err(format!("op lamport clock {} is out of range (1..=2^53)", self.lamport));
        }
        if crate::time::parse_rfc3339(&self.at).is_none() {
            return Err(format!("op time {:?} is not RFC 3339", self.at));
        }
        valid_actor(&self.actor)?;
        if !self.data.is_object() {
            return Err(format!("op data of {:?} is not a JSON object", self.kind));
        }
        Ok(())
    }

    /// True for the op of a merge commit.
    pub fn is_merge(&self) -> bool {
        self.kind == MERGE_KIND
    }
}

/// Check an actor id: non-empty, at most 200 characters, no control characters.
pub fn valid_actor(actor: &str) -> Result<(), String> {
    if actor.trim().is_empty() || actor.chars().count() > 200 || actor.chars().any(char::is_control) {
        return Err(format!("actor {actor:?} is empty, longer than 200 characters or has control characters"));
    }
    Ok(())
}

/// A state type kept in an op-log.
pub trait State: Default + Clone + PartialEq + std::fmt::Debug + Serialize + for<'de> Deserialize<'de> {
    /// What this state is called in messages (`stream`, `boulder`, `prd`).
    const WHAT: &'static str;
    /// Apply one op; an op this state does not know, or bad data, is an error naming it.
    fn apply(&mut self, op: &Op) -> Result<(), String>;
    /// Check a state read from anywhere (a remote included) beyond what parsing checks.
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
    /// Complete an op's data from the ref it is appended to, before it is applied (a stream's
    /// `initialized` records the stream's name, a boulder's `created` its id). `leaf` is the part
    /// of the ref name after the state's prefix, or `None` when the ref is elsewhere.
    fn complete_op(_leaf: Option<&str>, _kind: &str, _data: &mut serde_json::Value) {}
    /// The lamport clock of the last op applied.
    fn lamport(&self) -> u64;
    fn set_lamport(&mut self, lamport: u64);
}

fn field<'a>(op: &'a Op, key: &str) -> Option<&'a serde_json::Value> {
    op.data.get(key).filter(|v| !v.is_null())
}

fn string(op: &Op, key: &str) -> Result<Option<String>, String> {
    match field(op, key) {
        None => Ok(None),
        Some(serde_json::Value::String(s)) if s.len() <= MAX_TEXT => Ok(Some(s.clone())),
        Some(serde_json::Value::String(_)) => {
            Err(format!("{} op: data.{key} is longer than {MAX_TEXT} bytes", op.kind))
        }
        Some(_) => Err(format!("{} op: data.{key} must be a string", op.kind)),
    }
}

fn required(op: &Op, key: &str) -> Result<String, String> {
    match string(op, key)? {
        Some(s) if !s.is_empty() => Ok(s),
        Some(_) => Err(format!("{} op: data.{key} is empty", op.kind)),
        None => Err(format!("{} op: data.{key} is missing", op.kind)),
    }
}

fn boolean(op: &Op, key: &str) -> Result<bool, String> {
    match field(op, key) {
        None => Ok(false),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(_) => Err(format!("{} op: data.{key} must be true or false", op.kind)),
    }
}

/// A commit id as data: 4 to 64 hex digits.
fn commit_id(op: &Op, key: &str) -> Result<String, String> {
    let c = required(op, key)?;
    if !(4..=64).contains(&c.len()) || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{} op: data.{key} {c:?} is not a commit id", op.kind));
    }
    Ok(c.to_ascii_lowercase())
}

/// A stream index as data: a whole number 1..=[`MAX_INDEX`].
fn index(op: &Op) -> Result<u64, String> {
    match field(op, "index").and_then(|v| v.as_u64()) {
        Some(n) if (1..=MAX_INDEX).contains(&n) => Ok(n),
        _ => Err(format!("{} op: data.index must be a whole number 1..={MAX_INDEX}", op.kind)),
    }
}

fn unknown(what: &str, op: &Op) -> String {
    format!("unknown {what} op {:?}", op.kind)
}

/// True when time `a` is at or after time `b` (RFC 3339; compared as instants when both parse).
fn at_or_after(a: &str, b: &str) -> bool {
    match (crate::time::parse_rfc3339(a), crate::time::parse_rfc3339(b)) {
        (Some(x), Some(y)) if x != y => x > y,
        _ => a >= b,
    }
}

fn check_time(what: &str, t: &Option<String>) -> Result<(), String> {
    match t {
        Some(t) if crate::time::parse_rfc3339(t).is_none() => Err(format!("{what} {t:?} is not RFC 3339")),
        _ => Ok(()),
    }
}

/// The largest stream index accepted.
pub const MAX_INDEX: u64 = 65535;

/// Stream statuses.
pub const STREAM_STATUSES: &[&str] =
    &["DEFINED", "INITIALIZED", "RUNNING", "STOPPED", "COMPLETED", "FAILED", "MERGED", "CLEANED"];

/// One run of `git boulder stream run`, as far as the stream's op-log knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunInfo {
    /// When the run recorded RUNNING.
    pub started_at: String,
    /// The actor (machine) that ran it.
    pub actor: String,
    /// When it recorded how it ended (`null` while running, or when it never said).
    #[serde(default)]
    pub ended_at: Option<String>,
    /// How it ended: `STOPPED`, `COMPLETED`, `FAILED` (or `MERGED`), `null` while running.
    #[serde(default)]
    pub outcome: Option<String>,
    /// The reason it gave when it ended.
    #[serde(default)]
    pub reason: Option<String>,
}

/// State of one stream (`refs/boulder/streams/<name>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamState {
    /// The stream's name, as recorded by its `initialized` op (`null` before).
    #[serde(default)]
    pub name: Option<String>,
    /// One of [`STREAM_STATUSES`]; `DEFINED` until it is initialized.
    pub status: String,
    /// The stream's branch (short name) as recorded at init.
    #[serde(default)]
    pub branch: Option<String>,
    /// The worktree path as recorded at init (informational: paths are always computed locally).
    #[serde(default)]
    pub worktree: Option<String>,
    /// The base branch at init.
    #[serde(default)]
    pub base: Option<String>,
    /// The actor (machine) that last initialized it: a worktree is expected on that machine only.
    #[serde(default)]
    pub initialized_by: Option<String>,
    /// The stream's small index on the machine that initialized it (1, 2, …; `null` for a stream
    /// initialized before indexes were recorded): `BOULDER_STREAM_INDEX`, and `BOULDER_PORT` is
    /// derived from it. Kept across plan edits; recorded by `initialized`.
    #[serde(default)]
    pub index: Option<u64>,
    /// How the setup command failed at the last `initialized` (`null`: it ran, or there is none).
    #[serde(default)]
    pub setup_failed: Option<String>,
    /// The commit the base branch was at after the stream merged.
    #[serde(default)]
    pub merged_commit: Option<String>,
    /// The strategy it was merged with (`rebase`, `merge`, `squash`).
    #[serde(default)]
    pub merge_strategy: Option<String>,
    /// The stream branch's tip when it was merged (for `squash`, the rebased tip the base's
    /// squashed commit was made from).
    #[serde(default)]
    pub merged_tip: Option<String>,
    /// `git boulder stream stop` asked the run loop to stop after its iteration; cleared when a
    /// run starts or ends.
    #[serde(default)]
    pub stop_requested: bool,
    /// Why the status last changed, when said.
    #[serde(default)]
    pub reason: Option<String>,
    /// The last run of the loop: started, by whom, and how it ended.
    #[serde(default)]
    pub last_run: Option<RunInfo>,
    /// When the worktree was last cleaned up (`null` if never since init).
    #[serde(default)]
    pub cleaned_at: Option<String>,
    /// The cleanup also deleted the branch.
    #[serde(default)]
    pub branch_deleted: bool,
    /// Time of the last op.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Lamport clock of the last op.
    #[serde(default)]
    pub lamport: u64,
}

impl Default for StreamState {
    fn default() -> Self {
        StreamState {
            name: None,
            status: "DEFINED".into(),
            branch: None,
            worktree: None,
            base: None,
            initialized_by: None,
            index: None,
            setup_failed: None,
            merged_commit: None,
            merge_strategy: None,
            merged_tip: None,
            stop_requested: false,
            reason: None,
            last_run: None,
            cleaned_at: None,
            branch_deleted: false,
            updated_at: None,
            lamport: 0,
        }
    }
}

impl State for StreamState {
    const WHAT: &'static str = "stream";

    fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op.kind.as_str() {
            MERGE_KIND => return Ok(()),
            "initialized" => {
                let name = string(op, "name")?;
                let branch = string(op, "branch")?;
                let worktree = string(op, "worktree")?;
                let base = string(op, "base")?;
                let index = match field(op, "index") {
                    None => None,
                    Some(_) => Some(index(op)?),
                };
                let setup_failed = string(op, "setup_failed")?;
                self.name = name.or(self.name.take());
                self.index = index;
                self.setup_failed = setup_failed;
                self.status = "INITIALIZED".into();
                self.branch = branch.or(self.branch.take());
                self.worktree = worktree;
                self.base = base.or(self.base.take());
                self.initialized_by = Some(op.actor.clone());
                self.stop_requested = false;
                self.reason = None;
                self.cleaned_at = None;
                self.branch_deleted = false;
            }
            "status" => {
                let status = required(op, "status")?;
                if !STREAM_STATUSES.contains(&status.as_str()) {
                    return Err(format!(
                        "status op: unknown stream status {status:?} (one of {})",
                        STREAM_STATUSES.join(", ")
                    ));
                }
                let reason = string(op, "reason")?;
                match status.as_str() {
                    "RUNNING" => {
                        self.stop_requested = false;
                        self.last_run = Some(RunInfo {
                            started_at: op.at.clone(),
                            actor: op.actor.clone(),
                            ended_at: None,
                            outcome: None,
                            reason: None,
                        });
                    }
                    "STOPPED" | "COMPLETED" | "FAILED" => {
                        self.stop_requested = false;
                        if let Some(run) = self.last_run.as_mut().filter(|r| r.ended_at.is_none()) {
                            run.ended_at = Some(op.at.clone());
                            run.outcome = Some(status.clone());
                            run.reason = reason.clone();
                        }
                    }
                    _ => {}
                }
                self.status = status;
                self.reason = reason;
            }
            "stop_requested" => self.stop_requested = true,
            "indexed" => self.index = Some(index(op)?),
            "merged" => {
                let commit = commit_id(op, "commit")?;
                let strategy = string(op, "strategy")?;
                let tip = match field(op, "stream_tip") {
                    Some(_) => Some(commit_id(op, "stream_tip")?),
                    None => None,
                };
                self.status = "MERGED".into();
                self.merged_commit = Some(commit);
                self.merge_strategy = strategy;
                self.merged_tip = tip;
                self.stop_requested = false;
                self.reason = None;
            }
            "cleaned" => {
                // `worktree_removed` is checked but not kept: the worktree path is dropped either
                // way (paths are computed locally).
                boolean(op, "worktree_removed")?;
                let branch_deleted = boolean(op, "branch_deleted")?;
                // A merged stream stays MERGED: that it was merged matters more than that its
                // worktree is gone.
                if self.status != "MERGED" {
                    self.status = "CLEANED".into();
                }
                self.worktree = None;
                self.cleaned_at = Some(op.at.clone());
                self.branch_deleted = self.branch_deleted || branch_deleted;
                self.stop_requested = false;
            }
            _ => return Err(unknown(Self::WHAT, op)),
        }
        self.updated_at = Some(op.at.clone());
        Ok(())
    }

    fn validate(&self) -> Result<(), String> {
        if !STREAM_STATUSES.contains(&self.status.as_str()) {
            return Err(format!("unknown stream status {:?}", self.status));
        }
        check_time("updated_at", &self.updated_at)?;
        check_time("cleaned_at", &self.cleaned_at)?;
        if self.index.is_some_and(|i| !(1..=MAX_INDEX).contains(&i)) {
            return Err(format!("stream index {:?} is out of range (1..={MAX_INDEX})", self.index));
        }
        if self.setup_failed.as_ref().is_some_and(|s| s.len() > MAX_TEXT) {
            return Err(format!("setup_failed is longer than {MAX_TEXT} bytes"));
        }
        if let Some(run) = &self.last_run {
            check_time("last_run.started_at", &Some(run.started_at.clone()))?;
            check_time("last_run.ended_at", &run.ended_at)?;
        }
        Ok(())
    }

    fn complete_op(leaf: Option<&str>, kind: &str, data: &mut serde_json::Value) {
        if let (Some(name), "initialized", Some(map)) = (leaf, kind, data.as_object_mut()) {
            map.entry("name").or_insert_with(|| name.into());
        }
    }

    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn set_lamport(&mut self, lamport: u64) {
        self.lamport = lamport;
    }
}

/// A checkpoint: where work stands, for the next session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The message given to `git boulder checkpoint -m`.
    pub message: String,
    /// When it was recorded (RFC 3339).
    pub at: String,
}

/// An open or finished todo of a boulder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Todo {
    /// Its id within the boulder (`t1`, `t2`, …).
    pub id: String,
    /// What is to be done.
    pub text: String,
    /// Whether it is done.
    pub done: bool,
}

/// How many recorded commit ids a boulder keeps, so an activity seen twice counts once.
pub const RECENT_COMMITS: usize = 64;
/// Boulder statuses.
pub const BOULDER_STATUSES: &[&str] = &["active", "completed", "stopped", "failed"];
/// The deepest nesting a boulder state accepts (configurations use far less).
pub const MAX_DEPTH: u64 = 1000;

/// State of one boulder (`refs/boulder/boulders/<id>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoulderState {
    /// The boulder's id, as recorded by its `created` op (`null` before).
    #[serde(default)]
    pub id: Option<String>,
    /// The stream it belongs to.
    #[serde(default)]
    pub stream: Option<String>,
    /// Parent boulder id (`None` for a stream's root boulder).
    #[serde(default)]
    pub parent: Option<String>,
    /// 0 for a root boulder.
    #[serde(default)]
    pub depth: u32,
    /// One of [`BOULDER_STATUSES`]: `active`, `completed`, `stopped` or `failed`.
    pub status: String,
    /// Distinct commits recorded for it (and, through parents, its descendants).
    pub iteration: u64,
    /// Time of the latest recorded commit.
    #[serde(default)]
    pub last_activity: Option<String>,
    /// Time of the last enforcement.
    #[serde(default)]
    pub last_enforcement: Option<String>,
    /// Enforcements since the last progress.
    #[serde(default)]
    pub failure_count: u32,
    /// The user asked it to stop; cleared by new activity.
    #[serde(default)]
    pub stop_requested: bool,
    /// The latest recorded commit id.
    #[serde(default)]
    pub last_commit: Option<String>,
    /// The story of the latest recorded commit, when known.
    #[serde(default)]
    pub last_story: Option<String>,
    /// The gate that decided the last enforcement.
    #[serde(default)]
    pub last_gate: Option<String>,
    /// The last enforcement message.
    #[serde(default)]
    pub last_message: Option<String>,
    /// The last checkpoint, if any.
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    /// Todos, in the order they were added.
    #[serde(default)]
    pub todos: Vec<Todo>,
    /// The last [`RECENT_COMMITS`] recorded commit ids, oldest first: an activity op for one of
    /// them is not counted again (and changes nothing).
    #[serde(default)]
    pub recent_commits: Vec<String>,
    /// Time of the last op.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Lamport clock of the last op.
    #[serde(default)]
    pub lamport: u64,
}

impl Default for BoulderState {
    fn default() -> Self {
        BoulderState {
            id: None,
            stream: None,
            parent: None,
            depth: 0,
            status: "active".into(),
            iteration: 0,
            last_activity: None,
            last_enforcement: None,
            failure_count: 0,
            stop_requested: false,
            last_commit: None,
            last_story: None,
            last_gate: None,
            last_message: None,
            checkpoint: None,
            todos: Vec::new(),
            recent_commits: Vec::new(),
            updated_at: None,
            lamport: 0,
        }
    }
}

impl State for BoulderState {
    const WHAT: &'static str = "boulder";

    fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op.kind.as_str() {
            MERGE_KIND => return Ok(()),
            "created" => {
                let id = string(op, "id")?;
                let stream = string(op, "stream")?;
                let parent = string(op, "parent")?;
                let depth = match field(op, "depth") {
                    None => 0,
                    Some(d) => d
                        .as_u64()
                        .filter(|d| *d <= MAX_DEPTH)
                        .ok_or(format!("created op: data.depth must be a whole number up to {MAX_DEPTH}"))?,
                };
                self.id = id.or(self.id.take());
                self.stream = stream;
                self.parent = parent;
                self.depth = depth as u32;
            }
            "activity" => {
                let commit = required(op, "commit")?;
                let story = string(op, "story")?;
                if self.recent_commits.contains(&commit) {
                    // Seen before: counted once, however often it is seen.
                    self.updated_at = Some(op.at.clone());
                    return Ok(());
                }
                self.iteration = self.iteration.saturating_add(1);
                self.recent_commits.push(commit.clone());
                if self.recent_commits.len() > RECENT_COMMITS {
                    let extra = self.recent_commits.len() - RECENT_COMMITS;
                    self.recent_commits.drain(..extra);
                }
                // The commit's time when the op carries it (a commit recorded after the fact),
                // else the op's.
                let when = string(op, "at")?
                    .filter(|t| crate::time::parse_rfc3339(t).is_some())
                    .unwrap_or_else(|| op.at.clone());
                if self.last_activity.as_deref().is_none_or(|t| at_or_after(&when, t)) {
                    self.last_activity = Some(when);
                    self.last_commit = Some(commit);
                    self.last_story = story;
                }
                self.failure_count = 0;
                self.stop_requested = false;
                if self.status == "stopped" {
                    self.status = "active".into();
                }
            }
            "enforced" => {
                let gate = string(op, "gate")?;
                let message = string(op, "message")?;
                self.last_enforcement = Some(op.at.clone());
                self.failure_count = self.failure_count.saturating_add(1);
                self.last_gate = gate;
                self.last_message = message;
            }
            "reset_failures" => self.failure_count = 0,
            "stop" => self.stop_requested = true,
            "status" => {
                let status = required(op, "status")?;
                if !BOULDER_STATUSES.contains(&status.as_str()) {
                    return Err(format!(
                        "status op: unknown boulder status {status:?} (one of {})",
                        BOULDER_STATUSES.join(", ")
                    ));
                }
                self.status = status;
            }
            "checkpoint" => {
                self.checkpoint = Some(Checkpoint { message: required(op, "message")?, at: op.at.clone() });
            }
            "todo_add" => {
                let id = required(op, "id")?;
                let text = required(op, "text")?;
                if !self.todos.iter().any(|t| t.id == id) {
                    self.todos.push(Todo { id, text, done: false });
                }
            }
            "todo_done" => {
                let id = required(op, "id")?;
                if let Some(t) = self.todos.iter_mut().find(|t| t.id == id) {
                    t.done = true;
                }
            }
            _ => return Err(unknown(Self::WHAT, op)),
        }
        self.updated_at = Some(op.at.clone());
        Ok(())
    }

    fn validate(&self) -> Result<(), String> {
        if !BOULDER_STATUSES.contains(&self.status.as_str()) {
            return Err(format!("unknown boulder status {:?}", self.status));
        }
        if u64::from(self.depth) > MAX_DEPTH {
            return Err(format!("depth {} is above {MAX_DEPTH}", self.depth));
        }
        if self.recent_commits.len() > RECENT_COMMITS {
            return Err(format!("recent_commits holds more than {RECENT_COMMITS} ids"));
        }
        let mut ids = BTreeSet::new();
        for t in &self.todos {
            if !ids.insert(t.id.as_str()) {
                return Err(format!("todo id {:?} appears twice", t.id));
            }
        }
        check_time("updated_at", &self.updated_at)?;
        check_time("last_activity", &self.last_activity)?;
        check_time("last_enforcement", &self.last_enforcement)?;
        if let Some(c) = &self.checkpoint {
            check_time("checkpoint.at", &Some(c.at.clone()))?;
        }
        Ok(())
    }

    fn complete_op(leaf: Option<&str>, kind: &str, data: &mut serde_json::Value) {
        if let (Some(id), "created", Some(map)) = (leaf, kind, data.as_object_mut()) {
            map.entry("id").or_insert_with(|| id.into());
        }
    }

    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn set_lamport(&mut self, lamport: u64) {
        self.lamport = lamport;
    }
}

/// Completion records (`refs/boulder/prd`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrdState {
    /// Story ids recorded done with `git boulder prd done` (or by a merge), sorted, each once.
    pub done: BTreeSet<String>,
    /// Time of the last op.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Lamport clock of the last op.
    #[serde(default)]
    pub lamport: u64,
}

impl State for PrdState {
    const WHAT: &'static str = "prd";

    fn apply(&mut self, op: &Op) -> Result<(), String> {
        let ids = || -> Result<Vec<String>, String> {
            let list =
                field(op, "ids").and_then(|v| v.as_array()).ok_or(format!("{} op: data.ids is missing", op.kind))?;
            list.iter()
                .map(|v| match v.as_str() {
                    Some(s) if !s.is_empty() && s.len() <= 200 => Ok(s.to_owned()),
                    _ => Err(format!("{} op: data.ids holds {v}, not a story id", op.kind)),
                })
                .collect()
        };
        match op.kind.as_str() {
            MERGE_KIND => return Ok(()),
            "done" => self.done.extend(ids()?),
            "undone" => {
                for id in ids()? {
                    self.done.remove(&id);
                }
            }
            _ => return Err(unknown(Self::WHAT, op)),
        }
        self.updated_at = Some(op.at.clone());
        Ok(())
    }

    fn validate(&self) -> Result<(), String> {
        if let Some(id) = self.done.iter().find(|id| id.is_empty() || id.len() > 200) {
            return Err(format!("done holds {id:?}, not a story id"));
        }
        check_time("updated_at", &self.updated_at)
    }

    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn set_lamport(&mut self, lamport: u64) {
        self.lamport = lamport;
    }
}

/// Replay ops on a state in the deterministic order of merges: by `(lamport, at, actor, id)`,
/// where `id` is whatever identifies the op uniquely (the store uses the op's commit id). Merge
/// ops are skipped. The result's clock is the last op's. Pure: the store's merge and the tests'
/// reference model both use it.
pub fn replay<S: State, I: Ord>(mut state: S, mut ops: Vec<(Op, I)>) -> Result<S, String> {
    ops.sort_by(|(a, ia), (b, ib)| (a.lamport, &a.at, &a.actor, ia).cmp(&(b.lamport, &b.at, &b.actor, ib)));
    for (op, _) in ops.iter().filter(|(op, _)| !op.is_merge()) {
        state.apply(op)?;
        state.set_lamport(op.lamport);
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn op(kind: &str, lamport: u64, data: serde_json::Value) -> Op {
        Op {
            v: 1,
            kind: kind.into(),
            lamport,
            at: format!("2026-01-01T00:00:{:02}Z", lamport % 60),
            actor: "a".into(),
            data,
        }
    }

    fn run<S: State>(ops: &[Op]) -> Result<S, String> {
        let mut s = S::default();
        for o in ops {
            o.validate()?;
            s.apply(o)?;
            s.set_lamport(o.lamport);
            s.validate()?;
        }
        Ok(s)
    }

    #[test]
    fn op_validation() {
        let good = op("activity", 1, json!({"commit": "abc1"}));
        good.validate().unwrap();
        let bad = |f: &dyn Fn(&mut Op)| {
            let mut o = good.clone();
            f(&mut o);
            o.validate().unwrap_err()
        };
        assert!(bad(&|o| o.v = 2).contains("version"));
        assert!(bad(&|o| o.kind = String::new()).contains("kind"));
        assert!(bad(&|o| o.kind = "Activity".into()).contains("kind"));
        assert!(bad(&|o| o.kind = "héllo".into()).contains("kind"));
        assert!(bad(&|o| o.lamport = 0).contains("lamport"));
        assert!(bad(&|o| o.at = "yesterday".into()).contains("RFC 3339"));
        assert!(bad(&|o| o.actor = String::new()).contains("actor"));
        assert!(bad(&|o| o.actor = "x".repeat(201)).contains("actor"));
        assert!(bad(&|o| o.actor = "a\nb".into()).contains("actor"));
        assert!(bad(&|o| o.data = json!([1])).contains("object"));
        // Strict parsing.
        let text = r#"{"v":1,"kind":"stop","lamport":1,"at":"2026-01-01T00:00:00Z","actor":"a","data":{},"x":1}"#;
        assert!(serde_json::from_str::<Op>(text).unwrap_err().to_string().contains("unknown field"));
    }

    #[test]
    fn an_activity_recorded_after_the_fact_keeps_the_commits_time() {
        let created = op("created", 1, json!({"stream": "auth"}));
        // A commit of 2025 recorded now: the last activity is the commit's time, not the op's.
        let old = op("activity", 2, json!({"commit": "abc1", "at": "2025-06-01T00:00:00.000Z"}));
        let s = run::<BoulderState>(&[created.clone(), old.clone()]).unwrap();
        assert_eq!(s.last_activity.as_deref(), Some("2025-06-01T00:00:00.000Z"));
        assert_eq!(s.iteration, 1);
        // A newer commit after it moves the last activity; an older one does not, but counts.
        let newer = op("activity", 3, json!({"commit": "abc2"}));
        let older = op("activity", 4, json!({"commit": "abc3", "at": "2024-01-01T00:00:00Z"}));
        let s = run::<BoulderState>(&[created.clone(), old.clone(), newer, older]).unwrap();
        assert_eq!(s.last_activity.as_deref(), Some("2026-01-01T00:00:03Z"));
        assert_eq!(s.last_commit.as_deref(), Some("abc2"));
        assert_eq!(s.iteration, 3);
        // A time that does not parse falls back to the op's; a non-string is refused.
        let odd = op("activity", 2, json!({"commit": "abc1", "at": "yesterday"}));
        let s = run::<BoulderState>(&[created.clone(), odd]).unwrap();
        assert_eq!(s.last_activity.as_deref(), Some("2026-01-01T00:00:02Z"));
        assert!(run::<BoulderState>(&[created, op("activity", 2, json!({"commit": "abc1", "at": 5}))]).is_err());
    }

    #[test]
    fn unknown_kinds_name_the_kind() {
        for e in [
            run::<StreamState>(&[op("explode", 1, json!({}))]).unwrap_err(),
            run::<BoulderState>(&[op("explode", 1, json!({}))]).unwrap_err(),
            run::<PrdState>(&[op("explode", 1, json!({}))]).unwrap_err(),
        ] {
            assert!(e.contains("\"explode\""), "{e}");
        }
    }

    #[test]
    fn stream_lifecycle() {
        let s: StreamState = run(&[
            op(
                "initialized",
                1,
                json!({"name": "auth", "branch": "boulder/auth", "worktree": "/w/auth", "base": "main"}),
            ),
            op("stop_requested", 2, json!({})),
            op("status", 3, json!({"status": "RUNNING"})),
            op("stop_requested", 4, json!({})),
        ])
        .unwrap();
        assert_eq!(s.status, "RUNNING");
        assert!(s.stop_requested, "a stop asked during a run is kept");
        assert_eq!(s.name.as_deref(), Some("auth"));
        assert_eq!(s.last_run.as_ref().unwrap().started_at, "2026-01-01T00:00:03Z");
        assert!(s.last_run.as_ref().unwrap().ended_at.is_none());
        let mut s2 = s.clone();
        s2.apply(&op("status", 5, json!({"status": "STOPPED", "reason": "asked"}))).unwrap();
        assert!(!s2.stop_requested);
        let last = s2.last_run.clone().unwrap();
        assert_eq!((last.outcome.as_deref(), last.reason.as_deref()), (Some("STOPPED"), Some("asked")));
        s2.apply(&op("merged", 6, json!({"commit": "ABCDEF12", "strategy": "rebase"}))).unwrap();
        assert_eq!((s2.status.as_str(), s2.merged_commit.as_deref()), ("MERGED", Some("abcdef12")));
        s2.apply(&op("cleaned", 7, json!({"worktree_removed": true, "branch_deleted": true}))).unwrap();
        assert_eq!(s2.status, "MERGED");
        assert!(s2.worktree.is_none() && s2.branch_deleted && s2.cleaned_at.is_some());
        s2.validate().unwrap();
        // Bad data is refused naming the field.
        assert!(run::<StreamState>(&[op("status", 1, json!({"status": "DONE"}))]).unwrap_err().contains("DONE"));
        assert!(run::<StreamState>(&[op("merged", 1, json!({"commit": "xyz"}))]).unwrap_err().contains("commit"));
        assert!(run::<StreamState>(&[op("cleaned", 1, json!({"branch_deleted": "yes"}))])
            .unwrap_err()
            .contains("branch_deleted"));
        // A stream that was never initialized is DEFINED.
        assert_eq!(run::<StreamState>(&[op("stop_requested", 1, json!({}))]).unwrap().status, "DEFINED");
    }

    #[test]
    fn boulder_ops() {
        let b: BoulderState = run(&[
            op("created", 1, json!({"id": "auth", "stream": "auth", "parent": null, "depth": 0})),
            op("enforced", 2, json!({"gate": "idle", "message": "keep going"})),
            op("enforced", 3, json!({"gate": "idle", "message": "really"})),
            op("stop", 4, json!({})),
            op("activity", 5, json!({"commit": "c1", "story": "US-1"})),
            op("activity", 6, json!({"commit": "c1", "story": "US-2"})),
            op("checkpoint", 7, json!({"message": "half way"})),
            op("todo_add", 8, json!({"id": "t1", "text": "tests"})),
            op("todo_add", 9, json!({"id": "t1", "text": "again"})),
            op("todo_done", 10, json!({"id": "t1"})),
            op("todo_done", 11, json!({"id": "t9"})),
            op("enforced", 12, json!({"gate": "idle", "message": "m"})),
            op("reset_failures", 13, json!({})),
            op("status", 14, json!({"status": "completed"})),
        ])
        .unwrap();
        assert_eq!(b.id.as_deref(), Some("auth"));
        assert_eq!(b.iteration, 1, "the same commit counts once");
        assert_eq!(b.last_story.as_deref(), Some("US-1"));
        assert_eq!(b.failure_count, 0);
        assert!(!b.stop_requested);
        assert_eq!(b.last_message.as_deref(), Some("m"));
        assert_eq!(b.checkpoint.as_ref().unwrap().message, "half way");
        assert_eq!(b.todos, vec![Todo { id: "t1".into(), text: "tests".into(), done: true }]);
        assert_eq!(b.status, "completed");
        assert_eq!(b.lamport, 14);
        assert!(run::<BoulderState>(&[op("activity", 1, json!({}))]).unwrap_err().contains("commit"));
        assert!(run::<BoulderState>(&[op("created", 1, json!({"depth": -1}))]).unwrap_err().contains("depth"));
        assert!(run::<BoulderState>(&[op("status", 1, json!({"status": "zzz"}))]).unwrap_err().contains("zzz"));
    }

    #[test]
    fn activity_keeps_the_latest_time() {
        let mut b = BoulderState::default();
        let mut late = op("activity", 1, json!({"commit": "c1"}));
        late.at = "2026-01-01T10:00:00+02:00".into(); // 08:00Z
        let mut early = op("activity", 2, json!({"commit": "c2"}));
        early.at = "2026-01-01T09:00:00Z".into();
        b.apply(&late).unwrap();
        b.apply(&early).unwrap();
        assert_eq!(b.last_commit.as_deref(), Some("c2"), "09:00Z is after 10:00+02:00");
        assert_eq!(b.iteration, 2);
    }

    #[test]
    fn prd_ops() {
        let p: PrdState = run(&[
            op("done", 1, json!({"ids": ["US-2", "US-1", "US-2"]})),
            op("undone", 2, json!({"ids": ["US-2"]})),
            op("merge", 3, json!({"parents": [], "ops": 0})),
        ])
        .unwrap();
        assert_eq!(p.done.iter().collect::<Vec<_>>(), ["US-1"]);
        assert!(run::<PrdState>(&[op("done", 1, json!({"ids": [1]}))]).unwrap_err().contains("ids"));
        assert!(run::<PrdState>(&[op("done", 1, json!({}))]).unwrap_err().contains("ids"));
    }

    #[test]
    fn states_are_strict_and_round_trip() {
        let b: BoulderState =
            run(&[op("created", 1, json!({"stream": "s"})), op("activity", 2, json!({"commit": "c"}))]).unwrap();
        let text = serde_json::to_string(&b).unwrap();
        assert_eq!(serde_json::from_str::<BoulderState>(&text).unwrap(), b);
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["surprise"] = json!(1);
        assert!(serde_json::from_value::<BoulderState>(v).is_err());
        assert!(serde_json::from_str::<StreamState>(r#"{"status":"RUNNING","extra":1}"#).is_err());
        assert!(serde_json::from_str::<StreamState>(r#"{"status":"NOPE"}"#).unwrap().validate().is_err());
        assert!(serde_json::from_str::<PrdState>(r#"{"done":["a"],"x":1}"#).is_err());
    }

    #[test]
    fn merge_ops_change_nothing() {
        let b: BoulderState = run(&[op("created", 1, json!({"stream": "s"}))]).unwrap();
        let mut after = b.clone();
        after.apply(&op("merge", 5, json!({"parents": ["a", "b"], "ops": 3}))).unwrap();
        assert_eq!(after, b);
    }

    #[test]
    fn complete_op_fills_names() {
        let mut d = json!({"branch": "b"});
        StreamState::complete_op(Some("auth"), "initialized", &mut d);
        assert_eq!(d["name"], "auth");
        let mut d = json!({"id": "given"});
        BoulderState::complete_op(Some("x"), "created", &mut d);
        assert_eq!(d["id"], "given");
        let mut d = json!({});
        BoulderState::complete_op(Some("x"), "activity", &mut d);
        assert!(d.get("id").is_none());
    }

    /// Ops for the replay property: activity on a small set of commits and the others.
    fn gen_op() -> impl Strategy<Value = (u64, u8, u8, u8)> {
        (1u64..8, 0u8..3, 0u8..6, 0u8..12)
    }

    fn make(i: usize, (lamport, actor, kind, arg): (u64, u8, u8, u8)) -> (Op, usize) {
        let (k, data) = match kind {
            0 | 1 => ("activity", json!({"commit": format!("c{arg}")})),
            2 => ("enforced", json!({"gate": "idle", "message": format!("m{arg}")})),
            3 => ("stop", json!({})),
            4 => ("checkpoint", json!({"message": format!("cp{arg}")})),
            _ => ("todo_add", json!({"id": format!("t{}", arg % 4), "text": format!("x{arg}")})),
        };
        let mut o = op(k, lamport, data);
        o.actor = format!("actor{actor}");
        o.at = format!("2026-01-01T00:00:{:02}Z", arg);
        (o, i)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// The replay order is total: any presentation order gives the same state, and the
        /// iteration counts each distinct commit once.
        #[test]
        fn replay_is_order_independent(ops in prop::collection::vec(gen_op(), 0..40), seed in any::<u64>()) {
            let ops: Vec<(Op, usize)> = ops.into_iter().enumerate().map(|(i, g)| make(i, g)).collect();
            let mut shuffled = ops.clone();
            let mut rng = fastrand::Rng::with_seed(seed);
            rng.shuffle(&mut shuffled);
            let a = replay(BoulderState::default(), ops.clone()).unwrap();
            let b = replay(BoulderState::default(), shuffled).unwrap();
            prop_assert_eq!(&a, &b);
            let distinct: BTreeSet<String> = ops
                .iter()
                .filter(|(o, _)| o.kind == "activity")
                .map(|(o, _)| o.data["commit"].as_str().unwrap().to_string())
                .collect();
            prop_assert_eq!(a.iteration, distinct.len() as u64);
            a.validate().unwrap();
        }

        /// Replaying a prefix, then the rest, equals replaying everything when the rest sorts
        /// after the prefix (the fast path of the store's merge).
        #[test]
        fn replay_resumes_from_a_base(ops in prop::collection::vec(gen_op(), 0..30), cut in 0u64..8) {
            let ops: Vec<(Op, usize)> = ops.into_iter().enumerate().map(|(i, g)| make(i, g)).collect();
            let (before, after): (Vec<_>, Vec<_>) = ops.iter().cloned().partition(|(o, _)| o.lamport <= cut);
            let base = replay(BoulderState::default(), before).unwrap();
            let resumed = replay(base, after.clone()).unwrap();
            let whole = replay(BoulderState::default(), ops).unwrap();
            prop_assert_eq!(resumed, whole);
        }
    }
}
