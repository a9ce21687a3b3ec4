//! Tree-to-tree diffs: which files differ between two trees, with the blob and mode of each side.

use gix::bstr::BString;
use gix::objs::tree::EntryKind;

use crate::error::{Result, ResultExt};
use crate::git::ObjectId;

/// One path that differs between the two trees. `None` means absent on that side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: BString,
    pub old: Option<(ObjectId, EntryKind)>,
    pub new: Option<(ObjectId, EntryKind)>,
}

/// The non-tree paths that differ from `from` to `to` (no rename tracking: a rename is a deletion
/// and an addition), sorted by path.
pub(super) fn changes(repo: &gix::Repository, from: ObjectId, to: ObjectId) -> Result<Vec<FileChange>> {
    if from == to {
        return Ok(Vec::new());
    }
    let old = repo.find_tree(from).internal(format_args!("cannot read tree {from}"))?;
    let new = repo.find_tree(to).internal(format_args!("cannot read tree {to}"))?;
    let mut out = Vec::new();
    let mut platform = old.changes().internal("cannot diff trees")?;
    platform.options(|o| {
        o.track_path().track_rewrites(None);
    });
    platform
        .for_each_to_obtain_tree(&new, |ch| {
            use gix::object::tree::diff::Change;
            let (path, old, new) = match ch {
                Change::Addition { location, entry_mode, id, .. } => {
                    (location, None, Some((id.detach(), entry_mode.kind())))
                }
                Change::Deletion { location, entry_mode, id, .. } => {
                    (location, Some((id.detach(), entry_mode.kind())), None)
                }
                Change::Modification { location, previous_entry_mode, previous_id, entry_mode, id } => (
                    location,
                    Some((previous_id.detach(), previous_entry_mode.kind())),
                    Some((id.detach(), entry_mode.kind())),
                ),
                Change::Rewrite { .. } => unreachable!("rewrite tracking is off"),
            };
            let old = old.filter(|(_, k)| *k != EntryKind::Tree);
            let new = new.filter(|(_, k)| *k != EntryKind::Tree);
            if old.is_some() || new.is_some() {
                out.push(FileChange { path: path.to_owned(), old, new });
            }
            Ok(std::ops::ControlFlow::Continue(()))
        })
        .internal("cannot diff trees")?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
