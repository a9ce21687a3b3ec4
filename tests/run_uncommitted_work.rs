//! An agent killed after it marked its story done (ticked in the worktree's PRD, `prd done`) but
//! before it committed: the stream used to be recorded COMPLETED with the work uncommitted, every
//! rerun found nothing left to do, and the merge refused the uncommitted changes — a stream no
//! rerun got past. The loop now treats the worktree's uncommitted changes as work to continue:
//! the agent is run on them as they are, and nothing is ever discarded.

use crate::common::*;

/// Finishes the story it is given with one commit.
const FINISHER: &str = "#!/bin/sh\nset -e\nmkdir -p src/a\necho \"$BOULDER_STORY\" > \"src/a/$BOULDER_STORY.txt\"\n\
sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
git add -A\ngit commit -q -m \"a: $BOULDER_STORY\"\n";

/// Like [`FINISHER`] for US-101; on US-102 it writes its work, marks the story done (ticked and
/// recorded) and is killed before it commits.
const KILLED: &str = "#!/bin/sh\nset -e\nif [ \"$BOULDER_STORY\" = US-102 ]; then\n\
mkdir -p src/a\necho 'written by the killed agent' > src/a/notes.txt\n\
sed -i \"s/### \\[ \\] US-102:/### [x] US-102:/\" \"$BOULDER_PRD\"\ngit boulder prd done US-102\nkill -9 $$\nfi\n\
mkdir -p src/a\necho \"$BOULDER_STORY\" > \"src/a/$BOULDER_STORY.txt\"\n\
sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
git add -A\ngit commit -q -m \"a: $BOULDER_STORY\"\n";

fn repo() -> TestRepo {
    TestRepo::with_files(&[
        (".agents/tasks/prd.md", "# PRD\n\n### [ ] US-101: one\nx\n\n### [ ] US-102: two\nx\n"),
        (
            ".boulder/streams.yaml",
            "version: 1\nstreams:\n  a:\n    stories: [US-101, US-102]\n    paths: [src/a/**, .agents/tasks/prd.md]\n\
             settings:\n  base_branch: main\n  boulder:\n    cooldown: 10ms\n    max_failures: 2\n",
        ),
    ])
}

#[test]
fn a_rerun_gets_past_an_agent_killed_after_prd_done_without_losing_its_work() {
    let repo = repo();
    repo.boulder(&["stream", "init", "a"]).ok();
    let killed = repo.tmp.path().join("killed.sh");
    std::fs::write(&killed, KILLED).unwrap();
    let r = repo.boulder(&["stream", "run", "a", "--", "sh", killed.to_str().unwrap()]);
    // Not COMPLETED: its stories are done, its work is not committed; the run says so and how to fix it.
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("agent_killed_before_its_commit", r);
    let st = repo.stream_state("a");
    assert_eq!(st["status"], "FAILED", "{st}");
    assert!(
        st["reason"].as_str().unwrap().contains("its stories are done but its worktree has uncommitted changes"),
        "{st}"
    );
    // The work is all still there, uncommitted.
    let wt = repo.worktree("a");
    assert_eq!(std::fs::read_to_string(wt.join("src/a/notes.txt")).unwrap(), "written by the killed agent\n");
    assert!(repo.porcelain_dirty(&wt));
    // A rerun runs the agent on the worktree as it was left, which commits it; then it lands.
    let finisher = repo.tmp.path().join("finisher.sh");
    std::fs::write(&finisher, FINISHER).unwrap();
    let r = repo.boulder(&["stream", "run", "a", "--", "sh", finisher.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("rerun_commits_the_work", r);
    assert_eq!(repo.stream_state("a")["status"], "COMPLETED");
    assert!(!repo.porcelain_dirty(&wt));
    repo.boulder(&["stream", "merge", "a"]).ok();
    assert_eq!(repo.git_out(&["show", "main:src/a/notes.txt"]).trim(), "written by the killed agent");
    assert_eq!(repo.git_out(&["show", "main:src/a/US-102.txt"]).trim(), "US-102");
    assert_eq!(repo.git_out(&["log", "--format=%s", "main"]).lines().filter(|l| *l == "a: US-101").count(), 1);
    repo.assert_fsck();
}
