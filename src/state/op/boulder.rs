//! A boulder's op-log (`refs/boulder/boulders/<id>`): [`BoulderOp`], its statuses, and
//! [`BoulderState`] with how each op changes it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{
    at_or_after, check_commit, check_opt_text, check_required, check_time, field, loose_commit, opt, opt_string,
    required, unknown, CommitId, Op, OpError, Opt, Payload, State, StateError,
};

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
/// Boulder statuses, as written ([`BoulderStatus::as_str`]).
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
    /// `active`, `completed`, `stopped` or `failed`.
    pub status: BoulderStatus,
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

/// The status of a boulder, written in lowercase (`"active"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum BoulderStatus {
    /// Being worked on (enforced).
    #[default]
    Active,
    /// Finished (`git boulder finish`, or its stream completed).
    Completed,
    /// Stopped.
    Stopped,
    /// Given up.
    Failed,
}

impl BoulderStatus {
    /// Every status, in the order of [`BOULDER_STATUSES`].
    pub const ALL: [BoulderStatus; 4] =
        [BoulderStatus::Active, BoulderStatus::Completed, BoulderStatus::Stopped, BoulderStatus::Failed];

    /// As written in state and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            BoulderStatus::Active => "active",
            BoulderStatus::Completed => "completed",
            BoulderStatus::Stopped => "stopped",
            BoulderStatus::Failed => "failed",
        }
    }

    /// The status written `text`, if it is one.
    pub fn parse(text: &str) -> Option<BoulderStatus> {
        BoulderStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

impl TryFrom<String> for BoulderStatus {
    type Error = StateError;
    fn try_from(text: String) -> Result<Self, StateError> {
        BoulderStatus::parse(&text).ok_or(StateError::UnknownStatus { what: "boulder", status: text })
    }
}

impl std::fmt::Display for BoulderStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Default for BoulderState {
    fn default() -> Self {
        BoulderState {
            id: None,
            stream: None,
            parent: None,
            depth: 0,
            status: BoulderStatus::Active,
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

/// The ops of a boulder's op-log (`refs/boulder/boulders/<id>`), by kind. Each variant's fields
/// are declared in the order of their keys sorted, the order `op.json` has always had: an
/// append writes them in declaration order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum BoulderOp {
    /// `created`: the boulder is made, under `parent` at `depth`. `id` is filled in from the ref
    /// when left out.
    Created {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        depth: Opt<u64>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        id: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        parent: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        stream: Opt<String>,
    },
    /// `activity`: a commit was recorded for it (`at`: the commit's time when recorded after
    /// the fact, else the op's).
    Activity {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        at: Opt<String>,
        commit: CommitId,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        story: Opt<String>,
    },
    /// `enforced`: `git boulder check` pushed the agent on.
    Enforced {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        gate: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        message: Opt<String>,
    },
    /// `reset_failures`: the failure count starts again.
    ResetFailures {},
    /// `stop`: the user asked it to stop (until new activity).
    Stop {},
    /// `status`: its status changes.
    Status { status: BoulderStatus },
    /// `checkpoint`: where work stands.
    Checkpoint { message: String },
    /// `todo_add`: a todo (an id seen before is not added again).
    TodoAdd { id: String, text: String },
    /// `todo_done`: a todo is done (an unknown id changes nothing).
    TodoDone { id: String },
    /// `denied`: an agent harness hook refused an edit of `path`, which the stream does not own
    /// (`rule`: `other_stream`, `shared_read` or `undeclared`; `owner`: the owning stream). A
    /// record only: it changes nothing but `updated_at`.
    Denied {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        owner: Opt<String>,
        path: String,
        rule: String,
    },
}

impl Payload for BoulderOp {
    fn kind(&self) -> &'static str {
        match self {
            BoulderOp::Created { .. } => "created",
            BoulderOp::Activity { .. } => "activity",
            BoulderOp::Enforced { .. } => "enforced",
            BoulderOp::ResetFailures {} => "reset_failures",
            BoulderOp::Stop {} => "stop",
            BoulderOp::Status { .. } => "status",
            BoulderOp::Checkpoint { .. } => "checkpoint",
            BoulderOp::TodoAdd { .. } => "todo_add",
            BoulderOp::TodoDone { .. } => "todo_done",
            BoulderOp::Denied { .. } => "denied",
        }
    }

    fn parse(op: &Op) -> Result<Self, OpError> {
        Ok(match op.kind.as_str() {
            "created" => BoulderOp::Created {
                id: opt_string(op, "id")?,
                stream: opt_string(op, "stream")?,
                parent: opt_string(op, "parent")?,
                depth: opt(op, "depth", || {
                    field(op, "depth").and_then(|d| d.as_u64()).filter(|d| *d <= MAX_DEPTH).ok_or(OpError::BadDepth)
                })?,
            },
            "activity" => BoulderOp::Activity {
                commit: loose_commit(op, "commit")?,
                story: opt_string(op, "story")?,
                at: opt_string(op, "at")?,
            },
            "enforced" => BoulderOp::Enforced { gate: opt_string(op, "gate")?, message: opt_string(op, "message")? },
            "reset_failures" => BoulderOp::ResetFailures {},
            "stop" => BoulderOp::Stop {},
            "status" => {
                let status = required(op, "status")?;
                let Some(status) = BoulderStatus::parse(&status) else {
                    return Err(OpError::UnknownStatus { what: "boulder", status, known: BOULDER_STATUSES });
                };
                BoulderOp::Status { status }
            }
            "checkpoint" => BoulderOp::Checkpoint { message: required(op, "message")? },
            "todo_add" => BoulderOp::TodoAdd { id: required(op, "id")?, text: required(op, "text")? },
            "todo_done" => BoulderOp::TodoDone { id: required(op, "id")? },
            "denied" => BoulderOp::Denied {
                path: required(op, "path")?,
                rule: required(op, "rule")?,
                owner: opt_string(op, "owner")?,
            },
            _ => return Err(unknown(BoulderState::WHAT, op)),
        })
    }

    fn check(&self) -> Result<(), OpError> {
        let kind = self.kind();
        match self {
            BoulderOp::Created { depth, id, parent, stream } => {
                check_opt_text(kind, "id", id)?;
                check_opt_text(kind, "stream", stream)?;
                check_opt_text(kind, "parent", parent)?;
                match depth.get() {
                    Some(d) if *d > MAX_DEPTH => Err(OpError::BadDepth),
                    _ => Ok(()),
                }
            }
            BoulderOp::Activity { at, commit, story } => {
                check_commit(kind, "commit", commit)?;
                check_opt_text(kind, "story", story)?;
                check_opt_text(kind, "at", at)
            }
            BoulderOp::Enforced { gate, message } => {
                check_opt_text(kind, "gate", gate)?;
                check_opt_text(kind, "message", message)
            }
            BoulderOp::Checkpoint { message } => check_required(kind, "message", message),
            BoulderOp::TodoAdd { id, text } => {
                check_required(kind, "id", id)?;
                check_required(kind, "text", text)
            }
            BoulderOp::TodoDone { id } => check_required(kind, "id", id),
            BoulderOp::Denied { owner, path, rule } => {
                check_required(kind, "path", path)?;
                check_required(kind, "rule", rule)?;
                check_opt_text(kind, "owner", owner)
            }
            BoulderOp::ResetFailures {} | BoulderOp::Stop {} | BoulderOp::Status { .. } => Ok(()),
        }
    }
}

impl BoulderState {
    /// The iteration at which `commit` was counted: each distinct commit adds one and joins the
    /// end of `recent_commits`, so one less than now for each counted after it; now when it is
    /// not among them (counted long ago, or not at all).
    pub fn iteration_of(&self, commit: &str) -> u64 {
        match self.recent_commits.iter().rposition(|c| c == commit) {
            Some(p) => self.iteration.saturating_sub((self.recent_commits.len() - 1 - p) as u64),
            None => self.iteration,
        }
    }
}

impl State for BoulderState {
    const WHAT: &'static str = "boulder";
    type Op = BoulderOp;

    fn apply_op(&mut self, op: &BoulderOp, at: &str, _actor: &str) {
        match op {
            BoulderOp::Created { depth, id, parent, stream } => {
                self.id = id.get().cloned().or(self.id.take());
                self.stream = stream.get().cloned();
                self.parent = parent.get().cloned();
                self.depth = depth.get().copied().unwrap_or(0) as u32;
            }
            BoulderOp::Activity { at: when, commit, story } => {
                // A commit seen before is counted once, however often it is seen (as written).
                let commit = commit.to_string();
                if !self.recent_commits.contains(&commit) {
                    self.iteration = self.iteration.saturating_add(1);
                    self.recent_commits.push(commit.clone());
                    if self.recent_commits.len() > RECENT_COMMITS {
                        let extra = self.recent_commits.len() - RECENT_COMMITS;
                        self.recent_commits.drain(..extra);
                    }
                    // The commit's time when the op carries it (a commit recorded after the
                    // fact), else the op's.
                    let when = when
                        .get()
                        .filter(|t| crate::time::parse_rfc3339(t).is_some())
                        .cloned()
                        .unwrap_or_else(|| at.to_string());
                    if self.last_activity.as_deref().is_none_or(|t| at_or_after(&when, t)) {
                        self.last_activity = Some(when);
                        self.last_commit = Some(commit);
                        self.last_story = story.get().cloned();
                    }
                    self.failure_count = 0;
                    self.stop_requested = false;
                    if self.status == BoulderStatus::Stopped {
                        self.status = BoulderStatus::Active;
                    }
                }
            }
            BoulderOp::Enforced { gate, message } => {
                self.last_enforcement = Some(at.to_string());
                self.failure_count = self.failure_count.saturating_add(1);
                self.last_gate = gate.get().cloned();
                self.last_message = message.get().cloned();
            }
            BoulderOp::ResetFailures {} => self.failure_count = 0,
            BoulderOp::Stop {} => self.stop_requested = true,
            BoulderOp::Status { status } => self.status = *status,
            BoulderOp::Checkpoint { message } => {
                self.checkpoint = Some(Checkpoint { message: message.clone(), at: at.to_string() });
            }
            BoulderOp::TodoAdd { id, text } => {
                if !self.todos.iter().any(|t| t.id == *id) {
                    self.todos.push(Todo { id: id.clone(), text: text.clone(), done: false });
                }
            }
            BoulderOp::TodoDone { id } => {
                if let Some(t) = self.todos.iter_mut().find(|t| t.id == *id) {
                    t.done = true;
                }
            }
            BoulderOp::Denied { .. } => {}
        }
        self.updated_at = Some(at.to_string());
    }

    fn validate(&self) -> Result<(), StateError> {
        if u64::from(self.depth) > MAX_DEPTH {
            return Err(StateError::Depth { depth: u64::from(self.depth) });
        }
        if self.recent_commits.len() > RECENT_COMMITS {
            return Err(StateError::TooManyRecentCommits);
        }
        let mut ids = BTreeSet::new();
        for t in &self.todos {
            if !ids.insert(t.id.as_str()) {
                return Err(StateError::DuplicateTodo { id: t.id.clone() });
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

    fn complete_op(leaf: Option<&str>, op: &mut BoulderOp) {
        if let (Some(leaf), BoulderOp::Created { id: id @ Opt::Absent, .. }) = (leaf, op) {
            *id = Opt::Set(leaf.to_string());
        }
    }

    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn set_lamport(&mut self, lamport: u64) {
        self.lamport = lamport;
    }
}
