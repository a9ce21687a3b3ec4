//! `stream resolve`: a landing that met a conflict with what landed first, handed back to the
//! stream's agent (`settings.on_conflict: agent`, which `git boulder work` follows). The stream's
//! branch is rebased onto the base's tip (the remote's, with a remote) in the stream's own
//! worktree with git's own `git rebase`; where it stops on conflicts, the agent is run with a
//! task naming the conflicting files and the streams whose landings changed them ([`task`]).
//! The PRD is settled here story by story, as a merge settles it, never handed to the agent.
//! When no file is left unmerged and no conflict marker is left, the rebase goes on; an agent
//! that leaves conflicts `max_failures` times in a row ends it: the rebase is aborted, the
//! branch is back where it was, and the refusal stands.
//!
//! Killed at any point, the rebase stays in progress in the worktree (as git's own does); the
//! same command run again picks it up where it stopped.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::{Error, Result};
use crate::git::cli::{self, RebaseStep};
use crate::git::{refs, ObjectId};
use crate::plan::{Plan, StreamDef};
use crate::workspace::Workspace;

/// How a resolve runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Rebase onto this remote's base (fetched first); `None`: the local base.
    pub remote: Option<String>,
    /// The agent command and its arguments; empty: the stream's `agent` from the plan.
    pub command: Vec<String>,
    /// Agent runs in a row that leave conflicts before giving up.
    pub max_failures: u32,
}

/// How it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The branch already holds the base's tip: nothing to rebase.
    UpToDate { onto: ObjectId },
    /// Rebased onto `onto`; `stops` times a conflict was met, `agent_runs` times the agent ran.
    Rebased { onto: ObjectId, tip: ObjectId, stops: u32, agent_runs: u32 },
}

/// One file left unmerged by a stopped rebase, with what it was changed by on the base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflicted {
    pub path: String,
    /// Streams whose landed commits changed it on the base since the stream forked.
    pub streams: Vec<String>,
    /// Some commits that changed it were recorded for no stream.
    pub unrecorded: bool,
}

/// The task the agent is given (its `BOULDER_PROMPT`) when the rebase stops: exact text,
/// documented in docs/fleet.md.
pub fn task(
    stream: &str,
    branch: &str,
    base: &str,
    onto_name: &str,
    onto: ObjectId,
    at: &str,
    files: &[Conflicted],
) -> String {
    let mut t = format!(
        "Landing stream {stream} on {base} conflicts with what landed there first.\n\n\
         git-boulder is rebasing the stream's branch {branch} onto {onto_name} ({}) in this worktree, and the \
         rebase stopped at {at} with conflicts in these files:\n",
        crate::git::id::short(onto)
    );
    for f in files {
        let mut by: Vec<String> = f.streams.iter().map(|s| format!("stream {s}")).collect();
        if f.unrecorded || by.is_empty() {
            by.push("commits no stream recorded".into());
        }
        t.push_str(&format!("  - {} (changed on {base} by {})\n", f.path, by.join(", ")));
    }
    t.push_str(
        "\nResolve every conflict: edit each of these files so that it keeps what both sides meant, remove \
         every conflict marker (<<<<<<<, =======, >>>>>>>), and stage the file with `git add`. Do not commit, \
         do not run `git rebase --continue`, `--skip` or `--abort`, and change no other file: git-boulder \
         continues the rebase once no file is left unmerged, and lands the stream again when it is done.\n",
    );
    t
}

/// Rebase `stream` onto its base's tip in its worktree, handing each stop to its agent.
pub fn resolve(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    opts: &Options,
    say: &dyn Fn(&str),
) -> Result<Resolved> {
    if opts.command.is_empty() {
        if let Some(agent) = &stream.agent {
            crate::trust::require(&ws.repo, plan, "stream resolve", &[crate::trust::agent_key(agent)])?;
        }
    }
    let command = crate::stream::shell::agent_command(plan, stream, &opts.command, "stream resolve")?;
    let _lock = crate::lock::acquire(&ws.repo, &format!("stream-{}", stream.name), true, "stream resolve")?;
    let wt = ws.worktree_path(plan, &stream.name)?;
    if !wt.join(".git").exists() {
        return Err(Error::usage(format!("stream {} has no worktree at {}", stream.name, wt.display()))
            .hint(format!("create it with `git boulder stream init {}`", stream.name)));
    }
    let base = &plan.settings.base_branch;
    let (onto, onto_name) = onto(ws, plan, opts.remote.as_deref())?;
    let mut stops = 0u32;
    let mut agent_runs = 0u32;
    if !cli::rebase_in_progress(&wt) {
        let tip = ws.repo.branch_tip(&stream.branch)?.ok_or_else(|| {
            Error::usage(format!("stream {} has no branch {} yet", stream.name, stream.branch))
                .hint(format!("create it with `git boulder stream init {}`", stream.name))
        })?;
        if ws.repo.objects().is_ancestor(onto, tip)? {
            return Ok(Resolved::UpToDate { onto });
        }
        let dirty = cli::status_lines(&wt)?;
        if !dirty.is_empty() {
            return Err(Error::refused(format!(
                "stream {}'s worktree has uncommitted changes ({} path(s)), so it cannot be rebased",
                stream.name,
                dirty.len()
            ))
            .hint(format!("commit or stash them in {}, then run the same command again", wt.display())));
        }
        say(&format!("rebasing {} onto {onto_name} ({})", stream.branch, crate::git::id::short(onto)));
        if cli::rebase(&wt, Some(&onto.to_string()))? == RebaseStep::Finished {
            return finished(ws, stream, &wt, onto, stops, agent_runs);
        }
    } else {
        say(&format!("a rebase of {} is stopped in its worktree: going on with it", stream.branch));
    }
    // The rebase stopped: settle the PRD, hand the rest to the agent, continue; until it is done.
    let fork = ws.repo.objects().merge_base(onto, ws.repo.branch_tip(&stream.branch)?.unwrap_or(onto));
    let mut failures = 0u32;
    loop {
        if !cli::rebase_in_progress(&wt) {
            return finished(ws, stream, &wt, onto, stops, agent_runs);
        }
        settle_prd(ws, plan, &wt)?;
        let left = unmerged_paths(&wt)?;
        let marked = with_markers(&wt, &left_or_touched(&wt, &left)?)?;
        if left.is_empty() && marked.is_empty() {
            failures = 0;
            match cli::rebase(&wt, None)? {
                RebaseStep::Finished => continue,
                RebaseStep::Stopped(_) => {
                    if !unmerged_paths(&wt)?.is_empty() {
                        stops += 1;
                    }
                    continue;
                }
            }
        }
        if agent_runs > 0 {
            failures += 1;
            if failures >= opts.max_failures.max(1) {
                cli::rebase_abort(&wt)?;
                let mut files: Vec<String> = left.iter().chain(&marked).cloned().collect();
                files.dedup();
                return Err(Error::refused(format!(
                    "the agent left conflicts in {} after {failures} run(s); the rebase was aborted and {} is as it was",
                    files.join(", "),
                    stream.branch
                ))
                .hint(format!(
                    "resolve it by hand: `git rebase {onto_name}` in {}, then `git boulder stream merge {}`",
                    wt.display(),
                    stream.name
                )));
            }
        }
        if agent_runs == 0 {
            stops += 1;
        }
        let files: Vec<String> = {
            let mut all: BTreeSet<String> = left.iter().cloned().collect();
            all.extend(marked.iter().cloned());
            all.into_iter().collect()
        };
        let conflicted = landed_by(ws, fork, onto, &files)?;
        let at = stopped_at(ws, &wt);
        let prompt = task(&stream.name, &stream.branch, base, &onto_name, onto, &at, &conflicted);
        say(&format!("conflicts in {}: running the agent to resolve them", files.join(", ")));
        agent_runs += 1;
        run_agent(ws, plan, stream, &command, &wt, &prompt, &files)?;
    }
}

/// Does `stream`'s branch conflict with the base's tip — the remote's as the merge queue last
/// fetched it (`remote_key`), else the local base's? What `git boulder work` asks after a refused
/// landing under `on_conflict: agent`: only a conflict is handed to the agent. Checked in memory,
/// changing nothing.
pub fn conflicts(ws: &Workspace, plan: &Plan, stream: &StreamDef, remote_key: Option<&str>) -> Result<bool> {
    let base = &plan.settings.base_branch;
    let base_tip = match remote_key {
        Some(key) => ws.repo.ref_id(&refs::queue_ref(key, base))?,
        None => ws.repo.branch_tip(base)?,
    };
    let (Some(base_tip), Some(tip)) = (base_tip, ws.repo.branch_tip(&stream.branch)?) else { return Ok(false) };
    let mem = ws.repo.in_memory();
    let who = crate::git::identity::rewrite_committer(&ws.repo);
    let replayed = super::replay::replay(&mem, base_tip, tip, Some(&plan.prd), &who)?;
    Ok(!replayed.conflicts.is_empty())
}

/// The base tip to rebase onto, and how to name it: the remote's base (fetched into the merge
/// queue's private ref, as the queue fetches it), else the local base.
fn onto(ws: &Workspace, plan: &Plan, remote: Option<&str>) -> Result<(ObjectId, String)> {
    let base = &plan.settings.base_branch;
    match remote {
        Some(r) => {
            let r = crate::sync::resolve(&ws.repo, Some(r), base)?;
            let spec = format!("+{}:{}", refs::branch_ref(base), refs::queue_ref(&r.key, base));
            let fetched = crate::git::remote::fetch(&ws.repo, &r.given, &[spec])?;
            let tip = fetched.first().map(|f| f.id).ok_or_else(|| {
                Error::usage(format!("the remote {} has no branch {base}", r.given))
                    .hint(format!("push it there first: git push {} {base}", r.given))
            })?;
            Ok((tip, format!("{}'s {base}", r.given)))
        }
        None => {
            let tip = ws.repo.branch_tip(base)?.ok_or_else(|| {
                Error::usage(format!("the base branch {base:?} does not exist"))
                    .hint("set settings.base_branch in .boulder/streams.yaml to an existing branch")
            })?;
            Ok((tip, base.clone()))
        }
    }
}

/// The rebase is over: the branch must hold `onto`, and the worktree be clean.
fn finished(
    ws: &Workspace,
    stream: &StreamDef,
    wt: &Path,
    onto: ObjectId,
    stops: u32,
    agent_runs: u32,
) -> Result<Resolved> {
    let tip = ws.repo.branch_tip(&stream.branch)?.ok_or_else(|| {
        Error::internal(format!("stream {}'s branch {} is gone after the rebase", stream.name, stream.branch))
    })?;
    if !ws.repo.objects().is_ancestor(onto, tip)? {
        return Err(Error::refused(format!(
            "the rebase of {} ended without the base's tip {} (was it aborted?)",
            stream.branch,
            crate::git::id::short(onto)
        ))
        .hint(format!("run `git boulder stream resolve {}` again", stream.name)));
    }
    let dirty = cli::status_lines(wt)?;
    if !dirty.is_empty() {
        return Err(Error::refused(format!(
            "the rebase of {} is done, but the worktree has uncommitted changes ({} path(s))",
            stream.branch,
            dirty.len()
        ))
        .hint(format!("commit or remove them in {}, then merge again", wt.display())));
    }
    Ok(Resolved::Rebased { onto, tip, stops, agent_runs })
}

/// The distinct paths the index holds unmerged.
fn unmerged_paths(wt: &Path) -> Result<Vec<String>> {
    let mut paths: Vec<String> = cli::unmerged(wt)?.into_iter().map(|(_, _, p)| p).collect();
    paths.dedup();
    Ok(paths)
}

/// The files to look for leftover markers in: those unmerged, else those the stopped commit's
/// resolution stages (the index against HEAD).
fn left_or_touched(wt: &Path, left: &[String]) -> Result<Vec<String>> {
    if !left.is_empty() {
        return Ok(left.to_vec());
    }
    Ok(cli::status_lines(wt)?
        .into_iter()
        .filter(|l| l.len() > 3 && !l.starts_with("??"))
        .map(|l| l[3..].to_string())
        .collect())
}

/// Of `paths`, those whose worktree file still holds a conflict marker: a line starting with
/// seven `<` or `>` and a space, or a line of exactly seven `=` (git's markers).
pub fn with_markers(wt: &Path, paths: &[String]) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for p in paths {
        let Ok(bytes) = std::fs::read(wt.join(p)) else { continue };
        if has_markers(&bytes) {
            found.push(p.clone());
        }
    }
    Ok(found)
}

/// Does `text` hold a conflict marker line?
pub fn has_markers(text: &[u8]) -> bool {
    text.split(|b| *b == b'\n').any(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        line.starts_with(b"<<<<<<< ") || line.starts_with(b">>>>>>> ") || line == b"=======" || line == b"<<<<<<<"
    })
}

/// Settle an unmerged PRD story by story, as a merge does: the text of the base's side with every
/// story done on either side marked done. Left to the agent when the commit being replayed
/// changed more of the PRD than status marks.
fn settle_prd(ws: &Workspace, plan: &Plan, wt: &Path) -> Result<()> {
    let stages: Vec<(u8, String, String)> = cli::unmerged(wt)?.into_iter().filter(|(_, _, p)| *p == plan.prd).collect();
    let blob = |n: u8| -> Option<String> {
        let (_, id, _) = stages.iter().find(|(s, _, _)| *s == n)?;
        let id = ObjectId::from_hex(id.as_bytes()).ok()?;
        String::from_utf8(ws.repo.objects().read(id).ok()?).ok()
    };
    let (Some(ancestor), Some(ours), Some(theirs)) = (blob(1), blob(2), blob(3)) else { return Ok(()) };
    let name = plan.prd.rsplit('/').next().unwrap_or(&plan.prd);
    // Only status marks changed on the replayed side: the base's text, with its stories' marks.
    if super::prd::normalize(name, &ancestor, &theirs).as_deref() != Some(ancestor.as_str()) {
        return Ok(());
    }
    let settled = super::prd::resolve(name, &ours, &ancestor, &ours, &theirs);
    crate::fsutil::write_atomic(&wt.join(&plan.prd), settled.as_bytes())?;
    cli::add_path(wt, &plan.prd)
}

/// For each of `paths`, the streams whose commits on the base since `fork` changed it (from the
/// notes the landings carried over to the commits they replayed).
fn landed_by(ws: &Workspace, fork: Option<ObjectId>, onto: ObjectId, paths: &[String]) -> Result<Vec<Conflicted>> {
    let objects = ws.repo.objects();
    let mut out: Vec<Conflicted> =
        paths.iter().map(|p| Conflicted { path: p.clone(), streams: Vec::new(), unrecorded: false }).collect();
    let walk = objects.walk([onto], fork).map_err(|e| Error::internal(format!("cannot walk {onto}: {e}")))?;
    for info in walk.take(10_000) {
        let Ok(info) = info else { break };
        let parents = objects.parents(info.id).unwrap_or_default();
        let Some(parent) = parents.first().copied() else { continue };
        let (tree, ptree) = (objects.tree_of(info.id)?, objects.tree_of(parent)?);
        for c in out.iter_mut() {
            let now = objects.blob_at(tree, &c.path)?.map(|(id, _)| id);
            let before = objects.blob_at(ptree, &c.path)?.map(|(id, _)| id);
            if now == before {
                continue;
            }
            let streams: Vec<String> = crate::git::notes::read(&ws.repo, info.id)
                .and_then(|n| crate::git::notes::Note::parse(&n).ok())
                .unwrap_or_default()
                .into_iter()
                .map(|n| n.stream)
                .collect();
            if streams.is_empty() {
                c.unrecorded = true;
            }
            for s in streams {
                if !c.streams.contains(&s) {
                    c.streams.push(s);
                }
            }
        }
    }
    Ok(out)
}

/// The commit the rebase stopped at, as `SHORT "subject"` (git's `rebase-merge/stopped-sha`).
fn stopped_at(ws: &Workspace, wt: &Path) -> String {
    let admin = crate::git::worktree::dot_git_target(wt).unwrap_or_else(|| wt.join(".git"));
    let id = crate::git::worktree::read_trimmed(&admin.join("rebase-merge").join("stopped-sha"))
        .and_then(|s| ObjectId::from_hex(s.trim().as_bytes()).ok());
    match id {
        Some(id) => {
            let subject = ws.repo.objects().commit_info(id).map(|c| c.subject).unwrap_or_default();
            format!("the stream's commit {} \"{}\"", crate::git::id::short(id), crate::text::inert(&subject))
        }
        None => "one of the stream's commits".into(),
    }
}

fn run_agent(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    command: &[String],
    wt: &Path,
    prompt: &str,
    files: &[String],
) -> Result<()> {
    let conflicts = std::ffi::OsString::from(files.join("\n"));
    crate::stream::shell::run_agent(ws, plan, &stream.name, command, wt, prompt, &[("BOULDER_CONFLICTS", &conflicts)])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_git_conflict_lines_only() {
        assert!(has_markers(b"a\n<<<<<<< HEAD\nx\n=======\ny\n>>>>>>> b\n"));
        assert!(has_markers(b"=======\r\n"));
        assert!(!has_markers(b"a ======= b\n<<<<<<<<x\n== heading ==\n"));
        assert!(!has_markers(b""));
    }

    #[test]
    fn the_task_names_each_file_and_who_changed_it() {
        let files = vec![
            Conflicted { path: "src/a.rs".into(), streams: vec!["auth".into()], unrecorded: false },
            Conflicted { path: "README.md".into(), streams: vec![], unrecorded: true },
        ];
        let t = task(
            "api",
            "boulder/api",
            "main",
            "origin's main",
            crate::git::id::parse(&"0".repeat(40)).unwrap(),
            "x",
            &files,
        );
        assert!(t.contains("  - src/a.rs (changed on main by stream auth)\n"), "{t}");
        assert!(t.contains("  - README.md (changed on main by commits no stream recorded)\n"), "{t}");
        assert!(t.starts_with("Landing stream api on main conflicts"), "{t}");
    }
}
