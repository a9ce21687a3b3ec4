//! What the agent of `stream run` is told: `BOULDER_PROMPT` names the stream's own paths and the
//! read-only (`shared_read`) ones; `settings.prompt_template` replaces it, once trusted.

use crate::common::*;

/// Run one iteration of stream `api` with an agent that writes `$BOULDER_PROMPT` to a file; the
/// run and what the agent was told.
fn told(repo: &TestRepo, flags: &[&str]) -> (Run, Option<String>) {
    let out = repo.tmp.path().join("prompt.txt");
    let _ = std::fs::remove_file(&out);
    let script = format!("printf '%s' \"$BOULDER_PROMPT\" > '{}'", out.display());
    let mut args: Vec<&str> = flags.to_vec();
    args.extend(["stream", "run", "api", "--max-iterations", "1", "--cooldown", "1ms", "--", "sh", "-c", &script]);
    let r = repo.boulder(&args);
    (r, std::fs::read_to_string(&out).ok())
}

#[test]
fn the_default_prompt_says_where_the_agent_may_write() {
    let repo = sample();
    repo.boulder(&["stream", "init", "api"]).ok();
    let (r, prompt) = told(&repo, &[]);
    r.ok();
    let prompt = prompt.expect("the agent ran");
    assert!(prompt.contains("story US-003: List endpoint"), "{prompt}");
    let own = prompt.lines().find(|l| l.contains("src/api/**")).unwrap_or_else(|| panic!("{prompt}"));
    assert!(own.contains("may change only"), "{own}");
    let read_only = prompt.lines().find(|l| l.contains("src/types/**")).unwrap_or_else(|| panic!("{prompt}"));
    assert!(read_only.contains("never change"), "{read_only}");
    assert!(!prompt.contains("src/auth/**"), "another stream's paths are not the agent's: {prompt}");
}

#[test]
fn prompt_template_replaces_it_once_trusted() {
    let repo = sample_with(
        "  prompt_template: 'Story {story_id} ({story_title}) of {stream}, iteration {iteration}; write {owned_paths}; \
         read {read_only_paths}; PRD {prd}; {{literal}}'\n",
    );
    repo.boulder(&["stream", "init", "api"]).ok();
    // The template is text given to an agent that runs commands: it needs trust.
    let (r, prompt) = told(&repo, &[]);
    let r = r.code(1);
    assert!(r.stderr.contains("settings.prompt_template"), "{}", r.stderr);
    assert_eq!(prompt, None, "the agent did not run");
    let show = repo.boulder(&["trust", "--show"]).ok();
    assert!(format!("{}{}", show.stdout, show.stderr).contains("settings.prompt_template"), "{}", show.stdout);
    let (r, prompt) = told(&repo, &["--trust"]);
    r.ok();
    assert_eq!(
        prompt.as_deref(),
        Some(
            "Story US-003 (List endpoint) of api, iteration 1; write src/api/**; read src/types/**; PRD \
             .agents/tasks/prd.md; {literal}"
        )
    );
}

#[test]
fn an_unknown_placeholder_is_a_plan_error() {
    let repo = sample_with("  prompt_template: 'Work on {story} now'\n");
    let r = repo.boulder(&["stream", "validate"]).code(2);
    assert_shown!("an_unknown_placeholder_is_a_plan_error", r);
    let repo = sample_with("  prompt_template: 'a { b'\n");
    let r = repo.boulder(&["stream", "list"]).code(2);
    assert_shown!("an_unknown_placeholder_is_a_plan_error_2", r);
}
