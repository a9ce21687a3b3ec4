//! The PRD and the plan at scale: `prd show` (table and JSON) keeps its exact bytes — key order,
//! both kinds of story position, escaped controls — now that it is written straight from the
//! parsed stories, and a PRD of thousands of stories shared out over a hundred streams reads the
//! same through `prd show`, `prd next`, `status`, `stream validate` and `stream suggest`. And the
//! PRD a repository names is bounded: a regular file of at most 64 MiB (`prd.md -> /dev/zero` is
//! refused at once), inside the repository (`prd: ../x.md`, an absolute path, a symlink out).

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

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
/// each owning its own folder, which holds a file.
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
    let folders: Vec<String> = (0..m).map(|s| format!("src/s{s:04}/mod.rs")).collect();
    let mut files = vec![(".agents/tasks/prd.md", prd.as_str()), (".boulder/streams.yaml", plan.as_str())];
    files.extend(folders.iter().map(|f| (f.as_str(), "")));
    TestRepo::with_files(&files)
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
    // Each story names a new file in its folder: the stream creates them.
    let created: Vec<String> = (0..30).map(|k| format!("src/s0099/f{}.rs", 99 + 100 * k)).collect();
    let mut sorted = created.clone();
    sorted.sort();
    assert!(
        suggest.stdout.contains(&format!(", US-002999]\n    paths: []\n    creates: [{}]\n", sorted.join(", "))),
        "{}",
        suggest.stdout
    );

    // The plan lists a story twice in one stream and one in two streams: both are named.
    let plan = repo.read(".boulder/streams.yaml");
    repo.write(
        ".boulder/streams.yaml",
        &plan.replacen("stories: [US-000000,", "stories: [US-000000, US-000001, US-000030,", 1),
    );
    let bad = repo.boulder(&["stream", "validate"]).code(2);
    assert_shown!("thousands_of_stories_over_a_hundred_streams", bad);
}

// ---- a PRD that is not a bounded file inside the repository ---------------------------------

/// `git-boulder ARGS` in `dir` with `stdin`, under a 2 GiB address-space limit (`ulimit -v`) and
/// a 60 s deadline: a PRD read without bounds fails here, and fast, instead of filling the
/// machine's memory. How long it took comes back too.
fn bounded(repo: &TestRepo, dir: &Path, args: &[&str], stdin: &str) -> (Run, std::time::Duration) {
    let mut cmd = repo.command("sh");
    cmd.arg("-c").arg("ulimit -v 2097152 && exec \"$0\" \"$@\"").arg(bin()).args(args).current_dir(dir);
    let mut child =
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run git-boulder");
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let start = std::time::Instant::now();
    let deadline = std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > deadline {
            let _ = child.kill();
            panic!("git-boulder {args:?} still running after {deadline:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (Run::from(child.wait_with_output().unwrap()), start.elapsed())
}

/// The sample with its PRD replaced by a committed symlink to `target`.
fn prd_linked_to(target: &str) -> TestRepo {
    let repo = sample();
    let prd = repo.dir.join(".agents/tasks/prd.md");
    std::fs::remove_file(&prd).unwrap();
    std::os::unix::fs::symlink(target, &prd).unwrap();
    repo.commit_all("the PRD is a link");
    repo
}

#[test]
fn a_prd_symlink_to_dev_zero_is_refused_at_once() {
    let repo = prd_linked_to("/dev/zero");
    let dir = repo.dir.clone();
    for args in [&["prd", "show"][..], &["prd", "next"], &["stream", "validate"]] {
        let (r, took) = bounded(&repo, &dir, args, "");
        let r = r.code(2);
        assert!(took < std::time::Duration::from_secs(20), "{args:?} took {took:?}");
        assert!(r.stderr.contains(".agents/tasks/prd.md") || r.stdout.contains(".agents/tasks/prd.md"), "{r:?}");
        assert!(
            r.stderr.contains("resolves to /dev/zero, outside the repository")
                || r.stdout.contains("resolves to /dev/zero, outside the repository"),
            "{args:?}: {r:?}"
        );
    }
    // status goes on without the PRD, saying why.
    let (r, _) = bounded(&repo, &dir, &["status"], "");
    assert!(r.ok().stderr.contains("outside the repository"));
    // The SessionStart hook: a non-blocking error naming the problem, not a process eating memory.
    let payload = format!(r#"{{"cwd":"{}","hook_event_name":"SessionStart","source":"startup"}}"#, dir.display());
    let (r, took) = bounded(&repo, &dir, &["agent", "hook", "claude"], &payload);
    let r = r.code(1);
    assert!(took < std::time::Duration::from_secs(20), "the hook took {took:?}");
    assert_shown!("prd_symlink_to_dev_zero_in_a_hook", r);
    // Named by the user with --prd, it is refused for what it is.
    let (r, _) = bounded(&repo, &dir, &["prd", "show", "--prd", "/dev/zero"], "");
    let r = r.code(2);
    assert_shown!("prd_symlink_to_dev_zero_named", r);
}

#[test]
fn a_prd_larger_than_64_mib_is_refused_before_it_is_read() {
    let repo = sample();
    // Sparse: 64 MiB and one byte of nothing, written in no time.
    let big = repo.dir.join(".agents/tasks/prd.md");
    std::fs::File::create(&big).unwrap().set_len((64 << 20) + 1).unwrap();
    let dir = repo.dir.clone();
    for (case, args) in [("plan", &["prd", "show"][..]), ("flag", &["prd", "show", "--prd", ".agents/tasks/prd.md"])] {
        let (r, _) = bounded(&repo, &dir, args, "");
        let r = r.code(2);
        assert_shown!(format!("a_prd_larger_than_64_mib_named_by_the_{case}"), r);
    }
    let (r, _) = bounded(&repo, &dir, &["stream", "validate", "--json"], "");
    let findings = r.code(2).json()["findings"].clone();
    let prd: Vec<&serde_json::Value> = findings.as_array().unwrap().iter().filter(|f| f["code"] == "prd").collect();
    assert_eq!(prd.len(), 1, "{findings}");
    assert!(prd[0]["message"].as_str().unwrap().contains("larger than 64 MiB"), "{findings}");
}

/// A file beside the repository that reads as a PRD, and the sample with `prd:` set to `prd`.
fn prd_outside(prd: impl Fn(&Path) -> String) -> (TestRepo, std::path::PathBuf) {
    let repo = sample();
    let notes = repo.dir.parent().unwrap().join("private-notes.md");
    std::fs::write(&notes, "### [ ] US-001: secret outside the repo\nthe contents of a private file\n").unwrap();
    let plan = repo.read(".boulder/streams.yaml");
    repo.write(".boulder/streams.yaml", &plan.replace("prd: .agents/tasks/prd.md", &format!("prd: '{}'", prd(&notes))));
    repo.commit_all("prd outside");
    (repo, notes)
}

#[test]
fn a_prd_path_leaving_the_repository_is_refused() {
    for (prd, why) in [
        (&(|_: &Path| "../private-notes.md".to_string()) as &dyn Fn(&Path) -> String, "contains a `..` component"),
        (&|n: &Path| n.display().to_string(), "it is absolute"),
    ] {
        let (repo, notes) = prd_outside(prd);
        let v = repo.boulder(&["stream", "validate", "--json"]).code(2).json();
        let findings: Vec<&serde_json::Value> =
            v["findings"].as_array().unwrap().iter().filter(|f| f["code"] == "prd").collect();
        assert_eq!(findings.len(), 1, "{v}");
        assert!(findings[0]["message"].as_str().unwrap().contains(why), "{v}");
        assert!(findings[0]["hint"].as_str().unwrap().contains("--prd PATH"), "{v}");
        let human = repo.boulder(&["stream", "validate"]).code(2);
        let case = if why.contains("..") { "dot_dot" } else { "absolute" };
        assert_shown!(format!("a_prd_path_leaving_the_repository_{case}"), human);
        assert!(human.stdout.contains(why), "{}", human.stdout);
        for args in [&["prd", "next"][..], &["prd", "show"], &["prd", "show", "--stream", "auth"]] {
            let r = repo.boulder(args).code(2);
            assert!(!r.stdout.contains("secret"), "{args:?} printed the outside file: {}", r.stdout);
            assert!(r.stderr.contains(why) && r.stderr.contains("prd:"), "{args:?}: {}", r.stderr);
        }
        // The user naming the file is the user's choice.
        let own = repo.boulder(&["prd", "next", "--prd", notes.to_str().unwrap()]).ok();
        assert!(own.stdout.contains("secret outside the repo"), "{}", own.stdout);
    }
}

#[test]
fn a_prd_symlink_out_of_the_repository_is_refused_and_one_inside_is_read() {
    let repo = sample();
    let outside = repo.dir.parent().unwrap().join("outside-prd.md");
    std::fs::write(&outside, "### [ ] US-001: secret outside the repo\n").unwrap();
    let prd = repo.dir.join(".agents/tasks/prd.md");
    std::fs::rename(&prd, repo.dir.join("docs/prd.md")).unwrap();
    std::os::unix::fs::symlink(&outside, &prd).unwrap();
    let r = repo.boulder(&["prd", "next"]).code(2);
    assert!(!r.stdout.contains("secret"), "{}", r.stdout);
    assert_shown!("prd_symlink_out_of_the_repository", r);
    // A link that stays inside is followed.
    std::fs::remove_file(&prd).unwrap();
    std::os::unix::fs::symlink("../../docs/prd.md", &prd).unwrap();
    let r = repo.boulder(&["prd", "next"]).ok();
    assert_shown!("prd_symlink_inside_the_repository", r);
}

#[test]
fn a_plan_symlink_to_dev_zero_is_refused_at_once() {
    let repo = TestRepo::with_files(&[("README.md", "# x\n")]);
    std::fs::create_dir_all(repo.dir.join(".boulder")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", repo.dir.join(".boulder/streams.yaml")).unwrap();
    let dir = repo.dir.clone();
    for args in [&["status"][..], &["stream", "validate"], &["stream", "init"]] {
        let (r, took) = bounded(&repo, &dir, args, "");
        let r = r.code(2);
        assert!(took < std::time::Duration::from_secs(20), "{args:?} took {took:?}");
        assert!(r.stderr.contains("streams.yaml: it is a character device, not a regular file"), "{args:?}: {r:?}");
    }
}
