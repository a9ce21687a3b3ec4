//! Per-machine advisory locks (DESIGN §3): `merge`, `prd` and `stream-<name>`, as files under
//! `$GIT_COMMON_DIR/boulder/locks/<name>.lock`, locked with fd-lock (`flock(2)` on Unix).
//!
//! * [`acquire`] is non-blocking by default: a busy lock is an [`Error::refused`] naming the holder
//!   (pid, host, since, command) with a hint; `wait = true` blocks until the lock is free.
//! * The lock is the `flock` on the open file, never the file's existence. The OS drops it when the
//!   holder's file descriptor is closed — also when the holder is killed — so a dead holder never
//!   leaves a stale lock. Lock files are never deleted (deleting a flock'ed file lets two processes
//!   lock two different inodes under one name); their content is only informational.
//! * The holder writes `{pid, host, since, command}` as one JSON line into the file *after* locking
//!   it, and empties it again on release; a loser reads it for its message.
//!
//! ## How the guard owns the lock
//!
//! `fd_lock::RwLockWriteGuard` borrows its `RwLock`, which makes it awkward to return. Instead,
//! [`acquire`] takes the lock through fd-lock, then `std::mem::forget`s the guard (so fd-lock does not
//! unlock) and keeps the `File` itself (`RwLock::into_inner`) in the owned [`LockGuard`]. `flock`
//! locks belong to the open file description, so the lock stays held exactly as long as that `File`
//! is open, and dropping the guard closes it, which releases the lock. Rust opens files with
//! `O_CLOEXEC`, so child processes (agents, `setup` commands, hooks) never inherit the lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::git::identity::hostname;
use crate::git::Repo;

/// Who holds a lock, as written into the lock file by its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Process id of the holder; 0 when unknown.
    pub pid: u32,
    /// Host name of the holder's machine, or `unknown`.
    pub host: String,
    /// When the lock was taken, RFC 3339 (UTC); empty when unknown.
    pub since: String,
    /// The command the holder runs (e.g. `git boulder stream merge auth`); empty when unknown.
    pub command: String,
}

impl Holder {
    fn unknown() -> Holder {
        Holder { pid: 0, host: "unknown".into(), since: String::new(), command: String::new() }
    }

    /// `pid 123 on host h since 2025-… (git boulder stream merge auth)`.
    pub fn describe(&self) -> String {
        if self.pid == 0 {
            return "another process (it has not written its details yet)".into();
        }
        let mut s = format!("pid {} on host {}", self.pid, self.host);
        if !self.since.is_empty() {
            s.push_str(&format!(" since {}", self.since));
        }
        if !self.command.is_empty() {
            s.push_str(&format!(" ({})", self.command));
        }
        s
    }
}

/// A held lock. Dropping it releases the lock (see the module docs).
#[derive(Debug)]
pub struct LockGuard {
    name: String,
    path: PathBuf,
    file: Option<File>,
}

impl LockGuard {
    /// The lock's name (`merge`, `prd`, `stream-auth`).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Release now (same as dropping).
    pub fn release(self) {}
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(file) = self.file.take() {
            // Still holding the lock: clear the holder details so nobody reads stale ones, then
            // close the file, which releases the flock.
            let _ = file.set_len(0);
            drop(file);
        }
    }
}

/// The directory holding all lock files.
pub fn locks_dir(repo: &Repo) -> PathBuf {
    repo.boulder_dir().join("locks")
}

/// The lock file of lock `name`.
pub fn lock_path(repo: &Repo, name: &str) -> PathBuf {
    locks_dir(repo).join(format!("{name}.lock"))
}

fn validate_name(name: &str) -> Result<()> {
    if let Some(why) = crate::names::problem(name) {
        return Err(Error::usage(format!("invalid lock name {name:?}: {why}")));
    }
    Ok(())
}

fn open_lock_file(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::internal(format!("cannot create {}: {e}", dir.display())).with_source(e))?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::internal(format!("cannot open lock file {}: {e}", path.display())).with_source(e))
}

/// Read the holder details from a lock file; `None` when the file is empty or unreadable.
fn read_holder(path: &Path) -> Option<Holder> {
    let mut text = String::new();
    File::open(path).ok()?.read_to_string(&mut text).ok()?;
    let line = text.lines().find(|l| !l.trim().is_empty())?;
    serde_json::from_str(line).ok()
}

/// False only when `holder` is known to be dead: a process of this host that no longer runs.
fn maybe_alive(holder: &Holder) -> bool {
    if holder.pid == 0 || holder.host != hostname() || !Path::new("/proc/self").exists() {
        return true;
    }
    running(holder.pid)
}

/// Whether process `pid` of this host runs (where `/proc` tells): it exists and is not a zombie —
/// killed, and not yet reaped by a parent that does not wait; it holds nothing any more.
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S …`: the state follows the last `)` (the name may hold one).
        Ok(stat) => stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()) != Some('Z'),
        Err(_) => Path::new("/proc").join(pid.to_string()).exists(),
    }
}

/// Take the exclusive lock on `file`, blocking or not. `Ok(None)`: busy (non-blocking only).
fn lock_file(file: File, wait: bool) -> std::io::Result<Option<File>> {
    let mut lock = fd_lock::RwLock::new(file);
    // Keep the lock: forgetting the guard skips its unlock; the lock is released when the file
    // is closed (see the module docs).
    let taken = if wait { lock.write().map(std::mem::forget) } else { lock.try_write().map(std::mem::forget) };
    match taken {
        Ok(()) => Ok(Some(lock.into_inner())),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Take lock `name` (`merge`, `prd`, `stream-<name>`) for `command` (shown to anyone who finds it
/// busy). Non-blocking unless `wait`: a busy lock is refused with a message naming the holder.
pub fn acquire(repo: &Repo, name: &str, wait: bool, command: &str) -> Result<LockGuard> {
    validate_name(name)?;
    acquire_at(&lock_path(repo, name), name, Some(wait), command)
}

/// [`acquire`] for a command without a `--wait` option: never blocks, and a refusal's hint says
/// what does work (`stream stop` for a running loop, else running the command again later).
pub fn try_acquire(repo: &Repo, name: &str, command: &str) -> Result<LockGuard> {
    validate_name(name)?;
    acquire_at(&lock_path(repo, name), name, None, command)
}

/// [`acquire`] on an explicit lock file path; `wait` is `None` when the caller has no `--wait`
/// option (it then does not block).
pub fn acquire_at(path: &Path, name: &str, wait: Option<bool>, command: &str) -> Result<LockGuard> {
    let waitable = wait.is_some();
    let wait = wait.unwrap_or(false);
    let lock_err = |e: std::io::Error| Error::internal(format!("cannot lock {}: {e}", path.display())).with_source(e);
    // A busy lock whose holder has not written its details yet (it is between locking and
    // writing) or that is only being probed by `holders` is retried briefly before refusing.
    let mut attempts = 0;
    let file = loop {
        let file = open_lock_file(path)?;
        if let Some(file) = lock_file(file, wait).map_err(lock_err)? {
            break file;
        }
        attempts += 1;
        // Retry briefly when the details are missing, or name a process of this host that is
        // gone (details a killed holder left behind, while a `holders` probe holds the lock).
        let holder = read_holder(path);
        let stale = !matches!(&holder, Some(h) if maybe_alive(h));
        if stale && attempts < 10 {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let holder = holder.unwrap_or_else(Holder::unknown);
        let mut err = Error::refused(format!("the {name} lock is held by {}", holder.describe()));
        err = match name.strip_prefix("stream-") {
            _ if waitable => err.hint(format!("rerun with --wait to block until the {name} lock is free")),
            Some(stream) if holder.command.contains("stream run") => err
                .hint(format!("`git boulder stream stop {stream}` asks that loop to stop after its current iteration")),
            _ => err.hint("run the command again when that one has finished"),
        };
        if holder.pid != 0 {
            err = err.hint(format!("or wait for pid {} to finish", holder.pid));
        }
        return Err(err);
    };
    let holder = Holder {
        pid: std::process::id(),
        host: hostname(),
        since: format!("{:.0}", jiff::Timestamp::now()),
        command: command.to_owned(),
    };
    let mut line = serde_json::to_string(&holder).map_err(|e| Error::internal(format!("{e}")).with_source(e))?;
    line.push('\n');
    let mut f = &file;
    f.set_len(0)
        .and_then(|_| f.seek(SeekFrom::Start(0)))
        .and_then(|_| f.write_all(line.as_bytes()))
        .map_err(|e| Error::internal(format!("cannot write {}: {e}", path.display())).with_source(e))?;
    Ok(LockGuard { name: name.to_owned(), path: path.to_owned(), file: Some(file) })
}

/// Locks currently held on this machine, by name, with their holders (for `doctor`). A lock whose
/// file cannot be locked is held; its holder comes from the file (unknown when it has none).
pub fn holders(repo: &Repo) -> Vec<(String, Holder)> {
    let Ok(entries) = std::fs::read_dir(locks_dir(repo)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".lock")) else {
            continue;
        };
        if !entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
            continue;
        }
        let Ok(file) = File::open(&path) else { continue };
        // Probe with a shared lock: it fails only while someone holds the exclusive lock, and it
        // is released at once (the probe never writes).
        let lock = fd_lock::RwLock::new(file);
        let busy = match lock.try_read() {
            Ok(_probe) => false,
            Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
        };
        if busy {
            out.push((name.to_owned(), read_holder(&path).unwrap_or_else(Holder::unknown)));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_does_not_run() {
        assert!(running(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        // Exited, not yet reaped: a zombie, which holds nothing.
        let start = std::time::Instant::now();
        while running(child.id()) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!running(child.id()));
        child.wait().unwrap();
        assert!(!running(child.id()));
    }

    fn tmp_lock() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks").join("merge.lock");
        (dir, path)
    }

    #[test]
    fn lock_second_acquire_is_refused_with_holder() {
        let (_dir, path) = tmp_lock();
        let g = acquire_at(&path, "merge", Some(false), "git boulder stream merge auth").unwrap();
        let err = acquire_at(&path, "merge", Some(false), "other").unwrap_err();
        assert_eq!(err.kind, crate::error::Kind::Refused);
        assert!(err.message.contains(&format!("pid {}", std::process::id())), "{}", err.message);
        assert!(err.message.contains("git boulder stream merge auth"), "{}", err.message);
        assert!(err.message.contains(&hostname()), "{}", err.message);
        assert!(err.hints.iter().any(|h| h.contains("--wait")), "{:?}", err.hints);
        drop(g);
        let g2 = acquire_at(&path, "merge", Some(false), "other").unwrap();
        assert!(read_holder(&path).unwrap().command == "other");
        drop(g2);
        // Released: the file remains but is empty.
        assert!(path.exists());
        assert!(read_holder(&path).is_none());
    }

    #[test]
    fn lock_wait_blocks_until_released() {
        let (_dir, path) = tmp_lock();
        let g = acquire_at(&path, "merge", Some(false), "first").unwrap();
        let p2 = path.clone();
        let started = std::time::Instant::now();
        let t = std::thread::spawn(move || {
            let g = acquire_at(&p2, "merge", Some(true), "second").unwrap();
            let waited = started.elapsed();
            drop(g);
            waited
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(!t.is_finished(), "waiter must block while the lock is held");
        drop(g);
        let waited = t.join().unwrap();
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
    }

    #[test]
    fn lock_killed_holder_leaves_no_stale_lock() {
        let (_dir, path) = tmp_lock();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let script = "import fcntl,sys,time,os\n\
                      f=open(sys.argv[1],'a+')\n\
                      fcntl.flock(f,fcntl.LOCK_EX)\n\
                      f.truncate(0); f.write('{\"pid\":%d,\"host\":\"h\",\"since\":\"\",\"command\":\"py\"}\\n' % os.getpid()); f.flush()\n\
                      print('locked',flush=True)\n\
                      time.sleep(60)\n";
        let mut child = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(&path)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut buf = [0u8; 7];
        child.stdout.as_mut().unwrap().read_exact(&mut buf).unwrap();
        assert_eq!(&buf[..6], b"locked");
        let err = acquire_at(&path, "merge", Some(false), "me").unwrap_err();
        assert!(err.message.contains(&format!("pid {}", child.id())), "{}", err.message);
        assert!(err.hints.iter().any(|h| h.contains(&format!("pid {}", child.id()))), "{:?}", err.hints);
        child.kill().unwrap();
        child.wait().unwrap();
        // The stale content is still there, but the lock is gone.
        let g = acquire_at(&path, "merge", Some(false), "me").expect("no stale lock after the holder died");
        drop(g);
    }

    #[test]
    fn lock_dead_holder_details_during_a_probe_are_not_a_refusal() {
        let (_dir, path) = tmp_lock();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // A killed holder's leftover details: this host, a pid that does not exist.
        let dead = Holder { pid: u32::MAX - 1, host: hostname(), since: String::new(), command: "dead".into() };
        std::fs::write(&path, serde_json::to_string(&dead).unwrap() + "\n").unwrap();
        // A `holders` probe holds a shared lock for a moment.
        let probe = fd_lock::RwLock::new(File::open(&path).unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let _g = probe.try_read().unwrap();
            tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(15));
        });
        rx.recv().unwrap();
        let g = acquire_at(&path, "merge", Some(false), "me").expect("retried past the probe");
        assert_eq!(read_holder(&path).unwrap().command, "me");
        drop(g);
        t.join().unwrap();
    }

    #[test]
    fn lock_holders_lists_held_locks_only() {
        let dir = tempfile::tempdir().unwrap();
        std::process::Command::new("git").arg("init").arg("-q").arg(dir.path()).status().unwrap();
        let repo = Repo::open(dir.path()).unwrap();
        assert!(holders(&repo).is_empty());
        let a = acquire(&repo, "stream-auth", false, "git boulder stream run auth").unwrap();
        let b = acquire(&repo, "prd", false, "x").unwrap();
        drop(b);
        let mut held = holders(&repo);
        for _ in 0..200 {
            if held.len() == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
            held = holders(&repo);
        }
        assert_eq!(held.len(), 1, "{held:?}");
        assert_eq!(held[0].0, "stream-auth");
        assert_eq!(held[0].1.pid, std::process::id());
        assert_eq!(held[0].1.command, "git boulder stream run auth");
        // Probing did not disturb the holder or leave a lock behind. (A process another test
        // thread forks shares the lock's open file until it execs, so allow it a moment.)
        drop(a);
        let free =
            (0..200).any(|_| holders(&repo).is_empty() || (std::thread::sleep(Duration::from_millis(5)), false).1);
        assert!(free, "{:?}", holders(&repo));
        acquire(&repo, "stream-auth", false, "again").unwrap();
        assert!(acquire(&repo, "../x", false, "bad").is_err());
    }
}
