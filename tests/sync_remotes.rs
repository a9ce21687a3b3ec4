//! Sharing state between machines: push, pull and sync through real bare remotes (a path,
//! `git daemon` on 127.0.0.1, smart HTTP through `git http-backend`), convergence of three clones
//! syncing in random orders, garbage pushed by a hostile clone, claims raced by two clones, and
//! `remote setup` for plain git fetch/push. Checked with plain git.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::*;

const PRD: &str = "# PRD\n\n### [ ] US-001: Login\nx\n\n### [ ] US-002: List\ny\n\n### [ ] US-003: Docs\nz\n";
const PLAN: &str = "version: 1\nstreams:\n  auth:\n    stories: [US-001]\n    paths: [src/auth/**]\n  api:\n    stories: [US-002]\n    paths: [src/api/**]\nsettings:\n  base_branch: main\n";

/// A bare remote made from a sample repository, to clone as machines.
type Net = Remote;

fn net(plan: &str) -> Net {
    Remote::new(&[
        (".agents/tasks/prd.md", PRD),
        (".boulder/streams.yaml", plan),
        ("src/auth/mod.rs", "// auth\n"),
        ("src/api/mod.rs", "// api\n"),
    ])
}

fn state_refs(repo: &TestRepo) -> String {
    repo.git_out(&[
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        "refs/boulder/streams",
        "refs/boulder/boulders",
        "refs/boulder/prd",
    ])
}

fn notes(repo: &TestRepo) -> String {
    let mut lines: Vec<String> = repo.git_out(&["notes", "--ref=boulder", "list"]).lines().map(String::from).collect();
    lines.sort();
    lines.join("\n")
}

#[test]
fn push_then_pull_carries_state_and_notes() {
    let n = net(PLAN);
    let a = n.machine("alpha");
    a.boulder(&["stream", "init"]).ok();
    a.boulder(&["hooks", "install"]).ok();
    commit_in(&a, &a.dir.join(".boulder/worktrees/auth"), "src/auth/a.rs", "a\n", "auth work");
    a.boulder(&["prd", "done", "US-003"]).ok();
    let r = a.boulder(&["push"]).ok();
    assert_shown!("push_new_refs", r);
    // The remote holds the refs, as plain git sees them.
    let remote_refs = a.git_out(&["ls-remote", n.bare.to_str().unwrap()]);
    for r in ["refs/boulder/streams/auth", "refs/boulder/boulders/auth", "refs/boulder/prd", "refs/notes/boulder"] {
        assert!(remote_refs.contains(r), "{r} missing:\n{remote_refs}");
    }
    assert!(!remote_refs.contains("claims"), "{remote_refs}");

    let b = n.machine("beta");
    let r = b.boulder(&["pull", "--json"]).ok();
    let j = r.json();
    assert!(j["refs"].as_array().unwrap().iter().any(|x| x["result"] == "created"), "{}", r.stdout);
    assert_eq!(state_refs(&a), state_refs(&b));
    assert_eq!(notes(&a), notes(&b));
    assert_eq!(b.state("refs/boulder/prd")["done"], serde_json::json!(["US-003"]));
    assert_eq!(b.state("refs/boulder/boulders/auth")["iteration"], 1);
    // A path recorded by another machine never decides a local one.
    let st = b.boulder(&["status", "--json"]).ok().json();
    assert!(st["streams"][0]["worktree"].is_null(), "{st}");
    let p = b.boulder(&["stream", "path", "auth"]).code(2);
    assert_shown!("stream_path_without_a_worktree", p);
    b.assert_fsck();
    // Pulling again changes nothing.
    let before = state_refs(&b);
    let r = b.boulder(&["pull"]).ok();
    assert_shown!("pull_up_to_date", r);
    assert_eq!(state_refs(&b), before);
}

#[test]
fn a_rejected_push_pulls_merges_and_pushes_again() {
    let n = net(PLAN);
    let a = n.machine("alpha");
    let b = n.machine("beta");
    a.boulder(&["prd", "done", "US-001"]).ok();
    b.boulder(&["prd", "done", "US-002"]).ok();
    a.boulder(&["push"]).ok();
    let r = b.boulder(&["push", "--json"]).ok();
    let j = r.json();
    assert!(j["rounds"].as_u64().unwrap() >= 1, "{}", r.stdout);
    a.boulder(&["pull"]).ok();
    for m in [&a, &b] {
        assert_eq!(m.state("refs/boulder/prd")["done"], serde_json::json!(["US-001", "US-002"]));
    }
    assert_eq!(state_refs(&a), state_refs(&b));
    assert_eq!(
        a.git_out(&["rev-parse", "refs/boulder/prd"]),
        b.git_out(&["ls-remote", n.bare.to_str().unwrap(), "refs/boulder/prd"]).split_whitespace().next().unwrap()
    );
}

#[test]
fn three_machines_syncing_in_random_orders_converge_and_lose_nothing() {
    let n = net(PLAN);
    let machines: Vec<TestRepo> = ["m0", "m1", "m2"].iter().map(|m| n.machine(m)).collect();
    let mut rng = fastrand::Rng::with_seed(7);
    let mut made = 0;
    let mut done = std::collections::BTreeSet::new();
    for m in &machines {
        m.boulder(&["stream", "init"]).ok();
        m.boulder(&["hooks", "install"]).ok();
    }
    for round in 0..4 {
        let mut order: Vec<usize> = (0..3).collect();
        rng.shuffle(&mut order);
        for &i in &order {
            let m = &machines[i];
            for stream in ["auth", "api"] {
                if rng.bool() {
                    let wt = m.dir.join(".boulder/worktrees").join(stream);
                    commit_in(
                        m,
                        &wt,
                        &format!("src/{stream}/r{round}.rs"),
                        format!("{i}\n"),
                        &format!("{stream} by m{i} in round {round}"),
                    );
                    made += 1;
                }
            }
            if rng.u8(..4) == 0 {
                let id = ["US-001", "US-002", "US-003"][rng.usize(..3)];
                m.boulder(&["prd", "done", id]).ok();
                done.insert(id);
            }
            if rng.bool() {
                m.boulder(&["sync"]).ok();
            }
        }
    }
    // Everyone syncs until all agree.
    for _ in 0..2 {
        for m in &machines {
            m.boulder(&["sync"]).ok();
        }
    }
    let (refs0, notes0) = (state_refs(&machines[0]), notes(&machines[0]));
    for m in &machines[1..] {
        assert_eq!(state_refs(m), refs0);
        assert_eq!(notes(m), notes0);
    }
    let m = &machines[0];
    let total = m.state("refs/boulder/boulders/auth")["iteration"].as_u64().unwrap()
        + m.state("refs/boulder/boulders/api")["iteration"].as_u64().unwrap();
    assert_eq!(total, made, "every recorded commit counts once");
    assert_eq!(notes0.lines().count(), made as usize, "every commit keeps its note");
    let got: std::collections::BTreeSet<String> = m.state("refs/boulder/prd")["done"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, done.iter().map(|s| s.to_string()).collect());
    for m in &machines {
        m.assert_fsck();
        // Each machine's stream commits stay on its own branch (never pushed): doctor names them
        // as stranded work, and nothing else.
        let doc = m.boulder(&["doctor", "--json"]).json();
        let areas: Vec<&str> =
            doc["problems"].as_array().unwrap().iter().map(|p| p["area"].as_str().unwrap()).collect();
        assert!(areas.iter().all(|a| *a == "work"), "{doc}");
    }
}

#[test]
fn garbage_pushed_by_a_hostile_clone_is_refused_and_local_state_kept() {
    let n = net(PLAN);
    let a = n.machine("alpha");
    a.boulder(&["stream", "init"]).ok();
    a.boulder(&["hooks", "install"]).ok();
    commit_in(&a, &a.dir.join(".boulder/worktrees/auth"), "src/auth/a.rs", "a\n", "auth work");
    a.boulder(&["push"]).ok();
    let evil = n.machine("evil");
    evil.boulder(&["pull"]).ok();
    // A commit on top of the stream's op-log whose op.json is nonsense.
    let tip = evil.git_out(&["rev-parse", "refs/boulder/streams/auth"]);
    let dir = evil.dir.clone();
    std::fs::write(dir.join("op.json"), "{\"v\": 1, \"kind\": \"explode\"}").unwrap();
    std::fs::write(dir.join("state.json"), "{\"status\": \"MERGED\"}").unwrap();
    let op = evil.git_out(&["hash-object", "-w", "op.json"]);
    let st = evil.git_out(&["hash-object", "-w", "state.json"]);
    let tree = {
        let mut c = evil.command("git");
        let mut child =
            c.args(["mktree"]).current_dir(&dir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        use std::io::Write;
        write!(child.stdin.take().unwrap(), "100644 blob {op}\top.json\n100644 blob {st}\tstate.json\n").unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap().trim().to_string()
    };
    let bad = evil.git_out(&["commit-tree", &tree, "-p", &tip, "-m", "garbage"]);
    // Garbage notes: a note that is not a git-boulder record.
    let head = evil.git_out(&["rev-parse", "HEAD"]);
    evil.git(&["notes", "--ref=boulder", "add", "-f", "-m", "rm -rf /", &head]).ok();
    evil.git(&[
        "push",
        "-q",
        "--force",
        "origin",
        &format!("{bad}:refs/boulder/streams/auth"),
        "refs/notes/boulder:refs/notes/boulder",
    ])
    .ok();

    let before = a.git_out(&["rev-parse", "refs/boulder/streams/auth"]);
    let notes_before = a.git_out(&["rev-parse", "refs/notes/boulder"]);
    let r = a.boulder(&["pull"]).code(1);
    assert!(r.stderr.contains("refs/boulder/streams/auth") && r.stderr.contains("refs/notes/boulder"), "{}", r.stderr);
    assert!(r.stdout.contains("refused refs/boulder/streams/auth"), "{}", r.stdout);
    assert_eq!(a.git_out(&["rev-parse", "refs/boulder/streams/auth"]), before);
    assert_eq!(a.git_out(&["rev-parse", "refs/notes/boulder"]), notes_before);
    assert_eq!(a.state("refs/boulder/streams/auth")["status"], "INITIALIZED");
    a.boulder(&["status"]).ok();
    a.assert_fsck();
    // A fresh machine pulling the garbage gets nothing of it either.
    let c = n.machine("gamma");
    c.boulder(&["pull"]).code(1);
    assert!(c.git(&["rev-parse", "--verify", "-q", "refs/boulder/streams/auth"]).code != 0);
    assert!(!c.git(&["rev-parse", "--verify", "-q", "refs/boulder/boulders/auth"]).ok().stdout.is_empty());
}

fn claim_race(n: &Net) {
    let a = n.machine("alpha");
    let b = n.machine("beta");
    for round in 0..4 {
        let spawn = |m: &TestRepo| -> Child {
            let mut c = m.command(bin());
            c.args(["stream", "claim", "auth"])
                .current_dir(&m.dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (ca, cb) = (spawn(&a), spawn(&b));
        let (oa, ob) = (ca.wait_with_output().unwrap(), cb.wait_with_output().unwrap());
        let wins = [&oa, &ob].iter().filter(|o| o.status.success()).count();
        assert_eq!(
            wins,
            1,
            "round {round}: exactly one winner\n{}\n{}",
            String::from_utf8_lossy(&oa.stderr),
            String::from_utf8_lossy(&ob.stderr)
        );
        for o in [&oa, &ob] {
            if !o.status.success() {
                assert_eq!(o.status.code(), Some(1));
            }
        }
        let winner = if oa.status.success() { &a } else { &b };
        let loser = if oa.status.success() { &b } else { &a };
        // The loser cannot release the winner's claim; the winner can.
        loser.boulder(&["stream", "release", "auth"]).code(1);
        let st = loser.boulder(&["status", "--json"]).ok().json();
        assert_eq!(st["streams"][0]["claim"]["mine"], false, "{st}");
        let st = winner.boulder(&["status", "--json"]).ok().json();
        assert_eq!(st["streams"][0]["claim"]["mine"], true, "{st}");
        winner.boulder(&["stream", "release", "auth"]).ok();
    }
    // An expired lease is taken over.
    a.boulder(&["stream", "claim", "auth", "--ttl", "1m"]).ok();
    b.boulder(&["stream", "claim", "auth"]).code(1);
    // A lease outlived: the test's clock (each command one second on) moves past its end.
    a.clock.advance(std::time::Duration::from_secs(90));
    let r = b.boulder(&["stream", "claim", "auth"]).ok();
    assert!(r.stdout.contains("took over the expired claim"), "{}", r.stdout);
    b.boulder(&["stream", "release", "auth"]).ok();
    assert!(!a.git_out(&["ls-remote", n.bare.to_str().unwrap()]).contains("claims"));
}

#[test]
fn two_machines_claiming_one_stream_get_one_winner() {
    claim_race(&net(PLAN));
}

#[test]
fn stream_run_takes_the_claim_first() {
    let plan = PLAN.replace("  base_branch: main\n", "  base_branch: main\n  claim_remote: origin\n");
    let n = net(&plan);
    let a = n.machine("alpha");
    let b = n.machine("beta");
    a.boulder(&["stream", "init", "auth"]).ok();
    b.boulder(&["stream", "claim", "auth"]).ok();
    let r = a.boulder(&["stream", "run", "auth", "--max-iterations", "1", "--", "true"]).code(1);
    assert_shown!("run_claimed_elsewhere", r);
    b.boulder(&["stream", "release", "auth"]).ok();
    let r = a.boulder(&["stream", "run", "auth", "--max-iterations", "1", "--", "true"]).ok();
    assert_shown!("run_claims_and_releases", r);
    assert!(!a.git_out(&["ls-remote", n.bare.to_str().unwrap()]).contains("claims"));
}

#[test]
fn remote_setup_lets_plain_git_carry_state_and_undo_restores_the_config() {
    let n = net(PLAN);
    let a = n.machine("alpha");
    let b = n.machine("beta");
    let config_before = std::fs::read(b.dir.join(".git/config")).unwrap();
    for m in [&a, &b] {
        let r = m.boulder(&["remote", "setup"]).ok();
        assert!(
            r.stdout.contains("+remote.origin.fetch +refs/boulder/*:refs/boulder-remotes/origin/*"),
            "{}",
            r.stdout
        );
        // Twice changes nothing.
        assert!(m.boulder(&["remote", "setup"]).ok().stdout.contains("nothing to change"));
    }
    a.boulder(&["prd", "done", "US-001"]).ok();
    a.write("feature.txt", "x\n");
    a.commit_all("a feature");
    // Plain git push carries the branch and the state.
    a.git(&["push", "-q"]).ok();
    let remote_refs = a.git_out(&["ls-remote", n.bare.to_str().unwrap()]);
    assert!(remote_refs.contains("refs/boulder/prd"), "{remote_refs}");
    assert!(remote_refs.contains(&a.git_out(&["rev-parse", "HEAD"])), "the branch was pushed too:\n{remote_refs}");
    // Plain git fetch brings it; the next git-boulder command takes it in.
    b.git(&["fetch", "-q"]).ok();
    assert!(b.git(&["rev-parse", "--verify", "-q", "refs/boulder/prd"]).code != 0);
    b.git(&["rev-parse", "--verify", "refs/boulder-remotes/origin/prd"]).ok();
    b.boulder(&["status"]).ok();
    assert_eq!(b.state("refs/boulder/prd")["done"], serde_json::json!(["US-001"]));
    // Undo restores the config byte for byte.
    b.boulder(&["remote", "setup", "--undo"]).ok();
    assert_eq!(std::fs::read(b.dir.join(".git/config")).unwrap(), config_before);
    b.boulder(&["remote", "setup", "nope"]).code(2);
}

/// A child process killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_port(port: u16) {
    wait_for(&format!("a listener on 127.0.0.1:{port}"), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
}

/// Push, pull, sync and a claim race over a URL.
fn over(n: &Net, url: &str) {
    let a = n.machine_from("alpha", url);
    let b = n.machine_from("beta", url);
    a.boulder(&["stream", "init", "auth"]).ok();
    a.boulder(&["prd", "done", "US-001"]).ok();
    a.boulder(&["push"]).ok();
    b.boulder(&["prd", "done", "US-002"]).ok();
    let r = b.boulder(&["sync"]).ok();
    assert!(r.stdout.contains("pulled from origin") && r.stdout.contains("pushed to origin"), "{}", r.stdout);
    a.boulder(&["pull"]).ok();
    assert_eq!(state_refs(&a), state_refs(&b));
    assert_eq!(a.state("refs/boulder/prd")["done"], serde_json::json!(["US-001", "US-002"]));
    assert_eq!(b.state("refs/boulder/streams/auth")["status"], "INITIALIZED");
    b.boulder(&["stream", "claim", "auth"]).ok();
    a.boulder(&["stream", "claim", "auth"]).code(1);
    b.boulder(&["stream", "release", "auth"]).ok();
    a.boulder(&["stream", "claim", "auth"]).ok();
}

#[test]
fn over_git_daemon() {
    let n = net(PLAN);
    let server = GitDaemon::serve(&n.root);
    over(&n, &server.url("remote.git"));
}

#[test]
fn over_smart_http() {
    let n = net(PLAN);
    let port_file = n.root.join("http.port");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/git_http.py");
    let mut c = Command::new("python3");
    fixed_env(&mut c, &n.root);
    let child = c
        .arg(script)
        .arg(&n.root)
        .arg(&port_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let _server = Server(child);
    wait_for("the HTTP server's port", || {
        std::fs::read_to_string(&port_file).is_ok_and(|p| p.trim().parse::<u16>().is_ok())
    });
    let port: u16 = std::fs::read_to_string(&port_file).expect("the HTTP server did not start").trim().parse().unwrap();
    wait_for_port(port);
    over(&n, &format!("http://127.0.0.1:{port}/remote.git"));
}

#[test]
fn bad_remotes_are_clear_errors() {
    let n = net(PLAN);
    let a = n.machine("alpha");
    let r = a.boulder(&["pull", "/nonexistent/remote.git"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_shown!("pull_from_a_missing_remote", r);
    a.git(&["remote", "remove", "origin"]).ok();
    let r = a.boulder(&["push"]).code(2);
    assert_shown!("push_without_a_remote", r);
    // A URL works without a configured remote.
    a.boulder(&["prd", "done", "US-001"]).ok();
    a.boulder(&["push", n.bare.to_str().unwrap()]).ok();
    assert!(a.git_out(&["ls-remote", n.bare.to_str().unwrap()]).contains("refs/boulder/prd"));
}

#[test]
fn a_stream_started_elsewhere_continues_from_its_pushed_branch() {
    let n = net(PLAN);
    let a = n.machine("alpha");
    a.boulder(&["stream", "init", "auth"]).ok();
    commit_in(&a, &a.dir.join(".boulder/worktrees/auth"), "src/auth/a.rs", "a\n", "auth work");
    a.git(&["push", "-q", "origin", "boulder/auth"]).ok();
    a.boulder(&["push"]).ok();
    let b = n.machine("beta");
    let r = b.boulder(&["stream", "init", "auth"]).ok();
    assert_shown!("a_stream_started_elsewhere_continues_from_its_pushed_branch", r);
    assert_eq!(b.git_out(&["rev-parse", "boulder/auth"]), a.git_out(&["rev-parse", "boulder/auth"]));
    assert!(b.dir.join(".boulder/worktrees/auth/src/auth/a.rs").exists());
    // Its pull reports the notes ref as created, the rest merged or created.
    let j = b.boulder(&["pull", "--json"]).ok().json();
    assert!(j["refs"].as_array().unwrap().iter().all(|x| x["result"] != "refused"), "{j}");
}

#[test]
fn push_gives_up_at_once_on_a_ref_the_remote_holds_garbage_for() {
    let n = net(PLAN);
    let a = n.machine("alpha");
    a.boulder(&["prd", "done", "US-001"]).ok();
    // Garbage at the remote's refs/boulder/prd: a commit that is not an op-log.
    let evil = n.machine("evil");
    evil.git(&["push", "-q", "origin", "HEAD:refs/boulder/prd"]).ok();
    let r = a.boulder(&["push", "--json"]).code(1);
    assert!(r.stderr.contains("holds invalid state for refs/boulder/prd"), "{}", r.stderr);
    assert_eq!(r.json()["rounds"], 0, "no pointless retries");
}

/// A `git` on PATH that behaves like git before 2.41, which has no `fetch --porcelain`.
fn git_without_fetch_porcelain(root: &Path) -> PathBuf {
    let real = String::from_utf8(Command::new("sh").args(["-c", "command -v git"]).output().unwrap().stdout).unwrap();
    let dir = root.join("old-git");
    std::fs::create_dir_all(&dir).unwrap();
    let shim = dir.join("git");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\nif [ \"$1\" = fetch ]; then for a; do if [ \"$a\" = --porcelain ]; then echo \"error: unknown option \\`porcelain'\" >&2; exit 129; fi; done; fi\nexec {} \"$@\"\n",
            real.trim()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn a_git_without_fetch_porcelain_still_pulls_every_ref() {
    let n = net(PLAN);
    let a = n.machine("alpha");
    a.boulder(&["stream", "init", "auth"]).ok();
    a.boulder(&["prd", "done", "US-003"]).ok();
    a.boulder(&["push"]).ok();
    let b = n.machine("beta");
    let path = format!("{}:{}", git_without_fetch_porcelain(&n.root).display(), std::env::var("PATH").unwrap());
    let r = b.boulder_env(&b.dir, &["pull", "--json"], &[("PATH", &path)]).ok();
    let created = r.json()["refs"].as_array().unwrap().iter().filter(|x| x["result"] == "created").count();
    assert!(created >= 2, "{}", r.stdout);
    assert_eq!(state_refs(&a), state_refs(&b));
    assert_eq!(b.state("refs/boulder/prd")["done"], serde_json::json!(["US-003"]));
    // A second pull finds everything up to date, through the same old git.
    let r = b.boulder_env(&b.dir, &["pull", "--json"], &[("PATH", &path)]).ok();
    assert!(r.json()["refs"].as_array().unwrap().iter().all(|x| x["result"] != "created"), "{}", r.stdout);
}

#[test]
fn a_pull_goes_where_the_users_git_goes_and_prunes_nothing_of_its_own() {
    let n = net(PLAN);
    let a = n.machine("alpha");
    a.boulder(&["stream", "init", "auth"]).ok();
    a.boulder(&["stream", "claim", "auth"]).ok();
    a.boulder(&["push"]).ok();
    // beta reaches the remote only through a `url.<base>.insteadOf` rewrite, and prunes on fetch.
    let b = n.machine("beta");
    b.git(&["config", &format!("url.{}.insteadOf", n.bare.display()), "shared:"]).ok();
    b.git(&["remote", "set-url", "origin", "shared:"]).ok();
    b.git(&["config", "fetch.prune", "true"]).ok();
    b.boulder(&["pull"]).ok();
    assert_eq!(state_refs(&a), state_refs(&b));
    assert_eq!(b.refs("refs/boulder-remotes/origin/claims/"), vec!["refs/boulder-remotes/origin/claims/auth"]);
    // Released on the remote: the next pull says so (a pruning fetch would have dropped the
    // tracking ref silently first).
    a.boulder(&["stream", "release", "auth"]).ok();
    let r = b.boulder(&["pull", "--json"]).ok();
    assert!(r.json()["refs"].as_array().unwrap().iter().any(|x| x["result"] == "claim_released"), "{}", r.stdout);
    assert!(b.refs("refs/boulder-remotes/origin/claims/").is_empty());
    // Nothing outside the refspecs was written: no FETCH_HEAD, no tags.
    assert!(!b.dir.join(".git/FETCH_HEAD").exists());
}

#[test]
fn a_remote_configured_as_a_mirror_still_takes_the_state_and_nothing_else() {
    let n = net(PLAN);
    let a = n.machine("alpha");
    a.git(&["config", "remote.origin.mirror", "true"]).ok();
    a.boulder(&["stream", "init"]).ok();
    a.boulder(&["prd", "done", "US-003"]).ok();
    // git refuses refspecs for a mirror remote; the state's refs are pushed by name all the same.
    let r = a.boulder(&["push"]).ok();
    assert_shown!("a_remote_configured_as_a_mirror_still_takes_the_state_and_nothing_else", r);
    let remote_refs = a.git_out(&["ls-remote", n.bare.to_str().unwrap()]);
    assert!(remote_refs.contains("refs/boulder/prd"), "{remote_refs}");
    // Only the state: not the stream branches a mirror push would have sent.
    assert!(!remote_refs.contains("refs/heads/boulder/"), "{remote_refs}");
    a.boulder(&["sync"]).ok();
}
