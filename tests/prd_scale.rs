//! The PRD and the plan at scale: `prd show` (table and JSON) keeps its exact bytes — key order,
//! both kinds of story position, escaped controls — now that it is written straight from the
//! parsed stories, and a PRD of thousands of stories shared out over a hundred streams reads the
//! same through `prd show`, `prd next`, `status`, `stream validate` and `stream suggest`.

use crate::common::*;

const MARKDOWN: &str = "# PRD: Shop\n\n### [x] US-001: Sign in\nBody with `src/auth/login.rs`.\n\n### [ ] US-002: Cart — BLOCKED\nWaits on payments.\n";

const TASKS: &str = r#"{"project": "Tasks", "tasks": [
  {"id": "T-1", "title": "First", "status": "done", "priority": 2},
  {"id": "T-2", "title": "Sec\u202eond\u009b", "status": "pending", "dependencies": ["T-1"]}
]}
"#;

#[test]
fn prd_show_json_bytes_for_markdown_and_json_prds() {
    let repo = TestRepo::with_files(&[("prd.md", MARKDOWN), ("tasks.json", TASKS)]);
    let md = repo.boulder(&["prd", "show", "--prd", "prd.md", "--json"]).ok();
    assert_eq!(
        md.stdout,
        r#"{
  "done": 1,
  "format": "markdown",
  "stories": [
    {
      "depends_on": [],
      "id": "US-001",
      "priority": null,
      "span": {
        "lines": {
          "end": 5,
          "start": 3
        }
      },
      "status": "completed",
      "title": "Sign in",
      "wave": null
    },
    {
      "depends_on": [],
      "id": "US-002",
      "priority": null,
      "span": {
        "lines": {
          "end": 7,
          "start": 6
        }
      },
      "status": "blocked",
      "title": "Cart — BLOCKED",
      "wave": null
    }
  ],
  "stream": null,
  "title": "PRD: Shop",
  "total": 2
}
"#
    );
    let json = repo.boulder(&["prd", "show", "--prd", "tasks.json", "--json"]).ok();
    assert_eq!(
        json.stdout,
        r#"{
  "done": 1,
  "format": "tasks_json",
  "stories": [
    {
      "depends_on": [],
      "id": "T-1",
      "priority": 2,
      "span": {
        "index": {
          "index": 0
        }
      },
      "status": "completed",
      "title": "First",
      "wave": null
    },
    {
      "depends_on": [
        "T-1"
      ],
      "id": "T-2",
      "priority": null,
      "span": {
        "index": {
          "index": 1
        }
      },
      "status": "pending",
      "title": "Sec\u202eond\u009b",
      "wave": null
    }
  ],
  "stream": null,
  "title": "Tasks",
  "total": 2
}
"#
    );
}

#[test]
fn prd_show_table_bytes() {
    let repo = TestRepo::with_files(&[("prd.md", MARKDOWN), ("tasks.json", TASKS)]);
    let md = repo.boulder(&["prd", "show", "--prd", "prd.md"]).ok();
    assert_eq!(
        md.stdout,
        "ID      STATUS     WAVE  TITLE\nUS-001  completed        Sign in\nUS-002  blocked          Cart — BLOCKED\n1/2 done\n"
    );
    let json = repo.boulder(&["prd", "show", "--prd", "tasks.json"]).ok();
    assert_eq!(
        json.stdout,
        "ID   STATUS     WAVE  TITLE\nT-1  completed        First\nT-2  pending          Sec\\u{202e}ond\\u{9b}\n1/2 done\n"
    );
}

/// A Ralph PRD of `n` stories (every third done) and a plan of `m` streams sharing them out,
/// each owning its own folder.
fn large_plan(n: usize, m: usize) -> TestRepo {
    let mut prd = String::from("# PRD: scale\n\n## Stories\n\n");
    for i in 0..n {
        let mark = if i % 3 == 0 { "x" } else { " " };
        prd.push_str(&format!(
            "### [{mark}] US-{i:06}: Story number {i}\nChange `src/s{:04}/f{i}.rs` and test it.\n\n",
            i % m
        ));
    }
    let mut plan = String::from("version: 1\nprd: .agents/tasks/prd.md\nstreams:\n");
    let per = n / m;
    for s in 0..m {
        let ids: Vec<String> = (s * per..(s + 1) * per).map(|i| format!("US-{i:06}")).collect();
        plan.push_str(&format!("  s{s:04}:\n    stories: [{}]\n    paths: ['src/s{s:04}/**']\n", ids.join(", ")));
    }
    plan.push_str("settings:\n  base_branch: main\n");
    TestRepo::with_files(&[(".agents/tasks/prd.md", &prd), (".boulder/streams.yaml", &plan)])
}

#[test]
fn thousands_of_stories_over_a_hundred_streams() {
    let repo = large_plan(3000, 100);
    let show = repo.boulder(&["prd", "show"]).ok();
    assert_eq!(show.stdout.lines().count(), 3002);
    assert!(show.stdout.ends_with("\n1000/3000 done\n"), "{}", &show.stdout[show.stdout.len() - 40..]);
    let json = repo.boulder(&["prd", "show", "--json"]).ok().json();
    assert_eq!((json["total"].as_u64(), json["done"].as_u64()), (Some(3000), Some(1000)));
    assert_eq!(json["stories"][2999]["id"], "US-002999");
    assert_eq!(json["stories"][2999]["span"]["lines"]["start"], 3 * 2999 + 5);
    let next = repo.boulder(&["prd", "next", "--json"]).ok().json();
    assert_eq!((next["id"].as_str(), next["remaining"].as_u64()), (Some("US-000001"), Some(2000)));

    // Each stream's 30 stories: 0, 3, …, 27 of them (10) done.
    let status = repo.boulder(&["status", "--json"]).ok().json();
    let streams = status["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 100);
    for s in streams {
        assert_eq!((s["progress"]["done"].as_u64(), s["progress"]["total"].as_u64()), (Some(10), Some(30)), "{s}");
    }
    let view = repo.boulder(&["prd", "show", "--stream", "s0099", "--json"]).ok().json();
    assert_eq!(view["stories"][0]["id"], "US-002970");
    assert_eq!((view["total"].as_u64(), view["done"].as_u64()), (Some(30), Some(10)));

    let validate = repo.boulder(&["stream", "validate"]).ok();
    assert_eq!(validate.stdout, "plan ok: 100 streams, 3000 stories assigned, 0 errors, 0 warnings\n");
    // Stories grouped by the folder their text names: one stream per folder, in PRD order.
    let suggest = repo.boulder(&["stream", "suggest"]).ok();
    assert_eq!(suggest.stdout.matches("    stories: [").count(), 100);
    assert!(suggest.stdout.contains("  s0099:\n    stories: [US-000099, US-000199, US-000299,"), "{}", suggest.stdout);
    assert!(suggest.stdout.contains(", US-002999]\n    paths: [src/s0099/**]\n"), "{}", suggest.stdout);

    // The plan lists a story twice in one stream and one in two streams: both are named.
    let plan = repo.read(".boulder/streams.yaml");
    repo.write(
        ".boulder/streams.yaml",
        &plan.replacen("stories: [US-000000,", "stories: [US-000000, US-000001, US-000030,", 1),
    );
    let bad = repo.boulder(&["stream", "validate"]).code(2);
    assert!(
        bad.stdout.contains("warning: story \"US-000001\" is listed twice in stream \"s0000\"\n"),
        "{}",
        bad.stdout
    );
    assert!(
        bad.stdout.contains("error: story \"US-000030\" is assigned to streams \"s0000\" and \"s0001\"\n"),
        "{}",
        bad.stdout
    );
    assert!(bad.stdout.contains("3002 stories assigned, 1 errors, 1 warnings"), "{}", bad.stdout);
}
