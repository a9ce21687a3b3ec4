//! `git boulder review NAME --approve | --request-changes -m TEXT | --withdraw`: decisions recorded
//! as `reviewed` ops naming the reviewer and the exact tip, checked with plain git; what counts
//! (the tip it names, not the agent's own machine); refusals of every bad input; decisions
//! travelling between clones; a SIGKILL while recording leaving the decision whole or absent.

use crate::common::*;

const ALICE: [(&str, &str); 2] = [("GIT_COMMITTER_NAME", "Alice"), ("GIT_COMMITTER_EMAIL", "alice@example.com")];
const BOB: [(&str, &str); 2] = [("GIT_COMMITTER_NAME", "Bob"), ("GIT_COMMITTER_EMAIL", "bob@example.com")];

/// Machine `name` of the sample with review required: auth initialized and one commit there.
fn machine(extra: &str, name: &str) -> TestRepo {
    let repo = sample_with(extra);
    repo.git(&["config", "boulder.actor", name]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    commit_in(&repo, &repo.worktree("auth"), "src/auth/login.rs", "fn login() {}\n", "feat(auth): login form");
    repo
}

fn review(repo: &TestRepo, who: &[(&str, &str)], args: &[&str]) -> Run {
    let mut all = vec!["review", "auth"];
    all.extend_from_slice(args);
    repo.boulder_env(&repo.dir, &all, who)
}

/// The last op of auth's op-log, as git stores it.
fn last_op(repo: &TestRepo) -> serde_json::Value {
    serde_json::from_str(&repo.git_out(&["show", "refs/boulder/streams/auth:op.json"])).unwrap()
}

fn status(repo: &TestRepo) -> serde_json::Value {
    repo.boulder(&["review", "auth", "--json"]).ok().json()["review"]["status"].clone()
}

#[test]
fn a_decision_is_an_op_naming_the_reviewer_the_machine_and_the_exact_tip() {
    let repo = machine("  review: {required: 1, allow_self: true}\n", "laptop");
    let tip = rev(&repo, "boulder/auth");
    let r = review(&repo, &ALICE, &["--approve", "-m", "reads well"]).ok();
    assert_shown!("approved", r.masked(&[(&tip[..8], "[TIP]")]));
    let op = last_op(&repo);
    assert_eq!(op["kind"], "reviewed");
    assert_eq!(op["actor"], "laptop");
    assert_eq!(
        op["data"],
        serde_json::json!({"decision": "approve", "message": "reads well", "reviewer": "Alice <alice@example.com>", "tip": tip})
    );
    let st = repo.stream_state("auth");
    assert_eq!(st["reviews"]["Alice <alice@example.com>"]["tip"], tip);
    assert_eq!(status(&repo), "APPROVED");

    let r = review(&repo, &BOB, &["--request-changes", "-m", "keep the old endpoint"]).ok();
    assert_shown!("changes_requested", r.masked(&[(&tip[..8], "[TIP]")]));
    assert_eq!(status(&repo), "CHANGES_REQUESTED");
    review(&repo, &BOB, &["--withdraw"]).ok();
    assert_eq!(last_op(&repo)["data"]["decision"], "withdraw");
    assert!(repo.stream_state("auth")["reviews"].get("Bob <bob@example.com>").is_none());
    assert_eq!(status(&repo), "APPROVED");
    // Nothing standing: nothing recorded.
    let before = repo.git_out(&["rev-parse", "refs/boulder/streams/auth"]);
    let r = review(&repo, &BOB, &["--withdraw"]).ok();
    assert_shown!("nothing_to_withdraw", r);
    assert_eq!(repo.git_out(&["rev-parse", "refs/boulder/streams/auth"]), before);

    // A new commit puts it back to review.
    commit_in(&repo, &repo.worktree("auth"), "src/auth/login.rs", "fn login() { todo!() }\n", "auth: more");
    assert_eq!(status(&repo), "REVIEW");
    repo.assert_fsck();
}

#[test]
fn the_machine_that_ran_the_agent_does_not_count_unless_allowed() {
    let repo = machine("  review: {required: 1}\n", "laptop");
    review(&repo, &ALICE, &["--approve"]).ok();
    assert_eq!(status(&repo), "REVIEW");
    let v = repo.boulder(&["review", "auth", "--json"]).ok().json();
    assert_eq!(v["review"]["decisions"][0]["standing"], "own machine");
    assert_eq!(v["review"]["author_actor"], "laptop");
    // The same plan with allow_self: the approval counts.
    repo.with_settings("  review: {required: 1, allow_self: true}\n");
    let plan = repo.read(".boulder/streams.yaml").replace("  review: {required: 1}\n", "");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("solo");
    assert_eq!(status(&repo), "APPROVED");
}

#[test]
fn bad_decisions_are_refused_with_the_fix_and_record_nothing() {
    let repo = machine("  review: {required: 1}\n", "laptop");
    let big = "x".repeat(64 * 1024 + 1);
    let cases: Vec<(&str, Vec<&str>, bool)> = vec![
        ("unknown_stream", vec!["review", "billing", "--approve"], true),
        ("request_changes_without_message", vec!["review", "auth", "--request-changes"], true),
        ("empty_message", vec!["review", "auth", "--request-changes", "-m", " "], true),
        ("oversized_message", vec!["review", "auth", "--approve", "-m", &big], true),
        ("two_decisions", vec!["review", "auth", "--approve", "--withdraw"], true),
        ("message_without_decision", vec!["review", "auth", "-m", "hi"], true),
        ("no_branch", vec!["review", "docs", "--approve"], true),
        ("no_identity", vec!["review", "auth", "--approve"], false),
    ];
    let before = repo.refs("refs/boulder/");
    let tips: Vec<String> = before.iter().map(|r| repo.git_out(&["rev-parse", r])).collect();
    for (name, args, identity) in cases {
        let r = if identity {
            repo.boulder_env(&repo.dir, &args, &ALICE)
        } else {
            let mut cmd = repo.command(bin());
            cmd.env_remove("GIT_COMMITTER_NAME").env_remove("GIT_COMMITTER_EMAIL");
            cmd.env_remove("GIT_AUTHOR_NAME").env_remove("GIT_AUTHOR_EMAIL");
            Run::from(cmd.args(&args).current_dir(&repo.dir).output().unwrap())
        };
        let r = r.code(2);
        assert_shown!(format!("refused_{name}"), r);
    }
    // No commits beyond the base: nothing to review.
    repo.boulder(&["stream", "init", "api"]).ok();
    let r = repo.boulder_env(&repo.dir, &["review", "api", "--approve"], &ALICE).code(2);
    assert_shown!("refused_no_commits", r);
    let after: Vec<String> = before.iter().map(|r| repo.git_out(&["rev-parse", r])).collect();
    assert_eq!(after, tips, "nothing was recorded");
}

/// A remote holding the sample with review required, served by `git daemon`.
fn served() -> (Remote, GitDaemon, String) {
    let remote = Remote::new(&[
        (".agents/tasks/prd.md", SAMPLE_PRD),
        (".boulder/streams.yaml", &SAMPLE_PLAN.replace("settings:\n", "settings:\n  review: {required: 1}\n")),
        ("src/auth/mod.rs", "// auth\n"),
    ]);
    let daemon = GitDaemon::serve(&remote.root);
    let url = daemon.url("remote.git");
    (remote, daemon, url)
}

#[test]
fn decisions_travel_between_three_clones_over_git_daemon_and_count_only_for_their_tip() {
    let (remote, _daemon, url) = served();
    let laptop = remote.machine_from("laptop", &url);
    laptop.boulder(&["stream", "init", "auth"]).ok();
    commit_in(&laptop, &laptop.worktree("auth"), "src/auth/login.rs", "fn login() {}\n", "feat(auth): login");
    laptop.git(&["push", "-q", "origin", "boulder/auth"]).ok();
    laptop.boulder(&["push"]).ok();

    // desk reviews with push; ci only syncs.
    let desk = remote.machine_from("desk", &url);
    desk.boulder(&["pull"]).ok();
    desk.git(&["fetch", "-q", "origin", "boulder/auth:boulder/auth"]).ok();
    review(&desk, &ALICE, &["--approve"]).ok();
    assert_eq!(status(&desk), "APPROVED", "desk did not run the agent: its approval counts");
    desk.boulder(&["push"]).ok();

    let ci = remote.machine_from("ci", &url);
    ci.boulder(&["sync"]).ok();
    ci.git(&["fetch", "-q", "origin", "boulder/auth:boulder/auth"]).ok();
    assert_eq!(status(&ci), "APPROVED");

    laptop.boulder(&["sync"]).ok();
    let v = laptop.boulder(&["review", "auth", "--json"]).ok().json();
    assert_eq!(v["review"]["status"], "APPROVED");
    assert_eq!(v["review"]["decisions"][0]["actor"], "desk");
    assert_eq!(v["review"]["decisions"][0]["reviewer"], "Alice <alice@example.com>");

    // A commit after the approval, on the machine that ran the agent: back to review, there and
    // on every machine the new tip reaches.
    commit_in(&laptop, &laptop.worktree("auth"), "src/auth/login.rs", "fn login() { 1 }\n", "auth: after review");
    assert_eq!(status(&laptop), "REVIEW");
    laptop.git(&["push", "-q", "origin", "boulder/auth"]).ok();
    for m in [&desk, &ci] {
        m.git(&["fetch", "-q", "origin", "+boulder/auth:boulder/auth"]).ok();
        assert_eq!(status(m), "REVIEW");
    }
    // ci's own approval of the new tip counts everywhere once shared.
    review(&ci, &BOB, &["--approve"]).ok();
    ci.boulder(&["sync"]).ok();
    laptop.boulder(&["sync"]).ok();
    assert_eq!(status(&laptop), "APPROVED");
}

#[test]
fn an_approval_of_another_tip_does_not_count_anywhere() {
    let remote = Remote::new(&[
        (".agents/tasks/prd.md", SAMPLE_PRD),
        (".boulder/streams.yaml", &SAMPLE_PLAN.replace("settings:\n", "settings:\n  review: {required: 1}\n")),
        ("src/auth/mod.rs", "// auth\n"),
    ]);
    let laptop = remote.machine("laptop");
    laptop.boulder(&["stream", "init", "auth"]).ok();
    let w = laptop.worktree("auth");
    commit_in(&laptop, &w, "src/auth/login.rs", "fn login() {}\n", "feat(auth): login");
    commit_in(&laptop, &w, "src/auth/login.rs", "fn login() { evil() }\n", "auth: the part to hide");
    laptop.git(&["push", "-q", "origin", "boulder/auth"]).ok();
    laptop.boulder(&["push"]).ok();

    // Another machine approves the stream as it was one commit earlier.
    let other = remote.machine("other");
    other.boulder(&["pull"]).ok();
    other.git(&["fetch", "-q", "origin", "boulder/auth:boulder/auth"]).ok();
    other.git(&["update-ref", "refs/heads/boulder/auth", "boulder/auth~1"]).ok();
    review(&other, &ALICE, &["--approve"]).ok();
    other.boulder(&["push"]).ok();

    laptop.boulder(&["pull"]).ok();
    let v = laptop.boulder(&["review", "auth", "--json"]).ok().json();
    assert_eq!(v["review"]["status"], "REVIEW");
    assert_eq!(v["review"]["decisions"][0]["standing"], "stale");
}

#[test]
fn a_forged_reviewed_op_is_refused_by_pull_naming_it() {
    let remote = Remote::new(&[
        (".agents/tasks/prd.md", SAMPLE_PRD),
        (".boulder/streams.yaml", &SAMPLE_PLAN.replace("settings:\n", "settings:\n  review: {required: 1}\n")),
        ("src/auth/mod.rs", "// auth\n"),
    ]);
    let laptop = remote.machine("laptop");
    laptop.boulder(&["stream", "init", "auth"]).ok();
    commit_in(&laptop, &laptop.worktree("auth"), "src/auth/login.rs", "fn login() {}\n", "feat(auth): login");
    laptop.boulder(&["push"]).ok();

    // A machine writes an approval op by hand, naming no full commit, and pushes it.
    let mallory = remote.machine("mallory");
    mallory.boulder(&["pull"]).ok();
    let parent = mallory.git_out(&["rev-parse", "refs/boulder/streams/auth"]);
    let state = mallory.git_out(&["rev-parse", &format!("{parent}:state.json")]);
    let parent_state: serde_json::Value =
        serde_json::from_str(&mallory.git_out(&["show", &format!("{parent}:state.json")])).unwrap();
    let lamport = parent_state["lamport"].as_u64().unwrap() + 1;
    let op = format!(
        r#"{{"v":1,"kind":"reviewed","lamport":{lamport},"at":"2026-11-01T00:00:00Z","actor":"mallory","data":{{"decision":"approve","reviewer":"Alice <alice@example.com>","tip":"abcd"}}}}"#
    );
    let blob = {
        let mut cmd = mallory.command("git");
        cmd.args(["hash-object", "-w", "--stdin"]).current_dir(&mallory.dir).stdin(std::process::Stdio::piped());
        cmd.stdout(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(op.as_bytes()).unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap().trim().to_string()
    };
    let listing = format!("100644 blob {blob}\top.json\n100644 blob {state}\tstate.json\n");
    let tree = {
        let mut cmd = mallory.command("git");
        cmd.args(["mktree"]).current_dir(&mallory.dir).stdin(std::process::Stdio::piped());
        cmd.stdout(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(listing.as_bytes()).unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap().trim().to_string()
    };
    let forged = mallory.git_out(&["commit-tree", &tree, "-p", &parent, "-m", "reviewed"]);
    mallory.git(&["push", "-q", "-f", "origin", &format!("{forged}:refs/boulder/streams/auth")]).ok();

    let r = laptop.boulder(&["pull"]).code(1);
    let forged = &forged[..];
    assert_shown!("forged_op_refused", r.masked(&[(forged, "[FORGED]")]));
    assert!(laptop.stream_state("auth").get("reviews").is_none());
}

#[test]
fn a_sigkill_while_recording_leaves_the_decision_whole_or_absent() {
    for (point, recorded) in [("review-record", false), ("review-recorded", true)] {
        let repo = machine("  review: {required: 1, allow_self: true}\n", "laptop");
        let before = repo.git_out(&["rev-parse", "refs/boulder/streams/auth"]);
        let mut env = ALICE.to_vec();
        env.extend([("BOULDER_FAILPOINT_RUN", point), ("BOULDER_FAILPOINT_CMD", "kill -KILL $PPID")]);
        let r = repo.boulder_env(&repo.dir, &["review", "auth", "--approve", "-m", "ok"], &env);
        assert_ne!(r.code, 0, "{point}: killed");
        let after = repo.git_out(&["rev-parse", "refs/boulder/streams/auth"]);
        if recorded {
            assert_ne!(after, before, "{point}");
            assert_eq!(last_op(&repo)["data"]["decision"], "approve");
            assert_eq!(status(&repo), "APPROVED");
        } else {
            assert_eq!(after, before, "{point}");
            assert_eq!(status(&repo), "REVIEW");
        }
        repo.boulder(&["doctor"]).ok();
        repo.assert_fsck();
        // Recording again works either way.
        review(&repo, &ALICE, &["--approve", "-m", "ok"]).ok();
        assert_eq!(status(&repo), "APPROVED");
    }
}
