//! Which stream each story of a PRD goes to, by key: the area its id or its paths name, else the
//! words of its title it shares with other stories.

use super::{map, strip_ext, Item, Map};
use crate::prd::Prd;

/// Each story's key, the name of the stream it goes to: the area in its id, else the area most
/// of its paths are in (of those, the one fewest stories name: a file every story reads does not
/// make them one area), else (named paths all at the root) the first one's name; a story naming
/// no path gets one from the words of its title ([`loose_keys`]).
pub(super) fn keys(prd: &Prd, items: &[Item]) -> Vec<String> {
    let mut area_df: Map<&str, usize> = map();
    for it in items {
        let mut seen: Vec<&str> = it.areas.iter().map(String::as_str).collect();
        seen.sort_unstable();
        seen.dedup();
        for a in seen {
            *area_df.entry(a).or_default() += 1;
        }
    }
    let primary = |it: &Item| -> Option<String> {
        let mut count: Vec<(&str, usize, usize)> = Vec::new();
        for (seen, a) in it.areas.iter().enumerate() {
            match count.iter_mut().find(|c| c.0 == a) {
                Some(c) => c.1 += 1,
                None => count.push((a, 1, seen)),
            }
        }
        count
            .into_iter()
            .max_by(|x, y| x.1.cmp(&y.1).then(area_df[y.0].cmp(&area_df[x.0])).then(y.2.cmp(&x.2)))
            .map(|c| c.0.to_string())
    };
    let key_of: Vec<Option<String>> = prd
        .stories
        .iter()
        .zip(items)
        .map(|(s, it)| {
            id_area(&s.id)
                .or_else(|| primary(it))
                .or_else(|| it.named.first().map(|n| strip_ext(n.path()).to_ascii_lowercase()))
        })
        .collect();
    loose_keys(items, key_of)
}

/// Keys for the stories `key_of` leaves without one: a story naming no path joins the earliest
/// keyed story it shares a distinctive word with; the others are joined by the words they share
/// and named by their most common one (or their wave, or `other`).
fn loose_keys(items: &[Item], mut key_of: Vec<Option<String>>) -> Vec<String> {
    let n = items.len();
    // Words shared by most stories say nothing about which belong together.
    let mut df: Map<&str, usize> = map();
    for it in items {
        for w in &it.words {
            *df.entry(w).or_default() += 1;
        }
    }
    let limit = (n / 2).max(2);
    let distinctive = |w: &str| df.get(w).is_some_and(|k| *k >= 2 && *k <= limit);
    let mut keyed_with: Map<&str, usize> = map();
    for (i, it) in items.iter().enumerate() {
        if key_of[i].is_some() {
            for w in it.words.iter().filter(|w| distinctive(w)) {
                keyed_with.entry(w.as_ref()).or_insert(i);
            }
        }
    }
    let mut parent: Vec<usize> = (0..n).collect();
    let mut first_with: Map<&str, usize> = map();
    for (i, it) in items.iter().enumerate() {
        if key_of[i].is_some() {
            continue;
        }
        let mut words = it.words.iter().filter(|w| distinctive(w));
        if let Some(j) = words.clone().filter_map(|w| keyed_with.get(w.as_ref())).min() {
            key_of[i] = key_of[*j].clone();
            continue;
        }
        for w in words.by_ref() {
            match first_with.get(w.as_ref()) {
                Some(&j) => {
                    let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                    parent[a.max(b)] = a.min(b);
                }
                None => {
                    first_with.insert(w.as_ref(), i);
                }
            }
        }
    }
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in (0..n).filter(|&i| key_of[i].is_none()) {
        let r = find(&mut parent, i);
        members[r].push(i);
    }
    let mut loose: Vec<Option<String>> = vec![None; n];
    for list in members.iter().filter(|l| !l.is_empty()) {
        let wave = items[list[0]].wave.map(|w| format!("wave-{w}"));
        let key = if list.len() == 1 {
            wave.unwrap_or_else(|| "other".into())
        } else {
            most_common(list.iter().flat_map(|&i| items[i].words.iter().map(|w| w.as_ref()).filter(|w| distinctive(w))))
                .map(str::to_string)
                .or(wave)
                .unwrap_or_else(|| "other".into())
        };
        for &i in list {
            loose[i] = Some(key.clone());
        }
    }
    key_of.into_iter().zip(loose).map(|(k, l)| k.or(l).unwrap_or_else(|| "other".into())).collect()
}

/// `US-AUTH-01` → `auth`: a word between a prefix and a number.
pub(super) fn id_area(id: &str) -> Option<String> {
    let parts: Vec<&str> = id.split(['-', '_']).collect();
    if parts.len() < 3 || !parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit()) {
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

fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// The most frequent of `list`; of equally frequent ones, the first seen.
fn most_common<'s>(list: impl Iterator<Item = &'s str>) -> Option<&'s str> {
    let mut count: Map<&str, (usize, usize)> = map();
    for (seen, x) in list.enumerate() {
        count.entry(x).or_insert((0, seen)).0 += 1;
    }
    count.into_iter().max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1))).map(|c| c.0)
}
