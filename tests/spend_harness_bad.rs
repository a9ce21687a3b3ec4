//! Bad input to the Stop hooks' reading of usage: a transcript that is missing, huge, not JSON,
//! or claims negative or absurd usage never fails the hook nor reaches the harness, is read only
//! up to its bound, and is reported by `doctor` — which stops saying so once a later read of it
//! is clean.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::agent_claude::{feed, fixture};
use crate::common::*;

fn assistant(id: &str, usage: &str) -> String {
    format!("{{\"type\":\"assistant\",\"message\":{{\"id\":\"{id}\",\"model\":\"claude-x\",\"usage\":{usage}}}}}\n")
}

fn keys(repo: &TestRepo) -> Vec<String> {
    let st = repo.stream_state("auth");
    st["spend"]["keys"]
        .as_array()
        .map(|k| k.iter().map(|k| k.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The Stop of Claude Code for `transcript`: answered (exit 0, nothing on stderr), by the gates.
fn claude_stop(repo: &TestRepo, wt: &Path, transcript: &Path) {
    let p = fixture("claude/stop", wt, |v| v["transcript_path"] = json!(transcript));
    let r = feed(repo, "claude", &p).code(0);
    assert_eq!(r.stderr, "", "the harness is told nothing of the transcript");
    if !r.stdout.is_empty() {
        assert_eq!(r.json()["decision"], "block", "{}", r.stdout);
    }
}

#[test]
fn bad_transcripts_never_fail_the_hook_are_bounded_and_doctor_reports_them() {
    let repo = sample_with("  boulder:\n    cooldown: 0s\n");
    repo.git(&["config", "boulder.actor", "m1"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    let dir = repo.tmp.path().join("transcripts");
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let ok = assistant("m_ok", r#"{"input_tokens":10,"output_tokens":5}"#);
    let mut huge = String::new();
    let pad = format!("{{\"type\":\"user\",\"pad\":\"{}\"}}\n", "x".repeat(1 << 20));
    for _ in 0..20 {
        huge.push_str(&pad);
    }
    huge.push_str(&assistant("m_big", r#"{"input_tokens":7,"output_tokens":3}"#));
    let cases = [
        ("missing", dir.join("missing.jsonl")),
        (
            "not_json",
            file("not_json.jsonl", &format!("garbage\n{{\"type\":\"assistant\",\"usage\":\n{ok}\u{0}\u{1}\n")),
        ),
        ("negative", file("negative.jsonl", &assistant("m_neg", r#"{"input_tokens":-5,"output_tokens":1}"#))),
        ("absurd", file("absurd.jsonl", &assistant("m_abs", r#"{"input_tokens":1000000000000,"output_tokens":1}"#))),
        ("huge", file("huge.jsonl", &huge)),
    ];
    for (_, path) in &cases {
        claude_stop(&repo, &wt, path);
    }
    // What could be read was: the good line beside the garbage, the last line of the huge file.
    assert_eq!(keys(&repo), ["claude:m_big", "claude:m_ok"]);

    // Codex's rollout and OpenCode's messages, as bad.
    let rollout = file("rollout.jsonl", "{\"type\":\"token_usage_record\",\"payload\":{\"response_id\":\"r1\",\"usage\":{\"input_tokens\":-1}}}\n[1,2\n");
    let p = fixture("codex/stop", &wt, |v| v["transcript_path"] = json!(rollout));
    assert!(feed(&repo, "codex", &p).code(0).json().is_object());
    let p = json!({"hook_event_name": "Stop", "cwd": wt, "session_id": "s",
                   "messages": [{"id": "x", "role": "assistant", "time": {"completed": 1}, "tokens": {"input": 1e300}}, 7]});
    assert_eq!(feed(&repo, "opencode", &p).code(0).json(), json!({}));
    assert_eq!(keys(&repo), ["claude:m_big", "claude:m_ok"]);

    let doctor = repo.boulder(&["doctor"]).code(1);
    assert_shown!("bad_transcripts_doctor", doctor);

    // A later clean read of a file takes its report away.
    std::fs::write(&cases[2].1, &ok).unwrap();
    claude_stop(&repo, &wt, &cases[2].1);
    let doc = repo.boulder(&["doctor", "--json"]).code(1).json();
    let spend: Vec<&Value> = doc["problems"].as_array().unwrap().iter().filter(|p| p["area"] == "spend").collect();
    assert_eq!(spend.len(), 6, "{doc}");
    assert!(!doc.to_string().contains("negative.jsonl"), "{doc}");
}

#[test]
fn doctor_keeps_the_newest_sixteen_reports() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    for n in 0..20 {
        claude_stop(&repo, &wt, &repo.tmp.path().join(format!("gone-{n:02}.jsonl")));
    }
    let doc = repo.boulder(&["doctor", "--json"]).code(1).json();
    let shown: Vec<String> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["area"] == "spend")
        .map(|p| p["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(shown.len(), 16, "{doc}");
    assert!(shown[0].contains("gone-04.jsonl") && shown[15].contains("gone-19.jsonl"), "{shown:?}");
}
