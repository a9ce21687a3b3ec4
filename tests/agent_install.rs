//! `agent install|uninstall|status`: the harness files in every worktree, merged into what is
//! there without reordering anyone's keys, idempotent, kept out of `git status`, restored byte
//! for byte; tracked files left alone without `--commit`; `stream init` and `doctor`.

use std::path::Path;

use crate::common::*;

/// A Claude Code settings file of someone else's, written the way the install writes JSON
/// (two-space indent), so the merge result can be compared byte for byte.
const THEIR_SETTINGS: &str = r#"{
  "permissions": {
    "allow": [
      "Bash(npm test)"
    ]
  },
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send done",
            "timeout": 5
          }
        ]
      }
    ],
    "PostToolUse": [
      {
        "matcher": "Write",
        "hooks": [
          {
            "type": "command",
            "command": "cargo fmt"
          }
        ]
      }
    ]
  },
  "model": "opus"
}
"#;

/// [`THEIR_SETTINGS`] once git-boulder's hooks are in: theirs first and in their order, ours
/// appended to each event's list, new events appended to `hooks`, every other key in place.
const MERGED_SETTINGS: &str = r#"{
  "permissions": {
    "allow": [
      "Bash(npm test)"
    ]
  },
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send done",
            "timeout": 5
          }
        ]
      },
      {
        "hooks": [
          {
            "type": "command",
            "command": "git boulder agent hook claude"
          }
        ]
      }
    ],
    "PostToolUse": [
      {
        "matcher": "Write",
        "hooks": [
          {
            "type": "command",
            "command": "cargo fmt"
          }
        ]
      }
    ],
    "SessionStart": [
      {
        "matcher": "startup|resume|clear|compact",
        "hooks": [
          {
            "type": "command",
            "command": "git boulder agent hook claude"
          }
        ]
      }
    ],
    "PreToolUse": [
      {
        "matcher": "Edit|Write|MultiEdit|NotebookEdit",
        "hooks": [
          {
            "type": "command",
            "command": "git boulder agent hook claude"
          }
        ]
      }
    ],
    "SubagentStop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "git boulder agent hook claude"
          }
        ]
      }
    ],
    "WorktreeCreate": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "git boulder agent hook claude"
          }
        ]
      }
    ],
    "WorktreeRemove": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "git boulder agent hook claude"
          }
        ]
      }
    ]
  },
  "model": "opus"
}
"#;

fn read_bytes(p: &Path) -> Option<Vec<u8>> {
    std::fs::read(p).ok()
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn exclude(repo: &TestRepo) -> String {
    std::fs::read_to_string(repo.dir.join(".git/info/exclude")).unwrap_or_default()
}

#[track_caller]
fn assert_clean(repo: &TestRepo, dir: &Path) {
    let st = repo.git_in(dir, &["status", "--porcelain", "--untracked-files=all"]).ok().stdout;
    assert_eq!(st, "", "git status in {} is not clean", dir.display());
}

#[test]
fn install_merges_keeping_order_is_idempotent_and_uninstall_restores_the_bytes() {
    let repo = sample();
    let settings = repo.dir.join(".claude/settings.local.json");
    write(&settings, THEIR_SETTINGS);
    let exclude_before = exclude(&repo);

    repo.boulder(&["agent", "install", "claude"]).ok();
    assert_eq!(String::from_utf8(read_bytes(&settings).unwrap()).unwrap(), MERGED_SETTINGS);
    assert!(exclude(&repo).lines().any(|l| l == "/.claude/settings.local.json"), "{}", exclude(&repo));
    assert_clean(&repo, &repo.dir);

    // Twice is once: the same bytes, no second entry.
    repo.boulder(&["agent", "install", "claude"]).ok();
    assert_eq!(String::from_utf8(read_bytes(&settings).unwrap()).unwrap(), MERGED_SETTINGS);
    let exclude_after = exclude(&repo);
    assert_eq!(exclude_after.matches("/.claude/settings.local.json").count(), 1);

    repo.boulder(&["agent", "uninstall", "claude"]).ok();
    assert_eq!(read_bytes(&settings).unwrap(), THEIR_SETTINGS.as_bytes(), "restored byte for byte");
    assert_eq!(exclude(&repo), exclude_before, "the exclude line is gone, nothing else changed");
    assert!(!repo.dir.join(".git/boulder/agents.json").exists());
}

#[test]
fn uninstall_of_a_file_install_made_removes_it_and_its_folders() {
    let repo = sample();
    repo.boulder(&["agent", "install", "codex"]).ok();
    let hooks = repo.dir.join(".codex/hooks.json");
    let j: serde_json::Value = serde_json::from_slice(&read_bytes(&hooks).unwrap()).unwrap();
    assert_eq!(
        j,
        serde_json::json!({"hooks": {
            "SessionStart": [{"hooks": [{"type": "command", "command": "git boulder agent hook codex"}]}],
            "PreToolUse": [{"matcher": "apply_patch|Write|Edit",
                            "hooks": [{"type": "command", "command": "git boulder agent hook codex"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "git boulder agent hook codex"}]}]
        }})
    );
    assert_clean(&repo, &repo.dir);

    repo.boulder(&["agent", "uninstall", "codex"]).ok();
    assert!(!hooks.exists());
    assert!(!repo.dir.join(".codex").exists(), "the folder install made is gone");
    assert_clean(&repo, &repo.dir);
}

#[test]
fn uninstall_keeps_what_the_user_changed_since_and_takes_out_only_ours() {
    let repo = sample();
    let settings = repo.dir.join(".claude/settings.local.json");
    repo.boulder(&["agent", "install", "claude"]).ok();
    // The user adds a key of their own after install.
    let mut j: serde_json::Value = serde_json::from_slice(&read_bytes(&settings).unwrap()).unwrap();
    j["env"] = serde_json::json!({"FOO": "1"});
    write(&settings, &serde_json::to_string_pretty(&j).unwrap());
    let st = repo.boulder(&["agent", "status", "--json"]).ok().json();
    assert_eq!(st["harnesses"][0]["files"][0]["state"], "modified", "{st}");

    repo.boulder(&["agent", "uninstall", "claude"]).ok();
    let after: serde_json::Value = serde_json::from_slice(&read_bytes(&settings).unwrap()).unwrap();
    assert_eq!(after, serde_json::json!({"env": {"FOO": "1"}}), "their key stays, our hooks go");
}

#[test]
fn every_worktree_gets_it_existing_and_new_ones_and_git_status_stays_clean() {
    let repo = sample();
    repo.boulder(&["stream", "init", "docs"]).ok();
    for h in ["claude", "codex", "opencode"] {
        repo.boulder(&["agent", "install", h]).ok();
    }
    // A worktree made after the install.
    repo.boulder(&["stream", "init", "auth"]).ok();
    for dir in [repo.dir.clone(), repo.worktree("docs"), repo.worktree("auth")] {
        for file in [".claude/settings.local.json", ".codex/hooks.json", ".opencode/plugins/git-boulder.js"] {
            assert!(dir.join(file).is_file(), "{} has no {file}", dir.display());
        }
        assert_clean(&repo, &dir);
    }
    let plugin = std::fs::read_to_string(repo.worktree("auth").join(".opencode/plugins/git-boulder.js")).unwrap();
    assert!(plugin.contains("export const GitBoulder"), "the plugin template");
    let settings = std::fs::read_to_string(repo.worktree("auth").join(".claude/settings.local.json")).unwrap();
    assert!(settings.contains("git boulder agent hook claude"));

    let st = repo.boulder(&["agent", "status", "--json"]).ok().json();
    let harnesses = st["harnesses"].as_array().unwrap();
    assert_eq!(harnesses.len(), 3, "claude, codex and opencode: {st}");
    for h in harnesses {
        assert_eq!(h["installed"], true, "{h}");
        let files = h["files"].as_array().unwrap();
        assert_eq!(files.len(), 3, "{h}");
        assert!(files.iter().all(|f| f["state"] == "present"), "{h}");
    }
    assert!(st["on_path"].as_str().unwrap().ends_with("git-boulder"), "{st}");

    // Uninstall takes them out of every worktree, the new one too.
    for h in ["claude", "codex", "opencode"] {
        repo.boulder(&["agent", "uninstall", h]).ok();
    }
    for dir in [repo.dir.clone(), repo.worktree("docs"), repo.worktree("auth")] {
        for folder in [".claude", ".codex", ".opencode"] {
            assert!(!dir.join(folder).exists(), "{} still has {folder}", dir.display());
        }
        assert_clean(&repo, &dir);
    }
}

#[test]
fn a_tracked_file_is_not_changed_without_commit() {
    let repo = sample();
    let theirs = "{\n  \"description\": \"team hooks\"\n}\n";
    repo.write(".codex/hooks.json", theirs);
    repo.commit_all("team codex hooks");
    let exclude_before = exclude(&repo);

    let r = repo.boulder(&["agent", "install", "codex"]).code(2);
    assert_shown!("a_tracked_file_is_not_changed_without_commit", r);
    assert_eq!(repo.read(".codex/hooks.json"), theirs);
    assert_eq!(exclude(&repo), exclude_before, "nothing written");
    assert!(!repo.dir.join(".git/boulder/agents.json").exists());

    // --commit: merged into the tracked file and committed with git.
    repo.boulder(&["agent", "install", "codex", "--commit"]).ok();
    let committed = repo.git_out(&["show", "HEAD:.codex/hooks.json"]);
    let j: serde_json::Value = serde_json::from_str(&committed).unwrap();
    assert_eq!(j["description"], "team hooks");
    assert_eq!(j["hooks"]["Stop"][0]["hooks"][0]["command"], "git boulder agent hook codex");
    assert!(committed.find("description").unwrap() < committed.find("hooks").unwrap(), "order kept");
    assert!(repo.git_out(&["log", "-1", "--format=%s"]).contains("codex"));
    assert_clean(&repo, &repo.dir);
    let st = repo.boulder(&["agent", "status", "--json"]).ok().json();
    assert_eq!(st["harnesses"][1]["committed"], true, "{st}");
    // Again: nothing to commit.
    let head = rev(&repo, "HEAD");
    repo.boulder(&["agent", "install", "codex", "--commit"]).ok();
    assert_eq!(rev(&repo, "HEAD"), head);

    repo.boulder(&["agent", "uninstall", "codex", "--commit"]).ok();
    let back: serde_json::Value = serde_json::from_str(&repo.git_out(&["show", "HEAD:.codex/hooks.json"])).unwrap();
    assert_eq!(back, serde_json::json!({"description": "team hooks"}));
}

#[test]
fn invalid_json_is_refused_naming_file_and_line_and_nothing_is_written() {
    let repo = sample();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let broken = "{\n  \"model\": \"opus\",\n  oops\n}\n";
    let settings = repo.dir.join(".claude/settings.local.json");
    write(&settings, broken);
    let exclude_before = exclude(&repo);

    let r = repo.boulder(&["agent", "install", "claude"]).code(2);
    assert_shown!("invalid_json_is_refused_naming_file_and_line_and_nothing_is_written", r);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), broken);
    assert!(!repo.worktree("docs").join(".claude").exists(), "no other worktree written either");
    assert_eq!(exclude(&repo), exclude_before);
    assert!(!repo.dir.join(".git/boulder/agents.json").exists());
}

#[test]
fn status_and_doctor_report_a_deleted_or_stale_integration() {
    let repo = sample();
    repo.boulder(&["stream", "init", "docs"]).ok();
    repo.boulder(&["agent", "install", "claude"]).ok();
    let st = repo.boulder(&["agent", "status", "--json"]).ok().json();
    assert_eq!(st["harnesses"][0]["harness"], "claude");
    assert_eq!(st["harnesses"][0]["command"], "git boulder agent hook claude");
    assert_eq!(st["harnesses"][1]["installed"], false);
    assert_eq!(st["harnesses"][2]["installed"], false);

    let doc = repo.boulder(&["doctor", "--json"]).json();
    let agent_problems: Vec<_> =
        doc["problems"].as_array().unwrap().iter().filter(|p| p["area"] == "agent").cloned().collect();
    assert!(agent_problems.is_empty(), "{doc}");

    // The file is deleted in the stream worktree.
    let wt_file = repo.worktree("docs").join(".claude/settings.local.json");
    std::fs::remove_file(&wt_file).unwrap();
    let st = repo.boulder(&["agent", "status", "--json"]).ok().json();
    let files = st["harnesses"][0]["files"].as_array().unwrap();
    let docs = files.iter().find(|f| f["worktree"].as_str().unwrap().ends_with("docs")).unwrap();
    assert_eq!(docs["state"], "missing", "{st}");
    let doc = repo.boulder(&["doctor", "--json"]).code(1).json();
    let p = doc["problems"].as_array().unwrap().iter().find(|p| p["area"] == "agent").expect("an agent problem");
    assert!(p["message"].as_str().unwrap().contains("claude integration missing"), "{p}");
    assert_eq!(p["fix"], "git boulder agent install claude");

    // The fix: install again puts it back.
    repo.boulder(&["agent", "install", "claude"]).ok();
    assert!(wt_file.is_file());

    // A stale command (an older git-boulder's) in the main worktree's file.
    let main_file = repo.dir.join(".claude/settings.local.json");
    let text = std::fs::read_to_string(&main_file).unwrap().replace("agent hook claude", "agent hook claude --v0");
    write(&main_file, &text);
    let doc = repo.boulder(&["doctor", "--json"]).code(1).json();
    assert!(
        doc["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["area"] == "agent" && p["message"].as_str().unwrap().contains("stale")),
        "{doc}"
    );
    repo.boulder(&["agent", "install", "claude"]).ok();
    let text = std::fs::read_to_string(&main_file).unwrap();
    assert!(!text.contains("--v0"), "the stale entries are replaced:\n{text}");
    assert_eq!(text.matches("git boulder agent hook claude").count(), 6);
}

#[test]
fn a_plugin_file_of_someone_else_is_refused() {
    let repo = sample();
    let theirs = "export const Mine = async () => ({})\n";
    let plugin = repo.dir.join(".opencode/plugins/git-boulder.js");
    write(&plugin, theirs);
    let r = repo.boulder(&["agent", "install", "opencode"]).code(2);
    assert_shown!("a_plugin_file_of_someone_else_is_refused", r);
    assert_eq!(std::fs::read_to_string(&plugin).unwrap(), theirs);
}

#[test]
fn a_local_install_then_commit_leaves_the_committed_file_to_uninstall_commit() {
    let repo = sample();
    repo.boulder(&["agent", "install", "codex"]).ok();
    // The same path is Codex's local and project file: --commit adds the excluded file by name.
    repo.boulder(&["agent", "install", "codex", "--commit"]).ok();
    let committed = repo.git_out(&["show", "HEAD:.codex/hooks.json"]);
    assert!(committed.contains("git boulder agent hook codex"), "{committed}");
    assert_clean(&repo, &repo.dir);

    let r = repo.boulder(&["agent", "uninstall", "codex"]).ok();
    assert_shown!("a_local_install_then_commit_leaves_the_committed_file_to_uninstall_commit", r);
    assert_eq!(repo.read(".codex/hooks.json"), committed + "\n", "the tracked file is not touched");
    assert_clean(&repo, &repo.dir);
}

#[test]
fn an_older_plugin_is_stale_for_doctor_and_install_replaces_it() {
    let repo = sample();
    repo.boulder(&["agent", "install", "opencode"]).ok();
    let plugin = repo.dir.join(".opencode/plugins/git-boulder.js");
    let current = std::fs::read_to_string(&plugin).unwrap();
    // What an older git-boulder wrote: its plugin, not this binary's.
    let older = current.replace("const CHECK_TIMEOUT_MS = 30_000;", "const CHECK_TIMEOUT_MS = 10_000;");
    assert_ne!(older, current);
    write(&plugin, &older);
    let doc = repo.boulder(&["doctor", "--json"]).code(1).json();
    let p = doc["problems"].as_array().unwrap().iter().find(|p| p["area"] == "agent").expect("an agent problem");
    assert!(p["message"].as_str().unwrap().contains("opencode integration stale"), "{p}");
    assert_eq!(p["fix"], "git boulder agent install opencode");
    repo.boulder(&["agent", "install", "opencode"]).ok();
    assert_eq!(std::fs::read_to_string(&plugin).unwrap(), current);
}

#[test]
fn status_as_people_read_it() {
    let repo = sample();
    repo.boulder(&["stream", "init", "docs"]).ok();
    assert_shown!("agent_install_claude", repo.boulder(&["agent", "install", "claude"]));
    std::fs::remove_file(repo.worktree("docs").join(".claude/settings.local.json")).unwrap();
    let mut status = repo.boulder(&["agent", "status"]);
    let bin_dir = Path::new(bin()).parent().unwrap().display().to_string();
    status.stdout = status.stdout.replace(&bin_dir, "[BIN]");
    assert_shown!("agent_status", status);
    assert_shown!("agent_uninstall_claude", repo.boulder(&["agent", "uninstall", "claude"]));
}

#[test]
fn cleanup_of_a_stream_worktree_is_not_held_up_by_the_installed_file() {
    let repo = sample();
    repo.boulder(&["stream", "init", "docs"]).ok();
    repo.boulder(&["agent", "install", "claude"]).ok();
    repo.boulder(&["agent", "install", "opencode"]).ok();
    // The files are ignored, not uncommitted work: cleanup removes the worktree without --force.
    repo.boulder(&["stream", "cleanup", "docs"]).ok();
    assert!(!repo.worktree("docs").exists());
    // Uninstall afterwards restores the main worktree and forgets the removed one.
    repo.boulder(&["agent", "uninstall", "claude"]).ok();
    repo.boulder(&["agent", "uninstall", "opencode"]).ok();
    assert!(!repo.dir.join(".claude").exists());
    assert!(!repo.dir.join(".git/boulder/agents.json").exists());
    assert!(!repo.dir.join(".git/boulder/agents").exists());
}

#[test]
fn in_the_main_worktree_the_installed_stop_hook_pushes_on_through_the_project_boulder() {
    let repo = sample();
    repo.boulder(&["agent", "install", "claude"]).ok();
    let settings: serde_json::Value =
        serde_json::from_slice(&read_bytes(&repo.dir.join(".claude/settings.local.json")).unwrap()).unwrap();
    let command = settings["hooks"]["Stop"][0]["hooks"][0]["command"].as_str().unwrap().to_string();
    let payload = serde_json::json!({
        "session_id": "abc123",
        "transcript_path": "/home/user/.claude/projects/sample/t.jsonl",
        "cwd": repo.dir.display().to_string(),
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": false,
        "last_assistant_message": "I am done."
    });
    // As Claude Code runs it: `sh -c COMMAND` in the project folder, the payload on stdin.
    let mut cmd = repo.command("sh");
    cmd.arg("-c").arg(&command).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    cmd.stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), payload.to_string().as_bytes()).unwrap();
    let out = Run::from(child.wait_with_output().unwrap()).ok().json();
    assert_eq!(out["decision"], "block", "{out}");
    assert_eq!(repo.state("refs/boulder/boulders/project")["failure_count"], 1);
}

#[test]
fn opencode_is_left_nothing_to_install_in_a_folder_holding_only_the_plugin() {
    let repo = sample();
    repo.boulder(&["stream", "init", "docs"]).ok();
    // A worktree whose branch tracks a tool of the user's in .opencode/: OpenCode's own business.
    repo.git(&["checkout", "-q", "-b", "with-tool"]).ok();
    repo.write(".opencode/tools/hello.ts", "import { tool } from \"@opencode-ai/plugin\"\n");
    repo.commit_all("a tool");
    repo.git(&["checkout", "-q", "main"]).ok();
    repo.git(&["worktree", "add", "-q", "../tooled", "with-tool"]).ok();
    let tooled = repo.dir.parent().unwrap().join("tooled");
    repo.boulder(&["agent", "install", "opencode"]).ok();

    // What OpenCode 1.18 checks before its npm install: node_modules/, and a package-lock.json
    // whose root lists @opencode-ai/plugin; with OpenCode's own .gitignore beside them.
    for dir in [repo.dir.clone(), repo.worktree("docs")] {
        let oc = dir.join(".opencode");
        assert!(oc.join("node_modules").is_dir(), "{}", dir.display());
        let lock: serde_json::Value =
            serde_json::from_slice(&read_bytes(&oc.join("package-lock.json")).unwrap()).unwrap();
        assert!(lock["packages"][""]["dependencies"]["@opencode-ai/plugin"].is_string(), "{lock}");
        assert_eq!(
            std::fs::read_to_string(oc.join(".gitignore")).unwrap(),
            "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore"
        );
        assert_clean(&repo, &dir);
    }
    // A folder with more than the plugin is left as it was: OpenCode installs what it needs.
    for name in ["node_modules", "package-lock.json", ".gitignore"] {
        assert!(!tooled.join(".opencode").join(name).exists(), "{name} written beside the user's tool");
    }

    // Once OpenCode installed something, uninstall leaves that alone; else it takes all back.
    std::fs::create_dir(repo.dir.join(".opencode/node_modules/zod")).unwrap();
    repo.boulder(&["agent", "uninstall", "opencode"]).ok();
    assert!(!repo.worktree("docs").join(".opencode").exists());
    assert!(repo.dir.join(".opencode/node_modules/zod").is_dir());
    assert!(repo.dir.join(".opencode/package-lock.json").is_file());
    assert!(!repo.dir.join(".opencode/plugins").exists());
    assert!(tooled.join(".opencode/tools/hello.ts").is_file());
}
