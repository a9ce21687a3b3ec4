//! Asking a file system monitor what changed in a worktree, the way git does with
//! `core.fsmonitor` set to a hook (the "watchman" hook protocol, version 2: git's
//! `fsmonitor-watchman` sample, or any program that speaks it): the hook is run in the worktree
//! as `HOOK 2 TOKEN` and prints a new token, then the paths changed since `TOKEN`, each ended by a
//! NUL; the path `/` means "everything may have changed" (an unknown or too old token).
//!
//! git keeps its token in the index (the `FSMN` extension), which gix reads but does not expose;
//! git-boulder keeps its own token per worktree instead, taken when it last found the worktree
//! clean (see [`crate::git::refresh`]). git's builtin daemon (`core.fsmonitor=true`) is not asked:
//! then the full check runs, as without a monitor.

use std::path::Path;
use std::process::{Command, Stdio};

use gix::bstr::{BString, ByteSlice};

/// What the monitor said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changes {
    /// The token to ask with next time.
    pub token: String,
    /// Everything may have changed (the token was unknown or too old): check it all.
    pub everything: bool,
    /// The paths changed since the token asked with, relative to the worktree (`/`-separated; a
    /// folder may end with `/`), without those inside `.git`.
    pub paths: Vec<BString>,
}

/// The hook `core.fsmonitor` names, if it names one (not `true`/`false`, git's builtin daemon
/// switch, and not empty).
pub fn hook(repo: &gix::Repository) -> Option<String> {
    let config = repo.config_snapshot();
    let value = config.string("core.fsmonitor")?;
    let value = value.to_str().ok()?.trim().to_string();
    let lower = value.to_lowercase();
    if value.is_empty() || ["true", "false", "yes", "no", "on", "off", "1", "0"].contains(&lower.as_str()) {
        return None;
    }
    Some(value)
}

/// Characters for which git runs a hook command through the shell (`run-command.c`).
const SHELL_META: &[char] =
    &['|', '&', ';', '<', '>', '(', ')', '$', '`', '\\', '"', '\'', ' ', '\t', '\n', '*', '?', '[', '#', '~', '=', '%'];

/// Ask `hook` what changed in the worktree at `wt` since `token`. `None` when the hook cannot be
/// run, fails, or answers in a form it should not (then the caller checks everything).
pub fn query(hook: &str, wt: &Path, token: &str) -> Option<Changes> {
    start(hook, wt, token).answer()
}

/// A question to the monitor under way: the hook runs as a child process (read by a thread of
/// its own, so a long answer never waits on a full pipe) while the caller does what does not
/// need its answer.
pub struct Pending {
    reader: Option<std::thread::JoinHandle<Option<Changes>>>,
}

/// Start asking `hook` what changed in the worktree at `wt` since `token`; [`Pending::answer`]
/// waits for the answer. Dropped unanswered (an error, or an answer not needed), it still waits
/// for the hook to end, as git waits for every hook it runs: no hook outlives the command. Its
/// answer is lost (the next question asks with the same token again).
pub fn start(hook: &str, wt: &Path, token: &str) -> Pending {
    // Run as git runs it: in the worktree, through the shell only when the command needs one.
    let mut cmd = if hook.contains(SHELL_META) {
        let mut c = Command::new("sh");
        c.arg("-c").arg(format!("{hook} \"$@\"")).arg(hook);
        c
    } else {
        Command::new(hook)
    };
    let child = cmd
        .arg("2")
        .arg(token)
        .current_dir(wt)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let reader = child.ok().map(|child| {
        std::thread::spawn(move || {
            let out = child.wait_with_output().ok()?;
            if !out.status.success() {
                return None;
            }
            parse(&out.stdout)
        })
    });
    Pending { reader }
}

impl Pending {
    /// Wait for the hook: its answer, or `None` when it could not be run, failed, or answered
    /// in a form it should not.
    pub fn answer(mut self) -> Option<Changes> {
        self.reader.take()?.join().ok().flatten()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// Read a version 2 answer: the token, then NUL-terminated paths.
pub fn parse(out: &[u8]) -> Option<Changes> {
    let mut parts = out.split(|b| *b == 0);
    let token = parts.next()?.to_str().ok()?.trim().to_string();
    if token.is_empty() {
        return None;
    }
    let mut everything = false;
    let mut paths = Vec::new();
    for p in parts {
        if p.is_empty() {
            continue;
        }
        if p == b"/" {
            everything = true;
            continue;
        }
        if p == b".git" || p.starts_with(b".git/") {
            continue;
        }
        // watchman's own files, made and removed to sync with the file system on every query.
        let name = p.rsplit(|b| *b == b'/').next().unwrap_or(p);
        if name.starts_with(b".watchman-cookie-") {
            continue;
        }
        paths.push(p.into());
    }
    Some(Changes { token, everything, paths })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_as_the_protocol_says() {
        let c = parse(b"c:1:2\0src/a.txt\0.git/index\0docs/\0w/.watchman-cookie-host-1-2\0").unwrap();
        assert_eq!(c.token, "c:1:2");
        assert!(!c.everything);
        assert_eq!(c.paths, vec![BString::from("src/a.txt"), BString::from("docs/")]);
        assert!(parse(b"c:1:2\0/\0").unwrap().everything);
        assert_eq!(parse(b"tok\0").unwrap().paths, Vec::<BString>::new());
        assert!(parse(b"").is_none(), "no token: ask nothing of it");
        assert!(parse(b"\0a\0").is_none());
    }
}
