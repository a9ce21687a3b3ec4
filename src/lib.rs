//! git-boulder: parallel, persistent streams of work in one git repository, with all state kept
//! in git refs and notes.

pub mod agent;
pub mod boulder;
pub mod cli;
pub mod context;
pub mod doctor;
pub mod error;
pub mod failpoint;
pub mod fsutil;
pub mod git;
pub mod hooks;
pub mod lock;
pub mod merge;
pub mod names;
pub mod plan;
pub mod prd;
pub mod progress;
pub mod state;
pub mod stream;
pub mod sync;
pub mod text;
pub mod time;
pub mod trace;
pub mod trust;
pub mod workspace;
pub mod worktree;

pub use error::{Error, Result};
