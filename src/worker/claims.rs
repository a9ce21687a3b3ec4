//! The claims a worker holds on the remote ([`crate::sync::claim`]): taken before a stream
//! starts, renewed while it runs, released once its branch and the state are shared.

use std::collections::{BTreeSet, HashMap};

use crate::error::{Error, Result};
use crate::git::remote::RemoteName;
use crate::state::StreamStatus;

use super::{status_of, Env, CLAIM_TTL};

/// Claims of one stream that may fail in a row (not taken by another machine meanwhile) before
/// the worker gives it up.
pub(super) const MAX_CLAIM_ERRORS: u32 = 10;

#[derive(Default)]
pub(super) struct Claims {
    /// Each stream this worker holds a claim on, with the claim's expiry (seconds since the epoch).
    held: HashMap<String, f64>,
    /// Claims of each stream the remote turned down in a row.
    errors: HashMap<String, u32>,
    /// Invalid claims said already: (stream, expiry).
    warned: BTreeSet<(String, String)>,
}

impl Claims {
    /// The streams held, to release them all.
    pub fn held(&self) -> Vec<String> {
        self.held.keys().cloned().collect()
    }

    /// Claim `name` on `r` for [`CLAIM_TTL`].
    pub fn take(&mut self, env: &Env, r: &RemoteName, name: &str) -> Result<()> {
        let (claim, _) = crate::sync::claim::take(&env.ws.repo, r, name, &env.me, CLAIM_TTL)?;
        env.say(Some(name), &format!("claimed on {} until {}", r.given, claim.expires));
        self.held.insert(name.to_string(), crate::time::parse_rfc3339(&claim.expires).unwrap_or(0.0));
        Ok(())
    }

    /// A claim of `name` turned down once more: has the remote turned it down too often?
    pub fn turned_down(&mut self, name: &str) -> bool {
        let n = self.errors.entry(name.to_string()).or_default();
        *n += 1;
        *n >= MAX_CLAIM_ERRORS
    }

    /// Another machine holds `name`: the claims turned down so far do not count.
    pub fn held_elsewhere(&mut self, name: &str) {
        self.errors.remove(name);
    }

    /// Release this worker's claim on `name`, if it holds one.
    pub fn release(&mut self, env: &Env, name: &str) {
        let (Some(r), Some(_)) = (&env.remote, self.held.remove(name)) else { return };
        match crate::sync::claim::release(&env.ws.repo, r, name, &env.me, false) {
            Ok(_) => env.say(Some(name), &format!("released the claim on {}", r.given)),
            Err(e) => env.say(Some(name), &format!("warning: could not release the claim: {}", e.message)),
        }
    }

    /// Take again each claim with half of its time or less left.
    pub fn renew(&mut self, env: &Env) {
        let Some(r) = &env.remote else { return };
        let now = crate::time::now_secs();
        for (name, expires) in self.held.iter_mut() {
            if *expires - now > CLAIM_TTL.as_secs_f64() / 2.0 {
                continue;
            }
            match crate::sync::claim::take(&env.ws.repo, r, name, &env.me, CLAIM_TTL) {
                Ok((c, _)) => *expires = crate::time::parse_rfc3339(&c.expires).unwrap_or(0.0),
                Err(e) => env.say(Some(name), &format!("warning: could not renew the claim: {}", e.message)),
            }
        }
    }

    /// Say once per claim that a claim seen on `remote` is invalid (an expiry beyond any lease): it
    /// is treated as expired, never waited on.
    pub fn warn_invalid(
        &mut self,
        env: &Env,
        remote: &RemoteName,
        seen: &[(String, String, crate::sync::claim::Claim)],
    ) {
        for (_, stream, c) in seen.iter().filter(|(key, _, _)| *key == remote.key) {
            let Some(why) = c.invalid() else { continue };
            if self.warned.insert((stream.clone(), c.expires.clone())) {
                env.say(
                    Some(stream),
                    &format!(
                        "warning: the claim on {} by {} on {} until {} is invalid ({why}); treating it as expired",
                        remote.given, c.actor, c.host, c.expires
                    ),
                );
            }
        }
    }
}

/// Share the branches of `names` that are not merged (see [`crate::stream::share`]) and the state
/// with the remote, then release their claims. A stream whose branch (or the state) could not be
/// pushed keeps its claim: it is returned, and the next call tries again.
pub(super) fn share_then_release(env: &Env, claims: &mut Claims, names: Vec<String>) -> Vec<String> {
    let Some(r) = &env.remote else {
        for name in names {
            claims.release(env, &name);
        }
        return Vec::new();
    };
    let (mut kept, mut shared) = share_branches(env, r, names);
    crate::failpoint::hit("progress-branch-pushed");
    let state = crate::sync::push(&env.ws.repo, r).and_then(|p| {
        let rejected: Vec<String> =
            p.refs.iter().filter(|o| o.result == crate::sync::RefResult::Rejected).map(|o| o.name.clone()).collect();
        match rejected.is_empty() {
            true => Ok(()),
            false => Err(Error::refused(format!("{} rejected", rejected.join(", ")))),
        }
    });
    if let Err(e) = state {
        env.say(
            None,
            &format!("warning: cannot push the state to {}: {}; the claims of what ended are kept", r.given, e.message),
        );
        kept.append(&mut shared);
        return kept;
    }
    crate::failpoint::hit("progress-state-pushed");
    for name in shared {
        claims.release(env, &name);
    }
    kept
}

/// Push the branch of each of `names` not merged: (those whose branch could not be pushed,
/// the others).
fn share_branches(env: &Env, r: &RemoteName, names: Vec<String>) -> (Vec<String>, Vec<String>) {
    let mut kept = Vec::new();
    let mut shared = Vec::new();
    for name in names {
        let merged = status_of(env.ws, &name).is_ok_and(|s| s == StreamStatus::Merged);
        let Some(stream) = env.plan.stream(&name).filter(|_| !merged) else {
            shared.push(name);
            continue;
        };
        match crate::stream::share::branch(env.ws, stream, r) {
            Ok(crate::stream::share::Branch::Pushed(tip)) => {
                env.say(
                    Some(&name),
                    &format!("shared on {}: {} at {}", r.given, stream.branch, crate::merge::short(tip)),
                );
                shared.push(name);
            }
            Ok(_) => shared.push(name),
            Err(e) => {
                env.say(
                    Some(&name),
                    &format!(
                        "warning: its branch was not shared with {}: {}; this machine keeps the claim",
                        r.given, e.message
                    ),
                );
                kept.push(name);
            }
        }
    }
    (kept, shared)
}
