//! `streams.yaml` text → [`Plan`], with errors that name the line.
//!
//! serde_yaml 0.9 keeps no positions in its values, so the plan is read with hand-written
//! visitors straight from the YAML events. Errors raised while a value is read carry that value's
//! position. Keys need their position too (for unknown and duplicate keys, and for
//! [`StreamDef::line`]): a key is read with a seed that stashes its text and then fails on
//! purpose, so serde_yaml stamps the key's mark on the error; the mapping goes on with the value
//! (serde_yaml's `MapAccess` has already consumed the key event). serde_yaml 0.9 is frozen
//! (deprecated), and the tests pin this behaviour.
//!
//! Choices:
//! * An empty file (or only comments, or `null`) is an error: "the plan is empty". A plan with
//!   `streams: {}` (or no `streams` key) is a valid plan without streams.
//! * `version` may be left out (it means 1); any other value than 1 is an error.
//! * A missing or `null` value means "the default"; so does an empty string for `branch`, `prd`,
//!   `agent` and the settings strings.
//! * `paths`, `creates`, `depends_on`, `shared_read` and `copy_into_worktree` take a list or a
//!   single string; a stream's `creates` globs are added to its `paths` (those it does not list
//!   already), and kept apart so that `validate` does not expect them in the tree;
//!   `stories` must be a list (entries may be numbers: their text is kept, `1.10` stays `1.10`).
//! * Durations are `30s`, `5m`, `1h30m`, … or a number of seconds.
//! * Booleans also accept `yes/no/on/off`; `backoff_multiplier` is 1 to 1000; `max_failures`,
//!   `max_depth`, `parallel_limit` and `max_iterations` are whole numbers ≥ 1.
//! * YAML anchors and aliases work; merge keys (`<<`) do not (they are an unknown key).
//! * Hostile input is bounded: at most 8 MiB of text, flow collections nested at most 200 deep,
//!   1000 streams and 1 000 000 list entries and keys all told (aliases count every time they are
//!   expanded). Nothing panics.

mod budget;
mod document;
mod errors;
mod reader;
mod settings;
mod values;

use serde::de::{Deserialize, DeserializeSeed, IgnoredAny};

use super::{Plan, PlanError};
use document::PlanSeed;
#[cfg(test)]
pub(crate) use errors::edit_distance;
pub(crate) use errors::{closest, quote};
use errors::{too_deep, yaml_error};
use reader::Ctx;

/// Keys of `settings`, and of `settings.boulder` (read in `settings.rs`, named in the errors of `errors.rs`).
pub(crate) const SETTINGS_KEYS: &[&str] = &[
    "base_branch",
    "worktree_dir",
    "merge_strategy",
    "auto_merge",
    "path_overlap",
    "ownership",
    "undeclared_paths",
    "shared_read",
    "copy_into_worktree",
    "setup",
    "verify",
    "prompt_template",
    "port_base",
    "port_stride",
    "agents",
    "boulder",
    "claim_remote",
    "merge_remote",
    "on_conflict",
    "inherit_guardrails",
    "inherit_progress",
    "adhoc_streams",
    "budget",
    "prices",
];
pub(crate) const BOULDER_KEYS: &[&str] = &[
    "idle_threshold",
    "cooldown",
    "backoff_multiplier",
    "max_failures",
    "recovery_window",
    "max_depth",
    "parallel_limit",
    "inherit_cooldowns",
];

/// The message for an empty plan file.
pub const EMPTY_PLAN: &str = "the plan is empty; see `git boulder stream suggest` to propose one from the PRD";

const MAX_BYTES: usize = 8 << 20;
/// libyaml takes time quadratic in the nesting of flow mappings; no valid plan nests past a
/// handful of levels.
const MAX_FLOW_DEPTH: usize = 200;

/// Parse the plan text. Errors read like `line 9: unknown key "pahts" in stream "auth"; did you
/// mean "paths"?` (the caller prefixes the file name); YAML syntax errors also name the column.
pub fn parse(text: &str) -> Result<Plan, PlanError> {
    // A byte order mark (editors on Windows write one) is not part of the YAML.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.len() > MAX_BYTES {
        return Err(PlanError {
            message: format!("the plan is {} bytes long; at most {MAX_BYTES} are read", text.len()),
            line: None,
            column: None,
        });
    }
    if let Some(line) = too_deep(text) {
        return Err(PlanError {
            message: format!("line {line}: the plan nests lists and mappings more than {MAX_FLOW_DEPTH} deep"),
            line: Some(line),
            column: None,
        });
    }
    let ctx = Ctx::default();
    let result = PlanSeed { ctx: &ctx }.deserialize(serde_yaml::Deserializer::from_str(text));
    let err = match result {
        Ok(plan) => return Ok(plan),
        Err(err) => err,
    };
    // Syntax first: a syntax error further down is reported before any problem with the content
    // above it. A plan that parsed has none (serde_yaml reads the whole document's events before
    // the visitors run, and refuses a syntax error after them), so this cheap pass that follows
    // no aliases runs only when the parse failed.
    if let Err(err) = serde_yaml::from_str::<IgnoredAny>(text) {
        if err.location().is_none() {
            // "More than one document" is also what serde_yaml says when junk follows a complete
            // document (`{a: 1}` then `}`): the second "document" then has the syntax error.
            let second = serde_yaml::Deserializer::from_str(text).nth(1);
            if let Some(Err(err2)) = second.map(IgnoredAny::deserialize) {
                if err2.location().is_some() {
                    return Err(yaml_error(&err2, None, text));
                }
            }
        }
        return Err(yaml_error(&err, None, text));
    }
    let failure = ctx.failure.borrow_mut().take();
    Err(yaml_error(&err, failure, text))
}
