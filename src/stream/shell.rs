//! The plan's shell commands of a stream (`setup`, `verify`): the environment they run with and
//! how they run.

use std::path::Path;

use crate::error::Result;
use crate::plan::Plan;
use crate::state::{self, Store, StreamState};
use crate::workspace::Workspace;

/// How a plan command failed.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// `sh` could not be started.
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The command ran and exited unsuccessfully.
    #[error("`{command}` failed ({status})")]
    Failed { command: String, status: std::process::ExitStatus },
}

/// The environment plan commands and agents of a stream run with: `BOULDER_STREAM`, and with a
/// recorded index `BOULDER_STREAM_INDEX` and `BOULDER_PORT` (`port_base + index × port_stride`,
/// left out when that is past 65535).
pub fn env_for(plan: &Plan, name: &str, index: Option<u64>) -> Vec<(String, String)> {
    let mut env = vec![("BOULDER_STREAM".to_string(), name.to_string())];
    if let Some(i) = index {
        env.push(("BOULDER_STREAM_INDEX".into(), i.to_string()));
        let port = u64::from(plan.settings.port_base) + i * u64::from(plan.settings.port_stride);
        if port <= 65535 {
            env.push(("BOULDER_PORT".into(), port.to_string()));
        }
    }
    env
}

/// Run the plan's agent `command` once in the stream's worktree `wt` and wait for it: with the
/// run context, the stream's environment, `BOULDER_PRD`, `BOULDER_PROMPT`, and `extra` — what
/// only this caller tells the agent (the story of a `stream run` iteration, the conflicted files
/// of `stream resolve`).
pub fn run_agent(
    ws: &Workspace,
    plan: &Plan,
    stream: &str,
    command: &[String],
    wt: &Path,
    prompt: &str,
    extra: &[(&str, &std::ffi::OsStr)],
) -> Result<std::process::ExitStatus> {
    let env = stream_env(ws, plan, stream)?;
    let mut agent = std::process::Command::new(&command[0]);
    crate::context::export(&mut agent);
    agent
        .args(&command[1..])
        .current_dir(wt)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("BOULDER_PRD", wt.join(&plan.prd))
        .env("BOULDER_PROMPT", prompt)
        .envs(extra.iter().copied())
        .status()
        .map_err(|e| {
            crate::error::Error::usage(format!("cannot run {:?}: {e}", command[0])).hint("check the command and PATH")
        })
}

/// [`env_for`] with the index recorded in the stream's state (none when it has none).
pub fn stream_env(ws: &Workspace, plan: &Plan, name: &str) -> Result<Vec<(String, String)>> {
    let store = Store::new(&ws.repo)?;
    let index = store.read::<StreamState>(&state::stream_ref(name))?.and_then(|e| e.state.index);
    Ok(env_for(plan, name, index))
}

/// Run a plan command (`setup`, `verify`) with `sh -c` in `dir` with `env` (see [`env_for`]); the
/// error says how it failed.
pub fn run_shell(command: &str, dir: &Path, env: &[(String, String)]) -> std::result::Result<(), ShellError> {
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c").arg(command).current_dir(dir).envs(env.iter().map(|(k, v)| (k, v)));
    crate::context::export(&mut cmd);
    let status = cmd.status().map_err(|source| ShellError::Spawn { command: command.to_string(), source })?;
    if status.success() {
        Ok(())
    } else {
        Err(ShellError::Failed { command: command.to_string(), status })
    }
}

/// The agent command of `stream` as run without a shell: `command` when given, else the plan's
/// `settings.agents` line of the stream's `agent`, run by `sh -c` (it uses "$BOULDER_PROMPT").
/// `verb` is the command the hint names (`stream run`, `stream resolve`).
pub fn agent_command(
    plan: &Plan,
    stream: &crate::plan::StreamDef,
    command: &[String],
    verb: &str,
) -> Result<Vec<String>> {
    if !command.is_empty() {
        return Ok(command.to_vec());
    }
    let agent = stream.agent.as_ref().ok_or_else(|| {
        crate::error::Error::usage(format!("stream {} has no agent and no command was given", stream.name))
            .hint(format!("run `git boulder {verb} {} -- CMD ARGS…`, or set `agent:` in the plan", stream.name))
    })?;
    let line = plan.settings.agents.get(agent).ok_or_else(|| {
        crate::error::Error::usage(format!("agent {agent:?} is not in settings.agents"))
            .hint("add it to settings.agents")
    })?;
    // The plan's agent line is a shell command by design (it uses "$BOULDER_PROMPT").
    Ok(vec!["sh".to_string(), "-c".to_string(), line.clone()])
}
