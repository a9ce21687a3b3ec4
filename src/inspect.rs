//! What `git boulder review NAME` shows a reviewer on one screen ([`view`]): the stream's stories,
//! its commits, what it changes grouped by owner, the landing check against the base's tip (the
//! one `stream merge --dry-run` makes), the last recorded `verify` result, its spend, and the
//! review decisions, standing and earlier. It sits above `merge/` because the landing check is
//! the merge's own; the decisions and their verdict are `review/`'s.

use serde::Serialize;

use crate::error::{Kind, Result};
use crate::git::{cli, ObjectId};
use crate::plan::ownership::{Checker, RepoPath, Verdict as Owned, Violation};
use crate::plan::{Plan, StreamDef};
use crate::review::{self, Standing};
use crate::state::{self, Op, Store, StreamState};
use crate::workspace::Workspace;

/// The most commits and earlier decisions listed (the counts are always whole).
pub const MAX_LISTED: usize = 50;

/// Everything the review screen shows (`review --json` prints it as it is).
#[derive(Debug, Clone, Serialize)]
pub struct View {
    pub stream: String,
    pub branch: String,
    pub base: String,
    /// The stream branch's tip here (`null`: no branch yet).
    pub tip: Option<String>,
    /// The base branch's tip here.
    pub base_tip: Option<String>,
    pub stories: Vec<StoryRow>,
    /// Why the stories' status could not be read (the PRD), when it could not.
    pub stories_unread: Option<String>,
    /// The commits on the branch the base lacks, newest first (at most [`MAX_LISTED`]).
    pub commits: Vec<CommitRow>,
    pub commits_total: usize,
    /// What the stream changes since it forked from the base, grouped by owner.
    pub changes: Vec<Group>,
    pub check: Option<LandingCheck>,
    pub verify: Option<VerifyResult>,
    /// What the stream spent and its budget, as `status --json` gives them (`null`: nothing
    /// recorded and no budget).
    pub spend: Option<crate::spend::StreamView>,
    pub review: ReviewRow,
    /// Every decision recorded, newest first (at most [`MAX_LISTED`]).
    pub history: Vec<Decided>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StoryRow {
    pub id: String,
    pub title: String,
    /// `pending`, `in_progress`, `completed`, `blocked`, or `missing` (not in the PRD).
    pub status: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct CommitRow {
    pub id: String,
    pub subject: String,
}

/// The files of one owner: `own`, `shared_read`, `undeclared` or `stream` (another stream's,
/// named by `owner`).
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub group: &'static str,
    pub owner: Option<String>,
    pub files: Vec<FileStat>,
    pub added: u64,
    pub deleted: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileStat {
    pub path: RepoPath,
    /// Lines added and deleted (`null` for a binary file).
    pub added: Option<u64>,
    pub deleted: Option<u64>,
}

/// The landing check against the base's tip: what `stream merge --dry-run --force` finds.
#[derive(Debug, Clone, Serialize)]
pub struct LandingCheck {
    pub base_tip: String,
    pub conflicts: Vec<ConflictRow>,
    /// Paths the stream's commits change outside what it owns (the pre-push rules).
    pub ownership: Vec<Violation>,
    /// The base already holds everything.
    pub up_to_date: bool,
    /// What refuses the landing before any replay (dependencies, uncommitted work…).
    pub refused: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConflictRow {
    pub path: String,
    pub kind: &'static str,
    pub commit: String,
    pub subject: String,
}

/// The last recorded `verify` outcome: a landing refused by it.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyResult {
    pub passed: bool,
    pub tip: String,
    pub at: String,
    pub reason: String,
}

/// Where the stream stands with its reviews.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewRow {
    /// Approvals needed (0: no review).
    pub required: u32,
    /// `REVIEW`, `CHANGES_REQUESTED`, `APPROVED`, or `null` when none is required.
    pub status: Option<&'static str>,
    /// Valid approvals of the tip.
    pub approvals: u32,
    /// The machine that ran the stream's agent (its approvals do not count unless
    /// `settings.review.allow_self`).
    pub author_actor: Option<String>,
    /// Each reviewer's standing decision.
    pub decisions: Vec<StandingDecision>,
}

/// One reviewer's standing decision and how it weighs at the tip.
#[derive(Debug, Clone, Serialize)]
pub struct StandingDecision {
    pub reviewer: String,
    pub decision: String,
    pub message: Option<String>,
    pub tip: String,
    pub at: String,
    pub actor: String,
    /// `counts`, `blocks`, `stale` (another tip) or `own machine`.
    pub standing: &'static str,
}

/// One recorded decision.
#[derive(Debug, Clone, Serialize)]
pub struct Decided {
    pub at: String,
    pub actor: String,
    pub reviewer: String,
    pub decision: String,
    pub message: Option<String>,
    pub tip: String,
}

/// Gather the review screen of `stream`.
pub fn view(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<View> {
    let repo = &ws.repo;
    let base = plan.settings.base_branch.clone();
    let tip = repo.branch_tip(&stream.branch)?;
    let base_tip = repo.branch_tip(&base)?;
    let store = Store::new(repo)?;
    let sref = state::stream_ref(&stream.name);
    let st = store.read::<StreamState>(&sref)?.map(|e| e.state).unwrap_or_default();
    let (stories, stories_unread) = stories(ws, plan, stream);
    let (commits, commits_total) = match (tip, base_tip) {
        (Some(t), Some(b)) => commits(ws, t, b)?,
        _ => (Vec::new(), 0),
    };
    let changes = match (tip, base_tip) {
        (Some(t), Some(b)) => changes(ws, plan, stream, t, b)?,
        _ => Vec::new(),
    };
    let check = match (tip, base_tip) {
        (Some(_), Some(b)) => Some(landing_check(ws, plan, stream, b)?),
        _ => None,
    };
    let verify = st.refused.as_ref().filter(|r| r.refusal == "verify").map(|r| VerifyResult {
        passed: false,
        tip: r.stream_tip.clone(),
        at: r.at.clone(),
        reason: r.reason.clone(),
    });
    let review = review_row(plan, &stream.name, &st, tip);
    let history = history(&store, &sref)?;
    Ok(View {
        stream: stream.name.clone(),
        branch: stream.branch.clone(),
        base,
        tip: tip.map(|t| t.to_string()),
        base_tip: base_tip.map(|t| t.to_string()),
        stories,
        stories_unread,
        commits,
        commits_total,
        changes,
        check,
        verify,
        spend: spend(ws, plan, &stream.name, &st),
        review,
        history,
    })
}

/// The stream's spend as the dashboard shows it; a price in git config that cannot be read leaves
/// it out, as the dashboard does (`git boulder spend` names the problem).
fn spend(ws: &Workspace, plan: &Plan, name: &str, st: &StreamState) -> Option<crate::spend::StreamView> {
    let ledger = match plan.settings.budget.is_set() {
        // The plan's budget counts every stream.
        true => crate::spend::Ledger::read(ws, plan),
        false => crate::spend::Ledger::of(ws, plan, vec![(name.to_string(), st.spend.clone())]),
    };
    ledger.ok()?.view(plan, name)
}

fn stories(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> (Vec<StoryRow>, Option<String>) {
    let read = ws.load_prd(Some(plan), None).and_then(|(_, prd)| {
        let done = ws.recorded_done()?;
        let found = ws.stream_stories(plan, stream, &prd, &done)?;
        Ok(stream
            .stories
            .iter()
            .map(|id| match found.iter().find(|s| &s.id == id) {
                Some(s) => StoryRow { id: id.clone(), title: s.title.clone(), status: s.status.as_str().to_string() },
                None => StoryRow { id: id.clone(), title: String::new(), status: "missing".into() },
            })
            .collect())
    });
    match read {
        Ok(rows) => (rows, None),
        Err(e) => (
            stream
                .stories
                .iter()
                .map(|id| StoryRow { id: id.clone(), title: String::new(), status: "unknown".into() })
                .collect(),
            Some(e.message),
        ),
    }
}

fn commits(ws: &Workspace, tip: ObjectId, base_tip: ObjectId) -> Result<(Vec<CommitRow>, usize)> {
    let objects = ws.repo.objects();
    let walk = objects.walk([tip], [base_tip]).map_err(|e| crate::error::Error::internal(e.to_string()))?;
    let mut rows = Vec::new();
    let mut total = 0;
    for info in walk {
        let info = info.map_err(|e| crate::error::Error::internal(e.to_string()))?;
        total += 1;
        if rows.len() < MAX_LISTED {
            let subject = objects.commit_info(info.id)?.subject;
            rows.push(CommitRow { id: info.id.to_string(), subject });
        }
    }
    Ok((rows, total))
}

fn changes(ws: &Workspace, plan: &Plan, stream: &StreamDef, tip: ObjectId, base_tip: ObjectId) -> Result<Vec<Group>> {
    let checker = Checker::new(plan);
    let mut groups: Vec<Group> = Vec::new();
    for (added, deleted, path) in cli::numstat(ws.repo.run_dir(), base_tip, tip)? {
        let text = String::from_utf8_lossy(&path);
        let (group, owner) = if checker.undeclared(&text) {
            ("undeclared", None)
        } else {
            match checker.verdict(&stream.name, &text) {
                Owned::Violation(crate::plan::ownership::Rule::SharedRead, _) => ("shared_read", None),
                Owned::Violation(crate::plan::ownership::Rule::OtherStream, owner) => ("stream", owner),
                _ => ("own", None),
            }
        };
        let at = match groups.iter().position(|g| g.group == group && g.owner == owner) {
            Some(i) => i,
            None => {
                groups.push(Group { group, owner, files: Vec::new(), added: 0, deleted: 0 });
                groups.len() - 1
            }
        };
        let g = &mut groups[at];
        g.added += added.unwrap_or(0);
        g.deleted += deleted.unwrap_or(0);
        g.files.push(FileStat { path: RepoPath(path), added, deleted });
    }
    let rank = |g: &Group| match g.group {
        "own" => 0,
        "shared_read" => 1,
        "undeclared" => 2,
        _ => 3,
    };
    groups.sort_by(|a, b| (rank(a), &a.owner).cmp(&(rank(b), &b.owner)));
    Ok(groups)
}

/// The check `stream merge --dry-run --force` makes against the base's tip; a refusal before
/// the replay is shown, not raised.
fn landing_check(ws: &Workspace, plan: &Plan, stream: &StreamDef, base_tip: ObjectId) -> Result<LandingCheck> {
    let opts = crate::merge::Options { dry_run: true, force: true, ..Default::default() };
    let mut out = LandingCheck {
        base_tip: base_tip.to_string(),
        conflicts: Vec::new(),
        ownership: Vec::new(),
        up_to_date: false,
        refused: None,
    };
    match crate::merge::check(ws, plan, stream, &opts, base_tip) {
        Ok(c) => {
            out.conflicts = c
                .report
                .conflicts
                .iter()
                .map(|x| ConflictRow {
                    path: x.path.clone(),
                    kind: x.kind.as_str(),
                    commit: x.commit.clone(),
                    subject: x.subject.clone(),
                })
                .collect();
            out.ownership = c.report.ownership;
            out.up_to_date = c.report.up_to_date;
        }
        Err(e) if matches!(e.kind, Kind::Refused | Kind::Usage) => out.refused = Some(e.message),
        Err(e) => return Err(e),
    }
    Ok(out)
}

fn review_row(plan: &Plan, stream: &str, st: &StreamState, tip: Option<ObjectId>) -> ReviewRow {
    let author = review::author_actor(st);
    let required = review::required(plan, stream);
    let mut decisions = Vec::new();
    for (reviewer, r) in &st.reviews {
        let standing = match tip {
            Some(t) => review::standing(plan, r, t, author),
            None => Standing::Stale,
        };
        decisions.push(StandingDecision {
            reviewer: reviewer.clone(),
            decision: r.decision.clone(),
            message: r.message.clone(),
            tip: r.tip.clone(),
            at: r.at.clone(),
            actor: r.actor.clone(),
            standing: standing.as_str(),
        });
    }
    decisions.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.reviewer.cmp(&b.reviewer)));
    let approvals = decisions.iter().filter(|d| d.standing == Standing::Counts.as_str()).count();
    let status = match tip {
        Some(t) => review::verdict(plan, stream, st, t, author).status(),
        None if required > 0 => Some("REVIEW"),
        None => None,
    };
    ReviewRow {
        required,
        status,
        approvals: u32::try_from(approvals).unwrap_or(u32::MAX),
        author_actor: author.map(str::to_string),
        decisions,
    }
}

fn history(store: &Store, sref: &str) -> Result<Vec<Decided>> {
    let mut out = Vec::new();
    let Some(tip) = store.repo.ref_id(sref)? else { return Ok(out) };
    for entry in store.history_iter(tip) {
        let entry = entry?;
        if entry.op.kind != "reviewed" {
            continue;
        }
        if let Some(d) = decided(&entry.op) {
            out.push(d);
        }
        if out.len() >= MAX_LISTED {
            break;
        }
    }
    Ok(out)
}

fn decided(op: &Op) -> Option<Decided> {
    let text = |k: &str| op.data.get(k).and_then(|v| v.as_str()).map(str::to_string);
    Some(Decided {
        at: op.at.clone(),
        actor: op.actor.clone(),
        reviewer: text("reviewer")?,
        decision: text("decision")?,
        message: text("message"),
        tip: text("tip")?,
    })
}
