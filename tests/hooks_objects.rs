//! The objects the post-commit hook writes (an op's blobs, tree and commit; the note's blob,
//! notes tree and commit): one small pack per commit that git reads and `git fsck --strict`
//! accepts, its objects stored whole (stored zlib streams, as git writes with
//! `core.looseCompression=0`), none left half-written; small packs rolled up by size tiers as
//! they gather; loose objects while a multi-pack-index exists; a lost race or a kill between the
//! pack and the refs leaves a consistent repository and the record complete.

use crate::common::*;

/// The loose object file of `id` in `repo`, if the object is loose.
fn loose_file(repo: &TestRepo, id: &str) -> Option<Vec<u8>> {
    std::fs::read(repo.dir.join(".git/objects").join(&id[..2]).join(&id[2..])).ok()
}

/// The pack indexes of `repo`, by path.
fn indexes(repo: &TestRepo) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(repo.dir.join(".git/objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    out.sort();
    out
}

/// The object ids `git verify-pack -v` lists for the pack of `idx` (which it verifies).
fn pack_ids(repo: &TestRepo, idx: &std::path::Path) -> Vec<String> {
    let out = repo.git_out(&["verify-pack", "-v", idx.to_str().unwrap()]);
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.len() == 40 && w.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
        .collect()
}

/// The ids of the objects of the last op of `op_ref` and of the last notes commit, the note of
/// `head` included.
fn record_ids(repo: &TestRepo, op_ref: &str, head: &str) -> Vec<String> {
    let op = repo.git_out(&["rev-parse", op_ref]);
    let notes = repo.git_out(&["rev-parse", "refs/notes/boulder"]);
    let op_tree = repo.git_out(&["rev-parse", &format!("{op}^{{tree}}")]);
    vec![
        repo.git_out(&["rev-parse", &format!("{op_tree}:op.json")]),
        repo.git_out(&["rev-parse", &format!("{op_tree}:state.json")]),
        op_tree,
        op,
        repo.git_out(&["rev-parse", &format!("refs/notes/boulder:{head}")]),
        repo.git_out(&["rev-parse", &format!("{notes}^{{tree}}")]),
        notes,
    ]
}

fn hooked_stream() -> (TestRepo, std::path::PathBuf) {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    (repo, wt)
}

fn head_of(repo: &TestRepo, wt: &std::path::Path) -> String {
    repo.git_in(wt, &["rev-parse", "HEAD"]).ok().stdout.trim().to_string()
}

fn note_of(repo: &TestRepo, commit: &str) -> serde_json::Value {
    let note = repo.git(&["notes", "--ref", "boulder", "show", commit]).ok().stdout;
    serde_json::from_str(note.trim()).unwrap()
}

#[test]
fn hook_objects_are_one_pack_git_reads() {
    let (repo, wt) = hooked_stream();
    for i in 0..3 {
        commit_in(&repo, &wt, "src/auth/login.rs", format!("// login {i}\n"), &format!("login {i}"));
    }
    let head = head_of(&repo, &wt);

    // The note, through plain git.
    let note = note_of(&repo, &head);
    assert_eq!(note["stream"], "auth");
    assert_eq!(note["iteration"], 3);

    // Every object of the last record is in one pack, and none is loose; git verifies the pack.
    let ids = record_ids(&repo, "refs/boulder/boulders/auth", &head);
    for id in &ids {
        assert!(loose_file(&repo, id).is_none(), "{id} is loose");
        repo.git(&["cat-file", "-e", id]).ok();
    }
    let holding: Vec<_> = indexes(&repo).into_iter().filter(|idx| pack_ids(&repo, idx).contains(&ids[3])).collect();
    assert_eq!(holding.len(), 1, "the op commit is in one pack: {holding:?}");
    let mut listed = pack_ids(&repo, &holding[0]);
    let mut want = ids.clone();
    listed.sort();
    want.sort();
    assert_eq!(listed, want, "the pack holds exactly the record's seven objects");

    // Its objects are stored whole: after the pack header and the first entry's type and size,
    // a zlib stream of stored blocks (78 01, then a block header with BTYPE 00).
    let pack = std::fs::read(holding[0].with_extension("pack")).unwrap();
    assert_eq!(&pack[..8], b"PACK\0\0\0\x02");
    let mut at = 12;
    while pack[at] & 0x80 != 0 {
        at += 1;
    }
    assert_eq!(&pack[at + 1..at + 3], &[0x78, 0x01]);
    assert_eq!(pack[at + 3] & 0b110, 0, "not a stored block");

    let state: serde_json::Value =
        serde_json::from_str(&repo.git_out(&["cat-file", "-p", "refs/boulder/boulders/auth:state.json"])).unwrap();
    assert_eq!(state["iteration"], 3);

    // Nothing half-written is left behind, and no `.keep` once the refs have moved.
    for entry in std::fs::read_dir(repo.dir.join(".git/objects/pack")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with("tmp_") && !name.ends_with(".keep"), "left behind: {name}");
    }
    repo.assert_fsck();
}

#[test]
fn small_packs_are_rolled_up_and_gc_packs_them_all() {
    let (repo, wt) = hooked_stream();
    let before = indexes(&repo).len();
    let mut most = 0;
    for i in 0..20 {
        commit_in(&repo, &wt, "src/auth/login.rs", format!("// login {i}\n"), &format!("login {i}"));
        most = most.max(indexes(&repo).len() - before);
    }
    assert!((2..=8).contains(&most), "small packs gather, and are rolled up before there are many: saw {most}");
    assert!(indexes(&repo).len() - before < 8);
    let head = head_of(&repo, &wt);
    assert_eq!(note_of(&repo, &head)["iteration"], 20);
    assert_eq!(repo.git_out(&["notes", "--ref=boulder", "list"]).lines().count(), 20);
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 20);
    let log = repo.boulder_in(&wt, &["log", "auth"]).ok().stdout;
    assert_eq!(log.lines().filter(|l| l.contains("activity")).count(), 20, "{log}");
    repo.assert_fsck();

    // `git boulder gc` rolls up every small pack: at most the state pack and the rolled-up one.
    let mut extra = 0;
    while indexes(&repo).len() - before < 2 {
        extra += 1;
        commit_in(&repo, &wt, "src/auth/login.rs", format!("// more {extra}\n"), &format!("more {extra}"));
    }
    let small = indexes(&repo).len() - before;
    let gc = repo.boulder(&["gc", "--json"]).ok().json();
    assert_eq!(gc["rolled_up"].as_u64(), Some(small as u64), "{gc}");
    assert!(indexes(&repo).len() <= 2, "{:?}", indexes(&repo));
    for idx in indexes(&repo) {
        pack_ids(&repo, &idx);
    }
    repo.assert_fsck();
    // And git's own gc takes them as any pack.
    repo.git(&["gc", "-q"]).ok();
    repo.assert_fsck();
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 20 + extra);
    assert_eq!(note_of(&repo, &head)["iteration"], 20);
}

#[test]
fn a_multi_pack_index_keeps_hook_objects_loose() {
    let (repo, wt) = hooked_stream();
    commit_in(&repo, &wt, "src/auth/login.rs", "// login\n", "login");
    repo.git(&["repack", "-a", "-d", "-q", "--write-midx"]).ok();
    assert!(repo.dir.join(".git/objects/pack/multi-pack-index").exists());
    let packs = indexes(&repo);
    commit_in(&repo, &wt, "src/auth/login.rs", "// login 2\n", "login 2");
    let head = head_of(&repo, &wt);
    for id in record_ids(&repo, "refs/boulder/boulders/auth", &head) {
        assert!(loose_file(&repo, &id).is_some(), "{id} is not loose");
    }
    assert_eq!(indexes(&repo), packs, "no pack is added or removed beside a multi-pack-index");
    assert_eq!(note_of(&repo, &head)["iteration"], 2);
    repo.assert_fsck();
}

/// `git commit` in `wt` with extra environment for its hooks.
fn commit_with(repo: &TestRepo, wt: &std::path::Path, file: &str, msg: &str, env: &[(&str, &str)]) -> Run {
    std::fs::write(wt.join(file), format!("// {msg}\n")).unwrap();
    repo.git_in(wt, &["add", "-A"]).ok();
    let mut cmd = repo.command("git");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Run::from(cmd.args(["commit", "-q", "-m", msg]).current_dir(wt).output().unwrap())
}

#[test]
fn a_ref_moved_between_the_pack_and_the_refs_is_appended_to_again() {
    let (repo, wt) = hooked_stream();
    commit_in(&repo, &wt, "src/auth/a.rs", "// a\n", "a");
    // An unrecorded commit, which `record` records while the next commit's hook has written its
    // pack and not yet moved a ref: both op-log and notes ref move under it.
    commit_with(&repo, &wt, "src/auth/b.rs", "b", &[("BOULDER_SKIP_HOOKS", "1")]).ok();
    let b = head_of(&repo, &wt);
    let record = format!("BOULDER_FAILPOINT_RUN= '{}' record {b}", bin());
    commit_with(
        &repo,
        &wt,
        "src/auth/c.rs",
        "c",
        &[("BOULDER_FAILPOINT_RUN", "record-packed"), ("BOULDER_FAILPOINT_CMD", &record)],
    )
    .ok();
    let c = head_of(&repo, &wt);
    assert_eq!(note_of(&repo, &b)["iteration"], 2, "recorded meanwhile");
    assert_eq!(note_of(&repo, &c)["iteration"], 3, "appended again on the moved tip");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 3);
    assert_eq!(repo.git_out(&["notes", "--ref=boulder", "list"]).lines().count(), 3);
    repo.assert_fsck();
}

#[test]
fn a_hook_killed_between_the_pack_and_the_refs_leaves_the_repository_consistent() {
    let (repo, wt) = hooked_stream();
    commit_in(&repo, &wt, "src/auth/a.rs", "// a\n", "a");
    let tip = repo.git_out(&["rev-parse", "refs/boulder/boulders/auth"]);
    let notes = repo.git_out(&["rev-parse", "refs/notes/boulder"]);
    // The commit is made; its hook dies with its pack written and no ref moved.
    commit_with(&repo, &wt, "src/auth/b.rs", "b", &[("BOULDER_FAILPOINT", "record-packed")]).ok();
    let b = head_of(&repo, &wt);
    assert_eq!(repo.git_out(&["rev-parse", "refs/boulder/boulders/auth"]), tip);
    assert_eq!(repo.git_out(&["rev-parse", "refs/notes/boulder"]), notes);
    repo.assert_fsck();
    // Rerunning finishes the job: `record` records what the hook did not.
    repo.boulder_in(&wt, &["record"]).ok();
    assert_eq!(note_of(&repo, &b)["iteration"], 2);
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 2);
    repo.assert_fsck();
}

/// Ctrl-C reaches the hook with its git command (one process group): the hook finishes its
/// record rather than die between the locks it takes, which would stay and block every later ref
/// update.
#[test]
fn an_interrupt_in_the_middle_of_the_hook_lets_it_finish() {
    let (repo, wt) = hooked_stream();
    commit_in(&repo, &wt, "src/auth/a.rs", "// a\n", "a");
    let r = commit_with(
        &repo,
        &wt,
        "src/auth/b.rs",
        "b",
        &[("BOULDER_FAILPOINT_RUN", "record-packed"), ("BOULDER_FAILPOINT_CMD", "kill -INT $PPID")],
    );
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    let b = head_of(&repo, &wt);
    assert_eq!(note_of(&repo, &b)["iteration"], 2, "recorded though interrupted");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 2);
    repo.assert_fsck();
}

#[test]
fn a_repack_between_the_pack_and_the_refs_drops_nothing_the_refs_name() {
    let (repo, wt) = hooked_stream();
    commit_in(&repo, &wt, "src/auth/a.rs", "// a\n", "a");
    // `git repack -a -d` drops unreachable objects in packs; the hook's pack keeps a `.keep`
    // until its refs have moved, as a fetch's pack does.
    commit_with(
        &repo,
        &wt,
        "src/auth/b.rs",
        "b",
        &[
            ("BOULDER_FAILPOINT_RUN", "record-packed"),
            // The `.keep` is a second name of the pack's index (one file fewer to create).
            (
                "BOULDER_FAILPOINT_CMD",
                "cd \"$(git rev-parse --git-common-dir)/objects/pack\" && for k in *.keep; do \
                 [ \"$(stat -c %i \"$k\")\" = \"$(stat -c %i \"${k%.keep}.idx\")\" ] && echo linked; \
                 done > ../../keeps.txt; git repack -a -d -q",
            ),
        ],
    )
    .ok();
    let linked = std::fs::read_to_string(repo.dir.join(".git/keeps.txt")).unwrap();
    assert_eq!(linked, "linked\n", "one .keep, the index's second name");
    let b = head_of(&repo, &wt);
    repo.assert_fsck();
    assert_eq!(note_of(&repo, &b)["iteration"], 2);
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 2);
    repo.git(&["log", "--oneline", "refs/boulder/boulders/auth"]).ok();
    let keeps: Vec<_> = std::fs::read_dir(repo.dir.join(".git/objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".keep"))
        .collect();
    assert!(keeps.is_empty(), "{keeps:?}");
}

#[test]
fn an_incremental_multi_pack_index_keeps_hook_objects_loose() {
    let (repo, wt) = hooked_stream();
    for i in 0..3 {
        commit_in(&repo, &wt, "src/auth/login.rs", format!("// login {i}\n"), &format!("login {i}"));
    }
    let midx = repo.git(&["multi-pack-index", "write", "--incremental"]);
    if midx.code != 0 {
        // `--incremental` came with git 2.47: an older git refuses it, a newer one must not.
        let version = repo.git_out(&["--version"]);
        let numbers: Vec<u32> = version
            .trim_start_matches("git version ")
            .split('.')
            .take(2)
            .map(|n| n.parse().unwrap_or_else(|_| panic!("a git version: {version}")))
            .collect();
        assert!(numbers < vec![2, 47], "{version} refused an incremental multi-pack-index:\n{}", midx.stderr);
        eprintln!("skipped: {version} writes no incremental multi-pack-index");
        return;
    }
    let packs = indexes(&repo);
    for i in 3..12 {
        commit_in(&repo, &wt, "src/auth/login.rs", format!("// login {i}\n"), &format!("login {i}"));
    }
    assert_eq!(indexes(&repo), packs, "no pack is added or removed beside a multi-pack-index chain");
    let head = head_of(&repo, &wt);
    assert_eq!(note_of(&repo, &head)["iteration"], 12);
    repo.git(&["multi-pack-index", "verify"]).ok();
    repo.assert_fsck();
}

#[test]
fn a_pack_of_deltas_git_wrote_is_never_rolled_up() {
    let (repo, wt) = hooked_stream();
    // A pack git wrote uncompressed (as `pack.compression=0` does), of deltas: it looks like the
    // hook's at its first bytes, and would come out many times larger rolled up.
    repo.git(&["config", "core.compression", "0"]).ok();
    let body: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    for i in 0..30 {
        repo.write("docs/big.md", &format!("{body}edit {i}\n"));
        repo.commit_all(&format!("edit {i}"));
    }
    repo.git(&["repack", "-a", "-d", "-q"]).ok();
    let theirs = indexes(&repo);
    assert_eq!(theirs.len(), 1);
    let stats = repo.git_out(&["verify-pack", "-v", theirs[0].to_str().unwrap()]);
    assert!(stats.contains("chain length"), "the pack holds deltas:\n{stats}");
    for i in 0..10 {
        commit_in(&repo, &wt, "src/auth/login.rs", format!("// login {i}\n"), &format!("login {i}"));
    }
    repo.boulder(&["gc"]).ok();
    assert!(indexes(&repo).contains(&theirs[0]), "git's pack is left as it was");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 10);
    repo.assert_fsck();
}

#[test]
fn what_a_killed_writer_leaves_in_the_pack_folder_is_cleaned_up() {
    let (repo, wt) = hooked_stream();
    for i in 0..3 {
        commit_in(&repo, &wt, "src/auth/login.rs", format!("// login {i}\n"), &format!("login {i}"));
    }
    let pack = repo.dir.join(".git/objects/pack");
    let ours = "git-boulder: the objects of a record whose refs are moving\n";
    // A hook killed between renaming its pack and its index: the pack and its `.keep`.
    let orphan = pack.join(format!("pack-{}.pack", "1".repeat(40)));
    std::fs::write(&orphan, b"PACK\0\0\0\x02\0\0\0\0").unwrap();
    let orphan_keep = orphan.with_extension("keep");
    std::fs::write(&orphan_keep, ours).unwrap();
    // A hook killed before its refs moved: a whole pack and its `.keep`, a second name of the
    // index as the hook makes it.
    let stale = indexes(&repo)[0].with_extension("keep");
    std::fs::hard_link(indexes(&repo)[0].clone(), &stale).unwrap();
    // Somebody else's `.keep`, and a pack without an index and without our `.keep` (git's own,
    // between its renames, for all a roll-up can tell).
    let theirs = pack.join(format!("pack-{}.keep", "2".repeat(40)));
    std::fs::write(&theirs, "kept by someone else\n").unwrap();
    let unknown = pack.join(format!("pack-{}.pack", "3".repeat(40)));
    std::fs::write(&unknown, b"PACK\0\0\0\x02\0\0\0\0").unwrap();
    for f in [&orphan, &orphan_keep, &stale, &theirs, &unknown] {
        repo.command("touch").args(["-d", "1 hour ago"]).arg(f).status().unwrap();
    }
    // The next commit's hook cleans up; so would `git boulder gc`.
    commit_in(&repo, &wt, "src/auth/login.rs", "// login 3\n", "login 3");
    assert!(!orphan.exists() && !orphan_keep.exists(), "the killed hook's pack without an index goes, with its .keep");
    assert!(!stale.exists(), "the hook's stale .keep is removed");
    assert!(theirs.exists(), "a .keep of someone else's stays");
    assert!(unknown.exists(), "a pack that may be git's own stays");
    let head = head_of(&repo, &wt);
    assert_eq!(note_of(&repo, &head)["iteration"], 4);
    std::fs::remove_file(&theirs).unwrap();
    std::fs::remove_file(&unknown).unwrap();
    repo.boulder(&["gc"]).ok();
    let count = repo.git_out(&["count-objects", "-v"]);
    assert!(count.contains("garbage: 0"), "{count}");
    repo.assert_fsck();
}

/// `git ARGS` in `repo` with `input` on its standard input: its output, trimmed.
fn git_with_input(repo: &TestRepo, args: &[&str], input: &[u8]) -> String {
    use std::io::Write as _;
    let mut child = repo
        .command("git")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The trace line a record prints when it reads the newest small pack into memory.
const READ_NEWEST: &str = "the newest small pack read into memory: ";

#[test]
fn a_record_reads_what_the_last_record_packed_from_that_pack() {
    let (repo, wt) = hooked_stream();
    commit_in(&repo, &wt, "src/auth/a.rs", "// a\n", "a");
    let first = head_of(&repo, &wt);
    // The first record's pack: the stream's root boulder made and its first activity (an op's
    // blobs, tree and commit each), the note's blob, notes tree and commit.
    let newest = indexes(&repo).into_iter().max_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap()).unwrap();
    let packed = pack_ids(&repo, &newest).len();
    let r = commit_with(&repo, &wt, "src/auth/b.rs", "b", &[("BOULDER_TRACE", "1")]);
    assert!(r.stderr.contains(&format!("{READ_NEWEST}{packed} objects")), "{}", r.stderr);
    let second = head_of(&repo, &wt);
    assert_eq!(note_of(&repo, &first)["iteration"], 1);
    assert_eq!(note_of(&repo, &second)["iteration"], 2);
    let state = repo.state("refs/boulder/boulders/auth");
    assert_eq!((state["iteration"].as_u64(), state["last_commit"].as_str()), (Some(2), Some(second.as_str())));
    repo.assert_fsck();
}

#[test]
fn a_newest_pack_that_holds_deltas_is_not_read_whole_and_the_record_is_complete() {
    let (repo, wt) = hooked_stream();
    commit_in(&repo, &wt, "src/auth/a.rs", "// a\n", "a");
    // A small pack git wrote (two similar blobs, the second a delta of the first), newest of all.
    let body: String = (0..200).map(|i| format!("line {i}\n")).collect();
    let ids: Vec<String> = [body.clone(), format!("{body}one more\n")]
        .iter()
        .map(|b| git_with_input(&repo, &["hash-object", "-w", "--stdin"], b.as_bytes()))
        .collect();
    let list = format!("{}\n", ids.join("\n"));
    let name = git_with_input(&repo, &["pack-objects", "-q", ".git/objects/pack/pack"], list.as_bytes());
    let idx = repo.dir.join(format!(".git/objects/pack/pack-{name}.idx"));
    // Newest by its time whatever the file system's clock steps.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    std::fs::File::options().write(true).open(idx.with_extension("pack")).unwrap().set_modified(later).unwrap();
    assert!(repo.git_out(&["verify-pack", "-v", idx.to_str().unwrap()]).contains("chain length = 1"));
    let r = commit_with(&repo, &wt, "src/auth/b.rs", "b", &[("BOULDER_TRACE", "1")]);
    assert!(!r.stderr.contains(READ_NEWEST), "{}", r.stderr);
    let second = head_of(&repo, &wt);
    assert_eq!(note_of(&repo, &second)["iteration"], 2);
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 2);
    repo.assert_fsck();
}

#[test]
fn packs_that_land_while_the_hook_runs_do_not_run_its_object_store_out_of_room() {
    let (repo, wt) = hooked_stream();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let docs = repo.worktree("docs");
    commit_in(&repo, &wt, "src/auth/a.rs", "// a\n", "a");
    commit_in(&repo, &docs, "docs/a.md", "a\n", "docs a");
    // Once the hook has opened the repository: another worktree's commit moves the notes (its
    // hook packs them), then 60 packs of git's own land, newest of all.
    let script = repo.dir.join("land.sh");
    std::fs::write(
        &script,
        format!(
            "set -e\nunset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_COMMON_DIR GIT_PREFIX\ncd '{docs}'\necho b > docs/b.md\ngit add -A\nenv -u BOULDER_FAILPOINT_RUN git commit -q -m 'docs b'\n\
             for i in $(seq 60); do\n  id=$(echo \"blob $i\" | git hash-object -w --stdin)\n  \
             echo $id | git pack-objects -q \"$(git rev-parse --git-common-dir)/objects/pack/pack\" >/dev/null\ndone\n",
            docs = docs.display()
        ),
    )
    .unwrap();
    let cmd = format!("sh '{}'", script.display());
    let r = commit_with(
        &repo,
        &wt,
        "src/auth/b.rs",
        "b",
        &[("BOULDER_FAILPOINT_RUN", "hook-opened"), ("BOULDER_FAILPOINT_CMD", &cmd)],
    );
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    let b = head_of(&repo, &wt);
    assert_eq!(note_of(&repo, &b)["iteration"], 2);
    assert_eq!(note_of(&repo, &head_of(&repo, &docs))["iteration"], 2);
    repo.assert_fsck();
}
