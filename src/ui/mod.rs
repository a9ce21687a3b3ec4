//! `git boulder ui`: a live, read-only dashboard served to a browser on this machine.
//!
//! One thread (the command's own) watches what `status --watch` watches ([`fingerprint`]: the
//! refs, the locks held here) plus the plan file and the worktrees folder, a few times a second,
//! and makes a new [`snapshot`] only when that changes; with `--pull D` it also pulls the
//! default remote every D. Connections get a thread each and only read the last snapshot: a page
//! holds one server-sent event stream and gets a snapshot when there is a new one, so any number
//! of open pages costs the repository nothing more. Nothing served can change anything
//! ([`http`]: GET and HEAD only, behind a `Host` check and, beyond loopback, a token).
//!
//! The page (HTML, CSS, script) is embedded in the binary: no build step, nothing from a CDN.

pub mod http;
pub mod snapshot;

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::error::{Error, Result};
use crate::workspace::Workspace;

const PAGE: &str = include_str!("page/index.html");
const STYLE: &str = include_str!("page/style.css");
const SCRIPT: &str = include_str!("page/app.js");

/// How often the state is looked at: what `status --watch` does, a little less eagerly.
const LOOK_EVERY: Duration = Duration::from_millis(500);
/// A comment line on each event stream this often, so a closed page's thread ends.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// Connections served at once; more are answered 503 (a page holds one).
const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send its request, or to take an answer.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// What `git boulder ui` was asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub bind: IpAddr,
    /// 0: a free port.
    pub port: u16,
    /// Pull from the default remote this often.
    pub pull: Option<Duration>,
}

/// The last snapshot, and how many there have been.
struct Current {
    generation: u64,
    snapshot: Arc<String>,
    status: Arc<String>,
}

/// What the connection threads share with the watching thread.
struct Shared {
    current: Mutex<Current>,
    changed: Condvar,
    gate: http::Gate,
    /// The page, with its nonce in place.
    page: String,
    nonce: String,
    connections: AtomicUsize,
}

/// A running server: its URL is known once it listens.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    pub url: String,
    /// What the first snapshot was made from.
    seen: Vec<(String, String)>,
    cache: snapshot::Cache,
}

/// Listen on `opts.bind:opts.port` and make the first snapshot; [`Server::run`] serves.
pub fn start(ws: &Workspace, opts: &Options) -> Result<Server> {
    let want = SocketAddr::new(opts.bind, opts.port);
    let listener = TcpListener::bind(want).map_err(|e| {
        Error::refused(format!("cannot listen on {want}: {e}"))
            .with_source(e)
            .hint("choose another --port, or leave --port out for a free one")
    })?;
    let addr = listener.local_addr()?;
    // Beyond loopback, anyone on the network could ask: the URL carries a secret.
    let token = if opts.bind.is_loopback() { None } else { Some(random_hex(16)?) };
    let hostname = crate::git::identity::hostname();
    let shown_host = match addr.ip() {
        ip if ip.is_unspecified() => hostname.clone(),
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    let url = match &token {
        Some(t) => format!("http://{shown_host}:{}/?token={t}", addr.port()),
        None => format!("http://{shown_host}:{}/", addr.port()),
    };
    let nonce = random_hex(16)?;
    let page = PAGE.replace("{{NONCE}}", &nonce).replace("{{STYLE}}", STYLE).replace("{{SCRIPT}}", SCRIPT);
    // Looked at before the first snapshot is made: a change meanwhile makes the next one.
    let seen = watched(ws, &json!({}));
    let mut cache = snapshot::Cache::default();
    let (snapshot, status) = make(ws, &json!({}), &mut cache);
    let shared = Arc::new(Shared {
        current: Mutex::new(Current { generation: 1, snapshot: Arc::new(snapshot), status: Arc::new(status) }),
        changed: Condvar::new(),
        gate: http::Gate { addr, token, hostname },
        page,
        nonce,
        connections: AtomicUsize::new(0),
    });
    Ok(Server { listener, shared, url, seen, cache })
}

impl Server {
    /// Serve until `stop` is set, making a new snapshot whenever the state changes.
    pub fn run(self, ws: &Workspace, opts: &Options, stop: &AtomicBool) -> Result<()> {
        let shared = self.shared.clone();
        let listener = self.listener;
        std::thread::spawn(move || accept(listener, shared));
        let mut pull = opts.pull.map(|every| Puller::new(ws, every));
        let (mut seen, mut cache) = (self.seen, self.cache);
        while !stop.load(Ordering::SeqCst) {
            let extra = match pull.as_mut() {
                Some(p) => p.tick(ws),
                None => json!({}),
            };
            let now = watched(ws, &extra);
            if seen != now {
                seen = now;
                let (snapshot, status) = make(ws, &extra, &mut cache);
                self.shared.publish(snapshot, status);
            }
            std::thread::sleep(LOOK_EVERY);
        }
        Ok(())
    }
}

/// What a change of makes a new snapshot: the refs and locks (`status --watch`'s fingerprint),
/// the plan's text, the worktrees folder, and what the puller says.
fn watched(ws: &Workspace, extra: &serde_json::Value) -> Vec<(String, String)> {
    let mut seen = crate::stream::status::fingerprint(ws).unwrap_or_else(|e| vec![("error".into(), e.message)]);
    if let Ok((text, _)) = ws.plan_text() {
        seen.push(("plan".into(), text));
    }
    if let Ok(plan) = ws.plan() {
        if let Ok(dir) = ws.worktree_dir(&plan) {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            seen.push(("worktrees".into(), names.join("\n")));
        }
    }
    seen.push(("server".into(), extra.to_string()));
    seen
}

/// A snapshot and `status --json`, or a snapshot saying why there is none.
fn make(ws: &Workspace, extra: &serde_json::Value, cache: &mut snapshot::Cache) -> (String, String) {
    match snapshot::build(ws, extra.clone(), cache) {
        Ok(b) => (b.snapshot, b.status),
        Err(e) => {
            let failed = snapshot::failed(&e.message, extra.clone());
            (failed.clone(), failed)
        }
    }
}

impl Shared {
    fn publish(&self, snapshot: String, status: String) {
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if *cur.snapshot == snapshot {
            return;
        }
        cur.generation += 1;
        cur.snapshot = Arc::new(snapshot);
        cur.status = Arc::new(status);
        self.changed.notify_all();
    }

    fn current(&self) -> (u64, Arc<String>, Arc<String>) {
        let cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        (cur.generation, cur.snapshot.clone(), cur.status.clone())
    }
}

/// `--pull D`: the default remote pulled every D; what happened goes into the snapshot.
struct Puller {
    every: Duration,
    last: Option<Instant>,
    remote: crate::error::Result<crate::git::remote::RemoteName>,
    error: Option<String>,
}

impl Puller {
    fn new(ws: &Workspace, every: Duration) -> Puller {
        let base = ws.plan().map(|p| p.settings.base_branch).unwrap_or_else(|_| "main".into());
        let remote = crate::sync::resolve(&ws.repo, None, &base);
        if let Err(why) = &remote {
            eprintln!("warning: not pulling: {}", crate::text::inert_lines(&why.message));
        }
        Puller { every, last: None, remote, error: None }
    }

    fn tick(&mut self, ws: &Workspace) -> serde_json::Value {
        let remote = match &self.remote {
            Ok(r) => r,
            Err(why) => return json!({ "pull": { "error": why.message } }),
        };
        if self.last.is_none_or(|t| t.elapsed() >= self.every) {
            self.last = Some(Instant::now());
            let error = crate::sync::pull(&ws.repo, remote).err().map(|e| e.message);
            if error.is_some() && error != self.error {
                eprintln!(
                    "warning: pull from {}: {}",
                    remote.given,
                    crate::text::inert_lines(error.as_deref().unwrap_or(""))
                );
            }
            self.error = error;
        }
        json!({ "pull": { "remote": remote.given, "every_secs": self.every.as_secs_f64(), "error": self.error } })
    }
}

/// Accept connections, a thread each, as many as [`MAX_CONNECTIONS`] at once.
fn accept(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        if shared.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            shared.connections.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
            let _ = http::respond(&mut stream, 503, "text/plain", &[], b"too many connections\n", false);
            continue;
        }
        let shared = shared.clone();
        std::thread::spawn(move || {
            let _ = serve(&shared, stream);
            shared.connections.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Answer one request.
fn serve(shared: &Shared, mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let Some(req) = http::read_request(&stream) else { return http::refuse(&mut stream, http::Refusal::Malformed) };
    if let Err(why) = shared.gate.check(&req) {
        return http::refuse(&mut stream, why);
    }
    let head = req.method == "HEAD";
    const JSON: &str = "application/json";
    match req.path.as_str() {
        "/" | "/index.html" => {
            let csp = format!(
                "default-src 'none'; script-src 'nonce-{n}'; style-src 'nonce-{n}'; connect-src 'self'; \
                 img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
                n = shared.nonce
            );
            let extra = [("Content-Security-Policy", csp.as_str())];
            http::respond(&mut stream, 200, "text/html; charset=utf-8", &extra, shared.page.as_bytes(), head)
        }
        "/api/status" => http::respond(&mut stream, 200, JSON, &[], shared.current().2.as_bytes(), head),
        "/api/snapshot" => http::respond(&mut stream, 200, JSON, &[], shared.current().1.as_bytes(), head),
        "/events" if head => http::respond(&mut stream, 200, "text/event-stream", &[], b"", true),
        "/events" => events(shared, stream),
        path => match path.strip_prefix("/api/stream/").and_then(|name| stream_of(&shared.current().1, name)) {
            Some(body) => http::respond(&mut stream, 200, JSON, &[], body.as_bytes(), head),
            None => http::respond(&mut stream, 404, "text/plain", &[], b"not found\n", head),
        },
    }
}

/// One stream of the snapshot (`/api/stream/NAME`).
fn stream_of(snapshot: &str, name: &str) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_str(snapshot).ok()?;
    let found = doc.get("streams")?.as_array()?.iter().find(|s| s["row"]["name"].as_str() == Some(name))?;
    Some(found.to_string())
}

/// A server-sent event stream: the current snapshot, then each new one, until the page goes.
fn events(shared: &Shared, mut stream: TcpStream) -> std::io::Result<()> {
    use std::io::Write;
    http::start_events(&mut stream)?;
    stream.write_all(b"retry: 2000\n\n")?;
    let mut sent = 0;
    loop {
        let (generation, snapshot, _) = shared.current();
        if generation != sent {
            // A JSON document on one line (serde_json escapes newlines in strings): one data line.
            stream.write_all(b"event: snapshot\ndata: ")?;
            stream.write_all(snapshot.as_bytes())?;
            stream.write_all(b"\n\n")?;
            stream.flush()?;
            sent = generation;
        }
        let cur = shared.current.lock().unwrap_or_else(|e| e.into_inner());
        let (cur, timeout) = shared
            .changed
            .wait_timeout_while(cur, KEEPALIVE, |c| c.generation == sent)
            .unwrap_or_else(|e| e.into_inner());
        drop(cur);
        if timeout.timed_out() {
            stream.write_all(b": keepalive\n\n")?;
            stream.flush()?;
        }
    }
}

/// `n` random bytes from the system, as hex.
fn random_hex(n: usize) -> Result<String> {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::internal("cannot read random bytes for the dashboard's token").with_source(e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Open `url` in the user's browser with the platform's opener, without waiting for it. Not git:
/// a program named here, given the URL as its one argument (no shell).
pub fn open_browser(url: &str) -> std::io::Result<()> {
    let program = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    let mut child = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // Reaped when it ends, so it does not linger as a zombie while the server runs.
    std::thread::spawn(move || child.wait());
    Ok(())
}
