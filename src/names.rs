//! Stream and boulder names: each must be one valid ref component (DESIGN §3) before any ref or
//! path is built from it.

use crate::error::{Error, Result};

/// What names may be, for hints.
pub const RULE: &str = "names may use letters, digits, '.', '_' and '-', must not start with '.' or '-', \
                        contain '..' or end in '.lock'";

/// A stream or boulder name that is not one valid ref component.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} name {name:?}: {why}")]
pub struct NameError {
    /// What the name is of: "stream", "boulder" …
    pub what: &'static str,
    pub name: String,
    /// Why it is refused (see [`problem`]).
    pub why: &'static str,
}

/// Check a name; `what` ("stream", "boulder") names it in the error.
pub fn check(what: &'static str, name: &str) -> std::result::Result<(), NameError> {
    match problem(name) {
        None => Ok(()),
        Some(why) => Err(NameError { what, name: name.to_string(), why }),
    }
}

/// Check a stream or boulder name; `what` ("stream", "boulder") names it in the message.
pub fn validate(what: &'static str, name: &str) -> Result<()> {
    check(what, name).map_err(|e| Error::usage(e.to_string()).with_source(e).hint(RULE))
}

/// Why `name` is not acceptable, or `None` when it is.
pub fn problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.len() > 100 {
        return Some("it is longer than 100 characters");
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Some(match c {
            '/' | '\\' => "it contains a path separator",
            c if c.is_whitespace() => "it contains whitespace",
            c if c.is_control() => "it contains a control character",
            _ => "it contains a character other than ASCII letters, digits, '.', '_' or '-'",
        });
    }
    if name.starts_with('.') {
        return Some("it starts with '.'");
    }
    if name.starts_with('-') {
        return Some("it starts with '-'");
    }
    if name.contains("..") {
        return Some("it contains '..'");
    }
    if name.ends_with(".lock") {
        return Some("it ends with '.lock'");
    }
    if name.ends_with('.') {
        return Some("it ends with '.'");
    }
    if name == "HEAD" || name == "@" {
        return Some("it is reserved by git");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::problem;

    #[test]
    fn accepts_plain_names() {
        for ok in ["auth", "api-v2", "ui_1", "a.b", "A9"] {
            assert_eq!(problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn rejects_hostile_names() {
        for bad in ["", "../x", "a..b", "HEAD", "x.lock", "-rf", ".hidden", "a/b", "a b", "é", "a\u{0}b", "end."] {
            assert!(problem(bad).is_some(), "{bad:?} accepted");
        }
    }
}
