//! Hooks run in every worktree, whatever manages them: a relative `core.hooksPath` (husky 9's
//! ignored `.husky/_`, a tracked `.husky` folder in the husky 4 style), the pre-commit framework
//! and lefthook. git-boulder's hooks and the user's both run in the main worktree and in stream
//! worktrees, `hooks install` modifies no tracked file, the other manager's install followed by
//! `git boulder hooks install` again works, and `hooks status` and `doctor` say when git-boulder's
//! hooks would not run somewhere.
//!
//! pre-commit and lefthook are real tools (`.ci/run` installs them); without them a test fails
//! when `CI` is set and is skipped otherwise.

use std::path::{Path, PathBuf};

use crate::common::*;

/// A tool on PATH, or `None` (skip) outside CI; in CI a missing tool fails the test.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "{name} is not installed; .ci/run installs it (pip install {name})");
        eprintln!("skipped: {name} is not installed");
    }
    found
}

fn run_env(repo: &TestRepo, program: &str, dir: &Path, args: &[&str]) -> Run {
    let mut cmd = repo.command(program);
    // pyenv's shims (where pip put the tools on some machines) find Python through PYENV_ROOT.
    if let Some(root) = std::env::var_os("PYENV_ROOT") {
        cmd.env("PYENV_ROOT", root);
    }
    Run::from(cmd.args(args).current_dir(dir).output().unwrap_or_else(|e| panic!("run {program}: {e}")))
}

fn git(repo: &TestRepo, dir: &Path, args: &[&str]) -> Run {
    run_env(repo, "git", dir, args)
}

fn commit(repo: &TestRepo, dir: &Path, file: &str) -> Run {
    let p = dir.join(file);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, format!("{file}\n")).unwrap();
    git(repo, dir, &["add", "-A"]).ok();
    git(repo, dir, &["commit", "-q", "-m", file])
}

fn iteration(repo: &TestRepo, boulder: &str) -> u64 {
    let r = repo.git(&["cat-file", "-p", &format!("refs/boulder/boulders/{boulder}:state.json")]);
    if r.code != 0 {
        return 0;
    }
    serde_json::from_str::<serde_json::Value>(&r.stdout).unwrap()["iteration"].as_u64().unwrap()
}

/// The user's hooks log here, one line per run: `<hook> <folder the hook ran in>`.
fn log_path(repo: &TestRepo) -> PathBuf {
    repo.tmp.path().join("user-hooks.log")
}

fn log(repo: &TestRepo) -> Vec<String> {
    std::fs::read_to_string(log_path(repo)).unwrap_or_default().lines().map(str::to_string).collect()
}

fn clear_log(repo: &TestRepo) {
    let _ = std::fs::remove_file(log_path(repo));
}

fn user_script(repo: &TestRepo, hook: &str) -> String {
    format!("echo \"{hook} $(basename \"$PWD\")\" >> '{}'\n", log_path(repo).display())
}

fn bare_remote(repo: &TestRepo) {
    let bare = repo.tmp.path().join("remote.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]).ok();
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]).ok();
    repo.git(&["push", "-q", "--no-verify", "origin", "main"]).ok();
}

#[cfg(unix)]
fn chmod_x(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Tracked files unchanged and nothing new to track, in the main worktree.
#[track_caller]
fn tree_untouched(repo: &TestRepo) {
    assert_eq!(repo.git_out(&["status", "--porcelain", "--untracked-files=all"]), "", "install changed the work tree");
}

/// git-boulder's hooks and the user's both run in the main worktree (on a stream branch checked
/// out there) and in a stream worktree.
fn both_run_everywhere(repo: &TestRepo, user_hooks: &[&str]) {
    let wt = repo.dir.join(".boulder/worktrees/auth");
    clear_log(repo);
    let before = iteration(repo, "auth");
    let r = commit(repo, &wt, &format!("src/auth/f{before}.rs")).ok();
    assert!(!r.stderr.contains("error"), "{}", r.stderr);
    assert_eq!(iteration(repo, "auth"), before + 1, "git-boulder's post-commit did not run in the stream worktree");
    for h in user_hooks.iter().filter(|h| **h != "pre-push") {
        assert!(
            log(repo).contains(&format!("{h} auth")),
            "the user's {h} did not run in the stream worktree: {:?}",
            log(repo)
        );
    }
    // The main worktree, on the docs stream's branch.
    clear_log(repo);
    let docs = iteration(repo, "docs");
    if repo.git_out(&["branch", "--show-current"]) != "boulder/docs" {
        repo.git(&["checkout", "-q", "-B", "boulder/docs"]).ok();
    }
    commit(repo, &repo.dir, &format!("docs/f{docs}.md")).ok();
    assert_eq!(iteration(repo, "docs"), docs + 1, "git-boulder's post-commit did not run in the main worktree");
    let main = repo.dir.file_name().unwrap().to_string_lossy().into_owned();
    for h in user_hooks.iter().filter(|h| **h != "pre-push") {
        assert!(
            log(repo).contains(&format!("{h} {main}")),
            "the user's {h} did not run in the main worktree: {:?}",
            log(repo)
        );
    }
    // pre-push: ours refuses another stream's path, after the user's ran.
    clear_log(repo);
    commit(repo, &wt, "src/api/hack.rs").ok();
    let r = git(repo, &wt, &["push", "-q", "origin", "boulder/auth"]);
    assert!(r.code != 0 && r.stderr.contains("owned by api"), "{}", r.stderr);
    if user_hooks.contains(&"pre-push") {
        assert!(log(repo).contains(&"pre-push auth".to_string()), "{:?}", log(repo));
    }
    // Undone as the stream's own (set aside, so no landing or doctor looks for it).
    repo.boulder(&["stream", "rollback", "auth", "--to", "boulder/auth~1"]).ok();
}

#[track_caller]
fn status_and_doctor_say_not_running(repo: &TestRepo) {
    let st = repo.boulder(&["hooks", "status", "--json"]).ok().json();
    let post = st.as_array().unwrap().iter().find(|h| h["name"] == "post-commit").unwrap().clone();
    assert_ne!(post["state"], "installed", "{st}");
    let wt = repo.dir.join(".boulder/worktrees/auth");
    let not_running: Vec<&str> =
        post["not_running_in"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(not_running.contains(&wt.to_str().unwrap()), "{st}");
    let doc = repo.boulder(&["doctor", "--json"]).code(1).json();
    let hooks: Vec<&serde_json::Value> =
        doc["problems"].as_array().unwrap().iter().filter(|p| p["area"] == "hooks").collect();
    assert!(hooks.iter().any(|p| p["fix"] == "git boulder hooks install"), "{doc}");
    assert!(hooks.iter().any(|p| p["message"].as_str().unwrap().contains(wt.to_str().unwrap())), "{doc}");
    // The table's note says why, as doctor does: not "another hooks folder" when it is the same.
    let text = repo.boulder(&["hooks", "status"]).ok().stdout;
    let note = text.lines().find(|l| l.contains("post-commit") && l.contains("fix:")).unwrap_or_default();
    assert!(!note.contains("another hooks folder") && note.contains("git boulder hooks install"), "{text}");
}

fn stream_repo() -> TestRepo {
    let repo = sample();
    bare_remote(&repo);
    repo
}

/// husky 9: `.husky/_` is generated (ignored, with a `h` helper and one file per hook that
/// calls `.husky/<hook>`), `core.hooksPath=.husky/_`; the user's scripts are tracked in `.husky`.
fn husky9_generate(repo: &TestRepo) {
    let gen = repo.dir.join(".husky/_");
    std::fs::create_dir_all(&gen).unwrap();
    std::fs::write(gen.join(".gitignore"), "*\n").unwrap();
    std::fs::write(
        gen.join("h"),
        "#!/usr/bin/env sh\n[ \"$HUSKY\" = \"2\" ] && set -x\nn=$(basename \"$0\")\ns=$(dirname \"$(dirname \"$0\")\")/$n\n\n\
         [ ! -f \"$s\" ] && exit 0\n\n[ \"${HUSKY-}\" = \"0\" ] && exit 0\n\nexport PATH=\"node_modules/.bin:$PATH\"\n\
         sh -e \"$s\" \"$@\"\nc=$?\n\n[ $c != 0 ] && echo \"husky - $n script failed (code $c)\"\nexit $c\n",
    )
    .unwrap();
    for hook in ["pre-commit", "commit-msg", "post-commit", "pre-push", "post-rewrite", "post-checkout", "pre-rebase"] {
        std::fs::write(gen.join(hook), "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"\n").unwrap();
        chmod_x(&gen.join(hook));
    }
    repo.git(&["config", "core.hooksPath", ".husky/_"]).ok();
}

#[test]
fn husky9_ignored_hooks_folder() {
    let repo = stream_repo();
    for hook in ["pre-commit", "post-commit", "pre-push"] {
        repo.write(&format!(".husky/{hook}"), &user_script(&repo, hook));
    }
    repo.commit_all("husky scripts");
    husky9_generate(&repo);
    tree_untouched(&repo);
    let generated = std::fs::read(repo.dir.join(".husky/_/post-commit")).unwrap();

    repo.boulder(&["hooks", "install"]).ok();
    tree_untouched(&repo);
    assert_eq!(std::fs::read(repo.dir.join(".husky/_/post-commit")).unwrap(), generated);
    // git-boulder's folder is what git uses now, in every worktree; it passes on every hook husky
    // has, but starts no shell on each ref update.
    let ours = PathBuf::from(repo.git_out(&["rev-parse", "--git-path", "hooks"]));
    assert!(ours.ends_with(".git/boulder/hooks"), "{}", ours.display());
    assert!(ours.join("commit-msg").exists() && !ours.join("reference-transaction").exists());
    repo.boulder(&["stream", "init", "auth"]).ok();
    // A new worktree has no `.husky/_` (ignored, generated): git alone would run no hook there.
    assert!(!repo.dir.join(".boulder/worktrees/auth/.husky/_").exists());
    let st = repo.boulder(&["hooks", "status", "--json"]).ok().json();
    assert!(
        st.as_array()
            .unwrap()
            .iter()
            .filter(|h| h["default"] == true)
            .all(|h| h["state"] == "installed" && h["not_running_in"].as_array().unwrap().is_empty()),
        "{st}"
    );
    assert!(repo.boulder(&["doctor", "--json"]).ok().json()["problems"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["area"] != "hooks"));
    both_run_everywhere(&repo, &["pre-commit", "post-commit", "pre-push"]);

    // `husky` runs again (npm install): it sets core.hooksPath back and regenerates `.husky/_`.
    husky9_generate(&repo);
    status_and_doctor_say_not_running(&repo);
    repo.boulder(&["hooks", "install"]).ok();
    tree_untouched(&repo);
    assert!(repo.boulder(&["doctor", "--json"]).ok().json()["problems"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["area"] != "hooks"));
    both_run_everywhere(&repo, &["pre-commit", "post-commit", "pre-push"]);

    // Uninstall puts core.hooksPath back; husky's hooks run as before, ours no more.
    repo.boulder(&["hooks", "uninstall"]).ok();
    assert_eq!(repo.git_out(&["config", "core.hooksPath"]), ".husky/_");
    assert_eq!(repo.git(&["config", "boulder.hooksPath"]).code, 1);
    clear_log(&repo);
    let before = iteration(&repo, "docs");
    commit(&repo, &repo.dir, "docs/after.md").ok();
    assert_eq!(iteration(&repo, "docs"), before);
    assert!(log(&repo).iter().any(|l| l.starts_with("post-commit")), "{:?}", log(&repo));
}

#[test]
fn husky4_tracked_hooks_folder() {
    let repo = stream_repo();
    // The hooks themselves are tracked, executable, in `.husky`, and core.hooksPath=.husky.
    for hook in ["post-commit", "pre-push"] {
        repo.write(&format!(".husky/{hook}"), &format!("#!/bin/sh\n{}", user_script(&repo, hook)));
        chmod_x(&repo.dir.join(".husky").join(hook));
    }
    repo.commit_all("husky hooks");
    repo.git(&["config", "core.hooksPath", ".husky"]).ok();
    let tracked = repo.git_out(&["ls-files", "-s", ".husky"]);

    repo.boulder(&["hooks", "install"]).ok();
    tree_untouched(&repo);
    assert_eq!(repo.git_out(&["ls-files", "-s", ".husky"]), tracked);
    assert!(std::fs::read_dir(repo.dir.join(".husky")).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains("boulder")));
    repo.boulder(&["stream", "init", "auth"]).ok();
    both_run_everywhere(&repo, &["post-commit", "pre-push"]);
    // In the stream worktree, its own tracked copy ran (the log says `auth`), and nothing there changed.
    let wt = repo.dir.join(".boulder/worktrees/auth");
    assert_eq!(git(&repo, &wt, &["status", "--porcelain"]).ok().stdout, "");
}

/// pre-commit's config: one local hook, run at pre-commit, post-commit and pre-push.
fn pre_commit_config(repo: &TestRepo) -> String {
    format!(
        "repos:\n- repo: local\n  hooks:\n  - id: log\n    name: log\n    entry: sh -c 'echo \"$0 $(basename \"$PWD\")\" >> {}' pre-commit-framework\n    \
         language: system\n    always_run: true\n    pass_filenames: false\n    stages: [pre-commit, post-commit, pre-push]\n",
        log_path(repo).display()
    )
}

#[test]
fn pre_commit_framework() {
    let Some(pre_commit) = tool("pre-commit") else { return };
    let pre_commit = pre_commit.to_str().unwrap();
    let repo = stream_repo();
    repo.write(".pre-commit-config.yaml", &pre_commit_config(&repo));
    repo.commit_all("pre-commit config");
    let install = ["install", "-t", "pre-commit", "-t", "post-commit", "-t", "pre-push"];
    run_env(&repo, pre_commit, &repo.dir, &install).ok();
    repo.boulder(&["hooks", "install"]).ok();
    tree_untouched(&repo);
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    let ran = |repo: &TestRepo, dir: &str| log(repo).iter().filter(|l| l.ends_with(dir)).count();

    clear_log(&repo);
    let r = commit(&repo, &wt, "src/auth/a.rs").ok();
    assert_eq!(iteration(&repo, "auth"), 1, "{}", r.stderr);
    assert_eq!(ran(&repo, " auth"), 2, "pre-commit and post-commit stages: {:?}", log(&repo));
    both_run_everywhere(&repo, &[]);

    // pre-commit installs again: it moves our shims aside as `<hook>.legacy` and runs them.
    run_env(&repo, pre_commit, &repo.dir, &install).ok();
    assert!(repo.dir.join(".git/hooks/post-commit.legacy").exists());
    status_and_doctor_say_not_running(&repo);
    // git-boulder installs again: the same pre-commit hook as the one kept is no error.
    let r = repo.boulder(&["hooks", "install"]).ok();
    assert_shown!("pre_commit_framework", r);
    assert!(!repo.dir.join(".git/hooks/post-commit.legacy").exists());
    tree_untouched(&repo);
    clear_log(&repo);
    let before = iteration(&repo, "auth");
    let r = commit(&repo, &wt, "src/auth/b.rs").ok();
    assert!(!r.stderr.contains("bug") && !r.stderr.contains("error"), "{}", r.stderr);
    assert_eq!(iteration(&repo, "auth"), before + 1);
    assert_eq!(ran(&repo, " auth"), 2, "{:?}", log(&repo));
    both_run_everywhere(&repo, &[]);
    // Both still run on push: the framework's pre-push stage and our refusal.
    clear_log(&repo);
    commit(&repo, &wt, "src/api/x.rs").ok();
    let r = git(&repo, &wt, &["push", "-q", "origin", "boulder/auth"]);
    assert!(r.code != 0 && r.stderr.contains("owned by api"), "{}", r.stderr);
    assert!(ran(&repo, " auth") >= 1, "{:?}", log(&repo));
}

#[test]
fn lefthook() {
    let Some(lefthook) = tool("lefthook") else { return };
    let lefthook = lefthook.to_str().unwrap();
    let repo = stream_repo();
    let line = |hook: &str| format!("echo \"{hook} $(basename \"$PWD\")\" >> {}", log_path(&repo).display());
    repo.write(
        "lefthook.yml",
        &format!(
            "post-commit:\n  commands:\n    log:\n      run: {}\npre-push:\n  commands:\n    log:\n      run: {}\n",
            serde_json::to_string(&line("post-commit")).unwrap(),
            serde_json::to_string(&line("pre-push")).unwrap()
        ),
    );
    repo.commit_all("lefthook config");
    run_env(&repo, lefthook, &repo.dir, &["install"]).ok();
    repo.boulder(&["hooks", "install"]).ok();
    tree_untouched(&repo);
    repo.boulder(&["stream", "init", "auth"]).ok();
    both_run_everywhere(&repo, &["post-commit", "pre-push"]);

    // lefthook installs again (forced: it rewrites its hooks over ours), then git-boulder again.
    run_env(&repo, lefthook, &repo.dir, &["install", "--force"]).ok();
    status_and_doctor_say_not_running(&repo);
    repo.boulder(&["hooks", "install"]).ok();
    tree_untouched(&repo);
    both_run_everywhere(&repo, &["post-commit", "pre-push"]);

    // And unforced: lefthook keeps ours as `<hook>.old` and runs it.
    run_env(&repo, lefthook, &repo.dir, &["install"]);
    repo.boulder(&["hooks", "install"]).ok();
    for h in ["post-commit", "pre-push"] {
        assert!(!repo.dir.join(format!(".git/hooks/{h}.old")).exists(), "{h}.old");
    }
    both_run_everywhere(&repo, &["post-commit", "pre-push"]);
}

#[test]
fn a_worktree_with_its_own_hooks_path_is_reported() {
    let repo = stream_repo();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    assert!(repo.boulder(&["doctor", "--json"]).ok().json()["problems"].as_array().unwrap().is_empty());
    // The stream worktree alone looks elsewhere for hooks (per-worktree config).
    let wt = repo.dir.join(".boulder/worktrees/auth");
    repo.git(&["config", "extensions.worktreeConfig", "true"]).ok();
    git(&repo, &wt, &["config", "--worktree", "core.hooksPath", ".local-hooks"]).ok();
    let before = iteration(&repo, "auth");
    commit(&repo, &wt, "src/auth/a.rs").ok();
    assert_eq!(iteration(&repo, "auth"), before, "git ran git-boulder's hook after all");
    let st = repo.boulder(&["hooks", "status", "--json"]).ok().json();
    let post = st.as_array().unwrap().iter().find(|h| h["name"] == "post-commit").unwrap().clone();
    assert_eq!(post["state"], "installed");
    assert_eq!(post["not_running_in"], serde_json::json!([wt.to_str().unwrap()]), "{st}");
    let text = repo.boulder(&["hooks", "status"]).ok().stdout;
    // The path is shell-quoted, so the command pastes whatever the folder is called.
    let fix = format!("git -C '{}' config --worktree --unset core.hooksPath", wt.display());
    assert!(text.contains("would not run in") && text.contains(&fix), "{text}");
    let doc = repo.boulder(&["doctor", "--json"]).code(1).json();
    assert!(
        doc["problems"].as_array().unwrap().iter().any(|p| p["area"] == "hooks"
            && p["message"].as_str().unwrap().contains(wt.to_str().unwrap())
            && p["fix"] == fix.as_str()),
        "{doc}"
    );
    // The fix works.
    git(&repo, &wt, &["config", "--worktree", "--unset", "core.hooksPath"]).ok();
    // The commit made while the hook did not run is still unrecorded; its fix records it.
    let doc = repo.boulder(&["doctor", "--json"]).code(1).json();
    let problems = doc["problems"].as_array().unwrap();
    assert!(
        problems.len() == 1
            && problems[0]["area"] == "activity"
            && problems[0]["fix"] == "git boulder record --stream auth",
        "{doc}"
    );
    repo.boulder(&["record", "--stream", "auth"]).ok();
    assert_eq!(iteration(&repo, "auth"), before + 1);
    assert!(repo.boulder(&["doctor", "--json"]).ok().json()["problems"].as_array().unwrap().is_empty());
    commit(&repo, &wt, "src/auth/b.rs").ok();
    assert_eq!(iteration(&repo, "auth"), before + 2);
}

#[test]
fn a_hand_written_hook_survives_another_manager_and_a_reinstall() {
    let Some(pre_commit) = tool("pre-commit") else { return };
    let pre_commit = pre_commit.to_str().unwrap();
    let repo = stream_repo();
    // The user's own post-commit hook, kept by git-boulder as post-commit.boulder-orig.
    let mine = repo.tmp.path().join("mine.log");
    let hook = repo.dir.join(".git/hooks/post-commit");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, format!("#!/bin/sh\necho mine >> '{}'\n", mine.display())).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    repo.boulder(&["hooks", "install"]).ok();
    // pre-commit moves our shim aside as post-commit.legacy and puts its own hook there.
    repo.write(".pre-commit-config.yaml", &pre_commit_config(&repo));
    repo.commit_all("pre-commit config");
    run_env(&repo, pre_commit, &repo.dir, &["install", "-t", "post-commit"]).ok();
    // git-boulder installs again: the user's hook is not lost, and still runs.
    let r = repo.boulder(&["hooks", "install"]).ok();
    assert_shown!("a_hand_written_hook_survives_another_manager_and_a_reinstall", r);
    let _ = std::fs::remove_file(&mine);
    repo.write("README.md", "again\n");
    repo.commit_all("a commit");
    assert_eq!(std::fs::read_to_string(&mine).unwrap_or_default(), "mine\n", "the user's hook did not run");
}

/// `core.hooksPath` in the user's global config (one folder of hooks for every repository):
/// git-boulder writes nothing there, chains to it from its own folder in this repository only,
/// and uninstall leaves the global setting in force, with no local copy of it.
#[test]
fn a_global_hooks_path_is_chained_from_this_repository_and_never_written() {
    let repo = stream_repo();
    let global_hooks = repo.tmp.path().join("global-hooks");
    std::fs::create_dir_all(&global_hooks).unwrap();
    let user_hook = global_hooks.join("post-commit");
    std::fs::write(&user_hook, format!("#!/bin/sh\n{}", user_script(&repo, "post-commit"))).unwrap();
    chmod_x(&user_hook);
    let global = repo.tmp.path().join("global.gitconfig");
    std::fs::write(&global, format!("[core]\n\thooksPath = {}\n", global_hooks.display())).unwrap();
    let env = [("GIT_CONFIG_GLOBAL", global.to_str().unwrap())];
    let local_config = || std::fs::read_to_string(repo.dir.join(".git/config")).unwrap();
    let before = local_config();

    repo.boulder_env(&repo.dir, &["stream", "init", "auth"], &env).ok();
    let own = repo.git_out(&["config", "--local", "core.hooksPath"]);
    assert!(own.ends_with(".git/boulder/hooks"), "{own}");
    let mut names: Vec<String> = std::fs::read_dir(&global_hooks)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["post-commit".to_string()], "nothing written into the global folder");

    // A commit in the stream's worktree: recorded, and the user's global hook ran too.
    let wt = repo.dir.join(".boulder/worktrees/auth");
    clear_log(&repo);
    let p = wt.join("src/auth/g.rs");
    std::fs::write(&p, "g\n").unwrap();
    let git = |args: &[&str]| {
        let mut cmd = repo.command("git");
        cmd.args(args).current_dir(&wt).env("GIT_CONFIG_GLOBAL", &global);
        Run::from(cmd.output().unwrap()).ok()
    };
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "g"]);
    assert_eq!(iteration(&repo, "auth"), 1);
    assert_eq!(log(&repo), vec!["post-commit auth".to_string()]);

    repo.boulder_env(&repo.dir, &["hooks", "uninstall"], &env).ok();
    assert_eq!(local_config(), before, "the repository's config is as it was");
}
