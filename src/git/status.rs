//! gix's full status of a worktree: the paths `git status --porcelain` would list (staged,
//! modified, conflicted, untracked), for messages that name them and for what the fast check of
//! [`crate::git::refresh`] cannot decide.

use std::collections::BTreeSet;
use std::path::Path;

use gix::bstr::{BStr, ByteSlice};

use crate::error::{Error, Result};

fn gix_err(context: impl std::fmt::Display, e: gix::Error) -> Error {
    Error::internal(format!("{context}: {e:#}")).with_source(e)
}

/// Changed paths, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed {
    /// Tracked paths that differ from HEAD or the index (staged, modified, deleted, conflicted).
    pub modified: Vec<String>,
    /// Untracked paths (an untracked folder is one entry ending in `/`); ignored files never count.
    pub untracked: Vec<String>,
    /// More changes exist than were collected (the limit was reached).
    pub more: bool,
}

/// What [`changed_paths`] looks at.
#[derive(Clone, Copy)]
pub struct Look {
    /// Every untracked file (even under `status.showUntrackedFiles=no`).
    pub all_untracked: bool,
    /// Collect up to the limit rather than stopping at the first change.
    pub want_more: bool,
    /// A submodule whose checkout differs from its gitlink counts.
    pub submodules: bool,
}

/// The paths `git status --porcelain` in the worktree at `path` lists, up to `limit` (then `more`
/// is set), as [`Look`] says. Computed by gix's status (HEAD vs index, index vs worktree).
pub fn changed_paths(path: &Path, limit: usize, look: Look) -> Result<Changed> {
    let Look { all_untracked, want_more, submodules } = look;
    use gix::status::plumbing::index_as_worktree::EntryStatus;
    use gix::status::{index_worktree, Item, UntrackedFiles};
    let repo = crate::git::worktree::open_worktree(path)?;
    let mut platform = repo
        .status(gix::progress::Discard)
        .map_err(|e| gix_err("cannot prepare status", e))?
        .index_worktree_rewrites(None)
        .index_worktree_submodules(gix::status::Submodule::AsConfigured { check_dirty: true });
    if all_untracked {
        let dirwalk = repo.dirwalk_options().map_err(|e| gix_err("cannot prepare status", e))?;
        platform = platform
            .index_worktree_options_mut(|o| o.dirwalk_options = Some(dirwalk))
            .untracked_files(UntrackedFiles::Collapsed);
    }
    // HEAD vs index: when the index's cache-tree is valid for all entries and its root is HEAD's
    // tree, nothing is staged (git trusts the cache-tree the same way), so skip that diff.
    let index = repo.index_or_empty().map_err(|e| gix_err("cannot read the index", e))?;
    let nothing_staged = match (index.tree(), repo.head_tree_id()) {
        (Some(tree), Ok(head_tree)) => {
            tree.id == head_tree.detach()
                && tree.num_entries == Some(index.entries().len() as u32)
                && index.entries().iter().all(|e| e.stage_raw() == 0)
        }
        _ => false,
    };
    platform = platform.index(gix::worktree::IndexPersistedOrInMemory::Persisted(index));
    let iter: Box<dyn Iterator<Item = std::result::Result<Item, gix::Error>>> = if nothing_staged {
        Box::new(
            platform
                .into_index_worktree_iter(Vec::new())
                .map_err(|e| gix_err("cannot compute status", e))?
                .map(|r| r.map(Item::IndexWorktree)),
        )
    } else {
        Box::new(platform.into_iter(None).map_err(|e| gix_err("cannot compute status", e))?)
    };
    let mut dirt = Changed::default();
    let mut seen_modified = BTreeSet::new();
    for item in iter {
        let item = item.map_err(|e| gix_err(format_args!("cannot compute the status of {}", path.display()), e))?;
        let (untracked, rela): (bool, &BStr) = match &item {
            Item::TreeIndex(change) => (false, change.location()),
            Item::IndexWorktree(index_worktree::Item::Modification { status, rela_path, .. }) => {
                if matches!(status, EntryStatus::NeedsUpdate(_)) {
                    continue;
                }
                if !submodules
                    && matches!(
                        status,
                        EntryStatus::Change(gix::status::plumbing::index_as_worktree::Change::SubmoduleModification(_))
                    )
                {
                    continue;
                }
                (false, rela_path.as_ref())
            }
            Item::IndexWorktree(index_worktree::Item::DirectoryContents { entry, .. }) => {
                if entry.status != gix::dir::entry::Status::Untracked {
                    continue;
                }
                (true, entry.rela_path.as_ref())
            }
            Item::IndexWorktree(index_worktree::Item::Rewrite { dirwalk_entry, .. }) => {
                (false, dirwalk_entry.rela_path.as_ref())
            }
        };
        let mut p = rela.to_str_lossy().into_owned();
        if untracked {
            if let Item::IndexWorktree(index_worktree::Item::DirectoryContents { entry, .. }) = &item {
                if matches!(entry.disk_kind, Some(gix::dir::entry::Kind::Directory | gix::dir::entry::Kind::Repository))
                    && !p.ends_with('/')
                {
                    p.push('/');
                }
            }
        }
        if !untracked && !seen_modified.insert(p.clone()) {
            continue; // staged and modified: one path
        }
        if dirt.modified.len() + dirt.untracked.len() >= limit {
            dirt.more = true;
            break;
        }
        if untracked {
            dirt.untracked.push(p);
        } else {
            dirt.modified.push(p);
        }
        if !want_more && dirt.modified.len() + dirt.untracked.len() >= limit {
            break; // dropping the iterator interrupts the remaining work
        }
    }
    dirt.modified.sort();
    dirt.untracked.sort();
    Ok(dirt)
}
