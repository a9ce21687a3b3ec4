//! Calls of the `git` CLI, for what gix 0.90 cannot do. Every call says why it is here.
//!
//! Here: making and running a `git` command; what the calls are for in the files beside it —
//! `push.rs`, `fetch.rs`, the worktree's files and index (`worktree.rs`), a rebase handed to
//! an agent (`rebase.rs`), packing the state's objects (`pack.rs`).

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::error::{Error, Result};

mod diff;
mod fetch;
mod pack;
mod push;
mod rebase;
mod worktree;

pub use diff::{diff_paged, numstat, NumStat};
pub use fetch::{fetch, fetch_objects, missing_objects, refspecs_unmap, start_fetch, FetchedRef, Local, RunningFetch};
pub use pack::{pack_objects, write_commit_graph};
pub use push::{
    lfs_pre_push, parse_porcelain, push, push_leased, remote_lines, PushFlag, PushUpdate, Pushed, PushedRef,
};
pub use rebase::{add_path, patch_ids, rebase, rebase_abort, rebase_in_progress, status_lines, unmerged, RebaseStep};
pub use worktree::{checkout_index, commit_paths, sparse_reapply, sparse_widen};

/// A `git` command with a clean hook environment, run in `dir`.
pub fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).stdin(Stdio::null());
    // Hooks of ours must not re-enter when we run git.
    cmd.env("BOULDER_SKIP_HOOKS", "1");
    crate::context::export(&mut cmd);
    cmd
}

/// A `git` command as the user runs it, in `dir`: with git-boulder's hooks on, and `git-boulder`
/// on `PATH` being this very binary (the hooks call it).
///
/// Why the git CLI: the demo shows what the user's own `git add` and `git commit` do in a stream
/// worktree — hooks recording activity and checking ownership — and only git runs those.
pub fn as_user(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).stdin(Stdio::null());
    self_on_path(&mut cmd);
    cmd.env_remove("BOULDER_SKIP_HOOKS");
    crate::context::export(&mut cmd);
    cmd
}

/// `git hook run --ignore-missing post-merge -- 0` in the worktree `dir` a merge just moved, as
/// `git merge` runs it once it has updated a worktree (`0`: not a squash merge); its exit status
/// is ignored, as git ignores it. Its output goes to stderr, as under `git merge`.
///
/// Why the git CLI: the hook is the user's own (a hook manager's `npm install`, git-lfs's file
/// locking), and which file it is — `core.hooksPath`, a manager's folder — is git's to say. A git
/// older than 2.36 has no `git hook run`, and nothing runs.
pub fn post_merge(dir: &Path) {
    let mut cmd = as_user(dir);
    cmd.args(["hook", "run", "--ignore-missing", "post-merge", "--", "0"]).stdout(Stdio::null());
    let _ = cmd.status();
}

/// Put the folder of this very binary first on `cmd`'s `PATH`, so that what it runs — git's hooks,
/// an agent's `git boulder …` — finds this git-boulder even where none is installed (the demo,
/// run with `cargo run`).
pub fn self_on_path(cmd: &mut Command) {
    if let Some(bin_dir) = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.to_path_buf())) {
        let mut paths = vec![bin_dir];
        paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
        if let Ok(joined) = std::env::join_paths(paths) {
            cmd.env("PATH", joined);
        }
    }
}

/// Run a prepared command and return its output, failing on a non-zero exit with git's stderr.
pub fn run(mut cmd: Command, what: &str) -> Result<Output> {
    let out = cmd.output().map_err(|e| Error::internal(format!("cannot run git to {what}: {e}")).with_source(e))?;
    if !out.status.success() {
        return Err(Error::internal(format!("git failed to {what}: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(out)
}

/// Start `cmd` with `input` on its stdin and its stderr captured, and wait for it: its output,
/// whatever its exit status (the caller's stdout setting is kept).
fn feed(mut cmd: Command, input: &[u8], what: &str) -> Result<Output> {
    use std::io::Write;
    cmd.stdin(Stdio::piped()).stderr(Stdio::piped());
    let mut child =
        cmd.spawn().map_err(|e| Error::internal(format!("cannot run git to {what}: {e}")).with_source(e))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A write error shows in git's exit status and stderr.
        let _ = stdin.write_all(input);
    }
    child.wait_with_output().map_err(|e| Error::internal(format!("git failed to {what}: {e}")).with_source(e))
}

/// [`run`] with `input` on the command's stdin.
pub fn run_with_input(cmd: Command, input: &[u8], what: &str) -> Result<Output> {
    let out = feed(cmd, input, what)?;
    if !out.status.success() {
        return Err(Error::internal(format!("git failed to {what}: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(out)
}
