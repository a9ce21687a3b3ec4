//! Repository formats git-boulder does not read (reftable refs, SHA-256 object ids): every command
//! is refused up front with exit 2 naming the format, nothing is written (no ref file git cannot
//! see), and hooks installed before fail safe — post-commit warns once, pre-push under
//! `ownership: error` refuses and names `git push --no-verify`.

use crate::common::*;

/// The sample repository, made again in `format` (`--ref-format=reftable` or
/// `--object-format=sha256`).
fn sample_in(format: &str) -> TestRepo {
    let repo = TestRepo::empty();
    std::fs::remove_dir_all(repo.dir.join(".git")).unwrap();
    repo.git(&["init", "-q", "-b", "main", format]).ok();
    for (p, c) in [
        (".agents/tasks/prd.md", SAMPLE_PRD),
        (".boulder/streams.yaml", SAMPLE_PLAN),
        ("src/auth/mod.rs", "// auth\n"),
        ("src/api/mod.rs", "// api\n"),
    ] {
        repo.write(p, c);
    }
    repo.commit_all("initial");
    repo
}

/// Every file under `.git/refs` (a loose ref git would not see in a reftable repository).
fn loose_refs(repo: &TestRepo) -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo.dir.join(".git/refs"), &mut out);
    out
}

#[track_caller]
fn refused_naming(r: Run, words: &[&str]) {
    let r = r.code(2);
    for w in words {
        assert!(r.stderr.contains(w), "stderr lacks {w:?}:\n{}", r.stderr);
    }
    assert!(!r.stderr.contains("not a git repository"), "{}", r.stderr);
}

fn refused_everywhere(repo: &TestRepo, words: &[&str]) {
    let sub = repo.dir.join("src/auth");
    for args in [&["stream", "init", "auth"][..], &["status"], &["hooks", "install"], &["doctor"], &["stream", "list"]]
    {
        refused_naming(repo.boulder(args), words);
        refused_naming(repo.boulder_in(&sub, args), words);
    }
    // Nothing was written: no state ref (in git's eyes or as a loose file), no worktree, no hook.
    assert_eq!(repo.refs("refs/boulder/"), Vec::<String>::new());
    assert_eq!(repo.git_out(&["notes", "--ref=boulder", "list"]), "");
    assert!(!repo.dir.join(".boulder/worktrees").exists());
    assert_eq!(repo.git_out(&["worktree", "list", "--porcelain"]).matches("worktree ").count(), 1);
    assert!(!repo.dir.join(".git/hooks/post-commit").exists());
    assert!(!repo.dir.join(".git/boulder").exists());
    assert!(loose_refs(repo).iter().all(|p| !p.contains("boulder")), "{:?}", loose_refs(repo));
}

#[test]
fn reftable_repositories_are_refused_up_front() {
    let repo = sample_in("--ref-format=reftable");
    assert_eq!(repo.git_out(&["rev-parse", "--show-ref-format"]), "reftable");
    refused_everywhere(
        &repo,
        &["reftable", "extensions.refStorage", "git refs migrate", "git clone --ref-format=files --no-local"],
    );
    repo.assert_fsck();
}

#[test]
fn sha256_repositories_are_refused_up_front() {
    let repo = sample_in("--object-format=sha256");
    assert_eq!(repo.git_out(&["rev-parse", "--show-object-format"]), "sha256");
    refused_everywhere(&repo, &["sha256", "extensions.objectFormat"]);
    repo.assert_fsck();
}

fn bare_remote(repo: &TestRepo, format: &str) {
    let bare = repo.tmp.path().join("remote.git");
    repo.git(&["init", "-q", "--bare", format, bare.to_str().unwrap()]).ok();
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]).ok();
    repo.git(&["push", "-q", "--no-verify", "origin", "main"]).ok();
}

/// Hooks installed, then the repository becomes one git-boulder cannot read.
fn check_hooks_fail_safe(repo: &TestRepo, format: &str) {
    // post-commit: one warning line naming the format; the commit is made.
    repo.write("src/api/x.rs", "x\n");
    repo.git(&["add", "-A"]).ok();
    let r = repo.git(&["commit", "-q", "-m", "x"]).ok();
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("post-commit") && r.stderr.contains(format), "{}", r.stderr);
    assert_eq!(repo.git_out(&["log", "-1", "--format=%s"]), "x");

    // pre-push under the default `ownership: error`: refused, naming the format and the bypass.
    let r = repo.git(&["push", "-q", "origin", "main"]);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains(format) && r.stderr.contains("git push --no-verify"), "{}", r.stderr);
    assert_ne!(repo.git_out(&["rev-parse", "HEAD"]), repo.git_out(&["ls-remote", "origin", "refs/heads/main"]));
    repo.git(&["push", "-q", "--no-verify", "origin", "main"]).ok();

    // Under `ownership: warn` the push goes on with the warning.
    let plan = repo.read(".boulder/streams.yaml").replace("settings:\n", "settings:\n  ownership: warn\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("warn");
    let r = repo.git(&["push", "-q", "origin", "main"]).ok();
    assert!(r.stderr.contains("pre-push") && r.stderr.contains(format), "{}", r.stderr);
    assert!(repo
        .git_out(&["ls-remote", "origin", "refs/heads/main"])
        .starts_with(&repo.git_out(&["rev-parse", "HEAD"])));
}

#[test]
fn hooks_fail_safe_after_a_migration_to_reftable() {
    let repo = sample();
    bare_remote(&repo, "--object-format=sha1");
    repo.boulder(&["hooks", "install"]).ok();
    // git 2.47 does not migrate reflogs yet.
    std::fs::remove_dir_all(repo.dir.join(".git/logs")).unwrap();
    repo.git(&["refs", "migrate", "--ref-format=reftable"]).ok();
    assert_eq!(repo.git_out(&["rev-parse", "--show-ref-format"]), "reftable");
    check_hooks_fail_safe(&repo, "reftable");
    assert_eq!(repo.refs("refs/boulder/"), Vec::<String>::new());
    assert!(loose_refs(&repo).iter().all(|p| !p.contains("boulder")), "{:?}", loose_refs(&repo));
}

#[test]
fn hooks_fail_safe_in_a_sha256_repository() {
    // Shims installed by git-boulder in a SHA-1 repository, copied as they are into a SHA-256 one.
    let donor = sample();
    donor.boulder(&["hooks", "install"]).ok();
    let repo = sample_in("--object-format=sha256");
    bare_remote(&repo, "--object-format=sha256");
    for h in ["post-commit", "post-rewrite", "pre-push"] {
        std::fs::copy(donor.dir.join(".git/hooks").join(h), repo.dir.join(".git/hooks").join(h)).unwrap();
    }
    check_hooks_fail_safe(&repo, "sha256");
}

/// A blobless partial clone (`git clone --filter=blob:none`): what git fetches on demand
/// (state files, a stream branch's files, a merge's ancestors) git-boulder fetches too, in one
/// batch from the promisor remote, and every command works as in a full clone.
#[test]
fn a_blobless_partial_clone_fetches_what_it_reads() {
    let remote = Remote::new(&[
        (".agents/tasks/prd.md", SAMPLE_PRD),
        (".boulder/streams.yaml", SAMPLE_PLAN),
        ("src/auth/mod.rs", "1\n2\n3\n4\n5\n6\n7\n8\n"),
    ]);
    let bare = remote.bare.to_str().unwrap();
    let a = remote.machine("a");
    a.git(&["--git-dir", bare, "config", "uploadpack.allowFilter", "true"]).ok();
    a.git(&["--git-dir", bare, "config", "uploadpack.allowAnySHA1InWant", "true"]).ok();
    a.boulder(&["stream", "init"]).ok();
    let w = a.worktree("auth");
    let edited = |first: &str, last: &str| format!("{first}\n2\n3\n4\n5\n6\n7\n{last}\n");
    std::fs::write(w.join("src/auth/mod.rs"), edited("stream", "8")).unwrap();
    a.git_in(&w, &["commit", "-qam", "auth: edit"]).ok();
    a.git(&["push", "-q", "origin", "boulder/auth"]).ok();
    a.write("src/auth/mod.rs", &edited("1", "base"));
    a.commit_all("base edit");
    a.git(&["push", "-q", "origin", "main"]).ok();
    a.boulder(&["prd", "done", "US-001"]).ok();
    a.boulder(&["push"]).ok();

    let b = TestRepo::clone_with(&format!("file://{bare}"), "b", &["--filter=blob:none"]);
    b.git(&["config", "boulder.actor", "b"]).ok();
    // The state's files came with it, so nothing was refused.
    let r = b.boulder(&["pull"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(b.stream_state("auth")["status"], "INITIALIZED");
    // The stream branch's files, for its worktree.
    b.git(&["branch", "-q", "boulder/auth", "origin/boulder/auth"]).ok();
    b.boulder(&["--trust", "stream", "init", "auth"]).ok();
    assert!(std::fs::read_to_string(b.worktree("auth").join("src/auth/mod.rs")).unwrap().starts_with("stream\n"));
    // The merge's ancestor (the file as both sides found it).
    let r = b.boulder(&["stream", "merge", "auth", "--force"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(b.read("src/auth/mod.rs"), edited("stream", "base"));
    b.assert_fsck();
}

/// `core.sharedRepository=group` (`git init --shared=group`): what git-boulder writes — refs,
/// their folders and logs, notes, its own files — is group-writable as git makes its own, so
/// every member of the group can go on writing; objects and packs stay read-only, as git's.
#[test]
fn a_shared_repository_gets_group_writable_files_and_folders() {
    let repo = TestRepo::empty();
    std::fs::remove_dir_all(repo.dir.join(".git")).unwrap();
    repo.git(&["init", "-q", "-b", "main", "--shared=group"]).ok();
    for (p, c) in
        [(".agents/tasks/prd.md", SAMPLE_PRD), (".boulder/streams.yaml", SAMPLE_PLAN), ("src/auth/mod.rs", "x\n")]
    {
        repo.write(p, c);
    }
    repo.commit_all("initial");
    repo.boulder(&["stream", "init"]).ok();
    commit_in(&repo, &repo.worktree("auth"), "src/auth/a.rs", "a\n", "auth: a");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    repo.boulder(&["gc"]).ok();
    fn walk(dir: &std::path::Path, out: &mut Vec<(String, u32)>) {
        use std::os::unix::fs::PermissionsExt;
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            out.push((p.display().to_string(), m.permissions().mode()));
            if m.is_dir() {
                walk(&p, out);
            }
        }
    }
    let mut all = Vec::new();
    for sub in ["refs", "logs", "boulder", "objects", "worktrees"] {
        walk(&repo.dir.join(".git").join(sub), &mut all);
    }
    // Objects and packs are read-only, and git leaves COMMIT_EDITMSG as the umask makes it.
    let read_only =
        |p: &str| p.contains("/objects/") && !std::path::Path::new(p).is_dir() || p.ends_with("COMMIT_EDITMSG");
    let bad: Vec<&(String, u32)> = all.iter().filter(|(p, m)| !read_only(p) && m & 0o020 == 0).collect();
    assert!(bad.is_empty(), "not group-writable: {bad:?}");
    assert!(all.iter().any(|(p, _)| p.ends_with("refs/boulder/streams/auth")), "{all:?}");
    assert!(all.iter().any(|(p, _)| p.ends_with("refs/notes/boulder")), "{all:?}");
}
