//! `stream rollback` as a user drives it: `--to` an annotated tag, and `--restore` twice after
//! two rollbacks. Checked with plain git; nothing may be lost.

use crate::common::*;
use crate::merge_remote::{PLAN, PRD};

fn setup() -> TestRepo {
    let repo = TestRepo::with_files(&[
        (".agents/tasks/prd.md", PRD),
        (".boulder/streams.yaml", PLAN),
        ("src/auth/mod.rs", "// auth\n"),
        ("README.md", "# sample\n"),
    ]);
    repo.boulder(&["stream", "init"]).ok();
    repo
}

#[test]
fn rollback_to_an_annotated_tag_goes_to_its_commit() {
    let repo = setup();
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/a.rs", "a\n", "one");
    commit_in(&repo, &w, "src/auth/b.rs", "b\n", "two");
    let tip = rev(&repo, "boulder/auth");
    repo.git(&["tag", "-a", "v1", "-m", "v1", "boulder/auth~1"]).ok();

    let r = repo.boulder(&["stream", "rollback", "auth", "--to", "v1"]).ok();
    assert_shown!("rollback_to_an_annotated_tag", r);
    assert_eq!(rev(&repo, "boulder/auth"), rev(&repo, "v1^{commit}"));
    assert_eq!(rev(&repo, "refs/boulder/backup/auth/1"), tip);
    assert!(!w.join("src/auth/b.rs").exists());
    // A tag of a tree names no commit: a usage error, nothing moved.
    repo.git(&["tag", "tree", "HEAD^{tree}"]).ok();
    let r = repo.boulder(&["stream", "rollback", "auth", "--to", "tree"]).code(2);
    assert_shown!("rollback_to_a_tree_tag", r);
    assert_eq!(rev(&repo, "boulder/auth"), rev(&repo, "v1^{commit}"));
}

#[test]
fn two_rollbacks_then_two_restores_bring_the_branch_back_where_it_began() {
    let repo = setup();
    let w = repo.worktree("auth");
    let fork = rev(&repo, "boulder/auth");
    commit_in(&repo, &w, "src/auth/a.rs", "a\n", "one");
    commit_in(&repo, &w, "src/auth/b.rs", "b\n", "two");
    let tip = rev(&repo, "boulder/auth");
    let one = rev(&repo, "boulder/auth~1");

    repo.boulder(&["stream", "rollback", "auth", "--to", "boulder/auth~1"]).ok();
    repo.boulder(&["stream", "rollback", "auth"]).ok();
    assert_eq!(rev(&repo, "boulder/auth"), fork);

    repo.boulder(&["stream", "rollback", "auth", "--restore"]).ok();
    assert_eq!(rev(&repo, "boulder/auth"), one);
    let r = repo.boulder(&["stream", "rollback", "auth", "--restore"]).ok();
    assert_shown!("second_restore", r);
    assert_eq!(rev(&repo, "boulder/auth"), tip);
    assert_eq!(std::fs::read_to_string(w.join("src/auth/b.rs")).unwrap(), "b\n");
    assert_eq!(repo.git_in(&w, &["status", "--porcelain"]).ok().stdout, "");
    // Every backup holds: nothing was deleted, and no backup was needed for tips in history.
    assert_eq!(repo.refs("refs/boulder/backup/").len(), 2);
    // A third restore has nothing the branch lacks: nothing changes.
    let r = repo.boulder(&["stream", "rollback", "auth", "--restore"]).ok();
    assert_shown!("restore_with_nothing_left", r);
    assert_eq!(rev(&repo, "boulder/auth"), tip);
    repo.assert_fsck();
}
