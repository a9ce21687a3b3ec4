//! Test harness: real repositories made with the git CLI in temp dirs under a cleared, fixed
//! environment, and the real `git-boulder` binary run against them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// What a command printed and how it exited.
#[derive(Debug)]
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

impl Run {
    pub fn from(out: Output) -> Run {
        Run {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            code: out.status.code().unwrap_or(-1),
        }
    }
    /// Assert exit 0 and return self.
    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(self.code, 0, "expected success\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }
    /// Assert the exit code and return self.
    #[track_caller]
    pub fn code(self, code: i32) -> Run {
        assert_eq!(self.code, code, "expected exit {code}\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.stdout))
    }
}

/// Marks a process of this test binary that [`ran_in_fresh_process`] started for one test.
const FRESH_PROCESS: &str = "BOULDER_TEST_FRESH_PROCESS";

/// The library runs in this process too (state, worktree and op-log tests), and it reads the
/// process's environment: `HOME` for the user's git config, the git identity variables,
/// `BOULDER_NOW`. Such a test starts with `lib_env!()`, so that it runs where the environment is
/// a fresh machine's: no git identity, no user or system config. The runner's own environment is
/// never changed (its test threads share it); instead, in the runner, `lib_env!()` runs the test
/// again in a process of this test binary of its own, given that environment
/// ([`ran_in_fresh_process`]), and returns once it passed; in that process it does nothing and the
/// test goes on. State writes and worktrees must work without an identity.
macro_rules! lib_env {
    () => {
        if $crate::common::ran_in_fresh_process() {
            return;
        }
    };
}
pub(crate) use lib_env;

/// In the runner: run the test of this thread (libtest names a test's thread after the test) in a
/// process of this test binary whose environment is the runner's with a temp `HOME` and
/// `XDG_CONFIG_HOME`, `GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`, and no git identity,
/// `GIT_DIR`, `GIT_WORK_TREE` or `BOULDER_NOW`; fail unless exactly that one test ran and passed;
/// return true. In that process: false.
pub fn ran_in_fresh_process() -> bool {
    if std::env::var_os(FRESH_PROCESS).is_some() {
        return false;
    }
    let test = std::thread::current().name().map(str::to_string).filter(|n| n.contains("::"));
    let test = test.expect("lib_env!() runs in a test's own thread, named after the test");
    let home = tempfile::tempdir().expect("a temp home");
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args([test.as_str(), "--exact", "--include-ignored", "--test-threads", "1", "--nocapture"])
        .env(FRESH_PROCESS, "1")
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::null());
    for v in [
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "EMAIL",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "BOULDER_NOW",
    ] {
        cmd.env_remove(v);
    }
    let run = Run::from(cmd.output().expect("run the test binary"));
    // Shown by libtest when this test fails, or under --nocapture.
    print!("{}", run.stdout);
    eprint!("{}", run.stderr);
    assert_eq!(run.code, 0, "{test} failed in its own process");
    assert!(run.stdout.contains("test result: ok. 1 passed"), "{test} did not run in its own process");
    true
}

/// Whether this process is one [`ran_in_fresh_process`] started: what a helper that calls the
/// library asserts, so that a test calling it cannot forget `lib_env!()`.
#[track_caller]
pub fn assert_lib_env() {
    assert!(std::env::var_os(FRESH_PROCESS).is_some(), "a test that calls the library starts with lib_env!()");
}

/// A temporary git repository with a fixed environment.
pub struct TestRepo {
    pub tmp: tempfile::TempDir,
    /// The main worktree.
    pub dir: PathBuf,
    pub home: PathBuf,
    /// The test's clock (shared with the test's other repositories).
    pub clock: Clock,
    /// Whether commands get a git identity (`GIT_AUTHOR_*`, `GIT_COMMITTER_*`).
    identity: bool,
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_git-boulder")
}

/// Where the clock of every test starts (2026-11-01T00:00:00Z, seconds since the Unix epoch).
pub const CLOCK_START: i64 = 1_793_491_200;
/// How far the clock moves for each command a test runs.
pub const CLOCK_STEP: i64 = 1;

thread_local! {
    /// The clock of the test running on this thread (the test harness runs each test on a thread
    /// of its own, so each test starts at [`CLOCK_START`]).
    static TEST_CLOCK: Clock = Clock(std::sync::Arc::new(std::sync::atomic::AtomicI64::new(CLOCK_START)));
}

/// A test's fixed clock: every command a test runs gets the next instant, one [`CLOCK_STEP`] on,
/// as its commit dates (`GIT_AUTHOR_DATE`, `GIT_COMMITTER_DATE`) and as git-boulder's clock
/// (`BOULDER_NOW`), so dates, ids and ages in the output are the same on every run. All the
/// repositories of one test share it. A test that needs time to pass (a lease running out) moves
/// it with [`Clock::advance`]; a command given its own `BOULDER_NOW` keeps it.
#[derive(Clone)]
pub struct Clock(std::sync::Arc<std::sync::atomic::AtomicI64>);

impl Clock {
    /// The clock of the test running on this thread.
    pub fn of_this_test() -> Clock {
        TEST_CLOCK.with(Clock::clone)
    }

    /// Move the clock on by `by` (besides the step each command makes).
    pub fn advance(&self, by: std::time::Duration) {
        self.0.fetch_add(by.as_secs() as i64, std::sync::atomic::Ordering::SeqCst);
    }

    /// Give `cmd` the next instant of this clock.
    pub fn set(&self, cmd: &mut Command) {
        let secs = self.0.fetch_add(CLOCK_STEP, std::sync::atomic::Ordering::SeqCst) + CLOCK_STEP;
        // git's own date format, `<seconds> <offset>`, read alike by git and gix.
        let date = format!("{secs} +0000");
        let now = jiff::Timestamp::from_second(secs).expect("a date in range").to_string();
        cmd.env("GIT_AUTHOR_DATE", &date).env("GIT_COMMITTER_DATE", &date).env("BOULDER_NOW", now);
    }
}

/// Environment every command in tests gets: no user or system config, fixed identity, and the
/// next instant of this test's clock as its dates.
pub fn fixed_env(cmd: &mut Command, home: &Path) {
    fixed_env_at(cmd, home, &Clock::of_this_test());
}

/// [`fixed_env`] with the dates of `clock` (for commands run from a thread the test started).
pub fn fixed_env_at(cmd: &mut Command, home: &Path, clock: &Clock) {
    // The binary's folder comes first on PATH, so git finds `git-boulder` for hooks and `git boulder`.
    let bin_dir = Path::new(bin()).parent().expect("binary folder").to_path_buf();
    let mut paths = vec![bin_dir];
    paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    cmd.env_clear()
        .env("PATH", std::env::join_paths(paths).expect("PATH"))
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("TZ", "UTC")
        .env("LANG", "C")
        .env("GIT_AUTHOR_NAME", "Test Author")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "Test Committer")
        .env("GIT_COMMITTER_EMAIL", "committer@example.com")
        .stdin(Stdio::null());
    clock.set(cmd);
}

impl TestRepo {
    /// An empty repository on branch `main`, no commits.
    pub fn empty() -> TestRepo {
        let repo = TestRepo::in_temp("repo");
        std::fs::create_dir_all(&repo.dir).unwrap();
        repo.git(&["init", "-q", "-b", "main"]).ok();
        repo
    }

    /// An empty repository whose commands have no git identity at all, like a fresh machine.
    pub fn without_identity() -> TestRepo {
        let mut repo = TestRepo::in_temp("repo");
        repo.identity = false;
        std::fs::create_dir_all(&repo.dir).unwrap();
        repo.git(&["init", "-q", "-b", "main"]).ok();
        repo
    }

    /// A clone (plain `git clone`) of `url` in a folder `name` of a temp dir of its own, with a
    /// home of its own: another machine.
    pub fn clone_from(url: impl AsRef<Path>, name: &str) -> TestRepo {
        Self::clone_with(url.as_ref().to_str().unwrap(), name, &[])
    }

    /// [`Self::clone_from`] with more `git clone` options (`--filter=blob:none`).
    pub fn clone_with(url: &str, name: &str, options: &[&str]) -> TestRepo {
        let repo = TestRepo::in_temp(name);
        let root = repo.dir.parent().unwrap();
        let mut args = vec!["clone", "-q"];
        args.extend_from_slice(options);
        args.extend([url, repo.dir.to_str().unwrap()]);
        repo.git_in(root, &args).ok();
        repo
    }

    /// A temp dir holding `home` and (not made) the repository folder `name`.
    pub fn in_temp(name: &str) -> TestRepo {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(tmp.path()).expect("canonical tmp");
        let (dir, home) = (root.join(name), root.join("home"));
        std::fs::create_dir_all(&home).unwrap();
        TestRepo { tmp, dir, home, clock: Clock::of_this_test(), identity: true }
    }

    /// A repository with one commit holding `files` (path, content).
    pub fn with_files(files: &[(&str, &str)]) -> TestRepo {
        let repo = TestRepo::empty();
        for (p, c) in files {
            repo.write(p, c);
        }
        repo.commit_all("initial");
        repo
    }

    /// Write a file in the main worktree (creating directories).
    pub fn write(&self, path: &str, content: &str) {
        let p = self.dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.dir.join(path)).unwrap()
    }

    pub fn commit_all(&self, msg: &str) {
        self.git(&["add", "-A"]).ok();
        self.git(&["commit", "-q", "-m", msg]).ok();
    }

    /// Run git in the main worktree.
    pub fn git(&self, args: &[&str]) -> Run {
        self.git_in(&self.dir, args)
    }

    pub fn git_in(&self, dir: &Path, args: &[&str]) -> Run {
        Run::from(self.command("git").args(args).current_dir(dir).output().expect("run git"))
    }

    /// git in the worktree `dir`, not asking a `core.fsmonitor` hook. The fake monitors of the
    /// status tests answer for the main worktree, and git trusts what a monitor says: asked in a
    /// stream worktree, their "nothing changed" would make `git add` skip a changed file it believes
    /// unchanged (whenever that file is not racily clean), and `git status` miss it.
    pub fn git_unmonitored(&self, dir: &Path, args: &[&str]) -> Run {
        let all: Vec<&str> = ["-c", "core.fsmonitor=false"].iter().chain(args).copied().collect();
        self.git_in(dir, &all)
    }

    /// Whether `git status --porcelain` in the worktree `dir` prints anything, looking at every
    /// file (not asking a monitor).
    pub fn porcelain_dirty(&self, dir: &Path) -> bool {
        !self.git_unmonitored(dir, &["status", "--porcelain"]).ok().stdout.trim().is_empty()
    }

    /// `program` with this repository's fixed environment ([`fixed_env`]) and the next instant
    /// of its clock, run from the main worktree unless told otherwise.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        fixed_env_at(&mut cmd, &self.home, &self.clock);
        if !self.identity {
            for v in ["GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"] {
                cmd.env_remove(v);
            }
        }
        cmd.current_dir(&self.dir);
        cmd
    }

    /// Trimmed stdout of a git command that must succeed.
    pub fn git_out(&self, args: &[&str]) -> String {
        self.git(args).ok().stdout.trim().to_string()
    }

    /// Run git-boulder in the main worktree.
    pub fn boulder(&self, args: &[&str]) -> Run {
        self.boulder_in(&self.dir, args)
    }

    pub fn boulder_in(&self, dir: &Path, args: &[&str]) -> Run {
        self.boulder_env(dir, args, &[])
    }

    pub fn boulder_env(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.command(bin());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Run::from(cmd.args(args).current_dir(dir).output().expect("run git-boulder"))
    }

    /// `git fsck --strict` must be clean.
    #[track_caller]
    pub fn assert_fsck(&self) {
        let r = self.git(&["fsck", "--strict", "--no-progress"]);
        assert_eq!(r.code, 0, "fsck failed:\n{}{}", r.stdout, r.stderr);
        assert!(!r.stderr.contains("error"), "fsck reported:\n{}", r.stderr);
    }

    /// Where `stream init` puts the worktree of stream `name` by default.
    pub fn worktree(&self, name: &str) -> PathBuf {
        self.dir.join(".boulder/worktrees").join(name)
    }

    /// The `state.json` of the op-log ref `r`, read with plain git.
    pub fn state(&self, r: &str) -> serde_json::Value {
        let text = self.git_out(&["cat-file", "-p", &format!("{r}:state.json")]);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("state of {r} is not JSON ({e}):\n{text}"))
    }

    /// The state of stream `name` ([`TestRepo::state`] of `refs/boulder/streams/NAME`).
    pub fn stream_state(&self, name: &str) -> serde_json::Value {
        self.state(&format!("refs/boulder/streams/{name}"))
    }

    /// Add `extra` (indented lines) under `settings:` of the stream plan, and commit it.
    pub fn with_settings(&self, extra: &str) {
        let plan = self.read(".boulder/streams.yaml").replace("settings:\n", &format!("settings:\n{extra}"));
        self.write(".boulder/streams.yaml", &plan);
        self.commit_all("plan settings");
    }

    /// The refs under a prefix, as `git for-each-ref` sees them.
    pub fn refs(&self, prefix: &str) -> Vec<String> {
        self.git_out(&["for-each-ref", "--format=%(refname)", prefix]).lines().map(str::to_string).collect()
    }
}

/// Write `file` with `content` in the worktree `dir` and commit everything there.
pub fn commit_in(repo: &TestRepo, dir: &Path, file: &str, content: impl AsRef<[u8]>, msg: &str) {
    let p = dir.join(file);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
    repo.git_in(dir, &["add", "-A"]).ok();
    repo.git_in(dir, &["commit", "-q", "-m", msg]).ok();
}

/// The commit id `r` names, as `git rev-parse` says.
pub fn rev(repo: &TestRepo, r: &str) -> String {
    repo.git_out(&["rev-parse", r])
}

/// A bare repository cloned from a repository holding `files`, in a folder of its own:
/// (the folder's guard, the folder, the bare repository).
pub fn bare_remote(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let origin = TestRepo::with_files(files);
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let bare = root.join("remote.git");
    origin.git(&["clone", "-q", "--bare", origin.dir.to_str().unwrap(), bare.to_str().unwrap()]).ok();
    (tmp, root, bare)
}

/// A bare repository that machines clone and share state through, in a folder of its own.
pub struct Remote {
    _tmp: tempfile::TempDir,
    /// The folder holding it.
    pub root: PathBuf,
    /// The bare repository.
    pub bare: PathBuf,
}

impl Remote {
    /// A bare clone of a repository holding `files`.
    pub fn new(files: &[(&str, &str)]) -> Remote {
        let (tmp, root, bare) = bare_remote(files);
        Remote { _tmp: tmp, root, bare }
    }

    /// Clone it as machine `name` (its actor id is `name`).
    pub fn machine(&self, name: &str) -> TestRepo {
        self.machine_from(name, self.bare.to_str().unwrap())
    }

    /// Clone `url` (this remote by another URL) as machine `name`.
    pub fn machine_from(&self, name: &str, url: &str) -> TestRepo {
        let repo = TestRepo::clone_from(url, name);
        repo.git(&["config", "boulder.actor", name]).ok();
        repo
    }
}

/// A standard sample: a Ralph PRD with six stories, a plan of three streams, some source files.
pub const SAMPLE_PRD: &str = "# PRD: Sample\n\n## Stories\n\n\
### [ ] US-001: Login form\nBuild `src/auth/login.rs`.\n\n#### Acceptance Criteria\n- [ ] renders\n\n\
### [x] US-002: Logout\nIn `src/auth/logout.rs`.\n\n\
### [ ] US-003: List endpoint\nIn `src/api/list.rs`.\n\n\
### [ ] US-004: Create endpoint\nIn `src/api/create.rs`.\n\n\
### [ ] US-005: User guide\nWrite `docs/guide.md`.\n\n\
### [ ] US-006: Unassigned polish\nAnywhere.\n";

pub const SAMPLE_PLAN: &str = "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  auth:\n    stories: [US-001, US-002]\n    paths: [src/auth/**]\n  api:\n    stories: [US-003, US-004]\n    paths: [src/api/**]\n    depends_on: [auth]\n  docs:\n    stories: [US-005]\n    paths: [docs/**]\nsettings:\n  base_branch: main\n  shared_read: [src/types/**]\n";

/// [`sample`] with `extra` (indented lines) added under the plan's `settings:`, committed.
pub fn sample_with(extra: &str) -> TestRepo {
    let repo = sample();
    repo.with_settings(extra);
    repo
}

/// A repository holding the sample PRD, plan and a few files, committed.
pub fn sample() -> TestRepo {
    TestRepo::with_files(&[
        (".agents/tasks/prd.md", SAMPLE_PRD),
        (".boulder/streams.yaml", SAMPLE_PLAN),
        ("src/auth/mod.rs", "// auth\n"),
        ("src/api/mod.rs", "// api\n"),
        ("src/types/user.rs", "// shared types\n"),
        ("docs/index.md", "# docs\n"),
        ("README.md", "# sample\n"),
    ])
}

// ---- snapshots -------------------------------------------------------------------------------

impl Run {
    /// The run as a snapshot shows it: the exit code, then stdout, then stderr, with what differs
    /// from machine to machine taken out ([`normalize`]).
    pub fn shown(&self) -> String {
        normalize(&format!("exit: {}\n--- stdout ---\n{}--- stderr ---\n{}", self.code, self.stdout, self.stderr))
    }
}

impl Run {
    /// This run with each `(from, to)` of `masks` replaced in its output: what a test knows
    /// changes from run to run (a pid, a time), taken out before a snapshot.
    pub fn masked(&self, masks: &[(&str, &str)]) -> Run {
        let mask = |text: &str| masks.iter().fold(text.to_string(), |t, (from, to)| t.replace(from, to));
        Run { stdout: mask(&self.stdout), stderr: mask(&self.stderr), code: self.code }
    }
}

/// `text` with the temp folders the tests make (`/tmp/.tmpXXXXXX`, as given or canonical) as
/// `[TEMP]` and this machine's host name as `[HOST]`: the parts of an output that change from run
/// to run or machine to machine while the command behaves the same.
pub fn normalize(text: &str) -> String {
    let mut out = text.to_string();
    let tmp = std::env::temp_dir();
    let mut roots = vec![tmp.display().to_string()];
    if let Ok(canonical) = std::fs::canonicalize(&tmp) {
        roots.push(canonical.display().to_string());
    }
    for root in roots {
        let prefix = format!("{}/.tmp", root.trim_end_matches('/'));
        let mut rest = out.as_str();
        let mut done = String::with_capacity(out.len());
        while let Some(at) = rest.find(&prefix) {
            done.push_str(&rest[..at]);
            let tail = &rest[at + prefix.len()..];
            let name_len = tail.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(tail.len());
            done.push_str("[TEMP]");
            rest = &tail[name_len..];
        }
        done.push_str(rest);
        out = done;
    }
    if let Some(host) = host_name() {
        // Where git-boulder names the host: lock holders and claims (`pid 7 on host H`, `A on H (`).
        for (from, to) in [(format!("host {host}"), "host [HOST]"), (format!(" on {host} ("), " on [HOST] (")] {
            out = out.replace(&from, to);
        }
    }
    out
}

fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// Assert the snapshot `name` of a [`Run`]: exit code, stdout and stderr together, normalized.
macro_rules! assert_shown {
    ($name:expr, $run:expr) => {
        insta::assert_snapshot!($name, $run.shown())
    };
}
pub(crate) use assert_shown;

/// `git daemon` serving every repository under `root` read-write on 127.0.0.1 (a free port),
/// stopped on drop. `url("remote.git")` names one of them.
pub struct GitDaemon {
    child: std::process::Child,
    pub port: u16,
}

impl GitDaemon {
    pub fn serve(root: &Path) -> GitDaemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut c = Command::new("git");
        fixed_env(&mut c, root);
        let child = c
            .args([
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--enable=receive-pack",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", root.display()),
                root.to_str().unwrap(),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git daemon");
        let daemon = GitDaemon { child, port };
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return daemon;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        panic!("git daemon did not listen on port {port}");
    }

    pub fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The op-logs of three boulders, `refs/boulder/boulders/{a,b,c}` (their stores' actors `a`, `b`
/// and `c`): one op, then three rounds of ops on each and criss-cross merges (a takes b, c takes
/// a, a takes c, b takes a: b's side merged twice), as diverged machines leave them; then
/// `linear` more ops on `a`. Returns the three stores.
pub fn criss_cross_op_logs<'r>(
    repo: &TestRepo,
    r: &'r git_boulder::git::Repo,
    linear: usize,
) -> Vec<git_boulder::state::Store<'r>> {
    use git_boulder::state::{BoulderState, Store};
    let stores: Vec<Store> = ["a", "b", "c"].iter().map(|a| Store::with_actor(r, a.to_string())).collect();
    let refs = CRISS_CROSS_REFS;
    stores[0].append_raw::<BoulderState>(refs[0], "created", serde_json::json!({"stream": "s"})).unwrap();
    let base = repo.git_out(&["rev-parse", refs[0]]);
    for name in &refs[1..] {
        repo.git_out(&["update-ref", name, &base]);
    }
    let oid = |hex: &str| gix::ObjectId::from_hex(hex.trim().as_bytes()).unwrap();
    for round in 0..3 {
        for (i, (store, name)) in stores.iter().zip(refs).enumerate() {
            for k in 0..3 + round {
                let data = serde_json::json!({"commit": format!("r{round}-{i}-{k}")});
                store.append_raw::<BoulderState>(name, "activity", data).unwrap();
            }
        }
        for (into, from) in [(0, 1), (2, 0), (0, 2), (1, 0)] {
            let ours = oid(&repo.git_out(&["rev-parse", refs[into]]));
            let theirs = oid(&repo.git_out(&["rev-parse", refs[from]]));
            let merged = stores[into].merge::<BoulderState>(ours, theirs).unwrap();
            repo.git_out(&["update-ref", refs[into], &merged.to_string()]);
        }
    }
    for k in 0..linear {
        let data = serde_json::json!({"commit": format!("last-{k}")});
        stores[0].append_raw::<BoulderState>(refs[0], "activity", data).unwrap();
    }
    stores
}

/// The refs [`criss_cross_op_logs`] writes.
pub const CRISS_CROSS_REFS: [&str; 3] =
    ["refs/boulder/boulders/a", "refs/boulder/boulders/b", "refs/boulder/boulders/c"];

impl TestRepo {
    /// Feed `stream` (ending in `done`) to `git fast-import --done --force` in this repository.
    pub fn fast_import(&self, stream: &[u8]) {
        use std::io::Write;
        let mut child = self
            .command("git")
            .args(["fast-import", "--quiet", "--done", "--force"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("git fast-import");
        child.stdin.take().unwrap().write_all(stream).unwrap();
        assert!(child.wait().unwrap().success(), "git fast-import failed");
    }
}

/// Wait until `cond` holds, looking every 50 ms; fails the test after 90 s (a worker or daemon that
/// never gets there).
pub fn wait_for(what: &str, cond: impl FnMut() -> bool) {
    wait_for_within(what, std::time::Duration::from_secs(90), cond)
}

/// [`wait_for`] with a longer bound, for a condition that needs many rounds of a real harness
/// (each round a model turn and a hook): on a loaded machine they add up.
pub fn wait_for_within(what: &str, bound: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < bound, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A real harness binary (`claude`, `codex`, `opencode`) from the pinned npm installs `.ci/run`
/// makes: `$BOULDER_HARNESSES/NAME`. `None` (the test prints why and returns) when they are not
/// installed here; under `CI` their absence fails the test.
pub fn harness(name: &str) -> Option<PathBuf> {
    let found =
        std::env::var_os("BOULDER_HARNESSES").map(|dir| PathBuf::from(dir).join(name)).filter(|path| path.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is missing: .ci/run installs the pinned harnesses and sets BOULDER_HARNESSES"
        );
        eprintln!("skipped: {name} is not installed (BOULDER_HARNESSES; see .ci/run)");
    }
    found
}

/// `tests/support/fake_model.py` serving the scripted `turns` on 127.0.0.1 (a free port), stopped
/// on drop. `url()` is its base URL; `requests()` every request it got, in order.
pub struct FakeModel {
    child: std::process::Child,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl FakeModel {
    pub fn start(turns: serde_json::Value) -> FakeModel {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script.json");
        std::fs::write(&script, serde_json::json!({ "turns": turns }).to_string()).unwrap();
        let log = dir.path().join("requests.jsonl");
        let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake_model.py");
        let mut child = Command::new("python3")
            .arg(server)
            .arg(&script)
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the fake model server");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().expect("the fake model server prints its port");
        FakeModel { child, port, log, _dir: dir }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
