//! A stream's op-log (`refs/boulder/streams/<name>`): [`StreamOp`], its statuses, and
//! [`StreamState`] with how each op changes it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::review::{
    check_decision, check_full_commit, check_reviewer, decision, full_commit, reviewer, Review, MAX_REVIEWERS,
};
use super::spend::{self, Spend, SpendAmount};
use super::{
    boolean, check_commit, check_index, check_opt_text, check_required, check_time, check_word, commit_id, index, opt,
    opt_string, required, unknown, word, CommitId, Op, OpError, Opt, Payload, State, StateError, MAX_TEXT,
};

/// The largest stream index accepted.
pub const MAX_INDEX: u64 = 65535;

/// Stream statuses, as written ([`StreamStatus::as_str`]).
pub const STREAM_STATUSES: &[&str] =
    &["DEFINED", "INITIALIZED", "RUNNING", "STOPPED", "COMPLETED", "FAILED", "MERGED", "CLEANED"];

/// The status of a stream, written in capitals (`"RUNNING"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE", try_from = "String")]
pub enum StreamStatus {
    /// In the plan, never initialized.
    #[default]
    Defined,
    /// Its branch and worktree were made.
    Initialized,
    /// The run loop is running it.
    Running,
    /// The run loop stopped (asked to, or at its iteration limit).
    Stopped,
    /// The run loop finished its stories.
    Completed,
    /// The run loop gave up.
    Failed,
    /// Merged into the base branch.
    Merged,
    /// Its worktree was removed (a merged stream stays [`StreamStatus::Merged`]).
    Cleaned,
}

impl StreamStatus {
    /// Every status, in the order of [`STREAM_STATUSES`].
    pub const ALL: [StreamStatus; 8] = [
        StreamStatus::Defined,
        StreamStatus::Initialized,
        StreamStatus::Running,
        StreamStatus::Stopped,
        StreamStatus::Completed,
        StreamStatus::Failed,
        StreamStatus::Merged,
        StreamStatus::Cleaned,
    ];

    /// As written in state and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamStatus::Defined => "DEFINED",
            StreamStatus::Initialized => "INITIALIZED",
            StreamStatus::Running => "RUNNING",
            StreamStatus::Stopped => "STOPPED",
            StreamStatus::Completed => "COMPLETED",
            StreamStatus::Failed => "FAILED",
            StreamStatus::Merged => "MERGED",
            StreamStatus::Cleaned => "CLEANED",
        }
    }

    /// The status written `text`, if it is one.
    pub fn parse(text: &str) -> Option<StreamStatus> {
        StreamStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// A status in which the stream's worktree is expected to exist.
    pub fn is_live(self) -> bool {
        match self {
            StreamStatus::Initialized
            | StreamStatus::Running
            | StreamStatus::Stopped
            | StreamStatus::Completed
            | StreamStatus::Failed => true,
            StreamStatus::Defined | StreamStatus::Merged | StreamStatus::Cleaned => false,
        }
    }
}

impl TryFrom<String> for StreamStatus {
    type Error = StateError;
    fn try_from(text: String) -> Result<Self, StateError> {
        StreamStatus::parse(&text).ok_or(StateError::UnknownStatus { what: "stream", status: text })
    }
}

impl std::fmt::Display for StreamStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    pub outcome: Option<StreamStatus>,
    /// The reason it gave when it ended.
    #[serde(default)]
    pub reason: Option<String>,
}

/// The ops of a stream's op-log (`refs/boulder/streams/<name>`), by kind. Each variant's fields
/// are declared in the order of their keys sorted, the order `op.json` has always had: an
/// append writes them in declaration order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StreamOp {
    /// `initialized`: `stream init` made (or repaired) the branch and worktree. `name` is filled
    /// in from the ref when left out.
    Initialized {
        /// `true`: an ad-hoc stream, made for a worktree an agent harness asked for under a name
        /// the plan does not have (left out for the plan's streams).
        #[serde(skip_serializing_if = "Opt::is_absent")]
        adhoc: Opt<bool>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        base: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        branch: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        index: Opt<u64>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        name: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        setup_failed: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        worktree: Opt<String>,
    },
    /// `status`: the run loop's status changes, with why.
    Status {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        reason: Opt<String>,
        status: StreamStatus,
    },
    /// `stop_requested`: `stream stop` asks the run loop to stop after its iteration.
    StopRequested {},
    /// `indexed`: a stream initialized without an index gets one.
    Indexed { index: u64 },
    /// `merged`: merged into the base branch, which then was at `commit`.
    Merged {
        /// The base tip the merge was made on (missing in older records).
        #[serde(skip_serializing_if = "Opt::is_absent")]
        base_before: Opt<CommitId>,
        commit: CommitId,
        /// The base tip the stream brought, before the PRD sync commit (missing in older records).
        #[serde(skip_serializing_if = "Opt::is_absent")]
        landed: Opt<CommitId>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        strategy: Opt<String>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        stream_tip: Opt<CommitId>,
    },
    /// `rolled_back`: `stream rollback` moved the branch from `from` to `to`, keeping `from` under
    /// the backup ref `backup` (`restored`: it brought a backup back).
    RolledBack {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        backup: Opt<String>,
        from: CommitId,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        restored: Opt<bool>,
        to: CommitId,
    },
    /// `unmerged`: `stream unmerge` took the stream back out of the base, which then was at
    /// `commit`; the stream is COMPLETED again.
    Unmerged {
        commit: CommitId,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        reverted: Opt<CommitId>,
    },
    /// `cleaned`: `stream cleanup` removed the worktree (and maybe the branch).
    Cleaned {
        #[serde(skip_serializing_if = "Opt::is_absent")]
        branch_deleted: Opt<bool>,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        worktree_removed: Opt<bool>,
    },
    /// `refused`: a landing (`stream merge`, the merge queue, `work`, auto_merge) was refused for
    /// a reason only a person or a new commit can fix. Until the branch moves past `stream_tip`
    /// (and `stream_before`), or a `retried` op, no worker takes the stream.
    Refused {
        /// What resolves it, as the refusal's hint said.
        #[serde(skip_serializing_if = "Opt::is_absent")]
        hint: Opt<String>,
        /// The refusal's message.
        reason: String,
        /// The kind of refusal: `conflict`, `ownership`, `verify`, `uncommitted`,
        /// `missing_work`; any short lowercase word is accepted (newer writers may add kinds).
        refusal: String,
        /// The remote whose base the landing was refused on (absent: the local base).
        #[serde(skip_serializing_if = "Opt::is_absent")]
        remote: Opt<String>,
        /// The branch's tip before the refused attempt, when the attempt moved it (a failed
        /// `verify` leaves the rebased result on the branch).
        #[serde(skip_serializing_if = "Opt::is_absent")]
        stream_before: Opt<CommitId>,
        /// The stream branch's tip when it was refused.
        stream_tip: CommitId,
    },
    /// `retried`: `stream retry` cleared a refusal: workers may take the stream again.
    Retried {},
    /// `spent`: amounts of tokens, cost or agent time, each recorded once by its key.
    Spent { amounts: Vec<SpendAmount> },
    /// `spend_reset`: `spend reset` starts what the stream's budget counts again from nothing.
    SpendReset {},
    /// `reviewed`: a person's decision on the stream at commit `tip` (`git boulder review`):
    /// `approve`, `request_changes` (with a message) or `withdraw` (takes the reviewer's last
    /// decision back). The op's actor is the machine it was recorded on; `reviewer` is the
    /// person, as git names them (`Name <email>`).
    Reviewed {
        /// `approve`, `request_changes` or `withdraw`.
        decision: String,
        #[serde(skip_serializing_if = "Opt::is_absent")]
        message: Opt<String>,
        /// `Name <email>`: at most [`MAX_REVIEWER`] bytes, no control characters.
        reviewer: String,
        /// The stream branch's tip the decision is about: a full commit id.
        tip: CommitId,
    },
}

impl Payload for StreamOp {
    fn kind(&self) -> &'static str {
        match self {
            StreamOp::Initialized { .. } => "initialized",
            StreamOp::Status { .. } => "status",
            StreamOp::StopRequested {} => "stop_requested",
            StreamOp::Indexed { .. } => "indexed",
            StreamOp::Merged { .. } => "merged",
            StreamOp::RolledBack { .. } => "rolled_back",
            StreamOp::Unmerged { .. } => "unmerged",
            StreamOp::Cleaned { .. } => "cleaned",
            StreamOp::Refused { .. } => "refused",
            StreamOp::Retried {} => "retried",
            StreamOp::Spent { .. } => "spent",
            StreamOp::SpendReset {} => "spend_reset",
            StreamOp::Reviewed { .. } => "reviewed",
        }
    }

    fn parse(op: &Op) -> Result<Self, OpError> {
        Ok(match op.kind.as_str() {
            "initialized" => StreamOp::Initialized {
                name: opt_string(op, "name")?,
                branch: opt_string(op, "branch")?,
                worktree: opt_string(op, "worktree")?,
                base: opt_string(op, "base")?,
                index: opt(op, "index", || index(op))?,
                setup_failed: opt_string(op, "setup_failed")?,
                adhoc: opt(op, "adhoc", || boolean(op, "adhoc"))?,
            },
            "status" => {
                let status = required(op, "status")?;
                let Some(status) = StreamStatus::parse(&status) else {
                    return Err(OpError::UnknownStatus { what: "stream", status, known: STREAM_STATUSES });
                };
                StreamOp::Status { status, reason: opt_string(op, "reason")? }
            }
            "stop_requested" => StreamOp::StopRequested {},
            "indexed" => StreamOp::Indexed { index: index(op)? },
            "merged" => StreamOp::Merged {
                commit: commit_id(op, "commit")?,
                strategy: opt_string(op, "strategy")?,
                stream_tip: opt(op, "stream_tip", || commit_id(op, "stream_tip"))?,
                landed: opt(op, "landed", || commit_id(op, "landed"))?,
                base_before: opt(op, "base_before", || commit_id(op, "base_before"))?,
            },
            "rolled_back" => StreamOp::RolledBack {
                from: commit_id(op, "from")?,
                to: commit_id(op, "to")?,
                backup: opt_string(op, "backup")?,
                restored: opt(op, "restored", || boolean(op, "restored"))?,
            },
            "unmerged" => StreamOp::Unmerged {
                commit: commit_id(op, "commit")?,
                reverted: opt(op, "reverted", || commit_id(op, "reverted"))?,
            },
            "cleaned" => StreamOp::Cleaned {
                // `worktree_removed` is checked but not kept in the state: the worktree path is
                // dropped either way (paths are computed locally).
                worktree_removed: opt(op, "worktree_removed", || boolean(op, "worktree_removed"))?,
                branch_deleted: opt(op, "branch_deleted", || boolean(op, "branch_deleted"))?,
            },
            "refused" => StreamOp::Refused {
                refusal: word(op, "refusal")?,
                reason: required(op, "reason")?,
                stream_tip: commit_id(op, "stream_tip")?,
                stream_before: opt(op, "stream_before", || commit_id(op, "stream_before"))?,
                hint: opt_string(op, "hint")?,
                remote: opt_string(op, "remote")?,
            },
            "retried" => StreamOp::Retried {},
            "spent" => StreamOp::Spent { amounts: spend::parse_amounts(op)? },
            "spend_reset" => StreamOp::SpendReset {},
            "reviewed" => StreamOp::Reviewed {
                decision: decision(op)?,
                message: opt_string(op, "message")?,
                reviewer: reviewer(op)?,
                tip: full_commit(op, "tip")?,
            },
            _ => return Err(unknown(StreamState::WHAT, op)),
        })
    }

    fn check(&self) -> Result<(), OpError> {
        let kind = self.kind();
        let commit = |key, c: &CommitId| check_commit(kind, key, c);
        let opt_commit = |key, c: &Opt<CommitId>| c.get().map_or(Ok(()), |c| check_commit(kind, key, c));
        match self {
            StreamOp::Initialized { adhoc: _, base, branch, index, name, setup_failed, worktree } => {
                check_opt_text(kind, "name", name)?;
                check_opt_text(kind, "branch", branch)?;
                check_opt_text(kind, "worktree", worktree)?;
                check_opt_text(kind, "base", base)?;
                index.get().map_or(Ok(()), |n| check_index(kind, *n))?;
                check_opt_text(kind, "setup_failed", setup_failed)
            }
            StreamOp::Status { reason, status: _ } => check_opt_text(kind, "reason", reason),
            StreamOp::Indexed { index } => check_index(kind, *index),
            StreamOp::Merged { base_before, commit: c, landed, strategy, stream_tip } => {
                commit("commit", c)?;
                check_opt_text(kind, "strategy", strategy)?;
                opt_commit("stream_tip", stream_tip)?;
                opt_commit("landed", landed)?;
                opt_commit("base_before", base_before)
            }
            StreamOp::RolledBack { backup, from, restored: _, to } => {
                commit("from", from)?;
                commit("to", to)?;
                check_opt_text(kind, "backup", backup)
            }
            StreamOp::Unmerged { commit: c, reverted } => {
                commit("commit", c)?;
                opt_commit("reverted", reverted)
            }
            StreamOp::Refused { hint, reason, refusal, remote, stream_before, stream_tip } => {
                check_word(kind, "refusal", refusal)?;
                check_required(kind, "reason", reason)?;
                commit("stream_tip", stream_tip)?;
                opt_commit("stream_before", stream_before)?;
                check_opt_text(kind, "hint", hint)?;
                check_opt_text(kind, "remote", remote)
            }
            StreamOp::Spent { amounts } => spend::check_amounts(kind, amounts),
            StreamOp::Reviewed { decision, message, reviewer, tip } => {
                check_decision(decision)?;
                check_opt_text(kind, "message", message)?;
                check_reviewer(reviewer)?;
                check_full_commit(kind, "tip", tip)
            }
            StreamOp::StopRequested {} | StreamOp::Cleaned { .. } | StreamOp::Retried {} | StreamOp::SpendReset {} => {
                Ok(())
            }
        }
    }
}

/// A stream's last rollback (`rolled_back` op).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rollback {
    /// The branch's tip before.
    pub from: String,
    /// The branch's tip after.
    pub to: String,
    /// The ref that keeps `from` (none when `from` needed no keeping).
    #[serde(default)]
    pub backup: Option<String>,
    /// It brought a backup back (`--restore`).
    #[serde(default)]
    pub restored: bool,
    pub at: String,
}

/// A stream's standing refusal (`refused` op): the last landing was refused, and until the
/// branch moves on or `stream retry` clears it the stream needs a person (`NEEDS_ATTENTION`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// `conflict`, `ownership`, `verify`, `uncommitted`, `missing_work` (or a newer kind).
    pub refusal: String,
    /// The refusal's message.
    pub reason: String,
    /// The stream branch's tip when it was refused (lower case).
    pub stream_tip: String,
    /// The branch's tip before the refused attempt, when the attempt moved it.
    #[serde(default)]
    pub stream_before: Option<String>,
    /// What resolves it.
    #[serde(default)]
    pub hint: Option<String>,
    /// The remote whose base refused it (`null`: the local base).
    #[serde(default)]
    pub remote: Option<String>,
    /// When, and by which actor (machine).
    pub at: String,
    pub actor: String,
}

impl Refusal {
    /// Whether `tip` is one of the tips the refusal was made at.
    pub fn at_tip(&self, tip: &str) -> bool {
        let tip = tip.to_ascii_lowercase();
        self.stream_tip == tip || self.stream_before.as_deref() == Some(tip.as_str())
    }
}

/// State of one stream (`refs/boulder/streams/<name>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamState {
    /// The stream's name, as recorded by its `initialized` op (`null` before).
    #[serde(default)]
    pub name: Option<String>,
    /// `DEFINED` until it is initialized.
    pub status: StreamStatus,
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
    /// The base tip the stream brought when it merged, before the PRD sync commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_landed: Option<String>,
    /// The base tip the merge was made on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_base: Option<String>,
    /// The base tip after `stream unmerge` last took the stream out of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmerged_commit: Option<String>,
    /// The last `stream rollback` (or `--restore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rollback: Option<Rollback>,
    /// The last landing was refused (`refused` op); cleared by `retried` and `merged`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
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
    /// The standing review decisions, by reviewer (`Name <email>`): each reviewer's last
    /// `approve` or `request_changes`; a `withdraw` removes theirs. At most [`MAX_REVIEWERS`].
    /// Left out when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reviews: BTreeMap<String, Review>,
    /// An ad-hoc stream: made for a worktree an agent harness asked for (Claude Code's
    /// `WorktreeCreate`) under a name the plan does not have. It owns no paths and has no stories
    /// until the plan names it. Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adhoc: bool,
    /// What the stream spent (`spent`, `spend_reset` ops). Left out when nothing was.
    #[serde(default, skip_serializing_if = "Spend::is_empty")]
    pub spend: Spend,
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
            status: StreamStatus::Defined,
            branch: None,
            worktree: None,
            base: None,
            initialized_by: None,
            index: None,
            setup_failed: None,
            merged_commit: None,
            merge_strategy: None,
            merged_tip: None,
            merged_landed: None,
            merged_base: None,
            unmerged_commit: None,
            last_rollback: None,
            refused: None,
            stop_requested: false,
            reason: None,
            last_run: None,
            cleaned_at: None,
            branch_deleted: false,
            reviews: BTreeMap::new(),
            adhoc: false,
            spend: Spend::default(),
            updated_at: None,
            lamport: 0,
        }
    }
}

impl StreamState {
    /// A reviewer's decision becomes the one that stands for them (`withdraw` removes theirs),
    /// keeping at most [`MAX_REVIEWERS`].
    fn set_review(&mut self, reviewer: &str, review: Review) {
        if review.decision == "withdraw" {
            self.reviews.remove(reviewer);
            return;
        }
        self.reviews.insert(reviewer.to_string(), review);
        while self.reviews.len() > MAX_REVIEWERS {
            // The oldest decision goes (ties: the first reviewer by name), the same on every
            // machine since ops are applied in one order.
            let oldest = self.reviews.iter().min_by(|a, b| a.1.at.cmp(&b.1.at)).map(|(k, _)| k.clone());
            oldest.map(|k| self.reviews.remove(&k));
        }
    }
}

impl State for StreamState {
    const WHAT: &'static str = "stream";
    type Op = StreamOp;

    fn apply_op(&mut self, op: &StreamOp, at: &str, actor: &str) {
        match op {
            StreamOp::Initialized { adhoc, base, branch, index, name, setup_failed, worktree } => {
                self.name = name.get().cloned().or(self.name.take());
                self.adhoc = adhoc.get().copied().unwrap_or(false);
                self.index = index.get().copied();
                self.setup_failed = setup_failed.get().cloned();
                self.status = StreamStatus::Initialized;
                self.branch = branch.get().cloned().or(self.branch.take());
                self.worktree = worktree.get().cloned();
                self.base = base.get().cloned().or(self.base.take());
                self.initialized_by = Some(actor.to_string());
                self.stop_requested = false;
                self.reason = None;
                self.cleaned_at = None;
                self.branch_deleted = false;
            }
            StreamOp::Status { status, reason } => {
                let reason = reason.get().cloned();
                match status {
                    StreamStatus::Running => {
                        self.stop_requested = false;
                        self.last_run = Some(RunInfo {
                            started_at: at.to_string(),
                            actor: actor.to_string(),
                            ended_at: None,
                            outcome: None,
                            reason: None,
                        });
                    }
                    StreamStatus::Stopped | StreamStatus::Completed | StreamStatus::Failed => {
                        self.stop_requested = false;
                        if let Some(run) = self.last_run.as_mut().filter(|r| r.ended_at.is_none()) {
                            run.ended_at = Some(at.to_string());
                            run.outcome = Some(*status);
                            run.reason = reason.clone();
                        }
                    }
                    StreamStatus::Defined
                    | StreamStatus::Initialized
                    | StreamStatus::Merged
                    | StreamStatus::Cleaned => {}
                }
                self.status = *status;
                self.reason = reason;
            }
            StreamOp::StopRequested {} => self.stop_requested = true,
            StreamOp::Indexed { index } => self.index = Some(*index),
            StreamOp::Merged { base_before, commit, landed, strategy, stream_tip } => {
                self.status = StreamStatus::Merged;
                self.merged_commit = Some(commit.to_lowercase());
                self.merge_strategy = strategy.get().cloned();
                self.merged_tip = stream_tip.get().map(CommitId::to_lowercase);
                self.merged_landed = landed.get().map(CommitId::to_lowercase);
                self.merged_base = base_before.get().map(CommitId::to_lowercase);
                self.unmerged_commit = None;
                self.refused = None;
                self.stop_requested = false;
                self.reason = None;
            }
            StreamOp::RolledBack { backup, from, restored, to } => {
                self.last_rollback = Some(Rollback {
                    from: from.to_lowercase(),
                    to: to.to_lowercase(),
                    backup: backup.get().cloned(),
                    restored: restored.get().copied().unwrap_or(false),
                    at: at.to_string(),
                });
            }
            StreamOp::Unmerged { commit, reverted: _ } => {
                self.status = StreamStatus::Completed;
                self.unmerged_commit = Some(commit.to_lowercase());
                self.merged_commit = None;
                self.merge_strategy = None;
                self.merged_tip = None;
                self.merged_landed = None;
                self.merged_base = None;
                self.reason = Some("unmerged: taken back out of the base".into());
            }
            StreamOp::Cleaned { branch_deleted, worktree_removed: _ } => {
                // A merged stream stays MERGED: that it was merged matters more than that its
                // worktree is gone.
                if self.status != StreamStatus::Merged {
                    self.status = StreamStatus::Cleaned;
                }
                self.worktree = None;
                self.cleaned_at = Some(at.to_string());
                self.branch_deleted = self.branch_deleted || branch_deleted.get().copied().unwrap_or(false);
                self.stop_requested = false;
            }
            StreamOp::Refused { hint, reason, refusal, remote, stream_before, stream_tip } => {
                self.refused = Some(Refusal {
                    refusal: refusal.clone(),
                    reason: reason.clone(),
                    stream_tip: stream_tip.to_lowercase(),
                    stream_before: stream_before.get().map(CommitId::to_lowercase),
                    hint: hint.get().cloned(),
                    remote: remote.get().cloned(),
                    at: at.to_string(),
                    actor: actor.to_string(),
                });
            }
            StreamOp::Retried {} => self.refused = None,
            StreamOp::Spent { amounts } => self.spend.add(amounts, at, actor),
            StreamOp::SpendReset {} => self.spend.reset(at, actor),
            StreamOp::Reviewed { decision, message, reviewer, tip } => {
                let review = Review {
                    decision: decision.clone(),
                    message: message.get().cloned(),
                    tip: tip.to_lowercase(),
                    at: at.to_string(),
                    actor: actor.to_string(),
                };
                self.set_review(reviewer, review);
            }
        }
        self.updated_at = Some(at.to_string());
    }

    fn validate(&self) -> Result<(), StateError> {
        check_time("updated_at", &self.updated_at)?;
        check_time("cleaned_at", &self.cleaned_at)?;
        if self.index.is_some_and(|i| !(1..=MAX_INDEX).contains(&i)) {
            return Err(StateError::Index { index: self.index });
        }
        if self.setup_failed.as_ref().is_some_and(|s| s.len() > MAX_TEXT) {
            return Err(StateError::SetupFailedTooLong);
        }
        self.spend.validate()?;
        if let Some(run) = &self.last_run {
            check_time("last_run.started_at", &Some(run.started_at.clone()))?;
            check_time("last_run.ended_at", &run.ended_at)?;
        }
        if self.reviews.len() > MAX_REVIEWERS {
            return Err(StateError::TooManyReviews);
        }
        for (reviewer, r) in &self.reviews {
            check_time("reviews.at", &Some(r.at.clone()))?;
            let bad = check_reviewer(reviewer).is_err()
                || !matches!(r.decision.as_str(), "approve" | "request_changes")
                || crate::git::id::parse(&r.tip).is_none()
                || r.message.as_ref().is_some_and(|m| m.len() > MAX_TEXT);
            if bad {
                return Err(StateError::BadReview { reviewer: reviewer.chars().take(80).collect() });
            }
        }
        if let Some(r) = &self.refused {
            check_time("refused.at", &Some(r.at.clone()))?;
            for (what, text) in [("reason", Some(&r.reason)), ("hint", r.hint.as_ref()), ("remote", r.remote.as_ref())]
            {
                if text.is_some_and(|t| t.len() > MAX_TEXT) {
                    return Err(StateError::RefusedTooLong(what));
                }
            }
        }
        Ok(())
    }

    fn complete_op(leaf: Option<&str>, op: &mut StreamOp) {
        if let (Some(leaf), StreamOp::Initialized { name: name @ Opt::Absent, .. }) = (leaf, op) {
            *name = Opt::Set(leaf.to_string());
        }
    }

    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn set_lamport(&mut self, lamport: u64) {
        self.lamport = lamport;
    }
}
