//! Claude Code's command hooks (https://code.claude.com/docs/en/hooks): `Stop`, `SubagentStop`,
//! `SessionStart` and `PreToolUse` all run `git boulder agent hook claude`, which dispatches on the
//! payload's `hook_event_name`. The answer is JSON on stdout with exit 0, or nothing (go on).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::hook::{self, deny, Payload};
use super::usage;
use crate::error::Result;

/// Claude Code's tools that write a file, and the `tool_input` field naming it.
pub const EDIT_TOOLS: &[&str] = &["Edit", "Write", "MultiEdit", "NotebookEdit"];

/// The session's project folder: Claude Code's `$CLAUDE_PROJECT_DIR` (the folder the session was
/// started in, set for every hook), else `fallback`. Never a `cwd` the agent can change with `cd`.
pub fn project_dir() -> Option<PathBuf> {
    std::env::var_os("CLAUDE_PROJECT_DIR").filter(|d| !d.is_empty()).map(PathBuf::from)
}

/// Claude Code's cap on Stop-hook blocks in a row (`$CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`, 8 when unset
/// or not a number).
pub fn block_cap() -> u32 {
    std::env::var("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(crate::boulder::enforce::DEFAULT_BLOCK_CAP)
}

/// A payload that did not parse (`why`): the denial when it may be an edit in a stream's worktree
/// under `ownership: error` (the session's folder: `$CLAUDE_PROJECT_DIR`, else where the hook
/// runs), `None` (exit 1, the agent goes on) everywhere else.
pub fn unreadable(raw: &[u8], why: &str) -> Option<Value> {
    let session = project_dir().or_else(|| std::env::current_dir().ok())?;
    hook::unreadable_edit(&session, raw, why, EDIT_TOOLS).map(deny)
}

/// The answer to one payload: `Some(json)` to print, `None` to print nothing.
pub fn answer(p: &Payload) -> Result<Option<Value>> {
    let event = p.event()?;
    match event {
        // The main agent stops. A subagent's stop (a payload carrying agent_id) is let through.
        "Stop" => {
            if p.has("agent_id") {
                return subagent_stop(p);
            }
            // Already going on because of a stop hook: held again only on new work.
            let continued = p.flag("stop_hook_active").then(block_cap);
            let session = project_dir().map_or_else(|| p.cwd(), Ok)?;
            let Some(ws) = hook::open(&session) else { return Ok(None) };
            // What the session spent is recorded first; a spent budget lets the agent stop.
            let transcript = p.str("transcript_path").filter(|t| !t.is_empty());
            let spent = hook::spent(&ws, usage::claude::SOURCE, || {
                transcript.map(|t| usage::claude::read_session(Path::new(t))).unwrap_or_default()
            });
            if let Some(why) = spent {
                return Ok(Some(json!({"systemMessage": why})));
            }
            let reason = hook::stop(&ws, p.str("last_assistant_message"), continued)?;
            Ok(reason.map(|r| json!({"decision": "block", "reason": r})))
        }
        // The subagent gate: a subagent is never held.
        "SubagentStop" => subagent_stop(p),
        "SessionStart" => {
            let session = project_dir().map_or_else(|| p.cwd(), Ok)?;
            let Some(ws) = hook::open(&session) else { return Ok(None) };
            let context = hook::session_context(&ws)?;
            Ok(Some(json!({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}})))
        }
        "PreToolUse" => {
            let tool = p.str("tool_name").unwrap_or_default();
            if !EDIT_TOOLS.contains(&tool) {
                return Ok(None);
            }
            let input = p.0.get("tool_input");
            let file = input
                .and_then(|i| i.get("file_path").or_else(|| i.get("notebook_path")))
                .and_then(Value::as_str)
                .filter(|f| !f.is_empty());
            let Some(file) = file else { return Ok(None) };
            let cwd = p.cwd()?;
            // The stream is the session's (the folder Claude Code was started in), not the one
            // the agent's `cd` moved `cwd` to; a relative path is where the tool writes it.
            let session = project_dir().unwrap_or_else(|| cwd.clone());
            let Some(ws) = hook::open(&session) else { return Ok(None) };
            let reason = hook::edit(&ws, &cwd, Path::new(file))?;
            Ok(reason.map(deny))
        }
        _ => Ok(None),
    }
}

/// A subagent stops: what it spent (its own transcript, `agent_transcript_path`) is recorded on
/// the session's stream; it is never held.
fn subagent_stop(p: &Payload) -> Result<Option<Value>> {
    let Some(transcript) = p.str("agent_transcript_path").filter(|t| !t.is_empty()) else { return Ok(None) };
    let session = project_dir().map_or_else(|| p.cwd(), Ok)?;
    let Some(ws) = hook::open(&session) else { return Ok(None) };
    hook::spent(&ws, usage::claude::SOURCE, || usage::claude::read(Path::new(transcript)));
    Ok(None)
}
