//! Linked worktrees of streams, made and removed through [`crate::git::worktree`] so that plain git
//! accepts them as its own (`git worktree list`, `git status`, `git worktree remove/prune`), plus
//! the questions the dashboard asks of them: dirty or clean, ahead/behind the base branch. This
//! module decides what to do with what it finds (repair, refuse, remove) and says so.
//!
//! Layout is git's: a worktree at `path` has a `.git` file (`gitdir: <admin dir>`) and an admin dir
//! `$GIT_COMMON_DIR/worktrees/<id>` (`gitdir`, `commondir`, `HEAD`, `index`, …). git names `<id>`
//! after the destination's basename and appends `1`, `2`, … when that name is taken — e.g. by the
//! leftover admin dir of a killed run, which [`add`] removes first so the id stays the stream name.
//!
//! Callers serialize [`add`] and [`remove`] of one path (the stream lock of [`crate::lock`]).

pub mod checkout;
pub mod dirty;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};
use crate::git::status::{changed_paths, Changed, Look};
pub use crate::git::worktree::Known;
use crate::git::worktree::{dot_git_target, normalize, read_trimmed, registrations, AddError, Registration, Removal};
use crate::git::{ObjectId, Repo};

pub use crate::git::graph::ahead_behind;

/// What [`add`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddOutcome {
    /// A new worktree was made. `recovered` lists leftovers of an earlier, killed run that were
    /// removed first (empty normally).
    Created { branch_created: bool, files: usize, recovered: Vec<String> },
    /// A worktree of this branch was already registered at the path but incomplete (killed run);
    /// it was finished in place. `what` says what was repaired.
    Repaired { branch_created: bool, what: Vec<String> },
    /// A complete worktree of this branch is already there; nothing changed.
    AlreadyPresent,
}

/// One linked worktree as git knows it (`$GIT_COMMON_DIR/worktrees/<admin_id>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeInfo {
    /// The worktree folder (from the admin dir's `gitdir` file); may not exist.
    pub path: PathBuf,
    /// The short branch name HEAD is attached to (`None` when detached or unreadable).
    pub branch: Option<String>,
    /// The commit HEAD resolves to (`None` when unborn or unreadable).
    pub head: Option<ObjectId>,
    /// The admin dir's name under `$GIT_COMMON_DIR/worktrees/`.
    pub admin_id: String,
    /// `Some(reason)` (possibly empty) when the worktree is locked (`git worktree lock`; also
    /// `initializing` while — or after a killed — `worktree add`).
    pub locked: Option<String>,
    /// The worktree folder (or its `.git` file) is missing.
    pub missing: bool,
    /// `git worktree prune` would remove it: missing and not locked.
    pub prunable: bool,
}

/// Uncommitted work in a worktree, as `git status --porcelain` would list it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dirt {
    /// Tracked paths that differ from HEAD or the index (staged, modified, deleted, conflicted).
    pub modified: Vec<String>,
    /// Untracked paths (an untracked folder is one entry ending in `/`); ignored files never count.
    pub untracked: Vec<String>,
    /// More changes exist than were collected (the limit was reached).
    pub more: bool,
}

impl From<Changed> for Dirt {
    fn from(c: Changed) -> Dirt {
        Dirt { modified: c.modified, untracked: c.untracked, more: c.more }
    }
}

impl Dirt {
    pub fn is_clean(&self) -> bool {
        self.modified.is_empty() && self.untracked.is_empty() && !self.more
    }

    /// `modified: a, b; untracked: c/` — for messages.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if !self.modified.is_empty() {
            let _ = write!(s, "modified: {}", self.modified.join(", "));
        }
        if !self.untracked.is_empty() {
            if !s.is_empty() {
                s.push_str("; ");
            }
            let _ = write!(s, "untracked: {}", self.untracked.join(", "));
        }
        if self.more {
            s.push_str(" …and more");
        }
        s
    }
}

// ---------------------------------------------------------------------------------------------
// paths and admin dirs

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Folder {
    Missing,
    Empty,
    NonEmpty,
}

fn folder_state(path: &Path) -> Result<Folder> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Folder::Missing),
        Err(e) => Err(Error::internal(format!("cannot read {}: {e}", path.display())).with_source(e)),
        Ok(m) if !m.is_dir() => Ok(Folder::NonEmpty),
        Ok(_) => {
            let mut it = std::fs::read_dir(path)
                .map_err(|e| Error::internal(format!("cannot read {}: {e}", path.display())).with_source(e))?;
            Ok(if it.next().is_some() { Folder::NonEmpty } else { Folder::Empty })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// add

/// `refs/heads/<branch>`, refused (exit 2) when it is not a valid ref name.
fn full_branch(branch: &str) -> Result<String> {
    let full = crate::git::refs::branch_ref(branch);
    match crate::git::branch::ref_name_problem(&full) {
        None => Ok(full),
        Some(e) => Err(Error::usage(format!("invalid branch name {branch:?}: {e}"))
            .with_source(e)
            .hint("branch names follow `git check-ref-format --branch`")),
    }
}

/// Where a new stream branch starts: the one remote-tracking branch of that name when exactly one
/// remote has it (the stream was started on another machine, like `git switch` guesses), else the
/// tip of `base`. Returns the commit and its name for messages.
pub fn start_point(repo: &Repo, branch: &str, base: &str) -> Result<(ObjectId, String)> {
    let mut tracking = Vec::new();
    for remote in crate::git::branch::remote_names(repo) {
        if let Some(id) = repo.ref_id(&crate::git::refs::remote_branch_ref(&remote, branch))? {
            tracking.push((id, format!("{remote}/{branch}")));
        }
    }
    if tracking.len() == 1 {
        return Ok(tracking.remove(0));
    }
    let tip = match repo.branch_tip(base)? {
        Some(t) => t,
        None => {
            return Err(if crate::git::branch::has_commits(repo) {
                Error::usage(format!(
                    "the base branch {base:?} does not exist, so branch {branch:?} cannot be created from it"
                ))
                .hint("set settings.base_branch in .boulder/streams.yaml to an existing branch (see `git branch`)")
            } else {
                Error::usage("the repository has no commits yet, so there is nothing to branch streams from").hint(
                    format!("make a first commit on {base} (e.g. `git commit --allow-empty -m init`), then rerun"),
                )
            });
        }
    };
    Ok((tip, base.to_string()))
}

/// Create `refs/heads/<branch>` from [`start_point`] unless it exists (never moving it). Returns
/// whether it was created by this call.
fn ensure_branch(repo: &Repo, branch: &str, base: &str) -> Result<bool> {
    full_branch(branch)?;
    if repo.branch_tip(branch)?.is_some() {
        return Ok(false);
    }
    let (tip, from) = start_point(repo, branch, base)?;
    // Someone else creating it meanwhile: theirs is reused, never moved.
    crate::git::branch::create(repo, branch, tip, &format!("branch: Created from {from}"))
}

/// Make `path` a linked worktree on `branch`, creating `refs/heads/<branch>` from the tip of
/// `base` if it does not exist (an existing branch is reused and never moved).
///
/// * a complete worktree of `branch` already at `path` → [`AddOutcome::AlreadyPresent`], nothing changes;
/// * leftovers of a killed run at `path` (admin dir still locked `initializing`, admin dir without
///   its folder, folder without its `.git` file, missing index) are finished or removed and redone;
/// * `branch` checked out in another worktree → refused, naming it;
/// * a non-empty folder at `path` that is not a worktree of `branch` → usage error, naming it;
/// * no `base` branch, or no commits at all → usage error.
pub fn add(repo: &Repo, path: &Path, branch: &str, base: &str) -> Result<AddOutcome> {
    add_known(repo, &mut Known::new(), path, branch, base)
}

/// [`add`] for a command that adds several worktrees: the registrations are read once into
/// `known` and kept up to date with what this adds and removes, not read again for each.
pub fn add_known(repo: &Repo, known: &mut Known, path: &Path, branch: &str, base: &str) -> Result<AddOutcome> {
    let target = normalize(path);
    let name = full_branch(branch)?;
    let shown = target.display().to_string();
    let mut recovered = Vec::new();

    let regs = known.current(repo)?;
    let at_path: Vec<Registration> =
        regs.iter().filter(|r| r.base.as_deref() == Some(target.as_path())).cloned().collect();
    let mut dot_git = dot_git_target(&target);

    // 1. Leftovers of a killed `add` at this path: registered but never finished. (An admin dir
    //    named after this path's basename, still `initializing` and without a `gitdir` file, is
    //    from a run killed right after reserving it; callers hold the stream lock, so no other
    //    `add` is making it now.)
    let basename = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let unfinished: Vec<Registration> =
        regs.iter().filter(|r| r.base.is_none() && r.initializing() && r.id == basename).cloned().collect();
    for r in unfinished {
        r.remove_admin()?;
        recovered.push(format!("removed the unfinished registration worktrees/{}", r.id));
    }
    let mut remaining = Vec::new();
    for r in at_path {
        if !r.initializing() {
            remaining.push(r);
            continue;
        }
        if dot_git.as_deref() == Some(r.admin.as_path()) {
            std::fs::remove_dir_all(&target).map_err(|e| {
                Error::internal(format!("cannot remove the half-made worktree {shown}: {e}")).with_source(e)
            })?;
            dot_git = None;
            recovered.push(format!("removed the half-made worktree folder {shown}"));
        }
        r.remove_admin()?;
        recovered.push(format!("removed the unfinished registration worktrees/{}", r.id));
    }

    if !recovered.is_empty() {
        known.forget();
    }
    // 2. A live registration: the folder's `.git` file points at it.
    let mut live = remaining.iter().find(|r| dot_git.as_deref() == Some(r.admin.as_path())).cloned();
    let mut folder = folder_state(&target)?;
    let mut repaired = Vec::new();
    if live.is_none() {
        match folder {
            Folder::Missing | Folder::Empty => {
                // Registrations whose folder is gone are stale (what `git worktree prune` removes).
                for r in &remaining {
                    if r.user_locked() {
                        return Err(Error::usage(format!(
                            "{shown} is registered as a locked worktree (worktrees/{}) but its folder is {}",
                            r.id,
                            if folder == Folder::Missing { "missing" } else { "empty" }
                        ))
                        .hint(format!("if it is gone for good: git worktree unlock {shown} && git worktree prune")));
                    }
                    r.remove_admin()?;
                    recovered.push(format!("removed the stale registration worktrees/{}", r.id));
                }
            }
            Folder::NonEmpty => {
                if dot_git.is_none() && remaining.len() == 1 && !target.join(".git").exists() {
                    // The folder lost (or never got) its `.git` file: link it back, like `git worktree repair`.
                    let r = remaining[0].clone();
                    std::fs::write(target.join(".git"), format!("gitdir: {}\n", r.admin.display()))
                        .map_err(|e| Error::internal(format!("cannot write {shown}/.git: {e}")).with_source(e))?;
                    repaired.push(format!("restored {shown}/.git"));
                    live = Some(r);
                } else {
                    let what = if target.join(".git").exists() {
                        "a git repository or worktree that does not belong to this stream"
                    } else {
                        "a folder that is not a git worktree"
                    };
                    return Err(Error::usage(format!(
                        "{shown} already exists and is {what}, so the worktree of branch {branch} cannot be made there"
                    ))
                    .hint(format!("move it away (e.g. `mv {shown} {shown}.bak`) and rerun")));
                }
            }
        }
    }

    if let Some(live) = live {
        // Other registrations claiming this path but not linked from it are stale duplicates.
        for r in remaining.iter().filter(|r| r.admin != live.admin && !r.user_locked()) {
            r.remove_admin()?;
            recovered.push(format!("removed the stale registration worktrees/{}", r.id));
        }
        if live.head_ref.as_deref() != Some(name.as_str()) {
            let on = match live.branch() {
                Some(b) => format!("on branch {b}"),
                None => "with a detached HEAD".into(),
            };
            return Err(Error::usage(format!("{shown} is already a worktree {on}, not of branch {branch}"))
                .hint(format!("remove it with `git worktree remove {shown}` (or move it away) and rerun")));
        }
        if !live.admin.join("index").exists() {
            let n = crate::git::index::rebuild_index(&target)?;
            repaired.push(format!("rebuilt the missing index ({n} missing files checked out)"));
        } else if crate::git::index::index_missing_or_empty(&target)? {
            let n = crate::git::index::rebuild_index(&target)?;
            repaired.push(format!("rebuilt the empty index ({n} missing files checked out)"));
        }
        if repaired.is_empty() && recovered.is_empty() {
            return Ok(AddOutcome::AlreadyPresent);
        }
        known.forget();
        repaired.extend(recovered);
        return Ok(AddOutcome::Repaired { branch_created: false, what: repaired });
    }

    // 3. A fresh worktree. The branch must not be checked out anywhere else (unborn HEADs too).
    folder = folder_state(&target)?;
    debug_assert!(folder != Folder::NonEmpty);
    if !recovered.is_empty() {
        known.forget();
    }
    // Read again only when a leftover was removed above (reading every registration is linear in
    // the worktrees, and `stream init` of many streams would do it once per stream).
    let regs = known.current(repo)?;
    let full = name.clone();
    let main_head = read_trimmed(&repo.common_dir.join("HEAD"));
    if let (Some(main), Some(h)) = (&repo.main_work_dir, &main_head) {
        if h.strip_prefix("ref:").map(str::trim) == Some(full.as_str()) {
            return Err(Error::refused(format!(
                "branch {branch} is checked out in the main worktree {}",
                main.display()
            ))
            .hint(format!(
                "switch the main worktree to another branch (e.g. `git -C {} switch {base}`) and rerun",
                main.display()
            )));
        }
    }
    if let Some(other) = regs.iter().find(|r| r.head_ref.as_deref() == Some(full.as_str())) {
        let at =
            other.base.as_ref().map(|b| b.display().to_string()).unwrap_or_else(|| format!("worktrees/{}", other.id));
        let gone = other.base.as_ref().map(|b| !b.exists()).unwrap_or(true);
        let mut err = Error::refused(format!("branch {branch} is already checked out in the worktree {at}"));
        err = if gone {
            err.hint("that worktree's folder is gone: `git worktree prune` forgets it, then rerun")
        } else {
            err.hint(format!(
                "remove that worktree (`git worktree remove {at}`) or switch it to another branch, then rerun"
            ))
        };
        return Err(err);
    }

    let branch_created = ensure_branch(repo, branch, base)?;
    // A partial clone fetches the files first, in one batch, as `git worktree add` does.
    repo.prefetch(&[format!("{name}^{{tree}}")], &[])?;
    let files = match crate::git::worktree::add_linked(repo, &target, &name)? {
        Ok((files, admin)) => {
            known.added(repo, &admin);
            files
        }
        Err(AddError::CheckedOut(worktree_dirs)) => {
            let dirs: Vec<String> = worktree_dirs.iter().map(|d| d.display().to_string()).collect();
            return Err(Error::refused(format!("branch {branch} is already checked out in {}", dirs.join(", ")))
                .hint("remove that worktree or switch it to another branch, then rerun"));
        }
        Err(AddError::Conflict(e)) => {
            return Err(Error::refused(format!("cannot make the worktree {shown}: {e}")).with_source(e))
        }
        Err(AddError::Failed(e)) => {
            return Err(
                Error::internal(format!("cannot make the worktree {shown} on branch {branch}: {e}")).with_source(e)
            )
        }
        Err(AddError::File { path, error }) => {
            return Err(Error::internal(format!("checkout of {shown} failed at {path}: {error}")).with_source(error))
        }
        Err(AddError::Collision { path, kind }) => {
            return Err(Error::internal(format!("checkout of {shown} collided at {path} ({kind})")))
        }
    };
    Ok(AddOutcome::Created { branch_created, files, recovered })
}

/// Why the worktree at `path` is not whole — not to be handed to an agent — or `None` when it is:
/// it is missing, its checkout was interrupted (git's registration still locked `initializing`),
/// or it has no index, or an empty one while its HEAD has files. [`add`] (as `stream init` runs it)
/// finishes each of these.
pub fn not_whole(repo: &Repo, path: &Path) -> Result<Option<String>> {
    let target = normalize(path);
    let Some(admin) = dot_git_target(&target) else {
        return Ok(Some(if target.exists() { "it has no .git file".into() } else { "it does not exist".into() }));
    };
    let reg = registrations(repo)?.into_iter().find(|r| r.admin == admin);
    let Some(reg) = reg else { return Ok(Some("git has no registration of it".into())) };
    if reg.initializing() {
        return Ok(Some("its checkout was interrupted (git still marks it initializing)".into()));
    }
    if crate::git::index::index_missing_or_empty(&target)? {
        return Ok(Some("its index is missing or empty while its branch has files".into()));
    }
    Ok(None)
}

/// A new worktree is a sparse checkout when the one it was made from is (git and gix copy its
/// patterns): widen it by `dirs`, the folders its stream works in (`None`: the whole tree), so
/// the stream sees its own paths. Returns what changed, if anything.
pub fn widen_sparse(path: &Path, dirs: Option<&[String]>) -> Result<Option<String>> {
    let wt = Repo::open(path)?;
    if !wt.sparse_checkout() {
        return Ok(None);
    }
    let cone = wt.config_bool("core.sparseCheckoutCone").unwrap_or(false);
    crate::git::cli::sparse_widen(path, cone, dirs)?;
    Ok(Some(match dirs {
        None => "turned its sparse checkout off: the stream's paths reach every folder".to_string(),
        Some(dirs) => format!("added the stream's folders to its sparse checkout: {}", dirs.join(" ")),
    }))
}

// ---------------------------------------------------------------------------------------------
// exclude, copy

fn escape_ignore(rel: &str) -> String {
    let mut out = String::with_capacity(rel.len());
    for (i, c) in rel.chars().enumerate() {
        if matches!(c, '*' | '?' | '[' | '\\') || (i == 0 && matches!(c, '#' | '!')) {
            out.push('\\');
        }
        out.push(c);
    }
    if out.ends_with(' ') {
        let trimmed = out.trim_end_matches(' ').len();
        let spaces = out.len() - trimmed;
        out.truncate(trimmed);
        for _ in 0..spaces {
            out.push_str("\\ ");
        }
    }
    out
}

/// Add `/<rel_dir>/` to `$GIT_COMMON_DIR/info/exclude` (once), so the main worktree does not show
/// the stream worktrees as untracked. `rel_dir` is relative to the main worktree (e.g.
/// `.boulder/worktrees`); a path outside it needs no exclude. Returns whether the file changed.
pub fn exclude(repo: &Repo, rel_dir: &str) -> Result<bool> {
    let rel = rel_dir.replace('\\', "/");
    let rel = rel.trim_start_matches("./").trim_matches('/');
    if rel.is_empty() || rel == "." {
        return Ok(false);
    }
    if Path::new(rel).is_absolute() || rel.split('/').any(|c| c == "..") {
        return Ok(false);
    }
    let rel = rel.split('/').filter(|c| !c.is_empty() && *c != ".").collect::<Vec<_>>().join("/");
    let pattern = escape_ignore(&rel);
    let line = format!("/{pattern}/");
    let path = repo.common_dir.join("info").join("exclude");
    let existing = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::internal(format!("cannot read {}: {e}", path.display())).with_source(e)),
    };
    let text = String::from_utf8_lossy(&existing);
    let alt = format!("/{pattern}");
    if text.lines().map(str::trim_end).any(|l| l == line || l == alt || l == format!("{alt}/**")) {
        return Ok(false);
    }
    let mut new = existing.clone();
    if !new.is_empty() && !new.ends_with(b"\n") {
        new.push(b'\n');
    }
    new.extend_from_slice(line.as_bytes());
    new.push(b'\n');
    write_atomic(&path, &new)?;
    Ok(true)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::internal(format!("cannot create {}: {e}", dir.display())).with_source(e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::internal(format!("cannot write in {}: {e}", dir.display())).with_source(e))?;
    tmp.write_all(bytes)?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path).map_err(|e| Error::internal(format!("cannot write {}: {}", path.display(), e.error)))?;
    Ok(())
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', '{', '\\'])
}

/// Files under `dir` (relative to `root`), not following symlinked directories, skipping `.git`
/// and nested repositories or worktrees (a directory with a `.git` entry).
fn walk_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name() == ".git" {
            continue;
        }
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            if std::fs::symlink_metadata(path.join(".git")).is_ok() {
                continue;
            }
            walk_files(root, &path, out);
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_owned());
        }
    }
}

/// Copy the untracked or ignored files matching `globs` (gitignore-like globs relative to the main
/// worktree `main`, e.g. `.env`, `config/*.local`, `secrets/`; a matching directory copies its
/// files) into the worktree `wt`, keeping their relative paths and permissions. Never follows a
/// path out of either tree (symlinks resolving outside `main` are skipped), never descends into
/// `.git` or nested repositories/worktrees, never overwrites a file that exists in `wt`. Returns
/// the relative paths copied, sorted.
pub fn copy_files(main: &Path, wt: &Path, globs: &[String]) -> Result<Vec<PathBuf>> {
    copy_matching(main, wt, globs, &mut |_| true)
}

/// The file at the repository root that lists, in gitignore syntax, ignored files to copy into
/// new worktrees (the format Claude Code reads).
pub const WORKTREE_INCLUDE: &str = ".worktreeinclude";

/// The patterns of `main`'s `.worktreeinclude` as globs for [`copy_files`]: (included, negated).
/// gitignore syntax: `#` comments and blank lines are skipped, `!` negates, a trailing `/` names a
/// directory, a pattern with a `/` before its end is relative to the root, one without matches at
/// any depth. A missing file gives no patterns; a pattern with `..` or `.git`, or that cannot be a
/// glob, is refused with its line number.
pub fn worktree_include(main: &Path) -> Result<(Vec<String>, Vec<String>)> {
    let path = main.join(WORKTREE_INCLUDE);
    let text = match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => std::fs::read(&path)
            .map_err(|e| Error::internal(format!("cannot read {}: {e}", path.display())).with_source(e))?,
        // A symlink (possibly leading out of the repository) or a directory is not read.
        Ok(_) => {
            return Err(Error::usage(format!("{WORKTREE_INCLUDE} is not a regular file"))
                .hint(format!("make {WORKTREE_INCLUDE} a plain file at the repository root, or remove it")))
        }
        Err(_) => return Ok((Vec::new(), Vec::new())),
    };
    if text.len() > 1024 * 1024 {
        return Err(Error::usage(format!("{WORKTREE_INCLUDE} is larger than 1 MiB")));
    }
    let text = String::from_utf8_lossy(&text);
    let (mut include, mut exclude) = (Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (negated, pat) = match line.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, line.strip_prefix('\\').unwrap_or(line)),
        };
        let pat = pat.trim_end_matches('/');
        let anchored = pat.contains('/');
        let pat = pat.trim_start_matches('/');
        let bad = pat.is_empty()
            || pat.split('/').any(|c| c == ".." || c == ".git")
            || globset::GlobBuilder::new(pat).literal_separator(true).build().is_err();
        if bad {
            return Err(Error::usage(format!(
                "{WORKTREE_INCLUDE} line {}: {:?} is not a pattern of files inside the repository",
                n + 1,
                crate::text::inert_lines(line)
            ))
            .hint(format!("use gitignore patterns without '..' or .git in {WORKTREE_INCLUDE}")));
        }
        let glob = if anchored { pat.to_string() } else { format!("**/{pat}") };
        if negated {
            exclude.push(glob);
        } else {
            include.push(glob);
        }
    }
    Ok((include, exclude))
}

/// Copy the files that `main`'s `.worktreeinclude` names and that git ignores in `main` into the
/// worktree `wt`, as [`copy_files`] does (same protections). Returns the relative paths copied.
pub fn copy_included(main: &Path, wt: &Path) -> Result<Vec<PathBuf>> {
    let (include, exclude) = worktree_include(main)?;
    if include.is_empty() {
        return Ok(Vec::new());
    }
    let mut negated = globset::GlobSetBuilder::new();
    for g in &exclude {
        if let Ok(glob) = globset::GlobBuilder::new(g).literal_separator(true).build() {
            negated.add(glob);
        }
    }
    let negated = negated
        .build()
        .map_err(|e| Error::usage(format!("invalid {WORKTREE_INCLUDE} patterns: {e}")).with_source(e))?;
    let copied = crate::git::ignore::with_ignored(main, |ignored| {
        let mut keep = |rel: &Path| -> bool {
            let negated_here = negated.is_match(rel)
                || rel.ancestors().skip(1).any(|a| !a.as_os_str().is_empty() && negated.is_match(a));
            if negated_here {
                return false;
            }
            // Only ignored files are copied (tracked ones are in the checkout): the file itself or a
            // folder it is in must be excluded.
            let file = ignored.is_excluded(rel, false);
            file || rel.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()).any(|a| ignored.is_excluded(a, true))
        };
        copy_matching(main, wt, &include, &mut keep)
    })?;
    Ok(copied.unwrap_or_default())
}

fn copy_matching(
    main: &Path,
    wt: &Path,
    globs: &[String],
    keep: &mut dyn FnMut(&Path) -> bool,
) -> Result<Vec<PathBuf>> {
    let main_real = std::fs::canonicalize(main)
        .map_err(|e| Error::internal(format!("cannot read {}: {e}", main.display())).with_source(e))?;
    let wt_real = std::fs::canonicalize(wt)
        .map_err(|e| Error::internal(format!("cannot read {}: {e}", wt.display())).with_source(e))?;
    let mut builder = globset::GlobSetBuilder::new();
    let mut roots: BTreeSet<PathBuf> = BTreeSet::new();
    for g in globs {
        let g = g.trim().trim_start_matches("./").trim_end_matches('/');
        if g.is_empty() {
            continue;
        }
        let bad = Path::new(g).is_absolute() || g.starts_with('/') || g.split('/').any(|c| c == ".." || c == ".git");
        if bad {
            return Err(Error::usage(format!(
                "copy_into_worktree entry {g:?} must be a path inside the repository (no '..', no absolute path, not .git)"
            )));
        }
        let glob = globset::GlobBuilder::new(g).literal_separator(true).build().map_err(|e| {
            Error::usage(format!("copy_into_worktree entry {g:?} is not a valid glob: {e}")).with_source(e)
        })?;
        builder.add(glob);
        // Walk only below the literal prefix of the glob.
        let prefix: PathBuf = g.split('/').take_while(|c| !has_glob_meta(c)).collect();
        roots.insert(prefix);
    }
    let set =
        builder.build().map_err(|e| Error::usage(format!("invalid copy_into_worktree globs: {e}")).with_source(e))?;

    let mut candidates = Vec::new();
    for root in &roots {
        let start = main_real.join(root);
        match std::fs::symlink_metadata(&start) {
            Ok(m) if m.is_dir() => {
                if !root.as_os_str().is_empty() && std::fs::symlink_metadata(start.join(".git")).is_ok() {
                    continue;
                }
                walk_files(&main_real, &start, &mut candidates)
            }
            Ok(_) => candidates.push(root.clone()),
            Err(_) => {}
        }
    }
    candidates.sort();
    candidates.dedup();

    let mut copied = Vec::new();
    for rel in candidates {
        let selected =
            set.is_match(&rel) || rel.ancestors().skip(1).any(|a| !a.as_os_str().is_empty() && set.is_match(a));
        if !selected || rel.components().any(|c| !matches!(c, Component::Normal(_))) || !keep(&rel) {
            continue;
        }
        let src = main_real.join(&rel);
        // Follow a symlink only when it stays inside the main worktree.
        let Ok(real_src) = std::fs::canonicalize(&src) else { continue };
        if !real_src.starts_with(&main_real) || !real_src.is_file() {
            continue;
        }
        let dest = wt_real.join(&rel);
        if std::fs::symlink_metadata(&dest).is_ok() {
            continue;
        }
        // Every existing ancestor inside the worktree must be a real directory (no symlink out).
        let mut ok = true;
        let mut cur = wt_real.clone();
        for c in rel.parent().map(|p| p.components().collect::<Vec<_>>()).unwrap_or_default() {
            cur.push(c);
            match std::fs::symlink_metadata(&cur) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    ok = false;
                    break;
                }
                Err(_) => {
                    if std::fs::create_dir(&cur).is_err() {
                        ok = false;
                        break;
                    }
                }
            }
        }
        if !ok {
            continue;
        }
        let mut from = std::fs::File::open(&real_src)
            .map_err(|e| Error::internal(format!("cannot read {}: {e}", src.display())).with_source(e))?;
        let mut to = match std::fs::OpenOptions::new().write(true).create_new(true).open(&dest) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::internal(format!("cannot write {}: {e}", dest.display())).with_source(e)),
        };
        std::io::copy(&mut from, &mut to)
            .map_err(|e| Error::internal(format!("cannot write {}: {e}", dest.display())).with_source(e))?;
        if let Ok(meta) = from.metadata() {
            let _ = to.set_permissions(meta.permissions());
        }
        copied.push(rel);
    }
    Ok(copied)
}

// ---------------------------------------------------------------------------------------------
// list, dirt, ahead/behind

/// The linked worktrees git knows (`git worktree list` without the main worktree), sorted by admin id.
pub fn list(repo: &Repo) -> Result<Vec<WorktreeInfo>> {
    Ok(registrations(repo)?
        .into_iter()
        .map(|r| {
            let missing = match &r.base {
                Some(b) => std::fs::symlink_metadata(b.join(".git")).is_err(),
                None => true,
            };
            WorktreeInfo {
                path: r.base.clone().unwrap_or_default(),
                branch: r.branch(),
                head: r.head_id,
                admin_id: r.id.clone(),
                prunable: missing && r.locked.is_none(),
                locked: r.locked.clone(),
                missing,
            }
        })
        .collect())
}

/// The worktree (main or linked) whose HEAD is attached to `branch` and whose folder exists, if any.
pub fn checked_out(repo: &Repo, branch: &str) -> Result<Option<PathBuf>> {
    let full = crate::git::refs::branch_ref(branch);
    if let Some(main) = &repo.main_work_dir {
        let head = read_trimmed(&repo.common_dir.join("HEAD"));
        if head.as_deref().and_then(|h| h.strip_prefix("ref:")).map(str::trim) == Some(full.as_str()) {
            return Ok(Some(main.clone()));
        }
    }
    Ok(registrations(repo)?
        .into_iter()
        .find(|r| r.head_ref.as_deref() == Some(full.as_str()))
        .and_then(|r| r.base)
        .filter(|b| b.join(".git").exists()))
}

/// The registered worktree whose folder is `path`, if any.
pub fn find(repo: &Repo, path: &Path) -> Result<Option<WorktreeInfo>> {
    let target = normalize(path);
    Ok(list(repo)?.into_iter().find(|w| w.path == target))
}

fn collect_dirt(path: &Path, limit: usize, look: Look) -> Result<Dirt> {
    changed_paths(path, limit, look).map(Dirt::from)
}

/// Uncommitted work in the worktree at `path`, up to `limit` paths (then `more` is set). Untracked
/// files always count here (even with `status.showUntrackedFiles=no`): they would be lost by removal.
pub fn dirt(path: &Path, limit: usize) -> Result<Dirt> {
    collect_dirt(path, limit.max(1), Look { all_untracked: true, want_more: true, submodules: true })
}

/// Tracked changes that stop a merge from moving the worktree at `path`, up to `limit` paths: as
/// for `git merge --ff-only`, a submodule whose checkout is ahead of or behind its gitlink is not
/// one (the merge does not enter submodules), and neither is a path outside a sparse checkout.
pub fn tracked_dirt_for_merge(path: &Path, limit: usize) -> Result<Dirt> {
    collect_dirt(path, limit.max(1), Look { all_untracked: false, want_more: true, submodules: false })
}

/// True when `git status --porcelain` in the worktree at `path` would print anything: staged or
/// unstaged changes, conflicts, untracked files (ignored files do not count). Stops at the first
/// change found.
pub fn dirty(path: &Path) -> Result<bool> {
    Ok(!collect_dirt(path, 1, Look { all_untracked: false, want_more: false, submodules: true })?.is_clean())
}

/// [`dirty`] for many worktrees at once, checked in parallel; results in the order of `paths`.
pub fn dirty_many(paths: &[PathBuf]) -> Vec<Result<bool>> {
    if paths.len() <= 1 {
        return paths.iter().map(|p| dirty(p)).collect();
    }
    let workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8).min(paths.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<bool>>>> =
        paths.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= paths.len() {
                    break;
                }
                let r = dirty(&paths[i]);
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|m| {
            m.into_inner().unwrap_or_else(|e| e.into_inner()).unwrap_or_else(|| Err(Error::internal("not checked")))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// remove, prune

/// Remove the linked worktree at `path` the way `git worktree remove` does: its folder and its
/// admin dir `$GIT_COMMON_DIR/worktrees/<id>`; the branch is kept. Refuses (exit 1) when the
/// worktree has modified or untracked files, listing up to 10 of them, unless `force`; refuses a
/// worktree locked with `git worktree lock` (a lock left by a killed `add` does not count).
pub fn remove(repo: &Repo, path: &Path, force: bool) -> Result<()> {
    let target = normalize(path);
    let shown = target.display().to_string();
    let regs = registrations(repo)?;
    let Some(reg) = regs.iter().find(|r| r.base.as_deref() == Some(target.as_path())) else {
        return Err(Error::usage(format!("{shown} is not a registered worktree of this repository"))
            .hint("`git worktree list` shows the registered worktrees"));
    };
    if reg.user_locked() {
        let why = reg.locked.as_deref().filter(|r| !r.is_empty()).map(|r| format!(" ({r})")).unwrap_or_default();
        return Err(Error::refused(format!("the worktree {shown} is locked{why}"))
            .hint(format!("unlock it first with `git worktree unlock {shown}`")));
    }
    let present = target.join(".git").exists();
    if present && !force && !reg.initializing() {
        let d = dirt(&target, 10)?;
        if !d.is_clean() {
            return Err(Error::refused(format!(
                "the worktree {shown} has uncommitted work that removing it would lose — {}",
                d.describe()
            ))
            .hint("commit or stash it in that worktree, or rerun with --force to discard it"));
        }
    }
    match crate::git::worktree::remove_linked(repo, &reg.admin, reg.initializing())? {
        Removal::Removed => {}
        Removal::Corrupted(e) => {
            return Err(Error::usage(format!("cannot remove the worktree {shown}: {e}"))
                .with_source(e)
                .hint(format!("`git worktree repair {shown}` fixes the links between the folder and git")));
        }
        Removal::Failed(e) => {
            return Err(Error::internal(format!("cannot remove the worktree {shown}: {e}")).with_source(e))
        }
        // No readable `gitdir` file: only the admin dir is left to remove.
        Removal::NotFound => reg.remove_admin()?,
    }
    Ok(())
}

/// Forget worktrees whose folder is gone (what `git worktree prune` does): remove their admin
/// dirs, except locked ones. Returns the admin ids removed.
pub fn prune_missing(repo: &Repo) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for r in registrations(repo)? {
        if r.locked.is_some() {
            continue;
        }
        let missing = match &r.base {
            Some(b) => std::fs::symlink_metadata(b.join(".git")).is_err(),
            None => true,
        };
        if missing {
            r.remove_admin()?;
            removed.push(r.id);
        }
    }
    Ok(removed)
}

/// Refuse (exit 1) to move `branch` while a worktree is rebasing or bisecting it
/// ([`refuse_busy`]), or while the worktree that has it checked out holds uncommitted changes to
/// tracked files, naming up to 10 of them; `overwriting` says what would overwrite them
/// ("the rollback"). Merge, unmerge and rollback ask this before they move a branch.
pub fn refuse_move(repo: &Repo, branch: &str, overwriting: Option<&str>) -> Result<()> {
    refuse_busy(repo, branch)?;
    let Some(wt) = checked_out(repo, branch)? else { return Ok(()) };
    let dirt = tracked_dirt_for_merge(&wt, 10)?;
    if dirt.modified.is_empty() {
        return Ok(());
    }
    let what = overwriting.map(|w| format!("; {w} would overwrite them")).unwrap_or_default();
    Err(Error::refused(format!(
        "the worktree {} (branch {branch}) has uncommitted changes: {}{what}",
        wt.display(),
        dirt.modified.join(", ")
    ))
    .hint(format!("commit or stash them in {}, then rerun", wt.display())))
}

/// Refuse to move `branch` while a worktree is rebasing it or bisecting from it, as git refuses
/// (`git branch -f`, `git worktree add`): the rebase would end by moving the branch from where it
/// started — away from what was merged — or fail to (git's `is_worktree_being_rebased` and
/// `is_worktree_being_bisected`: `rebase-merge/head-name`, `rebase-apply/head-name` unless `am`
/// is applying, `BISECT_START`).
fn refuse_busy(repo: &Repo, branch: &str) -> Result<()> {
    let full = crate::git::refs::branch_ref(branch);
    let mut worktrees: Vec<(PathBuf, String)> = Vec::new();
    if let Some(main) = &repo.main_work_dir {
        worktrees.push((repo.common_dir.clone(), main.display().to_string()));
    }
    for r in registrations(repo)? {
        let shown = r.base.as_ref().map_or_else(|| r.id.clone(), |b| b.display().to_string());
        worktrees.push((r.admin, shown));
    }
    for (git_dir, shown) in worktrees {
        let rebasing = ["rebase-merge", "rebase-apply"].iter().any(|d| {
            let dir = git_dir.join(d);
            !(*d == "rebase-apply" && dir.join("applying").exists())
                && read_trimmed(&dir.join("head-name")).as_deref() == Some(full.as_str())
        });
        let bisecting = read_trimmed(&git_dir.join("BISECT_START")).as_deref() == Some(branch);
        if !(rebasing || bisecting) {
            continue;
        }
        let (what, finish) = if rebasing {
            ("being rebased", "finish it (`git rebase --continue`) or abort it (`git rebase --abort`)")
        } else {
            ("being bisected", "end it with `git bisect reset`")
        };
        return Err(Error::refused(format!("branch {branch} is {what} in the worktree {shown}; nothing was changed"))
            .hint(format!("{finish} there, then rerun")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worktree_escape_ignore_patterns() {
        assert_eq!(escape_ignore(".boulder/worktrees"), ".boulder/worktrees");
        assert_eq!(escape_ignore("a*b"), "a\\*b");
        assert_eq!(escape_ignore("#x"), "\\#x");
        assert_eq!(escape_ignore("x "), "x\\ ");
    }

    #[test]
    fn worktree_dirt_describe() {
        let d = Dirt { modified: vec!["a".into()], untracked: vec!["b/".into()], more: false };
        assert_eq!(d.describe(), "modified: a; untracked: b/");
        assert!(!d.is_clean());
        assert!(Dirt::default().is_clean());
    }
}
