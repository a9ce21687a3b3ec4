//! The stream plan `.boulder/streams.yaml` (DESIGN §5): types, parsing with line-numbered errors,
//! and validation. Pure: text in, plan or findings out.
//!
//! * [`parse`] (in `parse.rs`) turns the YAML text into a [`Plan`], filling in the defaults of
//!   DESIGN §5. Unknown keys, wrong types and bad values are a [`PlanError`] naming the line.
//! * [`validate`] (in `validate.rs`) checks a parsed plan against the PRD's story ids and HEAD's
//!   files: names, branches, stories, globs, dependencies, agents and path overlap.
//! * [`ownership`]: which paths a stream may change — the rules the git hooks, `agent hook` and
//!   `stream merge` apply.
//!
//! ## Globs
//!
//! Paths in `paths`, `shared_read` and `copy_into_worktree` are globs relative to the repository
//! root, matched with `/` as separator: `*`, `?` and `[…]` stay within one path component, `**`
//! crosses directories (`src/**` is everything below `src/`), `{a,b}` is an alternation. A glob
//! ending in `/` means the whole directory (`src/auth/` is `src/auth/**`). A glob without
//! wildcards names exactly one path. Absolute globs and `..` components are rejected.
//! [`compile_globs`] is the one place those rules live; ownership checks use it too.

use std::collections::BTreeMap;
use std::time::Duration;

mod branches;
pub mod edit;
mod globs;
pub mod ownership;
mod parse;
pub mod prompt;
pub mod suggest;
mod validate;

pub use branches::Branches;
pub use parse::parse;
pub use validate::{
    compile_globs, literal_prefix, prd_problem, topo_order, validate, GlobError, GlobProblem, OrderError, PRD_HINT,
};

/// Where the plan lives inside a work tree.
pub const PLAN_PATH: &str = ".boulder/streams.yaml";
/// The default PRD path when the plan names none.
pub const DEFAULT_PRD: &str = ".agents/tasks/prd.md";

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergeStrategy {
    Rebase,
    Merge,
    Squash,
}

/// `settings.on_conflict`: what a worker does when a landing meets a conflict with what landed
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnConflict {
    /// Refuse the landing and leave the stream for a person (the default).
    #[default]
    Stop,
    /// Rebase the stream onto the remote's base and hand the conflicts to the stream's agent.
    Agent,
}

/// `settings.adhoc_streams`: `allow` (the default) makes a worktree an agent harness asks for
/// under a name the plan does not have an ad-hoc stream; `refuse` refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AdhocStreams {
    #[default]
    Allow,
    Refuse,
}

/// `error | warn | ignore` (path_overlap), `error | warn | off` (ownership),
/// `error | warn | allow` (undeclared_paths): all map onto this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Error,
    Warn,
    /// `ignore`, `off` or `allow`.
    Off,
}

/// `settings.boulder`.
#[derive(Debug, Clone, PartialEq)]
pub struct BoulderSettings {
    pub idle_threshold: Duration,
    pub cooldown: Duration,
    pub backoff_multiplier: f64,
    pub max_failures: u32,
    pub recovery_window: Duration,
    pub max_depth: u32,
    pub parallel_limit: u32,
    pub inherit_cooldowns: bool,
}

impl Default for BoulderSettings {
    fn default() -> Self {
        BoulderSettings {
            idle_threshold: Duration::from_secs(30),
            cooldown: Duration::from_secs(30),
            backoff_multiplier: 2.0,
            max_failures: 5,
            recovery_window: Duration::from_secs(300),
            max_depth: 3,
            parallel_limit: 5,
            inherit_cooldowns: false,
        }
    }
}

/// `settings.review`: how many approvals a stream needs before it lands (docs/review.md).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReviewSettings {
    /// Approvals every stream needs (0: no review), unless its own `review:` says otherwise.
    pub required: u32,
    /// The machine that ran a stream's agent may approve it too (a person working alone).
    pub allow_self: bool,
}

/// The most approvals a plan may ask for.
pub const MAX_REVIEW: u32 = 100;

/// `settings`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub base_branch: String,
    pub worktree_dir: String,
    pub merge_strategy: MergeStrategy,
    pub auto_merge: bool,
    pub path_overlap: Level,
    pub ownership: Level,
    pub undeclared_paths: Level,
    pub shared_read: Vec<String>,
    pub copy_into_worktree: Vec<String>,
    pub setup: String,
    pub verify: String,
    /// The text `stream run` gives the agent as `BOULDER_PROMPT` ([`prompt`]); empty: the default.
    pub prompt_template: String,
    /// `BOULDER_PORT` of the stream with index `i` is `port_base + i × port_stride` (index 0, the
    /// main checkout, keeps `port_base`).
    pub port_base: u32,
    pub port_stride: u32,
    /// Agent name → command line (run by `sh -c`).
    pub agents: BTreeMap<String, String>,
    pub boulder: BoulderSettings,
    /// Remote on which `stream run` takes a claim first, if any.
    pub claim_remote: Option<String>,
    /// Remote whose base branch `stream merge` lands on (the merge queue), if any.
    pub merge_remote: Option<String>,
    /// What `work` does when a landing meets a conflict.
    pub on_conflict: OnConflict,
    /// Seed keys accepted for compatibility.
    pub inherit_guardrails: bool,
    pub inherit_progress: bool,
    /// What a worktree an agent harness asks for under a name the plan does not have becomes
    /// (Claude Code's `WorktreeCreate`): an ad-hoc stream, or a refusal.
    pub adhoc_streams: AdhocStreams,
    /// `settings.budget`: what the whole plan may spend (docs/spend.md).
    pub budget: Budget,
    /// `settings.prices`: model → US dollars per million tokens.
    pub prices: BTreeMap<String, Price>,
    /// `settings.review`.
    pub review: ReviewSettings,
}

/// A budget (`budget:` of a stream, `settings.budget`): any of a cost, a count of tokens, an
/// agent time; what is not given is not limited.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Budget {
    /// US dollars.
    pub usd: Option<f64>,
    /// Input plus output tokens.
    pub tokens: Option<u64>,
    /// Agent wall time.
    pub time: Option<Duration>,
}

impl Budget {
    /// Whether it limits anything.
    pub fn is_set(&self) -> bool {
        self.usd.is_some() || self.tokens.is_some() || self.time.is_some()
    }
}

/// The price of a model (`settings.prices.<model>`, `boulder.price.<model>.*`): US dollars per
/// million tokens of each kind; a kind without a price makes a cost that needs it unknown.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Price {
    pub input: Option<f64>,
    pub output: Option<f64>,
    pub cache_write: Option<f64>,
    pub cache_read: Option<f64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            base_branch: "main".into(),
            worktree_dir: ".boulder/worktrees".into(),
            merge_strategy: MergeStrategy::Rebase,
            auto_merge: false,
            path_overlap: Level::Warn,
            ownership: Level::Error,
            undeclared_paths: Level::Warn,
            shared_read: Vec::new(),
            copy_into_worktree: Vec::new(),
            setup: String::new(),
            verify: String::new(),
            prompt_template: String::new(),
            port_base: 3000,
            port_stride: 10,
            agents: BTreeMap::new(),
            boulder: BoulderSettings::default(),
            claim_remote: None,
            merge_remote: None,
            on_conflict: OnConflict::Stop,
            inherit_guardrails: true,
            inherit_progress: false,
            adhoc_streams: AdhocStreams::Allow,
            budget: Budget::default(),
            prices: BTreeMap::new(),
            review: ReviewSettings::default(),
        }
    }
}

/// One stream of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamDef {
    pub name: String,
    /// Defaults to `boulder/<name>`.
    pub branch: String,
    pub stories: Vec<String>,
    /// Every glob the stream owns: those of `paths:`, then those of `creates:` that `paths:`
    /// does not list.
    pub paths: Vec<String>,
    /// The globs of `creates:`: files the stream will add, which need not exist in the base tree
    /// yet (`validate` does not report them as matching nothing).
    pub creates: Vec<String>,
    pub depends_on: Vec<String>,
    pub agent: Option<String>,
    pub max_iterations: Option<u32>,
    pub merge_strategy: Option<MergeStrategy>,
    /// `budget:`: what the stream may spend (since its last `spend reset`).
    pub budget: Budget,
    /// `review:` approvals this stream needs (0: none), in place of `settings.review.required`.
    pub review: Option<u32>,
    /// 1-based line of the stream's key in the file (0 when unknown).
    pub line: usize,
    /// Not in the plan file: an ad-hoc stream recorded in state ([`crate::workspace::Workspace::plan`]),
    /// made for a worktree an agent harness asked for. It owns no paths and has no stories.
    pub adhoc: bool,
}

impl StreamDef {
    /// The stream `name` with its default branch `boulder/<name>` and nothing else.
    pub(crate) fn empty(name: &str) -> StreamDef {
        StreamDef {
            name: name.to_string(),
            branch: format!("boulder/{name}"),
            stories: Vec::new(),
            paths: Vec::new(),
            creates: Vec::new(),
            depends_on: Vec::new(),
            agent: None,
            max_iterations: None,
            merge_strategy: None,
            budget: Budget::default(),
            review: None,
            line: 0,
            adhoc: false,
        }
    }

    /// The ad-hoc stream `name` (a valid name): branch `boulder/<name>`, no stories, no paths.
    pub fn adhoc(name: &str) -> StreamDef {
        StreamDef { adhoc: true, ..StreamDef::empty(name) }
    }
}

/// The whole plan, streams in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub version: u32,
    /// The PRD path relative to the work tree root (default [`DEFAULT_PRD`]).
    pub prd: String,
    pub streams: Vec<StreamDef>,
    pub settings: Settings,
}

impl Plan {
    pub fn stream(&self, name: &str) -> Option<&StreamDef> {
        self.streams.iter().find(|s| s.name == name)
    }
    /// The stream whose branch is `branch`, if any.
    pub fn stream_for_branch(&self, branch: &str) -> Option<&StreamDef> {
        self.streams.iter().find(|s| s.branch == branch)
    }
    /// The stream a story is assigned to, if any.
    pub fn stream_for_story(&self, story: &str) -> Option<&StreamDef> {
        self.streams.iter().find(|s| s.stories.iter().any(|id| id == story))
    }

    /// The folders `stream`'s worktree must hold when it is a sparse checkout: the ones its
    /// `paths` and the `shared_read` paths lie in, and the plan's and the PRD's. A glob's folder is
    /// its part before the first wildcard, up to the last `/` (`src/auth/**` → `src/auth`,
    /// `src/mw/auth*` → `src/mw`), which holds every path it matches. `None`: the whole tree, for
    /// a glob with a wildcard before any folder that reaches below the top (`**/*.rs`).
    pub fn sparse_dirs(&self, stream: &StreamDef) -> Option<Vec<String>> {
        let parent = |p: &str| p.rfind('/').map(|i| p[..i].trim_matches('/').to_string()).unwrap_or_default();
        let mut dirs = std::collections::BTreeSet::new();
        for g in stream.paths.iter().chain(&self.settings.shared_read) {
            let g = g.trim_start_matches("./");
            let dir = parent(literal_prefix(g));
            // A wildcard before any folder that reaches below the top (`**/*.rs`, `{a,b}/x`): no
            // folder holds what it matches. (Files at the top are in every sparse checkout.)
            if dir.is_empty() && literal_prefix(g) != g && (g.contains('/') || g.contains("**")) {
                return None;
            }
            dirs.insert(dir);
        }
        dirs.insert(parent(PLAN_PATH));
        dirs.insert(parent(&self.prd));
        dirs.remove("");
        Some(dirs.into_iter().collect())
    }
}

/// A problem in the plan file itself (syntax, unknown key, wrong type), with its location.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    /// The whole message, naming line/column and (for unknown keys) the closest valid key.
    pub message: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

/// How bad a validation finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One validation result.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// A short stable code: `name`, `unknown_story`, `duplicate_story`, `glob`, `bare_directory`,
    /// `no_match`, `depends_on`, `cycle`, `overlap`, `potential_overlap`, `shared_read`, `agent`,
    /// `branch`, `no_streams`, `no_stories`, `prd`, `worktree_dir` (added by `stream validate`,
    /// which knows the repository).
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
}

#[cfg(test)]
mod tests;
