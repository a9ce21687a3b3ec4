//! Changes to `.boulder/streams.yaml` made by git-boulder itself. The YAML text is edited in
//! place (never re-serialized), so the user's comments, order and quoting stay as written; the
//! result is parsed again before anything is written, and written atomically.
//!
//! [`add_stream`] and [`write_proposed`] are the places that write a plan file on the user's
//! behalf.

use std::path::Path;

use super::Plan;
use crate::error::{Error, Result};
use crate::prd::Prd;

/// A stream to add: its name, story ids and path globs.
#[derive(Debug, Clone)]
pub struct NewStream<'a> {
    pub name: &'a str,
    pub stories: &'a [String],
    pub paths: &'a [String],
}

/// Add `stream` to the plan file at `path` (creating a minimal plan when there is none), keeping
/// every other byte of the file. Trust (`crate::trust`) is left as it was on purpose: a stream's
/// stories and paths are not part of the plan's command fingerprint, so a trusted plan stays
/// trusted, and an untrusted plan's commands must not become trusted because a stream was added. Refused when the name is invalid or taken, a glob is invalid, or
/// the streams mapping is written in flow style (`streams: {a: …}`).
pub fn add_stream(path: &Path, stream: &NewStream) -> Result<()> {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| {
            Error::usage(format!("{} is not valid UTF-8", path.display())).hint("save the file as UTF-8")
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "version: 1\nstreams:\n".to_string(),
        Err(e) => return Err(Error::usage(format!("cannot read {}: {e}", path.display()))),
    };
    let new = insert_stream(&text, stream)?;
    crate::fsutil::write_atomic(path, new.as_bytes())
}

/// The stories a new stream takes must be in the PRD (when it can be read) and no other stream's
/// in `plan`: `stream validate` refuses a plan otherwise, so `stream add` does not write one.
pub fn stories_free(plan: Option<&Plan>, prd: Option<&Prd>, stories: &[String]) -> Result<()> {
    if let Some(plan) = plan {
        for id in stories {
            if let Some(owner) = plan.streams.iter().find(|s| s.stories.contains(id)) {
                return Err(Error::usage(format!(
                    "story {} is already stream {}'s; a story belongs to one stream",
                    crate::text::inert(id),
                    crate::text::inert(&owner.name)
                ))
                .hint("leave it out, or move it in .boulder/streams.yaml"));
            }
        }
    }
    if let Some(prd) = prd {
        if let Some(id) = stories.iter().find(|id| prd.story(id).is_none()) {
            return Err(Error::usage(format!("story {} is not in the PRD", crate::text::inert(id)))
                .hint("`git boulder prd show` lists the story ids"));
        }
    }
    Ok(())
}

/// Write the plan `stream suggest` proposed (`text`) at `path`; refused when a plan is there,
/// unless `force`.
pub fn write_proposed(path: &Path, text: &str, force: bool) -> Result<()> {
    if path.exists() && !force {
        return Err(Error::usage(format!("{} already exists", super::PLAN_PATH))
            .hint("pass --force to overwrite it, or run without --write to see the proposal"));
    }
    crate::fsutil::write_atomic(path, text.as_bytes())
}

/// `text` with `stream` added as the last entry of the top-level `streams:` mapping (or a new
/// `streams:` at the end). The result must parse and hold the new stream.
pub fn insert_stream(text: &str, stream: &NewStream) -> Result<String> {
    crate::names::validate("stream", stream.name)?;
    let plan = super::parse(text).map_err(|e| {
        Error::usage(format!("the stream plan does not parse: {e}"))
            .hint("fix it first; `git boulder stream validate` names the line")
    })?;
    if plan.streams.iter().any(|s| s.name == stream.name) {
        return Err(Error::refused(format!("the plan already has a stream {:?}", stream.name))
            .hint("choose another name, or edit that stream in .boulder/streams.yaml"));
    }
    super::compile_globs(stream.paths).map_err(|e| {
        Error::usage(e.to_string()).with_source(e).hint("globs are relative to the repository root, e.g. src/auth/**")
    })?;
    let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let list = |items: &[String]| items.iter().map(|s| crate::plan::suggest::scalar(s)).collect::<Vec<_>>().join(", ");
    let entry = |ind: &str, child: &str| {
        format!(
            "{ind}{}:{nl}{ind}{child}stories: [{}]{nl}{ind}{child}paths: [{}]{nl}",
            crate::plan::suggest::scalar(stream.name),
            list(stream.stories),
            list(stream.paths)
        )
    };
    let lines: Vec<(usize, &str)> = line_starts(text);
    let key = lines.iter().position(|(_, l)| top_level_key(l) == Some("streams"));
    let out = match key {
        None => {
            let mut out = text.to_string();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push_str(nl);
            }
            out.push_str(&format!("streams:{nl}"));
            out + &entry("  ", "  ")
        }
        Some(k) => {
            let (start, line) = lines[k];
            let value = strip_comment(line.trim_end_matches(['\r', '\n'])).trim_end();
            let rest = value.split_once(':').map_or("", |(_, r)| r).trim();
            let after_key = start + line.len();
            if rest == "{}" || rest == "~" || rest == "null" {
                // An empty mapping written inline: make it a block, keeping a trailing comment.
                let comment = line.trim_end_matches(['\r', '\n'])[value.len()..].to_string();
                let head = format!("streams:{comment}{nl}");
                format!("{}{head}{}{}", &text[..start], entry("  ", "  "), &text[after_key..])
            } else if !rest.is_empty() {
                return Err(Error::usage("the plan's `streams:` is written in flow style; add the stream by hand")
                    .hint("or write `streams:` as a block mapping, one stream per line"));
            } else {
                // The block: indented lines (and blank or comment lines between them).
                let mut end = after_key;
                let mut ind = None;
                let mut child = None;
                for &(s, l) in &lines[k + 1..] {
                    let content = l.trim_end_matches(['\r', '\n']);
                    let trimmed = content.trim_start();
                    let indent = content.len() - trimmed.len();
                    if trimmed.is_empty() || trimmed.starts_with('#') {
                        continue;
                    }
                    if indent == 0 {
                        break;
                    }
                    match ind {
                        None => ind = Some(indent),
                        Some(i) if indent > i && child.is_none() => child = Some(indent - i),
                        _ => {}
                    }
                    end = s + l.len();
                }
                let ind = " ".repeat(ind.unwrap_or(2));
                let child = " ".repeat(child.unwrap_or(2));
                let mut out = text[..end].to_string();
                if !out.ends_with('\n') {
                    out.push_str(nl);
                }
                out + &entry(&ind, &child) + &text[end..]
            }
        }
    };
    let check = super::parse(&out).map_err(|e| {
        Error::usage(format!("the plan is laid out in a way `stream add` cannot extend (the result would not parse: {e}); nothing was written"))
            .hint("add the stream by hand in .boulder/streams.yaml")
    })?;
    let added = check.streams.iter().find(|s| s.name == stream.name);
    if !added.is_some_and(|s| s.stories == stream.stories && s.paths == stream.paths) {
        return Err(Error::usage("the plan is laid out in a way `stream add` cannot extend (the result would not hold the new stream); nothing was written")
            .hint("add the stream by hand in .boulder/streams.yaml"));
    }
    Ok(out)
}

/// Each line with its start offset (lines keep their endings).
fn line_starts(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut at = 0;
    for l in text.split_inclusive('\n') {
        out.push((at, l));
        at += l.len();
    }
    out
}

/// The key of a top-level `key:` line (column 0, after a BOM on the first line).
fn top_level_key(line: &str) -> Option<&str> {
    let line = line.strip_prefix('\u{feff}').unwrap_or(line);
    let (key, rest) = line.split_once(':')?;
    // `streams:`, or quoted as YAML allows: `"streams":`, `'streams':`.
    let key = ['"', '\''].iter().find_map(|q| key.strip_prefix(*q)?.strip_suffix(*q)).unwrap_or(key);
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (plain && (rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))).then_some(key)
}

/// A line without its ` # comment`.
fn strip_comment(line: &str) -> &str {
    match line.find(" #") {
        Some(i) => &line[..i],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(text: &str, name: &str) -> String {
        let stories = vec!["US-009".to_string()];
        let paths = vec!["src/x/**".to_string()];
        insert_stream(text, &NewStream { name, stories: &stories, paths: &paths }).unwrap()
    }

    #[test]
    fn appends_to_the_block_keeping_comments_and_order() {
        let text = "# my plan\nversion: 1\nstreams:\n    # the api\n    api:\n        stories: [US-001]   # first\n        paths: ['src/api/**']\n\n# settings next\nsettings:\n  base_branch: main\n";
        let out = add(text, "ui");
        assert_eq!(
            out,
            "# my plan\nversion: 1\nstreams:\n    # the api\n    api:\n        stories: [US-001]   # first\n        paths: ['src/api/**']\n    ui:\n        stories: [US-009]\n        paths: [src/x/**]\n\n# settings next\nsettings:\n  base_branch: main\n"
        );
    }

    #[test]
    fn empty_missing_and_crlf() {
        assert_eq!(
            add("version: 1\nstreams: {}  # none yet\n", "a"),
            "version: 1\nstreams:  # none yet\n  a:\n    stories: [US-009]\n    paths: [src/x/**]\n"
        );
        assert_eq!(
            add("version: 1", "a"),
            "version: 1\nstreams:\n  a:\n    stories: [US-009]\n    paths: [src/x/**]\n"
        );
        let out = add("version: 1\r\nstreams:\r\n  b:\r\n    stories: [US-1]\r\n", "a");
        assert_eq!(out, "version: 1\r\nstreams:\r\n  b:\r\n    stories: [US-1]\r\n  a:\r\n    stories: [US-009]\r\n    paths: [src/x/**]\r\n");
    }

    #[test]
    fn a_quoted_streams_key_is_the_streams_key() {
        for q in ["\"", "'"] {
            let text = format!("version: 1\n{q}streams{q}:\n  b:\n    stories: [US-1]\n");
            let out = add(&text, "a");
            assert_eq!(out, format!("{text}  a:\n    stories: [US-009]\n    paths: [src/x/**]\n"));
        }
    }

    #[test]
    fn refusals() {
        let none: Vec<String> = Vec::new();
        let ns = |name| NewStream { name, stories: &none, paths: &none };
        let text = "version: 1\nstreams:\n  a:\n    stories: []\n";
        assert_eq!(insert_stream(text, &ns("a")).unwrap_err().exit_code(), 1);
        assert_eq!(insert_stream(text, &ns("a b")).unwrap_err().exit_code(), 2);
        assert_eq!(insert_stream("version: 1\nstreams: {a: {stories: []}}\n", &ns("b")).unwrap_err().exit_code(), 2);
        let bad = vec!["../x".to_string()];
        assert_eq!(
            insert_stream(text, &NewStream { name: "b", stories: &none, paths: &bad }).unwrap_err().exit_code(),
            2
        );
    }
}
