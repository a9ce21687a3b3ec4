//! What a fleet must never do on a bad day: inherit trust, wait forever on a claim from another
//! machine, walk a refused op-log again on every pull, or leave an unmerge half done. Real
//! repositories, real remotes (bare repositories on disk or over `git daemon`), plain git checks.

use std::path::{Path, PathBuf};

use crate::common::*;

/// An agent finishing the story it is given: a file in the stream's folder, the story marked done
/// in the worktree's PRD, one commit named `<stream>: <story>`.
const FINISHER: &str = "#!/bin/sh\nset -e\nmkdir -p \"src/$BOULDER_STREAM\"\n\
echo \"$BOULDER_STORY\" > \"src/$BOULDER_STREAM/$BOULDER_STORY.txt\"\n\
sed -i \"s/### \\[ \\] $BOULDER_STORY:/### [x] $BOULDER_STORY:/\" \"$BOULDER_PRD\"\n\
git add -A\ngit commit -q -m \"$BOULDER_STREAM: $BOULDER_STORY\"\n";

const PRD: &str = "# PRD\n\n### [ ] US-101: a part\nx\n";

/// Write `script` as a file in `dir`, returning its path.
fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

// ---------------------------------------------------------------------------------------------
// Trust is never inherited.

#[test]
fn boulder_trust_covers_the_plan_read_not_one_a_pull_brings_meanwhile() {
    // The same as `--trust` (fleet::work_trust_covers_the_plan_read_not_one_a_pull_brings_meanwhile),
    // given as BOULDER_TRUST=1: the worker's children must not inherit a blanket trust.
    let marks = tempfile::tempdir().unwrap();
    let mark = |name: &str| marks.path().join(name);
    let plan = |verify: &str| {
        format!(
            "version: 1\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\n\
             settings:\n  base_branch: main\n  verify: 'touch {verify}'\n  boulder:\n    cooldown: 10ms\n"
        )
    };
    let read = plan(mark("read").to_str().unwrap());
    let remote = Remote::new(&[(".agents/tasks/prd.md", PRD), (".boulder/streams.yaml", &read)]);
    let m1 = remote.machine("m1");
    let m2 = remote.machine("m2");
    m2.write(".boulder/streams.yaml", &plan(mark("unread").to_str().unwrap()));
    m2.commit_all("change verify");
    m2.git(&["push", "-q", "origin", "main"]).ok();
    let finisher = script(m1.tmp.path(), "finisher.sh", FINISHER);
    let r = m1
        .boulder_env(
            &m1.dir,
            &["work", "--remote", "origin", "--", "sh", finisher.to_str().unwrap()],
            &[("BOULDER_TRUST", "1")],
        )
        .code(1);
    assert!(r.stderr.contains("changed since the worker was started with --trust"), "{}", r.stderr);
    assert!(!mark("unread").exists(), "the unread verify ran");
    assert!(!mark("read").exists());
}

#[test]
fn no_program_a_run_starts_sees_boulder_trust() {
    let repo = TestRepo::in_temp("repo");
    let envs = tempfile::tempdir().unwrap();
    let env_of = |what: &str| envs.path().join(what);
    let finisher = script(repo.tmp.path(), "finisher.sh", FINISHER);
    let agent = script(
        repo.tmp.path(),
        "agent.sh",
        &format!("#!/bin/sh\nenv > {}\nexec sh {}\n", env_of("agent").display(), finisher.display()),
    );
    let plan = format!(
        "version: 1\nstreams:\n  a:\n    stories: [US-101]\n    paths: [src/a/**]\n    agent: fin\n\
         settings:\n  base_branch: main\n  setup: 'env > {}'\n  verify: 'env > {}'\n  agents:\n    fin: 'sh {}'\n",
        env_of("setup").display(),
        env_of("verify").display(),
        agent.display()
    );
    std::fs::create_dir_all(&repo.dir).unwrap();
    repo.git(&["init", "-q", "-b", "main"]).ok();
    repo.write(".agents/tasks/prd.md", PRD);
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("initial");
    // Untrusted: refused. Given BOULDER_TRUST=1: the worker runs everything…
    repo.boulder(&["work"]).code(1);
    let r = repo.boulder_env(&repo.dir, &["work"], &[("BOULDER_TRUST", "1")]).ok();
    assert!(r.stdout.lines().any(|l| l.starts_with("a ") && l.ends_with("merged here")), "{}", r.stdout);
    // …and none of the programs it started was given the variable.
    for what in ["agent", "setup", "verify"] {
        let env = std::fs::read_to_string(env_of(what)).unwrap_or_else(|e| panic!("{what} did not run: {e}"));
        assert!(env.contains("BOULDER_STREAM=a"), "{what}: {env}");
        assert!(!env.contains("BOULDER_TRUST"), "{what} inherited trust:\n{env}");
    }
}
