//! What a fleet must never do on a bad day: inherit trust, wait forever on a claim from another
//! machine, walk a refused op-log again on every pull, or leave an unmerge half done. Real
//! repositories, real remotes (bare repositories on disk or over `git daemon`), plain git checks.

use std::path::{Path, PathBuf};

use crate::common::*;

/// An agent finishing the story it is given: a file in the stream's folder, the story marked done
/// in the worktree's PRD, one commit named `<stream>: <story>`.
const FINISHER: &str = "#!/bin/sh\nset -e\nmkdir -p \"src/$BOULDER_STREAM\"\n\
echo \"$BOULDER_STORY\" > \"src/$BOULDER_STREAM/$BOULDER_STORY.txt\"\n\
sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
git add -A\ngit commit -q -m \"$BOULDER_STREAM: $BOULDER_STORY\"\n";

const PRD: &str = "# PRD\n\n### [ ] US-101: a part\nx\n";

/// Write `script` as a file in `dir`, returning its path.
fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

// ---------------------------------------------------------------------------------------------
// Trust is never inherited.

#[test]
fn boulder_trust_covers_the_plan_read_not_one_a_pull_brings_meanwhile() {
    // The same as `--trust` (fleet::work_trust_covers_the_plan_read_not_one_a_pull_brings_meanwhile),
    // given as BOULDER_TRUST=1: the worker's children must not inherit a blanket trust.
    let marks = tempfile::tempdir().unwrap();
    let mark = |name: &str| marks.path().join(name);
    let plan = |verify: &str| {
        format!(
            "version: 1\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\n\
             settings:\n  base_branch: main\n  verify: 'touch {verify}'\n  boulder:\n    cooldown: 10ms\n"
        )
    };
    let read = plan(mark("read").to_str().unwrap());
    let remote = Remote::new(&[(".agents/tasks/prd.md", PRD), (".boulder/streams.yaml", &read)]);
    let m1 = remote.machine("m1");
    let m2 = remote.machine("m2");
    m2.write(".boulder/streams.yaml", &plan(mark("unread").to_str().unwrap()));
    m2.commit_all("change verify");
    m2.git(&["push", "-q", "origin", "main"]).ok();
    let finisher = script(m1.tmp.path(), "finisher.sh", FINISHER);
    let r = m1
        .boulder_env(
            &m1.dir,
            &["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()],
            &[("BOULDER_TRUST", "1")],
        )
        .code(1);
    assert!(r.stderr.contains("changed since the worker was started with --trust"), "{}", r.stderr);
    assert!(!mark("unread").exists(), "the unread verify ran");
    assert!(!mark("read").exists());
}

#[test]
fn no_program_a_run_starts_sees_boulder_trust() {
    let repo = TestRepo::in_temp("repo");
    let envs = tempfile::tempdir().unwrap();
    let env_of = |what: &str| envs.path().join(what);
    let finisher = script(repo.tmp.path(), "finisher.sh", FINISHER);
    let agent = script(
        repo.tmp.path(),
        "agent.sh",
        &format!("#!/bin/sh\nenv > {}\nexec sh {}\n", env_of("agent").display(), finisher.display()),
    );
    let plan = format!(
        "version: 1\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\n    agent: fin\n\
         settings:\n  base_branch: main\n  setup: 'env > {}'\n  verify: 'env > {}'\n  agents:\n    fin: 'sh {}'\n",
        env_of("setup").display(),
        env_of("verify").display(),
        agent.display()
    );
    std::fs::create_dir_all(&repo.dir).unwrap();
    repo.git(&["init", "-q", "-b", "main"]).ok();
    repo.write(".agents/tasks/prd.md", PRD);
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("initial");
    // Untrusted: refused. Given BOULDER_TRUST=1: the worker runs everything…
    repo.boulder(&["work"]).code(1);
    let r = repo.boulder_env(&repo.dir, &["work"], &[("BOULDER_TRUST", "1")]).ok();
    assert!(r.stdout.lines().any(|l| l.starts_with("a ") && l.ends_with("merged here")), "{}", r.stdout);
    // …and none of the programs it started was given the variable.
    for what in ["agent", "setup", "verify"] {
        let env = std::fs::read_to_string(env_of(what)).unwrap_or_else(|e| panic!("{what} did not run: {e}"));
        assert!(env.contains("BOULDER_STREAM=a"), "{what}: {env}");
        assert!(!env.contains("BOULDER_TRUST"), "{what} inherited trust:\n{env}");
    }
}

// ---------------------------------------------------------------------------------------------
// Unmerge is crash-safe.

use crate::merge_queue::{finish, Served, PLAN};

fn unmerge_problems(m: &TestRepo) -> Vec<serde_json::Value> {
    let d = m.boulder(&["doctor", "--json"]).json();
    d["problems"].as_array().unwrap().iter().filter(|p| p["area"] == "merge").cloned().collect()
}

/// How many times the base `rev` (a `git log` range or ref) reverts stream auth.
fn reverts(subjects: &[String]) -> usize {
    subjects.iter().filter(|x| x.starts_with("Revert stream auth")).count()
}

#[test]
fn an_unmerge_through_a_remote_killed_at_any_step_is_finished_by_a_rerun() {
    for step in [
        "unmerge-journal",
        "unmerge-push",
        "unmerge-pushed",
        "unmerge-base-ref",
        "unmerge-base",
        "unmerge-stream-ref",
        "unmerge-rebuilt",
        "unmerge-record",
        "unmerge-state",
    ] {
        let s = Served::new(PLAN);
        let a = s.machine("alpha");
        finish(&a, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
        a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
        let landed = s.git(&a, &["rev-parse", "main"]);
        let cmd = ["stream", "unmerge", "auth", "--remote", "origin"];
        let r = a.boulder_env(&a.dir, &cmd, &[("BOULDER_FAILPOINT", step)]);
        assert!(r.stderr.contains(&format!("failpoint {step}")), "{step}: {}", r.stderr);
        a.assert_fsck();
        // doctor names the record and the exact command that finishes it.
        let problems = unmerge_problems(&a);
        assert_eq!(problems.len(), 1, "{step}: {problems:#?}");
        assert_eq!(problems[0]["fix"], "git boulder stream unmerge auth --remote origin", "{step}");
        assert!(a.dir.join(".git/boulder/unmerge/auth.json").is_file(), "{step}");
        let r = a.boulder(&cmd);
        assert_eq!(r.code, 0, "{step}: rerun failed\n{}\n{}", r.stdout, r.stderr);
        // One revert, one reopening, nothing twice; recorded once.
        assert_eq!(s.git(&a, &["rev-parse", "main~2"]), landed, "{step}");
        assert_eq!(reverts(&s.subjects(&a)), 1, "{step}: {:?}", s.subjects(&a));
        assert_eq!(rev(&a, "main"), s.git(&a, &["rev-parse", "main"]), "{step}");
        assert!(!a.dir.join("src/auth/login.rs").exists(), "{step}");
        assert_eq!(a.git_in(&a.worktree("auth"), &["status", "--porcelain"]).ok().stdout, "", "{step}");
        assert_eq!(a.git_in(&a.dir, &["status", "--porcelain"]).ok().stdout, "", "{step}");
        assert_eq!(rev(&a, "boulder/auth~1"), rev(&a, "main"), "{step}");
        assert_eq!(s.stream_state(&a, "auth")["status"], "COMPLETED", "{step}");
        assert_eq!(a.stream_state("auth")["status"], "COMPLETED", "{step}");
        let ops = a.git_out(&["log", "--format=%H", "refs/boulder/streams/auth"]);
        let unmerged =
            ops.lines().filter(|c| a.git_out(&["show", &format!("{c}:op.json")]).contains("\"unmerged\"")).count();
        assert_eq!(unmerged, 1, "{step}");
        assert!(!a.dir.join(".git/boulder/unmerge/auth.json").exists(), "{step}");
        assert!(unmerge_problems(&a).is_empty(), "{step}");
        a.assert_fsck();
        s.fsck(&a);
    }
}

#[test]
fn a_local_unmerge_killed_at_any_step_is_finished_by_a_rerun() {
    for step in [
        "unmerge-journal",
        "unmerge-base-ref",
        "unmerge-base",
        "unmerge-stream-ref",
        "unmerge-rebuilt",
        "unmerge-record",
        "unmerge-state",
    ] {
        let repo = TestRepo::with_files(&[
            (".agents/tasks/prd.md", crate::merge_queue::PRD),
            (".boulder/streams.yaml", PLAN),
            ("src/auth/mod.rs", "// auth\n"),
            ("README.md", "# sample\n"),
        ]);
        repo.boulder(&["stream", "init"]).ok();
        finish(&repo, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
        repo.boulder(&["stream", "merge", "auth"]).ok();
        let landed = rev(&repo, "main");
        let r = repo.boulder_env(&repo.dir, &["stream", "unmerge", "auth"], &[("BOULDER_FAILPOINT", step)]);
        assert!(r.stderr.contains(&format!("failpoint {step}")), "{step}: {}", r.stderr);
        repo.assert_fsck();
        let problems = unmerge_problems(&repo);
        assert_eq!(problems.len(), 1, "{step}: {problems:#?}");
        assert_eq!(problems[0]["fix"], "git boulder stream unmerge auth --no-remote", "{step}");
        let r = repo.boulder(&["stream", "unmerge", "auth"]);
        assert_eq!(r.code, 0, "{step}: rerun failed\n{}\n{}", r.stdout, r.stderr);
        assert_eq!(rev(&repo, "main~2"), landed, "{step}");
        let subjects: Vec<String> = repo.git_out(&["log", "--format=%s", "main"]).lines().map(String::from).collect();
        assert_eq!(reverts(&subjects), 1, "{step}: {subjects:?}");
        assert!(!repo.dir.join("src/auth/login.rs").exists(), "{step}");
        assert_eq!(repo.git_out(&["status", "--porcelain"]), "", "{step}");
        assert_eq!(rev(&repo, "boulder/auth~1"), rev(&repo, "main"), "{step}");
        assert_eq!(repo.stream_state("auth")["status"], "COMPLETED", "{step}");
        assert!(unmerge_problems(&repo).is_empty(), "{step}");
        repo.assert_fsck();
    }
}

#[test]
fn doctor_tells_of_a_revert_on_the_remote_that_state_does_not_know() {
    let s = Served::new(PLAN);
    let a = s.machine("alpha");
    let b = s.machine("beta");
    finish(&a, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    let cmd = ["stream", "unmerge", "auth", "--remote", "origin"];
    // alpha's unmerge is killed once the remote's base holds the revert: state still says MERGED.
    let r = a.boulder_env(&a.dir, &cmd, &[("BOULDER_FAILPOINT", "unmerge-pushed")]);
    assert!(r.stderr.contains("failpoint unmerge-pushed"), "{}", r.stderr);
    b.boulder(&["sync"]).ok();
    b.git(&["fetch", "-q", "origin"]).ok();
    assert_eq!(b.stream_state("auth")["status"], "MERGED");
    let d = b.boulder(&["doctor"]).code(1);
    assert!(
        d.stdout.contains("stream auth is recorded MERGED, but refs/remotes/origin/main holds its revert"),
        "{}",
        d.stdout
    );
    assert!(d.stdout.contains("fix: git boulder stream unmerge auth --remote origin"), "{}", d.stdout);
    // The fix, run on beta, records it without reverting again…
    let r = b.boulder(&cmd);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(reverts(&s.subjects(&b)), 1, "{:?}", s.subjects(&b));
    assert_eq!(s.stream_state(&b, "auth")["status"], "COMPLETED");
    assert!(unmerge_problems(&b).is_empty());
    // …and alpha's rerun finishes its own record without a second revert or record.
    let r = a.boulder(&cmd);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(reverts(&s.subjects(&a)), 1, "{:?}", s.subjects(&a));
    assert_eq!(a.stream_state("auth")["status"], "COMPLETED");
    assert!(unmerge_problems(&a).is_empty());
    a.assert_fsck();
    b.assert_fsck();
    s.fsck(&a);
}
