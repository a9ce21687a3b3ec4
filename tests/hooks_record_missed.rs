//! Commits are never silently unrecorded: `doctor` finds stream commits that have no note (made
//! where the hooks did not run) and names the command that records them; `git boulder record`
//! records them after the fact, oldest first at their committer time, each once.

use std::path::{Path, PathBuf};

use crate::common::*;

/// The sample with every stream initialized and no hooks installed.
fn without_hooks() -> TestRepo {
    let repo = sample();
    repo.boulder(&["stream", "init", "--no-hooks"]).ok();
    repo
}

fn worktree(repo: &TestRepo, stream: &str) -> PathBuf {
    PathBuf::from(repo.boulder(&["stream", "path", stream]).ok().stdout.trim())
}

/// Commit a change in `dir` at committer (and author) time `date` (git's `@SECONDS +0000` form).
fn commit_at(repo: &TestRepo, dir: &Path, file: &str, date: &str) -> String {
    std::fs::write(dir.join(file), format!("{date}\n")).unwrap();
    repo.git_in(dir, &["add", "-A"]).ok();
    let mut cmd = repo.command("git");
    let out = cmd
        .args(["commit", "-q", "-m", file])
        .env("GIT_COMMITTER_DATE", date)
        .env("GIT_AUTHOR_DATE", date)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    repo.git_out(&["-C", dir.to_str().unwrap(), "rev-parse", "HEAD"])
}

fn note(repo: &TestRepo, commit: &str) -> Option<serde_json::Value> {
    let r = repo.git(&["notes", "--ref=boulder", "show", commit]);
    (r.code == 0).then(|| serde_json::from_str(r.stdout.trim()).unwrap())
}

fn boulder_state(repo: &TestRepo, id: &str) -> serde_json::Value {
    repo.state(&format!("refs/boulder/boulders/{id}"))
}

fn tip(repo: &TestRepo, r: &str) -> String {
    repo.git(&["rev-parse", "-q", "--verify", r]).stdout.trim().to_string()
}

fn activity_problems(repo: &TestRepo) -> Vec<serde_json::Value> {
    let v = repo.boulder(&["doctor", "--json"]).json();
    v["problems"].as_array().unwrap().iter().filter(|p| p["area"] == "activity").cloned().collect()
}

#[test]
fn doctor_finds_commits_made_without_hooks_and_its_fix_records_them_once_in_history_order() {
    let repo = without_hooks();
    let auth = worktree(&repo, "auth");
    // Three commits, each a day apart, none recorded (no hooks).
    let dates = ["@1700000000 +0000", "@1700086400 +0000", "@1700172800 +0000"];
    let commits: Vec<String> =
        dates.iter().enumerate().map(|(i, d)| commit_at(&repo, &auth, &format!("src/auth/f{i}.rs"), d)).collect();
    assert!(note(&repo, &commits[0]).is_none());

    // doctor names the stream, the count and the exact command that fixes it; exit 1.
    let r = repo.boulder(&["doctor", "--json"]).code(1);
    let v = r.json();
    let found: Vec<&serde_json::Value> =
        v["problems"].as_array().unwrap().iter().filter(|p| p["area"] == "activity").collect();
    assert_eq!(found.len(), 1, "{v}");
    let message = found[0]["message"].as_str().unwrap();
    assert!(message.contains("stream auth: 3 commit(s)"), "{message}");
    assert!(message.contains(&commits[0][..12]), "the oldest is named: {message}");
    let fix = found[0]["fix"].as_str().unwrap();
    assert_eq!(fix, "git boulder record --stream auth");
    // The missing hooks are reported too.
    assert!(v["problems"].as_array().unwrap().iter().any(|p| p["area"] == "hooks"), "{v}");

    // The fix, as printed, works from the main worktree.
    let args: Vec<&str> = fix.split(' ').skip(2).collect();
    let r = repo.boulder(&args).ok();
    assert_shown!("record_as_doctor_says", r);

    // Oldest first: iterations count up in history order, each at its committer time.
    for (i, c) in commits.iter().enumerate() {
        let n = note(&repo, c).unwrap_or_else(|| panic!("commit {i} has no note"));
        assert_eq!(n["stream"], "auth");
        assert_eq!(n["boulder"], "auth");
        assert_eq!(n["iteration"], (i + 1) as u64, "{n}");
        let secs = 1700000000 + 86400 * i as u64;
        let want = repo.git_out(&["log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%S", c]);
        assert!(n["at"].as_str().unwrap().starts_with(&want), "{n} vs {want} ({secs})");
    }
    let st = boulder_state(&repo, "auth");
    assert_eq!(st["iteration"], 3);
    assert_eq!(st["last_commit"], commits[2].as_str());
    assert!(st["last_activity"].as_str().unwrap().starts_with("2023-11-16T22:13:20"), "{st}");

    // Recording again adds nothing: no op, no note, the same counts.
    let (notes_before, ops_before) = (tip(&repo, "refs/notes/boulder"), tip(&repo, "refs/boulder/boulders/auth"));
    let r = repo.boulder(&["record", "--stream", "auth"]).ok();
    assert_shown!("record_again", r);
    assert_eq!(tip(&repo, "refs/notes/boulder"), notes_before);
    assert_eq!(tip(&repo, "refs/boulder/boulders/auth"), ops_before);
    assert_eq!(boulder_state(&repo, "auth")["iteration"], 3);

    // doctor is content.
    assert!(activity_problems(&repo).is_empty());
    repo.assert_fsck();
}

#[test]
fn record_defaults_to_the_worktrees_stream_and_takes_a_commit_or_a_range() {
    let repo = without_hooks();
    let api = worktree(&repo, "api");
    let a = commit_at(&repo, &api, "src/api/a.rs", "@1700000000 +0000");
    let b = commit_at(&repo, &api, "src/api/b.rs", "@1700000100 +0000");
    let c = commit_at(&repo, &api, "src/api/c.rs", "@1700000200 +0000");

    // One commit, by a name git understands.
    let r = repo.boulder_in(&api, &["record", "HEAD~2"]).ok();
    assert_shown!("record_a_range", r);
    assert_eq!(note(&repo, &a).unwrap()["iteration"], 1);
    assert!(note(&repo, &b).is_none());

    // A range: the stream is the one whose branch holds the commits, even from the main worktree.
    repo.boulder(&["record", &format!("{a}..{b}")]).ok();
    assert_eq!(note(&repo, &b).unwrap()["stream"], "api");
    assert_eq!(note(&repo, &b).unwrap()["iteration"], 2);
    assert!(note(&repo, &c).is_none());

    // No range, in the stream's worktree: what is left of its branch.
    let r = repo.boulder_in(&api, &["record"]).ok();
    assert_shown!("record_the_worktrees_stream", r);
    assert_eq!(note(&repo, &c).unwrap()["iteration"], 3);
    assert_eq!(boulder_state(&repo, "api")["iteration"], 3);
    assert!(activity_problems(&repo).is_empty());
}

#[test]
fn record_refuses_commits_of_no_stream_and_writes_nothing() {
    let repo = without_hooks();
    repo.write("README.md", "# changed on main\n");
    repo.commit_all("main work");
    let main_tip = repo.git_out(&["rev-parse", "HEAD"]);

    let r = repo.boulder(&["record", "HEAD~1..HEAD"]).code(2);
    assert_shown!("record_refuses_commits_of_no_stream_and_writes_nothing", r);
    assert!(r.stderr.contains(&main_tip[..12]), "the commit is named: {}", r.stderr);
    assert_eq!(tip(&repo, "refs/notes/boulder"), "", "nothing was written");

    // No range where no stream's branch is checked out: every stream's commits, and the base's
    // own commit is none of them.
    let r = repo.boulder(&["record"]).ok();
    assert_eq!(r.stdout, "0 commit(s) recorded\n");
    // An unknown stream, and a range git cannot read.
    repo.boulder(&["record", "--stream", "nope"]).code(2);
    repo.boulder(&["record", "no-such-rev..HEAD"]).code(2);
    assert_eq!(tip(&repo, "refs/notes/boulder"), "");
}

#[test]
fn record_without_arguments_in_the_main_worktree_records_what_doctor_lists_each_once() {
    let repo = without_hooks();
    let (auth, docs) = (worktree(&repo, "auth"), worktree(&repo, "docs"));
    let a = commit_at(&repo, &auth, "src/auth/x.rs", "@1700000000 +0000");
    // docs builds on auth's commit: it is on both branches.
    repo.git_in(&docs, &["merge", "-q", "--ff-only", "boulder/auth"]).ok();
    let d = commit_at(&repo, &docs, "docs/x.md", "@1700000050 +0000");
    let listed: Vec<String> = activity_problems(&repo).iter().map(|p| p["fix"].as_str().unwrap().to_string()).collect();
    assert_eq!(listed, ["git boulder record --stream auth", "git boulder record --stream docs"]);

    let r = repo.boulder(&["record"]).ok();
    assert_eq!(
        r.stdout,
        format!("recorded {} for stream auth\nrecorded {} for stream docs\n2 commit(s) recorded\n", &a[..12], &d[..12])
    );
    assert_eq!(note(&repo, &a).unwrap()["stream"], "auth");
    assert_eq!(note(&repo, &d).unwrap()["stream"], "docs");
    assert_eq!(boulder_state(&repo, "auth")["iteration"], 1);
    assert_eq!(boulder_state(&repo, "docs")["iteration"], 1);
    assert!(activity_problems(&repo).is_empty());
    // Again: nothing new.
    let r = repo.boulder(&["record"]).ok();
    assert_eq!(r.stdout, "0 commit(s) recorded (2 already recorded)\n");
}

#[test]
fn commits_the_hooks_recorded_and_merges_from_the_base_are_not_reported() {
    let repo = sample();
    repo.boulder(&["stream", "init"]).ok();
    let docs = worktree(&repo, "docs");
    commit_at(&repo, &docs, "docs/a.md", "@1700000000 +0000");
    // Work on the base, merged into the stream: the merge commit is no iteration of work.
    repo.write("README.md", "# changed on main\n");
    repo.commit_all("main work");
    repo.git_in(&docs, &["merge", "-q", "--no-ff", "-m", "merge main", "main"]).ok();
    assert!(activity_problems(&repo).is_empty(), "{:?}", activity_problems(&repo));
    let r = repo.boulder_in(&docs, &["record"]).ok();
    assert_shown!("commits_the_hooks_recorded_and_merges_from_the_base_are_not_reported", r);
    assert_eq!(boulder_state(&repo, "docs")["iteration"], 1);
}

#[test]
fn a_commit_the_hook_did_not_record_is_found_and_recorded() {
    let repo = sample();
    repo.boulder(&["stream", "init"]).ok();
    let auth = worktree(&repo, "auth");
    // A commit made while git-boulder's part of the hooks was skipped.
    std::fs::write(auth.join("src/auth/ide.rs"), "// ide\n").unwrap();
    repo.git_in(&auth, &["add", "-A"]).ok();
    let mut cmd = repo.command("git");
    let out = cmd
        .args(["commit", "-q", "-m", "from the IDE"])
        .env("BOULDER_SKIP_HOOKS", "1")
        .current_dir(&auth)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ide = repo.git_out(&["rev-parse", "boulder/auth"]);
    assert!(note(&repo, &ide).is_none());

    let found = activity_problems(&repo);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0]["message"].as_str().unwrap().contains("stream auth: 1 commit(s)"), "{found:?}");
    repo.boulder_in(&auth, &["record"]).ok();
    assert_eq!(note(&repo, &ide).unwrap()["iteration"], 1);
    assert_eq!(boulder_state(&repo, "auth")["iteration"], 1);
    assert!(activity_problems(&repo).is_empty());
}

#[test]
fn a_range_over_two_streams_records_each_commit_for_the_stream_that_holds_it() {
    let repo = without_hooks();
    let a = commit_at(&repo, &worktree(&repo, "auth"), "src/auth/x.rs", "@1700000000 +0000");
    let b = commit_at(&repo, &worktree(&repo, "docs"), "docs/x.md", "@1700000050 +0000");
    // Commits reachable from either branch but not both: one of each stream.
    let r = repo.boulder(&["record", "boulder/auth...boulder/docs"]).ok();
    assert_shown!("a_range_over_two_streams_records_each_commit_for_the_stream_that_holds_it", r);
    assert_eq!(note(&repo, &a).unwrap()["stream"], "auth");
    assert_eq!(note(&repo, &b).unwrap()["stream"], "docs");
    assert_eq!(boulder_state(&repo, "auth")["iteration"], 1);
    assert_eq!(boulder_state(&repo, "docs")["iteration"], 1);
    assert!(activity_problems(&repo).is_empty());
}

#[test]
fn a_commit_whose_op_was_recorded_but_not_its_note_gets_the_iteration_that_counted_it() {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let auth = worktree(&repo, "auth");
    let a = commit_at(&repo, &auth, "a.txt", "@1700000000 +0000");
    // The notes ref locked while b is committed (as a hook killed between its op and its note
    // leaves it): b's op is appended, its note is not.
    let lock = repo.dir.join(".git/refs/notes/boulder.lock");
    std::fs::write(&lock, "").unwrap();
    let b = commit_at(&repo, &auth, "b.txt", "@1700000100 +0000");
    std::fs::remove_file(&lock).unwrap();
    assert!(note(&repo, &b).is_none());
    assert_eq!(boulder_state(&repo, "auth")["iteration"], 2);
    let c = commit_at(&repo, &auth, "c.txt", "@1700000200 +0000");
    repo.boulder_in(&auth, &["record"]).ok();
    let iterations: Vec<_> = [&a, &b, &c].iter().map(|x| note(&repo, x).unwrap()["iteration"].clone()).collect();
    assert_eq!(iterations, [1, 2, 3], "each note the iteration its commit was counted at");
    assert_eq!(boulder_state(&repo, "auth")["iteration"], 3);
    repo.assert_fsck();
}
