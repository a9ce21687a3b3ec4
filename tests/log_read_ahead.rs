//! `git boulder log` of a long op-log reads ahead on several threads (commits on one, ops on
//! others taking batches in turn) and takes commits from git's commit-graph when there is one:
//! the history stays in replay order and the lines are the same, byte for byte.

use crate::common::TestRepo;
use git_boulder::git::Repo;
use git_boulder::state::{BoulderState, LogEntry, Store};

/// The commit ids of `entries`, in their order.
fn ids(entries: &[LogEntry]) -> Vec<gix::ObjectId> {
    entries.iter().map(|e| e.commit).collect()
}

/// `entries` sorted by replay key, newest first: the order `log` must print.
fn replay_order(entries: &[LogEntry]) -> Vec<gix::ObjectId> {
    let mut sorted = entries.to_vec();
    sorted.sort_by(|a, b| {
        (&b.op.lamport, &b.op.at, &b.op.actor, &b.commit).cmp(&(&a.op.lamport, &a.op.at, &a.op.actor, &a.commit))
    });
    ids(&sorted)
}

/// The commit prefixes `git boulder log` printed, in order.
fn printed(log: &str) -> Vec<String> {
    log.lines().map(|l| l.split_whitespace().next().unwrap_or_default().to_string()).collect()
}

/// The commit prefixes `log` prints for a history in replay order: by time, newest first, the
/// history's own order kept for equal times.
fn by_time(history: &[LogEntry]) -> Vec<String> {
    let mut sorted = history.to_vec();
    sorted.sort_by(|a, b| b.op.at.cmp(&a.op.at));
    sorted.iter().map(|e| e.commit.to_string()[..10].to_string()).collect()
}

#[test]
fn a_long_log_is_read_ahead_in_replay_order_with_and_without_a_commit_graph() {
    crate::common::lib_env!();
    let repo = TestRepo::without_identity();
    let r = Repo::open(&repo.dir).expect("open");
    // Diverged ops and criss-cross merges at the bottom, then a linear stretch long enough that
    // the read-ahead hands many batches to each of its readers before it runs into the merges.
    let stores = crate::common::criss_cross_op_logs(&repo, &r, 0);
    let refs = crate::common::CRISS_CROSS_REFS;
    let oid = |hex: &str| gix::ObjectId::from_hex(hex.trim().as_bytes()).unwrap();
    let append = |from: usize, to: usize| {
        for k in from..to {
            let data = serde_json::json!({"commit": format!("last-{k}")});
            stores[0].append_raw::<BoulderState>(refs[0], "activity", data).unwrap();
        }
    };
    append(0, 1500);
    let tip = oid(&repo.git_out(&["rev-parse", refs[0]]));
    let streamed = stores[0].history(tip).unwrap();
    assert!(ids(&streamed) == replay_order(&streamed), "in replay order, newest first");
    assert_eq!(streamed.len(), repo.git_out(&["rev-list", refs[0]]).lines().count(), "every commit once");
    assert!(streamed.len() > 1540 && streamed.iter().filter(|e| e.is_merge).count() >= 6);
    let text = repo.boulder(&["log", "a"]).ok().stdout;
    let json = repo.boulder(&["log", "a", "--json"]).ok().stdout;
    assert!(printed(&text) == by_time(&streamed), "log prints the history by time, newest first");

    // With git's commit-graph holding every commit: the very same lines, byte for byte.
    repo.git(&["commit-graph", "write", "--reachable"]).ok();
    assert!(repo.dir.join(".git/objects/info/commit-graph").exists());
    assert!(repo.boulder(&["log", "a"]).ok().stdout == text, "the same lines with a commit-graph");
    assert!(repo.boulder(&["log", "a", "--json"]).ok().stdout == json, "the same JSON with a commit-graph");

    // Ops added after the commit-graph was written: the new ones are read from their objects,
    // the older ones from the graph, one history in the same order.
    append(1500, 1700);
    let tip = oid(&repo.git_out(&["rev-parse", refs[0]]));
    let streamed = stores[0].history(tip).unwrap();
    assert!(ids(&streamed) == replay_order(&streamed), "in replay order, newest first");
    assert_eq!(streamed.len(), repo.git_out(&["rev-list", refs[0]]).lines().count());
    let text = repo.boulder(&["log", "a"]).ok().stdout;
    assert!(printed(&text) == by_time(&streamed), "log prints the history by time, newest first");
    // ... and the same without the graph.
    std::fs::remove_file(repo.dir.join(".git/objects/info/commit-graph")).unwrap();
    assert!(repo.boulder(&["log", "a"]).ok().stdout == text, "the same lines without it");
}

/// `git boulder gc` puts the op-log commits into git's commit-graph (a split graph that git
/// verifies), which `log` then reads: the same lines as before.
#[test]
fn gc_writes_the_op_logs_into_the_commit_graph() {
    crate::common::lib_env!();
    let repo = TestRepo::without_identity();
    let r = Repo::open(&repo.dir).expect("open");
    let store = Store::with_actor(&r, "a".to_string());
    let name = "refs/boulder/boulders/a";
    store.append_raw::<BoulderState>(name, "created", serde_json::json!({"stream": "s"})).unwrap();
    for k in 0..40 {
        store.append_raw::<BoulderState>(name, "activity", serde_json::json!({"commit": format!("c{k}")})).unwrap();
    }
    let text = repo.boulder(&["log", "a"]).ok().stdout;
    assert_eq!(text.lines().count(), 41);
    let chain = repo.dir.join(".git/objects/info/commit-graphs/commit-graph-chain");
    assert!(!chain.exists());

    assert_eq!(repo.boulder(&["gc", "--json"]).ok().json()["packed"], true);
    assert!(chain.exists(), "a commit-graph layer was written");
    repo.git(&["commit-graph", "verify"]).ok();
    // The layer written holds the op-log's tip.
    let tip = repo.git_out(&["rev-parse", name]);
    let graph = std::fs::read(
        repo.dir
            .join(".git/objects/info/commit-graphs")
            .join(format!("graph-{}.graph", std::fs::read_to_string(&chain).unwrap().lines().last().unwrap().trim())),
    )
    .unwrap();
    let raw = gix::ObjectId::from_hex(tip.trim().as_bytes()).unwrap();
    assert!(graph.windows(20).any(|w| w == raw.as_bytes()), "the tip is in the new layer");
    assert!(repo.boulder(&["log", "a"]).ok().stdout == text, "the same lines read through the graph");

    // Turned off in git's config: no new layer.
    repo.git(&["config", "gc.writeCommitGraph", "false"]).ok();
    store.append_raw::<BoulderState>(name, "activity", serde_json::json!({"commit": "later"})).unwrap();
    let before = std::fs::read_to_string(&chain).unwrap();
    assert_eq!(repo.boulder(&["gc", "--json"]).ok().json()["packed"], true);
    assert_eq!(std::fs::read_to_string(&chain).unwrap(), before);
    assert_eq!(repo.boulder(&["log", "a"]).ok().stdout.lines().count(), 42);
}
