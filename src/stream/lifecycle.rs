//! A stream's life on this machine: `stream init` (branch + linked worktree + setup, recorded as
//! INITIALIZED) and `stream cleanup` (worktree removed, branch deleted when merged, recorded).

use std::collections::HashMap;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::git::{refs, ObjectId};
use crate::lock;
use crate::plan::{Plan, StreamDef};
use crate::state::{self, BoulderOp, BoulderState, Opt, Store, StreamOp, StreamState, StreamStatus};
use crate::stream::shell::{env_for, run_shell};
use crate::workspace::Workspace;
use crate::worktree::{self, AddOutcome};

/// What `init` did for one stream.
#[derive(Debug)]
pub struct InitReport {
    pub name: String,
    pub path: PathBuf,
    /// Human lines saying what changed; empty when nothing did.
    pub changes: Vec<String>,
    /// The setup command's failure, if it failed (the worktree is kept).
    pub setup_failed: Option<String>,
}

/// What `stream init` of many streams reads once and keeps from one stream to the next, instead
/// of reading it again for each (which made initializing N streams take time in N²): the
/// worktrees' registrations ([`worktree::Known`]) and the indexes this machine's streams hold.
#[derive(Default)]
pub struct Batch {
    worktrees: worktree::Known,
    indexes: Indexes,
}

/// Create (or finish, or confirm) one stream's branch and worktree, and record INITIALIZED.
pub fn init(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<InitReport> {
    init_in(ws, plan, stream, &mut Batch::default(), false)
}

/// [`init`] of one stream of several initialized one after another with the same `batch`.
pub fn init_batch(ws: &Workspace, plan: &Plan, stream: &StreamDef, batch: &mut Batch) -> Result<InitReport> {
    init_in(ws, plan, stream, batch, false)
}

/// [`init`] for a caller that holds the stream's lock already (`stream run` finishing a worktree
/// whose making was interrupted).
pub fn init_with(ws: &Workspace, plan: &Plan, stream: &StreamDef, lock_held: bool) -> Result<InitReport> {
    init_in(ws, plan, stream, &mut Batch::default(), lock_held)
}

fn init_in(ws: &Workspace, plan: &Plan, stream: &StreamDef, batch: &mut Batch, lock_held: bool) -> Result<InitReport> {
    let repo = &ws.repo;
    let path = ws.worktree_path(plan, &stream.name)?;
    let store = Store::new(repo)?;
    let sref = state::stream_ref(&stream.name);
    let recorded = store.read::<StreamState>(&sref)?;
    let recorded_live = recorded.as_ref().is_some_and(|e| e.state.status.is_live());
    // A stream the plan file names is the plan's, even when it began as an ad-hoc one.
    let adhoc = stream.adhoc;
    let mut changes = Vec::new();
    // Globs that would lead outside the repository are refused before anything is created.
    if let Err(why) = crate::plan::compile_globs(&plan.settings.copy_into_worktree) {
        return Err(Error::usage(format!("settings.copy_into_worktree: {why}"))
            .with_source(why)
            .hint("use globs relative to the repository root, without '..' or a leading '/'"));
    }
    // So are `.worktreeinclude` patterns that would.
    worktree::worktree_include(ws.root()?)?;
    // Setup runs unless the stream is already initialized; refuse before anything changes when
    // its command is not trusted on this machine.
    if !(recorded_live && path.join(".git").exists()) {
        crate::trust::require(repo, plan, "stream init", &[crate::trust::SETUP.to_string()])?;
    }

    let _guard = match lock_held {
        true => None,
        false => Some(lock::try_acquire(repo, &format!("stream-{}", stream.name), "stream init")?),
    };
    let from = match repo.branch_tip(&stream.branch)? {
        Some(_) => plan.settings.base_branch.clone(),
        None => {
            worktree::start_point(repo, &stream.branch, &plan.settings.base_branch).map(|(_, f)| f).unwrap_or_default()
        }
    };
    if worktree::exclude(repo, &plan.settings.worktree_dir)? {
        changes.push(format!("added /{}/ to info/exclude", plan.settings.worktree_dir.trim_matches('/')));
    }
    let outcome = worktree::add_known(repo, &mut batch.worktrees, &path, &stream.branch, &plan.settings.base_branch)?;
    match &outcome {
        AddOutcome::Created { branch_created, recovered, .. } => {
            for r in recovered {
                changes.push(format!("removed leftover of an interrupted run: {r}"));
            }
            if *branch_created {
                changes.push(format!("created branch {} from {from}", stream.branch));
            }
            changes.push(format!("created worktree {}", path.display()));
        }
        AddOutcome::Repaired { branch_created, what } => {
            if *branch_created {
                changes.push(format!("created branch {} from {from}", stream.branch));
            }
            changes.push(format!("finished the interrupted worktree {} ({})", path.display(), what.join(", ")));
        }
        AddOutcome::AlreadyPresent => {}
    }
    if outcome != AddOutcome::AlreadyPresent {
        changes.extend(worktree::widen_sparse(&path, plan.sparse_dirs(stream).as_deref())?);
    }

    let mut setup_failed = None;
    // Copy and set up whenever the stream is not yet recorded as initialized: a run killed
    // between checkout and the record does it again (setup commands are expected to be rerunnable).
    // A stream whose setup failed is set up again.
    let failed_before = recorded.as_ref().is_some_and(|e| e.state.setup_failed.is_some());
    if !recorded_live || outcome != AddOutcome::AlreadyPresent || failed_before {
        let main = ws.root()?;
        let mut copied = worktree::copy_files(main, &path, &plan.settings.copy_into_worktree)?;
        copied.extend(worktree::copy_included(main, &path)?);
        if !copied.is_empty() {
            changes.push(format!("copied {} file(s) into the worktree", copied.len()));
        }
        // The index's lock is held until INITIALIZED records it: two `stream init` runs at once
        // never pick the same index.
        let (index, _index_guard) = batch.indexes.pick(&store, &stream.name, recorded.as_ref().map(|e| &e.state))?;
        if !plan.settings.setup.trim().is_empty() {
            // Checked again right where it runs: a repaired worktree of an initialized stream
            // gets here too, after the early check let it pass.
            crate::trust::require(repo, plan, "stream init", &[crate::trust::SETUP.to_string()])?;
            match run_shell(&plan.settings.setup, &path, &env_for(plan, &stream.name, Some(index))) {
                Ok(()) => changes.push(format!("ran setup: {}", plan.settings.setup)),
                Err(e) => setup_failed = Some(e.to_string()),
            }
        }
        store.append::<StreamState>(
            &sref,
            StreamOp::Initialized {
                name: Opt::Absent,
                branch: Opt::Set(stream.branch.clone()),
                worktree: Opt::Set(path.display().to_string()),
                base: Opt::Set(plan.settings.base_branch.clone()),
                index: Opt::Set(index),
                setup_failed: setup_failed.clone().into(),
                adhoc: if adhoc { Opt::Set(true) } else { Opt::Absent },
            },
        )?;
        batch.indexes.recorded(&stream.name, index);
        changes.push(format!("recorded INITIALIZED (stream index {index})"));
    } else if recorded.as_ref().is_some_and(|e| e.state.index.is_none()) {
        // Initialized by a git-boulder that recorded no index: give it one now.
        let (index, _index_guard) = batch.indexes.pick(&store, &stream.name, None)?;
        store.append::<StreamState>(&sref, StreamOp::Indexed { index })?;
        batch.indexes.recorded(&stream.name, index);
        changes.push(format!("recorded stream index {index}"));
    }
    ensure_root_boulder(&store, &stream.name)?;
    // The agent harnesses installed on this machine go into the new worktree too.
    changes.extend(crate::harness::install::into_new_worktree(repo, &path));
    Ok(InitReport { name: stream.name.clone(), path, changes, setup_failed })
}

/// Every stream has a root boulder of its name; create it once.
pub fn ensure_root_boulder(store: &Store, name: &str) -> Result<()> {
    let bref = state::boulder_ref(name);
    store.append_if::<BoulderState>(&bref, |current| {
        Ok(match current {
            Some(_) => None,
            None => Some(BoulderOp::Created {
                id: Opt::Absent,
                stream: Opt::Set(name.to_string()),
                parent: Opt::Null,
                depth: Opt::Set(0),
            }),
        })
    })?;
    Ok(())
}

/// The indexes the live streams of this machine hold, read once for many streams.
///
/// A stream's index is the one recorded before, unless another live stream of this machine holds
/// it now; else the lowest index from 1 up that no live stream of this machine holds. Index 0 is
/// left to the main checkout (`BOULDER_PORT` = `port_base` there). An index is taken with its lock
/// (`index-<n>`), held until INITIALIZED records it, so two `stream init` runs at once never pick
/// the same index: one whose lock is held is skipped. What other processes record after the
/// indexes were read is noticed through the locks: an index whose lock was held (its file
/// written) since the indexes were read, or was held while they were read, sends them to be read
/// again before it is taken.
#[derive(Default)]
struct Indexes {
    /// When the indexes were read (a little before), if they were.
    read_at: Option<std::time::SystemTime>,
    /// Index → the live streams of this machine that hold it.
    holders: HashMap<u64, std::collections::BTreeSet<String>>,
    /// Stream → the index it holds (the other way round).
    by_name: HashMap<String, u64>,
    /// Index locks held by other processes when the indexes were read.
    busy: std::collections::BTreeSet<u64>,
    /// The index each op-log tip holds for this machine (a tip's state never changes).
    by_tip: HashMap<ObjectId, Option<u64>>,
}

impl Indexes {
    fn read(&mut self, store: &Store, except: Option<u64>) -> Result<()> {
        // Back a little from now: a file's modification time can lag the clock by a tick.
        self.read_at = Some(std::time::SystemTime::now() - std::time::Duration::from_millis(100));
        self.busy = lock::holders(store.repo)
            .into_iter()
            .filter_map(|(name, _)| name.strip_prefix("index-").and_then(|i| i.parse().ok()))
            .filter(|i| Some(*i) != except)
            .collect();
        let actor = store.actor()?;
        self.holders.clear();
        self.by_name.clear();
        for (refname, tip) in store.list(state::STREAMS)? {
            let Some(name) = refname.strip_prefix(state::STREAMS) else { continue };
            let index = match self.by_tip.get(&tip) {
                Some(index) => *index,
                None => {
                    // Unreadable state (garbage from a remote) holds no index.
                    let Ok(Some(e)) = store.read::<StreamState>(&refname) else { continue };
                    let here = e.state.initialized_by.as_deref() == Some(actor.as_str());
                    let index = e.state.index.filter(|_| here && e.state.status.is_live());
                    // Kept only when read at the tip listed (the ref may have moved since).
                    if e.commit == tip {
                        self.by_tip.insert(tip, index);
                    }
                    index
                }
            };
            if let Some(index) = index {
                self.holders.entry(index).or_default().insert(name.to_string());
                self.by_name.insert(name.to_string(), index);
            }
        }
        Ok(())
    }

    /// Whether a live stream other than `name` holds index `i`.
    fn held_by_other(&self, name: &str, i: u64) -> bool {
        self.holders.get(&i).is_some_and(|names| names.iter().any(|n| n != name))
    }

    /// Take an index for stream `name` (see [`Indexes`]), with its lock held.
    fn pick(&mut self, store: &Store, name: &str, recorded: Option<&StreamState>) -> Result<(u64, lock::LockGuard)> {
        if self.read_at.is_none() {
            self.read(store, None)?;
        }
        let mut busy = None;
        let mut tries = 0;
        for i in recorded.and_then(|s| s.index).into_iter().chain(1..=state::op::MAX_INDEX) {
            if self.held_by_other(name, i) || self.busy.contains(&i) {
                continue;
            }
            let lock_name = format!("index-{i}");
            let modified = std::fs::metadata(lock::lock_path(store.repo, &lock_name)).and_then(|m| m.modified());
            let touched = match (modified, self.read_at) {
                (Ok(m), Some(at)) => m >= at,
                _ => false,
            };
            match lock::try_acquire(store.repo, &lock_name, "stream init") {
                Ok(guard) => {
                    if touched {
                        // Taken by another process since the indexes were read: read them again
                        // while holding the lock, so whoever recorded it shows.
                        self.read(store, Some(i))?;
                        if self.held_by_other(name, i) {
                            continue;
                        }
                    }
                    return Ok((i, guard));
                }
                // Held by another init right now (or the locks cannot be written: give up soon).
                Err(e) if tries < 64 => {
                    tries += 1;
                    busy = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(busy.unwrap_or_else(|| {
            Error::refused("every stream index is taken")
                .hint("clean up streams: `git boulder stream cleanup --merged`")
        }))
    }

    /// Note that stream `name` now holds `index` (recorded by this process).
    fn recorded(&mut self, name: &str, index: u64) {
        if let Some(old) = self.by_name.insert(name.to_string(), index) {
            if let Some(names) = self.holders.get_mut(&old) {
                names.remove(name);
            }
        }
        self.holders.entry(index).or_default().insert(name.to_string());
    }
}

/// Which streams `cleanup` should touch.
#[derive(Debug, Default, Clone)]
pub struct CleanupOptions {
    pub merged: bool,
    pub stale: bool,
    pub all: bool,
    pub delete_branch: bool,
    pub force: bool,
}

/// What `cleanup` did for one stream.
#[derive(Debug)]
pub struct CleanupReport {
    pub name: String,
    pub worktree_removed: bool,
    pub branch_deleted: bool,
    pub note: Option<String>,
}

/// Is `stream` complete: all its stories done, as its PRD or `prd done` says (a stream without
/// stories is). `stream merge --all` takes only complete streams; `check` counts a complete
/// stream's root boulder as completed.
pub fn complete(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<bool> {
    if stream.stories.is_empty() {
        return Ok(true);
    }
    let (_, prd) = crate::workspace::load_prd(&ws.prd_path(Some(plan), None)?)?;
    let done = ws.recorded_done()?;
    let stories = ws.stream_stories(plan, stream, &prd, &done)?;
    Ok(stories.len() == stream.stories.len() && stories.iter().all(|s| s.status.is_done()))
}

/// True when the stream is merged: git-boulder recorded merging exactly its branch's tip (a squash
/// merge leaves the stream's own commits off the base), or its branch carries commits of its own
/// and all of them are in the base branch. A stream that has not started — its branch still at the
/// commit it was created at, trivially contained in the base — is not merged.
pub fn is_merged(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<bool> {
    let (Some(tip), Some(base)) =
        (ws.repo.branch_tip(&stream.branch)?, ws.repo.branch_tip(&plan.settings.base_branch)?)
    else {
        return Ok(false);
    };
    let store = Store::new(&ws.repo)?;
    let recorded = store.read::<StreamState>(&state::stream_ref(&stream.name)).ok().flatten();
    if recorded.is_some_and(|e| e.state.status == StreamStatus::Merged && e.state.merged_tip == Some(tip.to_string())) {
        return Ok(true);
    }
    let (ahead, _) = worktree::ahead_behind(&ws.repo, tip, base)?;
    Ok(ahead == 0 && has_own_commits(ws, &store, stream, tip))
}

/// Whether the stream's branch moved on from where it was created: its tip differs from the commit
/// of the branch's oldest reflog entry (`branch: Created from …`). Without a reflog, whether a
/// commit was recorded for the stream's root boulder.
fn has_own_commits(ws: &Workspace, store: &Store, stream: &StreamDef, tip: ObjectId) -> bool {
    if let Some(created) = creation_point(&ws.repo, &stream.branch) {
        return created != tip;
    }
    store
        .read::<crate::state::BoulderState>(&state::boulder_ref(&stream.name))
        .ok()
        .flatten()
        .is_some_and(|e| e.state.last_commit.is_some())
}

/// The commit `refs/heads/<branch>` was created at, from its reflog's oldest entry.
fn creation_point(repo: &crate::git::Repo, branch: &str) -> Option<ObjectId> {
    repo.reflog_oldest(&refs::branch_ref(branch))
}

/// Where the stream's worktree is, as git's own worktree list says: the registration at the path
/// the plan gives when there is one whose folder exists; else a linked worktree elsewhere that has
/// the stream's branch checked out (moved with `git worktree move`, or moved and repaired); else the
/// registration at the plan's path (its folder gone), if any.
pub struct Located {
    /// The worktree's folder (the plan's path unless it was moved).
    pub path: std::path::PathBuf,
    /// git's registration of it.
    pub info: Option<worktree::WorktreeInfo>,
    /// The worktree is not where the plan puts it.
    pub moved: bool,
}

pub fn locate(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<Located> {
    let path = ws.worktree_path(plan, &stream.name)?;
    let at_path = worktree::find(&ws.repo, &path)?;
    if at_path.as_ref().is_some_and(|w| !w.missing) {
        return Ok(Located { path, info: at_path, moved: false });
    }
    let elsewhere = worktree::list(&ws.repo)?
        .into_iter()
        .find(|w| !w.missing && w.path != path && w.branch.as_deref() == Some(stream.branch.as_str()));
    if let Some(w) = elsewhere {
        return Ok(Located { path: w.path.clone(), info: Some(w), moved: true });
    }
    Ok(Located { path, info: at_path, moved: false })
}

/// Commits on the stream branch that neither the base branch nor any remote-tracking branch has.
fn unpushed_unmerged(ws: &Workspace, plan: &Plan, stream: &StreamDef) -> Result<usize> {
    let Some(tip) = ws.repo.branch_tip(&stream.branch)? else { return Ok(0) };
    let mut hidden = Vec::new();
    if let Some(base) = ws.repo.branch_tip(&plan.settings.base_branch)? {
        hidden.push(base);
    }
    hidden.extend(refs::ids_under(&ws.repo, refs::REMOTE_BRANCHES));
    let objects = ws.repo.objects();
    let walk =
        objects.walk([tip], hidden).map_err(|e| Error::internal(format!("cannot walk {}: {e}", stream.branch)))?;
    Ok(walk.filter_map(|c| c.ok()).count())
}

/// Remove the selected streams' worktrees (and branches with `delete_branch`).
pub fn cleanup(ws: &Workspace, plan: &Plan, names: &[String], opts: &CleanupOptions) -> Result<Vec<CleanupReport>> {
    let selected: Vec<&StreamDef> = if !names.is_empty() {
        names.iter().map(|n| ws.stream(plan, n)).collect::<Result<_>>()?
    } else if opts.all || opts.merged || opts.stale {
        plan.streams.iter().collect()
    } else {
        return Err(Error::usage("say which streams to clean up").hint("name them, or pass --merged, --stale or --all"));
    };
    let store = Store::new(&ws.repo)?;
    let mut reports = Vec::new();
    for stream in selected {
        let Located { path, info: known, .. } = locate(ws, plan, stream)?;
        let exists = path.exists();
        let merged = is_merged(ws, plan, stream)?;
        if names.is_empty() && !opts.all {
            // Stale as git's own worktree list says: no worktree of the stream whose folder exists
            // (a moved worktree is not stale), and git has a registration whose folder is gone or
            // state expects a worktree here.
            let live_here = known.as_ref().is_some_and(|w| !w.missing);
            let stale = !live_here
                && !exists
                && (known.as_ref().is_some_and(|w| w.missing) || recorded_live(&store, &stream.name)?);
            let pick = (opts.merged && merged) || (opts.stale && stale);
            if !pick {
                continue;
            }
        }
        if known.is_none() && !exists && !opts.delete_branch {
            if recorded_live(&store, &stream.name)? {
                store.append::<StreamState>(
                    &state::stream_ref(&stream.name),
                    StreamOp::Cleaned { worktree_removed: Opt::Set(false), branch_deleted: Opt::Set(false) },
                )?;
                reports.push(CleanupReport {
                    name: stream.name.clone(),
                    worktree_removed: false,
                    branch_deleted: false,
                    note: Some("worktree was already gone; recorded".into()),
                });
            }
            continue;
        }
        let _guard = lock::try_acquire(&ws.repo, &format!("stream-{}", stream.name), "stream cleanup")?;
        if !opts.force && exists {
            let dirt = worktree::dirt(&path, 10)?;
            if !dirt.is_clean() {
                return Err(Error::refused(format!(
                    "stream {}: the worktree {} has uncommitted work that removing it would lose ({})",
                    stream.name,
                    path.display(),
                    dirt.describe()
                ))
                .hint("commit or stash it, or pass --force to discard it"));
            }
        }
        if !opts.force && !merged {
            let n = unpushed_unmerged(ws, plan, stream)?;
            if n > 0 {
                return Err(Error::refused(format!(
                    "stream {}: branch {} has {n} commit(s) that are neither merged into {} nor pushed",
                    stream.name, stream.branch, plan.settings.base_branch
                ))
                .hint(format!("merge it (`git boulder stream merge {}`), push it, or pass --force", stream.name)));
            }
        }
        let mut removed = false;
        if let Some(info) = &known {
            if info.missing {
                worktree::prune_missing(&ws.repo)?;
            } else {
                worktree::remove(&ws.repo, &path, opts.force)?;
            }
            removed = true;
        } else if exists {
            return Err(Error::usage(format!(
                "{} is not a worktree git knows; git-boulder will not delete it",
                path.display()
            ))
            .hint("move or delete the folder yourself"));
        }
        let mut deleted = false;
        if opts.delete_branch {
            if let Some(tip) = ws.repo.branch_tip(&stream.branch)? {
                // A branch with nothing the base lacks loses nothing when deleted.
                let in_base = match ws.repo.branch_tip(&plan.settings.base_branch)? {
                    Some(base) => worktree::ahead_behind(&ws.repo, tip, base)?.0 == 0,
                    None => false,
                };
                if !merged && !in_base && !opts.force {
                    return Err(Error::refused(format!(
                        "branch {} is not merged into {}; deleting it would lose its commits",
                        stream.branch, plan.settings.base_branch
                    ))
                    .hint("merge it first, or pass --force with --delete-branch"));
                }
                crate::git::delete_ref(&ws.repo, &refs::branch_ref(&stream.branch), tip)?;
                deleted = true;
            }
        }
        store.append::<StreamState>(
            &state::stream_ref(&stream.name),
            StreamOp::Cleaned { worktree_removed: Opt::Set(removed), branch_deleted: Opt::Set(deleted) },
        )?;
        reports.push(CleanupReport {
            name: stream.name.clone(),
            worktree_removed: removed,
            branch_deleted: deleted,
            note: None,
        });
    }
    Ok(reports)
}

fn recorded_live(store: &Store, name: &str) -> Result<bool> {
    Ok(store.read::<StreamState>(&state::stream_ref(name))?.is_some_and(|e| e.state.status.is_live()))
}
