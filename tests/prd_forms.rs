//! PRDs as people write them: `stories[]` done with `passes`, stories under `phases[]`, a
//! `tasks[]` list, and files with no story in any form read by git-boulder (said on stderr,
//! exit 0), driven through `git boulder prd show/next` on real repositories.

use crate::common::*;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/prds").join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `(id, status, wave)` of each story `prd show --json` lists.
fn shown(repo: &TestRepo, path: &str) -> (serde_json::Value, Vec<(String, String, String)>) {
    let r = repo.boulder(&["prd", "show", "--prd", path, "--json"]).ok();
    assert!(r.stderr.is_empty(), "no warning expected: {}", r.stderr);
    let v = r.json();
    let list = v["stories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let wave = s["wave"].as_str().unwrap_or("").to_string();
            (s["id"].as_str().unwrap().to_string(), s["status"].as_str().unwrap().to_string(), wave)
        })
        .collect();
    (v, list)
}

fn row(id: &str, status: &str, wave: &str) -> (String, String, String) {
    (id.into(), status.into(), wave.into())
}

#[test]
fn stories_done_with_passes_count_as_done() {
    let repo = TestRepo::with_files(&[("prd.json", &fixture("stories-passes.json"))]);
    let (v, list) = shown(&repo, "prd.json");
    assert_eq!(v["format"], "stories_json");
    assert_eq!(v["done"], 2);
    assert_eq!(
        list,
        [
            row("US-001", "completed", ""),
            row("US-002", "completed", ""),
            row("US-003", "pending", ""),
            row("US-004", "pending", "")
        ]
    );
    let next = repo.boulder(&["prd", "next", "--prd", "prd.json", "--json"]).ok().json();
    assert_eq!(next["id"], "US-003");
    assert_eq!(next["remaining"], 2);
}

#[test]
fn stories_nested_under_phases() {
    let repo = TestRepo::with_files(&[("prd.json", &fixture("phases.json"))]);
    let (v, list) = shown(&repo, "prd.json");
    assert_eq!(v["format"], "phases_json");
    assert_eq!(v["title"], "Invoice service");
    assert_eq!(
        list,
        [
            row("INV-1", "completed", "1"),
            row("INV-2", "in_progress", "1"),
            row("INV-3", "pending", "2"),
            row("INV-4", "pending", "2")
        ]
    );
    // INV-3 waits on INV-2 (dependsOn), so the next open story is INV-2.
    let next = repo.boulder(&["prd", "next", "--prd", "prd.json", "--json"]).ok().json();
    assert_eq!(next["id"], "INV-2");
    assert_eq!(next["remaining"], 3);
}

#[test]
fn a_top_level_task_list_with_status() {
    let repo = TestRepo::with_files(&[("tasks.json", &fixture("tasks.json"))]);
    let (v, list) = shown(&repo, "tasks.json");
    assert_eq!(v["format"], "tasks_json");
    assert_eq!(
        list,
        [row("1", "completed", ""), row("2", "in_progress", ""), row("3", "pending", ""), row("4", "blocked", "")]
    );
    let deps = repo.boulder(&["prd", "show", "--prd", "tasks.json", "--json"]).ok().json();
    assert_eq!(deps["stories"][2]["depends_on"], serde_json::json!(["2"]));
}

#[test]
fn no_stories_in_any_form_is_said_on_stderr() {
    let repo = TestRepo::with_files(&[
        ("headings.md", &fixture("no-stories.md")),
        ("prose.md", "# Plan\n\nWe will build a calendar. Then we will ship it.\n"),
        ("empty.json", "{\"project\": \"x\", \"userStories\": []}\n"),
    ]);
    for path in ["headings.md", "prose.md", "empty.json"] {
        let r = repo.boulder(&["prd", "show", "--prd", path]).ok();
        assert_shown!(format!("no_stories_in_{}", path.replace('.', "_")), r);
        let r = repo.boulder(&["prd", "next", "--prd", path, "--json"]).ok();
        assert!(r.json()["id"].is_null());
        assert!(r.stderr.contains("no stories"), "{path}: {}", r.stderr);
    }
    let r = repo.boulder(&["prd", "show", "--prd", "empty.json"]).ok();
    assert!(r.stderr.contains("\"userStories\" list is empty"), "{}", r.stderr);
}

#[test]
fn a_story_without_an_id_is_an_error_naming_the_entry() {
    let repo = TestRepo::with_files(&[
        ("prd.json", &fixture("story-without-id.json")),
        ("other.json", "{\"items\": [{\"id\": 1}]}"),
    ]);
    let r = repo.boulder(&["prd", "show", "--prd", "prd.json"]).code(2);
    assert_shown!("a_story_without_an_id", r);
    let r = repo.boulder(&["prd", "show", "--prd", "other.json"]).code(2);
    assert_shown!("none_of_the_forms", r);
}
