//! Work in progress, shared: a stream's branch pushed to a remote under a lease, then its state
//! (`git boulder push R`: op-logs, notes), so other machines see its progress and a machine that
//! takes the stream over continues from its commits. `git boulder work` does it after each agent
//! iteration (its `stream run` child, told the remote) and before it releases a claim.
//!
//! The branch on the remote is the plan's branch (`refs/heads/<branch>`, visible on the forge).
//! The push is a compare-and-swap on the tip this machine last saw there, kept in
//! `refs/boulder-queue/<remote>/heads/<branch>` (as the merge queue keeps it): when the remote
//! moved since, its tip is fetched and the branch is only pushed over it when it is this branch's
//! own history (an ancestor, a tip this branch had here, or a backup); anything else is refused,
//! never overwritten. Branch first, state second: every commit the shared state names is on the
//! remote already. Killed between the two (or anywhere), the next share finds the branch there and
//! only pushes the state. Like the merge queue's, the push skips the hooks (`--no-verify`); when
//! git-lfs is set up here, the LFS files of the commits are uploaded first (`git lfs pre-push`).

use crate::error::{Error, Result};
use crate::git::remote::RemoteName;
use crate::git::{cli, refs, ObjectId};
use crate::plan::StreamDef;
use crate::workspace::Workspace;

/// What [`share`] did with the branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Branch {
    /// The stream has no branch here.
    None,
    /// The remote holds this tip already.
    UpToDate(ObjectId),
    /// Pushed: the remote's branch now holds this tip.
    Pushed(ObjectId),
}

/// Push `stream`'s branch to `remote` under a lease, then the state (see the module docs). An
/// error says what could not be shared; nothing on the remote was overwritten.
pub fn share(ws: &Workspace, stream: &StreamDef, remote: &RemoteName) -> Result<Branch> {
    let pushed = branch(ws, stream, remote)?;
    crate::failpoint::hit("progress-branch-pushed");
    let report = crate::sync::push(&ws.repo, remote)?;
    let rejected: Vec<&str> =
        report.refs.iter().filter(|r| r.result == crate::sync::RefResult::Rejected).map(|r| r.name.as_str()).collect();
    if !rejected.is_empty() {
        return Err(Error::refused(format!(
            "the state of stream {} was not all pushed to {}: {} rejected",
            stream.name,
            remote.given,
            rejected.join(", ")
        ))
        .hint(format!("run `git boulder sync {}`", remote.given)));
    }
    crate::failpoint::hit("progress-state-pushed");
    Ok(pushed)
}

/// Push the branch alone (see the module docs).
pub fn branch(ws: &Workspace, stream: &StreamDef, remote: &RemoteName) -> Result<Branch> {
    let repo = &ws.repo;
    let Some(tip) = repo.branch_tip(&stream.branch)? else { return Ok(Branch::None) };
    let full = refs::branch_ref(&stream.branch);
    let seen_ref = refs::queue_ref(&remote.key, &stream.branch);
    let mut seen = repo.ref_id(&seen_ref)?;
    let mut fetched = false;
    let fetch = |seen: &mut Option<ObjectId>| -> Result<()> {
        let spec = format!("+{full}:{seen_ref}");
        let got = crate::git::remote::fetch(repo, &remote.given, &[spec])?;
        *seen = got.iter().find(|f| f.remote_ref == full).map(|f| f.id);
        Ok(())
    };
    loop {
        if seen == Some(tip) {
            return Ok(Branch::UpToDate(tip));
        }
        // Never pushed over commits this branch does not have, whether last seen there (the
        // merge queue's fetch keeps what it found: looked at again first) or just fetched.
        if let Some(theirs) = seen {
            if !own_history(ws, stream, tip, theirs)? {
                if !fetched {
                    fetch(&mut seen)?;
                    fetched = true;
                    continue;
                }
                return Err(Error::refused(format!(
                    "the branch {} on {} has commits this machine's branch lacks ({}); it was not pushed over",
                    stream.branch,
                    remote.given,
                    crate::git::id::short(theirs)
                ))
                .hint(format!(
                    "bring them in first: cd \"$(git boulder stream path {})\" && git pull --rebase {} {}",
                    stream.name, remote.given, stream.branch
                )));
            }
        }
        if uses_lfs(repo) {
            // The push skips the hooks, git-lfs's among them: send the LFS files first.
            let update = cli::PushUpdate {
                local_ref: full.clone(),
                local: tip.to_string(),
                remote_ref: full.clone(),
                remote: seen.map(|s| s.to_string()),
            };
            cli::lfs_pre_push(repo.run_dir(), &remote.given, &[update])?;
        }
        crate::progress::show(&format!("pushing {} to {}", stream.branch, remote.given));
        let leases = [(full.clone(), seen.map(|s| s.to_string()))];
        let pushed = cli::push_leased(repo.run_dir(), &remote.given, &leases, &[format!("{tip}:{full}")]);
        crate::progress::done();
        let pushed = pushed?;
        let lost = pushed.refs.iter().any(cli::PushedRef::lost_race);
        if !lost && !pushed.refs.is_empty() && !pushed.refs.iter().any(|p| p.rejected()) {
            // What the remote holds now; a stale record is only a lease that fails once more.
            let _ = refs::update(
                repo,
                &seen_ref,
                refs::Expect::from_tip(seen),
                tip,
                &format!("boulder: pushed {} to {}", stream.branch, remote.given),
                refs::Writer::Configured,
            );
            return Ok(Branch::Pushed(tip));
        }
        if fetched || !lost {
            let said = pushed.server_said();
            let why: Vec<String> = pushed.refs.iter().map(|p| format!("{} {}", p.remote_ref, p.summary)).collect();
            return Err(Error::refused(format!(
                "{} refused the branch {}: {}{}",
                remote.given,
                stream.branch,
                why.join(", "),
                if said.is_empty() { String::new() } else { format!("\n{said}") }
            ))
            .hint(format!("`git push {} {}` must be allowed from here", remote.given, stream.branch)));
        }
        // The remote's branch is not what this machine last saw: look at it, then decide.
        fetch(&mut seen)?;
        fetched = true;
    }
}

/// Whether `theirs` (the remote's tip) is this branch's own history: in `tip`'s, a tip the branch
/// had here (its reflog: rewritten here by a rebase or a merge's replay), or kept in a backup.
pub(crate) fn own_history(ws: &Workspace, stream: &StreamDef, tip: ObjectId, theirs: ObjectId) -> Result<bool> {
    let objects = ws.repo.objects();
    if objects.has(theirs) && objects.is_ancestor(theirs, tip)? {
        return Ok(true);
    }
    if ws.repo.reflog_contains(&refs::branch_ref(&stream.branch), theirs) {
        return Ok(true);
    }
    for (_, _, kept) in crate::stream::rollback::backups(&ws.repo, &stream.name)? {
        if objects.is_ancestor(theirs, kept)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Is git-lfs set up for this repository (its filter configured, as `git lfs install` does)? A
/// push git-boulder makes without the hooks (sharing a branch here, landing through the merge
/// queue) then sends the LFS files first, as git-lfs's pre-push hook would.
pub fn uses_lfs(repo: &crate::git::Repo) -> bool {
    ["filter.lfs.process", "filter.lfs.clean"].iter().any(|k| repo.config_string(k).is_some_and(|v| !v.is_empty()))
}
