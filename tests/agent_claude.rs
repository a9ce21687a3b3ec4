//! `git boulder agent hook claude`: Claude Code's documented hook payloads (fixtures under
//! `tests/fixtures/harness/claude/`, every documented field) fed to the real binary in a stream
//! worktree of the sample; stdout, exit code and what the op-log recorded are checked with plain
//! git.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

use crate::common::*;

/// The fixture `harness/NAME.json` with `cwd` set to `dir`, changed by `edit`.
pub fn fixture(name: &str, dir: &Path, edit: impl FnOnce(&mut Value)) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/harness").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["cwd"] = Value::String(dir.to_str().unwrap().to_string());
    edit(&mut v);
    v
}

/// Run `git-boulder ARGS` in `dir` with `stdin` as its input.
pub fn run_with_input(repo: &TestRepo, dir: &Path, args: &[&str], stdin: &[u8]) -> Run {
    pipe(repo, dir, bin(), args, stdin)
}

/// Run `program ARGS` in `dir` with the repository's environment and `stdin` as its input.
pub fn pipe(repo: &TestRepo, dir: &Path, program: &str, args: &[&str], stdin: &[u8]) -> Run {
    let mut cmd = repo.command(program);
    cmd.args(args).current_dir(dir).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run git-boulder");
    // A payload past the size bound is not read whole: the write may meet a closed pipe.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    Run::from(child.wait_with_output().unwrap())
}

/// Feed `payload` to `git boulder agent hook HARNESS`, run from the main worktree: the payload's
/// `cwd`, not the process's, says where the agent is.
pub fn feed(repo: &TestRepo, harness: &str, payload: &Value) -> Run {
    run_with_input(repo, &repo.dir, &["agent", "hook", harness], payload.to_string().as_bytes())
}

fn initialized(extra: &str) -> TestRepo {
    let repo = if extra.is_empty() { sample() } else { sample_with(extra) };
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["stream", "init", "api"]).ok();
    repo
}

fn boulder_state(repo: &TestRepo, id: &str) -> Value {
    repo.state(&format!("refs/boulder/boulders/{id}"))
}

fn ops(repo: &TestRepo, name: &str) -> Vec<Value> {
    let log = repo.boulder(&["log", name, "--json"]).ok().json();
    log.as_array().unwrap().iter().map(|e| e["op"].clone()).collect()
}

#[test]
fn stop_with_stories_open_blocks_with_the_enforcement_message_and_records_it() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    let r = feed(&repo, "claude", &fixture("claude/stop", &wt, |_| {})).code(0);
    assert_eq!(r.stderr, "");
    let out = r.json();
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["decision", "reason"], "{out}");
    assert_eq!(out["decision"], "block");
    let reason = out["reason"].as_str().unwrap();
    assert!(reason.starts_with("Boulder auth (iteration 0)\n") && reason.contains("Reminder 1 of 5"), "{reason}");
    // Recorded exactly as `check` records it: the enforced op, the failure count, the message.
    let b = boulder_state(&repo, "auth");
    assert_eq!(b["failure_count"], 1);
    assert_eq!(b["last_gate"], "completion");
    assert_eq!(b["last_message"], reason);
    let log = ops(&repo, "auth");
    assert_eq!(log[0]["kind"], "enforced", "{log:?}");
    assert_eq!(log[0]["data"]["gate"], "completion");
    // The other stream's boulder is untouched.
    assert_eq!(boulder_state(&repo, "api")["failure_count"], 0);
}

#[test]
fn subagents_and_a_stop_already_continued_are_never_held() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    for payload in [
        fixture("claude/subagent_stop", &wt, |_| {}),
        fixture("claude/stop_in_subagent", &wt, |_| {}),
        fixture("claude/stop", &wt, |v| v["stop_hook_active"] = Value::Bool(true)),
    ] {
        let r = feed(&repo, "claude", &payload).code(0);
        assert_eq!(r.stdout, "", "{payload}");
    }
    let b = boulder_state(&repo, "auth");
    assert_eq!(b["failure_count"], 0, "nothing enforced: {b}");
    assert!(ops(&repo, "auth").iter().all(|op| op["kind"] != "enforced"));
    // Work talk is no completion: within the idle threshold the agent may stop.
    let r = feed(
        &repo,
        "claude",
        &fixture("claude/stop", &wt, |v| v["last_assistant_message"] = "Let me implement the next part".into()),
    )
    .code(0);
    assert_eq!(r.stdout, "");
}

#[test]
fn max_failures_reached_lets_the_agent_stop() {
    let repo = initialized("  boulder:\n    max_failures: 2\n");
    let wt = repo.worktree("auth");
    let stop = fixture("claude/stop", &wt, |_| {});
    for i in 1..=2 {
        let out = feed(&repo, "claude", &stop).code(0).json();
        assert_eq!(out["decision"], "block", "push {i}");
        assert!(out["reason"].as_str().unwrap().contains(&format!("Reminder {i} of 2")), "{out}");
    }
    let r = feed(&repo, "claude", &stop).code(0);
    assert_eq!(r.stdout, "", "the third stop is let through");
    assert_eq!(boulder_state(&repo, "auth")["failure_count"], 2);
    // A commit is progress: the count starts again and the gates push once more.
    commit_in(&repo, &wt, "src/auth/login.rs", "fn login() {}\n", "login form");
    assert_eq!(feed(&repo, "claude", &stop).code(0).json()["decision"], "block");
}

#[test]
fn session_start_gives_the_stream_its_story_paths_checkpoint_and_todos() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    repo.boulder_in(&wt, &["checkpoint", "-m", "login form half done \u{1b}[2J"]).ok();
    repo.boulder_in(&wt, &["todo", "add", "write the tests"]).ok();
    for source in ["startup", "resume", "clear", "compact"] {
        let payload = fixture("claude/session_start", &wt, |v| v["source"] = source.into());
        let out = feed(&repo, "claude", &payload).code(0).json();
        assert_eq!(out["hookSpecificOutput"]["hookEventName"], "SessionStart");
        let ctx = out["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
        for want in [
            "stream auth",
            "US-001: Login form",
            "Build `src/auth/login.rs`.",
            "- [ ] renders",
            "src/auth/**",
            "src/types/**",
            "src/api/** (api)",
            "login form half done \\e[2J",
            "t1: write the tests",
        ] {
            assert!(ctx.contains(want), "{source}: no {want:?} in\n{ctx}");
        }
        assert!(!ctx.contains('\u{1b}'), "terminal controls are made inert");
        let own = ctx.lines().find(|l| l.contains("src/auth/**")).unwrap();
        let read_only = ctx.lines().find(|l| l.contains("src/types/**")).unwrap();
        assert!(own.contains("may change only") && read_only.contains("never change"), "{ctx}");
    }
}

#[test]
fn pre_tool_use_denies_another_streams_file_and_shared_read_and_passes_its_own() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    let edit = |name: &str, cwd: &Path, file: &str| {
        let payload = fixture(name, cwd, |v| {
            let key = if name.ends_with("notebook") { "notebook_path" } else { "file_path" };
            v["tool_input"][key] = file.into();
        });
        feed(&repo, "claude", &payload).code(0)
    };
    let deny = |r: Run| -> String {
        let out = r.json();
        let h = &out["hookSpecificOutput"];
        assert_eq!(h["hookEventName"], "PreToolUse", "{out}");
        assert_eq!(h["permissionDecision"], "deny", "{out}");
        h["permissionDecisionReason"].as_str().unwrap().to_string()
    };
    // Another stream's file, absolute.
    let other = wt.join("src/api/list.rs");
    let reason = deny(edit("claude/pre_tool_use_write", &wt, other.to_str().unwrap()));
    assert!(reason.starts_with("src/api/list.rs is owned by stream api"), "{reason}");
    // shared_read, relative to cwd with `..` on the way.
    let reason = deny(edit("claude/pre_tool_use_edit", &wt.join("src/auth"), "../auth/../types/user.rs"));
    assert!(reason.contains("src/types/user.rs is shared_read"), "{reason}");
    // A notebook of another stream.
    let reason = deny(edit("claude/pre_tool_use_notebook", &wt, "src/api/nb.ipynb"));
    assert!(reason.contains("owned by stream api"), "{reason}");
    // Through a symlink to the worktree.
    let link = repo.tmp.path().join("auth-link");
    std::os::unix::fs::symlink(&wt, &link).unwrap();
    let reason = deny(edit("claude/pre_tool_use_write", &link, link.join("src/api/x.rs").to_str().unwrap()));
    assert!(reason.starts_with("src/api/x.rs is owned by stream api"), "{reason}");
    // Through an own path that is a dangling symlink: writing it creates the other stream's file.
    std::fs::create_dir_all(wt.join("src/auth")).unwrap();
    std::os::unix::fs::symlink("../api/new.rs", wt.join("src/auth/dangling")).unwrap();
    let reason = deny(edit("claude/pre_tool_use_write", &wt, "src/auth/dangling"));
    assert!(reason.starts_with("src/api/new.rs is owned by stream api"), "{reason}");
    std::fs::remove_file(wt.join("src/auth/dangling")).unwrap();
    // A large file (a lock file, generated code) is judged like a small one.
    let payload = fixture("claude/pre_tool_use_write", &wt, |v| {
        v["tool_input"]["file_path"] = "src/api/package-lock.json".into();
        v["tool_input"]["content"] = "x".repeat(3 << 20).into();
    });
    let reason = deny(feed(&repo, "claude", &payload).code(0));
    assert!(reason.starts_with("src/api/package-lock.json is owned by stream api"), "{reason}");

    // Another worktree of the repository — a sibling stream's, or the main worktree that holds
    // the stream worktrees — is not this stream's to write, whoever owns the path there.
    let reason = deny(edit("claude/pre_tool_use_write", &wt, "../api/src/api/list.rs"));
    assert!(reason.contains("is in the worktree of stream api"), "{reason}");
    let in_main = repo.dir.join("src/auth/login.rs");
    let reason = deny(edit("claude/pre_tool_use_write", &wt, in_main.to_str().unwrap()));
    assert!(
        reason.contains("is in the main worktree") && reason.contains("stream auth works only in its own worktree"),
        "{reason}"
    );

    // Everything else passes silently: its own files, the PRD, undeclared paths (warn by
    // default), outside the repository's worktrees, edits made in the main worktree, other tools.
    for (name, cwd, file) in [
        ("claude/pre_tool_use_edit", wt.clone(), "src/auth/login.rs".to_string()),
        ("claude/pre_tool_use_write", wt.clone(), wt.join("src/auth/new/deep.rs").to_str().unwrap().to_string()),
        ("claude/pre_tool_use_write", wt.clone(), ".agents/tasks/prd.md".to_string()),
        ("claude/pre_tool_use_write", wt.clone(), "tools/x.sh".to_string()),
        ("claude/pre_tool_use_write", wt.clone(), repo.tmp.path().join("elsewhere.rs").to_str().unwrap().to_string()),
        ("claude/pre_tool_use_write", repo.dir.clone(), "src/api/list.rs".to_string()),
        ("claude/pre_tool_use_bash", wt.clone(), String::new()),
    ] {
        let r = if name.ends_with("bash") {
            feed(&repo, "claude", &fixture(name, &cwd, |_| {}))
        } else {
            edit(name, &cwd, &file)
        };
        assert_eq!(r.code(0).stdout, "", "{name} {file}");
    }

    // Each denial is on the boulder's op-log.
    let denied: Vec<Value> = ops(&repo, "auth").into_iter().filter(|op| op["kind"] == "denied").collect();
    assert_eq!(denied.len(), 8, "{denied:?}");
    let paths: Vec<&str> = denied.iter().map(|op| op["data"]["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"src/api/list.rs") && paths.contains(&"src/types/user.rs"), "{paths:?}");
    let shared = denied.iter().find(|op| op["data"]["path"] == "src/types/user.rs").unwrap();
    assert_eq!(shared["data"]["rule"], "shared_read");
    let other = denied.iter().find(|op| op["data"]["path"] == "src/api/list.rs").unwrap();
    assert_eq!((&other["data"]["rule"], &other["data"]["owner"]), (&"other_stream".into(), &"api".into()));
    let text = repo.boulder(&["log", "auth"]).ok().stdout;
    assert!(text.contains("denied") && text.contains("src/api/list.rs"), "{text}");
}

#[test]
fn hostile_paths_are_judged_and_shown_inert() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    // A path with terminal controls in another stream's folder: denied, the reason inert.
    let payload = fixture("claude/pre_tool_use_write", &wt, |v| {
        v["tool_input"]["file_path"] = "src/api/\u{1b}[2Jx\u{7}.rs".into()
    });
    let out = feed(&repo, "claude", &payload).code(0).json();
    let reason = out["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap();
    assert!(reason.starts_with("src/api/\\e[2Jx\\x07.rs is owned by stream api"), "{reason}");
    // Paths that climb out of the worktree and back in are still judged where they land.
    let back_in = format!("../{}/src/types/user.rs", wt.file_name().unwrap().to_str().unwrap());
    let payload = fixture("claude/pre_tool_use_edit", &wt, |v| v["tool_input"]["file_path"] = back_in.into());
    let out = feed(&repo, "claude", &payload).code(0).json();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny", "{out}");
    // A lone surrogate is no JSON string: never exit 2; in a stream's worktree the edit it cannot
    // read is denied (fail closed), elsewhere exit 1 lets it go.
    let text = fixture("claude/pre_tool_use_write", &wt, |_| {}).to_string().replace("file.txt", "\\ud800.txt");
    let r = run_with_input(&repo, &wt, &["agent", "hook", "claude"], text.as_bytes()).code(0);
    assert_eq!(r.json()["hookSpecificOutput"]["permissionDecision"], "deny", "{}", r.stdout);
    let r = run_with_input(&repo, &repo.dir, &["agent", "hook", "claude"], text.as_bytes()).code(1);
    assert_eq!(r.stdout, "");
    // A file_path of the wrong type, and a tool_input that is no object, are no edit to judge.
    for bad in [Value::from(7), Value::Null] {
        let payload = fixture("claude/pre_tool_use_write", &wt, |v| v["tool_input"]["file_path"] = bad.clone());
        assert_eq!(feed(&repo, "claude", &payload).code(0).stdout, "");
    }
    let payload = fixture("claude/pre_tool_use_write", &wt, |v| v["tool_input"] = "src/api/x.rs".into());
    assert_eq!(feed(&repo, "claude", &payload).code(0).stdout, "");
}

#[test]
fn undeclared_paths_error_denies_a_path_no_stream_owns() {
    let repo = initialized("  undeclared_paths: error\n");
    let wt = repo.worktree("auth");
    let payload = fixture("claude/pre_tool_use_write", &wt, |v| v["tool_input"]["file_path"] = "tools/x.sh".into());
    let out = feed(&repo, "claude", &payload).code(0).json();
    let reason = out["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap();
    assert!(reason.starts_with("tools/x.sh is owned by no stream"), "{reason}");
    // ownership: off lets every edit through.
    let repo = initialized("  ownership: off\n");
    let wt = repo.worktree("auth");
    let payload = fixture("claude/pre_tool_use_write", &wt, |v| v["tool_input"]["file_path"] = "src/api/a.rs".into());
    assert_eq!(feed(&repo, "claude", &payload).code(0).stdout, "");
}

#[test]
fn a_plan_that_does_not_parse_is_an_error_of_every_hook_never_a_pass() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    let plan = repo.read(".boulder/streams.yaml").replacen("paths:", "pahts:", 1);
    repo.write(".boulder/streams.yaml", &plan);
    let other = wt.join("src/api/list.rs");
    let payloads = [
        fixture("claude/pre_tool_use_write", &wt, |v| v["tool_input"]["file_path"] = other.to_str().unwrap().into()),
        fixture("claude/stop", &wt, |_| {}),
        fixture("claude/session_start", &wt, |_| {}),
    ];
    for payload in payloads {
        let r = feed(&repo, "claude", &payload).code(1);
        assert_eq!(r.stdout, "", "{payload}");
        assert!(r.stderr.starts_with("git-boulder agent hook claude: ") && r.stderr.contains("pahts"), "{}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    }
    // `check` names the plan, not the branch.
    let r = repo.boulder_in(&wt, &["check", "--message", "All done"]).code(2);
    assert!(r.stderr.contains("pahts") && !r.stderr.contains("not on a stream's branch"), "{}", r.stderr);
}

#[test]
fn a_payload_it_cannot_read_is_exit_1_never_2() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    let garbled: Vec<Vec<u8>> = vec![
        b"not json".to_vec(),
        Vec::new(),
        b"[1, 2]".to_vec(),
        b"{\"hook_event_name\": \"Stop\"".to_vec(),
        vec![0xff, 0xfe, b'{'],
        fixture("claude/stop", &wt, |v| {
            v.as_object_mut().unwrap().remove("cwd");
        })
        .to_string()
        .into_bytes(),
        fixture("claude/stop", &wt, |v| {
            v.as_object_mut().unwrap().remove("hook_event_name");
        })
        .to_string()
        .into_bytes(),
        format!("{{\"x\": \"{}\"}}", "a".repeat(65 << 20)).into_bytes(),
    ];
    // Outside a stream's worktree (here the main worktree) an unreadable payload lets the agent go
    // on; in a stream's worktree one that may be an edit is denied (see
    // an_edit_the_hook_cannot_read_is_denied_in_a_stream_worktree_only).
    for input in garbled {
        let r = run_with_input(&repo, &repo.dir, &["agent", "hook", "claude"], &input).code(1);
        assert_eq!(r.stdout, "");
        assert!(r.stderr.starts_with("git-boulder agent hook claude: "), "{}", r.stderr);
    }
    let _ = &wt;
    assert_eq!(boulder_state(&repo, "auth")["failure_count"], 0);
}

#[test]
fn outside_a_repository_or_without_git_boulder_state_everything_goes_on() {
    let repo = TestRepo::with_files(&[("README.md", "# plain\n")]);
    let outside = tempfile::tempdir().unwrap();
    for dir in [outside.path(), repo.dir.as_path()] {
        for name in ["claude/stop", "claude/session_start", "claude/pre_tool_use_write"] {
            let r = feed(&repo, "claude", &fixture(name, dir, |_| {})).code(0);
            assert_eq!(r.stdout, "", "{name} in {}", dir.display());
        }
    }
    assert!(repo.refs("refs/boulder/").is_empty(), "nothing written");
    // Not even this machine's actor id: reading state writes nothing.
    assert!(!repo.dir.join(".git/boulder").exists(), "nothing written");
}

/// The git-boulder command `agent install` wrote into the hooks file `file` of worktree `wt` for
/// `event`, with the matcher of its group.
pub fn installed(wt: &Path, file: &str, event: &str) -> (String, Option<String>) {
    let path = wt.join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).unwrap();
    let groups = v["hooks"][event].as_array().unwrap_or_else(|| panic!("no {event} in {text}"));
    for g in groups {
        for h in g["hooks"].as_array().unwrap() {
            let command = h["command"].as_str().unwrap();
            if command.contains("boulder") {
                return (command.to_string(), g["matcher"].as_str().map(str::to_string));
            }
        }
    }
    panic!("no git-boulder hook for {event} in {text}")
}

/// Run an installed hook `command` as the harness does: `sh -c` in the worktree, the payload on
/// stdin.
pub fn run_installed(repo: &TestRepo, wt: &Path, command: &str, payload: &Value) -> Run {
    pipe(repo, wt, "sh", &["-c", command], payload.to_string().as_bytes())
}

#[test]
fn the_installed_claude_hooks_run_these_decisions() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["agent", "install", "claude"]).ok();
    // A stream worktree made after the install has the hooks too.
    repo.boulder(&["stream", "init", "api"]).ok();
    for stream in ["auth", "api"] {
        let wt = repo.worktree(stream);
        let file = ".claude/settings.local.json";
        let (stop, _) = installed(&wt, file, "Stop");
        let (subagent, _) = installed(&wt, file, "SubagentStop");
        let (start, matcher) = installed(&wt, file, "SessionStart");
        assert!(matcher.unwrap().contains("compact"));
        let (pre, matcher) = installed(&wt, file, "PreToolUse");
        let matcher = matcher.unwrap();
        assert!(["Edit", "Write", "MultiEdit", "NotebookEdit"].iter().all(|t| matcher.contains(t)), "{matcher}");

        let out = run_installed(&repo, &wt, &stop, &fixture("claude/stop", &wt, |_| {})).code(0).json();
        assert_eq!(out["decision"], "block", "{stream}: {out}");
        assert!(out["reason"].as_str().unwrap().contains("Reminder 1 of 5"));
        assert_eq!(repo.state(&format!("refs/boulder/boulders/{stream}"))["failure_count"], 1);
        let again = fixture("claude/stop", &wt, |v| v["stop_hook_active"] = Value::Bool(true));
        assert_eq!(run_installed(&repo, &wt, &stop, &again).code(0).stdout, "");
        let sub = fixture("claude/subagent_stop", &wt, |_| {});
        assert_eq!(run_installed(&repo, &wt, &subagent, &sub).code(0).stdout, "");
        let sub = fixture("claude/stop_in_subagent", &wt, |_| {});
        assert_eq!(run_installed(&repo, &wt, &stop, &sub).code(0).stdout, "");

        let ctx = run_installed(&repo, &wt, &start, &fixture("claude/session_start", &wt, |_| {})).code(0).json();
        let ctx = ctx["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string();
        assert!(ctx.contains(&format!("src/{stream}/**")) && ctx.contains("src/types/**"), "{ctx}");

        let other = if stream == "auth" { "api" } else { "auth" };
        let write =
            |file: String| fixture("claude/pre_tool_use_write", &wt, |v| v["tool_input"]["file_path"] = file.into());
        let out = run_installed(&repo, &wt, &pre, &write(format!("src/{other}/x.rs"))).code(0).json();
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny", "{out}");
        let reason = out["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap();
        assert!(reason.starts_with(&format!("src/{other}/x.rs is owned by stream {other}")), "{reason}");
        assert_eq!(run_installed(&repo, &wt, &pre, &write(format!("src/{stream}/x.rs"))).code(0).stdout, "");
    }
}

/// Run `git boulder agent hook HARNESS` in `dir` with `env` added, `stdin` as its input.
pub fn hook_env(repo: &TestRepo, dir: &Path, harness: &str, env: &[(&str, &Path)], stdin: &[u8]) -> Run {
    let mut cmd = repo.command(bin());
    cmd.args(["agent", "hook", harness]).current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run git-boulder");
    let _ = child.stdin.take().unwrap().write_all(stdin);
    Run::from(child.wait_with_output().unwrap())
}

fn denial(r: Run) -> String {
    let out = r.code(0).json();
    let h = &out["hookSpecificOutput"];
    assert_eq!((&h["hookEventName"], &h["permissionDecision"]), (&"PreToolUse".into(), &"deny".into()), "{out}");
    h["permissionDecisionReason"].as_str().unwrap().to_string()
}

/// Edit payloads git-boulder cannot read: not JSON, a lone surrogate, nesting past serde_json's
/// 128 levels, past the size bound.
pub fn unreadable_edits(wt: &Path) -> Vec<(&'static str, Vec<u8>)> {
    let edit = fixture("claude/pre_tool_use_edit", wt, |v| v["tool_input"]["file_path"] = "src/auth/login.rs".into());
    let text = edit.to_string();
    let deep = text.replace("\"replace_all\":false", &format!("\"x\":{}1{}", "[".repeat(200), "]".repeat(200)));
    assert_ne!(deep, text);
    vec![
        ("cut short", text.as_bytes()[..text.len() - 9].to_vec()),
        ("lone surrogate", text.replace("\"new\"", "\"new \\ud800\"").into_bytes()),
        ("deep", deep.into_bytes()),
        ("oversized", text.replace("\"new\"", &format!("\"{}\"", "n".repeat(65 << 20))).into_bytes()),
    ]
}

#[test]
fn an_edit_the_hook_cannot_read_is_denied_in_a_stream_worktree_only() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    for (what, input) in unreadable_edits(&wt) {
        // In the stream's worktree (the hook runs there, as Claude Code runs it): denied, even an
        // edit of the stream's own file, since git-boulder cannot tell which file it is.
        let reason = denial(hook_env(&repo, &wt, "claude", &[], &input));
        assert!(reason.starts_with("git-boulder could not read this edit's hook payload"), "{what}: {reason}");
        assert!(reason.contains("stream auth"), "{what}: {reason}");
        // The session's folder decides, not where the hook process happens to run.
        let reason = denial(hook_env(&repo, &repo.dir, "claude", &[("CLAUDE_PROJECT_DIR", &wt)], &input));
        assert!(reason.contains("stream auth"), "{what}: {reason}");
        // The main worktree, and a session of the main worktree: exit 1, the edit goes on.
        let r = hook_env(&repo, &repo.dir, "claude", &[], &input).code(1);
        assert_eq!(r.stdout, "", "{what}");
        let r = hook_env(&repo, &wt, "claude", &[("CLAUDE_PROJECT_DIR", &repo.dir)], &input).code(1);
        assert_eq!(r.stdout, "", "{what}");
    }
    let denied = ops(&repo, "auth").into_iter().filter(|op| op["kind"] == "denied").count();
    assert_eq!(denied, 8);
    // A stop it cannot read is no edit: exit 1 as before, never a PreToolUse answer.
    let stop = fixture("claude/stop", &wt, |_| {}).to_string().replace("I am done", "I am done \\ud800");
    assert_eq!(hook_env(&repo, &wt, "claude", &[], stop.as_bytes()).code(1).stdout, "");

    // Under ownership: warn, and in a repository without git-boulder state: exit 1.
    let warn = initialized("  ownership: warn\n");
    let wt = warn.worktree("auth");
    for (what, input) in unreadable_edits(&wt) {
        assert_eq!(hook_env(&warn, &wt, "claude", &[], &input).code(1).stdout, "", "{what}");
    }
    let plain = TestRepo::with_files(&[("README.md", "# plain\n")]);
    for (what, input) in unreadable_edits(&plain.dir) {
        assert_eq!(hook_env(&plain, &plain.dir, "claude", &[], &input).code(1).stdout, "", "{what}");
    }
    assert!(plain.refs("refs/boulder/").is_empty());
}

#[test]
fn the_stream_is_the_sessions_not_the_folder_the_agent_moved_to() {
    let repo = initialized("");
    let auth = repo.worktree("auth");
    let api = repo.worktree("api");
    // The agent of a session started in auth's worktree ran `cd ../api`: Claude Code's payload
    // says cwd is api's worktree; CLAUDE_PROJECT_DIR still names auth's.
    let payload =
        fixture("claude/pre_tool_use_edit", &api, |v| v["tool_input"]["file_path"] = "src/api/list.rs".into());
    let reason =
        denial(hook_env(&repo, &api, "claude", &[("CLAUDE_PROJECT_DIR", &auth)], payload.to_string().as_bytes()));
    assert!(
        reason.contains("is in the worktree of stream api") && reason.contains("stream auth works only"),
        "{reason}"
    );
    let abs = api.join("src/api/new.rs");
    let payload =
        fixture("claude/pre_tool_use_write", &api, |v| v["tool_input"]["file_path"] = abs.to_str().unwrap().into());
    let reason =
        denial(hook_env(&repo, &api, "claude", &[("CLAUDE_PROJECT_DIR", &auth)], payload.to_string().as_bytes()));
    assert!(reason.contains("is in the worktree of stream api"), "{reason}");
    // Its own files, from wherever the agent is, go on.
    let own = auth.join("src/auth/login.rs");
    let payload =
        fixture("claude/pre_tool_use_write", &api, |v| v["tool_input"]["file_path"] = own.to_str().unwrap().into());
    let r = hook_env(&repo, &api, "claude", &[("CLAUDE_PROJECT_DIR", &auth)], payload.to_string().as_bytes());
    assert_eq!(r.code(0).stdout, "");
    // The stop of that session is judged on auth's boulder.
    let stop = fixture("claude/stop", &api, |_| {});
    let out =
        hook_env(&repo, &api, "claude", &[("CLAUDE_PROJECT_DIR", &auth)], stop.to_string().as_bytes()).code(0).json();
    assert_eq!(out["decision"], "block");
    assert_eq!(boulder_state(&repo, "auth")["failure_count"], 1);
    assert_eq!(boulder_state(&repo, "api")["failure_count"], 0);
}

#[test]
fn writes_into_git_data_of_any_worktree_are_denied() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    let api = repo.worktree("api");
    let admin = std::fs::read_to_string(wt.join(".git")).unwrap();
    let admin = Path::new(admin.trim().strip_prefix("gitdir: ").unwrap()).to_path_buf();
    for file in [
        wt.join(".git"),
        api.join(".git"),
        repo.dir.join(".git/config"),
        repo.dir.join(".git/hooks/pre-commit"),
        admin.join("HEAD"),
        admin.join("commondir"),
    ] {
        let payload =
            fixture("claude/pre_tool_use_write", &wt, |v| v["tool_input"]["file_path"] = file.to_str().unwrap().into());
        let reason = denial(feed(&repo, "claude", &payload));
        assert!(reason.contains("git's own data"), "{}: {reason}", file.display());
    }
    // Relative, from the worktree: its own `.git` file.
    let payload = fixture("claude/pre_tool_use_edit", &wt, |v| v["tool_input"]["file_path"] = ".git".into());
    assert!(denial(feed(&repo, "claude", &payload)).contains("git's own data"));
    let denied: Vec<Value> = ops(&repo, "auth").into_iter().filter(|op| op["kind"] == "denied").collect();
    assert_eq!(denied.len(), 7);
    assert!(denied.iter().all(|op| op["data"]["rule"] == "git_dir"), "{denied:?}");
    // The worktree's .git file is unchanged: the hook judges, it writes nothing there.
    assert!(std::fs::read_to_string(wt.join(".git")).unwrap().starts_with("gitdir: "));
}

#[test]
fn a_continued_stop_is_held_again_only_after_new_work_and_below_the_cap() {
    let repo = initialized("");
    let wt = repo.worktree("auth");
    let cap = Path::new("3");
    let stop = |active: bool| {
        let p = fixture("claude/stop", &wt, |v| v["stop_hook_active"] = Value::Bool(active));
        hook_env(&repo, &wt, "claude", &[("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", cap)], p.to_string().as_bytes()).code(0)
    };
    // The first stop of a prompt: blocked (1 in a row).
    assert_eq!(stop(false).json()["decision"], "block");
    // Going on because of that block, with no commit since: let through, nothing recorded.
    assert_eq!(stop(true).stdout, "");
    assert_eq!(boulder_state(&repo, "auth")["failure_count"], 1);
    // A commit since the last block: held again (2 in a row), recorded under the gate progress.
    commit_in(&repo, &wt, "src/auth/a.rs", "a\n", "part one");
    let out = stop(true).json();
    assert_eq!(out["decision"], "block", "{out}");
    assert!(out["reason"].as_str().unwrap().contains("US-001"), "the next story: {out}");
    let log = ops(&repo, "auth");
    assert_eq!((&log[0]["kind"], &log[0]["data"]["gate"]), (&"enforced".into(), &"progress".into()), "{log:?}");
    assert_eq!(stop(true).stdout, "", "no new work since");
    // More work, but a third block in a row would reach the cap of 3: let through.
    commit_in(&repo, &wt, "src/auth/b.rs", "b\n", "part two");
    assert_eq!(stop(true).stdout, "");
    let enforced = ops(&repo, "auth").into_iter().filter(|op| op["kind"] == "enforced").count();
    assert_eq!(enforced, 2);
    // With the default cap (8), that stop is held.
    let p = fixture("claude/stop", &wt, |v| v["stop_hook_active"] = Value::Bool(true));
    assert_eq!(feed(&repo, "claude", &p).code(0).json()["decision"], "block");
}
