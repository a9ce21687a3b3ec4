//! `git boulder work` and the review gate on three clones of one repository served by `git daemon`
//! on 127.0.0.1: a worker waits for a complete stream's approval (no refusal recorded, its claim
//! let go), lands it as soon as another machine's approval reaches the remote, and gives changes
//! a reviewer requests to the stream's agent, after whose commit the stream is back in review;
//! and the same on one machine, with `status --watch --json` showing the stream waiting.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::common::*;
use crate::review_gate::{agent, fetch_stream, files, prompts, remote_of, review, status_of};

/// `git daemon` serving the folder of a remote, and the URL of the remote there.
struct Daemon {
    _server: GitDaemon,
    url: String,
}

fn daemon(remote: &Remote) -> Daemon {
    let server = GitDaemon::serve(&remote.root);
    Daemon { url: server.url("remote.git"), _server: server }
}

/// Start `git boulder work --remote origin` on `m` with the recording agent; its stderr lines are
/// gathered as they come.
fn work(m: &TestRepo) -> (Child, Arc<Mutex<Vec<String>>>) {
    let (agent, _) = agent(m);
    start(m, &["work", "--remote", "origin", "--poll", "200ms", "--", "sh", agent.to_str().unwrap()], false)
}

/// Start `git-boulder ARGS` in `m`; the lines of its stderr (`out`: stdout) are gathered as they
/// come.
fn start(m: &TestRepo, args: &[&str], out: bool) -> (Child, Arc<Mutex<Vec<String>>>) {
    let mut c = Command::new(bin());
    fixed_env(&mut c, &m.home);
    c.args(args);
    let mut child = c.current_dir(&m.dir).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let into = lines.clone();
    let read: Box<dyn std::io::Read + Send> = match out {
        true => Box::new(child.stdout.take().unwrap()),
        false => Box::new(child.stderr.take().unwrap()),
    };
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(read).lines().map_while(Result::ok) {
            into.lock().unwrap().push(line);
        }
    });
    (child, lines)
}

fn said(lines: &Arc<Mutex<Vec<String>>>, what: &str) -> usize {
    lines.lock().unwrap().iter().filter(|l| l.contains(what)).count()
}

/// The tip of `origin`'s branch `branch`, as `git ls-remote` says (empty: none).
fn remote_tip(m: &TestRepo, branch: &str) -> String {
    let out = m.git_out(&["ls-remote", "origin", &format!("refs/heads/{branch}")]);
    out.split_whitespace().next().unwrap_or_default().to_string()
}

/// Stream `a`'s status as machine `m` sees it once it has the remote's branch and state.
fn shared_status(m: &TestRepo) -> String {
    fetch_stream(m, "a");
    status_of(m, "a")
}

#[test]
fn an_approval_on_one_machine_lands_the_stream_from_another() {
    // Only stream a is in play: b, needing no review, lands by itself.
    let remote = remote_of(&files("{required: 1}", ""));
    let d = daemon(&remote);
    let [alpha, beta, gamma] = ["alpha", "beta", "gamma"].map(|n| remote.machine_from(n, &d.url));
    let (child, lines) = work(&alpha);
    wait_for("alpha's worker waiting for the review of a", || {
        said(&lines, "[a] REVIEW: waiting for review: git boulder review a") > 0
    });
    // Its work is on the remote, the stream COMPLETED and waiting, not refused, not claimed.
    wait_for("the claim on a let go", || gamma.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]).is_empty());
    let tip = remote_tip(&gamma, "boulder/a");
    assert_eq!(alpha.git_out(&["rev-parse", "boulder/a"]).trim(), tip);
    assert_eq!(shared_status(&gamma), "REVIEW");
    gamma.git(&["fetch", "-q", "origin"]).ok();
    assert!(!gamma.git_out(&["log", "--format=%s", "origin/main"]).contains("a: US-101"));

    // Beta approves the tip; alpha's worker, pulling, lands it.
    fetch_stream(&beta, "a");
    review(&beta, "Bea", &["a", "--approve"]).ok();
    assert_eq!(status_of(&beta, "a"), "APPROVED");
    beta.boulder(&["push"]).ok();
    let r = Run::from(child.wait_with_output().unwrap());
    let err = lines.lock().unwrap().join("\n");
    assert_eq!(r.code, 0, "{}\n{err}", r.stdout);
    assert!(r.stdout.lines().any(|l| l.starts_with("a ") && l.ends_with("merged here")), "{}", r.stdout);
    assert_eq!(said(&lines, "[a] REVIEW: waiting for review"), 1, "said once while it waited:\n{err}");
    assert!(err.contains("[a] APPROVED: landing"), "{err}");
    gamma.git(&["fetch", "-q", "origin"]).ok();
    let log = gamma.git_out(&["log", "--format=%s", "origin/main"]);
    assert!(log.lines().any(|l| l == "a: US-101") && log.lines().any(|l| l == "b: US-201"), "{log}");
    assert_eq!(shared_status(&gamma), "MERGED");
    // The agent ran once (one story); no refusal was ever recorded for a.
    let ops = gamma.boulder(&["log", "a", "--json"]).ok().json();
    assert!(ops.as_array().unwrap().iter().all(|e| e["op"]["kind"] != "refused"), "{ops:#}");
    gamma.assert_fsck();
}

#[test]
fn changes_requested_go_to_the_agent_and_the_stream_is_back_in_review() {
    let remote = remote_of(&files("{required: 1}", ""));
    let d = daemon(&remote);
    let [alpha, beta, gamma] = ["alpha", "beta", "gamma"].map(|n| remote.machine_from(n, &d.url));
    let (_, log) = agent(&alpha);
    let (child, lines) = work(&alpha);
    wait_for("the review of a", || said(&lines, "[a] REVIEW: waiting for review") > 0);
    wait_for("the claim on a let go", || gamma.git_out(&["ls-remote", "origin", "refs/boulder/claims/*"]).is_empty());
    let first = remote_tip(&gamma, "boulder/a");

    fetch_stream(&beta, "a");
    let msg = "Rename the table to users.\n\nThe migration needs a test.";
    review(&beta, "Bea", &["a", "--request-changes", "-m", msg]).ok();
    beta.boulder(&["push"]).ok();
    assert_eq!(shared_status(&gamma), "CHANGES_REQUESTED");

    // The worker gives the changes to the agent; its commit is shared, and the stream waits again.
    wait_for("the agent's commit on the remote", || remote_tip(&gamma, "boulder/a") != first);
    wait_for("the review of the new tip", || said(&lines, "[a] REVIEW: waiting for review") > 1);
    let given = prompts(&log);
    assert_eq!(
        given.last().unwrap(),
        &format!(
            "Changes requested by Bea <bea@example.com> on {}:\n\n{msg}\n\nMake these changes, commit them, and stop.",
            &first[..8]
        )
    );
    assert_eq!(shared_status(&gamma), "REVIEW");
    assert_eq!(gamma.git_out(&["log", "-1", "--format=%s", "boulder/a"]).trim(), "a: review changes");

    // Approved at its new tip, it lands.
    fetch_stream(&beta, "a");
    review(&beta, "Bea", &["a", "--approve"]).ok();
    beta.boulder(&["push"]).ok();
    let r = Run::from(child.wait_with_output().unwrap());
    let err = lines.lock().unwrap().join("\n");
    assert_eq!(r.code, 0, "{}\n{err}", r.stdout);
    assert!(err.contains("[a] CHANGES_REQUESTED: its agent gets the reviewer's text"), "{err}");
    assert!(err.contains("[a] iteration 1: changes requested by Bea <bea@example.com>"), "{err}");
    gamma.git(&["fetch", "-q", "origin"]).ok();
    let landed = gamma.git_out(&["log", "--format=%s", "origin/main"]);
    assert!(landed.lines().any(|l| l == "a: review changes"), "{landed}");
    assert_eq!(shared_status(&gamma), "MERGED");
}

#[test]
fn work_on_one_machine_waits_for_review_and_the_watch_shows_it() {
    // A person working alone: approvals from the machine that ran the agent count.
    let files = files("{required: 1, allow_self: true}", "");
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    let repo = TestRepo::with_files(&refs);
    let (agent, _) = agent(&repo);
    let (mut watch, shown) = start(&repo, &["status", "--watch", "--json"], true);
    // Each line a document (`{"streams":[…]}`): has one shown stream a with status `s`?
    let status_seen = |s: &str| {
        shown.lock().unwrap().iter().any(|l| {
            let doc: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
            doc["streams"].as_array().is_some_and(|rows| rows.iter().any(|r| r["name"] == "a" && r["status"] == s))
        })
    };
    let (child, lines) =
        start(&repo, &["work", "--no-remote", "--poll", "100ms", "--", "sh", agent.to_str().unwrap()], false);
    wait_for("the worker waiting for the review of a", || said(&lines, "[a] REVIEW: waiting for review") > 0);
    wait_for("the watch showing REVIEW", || status_seen("REVIEW"));
    assert_eq!(status_of(&repo, "a"), "REVIEW");
    review(&repo, "Rita", &["a", "--request-changes", "-m", "One more test."]).ok();
    wait_for("the agent's commit", || {
        repo.git_out(&["log", "-1", "--format=%s", "boulder/a"]).trim() == "a: review changes"
    });
    wait_for("the review of the new tip", || said(&lines, "[a] REVIEW: waiting for review") > 1);
    review(&repo, "Rita", &["a", "--approve"]).ok();
    let r = Run::from(child.wait_with_output().unwrap());
    let err = lines.lock().unwrap().join("\n");
    assert_eq!(r.code, 0, "{}\n{err}", r.stdout);
    assert!(err.contains("[a] CHANGES_REQUESTED: its agent gets the reviewer's text"), "{err}");
    assert!(err.contains("[a] APPROVED: landing"), "{err}");
    assert_eq!(repo.stream_state("a")["status"], "MERGED");
    wait_for("the watch showing MERGED", || status_seen("MERGED"));
    let _ = watch.kill();
    let _ = watch.wait();
}
