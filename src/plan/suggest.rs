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

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::prd::Prd;

/// Directory names too generic to name an area on their own.
const GENERIC_ROOTS: &[&str] = &["src", "lib", "app", "apps", "pkg", "packages", "crates", "internal", "cmd", "source"];

/// Title words too common in PRDs to group stories by, sorted (looked up by binary search).
const STOPWORDS: &[&str] = &[
    "able",
    "about",
    "add",
    "added",
    "adds",
    "after",
    "allow",
    "allows",
    "also",
    "basic",
    "create",
    "data",
    "each",
    "every",
    "feature",
    "file",
    "files",
    "from",
    "handle",
    "have",
    "implement",
    "initial",
    "into",
    "list",
    "made",
    "make",
    "more",
    "most",
    "must",
    "new",
    "only",
    "other",
    "over",
    "page",
    "same",
    "setup",
    "should",
    "show",
    "shows",
    "some",
    "story",
    "support",
    "text",
    "than",
    "that",
    "their",
    "them",
    "then",
    "there",
    "they",
    "this",
    "under",
    "update",
    "use",
    "user",
    "users",
    "using",
    "view",
    "when",
    "with",
    "without",
    "work",
    "works",
];

/// What `propose` needs from the repository.
pub struct Repo<'a> {
    /// The files of HEAD's tree (to tell directories from files).
    pub tree_paths: &'a [String],
    /// Whether a local branch of this name exists.
    pub branch_exists: &'a dyn Fn(&str) -> bool,
}

/// One story's features, borrowed from the PRD where they are its text.
struct Item<'a> {
    id: &'a str,
    globs: Vec<String>,
    areas: Vec<String>,
    /// Sorted, each once.
    words: Vec<Cow<'a, str>>,
    wave: Option<&'a str>,
}

fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// A hash map with a fast hash: its keys are the PRD's own words and paths, and nothing is
/// gained from a hash that resists chosen keys in a command that ends with the answer.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

fn map<K, V>() -> Map<K, V> {
    Map::default()
}

/// The most frequent of `list`; of equally frequent ones, the first seen.
fn most_common<'s>(list: impl Iterator<Item = &'s str>) -> Option<&'s str> {
    let mut count: Map<&str, (usize, usize)> = map();
    for (seen, x) in list.enumerate() {
        count.entry(x).or_insert((0, seen)).0 += 1;
    }
    count.into_iter().max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1))).map(|c| c.0)
}

/// Propose the text of a `.boulder/streams.yaml` for `prd` (whose path relative to the work tree
/// is `prd_path`), with `base_branch` as the base.
///
/// Linear in the PRD: each story's features are read once, stories are joined through a
/// union-find keyed by feature, and each group's key and stream name are worked out once per
/// group rather than once per story.
pub fn propose(prd: &Prd, prd_path: &str, base_branch: &str, repo: &Repo) -> String {
    let tree = Tree::new(repo.tree_paths);
    let items: Vec<Item> = prd
        .stories
        .iter()
        .map(|story| {
            let globs: Vec<String> = named_paths(&story.text).into_iter().filter_map(|p| glob_for(p, &tree)).collect();
            let areas = globs.iter().filter_map(|g| path_area(g)).collect();
            Item { id: &story.id, globs, areas, words: title_words(&story.title), wave: story.wave.as_deref() }
        })
        .collect();
    // Words shared by most stories say nothing about which belong together.
    let mut df: Map<&str, usize> = map();
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
    let mut first_with: Map<(u8, &str), usize> = map();
    for (i, it) in items.iter().enumerate() {
        if keyed[i].is_some() {
            continue;
        }
        let features = it
            .globs
            .iter()
            .map(|g| (b'g', g.as_str()))
            .chain(it.areas.iter().map(|a| (b'a', a.as_str())))
            .chain(it.words.iter().filter(|w| distinctive(w)).map(|w| (b'w', w.as_ref())));
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
    // Each story's group, by its root (the group's first story); groups in the order of their roots.
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in 0..n {
        let r = find(&mut parent, i);
        members[r].push(i);
    }
    // The key of each story's group: its id area, else what its group shares most (`keys`, one
    // entry per distinct key; `key_of`, an index into it per story).
    let mut keys: Vec<String> = Vec::new();
    let mut key_index: Map<String, usize> = map();
    let mut key_id = |key: &str| -> usize {
        if let Some(&k) = key_index.get(key) {
            return k;
        }
        keys.push(key.to_string());
        key_index.insert(key.to_string(), keys.len() - 1);
        keys.len() - 1
    };
    let mut key_of: Vec<usize> = vec![0; n];
    for (i, key) in keyed.iter().enumerate() {
        if let Some(k) = key {
            key_of[i] = key_id(k);
        }
    }
    for list in members.iter().filter(|l| !l.is_empty()) {
        if keyed[list[0]].is_some() {
            continue;
        }
        let first = &items[list[0]];
        let alone = list.len() == 1 && first.globs.is_empty();
        let wave = || first.wave.map(|w| format!("wave-{w}"));
        let key = if alone {
            wave().unwrap_or_else(|| "other".into())
        } else {
            most_common(list.iter().flat_map(|&i| items[i].areas.iter().map(String::as_str)))
                .or_else(|| {
                    most_common(
                        list.iter().flat_map(|&i| items[i].words.iter().map(|w| w.as_ref()).filter(|w| distinctive(w))),
                    )
                })
                .map(str::to_string)
                .or_else(wave)
                .unwrap_or_else(|| "other".into())
        };
        let k = key_id(&key);
        for &i in list {
            key_of[i] = k;
        }
    }

    // (stream name, stories, globs) in first-seen order. Keys are few and shared by many
    // stories: each is made a stream name, and given its group, once.
    let mut groups: Vec<(String, Vec<&str>, BTreeSet<&str>)> = Vec::new();
    let mut group_of: Map<String, usize> = map();
    let mut group_of_key: Vec<Option<usize>> = vec![None; keys.len()];
    for (i, it) in items.iter().enumerate() {
        let k = key_of[i];
        let idx = *group_of_key[k].get_or_insert_with(|| {
            let name = sanitize(&keys[k]);
            *group_of.entry(name).or_insert_with_key(|name| {
                groups.push((name.clone(), Vec::new(), BTreeSet::new()));
                groups.len() - 1
            })
        });
        let group = &mut groups[idx];
        group.1.push(it.id);
        group.2.extend(it.globs.iter().map(String::as_str));
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
    out.push_str("prd: ");
    push_scalar(&mut out, prd_path);
    out.push('\n');
    if groups.is_empty() {
        out.push_str("streams: {}\n");
    } else {
        out.push_str("streams:\n");
    }
    // Each list written straight into the text, `a, b, c`.
    let push_list = |out: &mut String, list: &mut dyn Iterator<Item = &str>| {
        for (k, s) in list.enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            push_scalar(out, s);
        }
    };
    for (name, stories, globs) in &groups {
        out.push_str("  ");
        out.push_str(name);
        out.push_str(":\n    stories: [");
        push_list(&mut out, &mut stories.iter().copied());
        out.push_str("]\n    paths: [");
        push_list(&mut out, &mut outermost(globs).into_iter());
        out.push_str("]\n");
    }
    out.push_str("settings:\n");
    out.push_str("  base_branch: ");
    push_scalar(&mut out, base_branch);
    out.push_str("\n  path_overlap: warn\n");
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
pub fn named_paths(text: &str) -> Vec<&str> {
    let mut found: Vec<&str> = Vec::new();
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
        if !found.contains(&token) {
            found.push(token);
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
/// a plural's `s` dropped. Borrowed from the title when it has them in lower case already.
fn title_words(title: &str) -> Vec<Cow<'_, str>> {
    let mut words: Vec<Cow<str>> = Vec::new();
    for w in title.split(|c: char| !c.is_alphanumeric()) {
        let lower: Cow<str> = if w.is_ascii() {
            // Lower case keeps an ASCII word's length and letters: it is checked before any copy.
            if w.len() < 4 || !w.bytes().any(|b| b.is_ascii_alphabetic()) {
                continue;
            }
            if w.bytes().any(|b| b.is_ascii_uppercase()) {
                Cow::Owned(w.to_ascii_lowercase())
            } else {
                Cow::Borrowed(w)
            }
        } else {
            let l = w.to_lowercase();
            if l.chars().count() < 4 || !l.chars().any(char::is_alphabetic) {
                continue;
            }
            Cow::Owned(l)
        };
        if is_stopword(&lower) {
            continue;
        }
        let word = if lower.len() > 4 && lower.ends_with('s') && !lower.ends_with("ss") {
            match lower {
                Cow::Borrowed(b) => Cow::Borrowed(&b[..b.len() - 1]),
                Cow::Owned(mut o) => {
                    o.pop();
                    Cow::Owned(o)
                }
            }
        } else {
            lower
        };
        if !is_stopword(&word) {
            words.push(word);
        }
    }
    words.sort_unstable();
    words.dedup();
    words
}

/// Whether `word` is one of [`STOPWORDS`] (kept sorted).
fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// Drop globs nested inside another glob of the same set (`src/auth/x/**` under `src/auth/**`).
fn outermost<'g>(globs: &BTreeSet<&'g str>) -> Vec<&'g str> {
    // `g` is nested when some `dir/**` of the set, other than `g`, has `dir/` as a proper prefix
    // of `g`: look up each folder prefix of `g` rather than comparing with every glob.
    let nested = |g: &str| {
        g.match_indices('/').any(|(i, _)| {
            let dir = &g[..=i];
            g.len() > dir.len() && {
                let o = format!("{dir}**");
                o != g && globs.contains(o.as_str())
            }
        })
    };
    globs.iter().copied().filter(|g| !nested(g)).collect()
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
    let mut out = String::new();
    push_scalar(&mut out, s);
    out
}

/// [`scalar`], written at the end of `out`.
fn push_scalar(out: &mut String, s: &str) {
    let plain = !s.is_empty()
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '*'))
        && !matches!(s, "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~");
    if plain {
        out.push_str(s);
    } else {
        out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
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
            vec!["src/api/routes.ts", "docs/api.md"]
        );
    }

    #[test]
    fn nested_globs_collapse() {
        let set: BTreeSet<&str> = ["src/auth/**", "src/auth/oauth/**", "docs/**"].into_iter().collect();
        assert_eq!(outermost(&set), vec!["docs/**", "src/auth/**"]);
    }

    #[test]
    fn stopwords_are_sorted_for_their_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(is_stopword("with") && is_stopword("about") && is_stopword("view") && !is_stopword("billing"));
    }

    #[test]
    fn title_words_are_lower_case_without_plurals_or_stop_words() {
        let words = |t: &str| title_words(t).into_iter().map(Cow::into_owned).collect::<Vec<_>>();
        assert_eq!(words("Add Invoices to the Billing page"), ["billing", "invoice"]);
        // A stop word, also once its plural `s` is dropped.
        assert!(words("Users see Pages").is_empty());
        // `ss` is no plural; digits alone are no word; other scripts are lower-cased the same way.
        assert_eq!(words("Address class 2024 ÉCOLE écoles"), ["address", "class", "école"]);
        assert_eq!(words("ÄÖÜ straße"), ["straße"]);
    }

    /// The definition [`title_words`] follows, written the plain way: every word lower-cased
    /// and copied first.
    fn title_words_by_definition(title: &str) -> Vec<String> {
        let mut words: Vec<String> =
            title
                .split(|c: char| !c.is_alphanumeric())
                .map(str::to_lowercase)
                .filter(|w| {
                    w.chars().count() >= 4 && w.chars().any(char::is_alphabetic) && !STOPWORDS.contains(&w.as_str())
                })
                .map(|w| {
                    if w.len() > 4 && w.ends_with('s') && !w.ends_with("ss") {
                        w[..w.len() - 1].to_string()
                    } else {
                        w
                    }
                })
                .filter(|w| !STOPWORDS.contains(&w.as_str()))
                .collect();
        words.sort_unstable();
        words.dedup();
        words
    }

    proptest::proptest! {
        #[test]
        fn title_words_follow_their_definition_for_any_title(
            title in "([A-Za-z]{1,9}|[0-9]{1,5}|[ÉéÄäßİıΣσς]{1,3}|[ .,/_-]{1,2}|Users|Pages|Addresses|class|viewS){0,12}"
        ) {
            let words: Vec<String> = title_words(&title).into_iter().map(Cow::into_owned).collect();
            proptest::prop_assert_eq!(words, title_words_by_definition(&title));
        }
    }

    #[test]
    fn scalars_quote_when_needed() {
        assert_eq!(scalar("US-001"), "US-001");
        assert_eq!(scalar("**/*.md"), "\"**/*.md\"");
        assert_eq!(scalar("yes"), "\"yes\"");
    }
}
