//! Is there an untracked, not ignored file? A walk of the folders that asks the ignore rules
//! only about names the index lacks, remembering by mtime the folders found free of them.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;

use crate::error::{Error, Result};

/// Is there an untracked, not ignored file (or nested repository) in the worktree? Only names the
/// index lacks are asked about the ignore rules (read lazily, so a clean worktree never opens them).
pub(super) fn untracked(wt: &Path, git_dir: &Path, repo: &gix::Repository, index: &gix::index::File) -> Result<bool> {
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
pub(super) fn untracked_from(
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
pub(super) fn cache_key(repo: &gix::Repository, git_dir: &Path) -> String {
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
pub(super) fn dir_mtime(p: &Path) -> Option<String> {
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
