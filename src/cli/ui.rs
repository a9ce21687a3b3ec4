//! `git boulder ui`: serve the live dashboard ([`crate::ui`]) until Ctrl-C.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::context::Context;
use crate::error::Result;
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct UiArgs {
    /// The port to listen on (default: a free one).
    #[arg(long, value_name = "P", default_value_t = 0)]
    pub port: u16,
    /// Open the dashboard in the browser (xdg-open, or open on macOS).
    #[arg(long)]
    pub open: bool,
    /// The address to listen on (default: 127.0.0.1, this machine only). Any other address
    /// (0.0.0.0 for every interface) puts a random token in the URL, required on every request.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Pull git-boulder's state from the default remote every D (`30s`, `5m`), so the board shows
    /// the fleet; without it, the board shows what this repository has (after `git boulder sync`).
    #[arg(long, value_name = "D", value_parser = super::values::duration())]
    pub pull: Option<std::time::Duration>,
}

pub fn run(ws: &Workspace, ctx: &Context, args: UiArgs) -> Result<()> {
    // As `status` does: state that plain `git fetch` brought (after `git boulder remote setup`)
    // comes in first.
    if let Err(e) = crate::sync::absorb_pending(&ws.repo) {
        eprintln!("warning: {}", crate::text::inert_lines(&e.message));
    }
    let opts = crate::ui::Options { bind: args.bind, port: args.port, pull: args.pull };
    let server = crate::ui::start(ws, &opts)?;
    {
        // The URL alone on stdout, for scripts; the rest is a note.
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", server.url)?;
        out.flush()?;
    }
    if !ctx.quiet {
        eprintln!("serving the dashboard (read-only) at {}; Ctrl-C stops it", server.url);
    }
    if args.open {
        if let Err(e) = crate::ui::open_browser(&server.url) {
            eprintln!("warning: cannot open a browser ({e}); open {} yourself", server.url);
        }
    }
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    {
        let flag = stop.clone();
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    server.run(ws, &opts, &stop)
}
