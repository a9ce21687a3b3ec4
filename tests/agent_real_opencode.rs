//! The real OpenCode (the pinned `opencode-ai` from npm, `common::harness("opencode")`) with the
//! plugin `agent install opencode` writes, driven headless — `opencode run`, and `opencode serve`
//! through its HTTP API — against the fake model server (`tests/support/fake_openai_chat.py`,
//! OpenCode's bundled `@ai-sdk/openai-compatible` provider pointed at it). OpenCode gets a home
//! and XDG folders of its own, its config in `OPENCODE_CONFIG_CONTENT`, no sharing, no update, no
//! model list fetch, and an npm registry on a closed local port: nothing reaches the internet.
//!
//! Each wait is on a condition (`wait_for`, at most 90 s); a serve that outlives its test is
//! killed when its guard drops.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use crate::common::*;

/// OpenCode's config: the fake model as the only provider, for the agent and the title alike.
fn config(model: &FakeModel) -> String {
    json!({
        "$schema": "https://opencode.ai/config.json",
        "share": "disabled",
        "autoupdate": false,
        "model": "fake/m",
        "small_model": "fake/m",
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {"baseURL": format!("{}/v1", model.url()), "apiKey": "test"},
            "models": {"m": {"name": "M", "tool_call": true}}
        }}
    })
    .to_string()
}

/// `opencode ARGS` in `dir`, with the repository's fixed environment (git-boulder first on PATH,
/// the test's clock) and OpenCode kept at home.
pub fn opencode(repo: &TestRepo, bin: &Path, model: &FakeModel, dir: &Path) -> Command {
    let mut cmd = repo.command(bin);
    let home = &repo.home;
    cmd.current_dir(dir)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("OPENCODE_CONFIG_CONTENT", config(model))
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        // An install OpenCode would start fails at once instead of reaching npmjs.org.
        .env("npm_config_registry", "http://127.0.0.1:9/")
        .env("npm_config_fetch_retries", "0");
    cmd
}

/// A sample repository (`ownership: error`, the default) with streams auth and api, the
/// OpenCode plugin installed in every worktree, and a cooldown of 0 (every test's commands share
/// one instant of the test clock).
pub fn installed() -> (TestRepo, PathBuf) {
    let repo = sample_with("  boulder:\n    cooldown: 0s\n");
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["stream", "init", "api"]).ok();
    repo.boulder(&["agent", "install", "opencode"]).ok();
    let wt = repo.worktree("auth");
    (repo, wt)
}

/// The requests of the agent itself (those offering tools; the title request offers none).
fn agent_requests(model: &FakeModel) -> Vec<Value> {
    model
        .requests()
        .into_iter()
        .filter(|r| r["path"] == "/v1/chat/completions" && r["body"]["tools"].is_array())
        .collect()
}

fn enforced(repo: &TestRepo, wt: &Path) -> Vec<Value> {
    let log = repo.boulder_in(wt, &["log", "auth", "--json"]).ok().json();
    let mut ops: Vec<Value> =
        log.as_array().unwrap().iter().map(|e| e["op"].clone()).filter(|op| op["kind"] == "enforced").collect();
    ops.reverse();
    ops
}

/// A child process killed when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `opencode run MESSAGE ARGS` to its end: (exit code, stdout, stderr).
pub fn run(repo: &TestRepo, bin: &Path, model: &FakeModel, dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = tempfile::tempdir().unwrap();
    let (o, e) = (out.path().join("out"), out.path().join("err"));
    let child = opencode(repo, bin, model, dir)
        .arg("run")
        .args(args)
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap())
        .spawn()
        .expect("start opencode run");
    let mut guard = Guard(child);
    let mut status = None;
    wait_for("opencode run to exit", || {
        status = guard.0.try_wait().unwrap();
        status.is_some()
    });
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (status.unwrap().code().unwrap_or(-1), read(&o), read(&e))
}

/// `opencode serve` in a folder, driven over its HTTP API.
struct Serve {
    url: String,
    _guard: Guard,
    _out: tempfile::TempDir,
}

impl Serve {
    fn start(repo: &TestRepo, bin: &Path, model: &FakeModel, dir: &Path) -> Serve {
        // OpenCode's `--port 0` means its default port, 4096: give it a free one.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let out = tempfile::tempdir().unwrap();
        let log = out.path().join("serve.log");
        let child = opencode(repo, bin, model, dir)
            .args(["serve", "--hostname", "127.0.0.1", "--port", &port.to_string()])
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("start opencode serve");
        let serve = Serve { url: format!("http://127.0.0.1:{port}"), _guard: Guard(child), _out: out };
        wait_for("opencode serve to listen", || {
            std::fs::read_to_string(&log).unwrap_or_default().contains("listening")
        });
        serve
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        // python3 (which the fake model needs anyway) as the HTTP client.
        const CLIENT: &str = "import sys, urllib.request as u\n\
            data = sys.argv[3].encode() if len(sys.argv) > 3 else None\n\
            r = u.Request(sys.argv[2], data=data, method=sys.argv[1], headers={'content-type': 'application/json'})\n\
            sys.stdout.write(u.urlopen(r, timeout=60).read().decode())";
        let mut cmd = Command::new("python3");
        cmd.args(["-c", CLIENT, method, &format!("{}{path}", self.url)]);
        if let Some(b) = body {
            cmd.arg(b.to_string());
        }
        let out = cmd.output().expect("python3");
        assert!(out.status.success(), "{method} {path}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    fn session(&self, parent: Option<&str>) -> String {
        let body = parent.map_or_else(|| json!({}), |p| json!({"parentID": p}));
        self.call("POST", "/session", Some(body))["id"].as_str().unwrap().to_string()
    }

    fn prompt(&self, id: &str, text: &str, agent: &str) {
        let body = json!({"parts": [{"type": "text", "text": text}], "agent": agent,
                          "model": {"providerID": "fake", "modelID": "m"}});
        self.call("POST", &format!("/session/{id}/prompt_async"), Some(body));
    }

    fn messages(&self, id: &str) -> Vec<Value> {
        self.call("GET", &format!("/session/{id}/message"), None).as_array().cloned().unwrap_or_default()
    }

    fn idle(&self, id: &str) -> bool {
        self.call("GET", "/session/status", None).get(id).is_none()
    }

    /// The user messages of session `id` that are git-boulder's pushes.
    fn pushes(&self, id: &str) -> Vec<Value> {
        self.messages(id)
            .into_iter()
            .filter(|m| m["info"]["role"] == "user" && text(m).starts_with("Boulder"))
            .collect()
    }

    /// Wait until session `id` is idle with a finished assistant message as its last.
    fn wait_done(&self, id: &str, what: &str) {
        wait_for(what, || {
            let msgs = self.messages(id);
            let last = msgs.last().cloned().unwrap_or(Value::Null);
            last["info"]["role"] == "assistant" && !last["info"]["time"]["completed"].is_null() && self.idle(id)
        });
    }
}

fn text(message: &Value) -> String {
    let parts = message["parts"].as_array().cloned().unwrap_or_default();
    parts.iter().filter(|p| p["type"] == "text").filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")
}

#[test]
fn run_denies_an_edit_into_another_streams_file_and_installs_nothing_at_start() {
    let Some(bin) = harness("opencode") else { return };
    let (repo, wt) = installed();
    let target = wt.join("src/api/list.rs");
    let model = FakeModel::start(json!([
        {"tool_calls": [{"name": "write", "arguments": {"filePath": target.display().to_string(),
                                                         "content": "pub fn list() {}\n"}}]},
        {"text": "The write was refused."}
    ]));
    let (code, stdout, stderr) = run(&repo, &bin, &model, &wt, &["--print-logs", "Add the list endpoint."]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    // Refused before it was written: the file is not there, the worktree is clean.
    assert!(!target.exists(), "the write went through");
    assert_eq!(repo.git_in(&wt, &["status", "--porcelain"]).ok().stdout, "");
    // The tool result the model got names the owner, in git-boulder's words.
    let requests = agent_requests(&model);
    assert_eq!(requests.len(), 2, "one request for the tool call, one after its result");
    let tool = requests[1]["body"]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").cloned();
    let result = tool.expect("the tool result").to_string();
    assert!(result.contains("git-boulder: src/api/list.rs is owned by stream api"), "{result}");
    // Recorded as a denial on the stream.
    let log = repo.boulder_in(&wt, &["log", "auth", "--json"]).ok().json();
    let denied: Vec<&Value> = log.as_array().unwrap().iter().filter(|e| e["op"]["kind"] == "denied").collect();
    assert_eq!(denied.len(), 1, "{log}");
    assert_eq!(denied[0]["op"]["data"]["rule"], "other_stream");
    // OpenCode found nothing to install in the fresh .opencode/ folder: no npm install was tried
    // there (it would fail on the closed registry, and take a minute on a real one). OpenCode
    // tries one in the user's ~/.config/opencode too, its own, once per machine.
    let installs: Vec<&str> = stderr.lines().filter(|l| l.contains("dependency install")).collect();
    assert!(installs.iter().all(|l| !l.contains("/.opencode")), "an npm install in .opencode/: {installs:?}");
    assert!(installs.iter().all(|l| l.contains("/.config/opencode")), "{installs:?}");
    assert_eq!(std::fs::read_dir(wt.join(".opencode/node_modules")).unwrap().count(), 0);
}

#[test]
fn run_counts_no_idle_it_cannot_deliver() {
    let Some(bin) = harness("opencode") else { return };
    let (repo, wt) = installed();
    let model = FakeModel::start(json!([{"text": "All stories implemented. I am done."}]));
    let (code, stdout, stderr) = run(&repo, &bin, &model, &wt, &["--agent", "plan", "Plan the login form."]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("I am done."), "{stdout}");
    // `run` ends at the first idle: nothing was pushed, and nothing counted against max_failures.
    assert_eq!(agent_requests(&model).len(), 1);
    assert_eq!(enforced(&repo, &wt), Vec::<Value>::new());
    assert_eq!(repo.state("refs/boulder/boulders/auth")["failure_count"], 0);
}

#[test]
fn serve_pushes_an_idle_session_with_its_own_agent_and_model() {
    let Some(bin) = harness("opencode") else { return };
    let (repo, wt) = installed();
    let model = FakeModel::start(json!([{"text": "All stories implemented. I am done."}]));
    let serve = Serve::start(&repo, &bin, &model, &wt);
    let id = serve.session(None);
    serve.prompt(&id, "Plan the login form.", "plan");
    // The idle session is pushed with the next story, and the agent answers that push.
    wait_for("the push to be answered", || {
        let msgs = serve.messages(&id);
        msgs.len() >= 4 && msgs[3]["info"]["role"] == "assistant" && !msgs[3]["info"]["time"]["completed"].is_null()
    });
    let pushes = serve.pushes(&id);
    assert_eq!(pushes.len(), 1);
    let push = &pushes[0];
    assert!(text(push).starts_with("Boulder auth (iteration 0)\n") && text(push).contains("US-001"), "{push}");
    // The session's own agent and model: the read-only plan agent stays plan.
    assert_eq!(push["info"]["agent"], "plan", "{push}");
    assert_eq!(push["info"]["model"], json!({"providerID": "fake", "modelID": "m"}), "{push}");
    assert_eq!(serve.messages(&id)[3]["info"]["agent"], "plan");
    // The model got the push as the next prompt.
    let requests = agent_requests(&model);
    let last_user = requests[1]["body"]["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "user");
    assert!(last_user.unwrap().to_string().contains("Boulder auth (iteration 0)"), "{}", requests[1]);
    let ops = enforced(&repo, &wt);
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!(ops[0]["data"]["gate"], "completion");
}

#[test]
fn serve_holds_a_pushed_session_again_only_on_new_work() {
    let Some(bin) = harness("opencode") else { return };
    let (repo, wt) = installed();
    let commit = "mkdir -p src/auth && echo '// login' > src/auth/login.rs && git add -A && git commit -q -m login";
    let model = FakeModel::start(json!([
        {"text": "All stories implemented. I am done."},
        {"tool_calls": [{"name": "bash", "arguments": {"command": commit, "description": "Commit the login form"}}]},
        {"text": "Committed the login form."},
        {"text": "Nothing more to do."},
        {"text": "All stories implemented. I am done."}
    ]));
    let serve = Serve::start(&repo, &bin, &model, &wt);
    let id = serve.session(None);
    serve.prompt(&id, "Build the login form.", "build");
    // Pushed (completion), a commit, held again (progress), no new work: let go.
    wait_for("two pushes", || serve.pushes(&id).len() == 2);
    serve.wait_done(&id, "the answer to the second push");
    assert_eq!(repo.git_in(&wt, &["log", "-1", "--format=%s"]).ok().stdout.trim(), "login");
    // Another session's stop, pushed after the first session's last idle was checked (the plugin
    // checks one idle at a time, in order): when its push is recorded, that check is done.
    let other = serve.session(None);
    serve.prompt(&other, "Anything left?", "build");
    wait_for("the other session's push", || serve.pushes(&other).len() == 1);
    let gates: Vec<Value> = enforced(&repo, &wt).iter().map(|op| op["data"]["gate"].clone()).collect();
    assert_eq!(gates, [json!("completion"), json!("progress"), json!("completion")]);
    assert_eq!(serve.pushes(&id).len(), 2, "a stop without new work was held again");
}

#[test]
fn serve_leaves_an_aborted_turn_and_a_child_session_alone() {
    let Some(bin) = harness("opencode") else { return };
    let (repo, wt) = installed();
    let model = FakeModel::start(json!([
        // Says it is done (a push, were the turn not aborted), then runs a tool the user stops.
        {"text": "All stories implemented. I am done.",
         "tool_calls": [{"name": "bash", "arguments": {"command": "sleep 600", "description": "Wait"}}]},
        {"text": "All stories implemented. I am done."},
        {"text": "All stories implemented. I am done."}
    ]));
    let serve = Serve::start(&repo, &bin, &model, &wt);
    // A turn the user aborts (Esc) while its tool runs.
    let aborted = serve.session(None);
    serve.prompt(&aborted, "Build the login form.", "build");
    wait_for("the tool to run", || {
        serve.messages(&aborted).iter().any(|m| {
            m["parts"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["type"] == "tool" && p["state"]["status"] == "running"))
        })
    });
    serve.call("POST", &format!("/session/{aborted}/abort"), None);
    wait_for("the aborted session to be idle", || serve.idle(&aborted));
    let msgs = serve.messages(&aborted);
    assert!(msgs.iter().any(|m| m["info"]["error"]["name"] == "MessageAbortedError"), "{msgs:?}");
    // A child session (a subagent's) that says it is done.
    let parent = serve.session(None);
    let child = serve.session(Some(&parent));
    serve.prompt(&child, "Check the tests.", "build");
    serve.wait_done(&child, "the child's answer");
    // A main session that says it is done: pushed, after the two idles above were checked.
    let main = serve.session(None);
    serve.prompt(&main, "Build the login form.", "build");
    wait_for("the main session's push", || serve.pushes(&main).len() == 1);
    assert_eq!(serve.pushes(&aborted), Vec::<Value>::new());
    assert_eq!(serve.pushes(&child), Vec::<Value>::new());
    assert_eq!(enforced(&repo, &wt).len(), 1);
}

#[test]
fn serve_leaves_a_subagents_session_alone() {
    let Some(bin) = harness("opencode") else { return };
    let (repo, wt) = installed();
    let model = FakeModel::start(json!([
        {"tool_calls": [{"name": "task", "arguments": {"description": "Check the tests",
            "prompt": "Check the tests of the login form.", "subagent_type": "general"}}]},
        {"text": "All stories implemented. I am done."},
        {"text": "All stories implemented. I am done."}
    ]));
    let serve = Serve::start(&repo, &bin, &model, &wt);
    let id = serve.session(None);
    serve.prompt(&id, "Build the login form.", "build");
    // The subagent's session (a child) says it is done first, then the main session does.
    wait_for("the main session's push", || serve.pushes(&id).len() == 1);
    let children = serve.call("GET", &format!("/session/{id}/children"), None);
    let children = children.as_array().cloned().unwrap_or_default();
    assert_eq!(children.len(), 1, "the task tool made one child session: {children:?}");
    let child = children[0]["id"].as_str().unwrap();
    assert!(serve.messages(child).iter().any(|m| text(m).contains("I am done")), "the child said it is done");
    assert_eq!(serve.pushes(child), Vec::<Value>::new());
    assert_eq!(enforced(&repo, &wt).len(), 1);
}

#[test]
fn serve_holds_on_new_work_only_below_the_cap_of_eight_blocks_in_a_row() {
    let Some(bin) = harness("opencode") else { return };
    let (repo, wt) = installed();
    let commit = "echo step >> src/auth/steps.rs && git add -A && git commit -q -m step";
    let mut turns = vec![json!({"text": "All stories implemented. I am done."})];
    // Seven rounds of work, each committed and then a stop.
    for _ in 0..7 {
        turns
            .push(json!({"tool_calls": [{"name": "bash", "arguments": {"command": commit, "description": "Commit"}}]}));
        turns.push(json!({"text": "Committed a step."}));
    }
    turns.push(json!({"text": "All stories implemented. I am done."}));
    let model = FakeModel::start(Value::Array(turns));
    let count = || repo.git_in(&wt, &["rev-list", "--count", "HEAD"]).ok().stdout.trim().parse::<u32>().unwrap();
    let base = count();
    let serve = Serve::start(&repo, &bin, &model, &wt);
    let id = serve.session(None);
    serve.prompt(&id, "Build the login form.", "build");
    // The first push, then one per round of new work while the blocks in a row stay below 8:
    // seven pushes; the seventh round's stop is let go although it brought new work.
    wait_for_within("seven pushes", std::time::Duration::from_secs(300), || serve.pushes(&id).len() == 7);
    wait_for("the seventh round", || count() == base + 7);
    serve.wait_done(&id, "the last stop");
    // Another session's stop, checked after that last one (one check at a time, in order).
    let other = serve.session(None);
    serve.prompt(&other, "Anything left?", "build");
    wait_for("the other session's push", || serve.pushes(&other).len() == 1);
    let gates: Vec<Value> = enforced(&repo, &wt).iter().map(|op| op["data"]["gate"].clone()).collect();
    let mut want = vec![json!("completion")];
    want.extend(std::iter::repeat_n(json!("progress"), 6));
    want.push(json!("completion"));
    assert_eq!(gates, want);
    assert_eq!(serve.pushes(&id).len(), 7, "held past the cap");
}
