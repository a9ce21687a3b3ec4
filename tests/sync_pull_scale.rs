//! A pull of a long fetched op-log: every new op is replayed in memory from where the chain
//! starts and each state compared by its blob id (the stored `state.json` is read back only when
//! its bytes are not the ones an append writes) — and a forged state or merge anywhere in the
//! chain is still refused, naming the commit, with the local state unchanged.

use std::io::Write;
use std::process::Stdio;

use crate::common::{Remote, TestRepo};

/// Ops in the long chains here: more than the validation checks before it reads ahead on a
/// second thread.
const LONG: u64 = 1_200;

/// How a test spoils one op of a chain it writes.
#[derive(Clone, Copy, PartialEq)]
enum Spoil {
    /// Every state as an append writes it.
    None,
    /// This op's state records a story its op did not (the ops after it follow from the lie).
    Lie(u64),
    /// This op's state holds a field no state has.
    Unknown(u64),
    /// Every state with the same value in other bytes (one line, as another tool may write it).
    OtherBytes,
    /// This op's tree holds a third file.
    ExtraFile(u64),
}

/// RFC 3339 time of op `i` (one second apart, within one day).
fn at_of(i: u64) -> String {
    format!("2026-01-02T{:02}:{:02}:{:02}Z", i / 3600, i / 60 % 60, i % 60)
}

/// The stories recorded after op `i` of a chain of `done` ops, op `i` recording US-(i mod 50).
fn done_after(i: u64) -> Vec<String> {
    let mut done: Vec<String> = (1..=i.min(50)).map(|k| format!("US-{:03}", k % 50)).collect();
    done.sort();
    done
}

/// `state.json` of the completion records exactly as git-boulder writes it (pretty JSON and a
/// newline), or in one line.
fn state_json(done: &[String], at: &str, lamport: u64, pretty: bool, extra: &str) -> String {
    if pretty {
        let items: Vec<String> = done.iter().map(|d| format!("    \"{d}\"")).collect();
        format!(
            "{{\n  \"done\": [\n{}\n  ],\n  \"updated_at\": \"{at}\",\n  \"lamport\": {lamport}{extra}\n}}\n",
            items.join(",\n")
        )
    } else {
        let items: Vec<String> = done.iter().map(|d| format!("\"{d}\"")).collect();
        format!("{{\"done\":[{}],\"updated_at\":\"{at}\",\"lamport\":{lamport}{extra}}}", items.join(","))
    }
}

/// Write `done` ops `from..=to` by `actor` onto `reference` of `repo` with `git fast-import`,
/// on top of `parent` (a commit) when given.
fn write_ops(repo: &TestRepo, reference: &str, from: u64, to: u64, actor: &str, parent: Option<&str>, spoil: Spoil) {
    let mut stream = Vec::new();
    let mut lied = false;
    for i in from..=to {
        let at = at_of(i);
        let story = format!("US-{:03}", i % 50);
        let op = format!(
            "{{\"v\":1,\"kind\":\"done\",\"lamport\":{i},\"at\":\"{at}\",\"actor\":\"{actor}\",\"data\":{{\"ids\":[\"{story}\"]}}}}\n"
        );
        let mut done = done_after(i);
        lied |= spoil == Spoil::Lie(i);
        if lied && !done.contains(&"US-999".to_string()) {
            done.push("US-999".into());
        }
        let extra = if spoil == Spoil::Unknown(i) { ", \"evil\": 1" } else { "" };
        let state = state_json(&done, &at, i, spoil != Spoil::OtherBytes, extra);
        let msg = format!("boulder: done\n\n{{\"ids\":[\"{story}\"]}}\n");
        writeln!(stream, "commit {reference}").unwrap();
        writeln!(stream, "committer git-boulder <git-boulder@localhost> {} +0000", 1_767_312_000 + i).unwrap();
        write!(stream, "data {}\n{msg}", msg.len()).unwrap();
        if i == from {
            if let Some(p) = parent {
                writeln!(stream, "from {p}").unwrap();
            }
        }
        stream.extend_from_slice(b"deleteall\n");
        write!(stream, "M 100644 inline op.json\ndata {}\n{op}\n", op.len()).unwrap();
        write!(stream, "M 100644 inline state.json\ndata {}\n{state}\n", state.len()).unwrap();
        if spoil == Spoil::ExtraFile(i) {
            stream.extend_from_slice(b"M 100644 inline notes.txt\ndata 3\nhi\n\n");
        }
    }
    stream.extend_from_slice(b"done\n");
    repo.fast_import(&stream);
}

/// The op of the completion records with this clock on the chain of `tip`.
fn op_commit(repo: &TestRepo, tip: &str, lamport: u64) -> String {
    let back = repo.git_out(&["rev-list", "--count", tip]).parse::<u64>().unwrap() - lamport;
    repo.git_out(&["rev-parse", &format!("{tip}~{back}")])
}

/// `git boulder pull --json` with tracing on; the outcome of `refs/boulder/prd` and stderr.
fn pull_prd(repo: &TestRepo, code: i32) -> (serde_json::Value, String) {
    let r = repo.boulder_env(&repo.dir, &["pull", "--json"], &[("BOULDER_TRACE", "1")]).code(code);
    let json = r.json();
    let prd = json["refs"].as_array().unwrap().iter().find(|r| r["name"] == "refs/boulder/prd").cloned();
    (prd.unwrap_or_else(|| panic!("{json}")), r.stderr)
}

#[test]
fn a_long_fetched_chain_is_replayed_without_reading_its_states_back() {
    let remote = Remote::new(&[("README.md", "hello\n")]);
    let far = remote.machine("far");
    write_ops(&far, "refs/boulder/prd", 1, LONG, "far", None, Spoil::None);
    far.git(&["push", "-q", "origin", "refs/boulder/prd"]).ok();
    let tip = far.git_out(&["rev-parse", "refs/boulder/prd"]);

    let near = remote.machine("near");
    let (prd, trace) = pull_prd(&near, 0);
    assert_eq!(prd["result"], "created", "{prd}");
    assert_eq!(near.git_out(&["rev-parse", "refs/boulder/prd"]), tip);
    // Every op checked, no state read back: the replayed states hash to the stored blobs.
    assert!(trace.contains(&format!("validate: {LONG} new commits, 0 state.json read back")), "{trace}");

    // States of the same value in other bytes are read back, compared as values, and taken.
    write_ops(&far, "refs/boulder/prd", LONG + 1, LONG + 3, "far", Some(&tip), Spoil::OtherBytes);
    far.git(&["push", "-q", "origin", "refs/boulder/prd"]).ok();
    let (prd, trace) = pull_prd(&near, 0);
    assert_eq!(prd["result"], "fast_forward", "{prd}");
    assert!(trace.contains("validate: 3 new commits, 3 state.json read back"), "{trace}");
    assert_eq!(near.git_out(&["rev-parse", "refs/boulder/prd"]), far.git_out(&["rev-parse", "refs/boulder/prd"]));
    near.assert_fsck();
}

#[test]
fn a_forged_state_in_the_middle_of_a_long_fetched_chain_is_refused() {
    let cases = [
        (Spoil::Lie(700), "does not follow"),
        (Spoil::Unknown(700), "unknown field"),
        (Spoil::ExtraFile(700), "exactly op.json and state.json"),
    ];
    for (spoil, says) in cases {
        let remote = Remote::new(&[("README.md", "hello\n")]);
        let far = remote.machine("far");
        write_ops(&far, "refs/boulder/prd", 1, LONG, "far", None, spoil);
        far.git(&["push", "-q", "origin", "refs/boulder/prd"]).ok();
        let bad = op_commit(&far, "refs/boulder/prd", 700);

        let near = remote.machine("near");
        let (prd, _) = pull_prd(&near, 1);
        assert_eq!(prd["result"], "refused", "{prd}");
        let why = prd["why"].as_str().unwrap_or_default();
        assert!(why.contains(&format!("commit {bad}")) && why.contains(says), "{prd}");
        assert!(near.git(&["rev-parse", "-q", "--verify", "refs/boulder/prd"]).code == 1, "nothing was taken");
    }
}

#[test]
fn a_merge_in_a_long_fetched_chain_is_checked_forged_or_real() {
    let remote = Remote::new(&[("README.md", "hello\n")]);
    let far = remote.machine("far");
    write_ops(&far, "refs/boulder/prd", 1, LONG, "far", None, Spoil::None);
    far.git(&["push", "-q", "origin", "refs/boulder/prd"]).ok();
    let far_tip = far.git_out(&["rev-parse", "refs/boulder/prd"]);

    // `mid` branches off ten ops before far's tip, then pulls: its pull writes the real merge.
    let mid = remote.machine("mid");
    mid.git(&["fetch", "-q", "origin", "refs/boulder/prd:refs/boulder/prd"]).ok();
    let base = op_commit(&mid, "refs/boulder/prd", LONG - 10);
    mid.git(&["update-ref", "refs/boulder/prd", &base]).ok();
    write_ops(&mid, "refs/boulder/prd", LONG - 9, LONG - 7, "mid", Some(&base), Spoil::None);
    let side = mid.git_out(&["rev-parse", "refs/boulder/prd"]);
    let (prd, trace) = pull_prd(&mid, 0);
    assert_eq!(prd["result"], "merged", "{prd}");
    // Only far's ten ops above the common ancestor are new here: what is below it was checked
    // when mid took it.
    assert!(trace.contains("validate: 10 new commits,"), "{trace}");
    let merge = mid.git_out(&["rev-parse", "refs/boulder/prd"]);
    assert_eq!(mid.git_out(&["rev-list", "--parents", "-n1", &merge]).split(' ').count(), 3, "a merge commit");

    // A merge of the same two sides whose state is not the deterministic merge.
    let listing = mid.git_out(&["ls-tree", &merge]);
    let state = mid.git_out(&["cat-file", "blob", &format!("{merge}:state.json")]);
    let forged_state = state.replacen("\"US-", "\"US-999\",\n    \"US-", 1) + "\n";
    let path = mid.tmp.path().join("forged-state.json");
    std::fs::write(&path, forged_state).unwrap();
    let blob = mid.git_out(&["hash-object", "-w", path.to_str().unwrap()]);
    let old_blob = mid.git_out(&["rev-parse", &format!("{merge}:state.json")]);
    let mut mktree = mid.command("git").arg("mktree").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    mktree.stdin.take().unwrap().write_all(listing.replace(&old_blob, &blob).as_bytes()).unwrap();
    let tree = String::from_utf8(mktree.wait_with_output().unwrap().stdout).unwrap().trim().to_string();
    let message = mid.git_out(&["log", "-1", "--format=%B", &merge]);
    let forged = mid.git_out(&["commit-tree", &tree, "-p", &far_tip, "-p", &side, "-m", &message]);

    // A fresh clone takes the real merge and the whole chain under it.
    mid.git(&["push", "-q", "origin", "refs/boulder/prd"]).ok();
    let near = remote.machine("near");
    let (prd, trace) = pull_prd(&near, 0);
    assert_eq!(prd["result"], "created", "{prd}");
    assert_eq!(near.git_out(&["rev-parse", "refs/boulder/prd"]), merge);
    assert!(trace.contains(&format!("validate: {} new commits", LONG + 4)), "{trace}");

    // Another fresh clone is offered the forged merge instead: refused by name.
    mid.git(&["push", "-q", "-f", "origin", &format!("{forged}:refs/boulder/prd")]).ok();
    let other = remote.machine("other");
    let (prd, _) = pull_prd(&other, 1);
    assert_eq!(prd["result"], "refused", "{prd}");
    let why = prd["why"].as_str().unwrap_or_default();
    assert!(why.contains(&format!("commit {forged}")) && why.contains("deterministic merge"), "{prd}");
    assert!(other.git(&["rev-parse", "-q", "--verify", "refs/boulder/prd"]).code == 1, "nothing was taken");
}

#[test]
fn a_fetched_tip_behind_the_local_one_brings_nothing_to_check() {
    let remote = Remote::new(&[("README.md", "hello\n")]);
    let far = remote.machine("far");
    write_ops(&far, "refs/boulder/prd", 1, LONG, "far", None, Spoil::None);
    far.git(&["push", "-q", "origin", "refs/boulder/prd"]).ok();

    let near = remote.machine("near");
    let (prd, _) = pull_prd(&near, 0);
    assert_eq!(prd["result"], "created", "{prd}");
    // Three ops made here since: the remote's tip is now below the local one.
    let tip = near.git_out(&["rev-parse", "refs/boulder/prd"]);
    write_ops(&near, "refs/boulder/prd", LONG + 1, LONG + 3, "near", Some(&tip), Spoil::None);
    let ours = near.git_out(&["rev-parse", "refs/boulder/prd"]);
    let (_, trace) = pull_prd(&near, 0);
    assert!(!trace.contains("validate:"), "nothing fetched is new, nothing is replayed:\n{trace}");
    assert_eq!(near.git_out(&["rev-parse", "refs/boulder/prd"]), ours, "the local ref is kept");
}
