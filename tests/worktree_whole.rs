//! Only whole worktrees reach an agent: a `stream init` killed while it checks the worktree out
//! leaves it registered (a `.git` file, git's registration still locked `initializing`), without
//! an index and with files missing. `stream run` and `work` finish it first, as a rerun of
//! `stream init` does, so the agent sees every file and a clean `git status`. Checked with plain
//! git, from inside the agent.

use std::path::Path;

use crate::common::*;

/// 40 tracked files besides the PRD and the plan: what an agent's `git add -A` must not delete.
const FILES: usize = 40;

fn repo() -> TestRepo {
    let mut files: Vec<(String, String)> = vec![
        (".agents/tasks/prd.md".into(), "# PRD\n\n### [ ] US-101: a part\nx\n".into()),
        (
            ".boulder/streams.yaml".into(),
            "version: 1\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\nsettings:\n  base_branch: main\n  boulder:\n    cooldown: 10ms\n    max_failures: 1\n"
                .into(),
        ),
    ];
    for i in 0..FILES {
        files.push((format!("lib/f{i:02}.txt"), format!("file {i}\n")));
    }
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    TestRepo::with_files(&refs)
}

/// An agent that writes down what it is handed (`git status --porcelain`, the tracked and the
/// present files) into `seen`, then does its story the way agents do: `git add -A && git commit`.
fn inspector(dir: &Path, seen: &Path) -> std::path::PathBuf {
    let p = dir.join("inspector.sh");
    let script = format!(
        "#!/bin/sh\nset -e\n\
         {{ echo \"status:$(git status --porcelain | wc -l | tr -d ' ')\"; \
            echo \"tracked:$(git ls-files | wc -l | tr -d ' ')\"; \
            echo \"present:$(find . -path ./.git -prune -o -type f -print | wc -l | tr -d ' ')\"; }} > {seen}\n\
         mkdir -p src/a\necho done > src/a/x.txt\n\
         sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
         git add -A\ngit commit -q -m \"a: $BOULDER_STORY\"\n",
        seen = seen.display()
    );
    std::fs::write(&p, script).unwrap();
    p
}

/// `stream init a`, killed once the worktree is registered and before its files are checked out.
fn killed_init(repo: &TestRepo) {
    let r = repo.boulder_env(&repo.dir, &["stream", "init", "a"], &[("BOULDER_FAILPOINT", "worktree-registered")]);
    assert_ne!(r.code, 0, "the failpoint was not reached: {}", r.stderr);
    assert!(r.stderr.contains("failpoint worktree-registered reached"), "{}", r.stderr);
    // As plain git sees it: registered, locked initializing, and nothing checked out.
    let list = repo.git_out(&["worktree", "list", "--porcelain"]);
    assert!(list.contains("locked initializing"), "{list}");
    let wt = repo.worktree("a");
    assert!(wt.join(".git").exists());
    assert!(!wt.join("lib/f00.txt").exists());
}

/// What the agent was handed: a clean worktree with every file of the base.
fn assert_whole(seen: &Path) {
    let seen = std::fs::read_to_string(seen).expect("the agent ran");
    let total = FILES + 2;
    assert_eq!(seen, format!("status:0\ntracked:{total}\npresent:{total}\n"));
}

/// The stream's commit added its one file and deleted nothing.
fn assert_commit_deletes_nothing(repo: &TestRepo) {
    let root = repo.git_out(&["rev-list", "--max-parents=0", "main"]);
    let changed = repo.git_out(&["diff", "--name-status", root.trim(), "boulder/a"]);
    let lines: Vec<&str> = changed.lines().collect();
    assert!(lines.iter().all(|l| !l.starts_with('D')), "{changed}");
    assert!(lines.contains(&"A\tsrc/a/x.txt"), "{changed}");
    assert!(lines.iter().all(|l| *l == "A\tsrc/a/x.txt" || l.ends_with("prd.md")), "{changed}");
    let files = repo.git_out(&["ls-tree", "-r", "--name-only", "boulder/a"]);
    assert_eq!(files.lines().count(), FILES + 3, "{files}");
}

#[test]
fn stream_run_finishes_a_worktree_whose_checkout_was_killed() {
    let repo = repo();
    killed_init(&repo);
    let seen = repo.tmp.path().join("seen");
    let agent = inspector(repo.tmp.path(), &seen);
    let r = repo.boulder(&["stream", "run", "a", "--", "sh", agent.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("stream_run_finishes_a_worktree_whose_checkout_was_killed", r);
    assert_whole(&seen);
    assert_commit_deletes_nothing(&repo);
    assert_eq!(repo.stream_state("a")["status"], "COMPLETED");
    assert!(!repo.git_out(&["worktree", "list", "--porcelain"]).contains("initializing"));
    repo.assert_fsck();
}

#[test]
fn work_finishes_a_worktree_whose_checkout_was_killed() {
    let repo = repo();
    killed_init(&repo);
    let seen = repo.tmp.path().join("seen");
    let agent = inspector(repo.tmp.path(), &seen);
    let r = repo.boulder(&["work", "--", "sh", agent.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("work_finishes_a_worktree_whose_checkout_was_killed", r);
    assert_whole(&seen);
    assert_commit_deletes_nothing(&repo);
    assert_eq!(repo.stream_state("a")["status"], "MERGED");
    // What landed has every file of the base.
    let files = repo.git_out(&["ls-tree", "-r", "--name-only", "main"]);
    assert_eq!(files.lines().count(), FILES + 3, "{files}");
    repo.assert_fsck();
}

#[test]
fn a_worktree_made_without_a_checkout_is_finished_before_the_agent_runs() {
    // Made by hand with plain git, without an index or files: not handed over as it is either.
    let repo = repo();
    repo.git(&["branch", "boulder/a", "main"]).ok();
    let wt = repo.worktree("a");
    repo.git(&["worktree", "add", "-q", "--no-checkout", wt.to_str().unwrap(), "boulder/a"]).ok();
    assert!(!wt.join("lib/f00.txt").exists());
    let seen = repo.tmp.path().join("seen");
    let agent = inspector(repo.tmp.path(), &seen);
    let r = repo.boulder(&["stream", "run", "a", "--", "sh", agent.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("a_worktree_made_without_a_checkout_is_finished_before_the_agent_runs", r);
    assert_whole(&seen);
    assert_commit_deletes_nothing(&repo);
}

#[test]
fn stream_init_again_finishes_a_worktree_whose_checkout_was_killed() {
    let repo = repo();
    killed_init(&repo);
    let r = repo.boulder(&["stream", "init", "a"]).ok();
    assert_shown!("stream_init_again_finishes_a_worktree_whose_checkout_was_killed", r);
    let wt = repo.worktree("a");
    assert!(!repo.porcelain_dirty(&wt));
    assert_eq!(repo.git_out(&["-C", wt.to_str().unwrap(), "ls-files"]).lines().count(), FILES + 2);
    assert!(!repo.git_out(&["worktree", "list", "--porcelain"]).contains("initializing"));
}
