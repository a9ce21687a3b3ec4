//! `agent install|uninstall|status`: the harness files, merged into what is there.
//!
//! Install writes one untracked file per worktree (the main worktree and every linked worktree
//! git knows, stream worktrees among them), keeps it out of `git status` with one line in
//! `$GIT_COMMON_DIR/info/exclude`, and remembers per machine, in `$GIT_COMMON_DIR/boulder/`:
//! * `agents.json` — which harnesses are installed, and per file: the worktree, whether the file
//!   existed before, and the id of the bytes install wrote;
//! * `agents/<harness>/<key>.before` — the bytes a file had before install.
//!
//! Uninstall puts back exactly those bytes (or deletes the file, and the folders install made)
//! when the file is still what install wrote; when someone changed it since, it takes out only
//! git-boulder's entries. `stream init` calls [`into_new_worktree`] so a new stream worktree gets
//! every installed harness. `--commit` is the project-level choice: the tracked project file of
//! the current worktree, merged and committed with git.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::codex_trust::{self, Trust};
use super::files::{self, FileError, Presence, Removal};
use super::Harness;
use crate::error::{Error, Result};
use crate::fsutil::write_atomic;
use crate::git::Repo;

mod status;
pub use status::{problems, status, FileStatus, HarnessStatus, Status, TrustReport};

const RECORD: &str = "agents.json";
const BACKUPS: &str = "agents";

/// What this machine installed, as kept in `agents.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    version: u32,
    #[serde(default)]
    harnesses: BTreeMap<String, Installed>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Installed {
    /// The exclude line was added by install (so uninstall takes it out).
    #[serde(default)]
    excluded: bool,
    #[serde(default)]
    files: Vec<FileRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileRecord {
    worktree: PathBuf,
    file: String,
    /// The file existed before install.
    existed: bool,
    /// Its bytes before install, under `agents/` (none when it did not exist, or when the file
    /// already held git-boulder's entries: uninstall then takes out only those).
    backup: Option<String>,
    /// The blob id of the bytes install wrote.
    wrote: String,
    /// Folders install made for the file, deepest last.
    #[serde(default)]
    created_dirs: Vec<String>,
}

/// What install or uninstall did, one line per change, for the user.
#[derive(Debug, Default)]
pub struct Report {
    pub changes: Vec<String>,
    pub warnings: Vec<String>,
}

/// A file install means to write.
struct Planned {
    worktree: PathBuf,
    before: Option<Vec<u8>>,
    after: Vec<u8>,
    /// Keep `before` for uninstall to restore. Not when the file already held entries of
    /// git-boulder's (found there, or of an older version): uninstall then takes out only those.
    keep_before: bool,
    /// Write `after` (false: the file holds our entries already and is only recorded).
    write: bool,
    /// The file is still what an earlier install wrote, of another git-boulder version (a stale
    /// command, an older plugin): its record carries on — the copy of what was there before that
    /// install, whether the file existed, the folders made — so uninstall still restores it.
    refresh: Option<FileRecord>,
}

fn record_path(repo: &Repo) -> PathBuf {
    repo.boulder_dir().join(RECORD)
}

fn load(repo: &Repo) -> Result<Record> {
    let path = record_path(repo);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            Error::usage(format!("{} is not readable: {e}", path.display()))
                .hint(format!("move it aside and run `git boulder agent install` again ({})", path.display()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Record { version: 1, ..Record::default() }),
        Err(e) => Err(Error::internal(format!("cannot read {}: {e}", path.display()))),
    }
}

fn save(repo: &Repo, record: &Record) -> Result<()> {
    let path = record_path(repo);
    if record.harnesses.is_empty() {
        return remove_file(&path);
    }
    let mut bytes =
        serde_json::to_vec_pretty(record).map_err(|e| Error::internal(format!("cannot encode {RECORD}: {e}")))?;
    bytes.push(b'\n');
    write_atomic(&path, &bytes)
}

/// Which harnesses this machine has installed in this repository.
pub fn installed(repo: &Repo) -> Result<Vec<Harness>> {
    let record = load(repo)?;
    Ok(Harness::ALL.into_iter().filter(|h| record.harnesses.contains_key(h.as_str())).collect())
}

/// The worktrees a harness goes into: the main one and every linked one whose folder exists.
fn worktrees(repo: &Repo) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if let Some(main) = &repo.main_work_dir {
        out.push(main.clone());
    }
    for wt in crate::worktree::list(repo)? {
        if !wt.missing && wt.locked.as_deref() != Some("initializing") && !out.contains(&wt.path) {
            out.push(wt.path);
        }
    }
    Ok(out)
}

fn read_opt(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::internal(format!("cannot read {}: {e}", path.display()))),
    }
}

fn remove_file(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::internal(format!("cannot remove {}: {e}", path.display()))),
    }
}

fn id_of(bytes: &[u8]) -> String {
    crate::git::objects::blob_id(bytes).map(|id| id.to_string()).unwrap_or_default()
}

fn file_error(path: &Path, e: FileError) -> Error {
    let hint = match &e {
        FileError::Foreign => format!("rename or remove {} and install again", path.display()),
        _ => format!("fix {} (or move it aside) and install again", path.display()),
    };
    Error::usage(format!("{} {e}", path.display())).with_source(e).hint(hint)
}

/// Plan the file of `harness` in `worktree`: `None` when nothing needs writing. Refuses (exit 2)
/// a tracked file and a file that cannot take the entries; nothing is written here.
fn plan(harness: Harness, worktree: &Path, rec: Option<&FileRecord>) -> Result<Option<Planned>> {
    let rel = files::local_file(harness);
    let path = worktree.join(rel);
    if crate::git::index::is_tracked(worktree, rel)? {
        return Err(Error::usage(format!(
            "{} is tracked in {}: agent install changes no tracked file",
            rel,
            worktree.display()
        ))
        .hint(format!(
            "put the hooks in the tracked project file and commit it: git boulder agent install {harness} --commit"
        ))
        .hint(format!("or stop tracking it there: git rm --cached {rel}")));
    }
    // Written through, the link's target (shared with whatever else links to it) would change;
    // replaced, the link would be gone for good: uninstall restores bytes, not links.
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Error::usage(format!(
            "{} is a symbolic link: agent install writes no file through a link",
            path.display()
        ))
        .hint(format!("replace the link with a copy of the file it points to, then install again ({rel})")));
    }
    let current = read_opt(&path)?;
    let mut refresh = None;
    if let (Some(rec), Some(bytes)) = (rec, &current) {
        // Our entries intact (as install wrote them, or changed since around them): leave it.
        if files::presence(harness, Some(bytes)) == Presence::Present {
            return Ok(None);
        }
        // As an install of another version wrote it: this version's entries replace those, and
        // the record of that install carries on.
        if id_of(bytes) == rec.wrote {
            refresh = Some(rec.clone());
        }
    }
    let merged = files::merged(harness, current.as_deref()).map_err(|e| file_error(&path, e))?;
    let ours_before = files::presence(harness, current.as_deref()) != Presence::Missing;
    let worktree = worktree.to_owned();
    Ok(match merged {
        None if rec.is_some() => None,
        // Ours already, but not written by this install: record it, so status and uninstall know.
        None => Some(Planned {
            worktree,
            after: current.clone().unwrap_or_default(),
            before: current,
            keep_before: false,
            write: false,
            refresh: None,
        }),
        Some(after) => {
            Some(Planned { worktree, before: current, after, keep_before: !ours_before, write: true, refresh })
        }
    })
}

/// Write a planned file: its before-bytes first, then the record, then the file (a killed
/// install leaves a record uninstall can act on).
fn apply(
    repo: &Repo,
    harness: Harness,
    p: Planned,
    installed: &mut Installed,
    save_record: &mut dyn FnMut(&Installed) -> Result<()>,
) -> Result<String> {
    let rel = files::local_file(harness);
    let path = p.worktree.join(rel);
    let key = id_of(format!("{}\0{rel}", p.worktree.display()).as_bytes());
    let backup_rel = format!("{}/{key}.before", harness.as_str());
    let backup_path = repo.boulder_dir().join(BACKUPS).join(&backup_rel);
    if let Some(old) = &p.refresh {
        installed.files.retain(|f| !(f.worktree == p.worktree && f.file == rel));
        installed.files.push(FileRecord { wrote: id_of(&p.after), ..old.clone() });
        save_record(installed)?;
        write_atomic(&path, &p.after)?;
        settle(harness, &p.worktree)?;
        return Ok(format!("{harness}: updated git-boulder's hooks in {}", path.display()));
    }
    let backup = match (&p.before, p.keep_before) {
        (Some(bytes), true) => {
            write_atomic(&backup_path, bytes)?;
            Some(backup_rel)
        }
        _ => {
            // A copy kept by an earlier install of this file is not what it holds now.
            remove_file(&backup_path)?;
            None
        }
    };
    let mut created_dirs = Vec::new();
    let mut dir = PathBuf::new();
    let comps: Vec<&str> = rel.split('/').collect();
    for c in &comps[..comps.len() - 1] {
        dir.push(c);
        if !p.worktree.join(&dir).exists() {
            created_dirs.push(dir.to_string_lossy().replace('\\', "/"));
        }
    }
    installed.files.retain(|f| !(f.worktree == p.worktree && f.file == rel));
    installed.files.push(FileRecord {
        worktree: p.worktree.clone(),
        file: rel.to_string(),
        existed: p.before.is_some(),
        backup,
        wrote: id_of(&p.after),
        created_dirs,
    });
    save_record(installed)?;
    if !p.write {
        return Ok(format!("{}: {} already held git-boulder's hooks", harness, path.display()));
    }
    write_atomic(&path, &p.after)?;
    settle(harness, &p.worktree)?;
    Ok(match p.before {
        Some(_) => format!("{harness}: merged into {}", path.display()),
        None => format!("{harness}: wrote {}", path.display()),
    })
}

/// OpenCode's `.opencode/` made ready, so that OpenCode installs nothing at start
/// ([`super::opencode::settle_deps`]).
fn settle(harness: Harness, worktree: &Path) -> Result<()> {
    if harness == Harness::Opencode {
        super::opencode::settle_deps(worktree)?;
    }
    Ok(())
}

/// The exclude line of a harness's local file.
fn exclude_line(harness: Harness) -> String {
    format!("/{}", files::local_file(harness))
}

/// Add `line` to `$GIT_COMMON_DIR/info/exclude`; false when it is there already.
fn add_exclude(repo: &Repo, line: &str) -> Result<bool> {
    let path = repo.common_dir.join("info").join("exclude");
    let mut bytes = read_opt(&path)?.unwrap_or_default();
    if String::from_utf8_lossy(&bytes).lines().any(|l| l.trim_end() == line) {
        return Ok(false);
    }
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    write_atomic(&path, &bytes)?;
    Ok(true)
}

/// Take `line` out of `$GIT_COMMON_DIR/info/exclude`, keeping every other byte.
fn remove_exclude(repo: &Repo, line: &str) -> Result<()> {
    let path = repo.common_dir.join("info").join("exclude");
    let Some(bytes) = read_opt(&path)? else { return Ok(()) };
    let mut out = Vec::with_capacity(bytes.len());
    for l in bytes.split_inclusive(|b| *b == b'\n') {
        let text = String::from_utf8_lossy(l);
        if text.trim_end() != line {
            out.extend_from_slice(l);
        }
    }
    if out != bytes {
        write_atomic(&path, &out)?;
    }
    Ok(())
}

/// `agent install HARNESS`: every worktree, checked first (a tracked file or a file that cannot
/// take the entries refuses with nothing written), then written.
pub fn install(repo: &Repo, harness: Harness) -> Result<Report> {
    let _guard = crate::lock::try_acquire(repo, "agents", "agent install")?;
    let targets = worktrees(repo)?;
    if targets.is_empty() {
        return Err(Error::usage("agent install needs a worktree: this bare repository has none")
            .hint("make one with `git boulder stream init`, then install"));
    }
    let mut record = load(repo)?;
    let mut installed = record.harnesses.get(harness.as_str()).cloned().unwrap_or_default();
    let mut planned = Vec::new();
    for wt in targets {
        let rec = installed.files.iter().find(|f| f.worktree == wt && f.file == files::local_file(harness));
        if let Some(p) = plan(harness, &wt, rec)? {
            planned.push(p);
        }
    }
    let mut report = Report::default();
    if add_exclude(repo, &exclude_line(harness))? {
        installed.excluded = true;
        report.changes.push(format!("added {} to info/exclude", exclude_line(harness)));
    }
    let mut save_record = |inst: &Installed| {
        record.harnesses.insert(harness.as_str().to_string(), inst.clone());
        save(repo, &record)
    };
    save_record(&installed)?;
    for p in planned {
        report.changes.push(apply(repo, harness, p, &mut installed, &mut save_record)?);
    }
    Ok(report)
}

/// Apply every installed harness to the worktree `stream init` just made (or confirmed). A
/// harness that cannot go in is a warning: the stream is made either way.
pub fn into_new_worktree(repo: &Repo, worktree: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let record = match load(repo) {
        Ok(r) => r,
        Err(e) => return vec![format!("agent integrations not applied: {}", e.message)],
    };
    if record.harnesses.is_empty() {
        return lines;
    }
    let worktree = crate::git::worktree::normalize(worktree);
    let _guard = match crate::lock::try_acquire(repo, "agents", "stream init") {
        Ok(g) => g,
        Err(e) => return vec![format!("agent integrations not applied: {}", e.message)],
    };
    let mut record = record;
    for harness in Harness::ALL {
        let Some(mut installed) = record.harnesses.get(harness.as_str()).cloned() else { continue };
        let rec = installed.files.iter().find(|f| f.worktree == worktree && f.file == files::local_file(harness));
        let planned = match plan(harness, &worktree, rec) {
            Ok(p) => p,
            Err(e) => {
                lines.push(format!("agent {harness} not installed in {}: {}", worktree.display(), e.message));
                continue;
            }
        };
        let Some(p) = planned else { continue };
        let mut save_record = |inst: &Installed| {
            record.harnesses.insert(harness.as_str().to_string(), inst.clone());
            save(repo, &record)
        };
        match apply(repo, harness, p, &mut installed, &mut save_record) {
            Ok(line) => lines.push(line),
            Err(e) => lines.push(format!("agent {harness} not installed in {}: {}", worktree.display(), e.message)),
        }
    }
    lines
}

/// `agent uninstall HARNESS`: every file install wrote goes back to what it was.
pub fn uninstall(repo: &Repo, harness: Harness) -> Result<Report> {
    let _guard = crate::lock::try_acquire(repo, "agents", "agent uninstall")?;
    let mut record = load(repo)?;
    let mut report = Report::default();
    let Some(installed) = record.harnesses.get(harness.as_str()).cloned() else {
        report.warnings.push(format!("{harness} is not installed here (nothing to undo)"));
        return Ok(report);
    };
    let backups = repo.boulder_dir().join(BACKUPS);
    // Check first: every file that is not as install wrote it must be readable.
    for f in &installed.files {
        let path = f.worktree.join(&f.file);
        if let Some(bytes) = read_opt(&path)? {
            if id_of(&bytes) != f.wrote {
                files::unmerged(harness, &bytes).map_err(|e| file_error(&path, e))?;
            }
        }
        if let Some(b) = &f.backup {
            if read_opt(&backups.join(b))?.is_none() {
                return Err(Error::internal(format!(
                    "the saved copy of {} is gone ({})",
                    path.display(),
                    backups.join(b).display()
                ))
                .hint(format!(
                    "restore {} by hand, then remove {harness} from {}",
                    path.display(),
                    record_path(repo).display()
                )));
            }
        }
    }
    let mut remaining = installed.clone();
    for f in &installed.files {
        let path = f.worktree.join(&f.file);
        if harness == Harness::Opencode {
            super::opencode::unsettle_deps(&f.worktree);
        }
        let line = restore(harness, f, &path, &backups)?;
        if let Some(line) = line {
            report.changes.push(line);
        }
        remaining.files.retain(|r| !(r.worktree == f.worktree && r.file == f.file));
        record.harnesses.insert(harness.as_str().to_string(), remaining.clone());
        save(repo, &record)?;
        if let Some(b) = &f.backup {
            remove_file(&backups.join(b))?;
        }
    }
    if installed.excluded {
        remove_exclude(repo, &exclude_line(harness))?;
        report.changes.push(format!("removed {} from info/exclude", exclude_line(harness)));
    }
    record.harnesses.remove(harness.as_str());
    save(repo, &record)?;
    let _ = std::fs::remove_dir(backups.join(harness.as_str()));
    let _ = std::fs::remove_dir(&backups);
    Ok(report)
}

/// Put one file back; the line says what happened (none when there was nothing to do).
fn restore(harness: Harness, f: &FileRecord, path: &Path, backups: &Path) -> Result<Option<String>> {
    if !f.worktree.exists() {
        return Ok(None);
    }
    let Some(current) = read_opt(path)? else { return Ok(None) };
    if crate::git::index::is_tracked(&f.worktree, &f.file)? {
        // Committed since (`--commit`): a tracked file changes only with `--commit`.
        return Ok(Some(format!(
            "{harness}: left {} alone: it is tracked now (git boulder agent uninstall {harness} --commit)",
            path.display()
        )));
    }
    if id_of(&current) == f.wrote && !(f.existed && f.backup.is_none()) {
        return Ok(Some(match &f.backup {
            Some(b) => {
                let bytes = read_opt(&backups.join(b))?.unwrap_or_default();
                write_atomic(path, &bytes)?;
                format!("{harness}: restored {}", path.display())
            }
            None => {
                remove_file(path)?;
                remove_created_dirs(&f.worktree, &f.created_dirs);
                format!("{harness}: removed {}", path.display())
            }
        }));
    }
    // Changed since install (or found with our entries): take out only ours.
    Ok(match files::unmerged(harness, &current).map_err(|e| file_error(path, e))? {
        Removal::Untouched => None,
        Removal::Write(bytes) => {
            write_atomic(path, &bytes)?;
            Some(format!("{harness}: took git-boulder's hooks out of {} (kept the other changes)", path.display()))
        }
        Removal::Empty if harness == Harness::Opencode && id_of(&current) != f.wrote => {
            Some(format!("{harness}: kept {} (changed since install; remove it by hand)", path.display()))
        }
        Removal::Empty if harness == Harness::Opencode => {
            remove_file(path)?;
            remove_created_dirs(&f.worktree, &f.created_dirs);
            Some(format!("{harness}: removed {}", path.display()))
        }
        Removal::Empty if f.existed => {
            write_atomic(path, b"{}\n")?;
            Some(format!("{harness}: took git-boulder's hooks out of {}", path.display()))
        }
        Removal::Empty => {
            remove_file(path)?;
            remove_created_dirs(&f.worktree, &f.created_dirs);
            Some(format!("{harness}: removed {}", path.display()))
        }
    })
}

/// Remove the folders install made, deepest first, when they are empty.
fn remove_created_dirs(worktree: &Path, dirs: &[String]) {
    for d in dirs.iter().rev() {
        let _ = std::fs::remove_dir(worktree.join(d));
    }
}

/// `agent install|uninstall HARNESS --commit`: the tracked project file of the current worktree,
/// with git-boulder's entries merged in (or taken out), committed with git. Returns the line to
/// show, or `None` when the file needed no change.
pub fn commit(repo: &Repo, harness: Harness, remove: bool) -> Result<Option<String>> {
    let Some(wt) = repo.work_dir.clone() else {
        return Err(Error::usage("--commit needs a worktree; this repository is bare"));
    };
    let rel = files::project_file(harness);
    let path = wt.join(rel);
    let current = read_opt(&path)?;
    let after = if remove {
        match current.as_deref().map(|c| files::unmerged(harness, c)).transpose().map_err(|e| file_error(&path, e))? {
            None | Some(Removal::Untouched) => return Ok(None),
            Some(Removal::Write(bytes)) => Some(bytes),
            Some(Removal::Empty) => None,
        }
    } else {
        match files::merged(harness, current.as_deref()).map_err(|e| file_error(&path, e))? {
            None if crate::git::index::is_tracked(&wt, rel)? => return Ok(None),
            None => current.clone(),
            Some(bytes) => Some(bytes),
        }
    };
    match &after {
        Some(bytes) => write_atomic(&path, bytes)?,
        None => remove_file(&path)?,
    }
    let message = if remove {
        format!("chore(agent): remove git-boulder's {harness} hooks from {rel}")
    } else {
        format!("chore(agent): run git-boulder's {harness} hooks ({rel})")
    };
    if let Err(e) = crate::git::cli::commit_paths(&wt, &[rel], &message) {
        // Nothing committed: put the file back as it was.
        match &current {
            Some(bytes) => write_atomic(&path, bytes)?,
            None => remove_file(&path)?,
        }
        return Err(e);
    }
    Ok(Some(format!("{harness}: committed {} ({message})", path.display())))
}
