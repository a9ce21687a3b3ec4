//! The dashboard: one row per stream of the plan, from its state ref, its root boulder and its
//! view of the PRD. Reading state is one blob per ref.

use serde::Serialize;

use crate::error::Result;
use crate::git::refs;
use crate::plan::Plan;
use crate::prd::Prd;
use crate::state::{self, BoulderState, Store, StreamState, StreamStatus};
use crate::workspace::Workspace;

/// Stories done and total of a stream.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
}

/// One stream's row (the `--json` fields of `git boulder status`).
#[derive(Debug, Clone, Serialize)]
pub struct StreamRow {
    pub name: String,
    /// DEFINED until the stream is initialized; then what its op-log says, or what the
    /// dashboard finds beyond it.
    pub status: RowStatus,
    pub branch: String,
    pub progress: Progress,
    /// Commits recorded on the stream's root boulder.
    pub iteration: u64,
    /// RFC 3339 time of the last recorded commit, if any.
    pub last_activity: Option<String>,
    /// The worktree path, computed locally, when the folder exists.
    pub worktree: Option<String>,
    /// Commits on the stream branch that the base branch lacks (`None` without both branches).
    pub ahead: Option<usize>,
    /// Commits on the base branch that the stream branch lacks.
    pub behind: Option<usize>,
    /// Uncommitted changes in the worktree (`None` without a worktree).
    pub dirty: Option<bool>,
    /// Who holds the stream's lease, as last seen on a remote (`None`: no unexpired claim seen).
    pub claim: Option<ClaimView>,
    /// The command runs in this stream's worktree.
    pub current: bool,
    /// Its last landing was refused and nothing has changed since (status `NEEDS_ATTENTION`).
    /// Left out otherwise, so the output of every other stream is what it always was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention: Option<Attention>,
    /// `true` for an ad-hoc stream (made for a worktree Claude Code asked for, not in the plan
    /// file); left out for the plan's streams.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub adhoc: bool,
    /// What it spent and its budget (docs/spend.md); left out when it spent nothing and no
    /// budget applies, so the output of users without either is what it always was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend: Option<crate::spend::StreamView>,
}

/// A standing refusal, as the dashboard shows it (the `attention` of `status --json`).
#[derive(Debug, Clone, Serialize)]
pub struct Attention {
    /// `conflict`, `ownership`, `verify`, `uncommitted`, `missing_work` (or a newer kind).
    pub refusal: String,
    /// The refusal's message.
    pub reason: String,
    /// What resolves it, as the refusal said.
    pub hint: Option<String>,
    /// The command that lets workers take the stream again once it is resolved (a new commit on
    /// its branch does too).
    pub command: String,
    /// The stream branch's tip it was refused at.
    pub stream_tip: String,
    /// The remote whose base refused it (`null`: a local base).
    pub remote: Option<String>,
    /// When, and by which actor (machine).
    pub at: String,
    pub actor: String,
}

impl Attention {
    fn of(stream: &str, r: &crate::state::Refusal) -> Attention {
        Attention {
            refusal: r.refusal.clone(),
            reason: r.reason.clone(),
            hint: r.hint.clone(),
            command: crate::stream::attention::retry_command(stream),
            stream_tip: r.stream_tip.clone(),
            remote: r.remote.clone(),
            at: r.at.clone(),
            actor: r.actor.clone(),
        }
    }

    /// One line: `refused (conflict): the first line of the reason`.
    pub fn summary(&self) -> String {
        let first = self.reason.lines().next().unwrap_or_default();
        format!("refused ({}): {first}", self.refusal)
    }
}

/// What the dashboard says of a stream: the status its op-log records, or what it finds beyond
/// that. Written as one word in capitals (`"RUNNING"`, `"STALE"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowStatus {
    /// What its op-log says (`DEFINED` when it has none).
    Recorded(StreamStatus),
    /// Its state ref holds invalid state.
    Invalid,
    /// Recorded RUNNING by a run on this machine that no longer holds the stream's lock.
    Interrupted,
    /// Initialized, but its setup command failed: the worktree is kept, not ready.
    SetupFailed,
    /// Its worktree is expected on this machine and is gone.
    Stale,
    /// Its last landing was refused (a conflict, ownership, verify, uncommitted changes,
    /// missing work) and its branch has not moved since: a person has to look.
    NeedsAttention,
    /// Its budget, or the plan's, is spent: no worker starts another iteration of it until the
    /// budget is raised or `git boulder spend reset` (docs/spend.md).
    BudgetSpent,
    /// Complete, and its review is required: its tip lacks approvals (docs/review.md).
    Review,
    /// Complete, and a reviewer asked for changes on its tip: its agent gets them next.
    ChangesRequested,
    /// Complete, with the approvals its tip needs: ready to land.
    Approved,
}

impl RowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RowStatus::Recorded(s) => s.as_str(),
            RowStatus::Invalid => "INVALID",
            RowStatus::Interrupted => "INTERRUPTED",
            RowStatus::SetupFailed => "SETUP_FAILED",
            RowStatus::Stale => "STALE",
            RowStatus::NeedsAttention => "NEEDS_ATTENTION",
            RowStatus::BudgetSpent => "BUDGET_SPENT",
            RowStatus::Review => "REVIEW",
            RowStatus::ChangesRequested => "CHANGES_REQUESTED",
            RowStatus::Approved => "APPROVED",
        }
    }
}

impl std::fmt::Display for RowStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RowStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A stream's lease as last seen on a remote (`git boulder stream claim`).
#[derive(Debug, Clone, Serialize)]
pub struct ClaimView {
    /// The remote it was seen on (its name, or `url-…` for a URL).
    pub remote: String,
    pub actor: String,
    pub host: String,
    /// RFC 3339 time the lease lapses unless renewed.
    pub expires: String,
    /// Held by this machine's actor.
    pub mine: bool,
}

/// Compute the rows for every stream of `plan`. `prd` is the main PRD when it could be read.
pub fn collect(ws: &Workspace, plan: &Plan, prd: Option<&Prd>) -> Result<Vec<StreamRow>> {
    collect_with(ws, plan, prd, crate::worktree::dirty::Early::none())
}

/// [`collect`], with the file system monitor's hook perhaps started `early`.
pub fn collect_with(
    ws: &Workspace,
    plan: &Plan,
    prd: Option<&Prd>,
    mut early: crate::worktree::dirty::Early,
) -> Result<Vec<StreamRow>> {
    // Where the plan puts each stream's worktree, when the folder exists: their dirty checks (and
    // the file system monitor's hook) run on other threads while this one reads the state.
    let planned: Vec<Option<std::path::PathBuf>> = {
        let dir = ws.worktree_dir(plan).ok();
        plan.streams.iter().map(|s| dir.as_ref().map(|d| d.join(&s.name)).filter(|p| p.exists())).collect()
    };
    let planned_here: Vec<std::path::PathBuf> = planned.iter().flatten().cloned().collect();
    let (rows, early_dirty) = crate::worktree::dirty::dirty_many_meanwhile(&ws.repo, &planned_here, &mut early, || {
        rows(ws, plan, prd, &planned)
    });
    let mut rows = match rows {
        Ok(rows) => rows,
        Err(e) => {
            early.finish();
            return Err(e);
        }
    };
    let mut early_dirty: std::collections::HashMap<std::path::PathBuf, Result<bool>> =
        planned_here.into_iter().zip(early_dirty).collect();
    // Worktrees found elsewhere (moved, then repaired) are checked now.
    let _span = crate::trace::span("status: dirty checks of worktrees outside the plan's folder");
    let mut late: Vec<(usize, std::path::PathBuf)> = Vec::new();
    for (i, row) in rows.iter_mut().enumerate() {
        let Some(w) = row.worktree.as_ref().map(std::path::PathBuf::from) else { continue };
        match early_dirty.remove(&w) {
            Some(dirty) => row.dirty = dirty.ok(),
            None => late.push((i, w)),
        }
    }
    if !late.is_empty() {
        // The file system monitor asked for the others (or started ahead) serves these too.
        let paths: Vec<std::path::PathBuf> = late.iter().map(|(_, p)| p.clone()).collect();
        let results = crate::worktree::dirty::dirty_many_with(&ws.repo, &paths, &mut early);
        for ((i, _), dirty) in late.into_iter().zip(results) {
            rows[i].dirty = dirty.ok();
        }
    }
    early.finish();
    Ok(rows)
}

/// The rows without their `dirty` field; `planned` holds where the plan puts each stream's
/// worktree (same order as the plan's streams), when it exists.
fn rows(
    ws: &Workspace,
    plan: &Plan,
    prd: Option<&Prd>,
    planned: &[Option<std::path::PathBuf>],
) -> Result<Vec<StreamRow>> {
    let _span = crate::trace::span("status: state, stories, ahead/behind of every stream");
    let store = Store::new(&ws.repo)?;
    let done = ws.recorded_done()?;
    let mut rows = Vec::with_capacity(plan.streams.len());
    let base_tip = ws.repo.branch_tip(&plan.settings.base_branch)?;
    let me = store.known_actor().unwrap_or_default();
    let claims: Vec<(String, String, crate::sync::claim::Claim)> =
        crate::sync::claim::seen(&ws.repo)?.into_iter().filter(|(_, _, c)| !c.expired()).collect();
    // RUNNING is true only while a `stream run` holds the stream's lock on this machine.
    let held: std::collections::HashSet<String> = crate::lock::holders(&ws.repo).into_iter().map(|(n, _)| n).collect();
    let standing_in = ws.repo.work_dir.as_deref().map(crate::git::absolute);
    // What each stream spent, from the states read below (every stream's when a budget of the
    // plan's counts them all).
    let mut spends = Vec::new();
    for (stream, planned) in plan.streams.iter().zip(planned) {
        // Invalid state (e.g. garbage pushed by others) shows as INVALID, not as a failed dashboard.
        let mut invalid = false;
        let st = store.read::<StreamState>(&state::stream_ref(&stream.name)).unwrap_or_else(|e| {
            eprintln!("warning: {}", e.message);
            invalid = true;
            None
        });
        let boulder = store.read::<BoulderState>(&state::boulder_ref(&stream.name)).unwrap_or_else(|e| {
            eprintln!("warning: {}", e.message);
            None
        });
        let progress = progress_of(ws, plan, stream, prd, &done)?;
        // Where the plan puts the worktree, else where git has the branch checked out (a worktree
        // moved with `git worktree move`, or moved by hand and repaired, is not stale).
        let wt = planned.clone().or_else(|| {
            st.as_ref()
                .filter(|e| e.state.status.is_live())
                .and_then(|_| crate::worktree::checked_out(&ws.repo, &stream.branch).ok().flatten())
        });
        // A worktree is expected only on the machine that initialized the stream.
        let here = st.as_ref().is_none_or(|e| e.state.initialized_by.as_ref().is_none_or(|a| *a == me));
        let lock_held = held.contains(&format!("stream-{}", stream.name));
        let recorded = st.as_ref().map(|e| e.state.status).unwrap_or_default();
        let mut status = first_status(st.as_ref().map(|e| &e.state), invalid, here, lock_held);
        // All stories done is COMPLETED (ready to merge), whoever finished them.
        if progress.total > 0
            && progress.done == progress.total
            && matches!(
                status,
                RowStatus::Recorded(StreamStatus::Initialized | StreamStatus::Stopped | StreamStatus::Failed)
                    | RowStatus::Interrupted
            )
        {
            status = RowStatus::Recorded(StreamStatus::Completed);
        }
        let expected_here = match status {
            RowStatus::Recorded(s) => s.is_live(),
            RowStatus::SetupFailed | RowStatus::Interrupted => true,
            RowStatus::Review | RowStatus::ChangesRequested | RowStatus::Approved => true,
            RowStatus::Invalid | RowStatus::Stale | RowStatus::NeedsAttention | RowStatus::BudgetSpent => false,
        };
        if !invalid && wt.is_none() && here && expected_here {
            status = RowStatus::Stale;
        }
        // A refused landing nothing has changed since outranks all but MERGED and INVALID.
        let attention = match st.as_ref() {
            Some(e) if !invalid && recorded != StreamStatus::Merged => {
                crate::stream::attention::standing(&ws.repo, stream, &e.state)?.map(|r| Attention::of(&stream.name, r))
            }
            _ => None,
        };
        if attention.is_some() {
            status = RowStatus::NeedsAttention;
        }
        let tip = ws.repo.branch_tip(&stream.branch)?;
        // COMPLETED, waiting to land, says where its review stands when one is required.
        if let (RowStatus::Recorded(StreamStatus::Completed), Some(e)) = (status, st.as_ref()) {
            status = review_status(plan, &stream.name, &e.state, tip).unwrap_or(status);
        }
        if let Some(e) = st.as_ref().filter(|e| !e.state.spend.is_empty()) {
            spends.push((stream.name.clone(), e.state.spend.clone()));
        }
        let (ahead, behind) = match (tip, base_tip) {
            (Some(tip), Some(base)) => {
                let (a, b) = crate::worktree::ahead_behind(&ws.repo, tip, base)?;
                (Some(a), Some(b))
            }
            _ => (None, None),
        };
        let current = match (&wt, &standing_in) {
            (Some(w), Some(h)) => crate::git::absolute(w) == *h,
            _ => false,
        };
        rows.push(StreamRow {
            name: stream.name.clone(),
            status,
            branch: stream.branch.clone(),
            progress,
            iteration: boulder.as_ref().map(|b| b.state.iteration).unwrap_or(0),
            last_activity: boulder.and_then(|b| b.state.last_activity),
            worktree: wt.map(|p| p.display().to_string()),
            ahead,
            behind,
            dirty: None,
            current,
            attention,
            adhoc: stream.adhoc,
            spend: None,
            claim: claims.iter().find(|(_, s, _)| *s == stream.name).map(|(remote, _, c)| ClaimView {
                remote: remote.clone(),
                actor: c.actor.clone(),
                host: c.host.clone(),
                expires: c.expires.clone(),
                mine: c.actor == me,
            }),
        });
    }
    add_spend(ws, plan, spends, &mut rows);
    Ok(rows)
}

/// Stories done and assigned: by the PRD when it could be read, else by `prd done` records.
fn progress_of(
    ws: &Workspace,
    plan: &Plan,
    stream: &crate::plan::StreamDef,
    prd: Option<&Prd>,
    done: &std::collections::BTreeSet<String>,
) -> Result<Progress> {
    let total = stream.stories.len();
    Ok(match prd {
        Some(prd) => Progress { done: ws.stream_done(plan, stream, prd, done)?, total },
        None => Progress { done: stream.stories.iter().filter(|id| done.contains(*id)).count(), total },
    })
}

/// The status its state gives a row before the stories, the review and the budget are looked
/// at: what it recorded, or INVALID, INTERRUPTED, SETUP_FAILED.
fn first_status(st: Option<&StreamState>, invalid: bool, here: bool, lock_held: bool) -> RowStatus {
    let recorded = st.map(|s| s.status).unwrap_or_default();
    if invalid {
        RowStatus::Invalid
    } else if recorded == StreamStatus::Running && here && !lock_held {
        // Recorded RUNNING by a run on this machine that no longer holds the lock: killed.
        RowStatus::Interrupted
    } else if recorded == StreamStatus::Initialized && st.is_some_and(|s| s.setup_failed.is_some()) {
        // Initialized, but its setup command failed: the worktree is kept, not ready.
        RowStatus::SetupFailed
    } else {
        RowStatus::Recorded(recorded)
    }
}

/// Each row's spend and budget, and BUDGET_SPENT where a spent budget stops the stream; nothing
/// when no stream spent anything and no budget is set. A price in git config that cannot be read
/// is said, and the dashboard shown without spend.
fn add_spend(ws: &Workspace, plan: &Plan, spends: Vec<(String, crate::state::Spend)>, rows: &mut [StreamRow]) {
    let ledger = match plan.settings.budget.is_set() {
        // The plan's budget counts streams gone from the plan too.
        true => crate::spend::Ledger::read(ws, plan),
        false => crate::spend::Ledger::of(ws, plan, spends),
    };
    let ledger = match ledger {
        Ok(l) if l.shown(plan) => l,
        Ok(_) => return,
        Err(e) => return eprintln!("warning: {}", crate::text::inert_lines(&e.message)),
    };
    for row in rows {
        row.spend = ledger.view(plan, &row.name);
        if row.spend.as_ref().is_some_and(|v| v.spent.is_some()) && budget_stops(row.status) {
            row.status = RowStatus::BudgetSpent;
        }
    }
}

/// Whether a spent budget is what the dashboard shows for a stream of this status: one that
/// would run another iteration (a running one ends its current iteration first; a complete one
/// can still land, which spends nothing).
fn budget_stops(status: RowStatus) -> bool {
    matches!(
        status,
        RowStatus::Recorded(
            StreamStatus::Defined | StreamStatus::Initialized | StreamStatus::Stopped | StreamStatus::Failed
        ) | RowStatus::Interrupted
    )
}

/// The review status of a COMPLETED stream at `tip`, the tip of its branch here (`None`: no
/// review required). Without the branch here, no approval can be checked: REVIEW.
fn review_status(plan: &Plan, name: &str, st: &StreamState, tip: Option<crate::git::ObjectId>) -> Option<RowStatus> {
    use crate::review::Verdict;
    let Some(tip) = tip else { return crate::stream::gate::required(plan, name).then_some(RowStatus::Review) };
    match crate::review::verdict(plan, name, st, tip, crate::review::author_actor(st)) {
        Verdict::NotRequired => None,
        Verdict::Waiting { .. } => Some(RowStatus::Review),
        Verdict::ChangesRequested { .. } => Some(RowStatus::ChangesRequested),
        Verdict::Approved { .. } => Some(RowStatus::Approved),
    }
}

/// `main is 2 commit(s) ahead of origin/main: push main to share it (…)` when the base branch
/// holds commits its upstream (`branch.<base>.remote`/`.merge`) lacks — after a local merge, the
/// work is not shared until the base is pushed.
pub fn push_hint(ws: &Workspace, plan: &Plan) -> Result<Option<String>> {
    let base = &plan.settings.base_branch;
    let Some(remote) = ws.repo.config_string(&format!("branch.{base}.remote")) else { return Ok(None) };
    let merge = ws.repo.config_string(&format!("branch.{base}.merge")).unwrap_or_else(|| refs::branch_ref(base));
    let short = merge.strip_prefix(refs::HEADS).unwrap_or(&merge).to_string();
    let tracking = refs::remote_branch_ref(&remote, &short);
    let (Some(tip), Some(up)) = (ws.repo.branch_tip(base)?, ws.repo.ref_id(&tracking)?) else { return Ok(None) };
    let (ahead, _) = crate::worktree::ahead_behind(&ws.repo, tip, up)?;
    if ahead == 0 {
        return Ok(None);
    }
    // Pushed by name when the upstream branch has the same name, else name both.
    let spec = if short == *base { base.clone() } else { format!("{base}:{short}") };
    Ok(Some(format!(
        "{base} is {ahead} commit(s) ahead of {remote}/{short}: push {base} to share it (`git push {} {spec}`)",
        crate::text::inert(&remote)
    )))
}

/// "12s ago", "5m ago", "3h ago", "2d ago" for an RFC 3339 time; "-" when none.
pub fn ago(at: Option<&str>) -> String {
    let Some(secs) = at.and_then(crate::time::parse_rfc3339) else { return "-".into() };
    let d = (crate::time::now_secs() - secs).max(0.0) as u64;
    match d {
        0..=59 => format!("{d}s ago"),
        60..=3599 => format!("{}m ago", d / 60),
        3600..=86399 => format!("{}h ago", d / 3600),
        _ => format!("{}d ago", d / 86400),
    }
}

/// Where each stream stands in the fleet's queue, for the rows of `rows` (same order), as the
/// worker ([`crate::worker`]) decides: `merged`; `needs attention` (a refused landing: no
/// worker takes it), `failed` (no running worker takes it again; a new `work` retries it),
/// `invalid` (its state cannot be read); `running`; `claimed` (another machine holds it);
/// `after a, b` (its depends_on not merged yet); `review` (complete, its approvals missing);
/// `merge #k` (complete, or APPROVED, k-th to land in dependency order) or `ready #k` (k-th to be
/// picked in dependency order; CHANGES_REQUESTED goes back to its agent).
pub fn queue(plan: &Plan, rows: &[StreamRow]) -> Vec<String> {
    let names: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    let order = crate::plan::topo_order(plan, &names).unwrap_or(names);
    let status = |name: &str| rows.iter().find(|r| r.name == name).map(|r| r.status);
    let merged = |name: &str| status(name) == Some(RowStatus::Recorded(StreamStatus::Merged));
    let (mut ready, mut merging) = (0, 0);
    let mut at: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
    for name in &order {
        let Some(row) = rows.iter().find(|r| r.name == *name) else { continue };
        let deps: Vec<&str> = plan
            .stream(name)
            .map(|s| s.depends_on.iter().map(String::as_str).filter(|d| !merged(d)).collect())
            .unwrap_or_default();
        let pos = match row.status {
            RowStatus::Recorded(StreamStatus::Merged) => "merged".to_string(),
            RowStatus::NeedsAttention => "needs attention".to_string(),
            RowStatus::BudgetSpent => "budget spent".to_string(),
            RowStatus::Recorded(StreamStatus::Failed) => "failed".to_string(),
            RowStatus::Invalid => "invalid".to_string(),
            RowStatus::Recorded(StreamStatus::Running) => "running".to_string(),
            _ if row.claim.as_ref().is_some_and(|c| !c.mine) => "claimed".to_string(),
            _ if !deps.is_empty() => format!("after {}", deps.join(", ")),
            RowStatus::Review => "review".to_string(),
            RowStatus::Recorded(StreamStatus::Completed) | RowStatus::Approved => {
                merging += 1;
                format!("merge #{merging}")
            }
            _ => {
                ready += 1;
                format!("ready #{ready}")
            }
        };
        at.insert(name.as_str(), pos);
    }
    rows.iter().map(|r| at.remove(r.name.as_str()).unwrap_or_else(|| "-".into())).collect()
}

/// A cheap fingerprint of what the dashboard shows: every ref under `refs/boulder/`,
/// `refs/boulder-remotes/` and `refs/heads/` with its value, and the locks held here. When it
/// changes, the dashboard is computed again.
pub fn fingerprint(ws: &Workspace) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for prefix in [refs::BOULDER, refs::REMOTES, refs::HEADS, "refs/notes/"] {
        for (name, id) in refs::list(&ws.repo, prefix)? {
            out.push((name, id.to_string()));
        }
    }
    for (name, holder) in crate::lock::holders(&ws.repo) {
        out.push((format!("lock:{name}"), holder.pid.to_string()));
    }
    out.sort();
    Ok(out)
}
