//! PRD parser tests: every form, the real PRDs of `../shared/fixtures/real-prds/` read in place,
//! the project's own fixtures, and property tests for the parser and the status rewrite.

use proptest::prelude::*;

use super::*;

fn ids(prd: &Prd) -> Vec<&str> {
    prd.stories.iter().map(|s| s.id.as_str()).collect()
}

#[test]
fn ralph_headings() {
    let text = "# PRD\n\n## User Stories\n\n### Week 1: Setup\n\n### [ ] US-001: First\nbody\n#### Acceptance Criteria\n- [ ] a\n- [x] b\n\n### [x] US-002: Second\n\n### US-003: No box\n\n```md\n### [ ] US-999: In a fence\n```\n### [~] US-004: Started\n### [ ] US-005: BLOCKED on API\n";
    let prd = parse("prd.md", text).unwrap();
    assert_eq!(ids(&prd), ["US-001", "US-002", "US-003", "US-004", "US-005"]);
    let st: Vec<Status> = prd.stories.iter().map(|s| s.status).collect();
    assert_eq!(st, [Status::Pending, Status::Completed, Status::Pending, Status::InProgress, Status::Blocked]);
    assert_eq!(prd.title.as_deref(), Some("PRD"));
    assert!(prd.stories[0].text.contains("#### Acceptance Criteria"));
    assert_eq!(prd.stories[0].span, Span::Lines { start: 7, end: 12 });
}

#[test]
fn waves_with_and_without_story_headings() {
    let text = "# Plan\n\n## Wave 1 — Foundation\n\n### S01: Schema\n- [x] a\n- [x] b\n\n### S02: API\n- [x] a\n- [ ] b\n\n### S03: UI\n- [ ] a\n\n### S04: Deploy\n- [ ] blocked by ops\n\n## Wave B: Cleanup\n\n- [ ] Task: Remove dead code\n  - detail\n- [x] US-050: Rename things\n- [ ] Fix docs\n";
    let prd = parse("plan.md", text).unwrap();
    assert_eq!(ids(&prd), ["S01", "S02", "S03", "S04", "WB-T1", "US-050", "WB-T3"]);
    let st: Vec<Status> = prd.stories.iter().map(|s| s.status).collect();
    assert_eq!(
        st,
        [
            Status::Completed,
            Status::InProgress,
            Status::Pending,
            Status::Blocked,
            Status::Pending,
            Status::Completed,
            Status::Pending
        ]
    );
    assert_eq!(prd.stories[0].wave.as_deref(), Some("1"));
    assert_eq!(prd.stories[4].wave.as_deref(), Some("B"));
    assert_eq!(prd.stories[4].title, "Remove dead code");
    assert!(prd.stories[4].text.contains("detail"));
}

#[test]
fn task_list_sections_in_plans_without_stories() {
    let text = "# Fix\n\n## Decision Points\n- [x] Decision: keep it\n\n## TODOs\n- [x] 1. First thing\n  - [ ] nested test\n- [ ] 2. Second thing\n\n## Success\n- [ ] all good\n";
    let prd = parse("plan.md", text).unwrap();
    assert_eq!(ids(&prd), ["T1", "T2"]);
    assert_eq!(prd.stories[0].status, Status::Completed);
    assert_eq!(prd.stories[1].title, "Second thing");
}

#[test]
fn crlf_bom_and_duplicates() {
    let text = "\u{feff}# T\r\n\r\n### [x] US-1: A\r\nx\r\n### [ ] US-1: again\r\n### [ ] US-2: B";
    let prd = parse("p.md", text).unwrap();
    assert_eq!(ids(&prd), ["US-1", "US-2"]);
    assert_eq!(prd.warnings.len(), 1);
    let out = set_status(text, &prd, "US-2", Status::Completed).unwrap();
    assert_eq!(out, text.replace("### [ ] US-2", "### [x] US-2"));
    let out = set_status(text, &prd, "US-1", Status::Pending).unwrap();
    assert_eq!(out, text.replacen("### [x] US-1", "### [ ] US-1", 1));
}

#[test]
fn rewrite_wave_story_and_heading_without_box() {
    let text = "## Wave 1: x\n### S01: A\n- [ ] one\n- [x] two\n";
    let prd = parse("p.md", text).unwrap();
    let out = set_status(text, &prd, "S01", Status::Completed).unwrap();
    assert_eq!(out, "## Wave 1: x\n### S01: A\n- [x] one\n- [x] two\n");
    assert_eq!(parse("p.md", &out).unwrap().stories[0].status, Status::Completed);
    let text = "### US-7: plain\n";
    let prd = parse("p.md", text).unwrap();
    assert_eq!(set_status(text, &prd, "US-7", Status::Completed).unwrap(), "### [x] US-7: plain\n");
    assert!(matches!(set_status(text, &prd, "US-8", Status::Completed), Err(PrdError::NoSuchStory(_))));
}

#[test]
fn json_forms_and_rewrite() {
    let text = "{\n  \"project\": \"P\",\n  \"userStories\": [\n    {\"id\": \"US-001\", \"title\": \"A\", \"priority\": 2, \"passes\": false},\n    {\"id\": \"US-002\", \"title\": \"B\", \"priority\": 1, \"passes\":true }\n  ]\n}\n";
    let prd = parse("prd.json", text).unwrap();
    assert_eq!(prd.format, Format::UserStoriesJson);
    assert_eq!(ids(&prd), ["US-001", "US-002"]);
    assert_eq!(prd.stories[1].status, Status::Completed);
    assert_eq!(prd.stories[0].priority, Some(2));
    assert_eq!(prd.stories[0].span, Span::Index { index: 0 });
    let out = set_status(text, &prd, "US-001", Status::Completed).unwrap();
    assert_eq!(out, text.replacen("\"passes\": false", "\"passes\": true", 1));

    let text = "{\"stories\": [{\"id\": \"S1\", \"status\": \"open\", \"dependsOn\": []}, {\"id\": \"S2\", \"status\": \"in_progress\", \"dependsOn\": [\"S1\"]}, {\"id\": \"S3\", \"status\": \"done\"}]}";
    let prd = parse("prd-x.json", text).unwrap();
    assert_eq!(prd.format, Format::StoriesJson);
    assert_eq!(prd.stories[1].depends_on, ["S1"]);
    let st: Vec<Status> = prd.stories.iter().map(|s| s.status).collect();
    assert_eq!(st, [Status::Pending, Status::InProgress, Status::Completed]);
    let out = set_status(text, &prd, "S2", Status::Completed).unwrap();
    assert_eq!(out, text.replace("\"in_progress\"", "\"done\""));

    match parse("prd.json", "{\n  \"userStories\": [\n    {\"id\": 1,,}\n  ]\n}") {
        Err(PrdError::Syntax { line, .. }) => assert_eq!(line, 3),
        other => panic!("{other:?}"),
    }
    assert!(matches!(parse("prd.json", "{\"x\": 1}"), Err(PrdError::Invalid(_))));
    assert!(matches!(parse("prd.json", "[1]"), Err(PrdError::Syntax { .. }) | Err(PrdError::Invalid(_))));
}

/// Real PRDs written by others, read in place from `../shared/fixtures/real-prds/`.
#[test]
fn real_prds_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/real-prds");
    if !dir.exists() {
        eprintln!("../shared/fixtures/real-prds not found; skipping the real-PRD test");
        return;
    }
    let read = |name: &str| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        (parse(name, &text).unwrap_or_else(|e| panic!("{name}: {e}")), text)
    };
    let count = |prd: &Prd, st: Status| prd.stories.iter().filter(|s| s.status == st).count();

    let (prd, _) = read("ralph-cli-PRD-112.md");
    assert_eq!(prd.stories.len(), 13);
    assert_eq!(count(&prd, Status::Completed), 13);
    assert_eq!(prd.stories[0].id, "US-001");
    assert_eq!(prd.stories[2].id, "US-013", "file order");
    assert!(prd.stories.iter().all(|s| s.id.starts_with("US-")));

    let (prd, _) = read("ralph-cli-PRD-67.md");
    assert_eq!(prd.stories.len(), 17);
    assert_eq!(count(&prd, Status::Completed), 17);
    assert_eq!(prd.stories[16].id, "US-017");

    let (prd, text) = read("kord-epics-15-18-stabilization-plan.md");
    assert_eq!(prd.stories.len(), 13, "{:?}", ids(&prd));
    assert_eq!(count(&prd, Status::Pending), 13);
    let waves: std::collections::BTreeSet<_> = prd.stories.iter().filter_map(|s| s.wave.clone()).collect();
    assert_eq!(waves.into_iter().collect::<Vec<_>>(), ["A", "B", "C", "E", "F"]);
    assert_eq!(prd.stories[0].id, "WA-T1");
    let out = set_status(&text, &prd, "WA-T1", Status::Completed).unwrap();
    assert_eq!(parse("x.md", &out).unwrap().story("WA-T1").unwrap().status, Status::Completed);

    let (prd, _) = read("kord-cli-installer-fix.md");
    assert_eq!(ids(&prd), ["T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8"]);
    assert_eq!(count(&prd, Status::Completed), 8);

    let (prd, _) = read("snarktank-prd.json");
    assert_eq!(prd.format, Format::UserStoriesJson);
    assert_eq!(ids(&prd), ["US-001", "US-002", "US-003", "US-004"]);
    assert_eq!(count(&prd, Status::Pending), 4);
    assert_eq!(prd.stories[3].priority, Some(4));

    let (prd, text) = read("iannuttall-prd-template.json");
    assert_eq!(prd.format, Format::StoriesJson);
    assert_eq!(ids(&prd), ["US-001"]);
    let out = set_status(&text, &prd, "US-001", Status::Completed).unwrap();
    assert_eq!(out, text.replacen("\"status\": \"open\"", "\"status\": \"done\"", 1));
}

/// The project's own sample PRDs.
#[test]
fn project_fixtures_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/prds");
    let read = |name: &str| parse(name, &std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
    let prd = read("ralph.md");
    assert_eq!(prd.stories.len(), 6);
    assert_eq!(prd.stories.iter().filter(|s| s.status.is_done()).count(), 2);
    let prd = read("waves.md");
    assert_eq!(ids(&prd), ["S01", "S02", "S03", "W2-T1", "W2-T2"]);
    assert_eq!(prd.stories[2].status, Status::Blocked);
    let prd = read("prd.json");
    assert_eq!(prd.stories.len(), 3);
}

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("### ".to_string()),
        Just("## Wave 1 — x\n".to_string()),
        Just("[ ] ".to_string()),
        Just("[x] ".to_string()),
        Just("US-001: t\n".to_string()),
        Just("- [ ] item\n".to_string()),
        Just("- [x] 1. item\n".to_string()),
        Just("```\n".to_string()),
        Just("\r\n".to_string()),
        Just("## TODOs\n".to_string()),
        Just("{\"userStories\": [".to_string()),
        Just("\"passes\": true".to_string()),
        Just("\u{feff}".to_string()),
        "[^\\x00]{0,12}",
    ]
}

#[derive(Debug, Clone)]
struct GenStory {
    done: bool,
    wave_items: Option<Vec<bool>>,
}

fn gen_stories() -> impl Strategy<Value = (Vec<GenStory>, bool, bool)> {
    (
        prop::collection::vec(
            (any::<bool>(), prop::option::of(prop::collection::vec(any::<bool>(), 1..4)))
                .prop_map(|(done, wave_items)| GenStory { done, wave_items }),
            1..6,
        ),
        any::<bool>(),
        any::<bool>(),
    )
}

fn render(stories: &[GenStory], crlf: bool, trailing_newline: bool) -> String {
    let nl = if crlf { "\r\n" } else { "\n" };
    let mut s = format!("# Title{nl}{nl}");
    let waves = stories.iter().any(|st| st.wave_items.is_some());
    if waves {
        s.push_str(&format!("## Wave 1: all{nl}"));
    }
    for (i, st) in stories.iter().enumerate() {
        match (&st.wave_items, waves) {
            (Some(items), true) => {
                s.push_str(&format!("### S{:02}: story {i}{nl}", i + 1));
                for (k, d) in items.iter().enumerate() {
                    s.push_str(&format!("- [{}] item {k}{nl}", if *d { 'x' } else { ' ' }));
                }
            }
            _ => {
                s.push_str(&format!("### [{}] US-{:03}: story {i}{nl}", if st.done { 'x' } else { ' ' }, i + 1));
                s.push_str(&format!("- [ ] criterion{nl}"));
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

proptest! {
    #[test]
    fn parse_never_panics(text in "\\PC{0,400}") {
        let _ = parse("prd.md", &text);
        let _ = parse("prd.json", &text);
    }

    #[test]
    fn parse_never_panics_on_fragments(parts in prop::collection::vec(fragment(), 0..40)) {
        let text: String = parts.concat();
        if let Ok(prd) = parse("prd.md", &text) {
            for s in &prd.stories {
                let _ = set_status(&text, &prd, &s.id, Status::Completed);
                let _ = set_status(&text, &prd, &s.id, Status::Pending);
            }
        }
        let _ = parse("prd.json", &text);
    }

    #[test]
    fn rewrite_touches_only_status_marks((stories, crlf, trailing) in gen_stories(), pick in 0usize..6, done in any::<bool>()) {
        let text = render(&stories, crlf, trailing);
        let prd = parse("prd.md", &text).unwrap();
        prop_assume!(!prd.stories.is_empty());
        let target = &prd.stories[pick % prd.stories.len()];
        let status = if done { Status::Completed } else { Status::Pending };
        let out = set_status(&text, &prd, &target.id, status).unwrap();
        let again = parse("prd.md", &out).unwrap();
        prop_assert_eq!(again.stories.len(), prd.stories.len());
        for (a, b) in prd.stories.iter().zip(&again.stories) {
            if a.id == target.id {
                prop_assert_eq!(b.status, status);
            } else {
                prop_assert_eq!(a.status, b.status);
                prop_assert_eq!(&a.text, &b.text);
            }
        }
        // Only mark characters differ, byte for byte.
        prop_assert_eq!(out.len(), text.len());
        for (x, y) in text.bytes().zip(out.bytes()) {
            if x != y {
                prop_assert!(matches!(x, b' ' | b'x') && matches!(y, b' ' | b'x'));
            }
        }
    }
}
