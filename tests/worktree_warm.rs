//! Worktrees that start warm: every stream gets a stable small index, and its setup, verify and
//! agent see `BOULDER_STREAM_INDEX` and `BOULDER_PORT`; `.worktreeinclude` copies ignored files
//! into new worktrees; `status` shows a stream whose setup failed.

use std::path::Path;

use crate::common::*;

/// The sample repository with `extra` added under `settings:`, committed and trusted.
fn trusted_sample_with(extra: &str) -> TestRepo {
    let repo = sample();
    set_settings(&repo, extra);
    repo
}

/// Replace the plan's settings additions with `extra`, commit and trust.
fn set_settings(repo: &TestRepo, extra: &str) {
    let plan = SAMPLE_PLAN.replace("settings:\n", &format!("settings:\n{extra}"));
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("plan settings");
    repo.boulder(&["trust"]).ok();
}

fn status_of(repo: &TestRepo, name: &str) -> String {
    let v = repo.boulder(&["status", "--json"]).ok().json();
    let row = v["streams"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap().clone();
    row["status"].as_str().unwrap().to_string()
}

/// What the setup command of a stream wrote: "STREAM INDEX PORT".
fn seen(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("env-seen")).unwrap().trim().to_string()
}

const RECORD_ENV: &str = "  setup: 'echo \"$BOULDER_STREAM $BOULDER_STREAM_INDEX $BOULDER_PORT\" > env-seen'\n";

#[test]
fn setup_sees_a_stable_small_index_and_a_port_of_its_own() {
    let repo = trusted_sample_with(&format!("{RECORD_ENV}  port_base: 4000\n  port_stride: 5\n"));
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    assert_eq!(seen(&repo.worktree("auth")), "auth 1 4005");
    assert_eq!(seen(&repo.worktree("docs")), "docs 2 4010");
    assert_eq!(repo.stream_state("auth")["index"], 1);
    assert_eq!(repo.stream_state("docs")["index"], 2);

    // The plan changes: a new stream comes first. Indexes stay with their streams; the new one
    // takes the lowest index no live stream holds.
    let plan = repo
        .read(".boulder/streams.yaml")
        .replace("streams:\n", "streams:\n  zeta:\n    stories: []\n    paths: [zeta/**]\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("zeta first");
    repo.boulder(&["stream", "init", "zeta"]).ok();
    assert_eq!(seen(&repo.worktree("zeta")), "zeta 3 4015");
    // Setting up again (after a setup failure or a repair) keeps the index.
    std::fs::remove_dir_all(repo.worktree("docs")).unwrap();
    repo.git(&["worktree", "prune"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    assert_eq!(seen(&repo.worktree("docs")), "docs 2 4010");

    // A cleaned-up stream frees its index for the next stream initialized.
    repo.boulder(&["stream", "cleanup", "auth", "--force"]).ok();
    repo.boulder(&["stream", "init", "api"]).ok();
    assert_eq!(seen(&repo.worktree("api")), "api 1 4005");
    assert_eq!(repo.stream_state("api")["index"], 1);
}

#[test]
fn ports_default_to_3000_plus_ten_per_index() {
    let repo = trusted_sample_with(RECORD_ENV);
    repo.boulder(&["stream", "init", "docs"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    assert_eq!(seen(&repo.worktree("docs")), "docs 1 3010");
    assert_eq!(seen(&repo.worktree("auth")), "auth 2 3020");
}

#[test]
fn port_settings_out_of_range_are_refused() {
    for (extra, what) in [
        ("  port_base: 70000\n", "settings.port_base"),
        ("  port_stride: 0\n", "settings.port_stride"),
        ("  port_base: web\n", "settings.port_base"),
    ] {
        let repo = sample();
        let plan = SAMPLE_PLAN.replace("settings:\n", &format!("settings:\n{extra}"));
        repo.write(".boulder/streams.yaml", &plan);
        repo.commit_all("bad port");
        let r = repo.boulder(&["stream", "init", "auth"]).code(2);
        assert!(r.stderr.contains(what), "{extra}: {}", r.stderr);
        assert!(!repo.worktree("auth").exists());
    }
}

#[test]
fn the_agent_and_verify_see_the_index_and_port() {
    let repo = sample();
    let out = repo.tmp.path().join("verify-saw");
    set_settings(
        &repo,
        &format!(
            "  port_base: 5000\n  port_stride: 100\n  verify: 'echo \"$BOULDER_STREAM_INDEX $BOULDER_PORT\" > {}'\n",
            out.display()
        ),
    );
    repo.boulder(&["stream", "init", "docs"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let agent_saw = repo.tmp.path().join("agent-saw");
    let script = format!("echo \"$BOULDER_STREAM $BOULDER_STREAM_INDEX $BOULDER_PORT\" > {}", agent_saw.display());
    repo.boulder(&["stream", "run", "auth", "--max-iterations", "1", "--cooldown", "10ms", "--", "sh", "-c", &script]);
    assert_eq!(std::fs::read_to_string(&agent_saw).unwrap().trim(), "auth 2 5200");

    // verify runs on merge when the base moved.
    let w = repo.worktree("auth");
    std::fs::write(w.join("src/auth/login.rs"), "fn login() {}\n").unwrap();
    repo.git_in(&w, &["add", "-A"]).ok();
    repo.git_in(&w, &["commit", "-q", "-m", "login"]).ok();
    repo.write("README.md", "moved\n");
    repo.commit_all("base moves");
    repo.boulder(&["stream", "merge", "auth", "--force"]).ok();
    assert_eq!(std::fs::read_to_string(&out).unwrap().trim(), "2 5200");
}

#[test]
fn worktreeinclude_copies_the_ignored_files_it_names() {
    let repo = sample();
    repo.write(".gitignore", ".env\n*.local\nbuild/\n");
    repo.write(
        ".worktreeinclude",
        "# local files every worktree needs\n.env\n/config/*.local\n!config/b.local\nnotes.txt\nbuild/\n",
    );
    repo.commit_all("ignore and include");
    repo.write(".env", "SECRET=1\n");
    repo.write("sub/.env", "SUB=1\n");
    repo.write("config/a.local", "a\n");
    repo.write("config/b.local", "b\n");
    repo.write("build/out.bin", "bin\n");
    // Untracked but not ignored: not copied (only ignored files are).
    repo.write("notes.txt", "notes\n");
    // An ignored file that is a symlink leading out of the repository is never followed.
    let outside = repo.tmp.path().join("outside-secret");
    std::fs::write(&outside, "outside\n").unwrap();
    std::os::unix::fs::symlink(&outside, repo.dir.join("config/c.local")).unwrap();

    let r = repo.boulder(&["stream", "init", "docs"]).ok();
    assert_shown!("worktreeinclude_copies_the_ignored_files_it_names", r);
    let w = repo.worktree("docs");
    assert_eq!(std::fs::read_to_string(w.join(".env")).unwrap(), "SECRET=1\n");
    assert_eq!(std::fs::read_to_string(w.join("sub/.env")).unwrap(), "SUB=1\n");
    assert_eq!(std::fs::read_to_string(w.join("config/a.local")).unwrap(), "a\n");
    assert_eq!(std::fs::read_to_string(w.join("build/out.bin")).unwrap(), "bin\n");
    assert!(!w.join("config/b.local").exists(), "negated pattern copied");
    assert!(!w.join("notes.txt").exists(), "a file git does not ignore was copied");
    assert!(std::fs::symlink_metadata(w.join("config/c.local")).is_err(), "symlink out was followed");
    // The worktree stays clean: only ignored files came in.
    assert_eq!(repo.git_in(&w, &["status", "--porcelain"]).ok().stdout, "");
}

#[test]
fn worktreeinclude_patterns_leading_out_are_refused_before_anything_changes() {
    for bad in ["../outside\n", "/../x\n", ".git/config\n"] {
        let repo = sample();
        repo.write(".worktreeinclude", &format!(".env\n{bad}"));
        repo.commit_all("hostile include");
        let r = repo.boulder(&["stream", "init", "docs"]).code(2);
        assert!(r.stderr.contains(".worktreeinclude line 2"), "{bad}: {}", r.stderr);
        assert!(!repo.worktree("docs").exists());
        assert!(repo.refs("refs/boulder/streams/").is_empty());
        assert_eq!(repo.git(&["rev-parse", "--verify", "-q", "refs/heads/boulder/docs"]).code, 1);
    }
}

#[test]
fn status_shows_a_stream_whose_setup_failed_until_setup_succeeds() {
    let repo = trusted_sample_with("  setup: 'echo half > half-done; exit 7'\n");
    let r = repo.boulder(&["stream", "init", "docs"]).code(1);
    assert_shown!("setup_failed", r);
    assert!(repo.worktree("docs").join("half-done").exists(), "the worktree is kept");
    assert!(repo.stream_state("docs")["setup_failed"].as_str().unwrap().contains("exit"));
    assert_eq!(status_of(&repo, "docs"), "SETUP_FAILED");
    assert_eq!(status_of(&repo, "auth"), "DEFINED");
    let human = repo.boulder(&["status"]).ok();
    let line = human.stdout.lines().find(|l| l.starts_with("docs")).unwrap();
    assert!(line.contains("SETUP_FAILED"), "{}", human.stdout);
    assert_shown!("status_with_setup_failed", human);

    // Fixed setup: init sets the stream up again and the mark goes away.
    set_settings(&repo, "  setup: 'echo ok > setup-ok'\n");
    repo.boulder(&["stream", "init", "docs"]).ok();
    assert!(repo.worktree("docs").join("setup-ok").exists(), "setup did not run again");
    assert!(repo.stream_state("docs")["setup_failed"].is_null());
    assert_eq!(status_of(&repo, "docs"), "INITIALIZED");
    // Once set up, init does not run setup again.
    std::fs::remove_file(repo.worktree("docs").join("setup-ok")).unwrap();
    repo.boulder(&["stream", "init", "docs"]).ok();
    assert!(!repo.worktree("docs").join("setup-ok").exists());
}

#[test]
fn two_inits_at_once_never_share_an_index() {
    // Setup takes a while, so both runs pick their index before either records it.
    let repo = trusted_sample_with(&format!(
        "  setup: 'sleep 1; {}'\n",
        &RECORD_ENV["  setup: '".len()..RECORD_ENV.len() - 2]
    ));
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| repo.boulder(&["stream", "init", "auth"]));
        let b = s.spawn(|| repo.boulder(&["stream", "init", "docs"]));
        (a.join().unwrap(), b.join().unwrap())
    });
    a.ok();
    b.ok();
    // Each run saw its own index and port, and recorded the index it saw.
    let mut indexes = Vec::new();
    for name in ["auth", "docs"] {
        let i = repo.stream_state(name)["index"].as_u64().unwrap();
        assert_eq!(seen(&repo.worktree(name)), format!("{name} {i} {}", 3000 + 10 * i));
        indexes.push(i);
    }
    indexes.sort();
    assert_eq!(indexes, [1, 2]);
}

/// Rewrite the stream's single `initialized` commit as an older git-boulder wrote it: no index.
fn drop_recorded_index(repo: &TestRepo, name: &str) {
    let r = format!("refs/boulder/streams/{name}");
    assert_eq!(repo.git_out(&["rev-list", "--count", &r]), "1");
    let mut blobs = Vec::new();
    for file in ["op.json", "state.json"] {
        let text = repo.git_out(&["cat-file", "-p", &format!("{r}:{file}")]);
        let kept: Vec<&str> = text.lines().filter(|l| !l.contains("\"index\"")).collect();
        assert!(kept.len() < text.lines().count(), "{file} had no index");
        let path = repo.tmp.path().join(file);
        std::fs::write(&path, kept.join("\n")).unwrap();
        blobs.push(repo.git_out(&["hash-object", "-w", path.to_str().unwrap()]));
    }
    let listing = repo.tmp.path().join("tree");
    std::fs::write(&listing, format!("100644 blob {}\top.json\n100644 blob {}\tstate.json\n", blobs[0], blobs[1]))
        .unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("git mktree < '{}'", listing.display()))
        .current_dir(&repo.dir)
        .output()
        .unwrap();
    let tree = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let commit = repo.git_out(&["commit-tree", &tree, "-m", "boulder: initialized"]);
    repo.git(&["update-ref", &r, &commit]).ok();
    assert!(repo.stream_state(name).get("index").is_none());
}

#[test]
fn a_stream_initialized_without_an_index_gets_one_at_the_next_init() {
    let repo = trusted_sample_with("  setup: 'true'\n");
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    drop_recorded_index(&repo, "auth");
    // Its agent sees no index until one is recorded.
    let saw = repo.tmp.path().join("agent-saw");
    let script = format!("echo \"[$BOULDER_STREAM_INDEX] [$BOULDER_PORT]\" > {}", saw.display());
    let run = ["stream", "run", "auth", "--max-iterations", "1", "--cooldown", "10ms", "--", "sh", "-c", &script];
    repo.boulder(&run);
    assert_eq!(std::fs::read_to_string(&saw).unwrap().trim(), "[] []");
    // init gives it the lowest free index (docs holds 2), without setting it up again.
    let r = repo.boulder(&["stream", "init", "auth"]).ok();
    assert_shown!("init_records_a_missing_index", r);
    assert_eq!(repo.stream_state("auth")["index"], 1);
    assert_eq!(repo.stream_state("auth")["status"], "STOPPED");
    repo.boulder(&run);
    assert_eq!(std::fs::read_to_string(&saw).unwrap().trim(), "[1] [3010]");
    // Once it has one, init records nothing more.
    let r = repo.boulder(&["stream", "init", "auth"]).ok();
    assert_shown!("init_with_an_index", r);
}
