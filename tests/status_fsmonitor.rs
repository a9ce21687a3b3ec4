//! `status` with `core.fsmonitor`: the monitor hook is asked what changed (protocol version 2),
//! once for every worktree below the main worktree, and only those paths are looked at once a
//! worktree was found clean; a modified, added or
//! deleted file is still reported dirty, as `git status --porcelain` says; a monitor that fails
//! or answers "everything" means the full check.

use std::path::PathBuf;

use crate::common::*;

fn dirty(repo: &TestRepo, stream: &str) -> serde_json::Value {
    let st = repo.boulder(&["status", "--json"]).ok().json();
    st["streams"].as_array().unwrap().iter().find(|r| r["name"] == stream).unwrap()["dirty"].clone()
}

/// A monitor hook speaking protocol 2 whose answers the test writes: it logs each call's
/// arguments, prints the token in `token`, then the paths listed in `changed` (one a line),
/// or fails when `fail` exists.
struct FakeMonitor {
    dir: PathBuf,
}

impl FakeMonitor {
    fn install(repo: &TestRepo) -> FakeMonitor {
        let dir = repo.dir.parent().unwrap().join("monitor");
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.display();
        let script = format!(
            "#!/bin/sh\necho \"$1 $2\" >> '{d}/calls'\n[ -e '{d}/fail' ] && exit 1\nprintf '%s\\0' \"$(cat '{d}/token')\"\n\
             [ -s '{d}/changed' ] && tr '\\n' '\\0' < '{d}/changed'\nexit 0\n"
        );
        let hook = dir.join("fsmonitor-hook");
        std::fs::write(&hook, script).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let m = FakeMonitor { dir };
        m.answer("t1", &[]);
        repo.git(&["config", "core.fsmonitor", hook.to_str().unwrap()]).ok();
        m
    }

    /// Answer `token` and the paths `changed` in the stream worktree `auth`. status asks the
    /// monitor once, in the main worktree, for every worktree below it: paths are relative to it.
    fn answer(&self, token: &str, changed: &[&str]) {
        std::fs::write(self.dir.join("token"), token).unwrap();
        let text: String = changed
            .iter()
            .map(|p| if *p == "/" { "/\n".to_string() } else { format!(".boulder/worktrees/auth/{p}\n") })
            .collect();
        std::fs::write(self.dir.join("changed"), text).unwrap();
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("calls")).unwrap_or_default().lines().map(str::to_owned).collect()
    }
}

#[test]
fn a_monitored_worktree_is_dirty_exactly_when_git_status_says_so() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    let m = FakeMonitor::install(&repo);
    // No token yet: the full check runs, and finding the worktree clean keeps the monitor's token.
    assert_eq!(dirty(&repo, "auth"), false);
    assert_eq!(m.calls().last().unwrap(), "2 builtin:fake");
    m.answer("t2", &[]);
    assert_eq!(dirty(&repo, "auth"), false);
    assert_eq!(m.calls().last().unwrap(), "2 t1", "asked with the token of the clean check");

    // Modified, reported: dirty, as git says.
    std::fs::write(wt.join("src/auth/mod.rs"), "// changed\n").unwrap();
    m.answer("t3", &["src/auth/mod.rs"]);
    assert_eq!(dirty(&repo, "auth"), true);
    assert!(repo.porcelain_dirty(&wt));
    // Put back: clean again, though the monitor still names the file.
    std::fs::write(wt.join("src/auth/mod.rs"), "// auth\n").unwrap();
    m.answer("t4", &["src/auth/mod.rs"]);
    assert_eq!(dirty(&repo, "auth"), false);
    assert!(!repo.porcelain_dirty(&wt));

    // Added (a new folder, reported as the file and its folder).
    std::fs::create_dir_all(wt.join("src/auth/new")).unwrap();
    std::fs::write(wt.join("src/auth/new/file.rs"), "new\n").unwrap();
    m.answer("t5", &["src/auth/new/", "src/auth/new/file.rs"]);
    assert_eq!(dirty(&repo, "auth"), true);
    assert!(repo.porcelain_dirty(&wt));
    std::fs::remove_dir_all(wt.join("src/auth/new")).unwrap();
    m.answer("t6", &["src/auth/new/"]);
    assert_eq!(dirty(&repo, "auth"), false);
    assert!(!repo.porcelain_dirty(&wt));
    // An ignored file is no change.
    std::fs::write(wt.join("debug.log"), "x\n").unwrap();
    std::fs::write(repo.dir.join(".git/info/exclude"), "*.log\n").unwrap();
    m.answer("t7", &["debug.log"]);
    assert_eq!(dirty(&repo, "auth"), false, "ignore files changed: the full check, which ignores it");
    m.answer("t8", &["debug.log"]);
    assert_eq!(dirty(&repo, "auth"), false);
    assert_eq!(m.calls().last().unwrap(), "2 t7");
    assert!(!repo.porcelain_dirty(&wt));

    // Deleted, in a folder the monitor reports rather than the file.
    std::fs::remove_file(wt.join("src/auth/mod.rs")).unwrap();
    m.answer("t9", &["src/auth"]);
    assert_eq!(dirty(&repo, "auth"), true);
    assert!(repo.porcelain_dirty(&wt));
}

#[test]
fn the_monitor_is_trusted_and_a_failing_or_forgetful_one_means_the_full_check() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    let m = FakeMonitor::install(&repo);
    assert_eq!(dirty(&repo, "auth"), false);
    // A change the monitor does not report is not looked for: nothing else is read (as git trusts it).
    std::fs::write(wt.join("src/auth/mod.rs"), "// changed\n").unwrap();
    m.answer("t2", &[]);
    assert_eq!(dirty(&repo, "auth"), false, "only reported paths are looked at");
    // "Everything may have changed": the full check finds it.
    m.answer("t3", &["/"]);
    assert_eq!(dirty(&repo, "auth"), true);
    // A failing monitor: the full check.
    std::fs::write(wt.join("src/auth/mod.rs"), "// auth\n").unwrap();
    assert_eq!(dirty(&repo, "auth"), false);
    std::fs::write(wt.join("src/auth/mod.rs"), "// changed again\n").unwrap();
    std::fs::write(m.dir.join("fail"), "").unwrap();
    assert_eq!(dirty(&repo, "auth"), true);
    // A commit moves HEAD and the index: what was found clean before no longer holds.
    std::fs::remove_file(m.dir.join("fail")).unwrap();
    repo.git_unmonitored(&wt, &["commit", "-qam", "change"]).ok();
    m.answer("t4", &[]);
    assert_eq!(dirty(&repo, "auth"), false);
    std::fs::write(wt.join("README.md"), "changed\n").unwrap();
    repo.git_unmonitored(&wt, &["add", "README.md"]).ok();
    assert_eq!(repo.git_unmonitored(&wt, &["diff", "--cached", "--name-only"]).ok().stdout, "README.md\n");
    m.answer("t5", &[]);
    assert_eq!(dirty(&repo, "auth"), true, "a staged change is seen though the monitor reports nothing");
}

/// git's own `fsmonitor-watchman` hook with a real watchman, where watchman is installed.
#[test]
fn with_watchman_a_modified_added_or_deleted_file_is_dirty() {
    let have = std::process::Command::new("watchman").arg("--version").output().is_ok_and(|o| o.status.success());
    let sample_hook = ["/usr/share/git-core/templates", "/usr/local/share/git-core/templates"]
        .iter()
        .map(|d| PathBuf::from(d).join("hooks/fsmonitor-watchman.sample"))
        .find(|p| p.exists());
    let (true, Some(sample_hook)) = (have, sample_hook) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "watchman is missing; .ci/run installs it (apt-get install watchman)"
        );
        eprintln!("skipped: watchman (Debian package watchman) or git's fsmonitor-watchman sample is not installed");
        return;
    };
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    let hook = repo.dir.join(".git/hooks/fsmonitor-watchman");
    std::fs::copy(&sample_hook, &hook).unwrap();
    repo.git(&["config", "core.fsmonitor", hook.to_str().unwrap()]).ok();
    let check = |what: &str| {
        let (ours, git) = (dirty(&repo, "auth"), repo.porcelain_dirty(&wt));
        assert_eq!(ours, serde_json::Value::Bool(git), "{what}: git-boulder says dirty={ours}, git {git}");
        git
    };
    assert!(!check("fresh"));
    assert!(!check("again, asking watchman with the token kept"));
    std::fs::write(wt.join("src/auth/mod.rs"), "// changed\n").unwrap();
    assert!(check("modified"));
    std::fs::write(wt.join("src/auth/mod.rs"), "// auth\n").unwrap();
    assert!(!check("put back"));
    std::fs::write(wt.join("src/auth/added.rs"), "new\n").unwrap();
    assert!(check("added"));
    std::fs::remove_file(wt.join("src/auth/added.rs")).unwrap();
    assert!(!check("added file removed"));
    std::fs::remove_file(wt.join("src/auth/mod.rs")).unwrap();
    assert!(check("deleted"));
    for dir in [&wt, &repo.dir] {
        let _ = std::process::Command::new("watchman").arg("watch-del").arg(dir).output();
    }
}
