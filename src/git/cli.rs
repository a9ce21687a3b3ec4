//! Calls of the `git` CLI, for what gix 0.90 cannot do. Every call says why it is here.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::error::{Error, Result};

/// A `git` command with a clean hook environment, run in `dir`.
pub fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).stdin(Stdio::null());
    // Hooks of ours must not re-enter when we run git.
    cmd.env("BOULDER_SKIP_HOOKS", "1");
    cmd
}

/// Run a prepared command and return its output, failing on a non-zero exit with git's stderr.
pub fn run(mut cmd: Command, what: &str) -> Result<Output> {
    let out = cmd.output().map_err(|e| Error::internal(format!("cannot run git to {what}: {e}")))?;
    if !out.status.success() {
        return Err(Error::internal(format!("git failed to {what}: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(out)
}

/// Write the files `paths` (as recorded in the index file `index_file`) into the worktree
/// `work_dir` whose git dir is `git_dir`: `git checkout-index -f -u -z --stdin`.
///
/// Why the git CLI: files must reach a worktree exactly as `git checkout` writes them — converted
/// by `.gitattributes` (`text`, `eol`, `ident`, `working-tree-encoding`) and by every configured
/// filter driver (`filter.<driver>.smudge` and `.process`, git-lfs among them). That is git's
/// behaviour to match, not ours to re-implement. The index file is a private one
/// (`GIT_INDEX_FILE`): `-u` records the written files' stat data there, and the worktree's own
/// index (whose lock the caller holds) is not touched.
pub fn checkout_index(git_dir: &Path, work_dir: &Path, index_file: &Path, paths: &[&[u8]]) -> Result<()> {
    use std::io::Write;
    let mut cmd = git(work_dir);
    for var in ["GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX", "GIT_NAMESPACE"] {
        cmd.env_remove(var);
    }
    cmd.env("GIT_DIR", git_dir)
        .env("GIT_WORK_TREE", work_dir)
        .env("GIT_INDEX_FILE", index_file)
        .args(["checkout-index", "-f", "-u", "-z", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| Error::internal(format!("cannot run git checkout-index: {e}")))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p);
        input.push(0);
    }
    // A write error shows in git's exit status and stderr below.
    let _ = stdin.write_all(&input);
    drop(stdin);
    let out = child.wait_with_output().map_err(|e| Error::internal(format!("git checkout-index: {e}")))?;
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

/// What `git push --porcelain` said about one ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedRef {
    /// The remote ref (`refs/boulder/streams/auth`).
    pub remote_ref: String,
    /// `' '` fast-forward, `'+'` forced, `'-'` deleted, `'*'` new, `'='` up to date, `'!'` rejected.
    pub flag: char,
    /// git's summary, e.g. `[rejected] (non-fast-forward)` or `[new reference]`.
    pub summary: String,
}

impl PushedRef {
    pub fn rejected(&self) -> bool {
        self.flag == '!'
    }

    /// Rejected because the remote's ref is not what this side expected — it moved meanwhile
    /// (`[rejected] (fetch first)`, `(non-fast-forward)`, or a lease's `(stale info)`): pulling
    /// and trying again can succeed.
    pub fn lost_race(&self) -> bool {
        self.rejected()
            && self.summary.starts_with("[rejected]")
            && ["fetch first", "non-fast-forward", "stale info"].iter().any(|w| self.summary.contains(w))
    }

    /// Rejected by the server itself (a hook, a `receive.*` rule: `[remote rejected] (…)`), or for
    /// any other reason than a lost race: trying again gets the same answer.
    pub fn refused(&self) -> bool {
        self.rejected() && !self.lost_race()
    }
}

/// What one `git push` did: per ref, and the server's own words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pushed {
    pub refs: Vec<PushedRef>,
    /// The `remote: …` lines git printed: what the server (its hooks) said, in order.
    pub remote_lines: Vec<String>,
}

impl Pushed {
    /// The server's words as one block for messages (empty when it said nothing).
    pub fn server_said(&self) -> String {
        self.remote_lines.join("\n")
    }
}

/// The `remote:` lines of git's stderr, trailing padding removed, empty ones dropped.
pub fn remote_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .map(|l| l.trim_end_matches(['\r', ' ']))
        .filter(|l| l.starts_with("remote:") && !l["remote:".len()..].trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// Parse the ref lines of `git push --porcelain` (`<flag>\t<from>:<to>\t<summary>`), ignoring
/// everything else (the `To <url>` line, `Done`, and whatever hooks or the remote printed).
pub fn parse_porcelain(stdout: &str) -> Vec<PushedRef> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in stdout.lines() {
        if line.starts_with("To ") {
            in_block = true;
            continue;
        }
        if line == "Done" {
            in_block = false;
            continue;
        }
        if !in_block {
            continue;
        }
        let mut parts = line.splitn(3, '\t');
        let (Some(flag), Some(refs), summary) = (parts.next(), parts.next(), parts.next()) else { continue };
        let mut chars = flag.chars();
        let (Some(f), None) = (chars.next(), chars.next()) else { continue };
        if !" +-*=!".contains(f) {
            continue;
        }
        let Some((_, to)) = refs.split_once(':') else { continue };
        out.push(PushedRef { remote_ref: to.to_string(), flag: f, summary: summary.unwrap_or("").to_string() });
    }
    out
}

/// `git push --porcelain --no-verify REMOTE REFSPEC…` with extra `options` (e.g.
/// `--force-with-lease=…`), run in `dir`.
///
/// Why the git CLI: gix 0.90 has no push. Why `--no-verify`: these pushes carry git-boulder's own
/// state refs, not the user's branches, so the user's pre-push hooks (and ours) have nothing to
/// judge. Per-ref results come from the porcelain lines, never from text a hook or the remote printed.
/// A failed push with no ref lines (remote unreachable, authentication) is an error with git's words.
/// What the server printed (`remote:` lines on stderr, e.g. a pre-receive hook's reason) comes
/// back with the refs.
pub fn push(dir: &Path, remote: &str, options: &[String], refspecs: &[String]) -> Result<Pushed> {
    let mut cmd = git(dir);
    cmd.args(["push", "--porcelain", "--no-verify"]).args(options).arg("--").arg(remote).args(refspecs);
    let out = cmd.output().map_err(|e| Error::internal(format!("cannot run git push: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let refs = parse_porcelain(&stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && refs.is_empty() {
        return Err(Error::refused(format!("git push to {remote} failed: {}", stderr.trim()))
            .hint("check that `git push` to that remote works from here (URL, credentials, permissions)"));
    }
    Ok(Pushed { refs, remote_lines: remote_lines(&stderr) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_lines_are_parsed_and_noise_ignored() {
        let text = "hook says hi\t*\tx:y\nTo /tmp/remote.git\n=\trefs/boulder/prd:refs/boulder/prd\t[up to date]\n \trefs/boulder/streams/a:refs/boulder/streams/a\t1a2b..3c4d\n!\trefs/notes/boulder:refs/notes/boulder\t[rejected] (fetch first)\n*\tabc:refs/boulder/claims/x\t[new reference]\nDone\n!\tfake:refs/after\t[rejected]\n";
        let refs = parse_porcelain(text);
        assert_eq!(refs.len(), 4);
        assert_eq!(refs[0].flag, '=');
        assert_eq!(refs[1].remote_ref, "refs/boulder/streams/a");
        assert!(refs[2].rejected() && refs[2].summary.contains("fetch first"));
        assert_eq!(refs[3].remote_ref, "refs/boulder/claims/x");
        assert!(refs[2].lost_race() && !refs[2].refused());
    }

    #[test]
    fn server_refusals_are_not_races() {
        let text = "To /r.git\n!\tHEAD:refs/boulder/x\t[remote rejected] (pre-receive hook declined)\n!\ta:refs/boulder/y\t[rejected] (stale info)\n!\ta:refs/boulder/z\t[remote rejected] (non-fast-forward)\nDone\n";
        let refs = parse_porcelain(text);
        assert!(refs[0].refused() && !refs[0].lost_race());
        assert!(refs[1].lost_race());
        assert!(refs[2].refused(), "a server rule against non-fast-forwards is no race");
        let lines = remote_lines("remote: remote says no: policy        \nremote: \nerror: failed to push some refs\n");
        assert_eq!(lines, vec!["remote: remote says no: policy".to_string()]);
    }
}
