//! `git boulder status --watch`: the dashboard kept live — redrawn in place on a terminal (with `q`
//! read in non-canonical mode), a new block per change elsewhere.

use std::io::Write;

use crate::error::Result;
use crate::stream::status::{ago, collect};
use crate::workspace::Workspace;

/// `status --watch`: see [`StatusArgs::watch`].
pub fn run(ws: &Workspace, plan: &crate::plan::Plan, json: bool) -> Result<()> {
    use std::io::IsTerminal;
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    {
        let flag = stop.clone();
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    let tty = std::io::stdout().is_terminal() && !json;
    // `q` ends it: the terminal is put in non-canonical mode (no echo) while watching, restored
    // when the guard drops, whatever ends the watch.
    let _raw = keys(stop.clone());
    let mut last_print = String::new();
    let mut last_print_at: Option<std::time::Instant> = None;
    let mut last_seen = None;
    let mut last_collect: Option<std::time::Instant> = None;
    while !stop.load(Ordering::SeqCst) {
        let seen = crate::stream::status::fingerprint(ws)?;
        let due = last_collect.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1));
        if last_seen.as_ref() != Some(&seen) || (tty && due) {
            last_seen = Some(seen);
            last_collect = Some(std::time::Instant::now());
            let prd = ws.load_prd(Some(plan), None).ok().map(|(_, p)| p);
            let rows = collect(ws, plan, prd.as_ref())?;
            let block = if json {
                let mut v = serde_json::to_string(&serde_json::json!({ "streams": rows }))
                    .map_err(|e| crate::error::Error::internal(format!("cannot write JSON: {e}")).with_source(e))?;
                v.push('\n');
                v
            } else {
                watch_block(plan, &rows, tty)?
            };
            let mut out = std::io::stdout().lock();
            if tty {
                // Home and clear, then the table: a redraw in place.
                write!(out, "\x1b[H\x1b[2J{}", block.replace('\n', "\r\n"))?;
                writeln!(out, "(q or Ctrl-C to quit)\r")?;
                out.flush()?;
            } else if body(&block) != body(&last_print) || last_print_at.is_none() {
                if last_print_at.is_some() && !json {
                    writeln!(out)?;
                }
                out.write_all(block.as_bytes())?;
                out.flush()?;
                last_print = block;
                last_print_at = Some(std::time::Instant::now());
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Ok(())
}

/// A block without its header line (the time it was made): two blocks that say the same are
/// printed once, whatever ref moved.
fn body(block: &str) -> &str {
    if block.starts_with("streams at ") {
        block.split_once('\n').map_or("", |(_, rest)| rest)
    } else {
        block
    }
}

/// One block of the watch: a header line with the time, then the table.
fn watch_block(plan: &crate::plan::Plan, rows: &[crate::stream::status::StreamRow], tty: bool) -> Result<String> {
    let queue = crate::stream::status::queue(plan, rows);
    let table: Vec<Vec<String>> = rows
        .iter()
        .zip(queue)
        .map(|(r, q)| {
            vec![
                r.name.clone(),
                r.status.to_string(),
                format!("{}/{}", r.progress.done, r.progress.total),
                q,
                match &r.claim {
                    Some(c) if c.mine => "this machine".into(),
                    Some(c) => format!("{}@{}", c.actor, c.host),
                    None => "-".into(),
                },
                // Ages move every second: not on a terminal, the time itself, so a block is new
                // only when something changed.
                if tty {
                    ago(r.last_activity.as_deref())
                } else {
                    r.last_activity.clone().unwrap_or_else(|| "-".into())
                },
            ]
        })
        .collect();
    let mut out = Vec::new();
    writeln!(out, "streams at {}", crate::time::format_secs(crate::time::now_secs()))?;
    super::output::table(
        &mut out,
        &["STREAM", "STATUS", "PROGRESS", "QUEUE", "CLAIMED BY", "LAST ACTIVITY"],
        &table,
        |col, cell| match col {
            1 => super::output::status_colour(cell),
            _ => None,
        },
    )?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// While stdin is a terminal: non-canonical, no echo, and a thread that sets `stop` on `q`.
/// The returned guard restores the terminal.
fn keys(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Option<RawMode> {
    use rustix::termios::{tcgetattr, tcsetattr, LocalModes, OptionalActions};
    use std::io::{IsTerminal, Read};
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return None;
    }
    let saved = tcgetattr(&stdin).ok()?;
    let mut raw = saved.clone();
    raw.local_modes.remove(LocalModes::ICANON | LocalModes::ECHO);
    tcsetattr(&stdin, OptionalActions::Now, &raw).ok()?;
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        while let Ok(1) = std::io::stdin().lock().read(&mut byte) {
            if byte[0] == b'q' || byte[0] == b'Q' {
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
                break;
            }
        }
    });
    Some(RawMode(saved))
}

/// The terminal's settings before the watch, put back on drop.
struct RawMode(rustix::termios::Termios);

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(std::io::stdin(), rustix::termios::OptionalActions::Now, &self.0);
    }
}
