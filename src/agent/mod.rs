//! Agent harnesses (DESIGN §12): wiring the boulder gates and path ownership into each harness's
//! documented hook contract, so an agent in any worktree is pushed on, held to its stream's paths,
//! and given its stream's context — with the state kept in git-boulder's op-log, never in the
//! adapter.
//!
//! * [`install`]: `agent install|uninstall|status` — the files each harness reads (merged into
//!   what is there, restored exactly on uninstall), in the main worktree and every stream worktree.
//! * [`hook`]: `agent hook HARNESS` — one payload on stdin, the harness's answer on stdout: the
//!   decisions ([`hook::stop`], [`hook::session_context`], [`hook::edit`]) in [`hook`], each
//!   harness's payloads and answers in [`claude`], [`codex`] and [`opencode`] (the plugin's questions);
//!   Claude Code's own worktrees made and removed as streams in [`worktrees`].
//! * [`codex_trust`]: what Codex says of git-boulder's hooks (trusted, modified, …), asked of
//!   `codex app-server` for `agent status` and `doctor`.

pub mod claude;
pub mod codex;
pub mod codex_trust;
pub mod files;
pub mod hook;
pub mod install;
pub mod json;
pub mod opencode;
pub mod worktrees;

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
