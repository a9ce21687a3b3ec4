//! The hostile-input campaign: a regression corpus in `fixtures/hostile/` (stream plans, PRDs,
//! op.json records, notes, claims; files named `ok-*` must be accepted, `bad-*` refused) fed to the
//! parsers and to the real binary, plus property tests that throw arbitrary bytes and arbitrary
//! JSON at the op, note and claim parsers. Nothing may panic; refusals are clear errors with exit 2
//! (usage/config) or 1 (refused state from a remote), and local state is never touched.

use std::path::{Path, PathBuf};

use crate::common::*;
use git_boulder::state::Op;
use proptest::prelude::*;

fn corpus(kind: &str) -> Vec<(String, PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hostile").join(kind);
    let mut out: Vec<(String, PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            (p.file_name().unwrap().to_string_lossy().into_owned(), p.clone(), std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    assert!(out.len() >= 5, "the {kind} corpus is too small");
    out
}

fn expect_ok(name: &str) -> bool {
    assert!(name.starts_with("ok-") || name.starts_with("bad-"), "{name}: corpus files are ok-* or bad-*");
    name.starts_with("ok-")
}

#[track_caller]
fn no_panic(r: &Run, what: &str) {
    assert!(!r.stderr.contains("panicked") && r.code != 101 && r.code >= 0, "{what}: crashed\n{}", r.stderr);
}

#[test]
fn stream_plans() {
    let repo = sample();
    for (name, path, bytes) in corpus("plans") {
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let _ = git_boulder::plan::parse(text);
        }
        let r = repo.boulder(&["stream", "validate", "--config", path.to_str().unwrap()]);
        no_panic(&r, &name);
        if expect_ok(&name) {
            assert_eq!(r.code, 0, "{name}: {}{}", r.stdout, r.stderr);
        } else {
            assert_eq!(r.code, 2, "{name}: {}{}", r.stdout, r.stderr);
            assert!(r.stderr.contains("error:"), "{name}: no error message\n{}", r.stderr);
        }
    }
    // Nothing was written by any of it.
    assert!(repo.refs("refs/boulder/").is_empty());
}

#[test]
fn prds() {
    let repo = sample();
    for (name, path, bytes) in corpus("prds") {
        let parsed = std::str::from_utf8(&bytes).map(|t| git_boulder::prd::parse(&name, t));
        let r = repo.boulder(&["prd", "show", "--prd", path.to_str().unwrap(), "--json"]);
        no_panic(&r, &name);
        if expect_ok(&name) {
            assert!(matches!(parsed, Ok(Ok(_))), "{name}: {parsed:?}");
            assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        } else {
            assert!(!matches!(parsed, Ok(Ok(_))), "{name} parsed");
            assert_eq!(r.code, 2, "{name}: {}", r.stderr);
            assert!(r.stderr.contains(path.file_name().unwrap().to_str().unwrap()), "{name}: {}", r.stderr);
        }
    }
}

fn parse_op(bytes: &[u8]) -> Result<Op, String> {
    let op: Op = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    op.validate().map_err(|e| e.to_string())?;
    Ok(op)
}

#[test]
fn op_records() {
    for (name, _, bytes) in corpus("ops") {
        assert_eq!(parse_op(&bytes).is_ok(), expect_ok(&name), "{name}: {:?}", parse_op(&bytes));
    }
}

#[test]
fn notes() {
    for (name, _, bytes) in corpus("notes") {
        let r = git_boulder::git::notes::check(&bytes);
        assert_eq!(r.is_ok(), expect_ok(&name), "{name}: {r:?}");
    }
}

#[test]
fn claims() {
    for (name, _, bytes) in corpus("claims") {
        let r = serde_json::from_slice::<git_boulder::sync::claim::Claim>(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|c| c.validate("auth").map_err(|e| e.to_string()));
        assert_eq!(r.is_ok(), expect_ok(&name), "{name}: {r:?}");
    }
}

/// Every bad op record, pushed by a hostile clone on top of a good op-log, is refused by a pull
/// naming the ref, and the local op-log stays where it was.
#[test]
fn bad_op_records_from_a_remote_are_refused() {
    let repo = sample();
    repo.boulder(&["prd", "done", "US-001"]).ok();
    let remote = repo.tmp.path().join("remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]).ok();
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]).ok();
    repo.boulder(&["push"]).ok();
    let good = repo.git_out(&["rev-parse", "refs/boulder/prd"]);
    let state = repo.git_out(&["rev-parse", "refs/boulder/prd:state.json"]);
    let bad: Vec<_> = corpus("ops").into_iter().filter(|(n, _, _)| n.starts_with("bad-")).collect();
    assert!(bad.len() >= 5, "the corpus has {} bad ops", bad.len());
    for (name, path, _) in bad {
        let op = repo.git_out(&["hash-object", "-w", path.to_str().unwrap()]);
        let tree_input = format!("100644 blob {op}\top.json\n100644 blob {state}\tstate.json\n");
        let list = repo.tmp.path().join("tree.txt");
        std::fs::write(&list, tree_input).unwrap();
        let tree = {
            let mut c = repo.command("git");
            let out =
                c.args(["mktree"]).current_dir(&repo.dir).stdin(std::fs::File::open(&list).unwrap()).output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        let bad = repo.git_out(&["commit-tree", &tree, "-p", &good, "-m", "garbage"]);
        repo.git(&["push", "-q", "--force", "origin", &format!("{bad}:refs/boulder/prd")]).ok();
        let r = repo.boulder(&["pull"]);
        no_panic(&r, &name);
        assert_eq!(r.code, 1, "{name}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("refs/boulder/prd"), "{name}: {}", r.stderr);
        assert_eq!(repo.git_out(&["rev-parse", "refs/boulder/prd"]), good, "{name}: local state moved");
    }
    repo.assert_fsck();
}

/// Arbitrary JSON values for each field of an op.
fn any_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map(serde_json::Value::Number).unwrap_or_default()),
        "\\PC{0,20}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn op_parser_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_op(&bytes);
    }

    #[test]
    fn op_parser_never_panics_on_json(v in any_json(), kind in any_json(), lamport in any_json(), at in any_json(), actor in any_json(), data in any_json()) {
        let obj = serde_json::json!({"v": v, "kind": kind, "lamport": lamport, "at": at, "actor": actor, "data": data});
        if let Ok(op) = parse_op(obj.to_string().as_bytes()) {
            // Whatever passes validation can be applied or refused, never crash.
            let mut s = git_boulder::state::BoulderState::default();
            let _ = git_boulder::state::State::apply(&mut s, &op);
            let mut s = git_boulder::state::StreamState::default();
            let _ = git_boulder::state::State::apply(&mut s, &op);
            let mut s = git_boulder::state::PrdState::default();
            let _ = git_boulder::state::State::apply(&mut s, &op);
        }
    }

    #[test]
    fn note_check_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300), text in "\\PC{0,200}") {
        let _ = git_boulder::git::notes::check(&bytes);
        let _ = git_boulder::git::notes::check(text.as_bytes());
    }

    #[test]
    fn claim_parser_never_panics(v in any_json(), stream in any_json(), actor in any_json(), since in any_json(), expires in any_json()) {
        let obj = serde_json::json!({"v": v, "stream": stream, "actor": actor, "host": "h", "since": since, "expires": expires});
        if let Ok(c) = serde_json::from_value::<git_boulder::sync::claim::Claim>(obj) {
            let _ = c.validate("auth");
            let _ = c.expired();
        }
    }

    #[test]
    fn plan_parser_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(t) = std::str::from_utf8(&bytes) {
            let _ = git_boulder::plan::parse(t);
        }
    }
}
