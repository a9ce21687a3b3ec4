//! `doctor`: what is out of step between git, git-boulder's state and this machine — worktrees
//! git knows that state does not (and the reverse), hooks, refs that fail validation, held locks,
//! lock files git left behind — each with the command that fixes it.

use serde::Serialize;

use crate::error::Result;
use crate::git::refs;
use crate::state::{self, BoulderState, PrdState, Store, StreamState, StreamStatus};
use crate::workspace::Workspace;

/// One problem and its fix.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// `worktree`, `state`, `plan`, `hooks`, `agent`, `activity`, `work`, `ref`, `lock`, `merge`,
    /// `claim` or `spend`.
    pub area: &'static str,
    pub message: String,
    /// The command (or action) that fixes it.
    pub fix: String,
}

/// Look at everything; an empty list means all is well.
pub fn examine(ws: &Workspace) -> Result<Vec<Problem>> {
    let mut problems = Vec::new();
    let store = Store::new(&ws.repo)?;
    let plan = match ws.plan() {
        Ok(plan) => Some(plan),
        Err(e) => {
            plan_problem(ws, &store, &e, &mut problems)?;
            None
        }
    };

    invalid_refs(&store, &mut problems)?;
    interrupted_merges(ws, &mut problems);
    if let Some(plan) = &plan {
        worktrees(ws, plan, &store, &mut problems)?;
        unrecorded_reverts(ws, plan, &store, &mut problems)?;
    }

    // Hooks.
    for h in crate::hooks::status(&ws.repo)? {
        if let Some((message, fix)) = h.problem() {
            problems.push(Problem { area: "hooks", message, fix });
        }
    }

    // Agent harness integrations: a worktree missing its file, our entries gone or stale.
    for (message, fix) in crate::harness::install::problems(&ws.repo)? {
        problems.push(Problem { area: "agent", message, fix });
    }

    // Usage the agent hooks could not count (a transcript missing, cut, not JSON, absurd).
    spend_reads(ws, &mut problems);

    // Stream commits without a note: made where the hooks did not run.
    if let Some(plan) = &plan {
        activity(ws, plan, &mut problems)?;
        work(ws, plan, &store, &mut problems)?;
    }

    let held = crate::lock::holders(&ws.repo);
    if let Some(plan) = &plan {
        interrupted_runs(plan, &store, &held, &mut problems);
    }

    claims(ws, &store, &held, &mut problems)?;

    // Held locks (a running worker's is not a problem).
    for (name, holder) in held.into_iter().filter(|(n, _)| !n.starts_with(crate::worker::WORKER_LOCK)) {
        problems.push(Problem {
            area: "lock",
            message: format!("lock {name} is held by {}", holder.describe()),
            fix: format!("wait for pid {} to finish (the lock is released when it exits)", holder.pid),
        });
    }

    // A worktree's admin folder a killed creation left without its gitdir file.
    for admin in crate::git::worktree::unfinished(&ws.repo) {
        problems.push(Problem {
            area: "worktree",
            message: format!(
                "{} was left half made (it has no gitdir file: a worktree creation was killed); git \
                 lists it as prunable",
                admin.display()
            ),
            fix: "git worktree prune".into(),
        });
    }

    // git's own lock files left by a killed process: every later write that needs them fails.
    for l in crate::git::lockfiles::stale(&ws.repo) {
        problems.push(Problem {
            area: "lock",
            message: format!(
                "{} was left behind {} ago (a git or git-boulder process was killed while writing); git \
                 refuses to write what it guards until it is gone",
                l.path.display(),
                age(l.age)
            ),
            fix: format!("if no git process is running, remove {}", l.path.display()),
        });
    }
    Ok(problems)
}

/// What the agent hooks' last reads of usage skipped, this machine's (see
/// [`crate::agent::usage::note`]): those entries are not in the ledger.
fn spend_reads(ws: &Workspace, problems: &mut Vec<Problem>) {
    let notes = crate::agent::usage::notes(ws);
    if notes.is_empty() {
        return;
    }
    let file = ws.repo.boulder_dir().join(crate::agent::usage::NOTES);
    for n in notes {
        problems.push(Problem {
            area: "spend",
            message: match &n.failed {
                Some(why) => format!("{} at {}: {why} ({})", n.what, n.at, n.from),
                None => format!(
                    "{} at {}: {} ({}); what was skipped is not counted",
                    n.what,
                    n.at,
                    n.skipped.describe(),
                    n.from
                ),
            },
            fix: format!(
                "record what is missing with `git boulder spend add`; the report goes when a later read of it skips nothing, or remove {}",
                file.display()
            ),
        });
    }
}

/// The plan cannot be read: one that does not parse is a problem; a missing one is, when the
/// state records streams (deleted, or outside a sparse checkout's cone — git removes files there).
fn plan_problem(ws: &Workspace, store: &Store, e: &crate::error::Error, problems: &mut Vec<Problem>) -> Result<()> {
    if ws.plan_text().is_ok() {
        problems.push(Problem {
            area: "plan",
            message: format!("the stream plan cannot be used: {}", crate::text::inert(&e.message)),
            fix: "fix .boulder/streams.yaml, then run `git boulder stream validate`".into(),
        });
        return Ok(());
    }
    let streams: Vec<String> = store
        .list(state::STREAMS)?
        .into_iter()
        .filter_map(|(name, _)| name.strip_prefix(state::STREAMS).map(str::to_owned))
        .collect();
    if streams.is_empty() {
        return Ok(());
    }
    let sparse = ws.repo.sparse_checkout();
    let why = if sparse { ", and this worktree is a sparse checkout: .boulder/ may be outside its cone" } else { "" };
    problems.push(Problem {
        area: "plan",
        message: format!(
            "{} is missing, but the state records {} stream(s) ({}){why}",
            crate::plan::PLAN_PATH,
            streams.len(),
            streams.iter().take(10).map(|s| crate::text::inert(s).into_owned()).collect::<Vec<_>>().join(", ")
        ),
        fix: if sparse {
            "git sparse-checkout add .boulder   (or restore it: git checkout HEAD -- .boulder/streams.yaml)".into()
        } else {
            "git checkout HEAD -- .boulder/streams.yaml   (or pass --config PATH)".into()
        },
    });
    Ok(())
}

/// A lock's age, coarse: `42s`, `5m`, `3h`, `2d`.
fn age(d: std::time::Duration) -> String {
    match d.as_secs() {
        s @ 0..120 => format!("{s}s"),
        s @ 120..7200 => format!("{}m", s / 60),
        s @ 7200..172800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Refs under refs/boulder/ that fail validation.
fn invalid_refs(store: &Store, problems: &mut Vec<Problem>) -> Result<()> {
    for (name, tip) in store.list(refs::BOULDER)? {
        let checked = if name.starts_with(state::STREAMS) {
            store.validate_chain::<StreamState>(tip)
        } else if name.starts_with(state::BOULDERS) {
            store.validate_chain::<BoulderState>(tip)
        } else if name == state::PRD_REF {
            store.validate_chain::<PrdState>(tip)
        } else {
            Ok(())
        };
        if let Err(why) = checked {
            problems.push(Problem {
                area: "ref",
                message: format!("{name} fails validation: {why}"),
                fix: format!("git update-ref -d {name}   (after saving it: git branch rescue {tip})"),
            });
        }
    }
    Ok(())
}

/// Merges and unmerges interrupted part-way (their record is still there), each with the exact
/// command that finishes it.
fn interrupted_merges(ws: &Workspace, problems: &mut Vec<Problem>) {
    let merges = ws.repo.boulder_dir().join("merge");
    if let Ok(entries) = std::fs::read_dir(&merges) {
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_owned))
            .collect();
        names.sort();
        for name in names {
            let record = crate::merge::journal::Journal::load(&ws.repo, &name);
            let (into, fix) = match record {
                Ok(Some(j)) => match j.remote {
                    Some(r) => {
                        let into = format!(" into {} on {r}", j.base_branch);
                        (into, format!("git boulder stream merge {name} --remote {r}"))
                    }
                    None => {
                        (format!(" into {}", j.base_branch), format!("git boulder stream merge {name} --no-remote"))
                    }
                },
                Ok(None) => continue,
                Err(e) => {
                    problems.push(Problem { area: "merge", message: e.message, fix: e.hints.join("; ") });
                    continue;
                }
            };
            problems.push(Problem {
                area: "merge",
                message: format!("an interrupted merge of stream {name}{into} is waiting to be finished"),
                fix,
            });
        }
    }
    for name in crate::merge::unmerge::Journal::pending(&ws.repo) {
        match crate::merge::unmerge::Journal::load(&ws.repo, &name) {
            Ok(Some(j)) => {
                let from = match &j.remote {
                    Some(r) => format!("{} on {r}", j.base_branch),
                    None => j.base_branch.clone(),
                };
                problems.push(Problem {
                    area: "merge",
                    message: format!(
                        "an interrupted unmerge of stream {name} from {from} is waiting to be finished (state \
                         records the stream MERGED until it is)"
                    ),
                    fix: j.command(),
                });
            }
            Ok(None) => {}
            Err(e) => problems.push(Problem { area: "merge", message: e.message, fix: e.hints.join("; ") }),
        }
    }
}

/// Commits looked at per base ref when looking for an unrecorded revert (those after the landing).
const REVERT_WALK: usize = 10_000;

/// A stream recorded MERGED whose revert (made by `stream unmerge`, recognised by its message
/// naming the merge) is on the base here or on a remote's base as last fetched: an unmerge that
/// was not recorded (killed, or made on another machine that did not push its state).
fn unrecorded_reverts(
    ws: &Workspace,
    plan: &crate::plan::Plan,
    store: &Store,
    problems: &mut Vec<Problem>,
) -> Result<()> {
    let repo = &ws.repo;
    let base = &plan.settings.base_branch;
    let pending = crate::merge::unmerge::Journal::pending(repo);
    // Where a base lives: (ref, the remote it stands for, if any); the remotes' first, whose fix
    // records the unmerge where every machine sees it.
    let mut bases: Vec<(String, Option<String>)> = Vec::new();
    for (name, _) in refs::list(repo, "refs/remotes/")? {
        if let Some((remote, _)) = name
            .strip_prefix("refs/remotes/")
            .and_then(|rest| rest.split_once('/'))
            .filter(|(_, b)| *b == base.as_str())
        {
            bases.push((name.clone(), Some(remote.to_string())));
        }
    }
    for (name, _) in refs::list(repo, refs::QUEUE)? {
        if let Some(key) = name.strip_prefix(refs::QUEUE).and_then(|rest| rest.strip_suffix(&format!("/heads/{base}")))
        {
            if !bases.iter().any(|(_, r)| r.as_deref() == Some(key)) {
                bases.push((name.clone(), Some(key.to_string())));
            }
        }
    }
    bases.push((refs::branch_ref(base), None));
    // Each base read once (its newest commits), then every MERGED stream looked for in it.
    let mut found: Vec<(String, Option<String>, Vec<crate::merge::unmerge::Revert>)> = Vec::new();
    for (name, remote) in bases {
        if let Some(tip) = repo.ref_id(&name)? {
            found.push((name, remote, crate::merge::unmerge::reverts(repo, tip, REVERT_WALK)));
        }
    }
    if found.iter().all(|(_, _, r)| r.is_empty()) {
        return Ok(());
    }
    for stream in &plan.streams {
        if pending.contains(&stream.name) {
            continue;
        }
        let Some(e) = store.read::<StreamState>(&state::stream_ref(&stream.name)).ok().flatten() else { continue };
        if e.state.status != StreamStatus::Merged {
            continue;
        }
        let id = |s: &Option<String>| s.as_deref().and_then(|h| crate::git::ObjectId::from_hex(h.as_bytes()).ok());
        let (Some(before), Some(landed)) = (id(&e.state.merged_base), id(&e.state.merged_landed)) else { continue };
        let hit = found.iter().find_map(|(name, remote, reverts)| {
            Some((name, remote, reverts.iter().find(|r| r.of(&stream.name, before, landed))?))
        });
        let Some((name, remote, revert)) = hit else { continue };
        let fix = match remote {
            Some(r) => format!("git boulder stream unmerge {} --remote {r}", stream.name),
            None => format!("git boulder stream unmerge {} --no-remote", stream.name),
        };
        problems.push(Problem {
            area: "merge",
            message: format!(
                "stream {} is recorded MERGED, but {name} holds its revert {} (an unmerge that was not \
                 recorded): workers skip it as landed",
                stream.name,
                &revert.id.to_string()[..12]
            ),
            fix: format!("{fix}   (it records the unmerge; the revert is not made again)"),
        });
    }
    Ok(())
}

/// Claims as last seen on the remotes (`git boulder pull`/`work` fetch them): invalid ones (an
/// expiry beyond any lease, which workers treat as expired), and this machine's own unexpired
/// ones that no live worker or run here holds — their worker is gone. What can be known: a claim
/// records its actor and host, not its process; while any worker runs here, none is said dead.
fn claims(
    ws: &Workspace,
    store: &Store,
    held: &[(String, crate::lock::Holder)],
    problems: &mut Vec<Problem>,
) -> Result<()> {
    let me = store.known_actor();
    let host = crate::git::identity::hostname();
    let worker_alive = held.iter().any(|(n, _)| n.starts_with(crate::worker::WORKER_LOCK));
    for (remote, stream, c) in crate::sync::claim::seen(&ws.repo)? {
        if let Some(why) = c.invalid() {
            problems.push(Problem {
                area: "claim",
                message: format!(
                    "the claim on stream {stream} seen on {remote} (held by {} on {}, until {}) is invalid: {why}; \
                     workers treat it as expired",
                    c.actor, c.host, c.expires
                ),
                fix: format!("git boulder stream release {stream} --remote {remote} --force"),
            });
            continue;
        }
        let mine = me.as_deref() == Some(c.actor.as_str()) && c.host == host;
        let running = held.iter().any(|(n, _)| *n == format!("stream-{stream}"));
        if mine && !c.expired() && !worker_alive && !running {
            problems.push(Problem {
                area: "claim",
                message: format!(
                    "stream {stream} is claimed on {remote} by this machine ({} on {}, until {}), but no worker \
                     or run here holds it: its worker is gone (other machines wait until it expires)",
                    c.actor, c.host, c.expires
                ),
                fix: format!(
                    "git boulder work --remote {remote}   (takes it up again), or git boulder stream release {stream} \
                     --remote {remote}"
                ),
            });
        }
    }
    Ok(())
}

/// Worktrees: what git knows under worktree_dir against what state records, and leftovers.
fn worktrees(ws: &Workspace, plan: &crate::plan::Plan, store: &Store, problems: &mut Vec<Problem>) -> Result<()> {
    let known = crate::worktree::list(&ws.repo)?;
    let actor = store.known_actor();
    for stream in &plan.streams {
        let Ok(path) = ws.worktree_path(plan, &stream.name) else { continue };
        let git_has = known.iter().find(|w| w.path == path);
        let elsewhere =
            known.iter().find(|w| !w.missing && w.path != path && w.branch.as_deref() == Some(stream.branch.as_str()));
        // A linked worktree's folder holds a `.git` file; git does not list it here when the
        // links between the two are broken (the repository or the folder was moved).
        let folder_here = path.join(".git").is_file();
        // An invalid ref is reported above; read it here as "nothing recorded".
        let entry = store.read::<StreamState>(&state::stream_ref(&stream.name)).ok().flatten();
        // A worktree is expected only on the machine that initialized the stream.
        let here =
            entry.as_ref().is_none_or(|e| e.state.initialized_by.as_ref().is_none_or(|a| Some(a) == actor.as_ref()));
        let recorded = entry.map(|e| e.state.status);
        let live = recorded.is_some_and(StreamStatus::is_live);
        match (git_has, elsewhere) {
            (Some(w), _) if !w.missing && !live && recorded != Some(StreamStatus::Merged) => problems.push(Problem {
                area: "state",
                message: format!(
                    "stream {}: git has its worktree at {} but state records {}",
                    stream.name,
                    path.display(),
                    recorded.map_or("nothing", StreamStatus::as_str)
                ),
                fix: format!("git boulder stream init {}", stream.name),
            }),
            (Some(w), _) if !w.missing => {}
            (_, Some(w)) => problems.push(Problem {
                area: "worktree",
                message: format!(
                    "stream {}: its worktree was moved to {}; git-boulder expects it at {}",
                    stream.name,
                    w.path.display(),
                    path.display()
                ),
                fix: format!("git worktree move {} {}", w.path.display(), path.display()),
            }),
            _ if folder_here => problems.push(Problem {
                area: "worktree",
                message: format!(
                    "stream {}: the worktree {} is there but git does not know it at that path (the \
                     repository or the worktree was moved)",
                    stream.name,
                    path.display()
                ),
                fix: format!("git worktree repair {}", path.display()),
            }),
            (Some(_), None) => problems.push(Problem {
                area: "worktree",
                message: format!(
                    "stream {}: git knows a worktree at {} but the folder is gone",
                    stream.name,
                    path.display()
                ),
                fix: format!(
                    "git worktree repair NEW_PATH if you moved it by hand; else git boulder stream cleanup --stale \
                     (or git boulder stream init {})",
                    stream.name
                ),
            }),
            (None, None) if live && here => problems.push(Problem {
                area: "worktree",
                message: format!(
                    "stream {}: state records it {} but git has no worktree at {}",
                    stream.name,
                    recorded.map_or("nothing", StreamStatus::as_str),
                    path.display()
                ),
                fix: format!("git boulder stream init {}   (or git boulder stream cleanup --stale)", stream.name),
            }),
            _ => {}
        }
    }
    leftovers(ws, plan, store, &known, problems)
}

/// Runs recorded RUNNING on this machine whose process is gone (the stream lock is free).
fn interrupted_runs(
    plan: &crate::plan::Plan,
    store: &Store,
    held: &[(String, crate::lock::Holder)],
    problems: &mut Vec<Problem>,
) {
    let actor = store.known_actor();
    for stream in &plan.streams {
        let Some(e) = store.read::<StreamState>(&state::stream_ref(&stream.name)).ok().flatten() else { continue };
        let mine = e.state.initialized_by.as_ref().is_none_or(|a| Some(a) == actor.as_ref());
        let running = held.iter().any(|(n, _)| *n == format!("stream-{}", stream.name));
        if e.state.status == StreamStatus::Running && mine && !running {
            problems.push(Problem {
                area: "state",
                message: format!(
                    "stream {} is recorded RUNNING, but no `stream run` holds its lock: the run was interrupted",
                    stream.name
                ),
                fix: match &stream.agent {
                    Some(_) => format!("git boulder stream run {}", stream.name),
                    None => format!("git boulder stream run {} -- CMD…", stream.name),
                },
            });
        }
    }
}

/// Each stream's commits (base..branch, at most [`crate::boulder::record::DOCTOR_WALK`] looked at) that have
/// no note on refs/notes/boulder: the hooks did not record them.
fn activity(ws: &Workspace, plan: &crate::plan::Plan, problems: &mut Vec<Problem>) -> Result<()> {
    let mut noted = crate::git::notes::Noted::new(&ws.repo)?;
    for stream in &plan.streams {
        let (missing, cut) = crate::boulder::record::unrecorded(
            ws,
            plan,
            stream,
            &mut noted,
            Some(crate::boulder::record::DOCTOR_WALK),
        )?;
        if missing.is_empty() {
            continue;
        }
        let (count, oldest) = match cut {
            true => (format!("at least {}", missing.len()), "the oldest of those looked at"),
            false => (missing.len().to_string(), "the oldest"),
        };
        problems.push(Problem {
            area: "activity",
            message: format!(
                "stream {}: {count} commit(s) of {} are not recorded (made where the hooks did not run: hooks \
                 missing, or git-boulder not on the PATH of the tool that committed); {oldest} is {}",
                stream.name,
                stream.branch,
                missing[0].to_hex_with_len(12)
            ),
            fix: format!("git boulder record --stream {}", stream.name),
        });
    }
    Ok(())
}

/// The work of each stream that is nowhere it should be (DESIGN §14): commits recorded for it
/// (notes, from any machine pulled) that are neither on its branch nor in the base, with the
/// machine that recorded them; and commits on a MERGED stream's branch made after its landing.
fn work(ws: &Workspace, plan: &crate::plan::Plan, store: &Store, problems: &mut Vec<Problem>) -> Result<()> {
    let repo = &ws.repo;
    let base = &plan.settings.base_branch;
    let Some(base_tip) = repo.branch_tip(base)? else { return Ok(()) };
    let remote = crate::git::remote::default_remote(repo, base).unwrap_or_else(|_| "REMOTE".into());
    for stream in &plan.streams {
        let tip = repo.branch_tip(&stream.branch)?;
        let (name, branch) = (&stream.name, &stream.branch);
        let stranded = crate::merge::recorded::stranded(repo, name, tip, base_tip)?;
        if !stranded.is_empty() {
            let list: Vec<String> = stranded.iter().take(10).map(|m| format!("    {}", m.line())).collect();
            let more =
                if stranded.len() > 10 { format!("\n    …and {} more", stranded.len() - 10) } else { String::new() };
            let here = stranded.iter().all(|m| m.subject.is_some());
            let fix = if here {
                let ids: Vec<String> = stranded.iter().map(|m| crate::merge::short(m.commit)).collect();
                format!(
                    "put them back on {branch}: cd \"$(git boulder stream path {name})\" && git cherry-pick {} (or set them aside with `git boulder stream rollback`)",
                    ids.join(" ")
                )
            } else {
                format!(
                    "on the machine that recorded them: git push {remote} {branch}; then here: cd \"$(git boulder stream path {name})\" && git pull --rebase {remote} {branch}"
                )
            };
            problems.push(Problem {
                area: "work",
                message: format!(
                    "stream {name}: {} commit(s) recorded for it are neither on {branch} nor in {base}:\n{}{more}",
                    stranded.len(),
                    list.join("\n")
                ),
                fix,
            });
        }
        let Some(tip) = tip else { continue };
        // A state ref that does not read is reported above, as invalid.
        let Some(st) = store.read::<StreamState>(&state::stream_ref(name)).ok().flatten() else { continue };
        if st.state.status != StreamStatus::Merged {
            continue;
        }
        let landed: Vec<crate::git::ObjectId> =
            [&st.state.merged_tip, &st.state.merged_landed, &st.state.merged_commit]
                .into_iter()
                .filter_map(|c| c.as_deref().and_then(|c| c.parse().ok()))
                .collect();
        let after = crate::merge::recorded::after_landing(repo, tip, base_tip, &landed)?;
        if !after.is_empty() {
            let list: Vec<String> = after
                .iter()
                .take(10)
                .map(|(c, s)| format!("    {}  {}", crate::merge::short(*c), crate::text::inert(s)))
                .collect();
            let more = if after.len() > 10 { format!("\n    …and {} more", after.len() - 10) } else { String::new() };
            problems.push(Problem {
                area: "work",
                message: format!(
                    "stream {name} is recorded MERGED, but {branch} has {} commit(s) made after its landing that {base} lacks:\n{}{more}",
                    after.len(),
                    list.join("\n")
                ),
                fix: format!(
                    "land them: git boulder stream merge {name} (a stream with commits after its landing merges again)"
                ),
            });
        }
    }
    Ok(())
}

/// What remains of a stream the plan no longer has.
#[derive(Default)]
struct Leftover {
    state_ref: Option<(String, StreamStatus)>,
    branch: Option<String>,
    worktrees: Vec<std::path::PathBuf>,
}

/// Streams renamed or removed from the plan whose state ref (recording a live stream), branch
/// (`boulder/<name>`, or the branch its state records) or worktree remain; and worktrees under
/// worktree_dir that belong to no stream.
fn leftovers(
    ws: &Workspace,
    plan: &crate::plan::Plan,
    store: &Store,
    known: &[crate::worktree::WorktreeInfo],
    problems: &mut Vec<Problem>,
) -> Result<()> {
    let mut left: std::collections::BTreeMap<String, Leftover> = Default::default();
    let planned_branch = |b: &str| plan.streams.iter().any(|s| s.branch == b) || b == plan.settings.base_branch;
    for (refname, _) in store.list(state::STREAMS)? {
        let Some(name) = refname.strip_prefix(state::STREAMS) else { continue };
        if plan.stream(name).is_some() {
            continue;
        }
        let Some(entry) = store.read::<StreamState>(&refname).ok().flatten() else { continue };
        let st = entry.state;
        if let Some(b) = st.branch.as_deref().filter(|b| !planned_branch(b)) {
            if ws.repo.branch_tip(b)?.is_some() {
                left.entry(name.to_string()).or_default().branch = Some(b.to_string());
            }
        }
        if st.status.is_live() {
            left.entry(name.to_string()).or_default().state_ref = Some((refname.clone(), st.status));
        }
    }
    for (refname, _) in store.list(&refs::branch_ref("boulder/"))? {
        let Some(branch) = refname.strip_prefix(refs::HEADS) else { continue };
        let Some(name) = branch.strip_prefix("boulder/") else { continue };
        if planned_branch(branch) || left.values().any(|l| l.branch.as_deref() == Some(branch)) {
            continue;
        }
        left.entry(name.to_string()).or_default().branch = Some(branch.to_string());
    }
    let root = ws.root().ok().map(|r| r.join(&plan.settings.worktree_dir));
    for w in known {
        let named = plan.streams.iter().any(|s| {
            ws.worktree_path(plan, &s.name).is_ok_and(|p| p == w.path) || w.branch.as_deref() == Some(s.branch.as_str())
        });
        if named {
            continue;
        }
        let owner = left.iter_mut().find(|(name, l)| {
            (w.branch.is_some() && w.branch == l.branch)
                || (root.as_ref().is_some_and(|r| w.path == r.join(name.as_str())))
        });
        if let Some((_, l)) = owner {
            l.worktrees.push(w.path.clone());
            continue;
        }
        if root.as_ref().is_some_and(|r| w.path.starts_with(r)) {
            problems.push(Problem {
                area: "worktree",
                message: format!(
                    "{} is a worktree under {} that no stream of the plan names",
                    w.path.display(),
                    plan.settings.worktree_dir
                ),
                fix: format!("git worktree remove {}", w.path.display()),
            });
        }
    }
    for (name, l) in left {
        let mut what = Vec::new();
        let mut fix = Vec::new();
        for p in &l.worktrees {
            what.push(format!("worktree {}", p.display()));
            fix.push(format!("git worktree remove {}", p.display()));
        }
        if let Some(b) = &l.branch {
            what.push(format!("branch {b}"));
            fix.push(format!("git branch -d {b}"));
        }
        if let Some((r, status)) = &l.state_ref {
            what.push(format!("state ref {r} (recording it {status})"));
            fix.push(format!("git update-ref -d {r}"));
        }
        problems.push(Problem {
            area: "plan",
            message: format!(
                "stream {name} is not in the plan (renamed or removed), but its {} remain{}",
                what.join(", "),
                if what.len() == 1 { "s" } else { "" }
            ),
            fix: format!("add it back to {}, or remove what is left: {}", crate::plan::PLAN_PATH, fix.join(" && ")),
        });
    }
    Ok(())
}
