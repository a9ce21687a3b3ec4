//! The only place that touches gix or runs the git CLI ([`cli`]). Opens the repository the way
//! git does (from any subdirectory or linked worktree, honouring `GIT_DIR` and `GIT_WORK_TREE`)
//! and answers the handful of questions the domain modules ask of it.

pub mod cli;
pub mod config;
pub mod identity;
mod index;
pub mod merge;
pub mod notes;
pub mod objects;
mod open;
pub mod refs;
pub mod remote;
pub mod walk;

pub use gix::ObjectId;
pub use refs::{delete as delete_ref, move_ref};

use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;

use crate::error::{Error, Result, ResultExt};

/// An opened repository and where its parts live.
pub struct Repo {
    /// The gix handle: only `git/` may use it, so that every git operation is one of its typed
    /// functions. `pub(crate)` only while `worktree/` still reaches into it; private once that
    /// module goes through `git/` too.
    pub(crate) repo: gix::Repository,
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

impl Repo {
    /// Discover the repository from the current directory as git would.
    pub fn discover() -> Result<Repo> {
        // From the absolute current directory: gix's upward search from a relative `.` inside
        // `.git/` looks for `./.git` and misses the git dir it is standing in.
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Self::discover_at(&cwd)
    }

    /// Discover the repository starting at `dir`.
    pub fn discover_at(dir: &Path) -> Result<Repo> {
        let repo = gix::discover_with_environment_overrides(dir).map_err(|e| not_a_repository(dir, e))?;
        Self::from_gix(repo)
    }

    /// Open exactly the repository at `path` (a work tree or a git dir), without environment overrides.
    pub fn open(path: &Path) -> Result<Repo> {
        let repo = gix::open(path).map_err(|e| {
            let git_dir = if path.join(".git").exists() { path.join(".git") } else { path.to_path_buf() };
            format_problem(&git_dir).unwrap_or_else(|| {
                // gix's message may name the path itself; name it once.
                let text = e.to_string();
                let shown = path.display().to_string();
                if text.contains(&shown) {
                    Error::usage(format!("cannot open the repository: {text}"))
                } else {
                    Error::usage(format!("cannot open the repository at {shown}: {text}"))
                }
            })
        })?;
        Self::from_gix(repo)
    }

    fn from_gix(mut repo: gix::Repository) -> Result<Repo> {
        if let Some(e) = format_problem_of(&repo) {
            return Err(e);
        }
        // Keep state writes from ever depending on a configured identity or hooks' environment.
        repo.object_cache_size_if_unset(4 * 1024 * 1024);
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

    /// `$GIT_COMMON_DIR/boulder`: per-machine files (locks, actor id).
    pub fn boulder_dir(&self) -> PathBuf {
        self.common_dir.join("boulder")
    }

    /// The object id a full ref name points at (peeled to its target), if the ref exists.
    pub fn ref_id(&self, name: &str) -> Result<Option<gix::ObjectId>> {
        match self.repo.try_find_reference(name) {
            // A symbolic ref to a branch with no commits yet (HEAD of an empty repository) is absent.
            Ok(Some(mut r)) if r.target().try_id().is_none() => Ok(r.peel_to_id().ok().map(|id| id.detach())),
            Ok(Some(mut r)) => Ok(Some(r.peel_to_id().internal(format_args!("cannot resolve {name}"))?.detach())),
            Ok(None) => Ok(None),
            Err(e) => Err(Error::internal(format!("cannot read ref {name}: {e}"))),
        }
    }

    /// The short name of the branch HEAD points at in this worktree, if any (`None` when detached
    /// or unborn is still named).
    pub fn head_branch(&self) -> Option<String> {
        let head = self.repo.head_name().ok()??;
        head.as_bstr().to_str().ok()?.strip_prefix("refs/heads/").map(str::to_owned)
    }

    /// The branch HEAD is on in this worktree (short name) and the commit it points at (`None`
    /// when it has no commits yet), read once; `None` when HEAD cannot be read or is detached.
    pub fn head_branch_and_id(&self) -> Option<(String, Option<gix::ObjectId>)> {
        let head = self.repo.head().ok()?;
        let branch = head.referent_name().and_then(|n| n.as_bstr().to_str().ok()?.strip_prefix("refs/heads/"))?;
        Some((branch.to_string(), head.id().map(|id| id.detach())))
    }

    /// The newest entry of HEAD's reflog in this worktree: the commit it moved to and its message.
    pub fn head_reflog_newest(&self) -> Option<(gix::ObjectId, String)> {
        let head = self.repo.head().ok()?;
        let mut log = head.log_iter();
        let mut rev = log.rev().ok()??;
        match rev.next() {
            Some(Ok(line)) => Some((line.new_oid, line.message.to_str_lossy().into_owned())),
            _ => None,
        }
    }

    /// The commit the oldest entry of `name`'s reflog moved it to (where a branch was created).
    pub fn reflog_oldest(&self, name: &str) -> Option<gix::ObjectId> {
        let r = self.repo.find_reference(name).ok()?;
        let mut platform = r.log_iter();
        let mut lines = platform.all().ok()??;
        let first = lines.next()?.ok()?;
        Some(first.new_oid())
    }

    /// The ref a symbolic ref `name` points at (full name), if `name` exists and is symbolic.
    pub fn symbolic_target(&self, name: &str) -> Option<String> {
        let r = self.repo.try_find_reference(name).ok()??;
        match r.target() {
            gix::refs::TargetRef::Symbolic(target) => target.as_bstr().to_str().ok().map(str::to_owned),
            gix::refs::TargetRef::Object(_) => None,
        }
    }

    /// The commit a branch (short name) points at, if it exists.
    pub fn branch_tip(&self, branch: &str) -> Result<Option<gix::ObjectId>> {
        self.ref_id(&format!("refs/heads/{branch}"))
    }

    /// Every file path (blobs and links, recursively) in the tree of `commit`, as UTF-8-lossy text.
    pub fn tree_paths(&self, commit: gix::ObjectId) -> Result<Vec<String>> {
        let commit = self.repo.find_commit(commit).internal("cannot read commit")?;
        let tree = commit.tree().internal("cannot read tree")?;
        let mut rec = gix::traverse::tree::Recorder::default();
        tree.traverse().breadthfirst(&mut rec).internal("cannot walk tree")?;
        Ok(rec
            .records
            .into_iter()
            .filter(|e| !e.mode.is_tree())
            .map(|e| e.filepath.to_str_lossy().into_owned())
            .collect())
    }

    /// The bytes of the file at `path` in the tree of `commit`, if it exists there.
    pub fn file_at(&self, commit: gix::ObjectId, path: &str) -> Result<Option<Vec<u8>>> {
        let commit = self.repo.find_commit(commit).internal("cannot read commit")?;
        let tree = commit.tree().internal("cannot read tree")?;
        let entry = tree.lookup_entry_by_path(path).internal(format_args!("cannot look up {path}"))?;
        match entry {
            Some(e) if e.mode().is_blob() => {
                let obj = e.object().internal(format_args!("cannot read {path}"))?;
                Ok(Some(obj.detach().data))
            }
            _ => Ok(None),
        }
    }

    /// The id of the blob at `path` in the tree of `commit`, if there is one (the blob is not read).
    pub fn blob_id_at(&self, commit: gix::ObjectId, path: &str) -> Result<Option<gix::ObjectId>> {
        let commit = self.repo.find_commit(commit).internal("cannot read commit")?;
        let tree = commit.tree().internal("cannot read tree")?;
        let entry = tree.lookup_entry_by_path(path).internal(format_args!("cannot look up {path}"))?;
        Ok(entry.filter(|e| e.mode().is_blob()).map(|e| e.object_id()))
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
}

/// Create an empty repository at `path` (as `git init` would, without running git).
pub fn init(path: &Path) -> Result<()> {
    gix::init(path)
        .map(|_| ())
        .map_err(|e| Error::internal(format!("cannot create a repository at {}: {e}", path.display())))
}

/// The tree of `commit`.
pub fn tree_of(repo: &gix::Repository, commit: gix::ObjectId) -> Result<gix::ObjectId> {
    Ok(repo
        .find_commit(commit)
        .internal(format_args!("cannot read commit {commit}"))?
        .tree_id()
        .internal(format_args!("cannot read the tree of {commit}"))?
        .detach())
}

/// The error for a directory gix could not open as a repository: the repository format when git
/// knows the repository but git-boulder cannot read it ([`format_problem`]), else "not a git
/// repository".
pub(crate) fn not_a_repository(dir: &Path, e: impl std::fmt::Display) -> Error {
    let git_dir = match std::env::var_os("GIT_DIR") {
        Some(d) => Some(PathBuf::from(d)),
        None => gix::discover::upwards(dir).ok().map(|(p, _)| p.into_repository_and_work_tree_directories().0),
    };
    git_dir.and_then(|d| format_problem(&d)).unwrap_or_else(|| {
        // gix's message already names the folder and its parents; say it once.
        let text = e.to_string();
        let message = if text.starts_with("Could not find a git repository in") {
            format!("not a git repository (nor any of its parent folders): {}", dir.display())
        } else {
            format!("not a git repository: {text}")
        };
        Error::usage(message).hint("run git boulder inside a git repository, or create one with `git init`")
    })
}

/// Why git-boulder cannot work in the repository whose git dir is `git_dir`, read from its
/// config before anything else is read or written: refs in the reftable format (gix 0.90 reads
/// and writes only loose and packed refs, so it would neither see git's refs nor write refs git
/// can see), or object ids other than SHA-1 (git-boulder is built for SHA-1 only). Exit 2.
pub fn format_problem(git_dir: &Path) -> Option<Error> {
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
pub(crate) fn format_problem_of(repo: &gix::Repository) -> Option<Error> {
    let config = repo.config_snapshot();
    unsupported(|key| config.string(key).map(|v| v.to_str_lossy().into_owned()))
}

fn unsupported(value: impl Fn(&str) -> Option<String>) -> Option<Error> {
    let value = |key: &str| value(key).map(|v| v.trim().to_ascii_lowercase());
    if let Some(refs) = value("extensions.refStorage").filter(|v| v != "files") {
        return Some(
            Error::usage(format!(
                "this repository stores refs in the {refs} format (extensions.refStorage = {refs}), which git-boulder does not support yet; nothing was read or written"
            ))
            .hint("convert it with `git refs migrate --ref-format=files` (git 2.46+, no linked worktrees), or use git-boulder in a repository with the files ref format"),
        );
    }
    if let Some(hash) = value("extensions.objectFormat").filter(|v| v != "sha1") {
        return Some(
            Error::usage(format!(
                "this repository uses {hash} object ids (extensions.objectFormat = {hash}), which git-boulder does not support yet (SHA-1 only); nothing was read or written"
            ))
            .hint("use git-boulder in a SHA-1 repository (`git init --object-format=sha1`)"),
        );
    }
    None
}
