//! Remotes that refuse: a claim, push or sync the server turns down for its own reasons (a
//! pre-receive or update hook, a `receive.*` rule) says so with the server's `remote:` lines and is
//! not retried; a lost race still is. Bare repositories read the plan from the base branch's tip;
//! `stream suggest` proposes the repository's real default branch.

use std::path::PathBuf;

use crate::common::*;

const PRD: &str =
    "# PRD\n\n### [ ] US-001: Login\nIn `src/auth/login.rs`.\n\n### [ ] US-002: List\nIn `src/api/list.rs`.\n";
const PLAN: &str = "version: 1\nstreams:\n  auth:\n    stories: [US-001]\n    paths: [src/auth/**]\n  api:\n    stories: [US-002]\n    paths: [src/api/**]\nsettings:\n  base_branch: main\n";

/// A bare remote cloned from a sample repository.
fn remote() -> Remote {
    Remote::new(&[
        (".agents/tasks/prd.md", PRD),
        (".boulder/streams.yaml", PLAN),
        ("src/auth/mod.rs", "// auth\n"),
        ("src/api/mod.rs", "// api\n"),
    ])
}

/// The server side of a remote: its hooks and how often they ran.
impl Remote {
    /// Install a server hook (`pre-receive` or `update`) that logs each call to `attempts` and runs
    /// `body` (plain sh).
    fn hook(&self, name: &str, body: &str) {
        let path = self.bare.join("hooks").join(name);
        let log = self.attempts_path();
        std::fs::write(&path, format!("#!/bin/sh\necho \"$*\" >> '{}'\n{body}\n", log.display())).unwrap();
        let mut perm = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&path, perm).unwrap();
    }

    fn attempts_path(&self) -> PathBuf {
        self.root.join("attempts.log")
    }

    /// How many times a server hook ran.
    fn attempts(&self) -> usize {
        std::fs::read_to_string(self.attempts_path()).map(|t| t.lines().count()).unwrap_or(0)
    }

    fn refs(&self, m: &TestRepo) -> String {
        m.git_out(&["ls-remote", self.bare.to_str().unwrap()])
    }
}

const REFUSE: &str = "echo 'remote says no: policy' >&2\necho 'second line from the server' >&2\nexit 1";

#[test]
fn a_claim_the_server_refuses_shows_its_words_and_is_tried_once() {
    let r = remote();
    r.hook("pre-receive", REFUSE);
    let a = r.machine("alpha");
    let out = a.boulder(&["stream", "claim", "auth"]).code(1);
    assert_shown!("claim_refused_by_the_server", out);
    assert!(!out.stderr.contains("another machine"), "{}", out.stderr);
    assert_eq!(r.attempts(), 1);
    assert!(!r.refs(&a).contains("claims"));
    // stream run, which claims first, stops with the same words.
    let plan = PLAN.replace("  base_branch: main\n", "  base_branch: main\n  claim_remote: origin\n");
    a.write(".boulder/streams.yaml", &plan);
    a.boulder(&["stream", "init", "auth"]).ok();
    let out = a.boulder(&["stream", "run", "auth", "--max-iterations", "1", "--", "true"]).code(1);
    assert_shown!("run_claim_refused_by_the_server", out);
    assert!(!out.stderr.contains("another machine"), "{}", out.stderr);
    assert_eq!(r.attempts(), 2);
}

#[test]
fn a_release_or_renewal_the_server_forbids_is_refused_plainly() {
    let r = remote();
    let a = r.machine("alpha");
    a.boulder(&["stream", "claim", "auth"]).ok();
    // The server's update hook forbids deleting refs: the release says so, not "changed meanwhile".
    r.hook(
        "update",
        "case \"$3\" in 0000000000000000000000000000000000000000) echo \"deleting $1 is not allowed\" >&2; exit 1;; esac",
    );
    let out = a.boulder(&["stream", "release", "auth"]).code(1);
    assert_shown!("release_refused_by_the_server", out);
    assert!(!out.stderr.contains("meanwhile"), "{}", out.stderr);
    assert!(r.refs(&a).contains("refs/boulder/claims/auth"));
    assert_eq!(r.attempts(), 1);
    // A receive.* rule (the pack is larger than the server accepts): renewing is refused as such.
    std::fs::remove_file(r.bare.join("hooks/update")).unwrap();
    a.git_in(&r.bare, &["config", "receive.maxInputSize", "10"]).ok();
    let out = a.boulder(&["stream", "claim", "auth"]).code(1);
    assert_shown!("claim_pack_too_large_for_the_server", out);
    assert!(!out.stderr.contains("another machine"), "{}", out.stderr);
}

#[test]
fn a_push_the_server_refuses_is_not_retried_and_shows_its_words() {
    let r = remote();
    r.hook("pre-receive", REFUSE);
    let a = r.machine("alpha");
    a.boulder(&["prd", "done", "US-001"]).ok();
    let out = a.boulder(&["push"]).code(1);
    assert_eq!(r.attempts(), 1, "a permanent rejection is tried once");
    assert_shown!("push_refused_by_the_server", out);
    assert!(!out.stderr.contains("another machine") && !out.stderr.contains("after"), "{}", out.stderr);

    let out = a.boulder(&["push", "--json"]).code(1);
    let j = out.json();
    assert_eq!(j["refused_by_server"], true, "{j}");
    assert_eq!(j["rounds"], 0, "{j}");
    assert!(j["remote_messages"].to_string().contains("remote says no: policy"), "{j}");
    assert_eq!(r.attempts(), 2);

    let out = a.boulder(&["sync"]).code(1);
    assert_shown!("sync_push_refused_by_the_server", out);
    assert_eq!(r.attempts(), 3);
    assert!(!r.refs(&a).contains("refs/boulder"));
}

#[test]
fn an_update_hook_refusing_one_ref_names_it_and_the_rest_is_pushed() {
    let r = remote();
    r.hook("update", "case \"$1\" in refs/boulder/prd) echo \"no PRD records here: $1\" >&2; exit 1;; esac\nexit 0");
    let a = r.machine("alpha");
    a.boulder(&["stream", "init", "auth"]).ok();
    a.boulder(&["prd", "done", "US-001"]).ok();
    let out = a.boulder(&["push"]).code(1);
    assert_shown!("an_update_hook_refusing_one_ref_names_it_and_the_rest_is_pushed", out);
    let prd_tries = std::fs::read_to_string(r.attempts_path())
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("refs/boulder/prd "))
        .count();
    assert_eq!(prd_tries, 1, "the refused ref is not pushed again");
    let on_remote = r.refs(&a);
    assert!(on_remote.contains("refs/boulder/streams/auth") && !on_remote.contains("refs/boulder/prd"), "{on_remote}");
}

#[test]
fn a_lost_race_is_still_pulled_merged_and_retried() {
    let r = remote();
    // A hook that accepts everything but counts: the race is not mistaken for a refusal.
    r.hook("pre-receive", "exit 0");
    let a = r.machine("alpha");
    let b = r.machine("beta");
    a.boulder(&["prd", "done", "US-001"]).ok();
    b.boulder(&["prd", "done", "US-002"]).ok();
    a.boulder(&["push"]).ok();
    let j = b.boulder(&["push", "--json"]).ok().json();
    assert!(j["rounds"].as_u64().unwrap() >= 1, "{j}");
    assert!(j.get("refused_by_server").is_none(), "{j}");
    a.boulder(&["pull"]).ok();
    let done = a.git_out(&["cat-file", "-p", "refs/boulder/prd:state.json"]);
    assert!(done.contains("US-001") && done.contains("US-002"), "{done}");
}

/// A bare clone of a repository whose default branch is `trunk` and whose plan on `trunk` names
/// `develop` as the base; `develop` has a plan of its own (two streams) and a PRD with a third story.
fn bare_with_base_elsewhere() -> (TestRepo, PathBuf) {
    let plan_trunk = "version: 1\nstreams:\n  auth:\n    stories: [US-001]\n    paths: [src/auth/**]\nsettings:\n  base_branch: develop\n";
    let src = TestRepo::empty();
    src.git(&["checkout", "-q", "-b", "trunk"]).ok();
    src.write(".agents/tasks/prd.md", PRD);
    src.write(".boulder/streams.yaml", plan_trunk);
    src.write("src/auth/mod.rs", "// auth\n");
    src.commit_all("trunk");
    src.git(&["checkout", "-q", "-b", "develop"]).ok();
    let prd3 = format!("{PRD}\n### [x] US-003: Docs\nIn `docs/guide.md`.\n");
    src.write(".agents/tasks/prd.md", &prd3);
    let plan_develop = "version: 1\nstreams:\n  auth:\n    stories: [US-001]\n    paths: [src/auth/**]\n  docs:\n    stories: [US-003]\n    paths: [docs/**]\nsettings:\n  base_branch: develop\n";
    src.write(".boulder/streams.yaml", plan_develop);
    src.write("docs/index.md", "# docs\n");
    src.commit_all("develop");
    src.git(&["checkout", "-q", "trunk"]).ok();
    let bare = src.tmp.path().join("bare.git");
    src.git(&["clone", "-q", "--bare", src.dir.to_str().unwrap(), bare.to_str().unwrap()]).ok();
    assert_eq!(src.git_in(&bare, &["symbolic-ref", "HEAD"]).ok().stdout.trim(), "refs/heads/trunk");
    (src, bare)
}

#[test]
fn a_bare_repository_reads_the_plan_and_prd_from_the_base_branch_tip() {
    let (src, bare) = bare_with_base_elsewhere();
    let j = src.boulder_in(&bare, &["stream", "validate", "--json"]).ok().json();
    assert_eq!(j["ok"], true, "{j}");
    assert_eq!(j["streams"], 2, "the plan on develop, not trunk's: {j}");

    let j = src.boulder_in(&bare, &["status", "--json"]).ok().json();
    let names: Vec<&str> = j["streams"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["auth", "docs"], "{j}");

    let out = src.boulder_in(&bare, &["prd", "show"]).ok();
    assert_shown!("a_bare_repository_reads_the_plan_and_prd_from_the_base_branch_tip", out);
    let out = src.boulder_in(&bare, &["prd", "show", "--stream", "docs"]).ok();
    assert!(out.stdout.contains("US-003") && !out.stdout.contains("US-001"), "{}", out.stdout);

    // Without a plan of its own naming another base, HEAD's branch is the source.
    src.git_in(&bare, &["update-ref", "-d", "refs/heads/develop"]).ok();
    let j = src.boulder_in(&bare, &["stream", "validate", "--json"]).ok().json();
    assert_eq!(j["streams"], 1, "{j}");
    let out = src.boulder_in(&bare, &["prd", "show"]).ok();
    assert!(!out.stdout.contains("US-003"), "{}", out.stdout);
}

fn suggest_base(repo: &TestRepo, dir: &std::path::Path) -> String {
    let out = repo.boulder_in(dir, &["stream", "suggest"]).ok();
    let line = out
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("base_branch:"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    line.trim_start().trim_start_matches("base_branch:").trim().to_string()
}

#[test]
fn stream_suggest_proposes_the_real_default_branch() {
    // A clone whose remote's default branch is trunk, checked out on a feature branch.
    let src = TestRepo::empty();
    src.git(&["checkout", "-q", "-b", "trunk"]).ok();
    src.write(".agents/tasks/prd.md", PRD);
    src.commit_all("init");
    let clone = src.tmp.path().join("clone");
    src.git(&["clone", "-q", src.dir.to_str().unwrap(), clone.to_str().unwrap()]).ok();
    src.git_in(&clone, &["switch", "-q", "-c", "feature"]).ok();
    assert_eq!(suggest_base(&src, &clone), "trunk");

    // No remote: the current branch of the main worktree, also asked from a linked worktree, and
    // a plan that does not set base_branch does not make it `main`.
    src.git(&["checkout", "-q", "-b", "dev"]).ok();
    src.write(".boulder/streams.yaml", "version: 1\nstreams:\n  auth:\n    stories: [US-001]\n");
    assert_eq!(suggest_base(&src, &src.dir), "dev");
    let wt = src.tmp.path().join("wt");
    src.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]).ok();
    assert_eq!(suggest_base(&src, &wt), "dev");
    // A plan that sets it explicitly keeps it.
    src.write(".boulder/streams.yaml", "version: 1\nstreams: {}\nsettings:\n  base_branch: trunk\n");
    assert_eq!(suggest_base(&src, &src.dir), "trunk");
}

#[test]
fn a_bare_repository_reads_no_prd_past_the_bound() {
    let (src, bare) = bare_with_base_elsewhere();
    // A PRD of 65 MiB on develop, committed straight into the bare repository.
    let big = src.tmp.path().join("big.md");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(65 << 20).unwrap();
    drop(f);
    let blob = src.git_in(&bare, &["hash-object", "-w", big.to_str().unwrap()]).ok().stdout.trim().to_string();
    let develop = src.git_in(&bare, &["rev-parse", "develop"]).ok().stdout.trim().to_string();
    let index = src.tmp.path().join("index");
    let with_index = |args: &[&str]| {
        let mut c = std::process::Command::new("git");
        c.args(["--git-dir", bare.to_str().unwrap()]).args(args).env("GIT_INDEX_FILE", &index);
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    with_index(&["read-tree", &develop]);
    with_index(&["update-index", "--cacheinfo", &format!("100644,{blob},.agents/tasks/prd.md")]);
    let tree = with_index(&["write-tree"]);
    let commit =
        with_index(&["-c", "user.name=t", "-c", "user.email=t@t", "commit-tree", &tree, "-p", &develop, "-m", "big"]);
    with_index(&["update-ref", "refs/heads/develop", &commit]);
    let r = src.boulder_in(&bare, &["prd", "show"]).code(2);
    assert_shown!("a_bare_repository_reads_no_prd_past_the_bound", r);
}

/// A ref's `.lock` left on the server (a push killed there) turns the push down with git's
/// "cannot lock ref": the hint says so, not that the server's rules refuse it.
#[test]
fn a_lock_file_left_on_the_server_is_named_as_such() {
    let r = remote();
    let a = r.machine("alpha");
    a.boulder(&["prd", "done", "US-001"]).ok();
    for name in a.refs("refs/boulder") {
        let lock = r.bare.join(format!("{name}.lock"));
        std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
        std::fs::write(&lock, "").unwrap();
    }
    let out = a.boulder(&["push"]).code(1);
    assert_shown!("a_lock_file_left_on_the_server_is_named_as_such", out);
    assert!(!out.stderr.contains("server's own rules"), "{}", out.stderr);
}
