//! `git boulder agent hook codex`: Codex's documented `Stop` payload (the fixture
//! `tests/fixtures/harness/codex/stop.json`, every documented field) fed to the real binary. The
//! answer is always one JSON object: `{"decision":"block","reason":…}` or `{}`.

use serde_json::Value;

use crate::agent_claude::{feed, fixture, installed, run_installed, run_with_input};
use crate::common::*;

fn initialized(extra: &str) -> TestRepo {
    let repo = if extra.is_empty() { sample() } else { sample_with(extra) };
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo
}

#[test]
fn stop_with_stories_open_blocks_with_exactly_decision_and_reason() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    let r = feed(&repo, "codex", &fixture("codex/stop", &wt, |_| {})).code(0);
    let out = r.json();
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["decision", "reason"], "{out}");
    assert_eq!(out["decision"], "block");
    let reason = out["reason"].as_str().unwrap();
    assert!(reason.contains("Reminder 1 of 5"), "{reason}");
    let b = repo.state("refs/boulder/boulders/auth");
    assert_eq!(b["failure_count"], 1);
    assert_eq!(b["last_message"], reason);
    let log = repo.boulder(&["log", "auth", "--json"]).ok().json();
    assert_eq!(log[0]["op"]["kind"], "enforced");
}

#[test]
fn letting_it_stop_prints_an_empty_object() {
    let repo = initialized("  boulder:\n    max_failures: 1\n");
    let wt = repo.worktree("auth");
    let stop = fixture("codex/stop", &wt, |_| {});
    let empty = |r: Run| {
        let r = r.code(0);
        assert_eq!(r.json(), serde_json::json!({}), "{}", r.stdout);
    };
    empty(feed(&repo, "codex", &fixture("codex/stop", &wt, |v| v["stop_hook_active"] = Value::Bool(true))));
    assert_eq!(feed(&repo, "codex", &stop).code(0).json()["decision"], "block");
    empty(feed(&repo, "codex", &stop));
    // Work talk within the idle threshold, outside a repository: let it stop.
    commit_in(&repo, &wt, "src/auth/a.rs", "a\n", "work");
    empty(feed(
        &repo,
        "codex",
        &fixture("codex/stop", &wt, |v| v["last_assistant_message"] = "I'm working on the tests".into()),
    ));
    let outside = tempfile::tempdir().unwrap();
    empty(feed(&repo, "codex", &fixture("codex/stop", outside.path(), |_| {})));
}

#[test]
fn a_payload_it_cannot_read_is_exit_1_never_2() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    // Outside a stream's worktree (the main worktree here); in one, see
    // an_edit_it_cannot_read_is_denied_in_a_stream_worktree.
    let _ = &wt;
    for input in [&b"garbage"[..], b"", b"{\"cwd\": 3, \"hook_event_name\": \"Stop\"}"] {
        let r = run_with_input(&repo, &repo.dir, &["agent", "hook", "codex"], input).code(1);
        assert_eq!(r.stdout, "");
        assert!(r.stderr.starts_with("git-boulder agent hook codex: "), "{}", r.stderr);
    }
}

#[test]
fn the_installed_codex_hook_runs_this_decision() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["agent", "install", "codex"]).ok();
    let wt = repo.worktree("auth");
    let (stop, _) = installed(&wt, ".codex/hooks.json", "Stop");
    let out = run_installed(&repo, &wt, &stop, &fixture("codex/stop", &wt, |_| {})).code(0).json();
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["decision", "reason"], "{out}");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["failure_count"], 1);
    let again = fixture("codex/stop", &wt, |v| v["stop_hook_active"] = Value::Bool(true));
    assert_eq!(run_installed(&repo, &wt, &stop, &again).code(0).json(), serde_json::json!({}));
}
