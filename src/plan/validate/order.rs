//! The streams' dependency graph: its cycles, and the order in which streams can be taken.
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::plan::parse::{closest, quote};
use crate::plan::Plan;

/// Cycles (of two or more nodes) found by an iterative depth-first search, each reported once
/// (by node set), starting at its first node in plan order.
pub(super) fn find_cycles(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
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

/// Why streams cannot be put in an order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    /// A name that is not a stream of the plan, with the closest one when there is one.
    #[error("unknown stream {}{}", quote(name), near.as_deref().map(|x| format!("; did you mean {}?", quote(x))).unwrap_or_default())]
    UnknownStream { name: String, near: Option<String> },
    /// The streams of a dependency cycle, its first one repeated at the end.
    #[error("dependency cycle: {}", cycle.join(" -> "))]
    Cycle { cycle: Vec<String> },
    /// No cycle through any one stream, yet no order: a cycle among them all.
    #[error("dependency cycle among the streams to order")]
    Unordered,
}

/// The streams `names` ordered so that each comes after the streams it depends on (directly or
/// through streams not in `names`); ties keep the order of `names`. Errors name an unknown stream
/// or the dependency cycle (`a -> b -> a`).
pub fn topo_order(plan: &Plan, names: &[String]) -> Result<Vec<String>, OrderError> {
    let index: HashMap<&str, usize> =
        plan.streams.iter().enumerate().rev().map(|(i, s)| (s.name.as_str(), i)).collect();
    let mut wanted: Vec<usize> = Vec::new();
    for n in names {
        let Some(&i) = index.get(n.as_str()) else {
            let near = closest(n, plan.streams.iter().map(|s| s.name.as_str())).map(str::to_string);
            return Err(OrderError::UnknownStream { name: n.clone(), near });
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
        let mut cycle: Vec<String> = cycle.iter().map(|&i| plan.streams[i].name.clone()).collect();
        cycle.push(cycle[0].clone());
        return Err(OrderError::Cycle { cycle });
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
            return Err(OrderError::Unordered);
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
