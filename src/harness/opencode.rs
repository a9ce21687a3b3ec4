//! OpenCode's packages: it installs `@opencode-ai/plugin` into every `.opencode/` folder it
//! loads unless the folder says it is settled; `agent install` leaves it settled when the folder
//! holds nothing but git-boulder's plugin, and uninstall takes that back.

use std::path::Path;

use crate::error::Result;

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
