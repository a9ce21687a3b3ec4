//! Codex's `Stop` command hook (https://developers.openai.com/codex/hooks): the payload carries
//! `cwd, hook_event_name, last_assistant_message, model, permission_mode, session_id,
//! stop_hook_active, transcript_path, turn_id`; the answer is always one JSON object on stdout:
//! `{"decision":"block","reason":…}` to keep the agent going, `{}` to let it stop.

use serde_json::{json, Value};

use super::hook::{self, Payload};
use crate::error::Result;

/// The answer to one payload.
pub fn answer(p: &Payload) -> Result<Value> {
    if p.event()? != "Stop" || p.flag("stop_hook_active") {
        return Ok(json!({}));
    }
    let Some(ws) = hook::open(&p.cwd()?) else { return Ok(json!({})) };
    Ok(match hook::stop(&ws, p.str("last_assistant_message"))? {
        Some(reason) => json!({"decision": "block", "reason": reason}),
        None => json!({}),
    })
}
