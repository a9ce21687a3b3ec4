//! The worktree library (src/worktree.rs) against real repositories made with the git CLI: every
//! worktree it makes or removes must look right to plain git.

use std::path::{Path, PathBuf};

use crate::common::TestRepo;
use git_boulder::error::Kind;
use git_boulder::git::Repo;
use git_boulder::worktree::{self, AddOutcome};

fn sample() -> (TestRepo, Repo) {
    crate::common::assert_lib_env();
    let t = TestRepo::with_files(&[
        ("README.md", "# sample\n"),
        ("src/auth/mod.rs", "// auth\n"),
        ("src/api/mod.rs", "// api\n"),
        ("docs/deep/nested/guide.md", "guide\n"),
        (".gitignore", "*.log\n/build/\n"),
        ("run.sh", "#!/bin/sh\necho hi\n"),
    ]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(t.dir.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("README.md", t.dir.join("link.md")).unwrap();
    t.commit_all("executable and link");
    // The process has no identity (`lib_env!`); the repository has one, as a user's would.
    t.git(&["config", "user.name", "Test Committer"]).ok();
    t.git(&["config", "user.email", "committer@example.com"]).ok();
    let repo = Repo::open(&t.dir).unwrap();
    (t, repo)
}

fn porcelain(t: &TestRepo, dir: &Path) -> String {
    t.git_in(dir, &["status", "--porcelain"]).ok().stdout
}

/// `(path, branch)` of every worktree `git worktree list --porcelain` reports, plus whether any is
/// locked or prunable.
fn git_worktrees(t: &TestRepo) -> Vec<(String, Option<String>, bool)> {
    let out = t.git(&["worktree", "list", "--porcelain"]).ok().stdout;
    out.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|block| {
            let mut path = String::new();
            let mut branch = None;
            let mut flagged = false;
            for line in block.lines() {
                if let Some(p) = line.strip_prefix("worktree ") {
                    path = p.to_string();
                } else if let Some(b) = line.strip_prefix("branch ") {
                    branch = Some(b.to_string());
                } else if line.starts_with("locked") || line.starts_with("prunable") {
                    flagged = true;
                }
            }
            (path, branch, flagged)
        })
        .collect()
}

#[track_caller]
fn assert_good_worktree(t: &TestRepo, wt: &Path, branch: &str) {
    let list = git_worktrees(t);
    let entry = list.iter().find(|(p, _, _)| Path::new(p) == wt).unwrap_or_else(|| panic!("{wt:?} not in {list:?}"));
    assert_eq!(entry.1.as_deref(), Some(format!("refs/heads/{branch}").as_str()), "{list:?}");
    assert!(!entry.2, "worktree is locked or prunable: {list:?}");
    assert_eq!(list.iter().filter(|(p, _, _)| Path::new(p) == wt).count(), 1, "{list:?}");
    assert_eq!(porcelain(t, wt), "", "git status in the worktree must be clean");
    assert_eq!(std::fs::read_to_string(wt.join("docs/deep/nested/guide.md")).unwrap(), "guide\n");
    assert_eq!(std::fs::read_link(wt.join("link.md")).unwrap(), Path::new("README.md"));
    use std::os::unix::fs::PermissionsExt;
    assert!(std::fs::metadata(wt.join("run.sh")).unwrap().permissions().mode() & 0o111 != 0);
    let head = t.git_in(wt, &["rev-parse", "--abbrev-ref", "HEAD"]).ok().stdout;
    assert_eq!(head.trim(), branch);
    t.assert_fsck();
}

#[test]
fn add_makes_a_worktree_git_accepts_and_git_can_remove() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    let out = worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    assert!(
        matches!(out, AddOutcome::Created { branch_created: true, files, ref recovered } if files >= 6 && recovered.is_empty()),
        "{out:?}"
    );
    assert_good_worktree(&t, &wt, "boulder/auth");
    assert_eq!(t.git_out(&["rev-parse", "boulder/auth"]), t.git_out(&["rev-parse", "main"]));
    // The admin dir is named after the folder.
    assert!(t.dir.join(".git/worktrees/auth/gitdir").is_file());
    assert!(std::fs::read_to_string(wt.join(".git")).unwrap().contains(".git/worktrees/auth"));

    // Before the exclude the main worktree shows the worktree folder; after it, it is clean.
    assert!(porcelain(&t, &t.dir).contains(".boulder/"), "{}", porcelain(&t, &t.dir));
    assert!(worktree::exclude(&repo, ".boulder/worktrees").unwrap());
    assert_eq!(porcelain(&t, &t.dir), "");

    // What the library lists agrees with git.
    let list = worktree::list(&repo).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].path, wt);
    assert_eq!(list[0].branch.as_deref(), Some("boulder/auth"));
    assert_eq!(list[0].head.unwrap().to_string(), t.git_out(&["rev-parse", "main"]));
    assert_eq!(list[0].admin_id, "auth");
    assert!(!list[0].missing && !list[0].prunable && list[0].locked.is_none());

    // Work in it with plain git.
    std::fs::write(wt.join("src/auth/login.rs"), "// login\n").unwrap();
    t.git_in(&wt, &["add", "."]).ok();
    t.git_in(&wt, &["commit", "-q", "-m", "login"]).ok();
    assert_eq!(porcelain(&t, &wt), "");
    let ab = worktree::ahead_behind(
        &repo,
        repo.branch_tip("boulder/auth").unwrap().unwrap(),
        repo.branch_tip("main").unwrap().unwrap(),
    )
    .unwrap();
    assert_eq!(ab, (1, 0));

    t.git(&["worktree", "remove", wt.to_str().unwrap()]).ok();
    assert!(!wt.exists());
    assert!(!t.dir.join(".git/worktrees/auth").exists());
    assert!(worktree::list(&repo).unwrap().is_empty());
    t.assert_fsck();
}

#[test]
fn git_worktree_prune_forgets_a_deleted_worktree() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("api");
    worktree::add(&repo, &wt, "boulder/api", "main").unwrap();
    std::fs::remove_dir_all(&wt).unwrap();
    let list = worktree::list(&repo).unwrap();
    assert!(list[0].missing && list[0].prunable, "{list:?}");
    t.git(&["worktree", "prune"]).ok();
    assert!(worktree::list(&repo).unwrap().is_empty());
    assert_eq!(git_worktrees(&t).len(), 1);

    // And prune_missing does the same.
    worktree::add(&repo, &wt, "boulder/api", "main").unwrap();
    std::fs::remove_dir_all(&wt).unwrap();
    assert_eq!(worktree::prune_missing(&repo).unwrap(), vec!["api".to_string()]);
    assert_eq!(git_worktrees(&t).len(), 1);
    t.git(&["worktree", "prune"]).ok();
    t.assert_fsck();
}

#[test]
fn second_add_is_idempotent() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    let index = t.dir.join(".git/worktrees/auth/index");
    let before = std::fs::read(&index).unwrap();
    let mtime = std::fs::metadata(&index).unwrap().modified().unwrap();
    // Even with local work in it and the base moved on.
    std::fs::write(wt.join("README.md"), "changed\n").unwrap();
    t.write("new.txt", "x");
    t.commit_all("main moves");
    let again = worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    assert_eq!(again, AddOutcome::AlreadyPresent);
    assert_eq!(std::fs::read(&index).unwrap(), before);
    assert_eq!(std::fs::metadata(&index).unwrap().modified().unwrap(), mtime);
    assert_eq!(std::fs::read_to_string(wt.join("README.md")).unwrap(), "changed\n");
    assert_ne!(t.git_out(&["rev-parse", "boulder/auth"]), t.git_out(&["rev-parse", "main"]));
    // Also through a relative path.
    let cwd = std::env::current_dir().unwrap();
    let rel = pathdiff(&wt, &cwd);
    assert_eq!(worktree::add(&repo, &rel, "boulder/auth", "main").unwrap(), AddOutcome::AlreadyPresent);
}

fn pathdiff(path: &Path, base: &Path) -> PathBuf {
    let mut up = PathBuf::new();
    let mut b = base.to_path_buf();
    loop {
        if let Ok(rest) = path.strip_prefix(&b) {
            return up.join(rest);
        }
        up.push("..");
        if !b.pop() {
            return path.to_path_buf();
        }
    }
}

#[test]
fn an_existing_branch_is_reused_and_never_moved() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let old = t.git_out(&["rev-parse", "main"]);
    t.git(&["branch", "boulder/docs"]).ok();
    t.write("later.txt", "later\n");
    t.commit_all("later");
    let wt = t.worktree("docs");
    let out = worktree::add(&repo, &wt, "boulder/docs", "main").unwrap();
    assert!(matches!(out, AddOutcome::Created { branch_created: false, .. }), "{out:?}");
    assert_eq!(t.git_out(&["rev-parse", "boulder/docs"]), old);
    assert!(!wt.join("later.txt").exists());
    assert_good_worktree(&t, &wt, "boulder/docs");
    let ab = worktree::ahead_behind(
        &repo,
        repo.branch_tip("boulder/docs").unwrap().unwrap(),
        repo.branch_tip("main").unwrap().unwrap(),
    )
    .unwrap();
    assert_eq!(ab, (0, 1));
}

#[test]
fn a_branch_checked_out_elsewhere_is_refused() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let other = t.tmp.path().canonicalize().unwrap().join("elsewhere");
    t.git(&["worktree", "add", "-q", "-b", "boulder/auth", other.to_str().unwrap()]).ok();
    let wt = t.worktree("auth");
    let err = worktree::add(&repo, &wt, "boulder/auth", "main").unwrap_err();
    assert_eq!(err.kind, Kind::Refused, "{err:?}");
    assert!(err.message.contains(other.to_str().unwrap()), "{}", err.message);
    assert!(!err.hints.is_empty());
    assert!(!wt.exists());

    // The main worktree's branch too.
    let err = worktree::add(&repo, &t.worktree("m"), "main", "main").unwrap_err();
    assert_eq!(err.kind, Kind::Refused, "{err:?}");
    assert!(err.message.contains("main worktree"), "{}", err.message);
    assert_eq!(git_worktrees(&t).len(), 2);
    t.assert_fsck();
}

#[test]
fn a_folder_that_is_not_the_worktree_is_a_usage_error() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("notes.txt"), "mine\n").unwrap();
    let err = worktree::add(&repo, &wt, "boulder/auth", "main").unwrap_err();
    assert_eq!(err.kind, Kind::Usage, "{err:?}");
    assert!(err.message.contains(wt.to_str().unwrap()), "{}", err.message);
    assert!(err.hints.iter().any(|h| h.contains("move")), "{:?}", err.hints);
    assert_eq!(std::fs::read_to_string(wt.join("notes.txt")).unwrap(), "mine\n");
    assert!(!t.dir.join(".git/worktrees/auth").exists());

    // A worktree of another branch at the path.
    let api = t.worktree("api");
    worktree::add(&repo, &api, "boulder/api", "main").unwrap();
    let err = worktree::add(&repo, &api, "boulder/other", "main").unwrap_err();
    assert_eq!(err.kind, Kind::Usage, "{err:?}");
    assert!(err.message.contains("boulder/api"), "{}", err.message);

    // An empty folder is fine.
    std::fs::remove_file(wt.join("notes.txt")).unwrap();
    let out = worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    assert!(matches!(out, AddOutcome::Created { .. }));
    assert_good_worktree(&t, &wt, "boulder/auth");
}

#[test]
fn missing_base_or_no_commits_is_a_usage_error() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let err = worktree::add(&repo, &t.worktree("x"), "boulder/x", "develop").unwrap_err();
    assert_eq!(err.kind, Kind::Usage, "{err:?}");
    assert!(err.message.contains("develop"), "{}", err.message);
    assert!(!err.hints.is_empty());
    assert!(t.refs("refs/heads/boulder").is_empty());

    crate::common::assert_lib_env();
    let empty = TestRepo::empty();
    let repo = Repo::open(&empty.dir).unwrap();
    let err = worktree::add(&repo, &empty.dir.join("wt"), "boulder/x", "main").unwrap_err();
    assert_eq!(err.kind, Kind::Usage, "{err:?}");
    assert!(err.message.contains("no commits"), "{}", err.message);
    assert!(err.hints.iter().any(|h| h.contains("commit")), "{:?}", err.hints);
    let err = worktree::add(&repo, &empty.dir.join("wt"), "bad..name", "main").unwrap_err();
    assert_eq!(err.kind, Kind::Usage, "{err:?}");
}

// ---- killed-mid-add leftovers --------------------------------------------------------------

#[test]
fn killed_after_checkout_before_finishing_is_redone() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    // What a run killed during checkout leaves: still locked `initializing`, no index, some files.
    std::fs::write(t.dir.join(".git/worktrees/auth/locked"), "initializing\n").unwrap();
    std::fs::remove_file(t.dir.join(".git/worktrees/auth/index")).unwrap();
    std::fs::remove_dir_all(wt.join("docs")).unwrap();
    std::fs::write(wt.join("README.md"), "# samp").unwrap(); // half-written
    let out = worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    match &out {
        AddOutcome::Created { recovered, .. } => assert!(!recovered.is_empty(), "{out:?}"),
        other => panic!("{other:?}"),
    }
    assert_good_worktree(&t, &wt, "boulder/auth");
    assert_eq!(std::fs::read_to_string(wt.join("README.md")).unwrap(), "# sample\n");
    assert!(t.dir.join(".git/worktrees/auth").is_dir(), "admin id stays the stream name");
    assert_eq!(worktree::add(&repo, &wt, "boulder/auth", "main").unwrap(), AddOutcome::AlreadyPresent);
}

#[test]
fn killed_right_after_registration_is_redone() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    t.git(&["branch", "boulder/auth"]).ok();
    // gix's own half-made state (registration, `.git`, HEAD, no index, no files), kept as a kill would.
    let g = gix::open(&t.dir).unwrap();
    let prepared = g
        .prepare_add_worktree(
            &wt,
            gix::worktree::add::Head::Attached("refs/heads/boulder/auth".try_into().unwrap()),
            &std::sync::atomic::AtomicBool::new(false),
        )
        .unwrap();
    std::mem::forget(prepared);
    assert!(wt.join(".git").is_file());
    assert!(!wt.join("README.md").exists());
    let out = worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    assert!(
        matches!(out, AddOutcome::Created { branch_created: false, ref recovered, .. } if !recovered.is_empty()),
        "{out:?}"
    );
    assert_good_worktree(&t, &wt, "boulder/auth");
    assert!(t.dir.join(".git/worktrees/auth").is_dir());
    assert!(!t.dir.join(".git/worktrees/auth1").exists());
}

#[test]
fn killed_right_after_reserving_the_admin_dir_is_redone() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    std::fs::create_dir_all(t.dir.join(".git/worktrees/auth")).unwrap();
    std::fs::write(t.dir.join(".git/worktrees/auth/locked"), "initializing\n").unwrap();
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    assert_good_worktree(&t, &wt, "boulder/auth");
    assert!(std::fs::read_to_string(wt.join(".git")).unwrap().trim().ends_with("worktrees/auth"));
}

#[test]
fn admin_dir_without_its_folder_is_replaced() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    std::fs::remove_dir_all(&wt).unwrap();
    let out = worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    assert!(matches!(out, AddOutcome::Created { ref recovered, .. } if !recovered.is_empty()), "{out:?}");
    assert_good_worktree(&t, &wt, "boulder/auth");
    assert_eq!(git_worktrees(&t).len(), 2);
    assert!(!t.dir.join(".git/worktrees/auth1").exists());
}

#[test]
fn missing_index_and_files_are_restored_in_place() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    std::fs::remove_file(t.dir.join(".git/worktrees/auth/index")).unwrap();
    std::fs::remove_file(wt.join("src/api/mod.rs")).unwrap();
    std::fs::remove_dir_all(wt.join("docs")).unwrap();
    let out = worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    assert!(matches!(out, AddOutcome::Repaired { .. }), "{out:?}");
    assert_good_worktree(&t, &wt, "boulder/auth");

    // Existing files are never overwritten: a changed one shows as modified afterwards.
    std::fs::remove_file(t.dir.join(".git/worktrees/auth/index")).unwrap();
    std::fs::write(wt.join("README.md"), "local edit\n").unwrap();
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    assert_eq!(std::fs::read_to_string(wt.join("README.md")).unwrap(), "local edit\n");
    assert_eq!(porcelain(&t, &wt), " M README.md\n");
    assert!(worktree::dirty(&wt).unwrap());
}

#[test]
fn missing_dot_git_file_is_restored() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    std::fs::remove_file(wt.join(".git")).unwrap();
    let out = worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    assert!(matches!(out, AddOutcome::Repaired { .. }), "{out:?}");
    assert_good_worktree(&t, &wt, "boulder/auth");
}

// ---- dirt ------------------------------------------------------------------------------------

#[test]
fn dirty_agrees_with_git_status() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    let check = |label: &str| {
        let git_dirty = !porcelain(&t, &wt).is_empty();
        assert_eq!(worktree::dirty(&wt).unwrap(), git_dirty, "{label}: git says {:?}", porcelain(&t, &wt));
        // The fast path decides every one of these cases by itself, and agrees with git.
        let fast =
            git_boulder::worktree::dirty::decide(&repo, &wt, &git_boulder::worktree::dirty::Trees::default()).unwrap();
        assert_eq!(fast, Some(git_dirty), "{label} (fast path): git says {:?}", porcelain(&t, &wt));
        git_dirty
    };
    assert!(!check("clean"));
    std::fs::write(wt.join("debug.log"), "ignored\n").unwrap();
    std::fs::create_dir_all(wt.join("build/out")).unwrap();
    std::fs::write(wt.join("build/out/a.o"), "ignored\n").unwrap();
    std::fs::create_dir_all(wt.join("empty/dir")).unwrap();
    assert!(!check("ignored files and empty dirs only"));
    std::fs::write(wt.join("new.txt"), "untracked\n").unwrap();
    assert!(check("untracked file"));
    let d = worktree::dirt(&wt, 10).unwrap();
    assert_eq!(d.untracked, vec!["new.txt".to_string()]);
    std::fs::remove_file(wt.join("new.txt")).unwrap();
    std::fs::create_dir_all(wt.join("fresh/sub")).unwrap();
    std::fs::write(wt.join("fresh/sub/x.txt"), "x\n").unwrap();
    assert!(check("untracked dir"));
    std::fs::remove_dir_all(wt.join("fresh")).unwrap();
    assert!(!check("clean again"));
    std::fs::write(wt.join("src/auth/mod.rs"), "// changed\n").unwrap();
    assert!(check("modified"));
    t.git_in(&wt, &["add", "src/auth/mod.rs"]).ok();
    assert!(check("staged"));
    t.git_in(&wt, &["commit", "-q", "-m", "c"]).ok();
    assert!(!check("committed"));
    // git wrote a cache-tree with that commit; moving HEAD under it must still show the staged change.
    t.git_in(&wt, &["reset", "-q", "--soft", "HEAD~1"]).ok();
    assert!(check("staged after soft reset"));
    t.git_in(&wt, &["commit", "-q", "-m", "c2"]).ok();
    assert!(!check("committed again"));
    t.git_in(&wt, &["rm", "-q", "--cached", "src/api/mod.rs"]).ok();
    assert!(check("removed from the index"));
    t.git_in(&wt, &["add", "src/api/mod.rs"]).ok();
    assert!(!check("added back"));
    t.git_in(&wt, &["update-index", "--chmod=+x", "README.md"]).ok();
    assert!(check("mode staged"));
    t.git_in(&wt, &["update-index", "--chmod=-x", "README.md"]).ok();
    assert!(!check("mode back"));
    std::fs::remove_file(wt.join("docs/deep/nested/guide.md")).unwrap();
    assert!(check("deleted"));
    t.git_in(&wt, &["checkout", "--", "."]).ok();
    assert!(!check("restored"));
    // Touching a file without changing it is not a change.
    let f = wt.join("README.md");
    let c = std::fs::read(&f).unwrap();
    let before = std::fs::metadata(&f).unwrap().modified().unwrap();
    std::fs::write(&f, c).unwrap();
    // Its mtime moved on (set, rather than waiting for the clock to tick), its content did not.
    let file = std::fs::File::options().write(true).open(&f).unwrap();
    file.set_modified(before + std::time::Duration::from_secs(2)).unwrap();
    assert!(!check("touched"));

    // Many at once.
    let api = t.worktree("api");
    worktree::add(&repo, &api, "boulder/api", "main").unwrap();
    std::fs::write(api.join("x.txt"), "x").unwrap();
    let many = worktree::dirty_many(&[wt.clone(), api.clone(), wt.clone()]);
    let many: Vec<bool> = many.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(many, vec![false, true, false]);
    let many = git_boulder::worktree::dirty::dirty_many(&repo, &[wt.clone(), api.clone(), wt.clone()]);
    let many: Vec<bool> = many.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(many, vec![false, true, false]);
}

#[test]
fn remove_refuses_dirty_then_force_works() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    std::fs::write(wt.join("README.md"), "edited\n").unwrap();
    std::fs::write(wt.join("scratch.txt"), "notes\n").unwrap();
    let err = worktree::remove(&repo, &wt, false).unwrap_err();
    assert_eq!(err.kind, Kind::Refused, "{err:?}");
    assert!(err.message.contains("README.md") && err.message.contains("scratch.txt"), "{}", err.message);
    assert!(err.hints.iter().any(|h| h.contains("--force")), "{:?}", err.hints);
    assert!(wt.join("scratch.txt").exists());

    worktree::remove(&repo, &wt, true).unwrap();
    assert!(!wt.exists());
    assert!(!t.dir.join(".git/worktrees/auth").exists());
    assert_eq!(git_worktrees(&t).len(), 1);
    assert!(!t.refs("refs/heads/boulder/auth").is_empty(), "the branch is kept");
    t.assert_fsck();

    // A clean one goes without force; an unknown path is a usage error.
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    worktree::remove(&repo, &wt, false).unwrap();
    assert!(!wt.exists());
    let err = worktree::remove(&repo, &wt, false).unwrap_err();
    assert_eq!(err.kind, Kind::Usage);

    // A folder already deleted: only the registration goes.
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    std::fs::remove_dir_all(&wt).unwrap();
    worktree::remove(&repo, &wt, false).unwrap();
    assert_eq!(git_worktrees(&t).len(), 1);

    // A worktree locked by the user is refused, even with force.
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    t.git(&["worktree", "lock", "--reason", "on usb", wt.to_str().unwrap()]).ok();
    let err = worktree::remove(&repo, &wt, true).unwrap_err();
    assert_eq!(err.kind, Kind::Refused);
    assert!(err.message.contains("on usb"), "{}", err.message);
    t.git(&["worktree", "unlock", wt.to_str().unwrap()]).ok();
    worktree::remove(&repo, &wt, false).unwrap();
    t.assert_fsck();
}

// ---- exclude, copy ---------------------------------------------------------------------------

#[test]
fn exclude_is_added_once_and_keeps_content() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let path = t.dir.join(".git/info/exclude");
    std::fs::write(&path, "# mine\n*.swp").unwrap();
    assert!(worktree::exclude(&repo, ".boulder/worktrees").unwrap());
    assert!(!worktree::exclude(&repo, ".boulder/worktrees/").unwrap());
    assert!(!worktree::exclude(&repo, "./.boulder/worktrees").unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n*.swp\n/.boulder/worktrees/\n");
    std::fs::remove_dir_all(t.dir.join(".git/info")).unwrap();
    assert!(worktree::exclude(&repo, "wt").unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "/wt/\n");
    assert!(!worktree::exclude(&repo, "../outside").unwrap());
    t.write("wt/x/a.txt", "x");
    assert_eq!(porcelain(&t, &t.dir), "");
}

#[test]
fn copy_files_copies_untracked_files_safely() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    worktree::exclude(&repo, ".boulder/worktrees").unwrap();
    t.write(".env", "SECRET=1\n");
    t.write("config/local.toml", "a=1\n");
    t.write("config/deep/other.toml", "b=2\n");
    t.write("secrets/key.pem", "key\n");
    t.write("app.log", "ignored log\n");
    let outside = t.tmp.path().join("outside.txt");
    std::fs::write(&outside, "outside\n").unwrap();
    std::os::unix::fs::symlink(&outside, t.dir.join("evil.env")).unwrap();
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    // Another worktree holding a matching file must not be copied from.
    let api = t.worktree("api");
    worktree::add(&repo, &api, "boulder/api", "main").unwrap();
    std::fs::write(api.join(".env"), "API\n").unwrap();
    std::fs::write(wt.join("README.md"), "mine\n").unwrap();

    let globs: Vec<String> =
        ["**/.env", "*.env", "config/*.toml", "secrets/", "README.md", "*.log"].iter().map(|s| s.to_string()).collect();
    let copied = worktree::copy_files(&t.dir, &wt, &globs).unwrap();
    let copied: Vec<String> = copied.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    assert_eq!(copied, vec![".env", "app.log", "config/local.toml", "secrets/key.pem"]);
    assert_eq!(std::fs::read_to_string(wt.join(".env")).unwrap(), "SECRET=1\n");
    assert!(!wt.join("evil.env").exists());
    assert!(!wt.join("config/deep/other.toml").exists());
    assert!(!wt.join(".boulder").exists());
    assert_eq!(std::fs::read_to_string(wt.join("README.md")).unwrap(), "mine\n");
    // Idempotent, and bad entries are usage errors.
    assert!(worktree::copy_files(&t.dir, &wt, &globs).unwrap().is_empty());
    for bad in ["../x", "/etc/passwd", ".git/config"] {
        let err = worktree::copy_files(&t.dir, &wt, &[bad.to_string()]).unwrap_err();
        assert_eq!(err.kind, Kind::Usage, "{bad}");
    }
    assert_eq!(porcelain(&t, &wt), " M README.md\n?? .env\n?? config/\n?? secrets/\n");
}

#[test]
fn dirty_with_eol_filters_agrees_with_git_status() {
    crate::common::lib_env!();
    let (t, _) = sample();
    t.git(&["config", "core.autocrlf", "true"]).ok();
    let repo = Repo::open(&t.dir).unwrap();
    let wt = t.worktree("auth");
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    // Give README.md CRLF line endings the way git's filter would check it out; git calls that
    // clean (its blob has LF).
    let f = wt.join("README.md");
    std::fs::write(&f, "# sample\r\n").unwrap();
    t.git_in(&wt, &["add", "README.md"]).ok();
    assert_eq!(porcelain(&t, &wt), "");
    // The stat changes, the content does not: the CRLF file hashes differently from its blob, so
    // the fast path must not call that a change by itself — it asks the full status, which agrees
    // with git. (Checked before git, whose status refreshes the index.)
    std::fs::write(&f, "# sample\r\n").unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options().write(true).open(&f).unwrap().set_modified(later).unwrap();
    let trees = git_boulder::worktree::dirty::Trees::default();
    assert_eq!(git_boulder::worktree::dirty::decide(&repo, &wt, &trees).unwrap(), None);
    assert!(!git_boulder::worktree::dirty::dirty(&repo, &wt, &trees).unwrap());
    assert_eq!(porcelain(&t, &wt), "");
    std::fs::write(&f, "# changed\r\n").unwrap();
    assert!(git_boulder::worktree::dirty::dirty(&repo, &wt, &trees).unwrap());
    assert!(!porcelain(&t, &wt).is_empty());
}

/// Set the mtime of every folder of `root` (not `.git`) an hour back, so the untracked-folder
/// cache of the dirty check trusts them.
fn age_folders(root: &Path) {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() && e.file_name() != ".git" {
                todo.push(e.path());
            }
        }
        std::fs::File::open(&d).unwrap().set_modified(old).unwrap();
    }
}

#[test]
fn dirty_untracked_cache_never_hides_new_files() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    let wt = t.worktree("auth");
    worktree::add(&repo, &wt, "boulder/auth", "main").unwrap();
    let check = |label: &str| {
        let fast =
            git_boulder::worktree::dirty::decide(&repo, &wt, &git_boulder::worktree::dirty::Trees::default()).unwrap();
        let git = !porcelain(&t, &wt).is_empty();
        assert_eq!(fast, Some(git), "{label}: git says {:?}", porcelain(&t, &wt));
        git
    };
    age_folders(&wt);
    assert!(!check("clean, cache written"));
    let admin = std::fs::read_to_string(wt.join(".git")).unwrap();
    let admin = Path::new(admin.trim().strip_prefix("gitdir:").unwrap().trim()).to_path_buf();
    assert!(admin.join("boulder-untracked.json").exists(), "the cache was not written");
    // A new file changes its folder's mtime: found.
    std::fs::write(wt.join("src/api/new.rs"), "x\n").unwrap();
    assert!(check("new file in a cached folder"));
    std::fs::remove_file(wt.join("src/api/new.rs")).unwrap();
    age_folders(&wt);
    assert!(!check("clean again"));
    // A file dropped from the index stays on disk without touching its folder: the index changed,
    // so the cache does not apply.
    t.git_in(&wt, &["rm", "-q", "--cached", "docs/deep/nested/guide.md"]).ok();
    assert!(check("removed from the index, still on disk"));
    t.git_in(&wt, &["add", "docs/deep/nested/guide.md"]).ok();
    age_folders(&wt);
    assert!(!check("added back"));
    // An ignore rule outside the tree changing (info/exclude) invalidates it too.
    std::fs::write(wt.join("debug.log"), "ignored by .gitignore\n").unwrap();
    std::fs::write(wt.join("local.tmp"), "untracked\n").unwrap();
    let exclude = t.dir.join(".git/info/exclude");
    let before = std::fs::read_to_string(&exclude).unwrap_or_default();
    std::fs::write(&exclude, format!("{before}*.tmp\n")).unwrap();
    age_folders(&wt);
    assert!(!check("local.tmp ignored by info/exclude"));
    std::fs::write(&exclude, &before).unwrap();
    assert!(check("info/exclude no longer ignores local.tmp"));
}

#[test]
fn dirty_skips_a_submodule_folder() {
    crate::common::lib_env!();
    let (t, repo) = sample();
    // A nested repository recorded as a gitlink (what `git submodule add` leaves in the index).
    let sub = t.dir.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    t.git_in(&sub, &["init", "-q", "-b", "main"]).ok();
    std::fs::write(sub.join("f.txt"), "x\n").unwrap();
    t.git_in(&sub, &["add", "-A"]).ok();
    t.git_in(&sub, &["commit", "-q", "-m", "sub"]).ok();
    let head = t.git_in(&sub, &["rev-parse", "HEAD"]).ok().stdout.trim().to_string();
    t.git(&["update-index", "--add", "--cacheinfo", &format!("160000,{head},sub")]).ok();
    t.git(&["commit", "-q", "-m", "gitlink"]).ok();
    assert_eq!(porcelain(&t, &t.dir), "");
    let trees = git_boulder::worktree::dirty::Trees::default();
    assert_eq!(git_boulder::worktree::dirty::decide(&repo, &t.dir, &trees).unwrap(), Some(false));
    std::fs::write(t.dir.join("stray.txt"), "x\n").unwrap();
    assert_eq!(git_boulder::worktree::dirty::decide(&repo, &t.dir, &trees).unwrap(), Some(true));
}
