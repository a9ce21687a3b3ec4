//! The one-way rule of docs/architecture.md, checked on the source itself: every path that names
//! the crate (`crate::…`, `super::…`, `self::…`, a child module's name, and `git_boulder::…` in
//! main.rs) in src/**/*.rs is read, resolved through re-exports to the file that defines it, and
//! the arrows between files are held against the layer order below and searched for circles.
//! Reading paths is enough: a module of this crate reaches another only by naming it. The reader
//! is a small tokenizer (comments and literals blanked out), not a Rust parser: it needs no
//! dependency and reads this crate's code, which `paths_are_read_as_rust_reads_them` pins down.
//!
//! `cargo test --test runner -- architecture::sizes --ignored --nocapture` prints the sizes the
//! docs quote (largest source files without their tests, longest functions).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers of src/, top to bottom: a module may import modules of the layers below its own,
/// never one above, nor another module of its own layer. docs/architecture.md quotes this list.
const LAYERS: &[&[&str]] = &[
    &["main"],
    &["cli"],
    &["doctor", "ui"],
    &["worker"],
    &["agent", "hooks"],
    &["boulder", "merge"],
    &["stream"],
    &["harness", "sync", "spend"],
    &["worktree"],
    &["workspace", "trust", "lock"],
    &["state", "plan"],
    &["git", "prd"],
    &["progress"],
    &["trace", "fsutil", "names"],
    &["error", "time", "text", "context", "failpoint"],
];

/// Files whose arrows a change under way puts right: `git boulder work` (it starts merges and
/// resolves landings) moves out of stream/ to a module above merge/, and git/ loses the circles
/// between its files and its use of `plan::Plan`. Their arrows are checked by the two ignored
/// tests below (`--include-ignored`); once those pass, empty this list and drop the `ignore`s.
const PENDING: &[&str] = &[];

/// One file of src/: its path from the repository root, the module it is, its code with
/// comments and literals blanked out (line breaks kept).
struct Source {
    rel: String,
    module: Vec<String>,
    code: String,
    lines: usize,
}

/// An arrow: `from` names something `to` defines, as `path` on `line`.
#[derive(Clone)]
struct Arrow {
    from: String,
    to: String,
    line: usize,
    path: String,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn sources() -> Vec<Source> {
    let mut files = Vec::new();
    walk(&root().join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(&path).unwrap();
            Source { module: module_of(&rel), code: blank(&text), lines: text.lines().count(), rel }
        })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; lib.rs and main.rs are the crate roots.
fn module_of(rel: &str) -> Vec<String> {
    let inner = rel.trim_start_matches("src/").trim_end_matches(".rs");
    if inner == "lib" || inner == "main" {
        return Vec::new();
    }
    let mut parts: Vec<String> = inner.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The top module a file belongs to: its layer is this one's.
fn top(rel: &str) -> &str {
    let inner = rel.trim_start_matches("src/");
    let first = inner.split('/').next().unwrap();
    first.trim_end_matches(".rs")
}

fn layer(top: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&top))
}

/// Whether a raw string's `r` at `i` starts a token (`r"…"`, `br"…"`), not ends a name.
fn starts_word(b: &[u8], i: usize) -> bool {
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    match i {
        0 => true,
        _ if b[i - 1] == b'b' => i < 2 || !ident(b[i - 2]),
        _ => !ident(b[i - 1]),
    }
}

/// The code with comments, string and character literals replaced by spaces, so a path inside a
/// message or a doc comment is no arrow.
fn blank(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let wipe = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| i + p);
                wipe(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (1, i + 2);
                while j < b.len() && depth > 0 {
                    if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                        depth += 1;
                        j += 1;
                    } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                        depth -= 1;
                        j += 1;
                    }
                    j += 1;
                }
                wipe(&mut out, i, j);
                i = j;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) && starts_word(b, i) => {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                let start = i + 2 + hashes;
                let end = b[start..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |p| start + p + close.len());
                wipe(&mut out, i, end);
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                wipe(&mut out, i, j + 1);
                i = j + 1;
            }
            b'\'' => {
                // A character literal ('x', '\n', '\''), else a lifetime.
                let end = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 2..].iter().position(|&c| c == b'\'').map(|p| i + 2 + p + 1)
                } else {
                    let len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 2 + len)
                };
                match end {
                    Some(end) => {
                        wipe(&mut out, i, end);
                        i = end;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).unwrap()
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path, // ::
    Punct(char),
}

/// Tokens of blanked code, each with its line.
fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let b = code.as_bytes();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
            out.push((Tok::Ident(code[start..i].to_string()), line));
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(c as char), line));
            i += 1;
        }
    }
    out
}

/// A path the code names, made absolute from the crate root, with its line and how it was written.
struct Named {
    segs: Vec<String>,
    line: usize,
    written: String,
    /// Named by a `use` item (a re-export, when it is `pub`), with the name it brings in.
    used_as: Option<String>,
}

/// Every path into the crate that `code` (of module `module`) names. `lib_name` is the crate
/// name main.rs reaches the library by.
fn named(code: &str, module: &[String], lib_name: Option<&str>, children: &BTreeSet<String>) -> Vec<Named> {
    let toks = tokens(code);
    let mut out = Vec::new();
    // Inline modules (`mod tests { … }`): their names, and the brace depth each closes at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut in_use = false;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                assert!(depth > 0, "an unbalanced `}}` at line {} of {:?}", toks[i].1, module);
                depth -= 1;
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Punct(';') => in_use = false,
            Tok::Ident(w) if w == "use" => in_use = true,
            Tok::Ident(w) if w == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) = (toks.get(i + 1), toks.get(i + 2)) {
                    inline.push((name.clone(), depth));
                }
            }
            Tok::Ident(w)
                if (w == "crate"
                    || w == "super"
                    || w == "self"
                    || Some(w.as_str()) == lib_name
                    || children.contains(w))
                    && toks.get(i + 1).is_some_and(|t| t.0 == Tok::Path)
                    && (i == 0 || toks[i - 1].0 != Tok::Path) =>
            {
                let mut here: Vec<String> = module.to_vec();
                here.extend(inline.iter().map(|(n, _)| n.clone()));
                let base = match w.as_str() {
                    "crate" => Vec::new(),
                    "super" => here[..here.len().saturating_sub(1)].to_vec(),
                    "self" => here,
                    // A child module of this file's, named as such.
                    child if children.contains(child) => [module, &[child.to_string()]].concat(),
                    _ => Vec::new(), // the library's name, from main.rs
                };
                let line = toks[i].1;
                let (trees, next) = tree(&toks, i + 1);
                for (rel, alias) in trees {
                    let mut segs = base.clone();
                    for s in &rel {
                        if s == "super" {
                            segs.pop();
                        } else if s != "self" {
                            segs.push(s.clone());
                        }
                    }
                    let written = format!("{w}::{}", rel.join("::")).trim_end_matches("::self").to_string();
                    out.push(Named { segs, line, written, used_as: if in_use { alias } else { None } });
                }
                i = next;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// A path a use tree names (segments after its root), and the name it brings into scope.
type Imported = (Vec<String>, Option<String>);

/// Parses a use tree after a root word, from the `::` at `i`: every path it names (segments
/// after the root) with the name it brings into scope, and the index after it.
fn tree(toks: &[(Tok, usize)], mut i: usize) -> (Vec<Imported>, usize) {
    let mut prefix = Vec::new();
    while toks.get(i).is_some_and(|t| t.0 == Tok::Path) {
        i += 1;
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                i += 1;
            }
            Some(Tok::Punct('{')) => {
                let mut out = Vec::new();
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) => return (out, i + 1),
                        Some(Tok::Punct(',')) => i += 1,
                        Some(Tok::Ident(s)) => {
                            // `name`, `name::…`, `self`, `name as alias`: parse as a tree of its own.
                            let first = s.clone();
                            let (subs, next) = tree(toks, i + 1);
                            i = next;
                            if subs.is_empty() || subs.iter().all(|(p, _)| p.is_empty()) {
                                let plain = if first == "self" { prefix.last().cloned() } else { Some(first.clone()) };
                                let alias = alias_at(toks, &mut i).or(plain);
                                let mut p = prefix.clone();
                                p.push(first);
                                out.push((p, alias));
                            } else {
                                for (rest, alias) in subs {
                                    let mut p = prefix.clone();
                                    p.push(first.clone());
                                    p.extend(rest);
                                    // `b::{self, …}` brings in `b`.
                                    let alias = alias.or_else(|| {
                                        (p.last().is_some_and(|l| l == "self")).then(|| p[p.len() - 2].clone())
                                    });
                                    out.push((p, alias));
                                }
                            }
                        }
                        Some(Tok::Punct(_)) => i += 1,
                        _ => return (out, i),
                    }
                }
            }
            _ => break,
        }
    }
    if prefix.is_empty() {
        return (Vec::new(), i);
    }
    let alias = alias_at(toks, &mut i).or_else(|| prefix.last().cloned());
    (vec![(prefix, alias)], i)
}

fn alias_at(toks: &[(Tok, usize)], i: &mut usize) -> Option<String> {
    if let (Some((Tok::Ident(a), _)), Some((Tok::Ident(name), _))) = (toks.get(*i), toks.get(*i + 1)) {
        if a == "as" {
            *i += 2;
            return Some(name.clone());
        }
    }
    None
}

/// Every file of src/ and the arrows between them.
struct Graph {
    files: Vec<Source>,
    arrows: Vec<Arrow>,
}

fn graph() -> Graph {
    let files = sources();
    let by_module: BTreeMap<Vec<String>, usize> =
        files.iter().enumerate().filter(|(_, f)| f.rel != "src/main.rs").map(|(i, f)| (f.module.clone(), i)).collect();
    let named: Vec<Vec<Named>> = files
        .iter()
        .map(|f| {
            let children = by_module
                .keys()
                .filter(|m| m.len() == f.module.len() + 1 && m.starts_with(&f.module) && f.rel != "src/main.rs")
                .map(|m| m.last().unwrap().clone())
                .collect();
            named(&f.code, &f.module, (f.rel == "src/main.rs").then_some("git_boulder"), &children)
        })
        .collect();
    // What each file's `use` items bring into scope, by name: a path through that name goes on
    // to what it names (a re-export), so an arrow ends at the file that defines the thing.
    let scope: Vec<BTreeMap<String, Vec<String>>> =
        named.iter().map(|ns| ns.iter().filter_map(|n| Some((n.used_as.clone()?, n.segs.clone()))).collect()).collect();
    let resolve = |segs: &[String]| -> Option<usize> {
        let mut segs = segs.to_vec();
        for _ in 0..8 {
            let (k, &file) = (0..=segs.len()).rev().find_map(|k| Some((k, by_module.get(&segs[..k])?)))?;
            match segs.get(k).and_then(|name| scope[file].get(name)) {
                Some(target) if target[..] != segs[..k + 1] => {
                    let mut next = target.clone();
                    next.extend_from_slice(&segs[k + 1..]);
                    segs = next;
                }
                _ => return Some(file),
            }
        }
        None
    };
    let mut arrows = Vec::new();
    for (i, f) in files.iter().enumerate() {
        for n in &named[i] {
            let Some(to) = resolve(&n.segs) else { continue };
            if to != i && files[to].rel != "src/lib.rs" {
                arrows.push(Arrow {
                    from: f.rel.clone(),
                    to: files[to].rel.clone(),
                    line: n.line,
                    path: n.written.clone(),
                });
            }
        }
    }
    Graph { files, arrows }
}

/// An arrow from a folder's `mod.rs` into its own folder: the face of a module declares its
/// files, hands their names on and may call them, as a `mod` line does; it is no circle when a
/// file of the folder uses what the face defines.
fn face_inward(a: &Arrow) -> bool {
    a.from.strip_suffix("mod.rs").is_some_and(|folder| a.to.starts_with(folder))
}

/// The circles of the file graph: strongly connected sets of more than one file (Tarjan).
fn circles(g: &Graph) -> Vec<Vec<String>> {
    let names: Vec<&str> = g.files.iter().map(|f| f.rel.as_str()).collect();
    let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut next: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); names.len()];
    for a in g.arrows.iter().filter(|a| !face_inward(a)) {
        next[index[a.from.as_str()]].insert(index[a.to.as_str()]);
    }
    struct T {
        idx: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        count: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, next: &[BTreeSet<usize>], t: &mut T) {
        t.idx[v] = Some(t.count);
        t.low[v] = t.count;
        t.count += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &next[v] {
            match t.idx[w] {
                None => {
                    visit(w, next, t);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.idx[v] {
            let mut set = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                set.push(w);
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                t.out.push(set);
            }
        }
    }
    let n = names.len();
    let mut t =
        T { idx: vec![None; n], low: vec![0; n], on: vec![false; n], stack: Vec::new(), count: 0, out: Vec::new() };
    for v in 0..n {
        if t.idx[v].is_none() {
            visit(v, &next, &mut t);
        }
    }
    t.out
        .into_iter()
        .map(|set| {
            let mut files: Vec<String> = set.into_iter().map(|i| names[i].to_string()).collect();
            files.sort();
            files
        })
        .collect()
}

/// A circle and the arrows that tie it, for a failure message.
fn describe(g: &Graph, circle: &[String]) -> String {
    let mut text = format!("circle of {} files:", circle.len());
    let mut seen = BTreeSet::new();
    for a in &g.arrows {
        if circle.contains(&a.from) && circle.contains(&a.to) && !face_inward(a) && seen.insert((&a.from, &a.to)) {
            text.push_str(&format!("\n    {}:{} -> {} ({})", a.from, a.line, a.to, a.path));
        }
    }
    text
}

/// Whether `file` is one whose arrows a change under way puts right (see [`PENDING`]).
fn pending(file: &str) -> bool {
    PENDING.iter().any(|p| file.starts_with(p))
}

/// The circles, as failure text: those through a pending file, or those through none.
fn circles_where(through_pending: bool) -> Vec<String> {
    let g = graph();
    circles(&g).iter().filter(|c| c.iter().any(|f| pending(f)) == through_pending).map(|c| describe(&g, c)).collect()
}

/// Arrows that go up the layer order, or across to another module of the same layer, from
/// pending files or from the others.
fn against_layers(g: &Graph, from_pending: bool) -> Vec<String> {
    let mut out = Vec::new();
    for a in g.arrows.iter().filter(|a| pending(&a.from) == from_pending) {
        let (from, to) = (top(&a.from), top(&a.to));
        if from == to || from == "lib" {
            continue;
        }
        let (Some(lf), Some(lt)) = (layer(from), layer(to)) else { continue };
        if lt <= lf {
            let why = if lt == lf { "a module of its own layer" } else { "a module above it" };
            out.push(format!("{}:{} -> {} ({}): {why}", a.from, a.line, a.to, a.path));
        }
    }
    out
}

#[test]
fn every_module_has_a_layer() {
    let g = graph();
    let missing: BTreeSet<&str> =
        g.files.iter().map(|f| top(&f.rel)).filter(|t| *t != "lib" && layer(t).is_none()).collect();
    assert!(missing.is_empty(), "modules missing from LAYERS (and from docs/architecture.md): {missing:?}");
}

#[test]
fn nothing_imports_a_module_above_it() {
    let wrong = against_layers(&graph(), false);
    assert!(wrong.is_empty(), "imports against the layer order:\n{}", wrong.join("\n"));
}

#[test]
fn no_circle_between_files() {
    let found = circles_where(false);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn pending_files_import_nothing_above_them() {
    let wrong = against_layers(&graph(), true);
    assert!(wrong.is_empty(), "imports against the layer order:\n{}", wrong.join("\n"));
}

#[test]
fn no_circle_through_pending_files() {
    let found = circles_where(true);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn gix_only_in_git() {
    let mut wrong = Vec::new();
    for f in sources().iter().filter(|f| !f.rel.starts_with("src/git/")) {
        for (t, line) in tokens(&f.code) {
            if matches!(&t, Tok::Ident(w) if w == "gix" || w.starts_with("gix_")) {
                wrong.push(format!("{}:{line}", f.rel));
            }
        }
    }
    assert!(wrong.is_empty(), "gix named outside src/git/: {wrong:?}");
}

#[test]
fn cli_only_from_main_and_cli() {
    let wrong: Vec<String> = graph()
        .arrows
        .iter()
        .filter(|a| a.to.starts_with("src/cli/") && !a.from.starts_with("src/cli/") && a.from != "src/main.rs")
        .map(|a| format!("{}:{} ({})", a.from, a.line, a.path))
        .collect();
    assert!(wrong.is_empty(), "cli/ imported from below: {wrong:?}");
}

/// The reader of paths reads what it must: a `use` tree with groups, `self`, renames and `super`,
/// an inline path, a path inside a string or a comment (none), an inline module's `super`.
#[test]
fn paths_are_read_as_rust_reads_them() {
    let code = blank(
        "use crate::a::{b::{self, C}, d as e};\nuse super::f;\n// crate::no::comment\nfn x() { let s = \"crate::no::string\"; crate::g::h(); 'x'; }\nmod tests { use super::*; use super::super::i; }\nuse child::J;",
    );
    let module = vec!["m".to_string(), "n".to_string()];
    let children = BTreeSet::from(["child".to_string()]);
    let found: Vec<(String, Option<String>)> =
        named(&code, &module, None, &children).into_iter().map(|n| (n.segs.join("::"), n.used_as)).collect();
    let want = [
        ("a::b", Some("b")),
        ("a::b::C", Some("C")),
        ("a::d", Some("e")),
        ("m::f", Some("f")),
        ("g::h", None),
        ("m::i", Some("i")),
        ("m::n::child::J", Some("J")),
    ];
    let want: Vec<(String, Option<String>)> =
        want.iter().map(|(p, a)| (p.to_string(), a.map(str::to_string))).collect();
    assert_eq!(found, want);
}

/// One function: its file, name, first line and length in lines (signature to closing brace).
struct Function {
    file: String,
    name: String,
    line: usize,
    lines: usize,
}

/// The functions of a file outside its test modules, and how many of its lines are outside them.
fn functions(f: &Source) -> (Vec<Function>, usize) {
    let toks = tokens(&f.code);
    // The matching close of each `{`, by token index.
    let mut close = BTreeMap::new();
    let mut open = Vec::new();
    for (i, (t, _)) in toks.iter().enumerate() {
        match t {
            Tok::Punct('{') => open.push(i),
            Tok::Punct('}') => {
                close.insert(open.pop().expect("braces balance"), i);
            }
            _ => {}
        }
    }
    // Test modules: `#[cfg(test)] mod NAME {` … `}`.
    let mut tests: Vec<(usize, usize)> = Vec::new();
    let words = |i: usize, w: &[&str]| {
        w.iter().enumerate().all(|(k, w)| match &toks.get(i + k).map(|t| &t.0) {
            Some(Tok::Ident(s)) => s == w,
            Some(Tok::Punct(c)) => w.len() == 1 && w.starts_with(*c),
            _ => false,
        })
    };
    for i in 0..toks.len() {
        if words(i, &["#", "[", "cfg", "(", "test", ")", "]", "mod"]) && words(i + 9, &["{"]) {
            tests.push((i + 9, close[&(i + 9)]));
        }
    }
    let in_tests = |i: usize| tests.iter().any(|(a, b)| (*a..=*b).contains(&i));
    let test_lines: usize = tests.iter().map(|(a, b)| toks[*b].1 - toks[*a].1 + 1).sum();
    let mut out = Vec::new();
    for i in 0..toks.len() {
        let (Tok::Ident(w), Some((Tok::Ident(name), _))) = (&toks[i].0, toks.get(i + 1)) else { continue };
        if w != "fn" || in_tests(i) {
            continue;
        }
        // The body: the first `{` outside parentheses; a `;` first is a declaration.
        let mut depth = 0i32;
        let body = (i + 2..toks.len()).find_map(|j| match toks[j].0 {
            Tok::Punct('(') | Tok::Punct('[') => {
                depth += 1;
                None
            }
            Tok::Punct(')') | Tok::Punct(']') => {
                depth -= 1;
                None
            }
            Tok::Punct('{') if depth == 0 => Some(Some(j)),
            Tok::Punct(';') if depth == 0 => Some(None),
            _ => None,
        });
        if let Some(Some(j)) = body {
            let lines = toks[close[&j]].1 - toks[i].1 + 1;
            out.push(Function { file: f.rel.clone(), name: name.clone(), line: toks[i].1, lines });
        }
    }
    (out, f.lines - test_lines)
}

/// The sizes docs/architecture.md quotes: the largest source files without their tests, the
/// longest functions outside tests. A report, not a check.
#[test]
#[ignore = "a report: cargo test --test runner -- architecture::sizes --ignored --nocapture"]
fn sizes() {
    let sources = sources();
    // Files that are test modules (`#[cfg(test)] mod tests;`).
    let mut test_files = BTreeSet::new();
    for f in &sources {
        let toks: Vec<Tok> = tokens(&f.code).into_iter().map(|(t, _)| t).collect();
        for w in toks.windows(10) {
            let text: Vec<String> = w
                .iter()
                .map(|t| match t {
                    Tok::Ident(s) => s.clone(),
                    Tok::Punct(c) => c.to_string(),
                    Tok::Path => "::".into(),
                })
                .collect();
            if text[..8] == ["#", "[", "cfg", "(", "test", ")", "]", "mod"] && text[9] == ";" {
                test_files.insert([f.module.clone(), vec![text[8].clone()]].concat());
            }
        }
    }
    let mut files = Vec::new();
    let mut fns = Vec::new();
    for f in sources.iter().filter(|f| !test_files.contains(&f.module)) {
        let (found, lines) = functions(f);
        files.push((lines, f.rel.clone()));
        fns.extend(found);
    }
    files.sort_by(|a, b| b.cmp(a));
    fns.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.file.cmp(&b.file)));
    println!("largest source files (lines, without their tests):");
    for (lines, file) in files.iter().take(5) {
        println!("  {lines:5}  {file}");
    }
    println!("longest functions (lines, outside tests):");
    for f in fns.iter().take(10) {
        println!("  {:5}  {}:{} {}", f.lines, f.file, f.line, f.name);
    }
    println!("functions over 120 lines: {}", fns.iter().filter(|f| f.lines > 120).count());
}
