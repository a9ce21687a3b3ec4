//! What a person reads, as snapshots (exit code, stdout and stderr together): the status table,
//! the conflict table of a refused merge, `doctor`, `check`, and the other tables and reports of
//! the README's commands. Every command runs on the test's fixed clock, so ages and dates are the
//! same on every run; temp folders show as `[TEMP]`.

use crate::common::*;

/// The sample repository with a fixed actor id (the id is random otherwise), streams initialized.
fn initialized() -> TestRepo {
    let repo = sample();
    repo.git(&["config", "boulder.actor", "alice"]).ok();
    repo.boulder(&["stream", "init"]).ok();
    repo
}

#[test]
fn status_table_through_a_streams_life() {
    let repo = sample();
    repo.git(&["config", "boulder.actor", "alice"]).ok();
    assert_shown!("status_before_init", repo.boulder(&["status"]));
    repo.boulder(&["stream", "init"]).ok();
    assert_shown!("status_initialized", repo.boulder(&["status"]));
    let auth = repo.worktree("auth");
    commit_in(&repo, &auth, "src/auth/login.rs", "fn login() {}\n", "feat(auth): login");
    commit_in(&repo, &auth, "src/auth/logout.rs", "fn logout() {}\n", "feat(auth): logout");
    std::fs::write(auth.join("src/auth/wip.rs"), "// not yet\n").unwrap();
    repo.boulder(&["prd", "done", "US-001"]).ok();
    commit_in(&repo, &repo.dir, "README.md", "# sample, moved on\n", "base moves");
    assert_shown!("status_at_work", repo.boulder(&["status"]));
    assert_shown!("status_in_a_worktree", repo.boulder_in(&auth, &["status"]));
    assert_shown!("stream_list", repo.boulder(&["stream", "list"]));
}

#[test]
fn conflict_table_of_a_refused_merge() {
    let repo = initialized();
    let auth = repo.worktree("auth");
    commit_in(&repo, &auth, "src/auth/mod.rs", "// auth, the stream's\n", "stream side");
    commit_in(&repo, &auth, "README.md", "# sample, the stream's\n", "stream readme");
    commit_in(&repo, &repo.dir, "src/auth/mod.rs", "// auth, the base's\n", "base side");
    commit_in(&repo, &repo.dir, "README.md", "# sample, the base's\n", "base readme");
    assert_shown!("merge_conflicts", repo.boulder(&["stream", "merge", "auth", "--force"]));
    assert_shown!("merge_conflicts_dry_run", repo.boulder(&["stream", "merge", "auth", "--force", "--dry-run"]));
}

#[test]
fn dry_run_of_a_clean_merge() {
    let repo = initialized();
    let auth = repo.worktree("auth");
    commit_in(&repo, &auth, "src/auth/login.rs", "fn login() {}\n", "feat(auth): login");
    repo.boulder(&["prd", "done", "US-001", "US-002"]).ok();
    assert_shown!("merge_dry_run", repo.boulder(&["stream", "merge", "auth", "--dry-run"]));
    assert_shown!("merge_done", repo.boulder(&["stream", "merge", "auth"]));
}

#[test]
fn doctor_clean_and_with_problems() {
    let repo = initialized();
    assert_shown!("doctor_clean", repo.boulder(&["doctor"]));
    // A worktree deleted by hand, and commits made with the hooks bypassed.
    std::fs::remove_dir_all(repo.worktree("docs")).unwrap();
    let api = repo.worktree("api");
    std::fs::write(api.join("src/api/list.rs"), "fn list() {}\n").unwrap();
    repo.git_in(&api, &["add", "-A"]).ok();
    repo.git_in(&api, &["-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "no hooks"]).ok();
    assert_shown!("doctor_problems", repo.boulder(&["doctor"]));
}

#[test]
fn check_says_whether_to_push_on() {
    let repo = initialized();
    let at = |now: &str, args: &[&str]| repo.boulder_env(&repo.dir, args, &[("BOULDER_NOW", now)]);
    assert_shown!("check_subagent", at("2030-01-01T00:00:00Z", &["check", "--boulder", "auth", "--subagent"]));
    assert_shown!("check_enforce", at("2030-01-01T00:00:00Z", &["check", "--boulder", "auth"]));
    assert_shown!("check_cooldown", at("2030-01-01T00:00:30Z", &["check", "--boulder", "auth"]));
    assert_shown!(
        "check_completion",
        at("2030-01-01T00:00:31Z", &["check", "--boulder", "auth", "--message", "I am done"])
    );
    assert_shown!(
        "check_max_failures",
        at("2030-01-01T05:00:00Z", &["check", "--boulder", "auth", "--max-failures", "1"])
    );
}

#[test]
fn prd_log_list_and_resume() {
    let repo = initialized();
    let auth = repo.worktree("auth");
    commit_in(&repo, &auth, "src/auth/login.rs", "fn login() {}\n", "feat(auth): login");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    repo.boulder_in(&auth, &["checkpoint", "-m", "login form half done"]).ok();
    repo.boulder_in(&auth, &["todo", "add", "write the tests"]).ok();
    repo.boulder(&["create", "oauth", "--parent", "auth"]).ok();
    assert_shown!("prd_show", repo.boulder(&["prd", "show"]));
    assert_shown!("prd_show_stream", repo.boulder(&["prd", "show", "--stream", "auth"]));
    assert_shown!("prd_next_done", repo.boulder(&["prd", "next", "--stream", "auth"]));
    assert_shown!("prd_next", repo.boulder(&["prd", "next", "--stream", "api"]));
    // An op's id hashes its state, which names the worktree's folder (a temp folder): masked.
    let log = repo.boulder(&["log", "auth"]).ok().shown();
    let masked: Vec<String> = log
        .lines()
        .map(|l| match l.split_once("  ") {
            Some((id, rest)) if id.len() == 10 && id.bytes().all(|b| b.is_ascii_hexdigit()) => format!("[OP]  {rest}"),
            _ => l.to_string(),
        })
        .collect();
    insta::assert_snapshot!("log_auth", masked.join("\n"));
    assert_shown!("boulder_list", repo.boulder(&["list"]));
    assert_shown!("resume", repo.boulder_in(&auth, &["resume"]));
}

#[test]
fn validate_reports_every_problem() {
    let repo = sample();
    assert_shown!("validate_ok", repo.boulder(&["stream", "validate"]));
    repo.write(
        ".boulder/streams.yaml",
        "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  auth:\n    stories: [US-001, US-404]\n    paths: [src/**]\n  \
         api:\n    stories: [US-001]\n    paths: [src/api/**]\n    depends_on: [ghost]\nsettings:\n  base_branch: main\n",
    );
    assert_shown!("validate_problems", repo.boulder(&["stream", "validate"]));
}

#[test]
fn the_run_loop_reports_each_iteration() {
    let repo = initialized();
    let finisher = repo.tmp.path().join("finisher.sh");
    std::fs::write(
        &finisher,
        "#!/bin/sh\nset -e\nsed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
         echo \"$BOULDER_ITERATION $BOULDER_STORY\" >> src/api/work.txt\ngit add -A\ngit commit -q -m \"$BOULDER_STORY\"\n",
    )
    .unwrap();
    let finished =
        repo.boulder(&["stream", "run", "api", "--cooldown", "10ms", "--", "sh", finisher.to_str().unwrap()]);
    assert_shown!("run_completes", finished);
    let idle = repo.boulder(&["stream", "run", "docs", "--cooldown", "10ms", "--max-failures", "2", "--", "true"]);
    assert_shown!("run_fails_without_progress", idle);
}
