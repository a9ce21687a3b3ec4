//! The verdict of recorded decisions, replayed from ops the way every machine replays them.

use super::*;
use crate::state::{Op, State};
use serde_json::json;

const A: &str = "1111111111111111111111111111111111111111";
const B: &str = "2222222222222222222222222222222222222222";
const ALICE: &str = "Alice <alice@example.com>";
const BOB: &str = "Bob <bob@example.com>";

fn tip(hex: &str) -> ObjectId {
    crate::git::id::parse(hex).unwrap()
}

fn plan(yaml: &str) -> Plan {
    crate::plan::parse(yaml).unwrap()
}

fn op(n: u64, actor: &str, kind: &str, data: serde_json::Value) -> Op {
    Op { v: 1, kind: kind.into(), lamport: n, at: format!("2026-01-01T00:00:{n:02}Z"), actor: actor.into(), data }
}

/// A stream run by `agent-box`, then the decisions (reviewer, decision, tip, machine).
fn state(decisions: &[(&str, &str, &str, &str)]) -> StreamState {
    let mut s = StreamState::default();
    s.apply(&op(1, "agent-box", "initialized", json!({"name": "auth"}))).unwrap();
    s.apply(&op(2, "agent-box", "status", json!({"status": "RUNNING"}))).unwrap();
    for (i, (reviewer, decision, tip, actor)) in decisions.iter().enumerate() {
        let mut data = json!({"decision": decision, "reviewer": reviewer, "tip": tip});
        if *decision == "request_changes" {
            data["message"] = json!("rename the table");
        }
        s.apply(&op(3 + i as u64, actor, "reviewed", data)).unwrap();
    }
    s
}

const ONE: &str = "streams:\n  auth: {stories: [US-001]}\nsettings:\n  review: {required: 1}\n";

fn verdict_at(p: &Plan, s: &StreamState, t: &str) -> Verdict {
    verdict(p, "auth", s, tip(t), author_actor(s))
}

#[test]
fn no_review_asked_for_is_not_required() {
    let p = plan("streams:\n  auth: {stories: [US-001]}\n");
    assert_eq!(verdict_at(&p, &state(&[]), A), Verdict::NotRequired);
    let p = plan("streams:\n  auth: {review: 0}\nsettings:\n  review: {required: 2}\n");
    assert_eq!(verdict_at(&p, &state(&[]), A), Verdict::NotRequired, "review: 0 turns it off");
}

#[test]
fn an_approval_counts_only_for_the_tip_it_names() {
    let p = plan(ONE);
    let s = state(&[(ALICE, "approve", A, "alice-box")]);
    assert_eq!(verdict_at(&p, &s, A), Verdict::Approved { by: vec![ALICE.into()] });
    assert_eq!(verdict_at(&p, &s, B), Verdict::Waiting { have: 0, need: 1 }, "a new commit needs review again");
}

#[test]
fn a_stream_s_own_review_count_wins_over_the_setting() {
    let p = plan("streams:\n  auth: {review: 2}\nsettings:\n  review: {required: 1}\n");
    let s = state(&[(ALICE, "approve", A, "alice-box")]);
    assert_eq!(verdict_at(&p, &s, A), Verdict::Waiting { have: 1, need: 2 });
    let s = state(&[(ALICE, "approve", A, "alice-box"), (BOB, "approve", A, "bob-box")]);
    assert_eq!(verdict_at(&p, &s, A), Verdict::Approved { by: vec![ALICE.into(), BOB.into()] });
}

#[test]
fn each_reviewer_counts_once_and_their_last_decision_stands() {
    let p = plan("streams:\n  auth: {review: 2}\n");
    let s = state(&[(ALICE, "approve", A, "alice-box"), (ALICE, "approve", A, "other-box")]);
    assert_eq!(verdict_at(&p, &s, A), Verdict::Waiting { have: 1, need: 2 });
    let s = state(&[(ALICE, "approve", A, "alice-box"), (ALICE, "request_changes", A, "alice-box")]);
    assert!(matches!(verdict_at(&p, &s, A), Verdict::ChangesRequested { .. }));
}

#[test]
fn changes_requested_block_until_withdrawn_or_a_new_tip() {
    let p = plan(ONE);
    let s = state(&[(ALICE, "approve", A, "alice-box"), (BOB, "request_changes", A, "bob-box")]);
    assert_eq!(
        verdict_at(&p, &s, A),
        Verdict::ChangesRequested { reviewer: BOB.into(), message: "rename the table".into() },
        "a request blocks even with enough approvals"
    );
    assert_eq!(verdict_at(&p, &s, B), Verdict::Waiting { have: 0, need: 1 }, "a new tip clears it");
    let s = state(&[
        (ALICE, "approve", A, "alice-box"),
        (BOB, "request_changes", A, "bob-box"),
        (BOB, "withdraw", A, "bob-box"),
    ]);
    assert_eq!(verdict_at(&p, &s, A), Verdict::Approved { by: vec![ALICE.into()] });
    assert!(!s.reviews.contains_key(BOB), "withdraw removes the decision");
}

#[test]
fn the_machine_that_ran_the_agent_may_not_approve_unless_allowed() {
    let s = state(&[(ALICE, "approve", A, "agent-box")]);
    assert_eq!(verdict_at(&plan(ONE), &s, A), Verdict::Waiting { have: 0, need: 1 });
    let review = &s.reviews[ALICE];
    assert_eq!(standing(&plan(ONE), review, tip(A), author_actor(&s)), Standing::OwnMachine);
    let solo = plan("streams:\n  auth: {}\nsettings:\n  review: {required: 1, allow_self: true}\n");
    assert_eq!(verdict_at(&solo, &s, A), Verdict::Approved { by: vec![ALICE.into()] });
    // Its own machine may still ask for changes.
    let s = state(&[(ALICE, "request_changes", A, "agent-box")]);
    assert!(matches!(verdict_at(&plan(ONE), &s, A), Verdict::ChangesRequested { .. }));
}

#[test]
fn the_author_is_the_last_run_s_machine_else_the_initializer() {
    let mut s = StreamState::default();
    s.apply(&op(1, "init-box", "initialized", json!({"name": "auth"}))).unwrap();
    assert_eq!(author_actor(&s), Some("init-box"));
    s.apply(&op(2, "run-box", "status", json!({"status": "RUNNING"}))).unwrap();
    assert_eq!(author_actor(&s), Some("run-box"));
}

#[test]
fn a_stream_the_plan_does_not_name_takes_the_setting() {
    let p = plan(ONE);
    assert_eq!(required(&p, "adhoc-thing"), 1);
}

#[test]
fn bad_reviewed_ops_are_refused_naming_the_field() {
    let bad = |data: serde_json::Value| {
        let mut s = StreamState::default();
        s.apply(&op(1, "m", "reviewed", data)).unwrap_err().to_string()
    };
    let e = bad(json!({"decision": "lgtm", "reviewer": ALICE, "tip": A}));
    assert!(e.contains("decision \"lgtm\""), "{e}");
    let e = bad(json!({"decision": "approve", "reviewer": ALICE, "tip": "1111"}));
    assert!(e.contains("not a full commit id"), "{e}");
    let e = bad(json!({"decision": "approve", "reviewer": "x\ny", "tip": A}));
    assert!(e.contains("reviewer"), "{e}");
    let e = bad(json!({"decision": "approve", "reviewer": "x".repeat(MAX_REVIEWER + 1), "tip": A}));
    assert!(e.contains("reviewer"), "{e}");
    let e = bad(json!({"decision": "approve", "reviewer": ALICE, "tip": A, "message": "m".repeat(MAX_TEXT + 1)}));
    assert!(e.contains("data.message is longer"), "{e}");
    let e = bad(json!({"decision": "approve", "tip": A}));
    assert!(e.contains("data.reviewer is missing"), "{e}");
}

#[test]
fn the_reviewers_kept_are_bounded() {
    let mut s = StreamState::default();
    for i in 0..(crate::state::MAX_REVIEWERS as u64 + 5) {
        let data = json!({"decision": "approve", "reviewer": format!("R{i:03} <r@x>"), "tip": A});
        let mut o = op(1, "m", "reviewed", data);
        o.at = format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60);
        s.apply(&o).unwrap();
    }
    assert_eq!(s.reviews.len(), crate::state::MAX_REVIEWERS);
    assert!(!s.reviews.contains_key("R000 <r@x>"), "the oldest went first");
    s.validate().unwrap();
}
