//! Hooks: install/uninstall beside user hooks and under core.hooksPath, notes and iterations from
//! commits in stream worktrees, notes kept through amend and rebase, pushes refused and allowed
//! for each ownership rule (with file names shown as git shows them), and parallel commits that
//! lose nothing.

use crate::common::*;

fn with_hooks() -> TestRepo {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo
}

fn commit_in(repo: &TestRepo, dir: &std::path::Path, file: &str, content: &str, msg: &str) -> Run {
    let p = dir.join(file);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
    repo.git_in(dir, &["add", "-A"]).ok();
    repo.git_in(dir, &["commit", "-q", "-m", msg])
}

#[test]
fn install_is_idempotent_and_uninstall_restores_user_hooks() {
    let repo = sample();
    let hooks = repo.dir.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let user = "#!/bin/sh\n# my hook\necho user-post-commit >> \"$(git rev-parse --git-common-dir)/user.log\"\n";
    std::fs::write(hooks.join("post-commit"), user).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(hooks.join("post-commit"), std::fs::Permissions::from_mode(0o750)).unwrap();
    }
    let r = repo.boulder(&["hooks", "install"]).ok();
    assert_shown!("install_is_idempotent_and_uninstall_restores_user_hooks", r);
    let snapshot = |dir: &std::path::Path| {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect();
        v.sort();
        v
    };
    let once = snapshot(&hooks);
    let r = repo.boulder(&["hooks", "install"]).ok();
    assert_shown!("install_is_idempotent_and_uninstall_restores_user_hooks_2", r);
    assert_eq!(snapshot(&hooks), once, "a second install changed something");
    let st = repo.boulder(&["hooks", "status", "--json"]).ok().json();
    assert_eq!(st[0]["name"], "post-commit");
    assert_eq!(st[0]["state"], "installed");
    assert!(st[0]["chained"].as_str().unwrap().ends_with("post-commit.boulder-orig"));

    // The user's hook still runs.
    repo.write("x.txt", "x\n");
    repo.commit_all("x");
    assert!(std::fs::read_to_string(repo.dir.join(".git/user.log")).unwrap().contains("user-post-commit"));

    repo.boulder(&["hooks", "uninstall"]).ok();
    assert_eq!(std::fs::read_to_string(hooks.join("post-commit")).unwrap(), user);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(hooks.join("post-commit")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o750);
    }
    assert!(!hooks.join("pre-push").exists());
    assert!(!hooks.join("post-commit.boulder-orig").exists());
}

#[test]
fn install_under_core_hooks_path() {
    let repo = sample();
    repo.git(&["config", "core.hooksPath", ".githooks"]).ok();
    repo.boulder(&["hooks", "install", "--pre-commit"]).ok();
    // A relative core.hooksPath names a folder in each worktree (issue 13, point 4): git-boulder's
    // own folder takes its place and runs .githooks' hooks first (tests/hooks_managers.rs).
    let dir = repo.git_out(&["rev-parse", "--git-path", "hooks"]);
    for h in ["post-commit", "post-rewrite", "pre-push", "pre-commit"] {
        assert!(std::path::Path::new(&dir).join(h).exists(), "{h}");
    }
    assert!(!repo.dir.join(".git/hooks/post-commit").exists());
    assert_eq!(repo.git_out(&["config", "boulder.hooksPath"]), ".githooks");
    let st = repo.boulder(&["hooks", "status"]).ok().stdout;
    assert!(st.contains(".githooks/pre-commit"), "{st}");
}

#[test]
fn commits_in_stream_worktrees_get_notes_and_iterations() {
    let repo = with_hooks();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    for i in 0..3 {
        let r = commit_in(&repo, &wt, &format!("src/auth/f{i}.rs"), "x\n", &format!("auth {i}"));
        assert_eq!(r.code, 0);
        assert_eq!(r.stderr, "", "post-commit must be silent");
    }
    let note: serde_json::Value =
        serde_json::from_str(&repo.git_in(&wt, &["notes", "--ref=boulder", "show", "HEAD"]).ok().stdout).unwrap();
    assert_eq!(note["stream"], "auth");
    assert_eq!(note["boulder"], "auth");
    assert_eq!(note["iteration"], 3);
    assert!(note["at"].is_string());
    let log = repo.git_in(&wt, &["log", "--notes=boulder", "-1"]).ok().stdout;
    assert!(log.contains("\"stream\":\"auth\""), "{log}");
    let s = repo.state("refs/boulder/boulders/auth");
    assert_eq!(s["iteration"], 3);
    assert_eq!(s["last_commit"], repo.git_in(&wt, &["rev-parse", "HEAD"]).ok().stdout.trim());
    // Commits on main record nothing.
    repo.write("y.txt", "y\n");
    repo.commit_all("main work");
    assert!(repo.git(&["notes", "--ref=boulder", "show", "HEAD"]).code != 0);
    let status = repo.boulder(&["status", "--json"]).ok().json();
    assert_eq!(status["streams"][0]["iteration"], 3);
    assert!(status["streams"][0]["last_activity"].is_string());
    repo.assert_fsck();
}

#[test]
fn the_hook_parses_the_plan_once_per_text_and_follows_every_change() {
    let repo = with_hooks();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    let plan = repo.dir.join(".boulder/streams.yaml");
    let mut n = 0;
    let mut commit = || {
        n += 1;
        std::fs::write(wt.join(format!("src/auth/f{n}.rs")), "x\n").unwrap();
        repo.git_in(&wt, &["add", "-A"]).ok();
        let mut cmd = repo.command("git");
        cmd.env("BOULDER_TRACE", "1").current_dir(&wt).args(["commit", "-q", "-m", &format!("auth {n}")]);
        let run = Run::from(cmd.output().unwrap());
        assert_eq!(run.code, 0, "{}", run.stderr);
        let note = repo.git_in(&wt, &["notes", "--ref=boulder", "show", "HEAD"]);
        let iteration = (note.code == 0).then(|| note.json()["iteration"].as_u64().unwrap());
        (run.stderr.contains("parse the stream plan"), iteration, run.stderr)
    };
    let (parsed, iteration, _) = commit();
    assert_eq!((parsed, iteration), (true, Some(1)), "the first commit parses the plan");
    let (parsed, iteration, stderr) = commit();
    assert_eq!((parsed, iteration), (false, Some(2)), "the same plan is not parsed again: {stderr}");
    // The stream's branch renamed in the plan: a commit on the old branch is no stream's.
    std::fs::write(
        &plan,
        SAMPLE_PLAN.replace("    paths: [src/auth/**]\n", "    paths: [src/auth/**]\n    branch: team/auth\n"),
    )
    .unwrap();
    let (parsed, iteration, _) = commit();
    assert_eq!((parsed, iteration), (true, None));
    // A plan that does not parse is said, as before; the plan as it was counts again.
    std::fs::write(&plan, format!("{SAMPLE_PLAN}  bogus_setting: 1\n")).unwrap();
    let (parsed, iteration, stderr) = commit();
    assert_eq!((parsed, iteration), (true, None));
    assert!(stderr.contains("streams.yaml") && stderr.contains("bogus_setting"), "{stderr}");
    std::fs::write(&plan, SAMPLE_PLAN).unwrap();
    let (parsed, iteration, _) = commit();
    assert_eq!((parsed, iteration), (true, Some(3)));
    let (parsed, iteration, _) = commit();
    assert_eq!((parsed, iteration), (false, Some(4)));
    repo.assert_fsck();
}

#[test]
fn skip_env_and_rebase_record_nothing() {
    let repo = with_hooks();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    std::fs::write(wt.join("src/auth/a.rs"), "a\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]).ok();
    let mut cmd = repo.command("git");
    let out =
        cmd.env("BOULDER_SKIP_HOOKS", "1").args(["commit", "-q", "-m", "skipped"]).current_dir(&wt).output().unwrap();
    assert!(out.status.success());
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 0, "BOULDER_SKIP_HOOKS=1 recorded");
    assert!(repo.git_in(&wt, &["notes", "--ref=boulder", "show", "HEAD"]).code != 0);

    commit_in(&repo, &wt, "src/auth/b.rs", "b\n", "b").ok();
    commit_in(&repo, &wt, "src/auth/c.rs", "c\n", "c").ok();
    let before = repo.state("refs/boulder/boulders/auth")["iteration"].clone();
    let notes_before = repo.git_out(&["notes", "--ref=boulder", "list"]).lines().count();
    // main moves, then the stream rebases: replayed commits record nothing, notes follow.
    repo.write("m.txt", "m\n");
    repo.commit_all("main moves");
    repo.git_in(&wt, &["rebase", "-q", "main"]).ok();
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], before);
    let head_note = repo.git_in(&wt, &["notes", "--ref=boulder", "show", "HEAD"]).ok().stdout;
    assert!(head_note.contains("\"stream\":\"auth\""), "rebase lost the note: {head_note}");
    let notes_after = repo.git_out(&["notes", "--ref=boulder", "list"]).lines().count();
    assert!(notes_after >= notes_before);
}

#[test]
fn amend_keeps_the_note() {
    let repo = with_hooks();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    commit_in(&repo, &wt, "src/auth/a.rs", "a\n", "a").ok();
    repo.git_in(&wt, &["commit", "-q", "--amend", "-m", "a amended"]).ok();
    let note = repo.git_in(&wt, &["notes", "--ref=boulder", "show", "HEAD"]).ok().stdout;
    assert!(note.contains("\"stream\":\"auth\""), "{note}");
}

fn bare_remote(repo: &TestRepo) -> std::path::PathBuf {
    let bare = repo.tmp.path().join("remote.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]).ok();
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]).ok();
    repo.git(&["push", "-q", "origin", "main"]).ok();
    bare
}

#[test]
fn pre_push_refuses_and_allows_per_rule() {
    let repo = with_hooks();
    bare_remote(&repo);
    repo.boulder(&["stream", "init", "auth", "api"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    // Own paths and the PRD pass.
    commit_in(&repo, &wt, "src/auth/login.rs", "x\n", "own").ok();
    commit_in(&repo, &wt, ".agents/tasks/prd.md", &SAMPLE_PRD.replace("[ ] US-001", "[x] US-001"), "prd").ok();
    repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]).ok();
    // Another stream's path is refused, naming commit, path and owner, and the bypass.
    commit_in(&repo, &wt, "src/api/hack.rs", "x\n", "other").ok();
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]);
    assert_ne!(r.code, 0);
    assert_shown!("pre_push_refuses_and_allows_per_rule_2", r);
    assert_shown!("pre_push_refuses_and_allows_per_rule", r);
    let short = repo.git_in(&wt, &["rev-parse", "--short=10", "HEAD"]).ok().stdout;
    assert!(r.stderr.contains(short.trim()), "{}", r.stderr);
    // --no-verify bypasses.
    repo.git_in(&wt, &["push", "-q", "--no-verify", "origin", "boulder/auth"]).ok();
    // shared_read is refused; a deletion of another stream's file counts; renames count both paths.
    commit_in(&repo, &wt, "src/types/user.rs", "changed\n", "shared").ok();
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]);
    assert!(r.code != 0 && r.stderr.contains("shared_read"), "{}", r.stderr);
    repo.git_in(&wt, &["reset", "-q", "--hard", "HEAD~1"]).ok();
    repo.git_in(&wt, &["rm", "-q", "src/api/mod.rs"]).ok();
    repo.git_in(&wt, &["commit", "-q", "-m", "delete other"]).ok();
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]);
    assert!(r.code != 0 && r.stderr.contains("src/api/mod.rs"), "{}", r.stderr);
    repo.git_in(&wt, &["reset", "-q", "--hard", "HEAD~1"]).ok();
    repo.git_in(&wt, &["mv", "src/auth/login.rs", "src/api/login.rs"]).ok();
    repo.git_in(&wt, &["commit", "-q", "-m", "rename into api"]).ok();
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]);
    assert!(r.code != 0 && r.stderr.contains("src/api/login.rs"), "{}", r.stderr);
    repo.git_in(&wt, &["reset", "-q", "--hard", "HEAD~1"]).ok();
    // Undeclared paths warn by default, and the push goes through.
    commit_in(&repo, &wt, "tools/x.sh", "x\n", "undeclared").ok();
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]).ok();
    assert_shown!("pre_push_refuses_and_allows_per_rule_3", r);
}

#[test]
fn undeclared_error_and_ownership_warn_and_off() {
    let repo = with_hooks();
    bare_remote(&repo);
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    let plan = repo.read(".boulder/streams.yaml");
    repo.write(".boulder/streams.yaml", &plan.replace("settings:\n", "settings:\n  undeclared_paths: error\n"));
    commit_in(&repo, &wt, "tools/x.sh", "x\n", "undeclared").ok();
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]);
    assert!(r.code != 0 && r.stderr.contains("undeclared"), "{}", r.stderr);
    repo.write(".boulder/streams.yaml", &plan.replace("settings:\n", "settings:\n  undeclared_paths: allow\n"));
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]).ok();
    assert!(!r.stderr.contains("tools/x.sh"), "{}", r.stderr);
    commit_in(&repo, &wt, "src/api/x.rs", "x\n", "other").ok();
    repo.write(".boulder/streams.yaml", &plan.replace("settings:\n", "settings:\n  ownership: warn\n"));
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]).ok();
    assert_shown!("undeclared_error_and_ownership_warn_and_off", r);
    commit_in(&repo, &wt, "src/api/y.rs", "x\n", "other").ok();
    repo.write(".boulder/streams.yaml", &plan.replace("settings:\n", "settings:\n  ownership: 'off'\n"));
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]).ok();
    assert_eq!(r.stderr, "");
}

#[test]
fn user_pre_push_hook_gets_the_same_stdin_and_its_failure_counts() {
    let repo = sample();
    bare_remote(&repo);
    let hooks = repo.dir.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let log = repo.tmp.path().join("user-pre-push.log");
    std::fs::write(
        hooks.join("pre-push"),
        format!(
            "#!/bin/sh\necho \"args: $1 $2\" >> {0}\ncat >> {0}\n[ -f {0}.fail ] && exit 1\nexit 0\n",
            log.display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(hooks.join("pre-push"), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    commit_in(&repo, &wt, "src/api/x.rs", "x\n", "other").ok();
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]);
    assert_ne!(r.code, 0, "our check must still run after the user's hook");
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(seen.contains("args: origin") && seen.contains("refs/heads/boulder/auth"), "{seen}");
    // The user's failure fails the push even when ours would pass.
    repo.git_in(&wt, &["reset", "-q", "--hard", "HEAD~1"]).ok();
    commit_in(&repo, &wt, "src/auth/ok.rs", "x\n", "own").ok();
    std::fs::write(format!("{}.fail", log.display()), "").unwrap();
    assert_ne!(repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]).code, 0);
    std::fs::remove_file(format!("{}.fail", log.display())).unwrap();
    repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]).ok();
}

#[test]
fn pre_commit_checks_staged_paths() {
    let repo = sample();
    repo.boulder(&["hooks", "install", "--pre-commit"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    let r = commit_in(&repo, &wt, "src/api/x.rs", "x\n", "other");
    assert_ne!(r.code, 0);
    assert_shown!("pre_commit_checks_staged_paths", r);
    repo.git_in(&wt, &["reset", "-q", "--hard"]).ok();
    commit_in(&repo, &wt, "src/auth/x.rs", "x\n", "own").ok();
}

#[test]
fn parallel_commits_in_many_worktrees_lose_nothing() {
    let repo = with_hooks();
    let streams = 4;
    let commits = 25;
    let mut plan = String::from("version: 1\nstreams:\n");
    for s in 0..streams {
        plan.push_str(&format!("  s{s}:\n    paths: [s{s}/**]\n"));
    }
    plan.push_str("settings:\n  base_branch: main\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("plan");
    repo.boulder(&["stream", "init"]).ok();
    std::thread::scope(|scope| {
        for s in 0..streams {
            let repo = &repo;
            scope.spawn(move || {
                let wt = repo.dir.join(format!(".boulder/worktrees/s{s}"));
                for i in 0..commits {
                    commit_in(repo, &wt, &format!("s{s}/f{i}.txt"), "x\n", &format!("s{s} {i}")).ok();
                }
            });
        }
    });
    let notes = repo.git_out(&["notes", "--ref=boulder", "list"]).lines().count();
    assert_eq!(notes, streams * commits);
    for s in 0..streams {
        assert_eq!(repo.state(&format!("refs/boulder/boulders/s{s}"))["iteration"], commits);
    }
    repo.assert_fsck();
}

#[test]
fn status_says_missing_and_foreign() {
    let repo = sample();
    let st = repo.boulder(&["hooks", "status", "--json"]).ok().json();
    assert!(st.as_array().unwrap().iter().all(|h| h["state"] == "missing"), "{st}");
    let hooks = repo.dir.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(hooks.join("pre-push"), "#!/bin/sh\nexit 0\n").unwrap();
    let st = repo.boulder(&["hooks", "status", "--json"]).ok().json();
    let pre_push = st.as_array().unwrap().iter().find(|h| h["name"] == "pre-push").unwrap().clone();
    assert_eq!(pre_push["state"], "foreign");
    assert!(pre_push["path"].as_str().unwrap().ends_with(".git/hooks/pre-push"));
    // Uninstall leaves the folder as it was: the foreign hook and git's samples, nothing of ours.
    let listing = |dir: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = listing(&hooks);
    repo.boulder(&["hooks", "install"]).ok();
    assert!(hooks.join("post-commit").exists() && hooks.join("pre-push.boulder-orig").exists());
    repo.boulder(&["hooks", "uninstall"]).ok();
    assert_eq!(listing(&hooks), before);
}

/// PATH without the folder of git-boulder (nor any other git-boulder).
fn path_without_git_boulder() -> std::ffi::OsString {
    let bin_dir = std::path::Path::new(bin()).parent().unwrap().to_path_buf();
    let path: Vec<_> = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .filter(|p| p != &bin_dir && !p.join("git-boulder").exists())
        .collect();
    std::env::join_paths(path).unwrap()
}

#[test]
fn post_commit_runs_git_boulder_directly_without_a_shell_or_path() {
    let repo = with_hooks();
    let hook = std::fs::read_to_string(repo.dir.join(".git/hooks/post-commit")).unwrap();
    let first = hook.lines().next().unwrap();
    let bin_real = std::fs::canonicalize(bin()).unwrap();
    let named = first.strip_prefix("#!").unwrap().strip_suffix(" hook-file").unwrap();
    assert_eq!(std::fs::canonicalize(named).unwrap(), bin_real, "{hook}");
    // pre-push and post-rewrite keep the shell shim.
    let push = std::fs::read_to_string(repo.dir.join(".git/hooks/pre-push")).unwrap();
    assert!(push.starts_with("#!/bin/sh\n"), "{push}");
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    std::fs::write(wt.join("src/auth/a.rs"), "a\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]).ok();
    // A program whose PATH has git but not git-boulder (an IDE): the commit is still recorded.
    let out = repo
        .command("git")
        .env("PATH", path_without_git_boulder())
        .args(["commit", "-q", "-m", "no binary on PATH"])
        .current_dir(&wt)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    let note = repo.git_in(&wt, &["notes", "--ref=boulder", "show", "HEAD"]).ok().stdout;
    assert!(note.contains("\"stream\":\"auth\""), "{note}");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 1);
    // `hooks status` says installed; BOULDER_SKIP_HOOKS=1 still skips it.
    let st = repo.boulder(&["hooks", "status", "--json"]).ok().json();
    assert_eq!(st[0]["name"], "post-commit");
    assert_eq!(st[0]["state"], "installed");
    let mut cmd = repo.command("git");
    cmd.env("BOULDER_SKIP_HOOKS", "1").args(["commit", "-q", "--allow-empty", "-m", "skipped"]).current_dir(&wt);
    assert!(cmd.output().unwrap().status.success());
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 1);
}

#[test]
fn a_direct_hook_moved_aside_by_another_manager_still_records() {
    // pre-commit's `install -t post-commit` keeps the hook it replaces as `<name>.legacy` and runs
    // it by that name; a wrapper that runs a `<name>.old` copy (lefthook keeps one, though 2.x
    // does not run it) works the same.
    let repo = with_hooks();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let hooks = repo.dir.join(".git/hooks");
    for (n, aside) in [(1, "post-commit.legacy"), (2, "post-commit.old")] {
        if n == 1 {
            std::fs::rename(hooks.join("post-commit"), hooks.join(aside)).unwrap();
        } else {
            std::fs::rename(hooks.join("post-commit.legacy"), hooks.join(aside)).unwrap();
        }
        write_executable(
            &hooks.join("post-commit"),
            &format!("#!/bin/sh\nexec \"$(dirname \"$0\")/{aside}\" \"$@\"\n"),
        );
        let wt = repo.dir.join(".boulder/worktrees/auth");
        commit_in(&repo, &wt, &format!("src/auth/{n}.rs"), "x\n", "moved aside").ok();
        assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], n, "run as {aside}");
    }
}

#[test]
fn a_direct_hook_whose_binary_is_gone_lets_the_commit_through_and_doctor_names_the_fix() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["hooks", "uninstall"]).ok();
    // Hooks installed by a copy of git-boulder that is then removed (moved, uninstalled).
    let copy_dir = repo.dir.join("../gone-bin");
    std::fs::create_dir_all(&copy_dir).unwrap();
    let copy = copy_dir.join("git-boulder");
    std::fs::copy(bin(), &copy).unwrap();
    // The copy is PATH's git-boulder when it installs: the direct hook names it.
    boulder_via(&repo, &copy, &copy_dir, &["hooks", "install"]).ok();
    let hook = std::fs::read_to_string(repo.dir.join(".git/hooks/post-commit")).unwrap();
    assert!(hook.lines().next().unwrap().contains("gone-bin/git-boulder"), "{hook}");
    std::fs::remove_file(&copy).unwrap();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    std::fs::write(wt.join("src/auth/a.rs"), "a\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]).ok();
    let out = repo.command("git").args(["commit", "-q", "-m", "binary gone"]).current_dir(&wt).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("post-commit"), "git names the hook it could not run: {stderr}");
    assert_eq!(repo.git_in(&wt, &["log", "-1", "--format=%s"]).ok().stdout.trim(), "binary gone");
    // This git-boulder sees a hook that is not its own: outdated, fixed by installing again.
    let st = repo.boulder(&["hooks", "status", "--json"]).ok().json();
    assert_eq!(st[0]["state"], "outdated", "{st}");
    let doctor = repo.boulder(&["doctor"]);
    assert_shown!("a_direct_hook_whose_binary_is_gone_lets_the_commit_through_and_doctor_names_the_fix", doctor);
    repo.boulder(&["hooks", "install"]).ok();
    commit_in(&repo, &wt, "src/auth/b.rs", "b\n", "after reinstall").ok();
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 1);
}

/// Write `text` as an executable file (mode 755).
fn write_executable(path: &std::path::Path, text: &str) {
    std::fs::write(path, text).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A folder holding `git-boulder` as `kind`: a copy of the binary, a symlink to it, or a
/// wrapper script that runs it (as version managers install).
fn bin_dir(repo: &TestRepo, folder: &str, kind: &str) -> std::path::PathBuf {
    let dir = repo.dir.join("..").join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    let at = dir.join("git-boulder");
    match kind {
        "copy" => {
            std::fs::copy(bin(), &at).unwrap();
        }
        #[cfg(unix)]
        "symlink" => std::os::unix::fs::symlink(bin(), &at).unwrap(),
        _ => write_executable(&at, &format!("#!/bin/sh\nexec '{}' \"$@\"\n", bin())),
    }
    dir
}

/// `git-boulder ARGS` run as `program`, with `first` first on PATH.
fn boulder_via(repo: &TestRepo, program: &std::path::Path, first: &std::path::Path, args: &[&str]) -> Run {
    let mut cmd = repo.command(program);
    let path: Vec<std::path::PathBuf> = std::iter::once(first.to_path_buf())
        .chain(std::env::split_paths(&cmd.get_envs().find(|(k, _)| *k == "PATH").unwrap().1.unwrap().to_owned()))
        .collect();
    cmd.env("PATH", std::env::join_paths(path).unwrap()).args(args).current_dir(&repo.dir);
    // A binary copied a moment ago may still be open for writing in a child another test's
    // thread has forked and not yet exec'd: exec then fails with "Text file busy" for a moment.
    let mut tries = 0;
    loop {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            out => return Run::from(out.unwrap()),
        }
    }
}

fn first_line(repo: &TestRepo) -> String {
    std::fs::read_to_string(repo.dir.join(".git/hooks/post-commit")).unwrap().lines().next().unwrap().to_string()
}

#[test]
fn post_commit_is_direct_only_when_path_finds_the_installing_binary() {
    // A version manager's wrapper script on PATH: the version's own path would vanish with an
    // upgrade, so the shell shim, which asks PATH each time.
    let repo = sample();
    let wrapper = bin_dir(&repo, "shims", "wrapper");
    boulder_via(&repo, std::path::Path::new(bin()), &wrapper, &["hooks", "install"]).ok();
    assert_eq!(first_line(&repo), "#!/bin/sh");
    // A symlink to the binary on PATH (cargo, a package manager): named by its stable path.
    let repo = sample();
    let link = bin_dir(&repo, "links", "symlink");
    boulder_via(&repo, &link.join("git-boulder"), &link, &["hooks", "install"]).ok();
    assert_eq!(first_line(&repo), format!("#!{} hook-file", link.join("git-boulder").display()));
    // Characters some readers of `#!` lines take apart: the shell shim.
    let repo = sample();
    let odd = bin_dir(&repo, "odd\\dir", "copy");
    boulder_via(&repo, &odd.join("git-boulder"), &odd, &["hooks", "install"]).ok();
    assert_eq!(first_line(&repo), "#!/bin/sh");
}

#[test]
fn a_working_direct_hook_is_kept_by_a_git_boulder_run_from_elsewhere() {
    let repo = sample();
    let link = bin_dir(&repo, "links", "symlink");
    boulder_via(&repo, &link.join("git-boulder"), &link, &["hooks", "install"]).ok();
    let hook = std::fs::read(repo.dir.join(".git/hooks/post-commit")).unwrap();
    // The same binary by its own path, PATH without it (a harness, CI): installed, kept.
    let elsewhere = bin_dir(&repo, "elsewhere", "copy");
    let st = boulder_via(&repo, &elsewhere.join("git-boulder"), &elsewhere, &["hooks", "status", "--json"]).ok().json();
    assert_eq!(st[0]["state"], "installed", "{st}");
    boulder_via(&repo, &elsewhere.join("git-boulder"), &elsewhere, &["stream", "init", "auth"]).ok();
    boulder_via(&repo, &elsewhere.join("git-boulder"), &elsewhere, &["hooks", "install"]).ok();
    assert_eq!(std::fs::read(repo.dir.join(".git/hooks/post-commit")).unwrap(), hook, "not rewritten");
    let doctor = boulder_via(&repo, &elsewhere.join("git-boulder"), &elsewhere, &["doctor", "--json"]);
    assert!(!doctor.stdout.contains("post-commit hook"), "{}", doctor.stdout);
}

#[test]
fn direct_hooks_turned_off_make_every_hook_a_shell_shim() {
    let repo = with_hooks();
    assert!(first_line(&repo).ends_with(" hook-file"));
    repo.git(&["config", "boulder.directHooks", "false"]).ok();
    let st = repo.boulder(&["hooks", "status", "--json"]).ok().json();
    assert_eq!(st[0]["state"], "outdated", "{st}");
    repo.boulder(&["hooks", "install"]).ok();
    assert_eq!(first_line(&repo), "#!/bin/sh");
    assert_eq!(repo.boulder(&["hooks", "status", "--json"]).ok().json()[0]["state"], "installed");
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    commit_in(&repo, &wt, "src/auth/a.rs", "a\n", "through the shim").ok();
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 1);
}

#[test]
fn post_commit_with_a_previous_hook_and_without_the_binary_on_path_warns_once_and_commits() {
    let repo = sample();
    let hooks = repo.dir.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    write_executable(
        &hooks.join("post-commit"),
        "#!/bin/sh\necho ran >> \"$(git rev-parse --git-common-dir)/user.log\"\n",
    );
    repo.boulder(&["hooks", "install"]).ok();
    // A previous hook to run first: the shell shim, which finds git-boulder on PATH.
    let shim = std::fs::read_to_string(hooks.join("post-commit")).unwrap();
    assert!(shim.starts_with("#!/bin/sh\n"), "{shim}");
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    std::fs::write(wt.join("src/auth/a.rs"), "a\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]).ok();
    let mut cmd = repo.command("git");
    let out = cmd
        .env("PATH", path_without_git_boulder())
        .args(["commit", "-q", "-m", "no binary"])
        .current_dir(&wt)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("git-boulder: not found on PATH"), "{stderr}");
    assert_eq!(repo.git_in(&wt, &["log", "-1", "--format=%s"]).ok().stdout.trim(), "no binary");
    assert_eq!(std::fs::read_to_string(repo.dir.join(".git/user.log")).unwrap(), "ran\n");
}

/// A cherry-pick onto a stream branch is new work (issue 13, point 7): each picked commit counts.
#[test]
fn cherry_pick_sequence_records_each_commit() {
    let repo = with_hooks();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    repo.git(&["checkout", "-q", "-b", "side"]).ok();
    repo.write("src/auth/p1.rs", "1\n");
    repo.commit_all("p1");
    repo.write("src/auth/p2.rs", "2\n");
    repo.commit_all("p2");
    repo.git(&["checkout", "-q", "main"]).ok();
    repo.git_in(&wt, &["cherry-pick", "side~1", "side"]).ok();
    assert_eq!(repo.git_in(&wt, &["log", "-1", "--format=%s"]).ok().stdout.trim(), "p2");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 2);
    assert!(repo.git_in(&wt, &["notes", "--ref=boulder", "show", "HEAD"]).ok().stdout.contains("\"iteration\":2"));
}

#[test]
fn pre_push_judges_the_branch_it_updates_and_pushes_to_urls() {
    let repo = with_hooks();
    let bare = bare_remote(&repo);
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    commit_in(&repo, &wt, "src/api/x.rs", "x\n", "other").ok();
    // HEAD:boulder/auth from a detached HEAD: the local ref is not a branch.
    repo.git_in(&wt, &["checkout", "-q", "--detach"]).ok();
    let r = repo.git_in(&wt, &["push", "-q", "origin", "HEAD:refs/heads/boulder/auth"]);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert_shown!("pre_push_judges_the_branch_it_updates_and_pushes_to_urls", r);
    // To a URL rather than a named remote.
    let r = repo.git_in(&wt, &["push", "-q", bare.to_str().unwrap(), "HEAD:refs/heads/boulder/auth"]);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert_shown!("pre_push_judges_the_branch_it_updates_and_pushes_to_urls_2", r);
    // Deleting the remote branch checks nothing.
    repo.git_in(&wt, &["push", "-q", "--no-verify", "origin", "HEAD:refs/heads/boulder/auth"]).ok();
    repo.git_in(&wt, &["push", "-q", "origin", ":refs/heads/boulder/auth"]).ok();
    // A branch that is no stream's is not checked when the commits are no stream's either (a
    // stream's commits are checked under any name: issue 13, point 3, tests/hooks_pre_push_commits.rs).
    repo.git_in(&wt, &["checkout", "-q", "--detach", "main"]).ok();
    commit_in(&repo, &wt, "src/api/scratch.rs", "x\n", "scratch").ok();
    repo.git_in(&wt, &["push", "-q", "origin", "HEAD:refs/heads/scratch"]).ok();
}

#[test]
fn hooks_run_from_the_library() {
    let repo = sample();
    let err = git_boulder::hooks::run("no-such-hook", &[]).unwrap_err();
    assert!(err.message.contains("no-such-hook"), "{}", err.message);
    let r = repo.boulder(&["hook", "no-such-hook"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

/// Files whose names hold an escape sequence, a newline that would spoof a report line, and a
/// byte that is not UTF-8: pre-commit, pre-push and `stream merge` name them quoted exactly as git
/// does (`core.quotePath`), one line each, and no raw escape or lossy name reaches the terminal.
#[cfg(unix)]
#[test]
fn reports_quote_file_names_as_git_does() {
    use std::os::unix::ffi::OsStrExt;

    let repo = sample();
    repo.boulder(&["hooks", "install", "--pre-commit"]).ok();
    bare_remote(&repo);
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    let names: [&[u8]; 3] =
        [b"src/api/\x1b[2J\x1b[31mesc", b"src/api/ok\n  0000000000  spoofed.rs  owned by nobody", b"src/api/\xffbad"];
    std::fs::create_dir_all(wt.join("src/api")).unwrap();
    for name in names {
        std::fs::write(wt.join(std::ffi::OsStr::from_bytes(name)), "x\n").unwrap();
    }
    repo.git_in(&wt, &["add", "-A"]).ok();
    // git's own names for them, and the report lines that must say so.
    let quoted = repo.git_in(&wt, &["diff", "--cached", "--name-only"]).ok().stdout;
    let quoted: Vec<&str> = quoted.lines().collect();
    assert_eq!(
        quoted,
        [
            "\"src/api/\\033[2J\\033[31mesc\"",
            "\"src/api/ok\\n  0000000000  spoofed.rs  owned by nobody\"",
            "\"src/api/\\377bad\"",
        ]
    );
    let assert_names = |what: &str, r: &Run, commit: &str| {
        assert!(!r.stderr.contains('\u{1b}') && !r.stderr.contains('\u{fffd}'), "{what}: {:?}", r.stderr);
        for name in &quoted {
            let line = format!("  {commit}  {name}  owned by api");
            assert!(r.stderr.lines().any(|l| l == line), "{what}: no line {line:?} in {:?}", r.stderr);
        }
        let listed = r.stderr.lines().filter(|l| l.starts_with("  ")).count();
        assert_eq!(listed, quoted.len(), "{what}: {:?}", r.stderr);
    };

    let r = repo.git_in(&wt, &["commit", "-q", "-m", "odd names"]);
    assert_ne!(r.code, 0);
    assert_names("pre-commit", &r, "staged");
    repo.git_in(&wt, &["commit", "-q", "--no-verify", "-m", "odd names"]).ok();
    let head = repo.git_in(&wt, &["rev-parse", "--short=10", "HEAD"]).ok().stdout.trim().to_string();
    let r = repo.git_in(&wt, &["push", "-q", "origin", "boulder/auth"]);
    assert_ne!(r.code, 0);
    assert_names("pre-push", &r, &head);
    repo.boulder(&["prd", "done", "US-001", "US-002"]).ok();
    let r = repo.boulder(&["stream", "merge", "auth"]).code(1);
    assert_names("stream merge", &r, &head);
}

#[test]
fn reports_follow_core_quote_path_false_as_git_does() {
    let repo = sample();
    repo.git(&["config", "core.quotePath", "false"]).ok();
    repo.boulder(&["hooks", "install", "--pre-commit"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    std::fs::create_dir_all(wt.join("src/api")).unwrap();
    std::fs::write(wt.join("src/api/café.rs"), "x\n").unwrap();
    std::fs::write(wt.join("src/api/tab\there.rs"), "x\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]).ok();
    let git_says = repo.git_in(&wt, &["diff", "--cached", "--name-only"]).ok().stdout;
    assert_eq!(git_says, "src/api/café.rs\n\"src/api/tab\\there.rs\"\n");
    let r = repo.git_in(&wt, &["commit", "-q", "-m", "names"]);
    assert_ne!(r.code, 0);
    for name in git_says.lines() {
        let line = format!("  staged  {name}  owned by api");
        assert!(r.stderr.lines().any(|l| l == line), "no line {line:?} in {:?}", r.stderr);
    }
}
