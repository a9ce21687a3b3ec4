//! `stream suggest`: a stream plan proposed from the PRD, grounded in the base tree. Pure: a
//! parsed PRD (with the base tree's files and a way to ask whether a branch exists) in, YAML
//! text out.
//!
//! * **Paths.** A story owns what its text names that the tree has ([`tree::Tree::resolve`]): a
//!   file (written in full, as a unique path suffix, or by its unique basename), a folder
//!   (`dir/**`, only when the story names the folder), or under `creates:` a new file below a
//!   folder that exists. Nothing else becomes a path: prose words never make globs, and a story
//!   naming a file owns that file, not its folder.
//! * **Groups.** Stories with an area in their id (`US-AUTH-01` → `auth`) go together. Other
//!   stories are joined when they share a named path, the area of one (`src/billing/page.ts` →
//!   `billing`) or a distinctive title word (one most stories lack); a story that shares nothing
//!   and names no path goes with its wave (`wave-1`), else into `other`.
//! * **Size.** A group of more than [`cap`] stories (8, or an eighth of the PRD when that is
//!   more) is cut, in PRD order, into near-equal parts `name-1`, `name-2`, …
//! * **No fights.** A path several streams name goes to the stream that needs it first (its
//!   earliest story in PRD order: wave, then `priority`, then position), and the later ones
//!   depend on it; a file of the tree named by three or more streams, more than half of them, is
//!   `shared_read` instead. A folder one stream names and others name files inside is narrowed
//!   to what the others do not own. The plan says why in YAML comments.
//! * **Order.** `depends_on` follows the PRD's `dependsOn` between streams, and a stream
//!   depends on an earlier one whose file (or new file) it names too, or that makes a folder
//!   (`mkdir -p dir`, "create the folder dir/") it owns or creates paths in; an edge that would
//!   close a cycle is left out. Streams are written in PRD order.
//! * A stream is never named like a branch that exists (or the base): `-work` is added, then a
//!   number.

mod keys;
mod tree;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::prd::Prd;
use keys::keys;
use tree::{Named, Tree};

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
    /// The files of the base tree.
    pub tree_paths: &'a [String],
    /// Whether a local branch of this name exists.
    pub branch_exists: &'a dyn Fn(&str) -> bool,
}

/// The most stories one stream gets for a PRD of `n` stories: 8, or an eighth of the PRD when
/// that is more (so a large PRD does not become hundreds of streams).
pub fn cap(n: usize) -> usize {
    8.max(n.div_ceil(8))
}

/// One story's features, borrowed from the PRD where they are its text.
pub(super) struct Item<'a> {
    id: &'a str,
    named: BTreeSet<Named<'a>>,
    areas: Vec<String>,
    /// Sorted, each once.
    words: Vec<Cow<'a, str>>,
    wave: Option<&'a str>,
}

/// A hash map with a fast hash: its keys are the PRD's own words and paths, and nothing is
/// gained from a hash that resists chosen keys in a command that ends with the answer.
pub(super) type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

pub(super) fn map<K, V>() -> Map<K, V> {
    Map::default()
}

/// A proposed stream: its name, its stories (indexes into the PRD, in PRD order), what it owns.
struct Stream {
    name: String,
    stories: Vec<usize>,
    paths: Vec<String>,
    creates: Vec<String>,
    depends_on: Vec<(usize, String)>,
    notes: Vec<String>,
}

/// Propose the text of a `.boulder/streams.yaml` for `prd` (whose path relative to the work tree
/// is `prd_path`), with `base_branch` as the base.
///
/// ### Performance
/// One pass over the tree's files to index them ([`Tree::new`]); each story's text is read
/// once; stories are joined through a union-find keyed by feature.
pub fn propose(prd: &Prd, prd_path: &str, base_branch: &str, repo: &Repo) -> String {
    let tree = Tree::new(repo.tree_paths);
    let items = items(prd, prd_path, &tree);
    let rank = ranks(prd, &items);
    let key_of = keys(prd, &items);
    let mut streams = group(&key_of, &rank);
    // Streams in the order they are first needed.
    let first_rank = |s: &Stream| s.stories.iter().map(|&i| rank[i]).min().unwrap_or(usize::MAX);
    streams.sort_by_key(first_rank);
    names(&mut streams, base_branch, repo);
    let shared = own(&mut streams, &items, &rank, &tree);
    made_folders(&mut streams, prd, &rank);
    depend(&mut streams, prd);
    write(&streams, &shared, prd, prd_path, base_branch)
}

/// What each story names of the tree (leaving out the PRD and git-boulder's and git's own
/// files), the areas of those paths, and its title's words.
fn items<'a>(prd: &'a Prd, prd_path: &str, tree: &'a Tree) -> Vec<Item<'a>> {
    prd.stories
        .iter()
        .map(|story| {
            let named: BTreeSet<Named> = tree::tokens(&story.text)
                .into_iter()
                .filter_map(|t| tree.resolve(t))
                .filter(|n| {
                    let p = n.path();
                    p != prd_path && !p.starts_with(".boulder/") && p != ".boulder" && !p.starts_with(".git/")
                })
                .collect();
            let areas = named
                .iter()
                .filter_map(|n| match n {
                    Named::Dir(d) => path_area(&format!("{d}/")),
                    _ => path_area(n.path()),
                })
                .collect();
            Item { id: &story.id, named, areas, words: title_words(&story.title), wave: story.wave.as_deref() }
        })
        .collect()
}

/// Each story's place in the order stories are needed in: wave, then priority, then position.
fn ranks(prd: &Prd, items: &[Item]) -> Vec<usize> {
    let n = items.len();
    let wave_num = |w: Option<&str>| -> u64 {
        w.map(|w| w.chars().take_while(char::is_ascii_digit).collect::<String>())
            .and_then(|d| d.parse().ok())
            .unwrap_or(0)
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (wave_num(items[i].wave), prd.stories[i].priority.unwrap_or(i64::MIN), i));
    let mut rank = vec![0; n];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r;
    }
    rank
}

/// Streams of the stories grouped by key (as a stream name), in PRD order, each cut into parts
/// of at most [`cap`] stories taken in rank order.
fn group(key_of: &[String], rank: &[usize]) -> Vec<Stream> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    let mut group_of: Map<String, usize> = map();
    for (i, key) in key_of.iter().enumerate() {
        let name = sanitize(key);
        let g = *group_of.entry(name.clone()).or_insert_with(|| {
            groups.push((name, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
    }
    let cap = cap(key_of.len());
    let mut streams: Vec<Stream> = Vec::new();
    for (name, mut list) in groups {
        list.sort_by_key(|&i| rank[i]);
        let parts = list.len().div_ceil(cap).max(1);
        let size = list.len().div_ceil(parts);
        for (k, chunk) in list.chunks(size.max(1)).enumerate() {
            let mut stories = chunk.to_vec();
            stories.sort_unstable();
            streams.push(Stream {
                name: if parts == 1 { name.clone() } else { format!("{name}-{}", k + 1) },
                stories,
                paths: Vec::new(),
                creates: Vec::new(),
                depends_on: Vec::new(),
                notes: Vec::new(),
            });
        }
    }
    streams
}

/// Give every named path one owner (see the module docs); returns the `shared_read` files with
/// the streams naming each.
fn own(streams: &mut [Stream], items: &[Item], rank: &[usize], tree: &Tree) -> Vec<(String, Vec<usize>)> {
    // Each path: the streams naming it, each with the rank of its earliest story naming it.
    let mut claims: BTreeMap<&Named, Vec<(usize, usize, usize)>> = BTreeMap::new();
    for (s, stream) in streams.iter().enumerate() {
        for &i in &stream.stories {
            for named in &items[i].named {
                let list = claims.entry(named).or_default();
                match list.iter_mut().find(|c| c.0 == s) {
                    Some(c) if rank[i] < c.1 => *c = (s, rank[i], i),
                    Some(_) => {}
                    None => list.push((s, rank[i], i)),
                }
            }
        }
    }
    let total = streams.len();
    let mut shared: Vec<(String, Vec<usize>)> = Vec::new();
    // Owned paths, as blocking entries for other streams' folders: `f`, `new`, `dir/`.
    let mut owned: Vec<(String, Option<usize>)> = Vec::new();
    let mut dirs: Vec<(usize, &str)> = Vec::new();
    let story_name = |i: usize| items[i].id;
    for (named, mut list) in claims {
        list.sort_by_key(|c| c.1);
        let who: Vec<usize> = list.iter().map(|c| c.0).collect();
        if let (Named::File(f), true) = (named, list.len() >= 3 && list.len() * 2 > total) {
            owned.push((f.to_string(), None));
            shared.push((f.to_string(), who));
            continue;
        }
        let (owner, _, first_story) = list[0];
        let shown = match named {
            Named::Dir(d) => format!("{d}/"),
            _ => named.path().to_string(),
        };
        if list.len() > 1 {
            let others: Vec<String> =
                list[1..].iter().map(|c| format!("{} ({})", streams[c.0].name, story_name(c.2))).collect();
            streams[owner].notes.push(format!(
                "{shown}: also named by {}; owned here, where {} needs it first",
                others.join(", "),
                story_name(first_story)
            ));
            for c in &list[1..] {
                let note =
                    format!("{shown}: owned by {} ({} needs it first)", streams[owner].name, story_name(first_story));
                streams[c.0].notes.push(note);
                let why = format!("needs {shown}");
                streams[c.0].depends_on.push((owner, why));
            }
        }
        match named {
            Named::File(f) => {
                owned.push((f.to_string(), Some(owner)));
                streams[owner].paths.push(f.to_string());
            }
            Named::Create(c) => {
                owned.push((c.clone(), Some(owner)));
                streams[owner].creates.push(c.clone());
            }
            Named::Dir(d) => {
                owned.push((format!("{d}/"), Some(owner)));
                dirs.push((owner, d));
            }
        }
    }
    owned.sort();
    // A folder owns what is below it that no other stream owns (nor shared_read holds).
    for (owner, d) in dirs {
        let prefix = format!("{d}/");
        let from = owned.partition_point(|o| o.0.as_str() < prefix.as_str());
        let blocked: Vec<&str> = owned[from..]
            .iter()
            .take_while(|o| o.0.starts_with(prefix.as_str()))
            .filter(|o| o.1 != Some(owner) && o.0 != prefix)
            .map(|o| o.0.as_str())
            .collect();
        if blocked.is_empty() {
            streams[owner].paths.push(format!("{d}/**"));
        } else {
            let before = streams[owner].paths.len();
            complement(tree, d, &blocked, &mut streams[owner].paths);
            let left = streams[owner].paths.len() - before;
            streams[owner].notes.push(if left == 0 {
                format!("{prefix}: other streams own everything in it")
            } else {
                format!("{prefix}: narrowed to what other streams do not own in it")
            });
        }
    }
    // A stream's own files and new files inside its own folders are already owned.
    for s in streams.iter_mut() {
        let folders: Vec<String> = s.paths.iter().filter_map(|p| p.strip_suffix("**")).map(str::to_string).collect();
        let inside = |p: &String| folders.iter().any(|f| p.starts_with(f.as_str()) && p[f.len()..] != *"**");
        s.paths.retain(|p| !inside(p));
        s.creates.retain(|p| !inside(p));
        s.paths.sort();
        s.paths.dedup();
        s.creates.sort();
    }
    shared
}

/// The globs covering the files below `dir` except `blocked` (sorted; files, new files, or
/// `folder/` for whole folders): files one by one, and a whole subfolder as `sub/**` when
/// nothing in it is blocked.
fn complement(tree: &Tree, dir: &str, blocked: &[&str], out: &mut Vec<String>) {
    let below = tree.below(dir);
    let start = dir.len() + 1;
    let mut k = 0;
    while k < below.len() {
        let rest = &below[k][start..];
        match rest.find('/') {
            None => {
                if blocked.binary_search(&below[k]).is_err() {
                    out.push(below[k].to_string());
                }
                k += 1;
            }
            Some(j) => {
                let sub = &below[k][..start + j];
                let prefix = format!("{sub}/");
                let n = below[k..].partition_point(|p| p.starts_with(prefix.as_str()));
                let from = blocked.partition_point(|b| *b < prefix.as_str());
                let inner = &blocked[from..from + blocked[from..].partition_point(|b| b.starts_with(prefix.as_str()))];
                if inner.is_empty() {
                    out.push(format!("{sub}/**"));
                } else if inner[0] != prefix {
                    complement(tree, sub, inner, out);
                }
                k += n;
            }
        }
    }
}

/// A folder a story says it makes ([`tree::made_dirs`]; the tree may have it already, when the PRD
/// is committed beside work done): a stream whose stories all come later and which owns or creates
/// paths inside it depends on the stream making it.
fn made_folders(streams: &mut [Stream], prd: &Prd, rank: &[usize]) {
    let mut made: Vec<(usize, usize, &str)> = Vec::new();
    for (s, stream) in streams.iter().enumerate() {
        for &i in &stream.stories {
            for dir in tree::made_dirs(&prd.stories[i].text) {
                if !made.iter().any(|m| m.2 == dir) {
                    made.push((s, i, dir));
                }
            }
        }
    }
    for (maker, i, dir) in made {
        let inside = |p: &String| p.strip_prefix(dir).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        for (s, stream) in streams.iter_mut().enumerate() {
            let later = stream.stories.iter().map(|&j| rank[j]).min().is_some_and(|r| r > rank[i]);
            if s != maker && later && stream.creates.iter().chain(&stream.paths).any(inside) {
                stream.depends_on.push((maker, format!("needs {dir}/, made by {}", prd.stories[i].id)));
            }
        }
    }
}

/// `depends_on`: the PRD's `dependsOn` between streams and the paths a later stream needs from
/// an earlier one (already collected), without an edge that closes a cycle.
fn depend(streams: &mut [Stream], prd: &Prd) {
    let mut stream_of = vec![usize::MAX; prd.stories.len()];
    for (s, stream) in streams.iter().enumerate() {
        for &i in &stream.stories {
            stream_of[i] = s;
        }
    }
    let mut index: Map<&str, usize> = map();
    for (i, story) in prd.stories.iter().enumerate() {
        index.entry(story.id.as_str()).or_insert(i);
    }
    let mut wanted: Vec<(usize, usize, String)> = Vec::new();
    for (i, story) in prd.stories.iter().enumerate() {
        for dep in &story.depends_on {
            let Some(&j) = index.get(dep.as_str()) else { continue };
            if stream_of[i] != stream_of[j] {
                wanted.push((stream_of[i], stream_of[j], format!("{} depends on {dep}", story.id)));
            }
        }
    }
    for (s, stream) in streams.iter_mut().enumerate() {
        for (t, why) in std::mem::take(&mut stream.depends_on) {
            wanted.push((s, t, why));
        }
    }
    let mut edges: Vec<Vec<(usize, String)>> = vec![Vec::new(); streams.len()];
    for (from, to, why) in wanted {
        if from == to {
            continue;
        }
        if let Some(e) = edges[from].iter_mut().find(|e| e.0 == to) {
            if !e.1.contains(&why) {
                e.1.push_str("; ");
                e.1.push_str(&why);
            }
            continue;
        }
        if reaches(&edges, to, from) {
            continue;
        }
        edges[from].push((to, why));
    }
    for (s, e) in edges.into_iter().enumerate() {
        streams[s].depends_on = e;
    }
}

/// Whether `to` is reachable from `from` along `edges`.
fn reaches(edges: &[Vec<(usize, String)>], from: usize, to: usize) -> bool {
    let mut seen = vec![false; edges.len()];
    let mut stack = vec![from];
    while let Some(x) = stack.pop() {
        if x == to {
            return true;
        }
        if !std::mem::replace(&mut seen[x], true) {
            stack.extend(edges[x].iter().map(|e| e.0));
        }
    }
    false
}

/// Stream names: unique, and never a branch that exists or the base.
fn names(streams: &mut [Stream], base_branch: &str, repo: &Repo) {
    let mut taken: Vec<String> = Vec::new();
    for s in streams.iter_mut() {
        let free = |c: &str, taken: &[String]| {
            c != base_branch
                && !(repo.branch_exists)(c)
                && !taken.iter().any(|t| t == c)
                && crate::names::problem(c).is_none()
        };
        if !free(&s.name, &taken) {
            let stem = if s.name != base_branch && !(repo.branch_exists)(&s.name) {
                s.name.clone()
            } else {
                format!("{}-work", s.name)
            };
            s.name = std::iter::once(stem.clone())
                .chain((2..).map(|k| format!("{stem}-{k}")))
                .find(|c| free(c, &taken))
                .expect("an unused name");
        }
        taken.push(s.name.clone());
    }
}

fn write(streams: &[Stream], shared: &[(String, Vec<usize>)], prd: &Prd, prd_path: &str, base_branch: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# Proposed by `git boulder stream suggest` from {prd_path}.\n\
         # Each stream owns the files and folders of the tree its stories name, and under `creates:`\n\
         # the new files they name; the comments say who else named a path and why it went where.\n\
         # Review the groups and paths, then check with `git boulder stream validate`.\n"
    ));
    out.push_str("version: 1\n");
    out.push_str("prd: ");
    push_scalar(&mut out, prd_path);
    out.push('\n');
    if streams.is_empty() {
        out.push_str("streams: {}\n");
    } else {
        out.push_str("streams:\n");
    }
    let push_list = |out: &mut String, list: &mut dyn Iterator<Item = &str>| {
        out.push('[');
        for (k, s) in list.enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            push_scalar(out, s);
        }
        out.push(']');
    };
    for s in streams {
        out.push_str("  ");
        out.push_str(&s.name);
        out.push_str(":\n    stories: ");
        push_list(&mut out, &mut s.stories.iter().map(|&i| prd.stories[i].id.as_str()));
        out.push('\n');
        for note in &s.notes {
            out.push_str("    # ");
            out.push_str(&crate::text::inert(note));
            out.push('\n');
        }
        out.push_str("    paths: ");
        push_list(&mut out, &mut s.paths.iter().map(String::as_str));
        out.push('\n');
        if !s.creates.is_empty() {
            out.push_str("    creates: ");
            push_list(&mut out, &mut s.creates.iter().map(String::as_str));
            out.push('\n');
        }
        if !s.depends_on.is_empty() {
            out.push_str("    depends_on: ");
            push_list(&mut out, &mut s.depends_on.iter().map(|d| streams[d.0].name.as_str()));
            out.push_str("  # ");
            let why: Vec<&str> = s.depends_on.iter().map(|d| d.1.as_str()).collect();
            out.push_str(&crate::text::inert(&why.join("; ")));
            out.push('\n');
        }
    }
    out.push_str("settings:\n");
    out.push_str("  base_branch: ");
    push_scalar(&mut out, base_branch);
    out.push_str("\n  path_overlap: warn\n");
    if !shared.is_empty() {
        for (path, who) in shared {
            let names: Vec<&str> = who.iter().map(|&s| streams[s].name.as_str()).collect();
            out.push_str(&format!(
                "  # {}: named by {}; every stream reads it, none changes it\n",
                crate::text::inert(path),
                names.join(", ")
            ));
        }
        out.push_str("  shared_read: ");
        push_list(&mut out, &mut shared.iter().map(|s| s.0.as_str()));
        out.push('\n');
    }
    out
}

/// The area a path belongs to: its first two folders that are not generic roots, joined by `-`
/// (`src/auth/oauth/x.rs` → `auth-oauth`, `website/docs/zh/x.mdx` → `website-docs`).
fn path_area(path: &str) -> Option<String> {
    let comps: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let dirs = if path.ends_with('/') { &comps[..] } else { &comps[..comps.len().saturating_sub(1)] };
    let area: Vec<String> =
        dirs.iter().filter(|d| !GENERIC_ROOTS.contains(d)).take(2).map(|d| strip_ext(d).to_ascii_lowercase()).collect();
    (!area.is_empty()).then(|| area.join("-"))
}

pub(super) fn strip_ext(s: &str) -> &str {
    s.split('.').next().filter(|p| !p.is_empty()).unwrap_or(s)
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
    use super::keys::id_area;
    use super::*;

    #[test]
    fn areas_from_ids_and_paths() {
        assert_eq!(id_area("US-AUTH-01").as_deref(), Some("auth"));
        assert_eq!(id_area("US-001"), None);
        assert_eq!(path_area("src/auth/login.rs").as_deref(), Some("auth"));
        assert_eq!(path_area("docs/guide.md").as_deref(), Some("docs"));
        assert_eq!(path_area("src/main.rs"), None);
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
