//! Landed means the work is there (DESIGN §14): every commit recorded for a stream — each commit
//! whose note in `refs/notes/boulder` names it, as far as this machine has pulled — must be in
//! what a landing leaves on the base. A recorded commit is accounted for when
//!
//! 1. the replay met it: it is on the stream branch and lands (rewritten or kept), or the replay
//!    found its change already on the base;
//! 2. a commit accounted for carries its record: rebases (the post-rewrite hook, a merge's own
//!    replay, an unmerge) carry notes onto the new commits, line for line ([`notes::carry`]);
//! 3. it is in the base's history by id;
//! 4. a `stream rollback` (or an earlier landing) set it aside under one of the stream's backup
//!    refs: a person's decision, kept, never required;
//! 5. its object is here and its patch id (`git patch-id --stable`) is that of a commit landing
//!    or of one the base gained since the two forked: the same change, rebased without the hooks.
//!
//! Anything else is missing and refuses the landing. The first two need no walk of the base's
//! history; the third walks it from the tip only until every commit left is found, and only
//! when some are left.

use std::collections::{HashMap, HashSet};

use crate::error::{Result, ResultExt};
use crate::git::{cli, notes, ObjectId, Repo};

use super::Step;

/// A recorded commit a landing lacks.
#[derive(Debug, Clone)]
pub struct Missing {
    pub commit: ObjectId,
    /// Its subject, when the commit is in this repository.
    pub subject: Option<String>,
    /// The machine its note says recorded it (actor id and host), when the note says.
    pub actor: Option<String>,
    pub host: Option<String>,
    /// When it was recorded, as its note says.
    pub at: Option<String>,
}

impl Missing {
    /// `1a2b3c4d  subject  recorded by alpha on host-1 (2026-11-01T00:00:05Z)`.
    pub fn line(&self) -> String {
        let what = match &self.subject {
            Some(s) => crate::text::inert(s).into_owned(),
            None => "(not in this repository)".to_string(),
        };
        let at = self.at.as_deref().map(|a| format!(" ({})", crate::text::inert(a))).unwrap_or_default();
        format!("{}  {what}  recorded {}{at}", super::short(self.commit), self.machine())
    }

    /// `by alpha on host-1`, or what is known of it.
    pub fn machine(&self) -> String {
        match (&self.actor, &self.host) {
            (Some(a), Some(h)) => format!("by {} on {}", crate::text::inert(a), crate::text::inert(h)),
            (Some(a), None) => format!("by {}", crate::text::inert(a)),
            (None, Some(h)) => format!("on {}", crate::text::inert(h)),
            (None, None) => "on a machine its note does not name".to_string(),
        }
    }
}

/// What [`check`] found.
#[derive(Debug, Clone, Default)]
pub struct Work {
    /// How many commits are recorded for the stream.
    pub recorded: usize,
    pub missing: Vec<Missing>,
}

/// Check that a landing of `stream` holds its recorded work: `steps` are the replay's (the
/// stream's commits the base lacks), `base_tip` the base it lands on.
pub fn check(repo: &Repo, stream: &str, steps: &[Step], base_tip: ObjectId) -> Result<Work> {
    let recorded = notes::recorded_for(repo, stream)?;
    let mut work = Work { recorded: recorded.len(), missing: Vec::new() };
    if recorded.is_empty() {
        return Ok(work);
    }
    // 1. What the replay met.
    let met: HashSet<ObjectId> = steps.iter().flat_map(|s| [Some(s.original), s.new]).flatten().collect();
    let mut covered_lines: HashSet<Vec<u8>> = HashSet::new();
    let mut pending = Vec::new();
    for r in recorded {
        if met.contains(&r.commit) {
            covered_lines.extend(r.records.iter().map(|(_, l)| l.clone()));
        } else {
            pending.push(r);
        }
    }
    // 2. Carried records.
    let carried = |r: &notes::Recorded, lines: &HashSet<Vec<u8>>| r.records.iter().all(|(_, l)| lines.contains(l));
    pending.retain(|r| !carried(r, &covered_lines));
    if pending.is_empty() {
        return Ok(work);
    }
    let objects = repo.objects();
    // 3. In the base by id: one walk down from its tip, until nothing is left to find.
    {
        let mut left: HashMap<ObjectId, usize> = pending.iter().enumerate().map(|(i, r)| (r.commit, i)).collect();
        let mut found = vec![false; pending.len()];
        // Which pending commits carry each record line: only those are looked at again when a
        // commit carrying that line is found.
        let mut by_line: HashMap<&[u8], Vec<usize>> = HashMap::new();
        for (i, r) in pending.iter().enumerate() {
            for (_, l) in &r.records {
                by_line.entry(l.as_slice()).or_default().push(i);
            }
        }
        let walk = objects.walk([base_tip], []).internal("cannot walk the base's history")?;
        for info in walk {
            let info = info.internal("cannot walk the base's history")?;
            let Some(i) = left.remove(&info.id) else { continue };
            found[i] = true;
            covered_lines.extend(pending[i].records.iter().map(|(_, l)| l.clone()));
            for (_, l) in &pending[i].records {
                for &j in by_line.get(l.as_slice()).map(Vec::as_slice).unwrap_or_default() {
                    if !found[j] && carried(&pending[j], &covered_lines) {
                        found[j] = true;
                        left.remove(&pending[j].commit);
                    }
                }
            }
            if left.is_empty() {
                break;
            }
        }
        let mut keep = found.iter().map(|f| !f);
        pending.retain(|_| keep.next().unwrap_or(true));
    }
    if pending.is_empty() {
        return Ok(work);
    }
    // 4. Set aside by a rollback: marked so in its note (on any machine), or held by a backup
    //    ref of the stream here (a rollback of a version that did not mark).
    pending.retain(|r| !r.set_aside);
    if pending.is_empty() {
        return Ok(work);
    }
    let kept: Vec<ObjectId> =
        crate::stream::rollback::backups(repo, stream)?.into_iter().map(|(_, _, id)| id).collect();
    if !kept.is_empty() {
        let present: Vec<ObjectId> = pending.iter().map(|r| r.commit).filter(|c| objects.has(*c)).collect();
        let mut set_aside = HashSet::new();
        if !present.is_empty() {
            let wanted: HashSet<ObjectId> = present.into_iter().collect();
            let walk = objects.walk(kept, [base_tip]).internal("cannot walk the stream's backups")?;
            for info in walk {
                let info = info.internal("cannot walk the stream's backups")?;
                if wanted.contains(&info.id) {
                    set_aside.insert(info.id);
                    if set_aside.len() == wanted.len() {
                        break;
                    }
                }
            }
        }
        pending.retain(|r| !set_aside.contains(&r.commit));
    }
    // 5. The same change, by patch id.
    let present: Vec<ObjectId> = pending.iter().map(|r| r.commit).filter(|c| objects.has(*c)).collect();
    if !present.is_empty() {
        let mut pool: Vec<ObjectId> = steps.iter().map(|s| s.original).collect();
        let forks: Vec<ObjectId> = present.iter().filter_map(|c| objects.merge_base(*c, base_tip)).collect();
        for info in objects.walk([base_tip], forks).internal("cannot walk the base's history")? {
            pool.push(info.internal("cannot walk the base's history")?.id);
        }
        let mut all = present.clone();
        all.extend(pool.iter().copied());
        let ids = cli::patch_ids(repo.run_dir(), &all)?;
        let landing: HashSet<&String> = pool.iter().filter_map(|c| ids.get(c)).collect();
        pending.retain(|r| !ids.get(&r.commit).is_some_and(|p| landing.contains(p)));
    }
    pending.sort_by(|a, b| {
        let at = |r: &notes::Recorded| r.records.first().and_then(|(n, _)| n.at.clone());
        (at(a), a.commit).cmp(&(at(b), b.commit))
    });
    for r in pending {
        let subject = if objects.has(r.commit) { objects.commit_info(r.commit).ok().map(|c| c.subject) } else { None };
        let note = r.records.first().map(|(n, _)| n.clone());
        work.missing.push(Missing {
            commit: r.commit,
            subject,
            actor: note.as_ref().and_then(|n| n.actor.clone()),
            host: note.as_ref().and_then(|n| n.host.clone()),
            at: note.and_then(|n| n.at),
        });
    }
    Ok(work)
}

/// The commits recorded for `stream` that are neither on its branch (`branch_tip`) nor in the
/// base (`base_tip`), nor accounted for otherwise (see the module's list): work stranded on
/// the machine that recorded it, or lost.
pub fn stranded(repo: &Repo, stream: &str, branch_tip: Option<ObjectId>, base_tip: ObjectId) -> Result<Vec<Missing>> {
    let mut steps = Vec::new();
    if let Some(tip) = branch_tip {
        for info in repo.objects().walk([tip], [base_tip]).internal("cannot walk the stream's branch")? {
            let id = info.internal("cannot walk the stream's branch")?.id;
            steps.push(Step { original: id, new: None, subject: String::new(), merge: false });
        }
    }
    Ok(check(repo, stream, &steps, base_tip)?.missing)
}

/// The commits of a MERGED stream's branch made after its landing: on `branch_tip`, not in the
/// base nor in the history of what was landed (`landed`: the recorded tips), and not the same
/// change as a commit the base gained since they forked (its patch id). Oldest first, with
/// their subjects.
pub fn after_landing(
    repo: &Repo,
    branch_tip: ObjectId,
    base_tip: ObjectId,
    landed: &[ObjectId],
) -> Result<Vec<(ObjectId, String)>> {
    let objects = repo.objects();
    let mut hidden = vec![base_tip];
    hidden.extend(landed.iter().copied().filter(|c| objects.has(*c)));
    let mut after = Vec::new();
    for info in objects.walk([branch_tip], hidden).internal("cannot walk the stream's branch")? {
        after.push(info.internal("cannot walk the stream's branch")?.id);
    }
    if after.is_empty() {
        return Ok(Vec::new());
    }
    let mut pool = Vec::new();
    if let Some(fork) = objects.merge_base(branch_tip, base_tip) {
        for info in objects.walk([base_tip], [fork]).internal("cannot walk the base's history")? {
            pool.push(info.internal("cannot walk the base's history")?.id);
        }
    }
    let mut all = after.clone();
    all.extend(pool.iter().copied());
    let ids = if pool.is_empty() { HashMap::new() } else { cli::patch_ids(repo.run_dir(), &all)? };
    let upstream: HashSet<&String> = pool.iter().filter_map(|c| ids.get(c)).collect();
    after.retain(|c| !ids.get(c).is_some_and(|p| upstream.contains(p)));
    after.reverse();
    after.into_iter().map(|c| Ok((c, objects.commit_info(c)?.subject))).collect()
}
