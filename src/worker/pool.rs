//! The worker's children: each a `git-boulder` subcommand for one stream (its loop, its merge, the
//! resolution of a conflict) in a process group of its own, its lines read by threads that prefix
//! them with the stream's name.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

use super::{Env, Options, Sink};

/// How long the children get to stop after Ctrl-C before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// What a child does for its stream.
pub(super) enum Phase {
    Run,
    Merge,
    /// `stream resolve` after a landing refused for a conflict (`on_conflict: agent`), from the
    /// branch's tip then.
    Resolve(Option<crate::git::ObjectId>),
}

pub(super) struct Job {
    pub stream: String,
    pub phase: Phase,
    child: Child,
    pumps: Vec<std::thread::JoinHandle<()>>,
}

/// The children running, in the order they were started.
#[derive(Default)]
pub(super) struct Pool {
    jobs: Vec<Job>,
}

impl Pool {
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub fn push(&mut self, job: Job) {
        self.jobs.push(job);
    }

    /// Is a child of `stream` running?
    pub fn runs(&self, stream: &str) -> bool {
        self.jobs.iter().any(|j| j.stream == stream)
    }

    /// The first child that ended, taken out of the pool once its lines are all read.
    pub fn next_ended(&mut self) -> Result<Option<(Job, ExitStatus)>> {
        for i in 0..self.jobs.len() {
            if let Some(status) = self.jobs[i].child.try_wait()? {
                let mut job = self.jobs.remove(i);
                for p in job.pumps.drain(..) {
                    let _ = p.join();
                }
                return Ok(Some((job, status)));
            }
        }
        Ok(None)
    }

    /// Wait up to `nap`: less when a child ends or Ctrl-C comes.
    pub fn nap(&mut self, nap: Duration, interrupted: &AtomicBool) {
        let until = Instant::now() + nap;
        while Instant::now() < until && !interrupted.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(25));
            if self.jobs.iter_mut().any(|j| matches!(j.child.try_wait(), Ok(Some(_)))) {
                break;
            }
        }
    }

    /// Pass Ctrl-C to every child's process group, wait for them (killing what outlives the grace).
    pub fn stop_all(&mut self, env: &Env) {
        for j in self.jobs.iter() {
            if let Some(pid) = rustix::process::Pid::from_raw(j.child.id() as i32) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::INT);
            }
        }
        let until = Instant::now() + STOP_GRACE;
        for j in self.jobs.iter_mut() {
            loop {
                match j.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= until => {
                        env.say(Some(&j.stream), "did not stop in time: killed");
                        if let Some(pid) = rustix::process::Pid::from_raw(j.child.id() as i32) {
                            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                        }
                        let _ = j.child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(25)),
                }
            }
            for p in j.pumps.drain(..) {
                let _ = p.join();
            }
        }
        self.jobs.clear();
    }
}

/// Start our own program (never through a shell) in a process group of its own, its lines
/// prefixed.
pub(super) fn spawn(opts: &Options, name: &str, phase: Phase, args: &[String], sink: &Arc<dyn Sink>) -> Result<Job> {
    let mut cmd = Command::new(&opts.exe);
    crate::context::export(&mut cmd);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().map_err(|e| {
        Error::internal(format!("cannot start {}: {e}", opts.exe.display())).hint("reinstall git-boulder")
    })?;
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        pumps.push(pump(out, name.to_string(), true, sink.clone()));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(pump(err, name.to_string(), false, sink.clone()));
    }
    Ok(Job { stream: name.to_string(), phase, child, pumps })
}

fn pump(from: impl Read + Send + 'static, name: String, out: bool, sink: Arc<dyn Sink>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(from);
        let mut line = Vec::new();
        while let Ok(n) = reader.read_until(b'\n', &mut line) {
            if n == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&line);
            sink.line(Some(&name), out, text.trim_end_matches(['\n', '\r']));
            line.clear();
        }
    })
}

/// How a child's exit is told.
pub(super) fn exit_text(status: ExitStatus) -> String {
    match status.code() {
        Some(c) => format!("exit code {c}"),
        None => "a signal".into(),
    }
}
