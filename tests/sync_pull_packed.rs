//! A pull has git bring the objects only (`git fetch --dry-run`) and writes the refs itself: the
//! tracking refs and the op-logs each go into `packed-refs` under its one lock, where no loose file
//! or lock of theirs exists; the rest through a ref transaction. None of that may lose a write, hide
//! a value behind a stale loose file, drop a fetched object, or leave anything behind.

use std::path::Path;

use git_boulder::git::refs::{self, Expect, Swap};
use git_boulder::git::Repo;

use crate::common::{assert_shown, TestRepo};
use crate::sync_pull_overlap::{append, boulder_ref, far_with_boulders, pull, BOULDERS};

/// A swap creating `name` at `id`.
fn creation(name: impl Into<String>, id: gix::ObjectId) -> Swap {
    Swap { name: name.into(), expected: Expect::Absent, new: id, message: "test".into() }
}

/// A repository of two commits, for the library's own ref writes, with the two commits' ids.
fn two_commits() -> (TestRepo, gix::ObjectId, gix::ObjectId) {
    crate::common::assert_lib_env();
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    let id = |repo: &TestRepo| gix::ObjectId::from_hex(repo.git_out(&["rev-parse", "HEAD"]).as_bytes()).unwrap();
    let first = id(&repo);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "two"]).ok();
    let second = id(&repo);
    (repo, first, second)
}

/// Files under `dir` (recursively), by path relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

fn tracking_ref(i: usize) -> String {
    format!("refs/boulder-remotes/origin/boulders/b{i:02}")
}

/// Every boulder of `near` and its tracking ref hold what `far` holds.
#[track_caller]
fn same_as_far(near: &TestRepo, far: &TestRepo) {
    for i in 1..=BOULDERS {
        let theirs = far.git_out(&["rev-parse", &boulder_ref(i)]);
        assert_eq!(near.git_out(&["rev-parse", &tracking_ref(i)]), theirs, "tracking ref of b{i:02}");
        assert_eq!(near.git_out(&["rev-parse", &boulder_ref(i)]), theirs, "b{i:02}");
    }
}

#[test]
fn a_pull_writes_its_refs_packed_leaves_no_loose_file_or_keep_and_git_reads_them() {
    crate::common::lib_env!();
    let (remote, far) = far_with_boulders(|_| {});
    let near = remote.machine("near");
    let git_dir = near.dir.join(".git");

    let first = pull(&near, 0);
    for i in 1..=BOULDERS {
        assert_eq!(first[&boulder_ref(i)]["result"], "created", "{first:?}");
    }
    same_as_far(&near, &far);
    // One file for all of them: nothing loose under refs/boulder or refs/boulder-remotes.
    assert_eq!(files_under(&git_dir.join("refs/boulder")), Vec::<String>::new());
    assert_eq!(files_under(&git_dir.join("refs/boulder-remotes")), Vec::<String>::new());
    let packed = std::fs::read_to_string(git_dir.join("packed-refs")).unwrap();
    assert!(packed.starts_with("# pack-refs with: peeled fully-peeled sorted \n"), "{packed}");
    assert!(packed.contains(&format!(" {}\n", boulder_ref(3))) && packed.contains(&format!(" {}\n", tracking_ref(3))));
    // The branch refs git wrote before are still there, and sorted as git keeps them.
    assert_eq!(near.git_out(&["rev-parse", "refs/remotes/origin/main"]), near.git_out(&["rev-parse", "HEAD"]));
    let names: Vec<&str> = packed.lines().skip(1).filter_map(|l| l.split_once(' ').map(|(_, n)| n)).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    let kept: Vec<String> =
        files_under(&git_dir.join("objects/pack")).into_iter().filter(|f| f.ends_with(".keep")).collect();
    assert_eq!(kept, Vec::<String>::new(), "the fetched pack is kept only while its refs move");
    near.assert_fsck();

    // The remote moves on; near has an op of its own on b04, written loose as a hook writes it.
    for i in 1..=BOULDERS {
        append(&far, "far", i, false, "second");
    }
    far.git(&["push", "-q", "origin", "refs/boulder/*:refs/boulder/*"]).ok();
    append(&near, "near", 4, false, "local");
    let local = near.git_out(&["rev-parse", &boulder_ref(4)]);
    assert!(git_dir.join(boulder_ref(4)).is_file(), "the local op is a loose ref");

    let next = pull(&near, 0);
    assert_eq!(next[&boulder_ref(4)]["result"], "merged", "{next:?}");
    let parents = near.git_out(&["rev-list", "--parents", "-n1", &boulder_ref(4)]);
    assert!(parents.contains(&local) && parents.contains(&far.git_out(&["rev-parse", &boulder_ref(4)])), "{parents}");
    for i in (1..=BOULDERS).filter(|&i| i != 4) {
        assert_eq!(next[&boulder_ref(i)]["result"], "fast_forward", "b{i:02}: {next:?}");
        assert_eq!(near.git_out(&["rev-parse", &boulder_ref(i)]), far.git_out(&["rev-parse", &boulder_ref(i)]));
    }
    near.assert_fsck();

    // After `git pack-refs` nothing moves.
    near.git(&["pack-refs", "--all"]).ok();
    let again = pull(&near, 0);
    assert!(again.values().all(|r| r["result"] == "up_to_date"), "{again:?}");
}

#[test]
fn a_repack_between_the_fetch_and_the_refs_keeps_the_fetched_objects() {
    crate::common::lib_env!();
    let (remote, far) = far_with_boulders(|_| {});
    let near = remote.machine("near");
    // A pack however few the objects, so that `repack -a -d` would drop it as unreachable.
    near.git(&["config", "fetch.unpackLimit", "1"]).ok();
    let env = [("BOULDER_FAILPOINT_RUN", "fetch-objects"), ("BOULDER_FAILPOINT_CMD", "git repack -a -d -q")];
    near.boulder_env(&near.dir, &["pull", "origin"], &env).ok();
    same_as_far(&near, &far);
    near.assert_fsck();
    for i in 1..=BOULDERS {
        assert_eq!(near.state(&boulder_ref(i))["id"], format!("b{i:02}"), "b{i:02} reads back");
    }
}

#[test]
fn a_pull_killed_between_the_fetch_and_the_refs_moves_nothing_and_the_next_one_finishes() {
    crate::common::lib_env!();
    let (remote, far) = far_with_boulders(|_| {});
    let near = remote.machine("near");
    let killed = near.boulder_env(&near.dir, &["pull", "origin"], &[("BOULDER_FAILPOINT", "fetch-objects")]);
    assert_ne!(killed.code, 0, "{}", killed.stderr);
    assert_eq!(near.refs("refs/boulder"), Vec::<String>::new());
    assert_eq!(near.refs("refs/boulder-remotes"), Vec::<String>::new());
    near.assert_fsck();

    let next = pull(&near, 0);
    assert!((1..=BOULDERS).all(|i| next[&boulder_ref(i)]["result"] == "created"), "{next:?}");
    same_as_far(&near, &far);
    near.assert_fsck();
}

#[test]
fn a_local_write_that_slips_in_while_packed_refs_is_written_is_kept_and_the_pull_taken_in_on_top() {
    crate::common::lib_env!();
    let (remote, far) = far_with_boulders(|_| {});
    let near = remote.machine("near");
    pull(&near, 0);
    // A local op on b05 that no ref names yet, on top of what near holds.
    let held = near.git_out(&["rev-parse", &boulder_ref(5)]);
    append(&near, "near", 5, false, "local");
    let local = near.git_out(&["rev-parse", &boulder_ref(5)]);
    near.git(&["update-ref", &boulder_ref(5), &held, &local]).ok();
    near.git(&["pack-refs", "--all"]).ok();
    for i in 1..=BOULDERS {
        append(&far, "far", i, false, "second");
    }
    far.git(&["push", "-q", "origin", "refs/boulder/*:refs/boulder/*"]).ok();

    // The second write of packed-refs (the op-logs; the first is the tracking refs) is followed by
    // a writer that takes no lock of packed-refs, as git's CLI writes a loose ref.
    let marker = near.dir.join(".git/first-write-seen");
    let cmd = format!(
        "if [ -e '{m}' ]; then git update-ref {r} {local}; else touch '{m}'; fi",
        m = marker.display(),
        r = boulder_ref(5)
    );
    let env = [("BOULDER_FAILPOINT_RUN", "packed-refs-written"), ("BOULDER_FAILPOINT_CMD", cmd.as_str())];
    let j = near.boulder_env(&near.dir, &["pull", "origin", "--json"], &env).ok().json();
    let b05 = j["refs"].as_array().unwrap().iter().find(|r| r["name"] == boulder_ref(5)).unwrap();
    assert_eq!(b05["result"], "merged", "{j}");
    let parents = near.git_out(&["rev-list", "--parents", "-n1", &boulder_ref(5)]);
    assert!(parents.contains(&local) && parents.contains(&far.git_out(&["rev-parse", &boulder_ref(5)])), "{parents}");
    for i in (1..=BOULDERS).filter(|&i| i != 5) {
        assert_eq!(near.git_out(&["rev-parse", &boulder_ref(i)]), far.git_out(&["rev-parse", &boulder_ref(i)]));
    }
    near.assert_fsck();
}

#[test]
fn a_packed_refs_file_git_did_not_sort_is_left_to_a_ref_transaction_and_peeled_tags_are_kept() {
    crate::common::lib_env!();
    let (remote, far) = far_with_boulders(|_| {});
    let near = remote.machine("near");
    near.git(&["tag", "-a", "-m", "a tag", "v1"]).ok();
    near.git(&["pack-refs", "--all"]).ok();
    let packed_path = near.dir.join(".git/packed-refs");
    let packed = std::fs::read_to_string(&packed_path).unwrap();
    let peeled = packed.lines().find(|l| l.starts_with('^')).expect("a peeled line for the tag").to_string();

    // Peeled and sorted as git writes it: the pull rewrites the file and keeps the tag's line.
    pull(&near, 0);
    same_as_far(&near, &far);
    let after = std::fs::read_to_string(&packed_path).unwrap();
    assert!(after.contains(&format!("refs/tags/v1\n{peeled}\n")), "{after}");
    assert_eq!(near.git_out(&["rev-parse", "v1^{commit}"]), near.git_out(&["rev-parse", "HEAD"]));

    // A file whose header does not say sorted: taken to a ref transaction, which reads it as it is.
    for i in 1..=BOULDERS {
        append(&far, "far", i, false, "second");
    }
    far.git(&["push", "-q", "origin", "refs/boulder/*:refs/boulder/*"]).ok();
    let unsorted = after.replacen("# pack-refs with: peeled fully-peeled sorted \n", "# pack-refs with: peeled \n", 1);
    std::fs::write(&packed_path, unsorted).unwrap();
    let next = pull(&near, 0);
    assert!((1..=BOULDERS).all(|i| next[&boulder_ref(i)]["result"] == "fast_forward"), "{next:?}");
    same_as_far(&near, &far);
    assert_eq!(near.git_out(&["rev-parse", "v1^{commit}"]), near.git_out(&["rev-parse", "HEAD"]));
    near.assert_fsck();
}

#[test]
fn a_ref_transaction_right_after_a_packed_rewrite_in_the_same_process_keeps_what_it_wrote() {
    crate::common::lib_env!();
    let (repo, head, next) = two_commits();
    repo.git(&["pack-refs", "--all"]).ok();
    let r = Repo::open(&repo.dir).expect("open");
    let writer = git_boulder::state::Store::absorb_writer();
    // Many rounds of: a packed rewrite, a read (gix keeps the file it read), another packed
    // rewrite, a transaction of another ref — within one clock tick the file's modification
    // time does not change between the two rewrites.
    for round in 0..40 {
        let first = creation(format!("refs/boulder/boulders/p{round}"), head);
        refs::update_packed(&r, &[first]).unwrap().expect("written packed");
        assert_eq!(r.ref_id(&format!("refs/boulder/boulders/p{round}")).unwrap(), Some(head));
        let second = creation(format!("refs/boulder/boulders/q{round}"), next);
        let moved = refs::update_packed(&r, &[second]).unwrap().expect("written packed");
        assert!(moved.left.is_empty() && moved.raced.is_empty());
        let other = creation(format!("refs/boulder/boulders/t{round}"), next);
        refs::update_all(&r, &[other], &writer).unwrap().unwrap();
    }
    for n in 0..40 {
        for (name, want) in [("p", head), ("q", next), ("t", next)] {
            let got = repo.git_out(&["rev-parse", &format!("refs/boulder/boulders/{name}{n}")]);
            assert_eq!(got, want.to_string(), "{name}{n}");
        }
    }
    repo.assert_fsck();
}

#[test]
fn a_fetched_ref_that_clashes_with_a_folder_of_refs_is_never_written_beside_it() {
    crate::common::lib_env!();
    let (remote, _far) = far_with_boulders(|_| {});
    let near = remote.machine("near");
    let head = near.git_out(&["rev-parse", "HEAD"]);
    let below = format!("{}/old", tracking_ref(1));
    near.git(&["update-ref", &below, &head]).ok();
    near.git(&["pack-refs", "--all"]).ok();
    // git refuses it, as its own fetch would: the pull says so, and writes nothing beside it.
    let r = near.boulder(&["pull", "origin"]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(r.stderr.contains(&tracking_ref(1)), "{}", r.stderr);
    let held = near.refs(&tracking_ref(1));
    assert!(!(held.contains(&tracking_ref(1)) && held.contains(&below)), "{held:?}");
    near.git(&["update-ref", &format!("{below}2"), &head]).ok();
    near.assert_fsck();
}

#[test]
fn refs_git_keeps_a_reflog_of_are_left_to_a_ref_transaction() {
    crate::common::lib_env!();
    let (repo, _, head) = two_commits();
    let r = Repo::open(&repo.dir).expect("open");
    let swap = |name: &str| creation(name, head);
    let names = ["refs/remotes/origin/x", "refs/boulder-queue/o/heads/x", "refs/notes/x", "refs/heads/x"];
    let swaps: Vec<Swap> = names.iter().map(|n| swap(n)).collect();
    let moved = refs::update_packed(&r, &swaps).unwrap().expect("written");
    assert_eq!(moved.left, [0, 2, 3], "branches, remote-tracking branches and notes get a reflog");
    assert_eq!(repo.refs("refs/boulder-queue"), ["refs/boulder-queue/o/heads/x"]);
    assert_eq!(repo.refs("refs/remotes/origin/x"), Vec::<String>::new());
    // Where every update is logged, all are left to the transaction (which writes the logs).
    repo.git(&["config", "core.logAllRefUpdates", "always"]).ok();
    let r = Repo::open(&repo.dir).expect("open");
    let moved = refs::update_packed(&r, &[swap("refs/boulder-queue/o/heads/y")]).unwrap().expect("nothing refused");
    assert_eq!(moved.left, [0]);

    // git's default, as git reads it: a bare repository logs nothing unless the key is set (a bare
    // key is true), and a linked worktree of one is not bare.
    let bare = repo.dir.with_extension("bare.git");
    repo.git(&["clone", "-q", "--bare", ".", bare.to_str().unwrap()]).ok();
    let r = Repo::open(&bare).expect("open");
    assert_eq!(
        refs::update_packed(&r, &[swap("refs/remotes/o/a")]).unwrap().expect("written").left,
        Vec::<usize>::new()
    );
    let config = bare.join("config");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replacen("[core]\n", "[core]\n\tlogAllRefUpdates\n", 1)).unwrap();
    let r = Repo::open(&bare).expect("open");
    assert_eq!(refs::update_packed(&r, &[swap("refs/remotes/o/b")]).unwrap().expect("written").left, [0]);
    std::fs::write(&config, text).unwrap();
    let linked = repo.dir.with_extension("linked");
    let ok = std::process::Command::new("git")
        .args(["-C", bare.to_str().unwrap(), "worktree", "add", "-q", linked.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(ok.success());
    let r = Repo::open(&linked).expect("open");
    assert_eq!(refs::update_packed(&r, &[swap("refs/remotes/o/c")]).unwrap().expect("written").left, [0]);
}

/// Swaps creating `names`, each at `id`.
fn creations(names: &[String], id: gix::ObjectId) -> Vec<Swap> {
    names.iter().map(|n| creation(n.as_str(), id)).collect()
}

#[test]
fn a_ref_deleted_in_another_process_while_refs_are_packed_takes_none_of_them_with_it() {
    crate::common::lib_env!();
    let (repo, _, head) = two_commits();
    let doomed: Vec<String> = (0..300).map(|k| format!("refs/boulder/claims/o/d{k}")).collect();
    let r = Repo::open(&repo.dir).expect("open");
    refs::update_packed(&r, &creations(&doomed, head)).unwrap().expect("written");
    // Another process deletes them one by one (a handle of its own each time, as each command
    // is), while this one packs new refs, one rewrite each.
    let dir = repo.dir.clone();
    let deleter = std::thread::spawn(move || {
        for name in &doomed {
            let r = Repo::open(&dir).expect("open");
            refs::delete(&r, name, head).expect("deleted");
        }
    });
    let mut written = Vec::new();
    for j in 0..300 {
        let name = vec![format!("refs/boulder/boulders/y{j}")];
        let moved = refs::update_packed(&r, &creations(&name, head)).unwrap().expect("written");
        assert!(moved.left.is_empty() && moved.raced.is_empty());
        written.extend(name);
    }
    deleter.join().unwrap();
    let there = repo.refs("refs/boulder/boulders");
    let lost: Vec<&String> = written.iter().filter(|w| !there.contains(w)).collect();
    assert!(lost.is_empty(), "{} of {} packed refs lost to a deletion: {lost:?}", lost.len(), written.len());
    assert_eq!(repo.refs("refs/boulder/claims"), Vec::<String>::new());
    repo.assert_fsck();
}

#[test]
fn a_deletion_takes_the_packed_line_the_loose_file_and_the_reflog_and_only_from_what_it_expected() {
    crate::common::lib_env!();
    let (repo, first, second) = two_commits();
    let (first, second) = (first.to_string(), second.to_string());
    let id = |hex: &str| gix::ObjectId::from_hex(hex.as_bytes()).unwrap();
    // Packed at `first`, loose at `second` on top, with a reflog: deleting it must not let the
    // packed value show through.
    repo.git(&["update-ref", "refs/boulder/claims/o/both", &first]).ok();
    repo.git(&["pack-refs", "--all"]).ok();
    repo.git(&["update-ref", "--create-reflog", "refs/boulder/claims/o/both", &second]).ok();
    repo.git(&["update-ref", "refs/boulder/claims/o/packed", &first]).ok();
    repo.git(&["pack-refs", "--all"]).ok();
    let git_dir = repo.dir.join(".git");
    assert!(git_dir.join("logs/refs/boulder/claims/o/both").is_file());
    let r = Repo::open(&repo.dir).expect("open");

    // Not what it holds: refused, nothing changed.
    assert!(refs::delete(&r, "refs/boulder/claims/o/both", id(&first)).is_err());
    assert!(refs::delete(&r, "refs/boulder/claims/o/gone", id(&first)).is_err());
    assert_eq!(repo.git_out(&["rev-parse", "refs/boulder/claims/o/both"]), second);

    refs::delete(&r, "refs/boulder/claims/o/both", id(&second)).expect("deleted");
    assert_eq!(repo.refs("refs/boulder/claims"), ["refs/boulder/claims/o/packed"]);
    assert!(!std::fs::read_to_string(git_dir.join("packed-refs")).unwrap().contains("claims/o/both"));
    assert!(!git_dir.join("logs/refs/boulder/claims/o/both").exists(), "its reflog goes with it");
    refs::delete(&r, "refs/boulder/claims/o/packed", id(&first)).expect("deleted");
    assert_eq!(repo.refs("refs/boulder/claims"), Vec::<String>::new());
    // No lock, no empty folder left behind; git and gix agree.
    assert!(!git_dir.join("refs/boulder/claims").exists() && !git_dir.join("logs/refs/boulder/claims").exists());
    assert!(!git_dir.join("packed-refs.lock").exists());
    assert_eq!(r.ref_id("refs/boulder/claims/o/packed").unwrap(), None);
    repo.assert_fsck();
}

#[test]
fn a_packed_refs_lock_a_killed_writer_left_stops_the_pull_at_once_with_the_fix() {
    crate::common::lib_env!();
    let (remote, far) = far_with_boulders(|_| {});
    let near = remote.machine("near");
    near.git(&["pack-refs", "--all"]).ok();
    let lock = near.dir.join(".git/packed-refs.lock");
    std::fs::write(&lock, b"").unwrap();
    near.command("touch").args(["-d", "-1 minute"]).arg(&lock).status().unwrap();
    let started = std::time::Instant::now();
    let r = near.boulder(&["pull", "origin"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("a_packed_refs_lock_a_killed_writer_left_stops_the_pull_at_once_with_the_fix", r);
    assert!(!r.stderr.contains("failed validation"), "{}", r.stderr);
    // Once, not a wait per ref (git's one-second timeout each, 10 refs here).
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(near.refs("refs/boulder"), Vec::<String>::new());
    std::fs::remove_file(&lock).unwrap();
    pull(&near, 0);
    same_as_far(&near, &far);
}
