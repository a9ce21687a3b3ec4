//! Opening the repository for a hook ([`Repo::discover_once`]). The post-commit hook runs on every
//! commit, so it opens the repository exactly once: [`Repo::discover`] also opens the main repository of a
//! linked worktree a second time (config, object store) only to learn its work tree, which here
//! follows from the common dir whenever that is plainly `<root>/.git`.

use std::path::{Path, PathBuf};

use super::OpenError;
use super::{absolute, Repo};

type Result<T> = std::result::Result<T, OpenError>;

impl Repo {
    /// Discover the repository from the current directory as [`Repo::discover`] does (the same
    /// paths, honouring `GIT_DIR` and `GIT_WORK_TREE`), opening it once. No object cache is set:
    /// the caller sizes it for what it reads.
    pub fn discover_once() -> Result<Repo> {
        discover()
    }
}

fn discover() -> Result<Repo> {
    let repo = super::discover_with_room(Path::new("."))
        .map_err(|e| crate::git::not_a_repository(std::path::Path::new("."), e))?;
    if let Some(e) = crate::git::format_problem_of(&repo) {
        return Err(e);
    }
    crate::git::follow_config(&repo);
    let common_dir = absolute(repo.common_dir());
    let git_dir = absolute(repo.git_dir());
    let work_dir = repo.workdir().map(absolute);
    let main_work_dir = if repo.kind() == gix::repository::Kind::LinkedWorkTree {
        main_work_dir(&repo, &common_dir).or_else(|| repo.main_repo().ok().and_then(|m| m.workdir().map(absolute)))
    } else {
        work_dir.clone()
    };
    Ok(Repo { repo, common_dir, git_dir, work_dir, main_work_dir })
}

/// The main work tree of a linked worktree when its common dir is `<root>/.git` of a repository
/// that is not bare and sets no `core.worktree`: `<root>`. `None` when it takes opening the main
/// repository to know.
fn main_work_dir(repo: &gix::Repository, common_dir: &Path) -> Option<PathBuf> {
    let config = repo.config_snapshot();
    if common_dir.file_name()? != ".git"
        || config.boolean("core.bare") == Some(true)
        || config.string("core.worktree").is_some()
    {
        return None;
    }
    common_dir.parent().map(Path::to_path_buf)
}
