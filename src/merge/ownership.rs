//! What a landing brings that the stream does not own: the ownership check pre-push runs, made
//! again on the commits the merge would bring into the base, and deletions of files no stream
//! owns.

use super::Options;
use crate::error::{Error, Landing, Result};
use crate::git::ObjectId;
use crate::plan::{Plan, StreamDef};
use crate::workspace::Workspace;

/// The ownership check pre-push runs, on the commits the merge would bring into the base: under
/// `settings.ownership: error` a violation refuses the merge (unless `--force`; a dry run only
/// reports), under `warn` it is reported, under `off` nothing is looked at.
pub(super) fn ownership(
    ws: &Workspace,
    plan: &Plan,
    stream: &StreamDef,
    base_tip: ObjectId,
    stream_tip: ObjectId,
    opts: &Options,
) -> Result<Vec<crate::plan::ownership::Violation>> {
    if plan.settings.ownership == crate::plan::Level::Off {
        return Ok(Vec::new());
    }
    let changes = ws.repo.changed_paths(stream_tip, vec![base_tip])?;
    let mut found = crate::plan::ownership::check_paths(plan, &stream.name, &changes);
    let deleted = deleted_unowned(ws, plan, &changes)?;
    found.retain(|v| v.refused || !deleted.iter().any(|d| d.commit == v.commit && d.path == v.path));
    found.extend(deleted);
    let refused: Vec<&crate::plan::ownership::Violation> = found.iter().filter(|v| v.refused).collect();
    // A dry run refuses as the real run would: it says what the merge would do.
    if plan.settings.ownership == crate::plan::Level::Error && !refused.is_empty() && !opts.force {
        let list: Vec<String> = refused.iter().take(20).map(|v| format!("  {}", violation_line(v))).collect();
        let more = if refused.len() > 20 { format!("\n  …and {} more", refused.len() - 20) } else { String::new() };
        return Err(Error::refused(format!(
            "stream {} changes paths it does not own; nothing was changed:\n{}{more}",
            stream.name,
            list.join("\n")
        ))
        .hint("move those changes to the owning stream (settings.ownership: error), or merge anyway with --force")
        .landing(Landing::Ownership));
    }
    Ok(found)
}

/// The files no stream owns that the stream's commits delete: violations whatever
/// `undeclared_paths` says (an agent's commit must not land the deletion of files it never
/// saw). A path already reported as a violation is not reported again; a warning about it is
/// replaced.
fn deleted_unowned(
    ws: &Workspace,
    plan: &Plan,
    changes: &[(String, Vec<u8>)],
) -> Result<Vec<crate::plan::ownership::Violation>> {
    if plan.settings.undeclared_paths == crate::plan::Level::Error {
        return Ok(Vec::new());
    }
    let checker = crate::plan::ownership::Checker::new(plan);
    let mut by_commit: Vec<(&str, Vec<&[u8]>)> = Vec::new();
    for (commit, path) in changes {
        if !checker.undeclared(&String::from_utf8_lossy(path)) {
            continue;
        }
        match by_commit.last_mut() {
            Some((c, paths)) if *c == commit.as_str() => paths.push(path),
            _ => by_commit.push((commit, vec![path])),
        }
    }
    let mut out = Vec::new();
    for (commit, paths) in by_commit {
        let id: ObjectId = commit.parse().map_err(|_| Error::internal(format!("not a commit id: {commit}")))?;
        for i in ws.repo.absent_at(id, &paths)? {
            out.push(crate::plan::ownership::Violation {
                commit: commit.to_string(),
                path: crate::plan::ownership::RepoPath(paths[i].to_vec()),
                rule: crate::plan::ownership::Rule::Undeclared,
                owner: None,
                refused: true,
                deleted: true,
            });
        }
    }
    Ok(out)
}

/// `COMMIT  PATH  owned by OWNER`, as pre-push reports a violation.
pub fn violation_line(v: &crate::plan::ownership::Violation) -> String {
    let rule = match (v.rule, v.owner.as_deref()) {
        (crate::plan::ownership::Rule::OtherStream, Some(o)) => format!("owned by {o}"),
        (rule, _) => rule.as_str().to_string(),
    };
    let level = if v.refused { "" } else { " [warning]" };
    let deleted = if v.deleted { ", deleted" } else { "" };
    format!("{}  {}  {rule}{deleted}{level}", &v.commit[..v.commit.len().min(10)], v.path)
}
