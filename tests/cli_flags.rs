//! Flags are parsed once, before any work: durations and stream names by value parsers (exit 2,
//! git-boulder's own message, nothing echoed raw), and the quiet and trace switches reach the
//! commands a run starts (agents, and through them git-boulder's hooks).

use crate::common::*;

const DURATION_RULE: &str = "expected a number such as 30s, 5m or 1h";

#[test]
fn a_bad_duration_is_a_usage_error_before_anything_is_looked_at() {
    let repo = sample();
    // The main worktree has no current boulder: a check without --boulder would be refused for
    // that; the flag is refused first, by name.
    let r = repo.boulder(&["check", "--cooldown", "soon"]).code(2);
    assert_eq!(r.stderr, format!("error: --cooldown: invalid duration \"soon\": {DURATION_RULE}\n"));
    assert_eq!(r.stdout, "");
    let r = repo.boulder(&["stream", "claim", "auth", "--ttl", "5x"]).code(2);
    assert_eq!(r.stderr, "error: --ttl: invalid duration \"5x\": unknown unit \"x\" (use ms, s, m, h or d)\n");
    let r = repo.boulder(&["stream", "run", "nosuch", "--cooldown", "99999999999h", "--", "true"]).code(2);
    assert_eq!(r.stderr, "error: --cooldown: invalid duration \"99999999999h\": too large\n");
    // Good durations in every form still run.
    repo.boulder(&["stream", "init", "auth"]).ok();
    let j = repo.boulder(&["check", "--boulder", "auth", "--json", "--idle-threshold", "1h30m"]).ok().json();
    assert_eq!(j["gate"], "idle", "{j}");
}

#[test]
fn a_bad_stream_name_is_refused_with_its_rule_and_nothing_is_created() {
    let repo = sample();
    for (args, name) in [
        (vec!["stream", "path", "a/b"], "\"a/b\": it contains a path separator"),
        (vec!["stream", "init", "auth", "../x"], "\"../x\": it contains a path separator"),
        (vec!["stream", "merge", "x.lock"], "\"x.lock\": it ends with '.lock'"),
        (vec!["prd", "show", "--stream=-rf"], "\"-rf\": it starts with '-'"),
    ] {
        let r = repo.boulder(&args).code(2);
        let mut lines = r.stderr.lines();
        assert_eq!(lines.next(), Some(format!("error: invalid stream name {name}").as_str()), "{args:?}");
        assert!(lines.next().is_some_and(|h| h.starts_with("hint: names may use letters")), "{}", r.stderr);
        assert_eq!(lines.next(), None, "no usage block after the hint: {}", r.stderr);
    }
    // `stream init auth ../x` was refused as a whole: auth has no branch or worktree.
    assert!(repo.git(&["rev-parse", "--verify", "-q", "refs/heads/boulder/auth"]).code != 0);
    assert!(!repo.dir.join(".boulder/worktrees/auth").exists());
    // A name with a terminal escape is never echoed raw.
    let r = repo.boulder(&["stream", "run", "\u{1b}]0;owned\u{7}", "--", "true"]).code(2);
    assert!(!r.stderr.contains('\u{1b}') && !r.stderr.contains('\u{7}'), "{:?}", r.stderr);
    assert!(r.stderr.starts_with("error: invalid stream name "), "{}", r.stderr);
}

#[test]
fn quiet_and_verbose_reach_the_agents_a_run_starts() {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "api"]).ok();
    let seen = repo.tmp.path().join("seen.txt");
    let agent = format!("echo \"trace=$BOULDER_TRACE quiet=$BOULDER_QUIET\" >> '{}'", seen.display());
    let run = |flag: &str| {
        repo.boulder(&[
            flag,
            "stream",
            "run",
            "api",
            "--max-iterations",
            "1",
            "--cooldown",
            "10ms",
            "--",
            "sh",
            "-c",
            &agent,
        ])
        .ok()
    };
    let r = run("-v");
    assert!(r.stderr.contains("trace:"), "{}", r.stderr);
    let r = run("-q");
    assert!(!r.stderr.contains("trace:"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), "trace=1 quiet=\ntrace= quiet=1\n");
}

/// Standard error closed by its reader (`2>&1 | head -1` after the first line): the lines are
/// lost and the command ends with its own exit code, never a panic (101).
#[test]
fn a_standard_error_closed_early_ends_with_the_commands_own_code() {
    let repo = TestRepo::with_files(&[(
        ".boulder/streams.yaml",
        "version: 1\nprd: missing.md\nstreams:\n  a: {paths: [a/**]}\n",
    )]);
    for args in [&["stream", "validate"][..], &["prd", "show"][..], &["stream", "init"][..]] {
        let mut c = std::process::Command::new(bin());
        fixed_env(&mut c, &repo.home);
        let mut child = c
            .args(args)
            .current_dir(&repo.dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stderr.take());
        let status = child.wait().unwrap();
        let own = repo.boulder(args).code;
        assert_eq!(status.code(), Some(own), "{args:?}");
    }
}

#[test]
fn a_backoff_multiplier_outside_the_plans_range_is_a_usage_error() {
    let repo = sample();
    repo.boulder(&["stream", "init"]).ok();
    for bad in ["0", "-1", "0.5", "nan", "inf", "1001", "x"] {
        let r = repo.boulder(&["check", "--boulder", "auth", &format!("--backoff-multiplier={bad}")]).code(2);
        assert!(r.stderr.contains("--backoff-multiplier: expected a number from 1 to 1000"), "{bad}: {}", r.stderr);
    }
    repo.boulder(&["check", "--boulder", "auth", "--backoff-multiplier", "1.5"]).ok();
}

#[test]
fn quiet_leaves_out_the_notes_of_what_was_done() {
    let repo = sample();
    for args in [
        &["-q", "stream", "init"][..],
        &["-q", "prd", "done", "US-001"][..],
        &["-q", "prd", "undone", "US-001"][..],
        &["-q", "create", "sub", "--parent", "auth"][..],
        &["-q", "checkpoint", "-m", "halfway", "--boulder", "auth"][..],
        &["-q", "stream", "stop", "auth"][..],
        &["-q", "stream", "add", "extra", "--path", "extra/**"][..],
    ] {
        let r = repo.boulder(args).ok();
        assert_eq!(r.stderr, "", "{args:?}");
    }
    // Without -q they are there.
    let r = repo.boulder(&["prd", "done", "US-003"]).ok();
    assert_shown!("quiet_leaves_out_the_notes_of_what_was_done", r);
}

#[test]
fn colour_follows_color_ui_as_git_does_and_no_color_wins() {
    let repo = sample();
    repo.boulder(&["stream", "init"]).ok();
    // Piped: no colour by default.
    assert!(!repo.boulder(&["status"]).ok().stdout.contains('\u{1b}'));
    repo.git(&["config", "color.ui", "always"]).ok();
    assert!(repo.boulder(&["status"]).ok().stdout.contains("\u{1b}["));
    let r = repo.boulder_env(&repo.dir, &["status"], &[("NO_COLOR", "1")]);
    assert!(!r.stdout.contains('\u{1b}'), "{}", r.stdout);
    repo.git(&["config", "color.ui", "never"]).ok();
    assert!(!repo.boulder(&["status"]).ok().stdout.contains('\u{1b}'));
}
