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

fn patch(wt: &std::path::Path, text: &str) -> Value {
    fixture("codex/pre_tool_use_apply_patch", wt, |v| v["tool_input"]["command"] = text.into())
}

fn deny_reason(out: &Value) -> String {
    let h = &out["hookSpecificOutput"];
    assert_eq!((&h["hookEventName"], &h["permissionDecision"]), (&"PreToolUse".into(), &"deny".into()), "{out}");
    h["permissionDecisionReason"].as_str().unwrap().to_string()
}

#[test]
fn pre_tool_use_judges_every_file_a_patch_touches() {
    let repo = initialized("");
    repo.boulder(&["stream", "init", "api"]).ok();
    let wt = repo.worktree("auth");
    for (header, path) in [
        ("*** Add File: ", "src/api/new.rs\n+x"),
        ("*** Update File: ", "src/api/list.rs\n@@\n-a\n+b"),
        ("*** Delete File: ", "src/api/old.rs"),
        ("*** Update File: src/auth/login.rs\n*** Move to: ", "src/api/moved.rs\n@@\n-a\n+b"),
        ("*** Add File: ", "src/types/user.rs\n+x"),
        ("*** Add File: ", "../api/src/api/x.rs\n+x"),
        ("*** Add File: ", ".git\n+gitdir: elsewhere"),
    ] {
        let text = format!("*** Begin Patch\n*** Add File: src/auth/ok.rs\n+fine\n{header}{path}\n*** End Patch\n");
        let out = feed(&repo, "codex", &patch(&wt, &text)).code(0).json();
        let reason = deny_reason(&out);
        let file = path.lines().next().unwrap();
        let rule = match file {
            "src/types/user.rs" => "is shared_read".to_string(),
            "../api/src/api/x.rs" => "is in the worktree of stream api".to_string(),
            ".git" => "git's own data".to_string(),
            _ => format!("{file} is owned by stream api"),
        };
        assert!(reason.contains(&rule), "{text}: {reason}");
        assert!(!reason.contains("src/auth/ok.rs"), "its own file is not named: {reason}");
    }
    // Its own files only, Write and Edit (Codex's aliases), other tools: {}.
    let own =
        "*** Begin Patch\n*** Add File: src/auth/a.rs\n+a\n*** Update File: src/auth/b.rs\n@@\n-a\n+b\n*** End Patch\n";
    assert_eq!(feed(&repo, "codex", &patch(&wt, own)).code(0).json(), serde_json::json!({}));
    for (tool, file, denied) in [("Write", "src/api/w.rs", true), ("Edit", "src/auth/e.rs", false)] {
        let p = fixture("codex/pre_tool_use_apply_patch", &wt, |v| {
            v["tool_name"] = tool.into();
            v["tool_input"] = serde_json::json!({"file_path": file, "content": "x"});
        });
        let out = feed(&repo, "codex", &p).code(0).json();
        assert_eq!(out.get("hookSpecificOutput").is_some(), denied, "{tool}: {out}");
    }
    let bash = fixture("codex/pre_tool_use_apply_patch", &wt, |v| {
        v["tool_name"] = "Bash".into();
        v["tool_input"] = serde_json::json!({"command": "*** Add File: src/api/x.rs"});
    });
    assert_eq!(feed(&repo, "codex", &bash).code(0).json(), serde_json::json!({}));
    // An apply_patch without patch text, and a payload it cannot read, are denied in the stream's
    // worktree (Codex runs the hook there) and let go in the main one.
    let empty = fixture("codex/pre_tool_use_apply_patch", &wt, |v| v["tool_input"] = serde_json::json!({}));
    assert!(deny_reason(&feed(&repo, "codex", &empty).code(0).json()).contains("could not read"));
    let text = patch(&wt, "*** Begin Patch\n*** Add File: src/auth/x.rs\n+\\ud800\n*** End Patch\n").to_string();
    let text = text.replace("\\\\ud800", "\\ud800");
    let out = run_with_input(&repo, &wt, &["agent", "hook", "codex"], text.as_bytes()).code(0).json();
    assert!(deny_reason(&out).contains("could not read"), "{out}");
    assert_eq!(run_with_input(&repo, &repo.dir, &["agent", "hook", "codex"], text.as_bytes()).code(1).stdout, "");
}

#[test]
fn session_start_gives_the_same_context_as_claude_code() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    let codex = feed(&repo, "codex", &fixture("codex/session_start", &wt, |_| {})).code(0).json();
    let claude = feed(&repo, "claude", &fixture("claude/session_start", &wt, |_| {})).code(0).json();
    assert_eq!(codex["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let ctx = codex["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(ctx.contains("stream auth") && ctx.contains("US-001") && ctx.contains("src/auth/**"), "{ctx}");
    assert_eq!(codex, claude);
}

#[test]
fn a_continued_stop_is_held_again_after_new_work() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    let stop = |active: bool| fixture("codex/stop", &wt, |v| v["stop_hook_active"] = Value::Bool(active));
    assert_eq!(feed(&repo, "codex", &stop(false)).code(0).json()["decision"], "block");
    assert_eq!(feed(&repo, "codex", &stop(true)).code(0).json(), serde_json::json!({}));
    commit_in(&repo, &wt, "src/auth/a.rs", "a\n", "work");
    let out = feed(&repo, "codex", &stop(true)).code(0).json();
    assert_eq!(out["decision"], "block", "{out}");
    let log = repo.boulder(&["log", "auth", "--json"]).ok().json();
    assert_eq!(log[0]["op"]["data"]["gate"], "progress");
    assert_eq!(feed(&repo, "codex", &stop(true)).code(0).json(), serde_json::json!({}));
}

#[test]
fn codex_runs_the_main_checkouts_hooks_in_linked_worktrees_and_status_says_so() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["agent", "install", "codex"]).ok();
    let wt = repo.worktree("auth");
    for event in ["SessionStart", "PreToolUse", "Stop"] {
        let (cmd, matcher) = installed(&repo.dir, ".codex/hooks.json", event);
        assert_eq!(cmd, "git boulder agent hook codex");
        if event == "PreToolUse" {
            assert_eq!(matcher.as_deref(), Some("apply_patch|Write|Edit"));
        }
    }
    // The worktree's own .codex/ folder is what makes Codex look (at the main checkout's file).
    assert!(wt.join(".codex").is_dir());
    let (pre, _) = installed(&repo.dir, ".codex/hooks.json", "PreToolUse");
    let out = run_installed(&repo, &wt, &pre, &patch(&wt, "*** Add File: src/api/x.rs\n+x\n")).code(0).json();
    assert!(deny_reason(&out).contains("owned by stream api"));

    let status = |repo: &TestRepo| {
        let s = repo.boulder(&["agent", "status", "--json"]).ok().json();
        s["harnesses"].as_array().unwrap().iter().find(|h| h["harness"] == "codex").unwrap()["files"].clone()
    };
    let files = status(&repo);
    assert!(files.as_array().unwrap().iter().all(|f| f["state"] == "present"), "{files}");
    // The main checkout's file set aside: the worktree's own file is intact, but Codex would run
    // no hook there.
    std::fs::rename(repo.dir.join(".codex/hooks.json"), repo.tmp.path().join("aside.json")).unwrap();
    let files = status(&repo);
    let wt_text = wt.display().to_string();
    let linked = files.as_array().unwrap().iter().find(|f| f["worktree"] == wt_text.as_str()).expect("the worktree");
    assert_eq!(linked["state"], "missing", "{files}");
    assert!(linked["detail"].as_str().unwrap().contains("main checkout"), "{linked}");
    let doc = repo.boulder(&["doctor", "--json"]).code(1).json();
    let p = doc["problems"].as_array().unwrap().iter().find(|p| p["area"] == "agent").expect("an agent problem");
    assert!(p["message"].as_str().unwrap().contains("codex integration missing"), "{p}");
    assert_eq!(p["fix"], "git boulder agent install codex");
    repo.boulder(&["agent", "install", "codex"]).ok();
    let files = status(&repo);
    assert!(files.as_array().unwrap().iter().all(|f| f["state"] == "present"), "{files}");
}

/// `agent status ARGS` with `PATH` holding only git-boulder, the system's programs and `extra`.
fn status_with_path(repo: &TestRepo, extra: Option<&std::path::Path>, args: &[&str]) -> Run {
    let bin_dir = std::path::Path::new(bin()).parent().unwrap().to_path_buf();
    let paths: Vec<std::path::PathBuf> =
        extra.map(|e| e.to_path_buf()).into_iter().chain([bin_dir, "/usr/bin".into(), "/bin".into()]).collect();
    let path = std::env::join_paths(paths).unwrap();
    let args: Vec<&str> = ["agent", "status"].iter().chain(args).copied().collect();
    repo.boulder_env(&repo.dir, &args, &[("PATH", path.to_str().unwrap())]).ok()
}

/// `agent status --json`'s Codex entry ([`status_with_path`]).
fn codex_status(repo: &TestRepo, extra: Option<&std::path::Path>) -> Value {
    let json = status_with_path(repo, extra, &["--json"]).json();
    json["harnesses"].as_array().unwrap().iter().find(|h| h["harness"] == "codex").unwrap().clone()
}

#[test]
fn codex_trust_is_unknown_without_codex_or_its_answer_and_asking_never_hangs() {
    let repo = initialized("");
    repo.boulder(&["agent", "install", "codex"]).ok();
    // No codex on PATH: unknown, said, and no problem for doctor.
    let codex = codex_status(&repo, None);
    assert_eq!(codex["trust"]["state"], "unknown", "{codex}");
    assert!(codex["trust"]["detail"].as_str().unwrap().contains("codex is not on PATH"), "{codex}");
    assert!(codex["files"].as_array().unwrap().iter().all(|f| f.get("trust").is_none()), "{codex}");
    let bin_dir = std::path::Path::new(bin()).parent().unwrap().display().to_string();
    let mut human = status_with_path(&repo, None, &[]);
    human.stdout = human.stdout.replace(&bin_dir, "[BIN]");
    assert_shown!("agent_status_codex_trust_unknown", human);
    let doc = repo.boulder(&["doctor", "--json"]).json();
    assert!(doc["problems"].as_array().unwrap().iter().all(|p| p["area"] != "agent"), "{doc}");

    // A codex that ends without answering, and one that never answers: unknown, saying why,
    // within the bound (the one that hangs is stopped).
    let stubs = tempfile::tempdir().unwrap();
    let stub = stubs.path().join("codex");
    for (body, why) in [("exit 0", "ended without answering"), ("exec sleep 600", "did not answer hooks/list within")] {
        std::fs::write(&stub, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let codex = codex_status(&repo, Some(stubs.path()));
        assert_eq!(codex["trust"]["state"], "unknown", "{codex}");
        assert!(codex["trust"]["detail"].as_str().unwrap().contains(why), "{codex}");
        assert_eq!(codex["trust"]["codex"], stub.to_str().unwrap());
    }
}
