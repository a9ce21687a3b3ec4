//! The base tree as `stream suggest` reads it, and the paths a story's text names resolved
//! against it: a file or folder of the tree (written in full, as a unique path suffix, or a file
//! by its unique basename), or a new file the story will create below a folder that exists.
//! Anything else a story says (words, URLs, commands, paths of nothing) names nothing.
//!
//! ### Performance
//! [`Tree::new`] is one pass over the file list (sorted once); a lookup costs the files or
//! folders sharing the name's last component, so a story naming `index.ts` in a tree of 20,000
//! files looks at the few `index.ts` there are, not at every file.

use std::collections::{HashMap, HashSet};

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type Set<K> = HashSet<K, foldhash::fast::RandomState>;

/// The files of the base tree, indexed for [`Tree::resolve`].
pub struct Tree<'a> {
    /// Every file, sorted: what is below a folder is one range.
    pub sorted: Vec<&'a str>,
    files: Set<&'a str>,
    dirs: Set<&'a str>,
    files_by_name: Map<&'a str, Vec<&'a str>>,
    dirs_by_name: Map<&'a str, Vec<&'a str>>,
}

/// What a path named by a story is in the base tree.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Named<'a> {
    /// A file of the tree.
    File(&'a str),
    /// A folder of the tree (it has files below it).
    Dir(&'a str),
    /// A file the tree lacks, below a folder it has: one the story will create.
    Create(String),
}

impl Named<'_> {
    /// The path: a file's, a folder's (without a trailing `/`), a new file's.
    pub fn path(&self) -> &str {
        match self {
            Named::File(p) | Named::Dir(p) => p,
            Named::Create(p) => p,
        }
    }
}

fn last(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether a name has an extension: `x.rs`, `Directory.Packages.props`, not `v1.2` or `e.g`.
fn has_extension(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && (1..=10).contains(&ext.len())
            && ext.bytes().all(|b| b.is_ascii_alphanumeric())
            && ext.bytes().any(|b| b.is_ascii_alphabetic())
            && !(ext.len() == 1 && stem.len() == 1)
    })
}

/// The one element of a list, if it has exactly one.
fn only<T>(mut it: impl Iterator<Item = T>) -> Option<T> {
    let first = it.next()?;
    it.next().is_none().then_some(first)
}

impl<'a> Tree<'a> {
    pub fn new(paths: &'a [String]) -> Self {
        let mut sorted: Vec<&str> = paths.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        let mut t = Tree {
            files: Set::default(),
            dirs: Set::default(),
            files_by_name: Map::default(),
            dirs_by_name: Map::default(),
            sorted: Vec::new(),
        };
        for &p in &sorted {
            t.files.insert(p);
            t.files_by_name.entry(last(p)).or_default().push(p);
            for (i, _) in p.match_indices('/') {
                let d = &p[..i];
                if t.dirs.insert(d) {
                    t.dirs_by_name.entry(last(d)).or_default().push(d);
                }
            }
        }
        t.sorted = sorted;
        t
    }

    /// The files below folder `dir` (no trailing `/`), in order.
    pub fn below(&self, dir: &str) -> &[&'a str] {
        let prefix = format!("{dir}/");
        let from = self.sorted.partition_point(|p| *p < prefix.as_str());
        let to = from + self.sorted[from..].partition_point(|p| p.starts_with(prefix.as_str()));
        &self.sorted[from..to]
    }

    /// What `token` (a path as a story writes it, cleaned by [`tokens`]) names in the tree.
    pub fn resolve(&self, token: &str) -> Option<Named<'a>> {
        let dir_hint = token.ends_with('/');
        let t = token.trim_end_matches('/');
        if t.is_empty() {
            return None;
        }
        if !dir_hint {
            if let Some(&f) = self.files.get(t) {
                return Some(Named::File(f));
            }
        }
        // A folder is named with a `/` in it (`src/auth`, `website/`): a bare word is a word.
        if t.contains('/') || dir_hint {
            if let Some(&d) = self.dirs.get(t) {
                return Some(Named::Dir(d));
            }
        }
        let name = last(t);
        let suffix = format!("/{t}");
        let ends = |p: &&&'a str| p.ends_with(suffix.as_str());
        if !dir_hint && (t.contains('/') || has_extension(name)) {
            let files = self.files_by_name.get(name).map(Vec::as_slice).unwrap_or_default();
            if let Some(&f) = only(files.iter().filter(ends)) {
                return Some(Named::File(f));
            }
        }
        if t.contains('/') || dir_hint {
            let dirs = self.dirs_by_name.get(name).map(Vec::as_slice).unwrap_or_default();
            if let Some(&d) = only(dirs.iter().filter(ends)) {
                return Some(Named::Dir(d));
            }
        }
        // A new file, inside a folder the tree has (named in full or by a unique suffix).
        let (parent, name) = t.rsplit_once('/')?;
        if dir_hint || !has_extension(name) || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
            return None;
        }
        if self.dirs.contains(parent) {
            return Some(Named::Create(t.to_string()));
        }
        let suffix = format!("/{parent}");
        let dirs = self.dirs_by_name.get(last(parent)).map(Vec::as_slice).unwrap_or_default();
        if let Some(d) = only(dirs.iter().filter(|d| d.ends_with(suffix.as_str()))) {
            return Some(Named::Create(format!("{d}/{name}")));
        }
        // Written in full below a folder that exists (`website/docs/zh/guide/x.mdx` while only
        // `website/docs/zh` does): new folders too.
        let inside = parent.match_indices('/').any(|(i, _)| self.dirs.contains(&parent[..i]));
        inside.then(|| Named::Create(t.to_string()))
    }
}

/// The words of a story's text that may be paths, cleaned: split at white space, quotes,
/// brackets and JSON escapes (`\n`), with Markdown emphasis, trailing punctuation, a `:12` line
/// number and a leading `./` taken off. URLs, absolute paths, `..`, wildcards and shell
/// variables are left out: a story names paths, it does not write globs.
pub fn tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    let mut push = |from: usize, to: usize| {
        if from < to {
            if let Some(t) = clean(&text[from..to]) {
                out.push(t);
            }
        }
    };
    while i < bytes.len() {
        let b = bytes[i];
        let sep = if b == b'\\' {
            // A JSON escape: the backslash and the escaped letter.
            2
        } else if b.is_ascii_whitespace() || b"`\"'()[]{}<>,;|=".contains(&b) {
            1
        } else if b >= 0x80 {
            // Non-ASCII punctuation and spaces (`→`, `—`, `、`) end a path; letters do not.
            let c = text[i..].chars().next().unwrap_or(' ');
            if c.is_alphanumeric() {
                0
            } else {
                c.len_utf8()
            }
        } else {
            0
        };
        if sep == 0 {
            i += if b >= 0x80 { text[i..].chars().next().map_or(1, char::len_utf8) } else { 1 };
            continue;
        }
        push(start, i);
        i = (i + sep).min(bytes.len());
        start = i;
    }
    push(start, bytes.len());
    out
}

/// The folders a story's text says it will make: on a line that runs `mkdir` or says it creates,
/// makes or adds a folder or directory, each path written with a `/` whose last part has no file
/// extension (`mkdir -p website/docs/zh/guide` names `website/docs/zh/guide`).
pub fn made_dirs(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let lower = line.to_ascii_lowercase();
        let says = lower.contains("mkdir ")
            || (["director", "folder"].iter().any(|w| lower.contains(w))
                && ["create", "make", "add", "new "].iter().any(|w| lower.contains(w)));
        if !says {
            continue;
        }
        for t in tokens(line) {
            let d = t.trim_end_matches('/');
            if t.contains('/') && !d.is_empty() && !has_extension(last(d)) {
                out.push(d);
            }
        }
    }
    out
}

fn clean(raw: &str) -> Option<&str> {
    let mut t = raw.trim_matches('*').trim_end_matches(['.', ':', '!', '?', '*']);
    if let Some((path, line)) = t.rsplit_once(':') {
        if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) {
            t = path;
        }
    }
    while let Some(rest) = t.strip_prefix("./") {
        t = rest;
    }
    let bad = t.is_empty()
        || t.starts_with(['/', '-', '#', '@', '~', '$', '%', '+'])
        || t.contains([':', '*', '?', '$', '%', '&', '!'])
        || t.split('/').any(|c| c == ".." || c == ".")
        || t.contains("//");
    (!bad).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_dirs_are_the_folders_a_line_says_it_makes() {
        let text = "  \"Create directories: mkdir -p website/docs/zh/guide\",\n  \"Update website/rspress.config.ts\",\n  \"Create the folder src/billing/ for invoices\",\n  \"Read docs/guide/intro.md\"";
        assert_eq!(made_dirs(text), ["website/docs/zh/guide", "src/billing"]);
        assert!(made_dirs("Edit src/a/b and make it faster").is_empty());
    }

    fn tree() -> Vec<String> {
        [
            "src/auth/login.rs",
            "src/auth/mod.rs",
            "website/docs/guide/routing.mdx",
            "website/docs/zh/guide/routing.mdx",
            "website/rspress.config.ts",
            "Directory.Packages.props",
            "a/index.ts",
            "b/index.ts",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    #[test]
    fn paths_resolve_in_full_by_suffix_by_basename_or_as_new_files() {
        let files = tree();
        let t = Tree::new(&files);
        assert_eq!(t.resolve("src/auth/login.rs"), Some(Named::File("src/auth/login.rs")));
        assert_eq!(t.resolve("src/auth"), Some(Named::Dir("src/auth")));
        assert_eq!(t.resolve("src/auth/"), Some(Named::Dir("src/auth")));
        assert_eq!(t.resolve("website/"), Some(Named::Dir("website")));
        // A unique suffix; `guide/routing.mdx` is two files, so it names neither.
        assert_eq!(t.resolve("zh/guide/routing.mdx"), Some(Named::File("website/docs/zh/guide/routing.mdx")));
        assert_eq!(t.resolve("guide/routing.mdx"), None);
        assert_eq!(t.resolve("docs/zh"), Some(Named::Dir("website/docs/zh")));
        // A basename, when only one file has it.
        assert_eq!(t.resolve("rspress.config.ts"), Some(Named::File("website/rspress.config.ts")));
        assert_eq!(t.resolve("Directory.Packages.props"), Some(Named::File("Directory.Packages.props")));
        assert_eq!(t.resolve("index.ts"), None);
        // New files inside folders that exist (named in full or by suffix); not elsewhere.
        assert_eq!(t.resolve("src/auth/session.rs"), Some(Named::Create("src/auth/session.rs".into())));
        assert_eq!(t.resolve("zh/guide/pinia.mdx"), Some(Named::Create("website/docs/zh/guide/pinia.mdx".into())));
        assert_eq!(t.resolve("website/docs/ja/guide/x.mdx"), Some(Named::Create("website/docs/ja/guide/x.mdx".into())));
        assert_eq!(t.resolve("en/zh/x.md"), None);
        assert_eq!(t.resolve("src/billing/page.ts"), Some(Named::Create("src/billing/page.ts".into())));
        assert_eq!(t.resolve("lib/billing/page.ts"), None);
        // Words are not paths.
        for w in ["header/navbar", "fetch/async", "src", "website", "e.g", "Node.js", "v1.2"] {
            assert_eq!(t.resolve(w), None, "{w}");
        }
    }

    #[test]
    fn tokens_are_cleaned_words() {
        let text = r#"Source: website/docs/index.mdx → Target: `website/docs/zh/index.mdx`.\nEdit **src/a.rs:12**, ./b/c.ts; see https://x.y/z and $HOME/x and ../up and src/*.rs (or [src/d/])"#;
        assert_eq!(
            tokens(text),
            [
                "Source",
                "website/docs/index.mdx",
                "Target",
                "website/docs/zh/index.mdx",
                "Edit",
                "src/a.rs",
                "b/c.ts",
                "see",
                "and",
                "and",
                "and",
                "or",
                "src/d/"
            ]
        );
    }
}
