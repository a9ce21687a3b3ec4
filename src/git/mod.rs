//! The only place that touches gix or runs the git CLI ([`cli`]). Opens the repository the way
//! git does (from any subdirectory or linked worktree, honouring `GIT_DIR` and `GIT_WORK_TREE`)
//! and answers the handful of questions the domain modules ask of it, with typed functions: the
//! gix handle inside [`Repo`] is not for other modules.
//!
//! * [`refs`]: every ref name git-boulder owns; reading refs; the one compare-and-swap (with
//!   retry) every ref update goes through.
//! * [`objects`]: commits, trees and blobs — readers, writers, the in-memory layer merges use.
//! * [`merge`]: three-way tree merges. `walk`: the commit walk and tree diffs of pre-push
//!   ([`Repo::changed_paths`]).
//! * [`identity`]: who git-boulder writes as (state, notes, rewritten commits, reflogs), and the host.
//! * [`notes`]: `refs/notes/boulder`. [`config`]: editing config files. [`remote`], [`cli`]: remotes.
//! * Below worktrees: [`worktree`] (admin files, making and removing linked worktrees),
//!   [`branch`] (creating a branch), [`index`], [`diff`] (tree to tree), [`checkout`] (moving a
//!   worktree's files between trees), [`status`] (gix's full status), [`refresh`] (the stat-based
//!   dirty check), [`fsmonitor`] (asking a `core.fsmonitor` hook what changed), [`ignore`] (ignore
//!   rules), [`graph`] (ahead/behind).
//! * `promisor`: in a partial clone, fetching what is about to be read and is not there yet.

pub mod branch;
pub mod chain;
pub mod checkout;
pub mod cli;
pub mod config;
pub mod diff;
pub mod fsmonitor;
pub mod graph;
pub mod id;
pub mod identity;
pub mod ignore;
pub mod index;
pub mod lockfiles;
pub mod merge;
mod note;
pub mod notes;
pub mod notes_index;
pub mod objects;
mod open;
pub mod packfile;
mod promisor;
pub mod refresh;
pub mod refs;
pub mod remote;
pub mod status;
mod walk;
pub mod worktree;

pub use gix::ObjectId;
pub use objects::tree_of;
pub use refs::{delete as delete_ref, move_ref};

use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;

use crate::error::{Error, Result};

/// Why a repository cannot be opened, naming the folder or the setting; the domain that opens it
/// says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// No repository at `dir` or any folder above it.
    #[error("not a git repository (nor any of its parent folders): {}", dir.display())]
    NotFound { dir: PathBuf, source: crate::error::Source },
    /// gix found none for another reason (its text names the folder).
    #[error("not a git repository: {source}")]
    NotARepository { source: crate::error::Source },
    /// `extensions.refStorage` is not `files` (reftable): gix would neither see git's refs nor
    /// write refs git can see.
    #[error(
        "this repository stores refs in the {0} format (extensions.refStorage = {0}), which git-boulder does not support yet; nothing was read or written"
    )]
    RefStorage(String),
    /// `extensions.objectFormat` is not `sha1`.
    #[error(
        "this repository uses {0} object ids (extensions.objectFormat = {0}), which git-boulder does not support yet (SHA-1 only); nothing was read or written"
    )]
    ObjectFormat(String),
    /// The folder given could not be opened as a repository ([`Repo::open`]); `shown` is the
    /// folder unless gix's text already names it.
    #[error("cannot open the repository{}: {source}", shown.as_ref().map(|p| format!(" at {p}")).unwrap_or_default())]
    CannotOpen { shown: Option<String>, source: crate::error::Source },
}

/// An opened repository and where its parts live.
pub struct Repo {
    /// The gix handle, private to `git/`: every git operation is one of its typed functions.
    repo: gix::Repository,
    /// `$GIT_COMMON_DIR`, absolute: shared by all worktrees.
    pub common_dir: PathBuf,
    /// This worktree's git dir, absolute.
    pub git_dir: PathBuf,
    /// The worktree the command runs in, absolute; `None` in a bare repository.
    pub work_dir: Option<PathBuf>,
    /// The main worktree, absolute; `None` when the repository is bare.
    pub main_work_dir: Option<PathBuf>,
}

pub(crate) fn absolute(p: &Path) -> PathBuf {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map(|c| c.join(p)).unwrap_or_else(|_| p.to_path_buf())
    };
    std::fs::canonicalize(&p).unwrap_or(p)
}

/// How many pack indexes a repository's object store can hold. gix sizes that once, when it opens
/// the repository, to the packs on disk then (1.1×, at least 32 by default); packs that land
/// afterwards (other worktrees' hooks, fetches, `git pack-objects`) take the rest, and once it is
/// gone a lookup of an object in a new pack fails ("too few index slots"). Twice the packs, and
/// at least 256, leaves room for what lands while a command runs.
pub(crate) const STORE_SLOTS: gix::odb::store::init::Slots =
    gix::odb::store::init::Slots::AsNeededByDiskState { multiplier: 2.0, minimum: 256 };

/// `gix::discover_with_environment_overrides` with [`STORE_SLOTS`].
pub(crate) fn discover_with_room(dir: &Path) -> gix::Result<gix::Repository> {
    let mut trust = gix::sec::trust::Mapping::<gix::open::Options>::default();
    trust.full = trust.full.object_store_slots(STORE_SLOTS);
    trust.reduced = trust.reduced.object_store_slots(STORE_SLOTS);
    gix::ThreadSafeRepository::discover_with_environment_overrides_opts(dir, Default::default(), trust).map(Into::into)
}

impl Repo {
    /// Another handle on this repository, for another thread (a gix handle keeps caches that one
    /// thread at a time may use). It shares the object store and ref store already opened.
    pub fn handle(&self) -> Repo {
        Repo {
            repo: self.repo.clone(),
            common_dir: self.common_dir.clone(),
            git_dir: self.git_dir.clone(),
            work_dir: self.work_dir.clone(),
            main_work_dir: self.main_work_dir.clone(),
        }
    }

    /// Work out now, once, who the committer is (gix reads the local time zone for it, over a
    /// millisecond), so that the notes commits and reflog entries written later reuse it: a
    /// command that waits for a child (pull, for `git fetch`) does it meanwhile. Its time is then
    /// the time of this call.
    pub fn settle_committer(&self) {
        let _ = self.repo.committer();
    }

    /// Where a `git` command for this repository runs: the worktree, or the git dir when bare.
    pub fn run_dir(&self) -> &Path {
        self.work_dir.as_deref().unwrap_or(&self.git_dir)
    }

    /// Discover the repository from the current directory as git would.
    pub fn discover() -> std::result::Result<Repo, OpenError> {
        // From the absolute current directory: gix's upward search from a relative `.` inside
        // `.git/` looks for `./.git` and misses the git dir it is standing in.
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Self::discover_at(&cwd)
    }

    /// Discover the repository starting at `dir`.
    pub fn discover_at(dir: &Path) -> std::result::Result<Repo, OpenError> {
        let repo = discover_with_room(dir).map_err(|e| not_a_repository(dir, e))?;
        Self::from_gix(repo)
    }

    /// Open exactly the repository at `path` (a work tree or a git dir), without environment overrides.
    pub fn open(path: &Path) -> std::result::Result<Repo, OpenError> {
        let repo =
            gix::open_opts(path, gix::open::Options::default().object_store_slots(STORE_SLOTS)).map_err(|e| {
                let git_dir = if path.join(".git").exists() { path.join(".git") } else { path.to_path_buf() };
                format_problem(&git_dir).unwrap_or_else(|| {
                    // gix's message may name the path itself; name it once.
                    let shown = path.display().to_string();
                    let shown = (!e.to_string().contains(&shown)).then_some(shown);
                    OpenError::CannotOpen { shown, source: e.into() }
                })
            })?;
        Self::from_gix(repo)
    }

    fn from_gix(mut repo: gix::Repository) -> std::result::Result<Repo, OpenError> {
        if let Some(e) = format_problem_of(&repo) {
            return Err(e);
        }
        // Keep state writes from ever depending on a configured identity or hooks' environment.
        repo.object_cache_size_if_unset(4 * 1024 * 1024);
        follow_config(&repo);
        let common_dir = absolute(repo.common_dir());
        let git_dir = absolute(repo.git_dir());
        let work_dir = repo.workdir().map(absolute);
        let main_work_dir = if repo.kind() == gix::repository::Kind::LinkedWorkTree {
            repo.main_repo().ok().and_then(|m| m.workdir().map(absolute))
        } else {
            work_dir.clone()
        };
        Ok(Repo { repo, common_dir, git_dir, work_dir, main_work_dir })
    }

    /// True when the repository has no worktree of its own (a bare repository).
    pub fn is_bare(&self) -> bool {
        self.main_work_dir.is_none()
    }

    /// The object directory (`$GIT_COMMON_DIR/objects`, or `$GIT_OBJECT_DIRECTORY`), absolute.
    pub fn objects_dir(&self) -> PathBuf {
        let objects = self.repo.objects.store_ref().path();
        // The usual place, `objects` of the common dir (already absolute), without asking the
        // file system again (the hooks ask on every commit).
        if objects == self.repo.common_dir().join("objects") {
            return self.common_dir.join("objects");
        }
        absolute(objects)
    }

    /// `$GIT_COMMON_DIR/boulder`: per-machine files (locks, actor id).
    pub fn boulder_dir(&self) -> PathBuf {
        self.common_dir.join("boulder")
    }

    /// A boolean of git config, if set (and a boolean).
    pub fn config_bool(&self, key: &str) -> Option<bool> {
        self.repo.config_snapshot().boolean(key)
    }

    /// Whether `name` is a configured remote (not a URL).
    pub fn has_remote(&self, name: &str) -> bool {
        self.repo.remote_names().iter().any(|n| n.as_ref() as &[u8] == name.as_bytes())
    }

    /// A value of git config (e.g. `boulder.actor`), trimmed, if set.
    pub fn config_string(&self, key: &str) -> Option<String> {
        self.repo.config_snapshot().string(key).map(|v| v.to_str_lossy().trim().to_owned())
    }

    /// Whether this worktree is a sparse checkout (`core.sparseCheckout`, which `git
    /// sparse-checkout` sets): git removes files outside its cone.
    pub fn sparse_checkout(&self) -> bool {
        self.repo.config_snapshot().boolean("core.sparseCheckout").unwrap_or(false)
    }
}

/// What the repository's config asks of the whole process, as git heeds it: how paths are quoted
/// (`core.quotePath`), whether output is coloured (`color.ui`) and the permissions of what is
/// written (`core.sharedRepository`).
pub(crate) fn follow_config(repo: &gix::Repository) {
    let config = repo.config_snapshot();
    crate::text::set_quote_path(config.boolean("core.quotePath").unwrap_or(true));
    if let Some(ui) = config.string("color.ui") {
        crate::context::set_color_ui(&ui.to_str_lossy());
    }
    share_as_configured(config.string("core.sharedRepository").map(|v| v.to_str_lossy().into_owned()));
}

/// `core.sharedRepository` (`git init --shared`) asks that what is written in the repository be
/// group-writable (`group`, `true`), also world-readable (`all`, `world`, `everybody`), or have
/// exactly an octal mode (`0660`), so that every member of the group can go on writing there:
/// git makes its own files and folders so after creating them. This process's umask is narrowed
/// once to the same effect, so refs, objects, folders and git-boulder's own files come out that
/// way too — and so do the files of what it starts (git, hooks, setup, agents).
fn share_as_configured(value: Option<String>) {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    #[cfg(unix)]
    DONE.get_or_init(|| {
        let Some(value) = value else { return };
        let value = value.trim().to_ascii_lowercase();
        let narrow = |old: u32| -> Option<u32> {
            match value.as_str() {
                "group" | "true" | "1" => Some(old & !0o020),
                "all" | "world" | "everybody" | "2" => Some(old & !0o024),
                "umask" | "false" | "0" | "" => None,
                octal => {
                    let mode = u32::from_str_radix(octal.trim_start_matches("0o"), 8).ok().filter(|m| *m <= 0o777)?;
                    // Folders get `x` wherever the files get `r`, as git gives them.
                    Some(0o777 & !(mode | ((mode & 0o444) >> 2)))
                }
            }
        };
        let old = rustix::process::umask(rustix::fs::Mode::from_bits_truncate(0o022)).bits();
        let new = narrow(old).unwrap_or(old);
        rustix::process::umask(rustix::fs::Mode::from_bits_truncate(new));
    });
}

/// Create an empty repository at `path` (as `git init` would, without running git).
pub fn init(path: &Path) -> Result<()> {
    gix::init(path)
        .map(|_| ())
        .map_err(|e| Error::internal(format!("cannot create a repository at {}: {e}", path.display())).with_source(e))
}

/// The error for a directory gix could not open as a repository: the repository format when git
/// knows the repository but git-boulder cannot read it ([`format_problem`]), else "not a git
/// repository".
pub(crate) fn not_a_repository(dir: &Path, e: impl Into<crate::error::Source>) -> OpenError {
    let git_dir = match std::env::var_os("GIT_DIR") {
        Some(d) => Some(PathBuf::from(d)),
        None => gix::discover::upwards(dir).ok().map(|(p, _)| p.into_repository_and_work_tree_directories().0),
    };
    git_dir.and_then(|d| format_problem(&d)).unwrap_or_else(|| {
        // gix's message already names the folder and its parents; say it once.
        let source = e.into();
        if source.to_string().starts_with("Could not find a git repository in") {
            OpenError::NotFound { dir: dir.to_path_buf(), source }
        } else {
            OpenError::NotARepository { source }
        }
    })
}

/// Why git-boulder cannot work in the repository whose git dir is `git_dir`, read from its
/// config before anything else is read or written: refs in the reftable format (gix 0.90 reads
/// and writes only loose and packed refs, so it would neither see git's refs nor write refs git
/// can see), or object ids other than SHA-1 (git-boulder is built for SHA-1 only). Exit 2.
pub fn format_problem(git_dir: &Path) -> Option<OpenError> {
    // A linked worktree's git dir names the common dir, where the repository config lives.
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(c) => {
            let c = PathBuf::from(c.trim_end_matches(['\n', '\r']));
            if c.is_absolute() {
                c
            } else {
                git_dir.join(c)
            }
        }
        Err(_) => git_dir.to_path_buf(),
    };
    let config = gix::config::File::from_path_no_includes(common.join("config"), gix::config::Source::Local).ok()?;
    unsupported(|key| config.string(key).map(|v| v.to_str_lossy().into_owned()))
}

/// [`format_problem`] for a repository gix opened, from the config it already read.
pub(crate) fn format_problem_of(repo: &gix::Repository) -> Option<OpenError> {
    let config = repo.config_snapshot();
    unsupported(|key| config.string(key).map(|v| v.to_str_lossy().into_owned()))
}

fn unsupported(value: impl Fn(&str) -> Option<String>) -> Option<OpenError> {
    let value = |key: &str| value(key).map(|v| v.trim().to_ascii_lowercase());
    if let Some(refs) = value("extensions.refStorage").filter(|v| v != "files") {
        return Some(OpenError::RefStorage(refs));
    }
    if let Some(hash) = value("extensions.objectFormat").filter(|v| v != "sha1") {
        return Some(OpenError::ObjectFormat(hash));
    }
    None
}
