//! Keeping history views readable: git-boulder's state lives in refs (`refs/boulder/*`,
//! `refs/boulder-remotes/*`) and notes (`refs/notes/boulder`) whose commits `git log --all`, gitk
//! and tig would otherwise draw beside the user's branches. [`exclude_decorations`] sets
//! `log.excludeDecoration` so those refs never label the user's commits, and [`HIDE_ARGS`] is what
//! to give `git log`, gitk or tig in place of a bare `--all`.

use crate::error::{Error, Result};
use crate::git::config::ConfigFile;
use crate::git::Repo;

pub use crate::git::refs::{DECORATION_EXCLUDES, HIDE_ARGS};

/// Add (with `undo`, remove) [`DECORATION_EXCLUDES`] to `log.excludeDecoration` in the
/// repository's config file, leaving every other value as it is. Returns the `±key value` lines
/// changed.
pub fn exclude_decorations(repo: &Repo, undo: bool) -> Result<Vec<String>> {
    let path = repo.common_dir.join("config");
    let mut file = ConfigFile::read(&path)?;
    let mut changed = Vec::new();
    let mut now_empty = false;
    {
        let mut section = file.section("log", None).map_err(|e| Error::internal(format!("cannot edit log.*: {e}")))?;
        let now: Vec<String> = section.values("excludeDecoration");
        if undo {
            let kept: Vec<&String> = now.iter().filter(|v| !DECORATION_EXCLUDES.contains(&v.as_str())).collect();
            if kept.len() != now.len() {
                section.remove_all("excludeDecoration");
                for v in &kept {
                    section.push("excludeDecoration", v)?;
                }
                for v in now.iter().filter(|v| DECORATION_EXCLUDES.contains(&v.as_str())) {
                    changed.push(format!("-log.excludeDecoration {v}"));
                }
                now_empty = section.num_values() == 0;
            }
        } else {
            for pattern in DECORATION_EXCLUDES.iter().filter(|p| !now.iter().any(|v| v == *p)) {
                section.push("excludeDecoration", pattern)?;
                changed.push(format!("+log.excludeDecoration {pattern}"));
            }
        }
    }
    if now_empty {
        // The section held only what setup added: remove it, so undo restores the file.
        file.remove_section("log", None);
    }
    if !changed.is_empty() {
        crate::fsutil::write_atomic(&path, &file.to_bytes()?)?;
    }
    Ok(changed)
}
