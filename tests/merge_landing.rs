//! What a landing must hold and keep: every commit recorded for the stream (its notes, from any
//! machine this one pulled) is in the new base or the landing is refused; merge commits on a
//! stream branch keep their changes; the old tip is kept under a backup ref; a dry run exits as
//! the real run would. Machines are clones of a bare remote served by `git daemon`.

use crate::common::*;
use crate::merge_remote::{finish, Served, PLAN};

/// The subjects of `rev` in `m`, newest first.
fn subjects(m: &TestRepo, rev: &str) -> Vec<String> {
    m.git_out(&["log", "--format=%s", rev]).lines().map(String::from).collect()
}

#[test]
fn a_stream_whose_commits_are_on_another_machine_is_refused_not_landed_empty() {
    let s = Served::new(PLAN);
    let (alpha, beta) = (s.machine("alpha"), s.machine("beta"));
    for m in [&alpha, &beta] {
        m.boulder(&["hooks", "install"]).ok();
    }
    // alpha does the work of auth and shares the state (notes, stories done), not the branch.
    finish(&alpha, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    alpha.boulder(&["push", "origin"]).ok();
    // beta has auth's branch as `stream init` made it: the base, nothing of its own.
    beta.boulder(&["pull", "origin"]).ok();
    let before = s.git(&beta, &["rev-parse", "main"]);
    let refused = beta.boulder(&["stream", "merge", "auth", "--remote", "origin"]).code(1);
    assert_shown!("landing_without_the_recorded_work", refused);
    // The dry run says the same, with the same exit code.
    let dry = beta.boulder(&["stream", "merge", "auth", "--remote", "origin", "--dry-run"]).code(1);
    let recorded = "hint: recorded here and on origin: no worker takes stream auth again until its branch gets a new commit, or `git boulder stream retry auth`\n";
    assert_eq!(format!("{}{recorded}", dry.stderr), refused.stderr);
    // Recorded, so no worker on any machine takes it and lands it without them.
    assert_eq!(beta.stream_state("auth")["refused"]["refusal"], "missing_work");
    // Nothing landed, nothing recorded MERGED, here or on the remote.
    assert_eq!(s.git(&beta, &["rev-parse", "main"]), before);
    assert_ne!(beta.stream_state("auth")["status"], "MERGED");
    assert_ne!(s.stream_state(&beta, "auth")["status"], "MERGED");
    // The way the hint gives: the machine that has them pushes the branch, this one pulls it.
    alpha.git(&["push", "-q", "origin", "boulder/auth"]).ok();
    beta.git_in(&beta.worktree("auth"), &["pull", "-q", "--rebase", "origin", "boulder/auth"]).ok();
    let landed = beta.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    assert_shown!("a_stream_whose_commits_are_on_another_machine_is_refused_not_landed_empty", landed);
    assert_eq!(s.git(&beta, &["show", "main:src/auth/login.rs"]), "fn login() {}");
    assert_eq!(s.stream_state(&beta, "auth")["status"], "MERGED");
    s.fsck(&beta);
}

#[test]
fn a_local_landing_that_dropped_recorded_commits_is_refused_until_forced() {
    let repo = sample();
    repo.git(&["config", "boulder.actor", "alice"]).ok();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let wt = repo.worktree("docs");
    commit_in(&repo, &wt, "docs/guide.md", "# Guide\n", "docs: the guide");
    repo.boulder(&["prd", "done", "US-005"]).ok();
    // A dry run reads the notes (this machine's index of them is made); one more commit after.
    repo.boulder(&["stream", "merge", "docs", "--dry-run"]).ok();
    commit_in(&repo, &wt, "docs/faq.md", "# FAQ\n", "docs: the FAQ");
    // The branch loses both (a reset, not a rollback): they are still recorded for docs.
    repo.git_in(&wt, &["reset", "-q", "--hard", "main"]).ok();
    let before = rev(&repo, "main");
    assert_shown!("local_landing_without_the_recorded_work", repo.boulder(&["stream", "merge", "docs"]).code(1));
    repo.boulder(&["stream", "merge", "--all"]).code(1);
    repo.boulder(&["stream", "merge", "docs", "--dry-run"]).code(1);
    assert_eq!(rev(&repo, "main"), before);
    assert_ne!(repo.stream_state("docs")["status"], "MERGED");
    // A person may decide to land without them.
    repo.boulder(&["stream", "merge", "docs", "--force"]).ok();
    assert_eq!(repo.stream_state("docs")["status"], "MERGED");
}

#[test]
fn a_stream_rebased_without_the_hooks_lands_by_patch_id() {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let wt = repo.worktree("docs");
    commit_in(&repo, &wt, "docs/guide.md", "# Guide\n", "docs: the guide");
    repo.boulder(&["prd", "done", "US-005"]).ok();
    commit_in(&repo, &repo.dir, "README.md", "# sample, moved on\n", "main moves on");
    // A rebase with hooks off: the note stays on the old commit, the new one has none.
    repo.git_in(&wt, &["-c", "core.hooksPath=/dev/null", "rebase", "-q", "main"]).ok();
    let r = repo.boulder(&["stream", "merge", "docs"]).ok();
    assert_shown!("a_stream_rebased_without_the_hooks_lands_by_patch_id", r);
    assert_eq!(subjects(&repo, "main")[1], "docs: the guide");
}

#[test]
fn a_stream_with_no_recorded_commits_anywhere_lands_and_says_so() {
    let repo = sample();
    repo.git(&["config", "boulder.actor", "alice"]).ok();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    repo.boulder(&["prd", "done", "US-005"]).ok();
    let dry = repo.boulder(&["stream", "merge", "docs", "--dry-run"]).ok();
    assert_shown!("a_stream_with_no_recorded_commits_anywhere_lands_and_says_so", dry);
    assert_shown!("landing_with_no_recorded_commits", repo.boulder(&["stream", "merge", "docs"]).ok());
    assert_eq!(repo.stream_state("docs")["status"], "MERGED");
}

#[test]
fn a_dry_run_exits_as_the_real_run_would_for_ownership() {
    let repo = sample();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let wt = repo.worktree("docs");
    commit_in(&repo, &wt, "src/api/sneaky.rs", "// not docs'\n", "docs: touch api");
    repo.boulder(&["prd", "done", "US-005"]).ok();
    let dry = repo.boulder(&["stream", "merge", "docs", "--dry-run"]).code(1);
    let real = repo.boulder(&["stream", "merge", "docs"]).code(1);
    assert_shown!("a_dry_run_exits_as_the_real_run_would_for_ownership", dry);
    // The same refusal; only the real run records it (a dry run changes nothing).
    let recorded = "hint: recorded here: no worker takes stream docs again until its branch gets a new commit, or `git boulder stream retry docs`\n";
    assert_eq!(format!("{}{recorded}", dry.stderr), real.stderr);
    assert!(!dry.stdout.contains("check: clean"), "{}", dry.stdout);
}

#[test]
fn deleting_files_no_stream_owns_is_refused_whatever_undeclared_paths_says() {
    let repo = sample_with("  undeclared_paths: allow\n");
    repo.git(&["config", "boulder.actor", "alice"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let wt = repo.worktree("docs");
    // An agent that saw a half-made worktree commits the deletion of what it never saw.
    repo.git_in(&wt, &["rm", "-q", "README.md"]).ok();
    repo.git_in(&wt, &["commit", "-q", "-m", "docs: tidy up"]).ok();
    commit_in(&repo, &wt, "NOTES.txt", "undeclared, added: fine under allow\n", "docs: notes");
    repo.boulder(&["prd", "done", "US-005"]).ok();
    let before = rev(&repo, "main");
    assert_shown!("landing_deletes_unowned_files", repo.boulder(&["stream", "merge", "docs"]).code(1));
    repo.boulder(&["stream", "merge", "docs", "--dry-run"]).code(1);
    assert_eq!(rev(&repo, "main"), before);
    assert_eq!(repo.git_out(&["show", "main:README.md"]), "# sample");
}

#[test]
fn a_queue_dry_run_refuses_when_the_remote_branch_has_commits_this_machine_lacks() {
    let s = Served::new(PLAN);
    let (alpha, beta) = (s.machine("alpha"), s.machine("beta"));
    finish(&alpha, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    alpha.git(&["push", "-q", "origin", "boulder/auth"]).ok();
    alpha.boulder(&["push", "origin"]).ok();
    beta.boulder(&["pull", "origin"]).ok();
    let dry = beta.boulder(&["stream", "merge", "auth", "--remote", "origin", "--dry-run"]).code(1);
    let real = beta.boulder(&["stream", "merge", "auth", "--remote", "origin"]).code(1);
    assert_shown!("a_queue_dry_run_refuses_when_the_remote_branch_has_commits_this_machine_lacks", real);
    assert_eq!(dry.stderr, real.stderr);
}

#[test]
fn every_landing_that_rewrites_the_stream_keeps_its_old_tip_under_a_backup_ref() {
    // A local merge.
    let repo = sample();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let wt = repo.worktree("docs");
    commit_in(&repo, &wt, "docs/guide.md", "# Guide\n", "docs: the guide");
    repo.boulder(&["prd", "done", "US-005"]).ok();
    commit_in(&repo, &repo.dir, "README.md", "# sample, moved on\n", "main moves on");
    let old = rev(&repo, "boulder/docs");
    let r = repo.boulder(&["stream", "merge", "docs"]).ok();
    assert_shown!("every_landing_that_rewrites_the_stream_keeps_its_old_tip_under_a_backup_ref", r);
    assert_eq!(rev(&repo, "refs/boulder/backup/docs/1"), old);
    assert_ne!(rev(&repo, "boulder/docs"), old, "the branch moved to the rewritten tip");
    // Through the merge queue.
    let s = Served::new(PLAN);
    let (a, b) = s.alpha_and_beta(("src/auth/login.rs", "fn login() {}\n"), ("src/api/list.rs", "fn list() {}\n"));
    a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    let old = rev(&b, "boulder/api");
    b.boulder(&["stream", "merge", "api", "--remote", "origin"]).ok();
    assert_eq!(rev(&b, "refs/boulder/backup/api/1"), old);
    // Backups stay on the machine: the remote has none.
    assert_eq!(s.git(&b, &["for-each-ref", "refs/boulder/backup/"]), "");
}

#[test]
fn a_change_made_inside_a_merge_commit_on_the_stream_branch_lands() {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let wt = repo.worktree("docs");
    commit_in(&repo, &wt, "docs/guide.md", "# Guide\nrun `notes`\n", "docs: the guide");
    commit_in(&repo, &repo.dir, "README.md", "# sample\nrenamed the tool to `nts`\n", "main: rename the tool");
    // The stream merges main in and fixes its guide inside that merge commit.
    repo.git_in(&wt, &["merge", "-q", "--no-commit", "--no-ff", "main"]).ok();
    std::fs::write(wt.join("docs/guide.md"), "# Guide\nrun `nts`\n").unwrap();
    repo.git_in(&wt, &["add", "docs/guide.md"]).ok();
    repo.git_in(&wt, &["commit", "-q", "-m", "Merge main; the guide follows the rename"]).ok();
    let merge_commit = rev(&repo, "boulder/docs");
    repo.boulder(&["prd", "done", "US-005"]).ok();
    // main moves on again, so every commit is replayed.
    commit_in(&repo, &repo.dir, "src/auth/mod.rs", "// auth, later\n", "main: later");
    let dry = repo.boulder(&["stream", "merge", "docs", "--dry-run"]).ok();
    let line = dry.stdout.lines().find(|l| l.contains("Merge main; the guide")).unwrap_or_default().to_string();
    assert!(line.contains("(a merge commit: what it changed beyond its parents, as one commit)"), "{}", dry.stdout);
    repo.boulder(&["stream", "merge", "docs"]).ok();
    assert_eq!(repo.git_out(&["show", "main:docs/guide.md"]), "# Guide\nrun `nts`");
    assert_eq!(repo.git_out(&["rev-list", "--merges", "--count", "main"]), "0");
    assert_eq!(rev(&repo, "refs/boulder/backup/docs/1"), merge_commit);
    repo.assert_fsck();
}

#[test]
fn a_merge_commit_that_only_merged_is_dropped_and_the_dry_run_says_so() {
    let repo = sample();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let wt = repo.worktree("docs");
    commit_in(&repo, &wt, "docs/guide.md", "# Guide\n", "docs: the guide");
    commit_in(&repo, &repo.dir, "README.md", "# sample, moved on\n", "main moves on");
    repo.git_in(&wt, &["merge", "-q", "--no-ff", "-m", "Merge main", "main"]).ok();
    repo.boulder(&["prd", "done", "US-005"]).ok();
    commit_in(&repo, &repo.dir, "src/auth/mod.rs", "// auth, later\n", "main: later");
    let dry = repo.boulder(&["stream", "merge", "docs", "--dry-run"]).ok();
    let line = dry.stdout.lines().find(|l| l.ends_with("Merge main")).unwrap_or_default().to_string();
    assert!(line.contains("dropped (a merge commit that changed nothing beyond its parents"), "{}", dry.stdout);
    repo.boulder(&["stream", "merge", "docs"]).ok();
    assert_eq!(repo.git_out(&["show", "main:docs/guide.md"]), "# Guide");
}

#[test]
fn doctor_names_stranded_work_and_commits_after_a_landing_on_every_machine() {
    let s = Served::new(PLAN);
    let (alpha, beta) = (s.machine("alpha"), s.machine("beta"));
    for m in [&alpha, &beta] {
        m.boulder(&["hooks", "install"]).ok();
        m.git(&["config", "boulder.actor", if m.dir == alpha.dir { "alpha" } else { "beta" }]).ok();
    }
    finish(&alpha, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    alpha.boulder(&["push", "origin"]).ok();
    beta.boulder(&["pull", "origin"]).ok();
    // beta has the record, not the commit: stranded on alpha.
    let doc = beta.boulder(&["doctor"]).code(1);
    assert_shown!("doctor_stranded_work", doc);
    assert!(
        doc.stdout.contains("stream auth: 1 commit(s) recorded for it are neither on boulder/auth nor in main"),
        "{}",
        doc.stdout
    );
    assert!(doc.stdout.contains("(not in this repository)  recorded by alpha on"), "{}", doc.stdout);
    let json = beta.boulder(&["doctor", "--json"]).code(1).json();
    assert!(json.to_string().contains("\"area\":\"work\""), "{json}");
    // Landed anyway (forced, as an older version landed it empty): alpha's branch now holds
    // commits after the landing, and alpha's doctor says so.
    beta.boulder(&["stream", "merge", "auth", "--remote", "origin", "--force"]).ok();
    alpha.boulder(&["pull", "origin"]).ok();
    assert_eq!(alpha.stream_state("auth")["status"], "MERGED");
    let doc = alpha.boulder(&["doctor"]).code(1);
    assert_shown!("doctor_commits_after_landing", doc);
    assert!(
        doc.stdout.contains("stream auth is recorded MERGED, but boulder/auth has 1 commit(s) made after its landing"),
        "{}",
        doc.stdout
    );
    assert!(doc.stdout.contains("auth: work"), "{}", doc.stdout);
}

#[test]
fn doctor_is_quiet_about_work_that_landed() {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let wt = repo.worktree("docs");
    commit_in(&repo, &wt, "docs/guide.md", "# Guide\n", "docs: the guide");
    repo.boulder(&["prd", "done", "US-005"]).ok();
    commit_in(&repo, &repo.dir, "README.md", "# sample, moved on\n", "main moves on");
    repo.boulder(&["stream", "merge", "docs"]).ok();
    let doc = repo.boulder(&["doctor"]);
    assert!(!doc.stdout.contains("recorded for it") && !doc.stdout.contains("after its landing"), "{}", doc.stdout);
    // A commit after the landing is named.
    commit_in(&repo, &wt, "docs/faq.md", "# FAQ\n", "docs: the FAQ, late");
    let doc = repo.boulder(&["doctor"]).code(1);
    assert_shown!("doctor_is_quiet_about_work_that_landed", doc);
}

#[test]
fn a_commit_rolled_back_on_one_machine_is_not_required_on_another() {
    let s = Served::new(PLAN);
    let (alpha, beta) = (s.machine("alpha"), s.machine("beta"));
    finish(&alpha, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    commit_in(&alpha, &alpha.worktree("auth"), "src/auth/oops.rs", "// not meant\n", "auth: oops");
    let oops = rev(&alpha, "boulder/auth");
    alpha.boulder(&["stream", "rollback", "auth", "--to", "boulder/auth~1"]).ok();
    // Set aside in its note, a line every machine the notes reach reads.
    let note = alpha.git_out(&["notes", "--ref=boulder", "show", &oops]);
    assert!(note.lines().any(|l| l.contains("\"set_aside\":\"refs/boulder/backup/auth/1\"")), "{note}");
    alpha.git(&["push", "-q", "origin", "boulder/auth"]).ok();
    alpha.boulder(&["push", "origin"]).ok();
    beta.boulder(&["pull", "origin"]).ok();
    beta.git_in(&beta.worktree("auth"), &["pull", "-q", "--rebase", "origin", "boulder/auth"]).ok();
    beta.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    assert_eq!(s.git(&beta, &["show", "main:src/auth/login.rs"]), "fn login() {}");
    assert!(s.git(&beta, &["ls-tree", "-r", "--name-only", "main"]).lines().all(|l| l != "src/auth/oops.rs"));
}
