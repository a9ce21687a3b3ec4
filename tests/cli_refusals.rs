//! Every refusal a user can reach from the command line, as a snapshot of its exit code (1
//! refused, 2 usage or configuration), its error and its hint, grouped by command, README and
//! DESIGN commands first. Each is run through the real binary on the test's fixed clock.

use crate::common::*;

/// The sample repository with a fixed actor id (the id is random otherwise).
fn actor_repo() -> TestRepo {
    let repo = sample();
    repo.git(&["config", "boulder.actor", "alice"]).ok();
    repo
}

/// [`actor_repo`] with every stream initialized.
fn initialized() -> TestRepo {
    let repo = actor_repo();
    repo.boulder(&["stream", "init"]).ok();
    repo
}

/// A bare repository holding the sample PRD and plan.
fn sample_remote() -> Remote {
    Remote::new(&[
        (".agents/tasks/prd.md", SAMPLE_PRD),
        (".boulder/streams.yaml", SAMPLE_PLAN),
        ("src/auth/mod.rs", "// auth\n"),
    ])
}

#[test]
fn finding_the_repository_plan_and_prd() {
    let empty = TestRepo::with_files(&[("README.md", "# nothing planned\n")]);
    assert_shown!("no_plan", empty.boulder(&["status"]));
    let nowhere = tempfile::tempdir().unwrap();
    assert_shown!("no_repository", empty.boulder_in(nowhere.path(), &["status"]));

    let repo = actor_repo();
    repo.write(".boulder/streams.yaml", "version: 1\nstreams:\n  auth: [\n");
    assert_shown!("plan_does_not_parse", repo.boulder(&["status"]));
    std::fs::write(repo.dir.join(".boulder/streams.yaml"), b"version: 1\n\xff\xfe\n").unwrap();
    assert_shown!("plan_not_utf8", repo.boulder(&["status"]));
    repo.write(".boulder/streams.yaml", &SAMPLE_PLAN.replace(".agents/tasks/prd.md", "docs/missing.md"));
    assert_shown!("prd_missing", repo.boulder(&["prd", "show"]));
    repo.write(".boulder/streams.yaml", SAMPLE_PLAN);
    assert_shown!("no_such_stream", repo.boulder(&["stream", "init", "ghost"]));
    assert_shown!("unknown_shell", repo.boulder(&["completions", "tcsh"]));
}

#[test]
fn stream_validate_suggest_and_add() {
    let repo = actor_repo();
    assert_shown!("suggest_write_over_a_plan", repo.boulder(&["stream", "suggest", "--write"]));
    assert_shown!("add_existing_stream", repo.boulder(&["stream", "add", "auth", "--path", "src/auth2/**"]));
    assert_shown!("add_invalid_name", repo.boulder(&["stream", "add", "../up", "--path", "x/**"]));
    repo.write(".boulder/streams.yaml", "version: 1\nstreams: {auth: {paths: [src/auth/**]}}\n");
    assert_shown!("add_to_flow_style", repo.boulder(&["stream", "add", "fix", "--path", "scripts/**"]));
    repo.write(".boulder/streams.yaml", "version: 1\nstreams: {}\nsettings:\n  base_branch: main\n");
    assert_shown!("init_without_streams", repo.boulder(&["stream", "init"]));
    repo.write(
        ".boulder/streams.yaml",
        "version: 1\nstreams:\n  auth:\n    paths: [src/auth/**]\n    depends_on: [auth]\nsettings:\n  worktree_dir: /elsewhere\n",
    );
    assert_shown!("validate_errors", repo.boulder(&["stream", "validate"]));
}

#[test]
fn stream_init() {
    let repo = actor_repo();
    repo.git(&["branch", "boulder/auth"]).ok();
    repo.git(&["worktree", "add", "-q", "../elsewhere", "boulder/auth"]).ok();
    assert_shown!("init_branch_checked_out_elsewhere", repo.boulder(&["stream", "init", "auth"]));
    std::fs::create_dir_all(repo.worktree("docs")).unwrap();
    std::fs::write(repo.worktree("docs").join("mine.txt"), "not a worktree\n").unwrap();
    assert_shown!("init_over_a_foreign_folder", repo.boulder(&["stream", "init", "docs"]));

    let setup = repo_with_setup("exit 3");
    assert_shown!("init_untrusted_setup", setup.boulder(&["stream", "init", "api"]));
    setup.boulder(&["trust"]).ok();
    assert_shown!("init_setup_failed", setup.boulder(&["stream", "init", "api"]));
}

fn repo_with_setup(setup: &str) -> TestRepo {
    let repo = actor_repo();
    repo.with_settings(&format!("  setup: '{setup}'\n"));
    repo
}

#[test]
fn stream_merge() {
    let repo = initialized();
    assert_shown!("merge_not_complete", repo.boulder(&["stream", "merge", "auth"]));
    repo.boulder(&["prd", "done", "US-003", "US-004"]).ok();
    assert_shown!("merge_dependency_not_merged", repo.boulder(&["stream", "merge", "api"]));
    repo.boulder(&["prd", "done", "US-001"]).ok();
    let auth = repo.worktree("auth");
    commit_in(&repo, &auth, "src/auth/login.rs", "fn login() {}\n", "feat(auth): login");
    std::fs::write(auth.join("src/auth/login.rs"), "fn login() { todo!() }\n").unwrap();
    assert_shown!("merge_uncommitted_changes", repo.boulder(&["stream", "merge", "auth"]));
    repo.git_in(&auth, &["checkout", "--", "."]).ok();
    commit_in(&repo, &auth, "src/api/by_auth.rs", "// api's folder\n", "not auth's file");
    repo.with_settings("  ownership: error\n");
    assert_shown!("merge_paths_not_owned", repo.boulder(&["stream", "merge", "auth"]));

    let fresh = actor_repo();
    assert_shown!("merge_before_init", fresh.boulder(&["stream", "merge", "docs", "--force"]));
    let plan = fresh.read(".boulder/streams.yaml").replace("base_branch: main", "base_branch: trunk");
    fresh.write(".boulder/streams.yaml", &plan);
    assert_shown!("merge_base_missing", fresh.boulder(&["stream", "merge", "docs", "--force"]));
}

#[test]
fn stream_cleanup() {
    let repo = initialized();
    assert_shown!("cleanup_says_nothing_to_clean", repo.boulder(&["stream", "cleanup"]));
    let auth = repo.worktree("auth");
    std::fs::write(auth.join("src/auth/wip.rs"), "// wip\n").unwrap();
    assert_shown!("cleanup_uncommitted_work", repo.boulder(&["stream", "cleanup", "auth"]));
    std::fs::remove_file(auth.join("src/auth/wip.rs")).unwrap();
    commit_in(&repo, &auth, "src/auth/login.rs", "fn login() {}\n", "feat(auth): login");
    assert_shown!("cleanup_unpushed_commits", repo.boulder(&["stream", "cleanup", "auth"]));
}

/// Run inside the worktree it removes (as `git worktree remove` may be), cleanup removes it and
/// the others named, and records each: it used to stop, exit 3, after removing the first.
#[test]
fn stream_cleanup_from_inside_a_worktree_it_removes() {
    let repo = initialized();
    let auth = repo.worktree("auth");
    let r = repo.boulder_in(&auth, &["stream", "cleanup", "auth", "docs"]).ok();
    assert_shown!("stream_cleanup_from_inside_a_worktree_it_removes", r);
    assert!(!auth.exists() && !repo.worktree("docs").exists());
    assert_eq!(repo.stream_state("auth")["status"], "CLEANED");
    assert_eq!(repo.stream_state("docs")["status"], "CLEANED");
    assert_eq!(repo.git_out(&["worktree", "list", "--porcelain"]).matches("worktree ").count(), 2);
    repo.assert_fsck();
}

#[test]
fn stream_run() {
    let repo = actor_repo();
    assert_shown!("run_without_worktree", repo.boulder(&["stream", "run", "auth", "--", "true"]));
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    assert_shown!("run_without_agent", repo.boulder(&["stream", "run", "auth"]));
    assert_shown!("run_bad_cooldown", repo.boulder(&["stream", "run", "auth", "--cooldown", "soon", "--", "true"]));
    assert_shown!("run_missing_program", repo.boulder(&["stream", "run", "auth", "--", "no-such-agent-program"]));
    let plan = repo
        .read(".boulder/streams.yaml")
        .replace("    paths: [docs/**]\n", "    paths: [docs/**]\n    agent: ghost\n");
    repo.write(".boulder/streams.yaml", &plan);
    assert_shown!("run_unknown_agent", repo.boulder(&["stream", "run", "docs"]));
    repo.with_settings("  agents:\n    ghost: 'echo haunted'\n");
    assert_shown!("run_untrusted_agent", repo.boulder(&["stream", "run", "docs"]));
}

#[test]
fn claims_push_and_pull() {
    let remote = sample_remote();
    let (a, b) = (remote.machine("alpha"), remote.machine("beta"));
    assert_shown!("claim_bad_ttl", a.boulder(&["stream", "claim", "auth", "--ttl", "forever"]));
    assert_shown!("claim_no_such_remote", a.boulder(&["stream", "claim", "auth", "--remote", "nope"]));
    a.boulder(&["stream", "claim", "auth"]).ok();
    assert_shown!("claim_held_elsewhere", b.boulder(&["stream", "claim", "auth"]));
    assert_shown!("release_held_elsewhere", b.boulder(&["stream", "release", "auth"]));
    assert_shown!("pull_no_such_remote", a.boulder(&["pull", "nope"]));
}

#[test]
fn record() {
    let repo = initialized();
    assert_shown!("record_not_a_commit", repo.boulder(&["record", "no-such-rev"]));
    // Not a refusal: outside a stream's worktree, every stream's commits (none here).
    repo.boulder(&["record"]).ok();
    assert_shown!("record_unknown_stream", repo.boulder(&["record", "--stream", "ghost", "HEAD"]));
    commit_in(&repo, &repo.dir, "notes.txt", "base work\n", "base work");
    assert_shown!("record_commits_of_no_stream", repo.boulder(&["record", "HEAD~1..HEAD"]));
}

#[test]
fn boulders_and_check() {
    let repo = initialized();
    repo.with_settings("  boulder:\n    max_depth: 2\n    parallel_limit: 1\n");
    repo.boulder(&["create", "oauth", "--parent", "auth"]).ok();
    assert_shown!("create_existing", repo.boulder(&["create", "oauth"]));
    assert_shown!("create_over_parallel_limit", repo.boulder(&["create", "saml", "--parent", "auth"]));
    assert_shown!("create_over_max_depth", repo.boulder(&["create", "deep", "--parent", "oauth"]));
    assert_shown!("create_unknown_parent", repo.boulder(&["create", "x", "--parent", "ghost"]));
    assert_shown!("create_invalid_name", repo.boulder(&["create", "../x"]));
    assert_shown!("switch_unknown", repo.boulder(&["switch", "ghost"]));
    // The main worktree has the project boulder (tests/boulder_project.rs); a linked worktree on
    // no stream's branch has none.
    let side = repo.tmp.path().join("side");
    repo.git(&["worktree", "add", "-q", "-b", "side", side.to_str().unwrap()]).ok();
    assert_shown!("check_outside_a_stream", repo.boulder_in(&side, &["check"]));
    assert_shown!("check_unknown_boulder", repo.boulder(&["check", "--boulder", "ghost"]));
    assert_shown!("check_bad_duration", repo.boulder(&["check", "--boulder", "auth", "--cooldown", "soon"]));
    assert_shown!("todo_done_unknown", repo.boulder_in(&repo.worktree("auth"), &["todo", "done", "ghost"]));
    assert_shown!("log_unknown", repo.boulder(&["log", "ghost"]));
    assert_shown!("prd_done_unknown_story", repo.boulder(&["prd", "done", "US-999"]));
}

#[test]
fn bare_repositories_and_the_demo() {
    let remote = sample_remote();
    let (root, bare) = (&remote.root, &remote.bare);
    let repo = actor_repo();
    assert_shown!("init_in_a_bare_repository", repo.boulder_in(bare, &["stream", "init"]));
    assert_shown!("add_in_a_bare_repository", repo.boulder_in(bare, &["stream", "add", "fix", "--path", "x/**"]));
    std::fs::write(root.join("keep.txt"), "something\n").unwrap();
    assert_shown!("demo_into_a_full_folder", repo.boulder(&["demo", root.to_str().unwrap()]));
}

#[test]
fn hooks_locks_and_settings() {
    let repo = initialized();
    // The pre-push hook: a push crossing ownership, as git shows it.
    let remote = sample_remote();
    repo.git(&["remote", "add", "origin", remote.bare.to_str().unwrap()]).ok();
    let auth = repo.worktree("auth");
    commit_in(&repo, &auth, "src/api/hack.rs", "x\n", "other stream's path");
    assert_shown!("pre_push_crosses_ownership", repo.git_in(&auth, &["push", "-q", "origin", "boulder/auth"]));
    assert_shown!("hook_unknown", repo.boulder(&["hook", "bogus"]));
    // A relative core.hooksPath (a folder in each worktree) is chained through the config, which
    // another git command is writing.
    let husky = actor_repo();
    husky.git(&["config", "core.hooksPath", ".husky"]).ok();
    std::fs::create_dir_all(husky.dir.join(".husky")).unwrap();
    std::fs::write(husky.dir.join(".git/config.lock"), "").unwrap();
    assert_shown!("hooks_install_config_locked", husky.boulder(&["hooks", "install"]));
    assert_shown!("remote_setup_unknown_remote", repo.boulder(&["remote", "setup", "nope"]));
    assert_shown!("plan_given_is_missing", repo.boulder(&["status", "--config", "no-such-plan.yaml"]));
    assert_shown!("man_into_a_file", repo.boulder(&["man", "--install-dir", "/dev/null/man"]));

    // The merge lock, held by another process (its details as that process wrote them).
    let locks = repo.dir.join(".git/boulder/locks");
    std::fs::create_dir_all(&locks).unwrap();
    let (lock, ready) = (locks.join("merge.lock"), repo.dir.join(".git/held"));
    let script = format!(
        "import fcntl, time\nf = open({lock:?}, 'a+')\nfcntl.flock(f, fcntl.LOCK_EX)\nf.truncate(0); f.write('{{\"pid\": 4242, \"host\": \"elsewhere\", \"since\": \"2026-01-01T00:00:00Z\", \"command\": \"git boulder stream merge api\"}}\\n'); f.flush()\nopen({ready:?}, 'w').close()\ntime.sleep(30)\n",
    );
    let mut holder = std::process::Command::new("python3").arg("-c").arg(script).spawn().unwrap();
    wait_for("the lock holder", || ready.exists());
    let held = repo.boulder(&["stream", "merge", "auth", "--force"]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_shown!("merge_lock_held", held);

    let copy = actor_repo();
    copy.with_settings("  copy_into_worktree: ['../secrets']\n");
    assert_shown!("init_copy_leading_out", copy.boulder(&["stream", "init", "auth"]));
    let plan = copy.read(".boulder/streams.yaml").replace("version: 1\n", "version: 1\nbogus_key: 1\n");
    copy.write(".boulder/streams.yaml", &plan);
    assert_shown!("add_to_a_plan_with_errors", copy.boulder(&["stream", "add", "fix", "--path", "x/**"]));
}
