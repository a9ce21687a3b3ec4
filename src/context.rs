//! How this run talks to the user, decided once at startup: quiet, tracing, colour and trust,
//! from the global flags and the environment variables that stand for them (`BOULDER_QUIET`,
//! `BOULDER_TRACE=1`, `NO_COLOR`, `BOULDER_TRUST=1`), which are read here and nowhere else.
//!
//! The command line builds one [`Context`] and installs it ([`Context::install`]) before any
//! work; [`crate::trace`], [`crate::progress`] and [`crate::trust`] consult it. The commands a run
//! starts (git with its hooks, setup and verify, agents) get the same switches through
//! [`export`], so a `-v` run also traces the git-boulder hooks it triggers.

use std::io::IsTerminal;
use std::process::Command;
use std::sync::OnceLock;

/// The switches of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Context {
    /// No progress or notes on stderr (`--quiet`, or `BOULDER_QUIET` set).
    pub quiet: bool,
    /// Trace each step with its time on stderr (`--verbose`, or `BOULDER_TRACE` set to anything
    /// but empty or `0`).
    pub trace: bool,
    /// Colour on stdout: a terminal, and `NO_COLOR` unset or empty.
    pub colour: bool,
    /// Trust the plan's commands for this run (`--trust`, or `BOULDER_TRUST` = 1, true or yes).
    pub trust: bool,
}

static CURRENT: OnceLock<Context> = OnceLock::new();

impl Context {
    /// The context the environment alone sets (no flags given).
    pub fn from_env() -> Context {
        Context {
            quiet: std::env::var_os("BOULDER_QUIET").is_some(),
            trace: std::env::var("BOULDER_TRACE").is_ok_and(|v| !v.is_empty() && v != "0"),
            colour: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal(),
            trust: std::env::var("BOULDER_TRUST").is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes")),
        }
    }

    /// The environment's context with the global flags added.
    pub fn new(quiet: bool, verbose: bool, trust: bool) -> Context {
        let env = Context::from_env();
        Context { quiet: quiet || env.quiet, trace: verbose || env.trace, trust: trust || env.trust, ..env }
    }

    /// Make this the context of the process (the first one installed stays); returns the one in
    /// force.
    pub fn install(self) -> &'static Context {
        CURRENT.get_or_init(|| self)
    }
}

/// The context in force: the installed one, else the environment's.
pub fn current() -> &'static Context {
    CURRENT.get_or_init(Context::from_env)
}

/// Pass this run's quiet and trace switches on to a command it starts (its git-boulder hooks
/// then trace, or stay quiet, like the run itself). Trust is never passed on.
pub fn export(cmd: &mut Command) {
    let ctx = current();
    if ctx.trace {
        cmd.env("BOULDER_TRACE", "1");
    }
    if ctx.quiet {
        cmd.env("BOULDER_QUIET", "1");
    }
}
