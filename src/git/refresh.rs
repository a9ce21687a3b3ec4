//! The fast answer to "does this worktree have uncommitted work?" — the same answer as
//! `git status --porcelain` being non-empty, computed the way git's own refresh does it:
//!
//! 1. **staged**: the index against HEAD's tree, entry by entry (HEAD trees are flattened once and
//!    shared between worktrees on the same commit); conflicts and intent-to-add entries count.
//! 2. **modified**: one `lstat` per tracked file compared with the stat data in the index; only a
//!    file whose stat differs (or is racily clean) is read and hashed.
//! 3. **untracked**: a walk of the folders, descending only into folders that hold tracked files
//!    or are not ignored, asking the ignore rules only about names the index lacks. Folders found
//!    free of untracked files are remembered by mtime in the worktree's git dir.
//!
//! Whatever this cannot decide exactly (a sparse index, content filters that make a changed file
//! hash differently, an unborn HEAD) is left to the full status of [`crate::git::status`].
//! Nothing is written to the index: it is only read.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gix::bstr::{BStr, BString, ByteSlice};

use crate::error::{Error, Result};
use crate::git::{ObjectId, Repo};

/// A tree's files: (path, blob id, mode), sorted by path.
type Flat = Arc<Vec<(BString, ObjectId, u32)>>;

/// Flattened HEAD trees, shared between the worktrees of one status run. A tree is flattened
/// once: a thread that needs it while another flattens it waits for that one.
#[derive(Default)]
pub struct Trees {
    flat: Mutex<HashMap<ObjectId, Arc<Mutex<Option<Flat>>>>>,
}

impl Trees {
    fn get(&self, repo: &gix::Repository, tree: ObjectId) -> Result<Flat> {
        let slot = self.flat.lock().unwrap_or_else(|e| e.into_inner()).entry(tree).or_default().clone();
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = &*slot {
            return Ok(f.clone());
        }
        let t = repo
            .find_tree(tree)
            .map_err(|e| Error::internal(format!("cannot read tree {tree}: {e}")).with_source(e))?;
        let mut rec = gix::traverse::tree::Recorder::default();
        t.traverse()
            .breadthfirst(&mut rec)
            .map_err(|e| Error::internal(format!("cannot walk tree {tree}: {e}")).with_source(e))?;
        let mut flat: Vec<(BString, ObjectId, u32)> = rec
            .records
            .into_iter()
            .filter(|e| !e.mode.is_tree())
            .map(|e| (e.filepath, e.oid, u32::from(e.mode.value())))
            .collect();
        flat.sort_by(|a, b| a.0.cmp(&b.0));
        let flat = Arc::new(flat);
        *slot = Some(flat.clone());
        Ok(flat)
    }
}

/// The answer of the fast path: decided, or "ask the full status".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fast {
    /// `git status --porcelain` would print nothing.
    Clean,
    /// It would print something.
    Dirty,
    /// Only the full status can tell (sparse index, content filters, unborn HEAD, …).
    Unsure,
}

/// The git dir of the worktree at `wt` (its `.git` file's target, or `.git` itself).
fn git_dir_of(wt: &Path) -> Option<PathBuf> {
    let dot = wt.join(".git");
    let meta = std::fs::symlink_metadata(&dot).ok()?;
    if meta.is_dir() {
        return Some(dot);
    }
    let text = std::fs::read_to_string(&dot).ok()?;
    let target = text.trim().strip_prefix("gitdir:")?.trim();
    let p = Path::new(target);
    Some(if p.is_relative() { wt.join(p) } else { p.to_path_buf() })
}

/// The commit HEAD of that git dir points at.
fn head_of(repo: &Repo, git_dir: &Path) -> Option<ObjectId> {
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let head = head.trim();
    match head.strip_prefix("ref:") {
        Some(r) => repo.ref_id(r.trim()).ok().flatten(),
        None => ObjectId::from_hex(head.as_bytes()).ok(),
    }
}

/// Could content filters (eol conversion, `ident`, filter drivers) make a file on disk differ from
/// its blob while git still calls it clean? Then a hash mismatch is not proof of a change.
fn filters_possible(repo: &gix::Repository, index: &gix::index::File) -> bool {
    let config = repo.config_snapshot();
    let autocrlf = config.string("core.autocrlf").map(|v| v.to_str_lossy().to_lowercase());
    if autocrlf.is_some_and(|v| v == "true" || v == "input") || config.string("core.eol").is_some() {
        return true;
    }
    if config.string("core.attributesFile").is_some() || repo.common_dir().join("info/attributes").exists() {
        return true;
    }
    index.entries().iter().any(|e| {
        let p = e.path(index);
        p == ".gitattributes" || p.ends_with(b"/.gitattributes")
    })
}

fn blob_hash(kind: gix::hash::Kind, data: &[u8]) -> Option<ObjectId> {
    gix::objs::compute_hash(kind, gix::objs::Kind::Blob, data).ok()
}

/// The fast check of the worktree at `wt`; `trees` caches flattened HEAD trees between worktrees.
///
/// With `core.fsmonitor` naming a hook, the monitor is asked first: when the worktree was found
/// clean before (same HEAD, index and ignore files) and the monitor reports no change since, it
/// is clean without looking at any file; reported paths alone are looked at. Anything else (no
/// earlier clean check, the monitor answering "everything", or failing) runs the full check.
pub fn fast(repo: &Repo, wt: &Path, trees: &Trees) -> Result<Fast> {
    let Some(git_dir) = git_dir_of(wt) else { return Ok(Fast::Unsure) };
    let Some(head) = head_of(repo, &git_dir) else { return Ok(Fast::Unsure) };
    match super::fsmonitor::hook(&repo.repo) {
        Some(hook) => monitored(repo, wt, trees, &git_dir, head, &hook),
        None => check(repo, wt, trees, &git_dir, head),
    }
}

/// A file system monitor asked once for every worktree below the main worktree (the default
/// place of stream worktrees, `.boulder/worktrees/`): the hook runs once, in the main worktree,
/// and each worktree takes the paths below it. Kept in `$GIT_COMMON_DIR/boulder/fsmonitor.json`:
/// the token of the last such question, and the worktrees found clean right after it (by path,
/// with what that was valid for, as [`CleanMark`]).
pub struct Monitor {
    /// The main worktree, where the hook runs.
    root: PathBuf,
    /// The question under way, until its answer is waited for.
    pending: Mutex<Option<super::fsmonitor::Pending>>,
    /// Its answer, once waited for; `None` when it failed.
    answer: std::sync::OnceLock<Option<super::fsmonitor::Changes>>,
    /// The worktrees found clean after the previous question.
    before: HashMap<String, Found>,
    /// The worktrees found clean after this one.
    now: Mutex<HashMap<String, Found>>,
    path: PathBuf,
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct SharedMark {
    token: String,
    /// Worktree path → what finding it clean was valid for.
    clean: HashMap<String, Found>,
}

impl Monitor {
    /// Whether `core.fsmonitor` names a hook (nothing is run).
    pub fn configured(repo: &Repo) -> bool {
        super::fsmonitor::hook(&repo.repo).is_some()
    }

    /// Start asking the `core.fsmonitor` hook, if one is set and the repository has a main
    /// worktree, what changed since the last question. The hook runs while the caller goes on;
    /// the checks that need its answer wait for it.
    pub fn ask(repo: &Repo) -> Option<Monitor> {
        let hook = super::fsmonitor::hook(&repo.repo)?;
        let root = repo.main_work_dir.clone()?;
        let path = repo.common_dir.join("boulder").join("fsmonitor.json");
        let mark: SharedMark =
            std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        let asked = if mark.token.is_empty() { NO_TOKEN } else { mark.token.as_str() };
        crate::trace::line("dirty: the file system monitor is asked (once, in the main worktree)");
        let pending = super::fsmonitor::start(&hook, &root, asked);
        Some(Monitor {
            root,
            pending: Mutex::new(Some(pending)),
            answer: std::sync::OnceLock::new(),
            before: mark.clean,
            now: Mutex::new(HashMap::new()),
            path,
        })
    }

    /// The monitor's answer, waiting for it the first time.
    fn answer(&self) -> Option<&super::fsmonitor::Changes> {
        self.answer
            .get_or_init(|| {
                let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner()).take();
                let _span = crate::trace::span("dirty: wait for the file system monitor's answer");
                let answer = pending.and_then(super::fsmonitor::Pending::answer);
                if answer.is_none() {
                    crate::trace::line("the file system monitor did not answer; full checks");
                }
                answer
            })
            .as_ref()
    }

    /// Keep the token of this question and the worktrees found clean after it.
    pub fn keep(&self) {
        let Some(answer) = self.answer() else {
            let _ = std::fs::remove_file(&self.path);
            return;
        };
        let clean = self.now.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Ok(text) = serde_json::to_vec(&SharedMark { token: answer.token.clone(), clean }) {
            if let Some(dir) = self.path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = crate::fsutil::write_atomic(&self.path, &text);
        }
    }

    /// The paths the monitor reports below the worktree `wt` (relative to it), or `None` when it
    /// cannot say (no answer, "everything", a change to a folder holding the worktree, or a
    /// worktree that is not below the main worktree).
    fn below(&self, wt: &Path) -> Option<Vec<BString>> {
        let answer = self.answer().filter(|a| !a.everything)?;
        let rel = wt.strip_prefix(&self.root).ok()?;
        let rel = gix::path::os_str_into_bstr(rel.as_os_str()).ok()?.to_owned();
        if rel.is_empty() {
            return None;
        }
        let mut prefix = rel.clone();
        prefix.push(b'/');
        let mut out = Vec::new();
        for p in &answer.paths {
            let bare: &[u8] = p.strip_suffix(b"/").unwrap_or(p);
            if let Some(inner) = p.strip_prefix(prefix.as_slice()) {
                if !inner.is_empty() && inner != b".git" && !inner.starts_with(b".git/") {
                    out.push(inner.into());
                }
            } else if bare == rel.as_slice() {
                // The worktree's own folder changed (an entry came or went): look for untracked files.
                out.push(BString::default());
            } else if prefix.starts_with(bare) && prefix.get(bare.len()) == Some(&b'/') {
                // A folder holding the worktree changed: look at everything.
                return None;
            }
        }
        Some(out)
    }
}

/// [`fast`] for one of many worktrees, with the file system monitor asked once for all of them
/// (see [`Monitor`]); worktrees it cannot speak for ask their own.
pub fn fast_with(repo: &Repo, wt: &Path, trees: &Trees, monitor: Option<&Monitor>) -> Result<Fast> {
    let Some(m) = monitor.filter(|m| wt.starts_with(&m.root) && wt != m.root) else { return fast(repo, wt, trees) };
    let Some(git_dir) = git_dir_of(wt) else { return Ok(Fast::Unsure) };
    let Some(head) = head_of(repo, &git_dir) else { return Ok(Fast::Unsure) };
    let g = &repo.repo;
    let name = wt.to_string_lossy().into_owned();
    // Whether what held when it was last found clean still holds (HEAD, ignore files, index
    // entries) does not depend on the monitor's answer: looked at while the hook runs.
    let still = m.before.get(&name).and_then(|before| Found::again(g, &git_dir, head, before));
    let (decided, found) = match (m.below(wt), still) {
        (Some(paths), Some(found)) => {
            crate::trace::line(&format!("dirty: the monitor reports {} changed paths in {name}", paths.len()));
            (reported(g, wt, &git_dir, &paths)?, Some(found))
        }
        _ => full_check(repo, wt, trees, &git_dir, head)?,
    };
    if let (Fast::Clean, Some(found), Some(_)) = (decided, found, m.answer()) {
        m.now.lock().unwrap_or_else(|e| e.into_inner()).insert(name, found);
    }
    Ok(decided)
}

/// What finding a worktree clean is valid for: HEAD and the ignore files outside the tree
/// (`base`), and the index — its file's size and time (`stamp`), and a digest of its entries
/// (`entries`: paths, ids, modes, flags, stat data), so that git rewriting the index for its own
/// caches (the fsmonitor token, the untracked cache) does not count as a change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Found {
    base: String,
    stamp: String,
    entries: u64,
}

impl Found {
    fn base_and_stamp(g: &gix::Repository, git_dir: &Path, head: ObjectId) -> (String, String) {
        let key = cache_key(g, git_dir);
        // The index's stamp comes first in the cache key. An index written within the last two
        // seconds has no usable stamp: git can write it again with the same size within the
        // same tick of the file system's clock, so its entries are compared instead.
        let (stamp, rest) = key.split_once(' ').unwrap_or((key.as_str(), ""));
        let stamp = if dir_mtime(&git_dir.join("index")).is_some() { stamp } else { RECENT };
        (format!("{head} {rest}"), stamp.to_string())
    }

    /// Taken before a full check: read before the check reads the index, so a later change of
    /// the index shows as a different digest.
    fn now(g: &gix::Repository, git_dir: &Path, head: ObjectId) -> Option<Found> {
        let (base, stamp) = Self::base_and_stamp(g, git_dir, head);
        Some(Found { base, stamp, entries: entries_digest(g, git_dir)? })
    }

    /// `before` still holds (the same HEAD and ignore files, the same index entries): what holds now.
    fn again(g: &gix::Repository, git_dir: &Path, head: ObjectId, before: &Found) -> Option<Found> {
        let (base, stamp) = Self::base_and_stamp(g, git_dir, head);
        if base != before.base {
            return None;
        }
        if stamp == before.stamp && stamp != RECENT {
            return Some(before.clone());
        }
        let entries = entries_digest(g, git_dir)?;
        (entries == before.entries).then_some(Found { base, stamp, entries })
    }
}

/// The stamp of an index too recent to be told apart from its next version by size and time.
const RECENT: &str = "recent";

/// A digest of the index's entries (not its extensions).
fn entries_digest(g: &gix::Repository, git_dir: &Path) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let index = gix::index::File::at(git_dir.join("index"), g.object_hash(), true, Default::default()).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for e in index.entries() {
        e.path(&index).hash(&mut h);
        e.id.hash(&mut h);
        (e.mode.bits(), e.flags.bits()).hash(&mut h);
        let st = &e.stat;
        (st.mtime.secs, st.mtime.nsecs, st.ctime.secs, st.ctime.nsecs, st.dev, st.ino, st.size).hash(&mut h);
    }
    Some(h.finish())
}

/// The full check, with what finding the worktree clean would be valid for, taken before it.
fn full_check(repo: &Repo, wt: &Path, trees: &Trees, git_dir: &Path, head: ObjectId) -> Result<(Fast, Option<Found>)> {
    let found = Found::now(&repo.repo, git_dir, head);
    Ok((check(repo, wt, trees, git_dir, head)?, found))
}

/// The token a monitor was last asked with when the worktree was found clean, and what that was
/// valid for ([`Found`]), kept in the worktree's git dir.
#[derive(serde::Serialize, serde::Deserialize)]
struct CleanMark {
    found: Found,
    token: String,
}

/// The token git asks a monitor with when it has none of its own.
const NO_TOKEN: &str = "builtin:fake";

/// [`fast`] with a file system monitor hook.
fn monitored(repo: &Repo, wt: &Path, trees: &Trees, git_dir: &Path, head: ObjectId, hook: &str) -> Result<Fast> {
    let g = &repo.repo;
    let mark_path = git_dir.join("boulder-fsmonitor.json");
    // Taken before anything is looked at, so a change made meanwhile is reported next time.
    let mark: Option<CleanMark> = std::fs::read(&mark_path).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let asked = mark.as_ref().map_or(NO_TOKEN, |m| m.token.as_str());
    let span = crate::trace::span("dirty: ask the file system monitor");
    let changes = super::fsmonitor::query(hook, wt, asked);
    drop(span);
    let Some(changes) = changes else {
        crate::trace::line(&format!("{}: the file system monitor did not answer; full check", wt.display()));
        let _ = std::fs::remove_file(&mark_path);
        return check(repo, wt, trees, git_dir, head);
    };
    let remember = |found: Found, token: &str| {
        if let Ok(text) = serde_json::to_vec(&CleanMark { found, token: token.to_string() }) {
            let _ = crate::fsutil::write_atomic(&mark_path, &text);
        }
    };
    let still = mark.as_ref().filter(|_| !changes.everything).and_then(|m| Found::again(g, git_dir, head, &m.found));
    if let Some(found) = still {
        crate::trace::line(&format!("dirty: the monitor reports {} changed paths", changes.paths.len()));
        let decided = reported(g, wt, git_dir, &changes.paths)?;
        if decided == Fast::Clean {
            remember(found, &changes.token);
        }
        return Ok(decided);
    }
    let (decided, found) = full_check(repo, wt, trees, git_dir, head)?;
    match (decided, found) {
        (Fast::Clean, Some(found)) => remember(found, &changes.token),
        _ => {
            let _ = std::fs::remove_file(&mark_path);
        }
    }
    Ok(decided)
}

/// Whether a worktree found clean before (same HEAD, index and ignore files) is still clean, given
/// the paths a monitor reports changed since: each tracked file among them (or below a reported
/// folder) is compared with its index entry, and any other path means a look for untracked files.
fn reported(g: &gix::Repository, wt: &Path, git_dir: &Path, paths: &[BString]) -> Result<Fast> {
    if paths.is_empty() {
        return Ok(Fast::Clean);
    }
    let index_path = git_dir.join("index");
    let index_mtime = match std::fs::metadata(&index_path).and_then(|m| m.modified()) {
        Ok(t) => gix::index::entry::stat::Time::try_from(t).ok(),
        Err(_) => return Ok(Fast::Unsure),
    };
    let Ok(index) = gix::index::File::at(&index_path, g.object_hash(), true, Default::default()) else {
        return Ok(Fast::Unsure);
    };
    let entries = index.entries();
    let mut look = Look::new(g, wt, &index, index_mtime);
    // Folders to look at for untracked files: (folder, with the tracked folders below it).
    let mut folders: Vec<(Vec<u8>, bool)> = Vec::new();
    let below = |p: &[u8]| -> &[gix::index::Entry] {
        let mut prefix = p.to_vec();
        prefix.push(b'/');
        let start = entries.partition_point(|e| e.path(&index) < prefix.as_bstr());
        let len = entries[start..].partition_point(|e| e.path(&index).starts_with(&prefix));
        &entries[start..start + len]
    };
    for p in paths {
        let p: &[u8] = p.as_slice();
        let p = p.strip_suffix(b"/").unwrap_or(p);
        if let Some(e) = index.entry_by_path(p.as_bstr()) {
            if let Some(decided) = look.entry(e) {
                return Ok(decided);
            }
            continue;
        }
        if p.is_empty() {
            // The worktree's own folder: an entry came or went there.
            folders.push((Vec::new(), false));
            continue;
        }
        let inside = below(p);
        if !inside.is_empty() {
            // A folder of tracked files: each of them, and untracked files anywhere below it.
            for e in inside {
                if let Some(decided) = look.entry(e) {
                    return Ok(decided);
                }
            }
            folders.push((p.to_vec(), true));
            continue;
        }
        // A path the index lacks: whatever is untracked there shows in the entries of the
        // deepest tracked folder holding it (a new folder's files are looked for inside it).
        let mut at = p;
        let holder = loop {
            match at.rfind_byte(b'/') {
                Some(i) if !below(&at[..i]).is_empty() => break at[..i].to_vec(),
                Some(i) => at = &at[..i],
                None => break Vec::new(),
            }
        };
        folders.push((holder, false));
    }
    if !folders.is_empty() {
        folders.sort();
        folders.dedup();
        let show = g.config_snapshot().string("status.showUntrackedFiles").map(|v| v.to_str_lossy().to_lowercase());
        if show.as_deref() != Some("no") && untracked_from(wt, git_dir, g, &index, &folders)? {
            return Ok(Fast::Dirty);
        }
    }
    Ok(Fast::Clean)
}

/// The full check of the worktree at `wt` (git dir `git_dir`, HEAD at `head`).
fn check(repo: &Repo, wt: &Path, trees: &Trees, git_dir: &Path, head: ObjectId) -> Result<Fast> {
    use gix::index::entry::{Flags, Mode, Stage};
    let git_dir = git_dir.to_path_buf();
    let g = &repo.repo;
    let head_tree = match g.find_commit(head).and_then(|c| c.tree_id().map(|t| t.detach())) {
        Ok(t) => t,
        Err(_) => return Ok(Fast::Unsure),
    };
    let index_path = git_dir.join("index");
    let index_mtime = match std::fs::metadata(&index_path).and_then(|m| m.modified()) {
        Ok(t) => gix::index::entry::stat::Time::try_from(t).ok(),
        Err(_) => return Ok(Fast::Unsure),
    };
    let index = match gix::index::File::at(&index_path, g.object_hash(), true, Default::default()) {
        Ok(i) => i,
        Err(_) => return Ok(Fast::Unsure),
    };
    // 1. Staged: the index must list exactly HEAD's tree.
    let span = crate::trace::span("dirty: flatten HEAD's tree");
    let flat = trees.get(g, head_tree)?;
    drop(span);
    let span = crate::trace::span("dirty: index vs HEAD, lstat of every tracked file");
    let entries = index.entries();
    if entries.len() != flat.len() {
        return Ok(Fast::Dirty);
    }
    for (e, (path, id, mode)) in entries.iter().zip(flat.iter()) {
        if e.mode == Mode::DIR {
            return Ok(Fast::Unsure); // a sparse index
        }
        if e.stage() != Stage::Unconflicted || e.flags.contains(Flags::INTENT_TO_ADD) {
            return Ok(Fast::Dirty);
        }
        if e.path(&index) != path.as_bstr() || e.id != *id || e.mode.bits() != *mode {
            return Ok(Fast::Dirty);
        }
    }
    // 2. Modified: stat, then content where the stat cannot tell.
    let mut look = Look::new(g, wt, &index, index_mtime);
    for e in entries {
        if let Some(decided) = look.entry(e) {
            return Ok(decided);
        }
    }
    drop(span);
    if look.hashed > 0 {
        crate::trace::line(&format!("dirty: {} files read and hashed (stat changed or racily clean)", look.hashed));
    }
    // 3. Untracked (unless git is told not to show them).
    let _span = crate::trace::span("dirty: untracked walk");
    let show = g.config_snapshot().string("status.showUntrackedFiles").map(|v| v.to_str_lossy().to_lowercase());
    if show.as_deref() == Some("no") {
        return Ok(Fast::Clean);
    }
    if untracked(wt, &git_dir, g, &index)? {
        return Ok(Fast::Dirty);
    }
    Ok(Fast::Clean)
}

/// Comparing tracked files on disk with their index entries: stat, then content where the stat
/// cannot tell.
struct Look<'a> {
    g: &'a gix::Repository,
    wt: &'a Path,
    index: &'a gix::index::File,
    index_mtime: Option<gix::index::entry::stat::Time>,
    opts: gix::index::entry::stat::Options,
    filemode: bool,
    filters: Option<bool>,
    dirs: DirCache<'a>,
    /// Files read and hashed so far.
    hashed: usize,
}

impl<'a> Look<'a> {
    fn new(
        g: &'a gix::Repository,
        wt: &'a Path,
        index: &'a gix::index::File,
        index_mtime: Option<gix::index::entry::stat::Time>,
    ) -> Self {
        Look {
            g,
            wt,
            index,
            index_mtime,
            opts: gix::index::entry::stat::Options::default(),
            filemode: g.config_snapshot().boolean("core.fileMode").unwrap_or(true),
            filters: None,
            dirs: DirCache::new(wt),
            hashed: 0,
        }
    }

    /// `None` when the file is as its entry says; else what that makes the worktree.
    fn entry(&mut self, e: &gix::index::Entry) -> Option<Fast> {
        use gix::index::entry::{Flags, Mode};
        if e.flags.contains(Flags::SKIP_WORKTREE) || e.flags.contains(Flags::ASSUME_VALID) || e.mode == Mode::COMMIT {
            return None;
        }
        let rel = e.path(self.index);
        let meta = match self.dirs.lstat(rel) {
            Ok(m) => m,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Some(Fast::Dirty),
            Err(_) => return Some(Fast::Unsure),
        };
        let is_link = e.mode == Mode::SYMLINK;
        if meta.is_link != is_link || meta.is_dir {
            return Some(Fast::Dirty);
        }
        if self.filemode && !is_link && meta.executable != (e.mode == Mode::FILE_EXECUTABLE) {
            return Some(Fast::Dirty);
        }
        let racy = self.index_mtime.is_none_or(|t| e.stat.mtime >= t);
        if e.stat.matches(&meta.stat, self.opts) && !racy {
            return None;
        }
        self.hashed += 1;
        let Some(full) = gix::path::from_bstr(rel).ok().map(|p| self.wt.join(p)) else { return Some(Fast::Unsure) };
        let data = if is_link {
            match std::fs::read_link(&full).ok().and_then(|t| gix::path::into_bstr(t).ok().map(|b| b.into_owned())) {
                Some(b) => b.into(),
                None => return Some(Fast::Unsure),
            }
        } else {
            match std::fs::read(&full) {
                Ok(d) => d,
                Err(_) => return Some(Fast::Unsure),
            }
        };
        if blob_hash(self.g.object_hash(), &data) == Some(e.id) {
            return None;
        }
        let (g, index) = (self.g, self.index);
        if *self.filters.get_or_insert_with(|| filters_possible(g, index)) {
            return Some(Fast::Unsure);
        }
        Some(Fast::Dirty)
    }
}

/// What one `lstat` says about a tracked path.
struct Meta {
    is_link: bool,
    is_dir: bool,
    executable: bool,
    stat: gix::index::entry::Stat,
}

/// `lstat` of paths relative to a worktree, relative to an open handle of their folder: index
/// entries come sorted, so consecutive paths share the folder, and the kernel resolves one name
/// instead of the whole absolute path each time.
struct DirCache<'a> {
    wt: &'a Path,
    #[cfg(unix)]
    current: Option<(BString, rustix::fd::OwnedFd)>,
}

impl<'a> DirCache<'a> {
    fn new(wt: &'a Path) -> Self {
        DirCache {
            wt,
            #[cfg(unix)]
            current: None,
        }
    }

    #[cfg(unix)]
    fn lstat(&mut self, rel: &BStr) -> std::io::Result<Meta> {
        use rustix::fs::{AtFlags, FileType, Mode, OFlags};
        use std::os::unix::ffi::OsStrExt;
        let bytes: &[u8] = rel;
        let (dir, name) = match bytes.rfind_byte(b'/') {
            Some(i) => (&bytes[..i], &bytes[i + 1..]),
            None => (&b""[..], bytes),
        };
        if self.current.as_ref().is_none_or(|(d, _)| d.as_slice() != dir) {
            self.current = None;
            let path = self.wt.join(std::ffi::OsStr::from_bytes(dir));
            let fd = rustix::fs::open(&path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
            self.current = Some((dir.into(), fd));
        }
        let (_, fd) = self.current.as_ref().expect("opened above");
        let st = rustix::fs::statat(fd, std::ffi::OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW)?;
        let kind = FileType::from_raw_mode(st.st_mode as _);
        let time = |secs: i64, nsecs: i64| gix::index::entry::stat::Time { secs: secs as u32, nsecs: nsecs as u32 };
        Ok(Meta {
            is_link: kind == FileType::Symlink,
            is_dir: kind == FileType::Directory,
            executable: st.st_mode as u32 & 0o100 != 0,
            stat: gix::index::entry::Stat {
                mtime: time(st.st_mtime as i64, st.st_mtime_nsec as i64),
                ctime: time(st.st_ctime as i64, st.st_ctime_nsec as i64),
                dev: st.st_dev as u32,
                ino: st.st_ino as u32,
                uid: st.st_uid,
                gid: st.st_gid,
                size: st.st_size as u32,
            },
        })
    }

    #[cfg(not(unix))]
    fn lstat(&mut self, rel: &BStr) -> std::io::Result<Meta> {
        let path = gix::path::from_bstr(rel).map_err(|e| std::io::Error::other(e.to_string()))?;
        let m = gix::index::fs::Metadata::from_path_no_follow(&self.wt.join(path))?;
        Ok(Meta {
            is_link: m.is_symlink(),
            is_dir: m.is_dir(),
            executable: m.is_executable(),
            stat: gix::index::entry::Stat::from_fs(&m).map_err(|e| std::io::Error::other(e.to_string()))?,
        })
    }
}

/// Is there an untracked, not ignored file (or nested repository) in the worktree? Only names the
/// index lacks are asked about the ignore rules (read lazily, so a clean worktree never opens them).
fn untracked(wt: &Path, git_dir: &Path, repo: &gix::Repository, index: &gix::index::File) -> Result<bool> {
    untracked_from(wt, git_dir, repo, index, &[(Vec::new(), true)])
}

/// The tracked names directly in the folder `dir` (relative, `/`-separated, empty for the root):
/// its files (and gitlinks) and its sub-folders, found in the sorted index without hashing every
/// path (the entries below a folder are contiguous, and so are those of each sub-folder).
fn tracked_in<'i>(index: &'i gix::index::File, dir: &[u8]) -> (Vec<&'i [u8]>, Vec<&'i [u8]>) {
    let entries = index.entries();
    let path = |e: &gix::index::Entry| -> &'i [u8] { e.path(index) };
    let (range, skip) = if dir.is_empty() {
        (entries, 0)
    } else {
        let mut prefix = dir.to_vec();
        prefix.push(b'/');
        let start = entries.partition_point(|e| path(e) < prefix.as_slice());
        let len = entries[start..].partition_point(|e| path(e).starts_with(&prefix));
        (&entries[start..start + len], prefix.len())
    };
    let (mut files, mut dirs): (Vec<&[u8]>, Vec<&[u8]>) = (Vec::new(), Vec::new());
    for e in range {
        let rest = &path(e)[skip..];
        match rest.find_byte(b'/') {
            None => files.push(rest),
            Some(i) if dirs.last() != Some(&&rest[..i]) => dirs.push(&rest[..i]),
            Some(_) => {}
        }
    }
    (files, dirs)
}

/// [`untracked`] looking only at the folders `start` (relative; with `true`, also at the tracked
/// folders below them, else only at their own entries and the untracked folders among them).
/// The folders found free of untracked files are remembered only by a walk of the whole worktree.
fn untracked_from(
    wt: &Path,
    git_dir: &Path,
    repo: &gix::Repository,
    index: &gix::index::File,
    start: &[(Vec<u8>, bool)],
) -> Result<bool> {
    let whole = start.len() == 1 && start[0].0.is_empty() && start[0].1;
    let mut excludes: Option<gix::AttributeStack<'_>> = None;
    let wt_repo = std::cell::OnceCell::new();
    let mut excluded = |rel: &[u8], dir: bool| -> Result<bool> {
        if excludes.is_none() {
            let repo = match wt_repo.get() {
                Some(r) => r,
                None => {
                    let r = gix::open(wt)
                        .map_err(|e| Error::internal(format!("cannot open {}: {e}", wt.display())).with_source(e))?;
                    wt_repo.get_or_init(|| r)
                }
            };
            excludes = Some(
                repo.excludes(
                    index,
                    None,
                    gix::worktree::stack::state::ignore::Source::WorktreeThenIdMappingIfNotSkipped,
                )
                .map_err(|e| Error::internal(format!("cannot read ignore rules: {e}")).with_source(e))?,
            );
        }
        let Ok(p) = gix::path::from_bstr(rel.as_bstr()) else { return Ok(false) };
        let mode = dir.then_some(gix::index::entry::Mode::DIR);
        let stack = excludes.as_mut().expect("made above");
        Ok(stack.at_path(&*p, mode).map(|pl| pl.is_excluded()).unwrap_or(false))
    };
    // Folders to look at: (path, known to the index, descend into its tracked sub-folders).
    let cache_path = git_dir.join("boulder-untracked.json");
    let key = cache_key(repo, git_dir);
    let cached = read_cache(&cache_path, &key);
    let mut seen: HashMap<Vec<u8>, String> = HashMap::new();
    let mut todo: Vec<(Vec<u8>, bool, bool)> = start.iter().map(|(d, deep)| (d.clone(), true, *deep)).collect();
    while let Some((dir, known, deep)) = todo.pop() {
        let Ok(rd_path) = gix::path::from_bstr(dir.as_bstr()) else { continue };
        let abs = wt.join(&*rd_path);
        let (files, dirs) = if known { tracked_in(index, &dir) } else { Default::default() };
        if known {
            // A tracked folder whose mtime is what it was when it last held nothing untracked has
            // the same names now (adding, removing or renaming an entry changes its mtime).
            if let Some(m) = dir_mtime(&abs) {
                let unchanged = cached.get(dir.as_slice()) == Some(&m);
                seen.insert(dir.clone(), m);
                if unchanged {
                    if deep {
                        for sub in &dirs {
                            todo.push((join(&dir, sub), true, true));
                        }
                    }
                    continue;
                }
            }
        }
        let (files, dirs): (HashSet<&[u8]>, HashSet<&[u8]>) = (files.into_iter().collect(), dirs.into_iter().collect());
        let Ok(read) = std::fs::read_dir(&abs) else { continue };
        for entry in read.flatten() {
            let os_name = entry.file_name();
            let Ok(name) = gix::path::os_str_into_bstr(&os_name) else { continue };
            let name: &[u8] = name;
            if name == b".git" {
                continue;
            }
            let Ok(ft) = entry.file_type() else { continue };
            let is_dir = ft.is_dir();
            if known && (if is_dir { dirs.contains(name) } else { files.contains(name) }) {
                if is_dir && deep {
                    todo.push((join(&dir, name), true, true));
                }
                continue;
            }
            if known && is_dir && files.contains(name) {
                // A submodule (a gitlink entry): its folder is tracked as a whole. (A tracked file
                // replaced by a folder was already reported by the stat pass.)
                continue;
            }
            let rel = join(&dir, name);
            if excluded(&rel, is_dir)? {
                continue;
            }
            if !is_dir {
                return Ok(true);
            }
            if entry.path().join(".git").exists() {
                return Ok(true); // an untracked nested repository
            }
            todo.push((rel, false, true));
        }
    }
    // Written only when it says something new: a clean worktree checked again costs no write.
    if whole && seen != cached {
        write_cache(&cache_path, &key, seen);
    }
    Ok(false)
}

/// What the untracked-folder cache is valid for: the index and the ignore rules that are not
/// tracked files (tracked `.gitignore` files changing would show as modified anyway).
fn cache_key(repo: &gix::Repository, git_dir: &Path) -> String {
    let stamp = |p: &Path| match std::fs::metadata(p) {
        Ok(m) => format!("{}:{}", m.len(), dir_time(&m)),
        Err(_) => "-".into(),
    };
    let mut key = vec![stamp(&git_dir.join("index")), stamp(&repo.common_dir().join("info/exclude"))];
    let config = repo.config_snapshot();
    if let Ok(Some(f)) = config.trusted_path("core.excludesFile") {
        key.push(stamp(&f));
    }
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    if let Some(x) = xdg {
        key.push(stamp(&x.join("git/ignore")));
    }
    key.join(" ")
}

fn dir_time(m: &std::fs::Metadata) -> String {
    match m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()) {
        Some(d) => format!("{}.{:09}", d.as_secs(), d.subsec_nanos()),
        None => "?".into(),
    }
}

/// A folder's mtime, unless it is too recent to trust (changed within the last two seconds, when
/// a change made right after reading it could keep the same timestamp).
fn dir_mtime(p: &Path) -> Option<String> {
    let m = std::fs::metadata(p).ok()?;
    let t = m.modified().ok()?;
    if std::time::SystemTime::now().duration_since(t).map_or(true, |age| age.as_secs_f64() < 2.0) {
        return None;
    }
    Some(dir_time(&m))
}

#[derive(serde::Serialize, serde::Deserialize)]
struct UntrackedCache {
    key: String,
    /// Folder (relative, `/`-separated; empty for the root) → mtime when it held nothing untracked.
    dirs: HashMap<String, String>,
}

fn read_cache(path: &Path, key: &str) -> HashMap<Vec<u8>, String> {
    let Ok(bytes) = std::fs::read(path) else { return HashMap::new() };
    match serde_json::from_slice::<UntrackedCache>(&bytes) {
        Ok(c) if c.key == key => c.dirs.into_iter().map(|(k, v)| (k.into_bytes(), v)).collect(),
        _ => HashMap::new(),
    }
}

/// Remember the folders of a worktree found free of untracked files (best effort: a worktree
/// whose git dir is read-only just does not get the cache).
fn write_cache(path: &Path, key: &str, dirs: HashMap<Vec<u8>, String>) {
    let dirs: HashMap<String, String> =
        dirs.into_iter().filter_map(|(k, v)| String::from_utf8(k).ok().map(|k| (k, v))).collect();
    if let Ok(text) = serde_json::to_vec(&UntrackedCache { key: key.to_string(), dirs }) {
        let _ = crate::fsutil::write_atomic(path, &text);
    }
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        return name.to_vec();
    }
    let mut v = Vec::with_capacity(dir.len() + 1 + name.len());
    v.extend_from_slice(dir);
    v.push(b'/');
    v.extend_from_slice(name);
    v
}
