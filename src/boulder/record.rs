//! Recording commits as boulder work: what post-commit records for each commit
//! ([`record_commit`]: an activity op on its boulder and each ancestor, and its note), and the
//! commits made without the hooks (hooks missing, git-boulder not on an editor's PATH,
//! `--no-verify` does not matter: post-commit always runs): finding them (`doctor`) and recording
//! them after the fact (`git boulder record`: a range, one stream's, or every stream's), each once.
//!
//! A stream's unrecorded commits are those of `base..branch` with no note on `refs/notes/boulder`,
//! merge commits left out (merging is not an iteration of work). Recording one does what the
//! post-commit hook would have done, with the commit's committer time as its time, oldest first so
//! iterations count up in history order.

use std::collections::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::git::notes::{self, Note, Noted};
use crate::git::objects::{Objects, RevSpec, Walked};
use crate::git::{ObjectId, Repo};
use crate::plan::{Plan, StreamDef};
use crate::state::{self, BoulderOp, BoulderState, Opt, Store};
use crate::workspace::Workspace;

/// The most commits of one stream's branch `doctor` looks at.
pub const DOCTOR_WALK: usize = 2000;

/// The commits reachable from `tips` but not from `hidden`, at most `limit` of them (`None`:
/// all), and whether the walk stopped at the limit.
fn walk(repo: &Objects, tips: &[ObjectId], hidden: &[ObjectId], limit: Option<usize>) -> Result<(Vec<Walked>, bool)> {
    let what = |e: &dyn std::fmt::Display| Error::internal(format!("cannot walk the history: {e}"));
    let iter = repo.walk(tips.iter().copied(), hidden.iter().copied()).map_err(|e| what(&e))?;
    let mut out = Vec::new();
    for info in iter {
        if limit.is_some_and(|l| out.len() >= l) {
            return Ok((out, true));
        }
        let info = info.map_err(|e| what(&e))?;
        out.push(info);
    }
    Ok((out, false))
}

/// `walked` ordered parents first (oldest first), merge commits left out.
fn oldest_first(walked: Vec<Walked>) -> Vec<ObjectId> {
    let parents: HashMap<ObjectId, Vec<ObjectId>> = walked.iter().map(|w| (w.id, w.parents.clone())).collect();
    let mut done = HashSet::new();
    let mut out = Vec::new();
    // Walk order is newest first; visit each commit's parents (within the set) before it.
    for w in walked.iter().rev() {
        let mut stack = vec![(w.id, false)];
        while let Some((id, expanded)) = stack.pop() {
            if done.contains(&id) {
                continue;
            }
            if expanded {
                done.insert(id);
                if parents.get(&id).is_some_and(|p| p.len() <= 1) {
                    out.push(id);
                }
                continue;
            }
            stack.push((id, true));
            for p in parents.get(&id).into_iter().flatten() {
                if parents.contains_key(p) && !done.contains(p) {
                    stack.push((*p, false));
                }
            }
        }
    }
    out
}

/// The base branch's tip, if the branch exists.
fn base_tip(ws: &Workspace, plan: &Plan) -> Result<Option<ObjectId>> {
    ws.repo.branch_tip(&plan.settings.base_branch)
}

/// The commits of `stream`'s branch the base lacks (oldest first, merges left out), at most
/// `limit` walked; `None` when the branch does not exist. The flag says the walk was cut short.
pub fn stream_commits(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    limit: Option<usize>,
) -> Result<Option<(Vec<ObjectId>, bool)>> {
    let Some(tip) = ws.repo.branch_tip(&stream.branch)? else { return Ok(None) };
    let hidden: Vec<ObjectId> = base_tip(ws, plan)?.into_iter().collect();
    let (walked, cut) = walk(&ws.repo.objects(), &[tip], &hidden, limit)?;
    Ok(Some((oldest_first(walked), cut)))
}

/// A stream's commits that have no note: (commits oldest first, whether the walk was cut short).
pub fn unrecorded(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    noted: &mut Noted,
    limit: Option<usize>,
) -> Result<(Vec<ObjectId>, bool)> {
    let Some((commits, cut)) = stream_commits(ws, plan, stream, limit)? else { return Ok((Vec::new(), false)) };
    let mut out = Vec::new();
    for c in commits {
        if !noted.has(&ws.repo, c)? {
            out.push(c);
        }
    }
    Ok((out, cut))
}

/// What [`record`] did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Commits recorded now, oldest first, with their stream.
    pub recorded: Vec<(ObjectId, String)>,
    /// Commits of the range that already had a note (left alone).
    pub already: usize,
}

/// The stream of the branch checked out in this worktree, if any.
fn stream_here<'p>(ws: &Workspace, plan: &'p Plan) -> Option<&'p StreamDef> {
    ws.repo.head_branch().and_then(|b| plan.stream_for_branch(&b))
}

/// Every stream's commits the base lacks, oldest first stream by stream in plan order, each
/// commit once (with the first stream whose branch holds it).
fn every_stream<'p>(ws: &Workspace, plan: &'p Plan) -> Result<Vec<(ObjectId, &'p StreamDef)>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for s in &plan.streams {
        let Some((commits, _)) = stream_commits(ws, plan, s, None)? else { continue };
        out.extend(commits.into_iter().filter(|c| seen.insert(*c)).map(|c| (c, s)));
    }
    Ok(out)
}

/// Record the commits of `range` that have no note, as work of `stream` (default: the stream
/// whose branch holds each commit). Without a range, the commits the base lacks of `stream`, or
/// of the stream of this worktree's branch, or else of every stream (what `doctor` lists).
pub fn record(ws: &Workspace, range: Option<&str>, stream: Option<&str>) -> Result<Outcome> {
    let plan = ws.plan()?;
    let mut chosen = match stream {
        Some(name) => Some(plan.stream(name).ok_or_else(|| {
            Error::usage(format!("no stream named {name:?} in the plan")).hint("list them with `git boulder status`")
        })?),
        None => None,
    };
    let here = stream_here(ws, &plan);

    // The commits asked for, oldest first.
    let commits: Vec<ObjectId> = match (range, chosen.or(here)) {
        // Nothing named, outside a stream's worktree: every stream's commits, each once.
        (None, None) => return record_owned(ws, here, every_stream(ws, &plan)?),
        (None, Some(s)) => {
            chosen = Some(s);
            match stream_commits(ws, &plan, s, None)? {
                Some((c, _)) => c,
                None => {
                    return Err(Error::usage(format!("stream {} has no branch {} yet", s.name, s.branch))
                        .hint(format!("create it with `git boulder stream init {}`", s.name)))
                }
            }
        }
        (Some(spec), _) => resolve(&ws.repo, spec)?,
    };

    // Whose each commit is.
    let mut owners: Vec<(ObjectId, &StreamDef)> = Vec::new();
    let mut orphans = Vec::new();
    if let Some(s) = chosen {
        owners = commits.iter().map(|c| (*c, s)).collect();
    } else {
        // Each stream's commits the base lacks, this worktree's stream first, walked until every
        // commit has its stream.
        let mut order: Vec<&StreamDef> = here.into_iter().collect();
        order.extend(plan.streams.iter().filter(|s| here.is_none_or(|h| h.name != s.name)));
        let wanted: HashSet<ObjectId> = commits.iter().copied().collect();
        let mut owner_of: HashMap<ObjectId, &StreamDef> = HashMap::new();
        for s in order {
            if owner_of.len() == wanted.len() {
                break;
            }
            let Some((set, _)) = stream_commits(ws, &plan, s, None)? else { continue };
            for c in set {
                if wanted.contains(&c) {
                    owner_of.entry(c).or_insert(s);
                }
            }
        }
        for c in &commits {
            match owner_of.get(c) {
                Some(s) => owners.push((*c, *s)),
                None => orphans.push(*c),
            }
        }
    }
    if !orphans.is_empty() {
        let mut names: Vec<String> = orphans.iter().take(10).map(|c| c.to_hex_with_len(12).to_string()).collect();
        if orphans.len() > 10 {
            names.push(format!("and {} more", orphans.len() - 10));
        }
        return Err(Error::usage(format!(
            "{} commit(s) of the range are on no stream's branch (or are already on the base branch {}): {}",
            orphans.len(),
            plan.settings.base_branch,
            names.join(", ")
        ))
        .hint("give a range of stream commits, or say whose they are with `git boulder record --stream NAME RANGE`"));
    }
    record_owned(ws, here, owners)
}

/// Record each commit of `owners` that has no note as its stream's work, in the order given.
fn record_owned(ws: &Workspace, here: Option<&StreamDef>, owners: Vec<(ObjectId, &StreamDef)>) -> Result<Outcome> {
    let store = Store::new(&ws.repo)?;
    let mut noted = Noted::new(&ws.repo)?;
    let objects = ws.repo.objects();
    let mut out = Outcome::default();
    for (commit, s) in owners {
        if noted.has(&ws.repo, commit)? {
            out.already += 1;
            continue;
        }
        let at = objects
            .commit_time(commit)
            .map(|t| crate::time::format_secs(t as f64))
            .ok_or_else(|| Error::internal(format!("cannot read the time of commit {commit}")))?;
        // The boulder this worktree counts commits for when it is on the stream's branch, else the
        // stream's root boulder.
        let boulder = match here {
            Some(h) if h.name == s.name => super::tree::current_boulder(&ws.repo, &s.name),
            _ => s.name.clone(),
        };
        let rec = RecordedCommit { stream: s.name.clone(), boulder, commit, story: None, at };
        record_commit(&ws.repo, &store, &rec)?;
        out.recorded.push((commit, s.name.clone()));
    }
    Ok(out)
}

/// The commits `spec` names (`A..B`, `A...B`, `^A B`-free forms git understands, or one commit),
/// oldest first, merges left out.
fn resolve(repo: &crate::git::Repo, spec: &str) -> Result<Vec<ObjectId>> {
    let g = repo.objects();
    let bad = |e: &dyn std::fmt::Display| {
        Error::usage(format!("{spec:?} is not a commit or range: {e}"))
            .hint("give a commit (HEAD~2) or a range (main..HEAD), as `git log` takes them")
    };
    let parsed = repo.rev_parse(spec).map_err(|e| bad(&e))?;
    let commit = |id: ObjectId| -> Result<ObjectId> {
        g.peel_to_commit(id).ok_or_else(|| bad(&format!("{id} is not a commit")))
    };
    let (tips, hidden) = match parsed {
        RevSpec::One(id) => return Ok(vec![commit(id)?]),
        RevSpec::Range { from, to } => (vec![commit(to)?], vec![commit(from)?]),
        RevSpec::Merge { theirs, ours } => {
            let (a, b) = (commit(theirs)?, commit(ours)?);
            let base = g.merge_base(a, b);
            (vec![a, b], base.into_iter().collect())
        }
        RevSpec::Other => return Err(bad(&"only a commit, A..B or A...B can be recorded")),
    };
    let (walked, _) = walk(&g, &tips, &hidden, None)?;
    Ok(oldest_first(walked))
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
        let (actor, host) = state::recorder(store);
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

/// A commit in the main worktree, off any stream: activity of the boulder `switch` made current
/// there, else of the project boulder — once it exists (`check`, `checkpoint`, `todo`, `resume`
/// or a harness hook made it). No note: the commit is no stream's work.
pub fn project_activity(ws: &Workspace, project_stream: bool, head: ObjectId) -> Result<()> {
    let id =
        super::tree::switched(&ws.repo).unwrap_or_else(|| super::tree::project_id_beside(project_stream).to_string());
    let store = Store::new(&ws.repo)?;
    let story = std::env::var("BOULDER_STORY").ok().filter(|s| !s.is_empty());
    let activity =
        BoulderOp::Activity { commit: head.into(), story: story.into(), at: Opt::Set(crate::time::now_rfc3339()) };
    store.append_if::<BoulderState>(&state::boulder_ref(&id), |cur| Ok(cur.map(|_| activity.clone())))?;
    Ok(())
}
