//! Files beside git's own in a new worktree: the main worktree's `info/exclude` entry that hides
//! the stream worktrees, and the untracked or ignored files (`.env`, `.worktreeinclude`) copied in.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};
use crate::git::Repo;

fn escape_ignore(rel: &str) -> String {
    let mut out = String::with_capacity(rel.len());
    for (i, c) in rel.chars().enumerate() {
        if matches!(c, '*' | '?' | '[' | '\\') || (i == 0 && matches!(c, '#' | '!')) {
            out.push('\\');
        }
        out.push(c);
    }
    if out.ends_with(' ') {
        let trimmed = out.trim_end_matches(' ').len();
        let spaces = out.len() - trimmed;
        out.truncate(trimmed);
        for _ in 0..spaces {
            out.push_str("\\ ");
        }
    }
    out
}

/// Add `/<rel_dir>/` to `$GIT_COMMON_DIR/info/exclude` (once), so the main worktree does not show
/// the stream worktrees as untracked. `rel_dir` is relative to the main worktree (e.g.
/// `.boulder/worktrees`); a path outside it needs no exclude. Returns whether the file changed.
pub fn exclude(repo: &Repo, rel_dir: &str) -> Result<bool> {
    let rel = rel_dir.replace('\\', "/");
    let rel = rel.trim_start_matches("./").trim_matches('/');
    if rel.is_empty() || rel == "." {
        return Ok(false);
    }
    if Path::new(rel).is_absolute() || rel.split('/').any(|c| c == "..") {
        return Ok(false);
    }
    let rel = rel.split('/').filter(|c| !c.is_empty() && *c != ".").collect::<Vec<_>>().join("/");
    let pattern = escape_ignore(&rel);
    let line = format!("/{pattern}/");
    let path = repo.common_dir.join("info").join("exclude");
    let existing = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::internal(format!("cannot read {}: {e}", path.display())).with_source(e)),
    };
    let text = String::from_utf8_lossy(&existing);
    let alt = format!("/{pattern}");
    if text.lines().map(str::trim_end).any(|l| l == line || l == alt || l == format!("{alt}/**")) {
        return Ok(false);
    }
    let mut new = existing.clone();
    if !new.is_empty() && !new.ends_with(b"\n") {
        new.push(b'\n');
    }
    new.extend_from_slice(line.as_bytes());
    new.push(b'\n');
    write_atomic(&path, &new)?;
    Ok(true)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::internal(format!("cannot create {}: {e}", dir.display())).with_source(e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::internal(format!("cannot write in {}: {e}", dir.display())).with_source(e))?;
    tmp.write_all(bytes)?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path).map_err(|e| Error::internal(format!("cannot write {}: {}", path.display(), e.error)))?;
    Ok(())
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', '{', '\\'])
}

/// Files under `dir` (relative to `root`), not following symlinked directories, skipping `.git`
/// and nested repositories or worktrees (a directory with a `.git` entry).
fn walk_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name() == ".git" {
            continue;
        }
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            if std::fs::symlink_metadata(path.join(".git")).is_ok() {
                continue;
            }
            walk_files(root, &path, out);
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_owned());
        }
    }
}

/// Copy the untracked or ignored files matching `globs` (gitignore-like globs relative to the main
/// worktree `main`, e.g. `.env`, `config/*.local`, `secrets/`; a matching directory copies its
/// files) into the worktree `wt`, keeping their relative paths and permissions. Never follows a
/// path out of either tree (symlinks resolving outside `main` are skipped), never descends into
/// `.git` or nested repositories/worktrees, never overwrites a file that exists in `wt`. Returns
/// the relative paths copied, sorted.
pub fn copy_files(main: &Path, wt: &Path, globs: &[String]) -> Result<Vec<PathBuf>> {
    copy_matching(main, wt, globs, &mut |_| true)
}

/// The file at the repository root that lists, in gitignore syntax, ignored files to copy into
/// new worktrees (the format Claude Code reads).
pub const WORKTREE_INCLUDE: &str = ".worktreeinclude";

/// The patterns of `main`'s `.worktreeinclude` as globs for [`copy_files`]: (included, negated).
/// gitignore syntax: `#` comments and blank lines are skipped, `!` negates, a trailing `/` names a
/// directory, a pattern with a `/` before its end is relative to the root, one without matches at
/// any depth. A missing file gives no patterns; a pattern with `..` or `.git`, or that cannot be a
/// glob, is refused with its line number.
pub fn worktree_include(main: &Path) -> Result<(Vec<String>, Vec<String>)> {
    let path = main.join(WORKTREE_INCLUDE);
    let text = match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => std::fs::read(&path)
            .map_err(|e| Error::internal(format!("cannot read {}: {e}", path.display())).with_source(e))?,
        // A symlink (possibly leading out of the repository) or a directory is not read.
        Ok(_) => {
            return Err(Error::usage(format!("{WORKTREE_INCLUDE} is not a regular file"))
                .hint(format!("make {WORKTREE_INCLUDE} a plain file at the repository root, or remove it")))
        }
        Err(_) => return Ok((Vec::new(), Vec::new())),
    };
    if text.len() > 1024 * 1024 {
        return Err(Error::usage(format!("{WORKTREE_INCLUDE} is larger than 1 MiB")));
    }
    let text = String::from_utf8_lossy(&text);
    let (mut include, mut exclude) = (Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (negated, pat) = match line.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, line.strip_prefix('\\').unwrap_or(line)),
        };
        let pat = pat.trim_end_matches('/');
        let anchored = pat.contains('/');
        let pat = pat.trim_start_matches('/');
        let bad = pat.is_empty()
            || pat.split('/').any(|c| c == ".." || c == ".git")
            || globset::GlobBuilder::new(pat).literal_separator(true).build().is_err();
        if bad {
            return Err(Error::usage(format!(
                "{WORKTREE_INCLUDE} line {}: {:?} is not a pattern of files inside the repository",
                n + 1,
                crate::text::inert_lines(line)
            ))
            .hint(format!("use gitignore patterns without '..' or .git in {WORKTREE_INCLUDE}")));
        }
        let glob = if anchored { pat.to_string() } else { format!("**/{pat}") };
        if negated {
            exclude.push(glob);
        } else {
            include.push(glob);
        }
    }
    Ok((include, exclude))
}

/// Copy the files that `main`'s `.worktreeinclude` names and that git ignores in `main` into the
/// worktree `wt`, as [`copy_files`] does (same protections). Returns the relative paths copied.
pub fn copy_included(main: &Path, wt: &Path) -> Result<Vec<PathBuf>> {
    let (include, exclude) = worktree_include(main)?;
    if include.is_empty() {
        return Ok(Vec::new());
    }
    let mut negated = globset::GlobSetBuilder::new();
    for g in &exclude {
        if let Ok(glob) = globset::GlobBuilder::new(g).literal_separator(true).build() {
            negated.add(glob);
        }
    }
    let negated = negated
        .build()
        .map_err(|e| Error::usage(format!("invalid {WORKTREE_INCLUDE} patterns: {e}")).with_source(e))?;
    let copied = crate::git::ignore::with_ignored(main, |ignored| {
        let mut keep = |rel: &Path| -> bool {
            let negated_here = negated.is_match(rel)
                || rel.ancestors().skip(1).any(|a| !a.as_os_str().is_empty() && negated.is_match(a));
            if negated_here {
                return false;
            }
            // Only ignored files are copied (tracked ones are in the checkout): the file itself or a
            // folder it is in must be excluded.
            let file = ignored.is_excluded(rel, false);
            file || rel.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()).any(|a| ignored.is_excluded(a, true))
        };
        copy_matching(main, wt, &include, &mut keep)
    })?;
    Ok(copied.unwrap_or_default())
}

fn copy_matching(
    main: &Path,
    wt: &Path,
    globs: &[String],
    keep: &mut dyn FnMut(&Path) -> bool,
) -> Result<Vec<PathBuf>> {
    let main_real = std::fs::canonicalize(main)
        .map_err(|e| Error::internal(format!("cannot read {}: {e}", main.display())).with_source(e))?;
    let wt_real = std::fs::canonicalize(wt)
        .map_err(|e| Error::internal(format!("cannot read {}: {e}", wt.display())).with_source(e))?;
    let mut builder = globset::GlobSetBuilder::new();
    let mut roots: BTreeSet<PathBuf> = BTreeSet::new();
    for g in globs {
        let g = g.trim().trim_start_matches("./").trim_end_matches('/');
        if g.is_empty() {
            continue;
        }
        let bad = Path::new(g).is_absolute() || g.starts_with('/') || g.split('/').any(|c| c == ".." || c == ".git");
        if bad {
            return Err(Error::usage(format!(
                "copy_into_worktree entry {g:?} must be a path inside the repository (no '..', no absolute path, not .git)"
            )));
        }
        let glob = globset::GlobBuilder::new(g).literal_separator(true).build().map_err(|e| {
            Error::usage(format!("copy_into_worktree entry {g:?} is not a valid glob: {e}")).with_source(e)
        })?;
        builder.add(glob);
        // Walk only below the literal prefix of the glob.
        let prefix: PathBuf = g.split('/').take_while(|c| !has_glob_meta(c)).collect();
        roots.insert(prefix);
    }
    let set =
        builder.build().map_err(|e| Error::usage(format!("invalid copy_into_worktree globs: {e}")).with_source(e))?;

    let mut candidates = Vec::new();
    for root in &roots {
        let start = main_real.join(root);
        match std::fs::symlink_metadata(&start) {
            Ok(m) if m.is_dir() => {
                if !root.as_os_str().is_empty() && std::fs::symlink_metadata(start.join(".git")).is_ok() {
                    continue;
                }
                walk_files(&main_real, &start, &mut candidates)
            }
            Ok(_) => candidates.push(root.clone()),
            Err(_) => {}
        }
    }
    candidates.sort();
    candidates.dedup();

    let mut copied = Vec::new();
    for rel in candidates {
        let selected =
            set.is_match(&rel) || rel.ancestors().skip(1).any(|a| !a.as_os_str().is_empty() && set.is_match(a));
        if !selected || rel.components().any(|c| !matches!(c, Component::Normal(_))) || !keep(&rel) {
            continue;
        }
        let src = main_real.join(&rel);
        // Follow a symlink only when it stays inside the main worktree.
        let Ok(real_src) = std::fs::canonicalize(&src) else { continue };
        if !real_src.starts_with(&main_real) || !real_src.is_file() {
            continue;
        }
        let dest = wt_real.join(&rel);
        if std::fs::symlink_metadata(&dest).is_ok() {
            continue;
        }
        // Every existing ancestor inside the worktree must be a real directory (no symlink out).
        let mut ok = true;
        let mut cur = wt_real.clone();
        for c in rel.parent().map(|p| p.components().collect::<Vec<_>>()).unwrap_or_default() {
            cur.push(c);
            match std::fs::symlink_metadata(&cur) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    ok = false;
                    break;
                }
                Err(_) => {
                    if std::fs::create_dir(&cur).is_err() {
                        ok = false;
                        break;
                    }
                }
            }
        }
        if !ok {
            continue;
        }
        let mut from = std::fs::File::open(&real_src)
            .map_err(|e| Error::internal(format!("cannot read {}: {e}", src.display())).with_source(e))?;
        let mut to = match std::fs::OpenOptions::new().write(true).create_new(true).open(&dest) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::internal(format!("cannot write {}: {e}", dest.display())).with_source(e)),
        };
        std::io::copy(&mut from, &mut to)
            .map_err(|e| Error::internal(format!("cannot write {}: {e}", dest.display())).with_source(e))?;
        if let Ok(meta) = from.metadata() {
            let _ = to.set_permissions(meta.permissions());
        }
        copied.push(rel);
    }
    Ok(copied)
}

// ---------------------------------------------------------------------------------------------
// list, dirt, ahead/behind

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worktree_escape_ignore_patterns() {
        assert_eq!(escape_ignore(".boulder/worktrees"), ".boulder/worktrees");
        assert_eq!(escape_ignore("a*b"), "a\\*b");
        assert_eq!(escape_ignore("#x"), "\\#x");
        assert_eq!(escape_ignore("x "), "x\\ ");
    }
}
