//! The JSON Schemas in `docs/schemas/` against real output: `status --json` with streams in every
//! state a test can reach (DEFINED, INITIALIZED with a worktree, dirty, claimed, STOPPED, STALE,
//! MERGED, INVALID), `check --json` through every gate the binary reaches, and `decide` for the one
//! no command reaches (`stopped`). The validator is a small one for the subset of draft 2020-12 the
//! schemas use; it refuses keywords it does not know, so a schema cannot silently outgrow it, and
//! the last test makes sure it does fail on an extra field or a wrong type.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::common::*;
use git_boulder::boulder::decide;
use git_boulder::plan::BoulderSettings;
use git_boulder::state::BoulderState;
use serde_json::{json, Value};

const DRAFT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Keywords that only describe; they never make an instance fail.
const ANNOTATIONS: &[&str] = &["$schema", "$comment", "title", "description", "$defs"];

/// A schema file of `docs/schemas/`.
struct Schema {
    name: &'static str,
    root: Value,
}

impl Schema {
    fn load(name: &'static str) -> Schema {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas").join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let root: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
        assert_eq!(root["$schema"], DRAFT, "{name}: not draft 2020-12");
        let s = Schema { name, root };
        s.lint(&s.root, "#");
        s
    }

    fn status() -> Schema {
        Schema::load("status.schema.json")
    }

    fn check() -> Schema {
        Schema::load("check.schema.json")
    }

    /// Why `v` does not match (empty when it does).
    fn errors(&self, v: &Value) -> Vec<String> {
        let mut errs = Vec::new();
        self.validate(&self.root, v, "", &mut errs);
        errs
    }

    #[track_caller]
    fn assert_valid(&self, v: &Value) {
        let errs = self.errors(v);
        assert!(errs.is_empty(), "{} rejects real output:\n  {}\n{v:#}", self.name, errs.join("\n  "));
    }

    #[track_caller]
    fn assert_invalid(&self, v: &Value, why: &str) {
        assert!(!self.errors(v).is_empty(), "{} accepts {why}:\n{v:#}", self.name);
    }

    fn resolve(&self, r: &str) -> &Value {
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("{}: only local $ref is supported: {r}", self.name));
        self.root.pointer(pointer).unwrap_or_else(|| panic!("{}: unresolved $ref {r}", self.name))
    }

    /// Every subschema, reached or not by an instance: known keywords only, every `$ref`
    /// resolves, and an object with fixed fields requires all of them (git-boulder always prints
    /// every field, `null` when unknown).
    fn lint(&self, schema: &Value, at: &str) {
        let obj = schema.as_object().unwrap_or_else(|| panic!("{}: the schema at {at} is not an object", self.name));
        for (k, v) in obj {
            let here = format!("{at}/{k}");
            match k.as_str() {
                "$defs" | "properties" => {
                    for (name, sub) in v.as_object().unwrap_or_else(|| panic!("{}: {here} is not an object", self.name))
                    {
                        self.lint(sub, &format!("{here}/{name}"));
                    }
                }
                "items" => self.lint(v, &here),
                "oneOf" => {
                    for (i, sub) in v.as_array().expect("oneOf is an array").iter().enumerate() {
                        self.lint(sub, &format!("{here}/{i}"));
                    }
                }
                "$ref" => {
                    self.resolve(v.as_str().expect("$ref is a string"));
                }
                "additionalProperties" => {
                    assert_eq!(*v, Value::Bool(false), "{}: {here}: only `false` is used", self.name)
                }
                "type" | "enum" | "const" | "minimum" | "minLength" | "required" => {}
                "format" => assert_eq!(v, "date-time", "{}: {here}: only date-time is checked", self.name),
                k if ANNOTATIONS.contains(&k) => {}
                other => panic!("{}: {at}: keyword {other:?} is unknown to this test's validator", self.name),
            }
        }
        if obj.get("additionalProperties") == Some(&Value::Bool(false)) {
            let props: BTreeSet<&str> =
                obj["properties"].as_object().expect("properties").keys().map(String::as_str).collect();
            let required: BTreeSet<&str> = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|s| s.as_str().unwrap()).collect())
                .unwrap_or_default();
            // A field added after 0.1 whose output must stay byte for byte what 0.1 printed is left
            // out when it has nothing to say, and says so (`"$comment": "printed only when set"`).
            let only_when_set: BTreeSet<&str> = props
                .iter()
                .copied()
                .filter(|p| obj["properties"][*p]["$comment"] == "printed only when set")
                .collect();
            let props: BTreeSet<&str> = props.difference(&only_when_set).copied().collect();
            assert_eq!(props, required, "{}: {at}: every fixed field is printed, so every one is required", self.name);
        }
    }

    fn validate(&self, schema: &Value, v: &Value, at: &str, errs: &mut Vec<String>) {
        let obj = schema.as_object().expect("linted");
        let here = if at.is_empty() { "(root)" } else { at };
        for (k, s) in obj {
            match k.as_str() {
                "$ref" => self.validate(self.resolve(s.as_str().unwrap()), v, at, errs),
                "type" => {
                    let types: Vec<&str> = match s {
                        Value::String(t) => vec![t.as_str()],
                        Value::Array(a) => a.iter().map(|t| t.as_str().expect("type name")).collect(),
                        _ => panic!("{}: bad type at {here}", self.name),
                    };
                    if !types.iter().any(|t| has_type(v, t)) {
                        errs.push(format!("{here}: {v} is not {}", types.join(" or ")));
                    }
                }
                "enum" if !s.as_array().expect("enum is an array").contains(v) => {
                    errs.push(format!("{here}: {v} is not one of {s}"));
                }
                "const" if s != v => errs.push(format!("{here}: {v} is not {s}")),
                "minimum" => {
                    if let (Some(n), Some(min)) = (v.as_f64(), s.as_f64()) {
                        if n < min {
                            errs.push(format!("{here}: {v} is below {s}"));
                        }
                    }
                }
                "minLength" => {
                    if let Some(t) = v.as_str() {
                        if (t.chars().count() as u64) < s.as_u64().expect("minLength") {
                            errs.push(format!("{here}: {v} is shorter than {s}"));
                        }
                    }
                }
                "format" => {
                    if let Some(t) = v.as_str() {
                        if !is_date_time(t) {
                            errs.push(format!("{here}: {v} is not an RFC 3339 date-time"));
                        }
                    }
                }
                "required" => {
                    if let Some(o) = v.as_object() {
                        for name in s.as_array().expect("required is an array") {
                            if !o.contains_key(name.as_str().unwrap()) {
                                errs.push(format!("{here}: {name} is missing"));
                            }
                        }
                    }
                }
                "properties" => {
                    if let Some(o) = v.as_object() {
                        for (name, sub) in s.as_object().unwrap() {
                            if let Some(x) = o.get(name) {
                                self.validate(sub, x, &format!("{at}/{name}"), errs);
                            }
                        }
                    }
                }
                "additionalProperties" => {
                    if let Some(o) = v.as_object() {
                        let known = obj.get("properties").and_then(Value::as_object);
                        for name in o.keys().filter(|n| !known.is_some_and(|p| p.contains_key(*n))) {
                            errs.push(format!("{here}: field {name:?} is not in the schema"));
                        }
                    }
                }
                "items" => {
                    if let Some(a) = v.as_array() {
                        for (i, x) in a.iter().enumerate() {
                            self.validate(s, x, &format!("{at}/{i}"), errs);
                        }
                    }
                }
                "oneOf" => {
                    let branches = s.as_array().unwrap();
                    let passing: Vec<usize> = (0..branches.len())
                        .filter(|i| {
                            let mut e = Vec::new();
                            self.validate(&branches[*i], v, at, &mut e);
                            e.is_empty()
                        })
                        .collect();
                    if passing.len() != 1 {
                        errs.push(format!(
                            "{here}: matches {} of the oneOf branches {passing:?}, not exactly one",
                            passing.len()
                        ));
                    }
                }
                _ => {} // annotations, and enum/const that matched (lint refused everything else)
            }
        }
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        other => panic!("unknown type {other:?}"),
    }
}

/// RFC 3339 `date-time`: `YYYY-MM-DDTHH:MM:SS`, optional fraction, then `Z` or `±HH:MM`.
fn is_date_time(t: &str) -> bool {
    let b = t.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r.clone()).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let shape = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b[10], b'T' | b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !shape {
        return false;
    }
    let mut i = 19;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match &b[i..] {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

fn at(repo: &TestRepo, now: &str, args: &[&str]) -> Run {
    repo.boulder_env(&repo.dir, args, &[("BOULDER_NOW", now)])
}

/// `status --json`, validated, as name → row.
fn status(repo: &TestRepo, schema: &Schema) -> Vec<Value> {
    let j = repo.boulder(&["status", "--json"]).ok().json();
    schema.assert_valid(&j);
    j["streams"].as_array().unwrap().clone()
}

fn row<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no row {name}: {rows:?}"))
}

/// A bare remote `origin` for `repo`, so that streams can be claimed.
fn with_remote(repo: &TestRepo) {
    let remote = repo.tmp.path().join("remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]).ok();
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]).ok();
    repo.git(&["push", "-q", "origin", "main"]).ok();
}

#[test]
fn the_schemas_match_the_codes_fixed_sets() {
    let status = Schema::status();
    let mut expected: BTreeSet<String> =
        git_boulder::state::op::STREAM_STATUSES.iter().map(|s| s.to_string()).collect();
    expected.extend(
        [
            "STALE",
            "INVALID",
            "INTERRUPTED",
            "SETUP_FAILED",
            "NEEDS_ATTENTION",
            "REVIEW",
            "CHANGES_REQUESTED",
            "APPROVED",
            "BUDGET_SPENT",
        ]
        .map(String::from),
    );
    let listed: BTreeSet<String> = status.root["$defs"]["stream"]["properties"]["status"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        listed, expected,
        "status enum = the op-log's statuses + STALE + INVALID + INTERRUPTED + SETUP_FAILED + NEEDS_ATTENTION + REVIEW + CHANGES_REQUESTED + APPROVED + BUDGET_SPENT (src/stream/status.rs)"
    );

    // The gate enum is the union of the oneOf branches' gates.
    let check = Schema::check();
    let gates: BTreeSet<&str> =
        check.root["properties"]["gate"]["enum"].as_array().unwrap().iter().map(|g| g.as_str().unwrap()).collect();
    let mut branches = BTreeSet::new();
    for b in check.root["$defs"].as_object().unwrap().values() {
        let g = &b["properties"]["gate"];
        match (g.get("const"), g.get("enum")) {
            (Some(c), _) => {
                branches.insert(c.as_str().unwrap());
            }
            (_, Some(e)) => branches.extend(e.as_array().unwrap().iter().map(|g| g.as_str().unwrap())),
            _ => panic!("a branch without a gate: {b}"),
        }
    }
    assert_eq!(gates, branches);
}

#[test]
fn status_json_with_spend_and_budgets() {
    let schema = Schema::status();
    let repo = sample_with("  budget: {usd: 100}\n  prices:\n    m: {input: 3, output: 15}\n");
    let plan = repo.read(".boulder/streams.yaml").replace("  docs:\n", "  docs:\n    budget: {tokens: 10, time: 1h}\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("budgets");
    repo.boulder(&["spend", "add", "--stream", "auth", "--tokens-in", "5", "--tokens-out", "5", "--model", "m"]).ok();
    repo.boulder(&["spend", "add", "--stream", "docs", "--tokens-in", "50", "--tokens-out", "5"]).ok();
    let rows = status(&repo, &schema);
    assert!(row(&rows, "auth")["spend"]["usd"].is_number());
    assert!(row(&rows, "api").get("spend").is_none());
    let docs = row(&rows, "docs");
    assert_eq!((&docs["status"], &docs["spend"]["spent_budget"]), (&json!("BUDGET_SPENT"), &json!("stream")));
    assert!(docs["spend"]["usd"].is_null() && docs["spend"]["budget"]["time_seconds"] == 3600, "{docs}");
}

#[test]
fn status_json_in_every_reachable_state() {
    let schema = Schema::status();
    let repo = sample();
    let mut seen: Vec<Value> = Vec::new();

    // Nothing initialized: every stream DEFINED, every local field null.
    let rows = status(&repo, &schema);
    assert!(rows.iter().all(|r| r["status"] == "DEFINED" && r["ahead"].is_null() && r["worktree"].is_null()));
    seen.extend(rows);

    // auth: a worktree, a recorded commit, a claim; api: a dirty worktree; docs: still DEFINED.
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "auth", "api"]).ok();
    let auth = repo.dir.join(".boulder/worktrees/auth");
    std::fs::write(auth.join("src/auth/login.rs"), "// login\n").unwrap();
    repo.git_in(&auth, &["add", "-A"]).ok();
    repo.git_in(&auth, &["commit", "-q", "-m", "login"]).ok();
    std::fs::write(repo.dir.join(".boulder/worktrees/api/src/api/wip.rs"), "// wip\n").unwrap();
    with_remote(&repo);
    repo.boulder(&["stream", "claim", "auth"]).ok();
    let rows = status(&repo, &schema);
    let a = row(&rows, "auth");
    assert_eq!(
        (a["status"].as_str(), a["iteration"].as_u64(), a["ahead"].as_u64()),
        (Some("INITIALIZED"), Some(1), Some(1))
    );
    assert!(a["last_activity"].is_string() && a["worktree"].is_string(), "{a}");
    assert_eq!(
        (&a["dirty"], &a["claim"]["mine"], &a["claim"]["remote"]),
        (&json!(false), &json!(true), &json!("origin"))
    );
    assert_eq!(row(&rows, "api")["dirty"], true);
    assert_eq!(row(&rows, "docs")["status"], "DEFINED");
    seen.extend(rows);
    // The aliases print the same document.
    schema.assert_valid(&repo.boulder(&["stream", "list", "--json"]).ok().json());
    schema.assert_valid(&repo.boulder(&["stream", "status", "--json"]).ok().json());

    // api: a run that ends STOPPED; docs: initialized, then its folder removed (STALE).
    repo.boulder(&["stream", "run", "api", "--max-iterations", "1", "--", "true"]).ok();
    repo.boulder(&["stream", "init", "docs"]).ok();
    std::fs::remove_dir_all(repo.dir.join(".boulder/worktrees/docs")).unwrap();
    let rows = status(&repo, &schema);
    assert_eq!(row(&rows, "api")["status"], "STOPPED");
    let d = row(&rows, "docs");
    assert_eq!((d["status"].as_str(), &d["worktree"], &d["dirty"]), (Some("STALE"), &Value::Null, &Value::Null));
    seen.extend(rows);

    // auth: merged; docs: a state ref holding garbage (INVALID, with a warning on stderr).
    repo.boulder(&["prd", "done", "US-001"]).ok();
    repo.boulder(&["stream", "merge", "auth"]).ok();
    repo.git(&["update-ref", "refs/boulder/streams/docs", "HEAD"]).ok();
    // api: its landing refused for uncommitted changes in its worktree (NEEDS_ATTENTION).
    std::fs::write(repo.dir.join(".boulder/worktrees/api/src/api/mod.rs"), "// edited\n").unwrap();
    repo.boulder(&["stream", "merge", "api", "--force"]).code(1);
    let rows = status(&repo, &schema);
    let api = row(&rows, "api");
    assert_eq!((&api["status"], &api["attention"]["refusal"]), (&json!("NEEDS_ATTENTION"), &json!("uncommitted")));
    assert!(row(&rows, "auth").get("attention").is_none());
    assert_eq!(row(&rows, "auth")["status"], "MERGED");
    assert_eq!(row(&rows, "auth")["progress"], json!({"done": 2, "total": 2}));
    assert_eq!(row(&rows, "docs")["status"], "INVALID");
    seen.extend(rows);

    // Every nullable field was seen both ways, and these statuses were met.
    for field in ["last_activity", "worktree", "ahead", "behind", "dirty", "claim"] {
        assert!(seen.iter().any(|r| r[field].is_null()), "{field} never null");
        assert!(seen.iter().any(|r| !r[field].is_null()), "{field} never set");
    }
    let statuses: BTreeSet<&str> = seen.iter().map(|r| r["status"].as_str().unwrap()).collect();
    for s in ["DEFINED", "INITIALIZED", "STOPPED", "STALE", "MERGED", "INVALID", "NEEDS_ATTENTION"] {
        assert!(statuses.contains(s), "{s} not reached: {statuses:?}");
    }
}

#[test]
fn check_json_through_every_gate_the_binary_reaches() {
    let schema = Schema::check();
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let mut gates = BTreeSet::new();
    let mut check = |now: &str, extra: &[&str]| -> Value {
        let mut args = vec!["check", "--json"];
        args.extend_from_slice(extra);
        let j = at(&repo, now, &args).ok().json();
        schema.assert_valid(&j);
        gates.insert(j["gate"].as_str().unwrap().to_string());
        j
    };
    let auth = ["--boulder", "auth"];
    let j = check("2030-01-01T00:00:00Z", &[&auth[..], &["--subagent"]].concat());
    assert_eq!((&j["gate"], &j["message"]), (&json!("subagent"), &Value::Null));
    let j = check("2030-01-01T00:00:00Z", &auth);
    assert_eq!((&j["gate"], &j["variant"], &j["parent_iteration"]), (&json!("enforce"), &json!("error"), &Value::Null));
    assert_eq!(check("2030-01-01T00:00:40Z", &auth)["gate"], "cooldown");
    let j = check("2030-01-01T00:00:41Z", &[&auth[..], &["--message", "I am done"]].concat());
    assert_eq!((&j["gate"], &j["variant"]), (&json!("completion"), &json!("warning")));
    // Work talk is not completion: the idle gate holds (the last op was just now).
    let j = check("2030-01-01T00:00:42Z", &[&auth[..], &["--message", "Let me complete the function"]].concat());
    assert_eq!(j["gate"], "idle");
    assert_eq!(check("2030-01-01T05:00:00Z", &[&auth[..], &["--max-failures", "2"]].concat())["gate"], "max_failures");
    // A child: the parent waits for it; the child is enforced with its parent's iteration.
    at(&repo, "2030-01-02T00:00:00Z", &["create", "oauth", "--parent", "auth"]).ok();
    assert_eq!(check("2030-01-03T00:00:00Z", &auth)["gate"], "children");
    let j = check("2030-01-03T00:00:00Z", &["--boulder", "oauth"]);
    assert_eq!((&j["enforce"], &j["depth"], &j["parent_iteration"]), (&json!(true), &json!(1), &json!(0)));
    // In a stream's worktree, without --boulder: its current boulder.
    let wt = repo.dir.join(".boulder/worktrees/auth");
    let j = repo
        .boulder_env(&wt, &["check", "--json", "--subagent"], &[("BOULDER_NOW", "2030-01-04T00:00:00Z")])
        .ok()
        .json();
    schema.assert_valid(&j);
    assert_eq!(j["boulder"], "auth");

    // `stream stop` stops the root boulder's enforcement too, until new activity.
    repo.boulder(&["stream", "stop", "auth"]).ok();
    assert_eq!(check("2030-01-05T00:00:00Z", &auth)["gate"], "stopped");
    // A stream's root boulder whose stories are all done is completed: nothing to push on.
    repo.boulder(&["prd", "done", "US-001", "US-002"]).ok();
    assert_eq!(check("2030-01-06T00:00:00Z", &[&auth[..], &["--message", "I am done"]].concat())["gate"], "completed");
    let all = gates_of(&schema);
    let missing: Vec<&String> = all.difference(&gates).collect();
    assert!(missing.is_empty(), "gates not reached: {missing:?}");
}

/// The gate names the check schema allows.
fn gates_of(schema: &Schema) -> BTreeSet<String> {
    schema.root["properties"]["gate"]["enum"].as_array().unwrap().iter().map(|g| g.as_str().unwrap().into()).collect()
}

#[test]
fn every_gate_of_decide_fits_the_schema() {
    let schema = Schema::check();
    let t = BoulderSettings {
        idle_threshold: Duration::from_secs(30),
        cooldown: Duration::from_secs(30),
        max_failures: 3,
        ..BoulderSettings::default()
    };
    let now = git_boulder::time::parse_rfc3339("2030-01-01T01:00:00Z").unwrap();
    let ago = |secs: f64| Some(git_boulder::time::format_secs(now - secs));
    let idle = BoulderState { last_activity: ago(1000.0), ..BoulderState::default() };
    let child = BoulderState { status: git_boulder::state::BoulderStatus::Active, ..BoulderState::default() };
    // (gate, boulder, its children, --subagent, --message)
    type Case<'a> = (&'a str, BoulderState, Vec<BoulderState>, bool, Option<&'a str>);
    let cases: Vec<Case> = vec![
        ("subagent", idle.clone(), vec![], true, None),
        ("idle", BoulderState { last_activity: ago(1.0), ..BoulderState::default() }, vec![], false, None),
        (
            "cooldown",
            BoulderState { last_enforcement: ago(1.0), failure_count: 1, ..idle.clone() },
            vec![],
            false,
            None,
        ),
        (
            "max_failures",
            BoulderState { last_enforcement: ago(900.0), failure_count: 3, ..idle.clone() },
            vec![],
            false,
            None,
        ),
        (
            "completed",
            BoulderState { status: git_boulder::state::BoulderStatus::Completed, ..idle.clone() },
            vec![],
            false,
            None,
        ),
        ("stopped", BoulderState { stop_requested: true, ..idle.clone() }, vec![], false, None),
        ("children", idle.clone(), vec![child], false, None),
        ("enforce", idle.clone(), vec![], false, None),
        ("completion", idle.clone(), vec![], false, Some("Task complete.")),
    ];
    let mut gates = BTreeSet::new();
    for (gate, b, kids, subagent, message) in cases {
        let d = decide(&b, &kids, now, &t, subagent, message);
        assert_eq!(d.gate, gate, "{d:?}");
        // Filled in as `check` does: the message only when enforcing.
        let mut v = serde_json::to_value(&d).unwrap();
        let o = v.as_object_mut().unwrap();
        o.insert("message".into(), if d.enforce { json!("Boulder auth (iteration 0)\n…") } else { Value::Null });
        o.extend([
            ("boulder".into(), json!("auth")),
            ("iteration".into(), json!(0)),
            ("parent_iteration".into(), Value::Null),
            ("depth".into(), json!(0)),
        ]);
        schema.assert_valid(&v);
        gates.insert(gate.to_string());
    }
    let all = gates_of(&schema);
    assert_eq!(gates, all);
}

#[test]
fn the_validator_rejects_what_the_schemas_forbid() {
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    with_remote(&repo);
    repo.boulder(&["stream", "claim", "auth"]).ok();

    let status = Schema::status();
    let good = repo.boulder(&["status", "--json"]).ok().json();
    status.assert_valid(&good);
    assert!(good["streams"][0]["claim"].is_object());
    let bad = |what: &str, edit: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        edit(&mut v);
        status.assert_invalid(&v, what);
    };
    bad("an extra top-level field", &|v| v["generated"] = json!(1));
    bad("an extra field in a row", &|v| v["streams"][0]["owner"] = json!("me"));
    bad("an extra field in progress", &|v| v["streams"][0]["progress"]["open"] = json!(1));
    bad("an extra field in claim", &|v| v["streams"][0]["claim"]["since"] = json!("2030-01-01T00:00:00Z"));
    bad("a missing field", &|v| drop(v["streams"][0].as_object_mut().unwrap().remove("dirty")));
    bad("a claim without mine", &|v| drop(v["streams"][0]["claim"].as_object_mut().unwrap().remove("mine")));
    bad("iteration as a string", &|v| v["streams"][0]["iteration"] = json!("1"));
    bad("a fractional iteration", &|v| v["streams"][0]["iteration"] = json!(1.5));
    bad("a negative count", &|v| v["streams"][0]["progress"]["done"] = json!(-1));
    bad("dirty as a string", &|v| v["streams"][0]["dirty"] = json!("yes"));
    bad("an unknown status", &|v| v["streams"][0]["status"] = json!("DONE"));
    bad("a time that is not RFC 3339", &|v| v["streams"][0]["last_activity"] = json!("yesterday"));
    bad("claim as a string", &|v| v["streams"][0]["claim"] = json!("origin"));
    bad("streams as an object", &|v| v["streams"] = json!({}));

    let check = Schema::check();
    let good = at(&repo, "2030-01-01T00:00:00Z", &["check", "--boulder", "auth", "--json"]).ok().json();
    check.assert_valid(&good);
    assert_eq!(good["enforce"], true);
    let bad = |what: &str, edit: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        edit(&mut v);
        check.assert_invalid(&v, what);
    };
    bad("an extra field", &|v| v["story"] = json!("US-001"));
    bad("enforce as a string", &|v| v["enforce"] = json!("true"));
    bad("an unknown gate", &|v| v["gate"] = json!("sleepy"));
    bad("enforcing without a message", &|v| v["message"] = Value::Null);
    bad("enforcing without a variant", &|v| v["variant"] = Value::Null);
    bad("idle enforcement as a warning", &|v| v["variant"] = json!("warning"));
    bad("a holding gate that enforces", &|v| v["gate"] = json!("cooldown"));
    bad("not enforcing with a message", &|v| v["enforce"] = json!(false));
    bad("depth as a float", &|v| v["depth"] = json!(0.5));
    bad("a missing parent_iteration", &|v| drop(v.as_object_mut().unwrap().remove("parent_iteration")));
}
