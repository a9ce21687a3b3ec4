//! Linked worktrees as git lays them out on disk, and gix's making and removing of them.
//!
//! A worktree at `path` has a `.git` file (`gitdir: <admin dir>`) and an admin dir
//! `$GIT_COMMON_DIR/worktrees/<id>` (`gitdir`, `commondir`, `HEAD`, `index`, `locked`, …). This
//! file reads those admin files ([`registrations`]), and creates ([`add_linked`]) and removes
//! ([`remove_linked`]) worktrees with gix so that plain git accepts them as its own. What to do
//! with a registration (repair, refuse, remove) is decided by the `worktree` module above.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use crate::error::{Error, Result};
use crate::git::{ObjectId, Repo};

/// git gives up waiting for a lock after about a second; a lock file (or a worktree locked
/// `initializing`) older than this is left over by a process that was killed.
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// Absolute, with symlinks in existing components resolved (as gix and git record worktree paths).
pub fn normalize(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir().map(|c| c.join(path)).unwrap_or_else(|_| path.to_owned())
    };
    gix::path::realpath(&abs).unwrap_or(abs)
}

/// Open the worktree (main or linked) at `path`.
pub(super) fn open_worktree(path: &Path) -> Result<gix::Repository> {
    gix::open(path)
        .map_err(|e| Error::internal(format!("cannot open the worktree at {}: {e:#}", path.display())).with_source(e))
}

/// The text of a small git file (`HEAD`, `gitdir`, …) without its line ending, if readable.
pub fn read_trimmed(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    Some(text.trim_end_matches(['\n', '\r']).to_owned())
}

/// The admin dir a worktree folder's `.git` file points at (normalized), if it is such a file.
pub fn dot_git_target(work_dir: &Path) -> Option<PathBuf> {
    let dot_git = work_dir.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    if !meta.is_file() {
        return None;
    }
    let text = read_trimmed(&dot_git)?;
    let target = text.strip_prefix("gitdir:")?.trim();
    let p = Path::new(target);
    Some(normalize(&if p.is_relative() { work_dir.join(p) } else { p.to_owned() }))
}

/// A registration under `$GIT_COMMON_DIR/worktrees/<id>`.
#[derive(Debug, Clone)]
pub struct Registration {
    pub id: String,
    pub admin: PathBuf,
    /// The worktree folder, from `gitdir` (normalized); `None` when `gitdir` is missing/unreadable.
    pub base: Option<PathBuf>,
    /// `ref: refs/heads/x` → `Some("refs/heads/x")`.
    pub head_ref: Option<String>,
    pub head_id: Option<ObjectId>,
    pub locked: Option<String>,
}

impl Registration {
    /// Locked `initializing`: while — or after a killed — `worktree add`.
    pub fn initializing(&self) -> bool {
        self.locked.as_deref() == Some("initializing")
    }
    /// Locked by `git worktree lock` (not by an unfinished add).
    pub fn user_locked(&self) -> bool {
        self.locked.is_some() && !self.initializing()
    }
    /// The short branch name HEAD is attached to.
    pub fn branch(&self) -> Option<String> {
        self.head_ref.as_deref().and_then(|r| r.strip_prefix(super::refs::HEADS)).map(str::to_owned)
    }
    /// Remove the admin dir (gone already is fine).
    pub fn remove_admin(&self) -> Result<()> {
        match std::fs::remove_dir_all(&self.admin) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::internal(format!("cannot remove {}: {e}", self.admin.display())).with_source(e)),
        }
    }
}

fn read_registration(repo: &Repo, admin: PathBuf) -> Option<Registration> {
    let id = admin.file_name()?.to_string_lossy().into_owned();
    if !admin.is_dir() {
        return None;
    }
    let base = read_trimmed(&admin.join("gitdir")).filter(|s| !s.is_empty()).map(|s| {
        let p = Path::new(&s);
        let dot_git = if p.is_relative() { admin.join(p) } else { p.to_owned() };
        let base = if dot_git.file_name().map(|n| n == ".git").unwrap_or(false) {
            dot_git.parent().map(Path::to_owned).unwrap_or(dot_git)
        } else {
            dot_git
        };
        normalize(&base)
    });
    let head = read_trimmed(&admin.join("HEAD"));
    let (head_ref, head_id) = match head.as_deref() {
        Some(h) if h.starts_with("ref:") => {
            let r = h["ref:".len()..].trim().to_owned();
            let id = repo.ref_id(&r).ok().flatten();
            (Some(r), id)
        }
        Some(h) => (None, ObjectId::from_hex(h.trim().as_bytes()).ok()),
        None => (None, None),
    };
    let locked = std::fs::read(admin.join("locked")).ok().map(|b| String::from_utf8_lossy(&b).trim().to_owned());
    Some(Registration { id, admin: normalize(&admin), base, head_ref, head_id, locked })
}

/// Every admin dir under `$GIT_COMMON_DIR/worktrees`, sorted by id (including half-made ones).
pub fn registrations(repo: &Repo) -> Result<Vec<Registration>> {
    let dir = repo.common_dir.join("worktrees");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::internal(format!("cannot read {}: {e}", dir.display())).with_source(e)),
    };
    let mut regs: Vec<Registration> = entries.flatten().filter_map(|e| read_registration(repo, e.path())).collect();
    regs.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(regs)
}

/// Admin folders under `<common dir>/worktrees` without a `gitdir` file, older than
/// [`STALE_AFTER`]: left by a worktree creation (git's or git-boulder's) killed
/// half-way; `git worktree prune` removes them.
pub fn unfinished(repo: &Repo) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(repo.common_dir.join("worktrees")) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|admin| {
            let old = std::fs::symlink_metadata(admin).ok().filter(|m| m.is_dir()).and_then(|m| m.modified().ok());
            let old = old.and_then(|t| t.elapsed().ok()).is_some_and(|age| age >= STALE_AFTER);
            old && std::fs::symlink_metadata(admin.join("gitdir")).is_err()
        })
        .collect();
    out.sort();
    out
}

/// A failure gix reported: its text as gix words it (with `{:#}`), and gix's error kept below it
/// as the cause.
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub struct Failure {
    text: String,
    #[source]
    source: Option<crate::error::Source>,
}

impl Failure {
    fn new(text: impl Into<String>) -> Failure {
        Failure { text: text.into(), source: None }
    }
    fn of(e: impl std::error::Error + Send + Sync + 'static) -> Failure {
        Failure { text: format!("{e:#}"), source: Some(Box::new(e)) }
    }
    fn doing(what: &str, e: impl Into<crate::error::Source>) -> Failure {
        let e = e.into();
        Failure { text: format!("{what}: {e}"), source: Some(e) }
    }
}

/// Why [`add_linked`] made no worktree. The texts are gix's, with their causes.
#[derive(Debug)]
pub enum AddError {
    /// The branch is checked out in these worktrees.
    CheckedOut(Vec<PathBuf>),
    /// Something in the way of the new worktree.
    Conflict(Failure),
    /// Any other failure before the files were written.
    Failed(Failure),
    /// Writing the file at `path` failed.
    File { path: String, error: String },
    /// Two files of the checkout collided at `path`.
    Collision { path: String, kind: String },
}

/// Every registration, read once and kept while one command adds worktrees one after another
/// (`stream init` of a whole plan): reading them all is linear in the worktrees, so reading them
/// again for each worktree added made adding N worktrees quadratic. What this command adds is
/// noted as it goes ([`Known::added`]); what other processes change is seen when the registrations
/// are read again, which happens once [`Known::REREAD`] has passed (so a branch checked out
/// elsewhere since is noticed within that time, as git's own check only sees what is there when
/// it looks) and after [`Known::forget`].
pub struct Known {
    regs: Vec<Registration>,
    read_at: Option<std::time::Instant>,
}

impl Known {
    /// How long registrations read are taken as current.
    pub const REREAD: std::time::Duration = std::time::Duration::from_secs(1);

    /// Nothing read yet: the first [`Known::current`] reads.
    pub fn new() -> Known {
        Known { regs: Vec::new(), read_at: None }
    }

    /// The registrations, read again when they are older than [`Known::REREAD`] or forgotten.
    pub fn current(&mut self, repo: &Repo) -> Result<&[Registration]> {
        if self.read_at.is_none_or(|at| at.elapsed() >= Self::REREAD) {
            self.regs = registrations(repo)?;
            self.read_at = Some(std::time::Instant::now());
        }
        Ok(&self.regs)
    }

    /// Read them again next time (after removing or repairing registrations).
    pub fn forget(&mut self) {
        self.read_at = None;
    }

    /// Note the registration this command just made at `admin`.
    pub fn added(&mut self, repo: &Repo, admin: &Path) {
        if let Some(reg) = read_registration(repo, admin.to_owned()) {
            self.regs.retain(|r| r.id != reg.id);
            self.regs.push(reg);
        }
    }
}

impl Default for Known {
    fn default() -> Known {
        Known::new()
    }
}

/// Make `target` a linked worktree with HEAD attached to `full_branch` (which must exist and which
/// the caller checked is checked out nowhere, from [`Known`]), and check out its files. Returns
/// how many files were written and the new admin dir.
///
/// The admin files are written as `git worktree add` writes them (gix's `prepare`: the admin dir
/// `worktrees/<id>` reserved by creating it, locked `initializing`, `gitdir`, `commondir`, the
/// folder's `.git` file; then `HEAD` and its reflog), the files and the index by gix's initial
/// checkout (filters, attributes, sparse patterns), then the `initializing` lock is removed. Unlike
/// gix's `add_worktree`, which opens every other worktree to check that the branch is not checked
/// out there (linear in the worktrees for each one added), nothing here reads other worktrees.
/// A failure removes what was made; a kill leaves the registration locked `initializing`, which
/// [`crate::worktree::add`] finishes or removes.
pub fn add_linked(
    repo: &Repo,
    target: &Path,
    full_branch: &str,
) -> Result<std::result::Result<(usize, PathBuf), AddError>> {
    let name = gix::refs::FullName::try_from(full_branch)
        .map_err(|e| Error::usage(format!("invalid ref name {full_branch:?}: {e}")).with_source(e))?;
    if repo.config_bool("worktree.useRelativePaths").unwrap_or(false) {
        // Relative links also upgrade the repository format: gix's own `add_worktree` does all of it.
        return add_linked_by_gix(repo, target, name);
    }
    let failed = |what: &str, e: crate::error::Source| AddError::Failed(Failure::doing(what, e));
    let Some(tip) = repo.ref_id(full_branch)? else {
        return Ok(Err(AddError::Failed(Failure::new(format!("the local branch {full_branch} could not be found")))));
    };
    let sparse_source = repo.sparse_checkout().then_some(repo.git_dir.as_path());
    let prepared = match gix_worktree::add::prepare(
        target,
        gix_worktree::add::Context { common_dir: &repo.common_dir, git_dir: sparse_source },
        gix_worktree::add::Options { relative_paths: false },
    ) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Ok(Err(AddError::Conflict(Failure::doing("Could not prepare the linked worktree", e))))
        }
        Err(e) => return Ok(Err(failed("Could not prepare the linked worktree", e.into()))),
    };
    let admin = prepared.git_dir().to_owned();
    if let Err(e) = std::fs::write(admin.join("HEAD"), format!("ref: {full_branch}\n")) {
        return Ok(Err(failed("Could not write the linked worktree HEAD", e.into())));
    }
    if repo.config_bool("extensions.worktreeConfig").unwrap_or(false) {
        if let Err(e) = copy_worktree_config(&repo.git_dir.join("config.worktree"), &admin.join("config.worktree")) {
            return Ok(Err(failed("Could not write the new worktree configuration", e)));
        }
    }
    // Opened as the repository itself was (its identity fallback included, see `with_identity`).
    let options = super::identity::with_identity(repo)?.open_options().clone().open_path_as_is(true);
    let writer = match gix::open_opts(&admin, options) {
        Ok(wt) => wt,
        Err(e) => {
            return Ok(Err(AddError::Failed(Failure {
                text: format!("Could not open a worktree repository: {e:#}"),
                source: Some(Box::new(e)),
            })))
        }
    };
    // As git and gix do: HEAD's reflog starts at the branch's commit, the branch itself unchanged.
    let edit = gix::refs::transaction::RefEdit::update_with_log(
        "HEAD".try_into().expect("valid reference name"),
        tip,
        gix::refs::transaction::PreviousValue::Any,
        gix::refs::transaction::LogChange { mode: gix::refs::transaction::RefLog::Only, ..Default::default() },
    );
    if let Err(e) = writer.edit_reference(edit) {
        return Ok(Err(AddError::Failed(Failure {
            text: format!("Could not initialize the linked worktree HEAD and its reflog: {e:#}"),
            source: Some(Box::new(e)),
        })));
    }
    // Registered (`.git` file, admin dir locked `initializing`), no index, no files yet: a kill
    // here or during the checkout leaves a worktree that must be finished before any use.
    crate::failpoint::hit("worktree-registered");
    let interrupt = AtomicBool::new(false);
    let checked_out = match writer.worktree() {
        Some(w) => w.checkout(gix::progress::Discard, &interrupt),
        None => return Ok(Err(AddError::Failed(Failure::new("the new worktree has no work tree")))),
    };
    let outcome = match checked_out {
        Ok(o) => o,
        Err(e) if e.is_conflict() => return Ok(Err(AddError::Conflict(Failure::of(e)))),
        Err(e) => return Ok(Err(AddError::Failed(Failure::of(e)))),
    };
    if let Some(err) = outcome.errors.first() {
        return Ok(Err(AddError::File { path: err.path.to_string(), error: format!("{:#}", err.error) }));
    }
    if let Some(c) = outcome.collisions.first() {
        return Ok(Err(AddError::Collision { path: c.path.to_string(), kind: format!("{:?}", c.error_kind) }));
    }
    if let Err(e) = prepared.persist() {
        return Ok(Err(failed("Could not finish adding the linked worktree", e.into())));
    }
    Ok(Ok((outcome.files_updated, normalize(&admin))))
}

/// The new worktree's `config.worktree`: the source's, without `core.worktree` and a true
/// `core.bare` (as `git worktree add` copies it).
fn copy_worktree_config(source: &Path, destination: &Path) -> std::result::Result<(), crate::error::Source> {
    if !source.exists() {
        return Ok(());
    }
    let mut config = gix::config::File::from_path_no_includes(source.to_owned(), gix::config::Source::Worktree)?;
    if config.boolean("core.bare").ok().flatten().unwrap_or(false) {
        if let Ok(mut values) = config.raw_values_mut("core.bare") {
            values.delete_all();
        }
    }
    if let Ok(mut values) = config.raw_values_mut("core.worktree") {
        values.delete_all();
    }
    let mut out = std::fs::File::create(destination)?;
    Ok(config.write_to(&mut out)?)
}

/// [`add_linked`] through gix's `add_worktree` (which reads every other worktree first).
fn add_linked_by_gix(
    repo: &Repo,
    target: &Path,
    name: gix::refs::FullName,
) -> Result<std::result::Result<(usize, PathBuf), AddError>> {
    let writer = super::identity::with_identity(repo)?;
    let interrupt = AtomicBool::new(false);
    // Before it creates anything, gix reads every other worktree's registration; one that another
    // `stream init` (or `git worktree add`) is creating this very moment has an empty `gitdir`
    // file for an instant. That is a passing state, not an error: look again shortly.
    let prepare = || writer.prepare_add_worktree(target, gix::worktree::add::Head::Attached(name.clone()), &interrupt);
    let mut result = prepare();
    for _ in 0..50 {
        match &result {
            Err(e) if format!("{e:#}").contains("Failed to read or iterate worktree directories") => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                result = prepare();
            }
            _ => break,
        }
    }
    let classify = |e: gix::Error| {
        if let Some(gix::worktree::add::Error::CheckedOut { worktree_dirs, .. }) =
            e.downcast_any_ref::<gix::worktree::add::Error>()
        {
            return AddError::CheckedOut(worktree_dirs.clone());
        }
        if e.is_conflict() {
            return AddError::Conflict(Failure::of(e));
        }
        AddError::Failed(Failure::of(e))
    };
    let prepared = match result {
        Ok(p) => p,
        Err(e) => return Ok(Err(classify(e))),
    };
    let admin = normalize(prepared.repo().git_dir());
    crate::failpoint::hit("worktree-registered");
    let (_wt, outcome) = match prepared.checkout(gix::progress::Discard, &interrupt) {
        Ok(r) => r,
        Err(e) => return Ok(Err(classify(e))),
    };
    if let Some(err) = outcome.errors.first() {
        return Ok(Err(AddError::File { path: err.path.to_string(), error: format!("{:#}", err.error) }));
    }
    if let Some(c) = outcome.collisions.first() {
        return Ok(Err(AddError::Collision { path: c.path.to_string(), kind: format!("{:?}", c.error_kind) }));
    }
    Ok(Ok((outcome.files_updated, admin)))
}

/// What [`remove_linked`] did.
#[derive(Debug)]
pub enum Removal {
    /// The folder and the admin dir are gone.
    Removed,
    /// gix knows no worktree with that admin dir (no readable `gitdir` file).
    NotFound,
    /// The links between the folder and git are broken (gix's error).
    Corrupted(Failure),
    /// Any other failure (gix's error).
    Failed(Failure),
}

/// Remove the linked worktree whose admin dir is `admin` (normalized), its folder with whatever
/// is in it and its admin dir, as `git worktree remove --force` does; `override_lock` also
/// removes one still locked by an unfinished add.
pub fn remove_linked(repo: &Repo, admin: &Path, override_lock: bool) -> Result<Removal> {
    let force = if override_lock {
        gix::worktree::remove::Force::OverrideLock
    } else {
        gix::worktree::remove::Force::DiscardChanges
    };
    let proxy = repo
        .repo
        .worktrees()
        .map_err(|e| Error::internal(format!("cannot list worktrees: {e:#}")).with_source(e))?
        .into_iter()
        .find(|p| normalize(p.git_dir()) == admin);
    let Some(proxy) = proxy else { return Ok(Removal::NotFound) };
    Ok(match proxy.remove(force, gix::progress::Discard) {
        Ok(_) => Removal::Removed,
        Err(e) if e.is_corrupted() => Removal::Corrupted(Failure::of(e)),
        Err(e) => Removal::Failed(Failure::of(e)),
    })
}
