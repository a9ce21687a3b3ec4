//! Overlap between streams: files of the tree owned by two streams (concrete), globs of two
//! streams that can match a common path (potential), and stream paths that `shared_read` makes
//! read-only.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use globset::GlobSetBuilder;

use super::compiled::{literal_prefix, meet, Compiled, Meet};
use super::{list, Check};
use crate::plan::parse::quote;
use crate::plan::{Level, Severity};

/// Files named per overlapping pair; the rest are counted.
pub const MAX_FILES_SHOWN: usize = 10;
/// Glob pairs named per potentially overlapping pair of streams.
const MAX_GLOB_PAIRS_SHOWN: usize = 5;
/// Glob-pair comparisons before the potential-overlap check gives up (hostile plans only).
const PAIR_BUDGET: usize = 2_000_000;

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
pub(super) struct Owners {
    pairs: BTreeMap<(usize, usize), Files>,
    shared: BTreeMap<usize, Files>,
    /// `matched[i][k]`: glob `k` of stream `i` matches a file of the tree.
    pub(super) matched: Vec<Vec<bool>>,
}

/// [`Owners`] of `globs` (each stream's, then shared_read's): one pass over the tree, matching
/// each path against all globs at once.
pub(super) fn owners_of_files(globs: &[Vec<Compiled>], tree_paths: &[String]) -> Owners {
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

/// Report overlaps between streams (per `settings.path_overlap`) and with `shared_read`; gives
/// up on comparing glob pairs after [`PAIR_BUDGET`] comparisons, and says so.
pub(super) fn overlap(c: &mut Check, globs: &[Vec<Compiled>], owners: &Owners) {
    let plan = c.plan;
    let (stream_globs, shared) = globs.split_at(plan.streams.len());
    let severity = match plan.settings.path_overlap {
        Level::Error => Some(Severity::Error),
        Level::Warn => Some(Severity::Warning),
        Level::Off => None,
    };
    let mut budget = PAIR_BUDGET;
    let mut gave_up = false;
    if let Some(severity) = severity {
        concrete(c, severity, &owners.pairs);
        gave_up = potential(c, severity, stream_globs, &owners.pairs, &mut budget);
    }
    gave_up |= shared_read(c, stream_globs, &shared[0], &owners.shared, &mut budget);
    if gave_up {
        c.warn(
            "potential_overlap",
            format!("the plan has too many globs to compare every pair; stopped after {PAIR_BUDGET} comparisons"),
            "fewer, broader globs per stream keep `stream validate` complete",
        );
    }
}

const OVERLAP_HINT: &str = "each file should belong to one stream: narrow the paths of one of them, move files \
                            both only read to settings.shared_read, or set settings.path_overlap: ignore";

/// Files of the tree owned by two streams.
fn concrete(c: &mut Check, severity: Severity, pairs: &BTreeMap<(usize, usize), Files>) {
    let plan = c.plan;
    let name = |i: usize| plan.streams[i].name.as_str();
    for ((i, j), files) in pairs {
        let msg = format!(
            "streams {} both own {} {}: {}",
            list(&[name(*i), name(*j)]),
            files.total,
            if files.total == 1 { "file" } else { "files" },
            files.describe()
        );
        c.push(severity, "overlap", msg, OVERLAP_HINT);
    }
}

/// Globs of two streams that match a common path though no file of the tree is owned by both.
/// Returns whether the budget ran out.
fn potential(
    c: &mut Check,
    severity: Severity,
    stream_globs: &[Vec<Compiled>],
    pairs: &BTreeMap<(usize, usize), Files>,
    budget: &mut usize,
) -> bool {
    let plan = c.plan;
    let name = |i: usize| plan.streams[i].name.as_str();
    let mut gave_up = false;
    let mut current: Option<(usize, usize)> = None;
    let mut shown: Vec<String> = Vec::new();
    let mut total = 0usize;
    let flush = |pair: Option<(usize, usize)>, shown: &mut Vec<String>, total: &mut usize, c: &mut Check| {
        if let Some((i, j)) = pair {
            if *total > 0 {
                let more = *total - shown.len();
                let more = if more > 0 { format!(", and {more} more glob pairs") } else { String::new() };
                let msg =
                    format!("streams {} may own the same files: {}{more}", list(&[name(i), name(j)]), shown.join("; "));
                c.push(severity, "potential_overlap", msg, OVERLAP_HINT);
            }
        }
        shown.clear();
        *total = 0;
    };
    for (i, j, k, l) in candidates(stream_globs) {
        if pairs.contains_key(&(i, j)) || name(i) == name(j) {
            continue;
        }
        if current != Some((i, j)) {
            flush(current, &mut shown, &mut total, c);
            current = Some((i, j));
        }
        if *budget == 0 {
            gave_up = true;
            break;
        }
        *budget -= 1;
        let (a, b) = (&stream_globs[i][k], &stream_globs[j][l]);
        if let Meet::Yes(example) = meet(a, b) {
            total += 1;
            if shown.len() < MAX_GLOB_PAIRS_SHOWN {
                let example = example.map(|p| format!(", both matching {}", quote(&p))).unwrap_or_default();
                shown.push(format!("{} ({}) and {} ({}){example}", quote(&a.text), name(i), quote(&b.text), name(j)));
            }
        }
    }
    if !gave_up {
        flush(current, &mut shown, &mut total, c);
    }
    gave_up
}

/// The pairs of globs of two streams that can overlap, as (stream, stream, glob, glob), streams in
/// plan order. Only globs whose literal prefixes are prefixes of one another can overlap (every
/// path a glob matches starts with its literal prefix): they are found through an index of the
/// prefixes, not by comparing every glob of every stream with every other (quadratic in the
/// plan's size).
fn candidates(stream_globs: &[Vec<Compiled>]) -> BTreeSet<(usize, usize, usize, usize)> {
    let mut by_prefix: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for (i, gs) in stream_globs.iter().enumerate() {
        for (k, g) in gs.iter().enumerate() {
            by_prefix.entry(literal_prefix(&g.norm)).or_default().push((i, k));
        }
    }
    let mut candidates = BTreeSet::new();
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
    candidates
}

/// Streams whose files, or whose globs, `shared_read` makes read-only. Returns whether the budget
/// ran out.
fn shared_read(
    c: &mut Check,
    stream_globs: &[Vec<Compiled>],
    shared: &[Compiled],
    shared_hits: &BTreeMap<usize, Files>,
    budget: &mut usize,
) -> bool {
    let mut gave_up = false;
    for (i, s) in c.plan.streams.iter().enumerate() {
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
                if *budget == 0 {
                    gave_up = true;
                    break;
                }
                *budget -= 1;
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
    gave_up
}
