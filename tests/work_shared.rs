//! Work in progress is shared: `git boulder work --remote R` pushes the stream's branch (under a
//! lease) and its state after each agent iteration and before it lets a claim go, so every
//! machine sees the progress after a pull, and a machine that takes a stream over continues from
//! the branch the last one pushed: no commit lost, no story redone. Three clones over
//! `git daemon` on 127.0.0.1; results checked with plain git.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Finishes the story it is given: a file, the story ticked in the worktree's PRD, one commit.
const FINISHER: &str = "#!/bin/sh\nset -e\nmkdir -p \"src/$BOULDER_STREAM\"\n\
echo \"$BOULDER_STORY\" > \"src/$BOULDER_STREAM/$BOULDER_STORY.txt\"\n\
sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
git add -A\ngit commit -q -m \"$BOULDER_STREAM: $BOULDER_STORY\"\n";

/// [`FINISHER`] that also records the story done in the shared state (`git boulder prd done`), as
/// other machines count a stream's progress.
fn recorder() -> String {
    format!("#!/bin/sh\nset -e\ngit boulder prd done \"$BOULDER_STORY\"\n{}", &FINISHER[17..])
}

/// One stream, three stories.
fn remote() -> Remote {
    Remote::new(&[
        (
            ".agents/tasks/prd.md",
            "# PRD\n\n### [ ] US-101: one\nx\n\n### [ ] US-102: two\nx\n\n### [ ] US-103: three\nx\n",
        ),
        (
            ".boulder/streams.yaml",
            "version: 1\nstreams:\n  a:\n    stories: [US-101, US-102, US-103]\n    paths: [src/a/**]\n\
             settings:\n  base_branch: main\n  merge_strategy: rebase\n  boulder:\n    cooldown: 10ms\n    max_failures: 2\n",
        ),
        ("src/a/mod.rs", "// a\n"),
    ])
}

fn agent(dir: &Path, name: &str, script: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, script).unwrap();
    p
}

fn start(repo: &TestRepo, args: &[&str]) -> Child {
    let mut c = Command::new(bin());
    fixed_env(&mut c, &repo.home);
    c.args(args).current_dir(&repo.dir).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("git-boulder")
}

/// A child killed when the test ends, whatever way it ends (a failed assertion too).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn subjects(repo: &TestRepo, rev: &str) -> Vec<String> {
    repo.git_out(&["log", "--format=%s", rev]).lines().map(String::from).collect()
}

fn count(subjects: &[String], s: &str) -> usize {
    subjects.iter().filter(|x| *x == s).count()
}

fn remote_tip(repo: &TestRepo, r: &str) -> Option<String> {
    let out = repo.git_out(&["ls-remote", "origin", r]);
    out.split_whitespace().next().map(String::from)
}

/// Each story committed exactly once on the remote's base.
fn assert_landed_once(m: &TestRepo) {
    m.git(&["fetch", "-q", "origin"]).ok();
    let log = subjects(m, "origin/main");
    for s in ["a: US-101", "a: US-102", "a: US-103"] {
        assert_eq!(count(&log, s), 1, "{log:?}");
    }
}

#[test]
fn a_killed_workers_stream_is_finished_by_another_machine_from_its_pushed_branch() {
    let remote = remote();
    let d = GitDaemon::serve(&remote.root);
    let url = d.url("remote.git");
    let m1 = remote.machine_from("alpha", &url);
    let m2 = remote.machine_from("beta", &url);
    let m3 = remote.machine_from("gamma", &url);
    // alpha's agent finishes the first two stories, and hangs on the third.
    let hung = m1.tmp.path().join("hung");
    let script = format!(
        "#!/bin/sh\nif [ \"$BOULDER_STORY\" = US-103 ]; then touch {}; sleep 120; exit 0; fi\n{}",
        hung.display(),
        &recorder()[10..]
    );
    let slow = agent(m1.tmp.path(), "slow.sh", &script);
    let mut w1 = KillOnDrop(start(&m1, &["work", "--remote", "origin", "--", "sh", slow.to_str().unwrap()]));
    wait_for("alpha's agent on US-103", || hung.exists());
    // While alpha still runs, gamma sees its progress after a pull: RUNNING, 2/3, 2 iterations.
    let mut last = serde_json::Value::Null;
    let started = Instant::now();
    while !(last["status"] == "RUNNING" && last["progress"]["done"] == 2 && last["iteration"] == 2) {
        assert!(started.elapsed() < Duration::from_secs(90), "gamma never saw alpha's progress: {last}");
        m3.boulder(&["pull"]).ok();
        last = m3.boulder(&["status", "--json"]).ok().json()["streams"][0].clone();
    }
    assert!(w1.0.try_wait().unwrap().is_none(), "alpha's worker is still running");
    let shared = remote_tip(&m3, "refs/heads/boulder/a").expect("alpha's branch is on the remote");
    // alpha dies outright.
    w1.0.kill().unwrap();
    w1.0.wait().unwrap();
    // Its claim is freed by hand; beta takes the stream over and lands it.
    m2.boulder(&["pull"]).ok();
    m2.boulder(&["stream", "release", "a", "--remote", "origin", "--force"]).ok();
    let finisher = agent(m2.tmp.path(), "finisher.sh", &recorder());
    let r = m2.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains(&format!("[a] continuing from origin's boulder/a ({})", &shared[..8])), "{}", r.stderr);
    // None redone: beta ran only the third story.
    assert_shown!("a_killed_workers_stream_is_finished_by_another_machine_from_its_pushed_branch", r);
    assert!(!r.stderr.contains("US-101 one") && !r.stderr.contains("US-102 two"), "{}", r.stderr);
    // None lost: alpha's pushed commits are in the landed base, each story once.
    m2.git(&["fetch", "-q", "origin"]).ok();
    m2.git(&["merge-base", "--is-ancestor", &shared, "origin/main"]).ok();
    assert_landed_once(&m2);
    m2.assert_fsck();
}

#[test]
fn a_kill_at_each_sharing_step_is_finished_by_a_rerun() {
    for step in ["progress-branch-pushed", "progress-state-pushed"] {
        let remote = remote();
        let m = remote.machine("alpha");
        let finisher = agent(m.tmp.path(), "finisher.sh", FINISHER);
        let f = finisher.to_str().unwrap();
        let r = m.boulder_env(&m.dir, &["work", "--remote", "origin", "--", "sh", f], &[("BOULDER_FAILPOINT", step)]);
        assert_ne!(r.code, 0, "{step}: {}", r.stderr);
        assert!(r.stderr.contains(&format!("failpoint {step} reached")), "{step}: {}", r.stderr);
        // The first iteration's commit is on the remote's stream branch already.
        let tip = remote_tip(&m, "refs/heads/boulder/a").expect("the branch was pushed");
        assert_eq!(m.git_out(&["log", "-1", "--format=%s", &tip]).trim(), "a: US-101", "{step}");
        // The rerun finishes: everything lands once, nothing is left claimed.
        let r = m.boulder(&["work", "--remote", "origin", "--", "sh", f]);
        assert_eq!(r.code, 0, "{step}: {}\n{}", r.stdout, r.stderr);
        assert!(!r.stderr.contains("iteration 1: US-101"), "{step}: {}", r.stderr);
        assert_landed_once(&m);
        assert_eq!(m.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]), "", "{step}");
        m.assert_fsck();
    }
}

#[test]
fn a_stream_run_killed_between_branch_and_state_is_caught_up_by_the_next_share() {
    let remote = remote();
    let m = remote.machine("alpha");
    m.boulder(&["stream", "init", "a"]).ok();
    let finisher = agent(m.tmp.path(), "finisher.sh", FINISHER);
    let f = finisher.to_str().unwrap();
    let run = ["stream", "run", "a", "--worker", "--push-to", "origin", "--max-iterations", "1", "--", "sh", f];
    let r = m.boulder_env(&m.dir, &run, &[("BOULDER_FAILPOINT", "progress-branch-pushed")]);
    assert_ne!(r.code, 0);
    // The branch is there, the state not yet.
    assert!(remote_tip(&m, "refs/heads/boulder/a").is_some());
    assert!(remote_tip(&m, "refs/boulder/streams/a").is_none(), "{}", m.git_out(&["ls-remote", "origin"]));
    // The next iteration shares its branch and the state both.
    let r = m.boulder(&run);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_shown!("a_stream_run_killed_between_branch_and_state_is_caught_up_by_the_next_share", r);
    let tip = remote_tip(&m, "refs/heads/boulder/a").unwrap();
    assert_eq!(tip, rev(&m, "boulder/a"));
    assert_eq!(
        m.git_out(&["log", "--format=%s", &tip]).lines().take(2).collect::<Vec<_>>(),
        ["a: US-102", "a: US-101"]
    );
    assert!(remote_tip(&m, "refs/boulder/streams/a").is_some());
}

#[test]
fn work_brings_a_branch_that_is_behind_up_and_refuses_one_that_diverged() {
    let remote = remote();
    let m1 = remote.machine("alpha");
    let m2 = remote.machine("beta");
    // alpha shares one story's work on the stream's branch.
    m1.boulder(&["stream", "init", "a"]).ok();
    let finisher = agent(m1.tmp.path(), "finisher.sh", FINISHER);
    let run = ["stream", "run", "a", "--worker", "--push-to", "origin", "--max-iterations", "1", "--", "sh"];
    let mut args = run.to_vec();
    args.push(finisher.to_str().unwrap());
    m1.boulder(&args).ok();
    let shared = remote_tip(&m1, "refs/heads/boulder/a").unwrap();
    // beta made the stream's worktree before: its branch is behind the remote's.
    m2.boulder(&["stream", "init", "a"]).ok();
    let behind = rev(&m2, "boulder/a");
    let r = {
        let f = agent(m2.tmp.path(), "finisher.sh", FINISHER);
        m2.boulder(&["work", "--remote", "origin", "--", "sh", f.to_str().unwrap()])
    };
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("work_continues_a_branch_behind", r);
    assert_ne!(behind, shared);
    assert_landed_once(&m2);

    // Diverged: gamma's local branch has a commit the remote's lacks, and the other way round.
    let remote = self::remote();
    let m1 = remote.machine("alpha");
    let m3 = remote.machine("gamma");
    m1.boulder(&["stream", "init", "a"]).ok();
    commit_in(&m1, &m1.worktree("a"), "src/a/one.txt", "1\n", "a: alpha's");
    m1.git_in(&m1.worktree("a"), &["push", "-q", "origin", "boulder/a"]).ok();
    m3.boulder(&["stream", "init", "a"]).ok();
    commit_in(&m3, &m3.worktree("a"), "src/a/two.txt", "2\n", "a: gamma's");
    let ours = rev(&m3, "boulder/a");
    let theirs = remote_tip(&m3, "refs/heads/boulder/a").unwrap();
    let f = agent(m3.tmp.path(), "finisher.sh", FINISHER);
    let r = m3.boulder(&["work", "--remote", "origin", "--", "sh", f.to_str().unwrap()]).code(1);
    assert_shown!("work_refuses_a_diverged_branch", r);
    assert!(!r.stderr.contains("iteration 1"), "{}", r.stderr);
    // Nothing moved, here or there; the claim was let go.
    assert_eq!(rev(&m3, "boulder/a"), ours);
    assert_eq!(remote_tip(&m3, "refs/heads/boulder/a").unwrap(), theirs);
    assert_eq!(m3.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]), "");
}

#[test]
fn a_worker_that_cannot_push_its_branch_says_so_and_keeps_the_claim() {
    let remote = remote();
    // The remote takes the state and the base, never a stream branch.
    let hook = remote.bare.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nwhile read old new ref; do case \"$ref\" in refs/heads/boulder/*) echo \"no stream branches here\"; exit 1;; esac; done\n",
    )
    .unwrap();
    let out = Command::new("chmod").arg("+x").arg(&hook).output().unwrap();
    assert!(out.status.success());
    let m = remote.machine("alpha");
    let f = agent(m.tmp.path(), "finisher.sh", FINISHER);
    let r = m.boulder(&["work", "--remote", "origin", "--", "sh", f.to_str().unwrap()]).code(1);
    assert_shown!("a_worker_that_cannot_push_its_branch_says_so_and_keeps_the_claim", r);
    assert!(m.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]).contains("refs/boulder/claims/a"));
    // The state went out all the same: other machines see the progress.
    assert!(remote_tip(&m, "refs/boulder/streams/a").is_some());
    assert!(remote_tip(&m, "refs/heads/boulder/a").is_none());
}

#[test]
fn a_stream_whose_claim_expired_is_taken_over_from_the_branch_its_dead_worker_pushed() {
    let remote = remote();
    let m1 = remote.machine("alpha");
    let m2 = remote.machine("beta");
    // alpha finishes US-101, hangs on US-102, and dies without releasing its claim.
    let hung = m1.tmp.path().join("hung");
    let script = format!(
        "#!/bin/sh\nif [ \"$BOULDER_STORY\" = US-102 ]; then touch {}; sleep 120; exit 0; fi\n{}",
        hung.display(),
        &recorder()[10..]
    );
    let slow = agent(m1.tmp.path(), "slow.sh", &script);
    let mut w1 = KillOnDrop(start(&m1, &["work", "--remote", "origin", "--", "sh", slow.to_str().unwrap()]));
    wait_for("alpha's agent on US-102", || hung.exists());
    let shared = remote_tip(&m2, "refs/heads/boulder/a").expect("alpha's branch is on the remote");
    w1.0.kill().unwrap();
    w1.0.wait().unwrap();
    assert!(m2.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]).contains("claims/a"));
    // Two hours on, the claim has expired: beta takes the stream over from alpha's branch.
    m2.clock.advance(Duration::from_secs(2 * 3600));
    let finisher = agent(m2.tmp.path(), "finisher.sh", &recorder());
    let r = m2.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains(&format!("[a] continuing from origin's boulder/a ({})", &shared[..8])), "{}", r.stderr);
    assert!(r.stderr.contains("[a] iteration 1: US-102") && !r.stderr.contains("US-101 one"), "{}", r.stderr);
    m2.git(&["fetch", "-q", "origin"]).ok();
    m2.git(&["merge-base", "--is-ancestor", &shared, "origin/main"]).ok();
    assert_landed_once(&m2);
}

#[test]
fn commits_pushed_to_the_stream_branch_by_someone_else_are_never_pushed_over() {
    let remote = remote();
    let m1 = remote.machine("alpha");
    let m2 = remote.machine("beta");
    m1.boulder(&["stream", "init", "a"]).ok();
    let finisher = agent(m1.tmp.path(), "finisher.sh", FINISHER);
    let f = finisher.to_str().unwrap();
    let run = ["stream", "run", "a", "--worker", "--push-to", "origin", "--max-iterations", "1", "--", "sh", f];
    m1.boulder(&run).ok();
    // Someone else adds a commit to the stream's branch on the remote.
    m2.git(&["fetch", "-q", "origin", "boulder/a:boulder/a"]).ok();
    m2.git(&["switch", "-q", "boulder/a"]).ok();
    m2.write("src/a/theirs.txt", "theirs\n");
    m2.commit_all("a: theirs");
    m2.git(&["push", "-q", "origin", "boulder/a"]).ok();
    let theirs = rev(&m2, "boulder/a");
    // alpha's next iteration is not pushed over it: it says so, and keeps going.
    let r = m1.boulder(&run);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_shown!("commits_pushed_to_the_stream_branch_by_someone_else_are_never_pushed_over", r);
    assert_eq!(remote_tip(&m1, "refs/heads/boulder/a").unwrap(), theirs);
}
