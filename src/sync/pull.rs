//! `pull`: fetch the remote's state and bring each ref in — op-logs checked, then moved together —
//! and the refs a plain `git fetch` brought, taken in by the next command ([`absorb_pending`]).

use std::collections::BTreeMap;

use super::refused::{Refusals, RefusedTip};
use super::take::{
    absorb_kind, absorb_one, absorbed_word, check_logs, log_ref, over_limit, take_one, target, Pending, Taken, Target,
};
use super::{fetch_lock, fetch_specs, outcome, tracking_prefix, PullReport, RefOutcome, RefResult, MAX_REFS_PER_PULL};
use crate::error::Result;
use crate::git::remote::{self, RemoteName};
use crate::git::{refs, ObjectId, Repo};
use crate::state::{Store, NOTES_REF};

/// Fetch the remote's state and bring it in.
pub fn pull(repo: &Repo, remote: &RemoteName) -> Result<PullReport> {
    // One fetch into refs/boulder-remotes/<remote>/ at a time on this machine: two at once (a
    // worker and the merge it started) fail on each other's ref locks.
    let _fetching = fetch_lock(repo, remote, "git boulder pull")?;
    // A `packed-refs.lock` a killed writer left blocks every ref this pull would write (each
    // waiting out git's timeout): say so once, up front, with the fix.
    if let Some(e) = refs::stale_packed_lock(repo, &format!("the refs of {}", remote.given)) {
        return Err(e);
    }
    let Fetch { refs: fetched, store, claims_before } = fetch(repo, remote)?;
    let _span = crate::trace::span(format!("pull: check and take in {} refs", fetched.len()));
    let mut report = PullReport { remote: remote.given.clone(), refs: Vec::new() };
    let mut claims_seen = Vec::new();
    // Op-logs checked and ready to move, with their place in the report.
    let mut pending: Vec<(usize, Pending)> = Vec::new();
    // Op-log tips refused before for what they hold: refused again without a walk.
    let refusals = Refusals::load(repo);
    let mut known_refused = refused_before(&refusals, remote, &fetched);
    if crate::trace::enabled() && !known_refused.is_empty() {
        crate::trace::line(&format!("pull: {} op-log tip(s) refused before, not checked again", known_refused.len()));
    }
    let span = crate::trace::span("pull: check the op-logs");
    let mut checked =
        check_logs(repo, &store, &remote.key, &fetched[..fetched.len().min(MAX_REFS_PER_PULL)], &known_refused);
    drop(span);
    let mut lasting: BTreeMap<String, RefusedTip> = BTreeMap::new();
    for (n, f) in fetched.iter().enumerate() {
        if let Some(Target::Claim(s)) = target(&f.remote_ref) {
            claims_seen.push(s);
        }
        if n >= MAX_REFS_PER_PULL {
            report.refs.push(over_limit(&f.remote_ref));
            continue;
        }
        crate::progress::show(&format!("merging {}/{} {}", n + 1, fetched.len(), f.remote_ref));
        let taken = match known_refused.remove(&n).or_else(|| checked.remove(&n)) {
            Some(taken) => taken,
            None => take_one(repo, &store, &remote.key, &f.remote_ref, f.id),
        };
        match taken? {
            Taken::Done(Some(o)) => report.refs.push(o),
            Taken::Refused(o) => {
                // Remembered with the first reason given for this tip.
                let why = match refusals.0.get(&remote.key).and_then(|m| m.get(&f.remote_ref)) {
                    Some(r) if r.is(f.id) => r.why.clone(),
                    _ => o.why.clone().unwrap_or_default(),
                };
                lasting.insert(f.remote_ref.clone(), RefusedTip { tip: f.id.to_string(), why });
                report.refs.push(o);
            }
            Taken::Done(None) => {}
            Taken::Pending(p) => {
                report.refs.push(outcome(&p.swap.name, absorbed_word(p.how), None));
                pending.push((report.refs.len() - 1, p));
            }
        }
    }
    move_logs(repo, &store, &pending, &mut report)?;
    // Claims the remote no longer has were released there.
    for (stream, _) in claims_before {
        if !claims_seen.contains(&stream) {
            crate::sync::claim::forget(repo, &remote.key, &stream)?;
            report.refs.push(outcome(
                &crate::sync::claim::tracking_ref(&remote.key, &stream),
                RefResult::ClaimReleased,
                None,
            ));
        }
    }
    crate::progress::done();
    // Refs refused because a `packed-refs.lock` here blocked their update (one that appeared
    // after the check above) are this repository's problem, not the remote's: say that.
    if !report.refused().is_empty() {
        if let Some(e) = refs::packed_lock_now(repo, &format!("the refs of {}", remote.given)) {
            return Err(e);
        }
    }
    remember(repo, &remote.key, &fetched.iter().filter_map(|f| Some((f.local_ref.clone()?, f.id))).collect::<Vec<_>>());
    keep_refusals(repo, &remote.key, refusals, lasting);
    // A command that is slow anyway packs the state's loose objects past the threshold.
    crate::state::pack::auto(repo);
    Ok(report)
}

/// What [`fetch`] brings: the refs it fetched, the pull's store, and the claims seen before.
struct Fetch<'r> {
    refs: Vec<remote::Fetched>,
    store: Store<'r>,
    claims_before: Vec<(String, super::claim::Claim)>,
}

/// Fetch `remote`'s state (its refs written under `refs/boulder-remotes/`), with the pull's
/// store and the claims seen before, read while git fetches; op-logs first when there are more
/// than one pull takes in.
fn fetch<'r>(repo: &'r Repo, remote: &RemoteName) -> Result<Fetch<'r>> {
    crate::progress::show(&format!("fetching git-boulder state from {}", remote.given));
    let span = crate::trace::span("pull: git fetch");
    let running = remote::start_fetch(repo, &remote.given, &fetch_specs(&remote.key))?;
    // While git fetches (mostly waiting for the remote to pack): what does not depend on what it
    // brings. Claims seen before the fetch are the ones seen after it, less those it brings
    // (refs are never pruned by it, and it runs under the fetch lock).
    let prepared = (|| -> Result<_> {
        let store = Store::new(repo)?;
        let claims_before = crate::sync::claim::seen_on(repo, &remote.key)?;
        repo.settle_committer();
        Ok((store, claims_before))
    })();
    let mut fetched = running.finish(repo)?;
    let (store, claims_before) = prepared?;
    // A partial clone gets the state's files too (its filter keeps them back), as far as they
    // are new: what the local state holds is had already.
    let tips: Vec<String> = fetched.iter().map(|f| f.id.to_string()).collect();
    if !tips.is_empty() {
        let had = ["--not".to_string(), format!("--glob={}*", refs::BOULDER), "--glob=refs/notes/boulder*".into()];
        let revs: Vec<String> = tips.into_iter().chain(had).collect();
        repo.prefetch(&revs, &[])?;
    }
    if fetched.len() > MAX_REFS_PER_PULL {
        // Past the limit, what this machine already holds is taken first — the notes, the PRD's
        // and streams' state, boulders it knows — so refs others pushed by the thousand cannot
        // crowd it out.
        let known: std::collections::HashSet<String> =
            store.list(refs::BOULDERS)?.into_iter().map(|(name, _)| name).collect();
        fetched.sort_by_key(|f| match target(&f.remote_ref) {
            Some(Target::Notes | Target::Prd | Target::Stream(_)) => 0,
            _ if known.contains(&f.remote_ref) => 1,
            _ => 2,
        });
    }
    drop(span);
    Ok(Fetch { refs: fetched, store, claims_before })
}

/// The fetched op-log tips (by index) refused before for what they hold: refused again without
/// a walk.
fn refused_before(
    refusals: &Refusals,
    remote: &RemoteName,
    fetched: &[remote::Fetched],
) -> BTreeMap<usize, Result<Taken>> {
    let mut known_refused: BTreeMap<usize, Result<Taken>> = BTreeMap::new();
    for (n, f) in fetched.iter().enumerate().take(MAX_REFS_PER_PULL) {
        if let (Some(why), Some(local)) = (refusals.of(&remote.key, &f.remote_ref, f.id), log_ref(&f.remote_ref)) {
            let why = format!(
                "refused before at this tip, not checked again until {} changes on {}: {why}",
                f.remote_ref, remote.given
            );
            known_refused.insert(n, Ok(Taken::Refused(outcome(&local, RefResult::Refused, Some(why)))));
        }
    }
    known_refused
}

/// Move every checked op-log ref of the pull at once, and write each one's outcome into `report`.
fn move_logs(repo: &Repo, store: &Store, pending: &[(usize, Pending)], report: &mut PullReport) -> Result<()> {
    // Every op-log ref moves at once: those only packed-refs holds in one rewrite of it, the
    // others (a hook wrote them loose) in one transaction. One that fails (a local writer moved it
    // meanwhile, or holds its lock) is taken in on its own, with retries.
    let swaps: Vec<refs::Swap> = pending.iter().map(|(_, p)| p.swap.clone()).collect();
    let writer = Store::absorb_writer();
    let span = crate::trace::span(format!("pull: move {} op-log refs in one transaction", swaps.len()));
    // Without a lock file per ref where only packed-refs holds them (see refs::update_packed);
    // one a local writer took meanwhile is taken in again on its own, on top of what it wrote.
    let (left, mut redo) = match refs::update_packed(repo, &swaps)? {
        Some(moved) => (moved.left, moved.raced),
        None => ((0..swaps.len()).collect(), Vec::new()),
    };
    let rest: Vec<refs::Swap> = left.iter().map(|&n| swaps[n].clone()).collect();
    if refs::update_all(repo, &rest, &writer)?.is_err() {
        redo.extend(left);
    }
    drop(span);
    for n in redo {
        let (i, p) = &pending[n];
        report.refs[*i] = absorb_kind(store, p.kind, &p.swap.name, p.id);
    }
    Ok(())
}

/// Keep the tips of `key`'s refs refused now (`lasting`) as its refused tips, when they changed.
fn keep_refusals(repo: &Repo, key: &str, refusals: Refusals, lasting: BTreeMap<String, RefusedTip>) {
    // The refused tips of this remote are those refused now: a ref that moved is checked anew.
    if refusals.0.get(key).map_or(!lasting.is_empty(), |before| *before != lasting) {
        let mut refusals = refusals;
        if lasting.is_empty() {
            refusals.0.remove(key);
        } else {
            refusals.0.insert(key.to_string(), lasting);
        }
        refusals.save(repo);
    }
}

// ---------------------------------------------------------------------------------------------
// Refs fetched by plain `git fetch` (after `remote setup`): brought in by the next command.

fn absorbed_path(repo: &Repo) -> std::path::PathBuf {
    repo.boulder_dir().join("absorbed.json")
}

fn load_absorbed(repo: &Repo) -> BTreeMap<String, String> {
    std::fs::read(absorbed_path(repo)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// Record that these tracking refs were brought in at these ids.
fn remember(repo: &Repo, key: &str, refs: &[(String, ObjectId)]) {
    let mut map = load_absorbed(repo);
    map.retain(|k, _| !k.starts_with(&tracking_prefix(key)));
    for (name, id) in refs {
        map.insert(name.clone(), id.to_string());
    }
    if let Ok(text) = serde_json::to_vec_pretty(&map) {
        let _ = crate::fsutil::write_atomic(&absorbed_path(repo), &text);
    }
}

/// Bring in whatever plain `git fetch` put under `refs/boulder-remotes/` since the last time.
/// Cheap when nothing is new: one ref listing and one small file. Returns what it did.
pub fn absorb_pending(repo: &Repo) -> Result<Vec<RefOutcome>> {
    let store = Store::new(repo)?;
    let tracked = store.list(refs::REMOTES)?;
    if tracked.is_empty() {
        return Ok(Vec::new());
    }
    let seen = load_absorbed(repo);
    let mut out = Vec::new();
    let mut done: BTreeMap<String, Vec<(String, ObjectId)>> = BTreeMap::new();
    let mut taken = 0usize;
    for (name, id) in tracked {
        if seen.get(&name).map(String::as_str) == Some(id.to_string().as_str()) {
            continue;
        }
        taken += 1;
        if taken > MAX_REFS_PER_PULL {
            out.push(over_limit(&name));
            continue;
        }
        let Some(rest) = name.strip_prefix(refs::REMOTES) else { continue };
        let Some((key, tail)) = rest.split_once('/') else { continue };
        let remote_ref =
            if tail == refs::REMOTE_NOTES_TAIL { NOTES_REF.to_string() } else { format!("{}{tail}", refs::BOULDER) };
        if let Some(o) = absorb_one(repo, &store, key, &remote_ref, id)? {
            out.push(o);
        }
        done.entry(key.to_string()).or_default().push((name, id));
    }
    let mut map = seen;
    for (_, refs) in done {
        for (name, id) in refs {
            map.insert(name, id.to_string());
        }
    }
    if let Ok(text) = serde_json::to_vec_pretty(&map) {
        let _ = crate::fsutil::write_atomic(&absorbed_path(repo), &text);
    }
    Ok(out)
}
