//! Test-only crash points: when the environment variable `BOULDER_FAILPOINT` names a step, the
//! process aborts there (no destructors, no cleanup — like `kill -9`), so tests can prove that
//! every step of a long operation leaves the repository consistent and that rerunning finishes
//! the job. When `BOULDER_FAILPOINT_RUN` names a step, the shell command in
//! `BOULDER_FAILPOINT_CMD` runs there instead and the operation goes on — the way tests make
//! something happen between two steps (a commit landing while a merge runs). Unset (always,
//! outside tests), [`hit`] costs one cached lookup.

use std::sync::OnceLock;

struct Wanted {
    abort: Option<String>,
    run: Option<(String, String)>,
}

/// Abort the process if `BOULDER_FAILPOINT` is `step`; run `BOULDER_FAILPOINT_CMD` if
/// `BOULDER_FAILPOINT_RUN` is `step`.
pub fn hit(step: &str) {
    static WANTED: OnceLock<Wanted> = OnceLock::new();
    let wanted = WANTED.get_or_init(|| {
        let var = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
        Wanted { abort: var("BOULDER_FAILPOINT"), run: var("BOULDER_FAILPOINT_RUN").zip(var("BOULDER_FAILPOINT_CMD")) }
    });
    if let Some((at, cmd)) = &wanted.run {
        if at == step {
            let _ = std::process::Command::new("sh").arg("-c").arg(cmd).status();
        }
    }
    if wanted.abort.as_deref() == Some(step) {
        eprintln!("git-boulder: failpoint {step} reached; aborting");
        std::process::abort();
    }
}
