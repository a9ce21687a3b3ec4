//! The project boulder: in a repository with no plan, and in the main worktree of one with a
//! plan, `check`, `checkpoint`, `todo`, `resume` and the harness hooks work on one boulder made on
//! first use, with no flags; commits in the main worktree are its activity.

use crate::agent_claude::{feed, fixture};
use crate::common::*;

const PRD: &str = "# PRD: Solo\n\n## Wave 1 — Foundation\n\n### [x] US-001: Setup\nDone.\n\n\
### [ ] US-002: Parser\nWrite the parser.\n\n## Wave 2 — Polish\n\n### [ ] US-003: Docs\nWrite docs.\n";

#[test]
fn without_a_plan_check_checkpoint_todo_and_resume_need_no_flags() {
    let repo = TestRepo::with_files(&[("README.md", "# solo\n")]);
    let j = repo.boulder(&["check", "--json", "--message", "I am done"]).ok().json();
    assert_eq!(j["boulder"], "project");
    assert_eq!(j["enforce"], true, "no PRD: never complete, so completion talk is pushed back: {j}");
    repo.boulder(&["checkpoint", "-m", "parser half done"]).ok();
    assert_eq!(repo.boulder(&["todo", "add", "error messages"]).ok().stdout.trim(), "t1");
    let list = repo.boulder(&["todo", "list"]).ok().stdout;
    assert!(list.contains("[ ] t1  error messages"), "{list}");
    let r = repo.boulder(&["resume", "--json"]).ok().json();
    assert_eq!(r["boulder"], "project");
    assert_eq!(r["checkpoint"]["message"], "parser half done");
    assert_eq!(r["todos"][0]["text"], "error messages");
    let state = repo.state("refs/boulder/boulders/project");
    assert_eq!(state["failure_count"], 1);
    assert_eq!(state["stream"], serde_json::Value::Null);
}

#[test]
fn a_prd_without_a_plan_is_resumed_by_wave_and_completes_the_boulder() {
    let repo = TestRepo::with_files(&[(".agents/tasks/prd.md", PRD)]);
    let text = repo.boulder(&["resume"]).ok().stdout;
    assert!(text.contains("boulder: project") && text.contains("wave 1: 1/2"), "{text}");
    assert!(text.contains("next story: US-002: Parser"), "{text}");
    // The harness sees the same: a Stop with stories open is pushed back.
    let out = feed(&repo, "claude", &fixture("claude/stop", &repo.dir, |_| {})).code(0).json();
    assert_eq!(out["decision"], "block", "{out}");
    let ctx = feed(&repo, "claude", &fixture("claude/session_start", &repo.dir, |_| {})).code(0).json();
    let ctx = ctx["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string();
    for want in
        ["project boulder project", ".agents/tasks/prd.md", "wave 1: 1/2", "US-002: Parser", "Write the parser."]
    {
        assert!(ctx.contains(want), "no {want:?} in\n{ctx}");
    }
    // All stories done: the boulder is complete, nothing to push.
    repo.boulder(&["prd", "done", "US-002", "US-003"]).ok();
    let j = repo.boulder(&["check", "--json", "--message", "I am done"]).ok().json();
    assert_eq!((j["enforce"].clone(), j["gate"].clone()), (false.into(), "completed".into()), "{j}");
    assert_eq!(feed(&repo, "claude", &fixture("claude/stop", &repo.dir, |_| {})).code(0).stdout, "");
}

#[test]
fn the_main_worktree_of_a_plan_has_the_project_boulder_and_its_commits_count() {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let j = repo.boulder(&["resume", "--json"]).ok().json();
    assert_eq!(j["boulder"], "project");
    assert_eq!(j["stream"], serde_json::Value::Null);
    assert_eq!(j["story"]["id"], "US-001");
    assert_eq!(j["progress"]["total"], 6);
    repo.boulder(&["checkpoint", "-m", "planning"]).ok();
    commit_in(&repo, &repo.dir, "README.md", "# sample, edited\n", "main work");
    let p = repo.state("refs/boulder/boulders/project");
    assert_eq!(p["iteration"], 1, "{p}");
    assert_eq!(p["last_commit"], rev(&repo, "HEAD"));
    // The stream's worktree keeps its own boulder; the main worktree's commit was not the stream's.
    let wt = repo.worktree("auth");
    assert_eq!(repo.boulder_in(&wt, &["resume", "--json"]).ok().json()["boulder"], "auth");
    assert_eq!(repo.state("refs/boulder/boulders/auth")["iteration"], 0);
    let notes = repo.git(&["notes", "--ref=refs/notes/boulder", "show", "HEAD"]);
    assert_ne!(notes.code, 0, "a main-worktree commit gets no stream note");
    // A boulder `switch`ed to in the main worktree still wins.
    repo.boulder(&["create", "spike"]).ok();
    repo.boulder(&["switch", "spike"]).ok();
    assert_eq!(repo.boulder(&["check", "--json"]).ok().json()["boulder"], "spike");
    // A linked worktree on no stream's branch has no boulder.
    let side = repo.tmp.path().join("side");
    repo.git(&["worktree", "add", "-q", "-b", "side", side.to_str().unwrap()]).ok();
    let r = repo.boulder_in(&side, &["check"]).code(2);
    assert_shown!("the_main_worktree_of_a_plan_has_the_project_boulder_and_its_commits_count", r);
}

#[test]
fn a_stream_named_project_keeps_its_boulder() {
    let repo = TestRepo::with_files(&[
        (".agents/tasks/prd.md", PRD),
        (".boulder/streams.yaml", "version: 1\nstreams:\n  project:\n    stories: [US-002]\n    paths: [src/**]\nsettings:\n  base_branch: main\n"),
    ]);
    repo.boulder(&["stream", "init", "project"]).ok();
    let j = repo.boulder(&["check", "--json"]).ok().json();
    assert_eq!(j["boulder"], "_project");
    let j = repo.boulder_in(&repo.worktree("project"), &["check", "--json"]).ok().json();
    assert_eq!(j["boulder"], "project");
}

#[test]
fn an_empty_checkpoint_is_refused_before_anything_is_written() {
    let repo = TestRepo::with_files(&[("README.md", "# solo\n")]);
    for (case, message) in [("empty", ""), ("blank", "  \n")] {
        let r = repo.boulder(&["checkpoint", "-m", message]).code(2);
        assert_shown!(format!("an_empty_checkpoint_{case}"), r);
    }
    assert!(repo.refs("refs/boulder").is_empty(), "{:?}", repo.refs("refs/boulder"));
    repo.boulder(&["checkpoint", "-m", "login done"]).ok();
    assert_eq!(repo.refs("refs/boulder"), vec!["refs/boulder/boulders/project".to_string()]);
}
