//! A plan file that is there but cannot be read or parsed is an error wherever it is read, never
//! "no plan" with the default gates: `check` says so (exit 2) instead of deciding. Without a plan
//! file at all, the default gates apply as before. (The git hooks say it and let the commit
//! through: `hooks::the_hook_parses_the_plan_once_per_text_and_follows_every_change`.)

use crate::common::*;

#[test]
fn check_says_the_plan_is_broken_instead_of_using_the_default_gates() {
    let repo = sample();
    repo.git(&["config", "boulder.actor", "alice"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let plan = repo.dir.join(".boulder/streams.yaml");
    let text = repo.read(".boulder/streams.yaml");
    repo.write(".boulder/streams.yaml", &text.replacen("paths:", "pahts:", 1));
    assert_shown!("check_with_a_plan_that_does_not_parse", repo.boulder(&["check", "--boulder", "auth"]));
    std::fs::remove_file(&plan).unwrap();
    std::fs::create_dir(&plan).unwrap();
    assert_shown!("check_with_a_plan_that_is_a_folder", repo.boulder(&["check", "--boulder", "auth"]));
    std::fs::remove_dir(&plan).unwrap();
    let json = repo.boulder(&["check", "--boulder", "auth", "--json"]).ok().json();
    assert_eq!(json["boulder"], "auth", "{json}");
}
