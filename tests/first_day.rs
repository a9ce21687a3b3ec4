//! The first day of a real user: `stream suggest` writes a plan that works, `stream add` adds a
//! stream to a hand-written plan, messages that hold (pipes closed early, inside `.git/`), man
//! pages and completions that are installed and complete from the repository.

mod common;

use common::*;

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
fn suggest_groups_plain_ids_by_shared_paths_and_words_into_dir_globs() {
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
    assert_eq!(get("store-work"), (vec!["US-001".into(), "US-002".into()], vec!["src/store/**".into()]));
    assert_eq!(get("billing"), (vec!["US-003".into(), "US-004".into()], vec!["src/billing/**".into()]));
    // `src/theme` is a directory mention: it becomes a glob that owns what is below it.
    assert_eq!(get("theme"), (vec!["US-005".into()], vec!["src/theme/**".into()]));
    repo.boulder(&["stream", "suggest", "--write"]).ok();
    let v = repo.boulder(&["stream", "validate"]).ok();
    assert!(v.stdout.contains("0 errors, 0 warnings"), "{}", v.stdout);
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
    assert!(r.stderr.contains("added stream hotfix"), "{}", r.stderr);
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
    assert!(r.stderr.contains("already has a stream \"billing\""), "{}", r.stderr);
    assert_eq!(repo.read(".boulder/streams.yaml"), want);
    // Without a plan, one is made.
    let fresh = ralph_repo();
    fresh.boulder(&["stream", "add", "solo", "--story", "US-001", "--path", "src/store/**"]).ok();
    assert!(fresh.read(".boulder/streams.yaml").contains("  solo:\n    stories: [US-001]\n"));
}
