//! Streams come alive: `stream init`, `stream path`, status with worktrees, `stream cleanup`,
//! `doctor`, checked against git's own view of every worktree.

use crate::common::*;

fn porcelain(repo: &TestRepo) -> String {
    repo.git_out(&["worktree", "list", "--porcelain"])
}

#[test]
fn init_creates_worktrees_git_accepts() {
    let repo = sample();
    let r = repo.boulder(&["stream", "init"]).ok();
    assert_shown!("stream_init", r);
    let list = porcelain(&repo);
    for name in ["auth", "api", "docs"] {
        let wt = repo.dir.join(".boulder/worktrees").join(name);
        assert!(list.contains(&format!("worktree {}", wt.display())), "{list}");
        assert!(list.contains(&format!("branch refs/heads/boulder/{name}")), "{list}");
        assert_eq!(repo.git_in(&wt, &["status", "--porcelain"]).ok().stdout, "", "{name} not clean");
        assert!(wt.join("src/auth/mod.rs").exists());
        let path = repo.boulder(&["stream", "path", name]).ok().stdout;
        assert_eq!(path.trim(), wt.display().to_string());
        let state = repo.git_out(&["cat-file", "-p", &format!("refs/boulder/streams/{name}:state.json")]);
        assert!(state.contains("INITIALIZED"), "{state}");
    }
    // The main worktree stays clean: the worktree folder is excluded.
    assert_eq!(repo.git_out(&["status", "--porcelain"]), "");
    let exclude = std::fs::read_to_string(repo.dir.join(".git/info/exclude")).unwrap();
    assert!(exclude.contains("/.boulder/worktrees/"), "{exclude}");
    // Status shows INITIALIZED with the worktree.
    let j = repo.boulder(&["status", "--json"]).ok().json();
    assert_eq!(j["streams"][0]["status"], "INITIALIZED");
    assert!(j["streams"][0]["worktree"].as_str().unwrap().ends_with(".boulder/worktrees/auth"));
    repo.assert_fsck();

    // Idempotent: a second run changes nothing and says so.
    let before = repo.git_out(&["for-each-ref"]);
    let r = repo.boulder(&["stream", "init"]).ok();
    assert_shown!("stream_init_again", r);
    assert_eq!(repo.git_out(&["for-each-ref"]), before);

    // git can remove it and prune it.
    let docs = repo.dir.join(".boulder/worktrees/docs");
    repo.git(&["worktree", "remove", docs.to_str().unwrap()]).ok();
    let api = repo.dir.join(".boulder/worktrees/api");
    std::fs::remove_dir_all(&api).unwrap();
    repo.git(&["worktree", "prune"]).ok();
    assert!(!porcelain(&repo).contains("worktrees/api"));
}

#[test]
fn init_reuses_an_existing_branch_without_moving_it() {
    let repo = sample();
    repo.git(&["branch", "boulder/auth"]).ok();
    repo.write("x.txt", "more\n");
    repo.commit_all("main moves on");
    let before = repo.git_out(&["rev-parse", "boulder/auth"]);
    repo.boulder(&["stream", "init", "auth"]).ok();
    assert_eq!(repo.git_out(&["rev-parse", "boulder/auth"]), before);
    // Only the named stream was made.
    assert!(!porcelain(&repo).contains("worktrees/api"));
}

#[test]
fn init_refuses_branch_checked_out_elsewhere_and_foreign_folder() {
    let repo = sample();
    let other = repo.tmp.path().join("elsewhere");
    repo.git(&["worktree", "add", "-q", "-b", "boulder/auth", other.to_str().unwrap()]).ok();
    let r = repo.boulder(&["stream", "init", "auth"]);
    assert_ne!(r.code, 0);
    assert_shown!("init_branch_checked_out_elsewhere", r);

    std::fs::create_dir_all(repo.dir.join(".boulder/worktrees/api")).unwrap();
    std::fs::write(repo.dir.join(".boulder/worktrees/api/keep.txt"), "mine").unwrap();
    let r = repo.boulder(&["stream", "init", "api"]).code(2);
    assert_shown!("init_over_a_foreign_folder", r);
    assert_eq!(std::fs::read_to_string(repo.dir.join(".boulder/worktrees/api/keep.txt")).unwrap(), "mine");
}

#[test]
fn init_finishes_a_killed_run() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    // Simulate a run killed mid-checkout: index and files gone, state not yet recorded.
    std::fs::remove_file(repo.dir.join(".git/worktrees/auth/index")).unwrap();
    std::fs::remove_file(wt.join("README.md")).unwrap();
    repo.git(&["update-ref", "-d", "refs/boulder/streams/auth"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    assert_eq!(repo.git_in(&wt, &["status", "--porcelain"]).ok().stdout, "");
    assert!(wt.join("README.md").exists());
    let state = repo.git_out(&["cat-file", "-p", "refs/boulder/streams/auth:state.json"]);
    assert!(state.contains("INITIALIZED"));
    repo.assert_fsck();
}

#[test]
fn setup_runs_once_and_failure_keeps_the_worktree() {
    let repo = sample();
    let plan = repo
        .read(".boulder/streams.yaml")
        .replace("settings:\n", "settings:\n  setup: 'echo ran >> setup.log'\n  copy_into_worktree: [.env]\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.write(".env", "SECRET=1\n");
    std::fs::write(repo.dir.join(".git/info/exclude"), ".env\nsetup.log\n").unwrap();
    repo.boulder(&["trust"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    assert_eq!(std::fs::read_to_string(wt.join("setup.log")).unwrap(), "ran\n");
    assert_eq!(std::fs::read_to_string(wt.join(".env")).unwrap(), "SECRET=1\n");
    repo.boulder(&["stream", "init", "auth"]).ok();
    assert_eq!(std::fs::read_to_string(wt.join("setup.log")).unwrap(), "ran\n", "setup ran twice");

    let plan = repo.read(".boulder/streams.yaml").replace("echo ran >> setup.log", "exit 3");
    repo.write(".boulder/streams.yaml", &plan);
    repo.boulder(&["trust"]).ok();
    let r = repo.boulder(&["stream", "init", "api"]).code(1);
    assert_shown!("setup_runs_once_and_failure_keeps_the_worktree", r);
    assert!(repo.dir.join(".boulder/worktrees/api/README.md").exists());
}

#[test]
fn status_shows_stale_ahead_behind_and_dirty() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth", "api"]).ok();
    let auth = repo.dir.join(".boulder/worktrees/auth");
    std::fs::write(auth.join("src/auth/login.rs"), "fn login() {}\n").unwrap();
    repo.git_in(&auth, &["add", "-A"]).ok();
    repo.git_in(&auth, &["commit", "-q", "-m", "login"]).ok();
    std::fs::write(auth.join("scratch.txt"), "wip\n").unwrap();
    repo.write("base.txt", "base moves\n");
    repo.commit_all("base moves");
    std::fs::remove_dir_all(repo.dir.join(".boulder/worktrees/api")).unwrap();
    let j = repo.boulder(&["status", "--json"]).ok().json();
    let s = &j["streams"];
    assert_eq!(s[0]["ahead"], 1);
    assert_eq!(s[0]["behind"], 1);
    assert_eq!(s[0]["dirty"], true);
    assert_eq!(s[1]["status"], "STALE");
    assert_eq!(s[2]["status"], "DEFINED");
    let table = repo.boulder(&["status"]).ok().stdout;
    assert!(table.contains("STALE") && table.contains("+1/-1"), "{table}");
}

#[test]
fn cleanup_refuses_lost_work_then_removes() {
    let repo = sample();
    repo.boulder(&["stream", "init"]).ok();
    let auth = repo.dir.join(".boulder/worktrees/auth");
    std::fs::write(auth.join("wip.txt"), "uncommitted\n").unwrap();
    let r = repo.boulder(&["stream", "cleanup", "auth"]).code(1);
    assert_shown!("cleanup_untracked_work", r);
    std::fs::remove_file(auth.join("wip.txt")).unwrap();
    std::fs::write(auth.join("src/auth/new.rs"), "x\n").unwrap();
    repo.git_in(&auth, &["add", "-A"]).ok();
    repo.git_in(&auth, &["commit", "-q", "-m", "unmerged work"]).ok();
    let r = repo.boulder(&["stream", "cleanup", "auth"]).code(1);
    assert_shown!("cleanup_unpushed_commits", r);
    assert!(auth.exists());
    // --force removes the worktree; the branch is kept (not --delete-branch).
    repo.boulder(&["stream", "cleanup", "auth", "--force"]).ok();
    assert!(!auth.exists());
    assert!(!porcelain(&repo).contains("worktrees/auth"));
    repo.git(&["rev-parse", "--verify", "boulder/auth"]).ok();
    let state = repo.git_out(&["cat-file", "-p", "refs/boulder/streams/auth:state.json"]);
    assert!(state.contains("CLEANED"), "{state}");

    // --merged leaves streams that have not started (their branch is in main only because it was
    // just made from it); --delete-branch deletes merged branches only.
    let r = repo.boulder(&["stream", "cleanup", "--merged", "--delete-branch"]).ok();
    assert!(!r.stdout.contains("api") && !r.stdout.contains("docs"), "{}", r.stdout);
    repo.git(&["rev-parse", "--verify", "-q", "boulder/api"]).ok();
    let r = repo.boulder(&["stream", "cleanup", "auth", "--delete-branch"]).code(1);
    assert_shown!("cleanup_delete_branch_unpushed_commits", r);
    repo.boulder(&["stream", "cleanup"]).code(2);
    repo.assert_fsck();
}

#[test]
fn cleanup_stale_and_doctor() {
    let repo = sample();
    let r = repo.boulder(&["stream", "init", "--no-hooks"]).ok();
    assert_shown!("stream_init_without_hooks", r);
    let r = repo.boulder(&["doctor"]).code(1);
    assert_shown!("doctor_hooks_not_installed", r);
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["doctor"]).ok();
    std::fs::remove_dir_all(repo.dir.join(".boulder/worktrees/docs")).unwrap();
    let r = repo.boulder(&["doctor"]).code(1);
    assert_shown!("doctor_worktree_folder_gone", r);
    // A worktree git knows under worktree_dir that no stream names.
    let stray = repo.dir.join(".boulder/worktrees/stray");
    repo.git(&["worktree", "add", "-q", "-b", "stray", stray.to_str().unwrap()]).ok();
    // Garbage in refs/boulder/.
    let blob = repo.git_out(&["hash-object", "-w", "--stdin"]);
    let _ = blob;
    repo.git(&["update-ref", "refs/boulder/streams/api", "HEAD"]).ok();
    let j = repo.boulder(&["doctor", "--json"]).code(1).json();
    let text = j.to_string();
    assert!(text.contains("stray") && text.contains("refs/boulder/streams/api"), "{text}");
    repo.boulder(&["stream", "cleanup", "--stale"]).ok();
    assert!(!porcelain(&repo).contains("worktrees/docs"));
}

#[test]
fn stream_lock_held_is_refused_with_holder() {
    let repo = sample();
    let lock_dir = repo.dir.join(".git/boulder/locks");
    std::fs::create_dir_all(&lock_dir).unwrap();
    let lock = lock_dir.join("stream-auth.lock");
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "import fcntl,sys,time,os; f=open(sys.argv[1],'a+'); fcntl.flock(f, fcntl.LOCK_EX); f.seek(0); f.truncate(); f.write('{\"pid\": %d, \"host\": \"h\", \"since\": \"2026-01-01T00:00:00Z\", \"command\": \"stream run\"}\\n' % os.getpid()); f.flush(); print('locked', flush=True); time.sleep(60)",
            lock.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
    let r = repo.boulder(&["stream", "init", "auth"]).code(1);
    assert!(r.stderr.contains(&child.id().to_string()), "{}", r.stderr);
    child.kill().unwrap();
    child.wait().unwrap();
    repo.boulder(&["stream", "init", "auth"]).ok();
}
