//! State as op-logs: appends through the library against real repositories made with the git
//! CLI, checked with plain git; concurrent appends lose nothing; the deterministic merge gives the
//! same state.json for any interleaving and merge order.

use crate::common::*;
use git_boulder::git::Repo;
use git_boulder::state::op::OpError;
use git_boulder::state::store::ChainError;
use git_boulder::state::{BoulderState, Store};
use proptest::prelude::*;
use serde_json::json;

fn open(repo: &TestRepo) -> Repo {
    crate::common::assert_lib_env();
    Repo::open(&repo.dir).expect("open")
}

#[test]
fn append_writes_op_and_state_readable_with_git() {
    crate::common::lib_env!();
    let repo = TestRepo::with_files(&[("a", "a\n")]);
    let r = open(&repo);
    let store = Store::new(&r).unwrap();
    store.append_raw::<BoulderState>("refs/boulder/boulders/x", "created", json!({"stream": "x", "depth": 0})).unwrap();
    let e = store.append_raw::<BoulderState>("refs/boulder/boulders/x", "activity", json!({"commit": "abc"})).unwrap();
    assert_eq!(e.state.iteration, 1);
    assert_eq!(e.op.lamport, 2);
    let state: serde_json::Value =
        serde_json::from_str(&repo.git_out(&["cat-file", "-p", "refs/boulder/boulders/x:state.json"])).unwrap();
    assert_eq!(state["iteration"], 1);
    let op: serde_json::Value =
        serde_json::from_str(&repo.git_out(&["cat-file", "-p", "refs/boulder/boulders/x:op.json"])).unwrap();
    assert_eq!(op["kind"], "activity");
    assert_eq!(op["v"], 1);
    assert_eq!(repo.git_out(&["rev-list", "--count", "refs/boulder/boulders/x"]), "2");
    assert_eq!(
        repo.git_out(&["log", "-1", "--format=%an <%ae>", "refs/boulder/boulders/x"]),
        "git-boulder <git-boulder@localhost>"
    );
    // The actor id is stable per repository.
    assert_eq!(Store::new(&r).unwrap().actor().unwrap(), store.actor().unwrap());
    assert_eq!(op["actor"], store.actor().unwrap().as_str());
    store.validate_chain::<BoulderState>(r.ref_id("refs/boulder/boulders/x").unwrap().unwrap()).unwrap();
    repo.assert_fsck();
}

#[test]
fn unknown_ops_are_refused_and_nothing_is_written() {
    crate::common::lib_env!();
    let repo = TestRepo::with_files(&[("a", "a\n")]);
    let r = open(&repo);
    let store = Store::new(&r).unwrap();
    let err = store.append_raw::<BoulderState>("refs/boulder/boulders/x", "explode", json!({})).unwrap_err();
    assert!(err.message.contains("explode"), "{}", err.message);
    // The typed refusal is kept as the cause.
    let cause = std::error::Error::source(&err).and_then(|c| c.downcast_ref::<OpError>());
    assert_eq!(cause, Some(&OpError::UnknownOp { what: "boulder", kind: "explode".into() }));
    assert!(repo.refs("refs/boulder/").is_empty());
}

#[test]
fn garbage_state_fails_validation_naming_the_commit() {
    crate::common::lib_env!();
    let repo = TestRepo::with_files(&[("a", "a\n")]);
    // A commit whose tree is not an op-log entry.
    repo.git(&["update-ref", "refs/boulder/boulders/bad", "HEAD"]).ok();
    let r = open(&repo);
    let store = Store::new(&r).unwrap();
    let tip = r.ref_id("refs/boulder/boulders/bad").unwrap().unwrap();
    let err = store.validate_chain::<BoulderState>(tip).unwrap_err().to_string();
    assert!(err.contains(&tip.to_string()), "{err}");
    // A read of the ref is a usage error that keeps the typed error as its cause.
    let e = store.read::<BoulderState>("refs/boulder/boulders/bad").unwrap_err();
    let cause = std::error::Error::source(&e).and_then(|c| c.downcast_ref::<ChainError>());
    assert!(matches!(cause, Some(ChainError::Files { commit, .. }) if *commit == tip), "{e}");
    // A well-formed tree whose state.json lies about its op.
    std::fs::create_dir_all(repo.tmp.path().join("g")).unwrap();
    let op = r#"{"v":1,"kind":"activity","lamport":1,"at":"2026-01-01T00:00:00Z","actor":"x","data":{"commit":"c"}}"#;
    let state = r#"{"status":"active","iteration":99}"#;
    let op_id = pipe(&repo, &["hash-object", "-w", "--stdin"], op);
    let st_id = pipe(&repo, &["hash-object", "-w", "--stdin"], state);
    let tree = pipe(&repo, &["mktree"], &format!("100644 blob {op_id}\top.json\n100644 blob {st_id}\tstate.json\n"));
    let commit = repo.git_out(&["commit-tree", &tree, "-m", "forged"]);
    let id = gix::ObjectId::from_hex(commit.as_bytes()).unwrap();
    let err = store.validate_chain::<BoulderState>(id).unwrap_err();
    assert!(matches!(err, ChainError::NotItsOpsState { commit } if commit == id), "{err}");
    let err = err.to_string();
    assert!(err.contains("does not follow"), "{err}");
}

fn pipe(repo: &TestRepo, args: &[&str], input: &str) -> String {
    use std::io::Write;
    let mut cmd = repo.command("git");
    let mut child = cmd
        .args(args)
        .current_dir(&repo.dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn many_threads_appending_to_one_ref_lose_nothing() {
    let repo = TestRepo::with_files(&[("a", "a\n")]);
    let threads = 8;
    let each = 40;
    std::thread::scope(|s| {
        for t in 0..threads {
            let dir = repo.dir.clone();
            s.spawn(move || {
                let r = Repo::open(&dir).unwrap();
                let store = Store::new(&r).unwrap();
                for i in 0..each {
                    store
                        .append_raw::<BoulderState>(
                            "refs/boulder/boulders/auth",
                            "activity",
                            json!({"commit": format!("{t}-{i}")}),
                        )
                        .unwrap();
                }
            });
        }
    });
    let state: serde_json::Value =
        serde_json::from_str(&repo.git_out(&["cat-file", "-p", "refs/boulder/boulders/auth:state.json"])).unwrap();
    assert_eq!(state["iteration"], threads * each);
    assert_eq!(repo.git_out(&["rev-list", "--count", "refs/boulder/boulders/auth"]), (threads * each).to_string());
    repo.assert_fsck();
}

/// One op for the merge property test: which replica makes it, and what it is.
#[derive(Debug, Clone)]
enum GenOp {
    Activity(u8),
    Enforced,
    Checkpoint(u8),
    Todo(u8),
    Stop,
}

fn gen_op() -> impl Strategy<Value = (usize, GenOp)> {
    (
        0usize..3,
        prop_oneof![
            (0u8..20).prop_map(GenOp::Activity),
            Just(GenOp::Enforced),
            (0u8..5).prop_map(GenOp::Checkpoint),
            (0u8..5).prop_map(GenOp::Todo),
            Just(GenOp::Stop),
        ],
    )
}

fn apply(store: &Store, refname: &str, op: &GenOp) {
    let (kind, data) = match op {
        GenOp::Activity(c) => ("activity", json!({"commit": format!("c{c}")})),
        GenOp::Enforced => ("enforced", json!({"gate": "idle", "message": "go on"})),
        GenOp::Checkpoint(n) => ("checkpoint", json!({"message": format!("cp {n}")})),
        GenOp::Todo(n) => ("todo_add", json!({"id": format!("t{n}"), "text": "x"})),
        GenOp::Stop => ("stop", json!({})),
    };
    store.append_raw::<BoulderState>(refname, kind, data).unwrap();
}

fn state_json(repo: &TestRepo, rev: &str) -> String {
    repo.git_out(&["cat-file", "-p", &format!("{rev}:state.json")])
}

/// [`merge_is_deterministic_cases`], in a process of its own (`lib_env!()`).
#[test]
fn merge_is_deterministic() {
    crate::common::lib_env!();
    merge_is_deterministic_cases();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any interleaving of ops on three replicas, merged in any order, gives identical state.json,
    /// and the iteration counts each distinct commit once.
    fn merge_is_deterministic_cases(ops in prop::collection::vec(gen_op(), 1..14), base_ops in 0usize..3) {
        let repo = TestRepo::with_files(&[("a", "a\n")]);
        let r = open(&repo);
        let store = Store::new(&r).unwrap();
        let base = "refs/boulder/boulders/base";
        store.append_raw::<BoulderState>(base, "created", json!({"stream": "s"})).unwrap();
        for i in 0..base_ops {
            store.append_raw::<BoulderState>(base, "activity", json!({"commit": format!("base{i}")})).unwrap();
        }
        let base_id = r.ref_id(base).unwrap().unwrap();
        let names = ["refs/boulder/boulders/r0", "refs/boulder/boulders/r1", "refs/boulder/boulders/r2"];
        for n in names {
            repo.git(&["update-ref", n, &base_id.to_string()]).ok();
        }
        for (replica, op) in &ops {
            apply(&store, names[*replica], op);
        }
        let tip = |n: &str| r.ref_id(n).unwrap().unwrap();
        let (a, b, c) = (tip(names[0]), tip(names[1]), tip(names[2]));
        let ab = store.merge::<BoulderState>(a, b).unwrap();
        let abc = store.merge::<BoulderState>(ab, c).unwrap();
        let cb = store.merge::<BoulderState>(c, b).unwrap();
        let cba = store.merge::<BoulderState>(cb, a).unwrap();
        let ac = store.merge::<BoulderState>(a, c).unwrap();
        let acb = store.merge::<BoulderState>(b, ac).unwrap();
        let s1 = state_json(&repo, &abc.to_string());
        prop_assert_eq!(&s1, &state_json(&repo, &cba.to_string()));
        prop_assert_eq!(&s1, &state_json(&repo, &acb.to_string()));
        // Merging the same pair twice (on two machines) writes the same commit.
        prop_assert_eq!(store.merge::<BoulderState>(b, a).unwrap(), ab);
        let distinct: std::collections::BTreeSet<u8> =
            ops.iter().filter_map(|(_, o)| if let GenOp::Activity(c) = o { Some(*c) } else { None }).collect();
        let v: serde_json::Value = serde_json::from_str(&s1).unwrap();
        prop_assert_eq!(v["iteration"].as_u64().unwrap(), (base_ops + distinct.len()) as u64);
        let merged = r.ref_id(names[0]).unwrap().unwrap();
        let _ = merged;
        store.validate_chain::<BoulderState>(abc).unwrap();
    }
}
