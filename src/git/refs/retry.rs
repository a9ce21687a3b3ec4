//! A compare-and-swap retried against writers that race: [`update_with_retry`] asks its closure
//! for the update on the fresh value after each lost race, pausing as [`Retry`] says.

use std::time::Duration;

use super::full_name;
use super::locks::{blocking_lock, locked};
use super::update::{update_in, Expect, UpdateError, Writer};
use crate::error::Result;
use crate::git::identity::Signature;
use crate::git::{ObjectId, Repo};

/// The update [`update_with_retry`]'s closure asks for, or its answer without one.
pub enum Step<T> {
    /// Nothing to write: return this.
    Done(T),
    /// Move the ref from `expected` to `new` with reflog `message` by `writer`; then return `moved`.
    Update {
        expected: Expect,
        new: ObjectId,
        message: String,
        writer: Option<Signature>,
        moved: T,
        /// What to return when a creation finds the ref already holding `new`; `None`: plan again.
        already: Option<T>,
    },
}

/// How [`update_with_retry`] retries.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Most compare-and-swap attempts.
    pub tries: u32,
    /// Errors that are neither a lost race nor a held lock: [`Odd::Count`] retries that many in
    /// all; [`Odd::FirstAttempts`] retries them only in the first attempts; [`Odd::Always`] treats
    /// them like a lost race.
    pub odd: Odd,
    /// The pause after a lost race.
    pub backoff: Backoff,
}

/// See [`Retry::odd`].
#[derive(Debug, Clone, Copy)]
pub enum Odd {
    Count(u32),
    FirstAttempts(u32),
    Always,
}

/// See [`Retry::backoff`].
#[derive(Debug, Clone, Copy)]
pub enum Backoff {
    /// A random pause of 20 µs up to 100 µs + 200 µs per attempt so far (at most 40 attempts' worth).
    Growing,
    /// A random pause of 200 µs to 3 ms.
    Flat,
}

impl Backoff {
    pub(crate) fn pause(self, attempt: u32) {
        let micros = match self {
            Backoff::Growing => fastrand::u64(20..=100 + 200 * u64::from(attempt.min(40))),
            Backoff::Flat => fastrand::u64(200..3000),
        };
        std::thread::sleep(Duration::from_micros(micros));
    }
}

/// Why [`update_with_retry`] gave up.
#[derive(Debug)]
pub enum GaveUp {
    /// Every attempt lost the race; the last error, if an attempt failed with one.
    Exhausted(Option<UpdateError>),
    /// An error that is not a lost race, more often than [`Retry::odd`] allows.
    Failed(UpdateError),
}

/// Compare-and-swap `name` with retry: `plan` is asked (with the attempt number) what to write
/// given the ref's current value, which it reads itself; its update is tried; on a lost race the
/// pause of `retry.backoff` and `plan` is asked again. Errors of `plan` end it at once.
pub fn update_with_retry<T>(
    repo: &Repo,
    name: &str,
    retry: Retry,
    plan: impl FnMut(u32) -> Result<Step<T>>,
) -> Result<std::result::Result<T, GaveUp>> {
    update_with_retry_in(&repo.repo, name, retry, plan)
}

/// [`update_with_retry`] on the gix handle `g` (one with an identity set in memory).
pub(crate) fn update_with_retry_in<T>(
    g: &gix::Repository,
    name: &str,
    retry: Retry,
    mut plan: impl FnMut(u32) -> Result<Step<T>>,
) -> Result<std::result::Result<T, GaveUp>> {
    let full = full_name(name)?;
    let mut odd = 0;
    let mut last = None;
    for attempt in 0..retry.tries {
        let (expected, new, message, writer, moved, already) = match plan(attempt)? {
            Step::Done(t) => return Ok(Ok(t)),
            Step::Update { expected, new, message, writer, moved, already } => {
                (expected, new, message, writer, moved, already)
            }
        };
        let who = match &writer {
            Some(sig) => Writer::As(sig),
            None => Writer::Configured,
        };
        match update_in(g, &full, expected, new, &message, who) {
            Ok(true) => return Ok(Ok(moved)),
            Ok(false) => match already {
                Some(t) => return Ok(Ok(t)),
                // Another writer created the ref with the very same object: plan again on it.
                None => continue,
            },
            Err(e) => {
                if let Some(lock) = blocking_lock(g, &full, false) {
                    // Left by a killed writer: waiting will not free it.
                    return Err(locked(name, &lock));
                }
                if !e.transient {
                    let give_up = match retry.odd {
                        Odd::Count(n) => {
                            odd += 1;
                            odd > n
                        }
                        Odd::FirstAttempts(n) => attempt >= n,
                        Odd::Always => false,
                    };
                    if give_up {
                        return match blocking_lock(g, &full, true) {
                            Some(lock) => Err(locked(name, &lock)),
                            None => Ok(Err(GaveUp::Failed(e))),
                        };
                    }
                }
                last = Some(e);
                retry.backoff.pause(attempt);
            }
        }
    }
    // A lock file is still in the way after every attempt: say which, not "lost the race".
    if let Some(lock) = blocking_lock(g, &full, true) {
        return Err(locked(name, &lock));
    }
    Ok(Err(GaveUp::Exhausted(last)))
}
