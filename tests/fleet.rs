//! A fleet: `git boulder work` claiming, running and landing streams — on one machine with local
//! merges, and on three clones of one repository served by `git daemon` on 127.0.0.1, all started
//! at once — plus Ctrl-C, `--parallel`, the exit codes with their summary, and `status --watch`.
//! Agents are shell scripts finishing one story per iteration; results are checked with plain git.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// An agent finishing the story it is given: a file in the stream's folder, the story marked done
/// in the worktree's PRD, one commit named `<stream>: <story>`.
const FINISHER: &str = "#!/bin/sh\nset -e\nmkdir -p \"src/$BOULDER_STREAM\"\n\
echo \"$BOULDER_STORY\" > \"src/$BOULDER_STREAM/$BOULDER_STORY.txt\"\n\
sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
git add -A\ngit commit -q -m \"$BOULDER_STREAM: $BOULDER_STORY\"\n";

/// Six streams: a → b → c, and d, e, f depending on a; two stories each, disjoint paths.
fn fleet_files() -> Vec<(String, String)> {
    let names = ["a", "b", "c", "d", "e", "f"];
    let mut prd = String::from("# PRD: Fleet\n\n## Stories\n\n");
    let mut plan = String::from("version: 1\nprd: .agents/tasks/prd.md\nstreams:\n");
    for (i, n) in names.iter().enumerate() {
        let ids = [format!("US-{}01", i + 1), format!("US-{}02", i + 1)];
        for id in &ids {
            prd.push_str(&format!("### [ ] {id}: {n} part\nIn `src/{n}/`.\n\n"));
        }
        let deps = match *n {
            "a" => String::new(),
            "b" => "    depends_on: [a]\n".into(),
            "c" => "    depends_on: [b]\n".into(),
            _ => "    depends_on: [a]\n".into(),
        };
        plan.push_str(&format!("  {n}:\n    stories: [{}]\n    paths: [src/{n}/**]\n{deps}", ids.join(", ")));
    }
    plan.push_str(
        "settings:\n  base_branch: main\n  merge_strategy: rebase\n  boulder:\n    cooldown: 10ms\n    max_failures: 2\n",
    );
    let mut files = vec![(".agents/tasks/prd.md".to_string(), prd), (".boulder/streams.yaml".to_string(), plan)];
    for n in names {
        files.push((format!("src/{n}/mod.rs"), format!("// {n}\n")));
    }
    files
}

fn fleet_remote() -> Remote {
    let files = fleet_files();
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    Remote::new(&refs)
}

fn fleet_repo() -> TestRepo {
    let files = fleet_files();
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    TestRepo::with_files(&refs)
}

/// Write `script` as an agent in `dir`, returning its path.
fn agent(dir: &Path, name: &str, script: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, script).unwrap();
    p
}

/// Subjects of the commits of `rev` (newest first).
fn subjects(repo: &TestRepo, rev: &str) -> Vec<String> {
    repo.git_out(&["log", "--format=%s", rev]).lines().map(String::from).collect()
}

fn count(subjects: &[String], s: &str) -> usize {
    subjects.iter().filter(|x| *x == s).count()
}

/// The actors that recorded RUNNING for `stream` in its op-log.
fn runners(repo: &TestRepo, stream: &str) -> std::collections::BTreeSet<String> {
    let log = repo.boulder(&["log", stream, "--json"]).ok().json();
    log.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["op"]["kind"] == "status" && e["op"]["data"]["status"] == "RUNNING")
        .map(|e| e["op"]["actor"].as_str().unwrap().to_string())
        .collect()
}

/// Start `git-boulder ARGS` in `dir` of `repo` without waiting.
fn start(repo: &TestRepo, dir: &Path, args: &[&str]) -> Child {
    let mut c = Command::new(bin());
    fixed_env(&mut c, &repo.home);
    c.args(args).current_dir(dir).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("git-boulder")
}

fn finish(child: Child) -> Run {
    Run::from(child.wait_with_output().unwrap())
}

/// Wait until `cond` holds (at most 60 s).
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn work_lands_every_stream_locally_in_dependency_order() {
    let repo = fleet_repo();
    let finisher = agent(repo.tmp.path(), "finisher.sh", FINISHER);
    let r = repo.boulder(&["work", "--parallel", "3", "--", "sh", finisher.to_str().unwrap()]).ok();
    for n in ["a", "b", "c", "d", "e", "f"] {
        assert!(r.stdout.lines().any(|l| l.starts_with(n) && l.ends_with("merged here")), "{}\n{}", r.stdout, r.stderr);
        assert_eq!(repo.stream_state(n)["status"], "MERGED");
    }
    // Children's lines come prefixed by their stream.
    assert!(r.stderr.contains("[a] iteration 1: US-101"), "{}", r.stderr);
    let log = subjects(&repo, "main");
    for (i, n) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        for s in 1..=2 {
            assert_eq!(count(&log, &format!("{n}: US-{}0{s}", i + 1)), 1, "{log:?}");
        }
    }
    assert!(repo.git_out(&["rev-list", "--merges", "main"]).is_empty());
    // a before its dependents, b before c.
    let pos = |s: &str| log.iter().position(|x| x == s).unwrap();
    assert!(pos("a: US-102") > pos("b: US-201") && pos("b: US-202") > pos("c: US-301"), "{log:?}");
    let prd = repo.git_out(&["show", "main:.agents/tasks/prd.md"]);
    assert!(!prd.contains("### [ ]"), "{prd}");
    repo.assert_fsck();
}

#[test]
fn a_failing_stream_blocks_its_dependents_and_exits_1() {
    let repo = fleet_repo();
    // Only stream a's agent does nothing; the others would finish.
    let script = format!("#!/bin/sh\n[ \"$BOULDER_STREAM\" = a ] && exit 0\n{}", &FINISHER[10..]);
    let picky = agent(repo.tmp.path(), "picky.sh", &script);
    let r = repo.boulder(&["work", "--", "sh", picky.to_str().unwrap()]).code(1);
    let line = |n: &str| r.stdout.lines().find(|l| l.starts_with(&format!("{n} "))).unwrap_or_default().to_string();
    assert!(line("a").contains("failed: 2 iterations without progress"), "{}", r.stdout);
    assert!(line("b").contains("blocked by a"), "{}", r.stdout);
    assert!(line("c").contains("blocked by b"), "{}", r.stdout);
    assert!(line("d").contains("blocked by a"), "{}", r.stdout);
    assert!(r.stderr.contains("not merged: a, b"), "{}", r.stderr);
    assert_eq!(repo.stream_state("a")["status"], "FAILED");
    assert_eq!(subjects(&repo, "main"), ["initial"]);
}

#[test]
fn parallel_runs_that_many_streams_at_once() {
    let repo = fleet_repo();
    let shared = repo.tmp.path().join("running");
    std::fs::create_dir_all(&shared).unwrap();
    // Each agent says it runs, waits up to 2 s to see another one running, notes what it saw.
    let script = format!(
        "#!/bin/sh\ntouch {dir}/$BOULDER_STREAM\ni=0\nwhile [ $(ls {dir} | wc -l) -lt 2 ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done\n\
         ls {dir} | wc -l | tr -d ' ' >> {dir}/../seen\nrm -f {dir}/$BOULDER_STREAM\n{}",
        &FINISHER[10..],
        dir = shared.display()
    );
    let a = agent(repo.tmp.path(), "pair.sh", &script);
    // Only d, e and f are independent once a is merged: first a alone, then pairs.
    repo.boulder(&["work", "--parallel", "2", "--", "sh", a.to_str().unwrap()]).ok();
    let seen = std::fs::read_to_string(repo.tmp.path().join("seen")).unwrap();
    assert!(seen.lines().any(|l| l == "2"), "never two at once: {seen}");
    assert!(seen.lines().all(|l| l == "1" || l == "2"), "more than two at once: {seen}");
}
