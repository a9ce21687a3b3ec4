//! `stream merge --remote`: the merge queue, through a bare remote served by `git daemon` on
//! 127.0.0.1 and machines that are clones of it. Checked with plain git on the remote.

use std::path::Path;

use crate::common::*;

pub const PRD: &str =
    "# PRD\n\n## Stories\n\n### [ ] US-001: Login\nIn src/auth.\n\n### [ ] US-002: List\nIn src/api.\n";
pub const PLAN: &str = "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  auth:\n    stories: [US-001]\n    paths: [src/auth/**]\n  api:\n    stories: [US-002]\n    paths: [src/api/**]\nsettings:\n  base_branch: main\n  ownership: off\n";

/// A bare remote holding the sample, served read-write by `git daemon` while this lives.
pub struct Served {
    pub remote: Remote,
    pub url: String,
    _server: GitDaemon,
}

impl Served {
    pub fn new(plan: &str) -> Served {
        let remote = Remote::new(&[
            (".agents/tasks/prd.md", PRD),
            (".boulder/streams.yaml", plan),
            ("src/auth/mod.rs", "// auth\n"),
            ("src/api/mod.rs", "// api\n"),
            ("README.md", "# sample\n"),
        ]);
        let server = GitDaemon::serve(&remote.root);
        Served { remote, url: server.url("remote.git"), _server: server }
    }

    /// A clone over `git://` with its streams initialized.
    pub fn machine(&self, name: &str) -> TestRepo {
        let m = self.remote.machine_from(name, &self.url);
        m.boulder(&["stream", "init"]).ok();
        m
    }

    /// `git` run on the bare remote itself.
    pub fn git(&self, m: &TestRepo, args: &[&str]) -> String {
        let mut all = vec!["--git-dir", self.remote.bare.to_str().unwrap()];
        all.extend_from_slice(args);
        m.git_out(&all)
    }

    /// What the remote's refs hold, as `git ls-remote` says.
    pub fn ls_remote(&self, m: &TestRepo) -> String {
        m.git_out(&["ls-remote", &self.url])
    }

    /// The subjects of the remote's base, newest first.
    pub fn subjects(&self, m: &TestRepo) -> Vec<String> {
        self.git(m, &["log", "--format=%s", "main"]).lines().map(String::from).collect()
    }

    /// The state of stream `name` as the remote holds it.
    pub fn stream_state(&self, m: &TestRepo, name: &str) -> serde_json::Value {
        serde_json::from_str(&self.git(m, &["show", &format!("refs/boulder/streams/{name}:state.json")])).unwrap()
    }

    /// Two machines, `alpha` with stream auth finished by one commit (`a`: file and content) and
    /// `beta` with stream api (`b`), neither merged.
    pub fn alpha_and_beta(&self, a: (&str, &str), b: (&str, &str)) -> (TestRepo, TestRepo) {
        let (alpha, beta) = (self.machine("alpha"), self.machine("beta"));
        finish(&alpha, "auth", "US-001", a.0, a.1);
        finish(&beta, "api", "US-002", b.0, b.1);
        (alpha, beta)
    }

    pub fn fsck(&self, m: &TestRepo) {
        self.git(m, &["fsck", "--strict", "--no-progress"]);
    }
}

/// Finish the stream `name` on machine `m`: one commit in `file`, its story recorded done.
pub fn finish(m: &TestRepo, name: &str, story: &str, file: &str, content: &str) {
    commit_in(m, &m.worktree(name), file, content, &format!("{name}: work"));
    m.boulder(&["prd", "done", story]).ok();
}

fn clean(m: &TestRepo, dir: &Path) {
    assert_eq!(m.git_in(dir, &["status", "--porcelain"]).ok().stdout, "", "{} is not clean", dir.display());
}

fn count(list: &[String], s: &str) -> usize {
    list.iter().filter(|x| x.as_str() == s).count()
}

#[test]
fn merge_remote_lands_on_the_remote_and_the_local_base_follows() {
    let s = Served::new(PLAN);
    let a = s.machine("alpha");
    finish(&a, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    let r = a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    assert_shown!("merge_remote_lands_on_the_remote_and_the_local_base_follows", r);
    // The remote's base has the work and the PRD completion, as plain git sees it.
    assert_eq!(s.git(&a, &["show", "main:src/auth/login.rs"]), "fn login() {}");
    assert!(s.git(&a, &["show", "main:.agents/tasks/prd.md"]).contains("### [x] US-001"));
    assert_eq!(s.subjects(&a)[..2], ["chore(prd): sync completion from stream auth", "auth: work"]);
    // The stream branch was pushed with it, at the replayed tip.
    assert_eq!(s.git(&a, &["rev-parse", "boulder/auth"]), s.git(&a, &["rev-parse", "main~1"]));
    assert_eq!(s.stream_state(&a, "auth")["status"], "MERGED");
    // The local base and its worktree are where the remote is.
    assert_eq!(rev(&a, "main"), s.git(&a, &["rev-parse", "main"]));
    assert_eq!(a.read("src/auth/login.rs"), "fn login() {}\n");
    clean(&a, &a.dir);
    clean(&a, &a.worktree("auth"));
    assert_eq!(a.stream_state("auth")["status"], "MERGED");
    // The user's remote-tracking ref is git push's own business; the queue's ref is apart.
    assert_eq!(rev(&a, "refs/remotes/origin/main"), rev(&a, "main"));
    assert_eq!(a.refs("refs/boulder-queue/"), ["refs/boulder-queue/origin/heads/main"]);
    a.assert_fsck();
    s.fsck(&a);
    // settings.merge_remote does the same without the flag; --no-remote merges locally.
    let b = s.machine("beta");
    b.with_settings("  merge_remote: origin\n");
    finish(&b, "api", "US-002", "src/api/list.rs", "fn list() {}\n");
    let d = b.boulder(&["stream", "merge", "api", "--dry-run"]).ok();
    assert!(d.stdout.contains("stream api → main on origin (rebase), dry run"), "{}", d.stdout);
    let l = b.boulder(&["stream", "merge", "api", "--no-remote", "--dry-run"]).ok();
    assert!(l.stdout.contains("stream api → main (rebase), dry run"), "{}", l.stdout);
}

#[test]
fn the_remote_moved_since_the_last_fetch_and_it_still_lands_linear() {
    let s = Served::new(PLAN);
    let (a, b) = s.alpha_and_beta(("src/auth/login.rs", "fn login() {}\n"), ("src/api/list.rs", "fn list() {}\n"));
    b.boulder(&["stream", "merge", "api", "--remote", "origin"]).ok();
    let before = s.git(&a, &["rev-parse", "main"]);
    // alpha has not fetched since it cloned: its idea of main is stale.
    assert_ne!(rev(&a, "main"), before);
    a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    a.git(&["merge-base", "--is-ancestor", &before, &s.git(&a, &["rev-parse", "main"])]).ok();
    let subjects = s.subjects(&a);
    assert_eq!(count(&subjects, "auth: work"), 1, "{subjects:?}");
    assert_eq!(count(&subjects, "api: work"), 1, "{subjects:?}");
    assert_eq!(s.git(&a, &["rev-list", "--merges", "--count", "main"]), "0");
    let prd = s.git(&a, &["show", "main:.agents/tasks/prd.md"]);
    assert!(prd.contains("[x] US-001") && prd.contains("[x] US-002"), "{prd}");
    assert_eq!(rev(&a, "main"), s.git(&a, &["rev-parse", "main"]));
    assert_eq!(a.read("src/api/list.rs"), "fn list() {}\n");
    // Both streams MERGED on the remote, and api's state came along to alpha.
    assert_eq!(s.stream_state(&a, "auth")["status"], "MERGED");
    assert_eq!(s.stream_state(&a, "api")["status"], "MERGED");
    assert_eq!(a.stream_state("api")["status"], "MERGED");
    s.fsck(&a);
    a.assert_fsck();
}

#[test]
fn two_machines_merging_at_the_same_instant_both_land() {
    let s = Served::new(PLAN);
    let (a, b) = s.alpha_and_beta(("src/auth/login.rs", "fn login() {}\n"), ("src/api/list.rs", "fn list() {}\n"));
    // Both check against the same remote tip, then wait for each other before pushing: one push
    // wins, the other loses the lease and must go round again.
    let barrier = s.remote.root.join("barrier");
    std::fs::create_dir_all(&barrier).unwrap();
    let wait = |me: &str| {
        format!(
            "touch {d}/{me}; n=0; while [ ! -f {d}/alpha ] || [ ! -f {d}/beta ]; do n=$((n+1)); [ $n -gt 600 ] && exit 0; sleep 0.05; done",
            d = barrier.display()
        )
    };
    let (wa, wb) = (wait("alpha"), wait("beta"));
    let (ra, rb) = std::thread::scope(|t| {
        let ha = t.spawn(|| {
            a.boulder_env(
                &a.dir,
                &["stream", "merge", "auth", "--remote", "origin"],
                &[("BOULDER_FAILPOINT_RUN", "merge-verify"), ("BOULDER_FAILPOINT_CMD", &wa)],
            )
        });
        let hb = t.spawn(|| {
            b.boulder_env(
                &b.dir,
                &["stream", "merge", "api", "--remote", "origin"],
                &[("BOULDER_FAILPOINT_RUN", "merge-verify"), ("BOULDER_FAILPOINT_CMD", &wb)],
            )
        });
        (ha.join().unwrap(), hb.join().unwrap())
    });
    assert_eq!(ra.code, 0, "{}\n{}", ra.stdout, ra.stderr);
    assert_eq!(rb.code, 0, "{}\n{}", rb.stdout, rb.stderr);
    let retried: Vec<&Run> = [&ra, &rb].into_iter().filter(|r| r.stderr.contains("round 1/5")).collect();
    assert_eq!(retried.len(), 1, "exactly one lost the race:\n{}\n{}", ra.stderr, rb.stderr);
    assert!(retried[0].stdout.contains("after 1 lost round(s)"), "{}", retried[0].stdout);
    let subjects = s.subjects(&a);
    assert_eq!(count(&subjects, "auth: work"), 1, "{subjects:?}");
    assert_eq!(count(&subjects, "api: work"), 1, "{subjects:?}");
    assert_eq!(s.git(&a, &["rev-list", "--merges", "--count", "main"]), "0");
    let prd = s.git(&a, &["show", "main:.agents/tasks/prd.md"]);
    assert!(prd.contains("[x] US-001") && prd.contains("[x] US-002"), "{prd}");
    assert_eq!(s.stream_state(&a, "auth")["status"], "MERGED");
    assert_eq!(s.stream_state(&a, "api")["status"], "MERGED");
    s.fsck(&a);
}

#[test]
fn a_conflict_with_what_landed_is_refused_and_the_remote_is_untouched() {
    let s = Served::new(PLAN);
    let (a, b) = s.alpha_and_beta(("README.md", "# auth's readme\n"), ("README.md", "# api's readme\n"));
    a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    let before = s.ls_remote(&b);
    let r = b.boulder(&["stream", "merge", "api", "--remote", "origin"]).code(1);
    assert!(r.stdout.contains("stream api → main on origin (rebase): conflicts"), "{}", r.stdout);
    assert_shown!("a_conflict_with_what_landed_is_refused_and_the_remote_is_untouched", r);
    // The remote's branches are untouched; the refusal is shared with the state.
    assert_eq!(branches(&s.ls_remote(&b)), branches(&before), "the refused merge changed the remote");
    assert_eq!(s.stream_state(&b, "api")["refused"]["refusal"], "conflict");
    assert_ne!(b.stream_state("api")["status"], "MERGED");
    assert!(!b.dir.join(".git/boulder/merge/api.json").exists());
    b.assert_fsck();
}

#[test]
fn a_merge_killed_at_any_step_is_finished_by_a_rerun() {
    let steps = [
        "merge-objects",
        "merge-notes",
        "merge-journal",
        "merge-stream-ref",
        "merge-stream-worktree",
        "merge-verify",
        "merge-prd-commit",
        "queue-push",
        "queue-pushed",
        "merge-base-ref",
        "merge-base-worktree",
        "merge-record",
        "queue-state",
    ];
    let plan = PLAN.replace("  base_branch: main\n", "  base_branch: main\n  verify: 'true'\n");
    for step in steps {
        let s = Served::new(&plan);
        let a = s.machine("alpha");
        a.boulder(&["trust"]).ok();
        finish(&a, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
        let base_old = s.git(&a, &["rev-parse", "main"]);
        let r =
            a.boulder_env(&a.dir, &["stream", "merge", "auth", "--remote", "origin"], &[("BOULDER_FAILPOINT", step)]);
        assert_ne!(r.code, 0, "{step}: the failpoint did not fire\n{}", r.stderr);
        assert!(r.stderr.contains(&format!("failpoint {step}")), "{step}: {}", r.stderr);
        a.assert_fsck();
        s.fsck(&a);
        let after_crash = s.git(&a, &["rev-parse", "main"]);
        let r = a.boulder(&["stream", "merge", "auth", "--remote", "origin"]);
        assert_eq!(r.code, 0, "{step}: rerun failed\n{}\n{}", r.stdout, r.stderr);
        let remote_main = s.git(&a, &["rev-parse", "main"]);
        if after_crash != base_old {
            // Landed before the crash: the rerun only finished, it pushed nothing again.
            assert_eq!(remote_main, after_crash, "{step}: pushed twice");
        }
        let subjects = s.subjects(&a);
        assert_eq!(count(&subjects, "auth: work"), 1, "{step}: {subjects:?}");
        assert_eq!(count(&subjects, "chore(prd): sync completion from stream auth"), 1, "{step}: {subjects:?}");
        assert_eq!(s.git(&a, &["rev-list", "--count", &format!("{base_old}..main")]), "2", "{step}");
        assert_eq!(rev(&a, "main"), remote_main, "{step}");
        assert_eq!(a.read("src/auth/login.rs"), "fn login() {}\n", "{step}");
        clean(&a, &a.dir);
        clean(&a, &a.worktree("auth"));
        assert_eq!(a.stream_state("auth")["status"], "MERGED", "{step}");
        assert_eq!(s.stream_state(&a, "auth")["status"], "MERGED", "{step}");
        assert!(!a.dir.join(".git/boulder/merge/auth.json").exists(), "{step}");
        a.assert_fsck();
        s.fsck(&a);
    }
}

#[test]
fn verify_failing_or_the_server_refusing_leaves_the_remote_untouched() {
    let plan = PLAN.replace("  base_branch: main\n", "  base_branch: main\n  verify: 'test -f ok'\n");
    let s = Served::new(&plan);
    let a = s.machine("alpha");
    a.boulder(&["trust"]).ok();
    finish(&a, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    let before = s.ls_remote(&a);
    let r = a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).code(1);
    assert_shown!("remote_merge_verify_failed", r);
    assert_eq!(branches(&s.ls_remote(&a)), branches(&before));
    assert_eq!(s.stream_state(&a, "auth")["refused"]["refusal"], "verify");

    // verify passes now, but the server refuses every push to main.
    std::fs::write(a.worktree("auth").join("ok"), "").unwrap();
    let hook = s.remote.bare.join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'main is frozen today' >&2\nexit 1\n").unwrap();
    let mut perms = std::fs::metadata(&hook).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&hook, perms).unwrap();
    let r = a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).code(1);
    assert_shown!("remote_merge_server_refused", r);
    assert!(!r.stderr.contains("round 1/5"), "a refusal is no race: {}", r.stderr);
    assert_eq!(branches(&s.ls_remote(&a)), branches(&before));
    assert_ne!(a.stream_state("auth")["status"], "MERGED");
    assert!(!a.dir.join(".git/boulder/merge/auth.json").exists());

    // The rule lifted, the same command lands it.
    std::fs::remove_file(&hook).unwrap();
    a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    assert_eq!(s.stream_state(&a, "auth")["status"], "MERGED");
    assert_eq!(count(&s.subjects(&a), "auth: work"), 1);
}

#[test]
fn merge_remote_says_what_it_did() {
    let s = Served::new(PLAN);
    let (a, b) = s.alpha_and_beta(("README.md", "# auth's readme\n"), ("README.md", "# api's readme\n"));
    assert_shown!("merge_remote", a.boulder(&["-q", "stream", "merge", "auth", "--remote", "origin"]));
    assert_shown!("merge_remote_conflict", b.boulder(&["-q", "stream", "merge", "api", "--remote", "origin"]));
}

#[test]
fn depends_on_is_judged_by_the_remotes_state() {
    let plan = PLAN.replace("    paths: [src/api/**]\n", "    paths: [src/api/**]\n    depends_on: [auth]\n");
    let s = Served::new(&plan);
    let (a, b) = s.alpha_and_beta(("src/auth/login.rs", "fn login() {}\n"), ("src/api/list.rs", "fn list() {}\n"));
    // Nobody merged auth yet: refused, as locally.
    let r = b.boulder(&["stream", "merge", "api", "--remote", "origin"]).code(1);
    assert_shown!("depends_on_is_judged_by_the_remotes_state", r);
    // alpha lands auth; beta has not pulled since, and its merge still goes ahead: the queue
    // reads the remote's state first.
    a.boulder(&["stream", "merge", "auth", "--remote", "origin"]).ok();
    assert_ne!(b.stream_state("auth")["status"], "MERGED");
    b.boulder(&["stream", "merge", "api", "--remote", "origin"]).ok();
    assert_eq!(s.stream_state(&b, "api")["status"], "MERGED");
    let subjects = s.subjects(&b);
    assert_eq!(count(&subjects, "auth: work"), 1, "{subjects:?}");
    assert_eq!(count(&subjects, "api: work"), 1, "{subjects:?}");
}

#[test]
fn merge_all_lands_every_complete_stream_in_depends_on_order() {
    let plan = PLAN.replace("    paths: [src/api/**]\n", "    paths: [src/api/**]\n    depends_on: [auth]\n");
    let s = Served::new(&plan);
    let a = s.machine("alpha");
    finish(&a, "api", "US-002", "src/api/list.rs", "fn list() {}\n");
    finish(&a, "auth", "US-001", "src/auth/login.rs", "fn login() {}\n");
    let r = a.boulder(&["stream", "merge", "--all", "--remote", "origin"]).ok();
    assert_shown!("merge_all_lands_every_complete_stream_in_depends_on_order", r);
    let subjects = s.subjects(&a);
    let at = |x: &str| subjects.iter().position(|s| s == x).unwrap();
    assert!(at("api: work") < at("auth: work"), "auth lands first: {subjects:?}");
    assert_eq!(s.stream_state(&a, "auth")["status"], "MERGED");
    assert_eq!(s.stream_state(&a, "api")["status"], "MERGED");
    assert_eq!(rev(&a, "main"), s.git(&a, &["rev-parse", "main"]));
}

/// The lines of `git ls-remote` output that name branches (not the shared state, where a refused
/// landing records itself).
fn branches(ls_remote: &str) -> String {
    ls_remote
        .lines()
        .filter(|l| !l.contains("\trefs/boulder/") && !l.contains("\trefs/notes/"))
        .collect::<Vec<_>>()
        .join("\n")
}
