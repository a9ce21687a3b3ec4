//! `stream merge --remote` on the edges a real fleet meets: git-lfs files, a crash that leaves
//! git's lock files behind. Checked with plain git (and git-lfs) on the remote and a fresh clone.

use crate::common::*;
use crate::merge_remote::{PLAN, PRD};

fn remote() -> Remote {
    Remote::new(&[
        (".agents/tasks/prd.md", PRD),
        (".boulder/streams.yaml", PLAN),
        ("src/auth/mod.rs", "// auth\n"),
        ("src/api/mod.rs", "// api\n"),
        ("README.md", "# sample\n"),
    ])
}

/// git-lfs, which .ci/run installs.
fn lfs_installed() -> bool {
    let ok = std::process::Command::new("git").args(["lfs", "version"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "git-lfs is missing; .ci/run must install it");
        eprintln!("skipping: git-lfs is not installed");
    }
    ok
}

#[test]
fn merge_remote_uploads_the_lfs_files_the_merge_brings() {
    if !lfs_installed() {
        return;
    }
    let remote = remote();
    let m = remote.machine("m1");
    m.git(&["lfs", "install", "--local"]).ok();
    m.boulder(&["stream", "init"]).ok();
    let w = m.worktree("auth");
    m.git_in(&w, &["lfs", "track", "src/auth/*.bin"]).ok();
    let blob: Vec<u8> = (0..4096u32).map(|i| (i * 13 % 251) as u8).collect();
    // The stream branch is never pushed by hand: only the merge sends it.
    commit_in(&m, &w, "src/auth/data.bin", &blob, "auth: data");
    assert!(m.git_out(&["cat-file", "-p", "boulder/auth:src/auth/data.bin"]).starts_with("version https://git-lfs"));
    m.boulder(&["prd", "done", "US-001"]).ok();

    m.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();

    // The remote's base names the file, and the remote has its content: a fresh clone checks it
    // out whole (before, the pointer arrived without its object and the checkout failed).
    let pointer = remote_git(&m, &remote, &["show", "main:src/auth/data.bin"]);
    let oid = pointer.lines().find_map(|l| l.strip_prefix("oid sha256:")).expect("an LFS pointer").to_string();
    let stored = remote.bare.join("lfs/objects").join(&oid[..2]).join(&oid[2..4]).join(&oid);
    assert_eq!(std::fs::read(&stored).expect("the LFS object on the remote"), blob);
    let fresh = TestRepo::clone_from(&remote.bare, "fresh");
    fresh.git(&["lfs", "install", "--local"]).ok();
    fresh.git(&["lfs", "pull", "origin"]).ok();
    assert_eq!(std::fs::read(fresh.dir.join("src/auth/data.bin")).unwrap(), blob);
    let r = m.git(&["--git-dir", remote.bare.to_str().unwrap(), "fsck", "--strict", "--no-progress"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

fn remote_git(m: &TestRepo, remote: &Remote, args: &[&str]) -> String {
    let mut all = vec!["--git-dir", remote.bare.to_str().unwrap()];
    all.extend_from_slice(args);
    m.git_out(&all)
}

#[test]
fn a_packed_refs_lock_left_by_a_killed_run_is_named_and_the_rerun_after_removing_it_lands() {
    let remote = remote();
    let m = remote.machine("m1");
    m.boulder(&["stream", "init"]).ok();
    let w = m.worktree("auth");
    commit_in(&m, &w, "src/auth/a.rs", "a\n", "auth: a");
    m.boulder(&["prd", "done", "US-001"]).ok();
    // What a run killed in the middle of a ref update leaves (a clone has a packed-refs file, so
    // every compare-and-swap takes this lock), untouched for a minute.
    let lock = m.dir.join(".git/packed-refs.lock");
    assert!(m.dir.join(".git/packed-refs").is_file());
    let f = std::fs::File::create(&lock).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60)).unwrap();
    drop(f);

    // Refused at once (not retried for minutes, not an internal error), naming the file to remove.
    let started = std::time::Instant::now();
    let r = m.boulder(&["stream", "merge", "auth", "--remote", "origin"]).code(1);
    assert_shown!("packed_refs_lock_stops_the_merge", r);
    assert!(r.stderr.contains(&format!("remove {}", lock.display())), "{}", r.stderr);
    let r = m.boulder(&["prd", "done", "US-002"]).code(1);
    assert_shown!("packed_refs_lock_stops_prd_done", r);
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "took {:?}", started.elapsed());

    // As the hint says: remove it and rerun; what the refused run did stays done, nothing twice.
    std::fs::remove_file(&lock).unwrap();
    m.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    assert_eq!(m.stream_state("auth")["status"], "MERGED");
    let subjects = remote_git(&m, &remote, &["log", "--format=%s", "main"]);
    assert_eq!(subjects.lines().filter(|s| *s == "auth: a").count(), 1, "{subjects}");
    m.assert_fsck();
}

#[test]
fn a_dependency_not_merged_on_the_remote_is_named_with_the_command_that_merges_it_there() {
    let plan = PLAN.replace("    paths: [src/api/**]\n", "    paths: [src/api/**]\n    depends_on: [auth]\n");
    let remote = Remote::new(&[
        (".agents/tasks/prd.md", PRD),
        (".boulder/streams.yaml", &plan),
        ("src/auth/mod.rs", "// auth\n"),
        ("src/api/mod.rs", "// api\n"),
    ]);
    let m = remote.machine("m1");
    m.boulder(&["stream", "init"]).ok();
    commit_in(&m, &m.worktree("api"), "src/api/x.rs", "x\n", "api: x");
    m.boulder(&["prd", "done", "US-002"]).ok();
    let r = m.boulder(&["stream", "merge", "api", "--remote", "origin"]).code(1);
    assert_shown!("a_dependency_not_merged_on_the_remote_is_named_with_the_command_that_merges_it_there", r);
    // Following the hint merges auth where api is to land, not into the local base.
}

/// Land auth on the remote while a stale `index.lock` holds the base worktree, remove the lock,
/// then run `rerun`: the local base and its worktree come up to the remote's tip.
fn local_base_left_behind_then(rerun: &[&str], said: &str) {
    let remote = remote();
    let m = remote.machine("m1");
    m.boulder(&["stream", "init"]).ok();
    let w = m.worktree("auth");
    commit_in(&m, &w, "src/auth/a.rs", "a\n", "auth: a");
    m.boulder(&["prd", "done", "US-001"]).ok();
    let before = rev(&m, "main");
    // A killed git left the base worktree's index locked: the push lands, the local base cannot
    // follow (its worktree cannot be updated under the lock).
    let lock = m.dir.join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    let r = m.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    let landed = remote_git(&m, &remote, &["rev-parse", "main"]).trim().to_string();
    assert_ne!(landed, before);
    assert!(remote_git(&m, &remote, &["log", "--format=%s", "main"]).lines().any(|s| s == "auth: a"));
    assert_eq!(rev(&m, "main"), before, "the local base moved under the lock:\n{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("the local branch main was not brought to"), "{}", r.stderr);
    assert!(r.stderr.contains("`git boulder stream merge --all --remote origin` brings it up"), "{}", r.stderr);

    // The lock removed, the rerun brings the local base and its worktree up to the remote's tip.
    std::fs::remove_file(&lock).unwrap();
    let r = m.boulder(rerun).ok();
    assert!(r.stdout.contains(said) || r.stderr.contains(said), "{}{}", r.stdout, r.stderr);
    assert_eq!(rev(&m, "main"), landed);
    assert_eq!(m.git_out(&["status", "--porcelain"]), "");
    assert_eq!(m.read("src/auth/a.rs"), "a\n");
    assert_eq!(m.stream_state("auth")["status"], "MERGED");
    let subjects = remote_git(&m, &remote, &["log", "--format=%s", "main"]);
    assert_eq!(subjects.lines().filter(|s| *s == "auth: a").count(), 1, "{subjects}");
    m.assert_fsck();
}

#[test]
fn merge_all_remote_with_nothing_to_land_brings_a_local_base_left_behind_up_to_the_remote() {
    // Nothing is left to land (auth is MERGED, api not complete): only the local base moves.
    local_base_left_behind_then(
        &["stream", "merge", "--all", "--remote", "origin"],
        "bringing the local branch main up to origin's",
    );
}

#[test]
fn a_rerun_of_the_merge_brings_a_local_base_left_behind_up_to_the_remote() {
    local_base_left_behind_then(&["stream", "merge", "auth", "--remote", "origin"], "auth: already in main on origin");
}

#[test]
fn a_pull_blocked_by_a_new_packed_refs_lock_names_it_not_the_remote() {
    let remote = remote();
    let a = remote.machine("a");
    a.boulder(&["stream", "init"]).ok();
    a.boulder(&["prd", "done", "US-001"]).ok();
    a.boulder(&["push"]).ok();
    let b = remote.machine("b");
    // Just made (a git command at work, or one killed a moment ago): every ref update waits for
    // it, then fails; the refusal is about this repository.
    let lock = b.dir.join(".git/packed-refs.lock");
    std::fs::File::create(&lock).unwrap();
    let r = b.boulder(&["pull"]).code(1);
    assert_shown!("a_pull_blocked_by_a_new_packed_refs_lock_names_it_not_the_remote", r);
    assert!(!r.stderr.contains("failed validation") && !r.stderr.contains("on the remote"), "{}", r.stderr);
    std::fs::remove_file(&lock).unwrap();
    b.boulder(&["pull"]).ok();
    assert!(!b.refs("refs/boulder/streams/").is_empty());
}
