//! PRD parser tests: every form, the real PRDs of `../shared/fixtures/real-prds/` read in place,
//! the project's own fixtures, and property tests for the parser and the status rewrite.

use proptest::prelude::*;

use super::*;

fn ids(prd: &Prd) -> Vec<&str> {
    prd.stories.iter().map(|s| s.id.as_str()).collect()
}

fn statuses(prd: &Prd) -> Vec<Status> {
    prd.stories.iter().map(|s| s.status).collect()
}

fn md(text: &str) -> Prd {
    parse("prd.md", text).unwrap()
}

use Status::{Blocked, Completed, InProgress, Pending};

#[test]
fn ralph_headings() {
    let text = "# PRD\n\n## User Stories\n\n### Week 1: Setup\n\n### [ ] US-001: First\nbody\n#### Acceptance Criteria\n- [ ] a\n- [x] b\n\n### [x] US-002: Second\n\n### US-003: No box\n\n```md\n### [ ] US-999: In a fence\n```\n### [~] US-004: Started\n### [ ] US-005: BLOCKED on API\n## [X] US-006: Level two\n#### [-] US-007: Level four\n";
    let prd = md(text);
    assert_eq!(ids(&prd), ["US-001", "US-002", "US-003", "US-004", "US-005", "US-006", "US-007"]);
    assert_eq!(statuses(&prd), [Pending, Completed, Pending, InProgress, Blocked, Completed, InProgress]);
    assert_eq!(prd.format, Format::Markdown);
    assert_eq!(prd.title.as_deref(), Some("PRD"));
    assert_eq!(prd.stories[0].title, "First");
    assert!(prd.stories[0].text.contains("#### Acceptance Criteria"));
    assert_eq!(prd.stories[0].span, Span::Lines { start: 7, end: 12 });
    assert!(prd.stories.iter().all(|s| s.wave.is_none() && s.depends_on.is_empty()));
}

#[test]
fn id_forms_and_separators() {
    let text = "## Stories\n### [ ] US-AUTH-01: a\n### S01 - b\n### T-12 — c\n### STORY-3 – d\n### [x] US_4.1 e\n### [ ] US-005. f\n### [ ] X1:\n";
    let prd = md(text);
    assert_eq!(ids(&prd), ["US-AUTH-01", "S01", "T-12", "STORY-3", "US_4.1", "US-005", "X1"]);
    let titles: Vec<&str> = prd.stories.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(titles, ["a", "b", "c", "d", "e", "f", ""]);
}

#[test]
fn headings_that_are_not_stories() {
    let text = "# Title\n## Overview\n### Week 1: Setup\n### Phase 2 - Build\n### L2-Squad: Domain\n#### Acceptance Criteria\n## 1. Intro\n### US-001 without separator\n#US-002: no space\n    ### US-003: indented code\n### Milestone-A: x\n##### US-004: too deep\n";
    assert!(md(text).stories.is_empty(), "{:?}", ids(&md(text)));
}

#[test]
fn fences_and_comments_hide_stories() {
    let text = "### [ ] US-001: real\n```markdown\n### [ ] US-900: backtick fence\n```\n~~~\n### [ ] US-901: tilde fence\n```\n### [ ] US-902: a ``` line inside ~~~ does not close it\n~~~\n  ````\n### [ ] US-903: indented four-backtick fence\n  ```\n### [ ] US-904: still inside, the closer needs four\n  ````\n<!--\n### [ ] US-905: commented out\n-->\n### [x] US-002: real too\n```js\nlet s = \"### [ ] US-906: x\";\n";
    let prd = md(text);
    assert_eq!(ids(&prd), ["US-001", "US-002"]);
    // An unclosed fence hides the rest of the file; the story before it keeps its block.
    assert_eq!(prd.stories[1].span, Span::Lines { start: 18, end: 20 });
    // Inline code at a line start does not open a fence.
    let prd = md("```x``` is inline\n### [ ] US-001: seen\n");
    assert_eq!(ids(&prd), ["US-001"]);
}

#[test]
fn block_extent() {
    let text = "## [ ] US-001: outer\nintro\n### [ ] US-002: next story ends the block\n#### Notes\nn\n### Not a story\nx\n## Other section\ny\n";
    let prd = md(text);
    assert_eq!(prd.stories[0].span, Span::Lines { start: 1, end: 2 });
    assert_eq!(prd.stories[0].text, "## [ ] US-001: outer\nintro\n");
    assert_eq!(prd.stories[1].span, Span::Lines { start: 3, end: 5 });
    assert!(prd.stories[1].text.ends_with("#### Notes\nn\n"));
}

#[test]
fn blocked_headings() {
    let text = "### [!] US-001: a\n### [ ] US-002: BLOCKED waiting for keys\n### [ ] US-003: (blocked) x\n### [ ] US-004: Blocked: vendor\n### [ ] US-005: Show blocked users in the admin list\n### [x] US-006: BLOCKED once, done now\n### US-007: [Blocked] no box\n### [ ] US-008: Unblocked flow\n";
    assert_eq!(statuses(&md(text)), [Blocked, Blocked, Blocked, Blocked, Pending, Completed, Blocked, Pending]);
}

#[test]
fn waves_with_and_without_story_headings() {
    let text = "# Plan\n\n## Wave 1 — Foundation\n\n### S01: Schema\n- [x] a\n- [X] b\n\n### S02: API\n- [x] a\n- [ ] b\n\n### S03: UI\n- [ ] a\n  - [ ] nested\n\n### S04: Deploy\n- [ ] Blocked by ops\n- [x] other\n\n### S05: Blocked heading\n\n## Wave B: Cleanup\n\n- [ ] Task: Remove dead code\n  - detail\n  - [x] nested items belong to their task\n- [x] US-050: Rename things\n- [ ] 3. Fix docs\n- [ ] plain\n\n```\n- [ ] not a task\n```\n## Notes\n- [ ] not in a wave\n";
    let prd = md(text);
    assert_eq!(ids(&prd), ["S01", "S02", "S03", "S04", "S05", "WB-T1", "US-050", "T3", "WB-T4"]);
    assert_eq!(
        statuses(&prd),
        [Completed, InProgress, Pending, Blocked, Blocked, Pending, Completed, Pending, Pending]
    );
    assert_eq!(prd.stories[0].wave.as_deref(), Some("1"));
    assert_eq!(prd.stories[5].wave.as_deref(), Some("B"));
    assert_eq!(prd.stories[5].title, "Remove dead code");
    assert!(prd.stories[5].text.contains("nested items"));
    assert_eq!(prd.stories[6].title, "Rename things");
    assert_eq!(prd.stories[7].title, "Fix docs");
    assert_eq!(prd.stories[8].span, Span::Lines { start: 30, end: 31 });
    assert_eq!(prd.stories[2].marks.boxes.len(), 2);
}

#[test]
fn wave_labels_and_boxed_wave_stories() {
    let text = "## Wave 2: Two\n### [x] S01: box wins over items\n- [ ] open criterion\n### S02: no items\nprose\n### Wave 3 - Three\n- [ ] t\n# WAVE A — top level\n- [x] u\n# Waves overview\n- [ ] not a wave\n";
    let prd = md(text);
    assert_eq!(ids(&prd), ["S01", "S02", "W3-T1", "WA-T1"]);
    assert_eq!(statuses(&prd), [Completed, Pending, Pending, Completed]);
    let waves: Vec<_> = prd.stories.iter().map(|s| s.wave.as_deref().unwrap()).collect();
    assert_eq!(waves, ["2", "2", "3", "A"]);
    assert!(prd.stories[1].marks.insert_at.is_some());
}

#[test]
fn task_list_sections_in_plans_without_stories() {
    let text = "# Fix\n\n## Decision Points\n- [x] Decision: keep it\n\n## Execution Strategy\n### Wave 1 - First\n1. First thing\n2. Second thing\n### Wave 2 - Then\n3. Third\n\n## TODOs\n- [x] 1. First thing\n  - [ ] nested test\n- [ ] 2. Second thing\n\n### Block 2\n- [ ] 2.5. Inserted later\n- [ ] 3 ) not a number\n- [~] 10.1 Dotted without a final dot\n\n## Success\n- [ ] all good\n";
    let prd = md(text);
    assert_eq!(ids(&prd), ["T1", "T2", "T2.5", "T4", "T10.1"]);
    assert_eq!(statuses(&prd), [Completed, Pending, Pending, Pending, InProgress]);
    assert_eq!(prd.stories[1].title, "Second thing");
    assert_eq!(prd.stories[3].title, "3 ) not a number");
    let waves: Vec<_> = prd.stories.iter().map(|s| s.wave.as_deref()).collect();
    assert_eq!(waves, [Some("1"), Some("1"), None, None, None]);
    // Story headings win over task lists.
    assert_eq!(ids(&md("### [ ] US-001: x\n## TODOs\n- [ ] 1. y\n")), ["US-001"]);
}

#[test]
fn crlf_bom_tabs_and_non_ascii() {
    let text = "\u{feff}# Tïtle\r\n\r\n###\t[x] US-1: Café ☕\r\nx\r\n### [ ] US-2: 日本語";
    let prd = md(text);
    assert_eq!(prd.title.as_deref(), Some("Tïtle"));
    assert_eq!(ids(&prd), ["US-1", "US-2"]);
    assert_eq!(prd.stories[0].title, "Café ☕");
    assert_eq!(prd.stories[0].text, "###\t[x] US-1: Café ☕\r\nx\r\n");
    assert_eq!(prd.stories[1].span, Span::Lines { start: 5, end: 5 });
    let out = set_status(text, &prd, "US-2", Completed).unwrap();
    assert_eq!(out, text.replace("### [ ] US-2", "### [x] US-2"));
    let out = set_status(text, &prd, "US-1", Pending).unwrap();
    assert_eq!(out, text.replace("[x] US-1", "[ ] US-1"));
    // A BOM right before a story heading.
    let prd = md("\u{feff}### [ ] US-1: a\n");
    let out = set_status("\u{feff}### [ ] US-1: a\n", &prd, "US-1", Completed).unwrap();
    assert_eq!(out, "\u{feff}### [x] US-1: a\n");
    // Tabs before checklist items and in waves.
    let prd = md("## Wave 1\n### S1: a\n\t- [x] one\n-\t[ ] not an item\n");
    assert_eq!(statuses(&prd), [Completed]);
}

#[test]
fn duplicate_ids_keep_the_first_and_warn() {
    let text = "### [x] US-1: A\n### [ ] US-1: again\n## Wave 1\n- [ ] US-1: as a task\n";
    let prd = md(text);
    assert_eq!(ids(&prd), ["US-1"]);
    assert_eq!(prd.stories[0].status, Completed);
    assert_eq!(prd.warnings.len(), 2);
    assert!(prd.warnings[0].contains("line 2") && prd.warnings[0].contains("line 1"), "{:?}", prd.warnings);
    let out = set_status(text, &prd, "US-1", Pending).unwrap();
    assert_eq!(out, text.replacen("[x]", "[ ]", 1));
}

#[test]
fn rewrite_markdown() {
    // Wave story: every item.
    let text = "## Wave 1: x\n### S01: A\n- [ ] one\n  - [X] nested\n- [x] two\n";
    let prd = md(text);
    let out = set_status(text, &prd, "S01", Completed).unwrap();
    assert_eq!(out, "## Wave 1: x\n### S01: A\n- [x] one\n  - [x] nested\n- [x] two\n");
    let out = set_status(&out, &md(&out), "S01", Pending).unwrap();
    assert_eq!(out, "## Wave 1: x\n### S01: A\n- [ ] one\n  - [ ] nested\n- [ ] two\n");
    assert!(matches!(set_status(text, &prd, "S01", InProgress), Err(PrdError::Invalid(_))));
    // A heading without a box gets one, right after the hashes.
    let text = "###  US-7: plain\r\n";
    let prd = md(text);
    assert_eq!(set_status(text, &prd, "US-7", Completed).unwrap(), "###  [x] US-7: plain\r\n");
    assert_eq!(set_status(text, &prd, "US-7", InProgress).unwrap(), "###  [~] US-7: plain\r\n");
    assert_eq!(set_status(text, &prd, "US-7", Pending).unwrap(), text);
    assert!(matches!(set_status(text, &prd, "US-8", Completed), Err(PrdError::NoSuchStory(_))));
    // Ralph box: all four states round-trip.
    let text = "### [ ] US-1: a\n";
    for (st, want) in [(Completed, "[x]"), (InProgress, "[~]"), (Blocked, "[!]"), (Pending, "[ ]")] {
        let out = set_status(text, &md(text), "US-1", st).unwrap();
        assert_eq!(out, format!("### {want} US-1: a\n"));
        assert_eq!(md(&out).stories[0].status, st);
    }
    // The title decides blocked; setting it to pending would not stick, so it is refused.
    let text = "### [ ] US-1: BLOCKED on keys\n";
    assert!(matches!(set_status(text, &md(text), "US-1", Pending), Err(PrdError::Invalid(_))));
    // Stale marks are refused, not written over.
    let prd = md("### [ ] US-1: a\n");
    assert!(matches!(set_status("### US-1: a\n", &prd, "US-1", Completed), Err(PrdError::Invalid(_))));
    // Tasks of a wave and of a TODO list.
    let text = "## TODOs\n- [ ] 1. a\n- [x] 2. b\n";
    let out = set_status(text, &md(text), "T1", Completed).unwrap();
    assert_eq!(out, "## TODOs\n- [x] 1. a\n- [x] 2. b\n");
}

#[test]
fn json_user_stories() {
    let text = "{\n  \"project\": \"P\",\n  \"userStories\": [\n    {\"id\": \"US-001\", \"title\": \"A\", \"description\": \"d\", \"acceptanceCriteria\": [\"c1\"], \"priority\": 2, \"passes\": false},\n    {\"id\": \"US-002\", \"title\": \"B\", \"priority\": 1, \"passes\":true }\n  ]\n}\n";
    let prd = parse("prd.json", text).unwrap();
    assert_eq!(prd.format, Format::UserStoriesJson);
    assert_eq!(prd.title.as_deref(), Some("P"));
    assert_eq!(ids(&prd), ["US-001", "US-002"]);
    assert_eq!(statuses(&prd), [Pending, Completed]);
    assert_eq!(prd.stories[0].priority, Some(2));
    assert_eq!(prd.stories[0].span, Span::Index { index: 0 });
    assert!(prd.stories[0].text.contains("c1") && prd.stories[0].text.contains("\"description\""));
    let out = set_status(text, &prd, "US-001", Completed).unwrap();
    assert_eq!(out, text.replacen("\"passes\": false", "\"passes\": true", 1));
    let out = set_status(text, &prd, "US-002", Pending).unwrap();
    assert_eq!(out, text.replacen("\"passes\":true ", "\"passes\":false ", 1));
    // Without `passes`, the field is added inside that story's object and nowhere else.
    let text = "{\"userStories\": [{\"id\": \"A1\"}, {\"id\": \"A2\"}]}";
    let prd = parse("prd.json", text).unwrap();
    let out = set_status(text, &prd, "A2", Completed).unwrap();
    assert_eq!(out, "{\"userStories\": [{\"id\": \"A1\"}, {\"passes\": true, \"id\": \"A2\"}]}");
    // Title falls back to branchName, content starting with `{` is JSON whatever the name.
    let prd = parse("prd.md", "\u{feff}\r\n{\"branchName\": \"b\", \"userStories\": []}").unwrap();
    assert_eq!(prd.title.as_deref(), Some("b"));
    assert!(prd.stories.is_empty());
}

#[test]
fn json_stories_with_status() {
    let text = "\u{feff}{\"title\": \"T\", \"stories\": [{\"id\": \"S1\", \"status\": \"open\", \"dependsOn\": []}, {\"id\": \"S2\",\r\n \"status\" :  \"in_progress\", \"dependsOn\": [\"S1\"]}, {\"id\": \"S3\", \"status\": \"done\"}, {\"id\": \"S4\", \"status\": \"Blocked\"}, {\"id\": \"S5\", \"status\": \"completed\"}, {\"id\": \"S6\", \"status\": \"pending\"}, {\"id\": \"S7\"}]}";
    let prd = parse("prd-x.json", text).unwrap();
    assert_eq!(prd.format, Format::StoriesJson);
    assert_eq!(prd.title.as_deref(), Some("T"));
    assert_eq!(prd.stories[1].depends_on, ["S1"]);
    assert_eq!(statuses(&prd), [Pending, InProgress, Completed, Blocked, Completed, Pending, Pending]);
    let out = set_status(text, &prd, "S2", Completed).unwrap();
    assert_eq!(out, text.replace("\"in_progress\"", "\"done\""));
    let out = set_status(text, &prd, "S3", Blocked).unwrap();
    assert_eq!(out, text.replace("\"done\"", "\"blocked\""));
    assert_eq!(parse("prd-x.json", &out).unwrap().stories[2].status, Blocked);
    let out = set_status(text, &prd, "S7", InProgress).unwrap();
    assert_eq!(out, text.replace("{\"id\": \"S7\"}", "{\"status\": \"in_progress\", \"id\": \"S7\"}"));
}

#[test]
fn json_errors_and_duplicates() {
    match parse("prd.json", "{\n  \"userStories\": [\n    {\"id\": 1,,}\n  ]\n}") {
        Err(PrdError::Syntax { line, column, .. }) => assert_eq!((line, column), (3, 14)),
        other => panic!("{other:?}"),
    }
    match parse("prd.json", "{\"userStories\": [") {
        Err(e @ PrdError::Syntax { .. }) => assert!(e.to_string().starts_with("line 1, column 17")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(parse("prd.json", "{\"x\": 1}"), Err(PrdError::Invalid(_))));
    assert!(matches!(parse("prd.json", "[1]"), Err(PrdError::Invalid(_))));
    assert!(matches!(parse("prd.json", "{\"userStories\": [{\"title\": \"no id\"}]}"), Err(PrdError::Invalid(_))));
    assert!(matches!(
        parse("prd.json", "{\"userStories\": [{\"id\": \"a1\", \"passes\": \"yes\"}]}"),
        Err(PrdError::Invalid(_))
    ));
    assert!(matches!(
        parse("prd.json", "{\"stories\": [{\"id\": \"a1\", \"status\": \"weird\"}]}"),
        Err(PrdError::Invalid(_))
    ));
    let text = "{\"userStories\": [{\"id\": \"A\", \"passes\": true}, {\"id\": \"A\", \"passes\": false}]}";
    let prd = parse("prd.json", text).unwrap();
    assert_eq!(ids(&prd), ["A"]);
    assert_eq!(prd.stories[0].status, Completed);
    assert_eq!(prd.warnings.len(), 1);
    assert!(prd.warnings[0].contains("userStories[1]") && prd.warnings[0].contains("userStories[0]"));
    let out = set_status(text, &prd, "A", Pending).unwrap();
    assert_eq!(out, text.replacen("true", "false", 1));
}

/// Real PRDs written by others, read in place from `../shared/fixtures/real-prds/`. Counts and
/// statuses were checked by hand against each file.
#[test]
fn real_prds_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/real-prds");
    if !dir.exists() {
        eprintln!("../shared/fixtures/real-prds not found; skipping");
        return;
    }
    let read = |name: &str| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        (parse(name, &text).unwrap_or_else(|e| panic!("{name}: {e}")), text)
    };
    let count = |prd: &Prd, st: Status| prd.stories.iter().filter(|s| s.status == st).count();
    let get = |prd: &Prd, id: &str| prd.story(id).unwrap_or_else(|| panic!("no {id}")).clone();

    // 13 Ralph stories, all done, in file order (US-013 sits after US-002); "### Week N" headings
    // and the `### Bug-abc123` heading inside a fence are not stories.
    let (prd, text) = read("ralph-cli-PRD-112.md");
    let want: Vec<String> = [1, 2, 13, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12].iter().map(|n| format!("US-{n:03}")).collect();
    assert_eq!(ids(&prd), want);
    assert_eq!(count(&prd, Completed), 13);
    let s = get(&prd, "US-001");
    assert_eq!(s.title, "Replace mock Slack sends with real Slack Web API");
    assert_eq!(s.span, Span::Lines { start: 36, end: 61 });
    assert!(s.text.contains("#### Acceptance Criteria"));
    assert_eq!(get(&prd, "US-012").span, Span::Lines { start: 533, end: 610 });
    assert_eq!(prd.title.as_deref(), Some("Product Requirements Document: Phase 3 Executive Automation"));
    let out = set_status(&text, &prd, "US-004", Pending).unwrap();
    assert_eq!(out, text.replacen("### [x] US-004", "### [ ] US-004", 1));

    // 17 stories under "### Phase N" groupings, all done.
    let (prd, _) = read("ralph-cli-PRD-67.md");
    let want: Vec<String> = (1..=17).map(|n| format!("US-{n:03}")).collect();
    assert_eq!(ids(&prd), want);
    assert_eq!(count(&prd, Completed), 17);
    assert_eq!(get(&prd, "US-017").span, Span::Lines { start: 285, end: 301 });

    // Waves A, B, C, E, F without story headings: 3 + 2 + 3 + 4 + 1 open tasks.
    let (prd, text) = read("kord-epics-15-18-stabilization-plan.md");
    assert_eq!(prd.stories.len(), 13, "{:?}", ids(&prd));
    assert_eq!(count(&prd, Pending), 13);
    let per_wave = |w: &str| prd.stories.iter().filter(|s| s.wave.as_deref() == Some(w)).count();
    assert_eq!([per_wave("A"), per_wave("B"), per_wave("C"), per_wave("E"), per_wave("F")], [3, 2, 3, 4, 1]);
    assert_eq!(prd.stories[0].id, "WA-T1");
    assert!(prd.stories[0].title.starts_with("Implement EPIC-15 S02 fix"));
    assert_eq!(prd.stories[12].id, "WF-T1");
    assert_eq!(get(&prd, "WE-T4").title, "Push branch + open PR (target `dev`) + ensure CI runs full suite");
    let out = set_status(&text, &prd, "WA-T1", Completed).unwrap();
    assert_eq!(out, text.replacen("- [ ] Task: Implement EPIC-15", "- [x] Task: Implement EPIC-15", 1));
    assert_eq!(parse("x.md", &out).unwrap().story("WA-T1").unwrap().status, Completed);

    // The `## TODOs` list: 8 numbered tasks, all done; the waves are in a code fence and the
    // Decision Points / Definition of Done / Final Checklist items are not tasks.
    let (prd, _) = read("kord-cli-installer-fix.md");
    assert_eq!(ids(&prd), ["T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8"]);
    assert_eq!(count(&prd, Completed), 8);
    assert_eq!(get(&prd, "T8").title, "Full verification + publish preparation");
    assert!(prd.stories.iter().all(|s| s.wave.is_none()));

    let (prd, text) = read("snarktank-prd.json");
    assert_eq!(prd.format, Format::UserStoriesJson);
    assert_eq!(prd.title.as_deref(), Some("MyApp"));
    assert_eq!(ids(&prd), ["US-001", "US-002", "US-003", "US-004"]);
    assert_eq!(count(&prd, Pending), 4);
    assert_eq!(prd.stories[3].priority, Some(4));
    assert_eq!(prd.stories[2].title, "Add priority selector to task edit");
    assert!(prd.stories[0].text.contains("Generate and run migration successfully"));
    let out = set_status(&text, &prd, "US-003", Completed).unwrap();
    let at = text.find("\"id\": \"US-003\"").unwrap();
    let want = format!("{}{}", &text[..at], text[at..].replacen("\"passes\": false", "\"passes\": true", 1));
    assert_eq!(out, want);

    let (prd, text) = read("iannuttall-prd-template.json");
    assert_eq!(prd.format, Format::StoriesJson);
    assert_eq!(prd.title.as_deref(), Some("Feature Name"));
    assert_eq!(ids(&prd), ["US-001"]);
    assert_eq!(prd.stories[0].status, Pending);
    assert!(prd.stories[0].depends_on.is_empty());
    let out = set_status(&text, &prd, "US-001", Completed).unwrap();
    assert_eq!(out, text.replacen("\"status\": \"open\"", "\"status\": \"done\"", 1));
}

/// The project's own sample PRDs.
#[test]
fn project_fixtures_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/prds");
    let read = |name: &str| parse(name, &std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();

    let prd = read("ralph.md");
    assert_eq!(ids(&prd), ["US-001", "US-002", "US-003", "US-004", "US-005", "US-006"]);
    assert_eq!(statuses(&prd), [Completed, Completed, Pending, Pending, Pending, Pending]);
    assert!(prd.story("US-999").is_none(), "the fenced example is not a story");

    let prd = read("waves.md");
    assert_eq!(ids(&prd), ["S01", "S02", "S03", "W2-T1", "T9", "W2-T3", "S04", "S05"]);
    assert_eq!(statuses(&prd), [Completed, InProgress, Blocked, Pending, Completed, Pending, Completed, Pending]);
    let waves: Vec<_> = prd.stories.iter().map(|s| s.wave.as_deref().unwrap()).collect();
    assert_eq!(waves, ["1", "1", "1", "2", "2", "2", "C", "C"]);

    let prd = read("prd.json");
    assert_eq!(prd.format, Format::UserStoriesJson);
    assert_eq!(ids(&prd), ["US-001", "US-002", "US-003"]);
    assert_eq!(statuses(&prd), [Completed, Pending, Pending]);
}

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("### ".to_string()),
        Just("## ".to_string()),
        Just("## Wave 1 — x\n".to_string()),
        Just("### Wave A: y\n".to_string()),
        Just("[ ] ".to_string()),
        Just("[x] ".to_string()),
        Just("[!] ".to_string()),
        Just("US-001: t\n".to_string()),
        Just("S01: blocked\n".to_string()),
        Just("- [ ] item\n".to_string()),
        Just("- [x] 1. item\n".to_string()),
        Just("  - [X] ".to_string()),
        Just("```\n".to_string()),
        Just("~~~".to_string()),
        Just("<!--\n".to_string()),
        Just("-->".to_string()),
        Just("\r\n".to_string()),
        Just("\n".to_string()),
        Just("\t".to_string()),
        Just("## TODOs\n".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("{\"userStories\": [".to_string()),
        Just("{\"stories\": [{\"id\": \"S1\", ".to_string()),
        Just("\"passes\": true".to_string()),
        Just("\"status\": \"open\"".to_string()),
        Just("\u{feff}".to_string()),
        Just("é—日".to_string()),
        "[^\\x00]{0,12}",
    ]
}

/// One generated markdown story.
#[derive(Debug, Clone)]
enum GenStory {
    /// `### [c] US-nnn: title` with an acceptance-criteria item.
    Ralph(char),
    /// `### US-nnn: title` without a box.
    Bare,
    /// `### Snn: title` with these items (in a wave).
    Wave(Vec<bool>),
}

fn gen_story() -> impl Strategy<Value = GenStory> {
    prop_oneof![
        prop::sample::select(vec![' ', 'x', 'X', '~', '!']).prop_map(GenStory::Ralph),
        Just(GenStory::Bare),
        prop::collection::vec(any::<bool>(), 0..4).prop_map(GenStory::Wave),
    ]
}

const TITLES: [&str; 5] = ["plain title", "café au lait", "日本語のタイトル", "dash — and tab\there", "x"];

fn render(stories: &[GenStory], crlf: bool, trailing_newline: bool) -> String {
    let nl = if crlf { "\r\n" } else { "\n" };
    let mut s = format!("# Title{nl}{nl}```{nl}### [ ] US-999: fenced{nl}```{nl}");
    for (i, st) in stories.iter().enumerate() {
        let title = TITLES[i % TITLES.len()];
        match st {
            GenStory::Ralph(c) => {
                s.push_str(&format!("### [{c}] US-{:03}: {title}{nl}{nl}#### Acceptance Criteria{nl}", i + 1));
                s.push_str(&format!("- [ ] criterion{nl}- [x] done criterion{nl}{nl}"));
            }
            GenStory::Bare => s.push_str(&format!("### US-{:03}: {title}{nl}prose{nl}", i + 1)),
            GenStory::Wave(items) => {
                s.push_str(&format!("## Wave {}: group{nl}### S{:02}: {title}{nl}", i + 1, i + 1));
                for (k, d) in items.iter().enumerate() {
                    s.push_str(&format!("- [{}] item {k}{nl}", if *d { 'x' } else { ' ' }));
                }
                // End the wave so later Ralph stories are outside it.
                s.push_str(&format!("## Notes {i}{nl}"));
            }
        }
    }
    if !trailing_newline {
        while s.ends_with(['\r', '\n']) {
            s.pop();
        }
    }
    s
}

/// Every status mark replaced by an open box.
fn unmark(s: &str) -> String {
    s.replace("[x]", "[ ]").replace("[X]", "[ ]").replace("[~]", "[ ]").replace("[!]", "[ ]")
}

fn status_strategy() -> impl Strategy<Value = Status> {
    prop::sample::select(vec![Pending, InProgress, Completed, Blocked])
}

proptest! {
    #[test]
    fn parse_never_panics(text in "\\PC{0,400}") {
        let _ = parse("prd.md", &text);
        let _ = parse("prd.json", &text);
    }

    #[test]
    fn parse_never_panics_on_fragments(parts in prop::collection::vec(fragment(), 0..40)) {
        let text: String = parts.concat();
        for name in ["prd.md", "prd.json"] {
            if let Ok(prd) = parse(name, &text) {
                for s in &prd.stories {
                    for st in [Completed, Pending, InProgress, Blocked] {
                        if let Ok(out) = set_status(&text, &prd, &s.id, st) {
                            let again = parse(name, &out);
                            prop_assert!(again.is_ok(), "{:?}", again);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn markdown_rewrite_touches_only_status_marks(
        stories in prop::collection::vec(gen_story(), 1..7),
        crlf in any::<bool>(),
        trailing in any::<bool>(),
        pick in 0usize..7,
        status in status_strategy(),
    ) {
        let text = render(&stories, crlf, trailing);
        let prd = parse("prd.md", &text).unwrap();
        prop_assert_eq!(prd.stories.len(), stories.len());
        let k = pick % stories.len();
        let target = prd.stories[k].clone();
        let result = set_status(&text, &prd, &target.id, status);
        let wave_items = matches!(&stories[k], GenStory::Wave(items) if !items.is_empty());
        if wave_items && !matches!(status, Completed | Pending) {
            prop_assert!(matches!(result, Err(PrdError::Invalid(_))));
            return Ok(());
        }
        let out = result.unwrap();
        let again = parse("prd.md", &out).unwrap();
        prop_assert_eq!(again.stories.len(), prd.stories.len());
        for (a, b) in prd.stories.iter().zip(&again.stories) {
            prop_assert_eq!(&a.id, &b.id);
            if a.id == target.id {
                prop_assert_eq!(b.status, status);
            } else {
                prop_assert_eq!(a.status, b.status);
                prop_assert_eq!(unmark(&a.text), unmark(&b.text));
            }
        }
        if let Some(at) = target.marks.insert_at {
            let mut expect = text.clone();
            if status != Pending {
                let mark = match status { Completed => 'x', InProgress => '~', _ => '!' };
                expect.insert_str(at, &format!("[{mark}] "));
            }
            prop_assert_eq!(out, expect);
        } else {
            // Same bytes everywhere but the box characters of the target story.
            prop_assert_eq!(out.len(), text.len());
            prop_assert_eq!(unmark(&out), unmark(&text));
            for (i, (x, y)) in text.bytes().zip(out.bytes()).enumerate() {
                if x != y {
                    prop_assert!(target.marks.boxes.contains(&i), "byte {} changed", i);
                }
            }
        }
    }

    #[test]
    fn json_rewrite_replaces_only_the_value(
        stories in prop::collection::vec(prop::sample::select(vec!["open", "in_progress", "done", "blocked"]), 1..6),
        user_stories in any::<bool>(),
        crlf in any::<bool>(),
        pretty in any::<bool>(),
        pick in 0usize..6,
        status in status_strategy(),
    ) {
        let nl = if crlf { "\r\n" } else { "\n" };
        let (sep, ind) = if pretty { (nl, "    ") } else { ("", "") };
        let key = if user_stories { "userStories" } else { "stories" };
        let items: Vec<String> = stories.iter().enumerate().map(|(i, st)| {
            let value = if user_stories { (*st == "done").to_string() } else { format!("\"{st}\"") };
            let field = if user_stories { "passes" } else { "status" };
            format!("{ind}{{\"id\": \"US-{i:03}\", \"title\": \"t—{i}\",{sep}{ind}  \"{field}\" :{ind}{value}, \"notes\": \"\"}}")
        }).collect();
        let text = format!("{{{sep}  \"project\": \"P\",{sep}  \"{key}\": [{sep}{}{sep}  ]{sep}}}{nl}", items.join(&format!(",{sep}")));
        let prd = parse("prd.json", &text).unwrap();
        let k = pick % stories.len();
        let id = format!("US-{k:03}");
        let out = set_status(&text, &prd, &id, status).unwrap();
        let (old, new) = if user_stories {
            let new = if status == Completed { "true" } else { "false" };
            ((stories[k] == "done").to_string(), new.to_string())
        } else {
            let new = match status { Pending => "open", InProgress => "in_progress", Completed => "done", Blocked => "blocked" };
            (format!("\"{}\"", stories[k]), format!("\"{new}\""))
        };
        // Independently: the first old value after the story's id, replaced; nothing else.
        let at = text.find(&format!("\"id\": \"{id}\"")).unwrap();
        let field_at = at + text[at..].find(if user_stories { "\"passes\" :" } else { "\"status\" :" }).unwrap();
        let value_at = field_at + text[field_at..].find(&old).unwrap();
        let expect = format!("{}{}{}", &text[..value_at], new, &text[value_at + old.len()..]);
        prop_assert_eq!(&out, &expect);
        let again = parse("prd.json", &out).unwrap();
        for (a, b) in prd.stories.iter().zip(&again.stories) {
            if a.id == id {
                let want = if user_stories && status != Completed { Pending } else { status };
                prop_assert_eq!(b.status, want);
            } else {
                prop_assert_eq!((&a.id, a.status, &a.title, &a.text), (&b.id, b.status, &b.title, &b.text));
            }
        }
    }
}
