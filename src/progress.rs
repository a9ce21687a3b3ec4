//! One-line progress for long operations (init of many streams, merges of many commits, sync),
//! on stderr and only on a terminal: silent when piped, under `--quiet` (`BOULDER_QUIET`), and
//! while tracing (`-v`, whose lines would interleave).

use std::io::IsTerminal;

/// Whether progress lines are shown.
pub fn enabled() -> bool {
    let ctx = crate::context::current();
    std::io::stderr().is_terminal() && !ctx.quiet && !ctx.trace
}

/// Show `text` as the current progress line (replacing the previous one).
pub fn show(text: &str) {
    if enabled() {
        // Progress quotes stream and ref names: one inert line.
        let text = crate::text::inert(text);
        let mut line: String = text.chars().take(100).collect();
        if line.len() < text.len() {
            line.push('…');
        }
        eprint!("\r\x1b[2K{line}");
    }
    crate::trace::line(text);
}

/// Clear the progress line.
pub fn done() {
    if enabled() {
        eprint!("\r\x1b[2K");
    }
}

/// A note on stderr of what a command did (`recorded done: US-001`), left out under `--quiet`
/// (`BOULDER_QUIET`); printed inert. Warnings and errors are not notes: they always show.
pub fn note(line: &str) {
    if !crate::context::current().quiet {
        eprintln!("{}", crate::text::inert_lines(line));
    }
}
