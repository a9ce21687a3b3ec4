//! Harness integration as a new user meets it: cases found by driving the installed files the way
//! each harness really calls them.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::*;

fn node() -> bool {
    let ok = std::process::Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "node is missing; .ci/run installs it (apt-get install nodejs)");
        eprintln!("skipped: node is not installed");
    }
    ok
}

/// Run the installed plugin of `dir` under tests/support/opencode-bus.mjs (events as a current
/// OpenCode's bus sends them).
fn bus(repo: &TestRepo, dir: &Path, config: Value) -> Value {
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/opencode-bus.mjs");
    let plugin = dir.join(".opencode/plugins/git-boulder.js");
    let run = Run::from(
        repo.command("node").arg(driver).arg(plugin).arg(config.to_string()).current_dir(dir).output().expect("node"),
    )
    .ok();
    assert_eq!(run.stderr, "", "the plugin wrote to stderr");
    run.json()
}

fn enforced(repo: &TestRepo, dir: &Path, boulder: &str) -> usize {
    let log = repo.boulder_in(dir, &["log", boulder, "--json"]).ok().json();
    log.as_array().unwrap().iter().filter(|e| e["op"]["kind"] == "enforced").count()
}

#[test]
fn opencode_one_idle_announced_twice_makes_one_prompt() {
    if !node() {
        return;
    }
    let repo = sample();
    repo.boulder(&["agent", "install", "opencode"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    let dir = wt.display().to_string();
    let said = json!([{"info": {"role": "assistant"}, "parts": [{"type": "text", "text": "All stories implemented. I am done."}]}]);
    let out = bus(
        &repo,
        &wt,
        json!({"directory": dir, "sessions": {"ses_main": {"directory": dir, "messages": said}}, "idles": ["ses_main"]}),
    );
    let prompts: Vec<&Value> =
        out["calls"].as_array().unwrap().iter().filter(|c| c["call"] == "session.promptAsync").collect();
    assert_eq!(prompts.len(), 1, "session.status and session.idle of one idle: one prompt: {out}");
    assert_eq!(enforced(&repo, &wt, "auth"), 1, "one enforcement recorded");

    // An older OpenCode that sends only session.idle is still served.
    let out = bus(
        &repo,
        &wt,
        json!({"directory": dir, "legacy": true, "sessions": {"ses_old": {"directory": dir, "messages": said}}, "idles": ["ses_old"]}),
    );
    let prompts = out["calls"].as_array().unwrap().iter().filter(|c| c["call"] == "session.promptAsync").count();
    assert_eq!(prompts, 1, "{out}");
}

#[test]
fn a_commit_hook_refusing_install_commit_leaves_file_and_index_as_they_were() {
    let repo = TestRepo::with_files(&[
        (".claude/settings.json", "{\"permissions\":{\"allow\":[]}}"),
        ("hooks/pre-commit", "#!/bin/sh\necho 'lint: not today' >&2\nexit 1\n"),
    ]);
    std::fs::set_permissions(repo.dir.join("hooks/pre-commit"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    repo.git(&["config", "core.hooksPath", "hooks"]).ok();
    // The user has staged something of their own in the file: it stays staged, as it was.
    repo.write(".claude/settings.json", "{\"permissions\":{\"allow\":[\"Bash(ls:*)\"]}}");
    repo.git(&["add", ".claude/settings.json"]).ok();
    let staged = repo.git_out(&["ls-files", "-s", "--", ".claude/settings.json"]);
    let status = repo.git_out(&["status", "--porcelain"]);

    let run = repo.boulder(&["agent", "install", "claude", "--commit"]).code(1);
    assert_shown!("a_commit_hook_refusing_install_commit_leaves_file_and_index_as_they_were_2", run);
    assert_eq!(repo.read(".claude/settings.json"), "{\"permissions\":{\"allow\":[\"Bash(ls:*)\"]}}");
    assert_eq!(repo.git_out(&["ls-files", "-s", "--", ".claude/settings.json"]), staged, "the index entry is back");
    assert_eq!(repo.git_out(&["status", "--porcelain"]), status);

    // A project file that did not exist: nothing left staged either.
    let run = repo.boulder(&["agent", "install", "codex", "--commit"]).code(1);
    assert_shown!("a_commit_hook_refusing_install_commit_leaves_file_and_index_as_they_were", run);
    assert!(!repo.dir.join(".codex/hooks.json").exists());
    assert_eq!(repo.git_out(&["ls-files", "--", ".codex"]), "");
    assert_eq!(repo.git_out(&["status", "--porcelain"]), status);
}

#[test]
fn a_settings_file_that_is_a_symlink_is_refused_and_left_a_link() {
    let repo = TestRepo::with_files(&[("README.md", "x\n")]);
    let shared = repo.home.join("shared-claude.json");
    std::fs::write(&shared, "{\"env\":{\"A\":\"1\"}}\n").unwrap();
    std::fs::create_dir_all(repo.dir.join(".claude")).unwrap();
    std::os::unix::fs::symlink(&shared, repo.dir.join(".claude/settings.local.json")).unwrap();

    let run = repo.boulder(&["agent", "install", "claude"]).code(2);
    assert_shown!("a_settings_file_that_is_a_symlink_is_refused_and_left_a_link", run);
    let meta = std::fs::symlink_metadata(repo.dir.join(".claude/settings.local.json")).unwrap();
    assert!(meta.file_type().is_symlink(), "the link is still a link");
    assert_eq!(std::fs::read_to_string(&shared).unwrap(), "{\"env\":{\"A\":\"1\"}}\n", "its target is untouched");
    assert!(!repo.dir.join(".git/boulder/agents.json").exists(), "nothing recorded");
    assert!(!std::fs::read_to_string(repo.dir.join(".git/info/exclude")).unwrap_or_default().contains(".claude"));
}

#[test]
fn doctor_on_a_broken_settings_file_names_a_fix_that_works() {
    let repo = TestRepo::with_files(&[("README.md", "x\n")]);
    repo.boulder(&["agent", "install", "claude"]).ok();
    let settings = repo.dir.join(".claude/settings.local.json");
    std::fs::write(&settings, "{ oops\n").unwrap();
    let run = repo.boulder(&["doctor"]).code(1);
    assert_shown!("doctor_on_a_broken_settings_file_names_a_fix_that_works", run);
    // `agent install` alone refuses that file (exit 2): the fix says to mend it first.
    repo.boulder(&["agent", "install", "claude"]).code(2);
    assert!(
        run.stdout.contains(&format!(
            "fix: fix {} (or move it aside), then git boulder agent install claude",
            settings.display()
        )),
        "{}",
        run.stdout
    );
    std::fs::remove_file(&settings).unwrap();
    repo.boulder(&["agent", "install", "claude"]).ok();
    let run = repo.boulder(&["doctor"]);
    assert!(!run.stdout.contains("claude integration"), "{}", run.stdout);
}

/// Make the record of `file` say an earlier install wrote `bytes` there (as an install by an
/// older git-boulder did), and put those bytes in the file.
fn installed_by_an_older_version(repo: &TestRepo, file: &Path, bytes: &str) {
    std::fs::write(file, bytes).unwrap();
    let id = repo.git_out(&["hash-object", "--", file.to_str().unwrap()]);
    let record = repo.dir.join(".git/boulder/agents.json");
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    for h in r["harnesses"].as_object_mut().unwrap().values_mut() {
        for f in h["files"].as_array_mut().unwrap() {
            if Path::new(f["worktree"].as_str().unwrap()).join(f["file"].as_str().unwrap()) == file {
                f["wrote"] = json!(id);
            }
        }
    }
    std::fs::write(&record, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
}

#[test]
fn after_an_upgrade_install_replaces_what_the_older_install_wrote_and_uninstall_still_restores() {
    let repo = sample();
    let settings = repo.dir.join(".claude/settings.local.json");
    let mine = "{\"env\": {\"A\": \"1\"}}\n";
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, mine).unwrap();
    repo.boulder(&["agent", "install", "claude"]).ok();
    repo.boulder(&["agent", "install", "opencode"]).ok();
    let plugin = repo.dir.join(".opencode/plugins/git-boulder.js");
    let (current_plugin, current_settings) =
        (std::fs::read_to_string(&plugin).unwrap(), std::fs::read_to_string(&settings).unwrap());

    // What an older git-boulder's install wrote: an older plugin, an older hook command.
    let older_plugin = current_plugin.replace("const CHECK_TIMEOUT_MS = 30_000;", "const CHECK_TIMEOUT_MS = 10_000;");
    installed_by_an_older_version(&repo, &plugin, &older_plugin);
    let older_settings =
        current_settings.replace("git boulder agent hook claude", "git-boulder agent hook claude --v0");
    installed_by_an_older_version(&repo, &settings, &older_settings);
    let doc = repo.boulder(&["doctor", "--json"]).code(1).json();
    let fixes: Vec<&str> = doc["problems"].as_array().unwrap().iter().filter_map(|p| p["fix"].as_str()).collect();
    assert!(fixes.contains(&"git boulder agent install opencode"), "{doc}");
    assert!(fixes.contains(&"git boulder agent install claude"), "{doc}");

    // The fix doctor names does what it says.
    repo.boulder(&["agent", "install", "opencode"]).ok();
    repo.boulder(&["agent", "install", "claude"]).ok();
    assert!(std::fs::read_to_string(&plugin).unwrap() == current_plugin, "this version's plugin is in place");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), current_settings);
    let doc = repo.boulder(&["doctor", "--json"]).json();
    assert!(!doc["problems"].as_array().unwrap().iter().any(|p| p["area"] == "agent"), "{doc}");

    // And uninstall still puts back exactly what was there before the first install.
    repo.boulder(&["agent", "uninstall", "opencode"]).ok();
    repo.boulder(&["agent", "uninstall", "claude"]).ok();
    assert!(!repo.dir.join(".opencode").exists());
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), mine);
}
