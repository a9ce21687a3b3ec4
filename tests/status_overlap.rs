//! `status` runs the file system monitor's hook while it reads the state, and checks the
//! worktrees on other threads meanwhile: a slow hook is waited for, a failing one means the full
//! check, a change made while the hook runs is seen the next time, untracked files the monitor
//! reports are found wherever they are, and a worktree outside the plan's folder is still checked.

use std::path::{Path, PathBuf};

use crate::common::*;

fn row(repo: &TestRepo, stream: &str) -> serde_json::Value {
    let st = repo.boulder(&["status", "--json"]).ok().json();
    st["streams"].as_array().unwrap().iter().find(|r| r["name"] == stream).unwrap().clone()
}

fn dirty(repo: &TestRepo, stream: &str) -> serde_json::Value {
    row(repo, stream)["dirty"].clone()
}

/// A protocol-2 monitor hook made of `body` (a shell script fragment that sees the token asked
/// with as `$2`), logging each call's arguments to `calls`; installed as `core.fsmonitor`.
fn install_hook(repo: &TestRepo, body: &str) -> PathBuf {
    let dir = repo.dir.parent().unwrap().join("monitor");
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!("#!/bin/sh\necho \"$1 $2\" >> '{}/calls'\n{body}\n", dir.display());
    let hook = dir.join("fsmonitor-hook");
    std::fs::write(&hook, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    repo.git(&["config", "core.fsmonitor", hook.to_str().unwrap()]).ok();
    dir
}

fn calls(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls")).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// A hook answering what the files `token` and `changed` (one path a line, relative to the main
/// worktree) hold, after sleeping `sleep` seconds.
fn answering_hook(repo: &TestRepo, sleep: &str) -> PathBuf {
    let d = repo.dir.parent().unwrap().join("monitor");
    let d = d.display();
    install_hook(
        repo,
        &format!(
            "sleep {sleep}\nprintf '%s\\0' \"$(cat '{d}/token')\"\n[ -s '{d}/changed' ] && tr '\\n' '\\0' < '{d}/changed'\nexit 0"
        ),
    )
}

fn answer(dir: &Path, token: &str, changed: &[&str]) {
    std::fs::write(dir.join("token"), token).unwrap();
    std::fs::write(dir.join("changed"), changed.iter().map(|p| format!("{p}\n")).collect::<String>()).unwrap();
}

/// The sample with stream `auth`'s worktree and a monitor hook that answers at once, its first
/// answer (token `t1`) given.
fn auth_with_a_monitor() -> (TestRepo, PathBuf) {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let hook = answering_hook(&repo, "0");
    answer(&hook, "t1", &[]);
    (repo, hook)
}

#[test]
fn a_slow_monitor_is_waited_for_and_a_change_made_while_it_runs_is_seen_next_time() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    let file = wt.join("src/auth/mod.rs");
    // Asked with t1, the hook changes a file while it runs, and answers t2 before the change
    // counts (as watchman does for a change made after its sync point).
    let d = repo.dir.parent().unwrap().join("monitor");
    let hook = install_hook(
        &repo,
        &format!(
            "sleep 0.3\nif [ \"$2\" = t1 ]; then printf '// changed meanwhile\\n' > '{f}'; printf 't2\\0'; exit 0; fi\n\
             printf '%s\\0' \"$(cat '{d}/token')\"\n[ -s '{d}/changed' ] && tr '\\n' '\\0' < '{d}/changed'\nexit 0",
            f = file.display(),
            d = d.display()
        ),
    );
    answer(&hook, "t1", &[]);
    // No token kept yet: the full check, after the slow hook answered t1.
    assert_eq!(dirty(&repo, "auth"), false);
    assert_eq!(calls(&hook).last().unwrap(), "2 builtin:fake");
    // Asked with t1: the file changes while the hook runs; the monitor reports nothing yet.
    assert_eq!(dirty(&repo, "auth"), false, "only reported paths are looked at, as git does");
    assert_eq!(calls(&hook).last().unwrap(), "2 t1");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "// changed meanwhile\n");
    // The next question asks with t2, and the change made meanwhile is reported and seen.
    answer(&hook, "t3", &[".boulder/worktrees/auth/src/auth/mod.rs"]);
    assert_eq!(dirty(&repo, "auth"), true);
    assert_eq!(calls(&hook).last().unwrap(), "2 t2", "asked with the token of the answer before");
    assert!(repo.porcelain_dirty(&wt));
}

#[test]
fn a_monitor_that_fails_after_a_while_means_the_full_check() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    let hook = answering_hook(&repo, "0.2");
    answer(&hook, "t1", &[]);
    assert_eq!(dirty(&repo, "auth"), false);
    // A change the monitor will not report, then the monitor fails slowly: the full check sees it.
    std::fs::write(wt.join("src/auth/mod.rs"), "// changed\n").unwrap();
    install_hook(&repo, "sleep 0.3\nexit 1");
    assert_eq!(dirty(&repo, "auth"), true);
    assert!(repo.porcelain_dirty(&wt));
    assert!(
        !repo.dir.join(".git/boulder/fsmonitor.json").exists(),
        "no token is kept from a monitor that did not answer"
    );
    // A hook that answers with no token at all: the full check as well.
    std::fs::write(wt.join("src/auth/mod.rs"), "// auth\n").unwrap();
    install_hook(&repo, "sleep 0.2\nexit 0");
    assert_eq!(dirty(&repo, "auth"), false);
    std::fs::write(wt.join("README.md"), "changed\n").unwrap();
    assert_eq!(dirty(&repo, "auth"), true);
}

#[test]
fn untracked_files_the_monitor_reports_are_found_at_any_depth() {
    let (repo, hook) = auth_with_a_monitor();
    let wt = repo.worktree("auth");
    assert_eq!(dirty(&repo, "auth"), false);
    answer(&hook, "t2", &[]);
    assert_eq!(dirty(&repo, "auth"), false);
    let at = |p: &str| format!(".boulder/worktrees/auth/{p}");
    let check = |token: &str, changed: &[String], want: bool, what: &str| {
        let changed: Vec<&str> = changed.iter().map(String::as_str).collect();
        answer(&hook, token, &changed);
        assert_eq!(dirty(&repo, "auth"), serde_json::Value::Bool(want), "{what}");
        assert_eq!(repo.porcelain_dirty(&wt), want, "{what}: git agrees");
    };
    // A new file deep in a new folder, reported alone (not its folders).
    std::fs::create_dir_all(wt.join("src/auth/deep/er")).unwrap();
    std::fs::write(wt.join("src/auth/deep/er/new.rs"), "new\n").unwrap();
    check("t3", &[at("src/auth/deep/er/new.rs")], true, "a file in a new folder, reported alone");
    std::fs::remove_dir_all(wt.join("src/auth/deep")).unwrap();
    check("t4", &[at("src/auth/deep/er/new.rs"), at("src/auth/deep/er"), at("src/auth/deep")], false, "removed");
    // A new folder reported without its file.
    std::fs::create_dir_all(wt.join("src/auth/newdir")).unwrap();
    std::fs::write(wt.join("src/auth/newdir/file.rs"), "new\n").unwrap();
    check("t5", &[at("src/auth/newdir/")], true, "a new folder, reported without its file");
    std::fs::remove_dir_all(wt.join("src/auth/newdir")).unwrap();
    check("t6", &[at("src/auth/newdir/")], false, "the new folder removed");
    // A new file at the top of the worktree, reported as the worktree's own folder changing.
    std::fs::write(wt.join("notes.txt"), "x\n").unwrap();
    check("t7", &[".boulder/worktrees/auth".to_string()], true, "the worktree's folder reported");
    std::fs::remove_file(wt.join("notes.txt")).unwrap();
    check("t8", &[".boulder/worktrees/auth".to_string()], false, "the file removed");
    // A tracked folder reported: an untracked file further down in it is found.
    std::fs::create_dir_all(wt.join("src/types/more")).unwrap();
    std::fs::write(wt.join("src/types/more/x.rs"), "x\n").unwrap();
    check("t9", &[at("src")], true, "a tracked folder reported, the new file deeper down");
    std::fs::remove_dir_all(wt.join("src/types/more")).unwrap();
    check("t10", &[at("src")], false, "removed again");
    // An ignored file (a rule in a tracked folder's .gitignore is a tracked change; use info/exclude).
    std::fs::write(repo.dir.join(".git/info/exclude"), "*.log\n").unwrap();
    check("t11", &[], false, "the ignore rules changed: the full check");
    std::fs::write(wt.join("src/auth/debug.log"), "x\n").unwrap();
    check("t12", &[at("src/auth/debug.log")], false, "an ignored file reported");
}

#[test]
fn the_monitor_is_asked_before_the_state_is_read() {
    let (repo, hook) = auth_with_a_monitor();
    let run = repo.boulder(&["-v", "status"]).ok();
    let lines: Vec<&str> = run.stderr.lines().collect();
    let pos = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no trace line {needle:?} in {lines:#?}"))
    };
    assert!(
        pos("the file system monitor is asked") < pos("status: state, stories, ahead/behind"),
        "the hook runs while the state is read: {lines:#?}"
    );
    assert_eq!(calls(&hook).len(), 1, "asked once");
}

#[test]
fn a_worktree_moved_out_of_the_plans_folder_is_still_checked() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth", "docs"]).ok();
    let moved = repo.dir.parent().unwrap().join("auth-moved");
    repo.git(&["worktree", "move", ".boulder/worktrees/auth", moved.to_str().unwrap()]).ok();
    let r = row(&repo, "auth");
    assert_eq!(r["status"], "INITIALIZED");
    assert_eq!(r["dirty"], false);
    std::fs::write(moved.join("src/auth/mod.rs"), "// changed\n").unwrap();
    let r = row(&repo, "auth");
    assert_eq!(Path::new(r["worktree"].as_str().unwrap()).canonicalize().unwrap(), moved.canonicalize().unwrap());
    assert_eq!(r["dirty"], true, "checked where git has it checked out");
    assert!(repo.porcelain_dirty(&moved));
    // The worktree in the plan's folder is checked alongside.
    std::fs::write(repo.worktree("docs").join("docs/index.md"), "changed\n").unwrap();
    assert_eq!(dirty(&repo, "docs"), true);
    assert_eq!(dirty(&repo, "auth"), true);
}

#[test]
fn a_plan_that_does_not_parse_waits_for_the_monitor_it_started() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    // The hook takes a while, then marks that it ran to the end.
    let d = repo.dir.parent().unwrap().join("monitor");
    let hook =
        install_hook(&repo, &format!("sleep 0.5\necho finished > '{}/finished'\nprintf 't1\\0'\nexit 0", d.display()));
    repo.write(".boulder/streams.yaml", "version: 1\nstreams: [\n");
    let run = repo.boulder(&["status"]).code(2);
    assert_shown!("a_plan_that_does_not_parse_waits_for_the_monitor_it_started", run);
    assert_eq!(calls(&hook).len(), 1, "the monitor was started ahead of the plan");
    assert!(hook.join("finished").exists(), "the hook ran to its end before status exited: no process is left behind");
}

#[test]
fn worktrees_outside_the_plans_folder_ask_the_monitor_once() {
    let (repo, hook) = auth_with_a_monitor();
    // Outside the main worktree (as `git worktree add` elsewhere leaves it): asked in it alone.
    let away = repo.dir.parent().unwrap().join("elsewhere").join("auth");
    moved_and_asked_once(&repo, &hook, &repo.worktree("auth"), &away, "src/auth/mod.rs", "t2");
    std::fs::write(away.join("src/auth/mod.rs"), "// auth\n").unwrap();
    answer(&hook, "t3", &["src/auth/mod.rs"]);

    // Below the main worktree, outside the plan's folder: the question in the main worktree serves it.
    let below = repo.dir.join("elsewhere/auth");
    moved_and_asked_once(&repo, &hook, &away, &below, "elsewhere/auth/src/auth/mod.rs", "t4");
}

/// Move the worktree of stream `auth` from `from` to `to`; `status` asks the monitor `hook` one
/// question for it, then sees a change the monitor reports (as `changed`, token `token`) as git
/// does.
fn moved_and_asked_once(repo: &TestRepo, hook: &Path, from: &Path, to: &Path, changed: &str, token: &str) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    repo.git(&["worktree", "move", from.to_str().unwrap(), to.to_str().unwrap()]).ok();
    let before = calls(hook).len();
    assert_eq!(dirty(repo, "auth"), false);
    let asked = calls(hook)[before..].to_vec();
    assert_eq!(asked.len(), 1, "one question for the worktree at {}: {asked:?}", to.display());
    std::fs::write(to.join("src/auth/mod.rs"), "// changed\n").unwrap();
    answer(hook, token, &[changed]);
    assert_eq!(dirty(repo, "auth"), true);
    assert!(repo.porcelain_dirty(to));
}
