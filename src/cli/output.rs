//! Output helpers: colour only on a terminal and never under `NO_COLOR`, plain tables, JSON.

use std::io::{IsTerminal, Write};

use crate::error::Result;

/// Whether stdout should be coloured.
pub fn color_stdout() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
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
    let rows: Vec<Vec<String>> =
        rows.iter().map(|r| r.iter().map(|c| crate::text::inert(c).into_owned()).collect()).collect();
    let rows = &rows;
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    // One line: every cell but the last padded to its column's width (colour codes added after
    // padding, so they do not count), two spaces between columns.
    let line = |cells: &[String], paint_cell: &dyn Fn(usize, &str) -> String| -> String {
        let n = cells.len();
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad =
                    if i + 1 == n { String::new() } else { " ".repeat(widths[i].saturating_sub(c.chars().count())) };
                format!("{}{pad}", paint_cell(i, c))
            })
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    let head: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    writeln!(out, "{}", paint(on, "1", &line(&head, &|_, c| c.to_string())))?;
    for row in rows {
        let painted = |i: usize, c: &str| match colour(i, c) {
            Some(code) if on => paint(true, code, c),
            _ => c.to_string(),
        };
        writeln!(out, "{}", line(row, &painted))?;
    }
    Ok(())
}

/// Print a value as pretty JSON with a trailing newline.
pub fn json(out: &mut impl Write, value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| crate::Error::internal(format!("JSON output: {e}")))?;
    // serde_json escapes C0 controls; C1 controls and bidirectional overrides (which can only
    // occur inside strings) are escaped here too, so the output is inert on any terminal.
    let active = |c: char| matches!(c, '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    let text = if text.contains(active) {
        let mut escaped = String::with_capacity(text.len() + 16);
        for c in text.chars() {
            if active(c) {
                escaped.push_str(&format!("\\u{:04x}", c as u32));
            } else {
                escaped.push(c);
            }
        }
        escaped
    } else {
        text
    };
    writeln!(out, "{text}")?;
    Ok(())
}

/// The colour of a stream or story status.
pub fn status_colour(status: &str) -> Option<&'static str> {
    match status {
        "COMPLETED" | "MERGED" | "completed" => Some("32"),
        "RUNNING" | "in_progress" | "INITIALIZED" => Some("33"),
        "FAILED" | "STALE" | "blocked" => Some("31"),
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
