//! `stream suggest`: a stream plan proposed from the PRD. Pure: a parsed PRD in, YAML text out.
//!
//! Stories are grouped, in this order of preference, by an area in their id (`US-AUTH-01` →
//! `auth`), by the area of the first path their text names (`src/auth/login.rs` → `auth`), by
//! their wave (`wave-1`), else into one stream `main`. Each stream owns the directories of the
//! paths its stories name.

use std::collections::BTreeSet;

use crate::prd::Prd;

/// Directory names too generic to name an area on their own.
const GENERIC_ROOTS: &[&str] = &["src", "lib", "app", "apps", "pkg", "packages", "crates", "internal", "cmd", "source"];

/// Propose the text of a `.boulder/streams.yaml` for `prd` (whose path relative to the work tree
/// is `prd_path`), with `base_branch` as the base.
pub fn propose(prd: &Prd, prd_path: &str, base_branch: &str) -> String {
    // (stream name, stories, globs) in first-seen order.
    let mut groups: Vec<(String, Vec<String>, BTreeSet<String>)> = Vec::new();
    for story in &prd.stories {
        let paths = named_paths(&story.text);
        let key = id_area(&story.id)
            .or_else(|| paths.iter().find_map(|p| path_area(p)))
            .or_else(|| story.wave.as_ref().map(|w| format!("wave-{w}")))
            .unwrap_or_else(|| "main".to_string());
        let key = sanitize(&key);
        let idx = match groups.iter().position(|g| g.0 == key) {
            Some(i) => i,
            None => {
                groups.push((key, Vec::new(), BTreeSet::new()));
                groups.len() - 1
            }
        };
        groups[idx].1.push(story.id.clone());
        for p in paths {
            if let Some(glob) = dir_glob(&p) {
                groups[idx].2.insert(glob);
            }
        }
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
        let token = raw.trim_end_matches(['.', ':', '!', '?']).trim_start_matches("./");
        if !token.contains('/')
            || token.contains("://")
            || token.starts_with('/')
            || token.contains("..")
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

/// `src/auth/login.rs` → `src/auth/**`; `docs/` → `docs/**`; a bare `src/x.rs` → `src/x.rs`.
fn dir_glob(path: &str) -> Option<String> {
    if path.contains('*') {
        return Some(path.to_string());
    }
    if let Some(dir) = path.strip_suffix('/') {
        return Some(format!("{dir}/**"));
    }
    let (dir, _) = path.rsplit_once('/')?;
    if GENERIC_ROOTS.contains(&dir) {
        return Some(path.to_string());
    }
    Some(format!("{dir}/**"))
}

/// Drop globs nested inside another glob of the same set (`src/auth/x/**` under `src/auth/**`).
fn outermost(globs: &BTreeSet<String>) -> Vec<String> {
    globs
        .iter()
        .filter(|g| {
            !globs
                .iter()
                .any(|o| o != *g && o.ends_with("/**") && g.starts_with(&o[..o.len() - 2]) && g.len() > o.len() - 2)
        })
        .cloned()
        .collect()
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
fn scalar(s: &str) -> String {
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
