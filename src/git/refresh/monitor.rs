//! A `core.fsmonitor` hook asked what changed since a worktree was last found clean, for one
//! worktree or once for all the worktrees below the main one ([`Monitor`]), and what finding it
//! clean was valid for ([`Found`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use gix::bstr::{BString, ByteSlice};

use super::look::Look;
use super::untracked::{cache_key, dir_mtime, untracked_from};
use super::{check, fast, git_dir_of, head_of, Fast, Trees};
use crate::error::Result;
use crate::git::{ObjectId, Repo};

/// A file system monitor asked once for every worktree below the main worktree (the default
/// place of stream worktrees, `.boulder/worktrees/`): the hook runs once, in the main worktree,
/// and each worktree takes the paths below it. Kept in `$GIT_COMMON_DIR/boulder/fsmonitor.json`:
/// the token of the last such question, and the worktrees found clean right after it (by path,
/// with what that was valid for, as [`CleanMark`]).
pub struct Monitor {
    /// The main worktree, where the hook runs.
    root: PathBuf,
    /// The question under way, until its answer is waited for.
    pending: Mutex<Option<crate::git::fsmonitor::Pending>>,
    /// Its answer, once waited for; `None` when it failed.
    answer: std::sync::OnceLock<Option<crate::git::fsmonitor::Changes>>,
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
        crate::git::fsmonitor::hook(&repo.repo).is_some()
    }

    /// Start asking the `core.fsmonitor` hook, if one is set and the repository has a main
    /// worktree, what changed since the last question. The hook runs while the caller goes on;
    /// the checks that need its answer wait for it.
    pub fn ask(repo: &Repo) -> Option<Monitor> {
        let hook = crate::git::fsmonitor::hook(&repo.repo)?;
        let root = repo.main_work_dir.clone()?;
        let path = repo.common_dir.join("boulder").join("fsmonitor.json");
        let mark: SharedMark =
            std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        let asked = if mark.token.is_empty() { NO_TOKEN } else { mark.token.as_str() };
        crate::trace::line("dirty: the file system monitor is asked (once, in the main worktree)");
        let pending = crate::git::fsmonitor::start(&hook, &root, asked);
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
    fn answer(&self) -> Option<&crate::git::fsmonitor::Changes> {
        self.answer
            .get_or_init(|| {
                let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner()).take();
                let _span = crate::trace::span("dirty: wait for the file system monitor's answer");
                let answer = pending.and_then(crate::git::fsmonitor::Pending::answer);
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
pub(super) fn monitored(
    repo: &Repo,
    wt: &Path,
    trees: &Trees,
    git_dir: &Path,
    head: ObjectId,
    hook: &str,
) -> Result<Fast> {
    let g = &repo.repo;
    let mark_path = git_dir.join("boulder-fsmonitor.json");
    // Taken before anything is looked at, so a change made meanwhile is reported next time.
    let mark: Option<CleanMark> = std::fs::read(&mark_path).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let asked = mark.as_ref().map_or(NO_TOKEN, |m| m.token.as_str());
    let span = crate::trace::span("dirty: ask the file system monitor");
    let changes = crate::git::fsmonitor::query(hook, wt, asked);
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
