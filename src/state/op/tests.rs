//! The op records of every log: envelopes, typed ops, and how they apply.

use std::collections::BTreeSet;

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn op(kind: &str, lamport: u64, data: serde_json::Value) -> Op {
    Op {
        v: 1,
        kind: kind.into(),
        lamport,
        at: format!("2026-01-01T00:00:{:02}Z", lamport % 60),
        actor: "a".into(),
        data,
    }
}

/// Why [`run`] stopped: an op was refused, or it made an invalid state.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error(transparent)]
    Op(#[from] OpError),
    #[error(transparent)]
    State(#[from] StateError),
}

fn run<S: State>(ops: &[Op]) -> Result<S, Refused> {
    let mut s = S::default();
    for o in ops {
        o.validate()?;
        s.apply(o)?;
        s.set_lamport(o.lamport);
        s.validate()?;
    }
    Ok(s)
}

#[test]
fn op_validation() {
    let good = op("activity", 1, json!({"commit": "abc1"}));
    good.validate().unwrap();
    let bad = |f: &dyn Fn(&mut Op)| {
        let mut o = good.clone();
        f(&mut o);
        o.validate().unwrap_err().to_string()
    };
    assert!(bad(&|o| o.v = 2).contains("version"));
    assert!(bad(&|o| o.kind = String::new()).contains("kind"));
    assert!(bad(&|o| o.kind = "Activity".into()).contains("kind"));
    assert!(bad(&|o| o.kind = "héllo".into()).contains("kind"));
    assert!(bad(&|o| o.lamport = 0).contains("lamport"));
    assert!(bad(&|o| o.at = "yesterday".into()).contains("RFC 3339"));
    assert!(bad(&|o| o.actor = String::new()).contains("actor"));
    assert!(bad(&|o| o.actor = "x".repeat(201)).contains("actor"));
    assert!(bad(&|o| o.actor = "a\nb".into()).contains("actor"));
    assert!(bad(&|o| o.data = json!([1])).contains("object"));
    // Strict parsing.
    let text = r#"{"v":1,"kind":"stop","lamport":1,"at":"2026-01-01T00:00:00Z","actor":"a","data":{},"x":1}"#;
    assert!(serde_json::from_str::<Op>(text).unwrap_err().to_string().contains("unknown field"));
}

#[test]
fn an_activity_recorded_after_the_fact_keeps_the_commits_time() {
    let created = op("created", 1, json!({"stream": "auth"}));
    // A commit of 2025 recorded now: the last activity is the commit's time, not the op's.
    let old = op("activity", 2, json!({"commit": "abc1", "at": "2025-06-01T00:00:00.000Z"}));
    let s = run::<BoulderState>(&[created.clone(), old.clone()]).unwrap();
    assert_eq!(s.last_activity.as_deref(), Some("2025-06-01T00:00:00.000Z"));
    assert_eq!(s.iteration, 1);
    // A newer commit after it moves the last activity; an older one does not, but counts.
    let newer = op("activity", 3, json!({"commit": "abc2"}));
    let older = op("activity", 4, json!({"commit": "abc3", "at": "2024-01-01T00:00:00Z"}));
    let s = run::<BoulderState>(&[created.clone(), old.clone(), newer, older]).unwrap();
    assert_eq!(s.last_activity.as_deref(), Some("2026-01-01T00:00:03Z"));
    assert_eq!(s.last_commit.as_deref(), Some("abc2"));
    assert_eq!(s.iteration, 3);
    // A time that does not parse falls back to the op's; a non-string is refused.
    let odd = op("activity", 2, json!({"commit": "abc1", "at": "yesterday"}));
    let s = run::<BoulderState>(&[created.clone(), odd]).unwrap();
    assert_eq!(s.last_activity.as_deref(), Some("2026-01-01T00:00:02Z"));
    assert!(run::<BoulderState>(&[created, op("activity", 2, json!({"commit": "abc1", "at": 5}))]).is_err());
}

/// Refusals are typed, and say what they always said (messages are compared by scripts and
/// snapshots).
#[test]
fn typed_refusals_keep_their_messages() {
    let parse_err = |kind: &str, data| StreamOp::parse(&op(kind, 1, data)).unwrap_err();
    let e = parse_err("merged", json!({"commit": "xyz"}));
    assert_eq!(e, OpError::NotACommitId { kind: "merged".into(), key: "commit", value: "xyz".into() });
    assert_eq!(e.to_string(), r#"merged op: data.commit "xyz" is not a commit id"#);
    let e = parse_err("status", json!({"status": "DONE"}));
    assert_eq!(
        e.to_string(),
        r#"status op: unknown stream status "DONE" (one of DEFINED, INITIALIZED, RUNNING, STOPPED, COMPLETED, FAILED, MERGED, CLEANED)"#
    );
    assert_eq!(parse_err("indexed", json!({})).to_string(), "indexed op: data.index must be a whole number 1..=65535");
    assert_eq!(parse_err("explode", json!({})).to_string(), r#"unknown stream op "explode""#);
    assert_eq!(parse_err("status", json!({"status": 1})).to_string(), "status op: data.status must be a string");
    assert_eq!(parse_err("status", json!({"status": ""})).to_string(), "status op: data.status is empty");
    assert_eq!(parse_err("status", json!({})).to_string(), "status op: data.status is missing");
    let e = PrdOp::parse(&op("done", 1, json!({"ids": [1]}))).unwrap_err();
    assert_eq!(e.to_string(), "done op: data.ids holds 1, not a story id");
    let e = BoulderOp::parse(&op("created", 1, json!({"depth": -1}))).unwrap_err();
    assert_eq!(e.to_string(), "created op: data.depth must be a whole number up to 1000");
    let mut o = op("stop", 1, json!({}));
    o.v = 2;
    assert_eq!(o.validate().unwrap_err(), OpError::Version(2));
    assert_eq!(o.validate().unwrap_err().to_string(), "op version 2 is not 1");
    let s = StreamState { index: Some(0), ..StreamState::default() };
    assert_eq!(s.validate().unwrap_err().to_string(), "stream index Some(0) is out of range (1..=65535)");
    let s = PrdState { updated_at: Some("never".into()), ..PrdState::default() };
    assert_eq!(s.validate().unwrap_err(), StateError::Time { what: "updated_at", value: "never".into() });
    assert_eq!(s.validate().unwrap_err().to_string(), r#"updated_at "never" is not RFC 3339"#);
}

#[test]
fn unknown_kinds_name_the_kind() {
    for e in [
        run::<StreamState>(&[op("explode", 1, json!({}))]).unwrap_err().to_string(),
        run::<BoulderState>(&[op("explode", 1, json!({}))]).unwrap_err().to_string(),
        run::<PrdState>(&[op("explode", 1, json!({}))]).unwrap_err().to_string(),
    ] {
        assert!(e.contains("\"explode\""), "{e}");
    }
}

#[test]
fn stream_lifecycle() {
    let s: StreamState = run(&[
        op("initialized", 1, json!({"name": "auth", "branch": "boulder/auth", "worktree": "/w/auth", "base": "main"})),
        op("stop_requested", 2, json!({})),
        op("status", 3, json!({"status": "RUNNING"})),
        op("stop_requested", 4, json!({})),
    ])
    .unwrap();
    assert_eq!(s.status, StreamStatus::Running);
    assert!(s.stop_requested, "a stop asked during a run is kept");
    assert_eq!(s.name.as_deref(), Some("auth"));
    assert_eq!(s.last_run.as_ref().unwrap().started_at, "2026-01-01T00:00:03Z");
    assert!(s.last_run.as_ref().unwrap().ended_at.is_none());
    let mut s2 = s.clone();
    s2.apply(&op("status", 5, json!({"status": "STOPPED", "reason": "asked"}))).unwrap();
    assert!(!s2.stop_requested);
    let last = s2.last_run.clone().unwrap();
    assert_eq!((last.outcome, last.reason.as_deref()), (Some(StreamStatus::Stopped), Some("asked")));
    s2.apply(&op("merged", 6, json!({"commit": "ABCDEF12", "strategy": "rebase"}))).unwrap();
    assert_eq!((s2.status.as_str(), s2.merged_commit.as_deref()), ("MERGED", Some("abcdef12")));
    s2.apply(&op("cleaned", 7, json!({"worktree_removed": true, "branch_deleted": true}))).unwrap();
    assert_eq!(s2.status, StreamStatus::Merged);
    assert!(s2.worktree.is_none() && s2.branch_deleted && s2.cleaned_at.is_some());
    s2.validate().unwrap();
    // Bad data is refused naming the field.
    assert!(run::<StreamState>(&[op("status", 1, json!({"status": "DONE"}))])
        .unwrap_err()
        .to_string()
        .contains("DONE"));
    assert!(run::<StreamState>(&[op("merged", 1, json!({"commit": "xyz"}))])
        .unwrap_err()
        .to_string()
        .contains("commit"));
    assert!(run::<StreamState>(&[op("cleaned", 1, json!({"branch_deleted": "yes"}))])
        .unwrap_err()
        .to_string()
        .contains("branch_deleted"));
    // A stream that was never initialized is DEFINED.
    assert_eq!(run::<StreamState>(&[op("stop_requested", 1, json!({}))]).unwrap().status, StreamStatus::Defined);
}

#[test]
fn boulder_ops() {
    let b: BoulderState = run(&[
        op("created", 1, json!({"id": "auth", "stream": "auth", "parent": null, "depth": 0})),
        op("enforced", 2, json!({"gate": "idle", "message": "keep going"})),
        op("enforced", 3, json!({"gate": "idle", "message": "really"})),
        op("stop", 4, json!({})),
        op("activity", 5, json!({"commit": "c1", "story": "US-1"})),
        op("activity", 6, json!({"commit": "c1", "story": "US-2"})),
        op("checkpoint", 7, json!({"message": "half way"})),
        op("todo_add", 8, json!({"id": "t1", "text": "tests"})),
        op("todo_add", 9, json!({"id": "t1", "text": "again"})),
        op("todo_done", 10, json!({"id": "t1"})),
        op("todo_done", 11, json!({"id": "t9"})),
        op("enforced", 12, json!({"gate": "idle", "message": "m"})),
        op("reset_failures", 13, json!({})),
        op("status", 14, json!({"status": "completed"})),
    ])
    .unwrap();
    assert_eq!(b.id.as_deref(), Some("auth"));
    assert_eq!(b.iteration, 1, "the same commit counts once");
    assert_eq!(b.last_story.as_deref(), Some("US-1"));
    assert_eq!(b.failure_count, 0);
    assert!(!b.stop_requested);
    assert_eq!(b.last_message.as_deref(), Some("m"));
    assert_eq!(b.checkpoint.as_ref().unwrap().message, "half way");
    assert_eq!(b.todos, vec![Todo { id: "t1".into(), text: "tests".into(), done: true }]);
    assert_eq!(b.status, BoulderStatus::Completed);
    assert_eq!(b.lamport, 14);
    assert!(run::<BoulderState>(&[op("activity", 1, json!({}))]).unwrap_err().to_string().contains("commit"));
    assert!(run::<BoulderState>(&[op("created", 1, json!({"depth": -1}))]).unwrap_err().to_string().contains("depth"));
    assert!(run::<BoulderState>(&[op("status", 1, json!({"status": "zzz"}))]).unwrap_err().to_string().contains("zzz"));
}

#[test]
fn activity_keeps_the_latest_time() {
    let mut b = BoulderState::default();
    let mut late = op("activity", 1, json!({"commit": "c1"}));
    late.at = "2026-01-01T10:00:00+02:00".into(); // 08:00Z
    let mut early = op("activity", 2, json!({"commit": "c2"}));
    early.at = "2026-01-01T09:00:00Z".into();
    b.apply(&late).unwrap();
    b.apply(&early).unwrap();
    assert_eq!(b.last_commit.as_deref(), Some("c2"), "09:00Z is after 10:00+02:00");
    assert_eq!(b.iteration, 2);
}

#[test]
fn prd_ops() {
    let p: PrdState = run(&[
        op("done", 1, json!({"ids": ["US-2", "US-1", "US-2"]})),
        op("undone", 2, json!({"ids": ["US-2"]})),
        op("merge", 3, json!({"parents": [], "ops": 0})),
    ])
    .unwrap();
    assert_eq!(p.done.iter().collect::<Vec<_>>(), ["US-1"]);
    assert!(run::<PrdState>(&[op("done", 1, json!({"ids": [1]}))]).unwrap_err().to_string().contains("ids"));
    assert!(run::<PrdState>(&[op("done", 1, json!({}))]).unwrap_err().to_string().contains("ids"));
}

#[test]
fn states_are_strict_and_round_trip() {
    let b: BoulderState =
        run(&[op("created", 1, json!({"stream": "s"})), op("activity", 2, json!({"commit": "c"}))]).unwrap();
    let text = serde_json::to_string(&b).unwrap();
    assert_eq!(serde_json::from_str::<BoulderState>(&text).unwrap(), b);
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["surprise"] = json!(1);
    assert!(serde_json::from_value::<BoulderState>(v).is_err());
    assert!(serde_json::from_str::<StreamState>(r#"{"status":"RUNNING","extra":1}"#).is_err());
    // An unknown status is refused as the state is read, naming it.
    let e = serde_json::from_str::<StreamState>(r#"{"status":"NOPE"}"#).unwrap_err().to_string();
    assert!(e.contains("unknown stream status \"NOPE\""), "{e}");
    let e = serde_json::from_str::<BoulderState>(r#"{"status":"zzz","iteration":0}"#).unwrap_err().to_string();
    assert!(e.contains("unknown boulder status \"zzz\""), "{e}");
    assert!(serde_json::from_str::<PrdState>(r#"{"done":["a"],"x":1}"#).is_err());
}

#[test]
fn merge_ops_change_nothing() {
    let b: BoulderState = run(&[op("created", 1, json!({"stream": "s"}))]).unwrap();
    let mut after = b.clone();
    after.apply(&op("merge", 5, json!({"parents": ["a", "b"], "ops": 3}))).unwrap();
    assert_eq!(after, b);
}

#[test]
fn complete_op_fills_names() {
    let parse = |kind: &str, data| op(kind, 1, data);
    let mut d = StreamOp::parse(&parse("initialized", json!({"branch": "b"}))).unwrap();
    StreamState::complete_op(Some("auth"), &mut d);
    assert_eq!(d.data()["name"], "auth");
    let mut d = BoulderOp::parse(&parse("created", json!({"id": "given"}))).unwrap();
    BoulderState::complete_op(Some("x"), &mut d);
    assert_eq!(d.data()["id"], "given");
    let mut d = BoulderOp::parse(&parse("activity", json!({"commit": "c"}))).unwrap();
    BoulderState::complete_op(Some("x"), &mut d);
    assert!(d.data().get("id").is_none());
}

/// Each op kind, with its data as git-boulder's writers write it, reads into its typed op and
/// writes back the same JSON; the typed op applies as the record does.
#[test]
fn typed_ops_write_back_what_they_read() {
    let stream = [
        (
            "initialized",
            json!({"base": "main", "branch": "boulder/a", "index": 1, "name": "a", "setup_failed": null, "worktree": "/w"}),
        ),
        ("initialized", json!({"branch": "boulder/a"})),
        ("status", json!({"reason": "stream run started", "status": "RUNNING"})),
        ("stop_requested", json!({})),
        ("indexed", json!({"index": 3})),
        ("merged", json!({"commit": "abcd12", "strategy": "rebase", "stream_tip": "ef01"})),
        ("cleaned", json!({"branch_deleted": false, "worktree_removed": true})),
        ("refused", json!({"reason": "conflicts", "refusal": "conflict", "stream_tip": "abcd12"})),
        (
            "refused",
            json!({"hint": "rebase it", "reason": "verify failed", "refusal": "verify", "remote": "origin", "stream_before": "0123ab", "stream_tip": "abcd12"}),
        ),
        ("retried", json!({})),
        (
            "spent",
            json!({"amounts": [{"cache_read": 9, "key": "s1:m1", "model": "m", "source": "claude", "tokens_in": 3, "tokens_out": 4}, {"exit": 0, "key": "run-1", "seconds": 60, "source": "run", "tokens_in": 0, "tokens_out": 0, "usd": 0.25}]}),
        ),
        ("spend_reset", json!({})),
    ];
    for (kind, data) in stream {
        let o = op(kind, 1, data.clone());
        let typed = StreamOp::parse(&o).unwrap();
        assert_eq!((typed.kind(), typed.data()), (kind, data.clone()));
        assert_eq!(serde_json::to_string(&typed.data()).unwrap(), serde_json::to_string(&data).unwrap());
        let (mut a, mut b) = (StreamState::default(), StreamState::default());
        a.apply(&o).unwrap();
        b.apply_op(&typed, &o.at, &o.actor);
        assert_eq!(a, b);
    }
    let boulder = [
        ("created", json!({"depth": 0, "id": "a", "parent": null, "stream": "a"})),
        ("created", json!({"depth": 0, "id": "a", "stream": "a"})),
        ("created", json!({"depth": 1, "id": "s", "parent": "a", "stream": null})),
        ("activity", json!({"at": "2026-01-01T00:00:00.000Z", "commit": "c1", "story": null})),
        ("activity", json!({"commit": "c1"})),
        ("enforced", json!({"gate": "enforce", "message": "go on"})),
        ("reset_failures", json!({})),
        ("stop", json!({})),
        ("status", json!({"status": "completed"})),
        ("checkpoint", json!({"message": "half way"})),
        ("todo_add", json!({"id": "t1", "text": "tests"})),
        ("todo_done", json!({"id": "t1"})),
        ("denied", json!({"owner": "api", "path": "src/api/a.rs", "rule": "other_stream"})),
        ("denied", json!({"path": "src/types/u.rs", "rule": "shared_read"})),
    ];
    for (kind, data) in boulder {
        let typed = BoulderOp::parse(&op(kind, 1, data.clone())).unwrap();
        assert_eq!((typed.kind(), typed.data()), (kind, data));
    }
    for (kind, data) in [("done", json!({"ids": ["B", "A"]})), ("undone", json!({"ids": []}))] {
        let typed = PrdOp::parse(&op(kind, 1, data.clone())).unwrap();
        assert_eq!((typed.kind(), typed.data()), (kind, data));
    }
    let (a, b) = ("0123456789abcdef0123456789abcdef01234567", "89abcdef0123456789abcdef0123456789abcdef");
    let parents = [a, b].map(|id| crate::git::id::parse(id).unwrap());
    let merge = MergeData { ops: 2, parents }.data();
    assert_eq!(serde_json::to_string(&merge).unwrap(), format!(r#"{{"ops":2,"parents":["{a}","{b}"]}}"#));
    // Statuses are written as they always were.
    assert_eq!(StreamStatus::ALL.map(StreamStatus::as_str), STREAM_STATUSES);
    assert_eq!(BoulderStatus::ALL.map(BoulderStatus::as_str), BOULDER_STATUSES);
    for s in StreamStatus::ALL {
        assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
    }
    for s in BoulderStatus::ALL {
        assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
    }
}

#[test]
fn a_refusal_stands_until_retried_or_merged() {
    let refused = |lamport, tip: &str| {
        op(
            "refused",
            lamport,
            json!({"refusal": "conflict", "reason": "2 conflicts", "stream_tip": tip, "hint": "rebase"}),
        )
    };
    let s: StreamState = run(&[
        op("initialized", 1, json!({"branch": "boulder/a"})),
        op("status", 2, json!({"status": "COMPLETED"})),
        refused(3, "ABCDEF12"),
    ])
    .unwrap();
    let r = s.refused.clone().unwrap();
    assert_eq!(
        (r.refusal.as_str(), r.stream_tip.as_str(), r.hint.as_deref()),
        ("conflict", "abcdef12", Some("rebase"))
    );
    assert_eq!(s.status, StreamStatus::Completed, "a refusal leaves the status as it was");
    assert!(r.at_tip("ABCDEF12") && !r.at_tip("abcdef13"));
    s.validate().unwrap();
    let mut retried = s.clone();
    retried.apply(&op("retried", 4, json!({}))).unwrap();
    assert!(retried.refused.is_none());
    let mut merged = s.clone();
    merged.apply(&op("merged", 4, json!({"commit": "abcd"}))).unwrap();
    assert!(merged.refused.is_none());
    // A state without a refusal is written as before: no `refused` key.
    let text = serde_json::to_string(&retried).unwrap();
    assert!(!text.contains("refused"), "{text}");
    assert_eq!(serde_json::from_str::<StreamState>(&serde_json::to_string(&s).unwrap()).unwrap(), s);
    // Bad data is refused naming the field; a kind of refusal this version does not know is taken.
    for (data, field) in [
        (json!({"refusal": "conflict", "reason": "x"}), "stream_tip"),
        (json!({"refusal": "conflict", "stream_tip": "abcd"}), "reason"),
        (json!({"refusal": "Conflict!", "reason": "x", "stream_tip": "abcd"}), "refusal"),
        (json!({"refusal": "conflict", "reason": "x", "stream_tip": "abcd", "stream_before": "zz"}), "stream_before"),
        (json!({"refusal": "conflict", "reason": 3, "stream_tip": "abcd"}), "reason"),
    ] {
        let e = run::<StreamState>(&[op("refused", 1, data)]).unwrap_err().to_string();
        assert!(e.contains(field), "{e}");
    }
    let newer = run::<StreamState>(&[op(
        "refused",
        1,
        json!({"refusal": "flaky_ci", "reason": "x", "stream_tip": "abcd", "extra": 1}),
    )]);
    assert_eq!(newer.unwrap().refused.unwrap().refusal, "flaky_ci");
}

/// Ops for the replay property: activity on a small set of commits and the others.
fn gen_op() -> impl Strategy<Value = (u64, u8, u8, u8)> {
    (1u64..8, 0u8..3, 0u8..6, 0u8..12)
}

fn make(i: usize, (lamport, actor, kind, arg): (u64, u8, u8, u8)) -> (Op, usize) {
    let (k, data) = match kind {
        0 | 1 => ("activity", json!({"commit": format!("c{arg}")})),
        2 => ("enforced", json!({"gate": "idle", "message": format!("m{arg}")})),
        3 => ("stop", json!({})),
        4 => ("checkpoint", json!({"message": format!("cp{arg}")})),
        _ => ("todo_add", json!({"id": format!("t{}", arg % 4), "text": format!("x{arg}")})),
    };
    let mut o = op(k, lamport, data);
    o.actor = format!("actor{actor}");
    o.at = format!("2026-01-01T00:00:{:02}Z", arg);
    (o, i)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// The replay order is total: any presentation order gives the same state, and the
    /// iteration counts each distinct commit once.
    #[test]
    fn replay_is_order_independent(ops in prop::collection::vec(gen_op(), 0..40), seed in any::<u64>()) {
        let ops: Vec<(Op, usize)> = ops.into_iter().enumerate().map(|(i, g)| make(i, g)).collect();
        let mut shuffled = ops.clone();
        let mut rng = fastrand::Rng::with_seed(seed);
        rng.shuffle(&mut shuffled);
        let a = replay(BoulderState::default(), ops.clone()).unwrap();
        let b = replay(BoulderState::default(), shuffled).unwrap();
        prop_assert_eq!(&a, &b);
        let distinct: BTreeSet<String> = ops
            .iter()
            .filter(|(o, _)| o.kind == "activity")
            .map(|(o, _)| o.data["commit"].as_str().unwrap().to_string())
            .collect();
        prop_assert_eq!(a.iteration, distinct.len() as u64);
        a.validate().unwrap();
    }

    /// Each commit still among `recent_commits` is given the iteration that counted it, however
    /// often it was seen again and however far the window has slid.
    #[test]
    fn iteration_of_is_the_iteration_that_counted_the_commit(seen in prop::collection::vec(0u8..90, 0..300)) {
        let mut s = BoulderState::default();
        let mut counted = std::collections::HashMap::new();
        for c in &seen {
            let commit = format!("{c:040}");
            let op = BoulderOp::Activity { commit: CommitId::read(commit.clone()), story: Opt::Absent, at: Opt::Absent };
            let before = s.iteration;
            s.apply_op(&op, "2026-01-01T00:00:00Z", "a");
            if s.iteration > before {
                counted.insert(commit.clone(), s.iteration);
            }
            prop_assert_eq!(s.iteration_of(&commit), counted[&commit]);
        }
        for c in &s.recent_commits {
            prop_assert_eq!(s.iteration_of(c), counted[c]);
        }
        prop_assert_eq!(s.iteration_of("not seen"), s.iteration);
    }

    /// Any `refused` data either parses into an op that writes back the JSON it was read from
    /// (keys sorted) and applies as the record does, or is refused naming one of its fields.
    #[test]
    fn refused_ops_parse_or_name_the_field(
        refusal in "[a-z_]{1,8}|[A-Z ]{1,3}|",
        reason in ".{0,20}",
        tip in "[0-9a-f]{0,12}|[g-z]{4}",
        before in prop::option::of("[0-9a-fA-F]{3,10}"),
        hint in prop::option::of(".{0,10}"),
        remote in prop::option::of("[a-z]{1,6}"),
    ) {
        let mut data = json!({"refusal": refusal, "reason": reason, "stream_tip": tip});
        if let Some(b) = &before { data["stream_before"] = json!(b); }
        if let Some(h) = &hint { data["hint"] = json!(h); }
        if let Some(r) = &remote { data["remote"] = json!(r); }
        let o = op("refused", 1, data.clone());
        match StreamOp::parse(&o) {
            Ok(typed) => {
                prop_assert_eq!(typed.kind(), "refused");
                prop_assert_eq!(serde_json::to_string(&typed.data()).unwrap(), serde_json::to_string(&data).unwrap());
                let (mut a, mut b) = (StreamState::default(), StreamState::default());
                a.apply(&o).unwrap();
                b.apply_op(&typed, &o.at, &o.actor);
                prop_assert_eq!(&a, &b);
                let r = a.refused.clone().unwrap();
                prop_assert!(r.at_tip(&tip));
                prop_assert_eq!(r.reason, reason);
                a.validate().unwrap();
            }
            Err(e) => {
                let e = e.to_string();
                prop_assert!(
                    ["refusal", "reason", "stream_tip", "stream_before"].iter().any(|f| e.contains(&format!("data.{f}"))),
                    "{}", e
                );
            }
        }
    }

    /// Replaying a prefix, then the rest, equals replaying everything when the rest sorts
    /// after the prefix (the fast path of the store's merge).
    #[test]
    fn replay_resumes_from_a_base(ops in prop::collection::vec(gen_op(), 0..30), cut in 0u64..8) {
        let ops: Vec<(Op, usize)> = ops.into_iter().enumerate().map(|(i, g)| make(i, g)).collect();
        let (before, after): (Vec<_>, Vec<_>) = ops.iter().cloned().partition(|(o, _)| o.lamport <= cut);
        let base = replay(BoulderState::default(), before).unwrap();
        let resumed = replay(base, after.clone()).unwrap();
        let whole = replay(BoulderState::default(), ops).unwrap();
        prop_assert_eq!(resumed, whole);
    }
}

/// Bad data of each kind is refused with the OpError naming its field, as read and as appended
/// typed (where a typed op can hold it).
#[test]
fn bad_fields_give_the_named_error() {
    let k = |s: &str| s.to_string();
    let cases: Vec<(Result<(), OpError>, OpError)> = vec![
        (
            StreamOp::parse(&op("merged", 1, json!({"commit": "abc"}))).map(drop),
            OpError::NotACommitId { kind: k("merged"), key: "commit", value: k("abc") },
        ),
        (
            StreamOp::parse(&op("rolled_back", 1, json!({"from": "abcd", "to": "g123"}))).map(drop),
            OpError::NotACommitId { kind: k("rolled_back"), key: "to", value: k("g123") },
        ),
        (
            StreamOp::parse(&op("unmerged", 1, json!({"commit": "abcd", "reverted": 5}))).map(drop),
            OpError::NotAString { kind: k("unmerged"), key: "reverted" },
        ),
        (StreamOp::parse(&op("indexed", 1, json!({"index": 0}))).map(drop), OpError::BadIndex { kind: k("indexed") }),
        (
            StreamOp::parse(&op("initialized", 1, json!({"adhoc": "yes"}))).map(drop),
            OpError::NotABool { kind: k("initialized"), key: "adhoc" },
        ),
        (
            StreamOp::parse(&op("refused", 1, json!({"refusal": "Bad", "reason": "r", "stream_tip": "abcd"})))
                .map(drop),
            OpError::NotAWord { kind: k("refused"), key: "refusal", value: k("Bad") },
        ),
        (
            BoulderOp::parse(&op("activity", 1, json!({"commit": ""}))).map(drop),
            OpError::EmptyField { kind: k("activity"), key: "commit" },
        ),
        (
            BoulderOp::parse(&op("todo_add", 1, json!({"id": "t1"}))).map(drop),
            OpError::MissingField { kind: k("todo_add"), key: "text" },
        ),
        (
            BoulderOp::parse(&op("checkpoint", 1, json!({"message": "x".repeat(MAX_TEXT + 1)}))).map(drop),
            OpError::TooLong { kind: k("checkpoint"), key: "message" },
        ),
        (BoulderOp::parse(&op("created", 1, json!({"depth": 1001}))).map(drop), OpError::BadDepth),
        (
            PrdOp::parse(&op("undone", 1, json!({"ids": [""]}))).map(drop),
            OpError::NotAStoryId { kind: k("undone"), value: json!("") },
        ),
        // Appended typed: the same errors.
        (
            BoulderOp::Checkpoint { message: String::new() }.check(),
            OpError::EmptyField { kind: k("checkpoint"), key: "message" },
        ),
        (StreamOp::Indexed { index: 70000 }.check(), OpError::BadIndex { kind: k("indexed") }),
        (
            BoulderOp::Denied { owner: Opt::Absent, path: k("p"), rule: "y".repeat(MAX_TEXT + 1) }.check(),
            OpError::TooLong { kind: k("denied"), key: "rule" },
        ),
        (
            PrdOp::Done { ids: vec![k("US-1"), "z".repeat(201)] }.check(),
            OpError::NotAStoryId { kind: k("done"), value: json!("z".repeat(201)) },
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got.unwrap_err(), want);
    }
}

/// Commit ids read back as full ids only when written as git-boulder writes them.
#[test]
fn commit_ids_read_back_as_written() {
    let full = "0123456789abcdef0123456789abcdef01234567";
    for (text, is_full) in [(full, true), ("0123456789ABCDEF0123456789abcdef01234567", false), ("abcd", false)] {
        let typed = StreamOp::parse(&op("unmerged", 1, json!({"commit": text}))).unwrap();
        let StreamOp::Unmerged { commit, .. } = &typed else { unreachable!() };
        assert_eq!(commit.id().is_some(), is_full, "{text}");
        assert_eq!(commit.to_string(), text);
        assert_eq!(commit.to_lowercase(), text.to_ascii_lowercase());
        assert_eq!(typed.data(), json!({"commit": text}));
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-zA-Z_ ]{1,8}", "[0-9a-fA-F]{3,41}", "[g-z0-9]{4}"]
}

fn opt_text() -> impl Strategy<Value = Opt<String>> {
    prop_oneof![Just(Opt::Absent), Just(Opt::Null), text().prop_map(Opt::Set)]
}

/// A commit id as git-boulder makes one, or as a stream op's reader takes one (4 to 64 hex
/// digits in either case: no other text can be in one).
fn commit() -> impl Strategy<Value = CommitId> {
    prop_oneof![
        any::<[u8; 20]>().prop_map(|b| CommitId::from(crate::git::ObjectId::from_bytes_or_panic(&b))),
        "[0-9a-fA-F]{4,64}".prop_map(CommitId::read),
    ]
}

/// A commit id as an `activity` op's reader takes one (any non-empty text).
fn loose() -> impl Strategy<Value = CommitId> {
    prop_oneof![commit(), "[a-z0-9 ]{1,8}".prop_map(CommitId::read)]
}

fn opt_commit() -> impl Strategy<Value = Opt<CommitId>> {
    prop_oneof![Just(Opt::Absent), Just(Opt::Null), commit().prop_map(Opt::Set)]
}

fn stream_op() -> impl Strategy<Value = StreamOp> {
    prop_oneof![
        (opt_commit(), commit(), opt_commit(), opt_text(), opt_commit()).prop_map(
            |(base_before, commit, landed, strategy, stream_tip)| StreamOp::Merged {
                base_before,
                commit,
                landed,
                strategy,
                stream_tip
            }
        ),
        (opt_text(), text(), text(), opt_text(), opt_commit(), commit()).prop_map(
            |(hint, reason, refusal, remote, stream_before, stream_tip)| StreamOp::Refused {
                hint,
                reason,
                refusal,
                remote,
                stream_before,
                stream_tip
            }
        ),
        (opt_text(), commit(), any::<bool>(), commit()).prop_map(|(backup, from, r, to)| StreamOp::RolledBack {
            backup,
            from,
            restored: if r { Opt::Set(true) } else { Opt::Absent },
            to
        }),
        (0u64..70000).prop_map(|index| StreamOp::Indexed { index }),
        prop::collection::vec(amount(), 0..3).prop_map(|amounts| StreamOp::Spent { amounts }),
        Just(StreamOp::SpendReset {}),
        (opt_text(), opt_text(), opt_text()).prop_map(|(base, branch, name)| StreamOp::Initialized {
            adhoc: Opt::Absent,
            base,
            branch,
            index: Opt::Absent,
            name,
            setup_failed: Opt::Null,
            worktree: Opt::Absent
        }),
    ]
}

/// A spent amount, its numbers sometimes out of bounds.
fn amount() -> impl Strategy<Value = SpendAmount> {
    let big = prop_oneof![0u64..1000, Just(MAX_TOKENS), Just(MAX_TOKENS + 1), Just(u64::MAX)];
    let key = prop_oneof![Just(String::new()), "[a-z:0-9]{1,12}", Just("k".repeat(MAX_KEY + 1)), Just("a\nb".into())];
    (key, big.clone(), big, prop::option::of(-1.0f64..200_000.0), prop::option::of(0u64..700_000), "[a-z]{1,8}")
        .prop_map(|(key, tokens_in, tokens_out, usd, seconds, source)| SpendAmount {
            seconds: seconds.map_or(Opt::Absent, Opt::Set),
            usd: usd.map_or(Opt::Null, Opt::Set),
            model: Opt::Set("claude-x".into()),
            ..SpendAmount::tokens(key, &source, tokens_in, tokens_out)
        })
}

fn boulder_op() -> impl Strategy<Value = BoulderOp> {
    prop_oneof![
        (opt_text(), loose(), opt_text()).prop_map(|(at, commit, story)| BoulderOp::Activity { at, commit, story }),
        (text(), text()).prop_map(|(id, text)| BoulderOp::TodoAdd { id, text }),
        text().prop_map(|message| BoulderOp::Checkpoint { message }),
        (opt_text(), text(), text()).prop_map(|(owner, path, rule)| BoulderOp::Denied { owner, path, rule }),
        (0u64..1100, opt_text()).prop_map(|(d, id)| BoulderOp::Created {
            depth: Opt::Set(d),
            id,
            parent: Opt::Null,
            stream: Opt::Absent
        }),
    ]
}

/// A typed op is refused as appended ([`Payload::check`]) exactly when the JSON it writes is
/// refused as read, with the same error; accepted, it reads back as itself.
fn check_agrees_with_parse<P: Payload>(typed: &P) -> Result<(), TestCaseError> {
    let read = P::parse(&op(typed.kind(), 1, typed.data()));
    match (typed.check(), read) {
        (Ok(()), Ok(back)) => prop_assert_eq!(&back, typed),
        (Err(a), Err(b)) => prop_assert_eq!(a, b),
        (a, b) => prop_assert!(false, "check {:?}, parse {:?}", a, b),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn typed_stream_ops_check_as_they_parse(typed in stream_op()) {
        check_agrees_with_parse(&typed)?;
    }

    #[test]
    fn typed_boulder_ops_check_as_they_parse(typed in boulder_op()) {
        check_agrees_with_parse(&typed)?;
    }

    #[test]
    fn typed_prd_ops_check_as_they_parse(ids in prop::collection::vec(text(), 0..4), done in any::<bool>()) {
        let typed = if done { PrdOp::Done { ids } } else { PrdOp::Undone { ids } };
        check_agrees_with_parse(&typed)?;
    }
}

/// A `spent` op of `actor` at `lamport` carrying `keys` (each key's amount is fixed by the key:
/// the same key always stands for the same amount, as a harness's message id does).
fn spent(actor: u8, lamport: u64, keys: &[u8]) -> Op {
    let amounts: Vec<serde_json::Value> = keys
        .iter()
        .map(|k| {
            json!({"key": format!("k{k}"), "model": format!("m{}", k % 3), "source": "claude",
                   "tokens_in": u64::from(*k) * 10, "tokens_out": u64::from(*k) + 1, "usd": f64::from(*k) / 8.0})
        })
        .collect();
    let mut o = op("spent", lamport, json!({ "amounts": amounts }));
    o.actor = format!("machine{actor}");
    o
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Spend recorded on several clones, merged in any order, gives the same totals; a key
    /// recorded twice (by one clone or by two) counts once.
    #[test]
    fn spend_merges_in_any_order_and_counts_a_key_once(
        clones in prop::collection::vec(prop::collection::vec((1u64..6, prop::collection::vec(0u8..12, 1..4)), 0..5), 1..4),
        seed in any::<u64>(),
    ) {
        let mut ops = Vec::new();
        for (actor, clone) in clones.iter().enumerate() {
            for (lamport, keys) in clone {
                ops.push((spent(actor as u8, *lamport, keys), ops.len()));
            }
        }
        let mut shuffled = ops.clone();
        fastrand::Rng::with_seed(seed).shuffle(&mut shuffled);
        let a = replay(StreamState::default(), ops.clone()).unwrap();
        // Applied as they come, in any order: the totals are the same.
        let mut b = StreamState::default();
        for (o, _) in &shuffled {
            b.apply(o).unwrap();
        }
        let sum = |s: &StreamState| s.spend.rows.iter().fold((0, 0, 0, 0), |t, r| {
            (t.0 + r.tokens_in, t.1 + r.tokens_out, t.2 + r.usd_micros, t.3 + r.amounts)
        });
        prop_assert_eq!(sum(&a), sum(&b));
        prop_assert_eq!(&a.spend.keys, &b.spend.keys);
        let distinct: BTreeSet<u8> = clones.iter().flatten().flat_map(|(_, k)| k.iter().copied()).collect();
        let want = distinct.iter().fold((0, 0, 0, 0), |t, k| {
            (t.0 + u64::from(*k) * 10, t.1 + u64::from(*k) + 1, t.2 + micros(f64::from(*k) / 8.0), t.3 + 1)
        });
        prop_assert_eq!(sum(&a), want);
        a.validate().unwrap();
        let text = serde_json::to_string(&a).unwrap();
        prop_assert_eq!(serde_json::from_str::<StreamState>(&text).unwrap(), a);
    }
}

#[test]
fn spend_reset_starts_the_budget_again_and_old_states_read_unchanged() {
    let plain = StreamState::default();
    let text = serde_json::to_string(&plain).unwrap();
    assert!(!text.contains("spend"), "{text}");
    let mut s = plain.clone();
    s.apply(&spent(0, 1, &[1, 2])).unwrap();
    s.apply(&op("spend_reset", 2, json!({}))).unwrap();
    s.apply(&spent(0, 3, &[2, 3])).unwrap();
    assert_eq!(s.spend.keys.len(), 3);
    assert_eq!(s.spend.resets, 1);
    let current: u64 = s.spend.current().map(|r| r.tokens_in).sum();
    assert_eq!(current, 30, "only key 3 is new after the reset");
}

#[test]
fn spent_ops_refuse_bad_amounts_naming_the_field() {
    let bad = |amount: serde_json::Value| {
        StreamOp::parse(&op("spent", 1, json!({"amounts": [amount]}))).unwrap_err().to_string()
    };
    let base = json!({"key": "k", "source": "manual", "tokens_in": 1, "tokens_out": 1});
    let with = |k: &str, v: serde_json::Value| {
        let mut a = base.clone();
        a[k] = v;
        a
    };
    assert_eq!(bad(with("tokens_in", json!(-5))), "spent op: data.tokens_in: must be a whole number, not negative");
    assert_eq!(
        bad(with("tokens_out", json!(MAX_TOKENS + 1))),
        format!("spent op: data.tokens_out: must be a whole number of tokens up to {MAX_TOKENS}")
    );
    assert!(bad(with("usd", json!(-0.5))).contains("data.usd"));
    assert!(bad(with("usd", json!(1e9))).contains("data.usd"));
    assert!(bad(with("key", json!(""))).contains("data.key"));
    assert!(bad(with("key", json!("x".repeat(MAX_KEY + 1)))).contains("data.key"));
    assert!(bad(with("seconds", json!(MAX_SECONDS + 1))).contains("data.seconds"));
    assert!(bad(with("extra", json!(1))).contains("unknown field"));
    assert!(StreamOp::parse(&op("spent", 1, json!({"amounts": []}))).unwrap_err().to_string().contains("1 to"));
    assert!(StreamOp::parse(&op("spent", 1, json!({}))).unwrap_err().to_string().contains("data.amounts is missing"));
}
