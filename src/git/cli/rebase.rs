//! A rebase in a stream worktree as the user runs it, stopped on conflicts for an agent to
//! resolve, and patch ids: "the same change after a rebase".

use std::path::Path;
use std::process::Stdio;

use super::{as_user, git, run, run_with_input};
use crate::error::{Error, Result};

/// How a `git rebase` step in a worktree ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebaseStep {
    /// The rebase finished (or there was nothing to do).
    Finished,
    /// It stopped with files left unmerged; git's own words on stderr.
    Stopped(String),
}

/// `git rebase ONTO` in the stream worktree `work_dir`, or `git rebase --continue` (`onto`
/// `None`), as the user would run it: git-boulder's hooks on (post-rewrite carries each replayed
/// commit's note over), no editor (`GIT_EDITOR=true` keeps each message).
///
/// Why the git CLI: a rebase that stops on conflicts must leave the worktree exactly as git's own
/// does — conflict markers written through the checkout filters, the index's stages, the
/// `rebase-merge` folder that `git status` and the agent's own `git rebase --continue` understand —
/// so that what the agent is handed is an ordinary git rebase in progress.
pub fn rebase(work_dir: &Path, onto: Option<&str>) -> Result<RebaseStep> {
    let mut cmd = as_user(work_dir);
    cmd.env("GIT_EDITOR", "true").stdout(Stdio::null()).stderr(Stdio::piped());
    match onto {
        Some(onto) => cmd.args(["-c", "rebase.autoStash=false", "rebase", "--no-autosquash", onto]),
        None => cmd.args(["rebase", "--continue"]),
    };
    let what = if onto.is_some() { "rebase the stream" } else { "continue the rebase" };
    let out = cmd.output().map_err(|e| Error::internal(format!("cannot run git to {what}: {e}")).with_source(e))?;
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() {
        return Ok(RebaseStep::Finished);
    }
    if rebase_in_progress(work_dir) {
        return Ok(RebaseStep::Stopped(said));
    }
    Err(Error::internal(format!("git failed to {what}: {said}")))
}

/// `git rebase --abort` in `work_dir`: the branch and the worktree back as they were before it.
///
/// Why the git CLI: only git knows every piece of its own rebase state to undo.
pub fn rebase_abort(work_dir: &Path) -> Result<()> {
    let mut cmd = as_user(work_dir);
    cmd.args(["rebase", "--abort"]);
    run(cmd, "abort the rebase").map(|_| ())
}

/// Is a rebase stopped in the worktree `work_dir` (git's `rebase-merge` or `rebase-apply` folder
/// in its admin dir)?
pub fn rebase_in_progress(work_dir: &Path) -> bool {
    let admin = crate::git::worktree::dot_git_target(work_dir).unwrap_or_else(|| work_dir.join(".git"));
    ["rebase-merge", "rebase-apply"].iter().any(|d| admin.join(d).is_dir())
}

/// The unmerged entries of the index of `work_dir`: (stage, blob, path), as `git ls-files -u -z`
/// lists them.
///
/// Why the git CLI: the index of a rebase stopped by git, with its conflict stages, is read the
/// way git wrote it.
pub fn unmerged(work_dir: &Path) -> Result<Vec<(u8, String, String)>> {
    let mut cmd = git(work_dir);
    cmd.args(["ls-files", "-u", "-z"]);
    let out = run(cmd, "list the unmerged files")?;
    let mut found = Vec::new();
    for rec in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let rec = String::from_utf8_lossy(rec);
        let Some((meta, path)) = rec.split_once('\t') else { continue };
        let mut parts = meta.split(' ');
        let (_mode, blob, stage) = (parts.next(), parts.next(), parts.next());
        if let (Some(blob), Some(stage)) = (blob, stage.and_then(|s| s.parse().ok())) {
            found.push((stage, blob.to_string(), path.to_string()));
        }
    }
    Ok(found)
}

/// Stage `path` of `work_dir` as it is in the worktree (`git add -- PATH`).
///
/// Why the git CLI: the file is staged through the clean filters and attributes, as the user's
/// `git add` would.
pub fn add_path(work_dir: &Path, path: &str) -> Result<()> {
    let mut cmd = git(work_dir);
    cmd.args(["add", "--", path]);
    run(cmd, "stage a resolved file").map(|_| ())
}

/// `git status --porcelain` of `work_dir` (untracked files included), as lines.
///
/// Why the git CLI: the worktree a rebase just left is judged exactly as `git status` sees it.
pub fn status_lines(work_dir: &Path) -> Result<Vec<String>> {
    let mut cmd = git(work_dir);
    cmd.args(["status", "--porcelain"]);
    let out = run(cmd, "look at the worktree")?;
    Ok(String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect())
}

/// The patch id of each of `commits` that has one (a commit that changes nothing, and a merge
/// commit, has none), as `git diff-tree --stdin -p | git patch-id --stable` computes it.
///
/// Why the git CLI: "the same change after a rebase" is git's patch id (what `git cherry` and
/// `git rebase` use to drop commits already upstream), whose exact definition — the diff text
/// without line numbers or whitespace, hashed — is git's to say. Asked only for commits a
/// landing could not account for otherwise, rarely more than a few.
pub fn patch_ids(
    dir: &Path,
    commits: &[crate::git::ObjectId],
) -> Result<std::collections::HashMap<crate::git::ObjectId, String>> {
    let mut out = std::collections::HashMap::new();
    if commits.is_empty() {
        return Ok(out);
    }
    let mut input = String::new();
    for c in commits {
        input.push_str(&c.to_string());
        input.push('\n');
    }
    let mut diff = git(dir);
    diff.args(["diff-tree", "--stdin", "-p", "--no-color", "--no-ext-diff", "--no-renames", "--no-textconv"]);
    diff.stdout(Stdio::piped());
    let patches = run_with_input(diff, input.as_bytes(), "diff the commits a landing checks")?;
    let mut ids = git(dir);
    ids.args(["patch-id", "--stable"]).stdout(Stdio::piped());
    let listed = run_with_input(ids, &patches.stdout, "compute patch ids")?;
    for line in String::from_utf8_lossy(&listed.stdout).lines() {
        let mut parts = line.split_whitespace();
        if let (Some(patch), Some(commit)) = (parts.next(), parts.next()) {
            if let Ok(c) = crate::git::ObjectId::from_hex(commit.as_bytes()) {
                out.insert(c, patch.to_string());
            }
        }
    }
    Ok(out)
}
