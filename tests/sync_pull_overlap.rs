//! A pull checks the op-logs it fetched on two threads while it takes notes and claims in on its
//! own, reuses what the validation learned (the fetched tip's state, whether it descends from the
//! local tip), and prepares while `git fetch` runs. None of that may change an answer: a forged
//! or misnamed op-log among many is refused by name, the local ref kept, and every other ref is
//! created, fast-forwarded, merged or found up to date as before.

use std::io::Write;
use std::process::Stdio;

use git_boulder::git::Repo;
use git_boulder::state::{BoulderState, Store};

use crate::common::{Remote, TestRepo};

/// Boulders written here: more than a pull checks on one thread.
pub(crate) const BOULDERS: usize = 24;

pub(crate) fn boulder_ref(i: usize) -> String {
    format!("refs/boulder/boulders/b{i:02}")
}

/// Append an `activity` op to boulder `i` of `repo` as `actor` (creating the boulder first when
/// `create`).
pub(crate) fn append(repo: &TestRepo, actor: &str, i: usize, create: bool, what: &str) {
    let r = Repo::open(&repo.dir).expect("open");
    let store = Store::with_actor(&r, actor.to_string());
    if create {
        store.append_raw::<BoulderState>(&boulder_ref(i), "created", serde_json::json!({"stream": "s"})).unwrap();
    }
    let data = serde_json::json!({"commit": format!("{what}-{i}")});
    store.append_raw::<BoulderState>(&boulder_ref(i), "activity", data).unwrap();
}

/// Every fetched ref's outcome of a `pull --json` that exits `code`, by local ref name.
pub(crate) fn pull(repo: &TestRepo, code: i32) -> std::collections::BTreeMap<String, serde_json::Value> {
    let j = repo.boulder(&["pull", "origin", "--json"]).code(code).json();
    j["refs"].as_array().unwrap().iter().map(|r| (r["name"].as_str().unwrap().to_string(), r.clone())).collect()
}

/// The tip of boulder `i` as a commit whose `state.json` is its parent's: its op does not make it.
fn forge_tip(repo: &TestRepo, i: usize) -> String {
    let name = boulder_ref(i);
    let tip = repo.git_out(&["rev-parse", &name]);
    let parent = repo.git_out(&["rev-parse", &format!("{tip}^")]);
    let op = repo.git_out(&["rev-parse", &format!("{tip}:op.json")]);
    let state = repo.git_out(&["rev-parse", &format!("{parent}:state.json")]);
    let listing = format!("100644 blob {op}\top.json\n100644 blob {state}\tstate.json\n");
    let mut mktree = repo.command("git").arg("mktree").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    mktree.stdin.take().unwrap().write_all(listing.as_bytes()).unwrap();
    let tree = String::from_utf8(mktree.wait_with_output().unwrap().stdout).unwrap().trim().to_string();
    let message = repo.git_out(&["log", "-1", "--format=%B", &tip]);
    let forged = repo.git_out(&["commit-tree", &tree, "-p", &parent, "-m", &message]);
    repo.git(&["update-ref", &name, &forged]).ok();
    forged
}

/// A remote and a machine `far` that has pushed [`BOULDERS`] op-logs of one op each to it, after
/// `edit` changed its refs.
pub(crate) fn far_with_boulders(edit: impl FnOnce(&TestRepo)) -> (Remote, TestRepo) {
    crate::common::assert_lib_env();
    let remote = Remote::new(&[("README.md", "hello\n")]);
    let far = remote.machine("far");
    for i in 1..=BOULDERS {
        append(&far, "far", i, true, "first");
    }
    edit(&far);
    far.git(&["push", "-q", "origin", "refs/boulder/*:refs/boulder/*"]).ok();
    (remote, far)
}

#[test]
fn forged_and_misnamed_op_logs_among_many_are_refused_by_name_and_the_rest_taken() {
    crate::common::lib_env!();
    let (remote, far) = far_with_boulders(|_| {});

    let near = remote.machine("near");
    let first = pull(&near, 0);
    for i in 1..=BOULDERS {
        assert_eq!(first[&boulder_ref(i)]["result"], "created", "{first:?}");
        assert_eq!(near.git_out(&["rev-parse", &boulder_ref(i)]), far.git_out(&["rev-parse", &boulder_ref(i)]));
    }

    // The remote moves on by one op on every boulder; b13's new op carries a forged state, b07
    // now holds b08's op-log, and near has an op of its own on b21.
    for i in 1..=BOULDERS {
        append(&far, "far", i, false, "second");
    }
    let forged = forge_tip(&far, 13);
    far.git(&["update-ref", &boulder_ref(7), &boulder_ref(8)]).ok();
    far.git(&["push", "-q", "-f", "origin", "refs/boulder/*:refs/boulder/*"]).ok();
    append(&near, "near", 21, false, "local");
    let before: Vec<String> = (1..=BOULDERS).map(|i| near.git_out(&["rev-parse", &boulder_ref(i)])).collect();

    let next = pull(&near, 1);
    let b13 = &next[&boulder_ref(13)];
    assert_eq!(b13["result"], "refused", "{b13}");
    let why = b13["why"].as_str().unwrap();
    assert!(why.contains(&format!("commit {forged}")) && why.contains("does not follow from its op"), "{why}");
    let b07 = &next[&boulder_ref(7)];
    assert_eq!(b07["result"], "refused", "{b07}");
    assert!(b07["why"].as_str().unwrap().contains("records boulder \"b08\""), "{b07}");
    for i in [7, 13] {
        assert_eq!(near.git_out(&["rev-parse", &boulder_ref(i)]), before[i - 1], "b{i:02} was kept as it was");
    }
    let b21 = &next[&boulder_ref(21)];
    assert_eq!(b21["result"], "merged", "{b21}");
    let merge = near.git_out(&["rev-parse", &boulder_ref(21)]);
    let parents = near.git_out(&["rev-list", "--parents", "-n1", &merge]);
    assert!(
        parents.contains(&before[20]) && parents.contains(&far.git_out(&["rev-parse", &boulder_ref(21)])),
        "{parents}"
    );
    for i in (1..=BOULDERS).filter(|i| ![7, 13, 21].contains(i)) {
        assert_eq!(next[&boulder_ref(i)]["result"], "fast_forward", "b{i:02}: {next:?}");
        assert_eq!(near.git_out(&["rev-parse", &boulder_ref(i)]), far.git_out(&["rev-parse", &boulder_ref(i)]));
    }
    near.assert_fsck();

    // Pulled again: nothing new, and the same two refused again.
    let again = pull(&near, 1);
    let refused: Vec<&String> = again.iter().filter(|(_, r)| r["result"] == "refused").map(|(n, _)| n).collect();
    assert_eq!(refused, [&boulder_ref(7), &boulder_ref(13)], "{again:?}");
    for i in (1..=BOULDERS).filter(|i| ![7, 13].contains(i)) {
        assert_eq!(again[&boulder_ref(i)]["result"], "up_to_date", "b{i:02}: {again:?}");
    }
}

#[test]
fn a_misnamed_op_log_already_held_is_still_refused_when_nothing_is_new() {
    crate::common::lib_env!();
    let (remote, _far) = far_with_boulders(|far| {
        far.git(&["update-ref", &boulder_ref(5), &boulder_ref(6)]).ok();
    });

    // near got b05 past any check (plain git), as the remote has it.
    let near = remote.machine("near");
    near.git(&["fetch", "-q", "origin", &format!("{0}:{0}", boulder_ref(5))]).ok();
    let r = pull(&near, 1);
    let b05 = &r[&boulder_ref(5)];
    assert_eq!(b05["result"], "refused", "{b05}");
    assert!(b05["why"].as_str().unwrap().contains("records boulder \"b06\""), "{b05}");
    for i in (1..=BOULDERS).filter(|&i| i != 5) {
        assert_eq!(r[&boulder_ref(i)]["result"], "created", "b{i:02}: {r:?}");
    }
}
