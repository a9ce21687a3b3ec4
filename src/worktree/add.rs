//! Making a stream's worktree ([`add`]): where its branch starts, the leftovers of a killed run
//! finished or removed, a worktree already there repaired or refused, and a sparse checkout widened
//! to the stream's folders.

use std::path::{Path, PathBuf};

use super::AddOutcome;
use crate::error::{Error, Result};
use crate::git::worktree::{dot_git_target, normalize, read_trimmed, registrations, AddError, Known, Registration};
use crate::git::{ObjectId, Repo};

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
    let mut recovered = Vec::new();

    // 1. Leftovers of a killed `add` at this path, and 2. a worktree already there.
    let mut dot_git = dot_git_target(&target);
    let remaining = clear_unfinished(known.current(repo)?, &target, &mut dot_git, &mut recovered)?;
    if !recovered.is_empty() {
        known.forget();
    }
    let mut repaired = Vec::new();
    let live = find_live(&target, branch, dot_git.as_deref(), &remaining, &mut recovered, &mut repaired)?;
    if let Some(live) = live {
        return finish_live(known, &target, branch, &name, &live, &remaining, recovered, repaired);
    }

    // 3. A fresh worktree. The branch must not be checked out anywhere else (unborn HEADs too).
    let folder = folder_state(&target)?;
    debug_assert!(folder != Folder::NonEmpty);
    if !recovered.is_empty() {
        known.forget();
    }
    // Read again only when a leftover was removed above (reading every registration is linear in
    // the worktrees, and `stream init` of many streams would do it once per stream).
    refuse_checked_out(repo, known.current(repo)?, branch, &name, base)?;
    let branch_created = ensure_branch(repo, branch, base)?;
    // A partial clone fetches the files first, in one batch, as `git worktree add` does.
    repo.prefetch(&[format!("{name}^{{tree}}")], &[])?;
    let files = make(repo, known, &target, branch, &name)?;
    Ok(AddOutcome::Created { branch_created, files, recovered })
}

/// Remove the leftovers of a killed `add` at `target`: registered but never finished. (An admin
/// dir named after this path's basename, still `initializing` and without a `gitdir` file, is
/// from a run killed right after reserving it; callers hold the stream lock, so no other `add` is
/// making it now.) Returns the other registrations of `target`; `dot_git` is cleared when the
/// half-made folder it belonged to is removed.
fn clear_unfinished(
    regs: &[Registration],
    target: &Path,
    dot_git: &mut Option<PathBuf>,
    recovered: &mut Vec<String>,
) -> Result<Vec<Registration>> {
    let shown = target.display().to_string();
    let at_path: Vec<Registration> = regs.iter().filter(|r| r.base.as_deref() == Some(target)).cloned().collect();
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
            std::fs::remove_dir_all(target).map_err(|e| {
                Error::internal(format!("cannot remove the half-made worktree {shown}: {e}")).with_source(e)
            })?;
            *dot_git = None;
            recovered.push(format!("removed the half-made worktree folder {shown}"));
        }
        r.remove_admin()?;
        recovered.push(format!("removed the unfinished registration worktrees/{}", r.id));
    }
    Ok(remaining)
}

/// The live registration of `target` — the folder's `.git` file points at it — if any. Without
/// one: registrations whose folder is gone are stale and removed; a folder that lost its `.git`
/// file is linked back to its one registration; any other folder there is refused.
fn find_live(
    target: &Path,
    branch: &str,
    dot_git: Option<&Path>,
    remaining: &[Registration],
    recovered: &mut Vec<String>,
    repaired: &mut Vec<String>,
) -> Result<Option<Registration>> {
    let shown = target.display().to_string();
    let live = remaining.iter().find(|r| dot_git == Some(r.admin.as_path())).cloned();
    if live.is_some() {
        return Ok(live);
    }
    let folder = folder_state(target)?;
    match folder {
        Folder::Missing | Folder::Empty => {
            // Registrations whose folder is gone are stale (what `git worktree prune` removes).
            for r in remaining {
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
            Ok(None)
        }
        Folder::NonEmpty => {
            if dot_git.is_none() && remaining.len() == 1 && !target.join(".git").exists() {
                // The folder lost (or never got) its `.git` file: link it back, like `git worktree repair`.
                let r = remaining[0].clone();
                std::fs::write(target.join(".git"), format!("gitdir: {}\n", r.admin.display()))
                    .map_err(|e| Error::internal(format!("cannot write {shown}/.git: {e}")).with_source(e))?;
                repaired.push(format!("restored {shown}/.git"));
                Ok(Some(r))
            } else {
                let what = if target.join(".git").exists() {
                    "a git repository or worktree that does not belong to this stream"
                } else {
                    "a folder that is not a git worktree"
                };
                Err(Error::usage(format!(
                    "{shown} already exists and is {what}, so the worktree of branch {branch} cannot be made there"
                ))
                .hint(format!("move it away (e.g. `mv {shown} {shown}.bak`) and rerun")))
            }
        }
    }
}

/// The worktree `live` is already at `target`: refused when it is of another branch, else its
/// index rebuilt when missing or empty, and stale duplicates of its registration removed.
#[allow(clippy::too_many_arguments)] // the state of one `add`, handed on whole
fn finish_live(
    known: &mut Known,
    target: &Path,
    branch: &str,
    name: &str,
    live: &Registration,
    remaining: &[Registration],
    mut recovered: Vec<String>,
    mut repaired: Vec<String>,
) -> Result<AddOutcome> {
    let shown = target.display().to_string();
    // Other registrations claiming this path but not linked from it are stale duplicates.
    for r in remaining.iter().filter(|r| r.admin != live.admin && !r.user_locked()) {
        r.remove_admin()?;
        recovered.push(format!("removed the stale registration worktrees/{}", r.id));
    }
    if live.head_ref.as_deref() != Some(name) {
        let on = match live.branch() {
            Some(b) => format!("on branch {b}"),
            None => "with a detached HEAD".into(),
        };
        return Err(Error::usage(format!("{shown} is already a worktree {on}, not of branch {branch}"))
            .hint(format!("remove it with `git worktree remove {shown}` (or move it away) and rerun")));
    }
    if !live.admin.join("index").exists() {
        let n = crate::git::index::rebuild_index(target)?;
        repaired.push(format!("rebuilt the missing index ({n} missing files checked out)"));
    } else if crate::git::index::index_missing_or_empty(target)? {
        let n = crate::git::index::rebuild_index(target)?;
        repaired.push(format!("rebuilt the empty index ({n} missing files checked out)"));
    }
    if repaired.is_empty() && recovered.is_empty() {
        return Ok(AddOutcome::AlreadyPresent);
    }
    known.forget();
    repaired.extend(recovered);
    Ok(AddOutcome::Repaired { branch_created: false, what: repaired })
}

/// Refuse (exit 1) when `branch` (full name `full`) is checked out in the main worktree or in one
/// of `regs`.
fn refuse_checked_out(repo: &Repo, regs: &[Registration], branch: &str, full: &str, base: &str) -> Result<()> {
    let main_head = read_trimmed(&repo.common_dir.join("HEAD"));
    if let (Some(main), Some(h)) = (&repo.main_work_dir, &main_head) {
        if h.strip_prefix("ref:").map(str::trim) == Some(full) {
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
    if let Some(other) = regs.iter().find(|r| r.head_ref.as_deref() == Some(full)) {
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
    Ok(())
}

/// Make the linked worktree at `target` on the branch `name`, and tell `known` of it. Returns
/// how many files were checked out.
fn make(repo: &Repo, known: &mut Known, target: &Path, branch: &str, name: &str) -> Result<usize> {
    let shown = target.display().to_string();
    match crate::git::worktree::add_linked(repo, target, name)? {
        Ok((files, admin)) => {
            known.added(repo, &admin);
            Ok(files)
        }
        Err(AddError::CheckedOut(worktree_dirs)) => {
            let dirs: Vec<String> = worktree_dirs.iter().map(|d| d.display().to_string()).collect();
            Err(Error::refused(format!("branch {branch} is already checked out in {}", dirs.join(", ")))
                .hint("remove that worktree or switch it to another branch, then rerun"))
        }
        Err(AddError::Conflict(e)) => {
            Err(Error::refused(format!("cannot make the worktree {shown}: {e}")).with_source(e))
        }
        Err(AddError::Failed(e)) => {
            Err(Error::internal(format!("cannot make the worktree {shown} on branch {branch}: {e}")).with_source(e))
        }
        Err(AddError::File { path, error }) => {
            Err(Error::internal(format!("checkout of {shown} failed at {path}: {error}")).with_source(error))
        }
        Err(AddError::Collision { path, kind }) => {
            Err(Error::internal(format!("checkout of {shown} collided at {path} ({kind})")))
        }
    }
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
