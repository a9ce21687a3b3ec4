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
    // The same as `--trust` (work_fleet::work_trust_covers_the_plan_read_not_one_a_pull_brings_meanwhile),
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
    // The plan names a temp folder: the agent's commit differs from run to run.
    let commit = m1.git_out(&["rev-parse", "--short=8", "boulder/a"]);
    assert_shown!(
        "boulder_trust_covers_the_plan_read_not_one_a_pull_brings_meanwhile",
        r.masked(&[(&commit, "[COMMIT]")])
    );
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

use crate::merge_remote::{finish, Served, PLAN};

fn merge_problems(m: &TestRepo) -> Vec<serde_json::Value> {
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
        let problems = merge_problems(&a);
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
        assert!(merge_problems(&a).is_empty(), "{step}");
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
            (".agents/tasks/prd.md", crate::merge_remote::PRD),
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
        let problems = merge_problems(&repo);
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
        assert!(merge_problems(&repo).is_empty(), "{step}");
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
    assert_shown!("doctor_tells_of_a_revert_on_the_remote_that_state_does_not_know", d);
    // The fix, run on beta, records it without reverting again…
    let r = b.boulder(&cmd);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(reverts(&s.subjects(&b)), 1, "{:?}", s.subjects(&b));
    assert_eq!(s.stream_state(&b, "auth")["status"], "COMPLETED");
    assert!(merge_problems(&b).is_empty());
    // …and alpha's rerun finishes its own record without a second revert or record.
    let r = a.boulder(&cmd);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(reverts(&s.subjects(&a)), 1, "{:?}", s.subjects(&a));
    assert_eq!(a.stream_state("auth")["status"], "COMPLETED");
    assert!(merge_problems(&a).is_empty());
    a.assert_fsck();
    b.assert_fsck();
    s.fsck(&a);
}

// ---------------------------------------------------------------------------------------------
// Claims from others are bounded.

const ONE_STREAM: &str = "version: 1\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\n\
settings:\n  base_branch: main\n  boulder:\n    cooldown: 10ms\n";

fn one_stream_remote() -> Remote {
    Remote::new(&[(".agents/tasks/prd.md", PRD), (".boulder/streams.yaml", ONE_STREAM), ("src/a/mod.rs", "// a\n")])
}

/// Wait (at most 120 s, then kill it and fail) for a child git-boulder to end.
fn wait_child(mut child: std::process::Child, what: &str) -> Run {
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return Run::from(child.wait_with_output().unwrap());
        }
        if start.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("{what} never ended:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn spawn(repo: &TestRepo, args: &[&str]) -> std::process::Child {
    let mut c = repo.command(bin());
    c.args(args)
        .current_dir(&repo.dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("git-boulder")
}

fn claim_problems(m: &TestRepo) -> Vec<serde_json::Value> {
    let d = m.boulder(&["doctor", "--json"]).json();
    d["problems"].as_array().unwrap().iter().filter(|p| p["area"] == "claim").cloned().collect()
}

#[test]
fn a_claim_that_expires_in_the_year_9000_is_invalid_and_never_waited_on() {
    let remote = one_stream_remote();
    let far = remote.machine("far");
    let b = remote.machine("beta");
    // far claims a, then forges its claim to last until the year 9000 (a parentless commit
    // holding only claim.json, as a claim is).
    far.boulder(&["stream", "claim", "a", "--remote", "origin", "--ttl", "1h"]).ok();
    far.git(&["fetch", "-q", "origin", "refs/boulder/claims/a"]).ok();
    let json = far.git_out(&["show", "FETCH_HEAD:claim.json"]);
    let mut claim: serde_json::Value = serde_json::from_str(&json).unwrap();
    claim["expires"] = "9000-01-01T00:00:00Z".into();
    std::fs::write(far.tmp.path().join("claim.json"), serde_json::to_string_pretty(&claim).unwrap() + "\n").unwrap();
    let blob = far.git_out(&["hash-object", "-w", far.tmp.path().join("claim.json").to_str().unwrap()]);
    let mut mktree = far.command("git");
    mktree.arg("mktree").current_dir(&far.dir).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = mktree.spawn().unwrap();
    {
        use std::io::Write;
        writeln!(child.stdin.take().unwrap(), "100644 blob {blob}\tclaim.json").unwrap();
    }
    let tree = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap().trim().to_string();
    let forged = far.git_out(&["commit-tree", &tree, "-m", "claim a by far"]);
    far.git(&["push", "-q", "-f", "origin", &format!("{forged}:refs/boulder/claims/a")]).ok();

    // status and doctor name it, its holder and its expiry.
    b.boulder(&["pull", "origin"]).ok();
    let st = b.boulder(&["status"]).ok();
    assert_shown!("a_claim_that_expires_in_the_year_9000_is_invalid_and_never_waited_on_2", st);
    let problems = claim_problems(&b);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0]["message"].as_str().unwrap().contains("held by far on"), "{problems:#?}");
    assert_eq!(problems[0]["fix"], "git boulder stream release a --remote origin --force");
    // work does not wait on it: it says so, takes a over and lands it.
    let finisher = script(b.tmp.path(), "finisher.sh", FINISHER);
    let r = wait_child(spawn(&b, &["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]), "work");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("until 9000-01-01T00:00:00Z is invalid"), "{}", r.stderr);
    assert!(r.stderr.contains("treating it as expired"), "{}", r.stderr);
    assert!(r.stdout.lines().any(|l| l.starts_with("a ") && l.ends_with("merged here")), "{}", r.stdout);
    assert_eq!(b.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]), "");
    // Nobody makes such a claim through git-boulder.
    let r = b.boulder(&["stream", "claim", "a", "--remote", "origin", "--ttl", "3h"]).code(2);
    assert_shown!("a_claim_that_expires_in_the_year_9000_is_invalid_and_never_waited_on", r);
}

#[test]
fn doctor_tells_of_a_claim_whose_worker_is_gone() {
    let remote = one_stream_remote();
    let m = remote.machine("alpha");
    let marker = m.tmp.path().join("agent-started");
    let sleepy = script(m.tmp.path(), "sleepy.sh", &format!("#!/bin/sh\ntouch {}\nsleep 30\n", marker.display()));
    let worker = spawn(&m, &["work", "--remote", "origin", "--", "sh", sleepy.to_str().unwrap()]);
    wait_for("the agent", || marker.exists());
    // While the worker lives, its claim is no problem.
    assert!(claim_problems(&m).is_empty(), "{:#?}", claim_problems(&m));
    // The worker dies at once (SIGKILL: no handler runs, the claim stays on the remote).
    let ok = std::process::Command::new("sh").args(["-c", &format!("kill -KILL {}", worker.id())]).status().unwrap();
    assert!(ok.success());
    let _ = wait_child(worker, "the killed worker");
    assert_ne!(m.git_out(&["ls-remote", "origin", "refs/boulder/claims/a"]), "");
    wait_for("doctor to tell of the claim", || !claim_problems(&m).is_empty());
    let problems = claim_problems(&m);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let message = problems[0]["message"].as_str().unwrap();
    assert!(message.starts_with("stream a is claimed on origin by this machine (alpha on "), "{message}");
    assert!(message.contains("no worker or run here holds it: its worker is gone"), "{message}");
    // A rerun takes it up again (renewing its own claim) and lands it.
    let finisher = script(m.tmp.path(), "finisher.sh", FINISHER);
    let r = m.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(claim_problems(&m).is_empty());
}

// ---------------------------------------------------------------------------------------------
// An op-log refused once is remembered by its tip.

/// Commits in the hostile op-log: one more than a pull checks.
const HOSTILE: u64 = 200_001;

/// Write `count` commits onto `reference` of `repo` with `git fast-import` (on top of its tip
/// when `on_top`): one tree for all of them, so only the count is hostile.
fn hostile_log(repo: &TestRepo, reference: &str, count: u64, on_top: bool) {
    use std::io::Write;
    let mut stream = Vec::with_capacity(count as usize * 120);
    for i in 0..count {
        writeln!(stream, "commit {reference}").unwrap();
        writeln!(stream, "committer git-boulder <git-boulder@localhost> {} +0000", 1_767_312_000 + i).unwrap();
        stream.extend_from_slice(b"data 3\nop\n");
        if i == 0 {
            if on_top {
                writeln!(stream, "from {reference}^0").unwrap();
            }
            stream.extend_from_slice(b"M 100644 inline op.json\ndata 3\n{}\nM 100644 inline state.json\ndata 3\n{}\n");
        }
    }
    stream.extend_from_slice(b"done\n");
    repo.fast_import(&stream);
}

/// `git boulder pull --json` with tracing on: the outcome of `refs/boulder/streams/x`, and stderr.
fn pull_x(m: &TestRepo) -> (serde_json::Value, String) {
    let started = std::time::Instant::now();
    let r = m.boulder_env(&m.dir, &["pull", "--json"], &[("BOULDER_TRACE", "1")]).code(1);
    // Shown, not asserted: what the memory of refusals saves.
    eprintln!("pull took {:?}", started.elapsed());
    let json = r.json();
    let x = json["refs"].as_array().unwrap().iter().find(|r| r["name"] == "refs/boulder/streams/x").cloned();
    (x.unwrap_or_else(|| panic!("{json}")), r.stderr)
}

#[test]
fn an_op_log_refused_once_is_not_walked_again_until_its_tip_changes() {
    let remote = Remote::new(&[("README.md", "hello\n")]);
    let far = remote.machine("far");
    hostile_log(&far, "refs/boulder/streams/x", HOSTILE, false);
    far.git(&["push", "-q", "origin", "refs/boulder/streams/x"]).ok();
    let near = remote.machine("near");

    // The first pull refuses it on its count, while listing it: no op or state was read.
    let (x, trace) = pull_x(&near);
    assert_eq!(x["result"], "refused", "{x}");
    assert!(x["why"].as_str().unwrap().contains("more than 200000 new commits"), "{x}");
    assert!(!trace.contains("validate:"), "{trace}");
    assert!(!trace.contains("refused before"), "{trace}");
    let memo = near.dir.join(".git/boulder/refused.json");
    let tip = far.git_out(&["rev-parse", "refs/boulder/streams/x"]);
    assert!(std::fs::read_to_string(&memo).unwrap().contains(&tip), "the refused tip is remembered");

    // The next pulls refuse the same tip at no cost, still saying so in one line.
    for _ in 0..2 {
        let (x, trace) = pull_x(&near);
        assert_eq!(x["result"], "refused", "{x}");
        let why = x["why"].as_str().unwrap();
        assert!(
            why.starts_with(
                "refused before at this tip, not checked again until refs/boulder/streams/x changes on origin"
            ),
            "{why}"
        );
        assert!(why.contains("more than 200000 new commits"), "{why}");
        assert!(trace.contains("pull: 1 op-log tip(s) refused before, not checked again"), "{trace}");
        let shown = near.boulder(&["pull"]).code(1).stdout;
        let lines: Vec<&str> = shown.lines().filter(|l| l.contains("refs/boulder/streams/x")).collect();
        assert_eq!(lines.len(), 1, "{shown}");
    }
    assert!(near.git(&["rev-parse", "-q", "--verify", "refs/boulder/streams/x"]).code == 1, "nothing was taken");

    // The remote's ref moves: it is checked again (and refused again).
    hostile_log(&far, "refs/boulder/streams/x", 1, true);
    far.git(&["push", "-q", "origin", "refs/boulder/streams/x"]).ok();
    let (x, trace) = pull_x(&near);
    assert_eq!(x["result"], "refused", "{x}");
    assert!(!x["why"].as_str().unwrap().contains("refused before"), "{x}");
    assert!(!trace.contains("refused before"), "{trace}");
    // Never pushed: the memory is this machine's.
    near.boulder(&["push"]);
    assert_eq!(far.git_out(&["ls-remote", "origin", "refs/boulder/*"]).lines().count(), 1);
    near.assert_fsck();
}

#[test]
fn doctor_names_the_exact_command_that_finishes_an_interrupted_merge() {
    // Through a remote: the record names it, and so does the fix.
    let s = Served::new(PLAN);
    let a = s.machine("alpha");
    finish(&a, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    let cmd = ["stream", "merge", "auth", "--remote", "origin"];
    let r = a.boulder_env(&a.dir, &cmd, &[("BOULDER_FAILPOINT", "queue-pushed")]);
    assert!(r.stderr.contains("failpoint queue-pushed"), "{}", r.stderr);
    let problems = merge_problems(&a);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(
        problems[0]["message"],
        "an interrupted merge of stream auth into main on origin is waiting to be finished"
    );
    assert_eq!(problems[0]["fix"], "git boulder stream merge auth --remote origin");
    a.boulder(&cmd).ok();
    assert!(merge_problems(&a).is_empty());
    assert_eq!(s.stream_state(&a, "auth")["status"], "MERGED");
    // Locally: --no-remote, which finishes it whatever settings.merge_remote says.
    let repo = TestRepo::with_files(&[
        (".agents/tasks/prd.md", crate::merge_remote::PRD),
        (".boulder/streams.yaml", PLAN),
        ("src/auth/mod.rs", "// auth\n"),
    ]);
    repo.boulder(&["stream", "init"]).ok();
    finish(&repo, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    let r = repo.boulder_env(&repo.dir, &["stream", "merge", "auth"], &[("BOULDER_FAILPOINT", "merge-base-worktree")]);
    assert!(r.stderr.contains("failpoint merge-base-worktree"), "{}", r.stderr);
    let problems = merge_problems(&repo);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0]["fix"], "git boulder stream merge auth --no-remote");
    repo.boulder(&["stream", "merge", "auth", "--no-remote"]).ok();
    assert!(merge_problems(&repo).is_empty());
    assert_eq!(repo.stream_state("auth")["status"], "MERGED");
    repo.assert_fsck();
}

#[test]
fn an_unmerge_the_remote_turns_down_leaves_nothing_to_finish() {
    let s = Served::new(PLAN);
    let a = s.machine("alpha");
    finish(&a, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    let landed = s.git(&a, &["rev-parse", "main"]);
    // The remote's own rule: its base is frozen.
    let hook = s.remote.bare.join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\nwhile read old new name; do [ \"$name\" = refs/heads/main ] && { echo frozen >&2; exit 1; }; done\nexit 0\n").unwrap();
    let ok = std::process::Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    assert!(ok.success());
    let r = a.boulder(&["stream", "unmerge", "auth", "--remote", "origin"]).code(1);
    assert_shown!("an_unmerge_the_remote_turns_down_leaves_nothing_to_finish", r);
    assert_eq!(s.git(&a, &["rev-parse", "main"]), landed);
    assert!(!a.dir.join(".git/boulder/unmerge/auth.json").exists());
    assert!(merge_problems(&a).is_empty(), "{:#?}", merge_problems(&a));
    assert_eq!(a.stream_state("auth")["status"], "MERGED");
}
