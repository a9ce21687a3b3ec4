//! The agent harnesses' own files (DESIGN §12): what `agent install` writes into each worktree so
//! that a harness calls git-boulder, and what `stream init` puts into a new worktree. What
//! git-boulder answers when a harness calls it is [`crate::agent`]'s.
//!
//! * [`install`]: `agent install|uninstall|status` — the files each harness reads (merged into
//!   what is there, restored exactly on uninstall), in the main worktree and every stream worktree.
//! * [`files`]: what each harness's file holds — hook entries in, out, present or stale (pure);
//!   [`json`]: JSON that keeps its key order; [`opencode`]: the packages OpenCode would install
//!   beside the plugin, settled.
//! * [`codex_trust`]: what Codex says of git-boulder's hooks (trusted, modified, …), asked of
//!   `codex app-server` for `agent status` and `doctor`.

pub mod codex_trust;
pub mod files;
pub mod install;
pub mod json;
pub mod opencode;

/// A harness git-boulder speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Harness {
    /// Claude Code: command hooks in `.claude/settings*.json`.
    Claude,
    /// Codex: command hooks in `.codex/hooks.json`.
    Codex,
    /// OpenCode: a plugin file OpenCode loads from `.opencode/plugins/`.
    Opencode,
}

impl Harness {
    pub const ALL: [Harness; 3] = [Harness::Claude, Harness::Codex, Harness::Opencode];

    pub fn as_str(self) -> &'static str {
        match self {
            Harness::Claude => "claude",
            Harness::Codex => "codex",
            Harness::Opencode => "opencode",
        }
    }
}

impl std::fmt::Display for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
