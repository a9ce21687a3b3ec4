//! `doctor` names the lock files git leaves behind when a process is killed mid-write
//! (`packed-refs.lock`, a worktree's `index.lock`, a ref's `.lock`) by path and age, with git's
//! own advice, and never removes them itself.

use std::path::PathBuf;

use crate::common::*;

/// Where git itself puts `file` for the worktree at `dir` (its git dir or the common dir).
fn git_path(repo: &TestRepo, dir: &std::path::Path, file: &str) -> PathBuf {
    let r = repo.git_in(dir, &["rev-parse", "--path-format=absolute", "--git-path", file]).ok();
    PathBuf::from(r.stdout.trim())
}

/// Make `path` as a killed process leaves it, last written `ago` (e.g. `1 minute ago`).
fn leave_lock(repo: &TestRepo, path: &std::path::Path, ago: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "").unwrap();
    let mut touch = repo.command("touch");
    let out = touch.arg("-d").arg(ago).arg(path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn doctor_names_each_stale_git_lock_file_with_its_age_and_leaves_it_there() {
    let repo = sample();
    repo.boulder(&["stream", "init"]).ok();
    repo.boulder(&["doctor"]).ok();
    let auth = repo.worktree("auth");
    let locks = [
        git_path(&repo, &repo.dir, "packed-refs.lock"),
        git_path(&repo, &repo.dir, "index.lock"),
        git_path(&repo, &auth, "index.lock"),
        git_path(&repo, &repo.dir, "refs/heads/boulder/auth.lock"),
        git_path(&repo, &repo.dir, "refs/boulder/streams/auth.lock"),
        git_path(&repo, &repo.dir, "refs/notes/boulder.lock"),
        // git's other lock files: a worktree's HEAD (a killed checkout or commit), the config.
        git_path(&repo, &auth, "HEAD.lock"),
        git_path(&repo, &repo.dir, "config.lock"),
    ];
    // The linked worktree's index lives in its own git dir, not the main one's.
    assert_ne!(locks[1], locks[2]);

    // A lock being written right now is a running git's: not a problem.
    leave_lock(&repo, &locks[0], "now");
    repo.boulder(&["doctor"]).ok();

    for l in &locks {
        leave_lock(&repo, l, "1 hour ago");
    }
    let r = repo.boulder(&["doctor"]).code(1);
    for l in &locks {
        let shown = l.display().to_string();
        assert!(r.stdout.contains(&format!("lock: {shown} was left behind 60m ago")), "{shown}:\n{}", r.stdout);
        assert!(r.stdout.contains(&format!("fix: if no git process is running, remove {shown}")), "{}", r.stdout);
    }
    assert!(!r.stdout.contains("all good"), "{}", r.stdout);
    let j = repo.boulder(&["doctor", "--json"]).code(1).json();
    assert_eq!(j["ok"], false);
    let named = j["problems"].as_array().unwrap().iter().filter(|p| p["area"] == "lock").count();
    assert_eq!(named, locks.len(), "{j}");
    // Never removed by doctor: only the user knows no git is still running.
    for l in &locks {
        assert!(l.is_file(), "{} was removed", l.display());
    }

    for l in &locks {
        std::fs::remove_file(l).unwrap();
    }
    let r = repo.boulder(&["doctor"]).ok();
    assert_shown!("doctor_names_each_stale_git_lock_file_with_its_age_and_leaves_it_there", r);
}

#[test]
fn a_missing_or_broken_plan_is_a_problem_while_the_state_has_streams() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let plan = repo.read(".boulder/streams.yaml");
    // Outside the cone of a sparse checkout, git removes the plan (and the worktrees in .boulder).
    repo.git(&["sparse-checkout", "set", "--cone", "src", ".agents"]).ok();
    assert!(!repo.dir.join(".boulder/streams.yaml").exists());
    let r = repo.boulder(&["doctor"]).code(1);
    assert_shown!("a_missing_or_broken_plan_is_a_problem_while_the_state_has_streams", r);
    let r = repo.boulder(&["status"]).code(2);
    assert_shown!("a_missing_or_broken_plan_is_a_problem_while_the_state_has_streams_2", r);
    repo.git(&["sparse-checkout", "disable"]).ok();
    // A plan that does not parse.
    repo.write(".boulder/streams.yaml", &plan.replacen("paths:", "pahts:", 1));
    let r = repo.boulder(&["doctor"]).code(1);
    assert_shown!("a_missing_or_broken_plan_is_a_problem_while_the_state_has_streams_3", r);
    repo.write(".boulder/streams.yaml", &plan);
    let r = repo.boulder(&["doctor"]);
    assert!(!r.stdout.contains("plan"), "{}", r.stdout);
}

/// A worktree's admin folder that a killed creation left without its `gitdir` file is named,
/// with `git worktree prune` (which removes it, as the check after shows); one being made right
/// now is not.
#[test]
fn doctor_names_a_half_made_worktree_admin_folder() {
    let repo = sample();
    repo.boulder(&["stream", "init"]).ok();
    let admin = repo.dir.join(".git/worktrees/half");
    std::fs::create_dir_all(&admin).unwrap();
    repo.boulder(&["doctor"]).ok();
    let out = repo.command("touch").args(["-d", "1 hour ago"]).arg(&admin).output().unwrap();
    assert!(out.status.success());
    let r = repo.boulder(&["doctor"]).code(1);
    let shown = admin.display().to_string();
    assert!(r.stdout.contains(&format!("worktree: {shown} was left half made")), "{}", r.stdout);
    assert_shown!("doctor_names_a_half_made_worktree_admin_folder", r);
    assert!(repo.git(&["worktree", "prune", "-n", "-v"]).ok().stderr.contains("half: gitdir file does not exist"));
    repo.git(&["worktree", "prune"]).ok();
    assert!(!admin.exists());
    repo.boulder(&["doctor"]).ok();
}

/// A `packed-refs.lock` a killed process left: each commit's hook says so at once, with what to
/// do (it used to wait for the lock through every retry, seconds per commit), and once the lock
/// is gone `git boulder record` records the commits made meanwhile.
#[test]
fn a_stale_packed_refs_lock_is_named_by_the_post_commit_hook_and_record_catches_up() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let auth = repo.worktree("auth");
    let lock = git_path(&repo, &repo.dir, "packed-refs.lock");
    leave_lock(&repo, &lock, "1 hour ago");
    let p = auth.join("src/auth/new.rs");
    std::fs::write(&p, "// new\n").unwrap();
    repo.git_in(&auth, &["add", "-A"]).ok();
    let r = repo.git_in(&auth, &["commit", "-q", "-m", "while locked"]).ok();
    assert_shown!("a_stale_packed_refs_lock_is_named_by_the_post_commit_hook_and_record_catches_up", r);
    // One line of git-boulder's (git says its own about the lock).
    assert_eq!(r.stderr.lines().filter(|l| l.contains("git-boulder")).count(), 1, "{}", r.stderr);
    assert_eq!(repo.git_out(&["notes", "--ref=boulder", "list"]), "");
    std::fs::remove_file(&lock).unwrap();
    repo.boulder_in(&auth, &["record"]).ok();
    let head = repo.git_in(&auth, &["rev-parse", "HEAD"]).ok().stdout;
    assert!(repo.git_out(&["notes", "--ref=boulder", "list"]).contains(head.trim()));
}
