//! Boulders: hierarchy and its limits, `check` gates driven through the binary with a fixed clock
//! (`BOULDER_NOW`), checkpoints, todos and `resume`.

use crate::common::*;

fn at(repo: &TestRepo, now: &str, args: &[&str]) -> Run {
    repo.boulder_env(&repo.dir, args, &[("BOULDER_NOW", now)])
}

fn initialized() -> TestRepo {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo
}

#[test]
fn hierarchy_limits_list_and_switch() {
    let repo = initialized();
    let plan = repo
        .read(".boulder/streams.yaml")
        .replace("settings:\n", "settings:\n  boulder:\n    max_depth: 2\n    parallel_limit: 2\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.boulder(&["create", "oauth", "--parent", "auth"]).ok();
    repo.boulder(&["create", "saml", "--parent", "auth"]).ok();
    let r = repo.boulder(&["create", "ldap", "--parent", "auth"]).code(1);
    assert_shown!("hierarchy_limits_list_and_switch", r);
    let r = repo.boulder(&["create", "deep", "--parent", "oauth"]).code(1);
    assert_shown!("hierarchy_limits_list_and_switch_2", r);
    repo.boulder(&["create", "oauth"]).code(2);
    repo.boulder(&["create", "x", "--parent", "ghost"]).code(2);
    repo.boulder(&["create", "../x"]).code(2);
    let list = repo.boulder(&["list", "--json"]).ok().json();
    let paths: Vec<&str> = list.as_array().unwrap().iter().map(|b| b["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["auth", "auth.oauth", "auth.saml"]);
    assert_eq!(list[1]["depth"], 1);
    assert_eq!(list[1]["stream"], "auth");

    // Commits in the worktree after `switch` count for the child and its parent.
    repo.boulder(&["hooks", "install"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    repo.boulder_in(&wt, &["switch", "oauth"]).ok();
    std::fs::write(wt.join("src/auth/o.rs"), "o\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]).ok();
    repo.git_in(&wt, &["commit", "-q", "-m", "oauth work"]).ok();
    let list = repo.boulder(&["list", "--json"]).ok().json();
    assert_eq!(list[0]["iteration"], 1, "parent counted");
    assert_eq!(list[1]["iteration"], 1, "child counted");
    assert_eq!(list[2]["iteration"], 0);
}

#[test]
fn check_gates_through_the_binary() {
    let repo = initialized();
    let t0 = "2030-01-01T00:00:00Z";
    let j = at(&repo, t0, &["check", "--boulder", "auth", "--json", "--subagent"]).ok().json();
    assert_eq!(j["enforce"], false);
    assert_eq!(j["gate"], "subagent");
    // Idle long after creation: enforce (error variant), recorded.
    let j = at(&repo, t0, &["check", "--boulder", "auth", "--json"]).ok().json();
    assert_eq!(j["enforce"], true, "{j}");
    assert_eq!(j["variant"], "error");
    assert!(j["message"].as_str().unwrap().starts_with("Boulder auth (iteration 0)\n"), "{j}");
    assert_eq!(j["depth"], 0);
    // Right after: cooldown (30s × 2^1).
    let j = at(&repo, "2030-01-01T00:00:30Z", &["check", "--boulder", "auth", "--json"]).ok().json();
    assert_eq!(j["gate"], "cooldown");
    // Flags override thresholds: max_failures 1 is already reached, and stays reached.
    let j =
        at(&repo, "2030-01-01T05:00:00Z", &["check", "--boulder", "auth", "--json", "--max-failures", "1"]).ok().json();
    assert_eq!(j["gate"], "max_failures");
    let j =
        at(&repo, "2030-01-02T05:00:00Z", &["check", "--boulder", "auth", "--json", "--max-failures", "1"]).ok().json();
    assert_eq!(j["gate"], "max_failures", "no nagging without progress");
    // Completion detection fires at once (warning), but not on work talk.
    let j = at(&repo, "2030-01-01T00:00:31Z", &["check", "--boulder", "auth", "--json", "--message", "I am done"])
        .ok()
        .json();
    assert_eq!(j["gate"], "completion");
    assert_eq!(j["variant"], "warning");
    let j = at(
        &repo,
        "2030-01-01T00:00:32Z",
        &["check", "--boulder", "auth", "--json", "--message", "Let me complete the function"],
    )
    .ok()
    .json();
    assert_eq!(j["enforce"], false);
    let state: serde_json::Value =
        serde_json::from_str(&repo.git_out(&["cat-file", "-p", "refs/boulder/boulders/auth:state.json"])).unwrap();
    assert_eq!(state["failure_count"], 2);
    repo.boulder(&["check", "--boulder", "auth", "--cooldown", "soon"]).code(2);
}

#[test]
fn identical_messages_never_repeat_back_to_back() {
    let repo = initialized();
    let mut last = String::new();
    for (i, t) in ["2030-01-01T00:00:00Z", "2030-01-01T01:00:00Z", "2030-01-01T02:00:00Z"].iter().enumerate() {
        let j = at(&repo, t, &["check", "--boulder", "auth", "--json", "--recovery-window", "1s"]).ok().json();
        assert_eq!(j["enforce"], true, "round {i}: {j}");
        let m = j["message"].as_str().unwrap().to_string();
        assert_ne!(m, last);
        last = m;
    }
}

#[test]
fn checkpoint_todos_and_resume() {
    let repo = initialized();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    repo.boulder_in(&wt, &["checkpoint", "-m", "login form half done"]).ok();
    let id = repo.boulder_in(&wt, &["todo", "add", "write tests"]).ok().stdout;
    repo.boulder_in(&wt, &["todo", "add", "docs"]).ok();
    repo.boulder_in(&wt, &["todo", "done", id.trim()]).ok();
    repo.boulder_in(&wt, &["todo", "done", "t99"]).code(2);
    let list = repo.boulder_in(&wt, &["todo", "list"]).ok().stdout;
    assert!(list.contains("[x] t1") && list.contains("[ ] t2"), "{list}");
    let j = repo.boulder_in(&wt, &["resume", "--json"]).ok().json();
    assert_eq!(j["boulder"], "auth");
    assert_eq!(j["stream"], "auth");
    assert_eq!(j["story"]["id"], "US-001");
    assert_eq!(j["checkpoint"]["message"], "login form half done");
    assert_eq!(j["progress"]["done"], 1);
    assert_eq!(j["progress"]["total"], 2);
    assert_eq!(j["todos"].as_array().unwrap().len(), 1);
    let text = repo.boulder_in(&wt, &["start-work"]).ok().stdout;
    assert!(text.contains("next story: US-001") && text.contains("login form half done"), "{text}");
}

#[test]
fn inherit_cooldowns_makes_a_child_wait_for_its_parent() {
    let repo = initialized();
    let t0 = "2030-01-01T00:00:00Z";
    assert_eq!(at(&repo, t0, &["check", "--boulder", "auth", "--json"]).ok().json()["enforce"], true);
    at(&repo, "2030-01-01T00:00:01Z", &["create", "oauth", "--parent", "auth"]).ok();
    let later = "2030-01-01T00:00:40Z";
    // Without inheritance the child has no cooldown of its own yet.
    let j = at(&repo, later, &["check", "--boulder", "oauth", "--json"]).ok().json();
    assert_eq!(j["enforce"], true, "{j}");
    assert_eq!(j["parent_iteration"], 0);
    assert!(j["message"].as_str().unwrap().starts_with("Boulder [Parent: 0] → [Child: 0]"), "{j}");
    // With it, the parent's enforcement at t0 (cooldown 30s × 2^1) still holds the child at 40s.
    let plan = repo.read(".boulder/streams.yaml");
    repo.write(
        ".boulder/streams.yaml",
        &plan.replace("settings:\n", "settings:\n  boulder:\n    inherit_cooldowns: true\n"),
    );
    at(&repo, "2030-01-01T00:00:02Z", &["create", "saml", "--parent", "auth"]).ok();
    let j = at(&repo, later, &["check", "--boulder", "saml", "--json"]).ok().json();
    assert_eq!(j["gate"], "cooldown", "{j}");
}

#[test]
fn a_parent_enforces_once_its_children_are_finished() {
    let repo = initialized();
    at(&repo, "2030-01-01T00:00:00Z", &["create", "oauth", "--parent", "auth"]).ok();
    let j = at(&repo, "2030-01-01T01:00:00Z", &["check", "--boulder", "auth", "--json"]).ok().json();
    assert_eq!(j["gate"], "children", "{j}");
    repo.boulder(&["finish", "oauth"]).ok();
    let j = at(&repo, "2030-01-01T01:00:00Z", &["check", "--boulder", "auth", "--json"]).ok().json();
    assert_eq!(j["enforce"], true, "{j}");
    let list = repo.boulder(&["list", "--json"]).ok().json();
    assert_eq!(list[1]["status"], "completed");
}

#[test]
fn checks_at_the_same_instant_push_the_agent_on_once() {
    // Two idle events of one turn, or two harness hooks, ask at once about an idle boulder: one
    // enforcement only — those that decided on the state before it was recorded find it there.
    let repo = initialized();
    for round in 0..3 {
        let now = format!("2030-01-01T0{round}:00:00Z");
        let children: Vec<_> = (0..4)
            .map(|_| {
                let mut cmd = repo.command(bin());
                cmd.current_dir(&repo.dir).env("BOULDER_NOW", &now).args([
                    "check",
                    "--boulder",
                    "auth",
                    "--json",
                    "--recovery-window",
                    "1s",
                ]);
                cmd.stdout(std::process::Stdio::piped()).spawn().unwrap()
            })
            .collect();
        let answers: Vec<serde_json::Value> = children
            .into_iter()
            .map(|c| serde_json::from_slice(&c.wait_with_output().unwrap().stdout).unwrap())
            .collect();
        let enforced = answers.iter().filter(|j| j["enforce"] == true).count();
        assert_eq!(enforced, 1, "round {round}: {answers:?}");
    }
}

#[test]
fn the_enforcement_names_the_next_open_story_of_the_worktrees_stream() {
    // An agent in a stream's worktree that never went through `stream run` has no last story: the
    // message names the stream's next open story, not only the boulder's name.
    let repo = initialized();
    let wt = repo.worktree("auth");
    let prd = repo.boulder_in(&wt, &["prd", "next", "--json"]).ok().json();
    let id = prd["id"].as_str().or_else(|| prd["story"]["id"].as_str()).expect("next story id").to_string();
    let j = repo
        .boulder_env(&wt, &["check", "--json", "--message", "I am done"], &[("BOULDER_NOW", "2030-01-01T00:00:00Z")])
        .ok()
        .json();
    assert_eq!(j["enforce"], true, "{j}");
    let m = j["message"].as_str().unwrap();
    assert!(m.contains(&format!("Task: {id}: ")), "{m}");
}
