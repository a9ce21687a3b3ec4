//! Git hooks (DESIGN §7): installing shims beside the user's own hooks, and what each hook does.
//!
//! * [`install`], [`uninstall`], [`status`]: shims (template `hooks/shim.sh`; post-commit, when
//!   nothing runs before it, a file whose `#!` line starts git-boulder itself) in a folder git uses
//!   in every worktree — `$GIT_COMMON_DIR/hooks`, or an absolute `core.hooksPath`. A hook that was
//!   there is moved aside to `<name>.boulder-orig` and still runs first, with the same arguments
//!   and stdin; uninstall moves it back byte for byte. A relative `core.hooksPath` (husky), which
//!   git resolves in each worktree, is replaced by git-boulder's own folder whose shims (and
//!   pass-throughs, `hooks/pass.sh`) run the user's hooks first ([`Chain`]). [`status`] also
//!   names the worktrees where git would not run git-boulder's hooks.
//! * [`run`]: the hook bodies, called by the shims as `git-boulder hook NAME ARGS…` (by the
//!   kernel, for a direct hook, as `git-boulder hook-file PATH ARGS…`).

pub mod run;
pub mod streams;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::git::config::ConfigFile;
use crate::git::Repo;

pub use run::run;

/// The shim template.
const SHIM: &str = include_str!("../../hooks/shim.sh");
/// The pass-through template (every other hook, when git-boulder's folder replaces a relative
/// `core.hooksPath`).
const PASS: &str = include_str!("../../hooks/pass.sh");
/// The line that marks a shim as ours.
const MARKER: &str = "git-boulder";
/// Hooks installed by default, and whether git feeds them stdin.
const HOOKS: &[(&str, bool)] = &[("post-commit", false), ("post-rewrite", true), ("pre-push", true)];
/// Every hook `git-boulder hook NAME` runs.
pub const NAMES: &[&str] = &["post-commit", "post-rewrite", "pre-push", "pre-commit"];
/// Installed with `--pre-commit`.
const PRE_COMMIT: (&str, bool) = ("pre-commit", false);
/// Suffix of a previous hook moved aside.
const ORIG: &str = ".boulder-orig";
/// Names other hook managers give a hook they move aside to put theirs in its place:
/// pre-commit's `.legacy` (which its hook runs), lefthook's `.old` (which lefthook 2.x does not).
const MOVED_ASIDE: &[&str] = &[".legacy", ".old"];
/// Every hook git runs from the hooks folder (githooks(5)), for the pass-throughs.
const GIT_HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "post-index-change",
    "p4-changelist",
    "p4-prepare-changelist",
    "p4-post-changelist",
    "p4-pre-submit",
];
/// Hooks git runs very often (every ref update, every index write): a pass-through is written only
/// when the folder it chains to has one, so git does not start a shell for nothing.
const ON_DEMAND: &[&str] = &["reference-transaction", "post-index-change"];
/// The git config key that keeps a relative `core.hooksPath` git-boulder's folder replaced.
const CHAINED_KEY: &str = "boulder.hooksPath";

/// A relative `core.hooksPath` (husky's `.husky` or `.husky/_`): git resolves it against the root
/// of each worktree, so it names a different folder in every worktree. git-boulder's folder
/// replaces it and runs its hooks first: from the worktree git runs the hook in, else (an
/// ignored, generated folder a new worktree does not have) from the main worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Chain {
    /// The relative path, as configured.
    rel: String,
    /// The main worktree.
    main: PathBuf,
    /// `rel` comes from the user's global (or the system) config, not the repository's: uninstall
    /// removes the repository's own setting rather than writing `rel` into it.
    inherited: bool,
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Chain {
    /// The shell lines that set `orig` to the chained hook `name`.
    fn lines(&self, name: &str) -> String {
        let rel = format!("{}/{name}", self.rel.trim_end_matches('/'));
        let main = self.main.join(&rel);
        format!(
            "# core.hooksPath was {:?}: the worktree's own folder, else the main worktree's.\norig={}; [ -x \"$orig\" ] || orig={}\n",
            self.rel,
            quote(&rel),
            quote(&main.to_string_lossy())
        )
    }
}

fn shim(name: &str, stdin: bool, chain: Option<&Chain>) -> String {
    SHIM.replace("@CHAIN@", &chain.map(|c| c.lines(name)).unwrap_or_default())
        .replace("@HOOK@", name)
        .replace("@STDIN@", if stdin { "1" } else { "0" })
}

/// The word a direct hook passes after the binary's path on its `#!` line: the kernel then runs
/// `git-boulder hook-file <the hook's path> <git's arguments>…` (see [`direct_hook_name`]).
pub const DIRECT_WORD: &str = "hook-file";

/// A hook git runs without a shell: `#!<git-boulder> hook-file`. The kernel starts git-boulder
/// itself (no `sh`, no `PATH` search: a program whose `PATH` lacks git-boulder — an IDE, a GUI —
/// still records its commits). Written only where there is no previous hook to run first (that
/// takes the shell shim), and only for a binary path a `#!` line can hold.
fn direct(name: &str, binary: &str) -> String {
    format!(
        "#!{binary} {DIRECT_WORD}\n\
         # git-boulder {name} hook shim (direct: git runs git-boulder itself). Written by `git boulder hooks install`;\n\
         # `git boulder hooks uninstall` removes it. If git-boulder moves, run `git boulder hooks install` again.\n\
         # BOULDER_SKIP_HOOKS=1 skips git-boulder's part for one command.\n"
    )
}

/// The path a direct hook names: `PATH`'s `git-boulder`, and only when it is this very binary (a
/// file, or a symlink a package manager keeps in place across upgrades — never a version's own
/// folder behind a wrapper script, which an upgrade removes); absolute, of characters every
/// reader of `#!` lines takes as they are (`[A-Za-z0-9/._+-]`), and short enough for every
/// kernel (a `#!` line of at most 127 bytes). `None`: the shell shim, which finds git-boulder on
/// `PATH` each time.
fn direct_binary() -> Option<String> {
    if !cfg!(unix) {
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    let on_path = crate::fsutil::on_path("git-boulder")?;
    if !crate::fsutil::same_file(&on_path, &exe) {
        return None;
    }
    let path = on_path.to_str()?.to_string();
    let fits = path.starts_with('/')
        && path.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._+-".contains(&b))
        && format!("#!{path} {DIRECT_WORD}").len() <= 127;
    fits.then_some(path)
}

/// Whether `text`, the hook file `name`, is a direct hook that works: the program on its `#!`
/// line is an executable `git-boulder` that exists, and the rest is what git-boulder writes for
/// it. Such a hook is kept as it is, whichever git-boulder looks (one run by another path, from
/// a harness or CI, would otherwise rewrite it to its own).
fn working_direct(name: &str, text: &[u8]) -> bool {
    let Some(program) = direct_program_of(text) else { return false };
    crate::fsutil::is_executable(&program)
        && program.file_name().is_some_and(|f| f == "git-boulder")
        && program.to_str().is_some_and(|p| text == direct(name, p).as_bytes())
}

/// The hooks written direct when they can be: post-commit, the one that runs on every commit. The
/// others keep the shell shim, which also does the right thing when git-boulder is gone: git
/// 2.47's `git push` hangs when its pre-push hook's program is missing (it still writes the
/// refs to a hook that never started), and a pre-commit that cannot start fails every commit.
const DIRECT: &[&str] = &["post-commit"];

/// The git config key that, set to `false`, makes every hook a shell shim: for a repository
/// whose hooks folder serves machines or containers with git-boulder at different paths.
const DIRECT_KEY: &str = "boulder.directHooks";

/// Whether [`DIRECT`] hooks may be written in `repo` ([`DIRECT_KEY`]).
fn directs_allowed(repo: &Repo) -> bool {
    repo.config_bool(DIRECT_KEY) != Some(false)
}

/// Whether `dir/name` may be a direct hook: one of [`DIRECT`], allowed, nothing to run first (no
/// chain, no `<name>.boulder-orig`).
fn may_be_direct(dir: &Path, name: &str, chain: Option<&Chain>, allowed: bool) -> bool {
    allowed && DIRECT.contains(&name) && chain.is_none() && !dir.join(format!("{name}{ORIG}")).exists()
}

/// The hook git-boulder writes as `dir/name`: direct when it [`may_be_direct`] and this binary
/// is `PATH`'s git-boulder ([`direct_binary`]), else the shell shim.
fn wanted_hook(dir: &Path, name: &str, stdin: bool, chain: Option<&Chain>, allowed: bool) -> String {
    if may_be_direct(dir, name, chain, allowed) {
        if let Some(binary) = direct_binary() {
            return direct(name, &binary);
        }
    }
    shim(name, stdin, chain)
}

/// Whether the hook file `dir/name` holding `current` is git-boulder's, as it should be: what
/// [`wanted_hook`] writes, or a direct hook that works where one may be.
fn is_installed(dir: &Path, name: &str, stdin: bool, chain: Option<&Chain>, allowed: bool, current: &[u8]) -> bool {
    current == wanted_hook(dir, name, stdin, chain, allowed).as_bytes()
        || (may_be_direct(dir, name, chain, allowed) && working_direct(name, current))
}

/// The hook a direct hook file stands for, by the name git (or a hook manager that moved it
/// aside as `<name>.old`, `<name>.legacy`) runs it under: the file name up to its first dot.
pub fn direct_hook_name(path: &Path) -> Option<&'static str> {
    let file = path.file_name()?.to_str()?;
    let name = file.split('.').next()?;
    NAMES.iter().copied().find(|n| *n == name)
}

/// The program a direct hook file names on its `#!` line.
fn direct_program(hook: &Path) -> Option<PathBuf> {
    direct_program_of(&std::fs::read(hook).ok()?)
}

fn direct_program_of(text: &[u8]) -> Option<PathBuf> {
    let first = String::from_utf8_lossy(text.split(|b| *b == b'\n').next()?).into_owned();
    let program = first.strip_prefix("#!")?.strip_suffix(&format!(" {DIRECT_WORD}"))?;
    Some(PathBuf::from(program))
}

fn pass(name: &str, chain: &Chain) -> String {
    PASS.replace("@CHAIN@", &chain.lines(name)).replace("@HOOK@", name)
}

fn is_ours(text: &str) -> bool {
    text.lines().nth(1).is_some_and(|l| l.contains(MARKER) && l.contains("hook shim"))
}

fn is_ours_at(path: &Path) -> bool {
    std::fs::read(path).ok().is_some_and(|t| is_ours(&String::from_utf8_lossy(&t)))
}

/// git-boulder's own hooks folder, used in place of a relative `core.hooksPath`.
fn own_dir(repo: &Repo) -> PathBuf {
    repo.boulder_dir().join("hooks")
}

/// `core.hooksPath` as git reads it: `~/` expanded; `None` when unset or empty.
fn configured(value: Option<String>) -> Option<PathBuf> {
    let p = value.filter(|p| !p.is_empty())?;
    Some(if let Some(rest) = p.strip_prefix("~/") {
        std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(rest)
    } else {
        PathBuf::from(p)
    })
}

/// Where the shims go and what they chain to.
enum Layout {
    /// Shims in `dir` (the common dir's `hooks/` or an absolute `core.hooksPath`, which every
    /// worktree shares), a previous hook kept beside each as `<name>.boulder-orig`.
    Shared(PathBuf),
    /// git-boulder's own folder as `core.hooksPath`, chaining to a relative one (`installed`:
    /// already so; else `install` makes it so).
    Chained { dir: PathBuf, chain: Chain, installed: bool },
}

fn layout(repo: &Repo) -> Layout {
    let own = own_dir(repo);
    let recorded = repo.config_string(CHAINED_KEY).filter(|p| !p.is_empty());
    match configured(repo.config_string("core.hooksPath")) {
        None => Layout::Shared(repo.common_dir.join("hooks")),
        Some(p) if p == own => match (recorded, &repo.main_work_dir) {
            (Some(rel), Some(main)) => {
                let inherited = repo.config_string(INHERITED_KEY).is_some_and(|v| v == "true");
                Layout::Chained { dir: own, chain: Chain { rel, main: main.clone(), inherited }, installed: true }
            }
            _ => Layout::Shared(own),
        },
        Some(p) => {
            // Set in the user's global (or system) config, for every repository, git-boulder's
            // shims do not go there: its own folder chains to it, in this repository only.
            let inherited = !set_here(repo);
            match &repo.main_work_dir {
                Some(main) if inherited || p.is_relative() => Layout::Chained {
                    dir: own,
                    chain: Chain { rel: p.to_string_lossy().into_owned(), main: main.clone(), inherited },
                    installed: false,
                },
                _ if p.is_absolute() => Layout::Shared(p),
                // Hooks of a bare repository run in its git dir.
                _ => Layout::Shared(repo.git_dir.join(p)),
            }
        }
    }
}

/// Whether `core.hooksPath` is set in this repository's own config (or a worktree's), rather than
/// inherited from the user's global or the system config.
fn set_here(repo: &Repo) -> bool {
    let local = ConfigFile::read(&repo.common_dir.join("config")).ok().and_then(|f| f.string("core.hooksPath"));
    let worktree =
        ConfigFile::read_worktree(&repo.git_dir.join("config.worktree")).and_then(|f| f.string("core.hooksPath"));
    local.is_some() || worktree.is_some()
}

/// The git config key that records a chained `core.hooksPath` as inherited ([`Chain::inherited`]).
const INHERITED_KEY: &str = "boulder.hooksPathInherited";

/// The hooks directory git uses for this repository in the current worktree.
pub fn hooks_dir(repo: &Repo) -> PathBuf {
    match layout(repo) {
        Layout::Shared(dir) => dir,
        Layout::Chained { dir, installed: true, .. } => dir,
        Layout::Chained { chain, .. } => repo.work_dir.clone().unwrap_or_else(|| chain.main.clone()).join(&chain.rel),
    }
}

/// Write `text` as the executable hook `path`.
fn write_hook(path: &Path, text: &str) -> Result<()> {
    crate::fsutil::write_atomic(path, text.as_bytes())?;
    set_executable(path)
}

/// Set (or with `None` remove) keys of the repository's own config file (`$GIT_COMMON_DIR/config`),
/// the way git writes it: under `config.lock` (taken exclusively, so a concurrent `git config`
/// is never lost — it waits or fails as it would against git), read after the lock is held,
/// written whole into the lock and renamed over the file.
fn set_config(repo: &Repo, edits: &[(&str, &str, Option<&str>)]) -> Result<()> {
    use std::io::Write;
    let path = repo.common_dir.join("config");
    let lock_path = repo.common_dir.join("config.lock");
    let mut lock = std::fs::OpenOptions::new().write(true).create_new(true).open(&lock_path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Error::refused(format!("{} exists: another git command is writing the config", lock_path.display()))
                .hint("wait for it to finish and run the command again")
        } else {
            Error::internal(format!("cannot create {}: {e}", lock_path.display()))
        }
    })?;
    let written = (|| -> Result<()> {
        let mut file = ConfigFile::read(&path)?;
        for (section, key, value) in edits {
            match value {
                Some(v) => {
                    file.set(section, key, v)
                        .map_err(|e| Error::internal(format!("cannot set {section}.{key}: {e}")))?;
                }
                None => file.remove_all(section, key),
            }
        }
        let out = file.to_bytes()?;
        lock.write_all(&out)?;
        lock.sync_all()?;
        std::fs::rename(&lock_path, &path)
            .map_err(|e| Error::internal(format!("cannot put {} in place: {e}", path.display())))?;
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&lock_path);
    }
    written
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
    /// Worktrees (folders) where git would not run this hook although it is installed here:
    /// git resolves `core.hooksPath` to another folder there.
    pub not_running_in: Vec<String>,
}

impl HookStatus {
    /// What is wrong and how to fix it, for `doctor` (only for default hooks).
    pub fn problem(&self) -> Option<(String, String)> {
        if !self.default {
            return None;
        }
        if self.state == "installed" {
            if self.not_running_in.is_empty() {
                return None;
            }
            // Installed where the repository's config points, so those worktrees set their own
            // core.hooksPath (per-worktree config).
            return Some((
                format!(
                    "git-boulder's {} hook would not run in {}: core.hooksPath of that worktree's own config names another folder",
                    self.name,
                    self.not_running_in.join(", ")
                ),
                self.not_running_in
                    .iter()
                    .map(|w| format!("git -C {} config --worktree --unset core.hooksPath", quote(w)))
                    .collect::<Vec<_>>()
                    .join("; "),
            ));
        }
        let what = match self.state.as_str() {
            "missing" => format!("the {} hook is not installed ({})", self.name, self.path),
            "foreign" => format!("{} is another tool's hook; git-boulder's is not installed beside it", self.path),
            _ => match direct_program(Path::new(&self.path)).filter(|p| !p.exists()) {
                Some(gone) => format!(
                    "the {} hook at {} runs {}, which is not there (git-boulder moved or was removed; \
                     where it lives at different paths, set `git config boulder.directHooks false`)",
                    self.name,
                    self.path,
                    gone.display()
                ),
                None => format!("the {} hook at {} is an older git-boulder shim", self.name, self.path),
            },
        };
        let what = if self.not_running_in.is_empty() {
            what
        } else {
            format!("{what}; git-boulder's {} hook does not run in {}", self.name, self.not_running_in.join(", "))
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
    let wanted: Vec<(&str, bool)> = HOOKS.iter().copied().chain(pre_commit.then_some(PRE_COMMIT)).collect();
    match layout(repo) {
        Layout::Shared(dir) => install_shared(&dir, &wanted, directs_allowed(repo)),
        Layout::Chained { dir, chain, installed } => install_chained(repo, &dir, &chain, installed, &wanted),
    }
}

fn install_shared(dir: &Path, wanted: &[(&str, bool)], allowed: bool) -> Result<Report> {
    std::fs::create_dir_all(dir).map_err(|e| Error::internal(format!("cannot create {}: {e}", dir.display())))?;
    let mut lines = Vec::new();
    for &(name, stdin) in wanted {
        let path = dir.join(name);
        let orig = dir.join(format!("{name}{ORIG}"));
        let text = wanted_hook(dir, name, stdin, None, allowed);
        // A previous hook kept as `<name>.boulder-orig` runs first: that takes the shell shim.
        let chained = shim(name, stdin, None);
        // Another manager that put its hook in place of ours keeps ours under its own name and
        // runs it: that copy must go, or each would run the other.
        let ours_aside: Vec<PathBuf> =
            MOVED_ASIDE.iter().map(|s| dir.join(format!("{name}{s}"))).filter(|p| is_ours_at(p)).collect();
        match std::fs::read(&path) {
            Ok(current) if is_installed(dir, name, stdin, None, allowed, &current) => {
                lines.push(format!("{name}: already installed"));
                continue;
            }
            Ok(current) if is_ours(&String::from_utf8_lossy(&current)) => {
                lines.push(format!("{name}: updated the shim"));
            }
            Ok(current) => {
                if orig.exists() {
                    if std::fs::read(&orig).ok().as_deref() == Some(current.as_slice()) {
                        // The same hook again (its manager installed it once more): nothing to keep.
                        lines.push(format!(
                            "{name}: installed again; your previous hook runs first (still kept as {name}{ORIG})"
                        ));
                    } else if !ours_aside.is_empty() {
                        // Another manager put its hook in place of ours and kept ours aside. The
                        // hook kept earlier is never lost: it takes the place of our copy (which
                        // pre-commit's hook runs as `.legacy`), or, where the manager does not run
                        // that copy, a numbered backup that we say about.
                        let slot = &ours_aside[0];
                        let runs_it = slot.to_string_lossy().ends_with(".legacy");
                        let keep = if runs_it { slot.clone() } else { free_backup(&orig) };
                        std::fs::rename(&orig, &keep)
                            .map_err(|e| Error::internal(format!("cannot keep {}: {e}", orig.display())))?;
                        std::fs::rename(&path, &orig)
                            .map_err(|e| Error::internal(format!("cannot move {} aside: {e}", path.display())))?;
                        lines.push(format!(
                            "{name}: installed again; the other manager's hook runs first (kept as {name}{ORIG})"
                        ));
                        if runs_it {
                            lines.push(format!(
                                "{name}: your earlier hook is now {} (the manager's hook runs it)",
                                keep.display()
                            ));
                        } else {
                            lines.push(format!(
                                "{name}: your earlier hook is kept as {} but no longer runs; add it to the other manager's configuration",
                                keep.display()
                            ));
                        }
                        for p in ours_aside.iter().filter(|p| **p != keep) {
                            std::fs::remove_file(p)
                                .map_err(|e| Error::internal(format!("cannot remove {}: {e}", p.display())))?;
                        }
                        write_hook(&path, &chained)?;
                        continue;
                    } else {
                        return Err(Error::usage(format!(
                            "{} is another tool's hook, and {} already holds a different earlier one",
                            path.display(),
                            orig.display()
                        ))
                        .hint(format!(
                            "merge the two by hand, remove {}, then run `git boulder hooks install` again",
                            orig.display()
                        )));
                    }
                } else {
                    std::fs::rename(&path, &orig)
                        .map_err(|e| Error::internal(format!("cannot move {} aside: {e}", path.display())))?;
                    lines.push(format!("{name}: installed; your previous hook runs first (kept as {name}{ORIG})"));
                    for p in ours_aside {
                        std::fs::remove_file(&p)
                            .map_err(|e| Error::internal(format!("cannot remove {}: {e}", p.display())))?;
                    }
                    write_hook(&path, &chained)?;
                    continue;
                }
            }
            Err(_) => lines.push(format!("{name}: installed")),
        }
        for p in ours_aside {
            std::fs::remove_file(&p).map_err(|e| Error::internal(format!("cannot remove {}: {e}", p.display())))?;
        }
        write_hook(&path, &text)?;
    }
    Ok(Report { dir: dir.display().to_string(), lines })
}

/// `<orig>.1`, `<orig>.2`, …: the first name not taken.
fn free_backup(orig: &Path) -> PathBuf {
    (1..).map(|i| PathBuf::from(format!("{}.{i}", orig.display()))).find(|p| !p.exists()).expect("a free name")
}

fn install_chained(repo: &Repo, dir: &Path, chain: &Chain, installed: bool, wanted: &[(&str, bool)]) -> Result<Report> {
    std::fs::create_dir_all(dir).map_err(|e| Error::internal(format!("cannot create {}: {e}", dir.display())))?;
    let mut lines = Vec::new();
    for name in GIT_HOOKS {
        let path = dir.join(name);
        // pre-commit stays a full shim once installed with --pre-commit.
        let full = wanted.iter().find(|(n, _)| n == name).copied().or_else(|| {
            (*name == PRE_COMMIT.0
                && std::fs::read(&path).ok().is_some_and(|t| t == shim(name, false, Some(chain)).as_bytes()))
            .then_some(PRE_COMMIT)
        });
        let current = std::fs::read(&path).ok();
        if full.is_none() && ON_DEMAND.contains(name) && !chain.main.join(&chain.rel).join(name).is_file() {
            if current.is_some() && is_ours_at(&path) {
                std::fs::remove_file(&path)
                    .map_err(|e| Error::internal(format!("cannot remove {}: {e}", path.display())))?;
            }
            continue;
        }
        let text = match full {
            Some((_, stdin)) => shim(name, stdin, Some(chain)),
            None => pass(name, chain),
        };
        if current.as_deref() == Some(text.as_bytes()) {
            if full.is_some() {
                lines.push(format!("{name}: already installed"));
            }
            continue;
        }
        write_hook(&path, &text)?;
        if full.is_some() {
            lines.push(format!(
                "{name}: {}; {}/{name} runs first",
                if current.is_some() { "updated the shim" } else { "installed" },
                chain.rel
            ));
        }
    }
    if !installed {
        // Shims an earlier git-boulder wrote into the main worktree's folder would run twice.
        let earlier = chain.main.join(&chain.rel);
        if GIT_HOOKS.iter().any(|n| is_ours_at(&earlier.join(n))) {
            uninstall_shared(&earlier)?;
            lines.push(format!("removed the shims an earlier install wrote into {}", earlier.display()));
        }
        let own = dir.to_string_lossy().into_owned();
        set_config(
            repo,
            &[
                ("boulder", "hooksPath", Some(&chain.rel)),
                ("boulder", "hooksPathInherited", chain.inherited.then_some("true")),
                ("core", "hooksPath", Some(&own)),
            ],
        )?;
        lines.push(if chain.inherited {
            format!(
                "core.hooksPath is {} in your global config, for every repository; this repository's is now {own}, \
                 whose hooks run {}'s first (uninstall removes this repository's setting)",
                chain.rel, chain.rel
            )
        } else {
            format!(
                "core.hooksPath was {} (relative: a different folder in each worktree); it is now {own}, \
                 whose hooks run {}'s first in every worktree (uninstall puts it back)",
                chain.rel, chain.rel
            )
        });
    }
    Ok(Report { dir: dir.display().to_string(), lines })
}

/// Remove the shims and put back what was there before, byte for byte.
pub fn uninstall(repo: &Repo) -> Result<Report> {
    if let Layout::Chained { dir, chain, installed: true } = layout(repo) {
        let mut lines = Vec::new();
        for name in GIT_HOOKS {
            let path = dir.join(name);
            if is_ours_at(&path) {
                std::fs::remove_file(&path)
                    .map_err(|e| Error::internal(format!("cannot remove {}: {e}", path.display())))?;
            }
        }
        let _ = std::fs::remove_dir(&dir);
        set_config(
            repo,
            &[
                ("core", "hooksPath", if chain.inherited { None } else { Some(&chain.rel) }),
                ("boulder", "hooksPath", None),
                ("boulder", "hooksPathInherited", None),
            ],
        )?;
        lines.push(if chain.inherited {
            format!("removed git-boulder's hooks folder; core.hooksPath is your global {} again", chain.rel)
        } else {
            format!("removed git-boulder's hooks folder; core.hooksPath is {} again", chain.rel)
        });
        return Ok(Report { dir: dir.display().to_string(), lines });
    }
    let dir = hooks_dir(repo);
    let lines = uninstall_shared(&dir)?;
    Ok(Report { dir: dir.display().to_string(), lines })
}

fn uninstall_shared(dir: &Path) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for (name, _) in HOOKS.iter().copied().chain([PRE_COMMIT]) {
        let path = dir.join(name);
        let orig = dir.join(format!("{name}{ORIG}"));
        if !is_ours_at(&path) {
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
    Ok(lines)
}

/// The hooks folder git uses in each worktree (the main one first): `core.hooksPath` of the
/// repository config, or of the worktree's own `config.worktree` when `extensions.worktreeConfig`
/// is on, resolved against that worktree's root when relative.
fn worktree_dirs(repo: &Repo) -> Result<Vec<(PathBuf, PathBuf)>> {
    let common = configured(repo.config_string("core.hooksPath"));
    let per_worktree = repo.config_bool("extensions.worktreeConfig") == Some(true);
    let resolve = |root: &Path, git_dir: &Path| -> PathBuf {
        let own = per_worktree
            .then(|| {
                ConfigFile::read_worktree(&git_dir.join("config.worktree")).and_then(|f| f.string("core.hooksPath"))
            })
            .flatten();
        match own.map(|v| configured(Some(v))).unwrap_or_else(|| common.clone()) {
            None => repo.common_dir.join("hooks"),
            Some(p) if p.is_absolute() => p,
            Some(p) => root.join(p),
        }
    };
    let mut out = Vec::new();
    if let Some(main) = &repo.main_work_dir {
        out.push((main.clone(), resolve(main, &repo.common_dir)));
    }
    for w in crate::worktree::list(repo)? {
        if !w.missing {
            let admin = repo.common_dir.join("worktrees").join(&w.admin_id);
            out.push((w.path.clone(), resolve(&w.path, &admin)));
        }
    }
    Ok(out)
}

/// The state of every hook git-boulder knows.
pub fn status(repo: &Repo) -> Result<Vec<HookStatus>> {
    let (dir, chain) = match layout(repo) {
        Layout::Shared(dir) => (dir, None),
        Layout::Chained { dir, chain, installed: true } => (dir, Some(chain)),
        Layout::Chained { .. } => (hooks_dir(repo), None),
    };
    let worktrees = worktree_dirs(repo)?;
    let allowed = directs_allowed(repo);
    let mut out = Vec::new();
    for (name, stdin) in HOOKS.iter().copied().chain([PRE_COMMIT]) {
        let path = dir.join(name);
        let orig = dir.join(format!("{name}{ORIG}"));
        let state = match std::fs::read(&path) {
            Err(_) => "missing",
            Ok(t) if is_installed(&dir, name, stdin, chain.as_ref(), allowed, &t) => "installed",
            Ok(t) if chain.is_some() && name == PRE_COMMIT.0 && is_ours(&String::from_utf8_lossy(&t)) => "missing",
            Ok(t) if is_ours(&String::from_utf8_lossy(&t)) => "outdated",
            Ok(_) => "foreign",
        };
        let chained = match &chain {
            Some(c) => Some(format!("{}/{name}", c.rel)),
            None => orig.exists().then(|| orig.display().to_string()),
        };
        // Worktrees where git would not run git-boulder's hook (only said of a hook installed here).
        let not_running_in = if name != PRE_COMMIT.0 || state == "installed" || state == "outdated" {
            worktrees
                .iter()
                .filter(|(_, d)| {
                    std::fs::read(d.join(name)).map_or(true, |t| is_pass(&t) || !is_ours(&String::from_utf8_lossy(&t)))
                })
                .map(|(w, _)| w.display().to_string())
                .collect()
        } else {
            Vec::new()
        };
        out.push(HookStatus {
            name: name.to_string(),
            path: path.display().to_string(),
            state: state.to_string(),
            chained,
            default: name != PRE_COMMIT.0,
            not_running_in,
        });
    }
    Ok(out)
}

fn is_pass(text: &[u8]) -> bool {
    String::from_utf8_lossy(text).lines().nth(1).is_some_and(|l| l.contains("(pass-through)"))
}
