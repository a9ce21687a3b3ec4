//! A glob of the plan compiled for the checks: its normal form, matcher and automaton, why a glob
//! or the `prd:` path cannot be used, whether two globs meet, and git's rules for branch names.
use std::borrow::Cow;
use std::cell::OnceCell;

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use crate::plan::globs::{self, Shape};
use crate::plan::parse::quote;

/// A glob as written, turned into the form that is matched: leading `./` dropped, a trailing `/`
/// meaning the whole directory (`src/auth/` → `src/auth/**`).
pub(super) fn normalize(glob: &str) -> Cow<'_, str> {
    let mut g = glob;
    while let Some(rest) = g.strip_prefix("./") {
        g = rest;
    }
    if g.ends_with('/') && !g.is_empty() {
        Cow::Owned(format!("{g}**"))
    } else {
        Cow::Borrowed(g)
    }
}

/// Why one glob cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobProblem {
    #[error("it is empty")]
    Empty,
    #[error("it is absolute; globs are relative to the repository root")]
    Absolute,
    #[error("it contains a `..` component; globs cannot reach outside the repository")]
    Parent,
    /// The glob syntax is wrong (an unclosed `[`, …).
    #[error("{0}")]
    Syntax(globset::ErrorKind),
}

/// Why a list of globs cannot be compiled: the first bad glob and why.
#[derive(Debug, thiserror::Error)]
pub enum GlobError {
    #[error("invalid glob {}: {problem}", quote(glob))]
    Invalid {
        glob: String,
        #[source]
        problem: GlobProblem,
    },
    #[error("the globs cannot be compiled together: {0}")]
    Set(#[source] globset::Error),
}

/// How a path written in the plan (a glob, the PRD) reaches outside the repository as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outside {
    /// `/x`, `\x` or `C:x`.
    Absolute,
    /// A `..` component.
    Parent,
}

/// Whether `path`, relative to the repository root, leaves the repository as written.
fn outside(path: &str) -> Option<Outside> {
    let bytes = path.as_bytes();
    if path.starts_with('/')
        || path.starts_with('\\')
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
    {
        return Some(Outside::Absolute);
    }
    if path.split(['/', '\\']).any(|c| c == "..") {
        return Some(Outside::Parent);
    }
    None
}

/// Why the plan's `prd:` path cannot be used: it is relative to the repository root and must
/// stay inside the repository (a symlink leading out is refused where the PRD is read, see
/// [`crate::workspace::Workspace::prd_path`]). The message names the path; [`PRD_HINT`] says the fix.
pub fn prd_problem(prd: &str) -> Option<String> {
    let why = match outside(prd)? {
        Outside::Absolute => "it is absolute; the PRD path is relative to the repository root",
        Outside::Parent => "it contains a `..` component; the PRD must be inside the repository",
    };
    Some(format!("prd {}: {why}", quote(prd)))
}

/// The fix for a `prd:` path that leaves the repository.
pub const PRD_HINT: &str = "set `prd:` in .boulder/streams.yaml to the PRD's path inside the repository (default \
     .agents/tasks/prd.md); to read a file elsewhere, pass it yourself with --prd PATH";

/// Why a glob cannot be used, or the compiled glob.
fn build_glob(glob: &str) -> Result<Glob, GlobProblem> {
    if glob.trim().is_empty() {
        return Err(GlobProblem::Empty);
    }
    match outside(glob) {
        Some(Outside::Absolute) => return Err(GlobProblem::Absolute),
        Some(Outside::Parent) => return Err(GlobProblem::Parent),
        None => {}
    }
    GlobBuilder::new(&normalize(glob))
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| GlobProblem::Syntax(e.kind().clone()))
}

/// Compile globs with the plan's semantics (see the module docs of [`crate::plan`]): `*` stays
/// within one path component, `**` crosses directories, a trailing `/` means the whole directory.
/// The error names the first bad glob and why.
pub fn compile_globs(globs: &[String]) -> Result<GlobSet, GlobError> {
    let mut set = GlobSetBuilder::new();
    for g in globs {
        set.add(build_glob(g).map_err(|problem| GlobError::Invalid { glob: g.clone(), problem })?);
    }
    set.build().map_err(GlobError::Set)
}

pub(super) fn is_meta(c: char) -> bool {
    matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\')
}

/// The part of a glob before its first wildcard (`src/auth/**` → `src/auth/`,
/// `src/middleware/auth*` → `src/middleware/auth`); a leading `./` is skipped. Every path the glob
/// matches starts with it.
pub fn literal_prefix(glob: &str) -> &str {
    let mut g = glob;
    while let Some(rest) = g.strip_prefix("./") {
        g = rest;
    }
    match g.find(is_meta) {
        Some(i) => &g[..i],
        None => g,
    }
}

/// The part after the last wildcard; every path the glob matches ends with it.
fn literal_suffix(glob: &str) -> &str {
    match glob.rfind(is_meta) {
        Some(i) => &glob[i + 1..],
        None => glob,
    }
}

/// The number of path components every match has, when the glob fixes it.
fn fixed_depth(glob: &str) -> Option<usize> {
    if glob.contains("**") || glob.contains(['{', '[', '\\']) {
        None
    } else {
        Some(glob.matches('/').count() + 1)
    }
}

/// A stream's (or shared_read's) usable glob.
pub(crate) struct Compiled {
    pub(super) text: String,
    pub(super) norm: String,
    pub(super) glob: Glob,
    pub(super) matcher: GlobMatcher,
    /// Its automaton, made when first compared with another glob.
    shape: OnceCell<Option<Shape>>,
}

impl Compiled {
    /// Whether the glob matches `path` (the bytes of a path, as git gives them).
    #[cfg(test)]
    pub(crate) fn is_match(&self, path: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        self.matcher.is_match(std::path::Path::new(std::ffi::OsStr::from_bytes(path)))
    }
    fn shape(&self) -> Option<&Shape> {
        self.shape.get_or_init(|| globs::shape(&self.glob)).as_ref()
    }
}

pub(crate) fn compile_one(text: &str) -> Result<Compiled, GlobProblem> {
    let glob = build_glob(text)?;
    Ok(Compiled {
        text: text.to_string(),
        norm: normalize(text).into_owned(),
        matcher: glob.compile_matcher(),
        glob,
        shape: OnceCell::new(),
    })
}

/// Whether two globs match a common path.
#[derive(Debug, PartialEq)]
pub(crate) enum Meet {
    No,
    /// They do; the shortest such path, when the exact test could answer.
    Yes(Option<String>),
}

/// Whether some path is matched by both globs: exactly, with the shortest such path, when both
/// have an automaton ([`globs::common_path`]); else by [`may_overlap`], which errs on the side
/// of yes.
pub(crate) fn meet(a: &Compiled, b: &Compiled) -> Meet {
    if let (Some(sa), Some(sb)) = (a.shape(), b.shape()) {
        match globs::common_path(sa, sb) {
            Ok(Some(path)) => return Meet::Yes(Some(String::from_utf8_lossy(&path).into_owned())),
            Ok(None) => return Meet::No,
            Err(()) => {}
        }
    }
    if may_overlap(a, b) {
        Meet::Yes(None)
    } else {
        Meet::No
    }
}

/// Could some path be matched by both globs? Errs on the side of yes: the fallback of [`meet`]
/// for globs too large for the exact test.
fn may_overlap(a: &Compiled, b: &Compiled) -> bool {
    if a.norm == b.norm {
        return true;
    }
    let (pa, pb) = (literal_prefix(&a.norm), literal_prefix(&b.norm));
    if !(pa.starts_with(pb) || pb.starts_with(pa)) {
        return false;
    }
    // A glob without wildcards is one path: ask the other glob.
    if pa.len() == a.norm.len() {
        return b.matcher.is_match(&a.norm);
    }
    if pb.len() == b.norm.len() {
        return a.matcher.is_match(&b.norm);
    }
    let (sa, sb) = (literal_suffix(&a.norm), literal_suffix(&b.norm));
    if !(sa.ends_with(sb) || sb.ends_with(sa)) {
        return false;
    }
    let (short, long_prefix) = if pa.len() <= pb.len() { (&a.norm, pb) } else { (&b.norm, pa) };
    // Every match of the longer-prefix glob has more components than its prefix's full ones.
    let min_long = long_prefix.matches('/').count() + 1;
    if let Some(d) = fixed_depth(short) {
        if d < min_long {
            return false;
        }
    }
    if let (Some(da), Some(db)) = (fixed_depth(&a.norm), fixed_depth(&b.norm)) {
        if da != db {
            return false;
        }
    }
    true
}

/// Why `branch` is not a usable branch name (the rules of `git check-ref-format --branch`).
pub fn branch_problem(branch: &str) -> Option<&'static str> {
    if branch.is_empty() {
        return Some("it is empty");
    }
    if branch.len() > 250 {
        return Some("it is longer than 250 bytes");
    }
    if branch.starts_with("refs/") {
        return Some("it starts with refs/; give the short branch name, e.g. boulder/auth");
    }
    if branch == "HEAD" || branch == "@" {
        return Some("it is reserved by git");
    }
    if branch.starts_with('-') {
        return Some("it starts with '-'");
    }
    if let Some(c) = branch.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Some(if c.is_whitespace() { "it contains whitespace" } else { "it contains a control character" });
    }
    if branch.contains(['~', '^', ':', '?', '*', '[', '\\']) {
        return Some("it contains one of ~ ^ : ? * [ \\");
    }
    if branch.contains("..") {
        return Some("it contains '..'");
    }
    if branch.contains("@{") {
        return Some("it contains '@{'");
    }
    if branch.starts_with('/') || branch.ends_with('/') || branch.contains("//") {
        return Some("it has an empty path component");
    }
    if branch.ends_with('.') {
        return Some("it ends with '.'");
    }
    for part in branch.split('/') {
        if part.starts_with('.') {
            return Some("a path component starts with '.'");
        }
        if part.ends_with(".lock") {
            return Some("a path component ends with '.lock'");
        }
    }
    None
}
