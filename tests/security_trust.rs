//! Trust: a cloned or pulled plan runs none of its commands (setup, verify, agents) until the user
//! trusts that exact command content on this machine; `--trust` / `BOULDER_TRUST=1` for one run.

use std::path::Path;

use crate::common::*;

/// A clone of `origin` made with plain git, sharing its fixed environment.
fn clone_of(origin: &TestRepo) -> TestRepo {
    TestRepo::clone_from(&origin.dir, "clone")
}

fn marker(repo: &TestRepo) -> std::path::PathBuf {
    repo.tmp.path().join("setup-ran")
}

fn oplog_len(repo: &TestRepo, r: &str) -> usize {
    let out = repo.git(&["rev-list", "--count", r]);
    if out.code != 0 {
        return 0;
    }
    out.stdout.trim().parse().unwrap()
}

#[test]
fn a_clone_runs_no_setup_until_trusted() {
    let origin = sample();
    let clone = clone_of(&origin);
    let m = marker(&clone);
    // The plan arrives by pull like any other commit.
    let plan = origin
        .read(".boulder/streams.yaml")
        .replace("settings:\n", &format!("settings:\n  setup: 'touch {}'\n", m.display()));
    origin.write(".boulder/streams.yaml", &plan);
    origin.commit_all("setup");
    clone.git(&["pull", "-q", "origin", "main"]).ok();

    let r = clone.boulder(&["stream", "init", "auth"]).code(1);
    assert_shown!("a_clone_runs_no_setup_until_trusted", r);
    assert!(r.stderr.contains(&format!("settings.setup: touch {}", m.display())), "lists the command: {}", r.stderr);
    assert!(!m.exists(), "setup ran before trust");
    // Nothing changed: no branch, no worktree, no state.
    assert!(clone.refs("refs/heads/boulder/").is_empty());
    assert!(clone.refs("refs/boulder/").is_empty());
    assert!(!clone.dir.join(".boulder/worktrees/auth").exists());
    assert!(!clone.git(&["worktree", "list"]).stdout.contains("auth"));

    let show = clone.boulder(&["trust", "--show"]).ok();
    assert!(show.stdout.contains("NOT trusted") && show.stdout.contains("touch"), "{}", show.stdout);
    clone.boulder(&["trust"]).ok();
    assert!(clone.boulder(&["trust", "--show"]).ok().stdout.contains("(trusted on this machine)"));
    clone.boulder(&["stream", "init", "auth"]).ok();
    assert!(m.exists(), "setup did not run after trust");
    // Trust lives beside the locks, in no ref.
    assert!(clone.dir.join(".git/boulder/trust").is_file());
    assert!(clone.git_out(&["for-each-ref"]).lines().all(|l| !l.contains("trust")));
}

#[test]
fn changed_commands_need_trust_again_other_edits_keep_it() {
    let repo = sample_with("  setup: 'echo one >> setup.log'\n");
    std::fs::write(repo.dir.join(".git/info/exclude"), "setup.log\n").unwrap();
    repo.boulder(&["trust"]).ok();
    // Stories, paths and other settings change: still trusted.
    let plan = repo
        .read(".boulder/streams.yaml")
        .replace("paths: [docs/**]", "paths: [docs/**, guide/**]")
        .replace("  base_branch: main\n", "  base_branch: main\n  path_overlap: error\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.boulder(&["stream", "init", "docs"]).ok();
    assert!(repo.dir.join(".boulder/worktrees/docs/setup.log").exists());
    // The command changes (an edit; a pull or checkout is the same): untrusted again.
    repo.write(".boulder/streams.yaml", &plan.replace("echo one", "echo two"));
    let r = repo.boulder(&["stream", "init", "auth"]).code(1);
    assert_shown!("changed_commands_need_trust_again_other_edits_keep_it", r);
    assert!(!repo.dir.join(".boulder/worktrees/auth").exists());
    // Revoke forgets every trust: the first plan is untrusted too.
    repo.boulder(&["trust"]).ok();
    repo.boulder(&["trust", "--revoke"]).ok();
    repo.boulder(&["stream", "init", "auth"]).code(1);
    assert!(!repo.dir.join(".git/boulder/trust").exists());
}

#[test]
fn trust_flag_and_env_trust_one_run_only() {
    let repo = sample_with("  setup: 'echo ran >> setup.log'\n");
    std::fs::write(repo.dir.join(".git/info/exclude"), "setup.log\n").unwrap();
    repo.boulder(&["--trust", "stream", "init", "auth"]).ok();
    assert!(repo.dir.join(".boulder/worktrees/auth/setup.log").exists());
    repo.boulder_env(&repo.dir, &["stream", "init", "api"], &[("BOULDER_TRUST", "1")]).ok();
    assert!(repo.dir.join(".boulder/worktrees/api/setup.log").exists());
    // Neither recorded anything.
    assert!(repo.boulder(&["trust", "--show"]).ok().stdout.contains("NOT trusted"));
    repo.boulder(&["stream", "init", "docs"]).code(1);
}

#[test]
fn a_plan_without_commands_needs_no_trust() {
    let repo = sample();
    assert!(repo.boulder(&["trust", "--show"]).ok().stdout.contains("runs no commands"));
    repo.boulder(&["stream", "init"]).ok();
    assert!(repo.dir.join(".boulder/worktrees/auth").is_dir());
    assert!(!repo.dir.join(".git/boulder/trust").exists());
}

/// A stream with its story done and a commit, ready to merge.
fn ready_to_merge(repo: &TestRepo, dir: &Path) {
    let wt = dir.join(".boulder/worktrees/docs");
    std::fs::write(wt.join("docs/guide.md"), "guide\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]).ok();
    repo.git_in(&wt, &["commit", "-q", "-m", "guide"]).ok();
    repo.boulder_in(dir, &["prd", "done", "US-005"]).ok();
}

#[test]
fn a_pull_that_changes_verify_makes_merge_refuse_again() {
    let origin = sample_with("  verify: 'true'\n");
    let clone = clone_of(&origin);
    clone.boulder(&["trust"]).ok();
    clone.boulder(&["stream", "init", "docs"]).ok();
    ready_to_merge(&clone, &clone.dir);

    let m = marker(&clone);
    let plan =
        origin.read(".boulder/streams.yaml").replace("verify: 'true'", &format!("verify: 'touch {}'", m.display()));
    origin.write(".boulder/streams.yaml", &plan);
    origin.commit_all("verify changes");
    clone.git(&["pull", "-q", "--no-rebase", "origin", "main"]).ok();

    let main_before = clone.git_out(&["rev-parse", "main"]);
    let stream_before = clone.git_out(&["rev-parse", "boulder/docs"]);
    let state_before = oplog_len(&clone, "refs/boulder/streams/docs");
    let r = clone.boulder(&["stream", "merge", "docs"]).code(1);
    assert_shown!("a_pull_that_changes_verify_makes_merge_refuse_again", r);
    assert!(!m.exists());
    assert_eq!(clone.git_out(&["rev-parse", "main"]), main_before);
    assert_eq!(clone.git_out(&["rev-parse", "boulder/docs"]), stream_before, "no replay was written");
    assert_eq!(oplog_len(&clone, "refs/boulder/streams/docs"), state_before);
    // A dry run runs nothing, so it needs no trust.
    clone.boulder(&["stream", "merge", "docs", "--dry-run"]).ok();

    clone.boulder(&["trust"]).ok();
    clone.boulder(&["stream", "merge", "docs"]).ok();
    assert!(m.exists(), "verify ran once trusted");
    assert_ne!(clone.git_out(&["rev-parse", "main"]), main_before);
}

#[test]
fn run_refuses_an_untrusted_agent_before_anything_is_recorded() {
    let m_plan = "  agents:\n    scripted: 'touch agent-ran'\n";
    let repo = sample_with(m_plan);
    let plan = repo
        .read(".boulder/streams.yaml")
        .replace("    stories: [US-005]\n", "    stories: [US-005]\n    agent: scripted\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("docs agent");
    repo.boulder(&["stream", "init", "docs"]).ok();
    let before = oplog_len(&repo, "refs/boulder/streams/docs");
    let r = repo.boulder(&["stream", "run", "docs", "--max-iterations", "1"]).code(1);
    assert_shown!("run_refuses_an_untrusted_agent_before_anything_is_recorded", r);
    assert_eq!(oplog_len(&repo, "refs/boulder/streams/docs"), before, "nothing recorded (no RUNNING)");
    assert!(!repo.dir.join(".boulder/worktrees/docs/agent-ran").exists());
    // The user's own command on the command line is theirs to run: no trust needed.
    repo.boulder(&["stream", "run", "docs", "--max-iterations", "1", "--", "true"]).ok();
    // Trusted, the plan's agent runs.
    repo.boulder(&["trust"]).ok();
    repo.boulder(&["stream", "run", "docs", "--max-iterations", "1"]).ok();
    assert!(repo.dir.join(".boulder/worktrees/docs/agent-ran").exists());
}
