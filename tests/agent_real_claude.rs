//! The real Claude Code (`claude -p`, the version `.ci/run` pins) run headless in a stream
//! worktree of the sample with `git boulder agent install claude`, against the fake Anthropic API
//! of `tests/support/fake_anthropic.py` on 127.0.0.1: each contract of docs/harness.md checked end
//! to end on the files on disk, git, the boulder's op-log and the requests the model got.
//!
//! Run with `BOULDER_HARNESSES=/root/.cache/git-boulder/harnesses/node_modules/.bin cargo test
//! --test runner -- agent_real_claude::` (each test prints why and passes when Claude Code is not
//! installed, outside CI).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

/// How long one `claude -p` run may take before it is killed and the test fails (a run takes a
/// second or two).
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The prompt of every run; the first user message of the main agent's conversation ends with it.
const PROMPT: &str = "Work on your story.";

/// The sample with streams auth and api initialized and Claude Code's hooks installed; a hook of
/// the user's own (in the temp HOME's `~/.claude/settings.json`) keeps each `Stop`,
/// `SubagentStop` and `PreToolUse` (of `Write` and `Edit`) payload Claude Code sends, so a test
/// can see what the hooks were asked.
struct Project {
    repo: TestRepo,
    claude: PathBuf,
    payloads: PathBuf,
}

impl Project {
    fn new() -> Option<Project> {
        let claude = harness("claude")?;
        let repo = sample();
        repo.boulder(&["stream", "init", "auth"]).ok();
        repo.boulder(&["stream", "init", "api"]).ok();
        repo.boulder(&["agent", "install", "claude"]).ok();
        let payloads = repo.tmp.path().join("payloads");
        std::fs::create_dir_all(&payloads).unwrap();
        let keep = format!("cat > '{}'/$(date +%s%N).json", payloads.display());
        let group = json!([{"hooks": [{"type": "command", "command": keep}]}]);
        let tools = json!([{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": keep}]}]);
        let settings = json!({"hooks": {"Stop": group, "SubagentStop": group, "PreToolUse": tools}});
        std::fs::create_dir_all(repo.home.join(".claude")).unwrap();
        std::fs::write(repo.home.join(".claude/settings.json"), settings.to_string()).unwrap();
        Some(Project { repo, claude, payloads })
    }

    fn wt(&self, stream: &str) -> PathBuf {
        self.repo.worktree(stream)
    }

    /// `claude -p PROMPT` (and `extra` arguments) in `dir` against `model`, with `env`: [`claude_p`].
    fn run(&self, dir: &Path, model: &FakeModel, extra: &[&str], env: &[(&str, &str)]) -> Run {
        claude_p(&self.repo, &self.claude, dir, model, PROMPT, extra, env)
    }

    /// The payloads of `events` Claude Code sent to the hooks, in the order it sent them.
    fn payloads(&self, events: &[&str]) -> Vec<Value> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.payloads).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        files
            .iter()
            .map(|f| serde_json::from_str::<Value>(&std::fs::read_to_string(f).unwrap()).unwrap())
            .filter(|p| events.iter().any(|e| p["hook_event_name"] == *e))
            .collect()
    }

    /// The `Stop` and `SubagentStop` payloads, in order.
    fn stops(&self) -> Vec<Value> {
        self.payloads(&["Stop", "SubagentStop"])
    }

    /// The ops of the boulder `name`, oldest first.
    fn ops(&self, name: &str) -> Vec<Value> {
        let log = self.repo.boulder(&["log", name, "--json"]).ok().json();
        let mut ops: Vec<Value> = log.as_array().unwrap().iter().map(|e| e["op"].clone()).collect();
        ops.reverse();
        ops
    }

    fn ops_of_kind(&self, name: &str, kind: &str) -> Vec<Value> {
        self.ops(name).into_iter().filter(|op| op["kind"] == kind).collect()
    }
}

/// The requests of the agent loops (the main agent's and subagents'): `/v1/messages` offering
/// tools, each of which took a scripted turn. Side requests and token counts are left out.
fn turn_requests(model: &FakeModel) -> Vec<Value> {
    model
        .requests()
        .into_iter()
        .filter(|r| {
            let path = r["path"].as_str().unwrap_or_default();
            path.split('?').next().unwrap_or_default().ends_with("/v1/messages")
                && r["body"]["tools"].as_array().is_some_and(|t| !t.is_empty())
        })
        .map(|r| r["body"].clone())
        .collect()
}

/// The real `claude -p PROMPT` (and `extra` arguments) run headless in `dir` of `repo` against
/// `model`, with `env`: edits without asking, nothing but the fake model reached; killed after
/// [`RUN_LIMIT`], failing the test with the requests the model got.
pub fn claude_p(
    repo: &TestRepo,
    claude: &Path,
    dir: &Path,
    model: &FakeModel,
    prompt: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let out = repo.tmp.path().join("claude.out");
    let err = repo.tmp.path().join("claude.err");
    let mut cmd = repo.command(claude);
    cmd.current_dir(dir)
        .args(["-p", prompt])
        .args(extra)
        // Edits run without asking (as root too, where --dangerously-skip-permissions is
        // refused); Bash and Agent are allowed by name. A denial is the hook's, never a prompt.
        .args(["--permission-mode", "acceptEdits", "--allowedTools", "Bash,Edit,Write,Agent"])
        .args(["--output-format", "stream-json", "--verbose"])
        .env("ANTHROPIC_BASE_URL", model.url())
        .env("ANTHROPIC_API_KEY", "dummy")
        // Nothing but the fake model: no telemetry, error reports, update checks or other
        // traffic of Claude Code's own.
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run claude");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "claude -p still running after {RUN_LIMIT:?}: killed\nrequests:\n{}\nstderr:\n{}",
                shown_requests(model),
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Run {
        stdout: std::fs::read_to_string(&out).unwrap(),
        stderr: std::fs::read_to_string(&err).unwrap(),
        code: status.code().unwrap_or(-1),
    }
}

/// Every request, one line each, with the text of its last message (for a failing test).
fn shown_requests(model: &FakeModel) -> String {
    model
        .requests()
        .iter()
        .map(|r| {
            let last = r["body"]["messages"].as_array().and_then(|m| m.last()).map(text).unwrap_or_default();
            format!("{} {}: {}", r["method"], r["path"], last.chars().take(400).collect::<String>())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// All the text in a message (its text blocks, tool results, system reminders), one piece a line.
fn text(v: &Value) -> String {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match v {
                        Value::String(s) if k == "text" || k == "content" => out.push(s.clone()),
                        _ => walk(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out.join("\n")
}

fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().expect("a messages request")
}

/// The text of the last message of a request: what the model is told last.
fn last_text(body: &Value) -> String {
    messages(body).last().map(text).unwrap_or_default()
}

/// A request of the main agent's conversation (its first user message is the prompt), not a
/// subagent's.
fn is_main(body: &Value) -> bool {
    messages(body).first().is_some_and(|m| text(m).ends_with(PROMPT))
}

/// Each tool call the model made in the conversation of `body`, with the result Claude Code gave
/// back: (tool name, input, is_error, result text).
fn tool_results(body: &Value) -> Vec<(String, Value, bool, String)> {
    let blocks: Vec<&Value> =
        messages(body).iter().filter_map(|m| m["content"].as_array()).flat_map(|c| c.iter()).collect();
    blocks
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|u| {
            let result = blocks
                .iter()
                .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == u["id"])
                .unwrap_or_else(|| panic!("no result for {u}"));
            (
                u["name"].as_str().unwrap().to_string(),
                u["input"].clone(),
                result["is_error"] == true,
                text(&json!({"content": result["content"]})),
            )
        })
        .collect()
}

fn write(path: &Path, content: &str) -> Value {
    json!({"name": "Write", "input": {"file_path": path.to_str().unwrap(), "content": content}})
}

/// The model's turn that commits a file of stream auth through Bash (recorded by git-boulder's
/// post-commit hook: new work).
fn commit_turn(file: &str, msg: &str) -> Value {
    json!({"tool_use": {"name": "Bash", "input": {
        "command": format!("echo '// {msg}' > src/auth/{file} && git add src/auth && git commit -q -m '{msg}'"),
        "description": "commit the work"}}})
}

#[test]
fn edits_into_another_streams_files_and_gits_data_are_denied_and_the_model_is_told_why() {
    let Some(p) = Project::new() else { return };
    let (wt, api_wt) = (p.wt("auth"), p.wt("api"));
    let dot_git = std::fs::read_to_string(wt.join(".git")).unwrap();
    let common_hook = p.repo.dir.join(".git/hooks/post-checkout");
    let forged = format!("gitdir: {}\n", p.repo.dir.join(".git/worktrees/api").display());
    let model = FakeModel::start(json!([
        {"tool_use": [
            {"name": "Edit", "input": {"file_path": wt.join("src/api/mod.rs").to_str().unwrap(),
                                       "old_string": "// api", "new_string": "// taken over by auth"}},
            write(&api_wt.join("src/api/list.rs"), "fn list() {}\n"),
            write(&wt.join(".git"), &forged),
            write(&common_hook, "#!/bin/sh\necho pwned\n"),
            write(&wt.join("src/auth/login.rs"), "fn login() {}\n"),
            // The stream's own file, but a payload no JSON parser takes (a lone surrogate).
            {"name": "Write", "input_json": format!(r#"{{"file_path": {}, "content": "x\ud800y"}}"#,
                                                     json!(wt.join("src/auth/odd.rs")))},
        ]},
        {"text": "Paused here."},
    ]));
    p.run(&wt, &model, &[], &[]).ok();

    // Nothing denied was written; the allowed write was (the tools really ran).
    assert_eq!(p.repo.read(".boulder/worktrees/auth/src/api/mod.rs"), "// api\n");
    assert!(!api_wt.join("src/api/list.rs").exists(), "written into the api worktree");
    assert_eq!(std::fs::read_to_string(wt.join(".git")).unwrap(), dot_git, "the worktree's .git was changed");
    assert!(!common_hook.exists(), "a hook was written into the common git dir");
    assert_eq!(std::fs::read_to_string(wt.join("src/auth/login.rs")).unwrap(), "fn login() {}\n");
    assert!(!wt.join("src/auth/odd.rs").exists(), "an edit git-boulder could not read was let through");
    assert_eq!(p.repo.git_out(&["-C", wt.to_str().unwrap(), "rev-parse", "--abbrev-ref", "HEAD"]), "boulder/auth");

    // The model's next request carries each denial with git-boulder's reason.
    let turns = turn_requests(&model);
    assert!(turns.len() >= 2, "{}", shown_requests(&model));
    let results = tool_results(&turns[1]);
    assert_eq!(results.len(), 6, "{results:?}");
    let expect = [
        (
            "Edit",
            true,
            "src/api/mod.rs is owned by stream api; stream auth may change only its own paths (src/auth/**)",
        ),
        ("Write", true, "is in the worktree of stream api, not in this worktree"),
        ("Write", true, "git's own data for this repository's worktrees; stream auth never writes there"),
        ("Write", true, "git's own data for this repository's worktrees; stream auth never writes there"),
        ("Write", false, ""),
        ("Write", true, "git-boulder could not read this edit's hook payload"),
    ];
    for ((name, input, is_error, said), (want_name, want_error, want)) in results.iter().zip(expect) {
        assert_eq!((name.as_str(), *is_error), (want_name, want_error), "{input}: {said}");
        assert!(said.contains(want), "{input}: {said}");
        if want_error {
            assert!(said.starts_with(&format!("PreToolUse:{name} hook error: ")), "{said}");
        }
    }
    // Recorded as denials on the stream's boulder.
    let denied: Vec<(String, String)> = p
        .ops_of_kind("auth", "denied")
        .iter()
        .map(|op| (op["data"]["rule"].as_str().unwrap().into(), op["data"]["path"].as_str().unwrap().into()))
        .collect();
    let rules: Vec<&str> = denied.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(rules, ["other_stream", "other_stream", "git_dir", "git_dir", "unreadable"], "{denied:?}");
    assert_eq!(denied[0].1, "src/api/mod.rs");
    assert_eq!(p.ops_of_kind("auth", "denied")[0]["data"]["owner"], "api");
}

#[test]
fn after_cd_into_another_streams_worktree_an_edit_there_is_judged_for_the_sessions_stream() {
    let Some(p) = Project::new() else { return };
    let (wt, api_wt) = (p.wt("auth"), p.wt("api"));
    // With the api worktree added (`--add-dir`), Claude Code keeps a `cd` there: the hook payloads'
    // `cwd` is then the api worktree, where the file would be the api stream's own.
    let model = FakeModel::start(json!([
        {"tool_use": {"name": "Bash", "input": {"command": "cd ../api && pwd", "description": "go to api"}}},
        {"tool_use": write(&api_wt.join("src/api/list.rs"), "fn list() {}\n")},
        {"text": "Paused here."},
    ]));
    p.run(&wt, &model, &["--add-dir", api_wt.to_str().unwrap()], &[]).ok();

    assert!(!api_wt.join("src/api/list.rs").exists(), "written from auth's session into the api worktree");
    let asked = p.payloads(&["PreToolUse"]);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let cwd = std::fs::canonicalize(asked[0]["cwd"].as_str().unwrap()).unwrap();
    assert_eq!(cwd, std::fs::canonicalize(&api_wt).unwrap(), "{}", asked[0]);
    let turns = turn_requests(&model);
    let (name, _, is_error, said) = tool_results(&turns[2]).pop().unwrap();
    assert_eq!((name.as_str(), is_error), ("Write", true), "{said}");
    assert!(
        said.contains("is in the worktree of stream api") && said.contains("stream auth works only in its own"),
        "{said}"
    );
    // Recorded on the session's stream, not on the one `cd` went to.
    assert_eq!(p.ops_of_kind("auth", "denied").len(), 1);
    assert!(p.ops_of_kind("api", "denied").is_empty());
}

#[test]
fn the_session_start_context_reaches_the_first_request_and_a_resumed_one() {
    let Some(p) = Project::new() else { return };
    let wt = p.wt("auth");
    let model = FakeModel::start(json!([{"text": "Paused here."}, {"text": "Paused again."}]));
    p.run(&wt, &model, &[], &[]).ok();
    let first = turn_requests(&model).into_iter().next().unwrap_or_else(|| panic!("{}", shown_requests(&model)));
    let said = text(&first["messages"]);
    for want in [
        "git-boulder: you are working on stream auth (boulder auth, iteration 0) in this worktree.",
        "You may change only these paths (stream auth owns them): src/auth/**",
        "Read-only paths (read them, never change them): src/types/**",
        "Other streams own (never change them): src/api/** (api)",
        "Next story: US-001: Login form",
        "Build `src/auth/login.rs`.",
    ] {
        assert!(said.contains(want), "no {want:?} in the first request:\n{said}");
    }
    // Resumed (`--continue`): the context of now, with the checkpoint made since, is sent again.
    p.repo.boulder_in(&wt, &["checkpoint", "-m", "login form half done"]).ok();
    let before = turn_requests(&model).len();
    p.run(&wt, &model, &["--continue"], &[]).ok();
    let resumed = &turn_requests(&model)[before];
    let said = text(&resumed["messages"]);
    assert!(said.contains("login form half done"), "no checkpoint in the resumed session's first request:\n{said}");
}

#[test]
fn a_stop_with_stories_left_is_held_and_held_again_after_a_commit_then_let_go() {
    let Some(p) = Project::new() else { return };
    let wt = p.wt("auth");
    let model = FakeModel::start(json!([
        {"text": "I am done."},
        commit_turn("login.rs", "auth: login form"),
        {"text": "I am done."},
        {"text": "I am done."},
        // Only reached if a stop with no new work were held.
        commit_turn("extra.rs", "auth: never reached"),
    ]));
    p.run(&wt, &model, &[], &[]).ok();

    let turns = turn_requests(&model);
    let enforced = p.ops_of_kind("auth", "enforced");
    let gates: Vec<&str> = enforced.iter().map(|op| op["data"]["gate"].as_str().unwrap()).collect();
    assert_eq!(gates, ["completion", "progress"], "requests:\n{}", shown_requests(&model));
    // Each block reached the model as the next message, exactly as recorded.
    for (i, op) in [(1, &enforced[0]), (3, &enforced[1])] {
        let message = op["data"]["message"].as_str().unwrap();
        assert!(message.contains("Task: US-001: Login form"), "{message}");
        let told = last_text(&turns[i]);
        assert!(told.contains(message), "request {i} ends with\n{told}\nnot the enforcement\n{message}");
    }
    // The commit is on the stream's branch and counted; the stop after it, with no new work, ended
    // the run: no fifth request, the commit never asked for never made.
    assert_eq!(turns.len(), 4, "{}", shown_requests(&model));
    let log = p.repo.git_out(&["log", "--format=%s", "main..boulder/auth"]);
    assert_eq!(log, "auth: login form");
    assert!(!wt.join("src/auth/extra.rs").exists());
    // What Claude Code sent: the first stop of the prompt, then two already continued.
    let stops: Vec<(String, bool)> = p
        .stops()
        .iter()
        .map(|s| (s["hook_event_name"].as_str().unwrap().into(), s["stop_hook_active"] == true))
        .collect();
    assert_eq!(stops, [("Stop".into(), false), ("Stop".into(), true), ("Stop".into(), true)]);
}

#[test]
fn holds_on_new_work_stop_one_short_of_claude_codes_block_cap() {
    let Some(p) = Project::new() else { return };
    let wt = p.wt("auth");
    // An agent that commits every time it is held: with a cap of 3 blocks in a row, git-boulder
    // holds it twice (the first push and one on progress) and lets the third stop through.
    let model = FakeModel::start(json!([
        {"text": "I am done."},
        commit_turn("a.rs", "auth: part a"),
        {"text": "I am done."},
        commit_turn("b.rs", "auth: part b"),
        {"text": "I am done."},
        commit_turn("c.rs", "auth: part c"),
        {"text": "I am done."},
    ]));
    p.run(&wt, &model, &[], &[("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "3")]).ok();

    let gates: Vec<String> =
        p.ops_of_kind("auth", "enforced").iter().map(|op| op["data"]["gate"].as_str().unwrap().into()).collect();
    assert_eq!(gates, ["completion", "progress"], "requests:\n{}", shown_requests(&model));
    assert_eq!(turn_requests(&model).len(), 5, "{}", shown_requests(&model));
    let log = p.repo.git_out(&["log", "--format=%s", "main..boulder/auth"]);
    assert_eq!(log, "auth: part b\nauth: part a");
    assert!(!wt.join("src/auth/c.rs").exists());
}

#[test]
fn a_subagent_stopping_is_left_alone_while_the_main_agent_is_held() {
    let Some(p) = Project::new() else { return };
    let wt = p.wt("auth");
    let subagent_prompt = "Read src/auth and report.";
    let model = FakeModel::start(json!([
        {"tool_use": {"name": "Agent", "input": {"description": "read auth", "prompt": subagent_prompt,
                                                  "subagent_type": "general-purpose", "run_in_background": false}}},
        // The subagent claims the work done, as the main agent does after it.
        {"text": "I am done."},
        {"text": "I am done."},
        {"text": "I am done."},
    ]));
    p.run(&wt, &model, &[], &[]).ok();

    let turns = turn_requests(&model);
    let shown = shown_requests(&model);
    let sub: Vec<&Value> = turns.iter().filter(|b| !is_main(b)).collect();
    assert_eq!(sub.len(), 1, "the subagent was asked once, never sent back to work:\n{shown}");
    assert!(text(&messages(sub[0])[0]).contains(subagent_prompt), "{shown}");
    // Its stop was put to the hooks, and let through: the main agent got its report.
    let stops = p.stops();
    let sub_stop =
        stops.iter().find(|s| s.get("agent_id").is_some()).unwrap_or_else(|| panic!("no subagent stop in {stops:?}"));
    assert_eq!(sub_stop["hook_event_name"], "SubagentStop", "{sub_stop}");
    assert_eq!(sub_stop["last_assistant_message"], "I am done.", "{sub_stop}");
    let main: Vec<&Value> = turns.iter().filter(|b| is_main(b)).collect();
    assert_eq!(main.len(), 3, "{shown}");
    let (name, _, is_error, report) = tool_results(main[1]).pop().unwrap();
    assert_eq!((name.as_str(), is_error), ("Agent", false));
    assert!(report.contains("I am done."), "{report}");
    // The main agent's same claim is held once; the boulder records only that push.
    let enforced = p.ops_of_kind("auth", "enforced");
    assert_eq!(enforced.len(), 1, "{enforced:?}");
    assert!(last_text(main[2]).contains(enforced[0]["data"]["message"].as_str().unwrap()), "{shown}");
}

/// POST `body` to `path` of the fake model; the answer's body (after the head).
fn post(model: &FakeModel, path: &str, body: &Value) -> String {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", model.port)).unwrap();
    let body = body.to_string();
    write!(
        conn,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let (head, rest) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    rest.to_string()
}

/// The events of a server-sent-events answer: (event name, data).
fn events(sse: &str) -> Vec<(String, Value)> {
    sse.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap().to_string();
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(data["type"], name.as_str(), "{e}");
            (name, data)
        })
        .collect()
}

#[test]
fn the_fake_anthropic_api_streams_turns_and_answers_side_requests_without_taking_one() {
    let model = FakeModel::start(json!([
        {"tool_use": {"name": "Write", "input": {"file_path": "/x/a.rs", "content": "fn a() {}\n".repeat(20)}}},
        {"text": "I am done."},
    ]));
    let tools = json!([{"name": "Write", "input_schema": {"type": "object"}}]);
    let agent = |said: &str, stream: bool| {
        json!({"model": "claude-opus-5-5", "stream": stream, "tools": tools, "system": "s",
               "messages": [{"role": "user", "content": said}]})
    };
    // Side requests of Claude Code's own: no tools, or a token count. No turn is taken.
    let side = post(
        &model,
        "/v1/messages?beta=true",
        &json!({"model": "claude-haiku", "stream": true,
        "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}),
    );
    let texts: Vec<String> =
        events(&side).iter().filter_map(|(_, d)| d["delta"]["text"].as_str().map(String::from)).collect();
    assert_eq!(texts.concat(), "OK");
    let count: Value = serde_json::from_str(&post(&model, "/v1/messages/count_tokens", &agent("hi", false))).unwrap();
    assert!(count["input_tokens"].as_u64().unwrap() > 0, "{count}");

    // The first turn, streamed as the API streams a tool call.
    let first = events(&post(&model, "/v1/messages?beta=true", &agent("work", true)));
    let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..4], ["message_start", "ping", "content_block_start", "content_block_delta"]);
    assert_eq!(names[names.len() - 3..], ["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(first[0].1["message"]["model"], "claude-opus-5-5");
    assert_eq!(first[2].1["content_block"]["name"], "Write");
    let json_text: String =
        first.iter().filter_map(|(_, d)| d["delta"]["partial_json"].as_str().map(String::from)).collect();
    let deltas = first.iter().filter(|(n, _)| n == "content_block_delta").count();
    assert!(deltas > 1, "the input comes in several chunks");
    let input: Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(input["content"], "fn a() {}\n".repeat(20));
    assert_eq!(first[names.len() - 2].1["delta"]["stop_reason"], "tool_use");
    // A retry of the same request gets the same turn again.
    let again = events(&post(&model, "/v1/messages", &agent("work", true)));
    assert_eq!(again[2].1["content_block"]["name"], "Write");

    // The next turn, not streamed: one message.
    let second: Value = serde_json::from_str(&post(&model, "/v1/messages", &agent("go on", false))).unwrap();
    assert_eq!(second["content"], json!([{"type": "text", "text": "I am done."}]), "{second}");
    assert_eq!(second["stop_reason"], "end_turn");
    // Turns used up: a plain text.
    let more: Value = serde_json::from_str(&post(&model, "/v1/messages", &agent("more", false))).unwrap();
    assert_eq!(more["content"][0]["text"], "Nothing more to do.");
    assert_eq!(model.requests().len(), 6);
}
