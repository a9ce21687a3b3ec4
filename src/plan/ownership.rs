//! Path ownership (DESIGN §7): which paths a stream may change. Pure: a plan and paths in,
//! verdicts out. One compiled glob set serves every stream. Reported paths are shown as git shows
//! them ([`RepoPath`]), so a file's name can neither reach the terminal as control codes nor pass
//! for another name or an extra report line.

use std::fmt;

use globset::GlobSet;
use serde::{Serialize, Serializer};

use super::{Level, Plan};

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

/// A path in the repository as git stores it: bytes, not always UTF-8. Shown (`Display`) quoted
/// as git quotes it by default ([`crate::text::quote_path`]); in JSON, a string (UTF-8-lossy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoPath(pub Vec<u8>);

impl fmt::Display for RepoPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::text::quote_path(&self.0))
    }
}

impl Serialize for RepoPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&String::from_utf8_lossy(&self.0))
    }
}

/// One reported path.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub commit: String,
    pub path: RepoPath,
    pub rule: Rule,
    /// The owning stream, for [`Rule::OtherStream`].
    pub owner: Option<String>,
    /// False for warnings.
    pub refused: bool,
    /// The commit deletes the path (a deletion of a file the stream does not own is always
    /// refused, whatever `undeclared_paths` says).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
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
    /// (`stream validate` reports them); they are looked for only when the whole set fails.
    pub fn new(plan: &'p Plan) -> Checker<'p> {
        let mut globs = Vec::new();
        let mut owners = Vec::new();
        for (i, s) in plan.streams.iter().enumerate() {
            for g in &s.paths {
                globs.push(g.clone());
                owners.push(Some(i));
            }
        }
        for g in &plan.settings.shared_read {
            globs.push(g.clone());
            owners.push(None);
        }
        let set = match super::compile_globs(&globs) {
            Ok(set) => set,
            Err(_) => {
                let valid: Vec<bool> =
                    globs.iter().map(|g| super::compile_globs(std::slice::from_ref(g)).is_ok()).collect();
                let mut keep = valid.iter();
                globs.retain(|_| *keep.next().expect("one flag per glob"));
                let mut keep = valid.iter();
                owners.retain(|_| *keep.next().expect("one flag per glob"));
                super::compile_globs(&globs).unwrap_or_else(|_| GlobSet::empty())
            }
        };
        Checker { plan, set, owners }
    }

    /// Whether `path` is one no stream owns (nor `shared_read`, nor the PRD): what
    /// `undeclared_paths` judges.
    pub fn undeclared(&self, path: &str) -> bool {
        path != self.plan.prd && self.set.matches(path).is_empty()
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

/// Check `(commit, path)` pairs changed by `stream` (paths as git's bytes, or as text); returns
/// what to report. A path that is not UTF-8 is matched against the globs UTF-8-lossy.
pub fn check_paths<P: AsRef<[u8]>>(plan: &Plan, stream: &str, changes: &[(String, P)]) -> Vec<Violation> {
    let checker = Checker::new(plan);
    changes
        .iter()
        .filter_map(|(commit, path)| {
            let path = path.as_ref();
            let (rule, owner, refused) = match checker.verdict(stream, &String::from_utf8_lossy(path)) {
                Verdict::Allowed => return None,
                Verdict::Violation(rule, owner) => (rule, owner, true),
                Verdict::Warning(rule) => (rule, None, false),
            };
            Some(Violation {
                commit: commit.clone(),
                path: RepoPath(path.to_vec()),
                rule,
                owner,
                refused,
                deleted: false,
            })
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
        let rule = match (v.rule, v.owner.as_deref()) {
            (Rule::OtherStream, Some(o)) => format!("owned by {o}"),
            (rule, _) => rule.as_str().to_string(),
        };
        let level = if v.refused { "" } else { " [warning]" };
        s.push_str(&format!("  {}  {}  {rule}{level}\n", short(&v.commit), v.path));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &str) -> Plan {
        let text = format!(
            "version: 1\nprd: docs/prd.md\nstreams:\n  auth:\n    paths: [src/auth/**, 'src/[']\n  api:\n    \
             paths: [src/api/**]\nsettings:\n  shared_read: [src/types/**]\n{extra}"
        );
        crate::plan::parse(&text).expect("plan parses")
    }

    #[test]
    fn verdicts_per_rule() {
        let p = plan("");
        let c = Checker::new(&p);
        assert_eq!(c.verdict("auth", "src/auth/a.rs"), Verdict::Allowed);
        assert_eq!(c.verdict("auth", "docs/prd.md"), Verdict::Allowed);
        assert_eq!(c.verdict("auth", "src/api/a.rs"), Verdict::Violation(Rule::OtherStream, Some("api".into())));
        assert_eq!(c.verdict("auth", "src/types/u.rs"), Verdict::Violation(Rule::SharedRead, None));
        assert_eq!(c.verdict("auth", "tools/x.sh"), Verdict::Warning(Rule::Undeclared));
        let p = plan("  undeclared_paths: error\n");
        assert_eq!(Checker::new(&p).verdict("api", "x"), Verdict::Violation(Rule::Undeclared, None));
        let p = plan("  undeclared_paths: allow\n");
        assert_eq!(Checker::new(&p).verdict("api", "x"), Verdict::Allowed);
    }

    #[test]
    fn report_names_commit_path_rule_owner_and_bypass() {
        let p = plan("");
        let found = check_paths(&p, "auth", &[("0123456789abcdef".into(), "src/api/a.rs")]);
        let text = report("auth", &found, true);
        assert!(text.contains("0123456789  src/api/a.rs  owned by api"), "{text}");
        assert!(text.contains("git push --no-verify"), "{text}");
    }

    #[test]
    fn reported_paths_are_quoted_as_git_shows_them_and_json_keeps_a_string() {
        let p = plan("");
        let name = b"src/api/\x1b[2J\xffbad\n  0000000000  src/x  owned by nobody".to_vec();
        let found = check_paths(&p, "auth", &[("0123456789abcdef".into(), name)]);
        assert_eq!(found.len(), 1, "a name that is not UTF-8 is still judged by its folder");
        let text = report("auth", &found, true);
        let line = "  0123456789  \"src/api/\\033[2J\\377bad\\n  0000000000  src/x  owned by nobody\"  owned by api\n";
        assert!(text.contains(line), "{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("  ")).count(), 1, "{text}");
        let json = serde_json::to_value(&found[0]).expect("serializes");
        assert_eq!(json["path"], "src/api/\u{1b}[2J\u{fffd}bad\n  0000000000  src/x  owned by nobody");
    }
}
