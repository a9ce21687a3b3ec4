//! The review gate (docs/review.md): every landing path — `stream merge` into the local base and
//! `--remote` (the merge queue, which looks at the remote's state and tip), `--all`,
//! `settings.auto_merge` — refuses a stream whose tip lacks approvals with exit 1 and
//! `needs review: git boulder review NAME`, records no refusal for it (it waits, it is not
//! NEEDS_ATTENTION), and `status` shows REVIEW, CHANGES_REQUESTED and APPROVED; changes requested
//! go to the agent as its task. Machines are clones of one bare remote; agents are shell scripts.

use std::path::{Path, PathBuf};

use crate::common::*;

pub const PRD: &str = "# PRD\n\n### [ ] US-101: a part\nIn `src/a/`.\n\n### [ ] US-201: b part\nIn `src/b/`.\n";

/// Two streams, one story each; every stream needs one approval, `b` none (`review: 0`).
/// `extra`: more lines under `settings:`.
pub fn files(review: &str, extra: &str) -> Vec<(String, String)> {
    let plan = format!(
        "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\n  b:\n    stories: [US-201]\n    paths: [src/b/**]\n    review: 0\nsettings:\n  base_branch: main\n  merge_strategy: rebase\n  review: {review}\n{extra}  boulder:\n    cooldown: 10ms\n    max_failures: 2\n"
    );
    vec![
        (".agents/tasks/prd.md".into(), PRD.into()),
        (".boulder/streams.yaml".into(), plan),
        ("src/a/mod.rs".into(), "// a\n".into()),
        ("src/b/mod.rs".into(), "// b\n".into()),
    ]
}

pub fn remote_of(files: &[(String, String)]) -> Remote {
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    Remote::new(&refs)
}

/// An agent that appends the prompt it is given to `prompts` (each followed by a `<<<` line);
/// given changes requested, it commits a change to `src/<stream>/review.txt`; else it finishes
/// its story: a file, the story marked done in the worktree's PRD, one commit.
pub fn agent(m: &TestRepo) -> (PathBuf, PathBuf) {
    let log = m.tmp.path().join("prompts");
    let script = format!(
        "#!/bin/sh\nset -e\nprintf '%s\\n<<<\\n' \"$BOULDER_PROMPT\" >> {log}\nmkdir -p \"src/$BOULDER_STREAM\"\n\
         case \"$BOULDER_PROMPT\" in\n  \"Changes requested by \"*)\n    echo \"review $BOULDER_ITERATION\" >> \"src/$BOULDER_STREAM/review.txt\"\n\
         git add -A\n    git commit -q -m \"$BOULDER_STREAM: review changes\"\n    exit 0;;\nesac\n\
         echo \"$BOULDER_STORY\" > \"src/$BOULDER_STREAM/$BOULDER_STORY.txt\"\n\
         sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
         git add -A\ngit commit -q -m \"$BOULDER_STREAM: $BOULDER_STORY\"\n",
        log = log.display()
    );
    let p = m.tmp.path().join("agent.sh");
    std::fs::write(&p, script).unwrap();
    (p, log)
}

/// The prompts the agent of `log` was given, in order.
pub fn prompts(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.split("\n<<<\n").filter(|p| !p.is_empty()).map(String::from).collect()
}

/// `git boulder review ARGS` on `m` by the person `who` (as git names them: `who <who@example.com>`,
/// lower case).
pub fn review(m: &TestRepo, who: &str, args: &[&str]) -> Run {
    let email = format!("{}@example.com", who.to_lowercase());
    let mut all = vec!["review"];
    all.extend_from_slice(args);
    m.boulder_env(&m.dir, &all, &[("GIT_COMMITTER_NAME", who), ("GIT_COMMITTER_EMAIL", &email)])
}

/// Bring the stream branch `boulder/NAME` and the state of the remote to `m`.
pub fn fetch_stream(m: &TestRepo, name: &str) {
    m.git(&["fetch", "-q", "origin", &format!("+boulder/{name}:boulder/{name}")]).ok();
    m.boulder(&["pull"]).ok();
}

/// Share `m`'s branch of stream NAME and its state with the remote.
pub fn share_stream(m: &TestRepo, name: &str) {
    m.git(&["push", "-q", "-f", "origin", &format!("boulder/{name}")]).ok();
    m.boulder(&["push"]).ok();
}

/// The status `status --json` gives stream `name` on `m`.
pub fn status_of(m: &TestRepo, name: &str) -> String {
    let j = m.boulder(&["status", "--json"]).ok().json();
    let row = j["streams"].as_array().unwrap().iter().find(|s| s["name"] == name).cloned().unwrap();
    row["status"].as_str().unwrap().to_string()
}

/// Assert the gate's refusal of stream `name`: exit 1, and its message as the error's line.
fn needs_review(r: Run, name: &str) -> Run {
    let r = r.code(1);
    let first = r.stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or_default().to_string();
    assert_eq!(first, format!("error: needs review: git boulder review {name}"), "{}", r.stderr);
    r
}

#[test]
fn every_landing_path_refuses_a_stream_without_approval_and_records_no_refusal() {
    let remote = remote_of(&files("{required: 1}", "  auto_merge: true\n"));
    let alpha = remote.machine("alpha");
    let (agent, _) = agent(&alpha);
    let agent = agent.to_str().unwrap();
    alpha.boulder(&["stream", "init", "a"]).ok();
    // settings.auto_merge: the run completes the stream, then its landing is refused.
    let r = needs_review(alpha.boulder(&["stream", "run", "a", "--", "sh", agent]), "a");
    assert!(r.stdout.contains("a: COMPLETED after 1 iteration(s)"), "{}", r.stdout);
    let tip = rev(&alpha, "boulder/a");
    let short = &tip[..8];
    let base = rev(&alpha, "main");
    let remote_base = alpha.git_out(&["ls-remote", "origin", "refs/heads/main"]);
    share_stream(&alpha, "a");

    let r = needs_review(alpha.boulder(&["stream", "merge", "a", "--no-remote"]), "a");
    assert_shown!("refused_local", r.masked(&[(short, "[TIP]")]));
    needs_review(alpha.boulder(&["stream", "merge", "a", "--no-remote", "--dry-run"]), "a");
    // --force lands what is not complete, never what is not approved.
    needs_review(alpha.boulder(&["stream", "merge", "a", "--no-remote", "--force"]), "a");
    let r = needs_review(alpha.boulder(&["stream", "merge", "--all", "--no-remote"]), "a");
    assert_shown!("refused_all", r.masked(&[(short, "[TIP]")]));
    needs_review(alpha.boulder(&["stream", "merge", "a", "--remote", "origin"]), "a");
    needs_review(alpha.boulder(&["stream", "merge", "--all", "--remote", "origin"]), "a");

    // Nothing landed, nothing recorded as a refusal: the stream waits for review.
    assert_eq!(rev(&alpha, "main"), base);
    assert_eq!(alpha.git_out(&["ls-remote", "origin", "refs/heads/main"]), remote_base);
    let st = alpha.stream_state("a");
    assert!(st.get("refused").is_none_or(|r| r.is_null()), "{st:#}");
    assert_eq!(st["status"], "COMPLETED");
    assert_eq!(status_of(&alpha, "a"), "REVIEW");

    // Another machine approves; the queue sees it on the remote (pulled at landing time).
    let beta = remote.machine("beta");
    fetch_stream(&beta, "a");
    review(&beta, "Bea", &["a", "--approve"]).ok();
    beta.boulder(&["push"]).ok();
    alpha.boulder(&["stream", "merge", "a", "--remote", "origin"]).ok();
    alpha.git(&["fetch", "-q", "origin"]).ok();
    assert!(alpha.git_out(&["log", "--format=%s", "origin/main"]).lines().any(|l| l == "a: US-101"));
    assert_eq!(alpha.stream_state("a")["status"], "MERGED");
    alpha.assert_fsck();
}

#[test]
fn merge_all_lands_what_needs_no_review_and_names_what_waits() {
    let remote = remote_of(&files("{required: 1}", ""));
    let alpha = remote.machine("alpha");
    let (agent, _) = agent(&alpha);
    for s in ["a", "b"] {
        alpha.boulder(&["stream", "init", s]).ok();
        alpha.boulder(&["stream", "run", s, "--", "sh", agent.to_str().unwrap()]).ok();
    }
    let r = needs_review(alpha.boulder(&["stream", "merge", "--all", "--no-remote"]), "a");
    assert!(r.stderr.contains("skipping a: it needs review (`git boulder review a`)"), "{}", r.stderr);
    assert!(r.stderr.contains("merged: b; waiting for review: a"), "{}", r.stderr);
    assert_eq!(alpha.stream_state("b")["status"], "MERGED");
    assert_eq!(status_of(&alpha, "a"), "REVIEW");
}

#[test]
fn a_commit_after_the_approval_puts_the_stream_back_to_review_from_any_machine() {
    let remote = remote_of(&files("{required: 1}", ""));
    let alpha = remote.machine("alpha");
    let (agent, _) = agent(&alpha);
    alpha.boulder(&["stream", "init", "a"]).ok();
    alpha.boulder(&["stream", "run", "a", "--", "sh", agent.to_str().unwrap()]).ok();
    share_stream(&alpha, "a");
    let beta = remote.machine("beta");
    fetch_stream(&beta, "a");
    review(&beta, "Bea", &["a", "--approve"]).ok();
    beta.boulder(&["push"]).ok();
    alpha.boulder(&["pull"]).ok();
    assert_eq!(status_of(&alpha, "a"), "APPROVED");

    // A third machine pushes a commit on the stream's branch: what would land is not approved,
    // though this machine's branch is.
    let gamma = remote.machine("gamma");
    gamma.git(&["fetch", "-q", "origin", "boulder/a:boulder/a"]).ok();
    gamma.git(&["checkout", "-q", "boulder/a"]).ok();
    gamma.write("src/a/late.txt", "late\n");
    gamma.commit_all("a: late change");
    gamma.git(&["push", "-q", "origin", "boulder/a"]).ok();
    needs_review(alpha.boulder(&["stream", "merge", "a", "--remote", "origin"]), "a");

    // Brought here, the branch is back to review; so is it after a commit made here.
    let wt = alpha.worktree("a");
    alpha.git_in(&wt, &["pull", "-q", "--ff-only", "origin", "boulder/a"]).ok();
    assert_eq!(status_of(&alpha, "a"), "REVIEW");
    needs_review(alpha.boulder(&["stream", "merge", "a", "--no-remote"]), "a");
    commit_in(&alpha, &wt, "src/a/later.txt", "later\n", "a: later change");
    assert_eq!(status_of(&alpha, "a"), "REVIEW");
    needs_review(alpha.boulder(&["stream", "merge", "a", "--no-remote"]), "a");

    // Approved again at the new tip, it lands.
    share_stream(&alpha, "a");
    fetch_stream(&beta, "a");
    review(&beta, "Bea", &["a", "--approve"]).ok();
    beta.boulder(&["push"]).ok();
    alpha.boulder(&["stream", "merge", "a", "--remote", "origin"]).ok();
    alpha.git(&["fetch", "-q", "origin"]).ok();
    let log = alpha.git_out(&["log", "--format=%s", "origin/main"]);
    assert!(log.contains("a: late change") && log.contains("a: later change"), "{log}");
}

#[test]
fn status_shows_where_the_review_of_a_complete_stream_stands() {
    // One machine, a reviewer allowed to approve its own machine's work (a solo user).
    let files = files("{required: 1, allow_self: true}", "");
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    let repo = TestRepo::with_files(&refs);
    repo.git(&["config", "boulder.actor", "alpha"]).ok();
    let (agent, log) = agent(&repo);
    let agent = agent.to_str().unwrap();
    for s in ["a", "b"] {
        repo.boulder(&["stream", "init", s]).ok();
    }
    // Not complete yet: no review status.
    assert_eq!(status_of(&repo, "a"), "INITIALIZED");
    for s in ["a", "b"] {
        repo.boulder(&["stream", "run", s, "--", "sh", agent]).ok();
    }
    let tip = rev(&repo, "boulder/a");
    let mask = [(&tip[..8], "[TIP]")];
    // b needs no review (`review: 0`): COMPLETED as ever.
    assert_shown!("status_review", repo.boulder(&["status"]).ok().masked(&mask));
    assert_eq!(status_of(&repo, "b"), "COMPLETED");

    let msg = "Rename the table to users.\nAnd test the migration.";
    review(&repo, "Rita", &["a", "--request-changes", "-m", msg]).ok();
    assert_shown!("status_changes_requested", repo.boulder(&["status"]).ok().masked(&mask));
    needs_review(repo.boulder(&["stream", "merge", "a"]), "a");

    // `stream run` gives the changes to the agent, whose commit puts the stream back to review.
    let r = repo.boulder(&["stream", "run", "a", "--", "sh", agent]).ok();
    assert!(r.stderr.contains("iteration 1: changes requested by Rita <rita@example.com>"), "{}", r.stderr);
    let given = prompts(&log);
    assert_eq!(
        given.last().unwrap(),
        &format!(
            "Changes requested by Rita <rita@example.com> on {}:\n\n{msg}\n\nMake these changes, commit them, and stop.",
            &tip[..8]
        )
    );
    assert_eq!(repo.git_out(&["log", "-1", "--format=%s", "boulder/a"]).trim(), "a: review changes");
    assert_eq!(status_of(&repo, "a"), "REVIEW");
    // Nothing more to do for the agent until a reviewer says so: the next run only completes.
    let r = repo.boulder(&["stream", "run", "a", "--", "sh", agent]).ok();
    assert!(r.stdout.contains("a: COMPLETED after 0 iteration(s)"), "{}", r.stdout);

    review(&repo, "Rita", &["a", "--approve"]).ok();
    let tip = rev(&repo, "boulder/a");
    assert_shown!("status_approved", repo.boulder(&["status"]).ok().masked(&[(&tip[..8], "[TIP]")]));
    let j = repo.boulder(&["status", "--json"]).ok().json();
    let statuses: Vec<&str> = j["streams"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["APPROVED", "COMPLETED"]);
    repo.boulder(&["stream", "merge", "a"]).ok();
    assert_eq!(status_of(&repo, "a"), "MERGED");
}

#[test]
fn a_round_lost_to_another_landing_keeps_the_approval_of_the_tip_before_its_rebase() {
    let remote = remote_of(&files("{required: 1}", ""));
    let alpha = remote.machine("alpha");
    let (agent, _) = agent(&alpha);
    alpha.boulder(&["stream", "init", "a"]).ok();
    alpha.boulder(&["stream", "run", "a", "--", "sh", agent.to_str().unwrap()]).ok();
    share_stream(&alpha, "a");
    let beta = remote.machine("beta");
    fetch_stream(&beta, "a");
    review(&beta, "Bea", &["a", "--approve"]).ok();
    beta.boulder(&["push"]).ok();
    // Beta lands something first (the merge rebases the stream), and more while alpha's merge
    // runs: alpha's first round is lost, and the branch here is left rebased.
    beta.write("NOTES.md", "beta\n");
    beta.commit_all("beta: notes");
    beta.git(&["push", "-q", "origin", "main"]).ok();
    beta.write("NOTES.md", "beta again\n");
    beta.commit_all("beta: more notes");
    let land = format!("git -C {} push -q origin main", beta.dir.display());
    let r = alpha.boulder_env(
        &alpha.dir,
        &["stream", "merge", "a", "--remote", "origin"],
        &[("BOULDER_FAILPOINT_RUN", "merge-verify"), ("BOULDER_FAILPOINT_CMD", &land)],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("after 1 lost round(s)"), "{}", r.stdout);
    alpha.git(&["fetch", "-q", "origin"]).ok();
    let log = alpha.git_out(&["log", "--format=%s", "origin/main"]);
    assert!(log.contains("a: US-101") && log.contains("beta: more notes"), "{log}");
}
