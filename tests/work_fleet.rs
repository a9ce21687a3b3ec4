//! A fleet: `git boulder work` claiming, running and landing streams — on one machine with local
//! merges, and on three clones of one repository served by `git daemon` on 127.0.0.1, all started
//! at once — plus Ctrl-C, `--parallel`, the exit codes with their summary, and `status --watch`.
//! Agents are shell scripts finishing one story per iteration; results are checked with plain git.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

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
    assert_eq!(runners(&repo, "c").len(), 1);
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
    assert_shown!("a_failing_stream_blocks_its_dependents_and_exits_1", r);
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

/// Lines a child prints on stdout, gathered by a thread as they come.
fn gather(child: &mut Child) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    gather_from(child.stdout.take().unwrap())
}

/// Lines read from `out`, gathered by a thread as they come.
fn gather_from(out: impl std::io::Read + Send + 'static) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    use std::io::BufRead;
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            into.lock().unwrap().push(line);
        }
    });
    lines
}

/// Whether the process `pid` runs (exists and is not a zombie).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

fn signal(child: &Child, sig: &str) {
    // The shell's own `kill`: no procps needed.
    let ok = Command::new("sh").args(["-c", &format!("kill {sig} {}", child.id())]).status().unwrap().success();
    assert!(ok, "kill {sig}");
}

#[test]
fn status_watch_prints_a_new_block_when_refs_change() {
    let repo = fleet_repo();
    let mut cmd = Command::new(bin());
    fixed_env(&mut cmd, &repo.home);
    // Traced: each time the watch reads the streams again (a ref moved), stderr says so.
    cmd.args(["status", "--watch"]).env("BOULDER_TRACE", "1").current_dir(&repo.dir);
    let mut c = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("git-boulder");
    let lines = gather(&mut c);
    let trace = gather_from(c.stderr.take().unwrap());
    let reads = || trace.lock().unwrap().iter().filter(|l| l.ends_with("ahead/behind of every stream")).count();
    let blocks = || lines.lock().unwrap().iter().filter(|l| l.starts_with("streams at")).count();
    wait_for("the first block", || blocks() == 1 && lines.lock().unwrap().len() >= 8);
    {
        let l = lines.lock().unwrap();
        assert!(l[1].starts_with("STREAM") && l[1].contains("QUEUE") && l[1].contains("CLAIMED BY"), "{l:?}");
        let a = l.iter().find(|x| x.starts_with("a ")).unwrap();
        assert!(a.contains("DEFINED") && a.contains("0/2") && a.contains("ready #1"), "{a}");
        let c = l.iter().find(|x| x.starts_with("c ")).unwrap();
        assert!(c.contains("after b"), "{c}");
    }
    // Nothing changes: no new block.
    assert_eq!(blocks(), 1, "{:?}", lines.lock().unwrap());
    // A ref moves that the table does not show (a boulder of its own): the watch reads the
    // streams again, and prints no new block either.
    let read = reads();
    repo.boulder(&["create", "notes"]).ok();
    wait_for("the watch to read the moved ref", || reads() > read);
    assert_eq!(blocks(), 1, "{:?}", lines.lock().unwrap());
    // A story recorded done moves a ref: a second block, with the new progress (a block for
    // nothing or for the boulder, printed meanwhile, would come before it and show 0/2).
    repo.boulder(&["prd", "done", "US-101"]).ok();
    wait_for("a second block", || {
        blocks() == 2 && lines.lock().unwrap().iter().filter(|l| l.starts_with("a ")).count() == 2
    });
    let l = lines.lock().unwrap().clone();
    let second_a = l.iter().rev().find(|x| x.starts_with("a ")).unwrap();
    assert!(second_a.contains("1/2"), "{l:?}");
    signal(&c, "-TERM");
    let r = finish(c);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

#[test]
fn ctrl_c_releases_the_claim_and_leaves_the_stream_resumable() {
    let remote = fleet_remote();
    let m = remote.machine("alpha");
    let marker = m.tmp.path().join("agent-started");
    let finished = m.tmp.path().join("agent-finished");
    let pid = m.tmp.path().join("agent-pid");
    let script = format!(
        "#!/bin/sh\necho $$ > {}\ntouch {}\nsleep 30\ntouch {}\n",
        pid.display(),
        marker.display(),
        finished.display()
    );
    let sleepy = agent(m.tmp.path(), "sleepy.sh", &script);
    let mut c = start(&m, &m.dir, &["work", "--remote", "origin", "--", "sh", sleepy.to_str().unwrap()]);
    let _lines = gather(&mut c);
    wait_for("the agent", || marker.exists());
    let claims = m.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]);
    assert!(claims.contains("refs/boulder/claims/a"), "{claims}");
    assert_eq!(m.stream_state("a")["status"], "RUNNING");
    signal(&c, "-INT");
    let r = finish(c);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let pid = std::fs::read_to_string(&pid).unwrap().trim().to_string();
    wait_for("the agent to end", || !running(&pid));
    assert!(!finished.exists(), "the agent was not stopped");
    assert!(r.stderr.contains("interrupted"), "{}", r.stderr);
    // No claim left on the remote; the stream is STOPPED (not RUNNING), shared.
    assert_eq!(m.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]), "");
    assert_eq!(m.stream_state("a")["status"], "STOPPED");
    assert_eq!(m.stream_state("a")["reason"], "interrupted");
    let st = m.boulder(&["status", "--json"]).ok().json();
    assert_eq!(st["streams"][0]["status"], "STOPPED", "{st}");
    // A rerun picks it up and lands everything.
    let finisher = agent(m.tmp.path(), "finisher.sh", FINISHER);
    let r = m.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let summary: Vec<&str> = r.stdout.lines().filter(|l| !l.starts_with('[')).collect();
    assert_eq!(summary.len(), 7, "{}", r.stdout);
    assert!(summary[1..].iter().all(|l| l.ends_with("merged here")), "{}", r.stdout);
    let log = subjects(&m, "origin/main");
    assert_eq!(count(&log, "a: US-101"), 1, "{log:?}");
}

/// A packed-refs.lock a killed process left: `work` stops at once naming it, before it claims
/// anything on the remote (it used to claim there what it could not record here, for 47 s).
#[test]
fn work_stops_at_once_on_a_packed_refs_lock_left_behind() {
    let remote = fleet_remote();
    let m = remote.machine("alpha");
    let lock = m.dir.join(".git/packed-refs.lock");
    std::fs::write(&lock, "").unwrap();
    let out = m.command("touch").args(["-d", "1 hour ago"]).arg(&lock).output().unwrap();
    assert!(out.status.success());
    let finisher = agent(m.tmp.path(), "finisher.sh", FINISHER);
    let r = m.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]).code(1);
    assert_shown!("work_stops_at_once_on_a_packed_refs_lock_left_behind", r);
    assert!(!r.stderr.contains("claimed on origin"), "{}", r.stderr);
    assert_eq!(m.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]), "");
    // Once it is gone, the rerun lands everything.
    std::fs::remove_file(&lock).unwrap();
    let r = m.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(m.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]), "");
}

/// A claim of this machine's left on a merged stream (its worker killed after the merge, before
/// the release) is released by the next `work`, not left for its hour.
#[test]
fn work_releases_its_own_claim_left_on_a_merged_stream() {
    let remote = fleet_remote();
    let m = remote.machine("alpha");
    let finisher = agent(m.tmp.path(), "finisher.sh", FINISHER);
    m.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]).ok();
    assert_eq!(m.stream_state("a")["status"], "MERGED");
    // As a worker killed between the merge and the release leaves it.
    let r = m.boulder(&["stream", "claim", "a", "--remote", "origin"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(m.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]).contains("claims/a"));
    let r = m.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]).ok();
    assert_shown!("work_releases_its_own_claim_left_on_a_merged_stream", r);
    assert_eq!(m.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]), "");
}

#[test]
fn a_run_whose_worker_is_killed_stops_instead_of_running_on_unsupervised() {
    let remote = fleet_remote();
    let m = remote.machine("alpha");
    let marker = m.tmp.path().join("agent-started");
    let finished = m.tmp.path().join("agent-finished");
    let pid = m.tmp.path().join("agent-pid");
    // Long enough that a loaded machine stops it well before it would finish.
    let sleepy = agent(
        m.tmp.path(),
        "sleepy.sh",
        &format!(
            "#!/bin/sh\necho $$ > {}\ntouch {}\nsleep 60\ntouch {}\n",
            pid.display(),
            marker.display(),
            finished.display()
        ),
    );
    let mut c = start(&m, &m.dir, &["work", "--remote", "origin", "--", "sh", sleepy.to_str().unwrap()]);
    let _lines = gather(&mut c);
    wait_for("the agent", || marker.exists());
    // The worker dies at once (SIGKILL: no handler runs); its run notices and stops its agent.
    signal(&c, "-KILL");
    let _ = finish(c);
    wait_for("the run to stop", || m.stream_state("a")["status"] == "STOPPED");
    assert_eq!(m.stream_state("a")["reason"], "interrupted");
    let pid = std::fs::read_to_string(&pid).unwrap().trim().to_string();
    wait_for("the agent to end", || !running(&pid));
    assert!(!finished.exists(), "the agent ran on");
    // This machine picks it up again.
    let finisher = agent(m.tmp.path(), "finisher.sh", FINISHER);
    let r = m.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}

/// `git daemon` serving the folder of a remote on 127.0.0.1, stopped on drop.
struct Daemon {
    _server: GitDaemon,
    url: String,
}

fn daemon(remote: &Remote) -> Daemon {
    let server = GitDaemon::serve(&remote.root);
    Daemon { url: server.url("remote.git"), _server: server }
}

/// What every machine must agree on in `status --json`: the fields that come from the shared
/// state (worktrees, branches and their distances are each machine's own).
fn shared_status(m: &TestRepo) -> Vec<serde_json::Value> {
    let st = m.boulder(&["status", "--json"]).ok().json();
    st["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s["name"], "status": s["status"], "progress": s["progress"],
                "iteration": s["iteration"], "last_activity": s["last_activity"], "claim": s["claim"],
            })
        })
        .collect()
}

#[test]
fn three_machines_land_six_streams_through_git_daemon() {
    let remote = fleet_remote();
    let d = daemon(&remote);
    let machines: Vec<TestRepo> = ["alpha", "beta", "gamma"].iter().map(|n| remote.machine_from(n, &d.url)).collect();
    let children: Vec<Child> = machines
        .iter()
        .map(|m| {
            let finisher = agent(m.tmp.path(), "finisher.sh", FINISHER);
            start(m, &m.dir, &["work", "--remote", "origin", "--poll", "200ms", "--", "sh", finisher.to_str().unwrap()])
        })
        .collect();
    let runs: Vec<Run> = children.into_iter().map(finish).collect();
    for (m, r) in machines.iter().zip(&runs) {
        assert_eq!(r.code, 0, "{}:\n{}\n{}", m.dir.display(), r.stdout, r.stderr);
    }
    // Every stream landed, by one machine or another, and each machine's summary says so.
    let here: usize = runs.iter().map(|r| r.stdout.lines().filter(|l| l.ends_with("merged here")).count()).sum();
    assert_eq!(here, 6, "{:#?}", runs.iter().map(|r| &r.stdout).collect::<Vec<_>>());
    // Per stream: one machine merged it, the others name that machine.
    let names = ["alpha", "beta", "gamma"];
    for n in ["a", "b", "c", "d", "e", "f"] {
        let outcome = |r: &Run| {
            let line = r.stdout.lines().find(|l| l.starts_with(&format!("{n} "))).unwrap_or_default();
            line[n.len()..].trim().to_string()
        };
        let outcomes: Vec<String> = runs.iter().map(outcome).collect();
        let winner: Vec<&str> =
            names.iter().zip(&outcomes).filter(|(_, o)| *o == "merged here").map(|(m, _)| *m).collect();
        assert_eq!(winner.len(), 1, "{n}: {outcomes:?}");
        for o in outcomes.iter().filter(|o| *o != "merged here") {
            let by_winner = format!("merged by another machine ({})", winner[0]);
            assert!(*o == by_winner || o == "merged before this run", "{n}: {outcomes:?}");
        }
    }
    let a = &machines[0];
    a.git(&["fetch", "-q", "origin"]).ok();
    let log = subjects(a, "origin/main");
    for (i, n) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        for s in 1..=2 {
            assert_eq!(count(&log, &format!("{n}: US-{}0{s}", i + 1)), 1, "{log:?}");
        }
    }
    assert_eq!(a.git_out(&["rev-list", "--merges", "origin/main"]), "");
    let prd = a.git_out(&["show", "origin/main:.agents/tasks/prd.md"]);
    assert!(!prd.contains("### [ ]") && prd.matches("### [x]").count() == 12, "{prd}");
    // No claim is left on the remote.
    assert_eq!(a.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]), "");
    // After a sync everywhere, every machine tells the same story.
    for _ in 0..2 {
        for m in &machines {
            m.boulder(&["sync"]).ok();
        }
    }
    let first = shared_status(a);
    for m in &machines[1..] {
        assert_eq!(shared_status(m), first);
    }
    assert!(first.iter().all(|s| s["status"] == "MERGED"), "{first:#?}");
    // Each stream was run by exactly one machine: one actor recorded RUNNING in its op-log.
    for n in ["a", "b", "c", "d", "e", "f"] {
        let who = runners(a, n);
        assert_eq!(who.len(), 1, "{n} run by {who:?}");
    }
    a.assert_fsck();
}

#[test]
fn status_watch_on_a_terminal_redraws_and_quits_on_q() {
    let repo = fleet_repo();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/pty_watch.py");
    let mut c = repo.command("python3");
    c.arg(script).args([bin(), "status", "--watch"]);
    let r = Run::from(c.output().unwrap()).ok();
    // `q` ended it with 0; the terminal was non-canonical while watching and is restored after.
    assert_eq!(r.stdout.trim(), "exit 0 icanon_during False icanon_after True escape True", "{}", r.stderr);
}

#[test]
fn a_lost_race_keeps_a_stream_branch_pushed_before_the_merge() {
    // A stream whose branch is on the remote (pushed before its merge) loses the race to the base
    // once: the second round still knows the remote's stream branch and lands it.
    let remote = fleet_remote();
    let a = remote.machine("alpha");
    let b = remote.machine("beta");
    a.boulder(&["stream", "init", "a"]).ok();
    let wt = a.worktree("a");
    commit_in(&a, &wt, "src/a/x.txt", "x\n", "a: x");
    a.git_in(&wt, &["push", "-q", "origin", "boulder/a"]).ok();
    a.boulder(&["prd", "done", "US-101", "US-102"]).ok();
    // Beta has landed something since (so the merge rebases the stream), and lands more while
    // alpha's merge verifies.
    b.write("NOTES.md", "beta\n");
    b.commit_all("beta: notes");
    b.git(&["push", "-q", "origin", "main"]).ok();
    b.write("NOTES.md", "beta again\n");
    b.commit_all("beta: more notes");
    let land = format!("git -C {} push -q origin main", b.dir.display());
    let r = a.boulder_env(
        &a.dir,
        &["stream", "merge", "a", "--remote", "origin"],
        &[("BOULDER_FAILPOINT_RUN", "merge-verify"), ("BOULDER_FAILPOINT_CMD", &land)],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("a_lost_race_keeps_a_stream_branch_pushed_before_the_merge", r);
    a.git(&["fetch", "-q", "origin"]).ok();
    let log = subjects(&a, "origin/main");
    assert_eq!(count(&log, "a: x"), 1, "{log:?}");
    assert_eq!(count(&log, "beta: notes"), 1, "{log:?}");
    assert_eq!(count(&log, "beta: more notes"), 1, "{log:?}");
}

#[test]
fn work_output_on_one_machine() {
    // Two streams, one story each, b after a, one at a time: what a person sees.
    let repo = TestRepo::with_files(&[
        (".agents/tasks/prd.md", "# PRD\n\n### [ ] US-101: a part\nx\n\n### [ ] US-201: b part\ny\n"),
        (
            ".boulder/streams.yaml",
            "version: 1\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\n  b:\n    stories: [US-201]\n    paths: [src/b/**]\n    depends_on: [a]\nsettings:\n  base_branch: main\n  boulder:\n    cooldown: 10ms\n",
        ),
    ]);
    let finisher = agent(repo.tmp.path(), "finisher.sh", FINISHER);
    let r = repo.boulder(&["work", "--parallel", "1", "--", "sh", finisher.to_str().unwrap()]).ok();
    assert_shown!("work_output_on_one_machine", r);
}

#[test]
fn the_plans_agents_run_only_when_trusted() {
    let repo = TestRepo::in_temp("repo");
    let finisher = agent(repo.tmp.path(), "finisher.sh", FINISHER);
    let plan = format!(
        "version: 1\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\n    agent: fin\n\
         settings:\n  base_branch: main\n  agents:\n    fin: 'sh {}'\n",
        finisher.display()
    );
    std::fs::create_dir_all(&repo.dir).unwrap();
    repo.git(&["init", "-q", "-b", "main"]).ok();
    repo.write(".agents/tasks/prd.md", "# PRD\n\n### [ ] US-101: a part\nx\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("initial");
    let r = repo.boulder(&["work"]).code(1);
    assert_shown!("the_plans_agents_run_only_when_trusted", r);
    assert!(repo.refs("refs/boulder/streams").is_empty(), "nothing ran");
    let r = repo.boulder(&["--trust", "work"]).ok();
    assert!(r.stdout.lines().any(|l| l.starts_with("a ") && l.ends_with("merged here")), "{}", r.stdout);
}

#[test]
fn a_claim_left_by_a_dead_machine_is_taken_over_when_it_expires() {
    let remote = fleet_remote();
    let dead = remote.machine("alpha");
    let b = remote.machine("beta");
    // alpha claimed stream a and died.
    dead.boulder(&["stream", "claim", "a", "--remote", "origin", "--ttl", "1h"]).ok();
    let finisher = agent(b.tmp.path(), "finisher.sh", FINISHER);
    // An hour and more later, beta's worker takes a over and lands everything.
    b.clock.advance(Duration::from_secs(2 * 3600));
    let r = b.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.lines().any(|l| l.starts_with("a ") && l.ends_with("merged here")), "{}", r.stdout);
    assert_eq!(b.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]), "");
    assert_eq!(runners(&b, "a"), ["beta".to_string()].into_iter().collect());
}

#[test]
fn work_trust_covers_the_plan_read_not_one_a_pull_brings_meanwhile() {
    let marks = tempfile::tempdir().unwrap();
    let mark = |name: &str| marks.path().join(name);
    let plan = |verify: &str| {
        format!(
            "version: 1\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\n\
             settings:\n  base_branch: main\n  verify: 'touch {verify}'\n  boulder:\n    cooldown: 10ms\n"
        )
    };
    let read = plan(mark("read").to_str().unwrap());
    let remote = Remote::new(&[
        (".agents/tasks/prd.md", "# PRD\n\n### [ ] US-101: a part\nx\n"),
        (".boulder/streams.yaml", &read),
    ]);
    let m1 = remote.machine("m1");
    // Another machine changes verify on the remote after m1's user read the plan.
    let m2 = remote.machine("m2");
    m2.write(".boulder/streams.yaml", &plan(mark("unread").to_str().unwrap()));
    m2.commit_all("change verify");
    m2.git(&["push", "-q", "origin", "main"]).ok();
    // The worker follows the remote's base, so its merge would run the new verify: refused.
    let finisher = agent(m1.tmp.path(), "finisher.sh", FINISHER);
    let r = m1.boulder(&["--trust", "work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]).code(1);
    // The plan names a temp folder: the agent's commit differs from run to run.
    let commit = m1.git_out(&["rev-parse", "--short=8", "boulder/a"]);
    assert_shown!(
        "work_trust_covers_the_plan_read_not_one_a_pull_brings_meanwhile",
        r.masked(&[(&commit, "[COMMIT]")])
    );
    assert!(!mark("unread").exists(), "the unread verify ran");
    assert!(!mark("read").exists());
}

#[test]
fn work_refuses_an_untrusted_prompt_or_setup_before_claiming_anything() {
    for extra in ["prompt_template: 'work on {story_id}'", "setup: 'true'"] {
        let plan = format!(
            "version: 1\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\nsettings:\n  base_branch: main\n  {extra}\n"
        );
        let remote = Remote::new(&[
            (".agents/tasks/prd.md", "# PRD\n\n### [ ] US-101: a part\nx\n"),
            (".boulder/streams.yaml", &plan),
        ]);
        let m1 = remote.machine("m1");
        let finisher = agent(m1.tmp.path(), "finisher.sh", FINISHER);
        let r = m1.boulder(&["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()]).code(1);
        assert!(r.stderr.contains("not trusted"), "{extra}: {}", r.stderr);
        // Nothing claimed, made or recorded, here or on the remote.
        assert!(m1.refs("refs/boulder/").is_empty(), "{extra}");
        let on_remote = m1.git(&["ls-remote", "origin", "refs/boulder/*"]).ok().stdout;
        assert_eq!(on_remote, "", "{extra}");
        assert!(!m1.dir.join(".boulder/worktrees/a").exists(), "{extra}");
    }
}
