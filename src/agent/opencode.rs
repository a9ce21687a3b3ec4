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
use crate::error::Result;

/// OpenCode's tools that write files: `edit`, `write`, `multiedit` (`filePath`), `patch` and
/// `apply_patch` (`patchText`, in Codex's patch format).
pub const EDIT_TOOLS: &[&str] = &["edit", "write", "multiedit", "patch", "apply_patch"];

fn block(reason: String) -> Value {
    json!({"decision": "block", "reason": reason})
}

/// The answer to one payload.
pub fn answer(p: &Payload) -> Result<Value> {
    if p.event()? != "PreToolUse" {
        return Ok(json!({}));
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
            Some(patch) => super::codex::patch_files(patch),
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

/// A payload that did not parse (`why`): the block when it may be an edit in a stream's worktree
/// under `ownership: error` (the plugin runs the hook in OpenCode's folder), `None` elsewhere.
pub fn unreadable(raw: &[u8], why: &str) -> Option<Value> {
    let session = std::env::current_dir().ok()?;
    hook::unreadable_edit(&session, raw, why, EDIT_TOOLS).map(block)
}

/// OpenCode installs `@opencode-ai/plugin` with npm into every `.opencode/` folder it loads, at
/// start, before it loads a plugin (48–71 s on a fresh folder; the plugin needs no package). It
/// skips that when the folder has a `node_modules/` and a `package-lock.json` whose root lists
/// every dependency of its `package.json` and `@opencode-ai/plugin` (OpenCode 1.18's
/// `Npm.install`). These are that state, as OpenCode would leave it, `.gitignore` being the one
/// OpenCode itself writes there (so none of it shows in `git status`).
const SETTLED: [(&str, &str); 2] = [
    (".opencode/.gitignore", "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore"),
    (
        ".opencode/package-lock.json",
        "{\n  \"lockfileVersion\": 3,\n  \"requires\": true,\n  \"packages\": {\n    \"\": {\n      \"dependencies\": {\n        \"@opencode-ai/plugin\": \"*\"\n      }\n    }\n  }\n}\n",
    ),
];
const NODE_MODULES: &str = ".opencode/node_modules";

/// Leave OpenCode nothing to install in `worktree`'s `.opencode/` when it holds nothing but
/// git-boulder's plugin (a folder with anything else of the user's — tools, plugins that import
/// packages, a `package.json` — is left to OpenCode). True when written.
pub fn settle_deps(worktree: &Path) -> Result<bool> {
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default()
    };
    let dir = worktree.join(".opencode");
    if names(&dir) != ["plugins"] || names(&dir.join("plugins")) != ["git-boulder.js"] {
        return Ok(false);
    }
    for (rel, text) in SETTLED {
        crate::fsutil::write_atomic(&worktree.join(rel), text.as_bytes())?;
    }
    // Last: with `node_modules/` there, OpenCode reads the lock file written above.
    std::fs::create_dir(worktree.join(NODE_MODULES))?;
    Ok(true)
}

/// Undo [`settle_deps`] in `worktree`: each file still as written there is removed, and an empty
/// `node_modules/` (once OpenCode installed something, all of it stays).
pub fn unsettle_deps(worktree: &Path) {
    if std::fs::remove_dir(worktree.join(NODE_MODULES)).is_err() {
        return;
    }
    for (rel, text) in SETTLED {
        let path = worktree.join(rel);
        if std::fs::read(&path).is_ok_and(|b| b == text.as_bytes()) {
            let _ = std::fs::remove_file(path);
        }
    }
}
