//! Tracing for `-v` / `BOULDER_TRACE=1`: what git-boulder does and how long each part takes, one
//! line per step on stderr (`trace: 12.3ms status: dirty checks`). Off, a span costs one cached
//! lookup.

use std::time::Instant;

/// Whether tracing is on (`-v`, or `BOULDER_TRACE` set to anything but empty or `0`; see
/// [`crate::context`]).
pub fn enabled() -> bool {
    crate::context::current().trace
}

/// Print a trace line.
pub fn line(text: &str) {
    if enabled() {
        eprintln!("trace: {}", crate::text::inert_lines(text));
    }
}

/// A timed step: prints its duration when dropped.
pub struct Span {
    what: Option<(String, Instant)>,
}

/// Start timing `what` (a no-op unless tracing is on).
pub fn span(what: impl Into<String>) -> Span {
    Span { what: enabled().then(|| (what.into(), Instant::now())) }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some((what, start)) = self.what.take() {
            eprintln!("trace: {:8.1}ms {what}", start.elapsed().as_secs_f64() * 1000.0);
        }
    }
}
