//! `stream rollback` (and `--restore`) and `stream unmerge`, locally and through the merge queue
//! on a remote served by `git daemon`. Checked with plain git; nothing may be deleted.

use crate::common::*;
use crate::merge_remote::{finish, Served, PLAN, PRD};

fn setup() -> TestRepo {
    let repo = TestRepo::with_files(&[
        (".agents/tasks/prd.md", PRD),
        (".boulder/streams.yaml", PLAN),
        ("src/auth/mod.rs", "// auth\n"),
        ("src/api/mod.rs", "// api\n"),
        ("README.md", "# sample\n"),
    ]);
    repo.boulder(&["stream", "init"]).ok();
    repo
}

fn ops(repo: &TestRepo, name: &str) -> Vec<String> {
    repo.git_out(&["log", "--format=%s", &format!("refs/boulder/streams/{name}")]).lines().map(String::from).collect()
}

fn kinds(repo: &TestRepo, name: &str) -> Vec<String> {
    let tips = repo.git_out(&["rev-list", &format!("refs/boulder/streams/{name}")]);
    tips.lines()
        .filter_map(|c| {
            let op: serde_json::Value = serde_json::from_str(&repo.git_out(&["show", &format!("{c}:op.json")])).ok()?;
            Some(op["kind"].as_str()?.to_string())
        })
        .collect()
}

#[test]
fn rollback_goes_to_the_fork_point_keeps_a_backup_and_restore_brings_it_back() {
    let repo = setup();
    let w = repo.worktree("auth");
    let fork = rev(&repo, "boulder/auth");
    commit_in(&repo, &w, "src/auth/a.rs", "a\n", "one");
    commit_in(&repo, &w, "src/auth/b.rs", "b\n", "two");
    let tip = rev(&repo, "boulder/auth");
    repo.write("README.md", "main moves\n");
    repo.commit_all("main moves");

    // --to must be in the branch's history.
    let r = repo.boulder(&["stream", "rollback", "auth", "--to", "main"]).code(1);
    assert_shown!("rollback_to_a_commit_not_in_the_history", r);
    // A dirty worktree is refused, and nothing moves.
    std::fs::write(w.join("src/auth/a.rs"), "edited\n").unwrap();
    let r = repo.boulder(&["stream", "rollback", "auth"]).code(1);
    assert_shown!("rollback_over_uncommitted_changes", r);
    assert_eq!(rev(&repo, "boulder/auth"), tip);
    repo.git_in(&w, &["checkout", "--", "src/auth/a.rs"]).ok();

    let r = repo.boulder(&["stream", "rollback", "auth", "--to", "boulder/auth~1"]).ok();
    assert_shown!("rollback_to_a_commit", r);
    assert_eq!(rev(&repo, "boulder/auth"), rev(&repo, &format!("{tip}~1")));
    assert_eq!(rev(&repo, "refs/boulder/backup/auth/1"), tip);
    assert!(!w.join("src/auth/b.rs").exists());
    assert_eq!(repo.git_in(&w, &["status", "--porcelain"]).ok().stdout, "");

    // No --to: back to the fork point with the base.
    repo.boulder(&["stream", "rollback", "auth"]).ok();
    assert_eq!(rev(&repo, "boulder/auth"), fork);
    assert!(!w.join("src/auth/a.rs").exists());
    assert_eq!(rev(&repo, "refs/boulder/backup/auth/2"), rev(&repo, &format!("{tip}~1")));
    let again = repo.boulder(&["stream", "rollback", "auth"]).ok();
    assert_shown!("rollback_again", again);

    // --restore brings the latest backup back (the tip it replaces is in its history: no new backup).
    repo.boulder(&["stream", "rollback", "auth", "--restore"]).ok();
    assert_eq!(rev(&repo, "boulder/auth"), rev(&repo, &format!("{tip}~1")));
    assert_eq!(repo.refs("refs/boulder/backup/").len(), 2);
    assert_eq!(std::fs::read_to_string(w.join("src/auth/a.rs")).unwrap(), "a\n");
    // Recorded, with the backup; the state says what the last one did.
    let k = kinds(&repo, "auth");
    assert_eq!(k.iter().filter(|k| *k == "rolled_back").count(), 3, "{k:?}");
    let st = repo.stream_state("auth");
    assert_eq!(st["last_rollback"]["restored"], true, "{st}");
    assert_eq!(st["last_rollback"]["to"], rev(&repo, &format!("{tip}~1")));
    // Every op of the log reads back (doctor validates each chain, op by op).
    let d = repo.boulder(&["doctor"]);
    assert!(!d.stdout.contains("fails validation"), "{}", d.stdout);
    assert!(!ops(&repo, "auth").is_empty());
    repo.assert_fsck();
}

#[test]
fn unmerge_reverts_the_base_reopens_the_stories_and_the_stream_can_merge_again() {
    let repo = setup();
    finish(&repo, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    repo.boulder(&["stream", "merge", "auth"]).ok();
    assert!(repo.read(".agents/tasks/prd.md").contains("[x] US-001"));
    // Something else lands after it.
    repo.write("README.md", "later\n");
    repo.commit_all("later work");
    let before = rev(&repo, "main");
    let merged_tip = rev(&repo, "boulder/auth");

    let r = repo.boulder(&["stream", "unmerge", "auth"]).ok();
    assert_shown!("unmerge_and_rebuild", r);
    // Two commits on the base: the revert, then the PRD reopening — nothing rewritten.
    assert_eq!(rev(&repo, "main~2"), before);
    let subjects = repo.git_out(&["log", "-2", "--format=%s", "main"]);
    assert_eq!(subjects, "chore(prd): reopen the stories of stream auth\nRevert stream auth (branch boulder/auth)");
    assert!(!repo.dir.join("src/auth/login.rs").exists());
    assert_eq!(repo.read("README.md"), "later\n");
    let prd = repo.read(".agents/tasks/prd.md");
    assert!(prd.contains("### [ ] US-001"), "{prd}");
    assert_eq!(repo.git_out(&["diff", "main~1", "main", "--stat"]).lines().count(), 2, "status marks only");
    assert_eq!(repo.git_out(&["status", "--porcelain"]), "");
    // The stream is COMPLETED again; its old tip is kept; its branch holds its work on the new base.
    let st = repo.stream_state("auth");
    assert_eq!(st["status"], "COMPLETED", "{st}");
    assert!(st["merged_commit"].is_null(), "{st}");
    assert_eq!(rev(&repo, "refs/boulder/backup/auth/1"), merged_tip);
    assert_eq!(rev(&repo, "boulder/auth~1"), rev(&repo, "main"));
    // The replayed commit carries its original's activity note, as a rebase's does.
    let original = repo.git_out(&["notes", "--ref=boulder", "show", &merged_tip]);
    assert_eq!(repo.git_out(&["notes", "--ref=boulder", "show", "boulder/auth"]), original);
    assert_eq!(std::fs::read_to_string(repo.worktree("auth").join("src/auth/login.rs")).unwrap(), "fn login() {}\n");
    assert!(kinds(&repo, "auth").contains(&"unmerged".to_string()));
    let d = repo.boulder(&["doctor"]);
    assert!(!d.stdout.contains("fails validation"), "{}", d.stdout);
    // A story reopened since: status does not call it ready to merge (merge refuses it).
    repo.boulder(&["prd", "undone", "US-001"]).ok();
    let shown = repo.boulder(&["status"]).ok().stderr;
    assert!(!shown.contains("ready to merge"), "{shown}");
    assert!(shown.contains("auth: recorded complete, but 1 of its 1 stories are open"), "{shown}");
    repo.boulder(&["stream", "merge", "auth"]).code(1);
    // Not merged any more: unmerge again is refused; merge again lands it anew.
    let again = repo.boulder(&["stream", "unmerge", "auth"]).code(1);
    assert_shown!("unmerge_twice", again);
    repo.boulder(&["prd", "done", "US-001"]).ok();
    repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_eq!(repo.read("src/auth/login.rs"), "fn login() {}\n");
    assert!(repo.read(".agents/tasks/prd.md").contains("[x] US-001"));
    assert_eq!(repo.stream_state("auth")["status"], "MERGED");
    repo.assert_fsck();
}

#[test]
fn unmerge_refuses_a_revert_that_conflicts_with_later_work() {
    let repo = setup();
    finish(&repo, "auth", "US-001", "README.md", "# auth's readme\n");
    repo.boulder(&["stream", "merge", "auth"]).ok();
    repo.write("README.md", "# rewritten after\n");
    repo.commit_all("later rewrite");
    let before = rev(&repo, "main");
    let r = repo.boulder(&["stream", "unmerge", "auth"]).code(1);
    assert_shown!("unmerge_refuses_a_revert_that_conflicts_with_later_work", r);
    assert_eq!(rev(&repo, "main"), before);
    assert_eq!(repo.stream_state("auth")["status"], "MERGED");
}

#[test]
fn unmerge_through_the_remote_changes_the_remotes_base_and_state() {
    let s = Served::new(PLAN);
    let a = s.machine("alpha");
    let b = s.machine("beta");
    finish(&a, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    // beta lands api meanwhile; alpha's idea of the remote is stale when it unmerges.
    finish(&b, "api", "US-002", "src/api/list.rs", "fn list() {}\n");
    b.boulder(&["stream", "merge", "api", "--remote", "origin"]).ok();
    let landed = s.git(&a, &["rev-parse", "main"]);

    let r = a.boulder(&["stream", "unmerge", "auth", "--remote", "origin"]).ok();
    assert_shown!("unmerge_through_the_remote_changes_the_remotes_base_and_state", r);
    assert_eq!(s.git(&a, &["rev-parse", "main~2"]), landed);
    let tree = s.git(&a, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(!tree.contains("src/auth/login.rs") && tree.contains("src/api/list.rs"), "{tree}");
    let prd = s.git(&a, &["show", "main:.agents/tasks/prd.md"]);
    assert!(prd.contains("### [ ] US-001") && prd.contains("### [x] US-002"), "{prd}");
    assert_eq!(s.stream_state(&a, "auth")["status"], "COMPLETED");
    assert_eq!(s.stream_state(&a, "api")["status"], "MERGED");
    // The local base followed the remote.
    assert_eq!(rev(&a, "main"), s.git(&a, &["rev-parse", "main"]));
    assert!(!a.dir.join("src/auth/login.rs").exists());
    // beta sees it after a sync.
    b.boulder(&["sync"]).ok();
    assert_eq!(b.stream_state("auth")["status"], "COMPLETED");
    s.fsck(&a);
    a.assert_fsck();
}

#[test]
fn unmerge_takes_out_a_merge_commit_or_a_squash_and_they_merge_again() {
    for strategy in ["merge", "squash"] {
        let repo = setup();
        let w = repo.worktree("auth");
        commit_in(&repo, &w, "src/auth/a.rs", "a\n", "one");
        commit_in(&repo, &w, "src/auth/b.rs", "b\n", "two");
        repo.boulder(&["prd", "done", "US-001"]).ok();
        repo.write("README.md", "main moves\n");
        repo.commit_all("main moves");
        repo.boulder(&["stream", "merge", "auth", "--strategy", strategy]).ok();
        let merged = rev(&repo, "main");
        repo.boulder(&["stream", "unmerge", "auth"]).ok();
        assert_eq!(rev(&repo, "main~2"), merged, "{strategy}");
        for f in ["src/auth/a.rs", "src/auth/b.rs"] {
            assert!(!repo.dir.join(f).exists(), "{strategy}: {f}");
        }
        assert_eq!(repo.read("README.md"), "main moves\n", "{strategy}");
        assert!(repo.read(".agents/tasks/prd.md").contains("### [ ] US-001"), "{strategy}");
        // The two commits, replayed on the new base.
        assert_eq!(repo.git_out(&["rev-list", "--count", "main..boulder/auth"]), "2", "{strategy}");
        repo.boulder(&["stream", "merge", "auth", "--strategy", strategy]).ok();
        assert_eq!(repo.read("src/auth/b.rs"), "b\n", "{strategy}");
        assert_eq!(repo.stream_state("auth")["status"], "MERGED", "{strategy}");
        repo.assert_fsck();
    }
}

#[test]
fn an_unmerge_killed_at_any_step_is_finished_by_a_rerun() {
    for step in ["unmerge-push", "unmerge-base-ref", "unmerge-stream-ref"] {
        let s = Served::new(PLAN);
        let a = s.machine("alpha");
        finish(&a, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
        a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
        let landed = s.git(&a, &["rev-parse", "main"]);
        let r =
            a.boulder_env(&a.dir, &["stream", "unmerge", "auth", "--remote", "origin"], &[("BOULDER_FAILPOINT", step)]);
        assert!(r.stderr.contains(&format!("failpoint {step}")), "{step}: {}", r.stderr);
        a.assert_fsck();
        let r = a.boulder(&["stream", "unmerge", "auth", "--remote", "origin"]);
        assert_eq!(r.code, 0, "{step}: rerun failed\n{}\n{}", r.stdout, r.stderr);
        // One revert, one reopening, nothing twice.
        assert_eq!(s.git(&a, &["rev-parse", "main~2"]), landed, "{step}");
        let subjects = s.subjects(&a);
        assert_eq!(subjects.iter().filter(|x| x.starts_with("Revert stream auth")).count(), 1, "{step}: {subjects:?}");
        assert_eq!(rev(&a, "main"), s.git(&a, &["rev-parse", "main"]), "{step}");
        assert!(!a.dir.join("src/auth/login.rs").exists(), "{step}");
        assert_eq!(a.git_in(&a.worktree("auth"), &["status", "--porcelain"]).ok().stdout, "", "{step}");
        assert_eq!(a.git_in(&a.dir, &["status", "--porcelain"]).ok().stdout, "", "{step}");
        assert_eq!(rev(&a, "boulder/auth~1"), rev(&a, "main"), "{step}");
        assert_eq!(s.stream_state(&a, "auth")["status"], "COMPLETED", "{step}");
        a.assert_fsck();
    }
}

#[test]
fn a_rollback_killed_between_branch_and_worktree_is_finished_by_a_rerun() {
    for step in ["rollback-backup", "rollback-ref", "checkout-recorded", "rollback-moved"] {
        let repo = setup();
        let w = repo.worktree("auth");
        let fork = rev(&repo, "boulder/auth");
        commit_in(&repo, &w, "src/auth/a.rs", "a\n", "one");
        let tip = rev(&repo, "boulder/auth");
        let r = repo.boulder_env(&repo.dir, &["stream", "rollback", "auth"], &[("BOULDER_FAILPOINT", step)]);
        assert!(r.stderr.contains(&format!("failpoint {step}")), "{step}: {}", r.stderr);
        assert_eq!(rev(&repo, "refs/boulder/backup/auth/1"), tip, "{step}: the old tip is kept first");
        let r = repo.boulder(&["stream", "rollback", "auth"]);
        assert_eq!(r.code, 0, "{step}: {}", r.stderr);
        assert_eq!(rev(&repo, "boulder/auth"), fork, "{step}");
        assert!(!w.join("src/auth/a.rs").exists(), "{step}");
        assert_eq!(repo.git_in(&w, &["status", "--porcelain"]).ok().stdout, "", "{step}");
        assert_eq!(repo.refs("refs/boulder/backup/").len(), 1, "{step}");
        // Recorded once, as an uninterrupted rollback is.
        let rolled = kinds(&repo, "auth").iter().filter(|k| *k == "rolled_back").count();
        assert_eq!(rolled, 1, "{step}");
        assert_eq!(repo.stream_state("auth")["last_rollback"]["to"], fork.as_str(), "{step}");
        repo.assert_fsck();
    }
}

#[test]
fn rollback_and_unmerge_say_what_they_did() {
    let repo = setup();
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/a.rs", "a\n", "one");
    repo.write("README.md", "main moves\n");
    repo.commit_all("main moves");
    assert_shown!("rollback", repo.boulder(&["stream", "rollback", "auth"]));
    assert_shown!("rollback_restore", repo.boulder(&["stream", "rollback", "auth", "--restore"]));
    assert_shown!("rollback_not_back", repo.boulder(&["stream", "rollback", "auth", "--to", "main"]));
    repo.boulder(&["prd", "done", "US-001"]).ok();
    repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_shown!("unmerge", repo.boulder(&["stream", "unmerge", "auth"]));
    assert_shown!("unmerge_not_merged", repo.boulder(&["stream", "unmerge", "auth"]));
}

#[test]
fn a_rollback_run_again_records_nothing_more() {
    let repo = setup();
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/a.rs", "a\n", "one");
    repo.boulder(&["stream", "rollback", "auth"]).ok();
    let r = repo.boulder(&["stream", "rollback", "auth"]).ok();
    assert_shown!("a_rollback_run_again_records_nothing_more", r);
    assert_eq!(kinds(&repo, "auth").iter().filter(|k| *k == "rolled_back").count(), 1);
}

#[test]
fn unmerge_reopens_only_the_stories_the_merge_ticked() {
    // US-003 is the stream's too, but was done in the base's PRD before the stream began.
    let prd = PRD.replace("### [ ] US-002", "### [x] US-003: Done before\nx\n\n### [ ] US-002");
    let plan = PLAN.replace("stories: [US-001]", "stories: [US-001, US-003]");
    let repo = TestRepo::with_files(&[
        (".agents/tasks/prd.md", &prd),
        (".boulder/streams.yaml", &plan),
        ("src/auth/mod.rs", "x\n"),
    ]);
    repo.boulder(&["stream", "init"]).ok();
    finish(&repo, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    repo.boulder(&["stream", "merge", "auth"]).ok();
    repo.boulder(&["stream", "unmerge", "auth"]).ok();
    let text = repo.read(".agents/tasks/prd.md");
    assert!(text.contains("### [ ] US-001") && text.contains("### [x] US-003"), "{text}");
    // Ready to merge again, as the status says.
    repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_eq!(repo.stream_state("auth")["status"], "MERGED");
}
