//! `settings.prompt_template`: the text `stream run` gives the agent as `BOULDER_PROMPT`, with
//! `{placeholder}`s filled in per iteration. Parsed here (an unknown placeholder or a lone brace is
//! an error of the plan); filled in by `crate::stream::prompt`.

/// The placeholders a template may use, with what each stands for (docs/harness.md lists them).
pub const PLACEHOLDERS: &[(&str, &str)] = &[
    ("stream", "the stream's name"),
    ("story_id", "the id of the story of this iteration"),
    ("story_title", "its title"),
    ("story_file", "a file holding the story's text"),
    ("prd", "the PRD path, relative to the worktree"),
    ("iteration", "the iteration number, from 1"),
    ("owned_paths", "the stream's own paths (globs), comma-separated"),
    ("read_only_paths", "the shared_read globs: read them, never change them"),
];

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'t> {
    Text(&'t str),
    /// `{name}`: one of [`PLACEHOLDERS`].
    Placeholder(&'static str),
}

/// Why a template cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("a lone '}}' (write '}}}}' for a literal brace)")]
    LoneClose,
    #[error("a '{{' without its '}}' (write '{{{{' for a literal brace)")]
    Unclosed,
    /// The name as written (its first 40 characters).
    #[error("unknown placeholder {{{name}}}; placeholders: {}", PLACEHOLDERS.iter().map(|(p, _)| format!("{{{p}}}")).collect::<Vec<_>>().join(" "))]
    Unknown { name: String },
}

/// Parse a template: `{name}` is a placeholder, `{{` and `}}` stand for `{` and `}`. An unknown
/// placeholder or an unmatched brace is an error naming it.
pub fn parse(template: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let mut out = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        let Some(at) = rest.find(['{', '}']) else {
            out.push(Piece::Text(rest));
            break;
        };
        if at > 0 {
            out.push(Piece::Text(&rest[..at]));
        }
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push(Piece::Text("{"));
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push(Piece::Text("}"));
            rest = after;
        } else if tail.starts_with('}') {
            return Err(TemplateError::LoneClose);
        } else {
            let Some(end) = tail.find('}') else {
                return Err(TemplateError::Unclosed);
            };
            let name = &tail[1..end];
            let Some((known, _)) = PLACEHOLDERS.iter().find(|(p, _)| *p == name) else {
                return Err(TemplateError::Unknown { name: name.chars().take(40).collect() });
            };
            out.push(Piece::Placeholder(known));
            rest = &tail[end + 1..];
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_escapes_and_errors() {
        assert_eq!(
            parse("Work on {story_id} {{x}}").unwrap(),
            vec![
                Piece::Text("Work on "),
                Piece::Placeholder("story_id"),
                Piece::Text(" "),
                Piece::Text("{"),
                Piece::Text("x"),
                Piece::Text("}")
            ]
        );
        assert!(parse("{nope}").unwrap_err().to_string().contains("unknown placeholder {nope}"));
        assert!(parse("a { b").unwrap_err().to_string().contains("without its"));
        assert!(parse("a } b").unwrap_err().to_string().contains("lone"));
        assert!(parse("${HOME}").unwrap_err().to_string().contains("{HOME}"));
        assert_eq!(parse("").unwrap(), vec![]);
    }
}
