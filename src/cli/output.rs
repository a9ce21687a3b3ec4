//! Output helpers: colour as git's `color.ui` says (on a terminal by default), never under
//! `NO_COLOR`; plain tables, JSON.

use std::io::Write;

use crate::error::Result;

/// Whether stdout should be coloured (see [`crate::context`]).
pub fn color_stdout() -> bool {
    crate::context::colour()
}

/// Wrap `text` in an ANSI colour when `on`.
pub fn paint(on: bool, code: &str, text: &str) -> String {
    if on {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// Print a table: a header row and rows, columns padded to their widest cell. `colour` maps
/// (column, cell) to an ANSI code for that cell, applied after padding.
pub fn table(
    out: &mut impl Write,
    header: &[&str],
    rows: &[Vec<String>],
    colour: impl Fn(usize, &str) -> Option<&'static str>,
) -> Result<()> {
    let on = color_stdout();
    // Cells carry titles, names and remote text: one line each, no control character.
    let rows: Vec<Vec<std::borrow::Cow<'_, str>>> =
        rows.iter().map(|r| r.iter().map(|c| crate::text::inert(c)).collect()).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    // Lines are written through one buffer (a PRD of 100,000 stories is 100,000 rows).
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    let mut buf = String::new();
    let head = table_line(&mut buf, &widths, header.iter().map(|h| (*h, None)));
    writeln!(out, "{}", paint(on, "1", head))?;
    for row in &rows {
        let cells = row.iter().enumerate().map(|(i, c)| (c.as_ref(), colour(i, c).filter(|_| on)));
        writeln!(out, "{}", table_line(&mut buf, &widths, cells))?;
    }
    out.flush()?;
    Ok(())
}

/// One line of a table in `buf`: every cell but the last padded to its column's width (a
/// cell's colour code added after padding, so it does not count), two spaces between columns,
/// no trailing whitespace.
fn table_line<'b, 'c>(
    buf: &'b mut String,
    widths: &[usize],
    cells: impl ExactSizeIterator<Item = (&'c str, Option<&'static str>)>,
) -> &'b str {
    buf.clear();
    let n = cells.len();
    for (i, (cell, code)) in cells.enumerate() {
        if i > 0 {
            buf.push_str("  ");
        }
        match code {
            Some(code) => buf.push_str(&paint(true, code, cell)),
            None => buf.push_str(cell),
        }
        if i + 1 < n {
            let pad = widths[i].saturating_sub(cell.chars().count());
            buf.extend(std::iter::repeat_n(' ', pad));
        }
    }
    buf.trim_end()
}

/// Print a value as pretty JSON with a trailing newline, streamed (a PRD of 100,000 stories is
/// never held twice in memory as text).
///
/// serde_json escapes C0 controls; C1 controls, DEL and bidirectional overrides (which can only
/// occur inside strings) are escaped here too, so the output is inert on any terminal.
pub fn json(out: &mut impl Write, value: &impl serde::Serialize) -> Result<()> {
    let mut buf = std::io::BufWriter::with_capacity(64 * 1024, &mut *out);
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, Inert(serde_json::ser::PrettyFormatter::new()));
    value.serialize(&mut ser).map_err(|e| match e.io_error_kind() {
        Some(kind) => crate::Error::from(std::io::Error::from(kind)),
        None => crate::Error::internal(format!("JSON output: {e}")).with_source(e),
    })?;
    writeln!(buf)?;
    buf.flush()?;
    Ok(())
}

/// A JSON formatter that writes string contents with the characters terminals act on escaped.
struct Inert<F>(F);

fn active(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for Inert<F> {
    fn write_string_fragment<W: ?Sized + Write>(&mut self, w: &mut W, fragment: &str) -> std::io::Result<()> {
        if !fragment.contains(active) {
            return w.write_all(fragment.as_bytes());
        }
        let mut rest = fragment;
        while let Some(at) = rest.find(active) {
            w.write_all(&rest.as_bytes()[..at])?;
            let c = rest[at..].chars().next().expect("a char at a found index");
            write!(w, "\\u{:04x}", c as u32)?;
            rest = &rest[at + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// The colour of a stream or story status.
pub fn status_colour(status: &str) -> Option<&'static str> {
    match status {
        "COMPLETED" | "MERGED" | "APPROVED" | "completed" => Some("32"),
        "RUNNING" | "in_progress" | "INITIALIZED" | "REVIEW" => Some("33"),
        "FAILED" | "STALE" | "SETUP_FAILED" | "NEEDS_ATTENTION" | "CHANGES_REQUESTED" | "BUDGET_SPENT" | "blocked" => {
            Some("31")
        }
        "STOPPED" => Some("35"),
        _ => None,
    }
}

/// Show a one-line progress message on a terminal (see [`crate::progress`]).
pub fn progress(text: &str) {
    crate::progress::show(text);
}

/// Clear the progress line.
pub fn progress_done() {
    crate::progress::done();
}
