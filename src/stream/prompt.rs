//! What the agent of `stream run` is told (`BOULDER_PROMPT`): the plan's
//! `settings.prompt_template`, else [`DEFAULT_TEMPLATE`], with its placeholders filled in
//! ([`crate::plan::prompt`] parses them). The paths lists are the same ones the harness
//! hooks give an agent at session start ([`owned_paths`], [`read_only_paths`]).

use crate::plan::prompt::{parse, Piece};
use crate::plan::Plan;

/// The prompt when the plan sets no `settings.prompt_template`.
pub const DEFAULT_TEMPLATE: &str = "You are working on stream {stream} of this repository. Work on story \
{story_id}: {story_title}.\nThe story's text is in {story_file}. Commit your progress with git; mark the story \
done in {prd} when its acceptance criteria are met.\n\nYou may change only these paths (stream {stream} owns \
them): {owned_paths}.\nRead-only paths (read them, never change them): {read_only_paths}.\n\nThe boulder never \
stops: keep going until the story is done.";

/// The values of the placeholders for one iteration.
#[derive(Debug, Clone)]
pub struct Vars<'a> {
    pub stream: &'a str,
    pub story_id: &'a str,
    pub story_title: &'a str,
    pub story_file: &'a str,
    pub prd: &'a str,
    pub iteration: u32,
    pub owned_paths: String,
    pub read_only_paths: String,
}

/// The globs stream `name` owns, as one line: `src/auth/**, docs/auth.md`; `none declared` when
/// it has none.
pub fn owned_paths(plan: &Plan, name: &str) -> String {
    list(plan.stream(name).map(|s| s.paths.as_slice()).unwrap_or_default())
}

/// The `shared_read` globs as one line; `none` when there are none.
pub fn read_only_paths(plan: &Plan) -> String {
    let s = list(&plan.settings.shared_read);
    if plan.settings.shared_read.is_empty() {
        "none".into()
    } else {
        s
    }
}

fn list(globs: &[String]) -> String {
    if globs.is_empty() {
        return "none declared".into();
    }
    globs.join(", ")
}

/// The prompt for `vars`: the plan's template (validated when the plan was parsed), else the default.
pub fn render(plan: &Plan, vars: &Vars) -> String {
    let template =
        if plan.settings.prompt_template.is_empty() { DEFAULT_TEMPLATE } else { &plan.settings.prompt_template };
    // A template that fails to parse here cannot come from a parsed plan; the default stands in.
    let pieces = parse(template).or_else(|_| parse(DEFAULT_TEMPLATE)).unwrap_or_default();
    let mut out = String::with_capacity(template.len() + 256);
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Placeholder(name) => out.push_str(&match name {
                "stream" => vars.stream.to_string(),
                "story_id" => vars.story_id.to_string(),
                "story_title" => vars.story_title.to_string(),
                "story_file" => vars.story_file.to_string(),
                "prd" => vars.prd.to_string(),
                "iteration" => vars.iteration.to_string(),
                "owned_paths" => vars.owned_paths.clone(),
                "read_only_paths" => vars.read_only_paths.clone(),
                _ => String::new(),
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_names_owned_and_read_only_paths_and_every_placeholder_is_known() {
        let plan = crate::plan::parse(
            "version: 1\nstreams:\n  auth:\n    paths: [src/auth/**]\nsettings:\n  shared_read: [src/types/**]\n",
        )
        .unwrap();
        let vars = Vars {
            stream: "auth",
            story_id: "US-001",
            story_title: "Login",
            story_file: "/tmp/s",
            prd: "prd.md",
            iteration: 2,
            owned_paths: owned_paths(&plan, "auth"),
            read_only_paths: read_only_paths(&plan),
        };
        let p = render(&plan, &vars);
        assert!(p.contains("src/auth/**") && p.contains("src/types/**") && p.contains("US-001: Login"), "{p}");
        assert!(!p.contains('{'), "{p}");
        for (name, _) in crate::plan::prompt::PLACEHOLDERS {
            assert!(parse(&format!("{{{name}}}")).is_ok());
        }
    }
}
