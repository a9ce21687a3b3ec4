//! The OpenCode plugin's questions (`harness/opencode/git-boulder.js`): OpenCode has no command
//! hooks, so its plugin runs `git boulder agent hook opencode` with a payload of its own making in
//! its `tool.execute.before` hook — `{"hook_event_name":"PreToolUse","cwd":DIR,"tool_name":TOOL,
//! "tool_input":ARGS}`, `cwd` being the folder OpenCode was started in (the plugin's
//! `directory`), never one the agent can change — and throws when the answer is
//! `{"decision":"block","reason":…}` (OpenCode then refuses the tool with that message). Every
//! other answer is `{}`.

use std::path::Path;

use serde_json::{json, Value};

use super::hook::{self, Payload};
use super::usage;
use crate::error::Result;

/// OpenCode's tools that write files: `edit`, `write`, `multiedit` (`filePath`), `patch` and
/// `apply_patch` (`patchText`, in Codex's patch format).
pub const EDIT_TOOLS: &[&str] = &["edit", "write", "multiedit", "patch", "apply_patch"];

fn block(reason: String) -> Value {
    json!({"decision": "block", "reason": reason})
}

/// The answer to one payload.
pub fn answer(p: &Payload) -> Result<Value> {
    match p.event()? {
        "PreToolUse" => {}
        "Stop" => return Ok(stop(p)),
        _ => return Ok(json!({})),
    }
    let tool = p.str("tool_name").unwrap_or_default();
    if !EDIT_TOOLS.contains(&tool) {
        return Ok(json!({}));
    }
    let cwd = p.cwd()?;
    let Some(ws) = hook::open(&cwd) else { return Ok(json!({})) };
    let input = p.0.get("tool_input");
    let text = |key: &str| input.and_then(|i| i.get(key)).and_then(Value::as_str).filter(|f| !f.is_empty());
    let files = match tool {
        "patch" | "apply_patch" => match text("patchText").or_else(|| text("patch")) {
            Some(patch) => hook::patch_files(patch),
            None => {
                let reason = ws.repo.work_dir.as_deref().and_then(|d| {
                    hook::unreadable_edit(d, b"", "the patch tool's input has no patch text", EDIT_TOOLS)
                });
                return Ok(reason.map_or_else(|| json!({}), block));
            }
        },
        _ => text("filePath").map(|f| vec![f.to_string()]).unwrap_or_default(),
    };
    let mut reasons = Vec::new();
    for file in &files {
        if let Some(r) = hook::edit(&ws, &cwd, Path::new(file))? {
            reasons.push(r);
        }
    }
    Ok(if reasons.is_empty() { json!({}) } else { block(reasons.join("\n")) })
}

/// A session went idle: the plugin's `{"hook_event_name":"Stop","cwd":DIR,"session_id":ID,
/// "messages":[…]}` (the session's assistant messages, see [`usage::opencode`]). What they spent
/// is recorded on the stream of `cwd`; `{"stop":true,"reason":…}` when its budget (or the plan's)
/// is spent — the plugin then does not push the session on, and shows the reason — else `{}`.
fn stop(p: &Payload) -> Value {
    let Some(ws) = p.cwd().ok().and_then(|cwd| hook::open(&cwd)) else { return json!({}) };
    match hook::spent(&ws, usage::opencode::SOURCE, || usage::opencode::read(p.0.get("messages"))) {
        Some(why) => json!({"stop": true, "reason": why}),
        None => json!({}),
    }
}

/// A payload that did not parse (`why`): the block when it may be an edit in a stream's worktree
/// under `ownership: error` (the plugin runs the hook in OpenCode's folder), `None` elsewhere.
pub fn unreadable(raw: &[u8], why: &str) -> Option<Value> {
    let session = std::env::current_dir().ok()?;
    hook::unreadable_edit(&session, raw, why, EDIT_TOOLS).map(block)
}
