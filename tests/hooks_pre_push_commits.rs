//! pre-push decides whose work is pushed by the commits pushed, not by the remote ref's name:
//! a stream branch's commits pushed as `HEAD:refs/for/main`, `boulder/x:other`, a raw id or a tag
//! are checked like a push of `boulder/x`; commits that are no stream's are not checked.

use crate::common::*;

fn setup() -> (TestRepo, std::path::PathBuf) {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    let bare = repo.tmp.path().join("remote.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]).ok();
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]).ok();
    repo.git(&["push", "-q", "origin", "main"]).ok();
    repo.boulder(&["stream", "init", "auth", "api"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    (repo, wt)
}

#[track_caller]
fn refused(r: Run) {
    assert_ne!(r.code, 0, "the push went through:\n{}", r.stderr);
    assert!(r.stderr.contains("src/api/hack.rs") && r.stderr.contains("owned by api"), "{}", r.stderr);
    assert!(r.stderr.contains("stream auth"), "{}", r.stderr);
    assert!(r.stderr.contains("--no-verify"), "{}", r.stderr);
}

#[test]
fn a_stream_branch_pushed_under_any_name_is_checked_as_that_stream() {
    let (repo, wt) = setup();
    commit_in(&repo, &wt, "src/auth/own.rs", "x\n", "own");
    let own = repo.git_in(&wt, &["rev-parse", "HEAD"]).ok().stdout.trim().to_string();
    commit_in(&repo, &wt, "src/api/hack.rs", "x\n", "other stream's path");
    let bad = repo.git_in(&wt, &["rev-parse", "HEAD"]).ok().stdout.trim().to_string();

    // From the stream worktree: a review ref, another branch name, a raw id, a tag.
    refused(repo.git_in(&wt, &["push", "origin", "HEAD:refs/for/main"]));
    refused(repo.git_in(&wt, &["push", "origin", "boulder/auth:other"]));
    refused(repo.git_in(&wt, &["push", "origin", &format!("{bad}:refs/heads/raw")]));
    repo.git_in(&wt, &["tag", "-a", "-m", "t", "v1", "HEAD"]).ok();
    refused(repo.git_in(&wt, &["push", "origin", "v1"]));
    // From the main worktree, and from a detached HEAD there.
    refused(repo.git(&["push", "origin", "boulder/auth:refs/heads/review/auth"]));
    repo.git(&["checkout", "-q", "--detach", &bad]).ok();
    refused(repo.git(&["push", "origin", "HEAD:refs/heads/elsewhere"]));
    repo.git(&["checkout", "-q", "main"]).ok();
    // Nothing of it reached the remote.
    let remote = repo.git_out(&["ls-remote", "origin"]);
    assert!(remote.lines().all(|l| l.ends_with("refs/heads/main") || l.ends_with("HEAD")), "{remote}");

    // An earlier commit of the branch that stays in the stream's paths passes, under any name.
    repo.git_in(&wt, &["push", "-q", "origin", &format!("{own}:refs/for/main")]).ok();
    // Judged by what is pushed: the auth commit sent to api's branch name is auth's own work.
    repo.git_in(&wt, &["push", "-q", "origin", &format!("{own}:refs/heads/boulder/api")]).ok();
    // The bypass still works.
    repo.git_in(&wt, &["push", "-q", "--no-verify", "origin", "HEAD:refs/for/main"]).ok();
}

#[test]
fn commits_that_are_no_streams_are_not_checked() {
    let (repo, _wt) = setup();
    // Work on main touching a stream's paths is main's, under any remote name.
    commit_in(&repo, &repo.dir, "src/api/main-fix.rs", "x\n", "main fix");
    repo.git(&["push", "-q", "origin", "main:refs/for/main"]).ok();
    repo.git(&["push", "-q", "origin", "HEAD:refs/heads/scratch"]).ok();
    let head = repo.git_out(&["rev-parse", "HEAD"]);
    repo.git(&["push", "-q", "origin", &format!("{head}:refs/heads/raw")]).ok();
    assert!(repo.git_out(&["ls-remote", "origin", "refs/heads/raw"]).starts_with(&head));
}
