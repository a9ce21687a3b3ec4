//! Diffs a reviewer reads: git's own line counts and git's own paged diff.

use std::path::Path;
use std::process::Stdio;

use super::{git, run};
use crate::error::{Error, Result};

/// One file's line counts (`None` for a binary file) and its path: what [`numstat`] returns.
pub type NumStat = (Option<u64>, Option<u64>, Vec<u8>);

/// Lines added and deleted per file from the merge base of `base` and `tip` to `tip` (`git diff
/// --numstat -z --no-renames BASE...TIP`): `(added, deleted, path)`, the counts `None` for a
/// binary file.
///
/// Why the git CLI: a reviewer compares these counts with what their own `git diff --stat`
/// says, so they are git's: its diff algorithm and its binary detection (`.gitattributes`
/// `-diff`, `binary`), which are git's behaviour to match.
pub fn numstat(dir: &Path, base: crate::git::ObjectId, tip: crate::git::ObjectId) -> Result<Vec<NumStat>> {
    let mut cmd = git(dir);
    cmd.args(["diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color"])
        .arg(format!("{base}...{tip}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = run(cmd, "count the lines a stream changes")?;
    let mut found = Vec::new();
    for rec in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let mut parts = rec.splitn(3, |b| *b == b'\t');
        let (Some(added), Some(deleted), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let count = |n: &[u8]| std::str::from_utf8(n).ok().and_then(|n| n.parse().ok());
        found.push((count(added), count(deleted), path.to_vec()));
    }
    Ok(found)
}

/// Show the diff from the merge base of `base` and `tip` to `tip` (`git diff BASE...TIP`) on this
/// process's stdout, paged as git pages it.
///
/// Why the git CLI: the reviewer reads git's own diff — their diff settings, colours and
/// `.gitattributes` drivers — through the pager git would start (`GIT_PAGER`, `core.pager`,
/// `pager.diff`, `PAGER`, `less` with `LESS=FRX`), and none when stdout is not a terminal: git's
/// behaviour is the contract.
pub fn diff_paged(dir: &Path, base: crate::git::ObjectId, tip: crate::git::ObjectId) -> Result<()> {
    let mut cmd = git(dir);
    cmd.arg("diff").arg(format!("{base}...{tip}"));
    let status =
        cmd.status().map_err(|e| Error::internal(format!("cannot run git to show the diff: {e}")).with_source(e))?;
    // A reader who quits the pager early is no failure (git exits 141 on the closed pipe).
    if !status.success() && status.code() != Some(141) && status.code().is_some() {
        return Err(Error::internal(format!("git diff {base}...{tip} failed ({status})")));
    }
    Ok(())
}
