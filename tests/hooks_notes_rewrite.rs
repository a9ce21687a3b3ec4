//! Notes follow history the way `notes.rewriteRef` (with `notes.rewriteMode = concatenate`) does:
//! squash and fixup in `rebase -i` keep the records of every folded commit on the result, `commit
//! --amend` carries the note and is no new iteration, a cherry-pick (or revert) onto a stream
//! branch is new work and records activity, and a rebase still records nothing.

use std::path::Path;

use crate::common::*;

fn git_env(repo: &TestRepo, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = repo.command("git");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run = Run::from(cmd.args(args).current_dir(dir).output().expect("run git"));
    assert_eq!(run.code, 0, "git {args:?} failed:\n{}{}", run.stdout, run.stderr);
    run
}

fn commit_story(repo: &TestRepo, wt: &Path, file: &str, story: &str) {
    std::fs::write(wt.join(file), format!("{story}\n")).unwrap();
    repo.git_in(wt, &["add", "-A"]).ok();
    git_env(repo, wt, &["commit", "-q", "-m", file], &[("BOULDER_STORY", story)]);
}

fn iteration(repo: &TestRepo) -> u64 {
    let s: serde_json::Value =
        serde_json::from_str(&repo.git_out(&["cat-file", "-p", "refs/boulder/boulders/auth:state.json"])).unwrap();
    s["iteration"].as_u64().unwrap()
}

/// The records of the note on `rev`, one JSON object per line.
fn records(repo: &TestRepo, wt: &Path, rev: &str) -> Vec<serde_json::Value> {
    let text = repo.git_in(wt, &["notes", "--ref=boulder", "show", rev]).ok().stdout;
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn stream(repo: &TestRepo) -> std::path::PathBuf {
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.dir.join(".boulder/worktrees/auth")
}

#[test]
fn squash_and_fixup_keep_the_records_of_every_folded_commit() {
    let repo = sample();
    let wt = stream(&repo);
    commit_story(&repo, &wt, "src/auth/a.rs", "US-001");
    commit_story(&repo, &wt, "src/auth/b.rs", "US-002");
    commit_story(&repo, &wt, "src/auth/c.rs", "US-003");
    commit_story(&repo, &wt, "src/auth/d.rs", "US-004");
    assert_eq!(iteration(&repo), 4);
    // pick a, squash b, fixup c, pick d.
    git_env(
        &repo,
        &wt,
        &["rebase", "-q", "-i", "main"],
        &[("GIT_SEQUENCE_EDITOR", "sed -i -e '2s/^pick/squash/' -e '3s/^pick/fixup/'"), ("GIT_EDITOR", "true")],
    );
    assert_eq!(repo.git_in(&wt, &["rev-list", "--count", "main..HEAD"]).ok().stdout.trim(), "2");
    let folded = records(&repo, &wt, "HEAD~1");
    let stories: Vec<&str> = folded.iter().map(|r| r["story"].as_str().unwrap()).collect();
    assert_eq!(stories, ["US-001", "US-002", "US-003"], "{folded:?}");
    assert!(folded.iter().all(|r| r["stream"] == "auth"));
    let last = records(&repo, &wt, "HEAD");
    assert_eq!(last.len(), 1);
    assert_eq!(last[0]["story"], "US-004");
    // The rebase itself is no new work.
    assert_eq!(iteration(&repo), 4);
    // git itself reads the concatenated note.
    let log = repo.git_in(&wt, &["log", "-1", "--notes=boulder", "HEAD~1"]).ok().stdout;
    assert!(log.contains("US-002") && log.contains("US-003"), "{log}");
    repo.assert_fsck();
}

#[test]
fn amend_carries_the_note_and_is_no_new_iteration() {
    let repo = sample();
    let wt = stream(&repo);
    commit_story(&repo, &wt, "src/auth/a.rs", "US-001");
    assert_eq!(iteration(&repo), 1);
    let before = records(&repo, &wt, "HEAD");
    std::fs::write(wt.join("src/auth/a.rs"), "amended\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]).ok();
    repo.git_in(&wt, &["commit", "-q", "--amend", "-m", "a, amended"]).ok();
    repo.git_in(&wt, &["commit", "-q", "--amend", "--no-edit"]).ok();
    assert_eq!(iteration(&repo), 1, "an amend counted as an iteration");
    assert_eq!(records(&repo, &wt, "HEAD"), before);
    // A real new commit after the amends still counts.
    commit_story(&repo, &wt, "src/auth/b.rs", "US-002");
    assert_eq!(iteration(&repo), 2);
    assert_eq!(records(&repo, &wt, "HEAD")[0]["iteration"], 2);
}

#[test]
fn cherry_pick_and_revert_onto_a_stream_branch_record_activity() {
    let repo = sample();
    let wt = stream(&repo);
    repo.git(&["checkout", "-q", "-b", "side"]).ok();
    for i in 1..=3 {
        repo.write(&format!("src/auth/p{i}.rs"), &format!("{i}\n"));
        repo.commit_all(&format!("p{i}"));
    }
    repo.git(&["checkout", "-q", "main"]).ok();
    // One commit, then a sequence of two.
    repo.git_in(&wt, &["cherry-pick", "side~2"]).ok();
    assert_eq!(iteration(&repo), 1);
    assert_eq!(records(&repo, &wt, "HEAD")[0]["stream"], "auth");
    repo.git_in(&wt, &["cherry-pick", "side~1", "side"]).ok();
    assert_eq!(repo.git_in(&wt, &["log", "-1", "--format=%s"]).ok().stdout.trim(), "p3");
    assert_eq!(iteration(&repo), 3);
    assert_eq!(records(&repo, &wt, "HEAD")[0]["iteration"], 3);
    assert_eq!(records(&repo, &wt, "HEAD~1")[0]["iteration"], 2);
    // A revert is a new commit too.
    repo.git_in(&wt, &["revert", "--no-edit", "HEAD"]).ok();
    assert_eq!(iteration(&repo), 4);
    // A rebase replays: nothing new recorded, the notes follow.
    repo.write("m.txt", "m\n");
    repo.commit_all("main moves");
    repo.git_in(&wt, &["rebase", "-q", "main"]).ok();
    assert_eq!(iteration(&repo), 4);
    assert_eq!(records(&repo, &wt, "HEAD")[0]["iteration"], 4);
}
