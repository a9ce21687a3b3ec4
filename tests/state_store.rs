//! The op-log store against real repositories made with `git init`, with no git identity
//! configured anywhere: appends, reads, validation of garbage, concurrent writers (threads and
//! processes), and the deterministic merge under any interleaving and merge grouping — checked
//! with plain git (`cat-file`, `log`, `rev-list`, `fsck --strict`).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::sync::Barrier;

use crate::common::TestRepo;
use git_boulder::error::Kind;
use git_boulder::git::Repo;
use git_boulder::state::op::{replay, Op};
use git_boulder::state::store::Absorbed;
use git_boulder::state::{BoulderOp, BoulderState, Opt, PrdState, State, Store, StreamState};
use proptest::prelude::*;
use serde_json::{json, Value};

/// `git init`, no commits, no identity (for the git CLI and for this process): state writes
/// must work anyway.
fn new_repo() -> TestRepo {
    crate::common::assert_lib_env();
    TestRepo::without_identity()
}

/// What these tests read and write besides the shared helpers.
impl TestRepo {
    /// git with stdin; its trimmed stdout.
    #[track_caller]
    fn pipe(&self, args: &[&str], input: &str) -> String {
        use std::io::Write;
        let mut child =
            self.command("git").args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn git");
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "git {args:?} failed");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    fn open(&self) -> Repo {
        Repo::open(&self.dir).expect("open")
    }

    fn json(&self, rev: &str) -> Value {
        serde_json::from_str(&self.git_out(&["cat-file", "-p", rev])).unwrap()
    }

    /// A commit made with plumbing: `files` (name, mode, content) as its tree, `parent` if any.
    fn forge(&self, files: &[(&str, &str, &str)], parent: Option<&str>) -> String {
        let mut listing = String::new();
        for (name, mode, content) in files {
            let id = self.pipe(&["hash-object", "-w", "--stdin"], content);
            listing.push_str(&format!("{mode} blob {id}\t{name}\n"));
        }
        let tree = self.pipe(&["mktree"], &listing);
        let mut args =
            vec!["-c", "user.name=Forger", "-c", "user.email=f@example.com", "commit-tree", &tree, "-m", "forged"];
        if let Some(p) = parent {
            args.extend(["-p", p]);
        }
        self.git_out(&args)
    }
}

fn oid(hex: &str) -> gix::ObjectId {
    gix::ObjectId::from_hex(hex.as_bytes()).unwrap()
}

const B: &str = "refs/boulder/boulders/x";

#[test]
fn appends_are_plain_git_and_need_no_identity() {
    crate::common::lib_env!();
    let repo = new_repo();
    assert_ne!(repo.git(&["config", "user.name"]).code, 0, "no identity may be configured");
    // Ref updates would write reflogs for every ref with this setting; they still need no identity.
    repo.git_out(&["config", "core.logAllRefUpdates", "always"]);
    let r = repo.open();
    assert!(!git_boulder::git::identity::has_configured_committer(&r), "the test process must not see an identity");
    let store = Store::new(&r).unwrap();
    store.append_raw::<BoulderState>(B, "created", json!({"stream": "x", "parent": null, "depth": 0})).unwrap();
    store.append_raw::<BoulderState>(B, "enforced", json!({"gate": "idle", "message": "keep going"})).unwrap();
    let e = store.append_raw::<BoulderState>(B, "activity", json!({"commit": "abc123", "story": "US-1"})).unwrap();
    assert_eq!((e.state.iteration, e.op.lamport, e.state.lamport), (1, 3, 3));
    store.append_raw::<BoulderState>(B, "checkpoint", json!({"message": "half way"})).unwrap();
    store.append_raw::<BoulderState>(B, "todo_add", json!({"id": "t1", "text": "tests"})).unwrap();

    let state = repo.json(&format!("{B}:state.json"));
    assert_eq!(state["id"], "x", "the id is filled in from the ref");
    assert_eq!(state["stream"], "x");
    assert_eq!(state["iteration"], 1);
    assert_eq!(state["failure_count"], 0);
    assert_eq!(state["last_commit"], "abc123");
    assert_eq!(state["last_story"], "US-1");
    assert_eq!(state["last_message"], "keep going");
    assert_eq!(state["checkpoint"]["message"], "half way");
    assert_eq!(state["todos"][0]["id"], "t1");
    assert_eq!(state["lamport"], 5);
    let raw = repo.git_out(&["cat-file", "blob", &format!("{B}:state.json")]);
    assert!(raw.starts_with("{\n  \""), "pretty JSON:\n{raw}");
    let bytes = repo.git(&["cat-file", "blob", &format!("{B}:state.json")]).ok().stdout;
    assert!(bytes.ends_with("}\n"), "trailing newline");

    let op = repo.json(&format!("{B}:op.json"));
    assert_eq!(op["v"], 1);
    assert_eq!(op["kind"], "todo_add");
    assert_eq!(op["lamport"], 5);
    assert_eq!(op["actor"], store.actor().unwrap().as_str());
    assert_eq!(op["data"], json!({"id": "t1", "text": "tests"}));
    assert_eq!(repo.git_out(&["ls-tree", "--name-only", B]), "op.json\nstate.json");

    assert_eq!(repo.git_out(&["rev-list", "--count", B]), "5");
    let authors = repo.git_out(&["log", "--format=%an <%ae>|%cn <%ce>", B]);
    for line in authors.lines() {
        assert_eq!(line, "git-boulder <git-boulder@localhost>|git-boulder <git-boulder@localhost>");
    }
    assert_eq!(repo.git_out(&["log", "-1", "--format=%s", B]), "boulder: todo_add");
    assert!(repo.git_out(&["log", "-1", "--format=%b", B]).contains("\"text\":\"tests\""));
    assert!(repo.git_out(&["reflog", "show", B]).contains("boulder: todo_add"));

    // Reading: the full entry and the one-blob read agree.
    let read = store.read::<BoulderState>(B).unwrap().unwrap();
    let (tip, fast) = store.read_state::<BoulderState>(B).unwrap().unwrap();
    assert_eq!((read.commit, &read.state), (tip, &fast));
    assert_eq!(tip.to_string(), repo.git_out(&["rev-parse", B]));
    assert!(store.read::<BoulderState>("refs/boulder/boulders/none").unwrap().is_none());

    // History, newest first.
    let kinds: Vec<String> = store.log(B).unwrap().into_iter().map(|l| l.op.kind).collect();
    assert_eq!(kinds, ["todo_add", "checkpoint", "activity", "enforced", "created"]);
    assert!(store.log("refs/boulder/boulders/none").unwrap().is_empty());

    let listed = store.list("refs/boulder/").unwrap();
    assert_eq!(listed, vec![(B.to_string(), tip)]);

    store.validate_chain::<BoulderState>(tip).unwrap();
    repo.assert_fsck();
}

#[test]
fn stream_and_prd_states() {
    crate::common::lib_env!();
    let repo = new_repo();
    let r = repo.open();
    let store = Store::new(&r).unwrap();
    let s = "refs/boulder/streams/auth";
    store
        .append_raw::<StreamState>(
            s,
            "initialized",
            json!({"branch": "boulder/auth", "worktree": "/w/auth", "base": "main"}),
        )
        .unwrap();
    store.append_raw::<StreamState>(s, "status", json!({"status": "RUNNING", "reason": "started"})).unwrap();
    store.append_raw::<StreamState>(s, "stop_requested", json!({})).unwrap();
    let e = store.append_raw::<StreamState>(s, "status", json!({"status": "STOPPED", "reason": "asked"})).unwrap();
    assert!(!e.state.stop_requested);
    let state = repo.json(&format!("{s}:state.json"));
    assert_eq!(state["name"], "auth");
    assert_eq!(state["status"], "STOPPED");
    assert_eq!(state["branch"], "boulder/auth");
    assert_eq!(state["last_run"]["outcome"], "STOPPED");
    assert_eq!(state["last_run"]["actor"], store.actor().unwrap().as_str());
    let head = "0123456789abcdef0123456789abcdef01234567";
    store.append_raw::<StreamState>(s, "merged", json!({"commit": head, "strategy": "rebase"})).unwrap();
    store.append_raw::<StreamState>(s, "cleaned", json!({"worktree_removed": true, "branch_deleted": false})).unwrap();
    let state = repo.json(&format!("{s}:state.json"));
    assert_eq!((state["status"].as_str(), state["merged_commit"].as_str()), (Some("MERGED"), Some(head)));
    assert_eq!(state["worktree"], Value::Null);
    store.validate_chain::<StreamState>(r.ref_id(s).unwrap().unwrap()).unwrap();

    store.append_raw::<PrdState>("refs/boulder/prd", "done", json!({"ids": ["US-2", "US-1"]})).unwrap();
    store.append_raw::<PrdState>("refs/boulder/prd", "undone", json!({"ids": ["US-2"]})).unwrap();
    assert_eq!(repo.json("refs/boulder/prd:state.json")["done"], json!(["US-1"]));
    repo.assert_fsck();
}

#[test]
fn refused_ops_write_nothing() {
    crate::common::lib_env!();
    let repo = new_repo();
    let r = repo.open();
    let store = Store::new(&r).unwrap();
    for err in [
        store.append_raw::<BoulderState>(B, "explode", json!({})).unwrap_err(),
        store.append_raw::<StreamState>("refs/boulder/streams/s", "explode", json!({})).unwrap_err(),
        store.append_raw::<PrdState>("refs/boulder/prd", "explode", json!({})).unwrap_err(),
    ] {
        assert!(err.message.contains("explode"), "{}", err.message);
        assert_eq!(err.kind, Kind::Usage);
    }
    assert_eq!(repo.git_out(&["for-each-ref", "refs/boulder/"]), "");
    let first = store.append_raw::<BoulderState>(B, "created", json!({"stream": "x"})).unwrap();
    for (kind, data) in [
        ("activity", json!({"story": "no commit"})),
        ("status", json!({"status": "sleeping"})),
        ("merge", json!({})),
        ("Bad Kind", json!({})),
        ("checkpoint", json!(["not", "an", "object"])),
    ] {
        let err = store.append_raw::<BoulderState>(B, kind, data).unwrap_err();
        assert_eq!(err.kind, Kind::Usage, "{kind}: {}", err.message);
    }
    assert_eq!(r.ref_id(B).unwrap(), Some(first.commit), "the ref did not move");
    assert!(store.append_raw::<BoulderState>("refs/boulder/boulders/bad..name", "created", json!({})).is_err());
}

#[test]
fn append_if_decides_on_the_fresh_state() {
    crate::common::lib_env!();
    let repo = new_repo();
    let barrier = Barrier::new(8);
    let created = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let r = repo.open();
                let store = Store::new(&r).unwrap();
                barrier.wait();
                let e = store
                    .append_if::<BoulderState>(B, |cur| {
                        Ok(match cur {
                            None => Some(BoulderOp::Created {
                                id: Opt::Absent,
                                stream: Opt::Set("x".into()),
                                parent: Opt::Absent,
                                depth: Opt::Absent,
                            }),
                            Some(_) => None,
                        })
                    })
                    .unwrap();
                if e.is_some() {
                    created.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            });
        }
    });
    assert_eq!(created.into_inner(), 1, "exactly one writer creates it");
    assert_eq!(repo.git_out(&["rev-list", "--count", B]), "1");
}

#[test]
fn eight_threads_times_fifty_appends_lose_nothing() {
    crate::common::lib_env!();
    let repo = new_repo();
    let (threads, each) = (8, 50);
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (dir, barrier) = (repo.dir.clone(), &barrier);
            s.spawn(move || {
                // gix::Repository is not Sync: one Repo per thread.
                let r = Repo::open(&dir).unwrap();
                let store = Store::new(&r).unwrap();
                barrier.wait();
                for i in 0..each {
                    store
                        .append_raw::<BoulderState>(B, "activity", json!({"commit": format!("{:040x}", t * 1000 + i)}))
                        .unwrap();
                }
            });
        }
    });
    let total = threads * each;
    assert_eq!(repo.json(&format!("{B}:state.json"))["iteration"], total);
    assert_eq!(repo.git_out(&["rev-list", "--count", B]), total.to_string());
    assert_eq!(repo.git_out(&["rev-list", "--merges", "--count", B]), "0");
    let r = repo.open();
    let store = Store::new(&r).unwrap();
    let clocks: BTreeSet<u64> = store.log(B).unwrap().iter().map(|l| l.op.lamport).collect();
    assert_eq!(clocks, (1..=total as u64).collect::<BTreeSet<_>>());
    store.validate_chain::<BoulderState>(r.ref_id(B).unwrap().unwrap()).unwrap();
    repo.assert_fsck();
}

/// The body of one writer process of [`four_processes_append_to_one_ref`], which runs it (ignored
/// otherwise); run any other way it fails, never passes having done nothing.
#[test]
#[ignore = "a writer process started by four_processes_append_to_one_ref"]
fn worker_process() {
    let (Ok(dir), Ok(n)) = (std::env::var("STATE_STORE_DIR"), std::env::var("STATE_STORE_WORKER")) else {
        panic!("run by four_processes_append_to_one_ref only (STATE_STORE_DIR and STATE_STORE_WORKER unset)")
    };
    let r = Repo::open(Path::new(&dir)).unwrap();
    let store = Store::new(&r).unwrap();
    for i in 0..50 {
        store.append_raw::<BoulderState>(B, "activity", json!({"commit": format!("p{n}-{i}")})).unwrap();
    }
}

#[test]
fn four_processes_append_to_one_ref() {
    crate::common::lib_env!();
    let repo = new_repo();
    let exe = std::env::current_exe().unwrap();
    // The repository has no actor file yet: the four processes also race to make it.
    let children: Vec<_> = (0..4)
        .map(|n| {
            repo.command(&exe)
                .args(["state_store::worker_process", "--exact", "--ignored", "--test-threads", "1", "--nocapture"])
                .env("STATE_STORE_DIR", &repo.dir)
                .env("STATE_STORE_WORKER", n.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "worker failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(repo.json(&format!("{B}:state.json"))["iteration"], 200);
    assert_eq!(repo.git_out(&["rev-list", "--count", B]), "200");
    let actor = std::fs::read_to_string(repo.dir.join(".git/boulder/actor")).unwrap();
    let actors: BTreeSet<String> = repo
        .git_out(&["log", "--format=%H", B])
        .lines()
        .map(|c| repo.json(&format!("{c}:op.json"))["actor"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(actors, BTreeSet::from([actor.trim().to_string()]), "every process agreed on one actor id");
    repo.assert_fsck();
}

#[test]
fn actor_id_is_made_once_and_can_be_configured() {
    crate::common::lib_env!();
    let repo = new_repo();
    let barrier = Barrier::new(16);
    let ids: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..16)
            .map(|_| {
                s.spawn(|| {
                    let r = repo.open();
                    barrier.wait();
                    Store::new(&r).unwrap().actor().unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first = ids[0].clone();
    assert!(ids.iter().all(|i| *i == first), "{ids:?}");
    assert_eq!(first.len(), 12);
    assert!(first.chars().all(|c| c.is_ascii_hexdigit()));
    let file = std::fs::read_to_string(repo.dir.join(".git/boulder/actor")).unwrap();
    assert_eq!(file, format!("{first}\n"));
    let leftovers: Vec<_> =
        std::fs::read_dir(repo.dir.join(".git/boulder")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("actor")], "no temp files left");
    assert_eq!(Store::new(&repo.open()).unwrap().actor().unwrap(), first, "stable");

    repo.git_out(&["config", "boulder.actor", "laptop"]);
    assert_eq!(Store::new(&repo.open()).unwrap().actor().unwrap(), "laptop");
    repo.git_out(&["config", "boulder.actor", "merge"]);
    assert_eq!(Store::new(&repo.open()).unwrap().actor().err().unwrap().kind, Kind::Usage);
}

#[test]
fn garbage_fails_validation_naming_the_commit() {
    crate::common::lib_env!();
    let repo = new_repo();
    let r = repo.open();
    let store = Store::new(&r).unwrap();
    let good = store.append_raw::<BoulderState>(B, "created", json!({"stream": "x"})).unwrap();
    let parent = good.commit.to_string();
    let good_op = repo.git_out(&["cat-file", "blob", &format!("{B}:op.json")]);
    let good_state = repo.git_out(&["cat-file", "blob", &format!("{B}:state.json")]);
    let op2 = r#"{"v":1,"kind":"activity","lamport":2,"at":"2026-01-01T00:00:00Z","actor":"x","data":{"commit":"c1"}}"#;
    let op_v7 = op2.replace("\"v\":1", "\"v\":7");
    let op_clock9 = op2.replace("\"lamport\":2", "\"lamport\":9");
    // (what, files of the forged commit, on top of the good one, what the error must say)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str, &'a str)>, bool, &'a str);
    let cases: Vec<Case> = vec![
        ("not JSON", vec![("op.json", "100644", op2), ("state.json", "100644", "{not json")], true, "state.json"),
        (
            "unknown field",
            vec![("op.json", "100644", op2), ("state.json", "100644", r#"{"status":"active","iteration":1,"evil":1}"#)],
            true,
            "unknown field",
        ),
        (
            "lying state",
            vec![("op.json", "100644", op2), ("state.json", "100644", r#"{"status":"active","iteration":99}"#)],
            true,
            "does not follow",
        ),
        ("bad op", vec![("op.json", "100644", &op_v7), ("state.json", "100644", &good_state)], true, "version"),
        (
            "extra file",
            vec![("op.json", "100644", &good_op), ("state.json", "100644", &good_state), ("x", "100644", "")],
            false,
            "exactly",
        ),
        (
            "executable",
            vec![("op.json", "100755", &good_op), ("state.json", "100644", &good_state)],
            false,
            "regular file",
        ),
        ("bad clock", vec![("op.json", "100644", &op_clock9), ("state.json", "100644", &good_state)], true, "clock"),
    ];
    for (what, files, on_parent, needle) in cases {
        let bad = repo.forge(&files, on_parent.then_some(parent.as_str()));
        let err = store.validate_chain::<BoulderState>(oid(&bad)).unwrap_err().to_string();
        assert!(err.contains(&bad), "{what}: {err}");
        assert!(err.contains(needle), "{what}: {err}");
        // A read of a ref pointing at it fails with a usage error that points at doctor.
        repo.git_out(&["update-ref", "refs/boulder/boulders/bad", &bad]);
        if let Err(e) = store.read::<BoulderState>("refs/boulder/boulders/bad") {
            assert_eq!(e.kind, Kind::Usage, "{what}");
            assert!(e.hints.iter().any(|h| h.contains("doctor")), "{what}");
        }
        // And nothing is appended on top of garbage.
        if !matches!(what, "lying state" | "bad clock") {
            assert!(
                store.append_raw::<BoulderState>("refs/boulder/boulders/bad", "stop", json!({})).is_err(),
                "{what}"
            );
        }
    }
    // A good chain under a garbage commit is still garbage: the walk reaches it.
    let bad = repo.forge(&[("op.json", "100644", op2), ("state.json", "100644", "[]")], Some(&parent));
    let child_op =
        op2.replace("\"lamport\":2", "\"lamport\":3").replace("activity", "stop").replace(r#"{"commit":"c1"}"#, "{}");
    let child = repo.forge(&[("op.json", "100644", &child_op), ("state.json", "100644", &good_state)], Some(&bad));
    let err = store.validate_chain::<BoulderState>(oid(&child)).unwrap_err().to_string();
    assert!(err.contains(&bad) || err.contains(&child), "{err}");
}

/// Three replicas of one boulder in one repository: refs r0, r1, r2 from a common base.
fn replicas(repo: &TestRepo, store: &Store) -> [String; 3] {
    let base = "refs/boulder/boulders/base";
    store.append_raw::<BoulderState>(base, "created", json!({"stream": "s"})).unwrap();
    store.append_raw::<BoulderState>(base, "activity", json!({"commit": "b0"})).unwrap();
    let id = repo.git_out(&["rev-parse", base]);
    let names = ["r0", "r1", "r2"].map(|n| format!("refs/boulder/boulders/{n}"));
    for n in &names {
        repo.git_out(&["update-ref", n, &id]);
    }
    names
}

#[test]
fn merges_are_deterministic_commits() {
    crate::common::lib_env!();
    let repo = new_repo();
    let r = repo.open();
    let store = Store::new(&r).unwrap();
    let [a, b, _] = replicas(&repo, &store);
    let base = r.ref_id(&a).unwrap().unwrap();
    store.append_raw::<BoulderState>(&a, "activity", json!({"commit": "c1"})).unwrap();
    store.append_raw::<BoulderState>(&a, "activity", json!({"commit": "c2"})).unwrap();
    store.append_raw::<BoulderState>(&b, "activity", json!({"commit": "c2"})).unwrap();
    store.append_raw::<BoulderState>(&b, "enforced", json!({"gate": "idle", "message": "m"})).unwrap();
    let (ta, tb) = (r.ref_id(&a).unwrap().unwrap(), r.ref_id(&b).unwrap().unwrap());
    // Ancestors: the descendant wins, nothing is written.
    assert_eq!(store.merge::<BoulderState>(base, ta).unwrap(), ta);
    assert_eq!(store.merge::<BoulderState>(ta, base).unwrap(), ta);
    assert_eq!(store.merge::<BoulderState>(ta, ta).unwrap(), ta);
    let m = store.merge::<BoulderState>(ta, tb).unwrap();
    assert_eq!(store.merge::<BoulderState>(tb, ta).unwrap(), m, "the same pair gives the same commit");
    let m = m.to_string();
    let mut parents = [ta.to_string(), tb.to_string()];
    parents.sort();
    assert_eq!(repo.git_out(&["rev-list", "--parents", "-n1", &m]), format!("{m} {} {}", parents[0], parents[1]));
    let op = repo.json(&format!("{m}:op.json"));
    assert_eq!((op["kind"].as_str(), op["actor"].as_str()), (Some("merge"), Some("merge")));
    assert_eq!(op["data"], json!({"parents": parents, "ops": 4}));
    let state = repo.json(&format!("{m}:state.json"));
    assert_eq!(state["iteration"], 3, "b0, c1 and c2 (seen twice, counted once)");
    assert_eq!(state["lamport"], 4, "the highest op clock");
    assert_eq!(op["lamport"], 5, "one above the highest op clock");
    assert_eq!(repo.git_out(&["log", "-1", "--format=%an|%s", &m]), "git-boulder|boulder: merge");
    store.validate_chain::<BoulderState>(oid(&m)).unwrap();
    // Appends continue above the merge's clock.
    repo.git_out(&["update-ref", &a, &m]);
    let e = store.append_raw::<BoulderState>(&a, "stop", json!({})).unwrap();
    assert_eq!(e.op.lamport, 6);
    let log = store.log(&a).unwrap();
    assert_eq!((log[0].op.kind.as_str(), log[1].is_merge), ("stop", true));

    // A forged merge of the same parents with another state is caught.
    let forged_state = repo
        .git_out(&["cat-file", "blob", &format!("{m}:state.json")])
        .replace("\"iteration\": 3", "\"iteration\": 30");
    let forged_op = repo.git_out(&["cat-file", "blob", &format!("{m}:op.json")]);
    let listing = [("op.json", "100644", forged_op.as_str()), ("state.json", "100644", forged_state.as_str())];
    let tree_only = repo.forge(&listing, Some(&parents[0]));
    let tree = repo.git_out(&["rev-parse", &format!("{tree_only}^{{tree}}")]);
    let forged = repo.git_out(&[
        "-c",
        "user.name=F",
        "-c",
        "user.email=f@x",
        "commit-tree",
        &tree,
        "-p",
        &parents[0],
        "-p",
        &parents[1],
        "-m",
        "boulder: merge",
    ]);
    let err = store.validate_chain::<BoulderState>(oid(&forged)).unwrap_err().to_string();
    assert!(err.contains(&forged) && err.contains("deterministic merge"), "{err}");
    repo.assert_fsck();
}

#[test]
fn merges_of_unrelated_histories_replay_everything() {
    crate::common::lib_env!();
    let repo = new_repo();
    let r = repo.open();
    let store = Store::new(&r).unwrap();
    let (a, b) = ("refs/boulder/boulders/a", "refs/boulder/boulders/b");
    store.append_raw::<BoulderState>(a, "created", json!({"stream": "s"})).unwrap();
    store.append_raw::<BoulderState>(a, "activity", json!({"commit": "c1"})).unwrap();
    store.append_raw::<BoulderState>(b, "created", json!({"stream": "s"})).unwrap();
    store.append_raw::<BoulderState>(b, "activity", json!({"commit": "c1"})).unwrap();
    store.append_raw::<BoulderState>(b, "activity", json!({"commit": "c2"})).unwrap();
    let (ta, tb) = (r.ref_id(a).unwrap().unwrap(), r.ref_id(b).unwrap().unwrap());
    let m = store.merge::<BoulderState>(ta, tb).unwrap();
    assert_eq!(m, store.merge::<BoulderState>(tb, ta).unwrap());
    assert_eq!(repo.json(&format!("{m}:state.json"))["iteration"], 2);
    store.validate_chain::<BoulderState>(m).unwrap();
}

#[test]
fn absorb_creates_fast_forwards_merges_and_refuses_garbage() {
    crate::common::lib_env!();
    let repo = new_repo();
    let r = repo.open();
    let store = Store::new(&r).unwrap();
    let [a, b, _] = replicas(&repo, &store);
    let fetched = "refs/boulder/boulders/fetched";
    let tb = r.ref_id(&b).unwrap().unwrap();
    assert_eq!(store.absorb::<BoulderState>(fetched, tb).unwrap(), Absorbed::Created);
    assert_eq!(store.absorb::<BoulderState>(fetched, tb).unwrap(), Absorbed::UpToDate);
    store.append_raw::<BoulderState>(&b, "activity", json!({"commit": "c1"})).unwrap();
    let tb = r.ref_id(&b).unwrap().unwrap();
    assert_eq!(store.absorb::<BoulderState>(&a, tb).unwrap(), Absorbed::FastForward);
    assert_eq!(r.ref_id(&a).unwrap(), Some(tb));
    store.append_raw::<BoulderState>(&a, "activity", json!({"commit": "c2"})).unwrap();
    store.append_raw::<BoulderState>(&b, "activity", json!({"commit": "c3"})).unwrap();
    let tb = r.ref_id(&b).unwrap().unwrap();
    assert_eq!(store.absorb::<BoulderState>(&a, tb).unwrap(), Absorbed::Merged);
    assert_eq!(repo.json(&format!("{a}:state.json"))["iteration"], 4);
    assert_eq!(store.absorb::<BoulderState>(&a, tb).unwrap(), Absorbed::UpToDate);
    // Garbage on top of what we have is refused, and the ref stays.
    let before = r.ref_id(&a).unwrap();
    let bad = repo.forge(&[("op.json", "100644", "{}"), ("state.json", "100644", "{}")], Some(&tb.to_string()));
    let err = store.absorb::<BoulderState>(&a, oid(&bad)).unwrap_err();
    assert_eq!(err.kind, Kind::Refused);
    assert!(err.message.contains(&bad), "{}", err.message);
    assert_eq!(r.ref_id(&a).unwrap(), before);
    repo.assert_fsck();
}

/// One step of the replica program: an op on a replica, or a replica pulling another.
#[derive(Debug, Clone)]
enum Step {
    Op(usize, u8, u8),
    Pull(usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..3, 0u8..7, 0u8..10).prop_map(|(r, k, a)| Step::Op(r, k, a)),
        1 => (0usize..3, 0usize..3).prop_map(|(a, b)| Step::Pull(a, b)),
    ]
}

fn op_of(kind: u8, arg: u8) -> (&'static str, Value) {
    match kind {
        0..=2 => ("activity", json!({"commit": format!("c{arg}"), "story": format!("S{}", arg % 3)})),
        3 => ("enforced", json!({"gate": "idle", "message": format!("m{arg}")})),
        4 => ("checkpoint", json!({"message": format!("cp{arg}")})),
        5 => ("todo_add", json!({"id": format!("t{}", arg % 3), "text": format!("x{arg}")})),
        _ => ("stop", json!({})),
    }
}

/// The reference model: every op reachable from `tip`, replayed from nothing in the total order.
fn model(store: &Store, tip: gix::ObjectId) -> BoulderState {
    let ops: Vec<(Op, gix::ObjectId)> =
        store.history(tip).unwrap().into_iter().filter(|l| !l.is_merge).map(|l| (l.op, l.commit)).collect();
    let top = ops.iter().map(|(o, _)| o.lamport).max().unwrap();
    let mut s = replay(BoulderState::default(), ops).unwrap();
    s.set_lamport(top);
    s
}

/// [`merge_is_deterministic_under_any_grouping_cases`], in a process of its own (`lib_env!()`).
#[test]
fn merge_is_deterministic_under_any_grouping() {
    crate::common::lib_env!();
    merge_is_deterministic_under_any_grouping_cases();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any interleaving of ops and pulls (including criss-cross merges) on three replicas, merged
    /// at the end in any order and grouping, gives byte-identical state.json, equal to replaying
    /// every op in the total order; the iteration counts each distinct activity commit once.
    fn merge_is_deterministic_under_any_grouping_cases(steps in prop::collection::vec(step(), 1..24)) {
        let repo = new_repo();
        let r = repo.open();
        let base_store = Store::new(&r).unwrap();
        let names = replicas(&repo, &base_store);
        let stores: Vec<Store> = (0..3).map(|i| Store::with_actor(&r, format!("actor{i}"))).collect();
        let mut commits = BTreeSet::from(["b0".to_string()]);
        for s in &steps {
            match s {
                Step::Op(i, k, a) => {
                    let (kind, data) = op_of(*k, *a);
                    if kind == "activity" {
                        commits.insert(data["commit"].as_str().unwrap().to_string());
                    }
                    stores[*i].append_raw::<BoulderState>(&names[*i], kind, data).unwrap();
                }
                Step::Pull(i, j) => {
                    let theirs = r.ref_id(&names[*j]).unwrap().unwrap();
                    stores[*i].absorb::<BoulderState>(&names[*i], theirs).unwrap();
                }
            }
        }
        let tip = |i: usize| r.ref_id(&names[i]).unwrap().unwrap();
        let (a, b, c) = (tip(0), tip(1), tip(2));
        let m = |x, y| base_store.merge::<BoulderState>(x, y).unwrap();
        let results = [
            m(m(a, b), c),
            m(c, m(b, a)),
            m(m(a, c), b),
            m(m(c, b), m(a, c)),
            m(m(b, c), m(m(a, b), c)),
        ];
        let text = |id: gix::ObjectId| repo.git_out(&["cat-file", "blob", &format!("{id}:state.json")]);
        let first = text(results[0]);
        for id in &results[1..] {
            prop_assert_eq!(&first, &text(*id));
        }
        for id in &results {
            base_store.validate_chain::<BoulderState>(*id).unwrap();
        }
        let state: BoulderState = serde_json::from_str(&first).unwrap();
        prop_assert_eq!(state.iteration, commits.len() as u64);
        // Equal to the model: every op replayed in the total order.
        prop_assert_eq!(&state, &model(&base_store, results[0]));
        // Each replica's own tip also agrees with the model.
        for name in &names {
            let own = base_store.read::<BoulderState>(name).unwrap().unwrap();
            prop_assert_eq!(&own.state, &model(&base_store, own.commit));
        }
    }
}

/// Regression: op-log commits share their second, and gix's merge base then reported a
/// redundant base, so merging a tip into a merge that already contains it made a second merge.
#[test]
fn merging_what_a_merge_already_holds_changes_nothing() {
    crate::common::lib_env!();
    let repo = new_repo();
    let r = repo.open();
    let store = Store::new(&r).unwrap();
    let names = replicas(&repo, &store);
    let stores: Vec<Store> = (0..3).map(|i| Store::with_actor(&r, format!("actor{i}"))).collect();
    stores[0].append_raw::<BoulderState>(&names[0], "enforced", json!({"gate": "idle", "message": "m7"})).unwrap();
    stores[1].append_raw::<BoulderState>(&names[1], "enforced", json!({"gate": "idle", "message": "m3"})).unwrap();
    stores[2].append_raw::<BoulderState>(&names[2], "activity", json!({"commit": "c7"})).unwrap();
    let b = r.ref_id(&names[1]).unwrap().unwrap();
    assert_eq!(stores[2].absorb::<BoulderState>(&names[2], b).unwrap(), Absorbed::Merged);
    stores[2].append_raw::<BoulderState>(&names[2], "stop", json!({})).unwrap();
    let (a, c) = (r.ref_id(&names[0]).unwrap().unwrap(), r.ref_id(&names[2]).unwrap().unwrap());
    assert_eq!(store.merge::<BoulderState>(b, c).unwrap(), c);
    let ab = store.merge::<BoulderState>(a, b).unwrap();
    let q = store.merge::<BoulderState>(ab, c).unwrap();
    assert_eq!(store.merge::<BoulderState>(c, q).unwrap(), q);
    assert_eq!(store.merge::<BoulderState>(q, c).unwrap(), q);
    assert_eq!(store.merge::<BoulderState>(q, b).unwrap(), q);
    store.validate_chain::<BoulderState>(q).unwrap();
    assert_eq!(repo.git_out(&["rev-list", "--merges", "--count", &q.to_string()]), "3");
}
