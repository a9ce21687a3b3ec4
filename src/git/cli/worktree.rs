//! Writing a worktree's files and index as git does: `checkout-index` through the filters, the
//! sparse checkout, and a commit of the user's own files with their hooks.

use std::path::Path;
use std::process::Stdio;

use super::{as_user, feed, git, run, run_with_input};
use crate::error::{Error, Result};

/// Write the files `paths` (as recorded in the index file `index_file`) of the worktree `work_dir`
/// whose git dir is `git_dir` into the folder `stage` instead, each at its path below it, from
/// where the caller renames them into place: `git checkout-index -f -z --stdin --prefix=STAGE/`.
///
/// Why the git CLI: files must reach a worktree exactly as `git checkout` writes them — converted
/// by `.gitattributes` (`text`, `eol`, `ident`, `working-tree-encoding`) and by every configured
/// filter driver (`filter.<driver>.smudge` and `.process`, git-lfs among them). That is git's
/// behaviour to match, not ours to re-implement. Attributes are read as for the worktree's paths
/// (the prefix does not change which rules apply). The index file is a private one
/// (`GIT_INDEX_FILE`), read only: the worktree's own index (whose lock the caller holds) is not
/// touched.
pub fn checkout_index(git_dir: &Path, work_dir: &Path, index_file: &Path, stage: &Path, paths: &[&[u8]]) -> Result<()> {
    let mut cmd = git(work_dir);
    for var in ["GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX", "GIT_NAMESPACE"] {
        cmd.env_remove(var);
    }
    cmd.env("GIT_DIR", git_dir)
        .env("GIT_WORK_TREE", work_dir)
        .env("GIT_INDEX_FILE", index_file)
        .args(["checkout-index", "-f", "-z", "--stdin"])
        .arg({
            let mut prefix = std::ffi::OsString::from("--prefix=");
            prefix.push(stage.as_os_str());
            prefix.push("/");
            prefix
        })
        .stdout(Stdio::null());
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p);
        input.push(0);
    }
    let out = feed(cmd, &input, "write files with checkout-index")?;
    if !out.status.success() || !out.stderr.is_empty() && String::from_utf8_lossy(&out.stderr).contains("error:") {
        return Err(Error::internal(format!(
            "git checkout-index could not write files into {}: {}",
            work_dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// `git sparse-checkout reapply` in `work_dir`.
///
/// Why the git CLI: which paths a sparse checkout holds is decided by git's own pattern rules
/// (cone or not); after a merge added paths, git applies them as `git merge` would have.
pub fn sparse_reapply(work_dir: &Path) -> Result<()> {
    let mut cmd = git(work_dir);
    cmd.args(["sparse-checkout", "reapply"]);
    run(cmd, "apply the sparse-checkout patterns").map(|_| ())
}

/// Widen the sparse checkout of the worktree `work_dir` by `dirs` (`None`: to the whole tree),
/// and write the files that brings in. In cone mode the folders are added as they are; otherwise
/// each as the pattern `/<dir>/`.
///
/// Why the git CLI: `git sparse-checkout add` (or `disable`) writes the patterns and the newly
/// included files exactly as git does, filters and all; gix 0.90 has no sparse-checkout writer.
pub fn sparse_widen(work_dir: &Path, cone: bool, dirs: Option<&[String]>) -> Result<()> {
    let mut cmd = git(work_dir);
    match dirs {
        None => {
            cmd.args(["sparse-checkout", "disable"]);
        }
        Some(dirs) => {
            cmd.args(["sparse-checkout", "add", "--skip-checks", "--"]);
            if cone {
                cmd.args(dirs);
            } else {
                cmd.args(dirs.iter().map(|d| format!("/{d}/")));
            }
        }
    }
    run(cmd, "widen the worktree's sparse checkout").map(|_| ())
}

/// Commit the files `paths` (relative to `dir`) of the worktree `dir` as they are on disk, and
/// nothing else that may be staged: `git add -f -- PATHS` (asked for by name, so even when an
/// exclude rule matches them) then `git commit -q -m MESSAGE -- PATHS`.
///
/// Why the git CLI: this is a commit of the user's own project files (`agent install --commit`),
/// made as the user makes it — with their identity, signing and commit hooks (git-boulder's
/// ownership check among them) — which only git itself does.
///
/// When the commit does not happen (a commit hook refused it, say), the index entries of `paths`
/// are put back as they were before the `git add` — `git ls-files -s` read first, then
/// `git update-index --index-info` (or `--force-remove` for a path the index did not hold): the
/// same plumbing git's own porcelain stands on, and the index is git's file to write.
pub fn commit_paths(dir: &Path, paths: &[&str], message: &str) -> Result<()> {
    let mut ls = as_user(dir);
    ls.args(["ls-files", "-s", "-z", "--"]).args(paths);
    let before = run(ls, "read the index entries of the harness files")?.stdout;
    let mut add = as_user(dir);
    add.args(["add", "-f", "--"]).args(paths);
    run(add, "stage the harness files")?;
    let mut commit = as_user(dir);
    commit.args(["commit", "-q", "-m", message, "--"]).args(paths);
    let out = commit.output().map_err(|e| Error::internal(format!("cannot run git commit: {e}")).with_source(e))?;
    if !out.status.success() {
        let why = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let mut err = Error::refused(format!("git commit failed: {}", why.trim()));
        if let Err(e) = restore_index(dir, paths, &before) {
            err = err.hint(format!(
                "the harness files stay staged ({}): git restore --staged -- {}",
                e.message,
                paths.join(" ")
            ));
        }
        return Err(err);
    }
    Ok(())
}

/// Put the index entries of `paths` back to `before` (`git ls-files -s -z` output).
fn restore_index(dir: &Path, paths: &[&str], before: &[u8]) -> Result<()> {
    let held: Vec<&str> = before
        .split(|b| *b == 0)
        .filter_map(|rec| std::str::from_utf8(rec).ok())
        .filter_map(|rec| rec.split_once('\t').map(|(_, path)| path))
        .collect();
    let gone: Vec<&str> = paths.iter().copied().filter(|p| !held.contains(p)).collect();
    if !gone.is_empty() {
        let mut rm = as_user(dir);
        rm.args(["update-index", "--force-remove", "--"]).args(&gone);
        run(rm, "unstage the harness files")?;
    }
    if !before.is_empty() {
        let mut info = as_user(dir);
        info.args(["update-index", "-z", "--index-info"]).stdout(Stdio::null());
        run_with_input(info, before, "restore the index")?;
    }
    Ok(())
}
