//! The run loop with scripted agents: one finishing a story per iteration, one doing nothing, one
//! stopped mid-way, two runs racing for one stream, and a hostile story title.

use crate::common::*;

const FINISHER: &str = "#!/bin/sh\nset -e\nsed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\necho \"$BOULDER_ITERATION $BOULDER_STORY\" >> src/api/work.txt\ngit add -A\ngit commit -q -m \"$BOULDER_STORY\"\n";

fn ready() -> TestRepo {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "api"]).ok();
    repo.write("agents/finisher.sh", FINISHER);
    repo
}

#[test]
fn finisher_completes_the_stream() {
    let repo = ready();
    let agent = repo.dir.join("agents/finisher.sh");
    let r = repo.boulder(&["stream", "run", "api", "--cooldown", "10ms", "--", "sh", agent.to_str().unwrap()]).ok();
    assert_shown!("finisher_completes_the_stream", r);
    assert_eq!(repo.stream_state("api")["status"], "COMPLETED");
    let boulder = repo.git_out(&["cat-file", "-p", "refs/boulder/boulders/api:state.json"]);
    assert!(boulder.contains("\"status\": \"completed\"") && boulder.contains("\"iteration\": 2"), "{boulder}");
    // The commits were made with BOULDER_STORY set: the notes name the stories.
    let wt = repo.dir.join(".boulder/worktrees/api");
    let note = repo.git_in(&wt, &["notes", "--ref=boulder", "show", "HEAD"]).ok().stdout;
    assert!(note.contains("\"story\":\"US-004\""), "{note}");
    assert_eq!(std::fs::read_to_string(wt.join("src/api/work.txt")).unwrap(), "1 US-003\n2 US-004\n");
}

#[test]
fn idle_agent_fails_after_the_backoff() {
    let repo = ready();
    let start = std::time::Instant::now();
    let r = repo.boulder(&["stream", "run", "api", "--cooldown", "20ms", "--max-failures", "3", "--", "true"]).code(1);
    assert_shown!("idle_agent_fails_after_the_backoff", r);
    // 20 ms then 40 ms of backoff at least.
    assert!(start.elapsed() >= std::time::Duration::from_millis(60));
    assert_eq!(repo.stream_state("api")["status"], "FAILED");
}

#[test]
fn stop_ends_the_run_after_the_current_iteration() {
    let repo = ready();
    let r = repo
        .boulder(&["stream", "run", "api", "--cooldown", "10ms", "--", "git", "boulder", "stream", "stop", "api"])
        .ok();
    assert_shown!("stopped_by_stream_stop", r);
    assert_eq!(repo.stream_state("api")["status"], "STOPPED");
    // max_iterations stops too.
    let agent = repo.dir.join("agents/finisher.sh");
    let r = repo.boulder(&["stream", "run", "api", "--max-iterations", "1", "--", "sh", agent.to_str().unwrap()]).ok();
    assert_shown!("stopped_by_max_iterations", r);
}

#[test]
fn two_runs_race_for_one_stream() {
    let repo = ready();
    let marker = repo.tmp.path().join("started");
    let script = format!("touch {}; sleep 3", marker.display());
    std::thread::scope(|s| {
        let first =
            s.spawn(|| repo.boulder(&["stream", "run", "api", "--max-iterations", "1", "--", "sh", "-c", &script]));
        wait_for("the first run's agent", || marker.exists());
        let second = repo.boulder(&["stream", "run", "api", "--", "true"]).code(1);
        assert!(second.stderr.contains("stream run") && second.stderr.contains("pid"), "{}", second.stderr);
        first.join().unwrap().ok();
    });
}

#[test]
fn story_titles_never_reach_a_shell() {
    let repo = sample();
    let prd = SAMPLE_PRD.replace("US-003: List endpoint", "US-003: $(touch pwned) `touch pwned2`; rm -rf x");
    repo.write(".agents/tasks/prd.md", &prd);
    repo.commit_all("odd title");
    repo.boulder(&["stream", "init", "api"]).ok();
    let r =
        repo.boulder(&["stream", "run", "api", "--max-iterations", "1", "--", "printenv", "BOULDER_STORY_TITLE"]).ok();
    assert_shown!("story_titles_never_reach_a_shell", r);
    let wt = repo.dir.join(".boulder/worktrees/api");
    assert!(!wt.join("pwned").exists() && !wt.join("pwned2").exists() && !repo.dir.join("pwned").exists());
}

#[test]
fn run_needs_a_worktree_and_a_command() {
    let repo = sample();
    let r = repo.boulder(&["stream", "run", "api", "--", "true"]).code(2);
    assert_shown!("run_without_a_worktree", r);
    repo.boulder(&["stream", "init", "api"]).ok();
    let r = repo.boulder(&["stream", "run", "api"]).code(2);
    assert_shown!("run_without_a_command", r);
}

#[test]
fn interrupt_records_stopped_and_frees_the_lock() {
    let repo = ready();
    let mut cmd = repo.command(bin());
    let mut child = cmd
        .args(["stream", "run", "api", "--cooldown", "10s", "--", "true"])
        .current_dir(&repo.dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The run's report on stderr, read as it comes: the interrupt is sent once the first
    // iteration is over and the run waits out its cooldown.
    let told = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let (mut from, told) = (child.stderr.take().unwrap(), told.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut from, &mut buf) {
                told.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    wait_for("the first iteration's cooldown", || told.lock().unwrap().contains("waiting 10.0s"));
    assert!(repo.git(&["cat-file", "-p", "refs/boulder/streams/api:state.json"]).stdout.contains("RUNNING"));
    std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    reader.join().unwrap();
    let stderr = told.lock().unwrap().clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("STOPPED"), "{stdout}{stderr}");
    assert_eq!(repo.stream_state("api")["status"], "STOPPED");
    assert_eq!(repo.stream_state("api")["reason"], "interrupted");
    repo.boulder(&["stream", "run", "api", "--max-iterations", "1", "--", "true"]).ok();
}
