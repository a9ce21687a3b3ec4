//! Test-only crash points: when the environment variable `BOULDER_FAILPOINT` names a step, the
//! process aborts there (no destructors, no cleanup — like `kill -9`), so tests can prove that
//! every step of a long operation leaves the repository consistent and that rerunning finishes
//! the job. Unset (always, outside tests), [`hit`] costs one cached lookup.

use std::sync::OnceLock;

/// Abort the process if `BOULDER_FAILPOINT` is `step`.
pub fn hit(step: &str) {
    static WANTED: OnceLock<Option<String>> = OnceLock::new();
    let wanted = WANTED.get_or_init(|| std::env::var("BOULDER_FAILPOINT").ok().filter(|s| !s.is_empty()));
    if wanted.as_deref() == Some(step) {
        eprintln!("git-boulder: failpoint {step} reached; aborting");
        std::process::abort();
    }
}
