//! The dashboard says what to do next: COMPLETED however the stories got done, `prd undone`,
//! INTERRUPTED for a killed run (and doctor says so), the worktree you stand in, and the push a
//! merged base still needs.

use crate::common::*;

fn row(repo: &TestRepo, dir: &std::path::Path, name: &str) -> serde_json::Value {
    let st = repo.boulder_in(dir, &["status", "--json"]).ok().json();
    st["streams"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap().clone()
}

#[test]
fn stories_done_by_prd_done_make_the_stream_completed_and_undone_takes_it_back() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    assert_eq!(row(&repo, &repo.dir, "auth")["status"], "INITIALIZED");
    // US-002 is ticked in the PRD; recording US-001 finishes the stream.
    repo.boulder(&["prd", "done", "US-001"]).ok();
    assert_eq!(row(&repo, &repo.dir, "auth")["status"], "COMPLETED");
    let r = repo.boulder(&["status"]).ok();
    assert_shown!("stories_done_by_prd_done_make_the_stream_completed_and_undone_takes_it_back", r);

    // A mistaken `prd done` is taken back; a story ticked in the file stays done there.
    let r = repo.boulder(&["prd", "undone", "US-001", "US-002"]).ok();
    assert_shown!("stories_done_by_prd_done_make_the_stream_completed_and_undone_takes_it_back_2", r);
    let auth = row(&repo, &repo.dir, "auth");
    assert_eq!(auth["status"], "INITIALIZED");
    assert_eq!(auth["progress"]["done"], 1);
    // Unknown ids are a usage error, as for `prd done`.
    repo.boulder(&["prd", "undone", "US-999"]).code(2);
}

#[test]
fn a_killed_run_shows_interrupted_with_the_command_that_resumes_it() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let mut cmd = repo.command(bin());
    let mut child =
        cmd.args(["stream", "run", "auth", "--", "sleep", "30"]).current_dir(&repo.dir).spawn().expect("start a run");
    wait_for("the run to show RUNNING", || row(&repo, &repo.dir, "auth")["status"] == "RUNNING");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(row(&repo, &repo.dir, "auth")["status"], "INTERRUPTED");
    let r = repo.boulder(&["status"]).ok();
    assert_shown!("a_killed_run_shows_interrupted_with_the_command_that_resumes_it", r);
    // The sample plan names no agent, so the command the run had is needed again.
    let d = repo.boulder(&["doctor"]).code(1);
    assert_shown!("a_killed_run_shows_interrupted_with_the_command_that_resumes_it_2", d);
}

#[test]
fn status_marks_the_worktree_you_stand_in() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth", "api"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    assert_eq!(row(&repo, &wt, "auth")["current"], true);
    assert_eq!(row(&repo, &wt, "api")["current"], false);
    let r = repo.boulder_in(&wt, &["status"]).ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines.iter().any(|l| l.starts_with("* auth ")), "{}", r.stdout);
    assert!(lines.iter().any(|l| l.starts_with("  api ")), "{}", r.stdout);
    // From the main worktree no stream is marked and the table is as it was.
    assert_eq!(row(&repo, &repo.dir, "auth")["current"], false);
    let r = repo.boulder(&["status"]).ok();
    assert!(r.stdout.lines().any(|l| l.starts_with("auth ")), "{}", r.stdout);
}

#[test]
fn a_merge_that_moved_the_local_base_says_push_until_the_remote_has_it() {
    let repo = sample();
    let remote = repo.tmp.path().join("origin.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]).ok();
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]).ok();
    repo.git(&["push", "-q", "-u", "origin", "main"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/docs");
    std::fs::write(wt.join("docs/guide.md"), "# guide\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]).ok();
    repo.git_in(&wt, &["commit", "-q", "-m", "guide"]).ok();
    repo.boulder(&["prd", "done", "US-005"]).ok();
    let r = repo.boulder(&["stream", "merge", "docs"]).ok();
    let hint = "push main to share it (`git push origin main`)";
    assert!(r.stderr.contains(hint), "{}", r.stderr);
    let r = repo.boulder(&["status"]).ok();
    assert_shown!("a_merge_that_moved_the_local_base_says_push_until_the_remote_has_it", r);
    repo.git(&["push", "-q", "origin", "main"]).ok();
    let r = repo.boulder(&["status"]).ok();
    assert!(!r.stderr.contains("push main"), "{}", r.stderr);
}

/// `log`'s output with its op ids (the first column) as `[OP]`: an op that names a temp folder
/// has an id of its own on every run.
fn op_ids_masked(log: &Run) -> Run {
    let ids: Vec<&str> = log.stdout.lines().filter_map(|l| l.split_whitespace().next()).collect();
    log.masked(&ids.iter().map(|id| (*id, "[OP]")).collect::<Vec<_>>())
}

#[test]
fn commands_in_a_stream_worktree_default_to_that_stream() {
    let repo = sample();
    // The log shows op ids, which name the actor.
    repo.git(&["config", "boulder.actor", "me"]).ok();
    repo.boulder(&["stream", "init", "auth", "api"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/api");
    // prd next/show: the stream's stories, not the whole PRD (--all for that).
    let next = repo.boulder_in(&wt, &["prd", "next", "--json"]).ok().json();
    assert_eq!(next["id"], "US-003");
    let show = repo.boulder_in(&wt, &["prd", "show", "--json"]).ok().json();
    assert_eq!(show["stream"], "api");
    let ids: Vec<&str> = show["stories"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["US-003", "US-004"]);
    let all = repo.boulder_in(&wt, &["prd", "show", "--all", "--json"]).ok().json();
    assert_eq!(all["stories"].as_array().unwrap().len(), 6);
    // From the main worktree: the whole PRD, and the first open story of it.
    assert_eq!(repo.boulder(&["prd", "next", "--json"]).ok().json()["id"], "US-001");
    // checkpoint and resume: the stream's boulder.
    repo.boulder_in(&wt, &["checkpoint", "-m", "list endpoint half done"]).ok();
    let r = repo.boulder_in(&wt, &["resume"]).ok();
    assert_shown!("commands_in_a_stream_worktree_default_to_that_stream", r);
    // log: the stream's history there; every op-log, newest first, from the main worktree; -n.
    let here = repo.boulder_in(&wt, &["log"]).ok();
    assert_shown!("commands_in_a_stream_worktree_default_to_that_stream_2", op_ids_masked(&here));
    assert!(!here.stdout.contains("auth"), "{}", here.stdout);
    let every = repo.boulder(&["log"]).ok();
    assert_shown!("commands_in_a_stream_worktree_default_to_that_stream_3", op_ids_masked(&every));
    assert!(every.stdout.lines().next().unwrap().contains("checkpoint"), "{}", every.stdout);
    let two = repo.boulder(&["log", "-n", "2"]).ok();
    assert_eq!(two.stdout.lines().count(), 2, "{}", two.stdout);
}

#[test]
fn stream_init_installs_the_hooks_so_commits_are_recorded() {
    let repo = sample();
    let r = repo.boulder(&["stream", "init", "auth"]).ok();
    assert_shown!("stream_init_installs_the_hooks_so_commits_are_recorded", r);
    let st = repo.boulder(&["hooks", "status", "--json"]).ok().json();
    let defaults: Vec<_> = st.as_array().unwrap().iter().filter(|h| h["default"] == true).collect();
    assert!(!defaults.is_empty(), "no default hooks: {st}");
    for h in defaults {
        assert_eq!(h["state"], "installed", "{st}");
    }
    let wt = repo.dir.join(".boulder/worktrees/auth");
    std::fs::write(wt.join("src/auth/login.rs"), "fn login() {}\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]).ok();
    repo.git_in(&wt, &["commit", "-q", "-m", "login"]).ok();
    let note = repo.git_out(&["notes", "--ref=boulder", "show", "boulder/auth"]);
    assert!(note.contains("\"stream\":\"auth\""), "{note}");
    // A second init finds them there and says nothing about them.
    let r = repo.boulder(&["stream", "init", "api"]).ok();
    assert!(!r.stderr.contains("hooks"), "{}", r.stderr);
}
