//! git-boulder: parallel, persistent streams of work in one git repository, with all state kept
//! in git refs and notes.

pub mod cli;
pub mod error;
pub mod git;
pub mod names;
pub mod plan;
pub mod prd;
pub mod state;
pub mod time;

pub use error::{Error, Result};
