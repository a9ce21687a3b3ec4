//! A spent budget at a Stop: the agent is let stop and told why, by Codex's hook and by the
//! OpenCode plugin, after what it spent is recorded (Claude Code's, with the real harness, is in
//! `spend_harness_real`).

use serde_json::{json, Value};

use crate::agent_claude::{feed, fixture};
use crate::common::*;

/// The sample with stream auth's budget at 500 tokens (committed, merged into its worktree).
fn budgeted() -> TestRepo {
    let repo = sample_with("  boulder:\n    cooldown: 0s\n");
    let plan = repo.read(".boulder/streams.yaml").replace("  auth:\n", "  auth:\n    budget: {tokens: 500}\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("auth: a budget of 500 tokens");
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo
}

const WHY: &str = "git-boulder: stream auth's budget is spent: tokens 600 of 500. Stream auth is not held at this stop: \
                   the agent may stop. To go on, raise stream auth's budget in the plan, or run `git boulder spend reset auth`.";

fn enforced(repo: &TestRepo) -> bool {
    repo.boulder(&["log", "auth", "--json"]).ok().stdout.contains("\"enforced\"")
}

#[test]
fn codex_is_let_stop_with_the_reason_once_its_rollout_spends_the_budget() {
    let repo = budgeted();
    let wt = repo.worktree("auth");
    let rollout = repo.tmp.path().join("rollout.jsonl");
    std::fs::write(
        &rollout,
        "{\"type\":\"token_usage_record\",\"payload\":{\"response_id\":\"r1\",\"usage\":{\"input_tokens\":550,\"output_tokens\":50}}}\n",
    )
    .unwrap();
    let p = fixture("codex/stop", &wt, |v| v["transcript_path"] = json!(rollout));
    let out = feed(&repo, "codex", &p).ok().json();
    assert_eq!(out, json!({"systemMessage": WHY}));
    assert!(!enforced(&repo));
    // Reset: the budget counts from nothing again, and the gates hold the agent once more.
    repo.boulder(&["spend", "reset", "auth"]).ok();
    let out = feed(&repo, "codex", &p).ok().json();
    assert_eq!(out["decision"], "block", "{out}");
}

#[test]
fn the_opencode_plugin_records_a_sessions_spend_and_shows_why_it_pushes_no_more() {
    use crate::agent_opencode::{drive, idle_status, node};
    if !node() {
        return;
    }
    let repo = budgeted();
    repo.boulder(&["agent", "install", "opencode"]).ok();
    let wt = repo.worktree("auth");
    let dir = wt.display().to_string();
    let messages = json!([
        {"info": {"role": "user", "id": "u1"}, "parts": [{"type": "text", "text": "build the login form"}]},
        {"info": {"role": "assistant", "id": "a1", "modelID": "m", "time": {"completed": 2},
                  "tokens": {"input": 500, "output": 90, "reasoning": 10, "cache": {"read": 0, "write": 0}}, "cost": 0.01},
         "parts": [{"type": "text", "text": "I am done."}]}
    ]);
    let config = json!({
        "directory": dir, "tui": true,
        "sessions": {"ses_main": {"directory": dir, "messages": messages}},
        "events": [idle_status("ses_main"), idle_status("ses_main")]
    });
    let out = drive(&repo, &wt, config, &[]);
    let calls: Vec<Value> = out["calls"].as_array().unwrap().clone();
    // A toast with the reason at each idle, never a prompt; the message recorded once.
    assert_eq!(calls.len(), 2, "{out}");
    for c in &calls {
        assert_eq!((c["call"].as_str(), c["args"]["body"]["message"].as_str()), (Some("tui.showToast"), Some(WHY)));
    }
    let st = repo.stream_state("auth");
    assert_eq!(st["spend"]["keys"], json!(["opencode:a1"]));
    assert!(!enforced(&repo));
}
