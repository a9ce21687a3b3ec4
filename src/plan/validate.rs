//! Checks on a parsed [`Plan`]: names, branches, stories, globs, dependencies, agents and path
//! overlap. Every problem is a [`Finding`] naming the things involved, with a hint saying the fix.
//!
//! Overlap between two streams comes in two kinds, reported per `settings.path_overlap`:
//! * **concrete** (`overlap`): files of HEAD's tree matched by globs of both streams; at most
//!   [`MAX_FILES_SHOWN`] are named per pair, with the count of the rest;
//! * **potential** (`potential_overlap`): globs of two streams that match a common path even
//!   though no such file exists yet, with the shortest such path as the example. Decided exactly
//!   ([`super::globs`]): brace alternatives, character classes, `*`, `?` and `**` mean what they
//!   mean when the globs are matched, so `docs/{routing,pinia}.md` and `docs/{elk,todo}.md`, or
//!   `docs/[rp]*.md` and `docs/[et]*.md`, do not overlap, and `src/**` and `src/a/*.rs` do
//!   (`src/a/a.rs`). A pair of streams with a concrete overlap is not reported again as
//!   potential: fixing the concrete one usually fixes both.
//!
//! A glob of a stream's `paths` that matches no file of the tree is a warning (`no_match`),
//! unless the stream lists it under `creates:` (files it will add).
//!
//! `shared_read` globs that overlap a stream's paths are warnings (`shared_read`), whatever
//! `path_overlap` says: the stream may not change those files after all.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use super::globs::{self, Shape};
use super::parse::{closest, quote};
use super::{Finding, Level, Plan, Severity, StreamDef};

/// Files named per overlapping pair; the rest are counted.
pub const MAX_FILES_SHOWN: usize = 10;
/// Glob pairs named per potentially overlapping pair of streams.
const MAX_GLOB_PAIRS_SHOWN: usize = 5;
/// Glob-pair comparisons before the potential-overlap check gives up (hostile plans only).
const PAIR_BUDGET: usize = 2_000_000;

/// A glob as written, turned into the form that is matched: leading `./` dropped, a trailing `/`
/// meaning the whole directory (`src/auth/` → `src/auth/**`).
fn normalize(glob: &str) -> Cow<'_, str> {
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

fn is_meta(c: char) -> bool {
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
pub(super) struct Compiled {
    text: String,
    norm: String,
    glob: Glob,
    matcher: GlobMatcher,
    /// Its automaton, made when first compared with another glob.
    shape: OnceCell<Option<Shape>>,
}

impl Compiled {
    /// Whether the glob matches `path` (the bytes of a path, as git gives them).
    #[cfg(test)]
    pub(super) fn is_match(&self, path: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        self.matcher.is_match(std::path::Path::new(std::ffi::OsStr::from_bytes(path)))
    }
    fn shape(&self) -> Option<&Shape> {
        self.shape.get_or_init(|| globs::shape(&self.glob)).as_ref()
    }
}

pub(super) fn compile_one(text: &str) -> Result<Compiled, GlobProblem> {
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
pub(super) enum Meet {
    No,
    /// They do; the shortest such path, when the exact test could answer.
    Yes(Option<String>),
}

/// Whether some path is matched by both globs: exactly, with the shortest such path, when both
/// have an automaton ([`globs::common_path`]); else by [`may_overlap`], which errs on the side
/// of yes.
pub(super) fn meet(a: &Compiled, b: &Compiled) -> Meet {
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

fn list(names: &[&str]) -> String {
    let q: Vec<String> = names.iter().map(|n| quote(n)).collect();
    match q.len() {
        0 => String::new(),
        1 => q[0].clone(),
        n => format!("{} and {}", q[..n - 1].join(", "), q[n - 1]),
    }
}

fn at(s: &StreamDef) -> String {
    if s.line > 0 {
        format!(" (line {})", s.line)
    } else {
        String::new()
    }
}

struct Check<'a> {
    plan: &'a Plan,
    out: Vec<Finding>,
}

impl Check<'_> {
    fn push(&mut self, severity: Severity, code: &'static str, message: String, hint: impl Into<String>) {
        let hint = hint.into();
        self.out.push(Finding { severity, code, message, hint: (!hint.is_empty()).then_some(hint) });
    }
    fn error(&mut self, code: &'static str, message: String, hint: impl Into<String>) {
        self.push(Severity::Error, code, message, hint)
    }
    fn warn(&mut self, code: &'static str, message: String, hint: impl Into<String>) {
        self.push(Severity::Warning, code, message, hint)
    }
}

/// Validate a parsed plan. `story_ids` are the PRD's ids (`None` when there is no PRD to check
/// against); `tree_paths` are the files of HEAD's tree, for concrete overlap and globs that match
/// nothing (not reported when the tree is empty). Findings come in a fixed order: the PRD's path,
/// names, branches, stories, globs (invalid, bare directories, matching nothing), dependencies,
/// agents, overlap.
pub fn validate(plan: &Plan, story_ids: Option<&[String]>, tree_paths: &[String]) -> Vec<Finding> {
    let mut c = Check { plan, out: Vec::new() };
    if let Some(message) = prd_problem(&plan.prd) {
        c.error("prd", message, PRD_HINT);
    }
    if plan.streams.is_empty() {
        c.warn(
            "no_streams",
            "the plan defines no streams".into(),
            "add streams under `streams:`, or let `git boulder stream suggest` propose them from the PRD",
        );
    }
    names(&mut c);
    branches(&mut c);
    stories(&mut c, story_ids);
    let globs = globs(&mut c);
    let owners = owners_of_files(&globs, tree_paths);
    let bare = bare_directories(&mut c, tree_paths);
    no_match(&mut c, &globs, &owners, &bare, tree_paths);
    dependencies(&mut c);
    agents(&mut c);
    overlap(&mut c, &globs, &owners);
    c.out
}

fn names(c: &mut Check) {
    let mut seen = HashSet::new();
    for s in &c.plan.streams {
        if let Some(why) = crate::names::problem(&s.name) {
            c.error(
                "name",
                format!("invalid stream name {}{}: {why}", quote(&s.name), at(s)),
                "names may use letters, digits, '.', '_' and '-', must not start with '.' or '-', contain '..' or end in '.lock'",
            );
        }
        if !seen.insert(s.name.as_str()) {
            c.error("name", format!("stream {} is defined twice", quote(&s.name)), "give each stream its own name");
        }
    }
}

fn branches(c: &mut Check) {
    let base = c.plan.settings.base_branch.as_str();
    if let Some(why) = branch_problem(base) {
        c.error(
            "branch",
            format!("settings.base_branch {} is not a valid branch name: {why}", quote(base)),
            "set settings.base_branch to the branch streams start from and merge into, e.g. main",
        );
    }
    let mut owner: HashMap<&str, &str> = HashMap::new();
    for s in &c.plan.streams {
        let default = format!("leave `branch` out to use boulder/{}", s.name);
        // A bad name makes a bad default branch; the name finding already says so.
        let defaulted = s.branch == format!("boulder/{}", s.name);
        if defaulted && crate::names::problem(&s.name).is_some() {
            continue;
        }
        if let Some(why) = branch_problem(&s.branch) {
            c.error(
                "branch",
                format!("stream {}{} has an invalid branch {}: {why}", quote(&s.name), at(s), quote(&s.branch)),
                format!("use a name like boulder/{}, or {default}", s.name),
            );
            continue;
        }
        if s.branch == base {
            c.error(
                "branch",
                format!("stream {}{} uses the base branch {} as its own branch", quote(&s.name), at(s), quote(base)),
                format!("a stream works on its own branch and merges into the base; {default}"),
            );
        }
        match owner.get(s.branch.as_str()) {
            Some(first) if *first != s.name => {
                let msg = format!("streams {} both use branch {}", list(&[first, &s.name]), quote(&s.branch));
                c.error("branch", msg, format!("give each stream its own branch; {default}"));
            }
            Some(_) => {}
            None => {
                owner.insert(&s.branch, &s.name);
            }
        }
    }
}

fn stories(c: &mut Check, story_ids: Option<&[String]>) {
    // story → streams it is listed in, in order of first appearance.
    let mut order: Vec<&str> = Vec::new();
    let mut streams_of: HashMap<&str, Vec<&str>> = HashMap::new();
    let known: Option<HashSet<&str>> = story_ids.map(|ids| ids.iter().map(String::as_str).collect());
    for s in &c.plan.streams {
        // An ad-hoc stream (state, not the plan file) has no stories until the plan names it.
        if s.stories.is_empty() && !s.adhoc {
            c.warn(
                "no_stories",
                format!("stream {}{} has no stories", quote(&s.name), at(s)),
                "assign stories of the PRD with `stories: [US-001, …]`; a stream without stories has nothing to run",
            );
        }
        let mut unknown: Vec<&str> = Vec::new();
        for id in &s.stories {
            let entry = streams_of.entry(id).or_default();
            // Listed before by this very stream (this definition, not another of the same name):
            // its name is the last the story was listed by.
            if entry.last().is_some_and(|last| std::ptr::eq(*last, s.name.as_str())) {
                c.warn(
                    "duplicate_story",
                    format!("story {} is listed twice in stream {}", quote(id), quote(&s.name)),
                    "list each story once",
                );
                continue;
            }
            if entry.is_empty() {
                order.push(id);
            }
            entry.push(&s.name);
            if let Some(known) = &known {
                if !known.contains(id.as_str()) {
                    unknown.push(id);
                }
            }
        }
        if !unknown.is_empty() {
            let ids: Vec<String> = unknown.iter().map(|i| quote(i)).collect();
            let hint = match unknown.iter().find_map(|u| closest(u, known.iter().flatten().copied())) {
                Some(near) if unknown.len() == 1 => format!(
                    "did you mean {}? The PRD is {}; `git boulder prd show` lists its ids",
                    quote(near),
                    c.plan.prd
                ),
                _ => format!("check the ids in {} (`git boulder prd show` lists them), or remove these", c.plan.prd),
            };
            c.error(
                "unknown_story",
                format!("stream {}{} lists stories the PRD lacks: {}", quote(&s.name), at(s), ids.join(", ")),
                hint,
            );
        }
    }
    for id in order {
        let streams = &streams_of[id];
        if streams.len() > 1 {
            c.error(
                "duplicate_story",
                format!("story {} is assigned to streams {}", quote(id), list(streams)),
                "assign each story to exactly one stream; remove it from the others",
            );
        }
    }
}

/// Report bad globs; return each stream's usable globs, then shared_read's (last entry).
fn globs(c: &mut Check) -> Vec<Vec<Compiled>> {
    let hint = "globs are relative to the repository root: `*` stays within a directory, `**` crosses \
                directories (src/auth/**), a trailing `/` means the whole directory";
    let mut out = Vec::new();
    let compile = |c: &mut Check, what: String, globs: &[String]| -> Vec<Compiled> {
        let mut ok = Vec::new();
        for g in globs {
            match compile_one(g) {
                Ok(compiled) => ok.push(compiled),
                Err(why) => c.error("glob", format!("{what}: invalid glob {}: {why}", quote(g)), hint),
            }
        }
        ok
    };
    for s in &c.plan.streams {
        out.push(compile(c, format!("stream {}{}", quote(&s.name), at(s)), &s.paths));
    }
    let shared = compile(c, "settings.shared_read".into(), &c.plan.settings.shared_read);
    compile(c, "settings.copy_into_worktree".into(), &c.plan.settings.copy_into_worktree);
    out.push(shared);
    out
}

/// A path without wildcards names one path; when that is a directory of HEAD's tree, the stream
/// owns nothing below it (`src/auth` owns neither `src/auth/mod.rs` nor anything else). Returns
/// the (stream index, glob) pairs it reported.
fn bare_directories(c: &mut Check, tree_paths: &[String]) -> HashSet<(usize, String)> {
    let mut reported = HashSet::new();
    // Sorted once: whether a path is a file, or has files below it, is a binary search.
    let mut sorted: Vec<&str> = tree_paths.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let first_from = |prefix: &str| sorted.get(sorted.partition_point(|p| *p < prefix)).copied();
    for (i, s) in c.plan.streams.iter().enumerate() {
        for g in &s.paths {
            let lit = normalize(g);
            if lit.is_empty() || lit.contains(is_meta) || first_from(&lit) == Some(&*lit) {
                continue;
            }
            let below = format!("{lit}/");
            if first_from(&below).is_some_and(|p| p.starts_with(&below)) {
                c.warn(
                    "bare_directory",
                    format!(
                        "stream {}{}: path {} is a directory; a path without wildcards owns only itself, so nothing below it",
                        quote(&s.name),
                        at(s),
                        quote(g)
                    ),
                    format!("write {} to own everything below it", quote(&format!("{lit}/**"))),
                );
                reported.insert((i, g.clone()));
            }
        }
    }
    reported
}

/// A glob of a stream's `paths` that matches no file of the tree, unless the stream lists it
/// under `creates:` or it names a directory (reported by [`bare_directories`]).
fn no_match(
    c: &mut Check,
    globs: &[Vec<Compiled>],
    owners: &Owners,
    bare: &HashSet<(usize, String)>,
    tree_paths: &[String],
) {
    if tree_paths.is_empty() {
        return;
    }
    for (i, s) in c.plan.streams.iter().enumerate() {
        let mut none: Vec<&str> = Vec::new();
        for (k, g) in globs[i].iter().enumerate() {
            if owners.matched[i][k] || s.creates.contains(&g.text) || bare.contains(&(i, g.text.clone())) {
                continue;
            }
            none.push(&g.text);
        }
        if none.is_empty() {
            continue;
        }
        let (what, it) = if none.len() == 1 { ("glob", "it") } else { ("globs", "them") };
        c.warn(
            "no_match",
            format!("stream {}{}: {what} {} {} no file in the tree", quote(&s.name), at(s), list(&none), if none.len() == 1 { "matches" } else { "match" }),
            format!(
                "fix the paths to name files that exist, or, if the stream will add these files, list {it} under the stream's `creates:`"
            ),
        );
    }
}

fn dependencies(c: &mut Check) {
    let plan = c.plan;
    let index: HashMap<&str, usize> =
        plan.streams.iter().enumerate().rev().map(|(i, s)| (s.name.as_str(), i)).collect();
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); plan.streams.len()];
    for (i, s) in plan.streams.iter().enumerate() {
        for dep in &s.depends_on {
            if *dep == s.name {
                c.error(
                    "cycle",
                    format!("stream {}{} depends on itself", quote(&s.name), at(s)),
                    format!("remove {} from its own depends_on", quote(&s.name)),
                );
                continue;
            }
            match index.get(dep.as_str()) {
                Some(&j) => {
                    if !edges[i].contains(&j) {
                        edges[i].push(j)
                    }
                }
                None => {
                    let near = closest(dep, plan.streams.iter().map(|s| s.name.as_str()));
                    let near = near.map(|n| format!("; did you mean {}?", quote(n))).unwrap_or_default();
                    c.error(
                        "depends_on",
                        format!(
                            "stream {}{} depends on {}, which the plan does not define{near}",
                            quote(&s.name),
                            at(s),
                            quote(dep)
                        ),
                        "depends_on names other streams of this plan, which must be merged first",
                    );
                }
            }
        }
    }
    for cycle in find_cycles(&edges) {
        let mut names: Vec<&str> = cycle.iter().map(|&i| plan.streams[i].name.as_str()).collect();
        names.push(names[0]);
        c.error(
            "cycle",
            format!("dependency cycle: {}", names.join(" -> ")),
            "streams in a cycle can never be merged; remove one of these depends_on entries",
        );
    }
}

/// Cycles (of two or more nodes) found by an iterative depth-first search, each reported once
/// (by node set), starting at its first node in plan order.
fn find_cycles(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Color {
        White,
        Gray,
        Black,
    }
    let n = edges.len();
    let mut color = vec![Color::White; n];
    let mut found: Vec<Vec<usize>> = Vec::new();
    let mut seen_sets: HashSet<BTreeSet<usize>> = HashSet::new();
    for root in 0..n {
        if color[root] != Color::White {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        color[root] = Color::Gray;
        while let Some(top) = stack.last_mut() {
            let node = top.0;
            if let Some(&to) = edges[node].get(top.1) {
                top.1 += 1;
                match color[to] {
                    Color::White => {
                        color[to] = Color::Gray;
                        stack.push((to, 0));
                    }
                    Color::Gray => {
                        let start = stack.iter().position(|&(v, _)| v == to).unwrap_or(0);
                        let mut cycle: Vec<usize> = stack[start..].iter().map(|&(v, _)| v).collect();
                        if let Some(min_pos) = (0..cycle.len()).min_by_key(|&k| cycle[k]) {
                            cycle.rotate_left(min_pos);
                        }
                        if found.len() < 100 && seen_sets.insert(cycle.iter().copied().collect()) {
                            found.push(cycle);
                        }
                    }
                    Color::Black => {}
                }
            } else {
                color[node] = Color::Black;
                stack.pop();
            }
        }
    }
    found
}

fn agents(c: &mut Check) {
    let agents = &c.plan.settings.agents;
    for s in &c.plan.streams {
        let Some(agent) = &s.agent else { continue };
        if agents.contains_key(agent) {
            continue;
        }
        let message = format!(
            "stream {}{} names agent {}, which settings.agents does not define",
            quote(&s.name),
            at(s),
            quote(agent)
        );
        if agents.is_empty() {
            // Seed plans name agents their runner knew; `stream run NAME -- CMD` still works.
            c.warn(
                "agent",
                message,
                format!("add it under settings.agents (e.g. {agent}: 'your-agent-command \"$BOULDER_PROMPT\"'), or run the stream with `git boulder stream run {} -- CMD`", s.name),
            );
        } else {
            let near = closest(agent, agents.keys().map(String::as_str));
            let known: Vec<&str> = agents.keys().map(String::as_str).collect();
            let hint = match near {
                Some(n) => format!("did you mean {}? Or add {} under settings.agents", quote(n), quote(agent)),
                None => format!("add {} under settings.agents; it defines {}", quote(agent), list(&known)),
            };
            c.error("agent", message, hint);
        }
    }
}

/// Files named in a message, capped.
struct Files {
    shown: Vec<String>,
    total: usize,
}

impl Files {
    fn add(&mut self, path: &str) {
        self.total += 1;
        if self.shown.len() < MAX_FILES_SHOWN {
            self.shown.push(path.to_string());
        }
    }
    fn describe(&self) -> String {
        let more = self.total - self.shown.len();
        if more > 0 {
            format!("{}, and {more} more", self.shown.join(", "))
        } else {
            self.shown.join(", ")
        }
    }
}

/// What the files of the tree tell about the globs: which streams own the same files (by pair of
/// stream indexes), which streams own files that `shared_read` makes read-only, each with the
/// files, and which of each stream's globs match a file at all.
struct Owners {
    pairs: BTreeMap<(usize, usize), Files>,
    shared: BTreeMap<usize, Files>,
    /// `matched[i][k]`: glob `k` of stream `i` matches a file of the tree.
    matched: Vec<Vec<bool>>,
}

/// [`Owners`] of `globs` (each stream's, then shared_read's): one pass over the tree, matching
/// each path against all globs at once.
fn owners_of_files(globs: &[Vec<Compiled>], tree_paths: &[String]) -> Owners {
    let (stream_globs, shared) = globs.split_at(globs.len() - 1);
    let shared = &shared[0];
    let mut owners: Vec<(usize, usize)> = Vec::new();
    let mut builder = GlobSetBuilder::new();
    for (i, gs) in stream_globs.iter().enumerate() {
        for (k, g) in gs.iter().enumerate() {
            builder.add(g.glob.clone());
            owners.push((i, k));
        }
    }
    let set = builder.build().ok();
    let shared_set = {
        let mut b = GlobSetBuilder::new();
        for g in shared {
            b.add(g.glob.clone());
        }
        b.build().ok()
    };
    let mut matched: Vec<Vec<bool>> = stream_globs.iter().map(|gs| vec![false; gs.len()]).collect();
    let mut pairs: BTreeMap<(usize, usize), Files> = BTreeMap::new();
    let mut shared_hits: BTreeMap<usize, Files> = BTreeMap::new();
    let mut hits: Vec<usize> = Vec::new();
    let mut found: Vec<usize> = Vec::new();
    for path in tree_paths {
        hits.clear();
        match &set {
            Some(set) => {
                set.matches_into(path.as_str(), &mut found);
                for &n in &found {
                    let (i, k) = owners[n];
                    matched[i][k] = true;
                    hits.push(i);
                }
            }
            // A set too large to build together: match glob by glob.
            None => {
                for (i, gs) in stream_globs.iter().enumerate() {
                    for (k, g) in gs.iter().enumerate() {
                        if g.matcher.is_match(path) {
                            matched[i][k] = true;
                            hits.push(i);
                        }
                    }
                }
            }
        }
        hits.sort_unstable();
        hits.dedup();
        if hits.is_empty() {
            continue;
        }
        for (a, &i) in hits.iter().enumerate() {
            for &j in &hits[a + 1..] {
                pairs.entry((i, j)).or_insert(Files { shown: Vec::new(), total: 0 }).add(path);
            }
        }
        let in_shared = match &shared_set {
            Some(s) => s.is_match(path.as_str()),
            None => shared.iter().any(|g| g.matcher.is_match(path)),
        };
        if in_shared {
            for &i in &hits {
                shared_hits.entry(i).or_insert(Files { shown: Vec::new(), total: 0 }).add(path);
            }
        }
    }
    Owners { pairs, shared: shared_hits, matched }
}

fn overlap(c: &mut Check, globs: &[Vec<Compiled>], owners: &Owners) {
    let plan = c.plan;
    let n = plan.streams.len();
    let (stream_globs, shared) = globs.split_at(n);
    let shared = &shared[0];
    let severity = match plan.settings.path_overlap {
        Level::Error => Some(Severity::Error),
        Level::Warn => Some(Severity::Warning),
        Level::Off => None,
    };

    let (pairs, shared_hits) = (&owners.pairs, &owners.shared);

    let name = |i: usize| plan.streams[i].name.as_str();
    let hint = "each file should belong to one stream: narrow the paths of one of them, move files both \
                only read to settings.shared_read, or set settings.path_overlap: ignore";
    let mut budget = PAIR_BUDGET;
    let mut gave_up = false;
    if let Some(severity) = severity {
        for ((i, j), files) in pairs {
            let msg = format!(
                "streams {} both own {} {}: {}",
                list(&[name(*i), name(*j)]),
                files.total,
                if files.total == 1 { "file" } else { "files" },
                files.describe()
            );
            c.push(severity, "overlap", msg, hint);
        }
        // Only globs whose literal prefixes are prefixes of one another can overlap (every path a
        // glob matches starts with its literal prefix): find those pairs through an index of the prefixes, not by
        // comparing every glob of every stream with every other (quadratic in the plan's size).
        let mut by_prefix: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
        for (i, gs) in stream_globs.iter().enumerate() {
            for (k, g) in gs.iter().enumerate() {
                by_prefix.entry(literal_prefix(&g.norm)).or_default().push((i, k));
            }
        }
        let mut candidates: BTreeSet<(usize, usize, usize, usize)> = BTreeSet::new();
        for (j, gs) in stream_globs.iter().enumerate() {
            for (l, g) in gs.iter().enumerate() {
                let prefix = literal_prefix(&g.norm);
                for end in (0..=prefix.len()).filter(|e| prefix.is_char_boundary(*e)) {
                    for &(i, k) in by_prefix.get(&prefix[..end]).into_iter().flatten() {
                        // Each pair once, streams in plan order.
                        match i.cmp(&j) {
                            std::cmp::Ordering::Less => candidates.insert((i, j, k, l)),
                            std::cmp::Ordering::Greater => candidates.insert((j, i, l, k)),
                            std::cmp::Ordering::Equal => false,
                        };
                    }
                }
            }
        }
        let mut current: Option<(usize, usize)> = None;
        let mut shown: Vec<String> = Vec::new();
        let mut total = 0usize;
        let flush = |pair: Option<(usize, usize)>, shown: &mut Vec<String>, total: &mut usize, c: &mut Check| {
            if let Some((i, j)) = pair {
                if *total > 0 {
                    let more = *total - shown.len();
                    let more = if more > 0 { format!(", and {more} more glob pairs") } else { String::new() };
                    let msg = format!(
                        "streams {} may own the same files: {}{more}",
                        list(&[name(i), name(j)]),
                        shown.join("; ")
                    );
                    c.push(severity, "potential_overlap", msg, hint);
                }
            }
            shown.clear();
            *total = 0;
        };
        for (i, j, k, l) in candidates {
            if pairs.contains_key(&(i, j)) || name(i) == name(j) {
                continue;
            }
            if current != Some((i, j)) {
                flush(current, &mut shown, &mut total, c);
                current = Some((i, j));
            }
            if budget == 0 {
                gave_up = true;
                break;
            }
            budget -= 1;
            let (a, b) = (&stream_globs[i][k], &stream_globs[j][l]);
            if let Meet::Yes(example) = meet(a, b) {
                total += 1;
                if shown.len() < MAX_GLOB_PAIRS_SHOWN {
                    let example = example.map(|p| format!(", both matching {}", quote(&p))).unwrap_or_default();
                    shown.push(format!(
                        "{} ({}) and {} ({}){example}",
                        quote(&a.text),
                        name(i),
                        quote(&b.text),
                        name(j)
                    ));
                }
            }
        }
        if !gave_up {
            flush(current, &mut shown, &mut total, c);
        }
    }

    for (i, s) in plan.streams.iter().enumerate() {
        let hint = format!(
            "shared_read files are read-only for every stream, so stream {} may not change them: narrow its paths \
             or drop the glob from settings.shared_read",
            quote(&s.name)
        );
        if let Some(files) = shared_hits.get(&i) {
            let msg = format!(
                "stream {} owns {} {} that settings.shared_read makes read-only: {}",
                quote(&s.name),
                files.total,
                if files.total == 1 { "file" } else { "files" },
                files.describe()
            );
            c.warn("shared_read", msg, hint);
            continue;
        }
        let mut shown = Vec::new();
        let mut total = 0usize;
        for a in &stream_globs[i] {
            for b in shared {
                if budget == 0 {
                    gave_up = true;
                    break;
                }
                budget -= 1;
                if meet(a, b) != Meet::No {
                    total += 1;
                    if shown.len() < MAX_GLOB_PAIRS_SHOWN {
                        shown.push(format!("{} overlaps {}", quote(&a.text), quote(&b.text)));
                    }
                }
            }
        }
        if total > 0 {
            let more = total - shown.len();
            let more = if more > 0 { format!(", and {more} more") } else { String::new() };
            let msg =
                format!("paths of stream {} overlap settings.shared_read: {}{more}", quote(&s.name), shown.join("; "));
            c.warn("shared_read", msg, hint);
        }
    }
    if gave_up {
        c.warn(
            "potential_overlap",
            format!("the plan has too many globs to compare every pair; stopped after {PAIR_BUDGET} comparisons"),
            "fewer, broader globs per stream keep `stream validate` complete",
        );
    }
}

/// The streams `names` ordered so that each comes after the streams it depends on (directly or
/// through streams not in `names`); ties keep the order of `names`. Errors name an unknown stream
/// or the dependency cycle (`a -> b -> a`).
pub fn topo_order(plan: &Plan, names: &[String]) -> Result<Vec<String>, String> {
    let index: HashMap<&str, usize> =
        plan.streams.iter().enumerate().rev().map(|(i, s)| (s.name.as_str(), i)).collect();
    let mut wanted: Vec<usize> = Vec::new();
    for n in names {
        let Some(&i) = index.get(n.as_str()) else {
            let near = closest(n, plan.streams.iter().map(|s| s.name.as_str()));
            let near = near.map(|x| format!("; did you mean {}?", quote(x))).unwrap_or_default();
            return Err(format!("unknown stream {}{near}", quote(n)));
        };
        if !wanted.contains(&i) {
            wanted.push(i);
        }
    }
    let edges: Vec<Vec<usize>> = plan
        .streams
        .iter()
        .map(|s| s.depends_on.iter().filter_map(|d| index.get(d.as_str()).copied()).collect())
        .collect();
    if let Some(cycle) = wanted.iter().find_map(|&w| cycle_through(&edges, w)) {
        let mut names: Vec<&str> = cycle.iter().map(|&i| plan.streams[i].name.as_str()).collect();
        names.push(names[0]);
        return Err(format!("dependency cycle: {}", names.join(" -> ")));
    }
    // before[k]: positions in `wanted` that must come before wanted[k].
    let pos: HashMap<usize, usize> = wanted.iter().enumerate().map(|(k, &i)| (i, k)).collect();
    let mut before: Vec<HashSet<usize>> = vec![HashSet::new(); wanted.len()];
    for (k, &w) in wanted.iter().enumerate() {
        let mut seen = vec![false; edges.len()];
        let mut todo = edges[w].clone();
        while let Some(v) = todo.pop() {
            if std::mem::replace(&mut seen[v], true) {
                continue;
            }
            if let Some(&p) = pos.get(&v) {
                before[k].insert(p);
            }
            todo.extend(edges[v].iter().copied());
        }
    }
    let mut done = vec![false; wanted.len()];
    let mut out = Vec::with_capacity(wanted.len());
    while out.len() < wanted.len() {
        let next = (0..wanted.len()).find(|&k| !done[k] && before[k].iter().all(|&p| done[p]));
        let Some(k) = next else {
            return Err("dependency cycle among the streams to order".into());
        };
        done[k] = true;
        out.push(plan.streams[wanted[k]].name.clone());
    }
    Ok(out)
}

/// A cycle through `start` (including a self-dependency), if any.
fn cycle_through(edges: &[Vec<usize>], start: usize) -> Option<Vec<usize>> {
    // Breadth-first search for the shortest path from a dependency of `start` back to `start`.
    let mut parent: Vec<Option<usize>> = vec![None; edges.len()];
    let mut visited = vec![false; edges.len()];
    let mut queue = std::collections::VecDeque::new();
    for &d in &edges[start] {
        if !visited[d] {
            visited[d] = true;
            queue.push_back(d);
        }
    }
    while let Some(v) = queue.pop_front() {
        if v == start {
            let mut path = vec![start];
            let mut cur = parent[start];
            while let Some(p) = cur {
                path.push(p);
                cur = parent[p];
            }
            // path: start, …, first dependency; reverse all but start.
            path[1..].reverse();
            return Some(path);
        }
        for &w in &edges[v] {
            if !visited[w] {
                visited[w] = true;
                parent[w] = Some(v);
                queue.push_back(w);
            }
        }
    }
    None
}
