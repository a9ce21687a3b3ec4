//! The lock files that block a ref update — `packed-refs.lock` and a ref's own `<name>.lock` —
//! told apart from a live writer's by their age, and the refusal that names them.

use std::time::Duration;

use gix::bstr::ByteSlice;

use super::full_name;
use crate::error::Error;
use crate::git::Repo;

/// How long a `packed-refs.lock` may sit untouched before it is taken for one a killed writer left
/// behind: git's own writers wait for it at most `core.packedRefsTimeout` (a second by default).
const STALE_LOCK: Duration = Duration::from_secs(5);

/// `packed-refs.lock` of the repository, when it exists and is older than [`STALE_LOCK`]
/// (`fresh`: whatever its age). gix takes that lock for every compare-and-swap of a ref while
/// `packed-refs` exists, so one left by a process killed mid-update (`kill -9`) blocks every ref
/// update until it is removed — as it blocks git's own.
pub(crate) fn packed_lock(g: &gix::Repository, fresh: bool) -> Option<std::path::PathBuf> {
    lock_left(g, "packed-refs.lock", fresh)
}

/// `file` of the repository's common dir (absolute, for messages), when it exists and is older
/// than [`STALE_LOCK`] (`fresh`: whatever its age). Looked at by gix's own path first: it is made
/// absolute only once found (the hooks ask on every commit).
fn lock_left(g: &gix::Repository, file: &str, fresh: bool) -> Option<std::path::PathBuf> {
    let age = std::fs::metadata(g.common_dir().join(file)).ok()?.modified().ok()?.elapsed().unwrap_or_default();
    (fresh || age > STALE_LOCK).then(|| crate::git::absolute(g.common_dir()).join(file))
}

/// The lock file that blocks updating the ref `name`: `packed-refs.lock`, or the ref's own
/// `<name>.lock`, when it is there — however new (`fresh`), or old enough to be a killed writer's
/// (see [`packed_lock`]).
pub(crate) fn blocking_lock(
    g: &gix::Repository,
    name: &gix::refs::FullName,
    fresh: bool,
) -> Option<std::path::PathBuf> {
    packed_lock(g, fresh).or_else(|| lock_left(g, &format!("{}.lock", name.as_bstr().to_str_lossy()), fresh))
}

/// The `packed-refs.lock` of the repository when it is there and (unless `fresh`) old enough to be
/// a killed writer's (see [`packed_lock`]).
pub fn packed_lock_path(repo: &Repo, fresh: bool) -> Option<std::path::PathBuf> {
    packed_lock(&repo.repo, fresh)
}

/// The refusal for updating `what` while a `packed-refs.lock` a killed writer left behind (see
/// [`packed_lock`]) blocks every ref update: `None` when there is none.
pub fn stale_packed_lock(repo: &Repo, what: &str) -> Option<Error> {
    packed_lock(&repo.repo, false).map(|lock| locked(what, &lock))
}

/// The refusal for updating `what` while any `packed-refs.lock` is there, however new.
pub fn packed_lock_now(repo: &Repo, what: &str) -> Option<Error> {
    packed_lock(&repo.repo, true).map(|lock| locked(what, &lock))
}

/// The refusal for an update of `name` blocked by the lock file `lock`, with git's advice.
pub(crate) fn locked(name: &str, lock: &std::path::Path) -> Error {
    Error::refused(format!(
        "cannot update {name}: {} exists, so a git command is updating refs in this repository",
        lock.display()
    ))
    .hint(format!(
        "wait for it to finish and rerun; if no git process is running in this repository (one killed earlier leaves it behind), remove {} (as git itself advises)",
        lock.display()
    ))
}

/// The refusal for updating `name` while a lock file (its own or `packed-refs.lock`) is there.
pub fn blocked(repo: &Repo, name: &str) -> Option<Error> {
    let full = full_name(name).ok()?;
    blocking_lock(&repo.repo, &full, true).map(|lock| locked(name, &lock))
}
