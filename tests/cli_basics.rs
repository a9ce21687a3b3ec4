//! The foundation commands, driven as a user would: validate, status, prd show/next/done, log,
//! suggest, discovery from subdirectories and worktrees, and hostile input.

use crate::common::*;

#[test]
fn validate_accepts_the_sample_plan() {
    let repo = sample();
    let r = repo.boulder(&["stream", "validate"]).ok();
    assert_shown!("validate_accepts_the_sample_plan", r);
}

#[test]
fn validate_reports_each_problem_and_exits_2() {
    let repo = sample();
    repo.write(
        ".boulder/streams.yaml",
        "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  auth:\n    stories: [US-001, US-999]\n    paths: [src/**]\n    depends_on: [api]\n  api:\n    stories: [US-001]\n    paths: ['src/auth/**', 'src/[x']\n    depends_on: [auth, ghost]\nsettings:\n  path_overlap: error\n",
    );
    let r = repo.boulder(&["stream", "validate"]).code(2);
    let out = format!("{}{}", r.stdout, r.stderr);
    for needle in ["US-999", "US-001", "src/[x", "ghost", "cycle", "src/auth/mod.rs"] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    let j = repo.boulder(&["stream", "validate", "--json"]).code(2).json();
    assert_eq!(j["ok"], false);
    let codes: Vec<&str> = j["findings"].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap()).collect();
    for code in ["unknown_story", "duplicate_story", "glob", "depends_on", "cycle", "overlap"] {
        assert!(codes.contains(&code), "no {code} in {codes:?}");
    }
}

#[test]
fn overlap_follows_the_path_overlap_setting() {
    let repo = sample();
    let plan = |level: &str| {
        format!("version: 1\nstreams:\n  a:\n    stories: [US-001]\n    paths: [src/**]\n  b:\n    stories: [US-003]\n    paths: [src/api/**]\nsettings:\n  path_overlap: {level}\n")
    };
    repo.write(".boulder/streams.yaml", &plan("error"));
    repo.boulder(&["stream", "validate"]).code(2);
    repo.write(".boulder/streams.yaml", &plan("warn"));
    let r = repo.boulder(&["stream", "validate"]).ok();
    assert_shown!("overlap_follows_the_path_overlap_setting", r);
    repo.write(".boulder/streams.yaml", &plan("ignore"));
    let r = repo.boulder(&["stream", "validate"]).ok();
    assert!(!r.stdout.contains("src/api/mod.rs"), "{}", r.stdout);
}

#[test]
fn unknown_key_names_line_and_closest_key() {
    let repo = sample();
    repo.write(".boulder/streams.yaml", "version: 1\nstreams:\n  auth:\n    stories: [US-001]\n    pahts: [src/**]\n");
    let r = repo.boulder(&["stream", "validate"]).code(2);
    assert_shown!("unknown_key_names_line_and_closest_key", r);
}

#[test]
fn syntax_error_names_line_and_column() {
    let repo = sample();
    repo.write(".boulder/streams.yaml", "version: 1\nstreams:\n  auth: [\n");
    let r = repo.boulder(&["status"]).code(2);
    assert_shown!("syntax_error_names_line_and_column", r);
}

#[test]
fn status_lists_streams_as_defined() {
    let repo = sample();
    let r = repo.boulder(&["status"]).ok();
    assert!(r.stdout.starts_with("STREAM"), "{}", r.stdout);
    assert_eq!(r.stdout.lines().count(), 4, "one header line and a row per stream:\n{}", r.stdout);
    let row: Vec<&str> = r.stdout.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[..4], ["auth", "DEFINED", "1/2", "boulder/auth"]);
    assert!(!r.stdout.contains('\x1b'), "colour on a pipe");
    let j = repo.boulder(&["status", "--json"]).ok().json();
    let streams = j["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 3);
    assert_eq!(streams[0]["name"], "auth");
    assert_eq!(streams[0]["status"], "DEFINED");
    assert_eq!(streams[0]["branch"], "boulder/auth");
    assert_eq!(streams[0]["progress"]["done"], 1);
    assert_eq!(streams[0]["progress"]["total"], 2);
    assert_eq!(streams[0]["iteration"], 0);
    assert!(streams[0]["last_activity"].is_null());
    // `stream list` and `stream status` are the same table.
    assert_eq!(repo.boulder(&["stream", "list", "--json"]).ok().json(), j);
    assert_eq!(repo.boulder(&["stream", "status", "--json"]).ok().json(), j);
}

#[test]
fn prd_show_next_done() {
    let repo = sample();
    let all = repo.boulder(&["prd", "show", "--json"]).ok().json();
    assert_eq!(all["total"], 6);
    assert_eq!(all["done"], 1);
    let auth = repo.boulder(&["prd", "show", "--stream", "auth", "--json"]).ok().json();
    let ids: Vec<&str> = auth["stories"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["US-001", "US-002"]);

    let next = repo.boulder(&["prd", "next", "--stream", "api", "--json"]).ok().json();
    assert_eq!(next["id"], "US-003");
    assert_eq!(next["total"], 2);
    assert_eq!(next["remaining"], 2);
    assert!(next["text"].as_str().unwrap().contains("src/api/list.rs"));

    let before = repo.read(".agents/tasks/prd.md");
    repo.boulder(&["prd", "done", "US-003"]).ok();
    assert_eq!(repo.read(".agents/tasks/prd.md"), before, "prd done must not touch the file");
    let next = repo.boulder(&["prd", "next", "--stream", "api", "--json"]).ok().json();
    assert_eq!(next["id"], "US-004");
    assert_eq!(next["remaining"], 1);
    // Recorded in git, readable with plain git.
    let state = repo.git_out(&["cat-file", "-p", "refs/boulder/prd:state.json"]);
    assert!(state.contains("US-003"), "{state}");
    repo.assert_fsck();

    // Unknown ids are refused and nothing is written.
    let tip = repo.git_out(&["rev-parse", "refs/boulder/prd"]);
    let r = repo.boulder(&["prd", "done", "US-404"]).code(2);
    assert_shown!("prd_show_next_done", r);
    assert_eq!(repo.git_out(&["rev-parse", "refs/boulder/prd"]), tip);
}

#[test]
fn prd_next_when_all_done() {
    let repo = sample();
    repo.boulder(&["prd", "done", "US-001"]).ok();
    let next = repo.boulder(&["prd", "next", "--stream", "auth", "--json"]).ok().json();
    assert!(next["id"].is_null());
    assert_eq!(next["remaining"], 0);
    let r = repo.boulder(&["prd", "next", "--stream", "auth"]).ok();
    assert_shown!("prd_next_when_all_done", r);
}

#[test]
fn log_prints_history() {
    let repo = sample();
    repo.boulder(&["prd", "done", "US-001"]).ok();
    repo.boulder(&["prd", "done", "US-003"]).ok();
    let r = repo.boulder(&["log", "prd"]).ok();
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
    let j = repo.boulder(&["log", "prd", "--json"]).ok().json();
    assert_eq!(j[0]["op"]["kind"], "done");
    assert_eq!(j[0]["op"]["data"]["ids"][0], "US-003");
    let r = repo.boulder(&["log", "nosuch"]).code(2);
    assert_shown!("log_prints_history", r);
}

#[test]
fn state_writes_need_no_git_identity() {
    let repo = sample();
    let r = repo.boulder_env(
        &repo.dir,
        &["prd", "done", "US-001"],
        &[("GIT_AUTHOR_NAME", ""), ("GIT_AUTHOR_EMAIL", ""), ("GIT_COMMITTER_NAME", ""), ("GIT_COMMITTER_EMAIL", "")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(repo.git_out(&["log", "-1", "--format=%an", "refs/boulder/prd"]), "git-boulder");
}

#[test]
fn suggest_groups_by_id_prefix_and_paths() {
    let repo = TestRepo::with_files(&[
        (
            ".agents/tasks/prd.md",
            "# PRD\n\n### [ ] US-AUTH-01: Login\nx\n\n### [ ] US-AUTH-02: Logout\ny\n\n### [ ] US-010: Billing page\nEdit `src/billing/page.ts`.\n\n### [ ] US-011: Invoices\nIn src/billing/invoice.ts.\n",
        ),
        ("src/billing/page.ts", "// page\n"),
    ]);
    let r = repo.boulder(&["stream", "suggest"]).ok();
    assert_shown!("suggest_groups_by_id_prefix_and_paths_2", r);
    // The file the tree has, and the one a story adds beside it.
    assert_shown!("suggest_groups_by_id_prefix_and_paths", r);
    assert!(!repo.dir.join(".boulder/streams.yaml").exists(), "suggest without --write wrote");
    repo.boulder(&["stream", "suggest", "--write"]).ok();
    assert!(repo.read(".boulder/streams.yaml").contains("billing:"));
    repo.boulder(&["stream", "validate"]).ok();
    // A second --write refuses to overwrite.
    repo.boulder(&["stream", "suggest", "--write"]).code(2);
}

#[test]
fn discovery_from_subdirectory_git_dir_and_dash_c() {
    let repo = sample();
    let sub = repo.dir.join("src/auth");
    let j = repo.boulder_in(&sub, &["status", "--json"]).ok().json();
    assert_eq!(j["streams"].as_array().unwrap().len(), 3);
    // GIT_DIR + GIT_WORK_TREE from elsewhere.
    let git_dir = repo.dir.join(".git");
    let r = repo.boulder_env(
        &repo.home,
        &["status", "--json"],
        &[("GIT_DIR", git_dir.to_str().unwrap()), ("GIT_WORK_TREE", repo.dir.to_str().unwrap())],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // `git -C dir boulder …` through git itself, with the binary on PATH.
    let bin_dir = std::path::Path::new(bin()).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let mut cmd = repo.command("git");
    let out = cmd
        .env("PATH", path)
        .args(["-C", repo.dir.to_str().unwrap(), "boulder", "status", "--json"])
        .current_dir(&repo.home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn discovery_from_a_linked_worktree_uses_the_main_plan() {
    let repo = sample();
    let wt = repo.tmp.path().join("wt");
    repo.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]).ok();
    // Edit the plan in the main worktree only: it takes effect at once in the linked one.
    let plan = repo.read(".boulder/streams.yaml").replace("  docs:\n    stories: [US-005]\n    paths: [docs/**]\n", "");
    repo.write(".boulder/streams.yaml", &plan);
    let j = repo.boulder_in(&wt, &["status", "--json"]).ok().json();
    assert_eq!(j["streams"].as_array().unwrap().len(), 2);
}

#[test]
fn hostile_input_exits_2_without_panic() {
    let repo = sample();
    for bad in ["../x", "a..b", "HEAD", "x.lock", "-rf"] {
        let r = repo.boulder(&["prd", "show", "--stream", bad]);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        let r = repo.boulder(&["log", bad]);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
    }
    // A stream named badly in the plan.
    repo.write(".boulder/streams.yaml", "version: 1\nstreams:\n  ../x:\n    stories: []\n");
    let r = repo.boulder(&["stream", "validate"]).code(2);
    assert!(r.stdout.contains("../x") || r.stderr.contains("../x"), "{}{}", r.stdout, r.stderr);
    // Not UTF-8.
    std::fs::write(repo.dir.join(".boulder/streams.yaml"), b"version: 1\nstreams: \xff\xfe\n").unwrap();
    let r = repo.boulder(&["status"]).code(2);
    assert_shown!("hostile_input_exits_2_without_panic", r);
    // Broken YAML of every sort.
    for text in ["{{{{", "version: [", "streams: 5", "- a\n- b", "version: 2", "\t\tx: y"] {
        repo.write(".boulder/streams.yaml", text);
        let r = repo.boulder(&["stream", "validate"]);
        assert_eq!(r.code, 2, "{text:?}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
    assert!(repo.refs("refs/boulder/").is_empty(), "hostile input wrote state");
}

#[test]
fn missing_prd_and_missing_plan_exit_2() {
    let repo = TestRepo::with_files(&[("README.md", "x\n")]);
    let r = repo.boulder(&["status"]).code(2);
    assert_shown!("missing_prd_and_missing_plan_exit_2_3", r);
    let r = repo.boulder(&["prd", "show"]).code(2);
    assert_shown!("missing_prd_and_missing_plan_exit_2", r);
    let r = repo.boulder(&["stream", "suggest"]).code(2);
    assert_shown!("missing_prd_and_missing_plan_exit_2_2", r);
}

#[test]
fn empty_repository_and_no_repository() {
    let repo = TestRepo::empty();
    repo.write(".boulder/streams.yaml", SAMPLE_PLAN);
    repo.write(".agents/tasks/prd.md", SAMPLE_PRD);
    // No commits: reading works, and nothing panics.
    let r = repo.boulder(&["stream", "validate"]);
    assert!(r.code == 0 || r.code == 2, "{}", r.stderr);
    repo.boulder(&["status", "--json"]).ok();
    let outside = tempfile::tempdir().unwrap();
    let r = repo.boulder_in(outside.path(), &["status"]).code(2);
    assert_shown!("empty_repository_and_no_repository", r);
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let repo = sample();
    repo.boulder(&["no-such-command"]).code(2);
    repo.boulder(&["prd", "done"]).code(2);
    let r = repo.boulder(&["--help"]).ok();
    assert_shown!("usage_errors_exit_2_and_help_exits_0", r);
}

/// A user whose git makes reftable or SHA-256 repositories by default still gets the demo: its
/// repositories are made in the formats git-boulder reads.
#[test]
fn the_demo_runs_whatever_formats_the_users_git_defaults_to() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let config = tmp.path().join("gitconfig");
    std::fs::write(&config, "[init]\n\tdefaultRefFormat = reftable\n\tdefaultObjectFormat = sha256\n").unwrap();
    let dir = tmp.path().join("demo");
    let mut cmd = std::process::Command::new(bin());
    fixed_env(&mut cmd, &home);
    cmd.env("GIT_CONFIG_GLOBAL", &config);
    let out = cmd.args(["demo", dir.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    for repo in ["notes", "remote.git"] {
        let out = std::process::Command::new("git")
            .args(["rev-parse", "--show-ref-format", "--show-object-format"])
            .current_dir(dir.join(repo))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "files\nsha1\n", "{repo}");
    }
}

#[test]
fn demo_runs_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let dir = tmp.path().join("demo");
    let mut cmd = std::process::Command::new(bin());
    fixed_env(&mut cmd, &home);
    let out = cmd.args(["demo", dir.to_str().unwrap()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("plan ok") && stdout.contains("STREAM"), "{stdout}");
    assert!(stdout.contains("Push refused") && stdout.contains("src/auth/backdoor.txt"), "{stdout}");
    let repo = dir.join("notes");
    assert!(repo.join(".boulder/worktrees/auth/src/auth/session.txt").exists());
    // Checked with plain git: notes on the agents' commits, state in refs, the stray commit gone.
    let git = |args: &[&str]| {
        let mut cmd = std::process::Command::new("git");
        fixed_env(&mut cmd, &home);
        let out = cmd.args(args).current_dir(&repo).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // 2 auth commits + their 2 rebased copies (notes carried), 2 api (one undone), 2 docs + their 2
    // copies rebased onto main to resolve its refused landing.
    assert_eq!(git(&["notes", "--ref=boulder", "list"]).lines().count(), 10);
    assert!(git(&["cat-file", "-p", "refs/boulder/boulders/auth:state.json"]).contains("\"iteration\": 2"));
    assert!(!git(&["ls-remote", "../remote.git"]).is_empty());
    assert_eq!(
        git(&["ls-tree", "-r", "--name-only", "boulder/api"]).lines().filter(|l| l.contains("backdoor")).count(),
        0
    );
    // auth was merged (rebased onto the moved main, PRD synced); docs was refused for a conflict.
    assert!(stdout.contains("BOTH_MODIFIED") && stdout.contains("README.md"), "{stdout}");
    assert_eq!(git(&["log", "-1", "--format=%s", "main"]).trim(), "chore(prd): sync completion from stream auth");
    assert!(std::fs::read_to_string(repo.join(".agents/tasks/prd.md")).unwrap().contains("[x] US-AUTH-02"));
    assert!(git(&["cat-file", "-p", "refs/boulder/streams/auth:state.json"]).contains("MERGED"));
    let docs = git(&["cat-file", "-p", "refs/boulder/streams/docs:state.json"]);
    assert!(docs.contains("INITIALIZED") && docs.contains("\"refusal\": \"conflict\""), "{docs}");
    // The teammate's clone pulled the same state.
    let mate = |args: &[&str]| {
        let mut cmd = std::process::Command::new("git");
        fixed_env(&mut cmd, &home);
        let out = cmd.args(args).current_dir(dir.join("teammate")).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let refs = ["refs/boulder/streams/auth", "refs/boulder/boulders/auth", "refs/boulder/prd"];
    for r in refs {
        assert_eq!(git(&["rev-parse", r]), mate(&["rev-parse", r]), "{r}");
    }
}

/// A test that calls the library in this process sees a fresh machine's git (`lib_env!()`): no
/// user or system config, no identity, whatever the runner's `HOME` holds.
#[test]
fn library_tests_see_no_user_git_config() {
    lib_env!();
    let home = std::path::PathBuf::from(std::env::var_os("HOME").unwrap());
    assert!(home.starts_with(std::env::temp_dir()), "HOME is not a temp folder: {}", home.display());
    assert_eq!(std::env::var("GIT_CONFIG_GLOBAL").as_deref(), Ok("/dev/null"));
    assert_eq!(std::env::var("GIT_CONFIG_NOSYSTEM").as_deref(), Ok("1"));
    assert!(std::env::var_os("GIT_AUTHOR_NAME").is_none() && std::env::var_os("BOULDER_NOW").is_none());
    let repo = TestRepo::empty();
    let gix = gix::open(&repo.dir).unwrap();
    let config = gix.config_snapshot();
    assert_eq!(config.string("user.name"), None, "the library reads a user's git config");
    assert_eq!(config.string("user.email"), None, "the library reads a user's git config");
}
