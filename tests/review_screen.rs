//! `git boulder review NAME` without a decision: the one screen a reviewer reads — stories,
//! commits, changes grouped by owner, the landing check, verify, spend and decisions — as a
//! person sees it, as JSON, and with `--diff` (git's diff, paged only on a terminal).

use crate::common::*;

/// The sample with review required, machine `laptop`, and auth's worktree holding a commit that
/// changes its own path, a `shared_read` path, an undeclared path and a path api owns.
fn reviewed_sample() -> TestRepo {
    let repo = sample_with("  review: {required: 1}\n");
    repo.git(&["config", "boulder.actor", "laptop"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/login.rs", "fn login() {}\nfn form() {}\n", "feat(auth): login form");
    std::fs::write(w.join("src/types/user.rs"), "// shared types\npub struct User;\n").unwrap();
    std::fs::write(w.join("README.md"), "# sample\n\nLog in first.\n").unwrap();
    std::fs::create_dir_all(w.join("src/api")).unwrap();
    std::fs::write(w.join("src/api/mod.rs"), "// api\n// touched by auth\n").unwrap();
    repo.git_in(&w, &["add", "-A"]).ok();
    repo.git_in(&w, &["commit", "-q", "-m", "auth: touch what others own"]).ok();
    repo
}

#[test]
fn the_screen_shows_stories_commits_changes_by_owner_the_check_and_decisions() {
    let repo = reviewed_sample();
    let r = repo.boulder(&["review", "auth"]).ok();
    assert_shown!("screen", r);

    let v = repo.boulder(&["review", "auth", "--json"]).ok().json();
    assert_eq!(v["tip"], rev(&repo, "boulder/auth"));
    assert_eq!(v["commits_total"], 2);
    let groups: Vec<(String, String)> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["group"].as_str().unwrap().to_string(), g["owner"].as_str().unwrap_or("").to_string()))
        .collect();
    let want = [("own", ""), ("shared_read", ""), ("undeclared", ""), ("stream", "api")];
    assert_eq!(groups, want.map(|(a, b)| (a.to_string(), b.to_string())));
    assert_eq!(v["review"]["status"], "REVIEW");
    assert_eq!(v["review"]["required"], 1);
    assert_eq!(v["spend"], serde_json::Value::Null);
    // The two refused paths and the undeclared one `undeclared_paths: warn` reports.
    assert_eq!(v["check"]["ownership"].as_array().unwrap().len(), 3, "{v}");
}

#[test]
fn recorded_spend_is_on_the_screen() {
    let repo = reviewed_sample();
    let add = ["spend", "add", "--stream", "auth", "--tokens-in", "1000", "--tokens-out", "200", "--usd", "0.25"];
    repo.boulder(&add).ok();
    let v = repo.boulder(&["review", "auth", "--json"]).ok().json();
    assert_eq!(v["spend"]["total"]["tokens_in"], 1000, "{v}");
    assert_eq!(v["spend"]["usd"], 0.25, "{v}");
    let r = repo.boulder(&["review", "auth"]).ok();
    assert!(r.stdout.lines().any(|l| l == "spend: $0.25"), "{}", r.stdout);
}

#[test]
fn decisions_and_earlier_reviews_are_on_the_screen() {
    let repo = reviewed_sample();
    let alice = [("GIT_COMMITTER_NAME", "Alice"), ("GIT_COMMITTER_EMAIL", "alice@example.com")];
    let bob = [("GIT_COMMITTER_NAME", "Bob"), ("GIT_COMMITTER_EMAIL", "bob@example.com")];
    repo.boulder_env(&repo.dir, &["review", "auth", "--request-changes", "-m", "keep the old endpoint"], &bob).ok();
    repo.boulder_env(&repo.dir, &["review", "auth", "--withdraw"], &bob).ok();
    repo.boulder_env(&repo.dir, &["review", "auth", "--approve", "-m", "looks right"], &alice).ok();
    // A commit after the approval: it stands, for the older tip only.
    commit_in(&repo, &repo.worktree("auth"), "src/auth/login.rs", "fn login() {}\n", "auth: simpler");
    let r = repo.boulder(&["review", "auth"]).ok();
    assert_shown!("screen_with_decisions", r);
}

#[test]
fn a_stream_without_a_branch_shows_what_there_is() {
    let repo = sample_with("  review: {required: 1}\n");
    let r = repo.boulder(&["review", "docs"]).ok();
    assert_shown!("screen_without_branch", r);
}

#[test]
fn a_stream_without_review_says_it_is_not_required_and_a_conflict_is_named() {
    let repo = sample();
    repo.git(&["config", "boulder.actor", "laptop"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    commit_in(&repo, &repo.worktree("auth"), "src/auth/mod.rs", "// auth, by the stream\n", "auth: header");
    commit_in(&repo, &repo.dir, "src/auth/mod.rs", "// auth, on main\n", "main: header");
    let r = repo.boulder(&["review", "auth"]).ok();
    assert_shown!("screen_conflict_no_review", r);
}

#[test]
fn diff_adds_git_s_diff_unpaged_when_stdout_is_not_a_terminal() {
    let repo = reviewed_sample();
    let marker = repo.home.join("pager-ran");
    let pager = format!("touch '{}'; cat", marker.display());
    let r =
        repo.boulder_env(&repo.dir, &["review", "auth", "--diff"], &[("GIT_PAGER", &pager), ("PAGER", &pager)]).ok();
    let screen = repo.boulder(&["review", "auth"]).ok().stdout;
    assert!(r.stdout.starts_with(&screen), "the screen comes first:\n{}", r.stdout);
    let diff = &r.stdout[screen.len()..];
    assert!(diff.contains("diff --git a/src/auth/login.rs b/src/auth/login.rs\n"), "{diff}");
    assert!(diff.contains("+fn form() {}\n"), "{diff}");
    assert!(!marker.exists(), "git starts no pager when stdout is not a terminal");
    // The base's own commits are not the stream's: three dots, from where it forked.
    commit_in(&repo, &repo.dir, "docs/index.md", "# docs\nmore\n", "main moves on");
    let r = repo.boulder(&["review", "auth", "--diff"]).ok();
    assert!(!r.stdout.contains("docs/index.md"), "{}", r.stdout);
}

#[test]
fn diff_and_json_do_not_go_together() {
    let repo = reviewed_sample();
    let r = repo.boulder(&["review", "auth", "--diff", "--json"]).code(2);
    assert!(r.stderr.contains("cannot be used with"), "{}", r.stderr);
}

#[test]
fn the_dashboard_snapshot_says_where_each_stream_stands_with_review() {
    let snapshot = |repo: &TestRepo| {
        let ui = crate::ui::Ui::start(repo, &[]);
        let (code, answer) = ui.get("/api/snapshot", &ui.host());
        assert_eq!(code, 200);
        let body: serde_json::Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
        body["review"].clone()
    };
    assert_eq!(snapshot(&sample()), serde_json::Value::Null, "no review asked for: null");
    let repo = reviewed_sample();
    let bob = [("GIT_COMMITTER_NAME", "Bob"), ("GIT_COMMITTER_EMAIL", "bob@example.com")];
    repo.boulder_env(&repo.dir, &["review", "auth", "--request-changes", "-m", "keep the old endpoint"], &bob).ok();
    let review = snapshot(&repo);
    assert_eq!(review["streams"]["auth"]["status"], "CHANGES_REQUESTED");
    assert_eq!(review["streams"]["auth"]["changes_requested"]["message"], "keep the old endpoint");
    assert_eq!(review["streams"]["docs"]["status"], "REVIEW");
    assert_eq!(review["streams"]["docs"]["required"], 1);
}

#[test]
fn diff_goes_through_git_s_pager_on_a_terminal() {
    // `script` (util-linux) gives the command a terminal; without it there is nothing to show.
    let Ok(script) = which("script") else { return };
    let repo = reviewed_sample();
    let marker = repo.home.join("pager-ran");
    let pager = format!("cat > '{}'", marker.display());
    let line = format!("'{}' review auth --diff", bin());
    let out = repo
        .command(script)
        .args(["-qec", &line, "/dev/null"])
        .current_dir(&repo.dir)
        .env("GIT_PAGER", &pager)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let paged = std::fs::read_to_string(&marker).expect("git ran the pager");
    assert!(paged.contains("+fn form() {}"), "{paged}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("landing check"), "the screen is on the terminal");
}

/// The path of `program` on PATH.
fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or(())
}
