use std::time::Duration;

use proptest::prelude::*;

use super::parse::{closest, edit_distance, EMPTY_PLAN};
use super::*;

/// The example of DESIGN §5, verbatim.
const DESIGN_EXAMPLE: &str = r#"version: 1
prd: .agents/tasks/prd.md
streams:
  auth:
    branch: boulder/auth          # default: boulder/<name>
    stories: [US-001, US-002, US-003]
    paths: [src/auth/**, src/middleware/auth*, tests/auth/**]
    depends_on: []                # streams that must be merged first
    agent: claude                 # a key of settings.agents, optional
    max_iterations: 30
    merge_strategy: rebase        # overrides settings
settings:
  base_branch: main
  worktree_dir: .boulder/worktrees
  merge_strategy: rebase          # rebase | merge | squash
  auto_merge: false
  path_overlap: warn              # error | warn | ignore  (two streams owning the same path)
  ownership: error                # error | warn | off     (pre-push reaction to violations)
  undeclared_paths: warn          # error | warn | allow   (paths no stream owns)
  shared_read: [src/types/**]     # every stream may read, none may change
  copy_into_worktree: []          # untracked/ignored files copied into new worktrees (.env, guardrails)
  setup: ''                       # command run once in each new worktree (npm ci, cargo fetch)
  verify: ''                      # command run on the rebased result before the base moves (cargo test)
  agents:
    claude: 'claude -p "$BOULDER_PROMPT"'
  boulder:
    idle_threshold: 30s
    cooldown: 30s                 # base; grows × backoff_multiplier^failures
    backoff_multiplier: 2
    max_failures: 5
    recovery_window: 5m
    max_depth: 3
    parallel_limit: 5
    inherit_cooldowns: false
"#;

/// Appendix B of the multi-stream seed (`seeds/004…`), verbatim.
const SEED_APPENDIX_B: &str = r#"# .ralph/streams.yaml - Full reference

version: 1

streams:
  # Stream name (used in CLI and paths)
  auth:
    # Git branch for this stream
    branch: ralph/auth

    # Stories assigned to this stream (by ID)
    stories:
      - US-001
      - US-002
      - US-003

    # Optional: Path boundaries (warnings if exceeded)
    paths:
      - src/auth/**
      - src/middleware/auth*
      - tests/auth/**

    # Optional: Agent override for this stream
    agent: claude

    # Optional: Max iterations override
    max_iterations: 30

settings:
  # Base branch for worktrees and merges
  base_branch: main

  # Directory for worktrees
  worktree_dir: .ralph/worktrees

  # Merge strategy: rebase, merge, or squash
  merge_strategy: rebase

  # Auto-merge when stream completes (use with caution)
  auto_merge: false

  # Path overlap detection: error, warn, or ignore
  path_overlap: warn

  # Include base .ralph state in new streams
  inherit_guardrails: true
  inherit_progress: false
"#;

/// The seed's three-stream example (`seeds/004…`, "Stream Configuration").
const SEED_STREAMS: &str = r#"# .ralph/streams.yaml
version: 1

streams:
  auth:
    branch: ralph/auth
    stories:
      - US-001
      - US-002
      - US-003
    paths:
      - src/auth/**
      - src/middleware/auth*

  api:
    branch: ralph/api
    stories:
      - US-004
      - US-005
      - US-006
    paths:
      - src/api/**
      - src/routes/**

  frontend:
    branch: ralph/ui
    stories:
      - US-007
      - US-008
      - US-009
    paths:
      - src/components/**
      - src/pages/**

settings:
  base_branch: main
  worktree_dir: .ralph/worktrees
  merge_strategy: rebase  # or merge, squash
  auto_merge: false
"#;

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn err(text: &str) -> PlanError {
    match parse(text) {
        Ok(plan) => panic!("expected an error for {text:?}, got {plan:?}"),
        Err(e) => e,
    }
}

fn ok(text: &str) -> Plan {
    match parse(text) {
        Ok(plan) => plan,
        Err(e) => panic!("expected {text:?} to parse: {}", e.message),
    }
}

// ------------------------------------------------------------------------------------------------
// parse: whole examples and defaults

#[test]
fn design_example_parses_with_its_values() {
    let plan = ok(DESIGN_EXAMPLE);
    assert_eq!(plan.version, 1);
    assert_eq!(plan.prd, ".agents/tasks/prd.md");
    assert_eq!(plan.streams.len(), 1);
    let auth = &plan.streams[0];
    assert_eq!(auth.name, "auth");
    assert_eq!(auth.branch, "boulder/auth");
    assert_eq!(auth.stories, strings(&["US-001", "US-002", "US-003"]));
    assert_eq!(auth.paths, strings(&["src/auth/**", "src/middleware/auth*", "tests/auth/**"]));
    assert!(auth.depends_on.is_empty());
    assert_eq!(auth.agent.as_deref(), Some("claude"));
    assert_eq!(auth.max_iterations, Some(30));
    assert_eq!(auth.merge_strategy, Some(MergeStrategy::Rebase));
    assert_eq!(auth.line, 4);
    let s = &plan.settings;
    assert_eq!(s.base_branch, "main");
    assert_eq!(s.worktree_dir, ".boulder/worktrees");
    assert_eq!(s.merge_strategy, MergeStrategy::Rebase);
    assert!(!s.auto_merge);
    assert_eq!(s.path_overlap, Level::Warn);
    assert_eq!(s.ownership, Level::Error);
    assert_eq!(s.undeclared_paths, Level::Warn);
    assert_eq!(s.shared_read, strings(&["src/types/**"]));
    assert!(s.copy_into_worktree.is_empty());
    assert_eq!(s.setup, "");
    assert_eq!(s.verify, "");
    assert_eq!(s.agents.get("claude").map(String::as_str), Some(r#"claude -p "$BOULDER_PROMPT""#));
    assert_eq!(s.boulder, BoulderSettings::default());
    assert_eq!(s.claim_remote, None);
    assert_eq!(s.on_conflict, super::OnConflict::Stop);
    // Everything in the example is also the default.
    let defaults = Settings { shared_read: s.shared_read.clone(), agents: s.agents.clone(), ..Settings::default() };
    assert_eq!(*s, defaults);
    // And the example validates cleanly.
    let ids = strings(&["US-001", "US-002", "US-003"]);
    let tree = strings(&[
        "src/auth/login.rs",
        "src/middleware/auth.rs",
        "tests/auth/login.rs",
        "src/types/user.rs",
        "README.md",
    ]);
    assert_eq!(validate(&plan, Some(&ids), &tree), Vec::new());
}

#[test]
fn seed_examples_parse() {
    let plan = ok(SEED_APPENDIX_B);
    let auth = &plan.streams[0];
    assert_eq!(auth.branch, "ralph/auth");
    assert_eq!(auth.stories, strings(&["US-001", "US-002", "US-003"]));
    assert_eq!(auth.paths.len(), 3);
    assert_eq!(auth.agent.as_deref(), Some("claude"));
    assert_eq!(auth.max_iterations, Some(30));
    assert_eq!(auth.line, 7);
    assert_eq!(plan.settings.worktree_dir, ".ralph/worktrees");
    assert!(plan.settings.inherit_guardrails);
    assert!(!plan.settings.inherit_progress);
    let plan = ok(&SEED_APPENDIX_B
        .replace("inherit_guardrails: true", "inherit_guardrails: false")
        .replace("inherit_progress: false", "inherit_progress: true"));
    assert!(!plan.settings.inherit_guardrails);
    assert!(plan.settings.inherit_progress);

    let plan = ok(SEED_STREAMS);
    let names: Vec<(&str, &str, usize)> =
        plan.streams.iter().map(|s| (s.name.as_str(), s.branch.as_str(), s.line)).collect();
    assert_eq!(names, vec![("auth", "ralph/auth", 5), ("api", "ralph/api", 15), ("frontend", "ralph/ui", 25)]);
    let ids: Vec<String> = (1..=9).map(|i| format!("US-00{i}")).collect();
    let findings = validate(&plan, Some(&ids), &[]);
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn defaults_fill_in() {
    let plan = ok("streams:\n  auth: {}\n  api:\n");
    assert_eq!(plan.version, 1);
    assert_eq!(plan.prd, DEFAULT_PRD);
    assert_eq!(plan.settings, Settings::default());
    let s = &plan.streams[0];
    assert_eq!(
        *s,
        StreamDef {
            name: "auth".into(),
            branch: "boulder/auth".into(),
            stories: vec![],
            paths: vec![],
            creates: vec![],
            depends_on: vec![],
            agent: None,
            max_iterations: None,
            merge_strategy: None,
            budget: Default::default(),
            line: 2,
            adhoc: false,
        }
    );
    assert_eq!(plan.streams[1].branch, "boulder/api");
    assert_eq!(plan.streams[1].line, 3);

    let d = Settings::default();
    assert_eq!(d.base_branch, "main");
    assert_eq!(d.worktree_dir, ".boulder/worktrees");
    assert_eq!(d.merge_strategy, MergeStrategy::Rebase);
    assert!(!d.auto_merge);
    assert_eq!((d.path_overlap, d.ownership, d.undeclared_paths), (Level::Warn, Level::Error, Level::Warn));
    assert!(d.inherit_guardrails && !d.inherit_progress);
    let b = BoulderSettings::default();
    assert_eq!(b.idle_threshold, Duration::from_secs(30));
    assert_eq!(b.cooldown, Duration::from_secs(30));
    assert_eq!(b.backoff_multiplier, 2.0);
    assert_eq!(b.max_failures, 5);
    assert_eq!(b.recovery_window, Duration::from_secs(300));
    assert_eq!((b.max_depth, b.parallel_limit), (3, 5));
    assert!(!b.inherit_cooldowns);

    // No streams at all is a valid plan (validation warns).
    let plan = ok("version: 1\n");
    assert!(plan.streams.is_empty());
    let plan = ok("streams: {}\nsettings:\n");
    assert!(plan.streams.is_empty());
    assert_eq!(plan.settings, Settings::default());
    // Null values mean the default.
    let plan = ok("prd:\nstreams:\n  a:\n    branch: ~\n    stories:\n    paths: null\nsettings:\n  base_branch:\n  boulder:\n    cooldown:\n");
    assert_eq!(plan.prd, DEFAULT_PRD);
    assert_eq!(plan.streams[0].branch, "boulder/a");
    assert_eq!(plan.settings, Settings::default());
}

#[test]
fn streams_keep_file_order_and_lines() {
    let text = "streams:\n  zeta: {}\n  # comment\n  alpha:\n    stories: [A-1]\n\n  mid: {paths: [x]}\n";
    let plan = ok(text);
    let got: Vec<(&str, usize)> = plan.streams.iter().map(|s| (s.name.as_str(), s.line)).collect();
    assert_eq!(got, vec![("zeta", 2), ("alpha", 4), ("mid", 7)]);
    assert_eq!(plan.stream("alpha").map(|s| s.stories.clone()), Some(strings(&["A-1"])));
    assert_eq!(plan.stream_for_branch("boulder/mid").map(|s| s.name.as_str()), Some("mid"));
    assert_eq!(plan.stream_for_story("A-1").map(|s| s.name.as_str()), Some("alpha"));
    // Flow style: every stream on line 1.
    let plan = ok("{streams: {a: {}, b: {stories: [1]}}}");
    assert_eq!(plan.streams.iter().map(|s| s.line).collect::<Vec<_>>(), vec![1, 1]);
}

#[test]
fn values_in_their_accepted_forms() {
    let plan = ok(r#"
streams:
  "quoted":
    stories: [1, 1.10, 007, US-1, "x y", 0x1F]
    paths: src/only/**
    depends_on: other
    merge_strategy: Squash
  other:
    stories:
      - 2
settings:
  auto_merge: yes
  path_overlap: ignore
  ownership: off
  undeclared_paths: allow
  shared_read: src/types/**
  copy_into_worktree: [.env, .agents/guardrails.md]
  setup: npm ci
  verify: cargo test
  claim_remote: origin
  merge_remote: origin
  on_conflict: Agent
  agents: {claude: claude -p, codex: 'codex exec "$BOULDER_PROMPT"'}
  boulder:
    idle_threshold: 45
    cooldown: 1.5
    recovery_window: 1h30m
    backoff_multiplier: 1.5
    max_failures: "7"
    max_depth: 4
    parallel_limit: 8
    inherit_cooldowns: true
"#);
    let q = &plan.streams[0];
    assert_eq!(q.name, "quoted");
    assert_eq!(q.stories, strings(&["1", "1.10", "007", "US-1", "x y", "0x1F"]));
    assert_eq!(q.paths, strings(&["src/only/**"]));
    assert_eq!(q.depends_on, strings(&["other"]));
    assert_eq!(q.merge_strategy, Some(MergeStrategy::Squash));
    assert_eq!(plan.streams[1].stories, strings(&["2"]));
    let s = &plan.settings;
    assert!(s.auto_merge);
    assert_eq!((s.path_overlap, s.ownership, s.undeclared_paths), (Level::Off, Level::Off, Level::Off));
    assert_eq!(s.shared_read, strings(&["src/types/**"]));
    assert_eq!(s.copy_into_worktree, strings(&[".env", ".agents/guardrails.md"]));
    assert_eq!((s.setup.as_str(), s.verify.as_str()), ("npm ci", "cargo test"));
    assert_eq!(s.claim_remote.as_deref(), Some("origin"));
    assert_eq!(s.merge_remote.as_deref(), Some("origin"));
    assert_eq!(s.on_conflict, super::OnConflict::Agent);
    assert_eq!(s.agents.len(), 2);
    let b = &s.boulder;
    assert_eq!(b.idle_threshold, Duration::from_secs(45));
    assert_eq!(b.cooldown, Duration::from_millis(1500));
    assert_eq!(b.recovery_window, Duration::from_secs(5400));
    assert_eq!(b.backoff_multiplier, 1.5);
    assert_eq!((b.max_failures, b.max_depth, b.parallel_limit), (7, 4, 8));
    assert!(b.inherit_cooldowns);
}

#[test]
fn anchors_and_aliases_work() {
    let plan = ok("streams:\n  a:\n    paths: &shared [lib/**]\n  b:\n    paths: *shared\n");
    assert_eq!(plan.streams[1].paths, strings(&["lib/**"]));
}

// ------------------------------------------------------------------------------------------------
// parse: errors

#[test]
fn empty_plans_are_an_error() {
    for text in ["", "\n\n", "# only a comment\n# and another\n", "~\n", "null", "---\n", "--- # x\n...\n"] {
        let e = err(text);
        assert_eq!(e.message, EMPTY_PLAN, "{text:?}");
        assert_eq!(e.line, None);
    }
}

#[test]
fn syntax_errors_name_line_and_column() {
    let e = err("version: 1\nstreams:\n  auth:\n  x: y: z\n");
    assert_eq!(e.message, "line 4, column 7: mapping values are not allowed in this context");
    assert_eq!((e.line, e.column), (Some(4), Some(7)));
    let e = err("streams:\n  a: {}\n b: {}\n");
    assert_eq!(e.line, Some(3));
    assert!(e.message.starts_with("line 3, column 2: did not find expected key"), "{}", e.message);
    let e = err("streams: [a,\n");
    assert_eq!(e.line, Some(2));
    let e = err("streams: {}\n}\n");
    assert_eq!(e.line, Some(2), "{}", e.message);
    let e = err("streams:\n  a: *nope\n");
    assert_eq!(e.message, "line 2, column 6: unknown anchor");
}

#[test]
fn a_syntax_error_below_a_content_error_is_the_one_reported() {
    // The content error (version 2) comes first in the file; the syntax error is still named.
    let e = err("version: 2\nstreams:\n  auth:\n  x: y: z\n");
    assert_eq!(e.message, "line 4, column 7: mapping values are not allowed in this context");
    let e = err("version: 2\nstreams: {}\n}\n");
    assert_eq!(e.line, Some(3), "{}", e.message);
    // Without one, the content error is.
    assert_eq!(err("version: 2\nstreams: {}\n").line, Some(1));
}

#[test]
fn tabs_get_a_hint() {
    let e = err("streams:\n\tauth: {}\n");
    assert_eq!(e.line, Some(2));
    assert!(e.message.contains("tabs"), "{}", e.message);
}

#[test]
fn several_documents_are_an_error() {
    let e = err("version: 1\n---\nstreams: {}\n");
    assert_eq!(e.message, "line 2: the plan holds more than one YAML document; keep it to one");
    assert_eq!(err("---\nversion: 1\n---\n").line, Some(3));
    // A leading `---` alone is fine.
    ok("---\nversion: 1\n");
}

#[test]
fn unknown_keys_name_line_and_closest_key_at_every_level() {
    let text = "\
version: 1
prd: docs/prd.md
streams:
  auth:
    branch: boulder/auth
    stories:
      - US-001
    # a comment
    pahts: [src/auth/**]
";
    let e = err(text);
    assert_eq!(e.message, r#"line 9: unknown key "pahts" in stream "auth"; did you mean "paths"?"#);
    assert_eq!((e.line, e.column), (Some(9), Some(5)));

    let e = err("version: 1\n\nstrems:\n  a: {}\n");
    assert_eq!(e.message, r#"line 3: unknown key "strems" at the top level; did you mean "streams"?"#);

    let e = err("streams: {}\nsettings:\n  base_brnch: main\n");
    assert_eq!(e.message, r#"line 3: unknown key "base_brnch" in settings; did you mean "base_branch"?"#);

    let e = err("settings:\n  agents:\n    claude: x\n  boulder:\n    idle_threshold: 30s\n    cooldwon: 5s\n");
    assert_eq!(e.message, r#"line 6: unknown key "cooldwon" in settings.boulder; did you mean "cooldown"?"#);

    // Case and dashes are forgiven when suggesting.
    let e = err("streams:\n  a:\n    Depends-On: [b]\n");
    assert_eq!(e.message, r#"line 3: unknown key "Depends-On" in stream "a"; did you mean "depends_on"?"#);

    // A key one level off.
    let e = err("settings:\n  max_failures: 3\n");
    assert_eq!(
        e.message,
        r#"line 2: unknown key "max_failures" in settings; "max_failures" belongs under `settings.boulder`"#
    );
    let e = err("streams: {}\nbase_branch: main\n");
    assert_eq!(
        e.message,
        r#"line 2: unknown key "base_branch" at the top level; "base_branch" belongs under `settings`"#
    );

    // Nothing close: list the valid keys.
    let e = err("streams:\n  a:\n    colour: blue\n");
    assert_eq!(
        e.message,
        r#"line 3: unknown key "colour" in stream "a"; valid keys: branch, stories, paths, creates, depends_on, agent, max_iterations, merge_strategy, budget"#
    );

    // The first key of the document, and flow style.
    assert_eq!(
        err("vresion: 1\n").message,
        r#"line 1: unknown key "vresion" at the top level; did you mean "version"?"#
    );
    let e = err("streams: {auth: {stories: [A], pahts: [x]}}");
    assert_eq!((e.line, e.column), (Some(1), Some(32)));

    // After a block scalar and a multi-line flow list.
    let text =
        "settings:\n  setup: |\n    npm ci\n    npm run build\n  shared_read: [\n    a/**,\n    b/**]\n  verfy: x\n";
    assert_eq!(err(text).message, r#"line 8: unknown key "verfy" in settings; did you mean "verify"?"#);

    // Merge keys are not supported.
    let e = err("streams:\n  a:\n    <<: {paths: [x]}\n");
    assert_eq!(e.line, Some(3));
    assert!(e.message.contains("merge keys"), "{}", e.message);
}

#[test]
fn duplicate_keys_and_streams() {
    let e = err("streams:\n  auth: {}\n  api: {}\n  auth: {}\n");
    assert_eq!(e.message, r#"line 4: stream "auth" is defined twice (first at line 2)"#);
    let e = err("streams:\n  a:\n    paths: [x]\n    paths: [y]\n");
    assert_eq!(e.message, r#"line 4: duplicate key "paths" in stream "a" (first at line 3)"#);
    let e = err("version: 1\nversion: 1\n");
    assert_eq!(e.line, Some(2));
    let e = err("settings:\n  agents:\n    a: x\n    a: y\n");
    assert_eq!(e.line, Some(4));
}

#[test]
fn wrong_types_name_line_and_accepted_values() {
    let cases: &[(&str, usize, &str)] = &[
        ("streams:\n  auth:\n    stories: 5\n", 3, "expected stories of stream \"auth\" to be a list, e.g. [US-001, US-002], found integer `5`"),
        ("streams:\n  auth:\n    stories: US-001\n", 3, "to be a list"),
        ("streams:\n  auth:\n    stories: [[a]]\n", 3, "expected each entry of stories of stream \"auth\" to be a string, found a list"),
        ("streams:\n  auth:\n    stories: [a, '']\n", 3, "stories of stream \"auth\" has an empty entry"),
        ("streams:\n  auth:\n    paths: {a: b}\n", 3, "found a mapping"),
        ("streams:\n  auth:\n    branch: [x]\n", 3, "expected branch of stream \"auth\" to be a string, found a list"),
        ("streams:\n  auth:\n    max_iterations: 0\n", 3, "max_iterations of stream \"auth\" must be a whole number of at least 1, not 0"),
        ("streams:\n  auth:\n    max_iterations: -2\n", 3, "at least 1, not -2"),
        ("streams:\n  auth:\n    max_iterations: 99999999999\n", 3, "at least 1, not 99999999999"),
        ("streams:\n  auth:\n    merge_strategy: fast\n", 3, "merge_strategy of stream \"auth\" must be one of rebase, merge or squash, not \"fast\""),
        ("streams: [auth]\n", 1, "expected streams to be a mapping from stream name to its settings"),
        ("streams:\n  auth: 5\n", 2, "expected stream \"auth\" to be a mapping of branch, stories"),
        ("settings: 5\n", 1, "expected settings to be a mapping"),
        ("settings:\n\n  boulder:\n    max_failures: lots\n", 4, "settings.boulder.max_failures must be a whole number of at least 1, not \"lots\""),
        ("settings:\n  path_overlap: sometimes\n", 2, "settings.path_overlap must be one of error, warn or ignore, not \"sometimes\""),
        ("settings:\n  ownership: never\n", 2, "settings.ownership must be one of error, warn or off"),
        ("settings:\n  undeclared_paths: 3\n", 2, "settings.undeclared_paths must be one of error, warn or allow"),
        ("settings:\n  merge_strategy: {}\n", 2, "expected settings.merge_strategy to be one of rebase, merge or squash, found a mapping"),
        ("settings:\n  auto_merge: maybe\n", 2, "settings.auto_merge must be true or false, not \"maybe\""),
        ("settings:\n  on_conflict: merge\n", 2, "settings.on_conflict must be one of stop or agent, not \"merge\""),
        ("settings:\n  adhoc_streams: deny\n", 2, "settings.adhoc_streams must be one of allow or refuse, not \"deny\""),
        ("settings:\n  inherit_progress: 1\n", 2, "settings.inherit_progress must be true or false, not 1"),
        ("settings:\n  agents: [claude]\n", 2, "expected settings.agents to be a mapping"),
        ("settings:\n  agents:\n    claude: ''\n", 3, "agent \"claude\" in settings.agents has no command"),
        ("settings:\n  agents:\n    claude: [a]\n", 3, "expected settings.agents.claude to be a string, found a list"),
        ("settings:\n  boulder:\n    idle_threshold: soon\n", 3, "settings.boulder.idle_threshold must be a duration such as 30s, 5m or 1h30m (or a number of seconds), not \"soon\""),
        ("settings:\n  boulder:\n    cooldown: -5\n", 3, "not -5"),
        ("settings:\n  boulder:\n    cooldown: 1e300\n", 3, "not 1e300"),
        ("settings:\n  boulder:\n    cooldown: '1e300'\n", 3, "not \"1e300\""),
        ("settings:\n  boulder:\n    cooldown: .nan\n", 3, "not NaN"),
        ("settings:\n  boulder:\n    recovery_window: 99999999999999999999h\n", 3, "must be a duration"),
        ("settings:\n  boulder:\n    backoff_multiplier: 0.5\n", 3, "settings.boulder.backoff_multiplier must be a number from 1 to 1000, not 0.5"),
        ("settings:\n  boulder:\n    backoff_multiplier: lots\n", 3, "from 1 to 1000, not \"lots\""),
        ("settings:\n  boulder: true\n", 2, "expected settings.boulder to be a mapping"),
        ("version: 2\n", 1, "unsupported plan version 2; this git-boulder reads version 1"),
        ("version: [1]\n", 1, "expected version to be 1, found a list"),
        ("- a\n- b\n", 1, "expected the plan to be a mapping with the keys version, prd, streams and settings, found a list"),
        ("just text\n", 1, "expected the plan to be a mapping"),
        ("streams:\n  ? [a]\n  : {}\n", 2, "expected a plain key such as `paths`, found a list"),
    ];
    for (text, line, want) in cases {
        let e = err(text);
        assert_eq!(e.line, Some(*line), "{text:?}: {}", e.message);
        let prefix = format!("line {line}: ");
        assert!(e.message.starts_with(&prefix), "{text:?}: {}", e.message);
        assert!(e.message.contains(want), "{text:?}:\n  got  {}\n  want {want}", e.message);
    }
}

#[test]
fn hostile_input_is_bounded() {
    // Deep nesting.
    for n in [200, 100_000] {
        let deep = format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(&deep).is_err());
        let deep = format!("streams:\n  a:\n    stories: {}{}\n", "[".repeat(n), "]".repeat(n));
        assert!(parse(&deep).is_err());
        let deep = format!("settings: {}1{}\n", "{a: ".repeat(n), "}".repeat(n));
        assert!(parse(&deep).is_err());
    }
    // Alias bombs.
    let mut bomb = format!("streams:\n  s0:\n    stories: &a [{}]\n", vec!["x"; 1500].join(", "));
    for i in 1..1000 {
        bomb.push_str(&format!("  s{i}: {{stories: *a}}\n"));
    }
    assert_eq!(
        err(&bomb).message,
        "line 3: the plan has more than 1000000 keys and list entries (aliases count each time they are used)"
    );
    let mut laughs = String::from("streams:\n  a:\n    stories: &l0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        laughs.push_str(&format!("  s{i}:\n    stories: &l{i} [{}]\n", vec![format!("*l{}", i - 1); 9].join(", ")));
    }
    assert!(parse(&laughs).is_err());
    // Too many streams.
    let mut many = String::from("streams:\n");
    for i in 0..1001 {
        many.push_str(&format!("  s{i}: {{}}\n"));
    }
    assert_eq!(err(&many).message, "line 1002: the plan defines more than 1000 streams");
    // Huge text.
    assert!(err(&"#".repeat(9 << 20)).message.contains("at most"));
    // Control characters and odd keys.
    assert!(parse("streams:\n  \"\\u0001\": {}\n").is_ok());
    assert!(parse("\u{feff}streams: {}\n").is_ok());
}

#[test]
fn suggestions_use_edit_distance() {
    assert_eq!(edit_distance("pahts", "paths"), 1);
    assert_eq!(edit_distance("", "abc"), 3);
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(closest("storys", STORY_KEYS.iter().copied()), Some("stories"));
    assert_eq!(closest("xyz", STORY_KEYS.iter().copied()), None);
    assert_eq!(closest("agnet", STORY_KEYS.iter().copied()), Some("agent"));
}

const STORY_KEYS: &[&str] =
    &["branch", "stories", "paths", "creates", "depends_on", "agent", "max_iterations", "merge_strategy"];

// ------------------------------------------------------------------------------------------------
// validate

fn stream(name: &str, stories: &[&str], paths: &[&str]) -> StreamDef {
    StreamDef {
        name: name.into(),
        branch: format!("boulder/{name}"),
        stories: strings(stories),
        paths: strings(paths),
        creates: vec![],
        depends_on: vec![],
        agent: None,
        max_iterations: None,
        merge_strategy: None,
        budget: Default::default(),
        line: 0,
        adhoc: false,
    }
}

fn plan_of(streams: Vec<StreamDef>) -> Plan {
    Plan { version: 1, prd: DEFAULT_PRD.into(), streams, settings: Settings::default() }
}

fn codes(findings: &[Finding]) -> Vec<&'static str> {
    findings.iter().map(|f| f.code).collect()
}

fn only<'a>(findings: &'a [Finding], code: &str) -> Vec<&'a Finding> {
    findings.iter().filter(|f| f.code == code).collect()
}

#[test]
fn no_streams_warns() {
    let f = validate(&plan_of(vec![]), None, &[]);
    assert_eq!(codes(&f), vec!["no_streams"]);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(f[0].hint.as_deref().unwrap_or("").contains("stream suggest"));
}

#[test]
fn bad_stream_names() {
    let mut p = plan_of(vec![stream("ok", &["A"], &[]), stream("a b", &["B"], &[]), stream("x.lock", &["C"], &[])]);
    p.streams[1].line = 7;
    let f = validate(&p, None, &[]);
    let names = only(&f, "name");
    assert_eq!(names.len(), 2, "{f:#?}");
    assert_eq!(names[0].message, r#"invalid stream name "a b" (line 7): it contains whitespace"#);
    assert_eq!(names[0].severity, Severity::Error);
    assert!(names[0].hint.is_some());
    assert!(names[1].message.contains(".lock"));
}

#[test]
fn bad_and_shared_branches() {
    let mut p = plan_of(vec![
        stream("a", &["1"], &[]),
        stream("b", &["2"], &[]),
        stream("c", &["3"], &[]),
        stream("d", &["4"], &[]),
    ]);
    p.streams[1].branch = "boulder/a".into();
    p.streams[2].branch = "main".into();
    for bad in ["has space", "x..y", "-x", "a.lock", "refs/heads/x", "a/", "a//b", ".x", "a:b", "x.", "@", "a@{1}", ""]
    {
        p.streams[3].branch = bad.into();
        let f = validate(&p, None, &[]);
        let b = only(&f, "branch");
        assert_eq!(b.len(), 3, "{bad:?}: {f:#?}");
        assert!(b.iter().all(|f| f.severity == Severity::Error));
        assert_eq!(b[0].message, r#"streams "a" and "b" both use branch "boulder/a""#);
        assert_eq!(b[1].message, r#"stream "c" uses the base branch "main" as its own branch"#);
        assert!(b[2].message.starts_with(r#"stream "d" has an invalid branch"#), "{}", b[2].message);
    }
    p.settings.base_branch = "bad base".into();
    let f = validate(&p, None, &[]);
    assert!(only(&f, "branch")[0].message.contains("settings.base_branch"));
}

#[test]
fn unknown_and_duplicate_stories() {
    let p = plan_of(vec![
        stream("auth", &["US-001", "US-002", "US-099"], &[]),
        stream("api", &["US-002", "US-003", "US-003"], &[]),
        stream("ui", &["US-002"], &[]),
    ]);
    let ids = strings(&["US-001", "US-002", "US-003"]);
    let f = validate(&p, Some(&ids), &[]);
    let unknown = only(&f, "unknown_story");
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].message, r#"stream "auth" lists stories the PRD lacks: "US-099""#);
    assert_eq!(unknown[0].severity, Severity::Error);
    let dup = only(&f, "duplicate_story");
    assert_eq!(dup.len(), 2, "{dup:#?}");
    assert_eq!(dup[0].message, r#"story "US-003" is listed twice in stream "api""#);
    assert_eq!(dup[0].severity, Severity::Warning);
    assert_eq!(dup[1].message, r#"story "US-002" is assigned to streams "auth", "api" and "ui""#);
    assert_eq!(dup[1].severity, Severity::Error);
    // Without a PRD, ids are not checked.
    assert!(only(&validate(&p, None, &[]), "unknown_story").is_empty());
    // A stream without stories is worth a warning.
    let f = validate(&plan_of(vec![stream("docs", &[], &["docs/**"])]), None, &[]);
    assert_eq!(codes(&f), vec!["no_stories"]);
}

#[test]
fn invalid_globs() {
    let mut p = plan_of(vec![stream("a", &["1"], &["src/[a", "/etc/**", "../up/**", "src/../x", "ok/**", "C:/x", ""])]);
    p.settings.shared_read = strings(&["{a,b"]);
    p.settings.copy_into_worktree = strings(&["../.env"]);
    let f = validate(&p, None, &[]);
    let g = only(&f, "glob");
    assert_eq!(g.len(), 8, "{g:#?}");
    assert!(g.iter().all(|f| f.severity == Severity::Error));
    assert!(g[0].message.starts_with(r#"stream "a": invalid glob "src/[a": "#), "{}", g[0].message);
    assert!(g[1].message.contains("absolute"));
    assert!(g[2].message.contains("`..`"));
    assert!(g[3].message.contains("`..`"));
    assert!(g[4].message.contains("absolute"));
    assert!(g[5].message.contains("empty"));
    assert!(g[6].message.starts_with("settings.shared_read: invalid glob"));
    assert!(g[7].message.starts_with("settings.copy_into_worktree: invalid glob"));
}

#[test]
fn a_prd_path_leaving_the_repository_is_an_error() {
    for (prd, why) in
        [("../notes.md", "`..`"), ("docs/../../x.md", "`..`"), ("/etc/passwd", "absolute"), ("C:/prd.md", "absolute")]
    {
        let mut p = plan_of(vec![stream("a", &["1"], &["a/**"])]);
        p.prd = prd.into();
        let f = validate(&p, None, &[]);
        let found = only(&f, "prd");
        assert_eq!(found.len(), 1, "{prd}: {f:#?}");
        assert_eq!(found[0].severity, Severity::Error);
        assert!(found[0].message.starts_with(&format!("prd {prd:?}: ")) && found[0].message.contains(why), "{found:?}");
        assert_eq!(found[0].hint.as_deref(), Some(PRD_HINT));
        assert!(prd_problem(prd).is_some());
    }
    for fine in [DEFAULT_PRD, "docs/prd..v2.md", "./prd.json"] {
        assert_eq!(prd_problem(fine), None, "{fine}");
    }
}

#[test]
fn dependencies_and_cycles() {
    let mut p = plan_of(vec![
        stream("auth", &["1"], &[]),
        stream("api", &["2"], &[]),
        stream("ui", &["3"], &[]),
        stream("db", &["4"], &[]),
        stream("solo", &["5"], &[]),
    ]);
    p.streams[0].depends_on = strings(&["api"]);
    p.streams[1].depends_on = strings(&["ui", "auht"]);
    p.streams[2].depends_on = strings(&["auth"]);
    p.streams[4].depends_on = strings(&["solo"]);
    let f = validate(&p, None, &[]);
    let d = only(&f, "depends_on");
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].message, r#"stream "api" depends on "auht", which the plan does not define; did you mean "auth"?"#);
    let c = only(&f, "cycle");
    assert_eq!(c.len(), 2, "{c:#?}");
    assert_eq!(c[0].message, r#"stream "solo" depends on itself"#);
    assert_eq!(c[1].message, "dependency cycle: auth -> api -> ui -> auth");
    assert!(c.iter().all(|f| f.severity == Severity::Error));

    let mut p = plan_of(vec![stream("a", &["1"], &[]), stream("b", &["2"], &[])]);
    p.streams[0].depends_on = strings(&["b"]);
    p.streams[1].depends_on = strings(&["a"]);
    let f = validate(&p, None, &[]);
    assert_eq!(only(&f, "cycle")[0].message, "dependency cycle: a -> b -> a");
    assert_eq!(only(&f, "cycle").len(), 1);
}

#[test]
fn agents_must_be_defined() {
    let mut p = plan_of(vec![stream("a", &["1"], &[])]);
    p.streams[0].agent = Some("claude".into());
    let f = validate(&p, None, &[]);
    assert_eq!(codes(&f), vec!["agent"]);
    assert_eq!(f[0].severity, Severity::Warning, "no agents at all: a warning (seed plans)");
    assert!(f[0].hint.as_deref().unwrap().contains("settings.agents"));
    p.settings.agents.insert("cluade".into(), "x".into());
    let f = validate(&p, None, &[]);
    assert_eq!(f[0].severity, Severity::Error);
    assert_eq!(f[0].message, r#"stream "a" names agent "claude", which settings.agents does not define"#);
    assert!(f[0].hint.as_deref().unwrap().contains(r#"did you mean "cluade""#));
    p.settings.agents.insert("claude".into(), "x".into());
    assert!(validate(&p, None, &[]).is_empty());
}

#[test]
fn concrete_overlap_names_files_and_streams() {
    let p =
        plan_of(vec![stream("core", &["1"], &["src/**"]), stream("auth", &["2"], &["src/auth/**", "docs/auth.md"])]);
    let tree = strings(&["src/auth/login.rs", "src/lib.rs", "docs/auth.md", "src/auth/x/y.rs"]);
    let f = validate(&p, None, &tree);
    assert_eq!(codes(&f), vec!["overlap"], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(f[0].message, r#"streams "core" and "auth" both own 2 files: src/auth/login.rs, src/auth/x/y.rs"#);
    assert!(f[0].hint.as_deref().unwrap().contains("shared_read"));

    let mut p = p;
    p.settings.path_overlap = Level::Error;
    assert_eq!(validate(&p, None, &tree)[0].severity, Severity::Error);
    p.settings.path_overlap = Level::Off;
    assert!(validate(&p, None, &tree).is_empty());

    // Capped at 10 names.
    let p = plan_of(vec![stream("a", &["1"], &["x/**"]), stream("b", &["2"], &["x/*.rs"])]);
    let tree: Vec<String> = (0..15).map(|i| format!("x/f{i:02}.rs")).collect();
    let f = validate(&p, None, &tree);
    assert_eq!(f.len(), 1);
    assert!(f[0].message.starts_with(r#"streams "a" and "b" both own 15 files: x/f00.rs, "#), "{}", f[0].message);
    assert!(f[0].message.ends_with("x/f09.rs, and 5 more"), "{}", f[0].message);
}

#[test]
fn potential_overlap_without_files() {
    let case = |a: &[&str], b: &[&str]| -> Vec<Finding> {
        validate(&plan_of(vec![stream("a", &["1"], a), stream("b", &["2"], b)]), None, &[])
    };
    let f = case(&["src/**"], &["src/auth/**"]);
    assert_eq!(codes(&f), vec!["potential_overlap"]);
    assert_eq!(
        f[0].message,
        r#"streams "a" and "b" may own the same files: "src/**" (a) and "src/auth/**" (b), both matching "src/auth/a""#
    );
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(codes(&case(&["lib/**"], &["lib/**"])), vec!["potential_overlap"]);
    assert_eq!(codes(&case(&["src/auth/"], &["src/auth/**"])), vec!["potential_overlap"]);
    assert_eq!(codes(&case(&["src/*.rs"], &["src/main.rs"])), vec!["potential_overlap"]);
    assert_eq!(codes(&case(&["src/middleware/auth*"], &["src/middleware/authz.rs"])), vec!["potential_overlap"]);
    assert_eq!(codes(&case(&["**/*.rs"], &["src/auth/**"])), vec!["potential_overlap"]);
    // Cannot meet.
    assert!(case(&["src/auth/**"], &["src/authz/**"]).is_empty());
    assert!(case(&["*.md"], &["src/**"]).is_empty());
    assert!(case(&["**/*.md"], &["**/*.rs"]).is_empty());
    assert!(case(&["src/*.md"], &["src/lib.rs"]).is_empty());
    assert!(case(&["src/*/mod.rs"], &["src/*.rs"]).is_empty());
    // Many pairs: five named, the rest counted.
    let f = case(&["a/**", "b/**", "c/**", "d/**", "e/**", "f/**", "g/**"], &["**"]);
    assert!(f[0].message.ends_with(", and 2 more glob pairs"), "{}", f[0].message);
    // Not reported as potential when the pair already overlaps concretely.
    let p = plan_of(vec![stream("a", &["1"], &["src/**"]), stream("b", &["2"], &["src/**", "lib/**"])]);
    assert_eq!(codes(&validate(&p, None, &strings(&["src/x", "lib/y"]))), vec!["overlap"]);
}

#[test]
fn potential_overlap_is_exact_for_braces_classes_and_stars() {
    let case = |a: &str, b: &str| -> Vec<Finding> {
        let mut p = plan_of(vec![stream("a", &["1"], &[a]), stream("b", &["2"], &[b])]);
        p.settings.path_overlap = Level::Error;
        validate(&p, None, &[])
    };
    // Disjoint: no finding, even under path_overlap: error.
    for (a, b) in [
        ("docs/{routing,pinia}.md", "docs/{elk,todo}.md"),
        ("docs/[rp]*.md", "docs/[et]*.md"),
        ("docs/[!r]*.md", "docs/r*.md"),
        ("docs/[a-f]?.md", "docs/[g-z]?.md"),
        ("src/{a,b}/**", "src/c/**"),
        ("src/**/*.{rs,toml}", "src/**/*.md"),
        ("src/**", "src"),
    ] {
        assert_eq!(case(a, b), Vec::new(), "{a} and {b}");
    }
    // Meeting: an error, naming a path both would own.
    for (a, b, example) in [
        ("src/**", "src/a/*.rs", "src/a/a.rs"),
        ("docs/{routing,pinia}.md", "docs/{pinia,elk}.md", "docs/pinia.md"),
        ("docs/[rp]*.md", "docs/[pt]*.md", "docs/p.md"),
        ("**/*.md", "docs/[!x]*", "docs/a.md"),
        ("{src,lib}/**/mod.rs", "lib/a/**", "lib/a/mod.rs"),
    ] {
        let f = case(a, b);
        assert_eq!(codes(&f), vec!["potential_overlap"], "{a} and {b}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].message.ends_with(&format!(", both matching {example:?}")), "{}", f[0].message);
    }
}

#[test]
fn globs_matching_no_file_warn_unless_created() {
    let text = "version: 1\nstreams:\n  docs:\n    stories: [US-1]\n    paths: ['docs/**', 'en/zh/**', 'fetch/async/**']\n    creates: [docs/new.md, 'src/new/*.rs']\n  web:\n    stories: [US-2]\n    paths: ['web/*.ts', src/web, 'src/{a,b}.rs']\n";
    let plan = parse(text).unwrap();
    let docs = plan.stream("docs").unwrap();
    assert_eq!(docs.paths, strings(&["docs/**", "en/zh/**", "fetch/async/**", "docs/new.md", "src/new/*.rs"]));
    assert_eq!(docs.creates, strings(&["docs/new.md", "src/new/*.rs"]));
    let tree = strings(&["docs/guide.md", "web/app.ts", "src/web/mod.rs", "src/b.rs"]);
    let f = validate(&plan, None, &tree);
    assert_eq!(codes(&f), vec!["bare_directory", "no_match"], "{f:#?}");
    assert_eq!(
        f[1].message,
        r#"stream "docs" (line 3): globs "en/zh/**" and "fetch/async/**" match no file in the tree"#
    );
    assert_eq!(f[1].severity, Severity::Warning);
    assert!(f[1].hint.as_deref().unwrap().contains("`creates:`"), "{:?}", f[1].hint);
    // One glob, said once; a glob listed in both `paths` and `creates` is marked as created.
    let plan = parse("version: 1\nstreams:\n  a:\n    paths: [x/**, y.md]\n    creates: y.md\n  b:\n    paths: z/**\n")
        .unwrap();
    assert_eq!(plan.streams[0].paths, strings(&["x/**", "y.md"]));
    let f = validate(&plan, None, &strings(&["x/1"]));
    assert_eq!(codes(&f), vec!["no_stories", "no_stories", "no_match"]);
    assert_eq!(f[2].message, r#"stream "b" (line 6): glob "z/**" matches no file in the tree"#);
    // An empty tree (a repository without commits) has nothing to match against.
    assert_eq!(codes(&validate(&plan, None, &[])), vec!["no_stories", "no_stories"]);
}

#[test]
fn shared_read_overlap_warns() {
    let mut p = plan_of(vec![stream("api", &["1"], &["src/**"]), stream("ui", &["2"], &["web/**"])]);
    p.settings.shared_read = strings(&["src/types/**"]);
    p.settings.path_overlap = Level::Off; // does not silence shared_read
    let f = validate(&p, None, &strings(&["src/types/user.rs", "src/api.rs", "web/index.html"]));
    assert_eq!(codes(&f), vec!["shared_read"]);
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(
        f[0].message,
        r#"stream "api" owns 1 file that settings.shared_read makes read-only: src/types/user.rs"#
    );
    let f = validate(&p, None, &[]);
    assert_eq!(codes(&f), vec!["shared_read"]);
    assert_eq!(f[0].message, r#"paths of stream "api" overlap settings.shared_read: "src/**" overlaps "src/types/**""#);
}

#[test]
fn glob_semantics() {
    let set = compile_globs(&strings(&["src/*.rs", "docs/**", "lib/", "./tools/x.sh", "a/{b,c}/*.md"])).unwrap();
    for yes in ["src/main.rs", "docs/a/b/c.md", "docs/x", "lib/a/b.rs", "tools/x.sh", "a/b/r.md", "a/c/r.md"] {
        assert!(set.is_match(yes), "{yes}");
    }
    for no in ["src/a/main.rs", "srcx/main.rs", "docs", "lib", "a/d/r.md", "x/src/main.rs"] {
        assert!(!set.is_match(no), "{no}");
    }
    assert!(compile_globs(&strings(&["**"])).unwrap().is_match("a/b/c"));
    let e = compile_globs(&strings(&["ok/**", "bad/[x"])).unwrap_err().to_string();
    assert!(e.starts_with(r#"invalid glob "bad/[x": "#), "{e}");
    assert!(compile_globs(&strings(&["/abs"])).unwrap_err().to_string().contains("absolute"));
    assert!(compile_globs(&strings(&["a/../b"])).unwrap_err().to_string().contains(".."));
    assert!(compile_globs(&[]).unwrap().is_empty());

    assert_eq!(literal_prefix("src/auth/**"), "src/auth/");
    assert_eq!(literal_prefix("src/middleware/auth*"), "src/middleware/auth");
    assert_eq!(literal_prefix("**/*.rs"), "");
    assert_eq!(literal_prefix("README.md"), "README.md");
    assert_eq!(literal_prefix("./docs/{a,b}"), "docs/");
    assert_eq!(literal_prefix("é/ü?"), "é/ü");
}

#[test]
fn topo_order_follows_depends_on() {
    let mut p = plan_of(vec![
        stream("ui", &[], &[]),
        stream("api", &[], &[]),
        stream("db", &[], &[]),
        stream("docs", &[], &[]),
        stream("mid", &[], &[]),
    ]);
    p.streams[0].depends_on = strings(&["api"]);
    p.streams[1].depends_on = strings(&["mid"]);
    p.streams[4].depends_on = strings(&["db", "nonexistent"]);
    let all = strings(&["ui", "api", "db", "docs", "mid"]);
    assert_eq!(topo_order(&p, &all).unwrap(), strings(&["db", "docs", "mid", "api", "ui"]));
    // Through a stream that is not being ordered (mid).
    assert_eq!(topo_order(&p, &strings(&["ui", "db"])).unwrap(), strings(&["db", "ui"]));
    assert_eq!(topo_order(&p, &strings(&["docs", "db"])).unwrap(), strings(&["docs", "db"]));
    assert_eq!(topo_order(&p, &[]).unwrap(), Vec::<String>::new());
    assert_eq!(topo_order(&p, &strings(&["db", "db"])).unwrap(), strings(&["db"]));
    assert_eq!(
        topo_order(&p, &strings(&["dbb"])).unwrap_err().to_string(),
        r#"unknown stream "dbb"; did you mean "db"?"#
    );
    p.streams[2].depends_on = strings(&["ui"]);
    assert_eq!(
        topo_order(&p, &strings(&["ui"])).unwrap_err().to_string(),
        "dependency cycle: ui -> api -> mid -> db -> ui"
    );
    p.streams[3].depends_on = strings(&["docs"]);
    assert_eq!(topo_order(&p, &strings(&["docs"])).unwrap_err().to_string(), "dependency cycle: docs -> docs");
}

// ------------------------------------------------------------------------------------------------
// properties

fn yamlish() -> impl Strategy<Value = String> {
    let tokens = prop::sample::select(vec![
        "version",
        "prd",
        "streams",
        "settings",
        "boulder",
        "agents",
        "auth",
        "api",
        "paths",
        "stories",
        "branch",
        "depends_on",
        "agent",
        "max_iterations",
        "merge_strategy",
        "cooldown",
        "idle_threshold",
        "shared_read",
        "path_overlap",
        "backoff_multiplier",
        ":",
        ": ",
        "- ",
        "\n",
        "  ",
        "    ",
        "\t",
        "[",
        "]",
        "{",
        "}",
        ",",
        "&a ",
        "*a",
        "&b ",
        "*b",
        "<<: ",
        "'",
        "\"",
        "#",
        "---",
        "...",
        "? ",
        "|",
        ">",
        "!!str ",
        "!x ",
        "~",
        "30s",
        "5m",
        "1e999",
        "-1",
        "0",
        "true",
        "src/**",
        "US-001",
        "1.10",
        "\\",
        "%YAML 1.2",
        "\u{0}",
        "é",
        "\r\n",
    ]);
    prop::collection::vec(tokens, 0..80).prop_map(|v| v.concat())
}

fn plan_strategy() -> impl Strategy<Value = (Plan, Vec<String>, Vec<String>)> {
    let name = "[a-c.\\-/ ]{0,3}|auth|api|ui";
    let glob = "[a-c*?/.\\[\\]{},\\\\]{0,6}|src/\\*\\*|\\*\\*|src/a/|/x|\\.\\./y";
    let one = (
        name,
        prop::option::of(name),
        prop::collection::vec("[A-C]-?[0-9]?", 0..4),
        prop::collection::vec(glob, 0..4),
        prop::collection::vec(name, 0..3),
        prop::option::of(name),
    );
    (
        prop::collection::vec(one, 0..6),
        prop::collection::vec(glob, 0..3),
        prop::collection::vec(name, 0..2),
        prop::collection::vec("[A-C]-?[0-9]?", 0..6),
        prop::collection::vec("[a-c/.]{1,6}", 0..12),
        prop::sample::select(vec![Level::Error, Level::Warn, Level::Off]),
    )
        .prop_map(|(streams, shared, agents, ids, tree, overlap)| {
            let mut plan = plan_of(Vec::new());
            for (i, (name, branch, stories, paths, deps, agent)) in streams.into_iter().enumerate() {
                let mut s = stream(&name, &[], &[]);
                if let Some(b) = branch {
                    s.branch = b;
                }
                s.stories = stories;
                s.paths = paths;
                s.depends_on = deps;
                s.agent = agent;
                s.line = i;
                plan.streams.push(s);
            }
            plan.settings.shared_read = shared;
            plan.settings.path_overlap = overlap;
            for a in agents {
                plan.settings.agents.insert(a, "cmd".into());
            }
            (plan, ids, tree)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_text(text in "\\PC*") {
        let _ = parse(&text);
    }

    #[test]
    fn parse_never_panics_on_any_chars(text in ".{0,200}") {
        let _ = parse(&text);
    }

    #[test]
    fn parse_never_panics_on_yamlish(text in yamlish()) {
        if let Err(e) = parse(&text) {
            prop_assert!(!e.message.is_empty());
            prop_assert!(!e.message.contains('\u{1}'), "probe text leaked: {}", e.message);
        }
    }

    #[test]
    fn parse_accepts_what_it_should(names in prop::collection::btree_set("[a-z][a-z0-9_-]{0,8}", 0..6),
                                    story in "[A-Z]{1,3}-[0-9]{1,4}") {
        let mut text = String::from("version: 1\nstreams:\n");
        for n in &names {
            text.push_str(&format!("  {n}:\n    stories: [{story}]\n    paths: [src/{n}/**]\n"));
        }
        let plan = parse(&text).map_err(|e| TestCaseError::fail(e.message))?;
        prop_assert_eq!(plan.streams.len(), names.len());
        for (i, s) in plan.streams.iter().enumerate() {
            prop_assert_eq!(s.line, 3 + 3 * i);
            prop_assert_eq!(&s.branch, &format!("boulder/{}", s.name));
        }
    }

    #[test]
    fn validate_never_panics((plan, ids, tree) in plan_strategy()) {
        let findings = validate(&plan, Some(&ids), &tree);
        for f in &findings {
            prop_assert!(!f.message.is_empty());
        }
        let _ = validate(&plan, None, &[]);
        let names: Vec<String> = plan.streams.iter().map(|s| s.name.clone()).collect();
        let _ = topo_order(&plan, &names);
        let globs: Vec<String> = plan.streams.iter().flat_map(|s| s.paths.clone()).collect();
        let _ = compile_globs(&globs);
        for g in &globs {
            let _ = literal_prefix(g);
        }
    }
}

/// A small glob: components of a few atoms (literals, wildcards, classes, braces, escapes), or
/// `**`, joined by `/`.
fn small_glob() -> impl Strategy<Value = String> {
    let atom = prop::sample::select(vec![
        "a", "b", ".", "?", "*", "[ab]", "[!a]", "[a-b]", "[!b]", "[.c]", "{a,b}", "{a/b,c}", "{,a}", "{*.a,b?}",
        "{a,**/b}", "\\*",
    ]);
    let component = prop_oneof![
        1 => Just("**".to_string()),
        5 => prop::collection::vec(atom, 1..4).prop_map(|v| v.concat()),
    ];
    prop::collection::vec(component, 1..4).prop_map(|v| v.join("/"))
}

/// A small path: one to three components of one to three of `a`, `b`, `c`, `.`.
fn small_path() -> impl Strategy<Value = String> {
    let component = prop::collection::vec(prop::sample::select(vec!['a', 'b', 'c', '.']), 1..4)
        .prop_map(|v| v.into_iter().collect::<String>());
    prop::collection::vec(component, 1..4).prop_map(|v| v.join("/"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The overlap decision against brute force: globset, as the plan's globs are compiled,
    /// matching generated paths. A path both globs match means an overlap; an overlap's example
    /// is matched by both.
    #[test]
    fn overlap_agrees_with_matching_paths(a in small_glob(), b in small_glob(),
                                          paths in prop::collection::vec(small_path(), 64)) {
        use super::validate::{meet, Meet};
        use super::validate::compiled::compile_one;
        let (Ok(ga), Ok(gb)) = (compile_one(&a), compile_one(&b)) else {
            // `..` components: refused before any comparison.
            return Ok(());
        };
        let decision = meet(&ga, &gb);
        if let Some(p) = paths.iter().find(|p| ga.is_match(p.as_bytes()) && gb.is_match(p.as_bytes())) {
            prop_assert_ne!(&decision, &Meet::No, "{} and {} both match {}", a, b, p);
        }
        match decision {
            Meet::Yes(Some(example)) => prop_assert!(
                ga.is_match(example.as_bytes()) && gb.is_match(example.as_bytes()),
                "{} and {}: example {} not matched by both", a, b, example
            ),
            Meet::Yes(None) => prop_assert!(false, "{} and {}: decided without the exact test", a, b),
            Meet::No => {}
        }
    }
}

#[test]
fn sparse_dirs_hold_every_path_a_stream_may_touch() {
    let text = "version: 1\nprd: docs/prd/PRD.md\nstreams:\n  a:\n    paths: ['src/auth/**', 'src/mw/auth*', 'lib/x.rs', README.md, './tests/a/']\nsettings:\n  shared_read: ['proto/*.proto']\n";
    let plan = parse(text).unwrap();
    let a = plan.stream("a").unwrap();
    assert_eq!(plan.sparse_dirs(a).unwrap(), [".boulder", "docs/prd", "lib", "proto", "src/auth", "src/mw", "tests/a"]);
    for whole in ["**/*.rs", "**", "{src,lib}/**"] {
        let text = format!("version: 1\nstreams:\n  a:\n    paths: ['{whole}']\n");
        let plan = parse(&text).unwrap();
        assert_eq!(plan.sparse_dirs(plan.stream("a").unwrap()), None, "{whole}");
    }
    let plan = parse("version: 1\nstreams:\n  a:\n    paths: ['*.md']\n").unwrap();
    assert_eq!(plan.sparse_dirs(plan.stream("a").unwrap()).unwrap(), [".agents/tasks", ".boulder"]);
}

#[test]
fn numbers_past_64_bits_are_named_without_serdes_internal_type() {
    for (v, found) in [
        ("99999999999999999999999", "`99999999999999999999999`"),
        ("-99999999999999999999999", "`-99999999999999999999999`"),
    ] {
        for key in ["settings:\n  port_base", "settings:\n  auto_merge", "streams:\n  a:\n    max_iterations"] {
            let err = parse(&format!("version: 1\n{key}: {v}\n")).unwrap_err();
            assert!(err.message.contains(&format!("found integer {found}")), "{}", err.message);
            assert!(!err.message.contains("128"), "{}", err.message);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// budgets and prices

#[test]
fn budgets_and_prices_parse() {
    let plan = ok("streams:\n  auth:\n    budget: {usd: 12.5, tokens: 2000000, time: 90m}\n  api: {}\nsettings:\n  budget: {usd: \"$100\", time: 2h}\n  prices:\n    claude-sonnet-4-5: {input: 3, output: 15, cache_write: 3.75, cache_read: 0.3}\n    gpt-5: {input: 1.25, output: 10}\n");
    let b = plan.streams[0].budget;
    assert_eq!((b.usd, b.tokens, b.time), (Some(12.5), Some(2_000_000), Some(std::time::Duration::from_secs(5400))));
    assert!(!plan.streams[1].budget.is_set());
    assert_eq!(plan.settings.budget.usd, Some(100.0));
    assert_eq!(plan.settings.budget.time, Some(std::time::Duration::from_secs(7200)));
    let p = plan.settings.prices["claude-sonnet-4-5"];
    assert_eq!((p.input, p.output, p.cache_write, p.cache_read), (Some(3.0), Some(15.0), Some(3.75), Some(0.3)));
    assert_eq!(plan.settings.prices["gpt-5"].cache_read, None);
}

#[test]
fn bad_budgets_and_prices_name_the_key_and_the_fix() {
    let e = err("streams:\n  auth:\n    budget: {usd: -3}\n");
    assert!(e.message.contains("streams.auth.budget.usd must be a number of US dollars above 0"), "{}", e.message);
    assert_eq!(e.line, Some(3));
    let e = err("streams:\n  auth:\n    budget: {tokens: 1.5}\n");
    assert!(e.message.contains("streams.auth.budget.tokens must be a whole number"), "{}", e.message);
    let e = err("settings:\n  budget: {time: soon}\n");
    assert!(e.message.contains("settings.budget.time must be a duration such as 30s"), "{}", e.message);
    let e = err("settings:\n  budget: {dollars: 3}\n");
    assert!(e.message.contains("dollars") && e.message.contains("usd"), "{}", e.message);
    let e = err("settings:\n  prices:\n    m: {input: lots}\n");
    assert!(e.message.contains("settings.prices.m.input must be US dollars per million tokens"), "{}", e.message);
    let e = err("settings:\n  prices:\n    m: {inptu: 3}\n");
    assert!(e.message.contains("input"), "{}", e.message);
}
