//! Three-way tree merges with gix, in whatever object store they are given (in memory for a
//! merge check): the merged tree, or the unresolved conflicts in the terms of the merge report.

use gix::bstr::ByteSlice;
use gix::merge::tree::{Resolution, ResolutionFailure, TreatAsUnresolved};
use serde::Serialize;

use super::objects::Objects;
use super::ObjectId;
use crate::error::{Result, ResultExt};

/// The kinds of conflict the check reports. Sides are named as in a rebase: the base branch's
/// version first, the stream commit's second (`DELETED_MODIFIED`: the base deleted the file, the
/// stream modified it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConflictKind {
    BothModified,
    DeletedModified,
    ModifiedDeleted,
    AddedBoth,
    Rename,
    TypeChange,
}

impl ConflictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictKind::BothModified => "BOTH_MODIFIED",
            ConflictKind::DeletedModified => "DELETED_MODIFIED",
            ConflictKind::ModifiedDeleted => "MODIFIED_DELETED",
            ConflictKind::AddedBoth => "ADDED_BOTH",
            ConflictKind::Rename => "RENAME",
            ConflictKind::TypeChange => "TYPE_CHANGE",
        }
    }
}

/// What a gix conflict is in the terms of the report, from the base's (ours) and the stream's
/// (theirs) point of view.
fn kind_of(c: &gix::merge::tree::Conflict) -> ConflictKind {
    // `changes_in_resolution` may swap the sides to match the description; find out whether it did.
    let swapped = !std::ptr::eq(c.changes_in_resolution().0, &c.ours);
    match &c.resolution {
        Ok(Resolution::OursModifiedTheirsModifiedThenBlobContentMerge { .. }) => {
            if c.entries()[0].is_none() {
                ConflictKind::AddedBoth
            } else {
                ConflictKind::BothModified
            }
        }
        Ok(Resolution::SourceLocationAffectedByRename { .. })
        | Ok(Resolution::OursModifiedTheirsRenamedAndChangedThenRename { .. }) => ConflictKind::Rename,
        Ok(Resolution::Forced(f)) | Err(f) => match f {
            ResolutionFailure::OursModifiedTheirsDeleted => {
                if swapped {
                    ConflictKind::DeletedModified
                } else {
                    ConflictKind::ModifiedDeleted
                }
            }
            ResolutionFailure::OursRenamedTheirsRenamedDifferently { .. }
            | ResolutionFailure::OursRenamedTheirsRenamedToSameLocation
            | ResolutionFailure::OursDeletedTheirsRenamed => ConflictKind::Rename,
            ResolutionFailure::OursModifiedTheirsDirectoryThenOursRenamed { .. }
            | ResolutionFailure::OursDirectoryTheirsNonDirectoryTheirsRenamed { .. }
            | ResolutionFailure::OursAddedTheirsAddedTypeMismatch { .. }
            | ResolutionFailure::OursModifiedTheirsRenamedTypeMismatch => ConflictKind::TypeChange,
            ResolutionFailure::SubmoduleAddAdd => ConflictKind::AddedBoth,
            ResolutionFailure::SubmoduleMerge | ResolutionFailure::Unknown => ConflictKind::BothModified,
        },
    }
}

impl Objects<'_> {
    /// The merge of three trees as git's `ort` would make it (file contents merged with the
    /// labels `ancestor`, `base` and `stream`), written to this store; or the conflicts git would
    /// leave unresolved, as (path, kind).
    pub fn merge_trees(
        &self,
        ancestor: ObjectId,
        ours: ObjectId,
        theirs: ObjectId,
    ) -> Result<std::result::Result<ObjectId, Vec<(String, ConflictKind)>>> {
        let repo = &*self.g;
        let options = repo.tree_merge_options().internal("cannot read merge options")?;
        let labels = gix::merge::blob::builtin_driver::text::Labels {
            ancestor: Some("ancestor".into()),
            current: Some("base".into()),
            other: Some("stream".into()),
        };
        let outcome = repo.merge_trees(ancestor, ours, theirs, labels, options).internal("cannot merge trees")?;
        let unresolved: Vec<(String, ConflictKind)> = outcome
            .conflicts
            .iter()
            .filter(|c| c.is_unresolved(TreatAsUnresolved::git()))
            .map(|c| (c.theirs.location().to_str_lossy().into_owned(), kind_of(c)))
            .collect();
        if !unresolved.is_empty() {
            return Ok(Err(unresolved));
        }
        // Written without asking the store, for every entry of every rewritten tree, whether it
        // holds the entry's object (what gix's `Editor::write` does): the entries come from trees
        // of this store. Names are still checked as gix would; [`Objects::put_unchecked`] writes
        // each new tree (a duplicate is dropped once, when the layer is persisted).
        let protect = protect_options(repo);
        let mut editor = outcome.tree.detach();
        let tree = editor.write(|tree| -> std::result::Result<ObjectId, crate::error::Error> {
            for entry in &tree.entries {
                let mode = entry.mode.is_link().then_some(gix::validate::path::component::Mode::Symlink);
                gix::validate::path::component(entry.filename.as_ref(), mode, protect).map_err(|e| {
                    crate::error::Error::internal(format!(
                        "the merged tree has an invalid file name {:?}: {e}",
                        entry.filename.to_str_lossy()
                    ))
                    .with_source(e)
                })?;
            }
            self.put_unchecked(tree).internal("cannot write the merged tree")
        })?;
        Ok(Ok(tree))
    }
}

/// The file-name protections git applies when writing trees (`core.protectNTFS`, on unless turned
/// off; `core.protectHFS`, on on macOS; Windows names on Windows), read as gix reads them.
fn protect_options(repo: &gix::Repository) -> gix::validate::path::component::Options {
    let config = repo.config_snapshot();
    gix::validate::path::component::Options {
        protect_windows: config.boolean("gitoxide.core.protectWindows").unwrap_or(cfg!(windows)),
        protect_hfs: config.boolean("core.protectHFS").unwrap_or(cfg!(target_os = "macos")),
        protect_ntfs: config.boolean("core.protectNTFS").unwrap_or(true),
    }
}
