//! What the real Claude Code, Codex and OpenCode spend, recorded by their hooks on the stream's
//! op-log: each run against the fake model server (which reports usage as each API does), the
//! figures checked against the harness's own files read independently here, each entry counted
//! once even when a Stop runs twice; a spent budget lets the agent stop, told why.
//!
//! Run with `BOULDER_HARNESSES=/root/.cache/git-boulder/harnesses/node_modules/.bin cargo test
//! --test runner -- spend_harness_real::`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::agent_claude::feed;
use crate::common::*;

/// Totals of a stream's recorded spend, from its state (read with plain git).
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
struct Totals {
    amounts: u64,
    tokens_in: u64,
    tokens_out: u64,
    cache_write: u64,
    cache_read: u64,
}

fn recorded(repo: &TestRepo, stream: &str, model_only: bool) -> Totals {
    let st = repo.stream_state(stream);
    let mut t = Totals::default();
    for row in st["spend"]["rows"].as_array().into_iter().flatten() {
        if model_only && row["model"].is_null() {
            continue;
        }
        let n = |k: &str| row[k].as_u64().unwrap_or(0);
        t.amounts += n("amounts");
        t.tokens_in += n("tokens_in");
        t.tokens_out += n("tokens_out");
        t.cache_write += n("cache_write");
        t.cache_read += n("cache_read");
    }
    t
}

/// The JSON lines of a file.
fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Claude Code's transcripts read here: each assistant message id once (its last line).
fn claude_totals(files: &[PathBuf]) -> Totals {
    let mut by_id: BTreeMap<String, Value> = BTreeMap::new();
    for f in files {
        for l in lines(f) {
            if l["type"] == "assistant" && l["message"]["usage"].is_object() {
                by_id.insert(l["message"]["id"].as_str().unwrap().to_string(), l["message"]["usage"].clone());
            }
        }
    }
    let mut t = Totals::default();
    for u in by_id.values() {
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        t.amounts += 1;
        t.tokens_in += n("input_tokens");
        t.tokens_out += n("output_tokens");
        t.cache_write += n("cache_creation_input_tokens");
        t.cache_read += n("cache_read_input_tokens");
    }
    t
}

/// Claude Code's project with the payloads of its Stop hooks kept (a hook of the user's own).
fn claude_project(extra_settings: &str) -> Option<(TestRepo, PathBuf, PathBuf)> {
    let claude = harness("claude")?;
    let repo = if extra_settings.is_empty() { sample() } else { sample_with(extra_settings) };
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["agent", "install", "claude"]).ok();
    let payloads = repo.tmp.path().join("payloads");
    std::fs::create_dir_all(&payloads).unwrap();
    let keep = format!("cat > '{}'/$(date +%s%N).json", payloads.display());
    let group = json!([{"hooks": [{"type": "command", "command": keep}]}]);
    let settings = json!({"hooks": {"Stop": group, "SubagentStop": group}});
    std::fs::create_dir_all(repo.home.join(".claude")).unwrap();
    std::fs::write(repo.home.join(".claude/settings.json"), settings.to_string()).unwrap();
    Some((repo, claude, payloads))
}

fn kept(payloads: &Path, event: &str) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(payloads).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .iter()
        .map(|f| serde_json::from_str::<Value>(&std::fs::read_to_string(f).unwrap()).unwrap())
        .filter(|p| p["hook_event_name"] == event)
        .collect()
}

#[test]
fn claude_codes_messages_and_its_subagents_are_recorded_once_each_even_when_a_stop_runs_again() {
    let Some((repo, claude, payloads)) = claude_project("") else { return };
    let wt = repo.worktree("auth");
    let model = FakeModel::start(json!([
        {"tool_use": {"name": "Agent", "input": {"description": "read auth", "prompt": "Read src/auth and report.",
                                                  "subagent_type": "general-purpose", "run_in_background": false}},
         "usage": {"input_tokens": 1000, "output_tokens": 50, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000}},
        {"text": "Sub done.", "usage": {"input_tokens": 400, "output_tokens": 40}},
        {"text": "I am done.", "usage": {"input_tokens": 1200, "output_tokens": 60, "cache_read_input_tokens": 4000}}
    ]));
    crate::agent_real_claude::claude_p(&repo, &claude, &wt, &model, "Work on your story.", &[], &[]).ok();

    let stops = kept(&payloads, "Stop");
    let last = stops.last().expect("a Stop").clone();
    let main = PathBuf::from(last["transcript_path"].as_str().unwrap());
    let subs = kept(&payloads, "SubagentStop");
    assert_eq!(subs.len(), 1, "{subs:?}");
    let sub = PathBuf::from(subs[0]["agent_transcript_path"].as_str().unwrap());
    let want = claude_totals(&[main.clone(), sub]);
    // The scripted figures are in it: the main agent's two answers, the subagent's one, and the
    // answers to the Stop hook's pushes.
    assert!(want.amounts >= 3 && want.cache_read >= 7000 && want.cache_write >= 200, "{want:?}");
    assert_eq!(recorded(&repo, "auth", true), want);

    // The same Stop and SubagentStop again: nothing new, nothing appended to the op-log.
    let tip = rev(&repo, "refs/boulder/streams/auth");
    for p in [&last, &subs[0]] {
        let mut p = p.clone();
        p["cwd"] = json!(wt.to_str().unwrap());
        feed(&repo, "claude", &p).ok();
    }
    assert_eq!(rev(&repo, "refs/boulder/streams/auth"), tip);
    assert_eq!(recorded(&repo, "auth", true), want);
    // Every amount is Claude Code's, by message id.
    let keys = repo.stream_state("auth")["spend"]["keys"].clone();
    assert!(keys.as_array().unwrap().iter().all(|k| k.as_str().unwrap().starts_with("claude:msg_fake_")), "{keys}");
    // A clean read leaves doctor nothing to say about spend.
    let doc = repo.boulder(&["doctor", "--json"]).json();
    assert!(!doc.to_string().contains("\"spend\""), "{doc}");
}

#[test]
fn a_spent_budget_lets_claude_code_stop_and_says_why() {
    let Some((repo, claude, _payloads)) = claude_project("") else { return };
    let plan = repo.read(".boulder/streams.yaml").replace("  auth:\n", "  auth:\n    budget: {tokens: 500}\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("auth: a budget of 500 tokens");
    let wt = repo.worktree("auth");
    repo.git_in(&wt, &["merge", "-q", "main"]).ok();
    let model = FakeModel::start(json!([
        {"text": "I am done.", "usage": {"input_tokens": 900, "output_tokens": 20}}
    ]));
    let run = crate::agent_real_claude::claude_p(&repo, &claude, &wt, &model, "Work on your story.", &[], &[]);
    // One answer, never pushed back: the stories are open, but the budget is spent.
    let turns: Vec<Value> = model
        .requests()
        .into_iter()
        .filter(|r| r["path"].as_str().unwrap().split('?').next() == Some("/v1/messages"))
        .filter(|r| r["body"]["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    assert_eq!(turns.len(), 1, "{}", run.stdout);
    let why = "git-boulder: stream auth's budget is spent: tokens 920 of 500. Stream auth is not held at this stop: \
               the agent may stop. To go on, raise stream auth's budget in the plan, or run `git boulder spend reset auth`.";
    assert!(run.stdout.contains(why), "{}", run.stdout);
    let log = repo.boulder(&["log", "auth", "--json"]).ok().json();
    assert!(!log.to_string().contains("\"enforced\""), "{log}");
}

#[test]
fn codex_responses_are_recorded_once_each_even_when_a_stop_runs_again() {
    use crate::agent_real_codex::{codex_home, configure, exec, setup, trust};
    let Some((repo, codex)) = setup() else { return };
    let wt = repo.worktree("auth");
    let model = FakeModel::start(json!([
        {"text": "I am done.", "usage": {"input_tokens": 1000, "cached_tokens": 600, "output_tokens": 50, "reasoning_tokens": 20}},
        {"text": "Done.", "usage": {"input_tokens": 1500, "cached_tokens": 1000, "output_tokens": 30}}
    ]));
    configure(&repo, &model);
    trust(&repo, &codex);
    exec(&repo, &codex, &wt, "Work on your stream.").ok();

    let sessions = codex_home(&repo).join("sessions");
    let rollouts: Vec<PathBuf> =
        walk(&sessions).into_iter().filter(|p| p.extension().is_some_and(|x| x == "jsonl")).collect();
    assert_eq!(rollouts.len(), 1, "{rollouts:?}");
    // Read here: each response once, its uncached input apart.
    let mut want = Totals::default();
    let mut seen = std::collections::BTreeSet::new();
    for l in lines(&rollouts[0]) {
        if l["type"] == "token_usage_record" && seen.insert(l["payload"]["response_id"].to_string()) {
            let u = &l["payload"]["usage"];
            let n = |k: &str| u[k].as_u64().unwrap_or(0);
            want.amounts += 1;
            want.tokens_in += n("input_tokens") - n("cached_input_tokens");
            want.cache_read += n("cached_input_tokens");
            want.tokens_out += n("output_tokens");
        }
    }
    assert!(want.amounts >= 2 && want.cache_read >= 1600 && want.tokens_in >= 900, "{want:?}");
    assert_eq!(recorded(&repo, "auth", true), want);

    // Codex's Stop again, as Codex sends it: nothing new.
    let tip = rev(&repo, "refs/boulder/streams/auth");
    let stop = json!({"cwd": wt, "hook_event_name": "Stop", "last_assistant_message": "Done.", "model": "gpt-5.5",
                      "permission_mode": "default", "session_id": "s", "stop_hook_active": true,
                      "transcript_path": rollouts[0], "turn_id": "t"});
    feed(&repo, "codex", &stop).ok();
    assert_eq!(rev(&repo, "refs/boulder/streams/auth"), tip);
    let models: Vec<Value> =
        repo.stream_state("auth")["spend"]["rows"].as_array().unwrap().iter().map(|r| r["model"].clone()).collect();
    assert!(models.iter().all(|m| m == "gpt-5.5"), "{models:?}");
}

#[test]
fn opencode_messages_are_recorded_with_their_cost_once_each() {
    use crate::agent_real_opencode::{installed, opencode};
    let Some(bin) = harness("opencode") else { return };
    let (repo, wt) = installed();
    let model = FakeModel::start(json!([
        {"text": "I am done.", "usage": {"prompt_tokens": 1000, "cached_tokens": 600, "completion_tokens": 50, "reasoning_tokens": 20}}
    ]));
    // The model's prices, in US dollars per million tokens: OpenCode reports the cost.
    let config = json!({
        "$schema": "https://opencode.ai/config.json", "share": "disabled", "autoupdate": false,
        "model": "fake/m", "small_model": "fake/m",
        "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
            "options": {"baseURL": format!("{}/v1", model.url()), "apiKey": "test"},
            "models": {"m": {"name": "M", "tool_call": true, "cost": {"input": 3, "output": 15, "cache_read": 0.3}}}}}
    });
    // `opencode run`: the plugin records what the session spent at its idle, as the run ends.
    let out = tempfile::tempdir().unwrap();
    let status = opencode(&repo, &bin, &model, &wt)
        .env("OPENCODE_CONFIG_CONTENT", config.to_string())
        .args(["run", "Work on your story."])
        .stdout(std::fs::File::create(out.path().join("out")).unwrap())
        .stderr(std::fs::File::create(out.path().join("err")).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    wait_for("the plugin to record the session's spend", || recorded(&repo, "auth", true).amounts > 0);
    // OpenCode's own figures: input without the cached tokens, output with the reasoning ones.
    let got = recorded(&repo, "auth", true);
    assert_eq!(got, Totals { amounts: 1, tokens_in: 400, tokens_out: 50, cache_write: 0, cache_read: 600 });
    let st = repo.stream_state("auth");
    let keys = &st["spend"]["keys"];
    assert!(keys.as_array().unwrap().iter().all(|k| k.as_str().unwrap().starts_with("opencode:msg_")), "{keys}");
    // 400 × $3 + 600 × $0.30 + 50 × $15 per million: OpenCode's figure, kept as reported.
    let row = st["spend"]["rows"].as_array().unwrap().iter().find(|r| r["model"] == "m").unwrap().clone();
    assert_eq!((row["reported"].clone(), row["usd_micros"].clone()), (json!(true), json!(2130)), "{row}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
