//! Inert text: whatever comes from a PRD, a plan, a note, a remote or an agent is printed with its
//! control characters made visible, so a story title cannot retitle the terminal, clear the
//! screen or hide a line (DESIGN §11).
//!
//! * [`inert`] is for one line (a table cell, a message): every C0 control (newline and tab
//!   included), DEL, every C1 control (U+0080–U+009F) and the bidirectional overrides become
//!   visible escapes: `\e`, `\n`, `\t`, `\r`, `\x07`, `\u{9b}`, `\u{202e}`.
//! * [`inert_lines`] is for text printed as several lines (a story's body, an error message): the
//!   same, but newlines and tabs stay.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal as it is.
fn is_active(c: char, keep_lines: bool) -> bool {
    match c {
        '\n' | '\t' => !keep_lines,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        // Bidirectional embeddings, overrides and isolates reorder what is shown.
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

fn escape(text: &str, keep_lines: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_active(c, keep_lines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_active(c, keep_lines) {
            out.push(c);
            continue;
        }
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// One line of text, safe to print: no control character survives, not even a newline.
pub fn inert(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Text printed as lines, safe to print: newlines and tabs stay, every other control is escaped.
pub fn inert_lines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(inert("US-001: Login form — é"), Cow::Borrowed(_)));
    }

    #[test]
    fn controls_become_visible() {
        assert_eq!(inert("a\u{1b}]0;pwned\u{7}\u{1b}[2Jb"), "a\\e]0;pwned\\x07\\e[2Jb");
        assert_eq!(inert("x\ny\tz\r"), "x\\ny\\tz\\r");
        assert_eq!(inert("\u{9b}31m\u{7f}"), "\\u{9b}31m\\x7f");
        assert_eq!(inert("abc\u{202e}def"), "abc\\u{202e}def");
        assert_eq!(inert_lines("line 1\n\tline 2\u{1b}[2J\n"), "line 1\n\tline 2\\e[2J\n");
    }

    #[test]
    fn nothing_active_survives() {
        let all: String = (0u32..0x300).filter_map(char::from_u32).collect();
        for (s, keep) in [(inert(&all), false), (inert_lines(&all), true)] {
            assert!(!s.chars().any(|c| is_active(c, keep)), "{s:?}");
        }
    }
}
