//! Claude Code's command hooks (https://code.claude.com/docs/en/hooks): `Stop`, `SubagentStop`,
//! `SessionStart` and `PreToolUse` all run `git boulder agent hook claude`, which dispatches on the
//! payload's `hook_event_name`. The answer is JSON on stdout with exit 0, or nothing (go on).

use std::path::Path;

use serde_json::{json, Value};

use super::hook::{self, Payload, EDIT_TOOLS};
use crate::error::Result;

/// The answer to one payload: `Some(json)` to print, `None` to print nothing.
pub fn answer(p: &Payload) -> Result<Option<Value>> {
    let event = p.event()?;
    match event {
        // The main agent stops. A stop already continued by a stop hook, and a subagent's stop
        // (a payload carrying agent_id), are let through.
        "Stop" => {
            if p.flag("stop_hook_active") || p.has("agent_id") {
                return Ok(None);
            }
            let Some(ws) = hook::open(&p.cwd()?) else { return Ok(None) };
            let reason = hook::stop(&ws, p.str("last_assistant_message"))?;
            Ok(reason.map(|r| json!({"decision": "block", "reason": r})))
        }
        // The subagent gate: a subagent is never held.
        "SubagentStop" => Ok(None),
        "SessionStart" => {
            let Some(ws) = hook::open(&p.cwd()?) else { return Ok(None) };
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
            let Some(ws) = hook::open(&cwd) else { return Ok(None) };
            let reason = hook::edit(&ws, &cwd, Path::new(file))?;
            Ok(reason.map(|r| {
                json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                        "permissionDecisionReason": r}})
            }))
        }
        _ => Ok(None),
    }
}
