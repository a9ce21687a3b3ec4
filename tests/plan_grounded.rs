//! A plan grounded in the repository: without a plan, `stream suggest` and `prd` find the PRD
//! where people keep it; `stream validate` checks the plan's globs against the files of the tree
//! (globs matching nothing, `creates:`) and decides overlap between globs exactly.

use crate::common::*;

/// A Ralph `prd.json`, as Ralph's own skill writes it.
const RALPH_JSON: &str = r#"{
  "project": "Docs site",
  "branchName": "ralph/docs",
  "description": "Rework the guide",
  "userStories": [
    { "id": "US-001", "title": "Routing page", "description": "Rewrite `docs/routing.md`.",
      "acceptanceCriteria": ["builds"], "priority": 1, "passes": false, "notes": "" },
    { "id": "US-002", "title": "Elk page", "description": "Rewrite `docs/elk.md`.",
      "acceptanceCriteria": ["builds"], "priority": 2, "passes": false, "notes": "" }
  ]
}
"#;

fn ralph_repo() -> TestRepo {
    TestRepo::with_files(&[
        ("scripts/ralph/prd.json", RALPH_JSON),
        ("scripts/ralph/ralph.sh", "#!/bin/sh\n"),
        ("docs/routing.md", "# routing\n"),
        ("docs/pinia.md", "# pinia\n"),
        ("docs/elk.md", "# elk\n"),
        ("docs/todo.md", "# todo\n"),
        ("README.md", "# docs site\n"),
    ])
}

#[test]
fn without_a_plan_suggest_and_prd_find_the_prd_where_ralph_keeps_it() {
    let repo = ralph_repo();
    let r = repo.boulder(&["stream", "suggest"]).ok();
    assert_shown!("suggest_finds_ralphs_prd_json", r);
    let show = repo.boulder(&["prd", "show", "--json"]).ok().json();
    assert_eq!(show["total"], 2);
    assert_eq!(show["format"], "user_stories_json");
    // Written, the plan names the PRD, so every command reads it from there.
    repo.boulder(&["stream", "suggest", "--write"]).ok();
    let plan = repo.read(".boulder/streams.yaml");
    assert!(plan.contains("prd: scripts/ralph/prd.json\n"), "{plan}");
    repo.boulder(&["stream", "validate"]).ok();
    // An untracked PRD in the worktree counts too.
    let fresh = TestRepo::with_files(&[("README.md", "# x\n")]);
    fresh.write(".agents/tasks/prd-recipes.md", "# PRD: Recipes\n\n### [ ] US-001: Save\nIn `README.md`.\n");
    let r = fresh.boulder(&["stream", "suggest"]).ok();
    assert_shown!("suggest_finds_an_agents_tasks_prd", r);
}

#[test]
fn several_prds_or_none_ask_for_prd() {
    let repo = ralph_repo();
    repo.write("tasks/prd-docs.md", "# PRD: Docs\n\n### [ ] US-001: Routing\nIn `docs/routing.md`.\n");
    repo.write("notes/prd.md", "# not at a usual place\n");
    assert_shown!("suggest_several_prds", repo.boulder(&["stream", "suggest"]));
    let r = repo.boulder(&["prd", "show"]).code(2);
    assert_shown!("several_prds_refused", r);
    // --prd settles it.
    let r = repo.boulder(&["stream", "suggest", "--prd", "tasks/prd-docs.md"]).ok();
    assert_shown!("several_prds_one_named", r);

    let none = TestRepo::with_files(&[("README.md", "# nothing planned\n"), ("docs/prd.md", "# elsewhere\n")]);
    assert_shown!("suggest_no_prd", none.boulder(&["stream", "suggest"]));
}

#[test]
fn validate_checks_globs_against_the_tree_and_splits_a_folder_by_name() {
    let repo = ralph_repo();
    repo.write(
        ".boulder/streams.yaml",
        "version: 1\nprd: scripts/ralph/prd.json\nstreams:\n  guide:\n    stories: [US-001]\n    paths: ['docs/{routing,pinia}.md', 'en/zh/**']\n    creates: [docs/new-page.md]\n  pages:\n    stories: [US-002]\n    paths: ['docs/[et]*.md', 'docs/new-*.md']\nsettings:\n  path_overlap: error\n",
    );
    let r = repo.boulder(&["stream", "validate", "--json"]).code(2).json();
    let findings = r["findings"].as_array().unwrap();
    let codes: Vec<&str> = findings.iter().map(|f| f["code"].as_str().unwrap()).collect();
    // `docs/new-*.md` matches nothing yet, and is not marked as created; `guide` creates
    // `docs/new-page.md`, which `pages` would own too.
    assert_eq!(codes, ["no_match", "no_match", "potential_overlap"], "{findings:#?}");
    assert_eq!(findings[0]["message"], r#"stream "guide" (line 4): glob "en/zh/**" matches no file in the tree"#);
    assert_eq!(findings[0]["severity"], "warning");
    assert_eq!(findings[1]["message"], r#"stream "pages" (line 8): glob "docs/new-*.md" matches no file in the tree"#);
    assert_eq!(
        findings[2]["message"],
        r#"streams "guide" and "pages" may own the same files: "docs/new-page.md" (guide) and "docs/new-*.md" (pages), both matching "docs/new-page.md""#
    );
    assert_eq!(findings[2]["severity"], "error");

    // Split cleanly, and each new file marked: nothing to report.
    repo.write(
        ".boulder/streams.yaml",
        "version: 1\nprd: scripts/ralph/prd.json\nstreams:\n  guide:\n    stories: [US-001]\n    paths: ['docs/{routing,pinia}.md']\n    creates: [docs/new-guide.md]\n  pages:\n    stories: [US-002]\n    paths: ['docs/{elk,todo}.md', 'docs/[et]*.md']\n    creates: 'docs/new-[!g]*.md'\nsettings:\n  path_overlap: error\n",
    );
    let r = repo.boulder(&["stream", "validate"]).ok();
    assert_eq!(r.stdout, "plan ok: 2 streams, 2 stories assigned, 0 errors, 0 warnings\n");
}
