//! The real Codex CLI (`codex exec`, pinned in `.ci/run`) in a stream worktree of the sample
//! repository, with `git boulder agent install codex`, against the fake model server
//! (`tests/support/fake_model.py` answering `/v1/responses` with `fake_openai_responses.py`).
//! Codex gets a temp `CODEX_HOME` whose `config.toml` names the fake server as its model provider,
//! turns off what would reach the internet (plugins, apps, analytics, update checks) and sends
//! any other HTTP(S) to a closed port. The project and the hooks are trusted as a user trusts them
//! in Codex's TUI, through the same app-server calls (`tests/support/codex_hooks.py`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::common::*;

const HOOK: &str = "git boulder agent hook codex";
const CONTEXT: &str = "git-boulder: you are working on stream auth";

/// The sample repository with streams auth and api, Codex's hooks installed; `None` without Codex.
pub fn setup() -> Option<(TestRepo, PathBuf)> {
    let codex = harness("codex")?;
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["stream", "init", "api"]).ok();
    repo.boulder(&["agent", "install", "codex"]).ok();
    Some((repo, codex))
}

pub fn codex_home(repo: &TestRepo) -> PathBuf {
    repo.home.join(".codex")
}

/// Point Codex at `model` (written before each run: each test starts its own server).
pub fn configure(repo: &TestRepo, model: &FakeModel) {
    let home = codex_home(repo);
    std::fs::create_dir_all(&home).unwrap();
    let path = home.join("config.toml");
    // Keep what Codex wrote (trust) below ours.
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    let kept = kept.split_once("# -- written by Codex --\n").map(|(_, rest)| rest.to_string()).unwrap_or(kept);
    let ours = format!(
        "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\ncheck_for_update_on_startup = false\n\n\
         [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n\
         env_key = \"FAKE_OPENAI_KEY\"\n\n[analytics]\nenabled = false\n\n\
         [features]\nplugins = false\nremote_plugin = false\napps = false\n\n# -- written by Codex --\n",
        model.url()
    );
    std::fs::write(path, ours + &kept).unwrap();
}

/// The environment Codex and its helpers get: the test's, with Codex's home, the fake key, and
/// no way out but 127.0.0.1.
fn codex_env(repo: &TestRepo, cmd: &mut Command, codex: &Path) {
    // Codex's folder first, then what every test command gets (git-boulder's folder first).
    let mut paths = vec![codex.parent().unwrap().to_path_buf(), Path::new(bin()).parent().unwrap().to_path_buf()];
    paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    cmd.env("PATH", std::env::join_paths(paths).unwrap())
        .env("CODEX_HOME", codex_home(repo))
        .env("FAKE_OPENAI_KEY", "test-key")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1,localhost");
}

/// `codex exec PROMPT` in `dir`.
pub fn exec(repo: &TestRepo, codex: &Path, dir: &Path, prompt: &str) -> Run {
    let mut cmd = repo.command(codex);
    codex_env(repo, &mut cmd, codex);
    cmd.current_dir(dir).args(["exec", "--sandbox", "danger-full-access", prompt]);
    Run::from(cmd.output().expect("run codex"))
}

/// `tests/support/codex_hooks.py` with Codex's environment.
fn hooks(repo: &TestRepo, codex: &Path, args: &[&str]) -> Run {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/codex_hooks.py");
    let mut cmd = repo.command("python3");
    codex_env(repo, &mut cmd, codex);
    cmd.arg(script).arg(codex).args(args);
    Run::from(cmd.output().expect("run codex_hooks.py"))
}

/// Trust the project and git-boulder's hooks, as a user does in Codex's TUI.
pub fn trust(repo: &TestRepo, codex: &Path) {
    hooks(repo, codex, &["trust-project", repo.dir.to_str().unwrap()]).ok();
    hooks(repo, codex, &["trust", repo.dir.to_str().unwrap(), HOOK]).ok();
}

/// Codex's own `trustStatus` of git-boulder's hooks in `dir` (empty: it loads none there).
fn codex_says(repo: &TestRepo, codex: &Path, dir: &Path) -> Vec<String> {
    let out = hooks(repo, codex, &["list", dir.to_str().unwrap()]).ok().json();
    let listed = out[0]["hooks"].as_array().unwrap().clone();
    listed.iter().filter(|h| h["command"] == HOOK).map(|h| h["trustStatus"].as_str().unwrap().to_string()).collect()
}

/// `agent status --json`'s Codex entry, with `codex` on PATH.
fn status(repo: &TestRepo, codex: &Path) -> Value {
    let mut cmd = repo.command(bin());
    codex_env(repo, &mut cmd, codex);
    let r = Run::from(cmd.args(["agent", "status", "--json"]).output().unwrap()).ok();
    r.json()["harnesses"].as_array().unwrap().iter().find(|h| h["harness"] == "codex").unwrap().clone()
}

fn file_trust(codex_status: &Value, wt: &Path) -> String {
    let files = codex_status["files"].as_array().unwrap();
    let f = files.iter().find(|f| f["worktree"] == wt.to_str().unwrap()).expect("the worktree");
    f["trust"].as_str().unwrap_or("none").to_string()
}

/// The text of every input item of a request, one string (to look for words in).
fn input_text(req: &Value) -> String {
    req["body"]["input"].to_string()
}

/// The requests of the agent's turns.
fn turns(model: &FakeModel) -> Vec<Value> {
    model.requests().into_iter().filter(|r| r["path"] == "/v1/responses").collect()
}

#[test]
fn codex_exec_in_a_stream_worktree_is_denied_other_streams_files_given_context_and_kept_going() {
    let Some((repo, codex)) = setup() else { return };
    let wt = repo.worktree("auth");
    let model = FakeModel::start(json!([
        {"apply_patch": "*** Begin Patch\n*** Update File: src/api/mod.rs\n@@\n-// api\n+// taken over\n*** End Patch\n"},
        {"text": "I am done."},
        {"apply_patch": "*** Begin Patch\n*** Add File: src/auth/login.rs\n+// login form\n*** End Patch\n"},
        {"shell": ["sh", "-c", "git add src/auth/login.rs && git commit -q -m 'US-001: login form'"]},
        {"text": "The login form is committed; done."},
        {"text": "Done."}
    ]));
    configure(&repo, &model);
    trust(&repo, &codex);
    let run = exec(&repo, &codex, &wt, "Work on your stream.");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let reqs = turns(&model);

    // SessionStart: the stream's context is in the first request.
    assert!(input_text(&reqs[0]).contains(CONTEXT), "{}", input_text(&reqs[0]));

    // PreToolUse: the patch into stream api's file is refused, the file unchanged on disk, and the
    // tool output the model gets names the owner.
    assert_eq!(std::fs::read_to_string(wt.join("src/api/mod.rs")).unwrap(), "// api\n");
    let outputs: Vec<&Value> = reqs[1]["body"]["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "custom_tool_call_output")
        .collect();
    let refused = outputs[0]["output"].as_str().unwrap();
    assert!(refused.contains("src/api/mod.rs is owned by stream api"), "{refused}");

    // Stop with stories left: blocked, and the enforcement message is the next prompt.
    let next = input_text(&reqs[2]);
    assert!(next.contains("Boulder auth") && next.contains("Task: US-001"), "{next}");

    // Its own file is written and committed; the stop after that work is held again (progress),
    // and the stop after no new work ends the run.
    assert_eq!(std::fs::read_to_string(wt.join("src/auth/login.rs")).unwrap(), "// login form\n");
    assert_eq!(repo.git_in(&wt, &["log", "-1", "--format=%s"]).ok().stdout.trim(), "US-001: login form");
    let log = repo.boulder(&["log", "auth", "--json"]).ok().json();
    let gates: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["op"]["kind"] == "enforced")
        .map(|e| e["op"]["data"]["gate"].as_str().unwrap())
        .collect();
    assert_eq!(gates.len(), 2, "{log}");
    assert_eq!(gates[0], "progress", "newest first: {log}");
    assert_eq!(input_text(&reqs[5]).matches("<hook_prompt").count(), 2, "held again: {}", input_text(&reqs[5]));
    assert_eq!(reqs.len(), 6, "bounded: the last stop went through");
    assert_eq!(model.requests().iter().filter(|r| r["path"] != "/v1/responses").count(), 0);
}

#[test]
fn status_reports_the_trust_codex_reports_and_after_an_upgrade_says_to_trust_again() {
    let Some((repo, codex)) = setup() else { return };
    let wt = repo.worktree("auth");
    let model = FakeModel::start(json!([]));
    configure(&repo, &model);
    let context_reached = |model: &FakeModel| {
        let before = turns(model).len();
        exec(&repo, &codex, &wt, "hi").ok();
        input_text(&turns(model)[before]).contains(CONTEXT)
    };

    // The project not trusted: Codex loads none of the hooks, and runs none.
    assert!(codex_says(&repo, &codex, &wt).is_empty());
    let s = status(&repo, &codex);
    assert_eq!((s["trust"]["state"].as_str(), file_trust(&s, &wt).as_str()), (Some("not_loaded"), "not_loaded"));
    assert!(!context_reached(&model));

    // The project trusted, the hooks not yet: Codex lists them untrusted and skips them silently.
    hooks(&repo, &codex, &["trust-project", repo.dir.to_str().unwrap()]).ok();
    assert_eq!(codex_says(&repo, &codex, &wt), ["untrusted"; 3]);
    let s = status(&repo, &codex);
    assert_eq!((s["trust"]["state"].as_str(), file_trust(&s, &wt).as_str()), (Some("untrusted"), "untrusted"));
    assert!(s["trust"]["detail"].as_str().unwrap().contains("Trust all and continue"), "{s}");
    assert!(!context_reached(&model));

    // Trusted (once, in the main checkout): Codex runs them in every worktree.
    hooks(&repo, &codex, &["trust", repo.dir.to_str().unwrap(), HOOK]).ok();
    assert_eq!(codex_says(&repo, &codex, &wt), ["trusted"; 3]);
    let s = status(&repo, &codex);
    assert_eq!(s["trust"]["state"], "trusted", "{s}");
    let files = s["files"].as_array().unwrap();
    assert!(!files.is_empty(), "{s}");
    for f in files {
        assert_eq!(f["trust"], "trusted", "{f}");
    }
    assert!(context_reached(&model));

    // An upgrade that changes the hook command: an older git-boulder's entries, trusted, then
    // replaced by `agent install codex`. Codex calls them modified and skips them; status and
    // doctor say so, with the steps.
    let main_file = repo.dir.join(".codex/hooks.json");
    let text = std::fs::read_to_string(&main_file).unwrap();
    std::fs::write(&main_file, text.replace(HOOK, "git-boulder agent hook codex")).unwrap();
    hooks(&repo, &codex, &["trust", repo.dir.to_str().unwrap(), "git-boulder agent hook codex"]).ok();
    repo.boulder(&["agent", "install", "codex"]).ok();
    assert_eq!(codex_says(&repo, &codex, &wt), ["modified"; 3]);
    let s = status(&repo, &codex);
    assert_eq!((s["trust"]["state"].as_str(), file_trust(&s, &wt).as_str()), (Some("modified"), "modified"));
    let mut cmd = repo.command(bin());
    codex_env(&repo, &mut cmd, &codex);
    let doc = Run::from(cmd.args(["doctor", "--json"]).output().unwrap()).code(1).json();
    let p = doc["problems"].as_array().unwrap().iter().find(|p| p["area"] == "agent").expect("an agent problem");
    assert!(p["message"].as_str().unwrap().contains("changed since Codex trusted them"), "{p}");
    assert!(p["fix"].as_str().unwrap().contains("Trust all and continue"), "{p}");
    assert!(!context_reached(&model));

    // Trusted again: they run.
    hooks(&repo, &codex, &["trust", repo.dir.to_str().unwrap(), HOOK]).ok();
    assert_eq!(status(&repo, &codex)["trust"]["state"], "trusted");
    assert!(context_reached(&model));
}

#[test]
fn codex_runs_the_main_checkouts_hooks_in_a_stream_worktree_and_status_says_where_it_would_not() {
    let Some((repo, codex)) = setup() else { return };
    let wt = repo.worktree("auth");
    let model = FakeModel::start(json!([]));
    configure(&repo, &model);
    trust(&repo, &codex);
    let context_reached = |model: &FakeModel| {
        let before = turns(model).len();
        exec(&repo, &codex, &wt, "hi").ok();
        input_text(&turns(model)[before]).contains(CONTEXT)
    };
    assert!(context_reached(&model));
    // The worktree's own file is not what Codex runs: emptied, the hooks still come.
    let own = wt.join(".codex/hooks.json");
    let kept = std::fs::read(&own).unwrap();
    std::fs::write(&own, "{}\n").unwrap();
    assert!(context_reached(&model));
    std::fs::write(&own, &kept).unwrap();
    // Without the worktree's .codex/ folder, Codex does not look at the main checkout's file.
    std::fs::rename(wt.join(".codex"), repo.tmp.path().join("aside")).unwrap();
    assert!(!context_reached(&model));
    let s = status(&repo, &codex);
    assert_eq!(file_trust(&s, &wt), "not_loaded");
    let mut cmd = repo.command(bin());
    codex_env(&repo, &mut cmd, &codex);
    let doc = Run::from(cmd.args(["doctor", "--json"]).output().unwrap()).code(1).json();
    let p = doc["problems"].as_array().unwrap().iter().find(|p| p["area"] == "agent").expect("an agent problem");
    assert!(p["message"].as_str().unwrap().contains(wt.to_str().unwrap()), "{p}");
    std::fs::rename(repo.tmp.path().join("aside"), wt.join(".codex")).unwrap();
    // The main checkout's file set aside: no hook in the worktree, whose own file is intact.
    std::fs::rename(repo.dir.join(".codex/hooks.json"), repo.tmp.path().join("main.json")).unwrap();
    assert!(!context_reached(&model));
    let s = status(&repo, &codex);
    let f = s["files"].as_array().unwrap().iter().find(|f| f["worktree"] == wt.to_str().unwrap()).unwrap().clone();
    assert_eq!((f["state"].as_str(), f["trust"].as_str()), (Some("missing"), Some("not_loaded")), "{f}");
    repo.boulder(&["agent", "install", "codex"]).ok();
    assert!(context_reached(&model));
}

/// One POST to the fake server; the answer's body.
fn post(model: &FakeModel, body: &Value) -> String {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(model.url().trim_start_matches("http://")).unwrap();
    let body = body.to_string();
    write!(
        conn,
        "POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn the_fake_responses_api_gives_turns_to_the_agents_turns_only_in_the_tools_form() {
    let model = FakeModel::start(json!([
        {"text": "first"},
        {"apply_patch": "*** Begin Patch\n*** End Patch\n"},
        {"apply_patch": "P"},
        {"shell": ["git", "commit", "-m", "a b"]}
    ]));
    let kind = |k: &str| json!({"x-codex-turn-metadata": json!({"request_kind": k}).to_string()});
    // A side request (a title, say) leaves the script alone.
    let side = post(&model, &json!({"client_metadata": kind("title")}));
    assert!(side.contains("\"ok\"") && !side.contains("first"), "{side}");
    let turn = post(&model, &json!({"client_metadata": kind("turn")}));
    assert!(turn.contains("response.output_text.delta") && turn.contains("\"first\""), "{turn}");
    assert!(turn.contains("response.completed") && turn.contains("\"usage\""), "{turn}");
    let custom = post(&model, &json!({"tools": [{"type": "custom", "name": "apply_patch"}]}));
    assert!(custom.contains("\"custom_tool_call\"") && custom.contains("*** Begin Patch"), "{custom}");
    let function = post(&model, &json!({"tools": [{"type": "function", "name": "apply_patch"}]}));
    assert!(function.contains("\"function_call\"") && function.contains(r#"\"input\": \"P\""#), "{function}");
    let shell = post(&model, &json!({"tools": [{"type": "function", "name": "exec_command"}]}));
    assert!(shell.contains("\"exec_command\"") && shell.contains(r#"git commit -m 'a b'"#), "{shell}");
}
