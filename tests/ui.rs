//! `git boulder ui` on a real repository, looked at by a real browser: headless Chromium
//! (Debian's `chromium`, installed by `.ci/run`) driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`), so each check waits on what the page shows; and plain TCP
//! requests for what a browser would never send (a foreign `Host`, a POST, no token).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::common::{bin, commit_in, sample, wait_for, Remote, TestRepo, SAMPLE_PLAN, SAMPLE_PRD};

/// `git boulder ui` running on a repository, stopped on drop.
pub(crate) struct Ui {
    child: Child,
    /// The URL it printed.
    url: String,
    port: u16,
}

impl Ui {
    pub(crate) fn start(repo: &TestRepo, args: &[&str]) -> Ui {
        let mut child = repo
            .command(bin())
            .arg("ui")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(repo.tmp.path().join("ui.stderr")).unwrap()))
            .spawn()
            .expect("git boulder ui starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.trim().to_string();
        assert!(url.starts_with("http://"), "ui printed {url:?}");
        let port = url.rsplit_once(':').unwrap().1.split('/').next().unwrap().parse().unwrap();
        Ui { child, url, port }
    }

    /// The page on 127.0.0.1, with the token of the printed URL if there is one.
    fn local_url(&self) -> String {
        let query = self.url.split_once('?').map(|(_, q)| format!("?{q}")).unwrap_or_default();
        format!("http://127.0.0.1:{}/{query}", self.port)
    }

    /// A raw request line and headers, and the answer's status code and whole text.
    fn raw(&self, request: &str) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let code = answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (code, answer)
    }

    pub(crate) fn get(&self, target: &str, host: &str) -> (u16, String) {
        self.raw(&format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n"))
    }

    pub(crate) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's `chromium` on PATH. `None` (the test says why and returns) when it is missing here;
/// under `CI` its absence fails the test.
fn chromium() -> Option<PathBuf> {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("chromium"))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "chromium is missing: .ci/run installs Debian's chromium");
        eprintln!("skipped: chromium is not installed (apt-get install chromium; see .ci/run)");
    }
    found
}

/// Headless Chromium with one page, spoken to over the DevTools protocol on fds 3 and 4
/// (messages of JSON ended by a NUL byte). Killed on drop.
struct Browser {
    child: Child,
    to: std::io::PipeWriter,
    from: BufReader<std::io::PipeReader>,
    next: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn open(chromium: &PathBuf, url: &str) -> Browser {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let profile = tempfile::tempdir().unwrap();
        let (their_in, to) = std::io::pipe().unwrap();
        let (from, their_out) = std::io::pipe().unwrap();
        let (r, w) = (their_in.as_raw_fd(), their_out.as_raw_fd());
        let mut cmd = Command::new(chromium);
        cmd.args([
            "--headless",
            // Tests run as root in CI containers, where Chromium's sandbox cannot start.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-pipe",
            "about:blank",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec. The pipe ends are moved
        // above 10 first, so putting them on 3 and 4 cannot close one with the other.
        unsafe {
            cmd.pre_exec(move || {
                let (a, b) = (libc::fcntl(r, libc::F_DUPFD, 10), libc::fcntl(w, libc::F_DUPFD, 10));
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("chromium starts");
        drop((their_in, their_out));
        let mut b =
            Browser { child, to, from: BufReader::new(from), next: 0, session: String::new(), _profile: profile };
        let target = b.call("Target.createTarget", serde_json::json!({ "url": url }));
        let target = target["targetId"].as_str().expect("a target id").to_string();
        let attached = b.call("Target.attachToTarget", serde_json::json!({ "targetId": target, "flatten": true }));
        b.session = attached["sessionId"].as_str().expect("a session id").to_string();
        b
    }

    /// Send one command (to the page once attached) and return its result.
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.next += 1;
        let mut msg = serde_json::json!({ "id": self.next, "method": method, "params": params });
        if !self.session.is_empty() {
            msg["sessionId"] = self.session.clone().into();
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        loop {
            let mut buf = Vec::new();
            let n = self.from.read_until(0, &mut buf).unwrap();
            assert!(n > 0, "chromium closed the DevTools pipe");
            buf.pop();
            let answer: serde_json::Value = serde_json::from_slice(&buf).unwrap();
            if answer["id"].as_u64() == Some(self.next) {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// The value of a script run in the page.
    fn eval(&mut self, script: &str) -> serde_json::Value {
        let r = self.call("Runtime.evaluate", serde_json::json!({ "expression": script, "returnByValue": true }));
        r["result"]["value"].clone()
    }

    /// Wait until `script` is true in the page.
    fn wait(&mut self, what: &str, script: &str) {
        wait_for(what, || self.eval(script) == serde_json::Value::Bool(true));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The board's cards: (stream, status) in page order, sorted.
const CARDS: &str =
    "JSON.stringify([...document.querySelectorAll('.card')].map(c => [c.dataset.stream, c.dataset.status]).sort())";

#[test]
fn the_board_lists_every_stream_with_its_status() {
    let Some(chromium) = chromium() else { return };
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let ui = Ui::start(&repo, &[]);
    assert_eq!(ui.url, format!("http://127.0.0.1:{}/", ui.port), "loopback by default, no token");
    let mut page = Browser::open(&chromium, &ui.url);
    page.wait("three cards", "document.querySelectorAll('.card').length === 3");
    let shown: Vec<(String, String)> = serde_json::from_str(page.eval(CARDS).as_str().unwrap()).unwrap();
    // The statuses `status --json` gives, stream by stream.
    let status = repo.boulder(&["status", "--json"]).ok().json();
    let mut expected: Vec<(String, String)> = status["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s["status"].as_str().unwrap().to_string()))
        .collect();
    expected.sort();
    assert_eq!(shown, expected);
    assert!(expected.contains(&("auth".into(), "INITIALIZED".into())), "{expected:?}");
    // Every status the product has gets a count, the empty ones included.
    let counts = page.eval("[...document.querySelectorAll('.summary .chip')].map(c => c.textContent).join(',')");
    assert_eq!(
        counts,
        "DEFINED 2,INITIALIZED 1,RUNNING 0,STOPPED 0,COMPLETED 0,FAILED 0,MERGED 0,CLEANED 0,REVIEW 0,\
         CHANGES_REQUESTED 0,APPROVED 0,NEEDS_ATTENTION 0,BUDGET_SPENT 0,INTERRUPTED 0,SETUP_FAILED 0,STALE 0,INVALID 0"
    );
    // The JSON endpoint is `status --json`'s document.
    let (code, answer) = ui.get("/api/status", &ui.host());
    assert_eq!(code, 200);
    let body: serde_json::Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["streams"].as_array().unwrap().len(), 3);
    // The other views draw: the graph's edge api → auth, the ownership map, a stream page.
    page.eval("location.hash = '#/graph'");
    page.wait("the graph", "document.querySelectorAll('#graph [data-node]').length === 3");
    page.eval("location.hash = '#/ownership'");
    page.wait(
        "the ownership map",
        "document.querySelector('[data-path=\"src/auth/mod.rs\"]')?.dataset.kind === 'stream' && \
         document.querySelector('[data-path=\"src/types/user.rs\"]')?.dataset.kind === 'shared_read' && \
         document.querySelector('[data-path=\"README.md\"]')?.dataset.kind === 'unowned'",
    );
    page.eval("location.hash = '#/stream/api'");
    page.wait("api's page", "document.querySelector('main h2')?.textContent.startsWith('api')");
    assert_eq!(page.eval("document.querySelectorAll('[data-story]').length"), 2);
}

#[test]
fn a_commit_in_a_stream_worktree_shows_without_a_reload() {
    let Some(chromium) = chromium() else { return };
    let repo = sample();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let ui = Ui::start(&repo, &[]);
    let mut page = Browser::open(&chromium, &ui.url);
    page.wait("auth's card", "!!document.querySelector('[data-stream=\"auth\"]')");
    // A mark on this very document: a reload would lose it.
    page.eval("window.stillTheSamePage = true");
    commit_in(&repo, &repo.worktree("auth"), "src/auth/login.rs", "// login\n", "Add the login form");
    page.wait(
        "the commit on auth's card",
        "window.stillTheSamePage === true && \
         (document.querySelector('[data-stream=\"auth\"] [data-last-commit]')?.textContent ?? '').endsWith('Add the login form')",
    );
    assert_eq!(page.eval("document.querySelector('[data-stream=\"auth\"]').dataset.status"), "INITIALIZED");
}

#[test]
fn escapes_and_html_in_a_story_title_are_shown_inert() {
    let Some(chromium) = chromium() else { return };
    let repo = sample();
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[31m<img src=x onerror=\"document.title='owned'\"><b>bold</b>";
    let prd = repo.read(".agents/tasks/prd.md").replace("US-001: Login form", &format!("US-001: Login {hostile}"));
    repo.write(".agents/tasks/prd.md", &prd);
    repo.commit_all("hostile PRD");
    let ui = Ui::start(&repo, &[]);
    let mut page = Browser::open(&chromium, &format!("{}#/stream/auth", ui.url));
    page.wait("auth's stories", "!!document.querySelector('[data-story=\"US-001\"] .story-title')");
    assert_eq!(
        page.eval("document.querySelector('[data-story=\"US-001\"] .story-title').textContent"),
        "Login \\e]0;pwned\\x07\\e[31m<img src=x onerror=\"document.title='owned'\"><b>bold</b>"
    );
    assert_eq!(page.eval("document.querySelectorAll('main img, main b').length"), 0);
    assert_eq!(page.eval("document.title"), "git boulder");
}

#[test]
fn a_foreign_host_is_refused() {
    let repo = sample();
    let ui = Ui::start(&repo, &[]);
    assert_eq!(ui.get("/", &ui.host()).0, 200);
    assert_eq!(ui.get("/", &format!("localhost:{}", ui.port)).0, 200);
    // A name rebound to 127.0.0.1, another port, no Host, two of them.
    for host in [format!("attacker.example:{}", ui.port), format!("127.0.0.1:{}", ui.port + 1)] {
        let (code, answer) = ui.get("/api/snapshot", &host);
        assert_eq!(code, 421, "{host}: {answer}");
        assert!(!answer.contains("streams"), "{answer}");
    }
    assert_eq!(ui.raw("GET / HTTP/1.1\r\n\r\n").0, 421);
    assert_eq!(ui.raw(&format!("GET / HTTP/1.1\r\nHost: {}\r\nHost: attacker.example\r\n\r\n", ui.host())).0, 421);
    // A proxy's absolute URL names another server.
    assert_eq!(ui.raw(&format!("GET http://attacker.example/ HTTP/1.1\r\nHost: {}\r\n\r\n", ui.host())).0, 400);
}

#[test]
fn only_get_and_head_are_served() {
    let repo = sample();
    let ui = Ui::start(&repo, &[]);
    for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
        let (code, answer) =
            ui.raw(&format!("{method} /api/status HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n\r\n", ui.host()));
        assert_eq!(code, 405, "{method}: {answer}");
        assert!(answer.contains("Allow: GET, HEAD"), "{answer}");
    }
    let (code, answer) = ui.raw(&format!("HEAD / HTTP/1.1\r\nHost: {}\r\n\r\n", ui.host()));
    assert_eq!(code, 200);
    assert!(answer.ends_with("\r\n\r\n"), "HEAD has no body: {answer}");
    assert!(answer.contains("Content-Security-Policy: default-src 'none'"), "{answer}");
    assert_eq!(ui.get("/nothing-here", &ui.host()).0, 404);
}

#[test]
fn beyond_loopback_every_request_needs_the_token() {
    let repo = sample();
    let ui = Ui::start(&repo, &["--bind", "0.0.0.0"]);
    let token = ui.url.split_once("?token=").map(|(_, t)| t.to_string()).expect("a token in the URL");
    assert!(token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    for target in ["/", "/api/status", "/api/snapshot", "/events"] {
        assert_eq!(ui.get(target, &ui.host()).0, 403, "{target} without the token");
        assert_eq!(ui.get(&format!("{target}?token={}", "0".repeat(32)), &ui.host()).0, 403, "{target}");
    }
    assert_eq!(ui.get(&format!("/api/status?token={token}"), &ui.host()).0, 200);
    // A name, even with the token, must be this machine's.
    assert_eq!(ui.get(&format!("/?token={token}"), &format!("attacker.example:{}", ui.port)).0, 421);
    // The page carries the token on to its event stream.
    let Some(chromium) = chromium() else { return };
    let mut page = Browser::open(&chromium, &ui.local_url());
    page.wait("the board", "document.querySelectorAll('.card').length === 3");
    // A second server on loopback has no token.
    let plain = Ui::start(&repo, &["--bind", "127.0.0.1"]);
    assert!(!plain.url.contains("token"), "{}", plain.url);
}

#[test]
fn pull_brings_another_machine_s_work_onto_the_board() {
    let remote = Remote::new(&[
        (".agents/tasks/prd.md", SAMPLE_PRD),
        (".boulder/streams.yaml", SAMPLE_PLAN),
        ("src/auth/mod.rs", "// auth\n"),
    ]);
    let (here, there) = (remote.machine("here"), remote.machine("there"));
    let ui = Ui::start(&here, &["--pull", "1s"]);
    let auth = || -> serde_json::Value {
        let (code, answer) = ui.get("/api/status", &ui.host());
        assert_eq!(code, 200, "{answer}");
        let body: serde_json::Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
        body["streams"].as_array().unwrap().iter().find(|s| s["name"] == "auth").unwrap().clone()
    };
    assert_eq!(auth()["status"], "DEFINED");
    there.boulder(&["stream", "init", "auth"]).ok();
    there.boulder(&["stream", "claim", "auth"]).ok();
    there.boulder(&["push"]).ok();
    wait_for("the other machine's stream and claim", || {
        let a = auth();
        a["status"] == "INITIALIZED" && a["claim"]["actor"] == "there"
    });
}
