//! How this run talks to the user, decided once at startup: quiet, tracing, colour and trust,
//! from the global flags and the environment variables that stand for them (`BOULDER_QUIET`,
//! `BOULDER_TRACE=1`, `NO_COLOR`, `BOULDER_TRUST=1`), which are read here and nowhere else.
//!
//! The command line builds one [`Context`] and installs it ([`Context::install`]) before any
//! work. `cli/` gets it passed down and decides with it what a command prints (`quiet`) and
//! trusts (`work --trust`); below `cli/`, [`crate::trace`], [`crate::progress`], [`crate::trust`],
//! [`colour`] and [`export`] read the installed one ([`current`]). The commands a run starts
//! (git with its hooks, setup and verify, agents) get the same switches through [`export`], so a
//! `-v` run also traces the git-boulder hooks it triggers.
//!
//! Why a process global below `cli/`, not a parameter: the switches are read at every depth —
//! a trace span in `git/` under a hook, a progress line in `sync/` under `merge/`, the trust gate
//! under `stream run`'s setup — by functions whose callers have no other use for them, so passing
//! a `&Context` would add a parameter to most functions of the crate only to hand it on. They are
//! set once, before any work and before any thread starts, never change during a run, and are
//! the same for every thread: a write-once [`OnceLock`] read through [`current`] gives every
//! depth the same answer a parameter would. (A library caller that installs none gets the
//! environment's switches.)
//!
//! Trust is never inherited: [`take_env`], called first thing by the program, reads
//! `BOULDER_TRUST` and removes it from the process's environment, so no command the run starts
//! (agents, setup, verify, git and the hooks it runs, child `git boulder` runs) sees it. A worker
//! hands its trust to its own children explicitly, for the plan it read (`--trust-fingerprint`).

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
    /// Trust the plan's commands for this run only when their fingerprint is this one: what a
    /// worker run with `--trust` gives its children, so that a plan a pull changed meanwhile is
    /// not run on the strength of the one the user read.
    pub trust_fingerprint: Option<&'static str>,
}

static CURRENT: OnceLock<Context> = OnceLock::new();

/// `BOULDER_TRUST` as this process was given it (read once; see [`take_env`]).
static ENV_TRUST: OnceLock<bool> = OnceLock::new();

fn env_trust() -> bool {
    *ENV_TRUST.get_or_init(|| std::env::var("BOULDER_TRUST").is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes")))
}

/// Read `BOULDER_TRUST` for this run and take it out of the process's environment, so that it
/// stands for `--trust` for this command only and no child inherits it. Called by the program
/// before anything else runs (one thread: nothing reads the environment meanwhile).
pub fn take_env() {
    env_trust();
    std::env::remove_var("BOULDER_TRUST");
}

impl Context {
    /// The context the environment alone sets (no flags given).
    pub fn from_env() -> Context {
        Context {
            quiet: std::env::var_os("BOULDER_QUIET").is_some(),
            trace: std::env::var("BOULDER_TRACE").is_ok_and(|v| !v.is_empty() && v != "0"),
            colour: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal(),
            trust: env_trust(),
            trust_fingerprint: None,
        }
    }

    /// The environment's context with the global flags added.
    pub fn new(quiet: bool, verbose: bool, trust: bool) -> Context {
        let env = Context::from_env();
        Context { quiet: quiet || env.quiet, trace: verbose || env.trace, trust: trust || env.trust, ..env }
    }

    /// This context, trusting only the plan whose commands have the fingerprint `fp`.
    pub fn trusting_only(self, fp: Option<String>) -> Context {
        Context { trust_fingerprint: fp.map(|f| &*Box::leak(f.into_boxed_str())), ..self }
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
    cmd.env_remove("BOULDER_TRUST");
    let ctx = current();
    if ctx.trace {
        cmd.env("BOULDER_TRACE", "1");
    }
    if ctx.quiet {
        cmd.env("BOULDER_QUIET", "1");
    }
}

/// `color.ui` of the repository at hand: 0 unset or `auto`, 1 `never`, 2 `always`.
static COLOR_UI: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Follow the repository's `color.ui` (`never`/`false`, `always`, `auto`/`true`) as git does.
pub fn set_color_ui(value: &str) {
    let v = match value.trim().to_ascii_lowercase().as_str() {
        "never" | "false" | "no" | "off" | "0" => 1,
        "always" => 2,
        _ => 0,
    };
    COLOR_UI.store(v, std::sync::atomic::Ordering::Relaxed);
}

/// Whether stdout is coloured: never under `NO_COLOR`; else as `color.ui` says, on a terminal
/// when it says `auto` or nothing.
pub fn colour() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    match COLOR_UI.load(std::sync::atomic::Ordering::Relaxed) {
        _ if no_color => false,
        1 => false,
        2 => true,
        _ => current().colour,
    }
}
