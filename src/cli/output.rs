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
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        let n = cells.len();
        cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| if i + 1 == n { c } else { format!("{c}{}", " ".repeat(widths[i] - c.chars().count())) })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    // Pad with plain widths, then paint the whole header line bold.
    let head = line(header.iter().map(|h| h.to_string()).collect());
    writeln!(out, "{}", paint(on, "1", &head))?;
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        let n = cells.len();
        cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| if i + 1 == n { c } else { format!("{c}{}", " ".repeat(widths[i] - c.chars().count())) })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let head: Vec<String> = header.iter().map(|h| paint(on, "1", h)).collect();
    let head_plain: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    if on {
        // Pad with plain widths, then paint the whole header bold.
        writeln!(out, "{}", paint(on, "1", &line(head_plain)))?;
    } else {
        let _ = head;
        writeln!(out, "{}", line(head_plain))?;
    }
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = " ".repeat(widths[i].saturating_sub(c.chars().count()));
                let last = i + 1 == row.len();
                let painted = match colour(i, c) {
                    Some(code) if on => paint(true, code, c),
                    _ => c.clone(),
                };
                if last {
                    painted
                } else {
                    format!("{painted}{pad}")
                }
            })
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

/// Print a value as pretty JSON with a trailing newline.
pub fn json(out: &mut impl Write, value: &impl serde::Serialize) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(|e| crate::Error::internal(format!("JSON output: {e}")))?;
    writeln!(out)?;
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

/// Whether progress lines go to stderr: only on a terminal, and not under `--quiet`.
pub fn progress_enabled() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("BOULDER_QUIET").is_none()
}

/// Show a one-line progress message on a terminal (overwritten by the next one).
pub fn progress(text: &str) {
    if progress_enabled() {
        eprint!("\r\x1b[2K{text}");
    }
}

/// Clear the progress line.
pub fn progress_done() {
    if progress_enabled() {
        eprint!("\r\x1b[2K");
    }
}
