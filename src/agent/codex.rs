//! Codex's command hooks (https://developers.openai.com/codex/hooks): `SessionStart`,
//! `PreToolUse` and `Stop` all run `git boulder agent hook codex`, which dispatches on the
//! payload's `hook_event_name` and always prints one JSON object on stdout:
//! * `Stop`: `{"decision":"block","reason":…}` to keep the agent going, `{}` to let it stop;
//! * `SessionStart`: `{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":…}}`;
//! * `PreToolUse` (`apply_patch`, and `Write`/`Edit`, which Codex's matchers treat as its
//!   aliases): `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny",
//!   "permissionDecisionReason":…}}` for an edit the stream may not make, `{}` otherwise.
//!
//! Codex runs a hook in the session's folder and gives it as `cwd`: the agent's shell commands
//! (`cd` among them) never change it, so `cwd` is the session's project folder.

use std::path::Path;

use serde_json::{json, Value};

use super::hook::{self, Payload};
use super::usage;
use crate::error::Result;

/// The tools a `PreToolUse` payload of Codex names for a file edit.
pub const EDIT_TOOLS: &[&str] = &["apply_patch", "Write", "Edit"];

/// The answer to one payload.
pub fn answer(p: &Payload) -> Result<Value> {
    match p.event()? {
        "Stop" => {
            // Already going on because of a stop hook: held again only on new work.
            let continued = p.flag("stop_hook_active").then_some(crate::boulder::enforce::DEFAULT_BLOCK_CAP);
            let Some(ws) = hook::open(&p.cwd()?) else { return Ok(json!({})) };
            // What the session spent is recorded first; a spent budget lets the agent stop.
            let rollout = p.str("transcript_path").filter(|t| !t.is_empty());
            let spent = hook::spent(&ws, usage::codex::SOURCE, || {
                rollout.map(|t| usage::codex::read(Path::new(t))).unwrap_or_default()
            });
            if let Some(why) = spent {
                return Ok(json!({"systemMessage": why}));
            }
            Ok(match hook::stop(&ws, p.str("last_assistant_message"), continued)? {
                Some(reason) => json!({"decision": "block", "reason": reason}),
                None => json!({}),
            })
        }
        "SessionStart" => {
            let Some(ws) = hook::open(&p.cwd()?) else { return Ok(json!({})) };
            let context = hook::session_context(&ws)?;
            Ok(json!({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}))
        }
        "PreToolUse" => {
            let tool = p.str("tool_name").unwrap_or_default();
            if !EDIT_TOOLS.contains(&tool) {
                return Ok(json!({}));
            }
            let cwd = p.cwd()?;
            let Some(ws) = hook::open(&cwd) else { return Ok(json!({})) };
            let input = p.0.get("tool_input");
            let files = match tool {
                "apply_patch" => match input.and_then(|i| i.get("command")).and_then(Value::as_str) {
                    Some(patch) => hook::patch_files(patch),
                    // A patch git-boulder cannot find: judged as an edit it cannot read.
                    None => return Ok(unjudged(&ws, "the apply_patch input has no patch text")),
                },
                _ => input
                    .and_then(|i| i.get("file_path"))
                    .and_then(Value::as_str)
                    .filter(|f| !f.is_empty())
                    .map(|f| vec![f.to_string()])
                    .unwrap_or_default(),
            };
            let mut reasons = Vec::new();
            for file in &files {
                if let Some(r) = hook::edit(&ws, &cwd, Path::new(file))? {
                    reasons.push(r);
                }
            }
            Ok(if reasons.is_empty() { json!({}) } else { hook::deny(reasons.join("\n")) })
        }
        _ => Ok(json!({})),
    }
}

/// An apply_patch call whose input cannot be read: denied in a stream's worktree under
/// `ownership: error`, `{}` elsewhere.
fn unjudged(ws: &crate::workspace::Workspace, why: &str) -> Value {
    let Some(dir) = ws.repo.work_dir.as_deref() else { return json!({}) };
    match hook::unreadable_edit(dir, b"", why, EDIT_TOOLS) {
        Some(reason) => hook::deny(reason),
        None => json!({}),
    }
}

/// A payload that did not parse (`why`): the denial when it may be an edit in a stream's worktree
/// under `ownership: error` (Codex runs the hook in the session's folder), `None` (exit 1, the
/// agent goes on) everywhere else.
pub fn unreadable(raw: &[u8], why: &str) -> Option<Value> {
    let session = std::env::current_dir().ok()?;
    hook::unreadable_edit(&session, raw, why, EDIT_TOOLS).map(hook::deny)
}
