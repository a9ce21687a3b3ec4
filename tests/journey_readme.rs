//! The first day of a user, end to end, as the README tells it: their own PRD → `stream suggest
//! --write` → `stream add` → `stream init` (hooks installed) → commits → `status` → `prd done` →
//! COMPLETED → `stream merge` → the push hint → push. The dashboard and the hints are held by
//! snapshots (tests/snapshots/), with a fixed clock so "0s ago" stays so.

use crate::common::*;

const PRD: &str = "# PRD: Notes app\n\n## User Stories\n\n\
### [ ] US-001: Sign-in form\nAdd the form in `src/auth/` with a password field.\n\n\
### [ ] US-002: Sign-out\nClear the session in `src/auth/session.rs`.\n\n\
### [ ] US-003: List notes endpoint\nServe notes from `src/api/notes.rs`.\n\n\
### [ ] US-004: Create note endpoint\nAccept new notes in `src/api/notes.rs`.\n\n\
### [ ] US-005: Release script\nA script that tags releases.\n";

const NOW: &str = "2026-11-23T12:00:00Z";

fn run(repo: &TestRepo, dir: &std::path::Path, args: &[&str]) -> Run {
    repo.boulder_env(dir, args, &[("BOULDER_NOW", NOW)])
}

/// stdout and stderr of a command, with the temporary folder's path taken out.
fn shown(repo: &TestRepo, r: &Run) -> String {
    let tmp = repo.tmp.path().canonicalize().unwrap().display().to_string();
    format!("{}--- stderr ---\n{}", r.stdout, r.stderr).replace(&tmp, "[TMP]")
}

fn commit(repo: &TestRepo, dir: &std::path::Path, file: &str, msg: &str) {
    let p = dir.join(file);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, format!("// {msg}\n")).unwrap();
    repo.git_in(dir, &["add", "-A"]).ok();
    let mut cmd = repo.command("git");
    let out = cmd.env("BOULDER_NOW", NOW).args(["commit", "-q", "-m", msg]).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_fresh_users_first_day() {
    let repo = TestRepo::with_files(&[
        (".agents/tasks/prd.md", PRD),
        ("src/auth/mod.rs", "// auth\n"),
        ("src/api/mod.rs", "// api\n"),
        ("README.md", "# notes\n"),
    ]);
    let origin = repo.tmp.path().join("origin.git");
    repo.git(&["init", "-q", "--bare", origin.to_str().unwrap()]).ok();
    repo.git(&["remote", "add", "origin", origin.to_str().unwrap()]).ok();
    repo.git(&["push", "-q", "-u", "origin", "main"]).ok();

    // suggest writes a plan that works: a named folder becomes a glob, a new file is created,
    // stories grouped by their paths.
    run(&repo, &repo.dir, &["stream", "suggest", "--write"]).ok();
    let plan = repo.read(".boulder/streams.yaml");
    assert!(plan.contains("src/auth/**") && plan.contains("creates: [src/api/notes.rs]"), "{plan}");
    insta::assert_snapshot!("suggested_plan", plan);
    // add: a stream for ad-hoc work on a story that came later, keeping the file as it was.
    repo.write(".agents/tasks/prd.md", &format!("{PRD}\n### [ ] US-006: Hotfix the release tag\nIn `scripts/`.\n"));
    run(&repo, &repo.dir, &["stream", "add", "release", "--story", "US-006", "--path", "scripts/**"]).ok();
    let after = repo.read(".boulder/streams.yaml");
    assert!(after.contains("release:"), "{after}");
    // Every line the plan had is still there, in its order: only lines were added.
    let mut rest = after.lines();
    for line in plan.lines() {
        assert!(rest.any(|l| l == line), "{line:?} lost or moved in:\n{after}");
    }
    run(&repo, &repo.dir, &["stream", "validate"]).ok();
    repo.commit_all("plan");
    repo.git(&["push", "-q", "origin", "main"]).ok();

    // init: worktrees, and the hooks that record commits.
    let r = run(&repo, &repo.dir, &["stream", "init"]).ok();
    assert_shown!("first_day_stream_init", r);
    let names: Vec<String> = run(&repo, &repo.dir, &["status", "--json"]).ok().json()["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    let auth = names.iter().find(|n| n.contains("auth")).expect("an auth stream").clone();
    let wt = repo.dir.join(".boulder/worktrees").join(&auth);
    commit(&repo, &wt, "src/auth/form.rs", "sign-in form");
    commit(&repo, &wt, "src/auth/session.rs", "sign-out");
    assert_eq!(repo.git_out(&["notes", "--ref=boulder", "list"]).lines().count(), 2);
    insta::assert_snapshot!("dashboard_at_work", shown(&repo, &run(&repo, &repo.dir, &["status"]).ok()));
    // In the stream's worktree: its stories by default, and the table marks it.
    let next = run(&repo, &wt, &["prd", "next", "--json"]).ok().json();
    assert_eq!(next["id"], "US-001");
    insta::assert_snapshot!("dashboard_in_the_worktree", shown(&repo, &run(&repo, &wt, &["status"]).ok()));

    // done: COMPLETED, and the dashboard says to merge.
    run(&repo, &wt, &["prd", "done", "US-001", "US-002"]).ok();
    insta::assert_snapshot!("dashboard_completed", shown(&repo, &run(&repo, &repo.dir, &["status"]).ok()));

    // merge: the base moved locally; status and merge say to push it until the remote has it.
    let r = run(&repo, &repo.dir, &["stream", "merge", &auth]).ok();
    assert_shown!("first_day_stream_merge", r);
    insta::assert_snapshot!("dashboard_merged_not_pushed", shown(&repo, &run(&repo, &repo.dir, &["status"]).ok()));
    repo.git(&["push", "-q", "origin", "main"]).ok();
    let r = run(&repo, &repo.dir, &["status"]).ok();
    assert!(!r.stderr.contains("push main"), "{}", r.stderr);
    repo.assert_fsck();
}
