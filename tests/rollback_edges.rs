//! `stream rollback` as a user drives it: `--to` an annotated tag, and `--restore` twice after
//! two rollbacks. Checked with plain git; nothing may be lost.

use crate::common::*;
use crate::merge_queue::{PLAN, PRD};

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
    assert!(r.stdout.contains("rolled back branch boulder/auth"), "{}", r.stdout);
    assert_eq!(rev(&repo, "boulder/auth"), rev(&repo, "v1^{commit}"));
    assert_eq!(rev(&repo, "refs/boulder/backup/auth/1"), tip);
    assert!(!w.join("src/auth/b.rs").exists());
    // A tag of a tree names no commit: a usage error, nothing moved.
    repo.git(&["tag", "tree", "HEAD^{tree}"]).ok();
    let r = repo.boulder(&["stream", "rollback", "auth", "--to", "tree"]).code(2);
    assert!(r.stderr.contains("does not name a commit"), "{}", r.stderr);
    assert_eq!(rev(&repo, "boulder/auth"), rev(&repo, "v1^{commit}"));
}
