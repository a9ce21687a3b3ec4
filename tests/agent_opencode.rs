//! The OpenCode plugin as `agent install opencode` writes it, loaded by `node` with a client that
//! records `tui.showToast` and `session.promptAsync` calls (tests/support/opencode-driver.mjs),
//! driven through idle events of a main and a child session. The plugin really runs
//! `git boulder check --json` (this binary, first on PATH) against a real repository.
//!
//! Needs `node` (Node >= 20): `.ci/run` installs Debian's `nodejs` when it is missing; outside CI a
//! machine without it skips these tests.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::*;

pub fn node() -> bool {
    let ok = std::process::Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "node is missing; .ci/run installs it (apt-get install nodejs)");
        eprintln!("skipped: node is not installed");
    }
    ok
}

fn driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/opencode-driver.mjs")
}

/// Run the installed plugin of worktree `dir` with `config`; `env` is added to the environment
/// the plugin (and so `git boulder check`) runs with.
pub fn drive(repo: &TestRepo, dir: &Path, config: Value, env: &[(&str, &str)]) -> Value {
    let plugin = dir.join(".opencode/plugins/git-boulder.js");
    assert!(plugin.is_file(), "no plugin installed in {}", dir.display());
    let mut cmd = repo.command("node");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run =
        Run::from(cmd.arg(driver()).arg(&plugin).arg(config.to_string()).current_dir(dir).output().expect("run node"))
            .ok();
    assert_eq!(run.stderr, "", "the plugin wrote to stderr");
    run.json()
}

pub fn idle_status(id: &str) -> Value {
    json!({"type": "session.status", "properties": {"sessionID": id, "status": {"type": "idle"}}})
}

fn idle(id: &str) -> Value {
    json!({"type": "session.idle", "properties": {"sessionID": id}})
}

fn assistant_says(text: &str) -> Value {
    json!([
        {"info": {"role": "user"}, "parts": [{"type": "text", "text": "build the login form"}]},
        {"info": {"role": "assistant"}, "parts": [{"type": "text", "text": text}]}
    ])
}

/// A sample repository with the plugin installed and the `auth` stream's worktree made.
fn installed() -> (TestRepo, PathBuf) {
    let repo = sample();
    repo.boulder(&["agent", "install", "opencode"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    (repo, wt)
}

#[test]
fn a_main_session_that_says_done_gets_one_toast_and_one_prompt_and_a_child_nothing() {
    if !node() {
        return;
    }
    let (repo, wt) = installed();
    let dir = wt.display().to_string();
    let config = json!({
        "directory": dir,
        "tui": true,
        "sessions": {
            "ses_main": {"directory": dir, "messages": assistant_says("--json? All stories implemented. I am done.")},
            "ses_child": {"directory": dir, "parentID": "ses_main", "messages": assistant_says("I am done")}
        },
        "events": [
            // Busy is not idle; a child session going idle (both event forms) is never held.
            {"type": "session.status", "properties": {"sessionID": "ses_main", "status": {"type": "busy"}}},
            idle_status("ses_child"),
            idle("ses_child"),
            idle_status("ses_main")
        ]
    });
    let out = drive(&repo, &wt, config, &[]);
    assert_eq!(out["plugins"], 1, "{out}");
    assert_eq!(out["thrown"], json!([]), "{out}");
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "one toast and one prompt, for the main session only: {out}");

    let toast = &calls[0];
    assert_eq!(toast["call"], "tui.showToast");
    // The agent said it is done with stories open: completion detection, the warning variant.
    assert_eq!(toast["args"]["body"]["variant"], "warning", "{toast}");
    assert!(toast["args"]["body"]["message"].as_str().unwrap().starts_with("Boulder"), "{toast}");

    let prompt = &calls[1];
    assert_eq!(prompt["call"], "session.promptAsync");
    assert_eq!(prompt["args"]["path"]["id"], "ses_main");
    let text = prompt["args"]["body"]["parts"][0]["text"].as_str().unwrap();
    assert_eq!(prompt["args"]["body"]["parts"][0]["type"], "text");
    assert!(text.starts_with("Boulder auth (iteration 0)\n"), "the enforcement message: {text}");

    // check recorded the enforcement on the stream's boulder, with that message.
    let log = repo.boulder_in(&wt, &["log", "auth", "--json"]).ok().json();
    let enforced: Vec<&Value> = log.as_array().unwrap().iter().filter(|e| e["op"]["kind"] == "enforced").collect();
    assert_eq!(enforced.len(), 1, "{log}");
    assert_eq!(enforced[0]["op"]["data"]["gate"], "completion", "{log}");
    assert_eq!(enforced[0]["op"]["data"]["message"].as_str().unwrap(), text);
}

#[test]
fn without_a_tui_the_prompt_still_goes_and_nothing_throws() {
    if !node() {
        return;
    }
    let (repo, wt) = installed();
    let dir = wt.display().to_string();
    let config = json!({
        "directory": dir,
        "tui": false,
        "sessions": {"ses_main": {"directory": dir}},
        "events": [idle("ses_main")]
    });
    // Long after the stream was made: idle past the threshold, so check enforces (error variant)
    // without any message to detect completion in.
    let out = drive(&repo, &wt, config, &[("BOULDER_NOW", "2030-01-01T00:00:00Z")]);
    assert_eq!(out["thrown"], json!([]), "{out}");
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{out}");
    assert_eq!(calls[0]["call"], "session.promptAsync");
    assert_eq!(calls[0]["args"]["path"]["id"], "ses_main");
    assert!(calls[0]["args"]["body"]["parts"][0]["text"].as_str().unwrap().starts_with("Boulder"), "{out}");
}

#[test]
fn no_enforcement_no_calls_and_a_repeated_idle_meets_the_cooldown() {
    if !node() {
        return;
    }
    let (repo, wt) = installed();
    let dir = wt.display().to_string();
    // Just made and nothing said: not idle long enough, so nothing is sent.
    let quiet = json!({
        "directory": dir, "tui": true,
        "sessions": {"ses_main": {"directory": dir, "messages": assistant_says("Working on the form now")}},
        "events": [idle_status("ses_main")]
    });
    let out = drive(&repo, &wt, quiet, &[]);
    assert_eq!(out["calls"], json!([]), "{out}");

    // Both idle forms of one turn: the first enforces, the second meets the cooldown it recorded.
    let both = json!({
        "directory": dir, "tui": true,
        "sessions": {"ses_main": {"directory": dir, "messages": assistant_says("I am done")}},
        "events": [idle_status("ses_main"), idle("ses_main")]
    });
    let out = drive(&repo, &wt, both, &[]);
    let prompts = out["calls"].as_array().unwrap().iter().filter(|c| c["call"] == "session.promptAsync").count();
    assert_eq!(prompts, 1, "{out}");
}

#[test]
fn in_the_main_worktree_the_plugin_pushes_on_through_the_project_boulder() {
    if !node() {
        return;
    }
    let repo = sample();
    repo.boulder(&["agent", "install", "opencode"]).ok();
    let dir = repo.dir.display().to_string();
    let config = json!({
        "directory": dir,
        "tui": true,
        "sessions": {"ses_main": {"directory": dir, "messages": assistant_says("That's it, I am done.")}},
        "events": [idle_status("ses_main")]
    });
    let out = drive(&repo, &repo.dir, config, &[]);
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{out}");
    assert_eq!(calls[0]["call"], "tui.showToast");
    assert_eq!(calls[1]["call"], "session.promptAsync");
    let text = calls[1]["args"]["body"]["parts"][0]["text"].as_str().unwrap();
    // Recorded on the project boulder, made on first use.
    let log = repo.boulder(&["log", "project", "--json"]).ok().json();
    let enforced: Vec<&Value> = log.as_array().unwrap().iter().filter(|e| e["op"]["kind"] == "enforced").collect();
    assert_eq!(enforced.len(), 1, "{log}");
    assert_eq!(enforced[0]["op"]["data"]["message"].as_str().unwrap(), text);
}

/// Run the installed plugin with the config's JSON text as given (so that it can hold what serde
/// cannot write, such as a lone surrogate escape).
fn drive_text(repo: &TestRepo, dir: &Path, config: &str) -> Value {
    let plugin = dir.join(".opencode/plugins/git-boulder.js");
    let run =
        Run::from(repo.command("node").arg(driver()).arg(&plugin).arg(config).current_dir(dir).output().unwrap()).ok();
    assert_eq!(run.stderr, "", "the plugin wrote to stderr");
    run.json()
}

#[test]
fn tool_execute_before_throws_git_boulders_reason_for_an_edit_the_stream_may_not_make() {
    if !node() {
        return;
    }
    let (repo, wt) = installed();
    repo.boulder(&["stream", "init", "api"]).ok();
    let dir = wt.display().to_string();
    let api = repo.worktree("api");
    let config = json!({
        "directory": dir, "tui": false, "sessions": {}, "events": [],
        "tools": [
            {"tool": "edit", "args": {"filePath": wt.join("src/api/list.rs"), "oldString": "a", "newString": "b"}},
            {"tool": "write", "args": {"filePath": "src/types/user.rs", "content": "x"}},
            {"tool": "multiedit", "args": {"filePath": api.join("src/api/x.rs"), "edits": []}},
            {"tool": "apply_patch", "args": {"patchText": "*** Begin Patch\n*** Add File: src/api/p.rs\n+x\n*** End Patch\n"}},
            {"tool": "write", "args": {"filePath": ".git", "content": "gitdir: /elsewhere"}},
            {"tool": "edit", "args": {"filePath": wt.join("src/auth/login.rs"), "oldString": "a", "newString": "b"}},
            {"tool": "write", "args": {"filePath": "src/auth/new.rs", "content": "x"}},
            {"tool": "bash", "args": {"command": "echo > src/api/x.rs"}},
            {"tool": "read", "args": {"filePath": "src/api/list.rs"}},
            {"tool": "write", "args": {"filePath": "src/auth/u.rs", "content": "LONE"}}
        ]
    });
    let text = config.to_string().replace("LONE", "\\ud800");
    let out = drive_text(&repo, &wt, &text);
    let tools = out["tools"].as_array().unwrap();
    let errors: Vec<Option<&str>> = tools.iter().map(|t| t["error"].as_str()).collect();
    for (i, want) in [
        "src/api/list.rs is owned by stream api",
        "src/types/user.rs is shared_read",
        "is in the worktree of stream api",
        "src/api/p.rs is owned by stream api",
        "git's own data",
    ]
    .iter()
    .enumerate()
    {
        let e = errors[i].unwrap_or_else(|| panic!("tool {i} went through: {out}"));
        assert!(e.starts_with("git-boulder: ") && e.contains(want), "{i}: {e}");
    }
    assert_eq!(&errors[5..9], &[None, None, None, None], "{out}");
    // A payload the binary cannot read (a lone surrogate): denied in the stream's worktree.
    assert!(errors[9].is_some_and(|e| e.contains("could not read")), "{out}");
    let log = repo.boulder_in(&wt, &["log", "auth", "--json"]).ok().json();
    let denied = log.as_array().unwrap().iter().filter(|e| e["op"]["kind"] == "denied").count();
    assert_eq!(denied, 6, "{log}");

    // In the main worktree nothing is denied.
    let main = repo.dir.display().to_string();
    let config = json!({"directory": main, "tui": false, "sessions": {}, "events": [],
        "tools": [{"tool": "write", "args": {"filePath": "src/api/list.rs", "content": "x"}}]});
    let out = drive(&repo, &repo.dir, config, &[]);
    assert_eq!(out["tools"][0]["error"], Value::Null, "{out}");
}

fn turn(user_text: &str, assistant: Value) -> Value {
    json!([
        {"info": {"role": "user", "agent": "plan", "model": {"providerID": "local", "modelID": "m-1"}},
         "parts": [{"type": "text", "text": user_text}]},
        assistant
    ])
}

#[test]
fn prompts_carry_the_sessions_agent_and_model_and_an_aborted_turn_is_left_alone() {
    if !node() {
        return;
    }
    let (repo, wt) = installed();
    let dir = wt.display().to_string();
    let done = json!({"info": {"role": "assistant"}, "parts": [{"type": "text", "text": "I am done."}]});
    let config = json!({
        "directory": dir, "tui": false,
        "sessions": {"ses_main": {"directory": dir, "messages": turn("build it", done)}},
        "events": [idle_status("ses_main")]
    });
    let out = drive(&repo, &wt, config, &[]);
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{out}");
    let body = &calls[0]["args"]["body"];
    assert_eq!(body["agent"], "plan", "{out}");
    assert_eq!(body["model"], json!({"providerID": "local", "modelID": "m-1"}), "{out}");

    // The user pressed Esc: the last assistant message carries MessageAbortedError.
    let (repo, wt) = installed();
    let dir = wt.display().to_string();
    let aborted = json!({"info": {"role": "assistant", "error": {"name": "MessageAbortedError", "data": {"message": "aborted"}}},
                         "parts": [{"type": "text", "text": "I am done."}]});
    let config = json!({
        "directory": dir, "tui": true,
        "sessions": {"ses_main": {"directory": dir, "messages": turn("build it", aborted)}},
        "events": [idle_status("ses_main")]
    });
    let out = drive(&repo, &wt, config, &[("BOULDER_NOW", "2030-01-01T00:00:00Z")]);
    assert_eq!(out["calls"], json!([]), "{out}");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["failure_count"], 0, "nothing counted");

    // As OpenCode 1.18.33 aborts a turn while a tool runs: `session.error` and an idle come before
    // the message carries the error. Not pushed; once the session is busy again, it is.
    let (repo, wt) = installed();
    let dir = wt.display().to_string();
    let done = json!({"info": {"role": "assistant"}, "parts": [{"type": "text", "text": "I am done."}]});
    let abort = json!({"type": "session.error", "properties": {"sessionID": "ses_main",
                       "error": {"name": "MessageAbortedError", "data": {"message": "Aborted"}}}});
    let busy = json!({"type": "session.status", "properties": {"sessionID": "ses_main", "status": {"type": "busy"}}});
    let config = |events: Value| {
        json!({
            "directory": dir, "tui": false,
            "sessions": {"ses_main": {"directory": dir, "messages": turn("build it", done.clone())}},
            "events": events
        })
    };
    let out = drive(&repo, &wt, config(json!([abort, idle_status("ses_main"), idle_status("ses_main")])), &[]);
    assert_eq!(out["calls"], json!([]), "{out}");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["failure_count"], 0, "nothing counted");
    let events = json!([abort, idle_status("ses_main"), busy, idle_status("ses_main")]);
    let out = drive(&repo, &wt, config(events), &[]);
    assert_eq!(out["calls"].as_array().unwrap().len(), 1, "the idle after the session went busy again: {out}");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["failure_count"], 1, "{out}");
}

#[test]
fn under_opencode_run_nothing_is_checked_or_counted() {
    if !node() {
        return;
    }
    let (repo, wt) = installed();
    let dir = wt.display().to_string();
    let done = json!({"info": {"role": "assistant"}, "parts": [{"type": "text", "text": "I am done."}]});
    let config = json!({
        "directory": dir, "tui": false, "argv": ["run", "--model", "x", "build the login form"],
        "sessions": {"ses_main": {"directory": dir, "messages": turn("build it", done)}},
        "events": [idle_status("ses_main")],
        "tools": [{"tool": "write", "args": {"filePath": "src/api/list.rs", "content": "x"}}]
    });
    let out = drive(&repo, &wt, config, &[]);
    assert_eq!(out["calls"], json!([]), "{out}");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["failure_count"], 0, "nothing counted");
    // Edits are still judged under `run`.
    assert!(out["tools"][0]["error"].as_str().is_some_and(|e| e.contains("owned by stream api")), "{out}");
}

#[test]
fn a_session_going_on_because_of_a_push_is_pushed_again_only_after_new_work() {
    if !node() {
        return;
    }
    let (repo, wt) = installed();
    let dir = wt.display().to_string();
    let done = json!({"info": {"role": "assistant"}, "parts": [{"type": "text", "text": "I am done."}]});
    let first = json!({
        "directory": dir, "tui": false,
        "sessions": {"ses_main": {"directory": dir, "messages": turn("build it", done.clone())}},
        "events": [idle_status("ses_main")]
    });
    let out = drive(&repo, &wt, first, &[]);
    let pushed = out["calls"][0]["args"]["body"]["parts"][0]["text"].as_str().unwrap().to_string();
    // The next idle answers that push: with no commit since, it is let be.
    let again = |repo: &TestRepo| {
        let config = json!({
            "directory": dir, "tui": false,
            "sessions": {"ses_main": {"directory": dir, "messages": turn(&pushed, done.clone())}},
            "events": [idle_status("ses_main")]
        });
        drive(repo, &wt, config, &[])
    };
    assert_eq!(again(&repo)["calls"], json!([]));
    commit_in(&repo, &wt, "src/auth/a.rs", "a\n", "work");
    let out = again(&repo);
    assert_eq!(out["calls"].as_array().unwrap().len(), 1, "{out}");
    let log = repo.boulder_in(&wt, &["log", "auth", "--json"]).ok().json();
    assert_eq!(log[0]["op"]["data"]["gate"], "progress", "{log}");
}
