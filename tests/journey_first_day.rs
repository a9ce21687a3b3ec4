//! The first day of a real user: `stream suggest` writes a plan that works, `stream add` adds a
//! stream to a hand-written plan, messages that hold (pipes closed early, inside `.git/`), man
//! pages and completions that are installed and complete from the repository.

use crate::common::*;

const RALPH_PRD: &str = "# PRD: Recipe box\n\n\
### [ ] US-001: Save a recipe\nStore recipes in `src/store/recipes.rs`.\n\n\
### [ ] US-002: List saved recipes\nSorted by title.\n\n\
### [ ] US-003: Billing page\nEdit the pages in src/billing.\n\n\
### [ ] US-004: Invoice emails\nSend them from src/billing/mail.ts.\n\n\
### [ ] US-005: Dark theme\nColours live in src/theme\n";

fn ralph_repo() -> TestRepo {
    TestRepo::with_files(&[
        (".agents/tasks/prd.md", RALPH_PRD),
        ("src/store/recipes.rs", "// store\n"),
        ("src/billing/page.ts", "// page\n"),
        ("src/theme/colours.css", "/* colours */\n"),
    ])
}

#[test]
fn suggest_groups_plain_ids_by_shared_paths_and_words_into_grounded_paths() {
    let repo = ralph_repo();
    // Branches named like the areas already exist: no stream may take their names.
    repo.git(&["branch", "store"]).ok();
    repo.git(&["branch", "boulder-x"]).ok();
    let r = repo.boulder(&["stream", "suggest"]).ok();
    let plan: serde_yaml::Value = serde_yaml::from_str(&r.stdout).unwrap();
    let streams = plan["streams"].as_mapping().unwrap();
    let get = |name: &str| {
        let s = &plan["streams"][name];
        assert!(!s.is_null(), "no stream {name} in\n{}", r.stdout);
        let list =
            |k: &str| s[k].as_sequence().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect::<Vec<_>>();
        (list("stories"), list("paths"))
    };
    assert!(streams.len() >= 3, "plain ids must not all land in one stream:\n{}", r.stdout);
    assert!(plan["streams"]["store"].is_null(), "a stream named like the existing branch `store`:\n{}", r.stdout);
    // A story naming a file owns the file, not its folder.
    assert_eq!(get("store-work"), (vec!["US-001".into(), "US-002".into()], vec!["src/store/recipes.rs".into()]));
    assert_eq!(get("billing"), (vec!["US-003".into(), "US-004".into()], vec!["src/billing/**".into()]));
    // `src/theme` is a directory mention: it becomes a glob that owns what is below it.
    assert_eq!(get("theme"), (vec!["US-005".into()], vec!["src/theme/**".into()]));
    repo.boulder(&["stream", "suggest", "--write"]).ok();
    let v = repo.boulder(&["stream", "validate"]).ok();
    assert_shown!("suggest_groups_plain_ids_by_shared_paths_and_words_into_grounded_paths", v);
}

#[test]
fn validate_warns_on_a_bare_directory_path() {
    let repo = ralph_repo();
    repo.write(
        ".boulder/streams.yaml",
        "version: 1\nstreams:\n  billing:\n    stories: [US-003]\n    paths: [src/billing, src/theme/colours.css]\n",
    );
    let r = repo.boulder(&["stream", "validate", "--json"]).ok();
    let findings = r.json()["findings"].as_array().unwrap().clone();
    let bare: Vec<_> = findings.iter().filter(|f| f["code"] == "bare_directory").collect();
    assert_eq!(bare.len(), 1, "{findings:?}");
    assert!(bare[0]["message"].as_str().unwrap().contains("\"src/billing\""));
    assert!(bare[0]["hint"].as_str().unwrap().contains("src/billing/**"));
    assert_eq!(bare[0]["severity"], "warning");
}

#[test]
fn stream_add_keeps_comments_and_order() {
    let repo = ralph_repo();
    let plan = "# Our plan — hand-written.\nversion: 1\nprd: .agents/tasks/prd.md\n\nstreams:\n  # Billing first.\n  billing:\n    stories: [US-003, US-004]   # both pages\n    paths: ['src/billing/**']\n\n# Shared settings.\nsettings:\n  base_branch: main\n";
    repo.write(".boulder/streams.yaml", plan);
    repo.commit_all("plan");
    let r = repo
        .boulder(&[
            "stream",
            "add",
            "hotfix",
            "--story",
            "US-005",
            "US-001",
            "--path",
            "src/theme/**",
            "--path",
            "src/store/**",
        ])
        .ok();
    assert_shown!("stream_add_keeps_comments_and_order", r);
    let want = plan.replace(
        "    paths: ['src/billing/**']\n",
        "    paths: ['src/billing/**']\n  hotfix:\n    stories: [US-005, US-001]\n    paths: [src/theme/**, src/store/**]\n",
    );
    assert_eq!(repo.read(".boulder/streams.yaml"), want);
    // Every line the user wrote is still there, as git sees it.
    let diff = repo.git_out(&["diff", "--numstat"]);
    assert!(diff.starts_with("3\t0\t"), "only added lines: {diff}");
    repo.boulder(&["stream", "validate"]).ok();
    let shown = repo.boulder(&["prd", "show", "--stream", "hotfix", "--json"]).ok().json();
    assert_eq!(shown["total"], 2);
    // A taken name is refused and nothing changes.
    let r = repo.boulder(&["stream", "add", "billing", "--story", "US-002"]).code(1);
    assert_shown!("stream_add_keeps_comments_and_order_2", r);
    assert_eq!(repo.read(".boulder/streams.yaml"), want);
    // Without a plan, one is made.
    let fresh = ralph_repo();
    fresh.boulder(&["stream", "add", "solo", "--story", "US-001", "--path", "src/store/**"]).ok();
    assert!(fresh.read(".boulder/streams.yaml").contains("  solo:\n    stories: [US-001]\n"));
}

/// Run git-boulder with stdout a pipe whose reading end is closed before it writes.
fn run_into_closed_pipe(dir: &std::path::Path, home: &std::path::Path, args: &[&str]) -> (i32, String) {
    let mut cmd = std::process::Command::new(bin());
    fixed_env(&mut cmd, home);
    cmd.args(args).current_dir(dir).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let demo_dir = repo.tmp.path().join("demo");
    let demo = demo_dir.to_str().unwrap();
    for args in [&["status"][..], &["prd", "show"], &["log", "auth"], &["demo", demo]] {
        let (code, stderr) = run_into_closed_pipe(&repo.dir, &repo.home, args);
        assert_eq!((code, stderr.as_str()), (0, ""), "git boulder {args:?}");
    }
}

#[test]
fn inside_dot_git_reading_commands_find_the_repository_as_git_does() {
    let repo = sample();
    let git_dir = repo.dir.join(".git");
    // git reads from inside .git (log) and refuses what needs a work tree (status).
    assert_eq!(repo.git_in(&git_dir, &["log", "--oneline"]).ok().stdout.lines().count(), 1);
    assert!(repo.git_in(&git_dir, &["status"]).code(128).stderr.contains("must be run in a work tree"));
    let top = repo.boulder(&["status"]).ok().stdout;
    assert_eq!(repo.boulder_in(&git_dir, &["status"]).ok().stdout, top);
    assert_eq!(
        repo.boulder_in(&git_dir.join("refs"), &["prd", "show"]).ok().stdout,
        repo.boulder(&["prd", "show"]).ok().stdout
    );
    repo.boulder_in(&git_dir, &["stream", "validate"]).ok();
}

#[test]
fn an_error_names_a_path_once() {
    let repo = TestRepo::empty();
    let outside = repo.tmp.path().join("not-a-repo");
    std::fs::create_dir_all(&outside).unwrap();
    let r = repo.boulder_in(&outside, &["status"]).code(2);
    let shown = std::fs::canonicalize(&outside).unwrap().display().to_string();
    assert_eq!(r.stderr.matches(&shown).count(), 1, "{}", r.stderr);
    assert_eq!(r.stderr.matches("parent").count(), 1, "{}", r.stderr);
    assert!(r.stderr.starts_with("error: not a git repository"), "{}", r.stderr);
}

#[test]
fn the_stream_run_lock_hint_names_a_command_that_works() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let mark = repo.tmp.path().join("started");
    let script = format!("touch '{}'; sleep 4", mark.display());
    let mut cmd = repo.command(bin());
    cmd.args(["stream", "run", "auth", "--max-iterations", "1", "--", "sh", "-c", &script])
        .current_dir(&repo.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut first = cmd.spawn().unwrap();
    wait_for("the first run to start its agent", || mark.exists());
    let r = repo.boulder(&["stream", "run", "auth", "--", "true"]).code(1);
    // The holder's pid and the time its lock was taken change from run to run.
    let since = r.stderr.split(" since ").nth(1).and_then(|s| s.split(' ').next()).expect("when").to_string();
    let pid = format!("pid {}", first.id());
    assert_shown!(
        "the_stream_run_lock_hint_names_a_command_that_works",
        r.masked(&[(&pid, "pid [PID]"), (&since, "[TIME]")])
    );
    assert!(!r.stderr.contains("--wait"), "stream run has no --wait: {}", r.stderr);
    // The hint's command, as printed, works.
    let hint = r.stderr.lines().find(|l| l.starts_with("hint: `")).unwrap_or_else(|| panic!("{}", r.stderr));
    let command = hint.split('`').nth(1).unwrap();
    assert_eq!(command, "git boulder stream stop auth");
    let args: Vec<&str> = command.split(' ').skip(2).collect();
    repo.boulder(&args).ok();
    first.wait().unwrap();
}

#[test]
fn the_demo_reaches_a_pipe_and_its_commands_paste() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let dir = tmp.path().join("demo");
    let mut cmd = std::process::Command::new(bin());
    fixed_env(&mut cmd, &home);
    // As `cargo run -- demo` runs it on a machine where git-boulder is not installed: no
    // git-boulder on PATH (the agents' `git boulder …` and the hooks still find this binary).
    let bin_dir = std::path::Path::new(bin()).parent().unwrap().to_path_buf();
    let path: Vec<_> = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .filter(|d| *d != bin_dir && !d.join("git-boulder").exists())
        .collect();
    cmd.env("PATH", std::env::join_paths(path).unwrap());
    let out = cmd.args(["demo", dir.to_str().unwrap()]).current_dir(tmp.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    // Every line, the refused merge's conflict table and the hook's refusal included, is on stdout.
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(stdout.contains("conflict") || stdout.contains("CONFLICT"), "{stdout}");
    let cd = stdout.lines().find_map(|l| l.strip_prefix("$ cd ")).expect("a cd line");
    let cd = cd.split("    #").next().unwrap().trim();
    let commands: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("$ "))
        .filter(|c| c.starts_with("git ") && [" log", " status", " show", " validate"].iter().any(|w| c.contains(w)))
        .collect();
    assert!(commands.iter().any(|c| c.contains("--format=")), "{commands:?}");
    assert!(commands.iter().any(|c| c.contains("-C ../teammate")), "{commands:?}");
    for c in commands {
        let mut sh = std::process::Command::new("sh");
        fixed_env(&mut sh, &home);
        let r = sh.args(["-c", &format!("cd {cd} && {c}")]).output().unwrap();
        assert!(r.status.success(), "pasting `{c}` failed: {}", String::from_utf8_lossy(&r.stderr));
        assert!(!r.stdout.is_empty(), "`{c}` printed nothing");
    }
}

#[test]
fn man_pages_have_examples_and_exit_status_and_list_only_installed_pages() {
    let repo = TestRepo::empty();
    let dir = repo.tmp.path().join("man");
    repo.boulder(&["man", "--install-dir", dir.to_str().unwrap()]).ok();
    let man1 = dir.join("man1");
    let mut pages = 0;
    for entry in std::fs::read_dir(&man1).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        pages += 1;
        for section in [".SH DESCRIPTION", ".SH EXAMPLES", ".SH \"EXIT STATUS\""] {
            assert!(text.contains(section), "{name} lacks {section}");
        }
        assert!(text.contains("\\fB2\\fR"), "{name}: exit status 2 is not explained");
        // Every page a page names is installed.
        for (at, _) in text.match_indices("(1)") {
            let start = text[..at].rfind(|c: char| c.is_whitespace() || c == '>').map_or(0, |i| i + 1);
            let named = text[start..at].replace("\\-", "-").replace("\\fB", "").replace("\\fR", "");
            if named.starts_with("git-boulder") {
                assert!(man1.join(format!("{named}.1")).exists(), "{name} lists {named}(1), which is not installed");
            }
        }
    }
    assert!(pages > 30, "{pages} pages");
    assert!(!man1.join("git-boulder-help.1").exists() && !man1.join("git-boulder-hook.1").exists());
    let merge = std::fs::read_to_string(man1.join("git-boulder-stream-merge.1")).unwrap();
    assert!(merge.contains("git boulder stream merge auth \\-\\-dry\\-run"), "{merge}");
    assert!(merge.contains("conflicts"), "the refusal exit code names what merge refuses");
}

/// What bash offers for `git boulder WORDS… <TAB>` in `dir`, through git's `_git_boulder` hook.
fn complete_in(repo: &TestRepo, dir: &std::path::Path, words: &[&str]) -> Vec<String> {
    let script = repo.boulder(&["completions", "bash"]).ok().stdout;
    let file = repo.tmp.path().join("completion.bash");
    std::fs::write(&file, script).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let mut cmd = repo.command("bash");
    let out = cmd
        .arg("-c")
        .arg(format!(
            "source '{}'; COMP_WORDS=(git boulder {}); COMP_CWORD={}; _git_boulder; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display(),
            quoted.join(" "),
            words.len() + 1
        ))
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn completions_offer_streams_boulders_and_stories_from_the_repository() {
    let repo = sample();
    let merge = complete_in(&repo, &repo.dir, &["stream", "merge", ""]);
    assert_eq!(merge[..3], ["auth", "api", "docs"], "{merge:?}");
    let first_flag = merge.iter().position(|c| c.starts_with('-')).unwrap();
    assert_eq!(first_flag, 3, "stream names come before flags: {merge:?}");
    assert_eq!(complete_in(&repo, &repo.dir, &["stream", "init", "a"]), ["auth", "api"]);
    // Subcommands first, then flags; the internal hook command is not offered.
    let top = complete_in(&repo, &repo.dir, &[""]);
    let first_flag = top.iter().position(|c| c.starts_with('-')).unwrap();
    assert!(top[..first_flag].contains(&"stream".to_string()) && top[..first_flag].contains(&"status".to_string()));
    assert!(top[first_flag..].iter().all(|c| c.starts_with('-')), "{top:?}");
    assert!(!top.contains(&"hook".to_string()), "{top:?}");
    // Story ids from the PRD (open ones first), boulder ids from the state refs.
    let stories = complete_in(&repo, &repo.dir, &["prd", "done", "US-00"]);
    assert_eq!(stories.len(), 6, "{stories:?}");
    assert_eq!(stories.last().unwrap(), "US-002", "the done story comes last: {stories:?}");
    repo.boulder(&["create", "login-work", "--stream", "auth"]).ok();
    assert_eq!(complete_in(&repo, &repo.dir, &["switch", ""])[0], "login-work");
    // From a subdirectory too.
    let sub = repo.dir.join("src/auth");
    assert_eq!(complete_in(&repo, &sub, &["stream", "path", "d"]), ["docs"]);
}

#[test]
fn history_views_leave_the_state_out() {
    let repo = sample();
    let remote = repo.tmp.path().join("remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]).ok();
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    repo.boulder(&["prd", "done", "US-001"]).ok();
    assert!(!repo.refs("refs/boulder/").is_empty(), "the state refs exist");
    let user_commits = repo.git_out(&["log", "--oneline", "--branches"]).lines().count();
    let all = repo.git_out(&["log", "--oneline", "--all"]).lines().count();
    assert!(all > user_commits, "state commits show under a bare --all");
    // The arguments `git boulder --help` gives leave them out.
    let help = repo.boulder(&["--help"]).ok().stdout;
    assert!(help.contains("--exclude='refs/boulder*' --exclude='refs/notes/*' --all"), "{help}");
    let hidden = repo.git_out(&["log", "--oneline", "--exclude=refs/boulder*", "--exclude=refs/notes/*", "--all"]);
    assert_eq!(hidden.lines().count(), user_commits);
    // remote setup keeps state refs from labelling commits, even with every decoration shown.
    let head = repo.git_out(&["rev-parse", "HEAD"]);
    repo.git(&["update-ref", "refs/boulder/streams/pin", &head]).ok();
    let every = ["-c", "log.initialDecorationSet=all", "log", "--oneline", "--decorate", "--all", "-n", "50"];
    assert!(repo.git_out(&every).contains("refs/boulder/streams/pin"), "labelled before setup");
    let r = repo.boulder(&["remote", "setup", "origin"]).ok();
    assert_shown!("history_views_leave_the_state_out", r);
    assert_eq!(repo.git_out(&["config", "--get-all", "log.excludeDecoration"]), "refs/boulder*\nrefs/notes/*");
    let decorated = repo.git_out(&every);
    assert!(!decorated.contains("refs/boulder") && !decorated.contains("refs/notes"), "{decorated}");
    assert!(decorated.contains("main"), "{decorated}");
    repo.boulder(&["remote", "setup", "origin", "--undo"]).ok();
    assert_eq!(repo.git(&["config", "--get-all", "log.excludeDecoration"]).code, 1);
}

#[test]
fn stream_add_never_writes_a_plan_validate_would_refuse() {
    let repo = ralph_repo();
    repo.boulder(&["stream", "add", "one", "--story", "US-001", "--path", "src/one/**"]).ok();
    let plan = repo.read(".boulder/streams.yaml");
    let r = repo.boulder(&["stream", "add", "two", "--story", "US-001", "--path", "src/two/**"]).code(2);
    assert_shown!("stream_add_never_writes_a_plan_validate_would_refuse", r);
    let r = repo.boulder(&["stream", "add", "two", "--story", "US-999", "--path", "src/two/**"]).code(2);
    assert_shown!("stream_add_never_writes_a_plan_validate_would_refuse_2", r);
    assert_eq!(repo.read(".boulder/streams.yaml"), plan);
    repo.boulder(&["stream", "validate"]).ok();
}

#[test]
fn the_demo_refuses_a_place_that_is_no_directory_as_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    for (dir, said) in [(file.clone(), "is not a directory"), (file.join("below"), "cannot create")] {
        let out = std::process::Command::new(bin()).arg("demo").arg(&dir).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(said) && stderr.contains(&dir.display().to_string()), "{stderr}");
    }
}
