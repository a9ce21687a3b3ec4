//! The hook bodies, called by the shims as `git-boulder hook NAME ARGS…`. Post hooks never fail
//! the git command: an internal error prints one warning line. The hot path returns early (not a
//! stream branch, a rebase or cherry-pick in progress) before reading anything it does not need.
//!
//! ### Performance
//! post-commit runs on every commit: it opens the repository once ([`Repo::discover_once`]), reads the
//! plan only to learn whose branch HEAD is on (parsed once per text of the plan,
//! [`Workspace::plan_branches`]), reads the tips the last record wrote from its pack
//! held in memory ([`Repo::reading_newest_pack`]), and writes what it must — the op of the boulder
//! and each ancestor (two blobs, a tree, a commit, a ref each) and the note (a blob, the notes
//! tree, a commit, a ref), never resolving the committer through gix (see
//! [`crate::git::notes::write`]). Those objects are new by construction and go straight to disk as
//! stored loose objects, with no compressor to set up and nothing asked of the store first
//! (`git::objects::Loose`). pre-push walks the pushed commits once and diffs each against
//! its parent once ([`Repo::changed_paths`]), checked against one compiled glob set.

use std::io::Read;

use super::ownership::{check_paths, report, Violation};
use crate::error::{Error, Result};
use crate::git::notes::{self, Note};
use crate::git::{refs, ObjectId, Repo};
use crate::plan::{Level, Plan, StreamDef};
use crate::state::{self, BoulderOp, BoulderState, Opt, Store};
use crate::workspace::Workspace;

/// Run hook `name`; the exit code to give git.
pub fn run(name: &str, args: &[String]) -> Result<i32> {
    if matches!(name, "post-commit" | "post-rewrite") {
        // Ctrl-C reaches the whole process group, this hook with the git command that runs it
        // (and a `stream run` passes it on to its agent's). git removes its own lock files on a
        // signal; the ref and notes locks this hook holds for a moment would stay and block every
        // later ref update. Its commits are made: the hook, milliseconds long, finishes first.
        finish_when_interrupted();
    }
    let outcome = match name {
        "post-commit" => post_commit().map(|_| 0),
        "post-rewrite" => post_rewrite(args).map(|_| 0),
        "pre-push" => pre_push(args),
        "pre-commit" => pre_commit(),
        other => {
            return Err(Error::usage(format!("unknown hook {other:?}"))
                .hint("hooks are post-commit, post-rewrite, pre-push and pre-commit"))
        }
    };
    match outcome {
        Ok(code) => Ok(code),
        Err(e) => {
            // Never break the user's git command over an internal problem.
            eprintln!("git-boulder {name} hook: {} (git continues)", crate::text::inert_lines(&e.message));
            Ok(0)
        }
    }
}

/// Ignore SIGINT, SIGTERM and SIGHUP for the rest of this process. Setting a disposition starts
/// no thread and runs nothing on a signal, where a handler (`ctrlc`) starts a thread to run it —
/// a tenth of a millisecond of every commit.
fn finish_when_interrupted() {
    #[cfg(unix)]
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: `SIG_IGN` installs no handler, so no code of ours runs at a signal; `signal`
        // only changes the disposition the kernel keeps for this process.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
    #[cfg(not(unix))]
    let _ = ctrlc::set_handler(|| {});
}

/// Whether git is replaying commits it will report to post-rewrite (a rebase) or applying
/// patches (am): their commits are not new work. A cherry-pick or revert makes new commits (git
/// reports no rewrite and `notes.rewriteRef` does not apply), so it is not replaying.
fn replaying(repo: &Repo) -> bool {
    let g = &repo.git_dir;
    ["rebase-merge", "rebase-apply"].iter().any(|p| g.join(p).exists())
        || std::env::var("GIT_REFLOG_ACTION").is_ok_and(|a| a.starts_with("rebase") || a.starts_with("am"))
}

/// Whether `commit` was just made by `git commit --amend`: HEAD's newest reflog entry says so.
/// git runs post-commit for an amend too, but the commit replaces one already recorded (and
/// post-rewrite carries its note), so it is no new iteration.
fn amended(repo: &Repo, commit: ObjectId) -> bool {
    matches!(repo.head_reflog_newest(), Some((id, message)) if id == commit && message.starts_with("commit (amend)"))
}

/// The plan in force and the stream whose branch HEAD is on, if any.
fn stream_of_head(ws: &Workspace) -> Result<Option<(Plan, String)>> {
    let Some(branch) = ws.repo.head_branch() else { return Ok(None) };
    let plan = ws.plan()?;
    let name = plan.stream_for_branch(&branch).map(|s| s.name.clone());
    Ok(name.map(|n| (plan, n)))
}

/// The boulder this worktree's commits count for: `$GIT_DIR/boulder-current` when set (by
/// `git boulder switch`), else the stream's root boulder.
pub fn current_boulder(repo: &Repo, stream: &str) -> String {
    std::fs::read_to_string(repo.git_dir.join("boulder-current"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| crate::names::problem(s).is_none())
        .unwrap_or_else(|| stream.to_string())
}

/// The id of the project boulder: the one boulder of a repository without a plan, and of the main
/// worktree of one with a plan. `_project` when the plan has a stream named `project` (whose root
/// boulder is `project`).
pub fn project_id(plan: Option<&crate::plan::Plan>) -> &'static str {
    project_id_beside(plan.is_some_and(|p| p.stream(PROJECT).is_some()))
}

/// [`project_id`], given whether the plan has a stream named `project`.
fn project_id_beside(project_stream: bool) -> &'static str {
    if project_stream {
        "_project"
    } else {
        PROJECT
    }
}

/// The project boulder's id when no stream of the plan is named so.
pub const PROJECT: &str = "project";

fn post_commit() -> Result<()> {
    let repo = Repo::discover_once()?;
    crate::failpoint::hit("hook-opened");
    if replaying(&repo) {
        return Ok(());
    }
    // HEAD's branch and the commit just made on it, from one read of HEAD and the branch.
    let Some((branch, head_id)) = repo.head_branch_and_id() else { return Ok(()) };
    let ws = Workspace::from_repo(repo, None);
    // No plan is no stream (the project boulder's repository); a plan that does not parse is an
    // error. Only the streams' branches are needed, parsed once per text of the plan.
    let branches = ws.plan_branches()?;
    let mut stream = branches.as_ref().and_then(|b| b.stream_for_branch(&branch)).map(str::to_string);
    // Else an ad-hoc stream's branch (`boulder/<name>`, state, not the plan): one op-log read.
    if let (None, Some(b), Some(name)) = (&stream, &branches, branch.strip_prefix("boulder/")) {
        let taken = |n: &str, br: &str| b.has_stream(n) || b.stream_for_branch(br).is_some();
        stream = ws.adhoc_stream(&Store::new(&ws.repo)?, name, taken).map(|s| s.name);
    }
    // Outside a stream, only the main worktree's commits count: for the project boulder.
    if stream.is_none() && ws.repo.git_dir != ws.repo.common_dir {
        return Ok(());
    }
    let head = match head_id {
        Some(id) => id,
        None => ws.repo.ref_id("HEAD")?.ok_or_else(|| Error::internal("HEAD has no commit"))?,
    };
    if amended(&ws.repo, head) {
        return Ok(());
    }
    // A packed-refs.lock a killed writer left blocks every update of a ref (gix takes it for
    // each): said at once, where waiting for it with each retry held every commit seconds.
    if let Some(lock) = refs::packed_lock_path(&ws.repo, false) {
        return Err(Error::refused(format!(
            "cannot record this commit: {} was left behind (a git or git-boulder process was killed while \
             writing refs); if no git process is running, remove it, then `git boulder record` in this worktree \
             records the commits made meanwhile",
            lock.display()
        )));
    }
    let Some(stream) = stream else {
        return project_activity(&ws, branches.as_ref().is_some_and(|b| b.has_stream(PROJECT)), head);
    };
    let store = Store::new(&ws.repo)?;
    let story = std::env::var("BOULDER_STORY").ok().filter(|s| !s.is_empty());
    let boulder = current_boulder(&ws.repo, &stream);
    let rec = RecordedCommit { stream, boulder, commit: head, story, at: crate::time::now_rfc3339() };
    record_commit(&ws.repo, &store, &rec)
}

/// A commit in the main worktree, off any stream: activity of the boulder `switch` made current
/// there, else of the project boulder — once it exists (`check`, `checkpoint`, `todo`, `resume`
/// or a harness hook made it). No note: the commit is no stream's work.
fn project_activity(ws: &Workspace, project_stream: bool, head: ObjectId) -> Result<()> {
    let id = std::fs::read_to_string(ws.repo.git_dir.join("boulder-current"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| crate::names::problem(s).is_none())
        .unwrap_or_else(|| project_id_beside(project_stream).to_string());
    let store = Store::new(&ws.repo)?;
    let story = std::env::var("BOULDER_STORY").ok().filter(|s| !s.is_empty());
    let activity =
        BoulderOp::Activity { commit: head.into(), story: story.into(), at: Opt::Set(crate::time::now_rfc3339()) };
    store.append_if::<BoulderState>(&state::boulder_ref(&id), |cur| Ok(cur.map(|_| activity.clone())))?;
    Ok(())
}

/// A commit recorded as work of a stream: what post-commit (or `git boulder record`) knows of
/// it, carried whole from the hook to the op-logs and the note ([`record_commit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCommit {
    /// The stream whose branch it is on.
    pub stream: String,
    /// The boulder it counts for (and each of its ancestors).
    pub boulder: String,
    pub commit: ObjectId,
    /// The story it was for (`BOULDER_STORY`), when said.
    pub story: Option<String>,
    /// The commit's time: now for the hook, the committer time for `git boulder record`.
    pub at: String,
}

/// The machine a note names as the one that recorded its commit: this one's actor id and host.
pub fn recorder(store: &Store) -> (Option<String>, Option<String>) {
    (store.known_actor(), Some(crate::git::identity::hostname()))
}

impl RecordedCommit {
    /// The activity op each boulder it counts for records.
    pub fn activity(&self) -> BoulderOp {
        BoulderOp::Activity {
            commit: self.commit.into(),
            story: self.story.clone().into(),
            at: Opt::Set(self.at.clone()),
        }
    }

    /// The op that makes the stream's root boulder, on its first recorded commit.
    fn root_created(&self) -> BoulderOp {
        BoulderOp::Created {
            id: Opt::Absent,
            stream: Opt::Set(self.stream.clone()),
            parent: Opt::Absent,
            depth: Opt::Set(0),
        }
    }

    /// The note of the commit, once its boulder is at `iteration`, recorded by the machine of
    /// `store`.
    pub fn note(&self, iteration: u64, store: &Store) -> Note {
        let (actor, host) = recorder(store);
        Note {
            actor,
            at: Some(self.at.clone()),
            boulder: Some(self.boulder.clone()),
            host,
            iteration: Some(iteration),
            set_aside: None,
            story: self.story.clone(),
            stream: self.stream.clone(),
        }
    }
}

/// Record a commit as work of its stream, as post-commit does: an activity op on its boulder
/// and each of the boulder's ancestors (a stream's root boulder is made on first use), then the
/// commit's note `{stream, boulder, story, iteration, at}`. An activity op for a commit already
/// counted changes nothing, so recording twice counts once.
///
/// Every op and the note are planned on the current tips first, and all their objects written
/// as one pack ([`crate::git::objects::Batch`]): two files, where loose objects would be seven
/// or more, each maybe in a fan-out folder of its own. Then each ref moves by one
/// compare-and-swap; a ref that moved meanwhile (another worktree's hook) is appended to again
/// the usual way, from the boulder where it happened, with retries.
pub fn record_commit(repo: &Repo, store: &Store, rec: &RecordedCommit) -> Result<()> {
    let batch = repo.batch();
    if !batch.packs() {
        return record_from(repo, store, rec, rec.boulder.clone(), None);
    }
    let activity = rec.activity();
    // Read through a handle that holds the newest small pack in memory: the tips the last record
    // wrote are there, where the object store would look last.
    let reader = repo.reading_newest_pack();
    let repo_read = reader.as_ref().unwrap_or(repo);
    let store_read = Store::with_actor(repo_read, store.actor()?);
    let in_memory = repo_read.objects_in_memory();
    // (boulder, its ref, the tip planned on, the entry planned)
    let mut planned = Vec::new();
    let mut id = Some(rec.boulder.clone());
    let mut seen = std::collections::HashSet::new();
    while let Some(b) = id.take() {
        if !seen.insert(b.clone()) {
            break;
        }
        let refname = state::boulder_ref(&b);
        let tip = store_read.read::<BoulderState>(&refname)?;
        let expected = tip.as_ref().map(|e| e.commit);
        let entry = match tip {
            Some(tip) => store_read.plan_append(&refname, Some(&tip), activity.clone(), &batch)?,
            // A root boulder made on first use.
            None if b == rec.stream => {
                let created = store_read.plan_append::<BoulderState>(&refname, None, rec.root_created(), &batch)?;
                store_read.plan_append(&refname, Some(&created), activity.clone(), &batch)?
            }
            None => break,
        };
        id = entry.state.parent.clone();
        planned.push((b, refname, expected, entry));
    }
    // The iteration that counted the commit: a commit recorded again (its op appended, its note
    // not, by a run that was stopped between them) keeps the one it had.
    let commit = rec.commit.to_string();
    let iteration = planned.first().map_or(0, |(_, _, _, e)| e.state.iteration_of(&commit));
    let note = rec.note(iteration, store);
    let note_plan = notes::plan(repo_read, rec.commit, &note, &batch)?;
    // Every object planned went into the batch; one written through the reading handle would be
    // in its memory only, and no ref may name it.
    if repo_read.objects_in_memory() != in_memory {
        return Err(Error::internal("an object meant for the repository was kept in memory; nothing was recorded"));
    }
    drop(store_read);
    drop(reader);
    batch.flush()?;
    crate::failpoint::hit("record-packed");
    for (i, (b, refname, expected, entry)) in planned.iter().enumerate() {
        if !store.swap(refname, *expected, entry)? {
            return record_from(repo, store, rec, b.clone(), (i > 0).then_some(iteration));
        }
    }
    match note_plan {
        Some(plan) if notes::apply(repo, &plan)? => {}
        _ => notes::write(repo, rec.commit, &note)?,
    }
    batch.settle();
    repo.roll_up_packs(false);
    Ok(())
}

/// [`record_commit`] the usual way, from the boulder `start` up (each op-log append a
/// compare-and-swap retried on a lost race), then the note; the iteration the note gives is
/// `iteration`, or, when `None`, the one `start` reaches.
fn record_from(repo: &Repo, store: &Store, rec: &RecordedCommit, start: String, iteration: Option<u64>) -> Result<()> {
    let activity = rec.activity();
    // The commit counts for the current boulder and each of its ancestors.
    let mut id = Some(start);
    let mut iteration = iteration;
    let commit = rec.commit.to_string();
    let mut seen = std::collections::HashSet::new();
    while let Some(b) = id.take() {
        if !seen.insert(b.clone()) {
            break;
        }
        let mut created = false;
        let e = store.append_if::<BoulderState>(&state::boulder_ref(&b), |cur| {
            created = cur.is_none();
            Ok(Some(match cur {
                Some(_) => activity.clone(),
                // A root boulder made on first use.
                None if b == rec.stream => rec.root_created(),
                None => return Ok(None),
            }))
        })?;
        let e = match e {
            Some(_) if created => store.append::<BoulderState>(&state::boulder_ref(&b), activity.clone())?,
            Some(e) => e,
            None => break,
        };
        iteration.get_or_insert(e.state.iteration_of(&commit));
        id = e.state.parent.clone();
    }
    notes::write(repo, rec.commit, &rec.note(iteration.unwrap_or(0), store))
}

fn post_rewrite(args: &[String]) -> Result<()> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let _kind = args.first();
    let repo = Repo::discover()?;
    let mut pairs = Vec::new();
    for line in input.lines() {
        let mut parts = line.split_whitespace();
        let (Some(old), Some(new)) = (parts.next(), parts.next()) else { continue };
        let (Ok(old), Ok(new)) = (ObjectId::from_hex(old.as_bytes()), ObjectId::from_hex(new.as_bytes())) else {
            continue;
        };
        pairs.push((old, new));
    }
    notes::carry(&repo, &pairs)?;
    Ok(())
}

fn pre_push(args: &[String]) -> Result<i32> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let remote = args.first().cloned().unwrap_or_default();
    let repo = match Repo::discover_once() {
        Ok(repo) => repo,
        Err(e) => return unreadable_pre_push(e),
    };
    let ws = Workspace::from_repo(repo, None);
    let mut plan: Option<Plan> = None;
    let mut code = 0;
    for line in input.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [local_ref, local_sha, remote_ref, remote_sha] = parts[..] else { continue };
        // Deleting a remote branch pushes no commits.
        if local_sha.chars().all(|c| c == '0') {
            continue;
        }
        let local_branch = local_ref.strip_prefix(refs::HEADS);
        let remote_branch = remote_ref.strip_prefix(refs::HEADS);
        if plan.is_none() {
            plan = Some(ws.plan()?);
        }
        let plan = plan.as_ref().expect("loaded above");
        if plan.settings.ownership == Level::Off {
            return Ok(0);
        }
        // What is pushed, a commit (a tag is peeled; a tree or blob pushes no commits).
        let Ok(object) = ObjectId::from_hex(local_sha.as_bytes()) else { continue };
        let Some(tip) = ws.repo.objects().peel_to_commit(object) else { continue };
        // Whose commits these are, by what is pushed rather than by the remote ref's name: the
        // local stream branch pushed (`boulder/x:other`), else the streams whose branch holds the
        // pushed commit (`HEAD:refs/for/main`, a raw id), else the stream branch it updates.
        let candidates: Vec<&StreamDef> = match local_branch.and_then(|b| plan.stream_for_branch(b)) {
            Some(s) => vec![s],
            None => {
                let holding = streams_holding(&ws.repo, plan, tip)?;
                match remote_branch.and_then(|b| plan.stream_for_branch(b)) {
                    None => holding,
                    Some(s) if holding.is_empty() => vec![s],
                    Some(_) => holding,
                }
            }
        };
        let Some(&stream) = candidates.first() else { continue };
        let branch = &stream.branch;
        let mut hidden: Vec<ObjectId> = Vec::new();
        if let Ok(id) = ObjectId::from_hex(remote_sha.as_bytes()) {
            if !id.is_null() && ws.repo.objects().has(id) {
                hidden.push(id);
            }
        }
        let base = &plan.settings.base_branch;
        if let Some(id) = ws.repo.branch_tip(base)? {
            hidden.push(id);
        }
        // `remote` is a URL when pushing to one directly: then there are no remote-tracking refs.
        if ws.repo.has_remote(&remote) {
            if let Ok(Some(id)) = ws.repo.ref_id(&refs::remote_branch_ref(&remote, base)) {
                hidden.push(id);
            }
            hidden.extend(refs::ids_under(&ws.repo, &refs::remote_branches_prefix(&remote)));
        }
        let changes = ws.repo.changed_paths(tip, hidden).map_err(|e| e.context(format!("checking {branch}")))?;
        // A commit on several streams' branches (one branched from another) is judged as the
        // stream it wrongs least.
        let (stream, found) = candidates
            .iter()
            .map(|s| (*s, check_paths(plan, &s.name, &changes)))
            .min_by_key(|(_, f): &(&StreamDef, Vec<Violation>)| f.iter().filter(|v| v.refused).count())
            .unwrap_or((stream, Vec::new()));
        if found.is_empty() {
            continue;
        }
        let refuse = plan.settings.ownership == Level::Error;
        eprint!("{}", report(&stream.name, &found, refuse));
        if refuse && found.iter().any(|v| v.refused) {
            code = 1;
        }
    }
    Ok(code)
}

/// The streams whose branch holds `commit` as stream work: the branch tip itself (that stream
/// alone), or a commit the tip descends from that the base branch does not hold.
fn streams_holding<'p>(repo: &Repo, plan: &'p Plan, commit: ObjectId) -> Result<Vec<&'p StreamDef>> {
    let objects = repo.objects();
    let contains = |tip: ObjectId| -> bool { tip == commit || objects.merge_base(commit, tip) == Some(commit) };
    let base = repo.branch_tip(&plan.settings.base_branch)?;
    let mut out = Vec::new();
    for s in &plan.streams {
        let Some(tip) = repo.branch_tip(&s.branch)? else { continue };
        if tip == commit {
            return Ok(vec![s]);
        }
        if contains(tip) && !base.is_some_and(contains) {
            out.push(s);
        }
    }
    Ok(out)
}

/// pre-push in a repository git-boulder cannot open (a format it does not read): the pushed
/// commits cannot be checked, so a plan with `ownership: error` refuses the push (fail safe) and
/// names the bypass; otherwise the error is one warning and the push goes on. The plan is read
/// from the work tree the hook runs in (git runs hooks at its root).
fn unreadable_pre_push(e: Error) -> Result<i32> {
    let level = std::fs::read_to_string(crate::plan::PLAN_PATH)
        .ok()
        .and_then(|text| crate::plan::parse(&text).ok())
        .map(|plan| plan.settings.ownership);
    if level != Some(Level::Error) {
        return Err(e);
    }
    eprintln!(
        "git-boulder pre-push hook: {}\nPush refused (settings.ownership: error): the pushed commits cannot be checked \
         for ownership; bypass the check once with `git push --no-verify`.",
        e.message
    );
    Ok(1)
}

fn pre_commit() -> Result<i32> {
    let repo = Repo::discover_once()?;
    let ws = Workspace::from_repo(repo, None);
    let Some((plan, stream)) = stream_of_head(&ws)? else { return Ok(0) };
    if plan.settings.ownership == Level::Off {
        return Ok(0);
    }
    // Staged paths: index entries that differ from HEAD's tree, and tree entries the index lacks.
    let index = ws.repo.index_entries()?;
    let mut head_entries = std::collections::HashMap::new();
    if let Some(head) = ws.repo.ref_id("HEAD")? {
        let objects = ws.repo.objects();
        let (tree, _) = objects.commit_parts(head).map_err(|e| Error::internal(format!("HEAD: {e}")))?;
        let files = objects.files(tree).map_err(|e| Error::internal(format!("HEAD tree: {e}")))?;
        head_entries.extend(files);
    }
    let mut changes = Vec::new();
    let mut in_index = std::collections::HashSet::new();
    for (path, id) in index {
        if head_entries.get(&path) != Some(&id) {
            changes.push(("staged".to_string(), path.clone()));
        }
        in_index.insert(path);
    }
    for path in head_entries.keys() {
        if !in_index.contains(path) {
            changes.push(("staged".to_string(), path.clone()));
        }
    }
    let found = check_paths(&plan, &stream, &changes);
    if found.is_empty() {
        return Ok(0);
    }
    let refuse = plan.settings.ownership == Level::Error;
    let mut text = report(&stream, &found, false);
    if refuse && found.iter().any(|v| v.refused) {
        text.push_str("Commit refused (settings.ownership: error); bypass once with `git commit --no-verify`.\n");
        eprint!("{text}");
        return Ok(1);
    }
    eprint!("{text}");
    Ok(0)
}
