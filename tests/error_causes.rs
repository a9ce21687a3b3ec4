//! What an error shows of its causes: nothing more than its message and hints by default; with
//! `-v` (or `BOULDER_TRACE=1`), each underlying cause on a `caused by:` line of its own,
//! outermost first, after the message and before the hints.

use crate::common::*;

/// `run` without its `trace:` lines (their timings change from run to run).
fn untraced(mut run: Run) -> Run {
    run.stderr = run.stderr.lines().filter(|l| !l.starts_with("trace:")).map(|l| format!("{l}\n")).collect();
    run
}

#[test]
fn verbose_shows_the_cause_chain() {
    let repo = sample();
    repo.git(&["config", "boulder.actor", "alice"]).ok();
    // The plan is a folder: reading it fails with the operating system's error as the cause.
    std::fs::remove_file(repo.dir.join(".boulder/streams.yaml")).unwrap();
    std::fs::create_dir(repo.dir.join(".boulder/streams.yaml")).unwrap();
    assert_shown!("plan_is_a_folder", repo.boulder(&["status"]));
    assert_shown!("plan_is_a_folder_verbose", untraced(repo.boulder(&["-v", "status"])));
}

#[test]
fn verbose_shows_each_level_of_a_deeper_chain() {
    let repo = sample();
    repo.git(&["config", "boulder.actor", "alice"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    // A ref of git-boulder's that git cannot decode: gix's error, and below it the parse error.
    std::fs::write(repo.dir.join(".git/refs/boulder/streams/auth"), "garbage\n").unwrap();
    assert_shown!("corrupt_ref", repo.boulder(&["log"]));
    assert_shown!("corrupt_ref_verbose", untraced(repo.boulder(&["-v", "log"])));
}
