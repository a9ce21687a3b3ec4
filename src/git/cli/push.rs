//! `git push`: what `--porcelain` says of each ref, a leased push, and git-lfs's pre-push for
//! a push git-boulder makes.

use std::path::Path;
use std::process::Stdio;

use super::git;
use crate::error::{Error, Result};

/// What `git push --porcelain` said about one ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedRef {
    /// The remote ref (`refs/boulder/streams/auth`).
    pub remote_ref: String,
    /// What happened to it (git's flag character).
    pub flag: PushFlag,
    /// git's summary, e.g. `[rejected] (non-fast-forward)` or `[new reference]`.
    pub summary: String,
}

/// The flag of a `git push --porcelain` ref line: what happened to the ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushFlag {
    /// `' '`: moved forward.
    FastForward,
    /// `'+'`: forced.
    Forced,
    /// `'-'`: deleted.
    Deleted,
    /// `'*'`: created.
    New,
    /// `'='`: already there.
    UpToDate,
    /// `'!'`: rejected (by the remote, or as not a fast-forward).
    Rejected,
}

impl PushFlag {
    fn of(flag: char) -> Option<PushFlag> {
        Some(match flag {
            ' ' => PushFlag::FastForward,
            '+' => PushFlag::Forced,
            '-' => PushFlag::Deleted,
            '*' => PushFlag::New,
            '=' => PushFlag::UpToDate,
            '!' => PushFlag::Rejected,
            _ => return None,
        })
    }
}

impl PushedRef {
    pub fn rejected(&self) -> bool {
        self.flag == PushFlag::Rejected
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
        let Some(f) = PushFlag::of(f) else { continue };
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
    // A remote configured as a mirror (`remote.NAME.mirror`) makes git refuse any refspec
    // ("--mirror can't be combined with refspecs"): these pushes name exactly their refs.
    if !remote.is_empty() && !remote.contains(['/', ':', '=', '\\']) {
        cmd.arg("-c").arg(format!("remote.{remote}.mirror=false"));
    }
    cmd.args(["push", "--porcelain", "--no-verify"]).args(options).arg("--").arg(remote).args(refspecs);
    let out = cmd.output().map_err(|e| Error::internal(format!("cannot run git push: {e}")).with_source(e))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let refs = parse_porcelain(&stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && refs.is_empty() {
        return Err(Error::refused(format!("git push to {remote} failed: {}", stderr.trim()))
            .hint("check that `git push` to that remote works from here (URL, credentials, permissions)"));
    }
    Ok(Pushed { refs, remote_lines: remote_lines(&stderr) })
}

/// `git push --porcelain --no-verify --atomic --force-with-lease=REF:EXPECTED… REMOTE REFSPEC…`:
/// the merge queue landing a stream on a remote's base branch, all refs or none, each only if the
/// remote's ref still holds what the merge was checked against (`None`: the ref must not exist).
///
/// Why the git CLI: gix 0.90 has no push, and the compare-and-swap must happen on the server, which
/// is what git's lease does. Why `--no-verify`: the merge already ran the ownership check pre-push
/// would run on exactly these commits, and `verify` on the result; the user's own pre-push hooks
/// run when they push their branches themselves.
pub fn push_leased(
    dir: &Path,
    remote: &str,
    leases: &[(String, Option<String>)],
    refspecs: &[String],
) -> Result<Pushed> {
    let mut options = vec!["--atomic".to_string()];
    for (name, expected) in leases {
        options.push(format!("--force-with-lease={name}:{}", expected.as_deref().unwrap_or("")));
    }
    push(dir, remote, &options, refspecs)
}

/// One ref a push is about to update, as git tells a pre-push hook: the local ref and commit, the
/// remote ref and the commit it holds there (`None`: it does not exist there yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushUpdate {
    pub local_ref: String,
    pub local: String,
    pub remote_ref: String,
    pub remote: Option<String>,
}

/// `git lfs pre-push REMOTE REMOTE`, fed the ref lines git feeds a pre-push hook: upload the
/// git-lfs objects the pushed commits name that the remote lacks, before the push that names them.
///
/// Why the git CLI: the merge queue pushes with `--no-verify` (see [`push_leased`]), so git-lfs's
/// own pre-push hook does not run; without this step the remote's branch would name LFS files
/// whose content only this machine has. Only git-lfs knows its endpoints, credentials and
/// transfer adapters, and its pre-push command is the contract git itself uses.
pub fn lfs_pre_push(dir: &Path, remote: &str, updates: &[PushUpdate]) -> Result<()> {
    use std::io::Write;
    const ZERO: &str = "0000000000000000000000000000000000000000";
    let mut cmd = git(dir);
    cmd.args(["lfs", "pre-push", remote, remote]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child =
        cmd.spawn().map_err(|e| Error::internal(format!("cannot run git lfs pre-push: {e}")).with_source(e))?;
    let mut lines = String::new();
    for u in updates {
        lines.push_str(&format!(
            "{} {} {} {}\n",
            u.local_ref,
            u.local,
            u.remote_ref,
            u.remote.as_deref().unwrap_or(ZERO)
        ));
    }
    if let Some(mut stdin) = child.stdin.take() {
        // A git-lfs that exits early (nothing to send) may close its end first: not an error.
        let _ = stdin.write_all(lines.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::internal(format!("cannot run git lfs pre-push: {e}")).with_source(e))?;
    if !out.status.success() {
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        return Err(Error::refused(format!(
            "the git-lfs files of the merge could not be uploaded to {remote}, so nothing was pushed there: {}",
            said.trim()
        ))
        .hint(format!("check that `git lfs push {remote} --all` works from here, then rerun the same command")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_lines_are_parsed_and_noise_ignored() {
        let text = "hook says hi\t*\tx:y\nTo /tmp/remote.git\n=\trefs/boulder/prd:refs/boulder/prd\t[up to date]\n \trefs/boulder/streams/a:refs/boulder/streams/a\t1a2b..3c4d\n!\trefs/notes/boulder:refs/notes/boulder\t[rejected] (fetch first)\n*\tabc:refs/boulder/claims/x\t[new reference]\nDone\n!\tfake:refs/after\t[rejected]\n";
        let refs = parse_porcelain(text);
        assert_eq!(refs.len(), 4);
        assert_eq!(refs[0].flag, PushFlag::UpToDate);
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
