//! What git-boulder answers when an agent harness calls it (DESIGN §12): the boulder gates and
//! path ownership wired into each harness's documented hook contract, so an agent in any worktree
//! is pushed on, held to its stream's paths, and given its stream's context — with the state kept
//! in git-boulder's op-log, never in the adapter. The files a harness reads to call it are
//! installed by [`crate::harness`].
//!
//! * [`hook`]: `agent hook HARNESS` — one payload on stdin, the harness's answer on stdout: the
//!   decisions ([`hook::stop`], [`hook::session_context`], [`hook::edit`]) in [`hook`], each
//!   harness's payloads and answers in [`claude`], [`codex`] and [`opencode`] (the plugin's questions);
//!   Claude Code's own worktrees made and removed as streams in [`worktrees`].

pub mod claude;
pub mod codex;
pub mod hook;
pub mod opencode;
pub mod usage;
pub mod worktrees;
