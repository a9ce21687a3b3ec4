//! Conflicts handed back to the agent: `git boulder stream resolve` rebases a stream whose landing
//! met a conflict onto the base's tip in its worktree with git's own rebase, settles the PRD, runs
//! the agent on what is left unmerged, and goes on; an agent that leaves conflicts ends it with the
//! branch as it was. `settings.on_conflict: agent` makes `git boulder work` do it by itself.
//! Agents are shell scripts; results are checked with plain git.

use std::path::Path;

use crate::common::*;

/// Two streams owning one file, stories on adjacent PRD lines (so the PRD conflicts too).
fn two_streams() -> TestRepo {
    let plan = "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  a:\n    stories: [US-001]\n    paths: [src/**]\n  \
                b:\n    stories: [US-002]\n    paths: [src/**]\nsettings:\n  base_branch: main\n  path_overlap: ignore\n";
    let prd = "# PRD\n\n## Stories\n\n### [ ] US-001: a\n### [ ] US-002: b\n";
    let repo = TestRepo::with_files(&[
        (".boulder/streams.yaml", plan),
        (".agents/tasks/prd.md", prd),
        ("src/shared.txt", "one\ntwo\nthree\n"),
    ]);
    repo.boulder(&["stream", "init"]).ok();
    repo
}

/// In stream `name`'s worktree: line two of src/shared.txt becomes `line`, its story is marked done.
fn change(repo: &TestRepo, name: &str, story: &str, line: &str) {
    let w = repo.worktree(name);
    let prd = std::fs::read_to_string(w.join(".agents/tasks/prd.md")).unwrap();
    std::fs::write(w.join(".agents/tasks/prd.md"), prd.replace(&format!("[ ] {story}"), &format!("[x] {story}")))
        .unwrap();
    commit_in(repo, &w, "src/shared.txt", format!("one\n{line}\nthree\n"), &format!("{name}: {story}"));
}

/// A landed, b refused for a conflict in src/shared.txt (and the PRD).
fn refused_b() -> TestRepo {
    let repo = two_streams();
    change(&repo, "a", "US-001", "A");
    change(&repo, "b", "US-002", "B");
    repo.boulder(&["stream", "merge", "a"]).ok();
    let r = repo.boulder(&["stream", "merge", "b"]).code(1);
    assert!(r.stdout.contains("src/shared.txt"), "{}", r.stdout);
    repo
}

/// An agent keeping both lines, saving its prompt and the conflict list beside the repository.
fn resolver(repo: &TestRepo) -> std::path::PathBuf {
    let p = repo.tmp.path().join("resolver.sh");
    let out = repo.tmp.path().join("task.txt");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nset -e\nprintf '%s' \"$BOULDER_PROMPT\" > '{}'\nprintf '%s' \"$BOULDER_CONFLICTS\" > '{}.files'\n\
             printf 'one\\nA\\nB\\nthree\\n' > src/shared.txt\ngit add src/shared.txt\n",
            out.display(),
            out.display()
        ),
    )
    .unwrap();
    p
}

fn rebase_stopped(w: &Path) -> bool {
    let admin = std::fs::read_to_string(w.join(".git")).unwrap();
    let admin = Path::new(admin.trim().strip_prefix("gitdir: ").unwrap()).to_path_buf();
    admin.join("rebase-merge").exists() || admin.join("rebase-apply").exists()
}

#[test]
fn resolve_hands_the_conflict_to_the_agent_and_the_stream_lands() {
    let repo = refused_b();
    let old_b = rev(&repo, "boulder/b");
    let agent = resolver(&repo);
    let r = repo.boulder(&["stream", "resolve", "b", "--", "sh", agent.to_str().unwrap()]).ok();
    assert_shown!("resolve_hands_the_conflict_to_the_agent_and_the_stream_lands", r);
    // The task names the file and the stream whose landing changed it; the PRD was settled here.
    let task = std::fs::read_to_string(repo.tmp.path().join("task.txt")).unwrap();
    let main = rev(&repo, "main");
    assert!(task.starts_with("Landing stream b on main conflicts with what landed there first.\n"), "{task}");
    assert!(task.contains(&format!("onto main ({})", &main[..8])), "{task}");
    assert!(task.contains("  - src/shared.txt (changed on main by stream a)\n"), "{task}");
    assert!(!task.contains("prd.md"), "{task}");
    assert_eq!(std::fs::read_to_string(repo.tmp.path().join("task.txt.files")).unwrap(), "src/shared.txt");
    // The branch now holds main, the old tip's work with the resolution; the worktree is clean.
    let w = repo.worktree("b");
    repo.git(&["merge-base", "--is-ancestor", "main", "boulder/b"]).ok();
    assert_ne!(rev(&repo, "boulder/b"), old_b);
    assert_eq!(repo.git_out(&["show", "boulder/b:src/shared.txt"]), "one\nA\nB\nthree");
    let prd = repo.git_out(&["show", "boulder/b:.agents/tasks/prd.md"]);
    assert!(prd.contains("### [x] US-001: a\n### [x] US-002: b"), "{prd}");
    assert!(!repo.porcelain_dirty(&w));
    assert!(!rebase_stopped(&w));
    // The rewritten commit keeps its note: it is still b's.
    let note = repo.git_out(&["notes", "--ref=boulder", "show", "boulder/b"]);
    assert!(note.contains("\"stream\":\"b\""), "{note}");
    // And it lands.
    repo.boulder(&["stream", "merge", "b"]).ok();
    assert_eq!(repo.git_out(&["show", "main:src/shared.txt"]), "one\nA\nB\nthree");
    repo.assert_fsck();
}

#[test]
fn an_agent_that_leaves_the_conflict_ends_it_with_the_branch_as_it_was() {
    let repo = refused_b();
    let old_b = rev(&repo, "boulder/b");
    let r = repo.boulder(&["stream", "resolve", "b", "--max-failures", "2", "--", "true"]).code(1);
    assert_shown!("an_agent_that_leaves_the_conflict_ends_it_with_the_branch_as_it_was", r);
    let w = repo.worktree("b");
    assert_eq!(rev(&repo, "boulder/b"), old_b);
    assert!(!rebase_stopped(&w));
    assert!(!repo.porcelain_dirty(&w));
    assert_eq!(repo.git_in(&w, &["symbolic-ref", "HEAD"]).ok().stdout.trim(), "refs/heads/boulder/b");
    repo.assert_fsck();
}

#[test]
fn a_resolve_killed_with_its_agent_is_finished_by_running_it_again() {
    let repo = refused_b();
    // The agent kills the resolve that started it, outright, as a lost machine would.
    let killer = repo.tmp.path().join("killer.sh");
    std::fs::write(&killer, "#!/bin/sh\nkill -9 $PPID\n").unwrap();
    let r = repo.boulder(&["stream", "resolve", "b", "--", "sh", killer.to_str().unwrap()]);
    assert_ne!(r.code, 0);
    let w = repo.worktree("b");
    assert!(rebase_stopped(&w), "the rebase stays stopped in the worktree, as git's own");
    let agent = resolver(&repo);
    let again = repo.boulder(&["stream", "resolve", "b", "--", "sh", agent.to_str().unwrap()]).ok();
    assert_shown!("a_resolve_killed_with_its_agent_is_finished_by_running_it_again", again);
    assert!(!rebase_stopped(&w));
    repo.git(&["merge-base", "--is-ancestor", "main", "boulder/b"]).ok();
    assert_eq!(repo.git_out(&["show", "boulder/b:src/shared.txt"]), "one\nA\nB\nthree");
    repo.assert_fsck();
}

#[test]
fn a_stream_already_on_the_base_has_nothing_to_resolve() {
    let repo = two_streams();
    change(&repo, "a", "US-001", "A");
    let tip = rev(&repo, "boulder/a");
    let r = repo.boulder(&["stream", "resolve", "a", "--", "false"]).ok();
    assert_shown!("a_stream_already_on_the_base_has_nothing_to_resolve", r);
    assert_eq!(rev(&repo, "boulder/a"), tip);
}

#[test]
fn on_conflict_is_stop_or_agent() {
    let repo = two_streams();
    repo.with_settings("  on_conflict: rebase\n");
    let r = repo.boulder(&["stream", "validate"]).code(2);
    assert_shown!("on_conflict_is_stop_or_agent", r);
}

/// An agent for both jobs: an iteration (its story done, line two of src/shared.txt its own) or,
/// given conflicts, the union of both lines. Every prompt is appended to `prompts.txt`.
const BOTH: &str = "#!/bin/sh\nset -e\nprintf '%s\\n---\\n' \"$BOULDER_PROMPT\" >> \"$PROMPTS\"\n\
if [ -n \"$BOULDER_CONFLICTS\" ]; then printf 'one\\nA\\nB\\nthree\\n' > src/shared.txt; git add src/shared.txt; exit 0; fi\n\
case $BOULDER_STREAM in a) l=A;; *) l=B;; esac\n\
printf 'one\\n%s\\nthree\\n' $l > src/shared.txt\n\
sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
git add -A\ngit commit -q -m \"$BOULDER_STREAM: $BOULDER_STORY\"\n";

#[test]
fn work_under_on_conflict_agent_hands_a_conflict_back_and_lands_both_streams() {
    let plan = "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  a:\n    stories: [US-001]\n    paths: [src/**]\n  \
                b:\n    stories: [US-002]\n    paths: [src/**]\nsettings:\n  base_branch: main\n  path_overlap: ignore\n  \
                on_conflict: agent\n  boulder:\n    cooldown: 10ms\n    max_failures: 2\n";
    let prd = "# PRD\n\n## Stories\n\n### [ ] US-001: a\n### [ ] US-002: b\n";
    let remote = Remote::new(&[
        (".boulder/streams.yaml", plan),
        (".agents/tasks/prd.md", prd),
        ("src/shared.txt", "one\ntwo\nthree\n"),
    ]);
    let m = remote.machine("alpha");
    let agent = m.tmp.path().join("agent.sh");
    std::fs::write(&agent, BOTH).unwrap();
    let prompts = m.tmp.path().join("prompts.txt");
    // Both streams start from the same base (two at once): whichever lands second conflicts.
    let r = m.boulder_env(
        &m.dir,
        &["work", "--remote", "origin", "--parallel", "2", "--poll", "100ms", "--", "sh", agent.to_str().unwrap()],
        &[("PROMPTS", prompts.to_str().unwrap())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("the landing met a conflict: handing it to the agent (on_conflict: agent, 1/2)"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("conflict resolved by the agent; landing again"), "{}", r.stderr);
    assert!(r.stdout.lines().filter(|l| l.ends_with("merged here")).count() == 2, "{}", r.stdout);
    let all = std::fs::read_to_string(&prompts).unwrap();
    assert!(
        all.contains("conflicts with what landed there first")
            && all.contains("  - src/shared.txt (changed on main by stream "),
        "{all}"
    );
    // On the remote: both landed, linear, the union of both lines, both stories done.
    m.git(&["fetch", "-q", "origin"]).ok();
    assert_eq!(m.git_out(&["show", "origin/main:src/shared.txt"]), "one\nA\nB\nthree");
    assert_eq!(m.git_out(&["rev-list", "--merges", "origin/main"]), "");
    let prd = m.git_out(&["show", "origin/main:.agents/tasks/prd.md"]);
    assert!(prd.contains("### [x] US-001: a\n### [x] US-002: b"), "{prd}");
    m.assert_fsck();
}

#[test]
fn work_under_the_default_on_conflict_stop_leaves_the_conflict_to_a_person() {
    let plan = "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  a:\n    stories: [US-001]\n    paths: [src/**]\n  \
                b:\n    stories: [US-002]\n    paths: [src/**]\nsettings:\n  base_branch: main\n  path_overlap: ignore\n  \
                boulder:\n    cooldown: 10ms\n    max_failures: 2\n";
    let prd = "# PRD\n\n## Stories\n\n### [ ] US-001: a\n### [ ] US-002: b\n";
    let repo = TestRepo::with_files(&[
        (".boulder/streams.yaml", plan),
        (".agents/tasks/prd.md", prd),
        ("src/shared.txt", "one\ntwo\nthree\n"),
    ]);
    let agent = repo.tmp.path().join("agent.sh");
    std::fs::write(&agent, BOTH).unwrap();
    let prompts = repo.tmp.path().join("prompts.txt");
    let r = repo.boulder_env(
        &repo.dir,
        &["work", "--parallel", "2", "--poll", "100ms", "--", "sh", agent.to_str().unwrap()],
        &[("PROMPTS", prompts.to_str().unwrap())],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stderr.contains("handing it to the agent"), "{}", r.stderr);
    assert_eq!(r.stdout.lines().filter(|l| l.ends_with("merged here")).count(), 1, "{}", r.stdout);
    assert!(!std::fs::read_to_string(&prompts).unwrap().contains("conflicts with what landed"));
}
