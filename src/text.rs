//! Inert text: whatever comes from a PRD, a plan, a note, a remote or an agent is printed with its
//! control characters made visible, so a story title cannot retitle the terminal, clear the
//! screen or hide a line (DESIGN §11).
//!
//! * [`inert`] is for one line (a table cell, a message): every C0 control (newline and tab
//!   included), DEL, every C1 control (U+0080–U+009F) and the bidirectional overrides become
//!   visible escapes: `\e`, `\n`, `\t`, `\r`, `\x07`, `\u{9b}`, `\u{202e}`.
//! * [`inert_lines`] is for text printed as several lines (a story's body, an error message): the
//!   same, but newlines and tabs stay.
//! * [`quote_path`] is for a path in a repository (raw bytes, not always UTF-8): quoted exactly as
//!   git quotes it by default (`core.quotePath` true), so the name shown is the name git shows.

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
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !is_active(c, keep_lines) {
            out.push(c);
            continue;
        }
        match c {
            // A CRLF line ending (a PRD saved on Windows) ends the line as LF does.
            '\r' if keep_lines && chars.peek() == Some(&'\n') => {}
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

/// `core.quotePath` of the repository at hand (see [`quote_path`]); set when it is opened.
static QUOTE_NON_ASCII: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Follow the repository's `core.quotePath` (default true) in [`quote_path`].
pub fn set_quote_path(quote_non_ascii: bool) {
    QUOTE_NON_ASCII.store(quote_non_ascii, std::sync::atomic::Ordering::Relaxed);
}

/// `path` as git prints it (`quote_c_style`): as it is when no byte needs quoting, else in double
/// quotes with `\a \b \t \n \v \f \r \" \\` and three-digit octal for every other control byte,
/// DEL and — under `core.quotePath` true, git's default — every byte from 0x80 (`é` is
/// `\303\251`). With `core.quotePath` false, characters past ASCII are shown as they are, as git
/// shows them; bytes that are not UTF-8 are still octal. The result is one line of printable
/// characters, whatever the bytes.
pub fn quote_path(path: &[u8]) -> Cow<'_, str> {
    quote_path_as(path, QUOTE_NON_ASCII.load(std::sync::atomic::Ordering::Relaxed))
}

/// [`quote_path`] under `core.quotePath` = `quote_non_ascii`.
pub fn quote_path_as(path: &[u8], quote_non_ascii: bool) -> Cow<'_, str> {
    let control = |b: u8| b < 0x20 || b == 0x7f || b == b'"' || b == b'\\';
    let plain = path.iter().all(|&b| !control(b) && b < 0x80)
        || (!quote_non_ascii && !path.iter().any(|&b| control(b)) && std::str::from_utf8(path).is_ok());
    if plain {
        return Cow::Borrowed(std::str::from_utf8(path).expect("printable"));
    }
    let mut out = String::with_capacity(path.len() + 8);
    out.push('"');
    let octal = |out: &mut String, b: u8| out.push_str(&format!("\\{b:03o}"));
    for chunk in path.utf8_chunks() {
        for c in chunk.valid().chars() {
            let named = match c {
                '\x07' => Some('a'),
                '\x08' => Some('b'),
                '\t' => Some('t'),
                '\n' => Some('n'),
                '\x0b' => Some('v'),
                '\x0c' => Some('f'),
                '\r' => Some('r'),
                '"' | '\\' => Some(c),
                _ => None,
            };
            match named {
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None if c.is_ascii() && control(c as u8) => octal(&mut out, c as u8),
                None if !c.is_ascii() && quote_non_ascii => {
                    for b in c.to_string().bytes() {
                        octal(&mut out, b);
                    }
                }
                None => out.push(c),
            }
        }
        for &b in chunk.invalid() {
            octal(&mut out, b);
        }
    }
    out.push('"');
    Cow::Owned(out)
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
        // A CRLF ending is a line ending; a lone CR (which would overwrite the line) shows.
        assert_eq!(inert_lines("a\r\nb\rc\r\r\n"), "a\nb\\rc\\r\n");
        assert_eq!(inert("a\r\n"), "a\\r\\n");
    }

    #[test]
    fn nothing_active_survives() {
        let all: String = (0u32..0x300).filter_map(char::from_u32).collect();
        for (s, keep) in [(inert(&all), false), (inert_lines(&all), true)] {
            assert!(!s.chars().any(|c| is_active(c, keep)), "{s:?}");
        }
    }

    #[test]
    fn paths_are_quoted_as_git_shows_them() {
        for (name, shown) in [
            (&b"src/a.rs"[..], "src/a.rs"),
            (b"sp ace, it's ~!#$%&()*+-.:;<=>?@[]^_`{|}", "sp ace, it's ~!#$%&()*+-.:;<=>?@[]^_`{|}"),
            (b"src/b/\x1b[2J\x1b[31mesc", "\"src/b/\\033[2J\\033[31mesc\""),
            (b"a\nb", "\"a\\nb\""),
            (b"bell\x07\x08\x0b\x0c\r\tx", "\"bell\\a\\b\\v\\f\\r\\tx\""),
            (b"\x01\x1f\x7f", "\"\\001\\037\\177\""),
            (b"q\"uote\\", "\"q\\\"uote\\\\\""),
            (b"src/b/\xffbad", "\"src/b/\\377bad\""),
            ("é".as_bytes(), "\"\\303\\251\""),
        ] {
            assert_eq!(quote_path(name), shown, "{}", name.escape_ascii());
        }
        assert!(matches!(quote_path(b"src/a.rs"), Cow::Borrowed(_)));
    }

    /// Every byte a path can hold, alone and among others, quoted as `git ls-files` (core.quotePath
    /// true, git's default) quotes it: names go into an index without files, so any byte fits.
    #[test]
    fn paths_are_quoted_byte_for_byte_as_git_ls_files_quotes_them() {
        use std::io::Write;
        use std::process::{Command, Stdio};

        let tmp = tempfile::tempdir().expect("tempdir");
        let git = |args: &[&str], input: &[u8]| -> Vec<u8> {
            let mut child = Command::new("git")
                .current_dir(tmp.path())
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("git runs");
            child.stdin.take().expect("stdin").write_all(input).expect("write stdin");
            let out = child.wait_with_output().expect("git runs");
            assert!(out.status.success(), "git {args:?}");
            out.stdout
        };
        git(&["init", "-q"], b"");
        let blob = String::from_utf8(git(&["hash-object", "-w", "--stdin"], b"x")).expect("an id");
        let mut names: Vec<Vec<u8>> = (1..=255u8).filter(|&b| b != b'/').map(|b| vec![b'x', b, b'y']).collect();
        names.extend(["é", "dir/ü 1.rs", "\u{202e}txt.exe"].map(|n| n.as_bytes().to_vec()));
        names.push(b"src/\x1b]0;title\x07\"q\"\\\x80\xff\r\n".to_vec());
        let mut input = Vec::new();
        for name in &names {
            input.extend_from_slice(format!("100644 {}\t", blob.trim()).as_bytes());
            input.extend_from_slice(name);
            input.push(0);
        }
        git(&["update-index", "--add", "-z", "--index-info"], &input);
        let raw = git(&["ls-files", "-z"], b"");
        let quoted = String::from_utf8(git(&["-c", "core.quotePath=true", "ls-files"], b"")).expect("ASCII");
        let raw: Vec<&[u8]> = raw.split(|&b| b == 0).filter(|n| !n.is_empty()).collect();
        let quoted: Vec<&str> = quoted.lines().collect();
        assert_eq!(raw.len(), names.len());
        assert_eq!(quoted.len(), names.len());
        for (name, shown) in raw.iter().zip(quoted) {
            assert_eq!(quote_path(name), shown, "{}", name.escape_ascii());
        }
    }

    #[test]
    fn quote_path_false_shows_characters_past_ascii_as_they_are() {
        assert_eq!(quote_path_as("é/ü.rs".as_bytes(), false), "é/ü.rs");
        assert_eq!(quote_path_as("é/ü.rs".as_bytes(), true), "\"\\303\\251/\\303\\274.rs\"");
        // Still quoted: control bytes, quotes, backslashes, bytes that are not UTF-8.
        assert_eq!(quote_path_as("é\n\"".as_bytes(), false), "\"é\\n\\\"\"");
        assert_eq!(quote_path_as(b"a\xffb", false), "\"a\\377b\"");
        assert_eq!(quote_path_as("é\x1b[31m".as_bytes(), false), "\"é\\033[31m\"");
    }
}
