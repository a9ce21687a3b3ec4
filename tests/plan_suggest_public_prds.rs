//! `stream suggest` on real PRDs: Ralph `prd.json` files committed by public projects
//! (tests/fixtures/prd/*/SOURCE names each one's repository, commit and licence), in a repository
//! holding their project's real file list. The written plan must validate with no error, no glob
//! matching nothing, no file owned twice, paths that the tree has (never words of the prose),
//! and `depends_on` that follows the PRD's order. Then the rules one at a time: a file named by
//! its basename or a path suffix, a file and not its folder, a new file under `creates:`, a path
//! several streams name, `dependsOn` and `priority`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::common::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/prd").join(name)
}

/// A repository holding the fixture's file list (empty files) and its PRD at the path the
/// project keeps it.
fn fixture_repo(name: &str, prd_at: &str) -> (TestRepo, Vec<String>) {
    let files: Vec<String> = std::fs::read_to_string(fixture(name).join("files.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let prd = std::fs::read_to_string(fixture(name).join("prd.json")).unwrap();
    let repo = TestRepo::empty();
    for f in &files {
        repo.write(f, if f == prd_at { &prd } else { "" });
    }
    repo.commit_all("the project as it was");
    (repo, files)
}

/// A stream of the written plan, read back with serde_yaml.
#[derive(Debug, Default)]
struct Planned {
    stories: Vec<String>,
    paths: Vec<String>,
    creates: Vec<String>,
    depends_on: Vec<String>,
}

fn list(v: &serde_yaml::Value) -> Vec<String> {
    v.as_sequence().map(|s| s.iter().map(|x| x.as_str().unwrap().to_string()).collect()).unwrap_or_default()
}

fn read_plan(text: &str) -> (Vec<(String, Planned)>, Vec<String>) {
    let plan: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
    let streams = plan["streams"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, s)| {
            let p = Planned {
                stories: list(&s["stories"]),
                paths: list(&s["paths"]),
                creates: list(&s["creates"]),
                depends_on: list(&s["depends_on"]),
            };
            (k.as_str().unwrap().to_string(), p)
        })
        .collect();
    (streams, list(&plan["settings"]["shared_read"]))
}

/// What a glob the plan writes matches: a path exactly, or `dir/**` everything below `dir/`.
fn matches(glob: &str, path: &str) -> bool {
    match glob.strip_suffix("**") {
        Some(dir) => path.starts_with(dir),
        None => glob == path,
    }
}

/// Suggest, write, validate; check the plan by hand against the tree and the PRD.
fn suggest_and_check(repo: &TestRepo, files: &[String], prd_at: &str) -> String {
    repo.boulder(&["stream", "suggest", "--write", "--prd", prd_at]).ok();
    let text = repo.read(".boulder/streams.yaml");
    let v = repo.boulder(&["stream", "validate", "--json"]).ok().json();
    let findings = v["findings"].as_array().unwrap();
    assert!(findings.is_empty(), "{findings:#?}\n{text}");
    assert_eq!(v["ok"], true);

    let (streams, shared) = read_plan(&text);
    let file_set: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    let is_dir = |d: &str| files.iter().any(|f| f.starts_with(&format!("{d}/")));
    // Every path is the tree's: a file, or a folder of it as `dir/**`; every new file is below a
    // folder the tree has and is not a file yet.
    for (name, s) in &streams {
        for p in &s.paths {
            let grounded = match p.strip_suffix("/**") {
                Some(d) => is_dir(d),
                None => file_set.contains(p.as_str()),
            };
            assert!(grounded, "stream {name}: {p:?} is not a file or folder of the tree\n{text}");
        }
        for c in &s.creates {
            let below = c.match_indices('/').any(|(i, _)| is_dir(&c[..i]));
            assert!(!file_set.contains(c.as_str()) && below, "stream {name}: creates {c:?}\n{text}");
        }
    }
    // No file of the tree, nor a new one, is owned twice, and none a stream owns is shared_read.
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    let news: Vec<&str> = streams.iter().flat_map(|(_, s)| s.creates.iter().map(String::as_str)).collect();
    for path in files.iter().map(String::as_str).chain(news.iter().copied()) {
        for (name, s) in &streams {
            if s.paths.iter().chain(&s.creates).any(|g| matches(g, path)) {
                if let Some(first) = owner.insert(path, name) {
                    panic!("{path} owned by {first} and {name}\n{text}");
                }
            }
        }
        if shared.iter().any(|g| g == path) {
            assert!(!owner.contains_key(path), "{path} is shared_read and owned\n{text}");
        }
    }
    // Every story once; a stream depends only on streams with a story earlier in the PRD.
    let prd: serde_json::Value = serde_json::from_str(&repo.read(prd_at)).unwrap();
    let mut order: Vec<(i64, usize, String)> = prd["userStories"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, s)| (s["priority"].as_i64().unwrap_or(0), i, s["id"].as_str().unwrap().to_string()))
        .collect();
    order.sort();
    let rank = |id: &str| order.iter().position(|o| o.2 == id).unwrap();
    let assigned: Vec<&String> = streams.iter().flat_map(|(_, s)| &s.stories).collect();
    assert_eq!(assigned.len(), order.len(), "{text}");
    for (name, s) in &streams {
        for dep in &s.depends_on {
            let (_, d) = streams.iter().find(|(n, _)| n == dep).unwrap();
            let first_dep = d.stories.iter().map(|id| rank(id)).min().unwrap();
            let last_here = s.stories.iter().map(|id| rank(id)).max().unwrap();
            assert!(first_dep < last_here, "{name} depends on {dep}, which comes after it\n{text}");
        }
    }
    // Neither one blob nor one stream per story.
    assert!(streams.len() > 1 && streams.len() < order.len(), "{} streams\n{text}", streams.len());
    text
}

#[test]
fn vue_lynx_docs_translation() {
    // The project of issue: 19 stories translating a documentation site, 467 files.
    let (repo, files) = fixture_repo("vue-lynx", "scripts/ralph/prd.json");
    let text = suggest_and_check(&repo, &files, "scripts/ralph/prd.json");
    // The prose once became these globs.
    for word in ["en/zh", "fetch/async", "header/navbar", "paragraph/section"] {
        assert!(!text.contains(word), "{word} in\n{text}");
    }
    // A story naming one file owns that file: nobody owns the whole guide folder.
    assert!(!text.contains("website/docs/zh/guide/**"), "{text}");
    assert!(text.contains("website/docs/zh/guide/pinia.mdx"), "{text}");
    // The setup story (priority 1) says `mkdir -p website/docs/zh/guide`; the translations there
    // come after it.
    let (streams, _) = read_plan(&text);
    let maker = streams.iter().find(|(_, s)| s.stories.iter().any(|id| id == "setup")).unwrap();
    for (name, s) in &streams {
        if name != &maker.0 && s.paths.iter().any(|p| p.starts_with("website/docs/zh/guide/")) {
            assert!(s.depends_on.contains(&maker.0), "{name} does not depend on {}\n{text}", maker.0);
        }
    }
}

#[test]
fn vue_lynx_before_the_work() {
    // The same project when the PRD was committed: the Chinese guide does not exist yet.
    let (repo, files) = fixture_repo("vue-lynx-early", "scripts/ralph/prd.json");
    let text = suggest_and_check(&repo, &files, "scripts/ralph/prd.json");
    let (streams, _) = read_plan(&text);
    let creates: Vec<&String> = streams.iter().flat_map(|(_, s)| &s.creates).collect();
    assert!(creates.contains(&&"website/docs/zh/guide/pinia.mdx".to_string()), "{text}");
    assert!(!text.contains("website/docs/zh/guide/**"), "{text}");
    // The setup story makes the folder the translations go into (`mkdir -p website/docs/zh/guide`):
    // every stream creating files there depends on the stream making it.
    let maker = streams.iter().find(|(_, s)| s.stories.iter().any(|id| id == "setup")).unwrap();
    let into_guide: Vec<&(String, Planned)> =
        streams.iter().filter(|(_, s)| s.creates.iter().any(|c| c.starts_with("website/docs/zh/guide/"))).collect();
    assert!(into_guide.len() >= 2, "{text}");
    for (name, s) in into_guide {
        if name != &maker.0 {
            assert!(s.depends_on.contains(&maker.0), "{name} does not depend on {}\n{text}", maker.0);
        }
    }
    assert!(text.contains("# needs website/docs/zh/guide/, made by setup"), "{text}");
}

#[test]
fn feff10_rs_migration() {
    let (repo, files) = fixture_repo("feff10-rs", "scripts/ralph/prd.json");
    let text = suggest_and_check(&repo, &files, "scripts/ralph/prd.json");
    assert!(text.contains("tasks/full-module-migration-ledger.csv"), "{text}");
}

#[test]
fn brighter_sdk_migration() {
    let (repo, files) = fixture_repo("brighter", "scripts/ralph/prd.json");
    let text = suggest_and_check(&repo, &files, "scripts/ralph/prd.json");
    // Files named by their basename only, found in the tree.
    assert!(text.contains("Directory.Packages.props"), "{text}");
    assert!(
        text.contains("src/Paramore.Brighter.AsyncAPI.NJsonSchema/Paramore.Brighter.AsyncAPI.NJsonSchema.csproj"),
        "{text}"
    );
}

fn stream<'p>(streams: &'p [(String, Planned)], name: &str, text: &str) -> &'p Planned {
    &streams.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no stream {name} in\n{text}")).1
}

const TREE: &[(&str, &str)] = &[
    ("src/auth/login.rs", ""),
    ("src/auth/mod.rs", ""),
    ("src/billing/page.ts", ""),
    ("src/billing/tax.ts", ""),
    ("website/rspress.config.ts", ""),
    ("website/docs/guide/routing.mdx", ""),
    ("website/docs/zh/guide/routing.mdx", ""),
    ("docs/CONVENTIONS.md", ""),
];

fn repo_with(prd: &str) -> TestRepo {
    let mut files = TREE.to_vec();
    files.push(("scripts/ralph/prd.json", prd));
    TestRepo::with_files(&files)
}

fn story(id: &str, priority: i64, text: &str, extra: &str) -> String {
    format!(
        r#"{{"id": "{id}", "title": "Story {id}", "description": {text:?}, "priority": {priority}, "passes": false{extra}}}"#
    )
}

fn prd(stories: &[String]) -> String {
    format!("{{\"project\": \"x\", \"userStories\": [\n{}\n]}}\n", stories.join(",\n"))
}

fn suggested(repo: &TestRepo) -> (String, Vec<(String, Planned)>, Vec<String>) {
    repo.boulder(&["stream", "suggest", "--write"]).ok();
    let text = repo.read(".boulder/streams.yaml");
    let v = repo.boulder(&["stream", "validate"]).ok();
    assert!(v.stdout.contains(" 0 errors, 0 warnings"), "{}\n{text}", v.stdout);
    let (streams, shared) = read_plan(&text);
    (text, streams, shared)
}

#[test]
fn a_file_named_by_basename_or_unique_suffix_is_that_file_not_its_folder() {
    let repo = repo_with(&prd(&[
        story("US-001", 1, "Set locales in rspress.config.ts and translate zh/guide/routing.mdx.", ""),
        // `guide/routing.mdx` ends two files: it names neither.
        story("US-002", 2, "Fix the login in `src/auth/login.rs`; see guide/routing.mdx.", ""),
        story("US-003", 3, "Rework the whole of src/billing/.", ""),
    ]));
    let (text, streams, _) = suggested(&repo);
    let all: Vec<&String> = streams.iter().flat_map(|(_, s)| &s.paths).collect();
    assert!(all.contains(&&"website/rspress.config.ts".to_string()), "{text}");
    assert!(all.contains(&&"website/docs/zh/guide/routing.mdx".to_string()), "{text}");
    assert!(!all.contains(&&"website/docs/guide/routing.mdx".to_string()), "{text}");
    // The file, not `src/auth/**`; the folder when the story names the folder.
    assert!(all.contains(&&"src/auth/login.rs".to_string()) && !text.contains("src/auth/**"), "{text}");
    assert!(all.contains(&&"src/billing/**".to_string()), "{text}");
}

#[test]
fn a_new_file_inside_a_folder_that_exists_is_created() {
    let repo = repo_with(&prd(&[
        story("US-001", 1, "Add `src/auth/session.rs` and wire it in src/auth/mod.rs.", ""),
        // No folder `en/zh`: a path of nothing, and prose.
        story("US-002", 2, "Copy en/zh/intro.md over; keep header/navbar and fetch/async working.", ""),
    ]));
    let (text, streams, _) = suggested(&repo);
    let auth = stream(&streams, "auth", &text);
    assert_eq!(auth.paths, ["src/auth/mod.rs"], "{text}");
    assert_eq!(auth.creates, ["src/auth/session.rs"], "{text}");
    for word in ["en/zh", "header", "navbar", "fetch"] {
        assert!(!text.contains(word), "{word} in\n{text}");
    }
}

#[test]
fn a_path_several_streams_name_goes_to_one_with_a_comment() {
    let repo = repo_with(&prd(&[
        story("US-001", 1, "Log in: src/auth/login.rs, following docs/CONVENTIONS.md.", ""),
        story(
            "US-002",
            2,
            "Billing page src/billing/page.ts, following docs/CONVENTIONS.md; src/auth/login.rs too.",
            "",
        ),
        story("US-003", 3, "Guide website/docs/guide/routing.mdx, following docs/CONVENTIONS.md.", ""),
    ]));
    let (text, streams, shared) = suggested(&repo);
    // Named by all three streams: read by all, changed by none.
    assert_eq!(shared, ["docs/CONVENTIONS.md"], "{text}");
    assert!(
        text.contains("  # docs/CONVENTIONS.md: named by auth, billing, website-docs; every stream reads it"),
        "{text}"
    );
    // Named by two: the first to need it owns it, the other depends on it.
    let (auth, billing) = (stream(&streams, "auth", &text), stream(&streams, "billing", &text));
    assert_eq!(auth.paths, ["src/auth/login.rs"], "{text}");
    assert_eq!(billing.paths, ["src/billing/page.ts"], "{text}");
    assert_eq!(billing.depends_on, ["auth"], "{text}");
    assert!(
        text.contains(
            "    # src/auth/login.rs: also named by billing (US-002); owned here, where US-001 needs it first\n"
        ),
        "{text}"
    );
    assert!(text.contains("    # src/auth/login.rs: owned by auth (US-001 needs it first)\n"), "{text}");
}

#[test]
fn a_folder_named_by_one_stream_and_files_in_it_by_others_is_narrowed() {
    let repo = repo_with(&prd(&[
        story("US-001", 1, "Set up website/ for a second language.", ""),
        story("US-002", 2, "Translate website/docs/zh/guide/routing.mdx.", ""),
    ]));
    let (text, streams, _) = suggested(&repo);
    let website = stream(&streams, "website", &text);
    assert_eq!(website.paths, ["website/docs/guide/**", "website/rspress.config.ts"], "{text}");
    assert_eq!(stream(&streams, "website-docs", &text).paths, ["website/docs/zh/guide/routing.mdx"], "{text}");
    assert!(text.contains("    # website/: narrowed to what other streams do not own in it\n"), "{text}");
}

#[test]
fn depends_on_follows_depends_on_and_priority() {
    let repo = repo_with(&prd(&[
        // File order is not the order of work: priority is.
        story("US-001", 3, "Show the new src/billing/invoice.ts on src/auth/login.rs and src/auth/mod.rs.", ""),
        story("US-002", 1, "Add src/billing/invoice.ts, then change src/billing/tax.ts.", ""),
        story("US-003", 2, "Guide website/docs/guide/routing.mdx.", r#", "dependsOn": ["US-004"]"#),
        story("US-004", 4, "Configure website/rspress.config.ts.", ""),
    ]));
    let (text, streams, _) = suggested(&repo);
    let names: Vec<&str> = streams.iter().map(|(n, _)| n.as_str()).collect();
    // Written in the order they are first needed.
    assert_eq!(names, ["billing", "website-docs", "auth", "website"], "{text}");
    // billing creates the file auth, later, needs: auth depends on billing.
    let (billing, auth) = (stream(&streams, "billing", &text), stream(&streams, "auth", &text));
    assert_eq!(
        (billing.paths.as_slice(), billing.creates.as_slice()),
        (&["src/billing/tax.ts".to_string()][..], &["src/billing/invoice.ts".to_string()][..]),
        "{text}"
    );
    assert!(auth.creates.is_empty(), "{text}");
    assert!(text.contains("    depends_on: [billing]  # needs src/billing/invoice.ts\n"), "{text}");
    // The PRD's dependsOn, whatever the priorities.
    assert_eq!(stream(&streams, "website-docs", &text).depends_on, ["website"], "{text}");
    assert!(text.contains("    depends_on: [website]  # US-003 depends on US-004\n"), "{text}");
    assert!(stream(&streams, "website", &text).depends_on.is_empty(), "{text}");
}
