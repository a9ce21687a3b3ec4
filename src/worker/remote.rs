//! What the worker fetches from the remote besides the state's claims: the state itself, the
//! base branch it follows, and the branch of a stream other machines ran before.

use crate::error::{Error, Result};
use crate::git::refs;
use crate::git::remote::RemoteName;
use crate::plan::StreamDef;

use super::{ws_state, Env};

/// Bring the local base branch (and its worktree) to the remote's base when it is behind it —
/// never losing a local commit — so new stream branches start from what landed, and the dashboard
/// reads the PRD the remote has. The remote's tip is kept where `git fetch` keeps it
/// (`refs/remotes/<remote>/<base>`); a remote given as a URL has no such place and is left alone.
pub(super) fn follow_base(env: &Env, remote: &RemoteName) {
    let ws = env.ws;
    let base = &env.plan.settings.base_branch;
    let followed = (|| -> Result<()> {
        if remote.key != remote.given {
            return Ok(());
        }
        let spec = format!("+{}:{}", refs::branch_ref(base), refs::remote_branch_ref(&remote.given, base));
        let fetched = crate::git::remote::fetch(&ws.repo, &remote.given, &[spec])?;
        let Some(tip) = fetched.first().map(|f| f.id) else { return Ok(()) };
        // Merges write the base's worktree too (and first check it is clean): not while one runs.
        let _merging = crate::lock::acquire(&ws.repo, "merge", true, "git boulder work: following the remote")?;
        let Some(local) = ws.repo.branch_tip(base)? else { return Ok(()) };
        if local == tip || !ws.repo.objects().is_ancestor(local, tip)? {
            return Ok(());
        }
        let reflog = format!("boulder work: {base} follows {}", remote.given);
        crate::worktree::checkout::move_branch(&ws.repo, base, local, tip, &reflog, "following the remote", "work-base")
    })();
    if let Err(e) = followed {
        env.say(None, &format!("warning: {base} was not brought to {}'s: {}", remote.given, e.message));
    }
}

/// The stream continues from the remote's branch, where the machines that ran it before shared
/// their work in progress: the local branch is made at the remote's tip when this clone has none,
/// and brought up to it (with its worktree, as `git merge --ff-only` would) when it is behind.
/// Branches that diverged are refused, naming both tips and the fix: running on either would
/// leave the other's commits out. A local branch ahead of the remote's, or one rewritten here
/// from what the remote holds (a rebase), is used as it is.
pub(super) fn adopt_branch(env: &Env, stream: &StreamDef, remote: &RemoteName) -> Result<()> {
    let ws = env.ws;
    let full = refs::branch_ref(&stream.branch);
    let spec = format!("+{full}:{}", refs::queue_ref(&remote.key, &stream.branch));
    let fetched = crate::git::remote::fetch(&ws.repo, &remote.given, &[spec]).map_err(|e| {
        Error::refused(format!(
            "stream {}: cannot fetch its branch {} from {}: {}",
            stream.name, stream.branch, remote.given, e.message
        ))
        .hint("check that `git fetch` from that remote works here, then rerun")
    })?;
    let Some(theirs) = fetched.iter().find(|f| f.remote_ref == full).map(|f| f.id) else { return Ok(()) };
    let continuing = |tip| {
        env.say(
            Some(&stream.name),
            &format!("continuing from {}'s {} ({})", remote.given, stream.branch, crate::merge::short(tip)),
        )
    };
    let Some(ours) = ws.repo.branch_tip(&stream.branch)? else {
        let reflog = format!("boulder work: branch: Created from {} {}", remote.given, stream.branch);
        refs::update(&ws.repo, &full, refs::Expect::Absent, theirs, &reflog, refs::Writer::Configured)?
            .map_err(|e| Error::internal(format!("cannot create {}: {e}", stream.branch)))?;
        continuing(theirs);
        return Ok(());
    };
    if ours == theirs || crate::stream::share::own_history(ws, stream, ours, theirs)? {
        return Ok(());
    }
    if ws.repo.objects().is_ancestor(ours, theirs)? {
        let reflog = format!("boulder work: {} follows {}", stream.branch, remote.given);
        crate::worktree::checkout::move_branch(
            &ws.repo,
            &stream.branch,
            ours,
            theirs,
            &reflog,
            "continuing from the remote",
            "work-branch",
        )?;
        continuing(theirs);
        return Ok(());
    }
    Err(Error::refused(format!(
        "stream {}: its branch {} here ({}) and on {} ({}) have diverged; running on either would leave the other's commits out. Bring them together, then rerun: cd \"$(git boulder stream path {})\" && git pull --rebase {} {} && git push {} {}",
        stream.name,
        stream.branch,
        crate::merge::short(ours),
        remote.given,
        crate::merge::short(theirs),
        stream.name,
        remote.given,
        stream.branch,
        remote.given,
        stream.branch
    )))
}

/// The tip a landing from here takes for `stream`: the remote's branch as last fetched when this
/// clone's is missing or behind it, else this clone's (`None`: neither).
pub(super) fn landing_tip(env: &Env, stream: &StreamDef) -> Result<Option<crate::git::ObjectId>> {
    let repo = &env.ws.repo;
    let ours = repo.branch_tip(&stream.branch)?;
    let Some(r) = &env.remote else { return Ok(ours) };
    let theirs = repo.ref_id(&refs::queue_ref(&r.key, &stream.branch))?;
    Ok(match (ours, theirs) {
        (Some(o), Some(t)) if o != t && repo.objects().is_ancestor(o, t)? => Some(t),
        (None, t) => t,
        (o, _) => o,
    })
}

/// Pull the remote's state, and the branches of the streams a refusal was recorded for (a new
/// commit pushed there lets them be taken again) or that wait for review (an approval names the
/// tip the remote has).
pub(super) fn pull(env: &Env, remote: &RemoteName) {
    let (ws, plan) = (env.ws, env.plan);
    if let Err(e) = crate::sync::pull(&ws.repo, remote) {
        env.say(None, &format!("warning: cannot pull the state of {}: {}", remote.given, e.message));
    }
    let refused: Vec<&StreamDef> = plan
        .streams
        .iter()
        .filter(|s| {
            ws_state(ws, &s.name).ok().flatten().is_some_and(|st| {
                st.refused.is_some()
                    || (st.status == crate::state::StreamStatus::Completed
                        && crate::stream::gate::required(plan, &s.name))
            })
        })
        .collect();
    if let Err(e) = crate::stream::attention::refresh(&ws.repo, remote, &refused) {
        env.say(
            None,
            &format!("warning: cannot fetch the refused streams' branches from {}: {}", remote.given, e.message),
        );
    }
}
