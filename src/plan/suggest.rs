//! `stream suggest`: a stream plan proposed from the PRD. Pure: a parsed PRD (with HEAD's files
//! and a way to ask whether a branch exists) in, YAML text out.
//!
//! * Stories with an area in their id (`US-AUTH-01` → `auth`) are grouped by it.
//! * Other stories (Ralph's plain `US-001`) are grouped by what they share: a path glob, the area
//!   of a path (`src/billing/page.ts` → `billing`), or a distinctive word of their titles (one
//!   that is not common to most stories). A group is named after its most common path area, else
//!   its most common shared word. Stories that share nothing and name no path go together by
//!   wave (`wave-1`), else into one stream `other`.
//! * Each stream owns the globs of the paths its stories name: a directory (one HEAD has files
//!   below, one written with a trailing `/`, or a name without an extension) becomes `dir/**`, a
//!   file becomes its directory's `dir/**` (a file directly under a generic root like `src/`
//!   stays itself).
//! * A stream is never named like a branch that exists (or the base): `-work` is added, then a
//!   number.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::prd::Prd;

/// Directory names too generic to name an area on their own.
const GENERIC_ROOTS: &[&str] = &["src", "lib", "app", "apps", "pkg", "packages", "crates", "internal", "cmd", "source"];

/// Title words too common in PRDs to group stories by.
const STOPWORDS: &[&str] = &[
    "about",
    "able",
    "after",
    "allow",
    "allows",
    "also",
    "when",
    "with",
    "without",
    "from",
    "into",
    "that",
    "this",
    "then",
    "than",
    "them",
    "they",
    "their",
    "there",
    "have",
    "should",
    "must",
    "each",
    "every",
    "more",
    "most",
    "some",
    "using",
    "use",
    "make",
    "made",
    "show",
    "shows",
    "view",
    "page",
    "user",
    "users",
    "feature",
    "support",
    "add",
    "adds",
    "added",
    "create",
    "update",
    "implement",
    "basic",
    "initial",
    "new",
    "list",
    "data",
    "story",
    "only",
    "over",
    "under",
    "same",
    "work",
    "works",
    "text",
    "file",
    "files",
    "setup",
    "handle",
    "other",
];

/// What `propose` needs from the repository.
pub struct Repo<'a> {
    /// The files of HEAD's tree (to tell directories from files).
    pub tree_paths: &'a [String],
    /// Whether a local branch of this name exists.
    pub branch_exists: &'a dyn Fn(&str) -> bool,
}

/// One story's features.
struct Item {
    id: String,
    globs: Vec<String>,
    areas: Vec<String>,
    /// Sorted, each once.
    words: Vec<String>,
    wave: Option<String>,
}

fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// Propose the text of a `.boulder/streams.yaml` for `prd` (whose path relative to the work tree
/// is `prd_path`), with `base_branch` as the base.
pub fn propose(prd: &Prd, prd_path: &str, base_branch: &str, repo: &Repo) -> String {
    let tree = Tree::new(repo.tree_paths);
    let items: Vec<Item> = prd
        .stories
        .iter()
        .map(|story| {
            let globs: Vec<String> = named_paths(&story.text).iter().filter_map(|p| glob_for(p, &tree)).collect();
            let areas = globs.iter().filter_map(|g| path_area(g)).collect();
            Item { id: story.id.clone(), globs, areas, words: title_words(&story.title), wave: story.wave.clone() }
        })
        .collect();
    // Words shared by most stories say nothing about which belong together.
    let mut df: HashMap<&str, usize> = HashMap::new();
    for it in &items {
        for w in &it.words {
            *df.entry(w).or_default() += 1;
        }
    }
    let limit = (items.len() / 2).max(2);
    let distinctive = |w: &str| df.get(w).is_some_and(|n| *n >= 2 && *n <= limit);

    // Union stories without an id area that share a glob, an area or a distinctive word.
    let n = items.len();
    let mut parent: Vec<usize> = (0..n).collect();
    let keyed: Vec<Option<String>> = prd.stories.iter().map(|s| id_area(&s.id)).collect();
    // Features are (kind, text): a glob, an area or a word; which story had one first is all
    // that matters, not their order.
    let mut first_with: HashMap<(u8, &str), usize> = HashMap::new();
    for (i, it) in items.iter().enumerate() {
        if keyed[i].is_some() {
            continue;
        }
        let features = it
            .globs
            .iter()
            .map(|g| (b'g', g.as_str()))
            .chain(it.areas.iter().map(|a| (b'a', a.as_str())))
            .chain(it.words.iter().filter(|w| distinctive(w)).map(|w| (b'w', w.as_str())));
        for f in features {
            match first_with.get(&f) {
                Some(&j) => {
                    let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                    parent[a.max(b)] = a.min(b);
                }
                None => {
                    first_with.insert(f, i);
                }
            }
        }
    }
    // Name each story's group.
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..n {
        let r = find(&mut parent, i);
        members.entry(r).or_default().push(i);
    }
    // The most frequent value; of equally frequent ones, the first seen.
    let most_common = |list: &mut dyn Iterator<Item = &str>| -> Option<String> {
        let mut count: HashMap<&str, (usize, usize)> = HashMap::new();
        for (seen, x) in list.enumerate() {
            count.entry(x).or_insert((0, seen)).0 += 1;
        }
        count.into_iter().max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1))).map(|c| c.0.to_string())
    };
    let mut key_of: Vec<String> = vec![String::new(); n];
    for (i, key) in keyed.iter().enumerate() {
        if let Some(k) = key {
            key_of[i] = k.clone();
        }
    }
    for list in members.values() {
        if keyed[list[0]].is_some() {
            continue;
        }
        let alone = list.len() == 1 && items[list[0]].globs.is_empty();
        let key = if alone {
            items[list[0]].wave.as_ref().map(|w| format!("wave-{w}")).unwrap_or_else(|| "other".into())
        } else {
            most_common(&mut list.iter().flat_map(|&i| items[i].areas.iter().map(String::as_str)))
                .or_else(|| {
                    most_common(
                        &mut list
                            .iter()
                            .flat_map(|&i| items[i].words.iter().map(String::as_str).filter(|w| distinctive(w))),
                    )
                })
                .or_else(|| items[list[0]].wave.as_ref().map(|w| format!("wave-{w}")))
                .unwrap_or_else(|| "other".into())
        };
        for &i in list {
            key_of[i] = key.clone();
        }
    }

    // (stream name, stories, globs) in first-seen order.
    let mut groups: Vec<(String, Vec<String>, BTreeSet<String>)> = Vec::new();
    let mut group_of: HashMap<String, usize> = HashMap::new();
    // Group keys are few and shared by many stories: each is made a stream name once.
    let mut names: HashMap<&str, String> = HashMap::new();
    for (i, it) in items.iter().enumerate() {
        let key = names.entry(key_of[i].as_str()).or_insert_with(|| sanitize(&key_of[i])).clone();
        let idx = *group_of.entry(key.clone()).or_insert_with(|| {
            groups.push((key, Vec::new(), BTreeSet::new()));
            groups.len() - 1
        });
        groups[idx].1.push(it.id.clone());
        for g in &it.globs {
            if !groups[idx].2.contains(g) {
                groups[idx].2.insert(g.clone());
            }
        }
    }
    // Never a stream named like a branch that exists.
    let taken: Vec<String> = groups.iter().map(|g| g.0.clone()).collect();
    for g in groups.iter_mut() {
        if g.0 != base_branch && !(repo.branch_exists)(&g.0) {
            continue;
        }
        let free = |c: &str| {
            c != base_branch
                && !(repo.branch_exists)(c)
                && !taken.iter().any(|t| t == c)
                && crate::names::problem(c).is_none()
        };
        let stem = format!("{}-work", g.0);
        g.0 = std::iter::once(stem.clone())
            .chain((2..).map(|k| format!("{stem}-{k}")))
            .find(|c| free(c))
            .expect("an unused name");
    }
    let mut out = String::new();
    out.push_str(&format!(
        "# Proposed by `git boulder stream suggest` from {prd_path}.\n\
         # Review the groups and paths, then check with `git boulder stream validate`.\n"
    ));
    out.push_str("version: 1\n");
    out.push_str(&format!("prd: {}\n", scalar(prd_path)));
    if groups.is_empty() {
        out.push_str("streams: {}\n");
    } else {
        out.push_str("streams:\n");
    }
    for (name, stories, globs) in &groups {
        let globs = outermost(globs);
        out.push_str(&format!("  {name}:\n"));
        out.push_str(&format!("    stories: [{}]\n", stories.iter().map(|s| scalar(s)).collect::<Vec<_>>().join(", ")));
        out.push_str(&format!("    paths: [{}]\n", globs.iter().map(|s| scalar(s)).collect::<Vec<_>>().join(", ")));
    }
    out.push_str("settings:\n");
    out.push_str(&format!("  base_branch: {}\n", scalar(base_branch)));
    out.push_str("  path_overlap: warn\n");
    out
}

/// `US-AUTH-01` → `auth`: a word between a prefix and a number.
fn id_area(id: &str) -> Option<String> {
    let parts: Vec<&str> = id.split(['-', '_']).collect();
    if parts.len() < 3 {
        return None;
    }
    let area = parts[1..parts.len() - 1]
        .iter()
        .filter(|p| p.chars().any(|c| c.is_ascii_alphabetic()) && !p.chars().all(|c| c.is_ascii_digit()))
        .map(|p| p.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("-");
    (!area.is_empty()).then_some(area)
}

/// Paths a story's text names: tokens with a `/` that look like files or directories.
pub fn named_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for raw in
        text.split(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '(' | ')' | '[' | ']' | ',' | ';'))
    {
        let mut token = raw.trim_end_matches(['.', ':', '!', '?']);
        while let Some(rest) = token.strip_prefix("./") {
            token = rest;
        }
        if !token.contains('/')
            || token.as_bytes().windows(3).any(|w| w == b"://")
            || token.starts_with('/')
            || token.as_bytes().windows(2).any(|w| w == b"..")
            || token.starts_with('#')
            || token.split('/').any(|c| c.is_empty() && !token.ends_with('/'))
            || !token.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '*'))
        {
            continue;
        }
        if !found.iter().any(|f| f == token) {
            found.push(token.to_string());
        }
    }
    found
}

/// The area a path belongs to: its first directory that is not a generic root.
fn path_area(path: &str) -> Option<String> {
    let comps: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let dirs = if path.ends_with('/') { &comps[..] } else { &comps[..comps.len().saturating_sub(1)] };
    dirs.iter().find(|d| !GENERIC_ROOTS.contains(d) && !d.contains('*')).map(|d| strip_ext(d).to_ascii_lowercase())
}

fn strip_ext(s: &str) -> &str {
    s.split('.').next().filter(|p| !p.is_empty()).unwrap_or(s)
}

/// The glob a named path stands for: a directory (HEAD has files below it, it ends in `/`, or its
/// last part has no extension and HEAD has no such file) → `dir/**`; a file → its directory's
/// `dir/**`, except directly under a generic root (`src/x.rs` stays itself).
fn glob_for(path: &str, tree: &Tree) -> Option<String> {
    if path.contains('*') {
        return Some(path.to_string());
    }
    if let Some(dir) = path.strip_suffix('/') {
        return Some(format!("{dir}/**"));
    }
    let is_file = tree.files.contains(path);
    let last = path.rsplit('/').next().unwrap_or(path);
    if !is_file && (!last.contains('.') || tree.has_below(&format!("{path}/"))) {
        return Some(format!("{path}/**"));
    }
    let (dir, _) = path.rsplit_once('/')?;
    if GENERIC_ROOTS.contains(&dir) {
        return Some(path.to_string());
    }
    Some(format!("{dir}/**"))
}

/// HEAD's files, for looking paths up: as a set, and sorted (what is below a folder is a range).
struct Tree<'a> {
    files: HashSet<&'a str>,
    sorted: Vec<&'a str>,
}

impl<'a> Tree<'a> {
    fn new(paths: &'a [String]) -> Self {
        let mut sorted: Vec<&str> = paths.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        Tree { files: sorted.iter().copied().collect(), sorted }
    }

    /// Whether a file starts with `prefix`.
    fn has_below(&self, prefix: &str) -> bool {
        let at = self.sorted.partition_point(|p| *p < prefix);
        self.sorted.get(at).is_some_and(|p| p.starts_with(prefix))
    }
}

/// The words of a title that may tie stories together: lower case, 4+ letters, not a stop word,
/// a plural's `s` dropped.
fn title_words(title: &str) -> Vec<String> {
    let mut words: Vec<String> = title
        .split(|c: char| !c.is_alphanumeric())
        // (Lower case keeps an ASCII word's length: a short one can go before it is copied.)
        .filter(|w| !(w.is_ascii() && w.len() < 4))
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 4 && w.chars().any(char::is_alphabetic) && !STOPWORDS.contains(&w.as_str()))
        .map(|w| if w.len() > 4 && w.ends_with('s') && !w.ends_with("ss") { w[..w.len() - 1].to_string() } else { w })
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// Drop globs nested inside another glob of the same set (`src/auth/x/**` under `src/auth/**`).
fn outermost(globs: &BTreeSet<String>) -> Vec<String> {
    // `g` is nested when some `dir/**` of the set, other than `g`, has `dir/` as a proper prefix
    // of `g`: look up each folder prefix of `g` rather than comparing with every glob.
    let nested = |g: &str| {
        g.match_indices('/').any(|(i, _)| {
            let dir = &g[..=i];
            g.len() > dir.len() && {
                let o = format!("{dir}**");
                o != g && globs.contains(&o)
            }
        })
    };
    globs.iter().filter(|g| !nested(g)).cloned().collect()
}

/// A valid stream name from a group key.
fn sanitize(key: &str) -> String {
    let mut s: String =
        key.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).collect();
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    let s = s.trim_matches(['-', '.']).to_ascii_lowercase();
    if s.is_empty() || crate::names::problem(&s).is_some() {
        "main".into()
    } else {
        s
    }
}

/// A YAML scalar, double-quoted unless plainly safe.
pub fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '*'))
        && !matches!(s, "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~");
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_from_ids_and_paths() {
        assert_eq!(id_area("US-AUTH-01").as_deref(), Some("auth"));
        assert_eq!(id_area("US-001"), None);
        assert_eq!(path_area("src/auth/login.rs").as_deref(), Some("auth"));
        assert_eq!(path_area("docs/guide.md").as_deref(), Some("docs"));
        assert_eq!(path_area("src/main.rs"), None);
        assert_eq!(
            named_paths("Edit `src/api/routes.ts` and docs/api.md. See https://x.y/z"),
            vec!["src/api/routes.ts".to_string(), "docs/api.md".to_string()]
        );
    }

    #[test]
    fn nested_globs_collapse() {
        let set: BTreeSet<String> =
            ["src/auth/**", "src/auth/oauth/**", "docs/**"].iter().map(|s| s.to_string()).collect();
        assert_eq!(outermost(&set), vec!["docs/**".to_string(), "src/auth/**".to_string()]);
    }

    #[test]
    fn scalars_quote_when_needed() {
        assert_eq!(scalar("US-001"), "US-001");
        assert_eq!(scalar("**/*.md"), "\"**/*.md\"");
        assert_eq!(scalar("yes"), "\"yes\"");
    }
}
