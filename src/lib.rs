//! git-boulder: parallel, persistent streams of work in one git repository, with all state kept
//! in git refs and notes.

pub mod boulder;
pub mod checkout;
pub mod claim;
pub mod cli;
pub mod dirty;
pub mod doctor;
pub mod error;
pub mod failpoint;
pub mod fsutil;
pub mod git;
pub mod history;
pub mod hooks;
pub mod lifecycle;
pub mod lock;
pub mod merge;
pub mod names;
pub mod plan;
pub mod prd;
pub mod progress;
pub mod record;
pub mod runloop;
pub mod state;
pub mod status;
pub mod suggest;
pub mod sync;
pub mod text;
pub mod time;
pub mod trace;
pub mod trust;
pub mod workspace;
pub mod worktree;

pub use error::{Error, Result};
