//! Cleanup never removes work in progress: `cleanup --merged` leaves streams that have not
//! started, `cleanup --stale` asks git's own worktree list (a moved worktree is not stale), and
//! `doctor` points at `git worktree repair` after a move and at what remains of streams the plan
//! no longer has.

use crate::common::*;

fn stream_status(repo: &TestRepo, name: &str) -> String {
    repo.stream_state(name)["status"].as_str().unwrap().to_string()
}

fn worktree_list(repo: &TestRepo) -> String {
    repo.git_out(&["worktree", "list", "--porcelain"])
}

fn branch_exists(repo: &TestRepo, branch: &str) -> bool {
    repo.git(&["rev-parse", "--verify", "-q", &format!("refs/heads/{branch}")]).code == 0
}

#[test]
fn cleanup_merged_leaves_streams_that_have_not_started() {
    let repo = sample();
    repo.boulder(&["stream", "init"]).ok();
    // The base moves on: the untouched stream branches are now behind it, still contained in it.
    repo.write("README.md", "# sample, edited\n");
    repo.commit_all("base moves");
    let r = repo.boulder(&["stream", "cleanup", "--merged", "--delete-branch"]).ok();
    for name in ["auth", "api", "docs"] {
        assert!(!r.stdout.contains(name), "{name} was cleaned up:\n{}", r.stdout);
        assert!(repo.dir.join(".boulder/worktrees").join(name).join(".git").exists(), "{name} worktree removed");
        assert!(branch_exists(&repo, &format!("boulder/{name}")), "branch boulder/{name} deleted");
        assert_eq!(stream_status(&repo, name), "INITIALIZED");
    }

    // docs does work and is merged by plain git: now it is merged, the others still are not.
    let docs = repo.dir.join(".boulder/worktrees/docs");
    std::fs::write(docs.join("docs/guide.md"), "# guide\n").unwrap();
    repo.git_in(&docs, &["add", "-A"]).ok();
    repo.git_in(&docs, &["commit", "-q", "-m", "docs: guide"]).ok();
    repo.git(&["merge", "-q", "--no-edit", "boulder/docs"]).ok();
    let r = repo.boulder(&["stream", "cleanup", "--merged", "--delete-branch"]).ok();
    assert_shown!("cleanup_merged_leaves_streams_that_have_not_started", r);
    assert!(!r.stdout.contains("auth") && !r.stdout.contains("api"), "{}", r.stdout);
    assert!(!docs.exists());
    assert!(!branch_exists(&repo, "boulder/docs"));
    assert!(branch_exists(&repo, "boulder/auth") && branch_exists(&repo, "boulder/api"));
    assert!(repo.dir.join(".boulder/worktrees/auth/.git").exists());
    // Named, an unstarted stream's branch may go without --force: it has nothing to lose.
    let r = repo.boulder(&["stream", "cleanup", "api", "--delete-branch"]).ok();
    assert_shown!("cleanup_merged_leaves_streams_that_have_not_started_2", r);
    assert!(!branch_exists(&repo, "boulder/api"));
    repo.assert_fsck();
}

#[test]
fn cleanup_stale_keeps_worktrees_moved_by_git_or_moved_and_repaired() {
    let repo = sample();
    repo.boulder(&["stream", "init"]).ok();
    let elsewhere = repo.tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let elsewhere = std::fs::canonicalize(&elsewhere).unwrap();

    // auth: moved with `git worktree move`.
    let auth_new = elsewhere.join("auth");
    repo.git(&["worktree", "move", ".boulder/worktrees/auth", auth_new.to_str().unwrap()]).ok();
    // api: moved by hand, then repaired.
    let api_new = elsewhere.join("api");
    std::fs::rename(repo.dir.join(".boulder/worktrees/api"), &api_new).unwrap();
    repo.git(&["worktree", "repair", api_new.to_str().unwrap()]).ok();
    // docs: really gone.
    std::fs::remove_dir_all(repo.dir.join(".boulder/worktrees/docs")).unwrap();

    // doctor: the moved ones are where git says, and are to be moved back; docs is stale.
    let r = repo.boulder(&["doctor"]).code(1);
    for (name, new) in [("auth", &auth_new), ("api", &api_new)] {
        let fix =
            format!("git worktree move {} {}", new.display(), repo.dir.join(".boulder/worktrees").join(name).display());
        assert!(r.stdout.contains(&fix), "no `{fix}` in:\n{}", r.stdout);
    }
    assert_shown!("cleanup_stale_keeps_worktrees_moved_by_git_or_moved_and_repaired", r);

    // The dashboard agrees: the moved ones are where git has them, only docs is stale.
    let st = repo.boulder(&["status", "--json"]).ok().json();
    let row = |n: &str| st["streams"].as_array().unwrap().iter().find(|r| r["name"] == n).unwrap().clone();
    assert_eq!(row("auth")["status"], "INITIALIZED", "{st}");
    assert_eq!(row("auth")["worktree"], auth_new.display().to_string(), "{st}");
    assert_eq!(row("api")["status"], "INITIALIZED", "{st}");
    assert_eq!(row("docs")["status"], "STALE", "{st}");

    let r = repo.boulder(&["stream", "cleanup", "--stale"]).ok();
    assert_shown!("cleanup_stale_keeps_worktrees_moved_by_git_or_moved_and_repaired_3", r);
    assert!(!r.stdout.contains("auth") && !r.stdout.contains("api"), "{}", r.stdout);
    assert_eq!(stream_status(&repo, "auth"), "INITIALIZED");
    assert_eq!(stream_status(&repo, "api"), "INITIALIZED");
    assert_eq!(stream_status(&repo, "docs"), "CLEANED");
    let list = worktree_list(&repo);
    assert!(list.contains(&format!("worktree {}\n", auth_new.display())), "{list}");
    assert!(list.contains(&format!("worktree {}\n", api_new.display())), "{list}");
    assert!(!list.contains("prunable"), "{list}");
    assert!(auth_new.join("src/auth/mod.rs").exists() && api_new.join("src/api/mod.rs").exists());

    // Work in the moved worktree is protected by name too: cleanup finds it where git has it.
    std::fs::write(api_new.join("wip.txt"), "uncommitted\n").unwrap();
    let r = repo.boulder(&["stream", "cleanup", "api"]).code(1);
    assert_shown!("cleanup_stale_keeps_worktrees_moved_by_git_or_moved_and_repaired_2", r);
    assert!(api_new.join("wip.txt").exists());
}

#[test]
fn doctor_suggests_worktree_repair_after_the_repository_moved() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["hooks", "install"]).ok();
    let moved = repo.tmp.path().join("moved");
    std::fs::rename(&repo.dir, &moved).unwrap();
    let moved = std::fs::canonicalize(&moved).unwrap();
    let wt = moved.join(".boulder/worktrees/auth");
    let r = repo.boulder_in(&moved, &["doctor"]).code(1);
    let fix = format!("git worktree repair {}", wt.display());
    assert!(r.stdout.contains(&fix), "no `{fix}` in:\n{}", r.stdout);
    // cleanup --stale does not touch it: the folder is there.
    repo.boulder_in(&moved, &["stream", "cleanup", "--stale"]).ok();
    assert!(wt.join("src/auth/mod.rs").exists());
    // The suggested command fixes it.
    repo.git_in(&moved, &["worktree", "repair", wt.to_str().unwrap()]).ok();
    let r = repo.boulder_in(&moved, &["doctor"]);
    assert!(!r.stdout.contains("worktree repair") && !r.stdout.contains("stream auth"), "{}", r.stdout);
    assert!(repo.git_in(&wt, &["status", "--porcelain"]).ok().stdout.is_empty());
}

#[test]
fn doctor_suggests_repair_for_a_worktree_moved_by_hand() {
    let repo = sample();
    repo.boulder(&["stream", "init", "docs"]).ok();
    let away = repo.tmp.path().join("away");
    std::fs::rename(repo.dir.join(".boulder/worktrees/docs"), &away).unwrap();
    let r = repo.boulder(&["doctor"]).code(1);
    assert_shown!("doctor_suggests_repair_for_a_worktree_moved_by_hand", r);
}

#[test]
fn doctor_reports_what_remains_of_a_stream_renamed_in_the_plan() {
    let repo = sample();
    repo.boulder(&["stream", "init"]).ok();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["doctor"]).ok();
    // docs is renamed guide in the plan (on disk, as an edit takes effect at once).
    let plan = SAMPLE_PLAN.replace("  docs:\n", "  guide:\n");
    repo.write(".boulder/streams.yaml", &plan);
    let r = repo.boulder(&["doctor", "--json"]).code(1);
    let problems = r.json()["problems"].as_array().unwrap().clone();
    let p = problems
        .iter()
        .find(|p| p["message"].as_str().unwrap().contains("stream docs is not in the plan"))
        .unwrap_or_else(|| panic!("no leftover report in {problems:?}"));
    assert_eq!(p["area"], "plan");
    let wt = repo.dir.join(".boulder/worktrees/docs");
    let fix = p["fix"].as_str().unwrap();
    for part in [
        format!("git worktree remove {}", wt.display()),
        "git branch -d boulder/docs".to_string(),
        "git update-ref -d refs/boulder/streams/docs".to_string(),
    ] {
        assert!(fix.contains(&part), "no `{part}` in {fix}");
    }
    // Doing what it says leaves nothing to report about docs.
    repo.git(&["worktree", "remove", wt.to_str().unwrap()]).ok();
    repo.git(&["branch", "-d", "boulder/docs"]).ok();
    repo.git(&["update-ref", "-d", "refs/boulder/streams/docs"]).ok();
    let r = repo.boulder(&["doctor"]);
    assert!(!r.stdout.contains("stream docs"), "{}", r.stdout);

    // A stream removed from the plan with only its branch left (it was never initialized here).
    repo.git(&["branch", "boulder/old"]).ok();
    let r = repo.boulder(&["doctor"]).code(1);
    assert_shown!("doctor_reports_what_remains_of_a_stream_renamed_in_the_plan", r);
}
