//! git-boulder: parallel, persistent streams of work in one git repository, with all state kept
//! in git refs and notes.

/// `eprintln!` that never panics. Standard error can be a pipe whose reader has gone (`2>&1 |
/// head -1`); std's macro panics then. The line is lost instead, as git's messages are, and the
/// command ends as it would have. Defined before the modules, so it is the `eprintln!` of all.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics (see `eprintln!` above).
macro_rules! eprint {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

pub mod agent;
pub mod boulder;
pub mod cli;
pub mod context;
pub mod doctor;
pub mod error;
pub mod failpoint;
pub mod fsutil;
pub mod git;
pub mod harness;
pub mod hooks;
pub mod inspect;
pub mod lock;
pub mod merge;
pub mod names;
pub mod plan;
pub mod prd;
pub mod progress;
pub mod review;
pub mod spend;
pub mod state;
pub mod stream;
pub mod sync;
pub mod text;
pub mod time;
pub mod trace;
pub mod trust;
pub mod ui;
pub mod worker;
pub mod workspace;
pub mod worktree;

pub use error::{Error, Result};
