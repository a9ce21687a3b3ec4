//! The one integration test binary: every test module below drives the real `git-boulder` binary
//! (or the library, in process) against real repositories made with the git CLI in temp dirs.
//! One binary links once and runs every test in one process, as `cargo test` is run in CI.

mod common;

mod agent_claude;
mod agent_codex;
mod agent_harness_review;
mod agent_install;
mod agent_opencode;
mod agent_prompt;
mod boulders;
mod cleanup_safety;
mod dashboard;
mod doctor_locks;
mod extension;
mod first_day;
mod flags;
mod fleet;
mod foundation;
mod fsmonitor;
mod hook_managers;
mod hook_objects;
mod hooks;
mod hostile;
mod human_output;
mod journey;
mod log_read_ahead;
mod merge;
mod merge_queue;
mod merge_queue_edges;
mod merge_real;
mod notes_rewrite;
mod oplog_scale;
mod prd_forms;
mod prd_scale;
mod pre_push_pushed;
mod project_boulder;
mod pull_scale;
mod record;
mod refusals;
mod remote_refusals;
mod repo_formats;
mod rollback;
mod rollback_edges;
mod runloop;
mod schemas;
mod security;
mod state_compat;
mod state_oplog;
mod state_store;
mod status_overlap;
mod streams;
mod sync;
mod trust;
mod warm_worktrees;
mod worktree_lib;
