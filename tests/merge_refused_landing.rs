//! A refused landing is recorded and respected: the `refused` op in the stream's op-log (pushed
//! to the remote it was refused on), `NEEDS_ATTENTION` on every machine, no worker taking the
//! stream until its branch gets a new commit or `git boulder stream retry`, its dependants
//! waiting, a refusal killed while it is recorded left whole or absent, and the queue positions
//! of `status --watch` as the worker decides. Machines are clones served by `git daemon`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::*;

/// An agent finishing the story it is given (as in the fleet tests).
const FINISHER: &str = "#!/bin/sh\nset -e\nmkdir -p \"src/$BOULDER_STREAM\"\n\
echo \"$BOULDER_STORY\" > \"src/$BOULDER_STREAM/$BOULDER_STORY.txt\"\n\
sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
git add -A\ngit commit -q -m \"$BOULDER_STREAM: $BOULDER_STORY\"\n";

/// Three streams: a, b after a, and d; one story each, disjoint paths.
fn files() -> Vec<(String, String)> {
    let prd = "# PRD: Refusals\n\n## Stories\n\n### [ ] US-101: a part\nIn `src/a/`.\n\n\
### [ ] US-201: b part\nIn `src/b/`.\n\n### [ ] US-401: d part\nIn `src/d/`.\n\n";
    let plan = concat!(
        "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n",
        "  a:\n    stories: [US-101]\n    paths: [src/a/**]\n",
        "  b:\n    stories: [US-201]\n    paths: [src/b/**]\n    depends_on: [a]\n",
        "  d:\n    stories: [US-401]\n    paths: [src/d/**]\n",
        "settings:\n  base_branch: main\n  merge_strategy: rebase\n  boulder:\n    cooldown: 10ms\n    max_failures: 2\n",
    );
    let mut files =
        vec![(".agents/tasks/prd.md".to_string(), prd.to_string()), (".boulder/streams.yaml".into(), plan.into())];
    for n in ["a", "b", "d"] {
        files.push((format!("src/{n}/mod.rs"), format!("// {n}\n")));
    }
    files
}

fn as_refs(files: &[(String, String)]) -> Vec<(&str, &str)> {
    files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect()
}

fn agent(dir: &Path) -> PathBuf {
    let p = dir.join("finisher.sh");
    std::fs::write(&p, FINISHER).unwrap();
    p
}

/// The ops of kind `kind` in `stream`'s op-log.
fn ops(repo: &TestRepo, stream: &str, kind: &str) -> Vec<serde_json::Value> {
    let log = repo.boulder(&["log", stream, "--json"]).ok().json();
    log.as_array().unwrap().iter().filter(|e| e["op"]["kind"] == kind).map(|e| e["op"].clone()).collect()
}

/// The row of `stream` in `status --json`.
fn row(repo: &TestRepo, stream: &str) -> serde_json::Value {
    let st = repo.boulder(&["status", "--json"]).ok().json();
    st["streams"].as_array().unwrap().iter().find(|s| s["name"] == stream).unwrap().clone()
}

/// Stream a's branch on `m` changes src/a/mod.rs, its story recorded done; meanwhile the base
/// (on `base_owner`, pushed to origin when `push`) changed the same lines: a conflict.
fn conflicting_a(m: &TestRepo, base_owner: &TestRepo, push: bool) {
    m.boulder(&["stream", "init", "a"]).ok();
    let wt = m.worktree("a");
    commit_in(m, &wt, "src/a/mod.rs", "// a, by the stream\n", "a: rewrite");
    m.boulder(&["prd", "done", "US-101"]).ok();
    base_owner.write("src/a/mod.rs", "// a, on the base\n");
    base_owner.commit_all("base: rewrite a");
    if push {
        base_owner.git(&["push", "-q", "origin", "main"]).ok();
    }
}

#[test]
fn a_refused_landing_is_recorded_pushed_and_no_other_machine_lands_it() {
    let files = files();
    let remote = Remote::new(&as_refs(&files));
    let server = GitDaemon::serve(&remote.root);
    let url = server.url("remote.git");
    let machines: Vec<TestRepo> = ["alpha", "beta", "gamma"].iter().map(|n| remote.machine_from(n, &url)).collect();
    let (alpha, beta, gamma) = (&machines[0], &machines[1], &machines[2]);
    alpha.boulder(&["push"]).ok();
    // Beta landed a change to the same lines first.
    conflicting_a(alpha, beta, true);
    let tip = rev(alpha, "boulder/a");
    let r = alpha.boulder(&["stream", "merge", "a", "--remote", "origin"]).code(1);
    assert_shown!("a_refused_landing_is_recorded_pushed_and_no_other_machine_lands_it", r);
    // Recorded in a's op-log, and on the remote.
    let refused = ops(alpha, "a", "refused");
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert_eq!(refused[0]["data"]["refusal"], "conflict");
    assert_eq!(refused[0]["data"]["stream_tip"], tip.as_str());
    assert_eq!(refused[0]["data"]["remote"], "origin");
    let on_remote = alpha.git_out(&["ls-remote", "origin", "refs/boulder/streams/a"]);
    assert_eq!(on_remote.split_whitespace().next(), Some(rev(alpha, "refs/boulder/streams/a").as_str()));
    // Every other machine sees it after a pull, as its own status with the command that resolves it.
    for m in [beta, gamma] {
        m.boulder(&["pull"]).ok();
        let a = row(m, "a");
        assert_eq!(a["status"], "NEEDS_ATTENTION", "{a:#}");
        assert_eq!(a["attention"]["refusal"], "conflict");
        assert_eq!(a["attention"]["command"], "git boulder stream retry a");
        assert_eq!(a["attention"]["actor"], "alpha");
    }
    // Gamma's worker takes neither a (nor lands it empty) nor b, which waits for it; d lands.
    let finisher = agent(gamma.tmp.path());
    let r = gamma.boulder(&["work", "--remote", "origin", "--poll", "200ms", "--", "sh", finisher.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let line = |n: &str| r.stdout.lines().find(|l| l.starts_with(&format!("{n} "))).unwrap_or_default().to_string();
    assert!(line("a").contains("needs attention: refused (conflict)"), "{}", r.stdout);
    assert!(line("a").contains("git boulder stream retry a"), "{}", r.stdout);
    assert!(line("b").contains("blocked by a"), "{}", r.stdout);
    assert!(line("d").contains("merged here"), "{}", r.stdout);
    gamma.git(&["fetch", "-q", "origin"]).ok();
    let log = gamma.git_out(&["log", "--format=%s", "origin/main"]);
    assert!(!log.lines().any(|s| s.starts_with("a: ") || s.starts_with("b: ")), "{log}");
    assert!(ops(gamma, "a", "merged").is_empty() && ops(gamma, "a", "status").is_empty());
    assert_eq!(gamma.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]), "");

    // Alpha resolves it with a new commit on the branch (on top of the remote's base) and pushes
    // the branch: gamma's worker now takes a, continues from that branch and lands it, then b.
    let wt = alpha.worktree("a");
    alpha.git_in(&wt, &["fetch", "-q", "origin"]).ok();
    // The conflict resolved for the stream's side; the rebase carries its commit's note along.
    alpha.git_in(&wt, &["rebase", "-q", "-X", "theirs", "origin/main"]).ok();
    commit_in(alpha, &wt, "src/a/resolved.txt", "resolved\n", "a: resolved");
    assert_eq!(row(alpha, "a")["status"], "COMPLETED", "a new commit here ends the refusal here");
    alpha.git_in(&wt, &["push", "-q", "origin", "+boulder/a"]).ok();
    // The notes of the rebased commits too: without them no machine could tell a: rewrite landed.
    alpha.boulder(&["push"]).ok();
    let r = gamma.boulder(&["work", "--remote", "origin", "--poll", "200ms", "--", "sh", finisher.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    gamma.git(&["fetch", "-q", "origin"]).ok();
    let log = gamma.git_out(&["log", "--format=%s", "origin/main"]);
    assert!(log.lines().any(|s| s == "a: resolved"), "{log}");
    assert!(log.lines().any(|s| s == "b: US-201"), "{log}");
    beta.boulder(&["pull"]).ok();
    assert_eq!(row(beta, "a")["status"], "MERGED");
    assert!(row(beta, "a").get("attention").is_none());
    gamma.assert_fsck();
}

#[test]
fn stream_retry_clears_a_refusal_and_is_shared() {
    let files = files();
    let remote = Remote::new(&as_refs(&files));
    let alpha = remote.machine("alpha");
    let beta = remote.machine("beta");
    conflicting_a(&alpha, &beta, true);
    alpha.boulder(&["stream", "merge", "a", "--remote", "origin"]).code(1);
    beta.boulder(&["pull"]).ok();
    assert_eq!(row(&beta, "a")["status"], "NEEDS_ATTENTION");
    // Retried on beta, pushed: alpha sees it cleared after a pull.
    let r = beta.boulder(&["stream", "retry", "a", "--remote", "origin"]).ok();
    assert_shown!("retry_clears_the_refusal", r);
    assert_eq!(ops(&beta, "a", "retried").len(), 1);
    alpha.boulder(&["pull"]).ok();
    assert_eq!(row(&alpha, "a")["status"], "COMPLETED");
    assert_eq!(ops(&alpha, "a", "retried")[0]["actor"], "beta");
    // Nothing left to clear.
    let r = alpha.boulder(&["stream", "retry", "a"]).ok();
    assert_shown!("retry_with_nothing_to_clear", r);
    assert_eq!(ops(&alpha, "a", "retried").len(), 1);
}

#[test]
fn a_refused_landing_on_one_machine_status_and_work() {
    let files = files();
    let repo = TestRepo::with_files(&as_refs(&files));
    repo.git(&["config", "boulder.actor", "here"]).ok();
    conflicting_a(&repo, &repo, false);
    let r = repo.boulder(&["stream", "merge", "a"]).code(1);
    assert_shown!("local_merge_refused", r);
    assert_eq!(ops(&repo, "a", "refused").len(), 1);
    // The same refusal again (a rerun) is not recorded twice.
    repo.boulder(&["stream", "merge", "a"]).code(1);
    assert_eq!(ops(&repo, "a", "refused").len(), 1);
    // A dry run records nothing.
    repo.boulder(&["stream", "merge", "a", "--dry-run"]).code(1);
    assert_eq!(ops(&repo, "a", "refused").len(), 1);
    assert_shown!("status_needs_attention", repo.boulder(&["status"]));
    let finisher = agent(repo.tmp.path());
    let r = repo.boulder(&["work", "--", "sh", finisher.to_str().unwrap()]).code(1);
    let summary: Vec<&str> = r.stdout.lines().collect();
    insta::assert_snapshot!("work_leaves_a_refused_stream", summary.join("\n"));
    repo.boulder(&["stream", "retry", "a"]).ok();
    assert_eq!(row(&repo, "a")["status"], "COMPLETED");
    // Retried, the landing meets the same conflict and is recorded again.
    repo.boulder(&["stream", "merge", "a"]).code(1);
    assert_eq!(ops(&repo, "a", "refused").len(), 2);
}

#[test]
fn refusals_that_pass_by_themselves_are_not_recorded() {
    let files = files();
    let repo = TestRepo::with_files(&as_refs(&files));
    conflicting_a(&repo, &repo, false);
    // Stories not done: not recorded.
    repo.boulder(&["prd", "undone", "US-101"]).ok();
    repo.boulder(&["stream", "merge", "a"]).code(1);
    // b depends on a, not merged: not recorded.
    repo.boulder(&["stream", "init", "b"]).ok();
    repo.boulder(&["stream", "merge", "b", "--force"]).code(1);
    // A stream without a branch: a usage error.
    repo.boulder(&["stream", "merge", "d"]).code(2);
    for n in ["a", "b"] {
        assert!(ops(&repo, n, "refused").is_empty(), "{n}");
    }
    assert_eq!(repo.git(&["rev-parse", "-q", "--verify", "refs/boulder/streams/d"]).code, 1);
}

/// `kill -9` while a refusal is recorded (before its op, or after it before the push): the op is
/// whole or absent, and the rerun records it once and pushes it.
#[test]
fn a_refusal_killed_while_recorded_is_whole_or_absent_and_a_rerun_finishes() {
    for step in ["refusal-record", "refusal-recorded"] {
        let files = files();
        let remote = Remote::new(&as_refs(&files));
        let alpha = remote.machine("alpha");
        let beta = remote.machine("beta");
        conflicting_a(&alpha, &beta, true);
        let r = alpha.boulder_env(
            &alpha.dir,
            &["stream", "merge", "a", "--remote", "origin"],
            &[("BOULDER_FAILPOINT", step)],
        );
        assert!(r.stderr.contains(&format!("failpoint {step} reached")), "{step}: {}", r.stderr);
        let recorded = ops(&alpha, "a", "refused").len();
        assert_eq!(recorded, usize::from(step == "refusal-recorded"), "{step}");
        alpha.boulder(&["doctor"]);
        alpha.assert_fsck();
        alpha.boulder(&["stream", "merge", "a", "--remote", "origin"]).code(1);
        assert_eq!(ops(&alpha, "a", "refused").len(), 1, "{step}");
        beta.boulder(&["pull"]).ok();
        assert_eq!(ops(&beta, "a", "refused").len(), 1, "{step}");
        assert_eq!(row(&beta, "a")["status"], "NEEDS_ATTENTION", "{step}");
    }
}

/// `status --watch` (not on a terminal) shows a refused stream, a failed one and their dependants
/// as the worker treats them: never `ready`.
#[test]
fn status_watch_shows_refused_and_failed_streams_as_such() {
    let files = files();
    let repo = TestRepo::with_files(&as_refs(&files));
    conflicting_a(&repo, &repo, false);
    repo.boulder(&["stream", "merge", "a"]).code(1);
    repo.boulder(&["stream", "init", "d"]).ok();
    repo.boulder(&["stream", "run", "d", "--", "true"]).code(1);
    assert_eq!(row(&repo, "d")["status"], "FAILED");
    let mut c = Command::new(bin());
    fixed_env(&mut c, &repo.home);
    let mut child: Child = c
        .args(["status", "--watch"])
        .current_dir(&repo.dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let into = lines.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            into.lock().unwrap().push(line);
        }
    });
    wait_for("the first block", || lines.lock().unwrap().len() >= 5);
    let _ = child.kill();
    let _ = child.wait();
    let block: Vec<String> = lines.lock().unwrap()[1..5].to_vec();
    insta::assert_snapshot!("watch_refused_and_failed", block.join("\n"));
    let row = |n: &str| block.iter().find(|l| l.starts_with(&format!("{n} "))).unwrap().clone();
    assert!(row("a").contains("NEEDS_ATTENTION") && row("a").contains("needs attention"), "{block:?}");
    assert!(row("b").contains("after a"), "{block:?}");
    assert!(row("d").contains("FAILED") && row("d").contains("failed") && !row("d").contains("ready"), "{block:?}");
}

/// settings.auto_merge: a run that completes and whose landing is refused records the refusal.
#[test]
fn auto_merge_records_its_refusal() {
    let files = files();
    let repo = TestRepo::with_files(&as_refs(&files));
    repo.with_settings("  auto_merge: true\n");
    repo.boulder(&["stream", "init", "a"]).ok();
    repo.write("src/a/mod.rs", "// a, on the base\n");
    repo.commit_all("base: rewrite a");
    let script = repo.tmp.path().join("rewrite.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nset -e\necho '// a, by the agent' > src/a/mod.rs\n\
sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
git add -A\ngit commit -q -m \"a: $BOULDER_STORY\"\n",
    )
    .unwrap();
    let r = repo.boulder(&["stream", "run", "a", "--", "sh", script.to_str().unwrap()]).code(1);
    assert_shown!("auto_merge_records_its_refusal", r);
    let refused = ops(&repo, "a", "refused");
    assert_eq!(refused.len(), 1, "{}", r.stderr);
    assert_eq!(refused[0]["data"]["refusal"], "conflict");
    assert_eq!(row(&repo, "a")["status"], "NEEDS_ATTENTION");
}
