//! Checks on a parsed [`Plan`]: names, branches, stories, globs, dependencies, agents and path
//! overlap. Every problem is a [`Finding`] naming the things involved, with a hint saying the fix.
//!
//! Overlap between two streams comes in two kinds, reported per `settings.path_overlap`:
//! * **concrete** (`overlap`): files of HEAD's tree matched by globs of both streams; at most
//!   [`overlap::MAX_FILES_SHOWN`] are named per pair, with the count of the rest;
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

pub(super) mod compiled;
mod order;
mod overlap;

use std::collections::{HashMap, HashSet};

use compiled::{is_meta, normalize};
use order::find_cycles;
use overlap::{overlap, owners_of_files, Owners};

pub use compiled::{branch_problem, compile_globs, literal_prefix, prd_problem, GlobError, GlobProblem, PRD_HINT};
use compiled::{compile_one, Compiled};
#[cfg(test)]
pub(crate) use compiled::{meet, Meet};
pub use order::{topo_order, OrderError};

use super::parse::{closest, quote};
use super::{Finding, Plan, Severity, StreamDef};

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

pub(super) struct Check<'a> {
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
