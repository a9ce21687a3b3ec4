//! Path ownership (DESIGN §7): which paths a stream may change. Pure: a plan and paths in,
//! verdicts out. One compiled glob set serves every stream.

use globset::GlobSet;
use serde::Serialize;

use crate::plan::{Level, Plan};

/// Why a path is not the stream's to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Another stream owns it.
    OtherStream,
    /// It is `shared_read`: every stream may read it, none may change it.
    SharedRead,
    /// No stream owns it (`undeclared_paths`).
    Undeclared,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::OtherStream => "owned by another stream",
            Rule::SharedRead => "shared_read",
            Rule::Undeclared => "undeclared",
        }
    }
}

/// What the check says of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// A violation (refuses the push under `ownership: error`).
    Violation(Rule, Option<String>),
    /// Reported but never refused (`undeclared_paths: warn`).
    Warning(Rule),
}

/// One reported path.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub commit: String,
    pub path: String,
    pub rule: Rule,
    /// The owning stream, for [`Rule::OtherStream`].
    pub owner: Option<String>,
    /// False for warnings.
    pub refused: bool,
}

/// The compiled ownership rules of a plan.
pub struct Checker<'p> {
    plan: &'p Plan,
    set: GlobSet,
    /// For each glob of `set`: the stream index, or `None` for `shared_read`.
    owners: Vec<Option<usize>>,
}

impl<'p> Checker<'p> {
    /// Compile every stream's globs and `shared_read` into one set. Invalid globs are skipped
    /// (`stream validate` reports them).
    pub fn new(plan: &'p Plan) -> Checker<'p> {
        let mut globs = Vec::new();
        let mut owners = Vec::new();
        for (i, s) in plan.streams.iter().enumerate() {
            for g in &s.paths {
                if crate::plan::compile_globs(std::slice::from_ref(g)).is_ok() {
                    globs.push(g.clone());
                    owners.push(Some(i));
                }
            }
        }
        for g in &plan.settings.shared_read {
            if crate::plan::compile_globs(std::slice::from_ref(g)).is_ok() {
                globs.push(g.clone());
                owners.push(None);
            }
        }
        let set = crate::plan::compile_globs(&globs).unwrap_or_else(|_| GlobSet::empty());
        Checker { plan, set, owners }
    }

    /// The verdict on `path` changed by `stream`.
    pub fn verdict(&self, stream: &str, path: &str) -> Verdict {
        if path == self.plan.prd {
            return Verdict::Allowed;
        }
        let mut own = false;
        let mut shared = false;
        let mut other: Option<&str> = None;
        for i in self.set.matches(path) {
            match self.owners[i] {
                None => shared = true,
                Some(k) if self.plan.streams[k].name == stream => own = true,
                Some(k) => other = other.or(Some(&self.plan.streams[k].name)),
            }
        }
        if shared {
            return Verdict::Violation(Rule::SharedRead, None);
        }
        if own {
            return Verdict::Allowed;
        }
        if let Some(o) = other {
            return Verdict::Violation(Rule::OtherStream, Some(o.to_string()));
        }
        match self.plan.settings.undeclared_paths {
            Level::Error => Verdict::Violation(Rule::Undeclared, None),
            Level::Warn => Verdict::Warning(Rule::Undeclared),
            Level::Off => Verdict::Allowed,
        }
    }
}

/// Check `(commit, path)` pairs changed by `stream`; returns what to report.
pub fn check_paths(plan: &Plan, stream: &str, changes: &[(String, String)]) -> Vec<Violation> {
    let checker = Checker::new(plan);
    changes
        .iter()
        .filter_map(|(commit, path)| match checker.verdict(stream, path) {
            Verdict::Allowed => None,
            Verdict::Violation(rule, owner) => {
                Some(Violation { commit: commit.clone(), path: path.clone(), rule, owner, refused: true })
            }
            Verdict::Warning(rule) => {
                Some(Violation { commit: commit.clone(), path: path.clone(), rule, owner: None, refused: false })
            }
        })
        .collect()
}

/// The report printed by pre-push and pre-commit.
pub fn report(stream: &str, found: &[Violation], refuse: bool) -> String {
    let mut s = String::new();
    let refused = found.iter().filter(|v| v.refused).count();
    if refused > 0 {
        s.push_str(&format!("git-boulder: stream {stream} changes paths it does not own:\n"));
    } else {
        s.push_str(&format!("git-boulder: stream {stream} changes paths no stream owns:\n"));
    }
    for v in found {
        let owner = v.owner.as_deref().map(|o| format!(" ({o})")).unwrap_or_default();
        let level = if v.refused { "" } else { " [warning]" };
        s.push_str(&format!("  {}  {}  {}{owner}{level}\n", short(&v.commit), v.path, v.rule.as_str()));
    }
    if refused > 0 && refuse {
        s.push_str("Push refused (settings.ownership: error). Move these changes to the owning stream, or\n");
        s.push_str("bypass the check once with `git push --no-verify`.\n");
    }
    s
}

fn short(id: &str) -> &str {
    &id[..id.len().min(10)]
}
