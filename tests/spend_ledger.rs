//! `git boulder spend`: amounts recorded once by key, priced from the plan or git config (the
//! plan wins, a cost the harness reported wins over both, an unknown model is "cost unknown"),
//! summed by stream, machine, model and day, against budgets; `status` with its SPEND column and
//! BUDGET_SPENT; `spend reset`; bad input for `spend add` and for the plan's keys.

use crate::common::*;

/// The sample with prices and budgets: auth may spend $1 or 100,000 tokens, the plan $5.
fn priced() -> TestRepo {
    let repo = sample_with(
        "  budget: {usd: 5}\n  prices:\n    sonnet: {input: 3, output: 15, cache_write: 3.75, cache_read: 0.3}\n",
    );
    budget(&repo, "auth", "{usd: 1, tokens: 100000}");
    repo.git(&["config", "boulder.actor", "laptop"]).ok();
    repo
}

/// Give `stream` of the plan the budget `b` (committed).
fn budget(repo: &TestRepo, stream: &str, b: &str) {
    let plan = repo.read(".boulder/streams.yaml");
    let plan = plan.replace(&format!("  {stream}:\n"), &format!("  {stream}:\n    budget: {b}\n"));
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all(&format!("budget for {stream}"));
}

fn add(repo: &TestRepo, args: &[&str]) -> Run {
    let mut all = vec!["spend", "add"];
    all.extend_from_slice(args);
    repo.boulder(&all)
}

#[test]
fn nothing_spent_says_so_and_leaves_status_unchanged() {
    let repo = sample();
    assert_shown!("nothing_spent", repo.boulder(&["spend"]).ok());
    let status = repo.boulder(&["status"]).ok();
    assert!(!status.stdout.contains("SPEND"), "{}", status.stdout);
    let json = repo.boulder(&["status", "--json"]).ok().json();
    assert!(json["streams"].as_array().unwrap().iter().all(|s| s.get("spend").is_none()), "{json}");
}

#[test]
fn amounts_count_once_and_are_priced_plan_first_then_git_config() {
    let repo = priced();
    // The plan prices sonnet: git config's price of it is not used.
    repo.git(&["config", "boulder.price.sonnet.input", "100"]).ok();
    repo.git(&["config", "boulder.price.local-llm.input", "0.5"]).ok();
    repo.git(&["config", "boulder.price.local-llm.output", "1"]).ok();
    let first = add(
        &repo,
        &["--stream", "auth", "--tokens-in", "20000", "--tokens-out", "4000", "--model", "sonnet", "--id", "m1"],
    );
    assert_shown!("add_recorded", first.ok());
    assert_shown!(
        "add_again_records_nothing",
        add(
            &repo,
            &["--stream", "auth", "--tokens-in", "20000", "--tokens-out", "4000", "--model", "sonnet", "--id", "m1"]
        )
        .ok()
    );
    add(
        &repo,
        &[
            "--stream",
            "api",
            "--tokens-in",
            "1000",
            "--tokens-out",
            "500",
            "--model",
            "gpt-x",
            "--usd",
            "0.5",
            "--id",
            "o1",
        ],
    )
    .ok();
    add(
        &repo,
        &["--stream", "docs", "--tokens-in", "100000", "--tokens-out", "10000", "--model", "local-llm", "--id", "l1"],
    )
    .ok();
    add(&repo, &["--stream", "docs", "--tokens-in", "300", "--tokens-out", "30", "--model", "mystery", "--id", "x1"])
        .ok();
    // auth: 20000 × $3/M + 4000 × $15/M = $0.12; api: $0.50 as reported; docs: $0.06 and unknown.
    assert_shown!("spend_by_stream", repo.boulder(&["spend"]).ok());
    assert_shown!("spend_by_model", repo.boulder(&["spend", "--by", "model"]).ok());
    assert_shown!("spend_by_machine", repo.boulder(&["spend", "--by", "machine"]).ok());
    assert_shown!("spend_by_day_since", repo.boulder(&["spend", "--by", "day", "--since", "2026-11-01"]).ok());
    assert_shown!("spend_one_stream", repo.boulder(&["spend", "auth"]).ok());
    let json = repo.boulder(&["spend", "--json"]).ok().json();
    let auth = &json["groups"][0];
    assert_eq!((auth["name"].as_str(), auth["usd"].as_f64()), (Some("auth"), Some(0.12)), "{json}");
    assert_eq!(auth["budget"]["usd"], 1.0);
    assert_eq!(json["groups"][1]["usd"], 0.5);
    assert!(json["groups"][2]["usd"].is_null(), "{json}");
    assert_eq!(json["groups"][2]["unpriced_tokens"], 330);
    assert_eq!(json["unpriced_models"], serde_json::json!(["mystery"]));
    assert_eq!(json["total"]["tokens_in"], 121300);
    // Nothing recorded after the last day.
    let later = repo.boulder(&["spend", "--since", "2026-11-02", "--json"]).ok().json();
    assert_eq!(later["total"]["tokens_in"], 0);
    // The op-log holds each amount once: one spent op per new key.
    let kinds: Vec<String> = repo
        .boulder(&["log", "auth", "--json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"]["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "spent").count(), 1, "{kinds:?}");
    assert_eq!(repo.stream_state("auth")["spend"]["keys"], serde_json::json!(["m1"]));
}

#[test]
fn status_shows_spend_and_budget_spent_until_reset() {
    let repo = priced();
    budget(&repo, "docs", "{tokens: 1000}");
    add(&repo, &["--stream", "auth", "--tokens-in", "2000", "--tokens-out", "100", "--model", "sonnet", "--id", "a"])
        .ok();
    add(&repo, &["--stream", "docs", "--tokens-in", "900", "--tokens-out", "200", "--id", "d"]).ok();
    assert_shown!("status_with_spend", repo.boulder(&["status"]).ok());
    let json = repo.boulder(&["status", "--json"]).ok().json();
    let docs = &json["streams"][2];
    assert_eq!(docs["status"], "BUDGET_SPENT");
    assert_eq!(docs["spend"]["spent"], "stream docs's budget is spent: tokens 1,100 of 1,000");
    assert_eq!(docs["spend"]["budget"]["counted"]["tokens_in"], 900);
    assert_eq!(json["streams"][0]["spend"]["usd"], 0.0075);
    // api spent nothing and has no budget of its own: no figures.
    assert!(json["streams"][1].get("spend").is_none(), "{json}");
    assert_shown!("spend_reset", repo.boulder(&["spend", "reset", "docs"]).ok());
    let json = repo.boulder(&["status", "--json"]).ok().json();
    assert_eq!(json["streams"][2]["status"], "DEFINED");
    assert_eq!(json["streams"][2]["spend"]["total"]["tokens_in"], 900, "the total keeps what was spent");
    assert_eq!(json["streams"][2]["spend"]["budget"]["counted"]["tokens_in"], 0);
    assert_eq!(repo.stream_state("docs")["spend"]["resets"], 1);
}

#[test]
fn the_plans_total_spent_marks_every_stream_that_would_run() {
    let repo = sample_with("  budget: {tokens: 500}\n");
    repo.git(&["config", "boulder.actor", "laptop"]).ok();
    add(&repo, &["--stream", "auth", "--tokens-in", "400", "--tokens-out", "200", "--id", "a"]).ok();
    assert_shown!("status_plan_budget_spent", repo.boulder(&["status"]).ok());
    // Raising the budget (a plan edit) resumes.
    let plan = repo.read(".boulder/streams.yaml").replace("tokens: 500", "tokens: 5000");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("more budget");
    let json = repo.boulder(&["status", "--json"]).ok().json();
    assert!(json["streams"].as_array().unwrap().iter().all(|s| s["status"] == "DEFINED"), "{json}");
}

#[test]
fn spend_add_refuses_bad_input() {
    let repo = sample();
    let cases: &[(&str, &[&str])] = &[
        ("negative_tokens", &["--stream", "auth", "--tokens-in", "-5", "--tokens-out", "1"]),
        ("not_a_number", &["--stream", "auth", "--tokens-in", "lots", "--tokens-out", "1"]),
        ("fractional_tokens", &["--stream", "auth", "--tokens-in", "1.5", "--tokens-out", "1"]),
        ("absurd_tokens", &["--stream", "auth", "--tokens-in", "99999999999", "--tokens-out", "1"]),
        ("negative_usd", &["--stream", "auth", "--tokens-in", "1", "--tokens-out", "1", "--usd", "-0.01"]),
        ("absurd_usd", &["--stream", "auth", "--tokens-in", "1", "--tokens-out", "1", "--usd", "1e9"]),
        ("empty_id", &["--stream", "auth", "--tokens-in", "1", "--tokens-out", "1", "--id", ""]),
        ("unknown_stream", &["--stream", "nope", "--tokens-in", "1", "--tokens-out", "1"]),
        ("no_stream_here", &["--tokens-in", "1", "--tokens-out", "1"]),
    ];
    for (case, args) in cases {
        let r = add(&repo, args).code(2);
        assert_shown!(format!("add_refused_{case}"), r);
    }
    assert!(repo.refs("refs/boulder/streams/").is_empty(), "nothing was recorded");
    // In a stream's worktree, the stream is that worktree's.
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    repo.boulder_in(&wt, &["spend", "add", "--tokens-in", "7", "--tokens-out", "3", "--id", "here"]).ok();
    assert_eq!(repo.stream_state("auth")["spend"]["keys"], serde_json::json!(["here"]));
}

#[test]
fn bad_budgets_and_prices_name_the_key_and_the_fix() {
    let cases = [
        ("stream_usd", "  auth:\n", "  auth:\n    budget: {usd: -1}\n"),
        ("stream_tokens", "  auth:\n", "  auth:\n    budget: {tokens: many}\n"),
        ("plan_time", "settings:\n", "settings:\n  budget: {time: forever}\n"),
        ("plan_key", "settings:\n", "settings:\n  budget: {dollars: 5}\n"),
        ("price", "settings:\n", "settings:\n  prices:\n    sonnet: {input: free}\n"),
    ];
    for (case, from, to) in cases {
        let repo = sample();
        let plan = repo.read(".boulder/streams.yaml").replacen(from, to, 1);
        repo.write(".boulder/streams.yaml", &plan);
        assert_shown!(format!("plan_refused_{case}"), repo.boulder(&["spend"]).code(2));
    }
    // A price in git config that is not a number, once a model needs it.
    let repo = sample();
    repo.git(&["config", "boulder.price.sonnet.output", "cheap"]).ok();
    repo.boulder(&["spend", "add", "--stream", "auth", "--tokens-in", "1", "--tokens-out", "1", "--model", "sonnet"])
        .ok();
    assert_shown!("config_price_refused", repo.boulder(&["spend"]).code(2));
}

/// The ui's snapshot (`GET /api/snapshot` of `git boulder ui`) as JSON.
fn ui_snapshot(repo: &TestRepo) -> serde_json::Value {
    use std::io::{BufRead, Read, Write};
    let mut child = repo
        .command(bin())
        .arg("ui")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("git boulder ui starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 = line.trim().rsplit_once(':').unwrap().1.split('/').next().unwrap().parse().unwrap();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(format!("GET /api/snapshot HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let body = answer.split_once("\r\n\r\n").unwrap().1;
    serde_json::from_str(body).unwrap()
}

#[test]
fn the_ui_snapshot_carries_the_same_figures() {
    let repo = priced();
    let empty = sample();
    assert!(ui_snapshot(&empty)["spend"].is_null());
    add(
        &repo,
        &["--stream", "auth", "--tokens-in", "20000", "--tokens-out", "4000", "--model", "sonnet", "--id", "m1"],
    )
    .ok();
    let snap = ui_snapshot(&repo);
    let spend = &snap["spend"];
    assert_eq!(spend["usd"], 0.12, "{spend}");
    assert_eq!(spend["total"]["tokens_in"], 20000);
    assert_eq!(spend["plan_budget"]["usd"], 5.0);
    assert_eq!(spend["streams"]["auth"]["budget"]["usd"], 1.0);
    assert!(spend["spent"].is_null());
    // The same as `status --json` says of the stream.
    let status = repo.boulder(&["status", "--json"]).ok().json();
    assert_eq!(spend["streams"]["auth"], status["streams"][0]["spend"]);
}
