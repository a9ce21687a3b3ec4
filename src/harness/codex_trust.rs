//! Codex's trust of git-boulder's hooks, asked of Codex itself.
//!
//! Codex runs a project's hook only once it is trusted, the trust being the hash of the hook's
//! definition kept in `~/.codex/config.toml` (`[hooks.state."<file>:<event>:<group>:<handler>"]
//! trusted_hash`); an untrusted hook, or one changed since it was trusted, is skipped without a
//! word. Only Codex knows the hashes, so `agent status` and `doctor` ask it: `codex app-server`
//! over stdio (JSON-RPC, one message a line), `initialize`, then `hooks/list` with every worktree
//! as a `cwd`. The answer lists per folder the hooks Codex would load there, each with its
//! `trustStatus` (`trusted`, `untrusted`, `modified`, `managed`) and `enabled`.
//!
//! Bounded: Codex gets [`TIMEOUT`] to answer, then its process group is killed; any failure is
//! "unknown", never an error of status or doctor.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

/// How long Codex has to answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// What Codex does with git-boulder's hooks in one folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// Every one of them is trusted (or managed): Codex runs them.
    Trusted,
    /// At least one was never trusted: Codex skips it.
    Untrusted,
    /// At least one changed since it was trusted (an upgrade of git-boulder): Codex skips it.
    Modified,
    /// At least one is turned off in Codex.
    Disabled,
    /// Codex loads none of them there (the project is not trusted, the worktree has no
    /// `.codex/` folder, or hooks are off).
    NotLoaded,
}

impl Trust {
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
            Trust::Modified => "modified",
            Trust::Disabled => "disabled",
            Trust::NotLoaded => "not_loaded",
        }
    }
}

/// Why Codex gave no answer (the trust is then unknown).
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("cannot start {} app-server: {source}", codex.display())]
    Start { codex: PathBuf, source: std::io::Error },
    #[error("cannot read Codex's answer: {0}")]
    Read(#[source] std::io::Error),
    #[error("Codex refused hooks/list: {0}")]
    Refused(String),
    #[error("Codex's hooks/list answer has no result")]
    NoResult,
    #[error("Codex ended without answering hooks/list")]
    Ended,
    #[error("Codex did not answer hooks/list within {} s", .0.as_secs())]
    Timeout(Duration),
    #[error("Codex's hooks/list answer has no data")]
    NoData,
    #[error("Codex's hooks/list answer has no entry for {}", .0.display())]
    NoEntry(PathBuf),
}

/// Codex's answer for each folder asked, in the order asked; `Err` says why there is none.
pub fn ask(codex: &Path, cwds: &[PathBuf], command: &str) -> Result<Vec<Trust>, AskError> {
    let listed = hooks_list(codex, cwds, TIMEOUT)?;
    let data = listed.get("data").and_then(Value::as_array).ok_or(AskError::NoData)?;
    cwds.iter()
        .enumerate()
        .map(|(i, cwd)| {
            // Codex answers in the order asked; matched by `cwd` when it says so.
            let entry = data
                .iter()
                .find(|e| e.get("cwd").and_then(Value::as_str) == Some(&*cwd.to_string_lossy()))
                .or_else(|| data.get(i))
                .ok_or_else(|| AskError::NoEntry(cwd.clone()))?;
            Ok(judge(entry, command))
        })
        .collect()
}

/// The trust of git-boulder's hooks (those running `command`) in one `hooks/list` entry.
pub fn judge(entry: &Value, command: &str) -> Trust {
    let ours: Vec<&Value> = entry
        .get("hooks")
        .and_then(Value::as_array)
        .map(|hooks| {
            hooks.iter().filter(|h| h.get("command").and_then(Value::as_str).map(str::trim) == Some(command)).collect()
        })
        .unwrap_or_default();
    if ours.is_empty() {
        return Trust::NotLoaded;
    }
    fn status<'a>(h: &&'a Value) -> &'a str {
        h.get("trustStatus").and_then(Value::as_str).unwrap_or("untrusted")
    }
    if ours.iter().any(|h| h.get("enabled").and_then(Value::as_bool) == Some(false)) {
        Trust::Disabled
    } else if ours.iter().any(|h| status(h) == "modified") {
        Trust::Modified
    } else if ours.iter().all(|h| matches!(status(h), "trusted" | "managed")) {
        Trust::Trusted
    } else {
        Trust::Untrusted
    }
}

/// `hooks/list` of `codex app-server`: the `result` object, within `timeout`.
fn hooks_list(codex: &Path, cwds: &[PathBuf], timeout: Duration) -> Result<Value, AskError> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(codex)
        .arg("app-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Its own process group, so that everything it started goes when it is stopped.
        .process_group(0)
        .spawn()
        .map_err(|source| AskError::Start { codex: codex.to_owned(), source })?;
    let mut stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads Codex's lines until the answer (id 2); a thread, so that the wait is bounded.
    std::thread::spawn(move || {
        let answer = (|| {
            for line in BufReader::new(stdout).lines() {
                let line = line.map_err(AskError::Read)?;
                let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
                if msg.get("id") != Some(&json!(2)) {
                    continue;
                }
                if let Some(err) = msg.get("error") {
                    return Err(AskError::Refused(err.get("message").unwrap_or(err).to_string()));
                }
                return msg.get("result").cloned().ok_or(AskError::NoResult);
            }
            Err(AskError::Ended)
        })();
        let _ = tx.send(answer);
    });
    let cwds: Vec<String> = cwds.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let requests = [
        json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "git-boulder", "version": env!("CARGO_PKG_VERSION")}}}),
        json!({"method": "initialized"}),
        json!({"id": 2, "method": "hooks/list", "params": {"cwds": cwds}}),
    ];
    // Written from a thread of its own (a Codex that reads nothing cannot block us on a full
    // pipe), and kept open until the answer is in: Codex ends at the end of its input.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut written = Ok(());
        for r in &requests {
            written = written.and_then(|()| writeln!(stdin, "{r}"));
        }
        if written.and_then(|()| stdin.flush()).is_ok() {
            let _ = done_rx.recv();
        }
    });
    let answer = rx.recv_timeout(timeout).unwrap_or(Err(AskError::Timeout(timeout)));
    drop(done_tx);
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
    answer
}

/// Where the user starts `codex` to trust the hooks: the main checkout, whose `.codex/hooks.json`
/// Codex runs in every linked worktree; without one (a bare repository), each worktree is a
/// project of its own to Codex.
pub fn place(main: Option<&Path>) -> String {
    match main {
        Some(m) => m.display().to_string(),
        None => "each worktree (without a main checkout each is a project of its own to Codex)".to_string(),
    }
}

/// The steps that make Codex trust git-boulder's hooks.
pub fn steps(main: Option<&Path>) -> String {
    let once = if main.is_some() { "; one review covers every stream worktree" } else { "" };
    format!(
        "start `codex` in {} and choose \"Trust all and continue\" when it says \"Hooks need review\" \
         (or type /hooks there and trust the `git boulder agent hook codex` entries){once}",
        place(main)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hooks: Value) -> Value {
        json!({"cwd": "/w", "hooks": hooks, "warnings": [], "errors": []})
    }

    #[test]
    fn the_worst_of_our_hooks_decides() {
        let cmd = "git boulder agent hook codex";
        let h = |status: &str, enabled: bool| json!({"command": cmd, "trustStatus": status, "enabled": enabled});
        let other = json!({"command": "echo hi", "trustStatus": "untrusted", "enabled": true});
        assert_eq!(judge(&entry(json!([other])), cmd), Trust::NotLoaded);
        assert_eq!(judge(&entry(json!([h("trusted", true), h("managed", true), other])), cmd), Trust::Trusted);
        assert_eq!(judge(&entry(json!([h("trusted", true), h("untrusted", true)])), cmd), Trust::Untrusted);
        assert_eq!(judge(&entry(json!([h("untrusted", true), h("modified", true)])), cmd), Trust::Modified);
        assert_eq!(judge(&entry(json!([h("trusted", false)])), cmd), Trust::Disabled);
        assert_eq!(judge(&json!({}), cmd), Trust::NotLoaded);
    }
}
