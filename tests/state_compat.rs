//! State written by git-boulder 0.1 reads unchanged.
//!
//! `tests/fixtures/state-0.1.bundle` holds real state made by the git-boulder of commit 44fdf5d
//! (the last one before ops and statuses were typed): `tests/fixtures/state-0.1.sh` ran
//! `git boulder demo` (plan, stream init, commits recorded by the hooks with their notes, prd
//! done, a merge with its prd sync, push and a teammate's pull), then boulder commands (create,
//! switch, a commit with a story, check enforcing after two idle hours, checkpoint, todo add and
//! done, finish), a commit recorded afterwards with `git boulder record`, a run of the loop, stream
//! stop, prd undone, stream cleanup, and two machines appending to the PRD records so that a pull
//! merged them; then it bundled main, the stream branches, `refs/boulder/*` and
//! `refs/notes/boulder`. `tests/fixtures/state-0.1/*.json` is what that binary printed in a clone
//! of the bundle (made as [`clone_fixture`] makes it) at `BOULDER_NOW=2030-01-01T00:00:00.000Z`,
//! with the clone's path written `$REPO`. To make them again: `sh tests/fixtures/state-0.1.sh
//! PATH-TO-THE-0.1-BINARY` (the outputs then change with the new commits' ids and times).
//!
//! Checked here: (a) every `op.json`, `state.json` and note of it parses into the typed model and
//! serializes back byte for byte, and every op applies to give exactly the state.json written
//! with it; (b) today's binary prints exactly what 0.1 printed.

use std::path::{Path, PathBuf};

use crate::common::*;
use git_boulder::git::notes::Note;
use git_boulder::state::op::MergeData;
use git_boulder::state::{BoulderState, Op, Payload, PrdState, State, Store, BOULDERS, NOTES_REF, PRD_REF, STREAMS};

const NOW: &str = "2030-01-01T00:00:00.000Z";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A clone of the fixture bundle on main, with its stream branches, state refs and notes.
fn clone_fixture() -> TestRepo {
    let repo = TestRepo::in_temp("repo");
    let (root, dir) = (repo.dir.parent().unwrap().to_path_buf(), repo.dir.clone());
    let bundle = fixtures().join("state-0.1.bundle");
    let bundle = bundle.to_str().unwrap();
    repo.git_in(&root, &["clone", "-q", "-b", "main", bundle, dir.to_str().unwrap()]).ok();
    repo.git(&[
        "fetch",
        "-q",
        bundle,
        "refs/boulder/*:refs/boulder/*",
        "refs/notes/*:refs/notes/*",
        "refs/heads/boulder/*:refs/heads/boulder/*",
    ])
    .ok();
    repo
}

/// The commits of an op-log, with their op.json and state.json as stored.
fn entries(repo: &TestRepo, refname: &str) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let blob = |c: &str, name: &str| repo.git(&["cat-file", "blob", &format!("{c}:{name}")]).ok().stdout.into_bytes();
    repo.git_out(&["rev-list", refname])
        .lines()
        .map(|c| (c.to_string(), blob(c, "op.json"), blob(c, "state.json")))
        .collect()
}

/// What git-boulder writes for a JSON value in an op-log commit.
fn pretty<T: serde::Serialize>(v: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).unwrap();
    out.push(b'\n');
    out
}

/// Check every commit of one op-log: its op reads into the envelope and into `S::Op` and writes
/// back identical, its state likewise, and the chain validates (each state is what its op makes
/// of its parent's). Returns the kinds met.
fn check_log<S: State>(repo: &TestRepo, refname: &str) -> Vec<String> {
    let mut kinds = Vec::new();
    for (commit, op_json, state_json) in entries(repo, refname) {
        let at = format!("{refname} {commit}");
        let op: Op = serde_json::from_slice(&op_json).unwrap_or_else(|e| panic!("{at}: op.json: {e}"));
        op.validate().unwrap_or_else(|e| panic!("{at}: {e}"));
        assert_eq!(pretty(&op), op_json, "{at}: op.json does not write back identical");
        let data = if op.is_merge() {
            let parents: Vec<String> = serde_json::from_value(op.data["parents"].clone()).unwrap();
            let parents = [&parents[0], &parents[1]].map(|p| git_boulder::git::id::parse(p).unwrap());
            let ops = op.data["ops"].as_u64().unwrap() as usize;
            MergeData { ops, parents }.data()
        } else {
            let typed = S::Op::parse(&op).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(typed.kind(), op.kind, "{at}");
            typed.data()
        };
        let again = Op { data, ..op.clone() };
        assert_eq!(pretty(&again), op_json, "{at}: the typed op does not write back identical");
        let state: S = serde_json::from_slice(&state_json).unwrap_or_else(|e| panic!("{at}: state.json: {e}"));
        state.validate().unwrap_or_else(|e| panic!("{at}: state.json: {e}"));
        assert_eq!(pretty(&state), state_json, "{at}: state.json does not write back identical");
        kinds.push(op.kind);
    }
    let r = git_boulder::git::Repo::open(&repo.dir).unwrap();
    let store = Store::new(&r).unwrap();
    let tip = r.ref_id(refname).unwrap().unwrap();
    store.validate_chain::<S>(tip).unwrap_or_else(|e| panic!("{refname}: {e}"));
    kinds
}

#[test]
fn state_written_by_0_1_reads_and_writes_back_identical() {
    let repo = clone_fixture();
    let mut kinds = std::collections::BTreeSet::new();
    let refs = repo.refs("refs/boulder/");
    for r in &refs {
        let met = if r.starts_with(STREAMS) {
            check_log::<git_boulder::state::StreamState>(&repo, r)
        } else if r.starts_with(BOULDERS) {
            check_log::<BoulderState>(&repo, r)
        } else if r == PRD_REF {
            check_log::<PrdState>(&repo, r)
        } else {
            panic!("unexpected ref {r} in the fixture");
        };
        kinds.extend(met.into_iter().map(|k| format!("{}:{k}", r.split('/').nth(2).unwrap())));
    }
    // The fixture covers the ops every command writes (not `indexed`, `reset_failures` or a
    // root boulder made by the hook: those need a git-boulder older than 0.1 or a stopped clock).
    for k in [
        "streams:initialized",
        "streams:status",
        "streams:stop_requested",
        "streams:merged",
        "streams:cleaned",
        "boulders:created",
        "boulders:activity",
        "boulders:enforced",
        "boulders:stop",
        "boulders:status",
        "boulders:checkpoint",
        "boulders:todo_add",
        "boulders:todo_done",
        "prd:done",
        "prd:undone",
        "prd:merge",
    ] {
        assert!(kinds.contains(k), "the fixture has no {k} op: {kinds:?}");
    }

    // Every note: each record reads into a Note and writes back identical.
    let notes = repo.git_out(&["notes", &format!("--ref={NOTES_REF}"), "list"]);
    let mut n = 0;
    for line in notes.lines() {
        let blob = line.split_whitespace().next().unwrap();
        let bytes = repo.git(&["cat-file", "blob", blob]).ok().stdout.into_bytes();
        let records = Note::parse(&bytes).unwrap_or_else(|e| panic!("note {blob} {e}"));
        assert!(!records.is_empty());
        let text: String = records.iter().map(Note::text).collect();
        assert_eq!(text.as_bytes(), bytes, "note {blob} does not write back identical");
        n += records.len();
    }
    assert!(n >= 6, "the fixture has {n} note records");
}

/// The command each expected output is the output of.
fn command_of(file: &str) -> Vec<String> {
    let args: Vec<&str> = match file {
        "status.json" => vec!["status", "--json"],
        "log.json" => vec!["log", "--json"],
        "list.json" => vec!["list", "--json"],
        "prd.json" => vec!["prd", "show", "--json"],
        other => {
            let name = other.strip_prefix("log-").and_then(|n| n.strip_suffix(".json")).expect("a known output");
            vec!["log", name, "--json"]
        }
    };
    args.into_iter().map(String::from).collect()
}

#[test]
fn todays_binary_prints_what_0_1_printed() {
    let repo = clone_fixture();
    let dir = fixtures().join("state-0.1");
    let mut files: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    let path = repo.dir.to_str().unwrap().to_string();
    for file in files {
        let expected = std::fs::read_to_string(dir.join(&file)).unwrap();
        assert!(expected.len() > 2, "{file} is empty");
        let args = command_of(&file);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = repo.boulder_env(&repo.dir, &args, &[("BOULDER_NOW", NOW)]).ok();
        let got = r.stdout.replace(&path, "$REPO");
        assert_eq!(got, expected, "`git boulder {}` prints otherwise than 0.1 did", args.join(" "));
    }
}
