//! `stream merge NAME…|--all` and settings.auto_merge: which streams to merge and in what order,
//! under the merge lock, each with [`super::merge`], stopping at the first that cannot merge —
//! but for `--all`, a stream waiting for review ([`crate::stream::gate`]) and the streams that
//! depend on it are passed over, the others land, and the run ends refused, naming it.

use super::{already_merged, merge, order, Options, Report};
use crate::error::{Error, Landing, Result};
use crate::plan::{Plan, StreamDef};
use crate::stream::lifecycle::complete;
use crate::workspace::Workspace;

/// What a batch merges.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Streams to merge, in the order given (when not `all`).
    pub names: Vec<String>,
    /// Every complete stream in depends_on order, skipping those not initialized, merged already,
    /// or (without `opts.force`) not complete.
    pub all: bool,
    pub opts: Options,
}

/// Merge the streams of `batch`; `shown` gets each report (dry run or done) as it is made. Returns
/// the streams merged. A conflict is a refusal naming the stream (with `--all`, a hint says
/// which were merged before it).
pub fn run(
    ws: &Workspace,
    plan: &Plan,
    batch: &Batch,
    say: &dyn Fn(&str),
    mut shown: impl FnMut(&Report) -> Result<()>,
) -> Result<Vec<String>> {
    let opts = &batch.opts;
    if !opts.dry_run {
        crate::trust::require(&ws.repo, plan, "stream merge", &[crate::trust::VERIFY.to_string()])?;
    }
    let what = if batch.all { "--all".to_string() } else { batch.names.join(" ") };
    let _lock = crate::lock::acquire(&ws.repo, "merge", opts.wait, &format!("git boulder stream merge {what}"))?;
    let names: Vec<String> = if batch.all {
        let all: Vec<String> = plan.streams.iter().map(|s| s.name.clone()).collect();
        order(plan, &all)?
    } else {
        for n in &batch.names {
            ws.stream(plan, n)?;
        }
        batch.names.clone()
    };
    let mut merged = Vec::new();
    // `--all`: streams held back for review (the first refusal kept), and what waits for them.
    let mut held: Vec<String> = Vec::new();
    let mut review: Option<Error> = None;
    for name in &names {
        let stream = ws.stream(plan, name)?;
        if batch.all {
            if let Some(dep) = stream.depends_on.iter().find(|d| held.contains(d)) {
                say(&format!("skipping {name}: it depends on {dep}, which waits for review"));
                held.push(name.clone());
                continue;
            }
            if ws.repo.branch_tip(&stream.branch)?.is_none() {
                say(&format!("skipping {name}: no branch {} (not initialized)", stream.branch));
                continue;
            }
            if already_merged(ws, plan, stream)? {
                continue;
            }
            if !opts.force && !complete(ws, plan, stream)? {
                say(&format!("skipping {name}: its stories are not all done"));
                continue;
            }
        }
        let before = ws.repo.branch_tip(&stream.branch)?;
        let report = match merge(ws, plan, stream, opts, say) {
            Ok(r) => r,
            Err(e) if batch.all && crate::stream::gate::is_refusal(&e) => {
                say(&format!("skipping {name}: it needs review (`git boulder review {name}`)"));
                held.push(name.clone());
                review.get_or_insert(e);
                continue;
            }
            Err(e) => return Err(stopped(refused(ws, stream, before, opts, e, say), &merged, batch.all)),
        };
        shown(&report)?;
        if !report.conflicts.is_empty() {
            let e = Error::refused(format!(
                "stream {name} cannot merge into {}: {} conflict(s) replaying commit {}; nothing was changed",
                report.base,
                report.conflicts.len(),
                &report.conflicts[0].commit[..12]
            ))
            .hint(match &report.remote {
                Some(r) => format!(
                    "rebase it yourself and resolve: cd \"$(git boulder stream path {name})\" && git pull --rebase {r} {}",
                    report.base
                ),
                None => format!(
                    "rebase it yourself and resolve: cd \"$(git boulder stream path {name})\" && git rebase {}",
                    report.base
                ),
            })
            .landing(Landing::Conflict);
            return Err(stopped(refused(ws, stream, before, opts, e, say), &merged, batch.all));
        }
        merged.push(name.clone());
    }
    if let (true, true, false, Some(remote)) = (batch.all, merged.is_empty(), opts.dry_run, &opts.remote) {
        // Nothing landed this time; a landing before may have left the local base behind.
        super::queue::follow(ws, plan, remote, say)?;
    }
    if let Some(e) = review {
        let done = if merged.is_empty() { "none".to_string() } else { merged.join(", ") };
        return Err(e.hint(format!("merged: {done}; waiting for review: {}", held.join(", "))));
    }
    Ok(merged)
}

/// `settings.auto_merge`: merge a stream its run loop just completed, as `stream merge NAME` would.
pub fn auto(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    say: &dyn Fn(&str),
    shown: impl FnOnce(&Report) -> Result<()>,
) -> Result<()> {
    let _lock = crate::lock::acquire(
        &ws.repo,
        "merge",
        false,
        &format!("git boulder stream merge {} (auto_merge)", stream.name),
    )?;
    let remote = crate::git::remote::of_plan(&ws.repo, "settings.merge_remote", plan.settings.merge_remote.as_deref())?;
    let opts = Options { remote, ..Options::default() };
    let before = ws.repo.branch_tip(&stream.branch)?;
    let report = merge(ws, plan, stream, &opts, say).map_err(|e| refused(ws, stream, before, &opts, e, say))?;
    shown(&report)?;
    if !report.conflicts.is_empty() {
        let e = Error::refused(format!(
            "stream {} completed but cannot merge: conflicts; nothing was changed",
            stream.name
        ))
        .hint(format!("resolve them, then run `git boulder stream merge {}`", stream.name))
        .landing(Landing::Conflict);
        return Err(refused(ws, stream, before, &opts, e, say));
    }
    Ok(())
}

/// A refused landing (not a dry run) is recorded in the stream's op-log, and pushed with it when
/// it was refused on a remote ([`crate::stream::attention`]).
fn refused(
    ws: &Workspace,
    stream: &StreamDef,
    before: Option<crate::git::ObjectId>,
    opts: &Options,
    e: Error,
    say: &dyn Fn(&str),
) -> Error {
    if opts.dry_run {
        return e;
    }
    crate::stream::attention::record(ws, stream, before, opts.remote.as_deref(), e, say)
}

fn stopped(e: Error, merged: &[String], all: bool) -> Error {
    if all {
        let done = if merged.is_empty() { "none".to_string() } else { merged.join(", ") };
        e.hint(format!("merged before stopping: {done}"))
    } else {
        e
    }
}
