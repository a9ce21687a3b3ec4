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
