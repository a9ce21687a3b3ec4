//! What a repository or a remote can make git-boulder do: worktrees stay where the user expects,
//! copy_into_worktree never leaves the trees, hostile text is printed inert, and fetched state is
//! size-bounded and checked against its ref name.

use std::path::{Path, PathBuf};

use crate::common::*;

/// Nothing of `stream init` happened: no branch, no state, no worktree registered.
#[track_caller]
fn nothing_created(repo: &TestRepo) {
    assert!(repo.refs("refs/heads/boulder/").is_empty());
    assert!(repo.refs("refs/boulder/").is_empty());
    assert_eq!(repo.git_out(&["worktree", "list"]).lines().count(), 1);
}

// ---- worktree_dir --------------------------------------------------------------------------

#[test]
fn worktree_dir_outside_is_a_validation_error_and_nothing_is_created() {
    let elsewhere = tempfile::tempdir().unwrap();
    let elsewhere = std::fs::canonicalize(elsewhere.path()).unwrap();
    let dirs = ["../../outside".to_string(), elsewhere.join("wt").display().to_string(), "../.ssh".into()];
    for (case, dir) in ["up_out", "elsewhere", "dot_ssh"].into_iter().zip(dirs) {
        let repo = sample_with(&format!("  worktree_dir: '{dir}'\n"));
        let r = repo.boulder(&["stream", "init", "auth"]).code(2);
        assert_shown!(format!("worktree_dir_outside_{case}"), r);
        nothing_created(&repo);
        assert!(!repo.tmp.path().parent().unwrap().join("outside").exists());
        assert!(!elsewhere.join("wt").exists());
        let v = repo.boulder(&["stream", "validate", "--json"]).code(2);
        let codes: Vec<String> =
            v.json()["findings"].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap().to_string()).collect();
        assert!(codes.contains(&"worktree_dir".to_string()), "{codes:?}");
    }
}

#[test]
fn worktree_dir_in_the_git_folder_is_refused_so_no_checkout_becomes_git_hooks() {
    for (case, dir) in [("git", ".git"), ("git_hooks_up", ".git/hooks/.."), ("dot_git_worktrees", "./.git/worktrees")] {
        // A stream named `hooks` would be checked out as .git/hooks: its files, git's hooks.
        let repo = sample_with(&format!("  worktree_dir: '{dir}'\n"));
        let plan = repo.read(".boulder/streams.yaml").replacen("  auth:", "  hooks:", 1);
        repo.write(".boulder/streams.yaml", &plan);
        repo.commit_all("hooks");
        let hooks_before = files_in(&repo.dir.join(".git/hooks"));
        let r = repo.boulder(&["stream", "init", "hooks"]).code(2);
        assert_shown!(format!("worktree_dir_in_the_git_folder_{case}_init"), r);
        nothing_created(&repo);
        assert_eq!(files_in(&repo.dir.join(".git/hooks")), hooks_before, "{dir}");
        let v = repo.boulder(&["stream", "validate"]).code(2);
        assert_shown!(format!("worktree_dir_in_the_git_folder_{case}_validate"), v);
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn a_plan_names_only_remotes_configured_here_never_a_path_whose_hooks_git_would_run() {
    let repo = sample();
    // A bare repository committed in the project, with a hook git runs on a push to it.
    let bare = repo.dir.join("tools/r.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]).ok();
    let pwned = repo.tmp.path().join("PWNED");
    let hook = bare.join("hooks/pre-receive");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", pwned.display())).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    repo.with_settings("  claim_remote: tools/r.git\n  merge_remote: tools/r.git\n");
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["prd", "done", "US-001"]).ok();
    for args in
        [&["stream", "claim", "auth"][..], &["stream", "run", "auth", "--", "true"], &["stream", "merge", "auth"]]
    {
        let r = repo.boulder(args).code(2);
        assert!(r.stderr.contains("is not a remote of this repository"), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("git remote add"), "{}", r.stderr);
        assert!(!pwned.exists(), "{args:?} ran the committed hook");
    }
    // A remote the user configured, under that name: used.
    let far = Remote::new(&[("README.md", "far\n")]);
    repo.git(&["remote", "add", "team", far.bare.to_str().unwrap()]).ok();
    let plan = repo.read(".boulder/streams.yaml").replace("claim_remote: tools/r.git", "claim_remote: team");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("team");
    let r = repo.boulder(&["stream", "claim", "auth"]).ok();
    assert!(r.stdout.contains("claimed stream auth on team"), "{}", r.stdout);
}

#[test]
fn worktree_dir_through_a_symlink_out_is_refused() {
    let elsewhere = tempfile::tempdir().unwrap();
    let repo = sample_with("  worktree_dir: wtlink/trees\n");
    std::os::unix::fs::symlink(elsewhere.path(), repo.dir.join("wtlink")).unwrap();
    let r = repo.boulder(&["stream", "init", "auth"]).code(2);
    assert_shown!("worktree_dir_through_a_symlink_out_is_refused", r);
    nothing_created(&repo);
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    // The user's own git config names the place: allowed.
    let real = std::fs::canonicalize(elsewhere.path()).unwrap();
    repo.git(&["config", "boulder.worktreeRoot", real.to_str().unwrap()]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    assert!(real.join("trees/auth/src/auth/mod.rs").is_file());
}

#[test]
fn worktrees_beside_the_repository_are_allowed() {
    let repo = sample_with("  worktree_dir: ../repo-worktrees\n");
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.parent().unwrap().join("repo-worktrees/auth");
    assert!(wt.join("src/auth/mod.rs").is_file());
    assert_eq!(repo.boulder(&["stream", "path", "auth"]).ok().stdout.trim(), wt.display().to_string());
}

// ---- copy_into_worktree ----------------------------------------------------------------------

#[test]
fn copy_into_worktree_never_leaves_the_trees() {
    // A fake home with a secret, and a folder outside both trees.
    let repo = sample();
    let ssh = repo.home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY\n").unwrap();
    let outside = repo.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // The base has `cfg` as a symlink out; the main worktree has a real cfg/ folder instead.
    std::os::unix::fs::symlink(&outside, repo.dir.join("cfg")).unwrap();
    repo.commit_all("cfg link");
    std::fs::remove_file(repo.dir.join("cfg")).unwrap();
    repo.write("cfg/local.toml", "x = 1\n");
    // Symlinks in the main worktree that lead out.
    std::os::unix::fs::symlink("/etc/passwd", repo.dir.join(".env")).unwrap();
    std::os::unix::fs::symlink(&ssh, repo.dir.join("keys")).unwrap();
    repo.write("ok.local", "fine\n");
    std::fs::write(repo.dir.join(".git/info/exclude"), ".env\nkeys\nok.local\ncfg/\n").unwrap();
    let plan = repo
        .read(".boulder/streams.yaml")
        .replace("settings:\n", "settings:\n  copy_into_worktree: [.env, keys/, 'keys/*', ok.local, cfg/]\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.git(&["add", ".boulder/streams.yaml"]).ok();
    repo.git(&["commit", "-q", "-m", "copy"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    assert_eq!(std::fs::read_to_string(wt.join("ok.local")).unwrap(), "fine\n");
    assert!(std::fs::symlink_metadata(wt.join(".env")).is_err(), "a symlink to /etc/passwd was followed");
    assert!(std::fs::symlink_metadata(wt.join("keys")).is_err(), "a symlink to ~/.ssh was followed");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "wrote through the worktree's symlink");

    // `..` and absolute globs are refused by name, and write nothing.
    for bad in ["../secret", "/etc/passwd", "/etc/*", "src/../../x"] {
        let repo = sample();
        repo.write("../secret", "s\n");
        let plan = repo
            .read(".boulder/streams.yaml")
            .replace("settings:\n", &format!("settings:\n  copy_into_worktree: ['{bad}']\n"));
        repo.write(".boulder/streams.yaml", &plan);
        let r = repo.boulder(&["stream", "init", "auth"]).code(2);
        assert!(r.stderr.contains("copy_into_worktree"), "{bad}: {}", r.stderr);
        nothing_created(&repo);
        let wt = repo.dir.join(".boulder/worktrees/auth");
        assert!(!wt.join("secret").exists() && !wt.join("passwd").exists() && !wt.join("etc").exists());
    }
}

// ---- inert output --------------------------------------------------------------------------

const HOSTILE: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m";

#[track_caller]
fn inert(r: &Run, what: &str) {
    for (name, s) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        assert!(
            !s.contains('\u{1b}') && !s.contains('\u{7}') && !s.contains('\u{9b}'),
            "{what}: a control character reached {name}: {s:?}"
        );
    }
}

#[test]
fn hostile_titles_and_checkpoints_print_inert() {
    let repo = sample();
    let prd = repo
        .read(".agents/tasks/prd.md")
        .replace("US-001: Login form", &format!("US-001: Login {HOSTILE}form"))
        .replace("Build `src/auth/login.rs`.", &format!("Build it {HOSTILE}\n\nline two"));
    repo.write(".agents/tasks/prd.md", &prd);
    repo.commit_all("hostile PRD");
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.dir.join(".boulder/worktrees/auth");
    repo.boulder_in(&wt, &["checkpoint", "-m", &format!("half done {HOSTILE}")]).ok();
    repo.boulder_in(&wt, &["todo", "add", &format!("todo {HOSTILE}")]).ok();

    let show = repo.boulder(&["prd", "show"]).ok();
    inert(&show, "prd show");
    assert_shown!("hostile_title_in_prd_show", show);
    let next = repo.boulder(&["prd", "next", "--stream", "auth"]).ok();
    inert(&next, "prd next");
    assert_shown!("hostile_title_in_prd_next", next);
    let resume = repo.boulder_in(&wt, &["resume"]).ok();
    inert(&resume, "resume");
    assert_shown!("hostile_text_in_resume", resume);
    for args in [
        &["status"][..],
        &["list"],
        &["log", "auth"],
        &["todo", "list"],
        &["resume", "--json"],
        &["prd", "show", "--json"],
        &["prd", "next", "--stream", "auth", "--json"],
        &["status", "--json"],
    ] {
        let r = repo.boulder_in(&wt, args);
        inert(&r, &args.join(" "));
    }
    // JSON keeps the text exact, escaped the JSON way.
    let j = repo.boulder(&["prd", "show", "--json"]).ok();
    assert!(j.stdout.contains("\\u001b]0;pwned\\u0007"), "{}", j.stdout);
    // The run loop's progress lines quote the story title.
    let run = repo.boulder(&["stream", "run", "auth", "--max-iterations", "1", "--", "true"]).ok();
    inert(&run, "stream run");
    assert_shown!("hostile_title_in_stream_run", run);
}

#[test]
fn hostile_plan_text_and_errors_print_inert() {
    let repo = sample();
    let plan = repo.read(".boulder/streams.yaml").replace(
        "settings:\n",
        &format!(
            "settings:\n  setup: \"echo '{}'\"\n",
            HOSTILE.replace('\u{1b}', "\\e").replace('\u{7}', "\\a").replace('\u{9b}', "\\x9b")
        ),
    );
    repo.write(".boulder/streams.yaml", &plan);
    let r = repo.boulder(&["stream", "init", "auth"]).code(1);
    inert(&r, "untrusted setup");
    assert_shown!("hostile_plan_text_and_errors_print_inert", r);
    inert(&repo.boulder(&["trust", "--show"]).ok(), "trust --show");
    // A stream name the plan spells with an escape: refused by name, inert.
    let plan = repo.read(".boulder/streams.yaml").replace("  docs:\n", "  \"do\\e[2Jcs\":\n");
    repo.write(".boulder/streams.yaml", &plan);
    inert(&repo.boulder(&["stream", "validate"]), "validate");
    inert(&repo.boulder(&["stream", "init", "do\u{1b}[2Jcs"]), "init of a hostile name");
}

// ---- remotes -------------------------------------------------------------------------------

/// A clone of `origin` (plain git), with the same fixed environment.
fn clone_of(origin: &TestRepo) -> TestRepo {
    TestRepo::clone_from(&origin.dir, "clone")
}

/// Write an op commit holding `op` and `state` in `repo` and point `refname` at it.
fn op_commit(repo: &TestRepo, refname: &str, op: &[u8], state_path: &Path) {
    let op_path = repo.tmp.path().join("op.json");
    std::fs::write(&op_path, op).unwrap();
    let b1 = repo.git_out(&["hash-object", "-w", op_path.to_str().unwrap()]);
    let b2 = repo.git_out(&["hash-object", "-w", state_path.to_str().unwrap()]);
    let tree_file = repo.tmp.path().join("tree.txt");
    std::fs::write(&tree_file, format!("100644 blob {b1}\top.json\n100644 blob {b2}\tstate.json\n")).unwrap();
    let mut cmd = repo.command("git");
    let out =
        cmd.args(["mktree"]).current_dir(&repo.dir).stdin(std::fs::File::open(&tree_file).unwrap()).output().unwrap();
    let tree = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let commit = repo.git_out(&["commit-tree", &tree, "-m", "op"]);
    repo.git(&["update-ref", refname, &commit]).ok();
}

#[test]
fn remote_actor_names_and_misnamed_refs_are_refused_inert() {
    let origin = sample();
    origin.boulder(&["stream", "init", "auth"]).ok();
    // The same op-logs under other names: their state records auth.
    origin.git(&["update-ref", "refs/boulder/streams/evil", "refs/boulder/streams/auth"]).ok();
    origin.git(&["update-ref", "refs/boulder/boulders/evil", "refs/boulder/boulders/auth"]).ok();
    // An op whose actor is a terminal escape.
    let state = origin.tmp.path().join("state.json");
    std::fs::write(&state, br#"{"status":"INITIALIZED","lamport":1}"#).unwrap();
    let op = br#"{"v":1,"kind":"initialized","lamport":1,"at":"2026-01-01T00:00:00Z","actor":"\u001b]0;pwned\u0007\u001b[2J","data":{}}"#;
    op_commit(&origin, "refs/boulder/streams/docs", op, &state);

    let clone = clone_of(&origin);
    let r = clone.boulder(&["pull", "origin"]).code(1);
    inert(&r, "pull");
    assert_shown!("remote_actor_names_and_misnamed_refs_are_refused_inert", r);
    let refs = clone.refs("refs/boulder/");
    assert!(refs.contains(&"refs/boulder/streams/auth".to_string()), "{refs:?}");
    for refused in ["refs/boulder/streams/evil", "refs/boulder/boulders/evil", "refs/boulder/streams/docs"] {
        assert!(!refs.contains(&refused.to_string()), "{refused} was taken: {refs:?}");
    }
    let j = clone.boulder(&["pull", "origin", "--json"]);
    inert(&j, "pull --json");
}

/// Max RSS (KiB) of running git-boulder with `args`, from python's getrusage of its only child.
fn max_rss_kib(repo: &TestRepo, args: &[&str]) -> (Run, u64) {
    // git-boulder's own peak (VmHWM, a high-water mark, sampled until it exits): the git it runs
    // (`git fetch` and its index-pack) is git's cost, the same as a plain `git fetch`.
    let script = "import subprocess, sys, time\n\
                  p = subprocess.Popen(sys.argv[2:])\n\
                  hwm = 0\n\
                  while p.poll() is None:\n\
                  \x20   try:\n\
                  \x20       for line in open('/proc/%d/status' % p.pid):\n\
                  \x20           if line.startswith('VmHWM:'):\n\
                  \x20               hwm = max(hwm, int(line.split()[1]))\n\
                  \x20   except (OSError, ValueError):\n\
                  \x20       pass\n\
                  \x20   time.sleep(0.002)\n\
                  open(sys.argv[1], 'w').write(str(hwm))\n\
                  sys.exit(p.returncode)\n";
    let rss_file = repo.tmp.path().join("rss.txt");
    let mut cmd = repo.command("python3");
    let out = cmd.arg("-c").arg(script).arg(&rss_file).arg(bin()).args(args).current_dir(&repo.dir).output().unwrap();
    let rss = std::fs::read_to_string(&rss_file).unwrap().trim().parse().unwrap();
    (Run::from(out), rss)
}

#[test]
fn a_pull_that_meets_a_50_mb_state_stays_small() {
    let origin = sample();
    let big: PathBuf = origin.tmp.path().join("big-state.json");
    let mut text = String::from(r#"{"status":"RUNNING","reason":""#);
    text.push_str(&"a".repeat(50 * 1024 * 1024));
    text.push_str(r#""}"#);
    std::fs::write(&big, text).unwrap();
    let op = br#"{"v":1,"kind":"status","lamport":1,"at":"2026-01-01T00:00:00Z","actor":"m","data":{}}"#;
    op_commit(&origin, "refs/boulder/streams/big", op, &big);
    // A small tip over a parent commit whose message is 50 MB.
    let msg = origin.tmp.path().join("big-message.txt");
    std::fs::write(&msg, "m".repeat(50 * 1024 * 1024)).unwrap();
    let tree = origin.git_out(&["rev-parse", "refs/boulder/streams/big^{tree}"]);
    let parent = origin.git_out(&["commit-tree", &tree, "-F", msg.to_str().unwrap()]);
    let tip = origin.git_out(&["commit-tree", &tree, "-p", &parent, "-m", "op"]);
    origin.git(&["update-ref", "refs/boulder/streams/bigmsg", &tip]).ok();
    // A notes ref whose commit is over the 64 KiB limit. (Kept small: the fetch itself reads a
    // ref's tip commit whole, before git-boulder sees it.)
    let notes_msg = origin.tmp.path().join("big-notes-message.txt");
    std::fs::write(&notes_msg, "n".repeat(100 * 1024)).unwrap();
    let empty = origin.git_out(&["hash-object", "-t", "tree", "-w", "/dev/null"]);
    let notes = origin.git_out(&["commit-tree", &empty, "-F", notes_msg.to_str().unwrap()]);
    origin.git(&["update-ref", "refs/notes/boulder", &notes]).ok();

    let clone = clone_of(&origin);
    let (r, rss) = max_rss_kib(&clone, &["pull", "origin"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("a_pull_that_meets_a_50_mb_state_stays_small", r);
    assert!(r.stdout.contains(&format!("refs/boulder/streams/bigmsg: refs/boulder/streams/bigmsg: the fetched state is invalid and was not taken: commit {parent} is")), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!("refs/notes/boulder: the fetched notes are invalid: commit {notes} is")),
        "{}",
        r.stdout
    );
    eprintln!("max RSS of git-boulder in a pull meeting a 50 MB state.json and a 50 MB op commit: {rss} KiB");
    assert!(rss < 40 * 1024, "max RSS {rss} KiB is over 40 MiB");
    assert!(clone.refs("refs/boulder/streams/").is_empty());
    assert!(clone.refs("refs/notes/").is_empty());
}

#[test]
fn a_pull_takes_in_at_most_10000_refs() {
    let origin = sample();
    origin.boulder(&["stream", "init", "auth"]).ok();
    // 10 001 boulder refs (all the auth op-log, so each is refused as misnamed, cheaply), sorting
    // before the stream's and the PRD's state.
    let tip = origin.git_out(&["rev-parse", "refs/boulder/streams/auth"]);
    let lines: String = (0..10_001).map(|i| format!("create refs/boulder/boulders/j{i:05} {tip}\n")).collect();
    let input = origin.tmp.path().join("refs.txt");
    std::fs::write(&input, lines).unwrap();
    let mut cmd = origin.command("git");
    let st = cmd
        .args(["update-ref", "--stdin"])
        .current_dir(&origin.dir)
        .stdin(std::fs::File::open(&input).unwrap())
        .status()
        .unwrap();
    assert!(st.success());
    let clone = clone_of(&origin);
    let r = clone.boulder(&["pull", "origin", "--json"]).code(1);
    let refs = r.json()["refs"].as_array().unwrap().clone();
    let over: Vec<_> = refs
        .iter()
        .filter(|o| o["why"].as_str().is_some_and(|w| w.contains("more than 10000 refs in one pull")))
        .collect();
    assert_eq!(refs.len(), 10_001 + 2, "every fetched ref is reported");
    assert_eq!(over.len(), 10_001 + 2 - 10_000, "{over:?}");
    // The state this machine needs is never what is left out, and the refusal stays readable.
    let auth = refs.iter().find(|o| o["name"] == "refs/boulder/streams/auth").expect("the stream's state is reported");
    assert_ne!(auth["result"], "refused", "{auth}");
    assert!(r.stderr.len() < 2_000, "{}", &r.stderr[..2_000.min(r.stderr.len())]);
    assert!(r.stderr.contains("…and ") && r.stderr.contains("--delete"), "{}", r.stderr);
}

#[test]
fn trusted_setup_output_and_validate_findings_print_inert() {
    let repo = sample();
    let plan = repo
        .read(".boulder/streams.yaml")
        .replace("settings:\n", "settings:\n  setup: \"true '\\e]0;x\\a'\"\n")
        .replace("[US-005]", "[US-005, \"US-\\e[2J9\"]");
    repo.write(".boulder/streams.yaml", &plan);
    repo.boulder(&["trust"]).ok();
    let r = repo.boulder(&["stream", "init", "auth"]).ok();
    inert(&r, "init with setup");
    assert_shown!("hostile_setup_in_stream_init", r);
    let v = repo.boulder(&["stream", "validate"]).code(2);
    inert(&v, "validate");
    assert_shown!("hostile_story_id_in_validate", v);
}
