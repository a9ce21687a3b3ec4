//! `stream run` (and so `work`, whose workers run it) records each agent run's wall time and
//! exit as an amount of its own, `source: run`, keyed by the run.

use serde_json::Value;

use crate::common::*;

/// The `spent` ops of stream `name`, newest first, read with plain git.
fn spent_ops(repo: &TestRepo, name: &str) -> Vec<Value> {
    let r = format!("refs/boulder/streams/{name}");
    let commits = repo.git_out(&["rev-list", &r]);
    commits
        .lines()
        .map(|c| serde_json::from_str::<Value>(&repo.git_out(&["cat-file", "-p", &format!("{c}:op.json")])).unwrap())
        .filter(|op| op["kind"] == "spent")
        .collect()
}

#[test]
fn each_agent_run_of_stream_run_is_recorded_with_its_exit() {
    let repo = sample();
    repo.boulder(&["stream", "init", "api"]).ok();
    let args = ["stream", "run", "api", "--max-iterations", "2", "--max-failures", "5", "--cooldown", "1ms"];
    repo.boulder(&[&args[..], &["--", "sh", "-c", "exit 3"]].concat()).ok();
    let ops = spent_ops(&repo, "api");
    assert_eq!(ops.len(), 2, "{ops:?}");
    let mut keys = Vec::new();
    for op in &ops {
        let a = &op["data"]["amounts"];
        assert_eq!(a.as_array().unwrap().len(), 1, "{op}");
        let a = &a[0];
        assert_eq!(
            (a["source"].as_str(), a["exit"].as_i64(), a["tokens_in"].as_u64()),
            (Some("run"), Some(3), Some(0))
        );
        assert!(a["seconds"].is_u64() && a["model"].is_null(), "{a}");
        keys.push(a["key"].as_str().unwrap().to_string());
    }
    assert!(keys.iter().all(|k| k.starts_with("run:")) && keys[0] != keys[1], "{keys:?}");
    // The ledger counts two runs.
    let rows = repo.stream_state("api")["spend"]["rows"].clone();
    let runs: u64 = rows.as_array().unwrap().iter().map(|r| r["runs"].as_u64().unwrap_or(0)).sum();
    assert_eq!(runs, 2, "{rows}");
}
