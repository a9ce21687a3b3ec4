//! Whether two of the plan's globs can match one path, decided exactly and without a tree, with
//! the shortest such path as the example.
//!
//! A glob means what globset makes of it (see [`crate::plan`] for the rules): globset compiles
//! it to a regular expression over the path's bytes, braces as alternations, classes as byte
//! classes, `*` and `?` as bytes other than `/`, `**` as any number of whole components. That
//! expression is read back with regex-syntax into an automaton ([`Shape`]), so nothing here
//! re-implements the glob syntax. Two globs meet when the product of their automata with a third
//! one, that of a well-formed path (not empty, no empty component, no leading or trailing `/`),
//! accepts something; a cheapest-first search of the product finds the shortest such path.
//!
//! ### Performance
//! A glob of `n` characters gives an automaton of `O(n)` states; one question costs
//! `O(states(a) × states(b))`. Globs too large for that ([`MAX_STATES`]) get no [`Shape`], and
//! the caller falls back to a cheaper test that errs on the side of an overlap.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use globset::Glob;
use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// The most automaton states one glob may have (a glob of a few hundred characters).
pub const MAX_STATES: usize = 4_096;

/// A set of bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
struct Bytes([u64; 4]);

impl Bytes {
    fn one(b: u8) -> Bytes {
        Bytes::range(b, b)
    }
    fn range(lo: u8, hi: u8) -> Bytes {
        let mut s = Bytes::default();
        for b in lo..=hi {
            s.0[usize::from(b >> 6)] |= 1 << (b & 63);
        }
        s
    }
    fn has(&self, b: u8) -> bool {
        self.0[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }
    fn and(&self, o: &Bytes) -> Bytes {
        Bytes([self.0[0] & o.0[0], self.0[1] & o.0[1], self.0[2] & o.0[2], self.0[3] & o.0[3]])
    }
    fn or(&mut self, o: &Bytes) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a |= b;
        }
    }
    /// A byte of the set other than `/`, a plain letter or digit when there is one, so that the
    /// example reads like a path.
    fn pick(&self) -> Option<u8> {
        const NICE: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_-.";
        NICE.iter().copied().chain(0..=255).find(|&b| b != b'/' && self.has(b))
    }
}

#[derive(Debug, Clone)]
enum State {
    /// One byte of the set, then the next state.
    Byte(Bytes, usize),
    /// Any of these states, consuming nothing.
    Split(Vec<usize>),
    Match,
}

/// A glob as an automaton over the bytes of a path.
#[derive(Debug, Clone)]
pub struct Shape {
    states: Vec<State>,
    start: usize,
}

/// The automaton of a compiled glob; `None` when its expression holds something this module does
/// not model (it never does for what globset writes today) or the glob is too large.
pub fn shape(glob: &Glob) -> Option<Shape> {
    let hir = regex_syntax::ParserBuilder::new().utf8(false).build().parse(glob.regex()).ok()?;
    let mut states = vec![State::Match];
    let start = build(&hir, 0, &mut states)?;
    Some(Shape { states, start })
}

fn push(states: &mut Vec<State>, s: State) -> Option<usize> {
    if states.len() >= MAX_STATES {
        return None;
    }
    states.push(s);
    Some(states.len() - 1)
}

/// The state that matches `hir` and then goes on to `next`.
fn build(hir: &Hir, next: usize, states: &mut Vec<State>) -> Option<usize> {
    match hir.kind() {
        HirKind::Empty => Some(next),
        // globset anchors its expression at both ends and uses no other assertion.
        HirKind::Look(Look::Start | Look::End) => Some(next),
        HirKind::Look(_) => None,
        HirKind::Literal(lit) => {
            let mut at = next;
            for &b in lit.0.iter().rev() {
                at = push(states, State::Byte(Bytes::one(b), at))?;
            }
            Some(at)
        }
        HirKind::Class(class) => {
            let mut set = Bytes::default();
            match class {
                Class::Bytes(c) => {
                    for r in c.iter() {
                        set.or(&Bytes::range(r.start(), r.end()));
                    }
                }
                Class::Unicode(c) => {
                    for r in c.iter() {
                        let (lo, hi) =
                            (u8::try_from(u32::from(r.start())).ok()?, u8::try_from(u32::from(r.end())).ok()?);
                        if hi > 0x7f {
                            return None;
                        }
                        set.or(&Bytes::range(lo, hi));
                    }
                }
            }
            push(states, State::Byte(set, next))
        }
        HirKind::Capture(c) => build(&c.sub, next, states),
        HirKind::Concat(parts) => {
            let mut at = next;
            for part in parts.iter().rev() {
                at = build(part, at, states)?;
            }
            Some(at)
        }
        HirKind::Alternation(alts) => {
            let starts = alts.iter().map(|a| build(a, next, states)).collect::<Option<Vec<_>>>()?;
            push(states, State::Split(starts))
        }
        HirKind::Repetition(rep) => {
            if rep.min > 16 || rep.max.is_some_and(|m| m > 16) {
                return None;
            }
            let mut at = match rep.max {
                None => {
                    // A loop: the split goes into the body, which comes back to the split.
                    let split = push(states, State::Split(Vec::new()))?;
                    let body = build(&rep.sub, split, states)?;
                    states[split] = State::Split(vec![body, next]);
                    split
                }
                Some(max) => {
                    let mut at = next;
                    for _ in rep.min..max {
                        let body = build(&rep.sub, at, states)?;
                        at = push(states, State::Split(vec![body, next]))?;
                    }
                    at
                }
            };
            for _ in 0..rep.min {
                at = build(&rep.sub, at, states)?;
            }
            Some(at)
        }
    }
}

/// The shortest well-formed path (preferring one without hidden components) (not empty, no empty component, no leading or trailing `/`)
/// both globs match, or `None` when there is none. `Err(())` when the question is too large to
/// answer (more than [`MAX_STATES`]² pairs of states).
#[allow(clippy::result_unit_err)]
pub fn common_path(a: &Shape, b: &Shape) -> Result<Option<Vec<u8>>, ()> {
    let (na, nb) = (a.states.len(), b.states.len());
    let nodes = na.checked_mul(nb).and_then(|n| n.checked_mul(2)).ok_or(())?;
    if nodes > MAX_STATES * MAX_STATES / 4 {
        return Err(());
    }
    // A node is (state of a, state of b, whether the path so far ends inside a component).
    // Cheapest first (Dijkstra): a byte costs 2, a component starting with `.` 5 more, so the
    // example is the shortest path both match, and not a hidden file unless it must be
    // (`src/a/a.rs`, not `src/a/.rs`, for `src/**` and `src/a/*.rs`).
    let id = |i: usize, j: usize, inside: bool| (i * nb + j) * 2 + usize::from(inside);
    const NONE: usize = usize::MAX;
    let mut dist = vec![u32::MAX; nodes];
    // How each node was reached: the node before and the byte (256: none).
    let mut from: Vec<(usize, u16)> = vec![(NONE, 256); nodes];
    let mut queue = BinaryHeap::new();
    let start = id(a.start, b.start, false);
    dist[start] = 0;
    queue.push(Reverse((0u32, start)));
    let mut relax =
        |queue: &mut BinaryHeap<Reverse<(u32, usize)>>, dist: &mut [u32], here: usize, to: usize, byte: u16| {
            let cost = match byte {
                256 => 0,
                // A `.` starting a component (the node before is not inside one).
                b if b == u16::from(b'.') && here % 2 != 1 => 7,
                _ => 2,
            };
            let d = dist[here] + cost;
            if d < dist[to] {
                dist[to] = d;
                from[to] = (here, byte);
                queue.push(Reverse((d, to)));
            }
        };
    let mut done = vec![false; nodes];
    let mut found = None;
    while let Some(Reverse((_, node))) = queue.pop() {
        if std::mem::replace(&mut done[node], true) {
            continue;
        }
        let (pair, inside) = (node / 2, node % 2 == 1);
        let (i, j) = (pair / nb, pair % nb);
        match (&a.states[i], &b.states[j]) {
            (State::Split(next), _) => {
                for &k in next {
                    relax(&mut queue, &mut dist, node, id(k, j, inside), 256);
                }
            }
            (_, State::Split(next)) => {
                for &k in next {
                    relax(&mut queue, &mut dist, node, id(i, k, inside), 256);
                }
            }
            (State::Match, State::Match) if inside => {
                found = Some(node);
                break;
            }
            (State::Byte(sa, ka), State::Byte(sb, kb)) => {
                let both = sa.and(sb);
                if inside && both.has(b'/') {
                    relax(&mut queue, &mut dist, node, id(*ka, *kb, false), u16::from(b'/'));
                }
                if let Some(byte) = both.pick() {
                    relax(&mut queue, &mut dist, node, id(*ka, *kb, true), u16::from(byte));
                }
            }
            _ => {}
        }
    }
    let Some(mut node) = found else { return Ok(None) };
    let mut path = Vec::new();
    while node != start {
        let (before, byte) = from[node];
        if let Ok(b) = u8::try_from(byte) {
            path.push(b);
        }
        node = before;
    }
    path.reverse();
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(g: &str) -> Glob {
        globset::GlobBuilder::new(g).literal_separator(true).backslash_escape(true).build().unwrap()
    }

    fn meet(a: &str, b: &str) -> Option<String> {
        let (ga, gb) = (glob(a), glob(b));
        let found = common_path(&shape(&ga).unwrap(), &shape(&gb).unwrap()).unwrap();
        found.map(|p| {
            let p = String::from_utf8(p).unwrap();
            assert!(ga.compile_matcher().is_match(&p) && gb.compile_matcher().is_match(&p), "{a} {b}: {p}");
            p
        })
    }

    #[test]
    fn disjoint_braces_and_classes_do_not_meet() {
        assert_eq!(meet("docs/{routing,pinia}.md", "docs/{elk,todo}.md"), None);
        assert_eq!(meet("docs/[rp]*.md", "docs/[et]*.md"), None);
        assert_eq!(meet("docs/[!e]*.md", "docs/e*.md"), None);
        assert_eq!(meet("docs/[a-m]*", "docs/[n-z]*"), None);
        assert_eq!(meet("src/*/mod.rs", "src/*.rs"), None);
        assert_eq!(meet("**/*.md", "**/*.rs"), None);
        assert_eq!(meet("*.md", "src/**"), None);
        assert_eq!(meet("src/auth/**", "src/authz/**"), None);
        assert_eq!(meet("src/**", "src"), None, "src/** owns what is below src, not src");
    }

    #[test]
    fn meeting_globs_give_the_shortest_common_path() {
        assert_eq!(meet("src/**", "src/a/*.rs").as_deref(), Some("src/a/a.rs"));
        assert_eq!(meet("docs/{routing,pinia}.md", "docs/{pinia,elk}.md").as_deref(), Some("docs/pinia.md"));
        assert_eq!(meet("docs/[rp]*.md", "docs/[pt]*.md").as_deref(), Some("docs/p.md"));
        assert_eq!(meet("**", "a/**/b").as_deref(), Some("a/b"));
        assert_eq!(meet("**/x", "x").as_deref(), Some("x"));
        assert_eq!(meet("a[!x]b", "a/b").as_deref(), Some("a/b"), "a negated class matches the separator");
        assert_eq!(meet("{src/a,lib}/**", "src/*/m.rs").as_deref(), Some("src/a/m.rs"));
    }
}
