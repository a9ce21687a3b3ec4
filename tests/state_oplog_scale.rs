//! Op-logs of any length: a history longer than any former cap is logged whole, taken whole by a
//! pull, and what a pull adds on top of it is still checked; `git boulder gc` packs the state.

use std::io::Write;
use std::process::Stdio;

use crate::common::{Remote, TestRepo};

/// Ops in the long history: one more than the old cap on walks (100,000).
const LONG: u64 = 100_001;

/// The `op.json`, `state.json` and message of op `i` of a completion-records log of `done`
/// ops, one second apart, each recording one of 50 stories; `lamport` is what `op.json` says.
fn prd_op(i: u64, lamport: u64) -> (String, String, String) {
    let t = 1_700_000_000 + i;
    let at = at_of(t);
    let story = format!("US-{:03}", i % 50);
    // Stories recorded so far: US-001 to US-i, all 50 from op 50 on.
    let mut done: Vec<String> = (0..50u64.min(i)).map(|k| format!("US-{:03}", (k + 1) % 50)).collect();
    done.sort();
    let op = format!(
        "{{\"v\": 1, \"kind\": \"done\", \"lamport\": {lamport}, \"at\": \"{at}\", \"actor\": \"far\", \"data\": {{\"ids\": [\"{story}\"]}}}}\n"
    );
    let state = format!(
        "{{\"done\": [{}], \"updated_at\": \"{at}\", \"lamport\": {i}}}\n",
        done.iter().map(|d| format!("\"{d}\"")).collect::<Vec<_>>().join(", ")
    );
    let msg = format!("boulder: done\n\n{{\"ids\":[\"{story}\"]}}\n");
    (op, state, msg)
}

/// RFC 3339 UTC time of `t` seconds since the epoch.
fn at_of(t: u64) -> String {
    let days = t / 86_400;
    let secs = t % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Write ops `from..=to` onto `refs/boulder/prd` of `repo` with `git fast-import` (after its
/// current tip when `from` > 1); `bad_state` makes the last op's state not follow from its op.
fn write_ops(repo: &TestRepo, from: u64, to: u64, bad_state: bool) {
    let mut stream = Vec::new();
    for i in from..=to {
        let (op, mut state, msg) = prd_op(i, i);
        if bad_state && i == to {
            state = state.replace("\"done\": [", "\"done\": [\"US-999\", ");
        }
        let t = 1_700_000_000 + i;
        write!(stream, "commit refs/boulder/prd\ncommitter git-boulder <git-boulder@localhost> {t} +0000\n").unwrap();
        write!(stream, "data {}\n{msg}", msg.len()).unwrap();
        if i == from && from > 1 {
            stream.extend_from_slice(b"from refs/boulder/prd^0\n");
        }
        stream.extend_from_slice(b"deleteall\n");
        write!(stream, "M 100644 inline op.json\ndata {}\n{op}\n", op.len()).unwrap();
        write!(stream, "M 100644 inline state.json\ndata {}\n{state}\n", state.len()).unwrap();
    }
    stream.extend_from_slice(b"done\n");
    repo.fast_import(&stream);
}

#[test]
fn a_long_history_is_logged_and_pulled_whole_and_what_is_new_is_still_checked() {
    let remote = Remote::new(&[("README.md", "hello\n")]);
    let far = remote.machine("far");
    write_ops(&far, 1, LONG, false);
    let tip = far.git_out(&["rev-parse", "refs/boulder/prd"]);
    let root = far.git_out(&["rev-list", "--max-parents=0", "refs/boulder/prd"]);

    // `log` prints every op, newest first: the tip first, the root last.
    let log = far.boulder(&["log", "prd"]).ok().stdout;
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len() as u64, LONG, "one line per op");
    assert!(lines[0].starts_with(&tip[..10]), "{}", lines[0]);
    assert!(lines[lines.len() - 1].starts_with(&root[..10]), "{}", lines[lines.len() - 1]);
    assert!(far.boulder(&["log", "prd", "-n", "1"]).ok().stdout.starts_with(&tip[..10]));

    // A fresh clone takes the whole history.
    far.git(&["push", "-q", "origin", "refs/boulder/prd:refs/boulder/prd"]).ok();
    let near = remote.machine("near");
    let pulled = near.boulder(&["pull", "--json"]).ok().json();
    let prd = pulled["refs"].as_array().unwrap().iter().find(|r| r["name"] == "refs/boulder/prd").cloned();
    assert_eq!(prd.as_ref().map(|r| r["result"].clone()), Some("created".into()), "{pulled}");
    assert_eq!(near.git_out(&["rev-parse", "refs/boulder/prd"]), tip);

    // Two more ops, the last one's state not following from its op: refused, nothing taken.
    write_ops(&far, LONG + 1, LONG + 2, true);
    let bad = far.git_out(&["rev-parse", "refs/boulder/prd"]);
    far.git(&["push", "-q", "origin", "refs/boulder/prd:refs/boulder/prd"]).ok();
    let pulled = near.boulder(&["pull", "--json"]).code(1).json();
    let prd = pulled["refs"].as_array().unwrap().iter().find(|r| r["name"] == "refs/boulder/prd").cloned();
    let prd = prd.unwrap_or_else(|| panic!("{pulled}"));
    assert_eq!(prd["result"], "refused", "{pulled}");
    let why = prd["why"].as_str().unwrap_or_default().to_string();
    assert!(why.contains(&bad) && why.contains("does not follow"), "{prd}");
    assert_eq!(near.git_out(&["rev-parse", "refs/boulder/prd"]), tip, "the local state is unchanged");
}

#[test]
fn gc_leaves_no_loose_state_object_and_a_clean_repository() {
    let remote = Remote::new(&[("README.md", "hello\n")]);
    let repo = remote.machine("solo");
    write_ops(&repo, 1, 50, false);
    // Loose objects, as appends write them: unpack what fast-import packed.
    let packs = repo.git_out(&["rev-parse", "--git-path", "objects/pack"]);
    let packs = repo.dir.join(packs);
    let mut unpacked = 0;
    for e in std::fs::read_dir(&packs).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "pack") {
            let moved = packs.parent().unwrap().join("to-unpack.pack");
            std::fs::rename(&path, &moved).unwrap();
            std::fs::remove_file(path.with_extension("idx")).unwrap();
            let bytes = std::fs::read(&moved).unwrap();
            let mut child = repo.command("git").args(["unpack-objects", "-q"]).stdin(Stdio::piped()).spawn().unwrap();
            child.stdin.take().unwrap().write_all(&bytes).unwrap();
            assert!(child.wait().unwrap().success());
            std::fs::remove_file(moved).unwrap();
            unpacked += 1;
        }
    }
    assert!(unpacked > 0);
    let state_objects = || -> Vec<String> {
        repo.git_out(&["rev-list", "--objects", "refs/boulder/prd"])
            .lines()
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    };
    let loose = |ids: &[String]| {
        ids.iter().filter(|id| repo.dir.join(".git/objects").join(&id[..2]).join(&id[2..]).exists()).count()
    };
    let all = state_objects();
    assert_eq!(loose(&all), all.len(), "every state object starts loose");

    let out = repo.boulder(&["gc", "--json"]).ok().json();
    assert_eq!(out["packed"], true, "{out}");
    assert_eq!(out["objects"].as_u64(), Some(all.len() as u64), "{out}");
    assert_eq!(loose(&all), 0, "no loose state object is left");
    repo.assert_fsck();
    assert_eq!(repo.boulder(&["log", "prd"]).ok().stdout.lines().count(), 50);

    // More ops: the next gc packs only those.
    write_ops(&repo, 51, 60, false);
    let out = repo.boulder(&["gc", "--json"]).ok().json();
    let now = state_objects();
    assert_eq!(out["objects"].as_u64(), Some((now.len() - all.len()) as u64), "{out}");
    assert_eq!(loose(&now), 0);
    repo.assert_fsck();

    // Nothing new: nothing to do.
    let out = repo.boulder(&["gc", "--json"]).ok().json();
    assert_eq!(out["objects"], 0, "{out}");

    // --auto packs only above the threshold.
    repo.git(&["config", "boulder.gcAuto", "0"]).ok();
    assert_eq!(repo.boulder(&["gc", "--auto", "--json"]).ok().json()["packed"], false);
}

/// The streamed history of diverged and merged op-logs (criss-cross merges included) is exactly
/// what sorting every reachable op by `(lamport, at, actor, commit)`, newest first, gives: each
/// commit once, in that order, also past the point where reading ahead starts.
#[test]
fn history_streams_in_replay_order_through_merges() {
    use git_boulder::git::Repo;
    crate::common::lib_env!();
    let repo = TestRepo::without_identity();
    let r = Repo::open(&repo.dir).expect("open");
    // Rounds of diverged ops and merges, then a linear stretch longer than what is read before
    // reading ahead starts: the read-ahead then runs into the merges.
    let stores = crate::common::criss_cross_op_logs(&repo, &r, 520);
    let refs = crate::common::CRISS_CROSS_REFS;
    let oid = |hex: &str| gix::ObjectId::from_hex(hex.trim().as_bytes()).unwrap();
    let tip = oid(&repo.git_out(&["rev-parse", refs[0]]));
    let streamed = stores[0].history(tip).unwrap();
    let mut sorted = streamed.clone();
    sorted.sort_by(|a, b| {
        (&b.op.lamport, &b.op.at, &b.op.actor, &b.commit).cmp(&(&a.op.lamport, &a.op.at, &a.op.actor, &a.commit))
    });
    let ids = |v: &[git_boulder::state::LogEntry]| v.iter().map(|e| e.commit).collect::<Vec<_>>();
    assert_eq!(ids(&streamed), ids(&sorted), "in replay order, newest first");
    let all = repo.git_out(&["rev-list", refs[0]]);
    assert_eq!(streamed.len(), all.lines().count(), "every reachable commit once");
    assert!(streamed.len() > 560 && streamed.iter().filter(|e| e.is_merge).count() >= 6);
}
