//! Git hooks (DESIGN §7): installing shims beside the user's own hooks, and what each hook does.
//!
//! * [`install`], [`uninstall`], [`status`]: shims (template `hooks/shim.sh`) in the directory git
//!   really uses — `core.hooksPath` when set, else `$GIT_COMMON_DIR/hooks`. A hook that was there
//!   is moved aside to `<name>.boulder-orig` and still runs first, with the same arguments and
//!   stdin; uninstall moves it back byte for byte.
//! * [`run`]: the hook bodies, called by the shims as `git-boulder hook NAME ARGS…`.

mod changes;
mod open;
mod ownership;
mod run;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::git::Repo;

pub use changes::changed_paths;
pub use ownership::{check_paths, Rule, Verdict, Violation};
pub use run::{current_boulder, run};

/// The shim template.
const SHIM: &str = include_str!("../../hooks/shim.sh");
/// The line that marks a shim as ours.
const MARKER: &str = "git-boulder";
/// Hooks installed by default, and whether git feeds them stdin.
const HOOKS: &[(&str, bool)] = &[("post-commit", false), ("post-rewrite", true), ("pre-push", true)];
/// Installed with `--pre-commit`.
const PRE_COMMIT: (&str, bool) = ("pre-commit", false);
/// Suffix of a previous hook moved aside.
const ORIG: &str = ".boulder-orig";

fn shim(name: &str, stdin: bool) -> String {
    SHIM.replace("@HOOK@", name).replace("@STDIN@", if stdin { "1" } else { "0" })
}

fn is_ours(text: &str) -> bool {
    text.lines().nth(1).is_some_and(|l| l.contains(MARKER) && l.contains("hook shim"))
}

/// The hooks directory git uses for this repository.
pub fn hooks_dir(repo: &Repo) -> PathBuf {
    match repo.config_string("core.hooksPath").filter(|p| !p.is_empty()) {
        Some(p) => {
            let p = if let Some(rest) = p.strip_prefix("~/") {
                std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(rest)
            } else {
                PathBuf::from(p)
            };
            if p.is_absolute() {
                p
            } else {
                // Relative to where hooks run: the work tree root (the git dir when bare).
                repo.work_dir.clone().unwrap_or_else(|| repo.git_dir.clone()).join(p)
            }
        }
        None => repo.common_dir.join("hooks"),
    }
}

/// One hook's state, for `hooks status`.
#[derive(Debug, Clone, Serialize)]
pub struct HookStatus {
    pub name: String,
    pub path: String,
    /// `installed`, `outdated` (an older shim), `missing`, or `foreign` (someone else's hook, ours absent).
    pub state: String,
    /// A previous hook that the shim runs first.
    pub chained: Option<String>,
    /// Whether git-boulder installs this hook by default.
    pub default: bool,
}

impl HookStatus {
    /// What is wrong and how to fix it, for `doctor` (only for default hooks).
    pub fn problem(&self) -> Option<(String, String)> {
        if !self.default || self.state == "installed" {
            return None;
        }
        let what = match self.state.as_str() {
            "missing" => format!("the {} hook is not installed ({})", self.name, self.path),
            "foreign" => format!("{} is another tool's hook; git-boulder's is not installed beside it", self.path),
            _ => format!("the {} hook at {} is an older git-boulder shim", self.name, self.path),
        };
        Some((what, "git boulder hooks install".into()))
    }
}

/// What install or uninstall did, a line per hook.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub dir: String,
    pub lines: Vec<String>,
}

fn set_executable(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| Error::internal(format!("cannot make {} executable: {e}", path.display())))?;
    }
    Ok(())
}

/// Install the shims (and `pre-commit` with `pre_commit`). Idempotent.
pub fn install(repo: &Repo, pre_commit: bool) -> Result<Report> {
    let dir = hooks_dir(repo);
    std::fs::create_dir_all(&dir).map_err(|e| Error::internal(format!("cannot create {}: {e}", dir.display())))?;
    let mut lines = Vec::new();
    let wanted: Vec<(&str, bool)> = HOOKS.iter().copied().chain(pre_commit.then_some(PRE_COMMIT)).collect();
    for (name, stdin) in wanted {
        let path = dir.join(name);
        let orig = dir.join(format!("{name}{ORIG}"));
        let text = shim(name, stdin);
        match std::fs::read(&path) {
            Ok(current) if current == text.as_bytes() => {
                lines.push(format!("{name}: already installed"));
                continue;
            }
            Ok(current) if is_ours(&String::from_utf8_lossy(&current)) => {
                lines.push(format!("{name}: updated the shim"));
            }
            Ok(_) => {
                if orig.exists() {
                    return Err(Error::usage(format!(
                        "{} is another tool's hook, and {} already holds an earlier one",
                        path.display(),
                        orig.display()
                    ))
                    .hint(format!(
                        "merge the two by hand, remove {}, then run `git boulder hooks install` again",
                        orig.display()
                    )));
                }
                std::fs::rename(&path, &orig)
                    .map_err(|e| Error::internal(format!("cannot move {} aside: {e}", path.display())))?;
                lines.push(format!("{name}: installed; your previous hook runs first (kept as {name}{ORIG})"));
            }
            Err(_) => lines.push(format!("{name}: installed")),
        }
        crate::fsutil::write_atomic(&path, text.as_bytes())?;
        set_executable(&path)?;
    }
    Ok(Report { dir: dir.display().to_string(), lines })
}

/// Remove the shims and put back what was there before, byte for byte.
pub fn uninstall(repo: &Repo) -> Result<Report> {
    let dir = hooks_dir(repo);
    let mut lines = Vec::new();
    for (name, _) in HOOKS.iter().copied().chain([PRE_COMMIT]) {
        let path = dir.join(name);
        let orig = dir.join(format!("{name}{ORIG}"));
        let ours = std::fs::read(&path).ok().is_some_and(|t| is_ours(&String::from_utf8_lossy(&t)));
        if !ours {
            if path.exists() {
                lines.push(format!("{name}: not git-boulder's; left as it is"));
            }
            continue;
        }
        if orig.exists() {
            std::fs::rename(&orig, &path)
                .map_err(|e| Error::internal(format!("cannot restore {}: {e}", orig.display())))?;
            lines.push(format!("{name}: removed; your previous hook is back"));
        } else {
            std::fs::remove_file(&path)
                .map_err(|e| Error::internal(format!("cannot remove {}: {e}", path.display())))?;
            lines.push(format!("{name}: removed"));
        }
    }
    Ok(Report { dir: dir.display().to_string(), lines })
}

/// The state of every hook git-boulder knows.
pub fn status(repo: &Repo) -> Result<Vec<HookStatus>> {
    let dir = hooks_dir(repo);
    let mut out = Vec::new();
    for (name, stdin) in HOOKS.iter().copied().chain([PRE_COMMIT]) {
        let path = dir.join(name);
        let orig = dir.join(format!("{name}{ORIG}"));
        let state = match std::fs::read(&path) {
            Err(_) => "missing",
            Ok(t) if t == shim(name, stdin).as_bytes() => "installed",
            Ok(t) if is_ours(&String::from_utf8_lossy(&t)) => "outdated",
            Ok(_) => "foreign",
        };
        out.push(HookStatus {
            name: name.to_string(),
            path: path.display().to_string(),
            state: state.to_string(),
            chained: orig.exists().then(|| orig.display().to_string()),
            default: name != PRE_COMMIT.0,
        });
    }
    Ok(out)
}
