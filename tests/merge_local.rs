//! `git boulder stream merge`: check first (conflicts of every kind change nothing), then rebase
//! and fast-forward, PRD sync, verify, dependency order, strategies, the lock, dirty refusals,
//! and a crash at every step finished by a rerun — all checked with plain git.

use crate::common::*;

const PRD: &str = "# PRD\n\n## Stories\n\n### [ ] US-001: Login\nIn src/auth.\n\n### [ ] US-002: List\nIn src/api.\n\n### [ ] US-003: Docs\nIn docs.\n";

const PLAN: &str = "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  auth:\n    stories: [US-001]\n    paths: [src/auth/**]\n  api:\n    stories: [US-002]\n    paths: [src/api/**]\n    depends_on: [auth]\n  docs:\n    stories: [US-003]\n    paths: [docs/**]\nsettings:\n  base_branch: main\n";

fn setup(plan: &str) -> TestRepo {
    let repo = TestRepo::with_files(&[
        (".agents/tasks/prd.md", PRD),
        (".boulder/streams.yaml", plan),
        ("src/auth/mod.rs", "// auth\n"),
        ("src/api/mod.rs", "// api\n"),
        ("docs/index.md", "# docs\n"),
        ("shared.txt", "one\ntwo\nthree\n"),
    ]);
    // Plans with `verify:` run it only once trusted on this machine.
    repo.boulder(&["trust"]).ok();
    repo.boulder(&["stream", "init"]).ok();
    repo
}

fn clean(repo: &TestRepo, dir: &std::path::Path) {
    let s = repo.git_in(dir, &["status", "--porcelain"]).ok().stdout;
    assert_eq!(s, "", "{} is not clean", dir.display());
}

/// auth did its story: a commit in its worktree and the story marked done there.
fn finish_auth(repo: &TestRepo) {
    let w = repo.worktree("auth");
    commit_in(repo, &w, "src/auth/login.rs", "fn login() {}\n", "feat(auth): login");
    let prd = std::fs::read_to_string(w.join(".agents/tasks/prd.md")).unwrap().replace("[ ] US-001", "[x] US-001");
    commit_in(repo, &w, ".agents/tasks/prd.md", &prd, "US-001 done");
}

#[test]
fn merge_without_base_moving_fast_forwards_and_records() {
    let repo = setup(PLAN);
    repo.boulder(&["hooks", "install"]).ok();
    finish_auth(&repo);
    let tip = rev(&repo, "boulder/auth");
    let r = repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_shown!("fast_forward_merge", r);
    // Nothing to rebase: the commits are kept as they are and main fast-forwards to them.
    assert_eq!(rev(&repo, "main"), tip);
    assert_eq!(rev(&repo, "boulder/auth"), tip);
    assert_eq!(repo.read("src/auth/login.rs"), "fn login() {}\n");
    clean(&repo, &repo.dir);
    clean(&repo, &repo.worktree("auth"));
    let st = repo.stream_state("auth");
    assert_eq!(st["status"], "MERGED");
    assert_eq!(st["merged_commit"], tip);
    // The PRD already said done: no sync commit.
    assert_eq!(repo.git_out(&["log", "--format=%s", "-1", "main"]), "US-001 done");
    repo.assert_fsck();
    // A merged stream whose worktree is kept is nothing doctor complains about.
    repo.boulder(&["doctor"]).ok();
    // Merging again: nothing new, still fine.
    let r = repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_shown!("fast_forward_merge_again", r);
    assert_eq!(rev(&repo, "main"), tip);
}

#[test]
fn merge_after_base_moved_rebases_keeps_authors_and_notes() {
    let repo = setup(PLAN);
    repo.boulder(&["hooks", "install"]).ok();
    finish_auth(&repo);
    let old_commits = repo.git_out(&["rev-list", "main..boulder/auth"]);
    assert_eq!(old_commits.lines().count(), 2);
    let noted = repo.git_out(&["notes", "--ref=boulder", "list"]).lines().count();
    assert_eq!(noted, 2);
    repo.write("README.md", "moved on\n");
    repo.commit_all("main moves on");
    let main_before = rev(&repo, "main");

    let r = repo.boulder_env(
        &repo.dir,
        &["stream", "merge", "auth"],
        &[("GIT_COMMITTER_NAME", "Merger"), ("GIT_COMMITTER_EMAIL", "merger@example.com")],
    );
    let r = r.ok();
    assert_shown!("merge_after_base_moved_rebases_keeps_authors_and_notes", r);
    // Rebased: main's old tip is an ancestor, history is linear, authors kept, committer now.
    repo.git(&["merge-base", "--is-ancestor", &main_before, "main"]).ok();
    assert_eq!(repo.git_out(&["rev-list", "--merges", "--count", "main"]), "0");
    assert_eq!(repo.git_out(&["log", "--format=%an|%cn", "-2", "main"]), "Test Author|Merger\nTest Author|Merger");
    assert_eq!(rev(&repo, "main"), rev(&repo, "boulder/auth"));
    assert!(repo.git_out(&["rev-list", "main"]).lines().all(|c| !old_commits.contains(c)));
    // Notes followed the rewritten commits.
    for c in repo.git_out(&["rev-list", "-2", "main"]).lines() {
        let note = repo.git_out(&["notes", "--ref=boulder", "show", c]);
        assert!(note.contains("\"stream\":\"auth\""), "{note}");
    }
    // Both worktrees hold the result and are clean.
    assert_eq!(repo.read("src/auth/login.rs"), "fn login() {}\n");
    assert_eq!(std::fs::read_to_string(repo.worktree("auth").join("README.md")).unwrap(), "moved on\n");
    clean(&repo, &repo.dir);
    clean(&repo, &repo.worktree("auth"));
    assert!(!repo.dir.join(".git/rebase-merge").exists() && !repo.dir.join(".git/rebase-apply").exists());
    repo.assert_fsck();
}

/// Make base and stream change `shared.txt` (and friends) in conflicting ways, then check that
/// the merge refuses with `kind`, and changes nothing.
fn conflict_case(base: &dyn Fn(&TestRepo), stream: &dyn Fn(&TestRepo, &std::path::Path), kind: &str, path: &str) {
    let repo = setup(PLAN);
    let w = repo.worktree("auth");
    stream(&repo, &w);
    repo.git_in(&w, &["add", "-A"]).ok();
    repo.git_in(&w, &["commit", "-q", "-m", "stream side"]).ok();
    base(&repo);
    repo.git(&["add", "-A"]).ok();
    repo.git(&["commit", "-q", "-m", "base side"]).ok();
    let refs_before = repo.git_out(&["for-each-ref"]);
    let files_before = repo.git_out(&["ls-files", "-s"]);
    let wt_files_before = repo.git_in(&w, &["ls-files", "-s"]).ok().stdout;

    let r = repo.boulder(&["stream", "merge", "auth", "--force"]).code(1);
    assert_shown!(format!("conflict_{kind}"), r);
    let line = r.stdout.lines().find(|l| l.contains(kind)).unwrap_or_else(|| panic!("no {kind} in\n{}", r.stdout));
    assert!(line.contains(path), "{line}");
    let stream_commit = rev(&repo, "boulder/auth");
    assert!(line.contains(&stream_commit[..12]), "{line}");
    // Nothing changed but the refusal recorded in the stream's op-log: refs, index, files, no
    // rebase state, fsck clean.
    assert_eq!(refs_but_auths_log(&repo), refs_but_auths_log_of(&refs_before));
    assert_eq!(repo.git_out(&["log", "-1", "--format=%s", "refs/boulder/streams/auth"]), "boulder: refused");
    assert_eq!(repo.git_out(&["ls-files", "-s"]), files_before);
    assert_eq!(repo.git_in(&w, &["ls-files", "-s"]).ok().stdout, wt_files_before);
    clean(&repo, &repo.dir);
    clean(&repo, &w);
    assert!(!repo.dir.join(".git/rebase-merge").exists());
    assert!(!repo.dir.join(".git/boulder/merge/auth.json").exists());
    repo.assert_fsck();
    // --dry-run shows the same table and also changes nothing (it records no refusal either).
    let refs_refused = repo.git_out(&["for-each-ref"]);
    let d = repo.boulder(&["stream", "merge", "auth", "--force", "--dry-run"]).code(1);
    assert_shown!(format!("conflict_{kind}_dry_run"), d);
    assert!(d.stdout.contains(kind), "{}", d.stdout);
    assert_eq!(repo.git_out(&["for-each-ref"]), refs_refused);
}

fn write(dir: &std::path::Path, file: &str, content: &str) {
    let p = dir.join(file);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

#[test]
fn conflict_both_modified() {
    conflict_case(
        &|r| write(&r.dir, "shared.txt", "one\nBASE\nthree\n"),
        &|_, w| write(w, "shared.txt", "one\nSTREAM\nthree\n"),
        "BOTH_MODIFIED",
        "shared.txt",
    );
}

#[test]
fn conflict_deleted_modified() {
    conflict_case(
        &|r| std::fs::remove_file(r.dir.join("shared.txt")).unwrap(),
        &|_, w| write(w, "shared.txt", "one\nSTREAM\nthree\n"),
        "DELETED_MODIFIED",
        "shared.txt",
    );
}

#[test]
fn conflict_modified_deleted() {
    conflict_case(
        &|r| write(&r.dir, "shared.txt", "one\nBASE\nthree\n"),
        &|_, w| std::fs::remove_file(w.join("shared.txt")).unwrap(),
        "MODIFIED_DELETED",
        "shared.txt",
    );
}

#[test]
fn conflict_added_both() {
    conflict_case(
        &|r| write(&r.dir, "new.txt", "base's\n"),
        &|_, w| write(w, "new.txt", "stream's\n"),
        "ADDED_BOTH",
        "new.txt",
    );
}

#[test]
fn conflict_rename() {
    conflict_case(
        &|r| {
            r.git(&["mv", "shared.txt", "base-name.txt"]).ok();
        },
        &|r, w| {
            r.git_in(w, &["mv", "shared.txt", "stream-name.txt"]).ok();
        },
        "RENAME",
        "",
    );
}

#[test]
fn conflict_type_change() {
    conflict_case(
        &|r| write(&r.dir, "thing", "a file\n"),
        &|_, w| std::os::unix::fs::symlink("shared.txt", w.join("thing")).unwrap(),
        "TYPE_CHANGE",
        "thing",
    );
}

#[test]
fn prd_merges_story_by_story_and_sync_touches_only_marks() {
    let repo = setup(PLAN);
    // The base marks US-003 done and edits another line; the stream marks US-001 done and edits
    // its story's text; the same heading lines change on both sides without a conflict.
    let base_prd = PRD.replace("[ ] US-003", "[x] US-003").replace("# PRD", "# PRD (v2)");
    repo.write(".agents/tasks/prd.md", &base_prd);
    repo.commit_all("docs done");
    let w = repo.worktree("auth");
    let stream_prd = PRD.replace("[ ] US-001", "[x] US-001").replace("In src/auth.", "In src/auth, with tests.");
    commit_in(&repo, &w, "src/auth/login.rs", "fn login() {}\n", "login");
    commit_in(&repo, &w, ".agents/tasks/prd.md", &stream_prd, "US-001 done");
    repo.boulder(&["stream", "merge", "auth"]).ok();
    let merged = repo.read(".agents/tasks/prd.md");
    assert_eq!(
        merged,
        PRD.replace("[ ] US-003", "[x] US-003")
            .replace("# PRD", "# PRD (v2)")
            .replace("[ ] US-001", "[x] US-001")
            .replace("In src/auth.", "In src/auth, with tests.")
    );
    clean(&repo, &repo.dir);

    // Completion recorded with `prd done` (not in the file) is synced by one commit that changes
    // only the status marks, leaving other stories alone.
    let d = repo.worktree("docs");
    repo.git_in(&d, &["merge", "-q", "--ff-only", "main"]).ok();
    commit_in(&repo, &d, "docs/guide.md", "# guide\n", "guide");
    let w2 = repo.worktree("api");
    repo.git_in(&w2, &["merge", "-q", "--ff-only", "main"]).ok();
    commit_in(&repo, &w2, "src/api/list.rs", "fn list() {}\n", "list");
    repo.boulder(&["prd", "done", "US-002"]).ok();
    let before = repo.read(".agents/tasks/prd.md");
    let r = repo.boulder(&["stream", "merge", "api"]).ok();
    assert_shown!("prd_merges_story_by_story_and_sync_touches_only_marks", r);
    assert_eq!(repo.git_out(&["log", "-1", "--format=%s", "main"]), "chore(prd): sync completion from stream api");
    let diff = repo.git_out(&["diff", "main~1", "main", "--stat"]);
    assert!(diff.contains(".agents/tasks/prd.md") && diff.contains("1 file changed"), "{diff}");
    assert_eq!(repo.read(".agents/tasks/prd.md"), before.replace("[ ] US-002", "[x] US-002"));
    clean(&repo, &repo.dir);
    repo.assert_fsck();
}

#[test]
fn dry_run_prints_commits_check_and_prd_diff_and_changes_nothing() {
    let repo = setup(PLAN);
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/login.rs", "fn login() {}\n", "feat(auth): login");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    repo.write("README.md", "x\n");
    repo.commit_all("base moves");
    let refs = repo.git_out(&["for-each-ref"]);
    let objects = repo.git_out(&["count-objects"]);
    let r = repo.boulder(&["stream", "merge", "auth", "--dry-run"]).ok();
    assert_shown!("dry_run_prints_commits_check_and_prd_diff_and_changes_nothing", r);
    assert_eq!(repo.git_out(&["for-each-ref"]), refs);
    assert_eq!(repo.git_out(&["count-objects"]), objects, "a dry run writes no objects");
    clean(&repo, &repo.dir);
}

#[test]
fn refusals_change_nothing() {
    let repo = setup(PLAN);
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/login.rs", "fn login() {}\n", "login");
    let refs = repo.git_out(&["for-each-ref"]);
    // Stories not done.
    let r = repo.boulder(&["stream", "merge", "auth"]).code(1);
    assert_shown!("refused_stories_not_done", r);
    // A dependency not merged.
    let r = repo.boulder(&["stream", "merge", "api", "--force"]).code(1);
    assert_shown!("refused_dependency_not_merged", r);
    // Dirty stream worktree, then dirty base worktree.
    std::fs::write(w.join("src/auth/mod.rs"), "// edited, not committed\n").unwrap();
    let r = repo.boulder(&["stream", "merge", "auth", "--force"]).code(1);
    assert_shown!("refused_dirty_stream_worktree", r);
    repo.git_in(&w, &["checkout", "--", "."]).ok();
    repo.write("shared.txt", "dirty\n");
    let r = repo.boulder(&["stream", "merge", "auth", "--force"]).code(1);
    assert_shown!("refused_dirty_base_worktree", r);
    repo.git(&["checkout", "--", "."]).ok();
    // An untracked file where the merge would write is refused too, before any ref moves.
    repo.write("src/auth/login.rs", "mine\n");
    let r = repo.boulder(&["stream", "merge", "auth", "--force"]).code(1);
    assert_shown!("refused_untracked_file_in_the_way", r);
    assert_eq!(repo.read("src/auth/login.rs"), "mine\n");
    // Only the refusal of auth's dirty worktree was recorded (in its op-log): nothing else moved.
    assert_eq!(refs_but_auths_log(&repo), refs_but_auths_log_of(&refs));
    std::fs::remove_file(repo.dir.join("src/auth/login.rs")).unwrap();
    // Unknown stream and both names and --all are usage errors.
    repo.boulder(&["stream", "merge", "nope"]).code(2);
    repo.boulder(&["stream", "merge", "auth", "--all"]).code(2);
    repo.boulder(&["stream", "merge"]).code(2);
    // --force merges an incomplete stream.
    repo.boulder(&["stream", "merge", "auth", "--force"]).ok();
    assert_eq!(rev(&repo, "main"), rev(&repo, "boulder/auth"));
}

#[test]
fn verify_failing_keeps_base_and_passing_merges() {
    let plan = PLAN.replace("  base_branch: main\n", "  base_branch: main\n  verify: 'test -f ok'\n");
    let repo = setup(&plan);
    finish_auth(&repo);
    repo.write("README.md", "x\n");
    repo.commit_all("base moves");
    let main_before = rev(&repo, "main");
    let r = repo.boulder(&["stream", "merge", "auth"]).code(1);
    assert_shown!("verify_failing_keeps_base_and_passing_merges", r);
    assert_eq!(rev(&repo, "main"), main_before, "the base must not move");
    // The stream branch holds the rebased result, and its worktree matches it.
    repo.git(&["merge-base", "--is-ancestor", &main_before, "boulder/auth"]).ok();
    clean(&repo, &repo.worktree("auth"));
    repo.assert_fsck();
    assert_ne!(repo.stream_state("auth")["status"], "MERGED");
    // Make verify pass (an ignored file in the stream worktree) and rerun.
    std::fs::write(repo.dir.join(".git/info/exclude"), "/.boulder/worktrees/\nok\n").unwrap();
    std::fs::write(repo.worktree("auth").join("ok"), "").unwrap();
    repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_eq!(rev(&repo, "main"), rev(&repo, "boulder/auth"));
    assert_eq!(repo.stream_state("auth")["status"], "MERGED");
}

#[test]
fn all_merges_in_dependency_order_and_stops_at_the_first_failure() {
    let repo = setup(PLAN);
    finish_auth(&repo);
    let a = repo.worktree("api");
    commit_in(&repo, &a, "src/api/list.rs", "fn list() {}\n", "list");
    repo.boulder(&["prd", "done", "US-002"]).ok();
    // docs is not complete: skipped, not a failure.
    let r = repo.boulder(&["stream", "merge", "--all"]).ok();
    let auth_at = r.stdout.find("auth: merged").expect("auth merged");
    let api_at = r.stdout.find("api: merged").expect("api merged");
    assert!(auth_at < api_at, "{}", r.stdout);
    assert_shown!("merge_all_in_dependency_order", r);
    assert_eq!(repo.stream_state("api")["status"], "MERGED");
    assert_eq!(repo.read("src/api/list.rs"), "fn list() {}\n");

    // A conflicting stream stops --all and says what was merged before.
    let d = repo.worktree("docs");
    commit_in(&repo, &d, "shared.txt", "docs' version\n", "docs edits shared");
    repo.write("shared.txt", "base's version\n");
    repo.commit_all("base edits shared");
    repo.boulder(&["prd", "done", "US-003"]).ok();
    let r = repo.boulder(&["stream", "merge", "--all"]).code(1);
    assert_shown!("merge_all_stops_at_a_conflict", r);
}

#[test]
fn merge_strategy_makes_one_merge_commit() {
    let repo = setup(PLAN);
    finish_auth(&repo);
    let stream_tip = rev(&repo, "boulder/auth");
    repo.write("README.md", "x\n");
    repo.commit_all("base moves");
    let base_tip = rev(&repo, "main");
    repo.boulder(&["stream", "merge", "auth", "--strategy", "merge"]).ok();
    let parents = repo.git_out(&["log", "-1", "--format=%P", "main"]);
    assert_eq!(parents, format!("{base_tip} {stream_tip}"));
    assert!(repo.git_out(&["log", "-1", "--format=%s", "main"]).contains("Merge stream auth"));
    assert_eq!(rev(&repo, "main"), rev(&repo, "boulder/auth"));
    assert_eq!(repo.read("src/auth/login.rs"), "fn login() {}\n");
    clean(&repo, &repo.dir);
    clean(&repo, &repo.worktree("auth"));
    assert_eq!(repo.stream_state("auth")["merge_strategy"], "merge");
    repo.assert_fsck();
}

#[test]
fn squash_strategy_makes_one_commit_with_story_ids() {
    let plan = PLAN.replace("    paths: [src/auth/**]\n", "    paths: [src/auth/**]\n    merge_strategy: squash\n");
    let repo = setup(&plan);
    finish_auth(&repo);
    repo.write("README.md", "x\n");
    repo.commit_all("base moves");
    let base_tip = rev(&repo, "main");
    repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_eq!(repo.git_out(&["rev-list", "--count", &format!("{base_tip}..main")]), "1");
    let msg = repo.git_out(&["log", "-1", "--format=%B", "main"]);
    assert!(msg.contains("US-001") && msg.contains("feat(auth): login"), "{msg}");
    assert_eq!(repo.read("src/auth/login.rs"), "fn login() {}\n");
    // The stream branch keeps its (rebased) commits, and counts as merged for cleanup.
    assert_eq!(repo.git_out(&["rev-list", "--count", &format!("{base_tip}..boulder/auth")]), "2");
    assert_eq!(repo.stream_state("auth")["merge_strategy"], "squash");
    let r = repo.boulder(&["stream", "cleanup", "--merged", "--delete-branch"]).ok();
    assert_shown!("squash_strategy_makes_one_commit_with_story_ids", r);
    repo.assert_fsck();
}

#[test]
fn a_held_merge_lock_refuses_naming_the_holder() {
    let repo = setup(PLAN);
    finish_auth(&repo);
    std::fs::create_dir_all(repo.dir.join(".git/boulder/locks")).unwrap();
    let lock = repo.dir.join(".git/boulder/locks/merge.lock");
    let ready = repo.dir.join(".git/held");
    let script = format!(
        "import fcntl, os, time\nf = open({lock:?}, 'a+')\nfcntl.flock(f, fcntl.LOCK_EX)\nf.truncate(0); f.write('{{\"pid\": 4242, \"host\": \"elsewhere\", \"since\": \"2026-01-01T00:00:00Z\", \"command\": \"git boulder stream merge api\"}}\\n'); f.flush()\nopen({ready:?}, 'w').close()\ntime.sleep(3)\n",
    );
    let mut holder = std::process::Command::new("python3").arg("-c").arg(script).spawn().unwrap();
    wait_for("the lock holder", || ready.exists());
    let r = repo.boulder(&["stream", "merge", "auth"]).code(1);
    assert_shown!("merge_lock_held", r);
    assert_ne!(rev(&repo, "main"), rev(&repo, "boulder/auth"));
    // --wait blocks until the holder lets go, then merges.
    let r = repo.boulder(&["stream", "merge", "auth", "--wait"]).ok();
    assert_shown!("merge_lock_waited_for", r);
    holder.wait().unwrap();
}

/// Every step of a merge, aborted there, leaves a consistent repository, and a rerun finishes.
#[test]
fn a_crash_at_every_step_is_finished_by_a_rerun() {
    let steps = [
        "merge-objects",
        "merge-notes",
        "merge-journal",
        "merge-stream-ref",
        "merge-stream-worktree",
        "merge-verify",
        "merge-base-ref",
        "merge-base-worktree",
        "merge-prd-commit",
        "merge-prd-ref",
        "merge-prd-worktree",
        "merge-record",
    ];
    let plan = PLAN.replace("  base_branch: main\n", "  base_branch: main\n  verify: 'true'\n");
    for step in steps {
        let repo = setup(&plan);
        repo.boulder(&["hooks", "install"]).ok();
        let w = repo.worktree("auth");
        commit_in(&repo, &w, "src/auth/login.rs", "fn login() {}\n", "login");
        commit_in(&repo, &w, "src/auth/logout.rs", "fn logout() {}\n", "logout");
        repo.boulder(&["prd", "done", "US-001"]).ok();
        repo.write("README.md", "moved\n");
        repo.commit_all("base moves");
        let base_old = rev(&repo, "main");
        let r = repo.boulder_env(&repo.dir, &["stream", "merge", "auth"], &[("BOULDER_FAILPOINT", step)]);
        assert_ne!(r.code, 0, "{step}: the failpoint did not fire\n{}", r.stderr);
        assert!(r.stderr.contains(&format!("failpoint {step}")), "{step}: {}", r.stderr);
        // Consistent: fsck clean, the base either where it was or fast-forwarded past it.
        repo.assert_fsck();
        let base_now = rev(&repo, "main");
        if base_now != base_old {
            repo.git(&["merge-base", "--is-ancestor", &base_old, "main"]).ok();
        }
        // Between steps every worktree is clean; only right after a branch moved (before its
        // worktree is brought along) does git status show the pending update.
        if !["merge-stream-ref", "merge-base-ref", "merge-prd-ref"].contains(&step) {
            clean(&repo, &repo.dir);
            clean(&repo, &w);
        }
        // doctor says an interrupted merge is waiting, and how to finish it; a dry run refuses.
        let status = repo.boulder(&["doctor"]);
        if step != "merge-objects" && step != "merge-notes" {
            assert!(status.stdout.contains("interrupted merge"), "{step}: {}", status.stdout);
            let d = repo.boulder(&["stream", "merge", "auth", "--dry-run"]).code(1);
            assert!(d.stderr.contains("pending"), "{step}: {}", d.stderr);
        }
        // The rerun finishes the job.
        let r = repo.boulder(&["stream", "merge", "auth"]);
        assert_eq!(r.code, 0, "{step}: rerun failed\n{}\n{}", r.stdout, r.stderr);
        assert_eq!(rev(&repo, "main~1"), rev(&repo, "boulder/auth"), "{step}");
        assert_eq!(
            repo.git_out(&["log", "-1", "--format=%s", "main"]),
            "chore(prd): sync completion from stream auth",
            "{step}"
        );
        assert!(repo.read(".agents/tasks/prd.md").contains("[x] US-001"), "{step}");
        assert_eq!(repo.git_out(&["rev-list", "--count", &format!("{base_old}..main")]), "3", "{step}");
        assert_eq!(repo.read("src/auth/logout.rs"), "fn logout() {}\n", "{step}");
        clean(&repo, &repo.dir);
        clean(&repo, &w);
        assert_eq!(repo.stream_state("auth")["status"], "MERGED", "{step}");
        assert!(!repo.dir.join(".git/boulder/merge/auth.json").exists(), "{step}");
        for c in repo.git_out(&["rev-list", "-2", "main~1"]).lines() {
            repo.git(&["notes", "--ref=boulder", "show", c]).ok();
        }
        repo.assert_fsck();
    }
}

#[test]
fn auto_merge_merges_a_stream_its_run_completes() {
    let plan = PLAN.replace("  base_branch: main\n", "  base_branch: main\n  auto_merge: true\n");
    let repo = setup(&plan);
    repo.write("README.md", "base moves\n");
    repo.commit_all("base moves");
    // A scripted agent: does the work, marks its story done in its PRD, commits.
    let agent = "echo 'fn login() {}' > src/auth/login.rs && sed -i 's/\\[ \\] US-001/[x] US-001/' .agents/tasks/prd.md && git add -A && git commit -q -m \"$BOULDER_STORY done\"";
    let r = repo.boulder(&["stream", "run", "auth", "--max-iterations", "3", "--", "sh", "-c", agent]).ok();
    assert_shown!("auto_merge_merges_a_stream_its_run_completes", r);
    assert_eq!(repo.read("src/auth/login.rs"), "fn login() {}\n");
    assert_eq!(repo.git_out(&["log", "-1", "--format=%s", "main"]), "US-001 done");
    assert_eq!(repo.stream_state("auth")["status"], "MERGED");
    clean(&repo, &repo.dir);
}

/// A merge stopped after the base moved, whose rerun meets the base worktree's `index.lock` held
/// by someone else: refused, and the record of the merge kept (the base has moved; only it can
/// bring the worktree along); once the lock is gone, the rerun finishes.
#[test]
fn a_lock_met_by_the_rerun_of_a_merge_under_way_keeps_its_record() {
    let repo = setup(PLAN);
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/login.rs", "fn login() {}\n", "login");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    let r = repo.boulder_env(&repo.dir, &["stream", "merge", "auth"], &[("BOULDER_FAILPOINT", "merge-base-ref")]);
    assert_shown!("merge_killed_at_base_ref", r);
    // Someone else's git holds the index (no record of ours names it).
    let lock = repo.dir.join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    let r = repo.boulder(&["stream", "merge", "auth"]).code(1);
    assert_shown!("rerun_meets_an_index_lock", r);
    assert!(repo.dir.join(".git/boulder/merge/auth.json").exists(), "the record was dropped: {}", r.stderr);
    std::fs::remove_file(&lock).unwrap();
    let r = repo.boulder(&["stream", "merge", "auth"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    clean(&repo, &repo.dir);
    assert_eq!(repo.read("src/auth/login.rs"), "fn login() {}\n");
}

/// A branch's own `<ref>.lock` left by a killed writer is named, with git's advice, not an
/// internal failure.
#[test]
fn a_ref_lock_left_behind_is_named_with_gits_advice() {
    let repo = setup(PLAN);
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/login.rs", "fn login() {}\n", "login");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    let lock = repo.dir.join(".git/refs/heads/main.lock");
    let f = std::fs::File::create(&lock).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60)).unwrap();
    drop(f);
    let r = repo.boulder(&["stream", "merge", "auth"]).code(1);
    assert!(r.stderr.contains(&format!("remove {}", lock.display())), "{}", r.stderr);
    let d = repo.boulder(&["doctor"]).code(1);
    assert!(d.stdout.contains("main.lock"), "{}", d.stdout);
    std::fs::remove_file(&lock).unwrap();
    repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_eq!(repo.stream_state("auth")["status"], "MERGED");
}

/// `git for-each-ref` without the op-log of stream auth, where a refused merge records itself.
fn refs_but_auths_log(repo: &TestRepo) -> String {
    refs_but_auths_log_of(&repo.git_out(&["for-each-ref"]))
}

fn refs_but_auths_log_of(refs: &str) -> String {
    refs.lines().filter(|l| !l.ends_with("\trefs/boulder/streams/auth")).collect::<Vec<_>>().join("\n")
}

/// The record of an interrupted merge is written as it always was (ids as hex, the strategy by
/// name, `null` for no PRD sync); one naming a strategy this version does not know is refused
/// as invalid (exit 2, naming the file and the fix), never finished as a rebase; put right, the
/// rerun finishes from it.
#[test]
fn the_record_of_an_interrupted_merge_keeps_its_format_and_an_unknown_strategy_is_refused() {
    let repo = setup(PLAN);
    finish_auth(&repo);
    let (tip, main) = (rev(&repo, "boulder/auth"), rev(&repo, "main"));
    let r = repo.boulder_env(&repo.dir, &["stream", "merge", "auth"], &[("BOULDER_FAILPOINT", "merge-journal")]);
    assert!(r.stderr.contains("failpoint merge-journal"), "{}", r.stderr);
    let record = repo.dir.join(".git/boulder/merge/auth.json");
    let written = std::fs::read_to_string(&record).unwrap();
    let expected = format!(
        "{{\n  \"stream\": \"auth\",\n  \"stream_branch\": \"boulder/auth\",\n  \"base_branch\": \"main\",\n  \"strategy\": \"rebase\",\n  \"stream_old\": \"{tip}\",\n  \"stream_new\": \"{tip}\",\n  \"base_old\": \"{main}\",\n  \"base_new\": \"{tip}\",\n  \"commits\": 2,\n  \"prd_from\": null,\n  \"prd_to\": null,\n  \"stage\": \"planned\"\n}}"
    );
    assert_eq!(written, expected);

    std::fs::write(&record, written.replace("\"rebase\"", "\"octopus\"")).unwrap();
    assert_shown!("merge_record_unknown_strategy", repo.boulder(&["stream", "merge", "auth"]).code(2));
    assert_eq!(rev(&repo, "main"), main, "nothing moved");
    assert!(record.exists(), "the record is kept for a person to look at");

    std::fs::write(&record, &written).unwrap();
    let r = repo.boulder(&["stream", "merge", "auth"]).ok();
    assert!(r.stderr.contains("finishing the interrupted merge of stream auth"), "{}", r.stderr);
    assert_eq!(rev(&repo, "main"), tip);
    assert!(!record.exists());
    assert_eq!(repo.stream_state("auth")["status"], "MERGED");
}
