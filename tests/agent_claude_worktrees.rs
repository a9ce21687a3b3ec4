//! Claude Code's own worktrees become streams: `WorktreeCreate` and `WorktreeRemove` payloads
//! (fixtures under `tests/fixtures/harness/claude/`) fed to the real binary, the results checked
//! with plain git (`git worktree list`, branches, notes, `git fsck`) and the op-logs; then the real
//! Claude Code (`claude -p --worktree NAME`) against the fake model.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::agent_claude::{fixture, hook_env};
use crate::agent_real_claude::claude_p;
use crate::common::*;

/// `WorktreeCreate` for `name`, asked by a session started in `session`.
fn create(repo: &TestRepo, session: &Path, name: &str) -> Run {
    let payload = fixture("claude/worktree_create", session, |v| v["name"] = Value::String(name.into()));
    hook_env(repo, session, "claude", &[("CLAUDE_PROJECT_DIR", session)], payload.to_string().as_bytes())
}

/// `WorktreeRemove` of `path`, asked by a session started in `session`.
fn remove(repo: &TestRepo, session: &Path, path: &Path) -> Run {
    let payload = fixture("claude/worktree_remove", session, |v| {
        v["worktree_path"] = Value::String(path.to_str().unwrap().into())
    });
    hook_env(repo, session, "claude", &[("CLAUDE_PROJECT_DIR", session)], payload.to_string().as_bytes())
}

/// The folders `git worktree list` names.
fn worktrees(repo: &TestRepo) -> Vec<PathBuf> {
    repo.git_out(&["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(PathBuf::from)
        .collect()
}

fn branch_exists(repo: &TestRepo, branch: &str) -> bool {
    repo.git(&["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}")]).code == 0
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

#[test]
fn a_streams_name_is_that_streams_worktree_made_by_stream_init() {
    let repo = sample();
    let r = create(&repo, &repo.dir, "auth").code(0);
    let wt = real(&repo.worktree("auth"));
    // Only the absolute path on stdout: Claude Code takes its last line as the worktree.
    assert_eq!(r.stdout, format!("{}\n", wt.display()), "{}", r.stderr);
    assert!(worktrees(&repo).contains(&wt));
    assert_eq!(repo.git_in(&wt, &["symbolic-ref", "--short", "HEAD"]).ok().stdout.trim(), "boulder/auth");
    let s = repo.stream_state("auth");
    assert_eq!(s["status"], "INITIALIZED");
    assert!(s.get("adhoc").is_none(), "a stream of the plan is no ad-hoc stream: {s}");
    // Asked again (a resumed session): the same worktree, nothing new recorded.
    let tip = rev(&repo, "refs/boulder/streams/auth");
    assert_eq!(create(&repo, &repo.dir, "auth").code(0).stdout, r.stdout);
    assert_eq!(rev(&repo, "refs/boulder/streams/auth"), tip);
    repo.assert_fsck();
}

#[test]
fn another_name_becomes_an_adhoc_stream_whose_commits_edits_and_landing_are_the_streams() {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    let name = "agent-a1b2c3d4e5f60718";
    let r = create(&repo, &repo.dir, name).code(0);
    let wt = real(&repo.worktree(name));
    assert_eq!(r.stdout, format!("{}\n", wt.display()), "{}", r.stderr);
    assert!(worktrees(&repo).contains(&wt));
    let branch = format!("boulder/{name}");
    assert_eq!(repo.git_in(&wt, &["symbolic-ref", "--short", "HEAD"]).ok().stdout.trim(), branch);
    assert_eq!(rev(&repo, &branch), rev(&repo, "main"), "an ad-hoc stream starts from the base branch");
    let s = repo.stream_state(name);
    assert_eq!((s["status"].as_str(), s["adhoc"].as_bool()), (Some("INITIALIZED"), Some(true)), "{s}");
    // It is a stream like the plan's: listed, with its root boulder.
    let list = repo.boulder(&["stream", "list"]).ok().stdout;
    assert!(list.contains(name), "{list}");
    let rows = repo.boulder(&["status", "--json"]).ok().json();
    let rows = rows["streams"].as_array().unwrap();
    let row = rows.iter().find(|r| r["name"] == name).unwrap();
    assert_eq!((row["adhoc"].as_bool(), row["status"].as_str()), (Some(true), Some("INITIALIZED")), "{row}");
    assert!(rows.iter().filter(|r| r["name"] != name).all(|r| r.get("adhoc").is_none()), "{rows:?}");
    assert!(repo.refs("refs/boulder/boulders/").contains(&format!("refs/boulder/boulders/{name}")));
    // The plan file is unchanged and still checks clean: an ad-hoc stream has no stories by design.
    let v = repo.boulder(&["stream", "validate"]).ok().stdout;
    assert!(v.contains("0 warnings"), "{v}");

    // Its edits are judged: another stream's file is denied, a file no stream owns goes on.
    let write = |file: &str| {
        let payload = fixture("claude/pre_tool_use_write", &wt, |v| {
            v["tool_input"]["file_path"] = Value::String(wt.join(file).to_str().unwrap().into())
        });
        hook_env(&repo, &wt, "claude", &[("CLAUDE_PROJECT_DIR", &wt)], payload.to_string().as_bytes()).code(0)
    };
    let denied = write("src/api/list.rs").json();
    let reason = denied["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap();
    assert!(reason.contains("owned by stream api"), "{reason}");
    assert_eq!(write("notes.md").stdout, "");

    // Its commits are recorded by the git hooks: a note naming the stream, an activity op.
    commit_in(&repo, &wt, "notes.md", "scratch\n", "notes from the subagent");
    let note = repo.git_out(&["notes", "--ref=boulder", "show", &branch]);
    assert!(note.contains(&format!("\"stream\":\"{name}\"")), "{note}");
    assert_eq!(repo.state(&format!("refs/boulder/boulders/{name}"))["iteration"], 1);

    // It lands through the merge queue.
    repo.boulder(&["stream", "merge", name]).ok();
    assert_eq!(repo.git_out(&["show", "main:notes.md"]).trim(), "scratch");
    assert_eq!(repo.stream_state(name)["status"], "MERGED");

    // Merged, its worktree is removed with its branch.
    remove(&repo, &repo.dir, &wt).code(0);
    assert!(!wt.exists());
    assert!(!worktrees(&repo).contains(&wt));
    assert!(!branch_exists(&repo, &branch));
    repo.assert_fsck();
}

#[test]
fn adhoc_streams_refuse_refuses_a_name_the_plan_does_not_have() {
    let repo = sample_with("  adhoc_streams: refuse\n");
    let before = worktrees(&repo);
    let r = create(&repo, &repo.dir, "scratch").code(1);
    assert_eq!(r.stdout, "");
    assert_shown!("adhoc_streams_refuse_refuses_a_name_the_plan_does_not_have", r);
    assert_eq!(worktrees(&repo), before);
    assert!(!branch_exists(&repo, "boulder/scratch"));
    assert!(repo.refs("refs/boulder/streams/").is_empty());
    // The plan's own streams are still made.
    create(&repo, &repo.dir, "docs").code(0);
    assert_eq!(repo.stream_state("docs")["status"], "INITIALIZED");
}

#[test]
fn a_hostile_name_is_refused_naming_the_problem() {
    let repo = sample();
    let refs = repo.git_out(&["for-each-ref"]);
    for (name, why) in [
        ("../escape", "path separator"),
        ("a/b", "path separator"),
        ("-rf", "starts with '-'"),
        ("x.lock", "ends with '.lock'"),
        ("", "it is empty"),
        ("sp ace", "whitespace"),
    ] {
        let r = create(&repo, &repo.dir, name).code(1);
        assert_eq!(r.stdout, "", "{name:?}");
        assert!(r.stderr.contains("invalid worktree name") && r.stderr.contains(why), "{name:?}: {}", r.stderr);
    }
    assert_eq!(repo.git_out(&["for-each-ref"]), refs, "nothing was created");
    // The project boulder's id: an ad-hoc stream of that name would share its boulder.
    repo.boulder(&["check"]).ok();
    let refs = repo.git_out(&["for-each-ref"]);
    let r = create(&repo, &repo.dir, "project").code(1);
    assert!(r.stderr.contains("boulder project, which is not a stream's"), "{}", r.stderr);
    assert_eq!(repo.git_out(&["for-each-ref"]), refs, "nothing was created");
    assert_eq!(worktrees(&repo), vec![real(&repo.dir)]);
}

#[test]
fn removal_never_deletes_unmerged_or_uncommitted_work() {
    let repo = sample();
    let wt = PathBuf::from(create(&repo, &repo.dir, "scratch").code(0).stdout.trim());
    // Uncommitted work: refused, as `stream cleanup` refuses it.
    std::fs::write(wt.join("draft.md"), "draft\n").unwrap();
    let r = remove(&repo, &repo.dir, &wt).code(1);
    assert_shown!("removal_never_deletes_unmerged_or_uncommitted_work", r);
    assert!(wt.join("draft.md").exists());
    // Committed but neither merged nor pushed: refused too.
    repo.git_in(&wt, &["add", "draft.md"]).ok();
    repo.git_in(&wt, &["commit", "-q", "-m", "draft"]).ok();
    let r = remove(&repo, &repo.dir, &wt).code(1);
    assert_shown!("removal_never_deletes_unmerged_or_uncommitted_work_2", r);
    assert!(worktrees(&repo).contains(&wt));
    assert!(branch_exists(&repo, "boulder/scratch"));
    assert_eq!(repo.stream_state("scratch")["status"], "INITIALIZED");
    // A plan stream's worktree follows the same rule.
    let auth = PathBuf::from(create(&repo, &repo.dir, "auth").code(0).stdout.trim());
    commit_in(&repo, &auth, "src/auth/login.rs", "// login\n", "login");
    remove(&repo, &repo.dir, &auth).code(1);
    assert!(auth.join("src/auth/login.rs").exists());
    repo.assert_fsck();
}

#[test]
fn removal_of_a_clean_empty_adhoc_worktree_removes_it_and_its_branch() {
    let repo = sample();
    let wt = PathBuf::from(create(&repo, &repo.dir, "scratch").code(0).stdout.trim());
    let r = remove(&repo, &repo.dir, &wt).code(0);
    assert_eq!(r.stdout, "");
    assert!(!wt.exists());
    assert!(!worktrees(&repo).contains(&wt));
    assert!(!branch_exists(&repo, "boulder/scratch"));
    let s = repo.stream_state("scratch");
    assert_eq!((s["status"].as_str(), s["branch_deleted"].as_bool()), (Some("CLEANED"), Some(true)), "{s}");
    // Cleaned up, it is no stream any more; the name may be asked for again.
    assert!(!repo.boulder(&["stream", "list"]).ok().stdout.contains("scratch"));
    create(&repo, &repo.dir, "scratch").code(0);
    assert_eq!(repo.stream_state("scratch")["status"], "INITIALIZED");
    repo.assert_fsck();
}

#[test]
fn without_a_plan_the_worktree_is_the_one_claude_code_would_make() {
    let repo = TestRepo::with_files(&[("README.md", "# plain\n")]);
    let r = create(&repo, &repo.dir, "feature-x").code(0);
    let wt = real(&repo.dir.join(".claude/worktrees/feature-x"));
    assert_eq!(r.stdout, format!("{}\n", wt.display()), "{}", r.stderr);
    assert_eq!(repo.git_in(&wt, &["symbolic-ref", "--short", "HEAD"]).ok().stdout.trim(), "worktree-feature-x");
    assert!(repo.refs("refs/boulder/").is_empty(), "no stream without a plan");
    assert_eq!(repo.git_out(&["status", "--porcelain"]), "", "the main worktree stays clean");
    // Removal: refused with uncommitted work, else the worktree goes and its branch stays.
    std::fs::write(wt.join("draft.md"), "draft\n").unwrap();
    remove(&repo, &repo.dir, &wt).code(1);
    std::fs::remove_file(wt.join("draft.md")).unwrap();
    remove(&repo, &repo.dir, &wt).code(0);
    assert!(!wt.exists());
    assert!(branch_exists(&repo, "worktree-feature-x"));
    // A folder that is no worktree of the repository is never deleted.
    let other = repo.tmp.path().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let r = remove(&repo, &repo.dir, &other).code(1);
    assert!(r.stderr.contains("not a linked worktree"), "{}", r.stderr);
    assert!(other.exists());
    repo.assert_fsck();
}

#[test]
fn agent_install_claude_installs_the_worktree_hooks() {
    let repo = sample();
    repo.boulder(&["agent", "install", "claude"]).ok();
    let settings: Value = serde_json::from_str(&repo.read(".claude/settings.local.json")).unwrap();
    for event in ["WorktreeCreate", "WorktreeRemove"] {
        let command = &settings["hooks"][event][0]["hooks"][0]["command"];
        assert!(command.as_str().is_some_and(|c| c.contains("agent hook claude")), "{event}: {settings}");
    }
}

// ---- the real Claude Code ----------------------------------------------------------------------

/// The sample with git-boulder's git hooks and Claude Code's hooks installed, and the real
/// `claude`; `None` when Claude Code is not installed here.
fn with_claude() -> Option<(TestRepo, PathBuf)> {
    let claude = harness("claude")?;
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["agent", "install", "claude"]).ok();
    Some((repo, claude))
}

/// `claude -p "Work." ARGS` in the main worktree against `model` ([`claude_p`]).
fn run_claude(repo: &TestRepo, claude: &Path, model: &FakeModel, args: &[&str]) -> Run {
    claude_p(repo, claude, &repo.dir, model, "Work.", args, &[])
}

/// A turn running `pwd`, the branch, and a commit of `file` through Bash.
fn commit_turn(file: &str) -> Value {
    serde_json::json!({"tool_use": {"name": "Bash", "input": {
        "command": format!("pwd; git rev-parse --abbrev-ref HEAD; echo work > {file}; git add {file}; git commit -q -m 'work in {file}'"),
        "description": "commit"}}})
}

/// The text of every Bash result Claude Code gave the model, in the requests it made.
fn bash_results(model: &FakeModel) -> String {
    model
        .requests()
        .iter()
        .flat_map(|r| r["body"]["messages"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn real_claude_worktree_is_a_stream_or_an_adhoc_stream_and_its_commits_are_recorded() {
    let Some((repo, claude)) = with_claude() else { return };
    let done = serde_json::json!({"text": "Done."});
    // A name the plan does not have: an ad-hoc stream.
    let model = FakeModel::start(serde_json::json!([commit_turn("notes.md"), done, done, done]));
    let r = run_claude(&repo, &claude, &model, &["--worktree", "scratch"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let wt = real(&repo.worktree("scratch"));
    let seen = bash_results(&model);
    assert!(
        seen.contains(&format!("{}\\nboulder/scratch", wt.display())),
        "the session ran in the stream's worktree:\n{seen}"
    );
    assert!(worktrees(&repo).contains(&wt));
    assert!(!repo.dir.join(".claude/worktrees").exists(), "Claude Code made no worktree of its own");
    assert!(!branch_exists(&repo, "worktree-scratch"));
    let s = repo.stream_state("scratch");
    assert_eq!((s["status"].as_str(), s["adhoc"].as_bool()), (Some("INITIALIZED"), Some(true)), "{s}");
    let note = repo.git_out(&["notes", "--ref=boulder", "show", "boulder/scratch"]);
    assert!(note.contains("\"stream\":\"scratch\""), "the commit is recorded for the stream: {note}");

    // A stream's name: that stream's worktree, made by stream init.
    let model = FakeModel::start(serde_json::json!([commit_turn("src/auth/login.rs"), done, done, done]));
    let r = run_claude(&repo, &claude, &model, &["--worktree", "auth"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let auth = real(&repo.worktree("auth"));
    let seen = bash_results(&model);
    assert!(seen.contains(&format!("{}\\nboulder/auth", auth.display())), "{seen}");
    let s = repo.stream_state("auth");
    assert!(s["status"] == "INITIALIZED" && s.get("adhoc").is_none(), "{s}");
    let note = repo.git_out(&["notes", "--ref=boulder", "show", "boulder/auth"]);
    assert!(note.contains("\"stream\":\"auth\""), "{note}");
    repo.assert_fsck();
}

#[test]
fn real_claude_subagent_with_worktree_isolation_works_in_an_adhoc_stream() {
    let Some((repo, claude)) = with_claude() else { return };
    let main_before = rev(&repo, "main");
    let done = serde_json::json!({"text": "Done."});
    let model = FakeModel::start(serde_json::json!([
        {"tool_use": {"name": "Agent", "input": {"description": "isolated work", "prompt": "Commit a note.",
            "subagent_type": "general-purpose", "isolation": "worktree", "run_in_background": false}}},
        // The subagent's turns, then the main agent's.
        commit_turn("sub.md"),
        {"text": "Sub done."},
        done, done, done
    ]));
    let r = run_claude(&repo, &claude, &model, &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let streams: Vec<String> = repo
        .refs("refs/boulder/streams/")
        .into_iter()
        .filter_map(|r| r.strip_prefix("refs/boulder/streams/").map(str::to_string))
        .collect();
    let [name] = streams.as_slice() else { panic!("one stream for the subagent: {streams:?}") };
    assert!(name.starts_with("agent-a"), "{name}");
    let s = repo.stream_state(name);
    assert_eq!(s["adhoc"], true, "{s}");
    let wt = real(&repo.worktree(name));
    let seen = bash_results(&model);
    assert!(seen.contains(&format!("{}\\nboulder/{name}", wt.display())), "the subagent ran in it:\n{seen}");
    let note = repo.git_out(&["notes", "--ref=boulder", "show", &format!("boulder/{name}")]);
    assert!(note.contains(&format!("\"stream\":\"{name}\"")), "{note}");
    assert_eq!(rev(&repo, "main"), main_before, "the main worktree's branch is untouched");
    repo.assert_fsck();
}

#[test]
fn a_streams_setup_runs_only_once_trusted_and_an_adhoc_stream_named_by_the_plan_becomes_the_plans() {
    let repo = sample();
    let marker = repo.tmp.path().join("setup-ran");
    repo.with_settings(&format!("  setup: 'touch {}'\n", marker.display()));
    // Refused as `stream init` refuses it: nothing made, the fix named.
    let r = create(&repo, &repo.dir, "auth").code(1);
    assert!(r.stderr.contains("git boulder trust"), "{}", r.stderr);
    assert!(!marker.exists() && !repo.worktree("auth").exists());
    assert!(repo.refs("refs/boulder/").is_empty());
    repo.boulder(&["trust"]).ok();
    create(&repo, &repo.dir, "auth").code(0);
    assert!(marker.exists(), "setup ran in the new worktree");

    // An ad-hoc stream the plan later names is the plan's: its paths, no `adhoc` in status.
    let wt = PathBuf::from(create(&repo, &repo.dir, "scratch").code(0).stdout.trim());
    let plan =
        repo.read(".boulder/streams.yaml").replace("settings:\n", "  scratch:\n    paths: [notes/**]\nsettings:\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("plan: scratch");
    let rows = repo.boulder(&["status", "--json"]).ok().json();
    let row = rows["streams"].as_array().unwrap().iter().find(|r| r["name"] == "scratch").cloned().unwrap();
    assert!(row.get("adhoc").is_none(), "{row}");
    let payload = fixture("claude/pre_tool_use_write", &wt, |v| {
        v["tool_input"]["file_path"] = Value::String(wt.join("README.md").to_str().unwrap().into())
    });
    let with_undeclared_error =
        repo.read(".boulder/streams.yaml").replace("settings:\n", "settings:\n  undeclared_paths: error\n");
    repo.write(".boulder/streams.yaml", &with_undeclared_error);
    let out =
        hook_env(&repo, &wt, "claude", &[("CLAUDE_PROJECT_DIR", &wt)], payload.to_string().as_bytes()).code(0).json();
    let reason = out["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap_or_default();
    assert!(reason.contains("notes/**"), "judged with the plan's paths: {out}");
}
