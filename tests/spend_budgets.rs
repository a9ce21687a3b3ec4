//! Budgets that hold: `stream run` ends before another iteration once its stream's budget is
//! spent, `spend reset` and a raised budget resume it, `work` leaves a spent stream alone, and
//! three clones sharing a `git daemon` remote stop within one iteration per running worker of
//! the plan's budget. Agents are shell scripts that record 1000 tokens (`git boulder spend add`)
//! and finish one story per iteration.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::*;

/// Record 1000 input tokens for this iteration's story, then finish the story: a file in the
/// stream's folder, the story ticked in the worktree's PRD, one commit.
const SPENDER: &str = "#!/bin/sh\nset -e\n\
git boulder spend add --tokens-in 1000 --tokens-out 0 --id \"$BOULDER_STREAM-$BOULDER_STORY-$$\" 2>/dev/null\n\
mkdir -p \"src/$BOULDER_STREAM\"\n\
echo \"$BOULDER_ITERATION $BOULDER_STORY\" >> \"src/$BOULDER_STREAM/work.txt\"\n\
sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
git add -A\ngit commit -q -m \"$BOULDER_STREAM: $BOULDER_STORY\"\n";

fn agent(dir: &Path) -> PathBuf {
    let p = dir.join("spender.sh");
    std::fs::write(&p, SPENDER).unwrap();
    p
}

/// Give `stream` of the plan the budget `b`, committed.
fn budget(repo: &TestRepo, stream: &str, b: &str) {
    let plan = repo.read(".boulder/streams.yaml");
    let plan = plan.replace(&format!("  {stream}:\n"), &format!("  {stream}:\n    budget: {b}\n"));
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all(&format!("budget for {stream}"));
}

#[test]
fn stream_run_ends_once_its_budget_is_spent_and_a_reset_resumes_it() {
    let repo = sample();
    budget(&repo, "api", "{tokens: 1000}");
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "api"]).ok();
    let spender = agent(repo.tmp.path());
    let run = |repo: &TestRepo| {
        repo.boulder(&["stream", "run", "api", "--cooldown", "10ms", "--", "sh", spender.to_str().unwrap()]).ok()
    };
    let first = run(&repo);
    assert_shown!("run_stops_at_the_budget", first);
    let api = repo.stream_state("api");
    assert_eq!(api["status"], "STOPPED");
    assert_eq!(api["reason"], "budget spent: stream api's budget is spent: tokens 1,000 of 1,000");
    let wt = repo.worktree("api");
    assert_eq!(std::fs::read_to_string(wt.join("src/api/work.txt")).unwrap(), "1 US-003\n");
    let status = repo.boulder(&["status", "--json"]).ok().json();
    assert_eq!(status["streams"][1]["status"], "BUDGET_SPENT");
    // Run again while spent: no iteration starts.
    let again = run(&repo);
    assert_eq!(
        again.stdout,
        "api: STOPPED after 0 iteration(s) (budget spent: stream api's budget is spent: tokens 1,000 of 1,000)\n"
    );
    assert_eq!(std::fs::read_to_string(wt.join("src/api/work.txt")).unwrap(), "1 US-003\n");
    // Reset: the budget counts from nothing, the run goes on to the end.
    repo.boulder(&["spend", "reset", "api"]).ok();
    run(&repo);
    assert_eq!(repo.stream_state("api")["status"], "COMPLETED");
    assert_eq!(std::fs::read_to_string(wt.join("src/api/work.txt")).unwrap(), "1 US-003\n1 US-004\n");
}

#[test]
fn a_raised_budget_resumes_the_run() {
    let repo = sample();
    budget(&repo, "api", "{tokens: 500}");
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "api"]).ok();
    let spender = agent(repo.tmp.path());
    let args = ["stream", "run", "api", "--cooldown", "10ms", "--", "sh", spender.to_str().unwrap()];
    repo.boulder(&args).ok();
    assert_eq!(repo.stream_state("api")["status"], "STOPPED");
    let plan = repo.read(".boulder/streams.yaml").replace("tokens: 500", "tokens: 5000");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("more budget for api");
    repo.boulder(&args).ok();
    assert_eq!(repo.stream_state("api")["status"], "COMPLETED");
}

#[test]
fn work_leaves_a_spent_stream_alone() {
    let repo = sample();
    budget(&repo, "docs", "{tokens: 10}");
    repo.git(&["config", "boulder.actor", "laptop"]).ok();
    repo.boulder(&["spend", "add", "--stream", "docs", "--tokens-in", "20", "--tokens-out", "0", "--id", "d"]).ok();
    let spender = agent(repo.tmp.path());
    let r = repo.boulder(&["work", "--", "sh", spender.to_str().unwrap()]).code(1);
    insta::assert_snapshot!("work_leaves_a_spent_stream_alone", normalize(&r.stdout));
    assert!(r.stderr.contains("not merged: docs"), "{}", r.stderr);
    // docs was never run: no RUNNING in its op-log, no worktree, its story still open.
    let log = repo.boulder(&["log", "docs", "--json"]).ok().json();
    assert!(log.as_array().unwrap().iter().all(|e| e["op"]["kind"] != "status"), "{log}");
    assert!(!repo.worktree("docs").exists());
    assert_eq!(repo.stream_state("auth")["status"], "MERGED");
    assert_eq!(repo.stream_state("api")["status"], "MERGED");
}

// ---- three machines --------------------------------------------------------------------------

/// Three streams of four stories each; every iteration spends 1000 tokens. Stream z may spend
/// 1000, the plan 4500.
fn fleet_files() -> Vec<(String, String)> {
    let mut prd = String::from("# PRD: Fleet\n\n## Stories\n\n");
    let mut plan = String::from("version: 1\nprd: .agents/tasks/prd.md\nstreams:\n");
    for (i, n) in ["x", "y", "z"].iter().enumerate() {
        let ids: Vec<String> = (1..=4).map(|s| format!("US-{}0{s}", i + 1)).collect();
        for id in &ids {
            prd.push_str(&format!("### [ ] {id}: {n} part\nIn `src/{n}/`.\n\n"));
        }
        let budget = if *n == "z" { "    budget: {tokens: 1000}\n" } else { "" };
        plan.push_str(&format!("  {n}:\n    stories: [{}]\n    paths: [src/{n}/**]\n{budget}", ids.join(", ")));
    }
    plan.push_str("settings:\n  base_branch: main\n  budget: {tokens: 4500}\n  boulder:\n    cooldown: 10ms\n    max_failures: 2\n");
    let mut files = vec![(".agents/tasks/prd.md".to_string(), prd), (".boulder/streams.yaml".to_string(), plan)];
    for n in ["x", "y", "z"] {
        files.push((format!("src/{n}/mod.rs"), format!("// {n}\n")));
    }
    files
}

fn start(repo: &TestRepo, args: &[&str]) -> Child {
    let mut c = Command::new(bin());
    fixed_env(&mut c, &repo.home);
    c.args(args).current_dir(&repo.dir).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("git-boulder")
}

/// Iterations every machine recorded, as `machine` sees them after pulling: one key each (the
/// agent's own; `run:` keys are the agent runs' times `stream run` records).
fn iterations(m: &TestRepo, stream: &str) -> usize {
    let st = m.stream_state(stream);
    st["spend"]["keys"].as_array().map_or(0, |k| k.iter().filter(|k| !k.as_str().unwrap().starts_with("run:")).count())
}

#[test]
fn three_machines_hold_the_stream_and_plan_budgets_through_git_daemon() {
    let files = fleet_files();
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    let remote = Remote::new(&refs);
    let server = GitDaemon::serve(&remote.root);
    let url = server.url("remote.git");
    let machines: Vec<TestRepo> = ["alpha", "beta", "gamma"].iter().map(|n| remote.machine_from(n, &url)).collect();
    let children: Vec<Child> = machines
        .iter()
        .map(|m| {
            let spender = agent(m.tmp.path());
            start(m, &["work", "--remote", "origin", "--poll", "200ms", "--", "sh", spender.to_str().unwrap()])
        })
        .collect();
    let runs: Vec<Run> = children.into_iter().map(|c| Run::from(c.wait_with_output().unwrap())).collect();
    for (m, r) in machines.iter().zip(&runs) {
        assert!(r.code == 0 || r.code == 1, "{}:\n{}\n{}", m.dir.display(), r.stdout, r.stderr);
    }
    let a = &machines[0];
    a.boulder(&["pull", "origin"]).ok();
    let (x, y, z) = (iterations(a, "x"), iterations(a, "y"), iterations(a, "z"));
    let all = format!("x {x}, y {y}, z {z}\n{:#?}", runs.iter().map(|r| (&r.stdout, &r.stderr)).collect::<Vec<_>>());
    // The stream's budget: one machine runs z, and it sees its own spend.
    assert_eq!(z, 1, "{all}");
    // The plan's: reached (4500 needs five iterations), overshot by at most one iteration per
    // running worker (three streams run at once at most): seven.
    assert!((5..=7).contains(&(x + y + z)), "{all}");
    let spend = a.boulder(&["spend", "--json"]).ok().json();
    assert_eq!(spend["total"]["tokens_in"], 1000 * (x + y + z) as u64);
    assert!(spend["plan_budget"]["spent"].as_str().is_some_and(|s| s.starts_with("tokens")), "{spend}");
    // Every machine, once it has pulled, starts nothing more.
    for m in &machines {
        m.boulder(&["pull", "origin"]).ok();
        let before: usize = ["x", "y", "z"].iter().map(|s| iterations(m, s)).sum();
        let spender = agent(m.tmp.path());
        let r = m.boulder(&["work", "--remote", "origin", "--poll", "200ms", "--", "sh", spender.to_str().unwrap()]);
        let open: Vec<&str> = r.stdout.lines().filter(|l| !l.contains("merged")).collect();
        assert!(open.iter().skip(1).all(|l| l.contains("budget spent")), "{}\n{}", r.stdout, r.stderr);
        m.boulder(&["pull", "origin"]).ok();
        let after: usize = ["x", "y", "z"].iter().map(|s| iterations(m, s)).sum();
        assert_eq!(before, after, "{}\n{}", r.stdout, r.stderr);
    }
    // The dashboard on every machine says why.
    let status = machines[2].boulder(&["status", "--json"]).ok().json();
    let z = status["streams"].as_array().unwrap().iter().find(|s| s["name"] == "z").unwrap().clone();
    assert!(z["spend"]["spent"].as_str().is_some(), "{z}");
}
