//! Op records and state types, and how each op changes its state. Pure: no git here.
//!
//! These JSON shapes are a public format (see docs/state-format.md): every field is documented,
//! and parsing is strict (unknown fields are refused) so garbage from a remote is caught.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// One operation: the content of `op.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Op {
    /// Format version, always 1.
    pub v: u32,
    /// What happened (`initialized`, `activity`, `done`, `merge`, …).
    pub kind: String,
    /// Lamport clock: one more than the op before it on this ref.
    pub lamport: u64,
    /// RFC 3339 time the op was made.
    pub at: String,
    /// The actor (machine) that made it.
    pub actor: String,
    /// The op's arguments.
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
        if crate::time::parse_rfc3339(&self.at).is_none() {
            return Err(format!("op time {:?} is not RFC 3339", self.at));
        }
        if self.actor.is_empty() || self.actor.len() > 200 || self.actor.chars().any(char::is_control) {
            return Err(format!("op actor {:?} is empty, too long or has control characters", self.actor));
        }
        Ok(())
    }
}

/// A state type kept in an op-log.
pub trait State: Default + Clone + PartialEq + Serialize + for<'de> Deserialize<'de> {
    /// Apply one op; an op this state does not know, or bad data, is an error naming it.
    fn apply(&mut self, op: &Op) -> Result<(), String>;
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
        Some(serde_json::Value::String(s)) if s.len() <= 4096 => Ok(Some(s.clone())),
        Some(_) => Err(format!("{} op: data.{key} must be a string", op.kind)),
    }
}

fn required(op: &Op, key: &str) -> Result<String, String> {
    string(op, key)?.ok_or_else(|| format!("{} op: data.{key} is missing", op.kind))
}

/// Stream statuses.
pub const STREAM_STATUSES: &[&str] =
    &["DEFINED", "INITIALIZED", "RUNNING", "STOPPED", "COMPLETED", "FAILED", "MERGED", "CLEANED"];

/// State of one stream (`refs/boulder/streams/<name>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamState {
    /// One of [`STREAM_STATUSES`].
    pub status: String,
    /// The stream's branch as recorded at init.
    #[serde(default)]
    pub branch: Option<String>,
    /// The worktree path as recorded at init (informational: paths are always computed locally).
    #[serde(default)]
    pub worktree: Option<String>,
    /// The base branch at init.
    #[serde(default)]
    pub base: Option<String>,
    /// The commit the base branch was at after the stream merged.
    #[serde(default)]
    pub merged_commit: Option<String>,
    /// `git boulder stream stop` asked the run loop to stop after its iteration.
    #[serde(default)]
    pub stop_requested: bool,
    /// Why the status last changed, when said.
    #[serde(default)]
    pub reason: Option<String>,
    /// Time of the last op.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Lamport clock of the last op.
    #[serde(default)]
    pub lamport: u64,
}

impl State for StreamState {
    fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op.kind.as_str() {
            "initialized" => {
                self.status = "INITIALIZED".into();
                self.branch = string(op, "branch")?.or(self.branch.take());
                self.worktree = string(op, "worktree")?;
                self.base = string(op, "base")?.or(self.base.take());
                self.stop_requested = false;
            }
            "status" => {
                let status = required(op, "status")?;
                if !STREAM_STATUSES.contains(&status.as_str()) {
                    return Err(format!("status op: unknown stream status {status:?}"));
                }
                if status == "RUNNING" {
                    self.stop_requested = false;
                }
                self.status = status;
                self.reason = string(op, "reason")?;
            }
            "stop_requested" => self.stop_requested = true,
            "merged" => {
                self.status = "MERGED".into();
                self.merged_commit = Some(required(op, "commit")?);
            }
            "cleaned" => {
                if self.status != "MERGED" {
                    self.status = "CLEANED".into();
                }
                self.worktree = None;
            }
            "merge" => {}
            other => return Err(format!("unknown stream op {other:?}")),
        }
        self.updated_at = Some(op.at.clone());
        Ok(())
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
    pub message: String,
    pub at: String,
}

/// An open or finished todo of a boulder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Todo {
    pub id: String,
    pub text: String,
    pub done: bool,
}

/// How many recorded commit ids a boulder keeps, so an activity seen twice counts once.
pub const RECENT_COMMITS: usize = 64;

/// State of one boulder (`refs/boulder/boulders/<id>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoulderState {
    /// The stream it belongs to.
    #[serde(default)]
    pub stream: Option<String>,
    /// Parent boulder id (`None` for a stream's root boulder).
    #[serde(default)]
    pub parent: Option<String>,
    /// 0 for a root boulder.
    #[serde(default)]
    pub depth: u32,
    /// `active`, `completed`, `stopped` or `failed`.
    pub status: String,
    /// Commits recorded for it (and, through parents, its descendants).
    pub iteration: u64,
    /// Time of the last recorded commit.
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
    /// The last recorded commit id.
    #[serde(default)]
    pub last_commit: Option<String>,
    /// The story of the last recorded commit, when known.
    #[serde(default)]
    pub last_story: Option<String>,
    /// The last enforcement message.
    #[serde(default)]
    pub last_message: Option<String>,
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    #[serde(default)]
    pub todos: Vec<Todo>,
    /// The last [`RECENT_COMMITS`] recorded commit ids, newest last: an activity op for one of
    /// them is not counted again.
    #[serde(default)]
    pub recent_commits: Vec<String>,
    /// Time of the last op.
    #[serde(default)]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub lamport: u64,
}

impl Default for BoulderState {
    fn default() -> Self {
        BoulderState {
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
    fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op.kind.as_str() {
            "created" => {
                self.stream = string(op, "stream")?;
                self.parent = string(op, "parent")?;
                self.depth = field(op, "depth").and_then(|d| d.as_u64()).unwrap_or(0).min(1000) as u32;
            }
            "activity" => {
                let commit = required(op, "commit")?;
                if !self.recent_commits.contains(&commit) {
                    self.iteration += 1;
                    self.recent_commits.push(commit.clone());
                    if self.recent_commits.len() > RECENT_COMMITS {
                        self.recent_commits.remove(0);
                    }
                }
                if self.last_activity.as_deref().is_none_or(|t| t <= op.at.as_str()) {
                    self.last_activity = Some(op.at.clone());
                    self.last_commit = Some(commit);
                    self.last_story = string(op, "story")?;
                }
                self.failure_count = 0;
                self.stop_requested = false;
                if self.status == "stopped" {
                    self.status = "active".into();
                }
            }
            "enforced" => {
                self.last_enforcement = Some(op.at.clone());
                self.failure_count = self.failure_count.saturating_add(1);
                self.last_message = string(op, "message")?;
            }
            "reset_failures" => self.failure_count = 0,
            "stop" => self.stop_requested = true,
            "status" => {
                let status = required(op, "status")?;
                if !matches!(status.as_str(), "active" | "completed" | "stopped" | "failed") {
                    return Err(format!("status op: unknown boulder status {status:?}"));
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
            "merge" => {}
            other => return Err(format!("unknown boulder op {other:?}")),
        }
        self.updated_at = Some(op.at.clone());
        Ok(())
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
    /// Story ids recorded done with `git boulder prd done` (or by a merge).
    pub done: BTreeSet<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub lamport: u64,
}

impl State for PrdState {
    fn apply(&mut self, op: &Op) -> Result<(), String> {
        let ids = || -> Result<Vec<String>, String> {
            let list =
                field(op, "ids").and_then(|v| v.as_array()).ok_or(format!("{} op: data.ids is missing", op.kind))?;
            list.iter()
                .map(|v| v.as_str().map(str::to_owned).ok_or(format!("{} op: data.ids holds a non-string", op.kind)))
                .collect()
        };
        match op.kind.as_str() {
            "done" => self.done.extend(ids()?),
            "undone" => {
                for id in ids()? {
                    self.done.remove(&id);
                }
            }
            "merge" => {}
            other => return Err(format!("unknown prd op {other:?}")),
        }
        self.updated_at = Some(op.at.clone());
        Ok(())
    }
    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn set_lamport(&mut self, lamport: u64) {
        self.lamport = lamport;
    }
}
