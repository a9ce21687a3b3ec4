//! Packing the state's objects: `git boulder gc`, and the same on a threshold at the commands
//! that already talk to a remote or merge (pull, push, sync, stream merge).
//!
//! Every op writes a few small objects (two blobs, a tree and a commit; a note adds more): loose,
//! as git writes the objects of a commit, except in the post-commit hook, which writes the
//! objects of one record as one small pack and rolls small packs up once several have gathered
//! (`crate::git::packfile`). A long history would leave hundreds of thousands of loose files,
//! each read with its own `open`. Packing puts the objects reachable from the state refs
//! (`refs/boulder/*`, `refs/boulder-remotes/*`, `refs/notes/boulder`) that are still loose into
//! one pack and deletes their loose copies, and rolls up every small pack the hook wrote; what
//! the last pack covered (its tips, in `$GIT_COMMON_DIR/boulder/packed-tips`) is not walked
//! again, so a pack costs what is new since.
//!
//! The commits of the op-logs also go into git's commit-graph (a new layer of a split graph, as
//! `git gc` writes it for every ref; not when `core.commitGraph` or `gc.writeCommitGraph` is
//! false), so a walk of a long history takes each commit's tree and parents from there.
//!
//! The threshold works like `gc.auto`: the loose objects are counted cheaply by listing one of
//! the 256 fan-out folders (`objects/17`, as git does) and multiplying by 256; above
//! `boulder.gcAuto` (default: `gc.auto`, else 6,700; 0 turns it off) the state is packed. The
//! post-commit hook does not pack: `git commit` runs git's own auto maintenance, which packs
//! everything reachable, the state included, on the same kind of threshold.

use std::path::PathBuf;

use crate::error::Result;
use crate::git::{cli, refs, ObjectId, Repo};

/// The loose-object threshold when neither `boulder.gcAuto` nor `gc.auto` is set (git's default).
pub const DEFAULT_AUTO: u64 = 6_700;

/// What a pack did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Packed {
    /// State refs whose objects were considered.
    pub refs: usize,
    /// Objects put into the new pack (0: everything was packed already).
    pub objects: usize,
    /// Small packs the post-commit hook wrote, rolled up into one (0: none).
    pub rolled_up: usize,
}

fn tips_path(repo: &Repo) -> PathBuf {
    repo.boulder_dir().join("packed-tips")
}

/// The state refs and their tips.
fn state_tips(repo: &Repo) -> Result<Vec<(String, ObjectId)>> {
    let mut all = refs::list(repo, refs::BOULDER)?;
    all.extend(refs::list(repo, refs::REMOTES)?);
    if let Some(id) = repo.ref_id(refs::NOTES)? {
        all.push((refs::NOTES.to_string(), id));
    }
    Ok(all)
}

/// The tips the last pack covered that are still in the store.
fn packed_tips(repo: &Repo) -> Vec<ObjectId> {
    let text = std::fs::read_to_string(tips_path(repo)).unwrap_or_default();
    let objects = repo.objects();
    text.lines().filter_map(|l| ObjectId::from_hex(l.trim().as_bytes()).ok()).filter(|id| objects.has(*id)).collect()
}

/// Pack every loose object reachable from the state refs (`git boulder gc`).
pub fn pack(repo: &Repo) -> Result<Packed> {
    let _span = crate::trace::span("pack the state objects");
    let tips = state_tips(repo)?;
    let mut ids: Vec<ObjectId> = tips.iter().map(|(_, id)| *id).collect();
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        return Ok(Packed::default());
    }
    let before = packed_tips(repo);
    let hex = |v: &[ObjectId]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    let objects = cli::pack_objects(repo.run_dir(), &repo.objects_dir(), &hex(&ids), &hex(&before))?;
    // The small packs the post-commit hook writes, rolled up into one.
    let rolled = repo.roll_up_packs(true);
    // The op-log commits go into git's commit-graph too, as `git gc` does for every ref: a walk
    // of a long history (`log`) then takes each commit's tree and parents from there without
    // reading the commit. Best effort: without it the commits are read, as before.
    let graphs =
        repo.config_bool("core.commitGraph").unwrap_or(true) && repo.config_bool("gc.writeCommitGraph").unwrap_or(true);
    if (objects > 0 || rolled > 0) && graphs {
        let commits: Vec<ObjectId> = tips
            .iter()
            .filter(|(name, _)| name.as_str() != refs::NOTES)
            .map(|(_, id)| *id)
            .filter(|id| repo.objects().header(*id).is_ok_and(|(kind, _)| kind == crate::git::objects::Kind::Commit))
            .collect();
        if let Err(e) = cli::write_commit_graph(repo.run_dir(), &hex(&commits)) {
            crate::trace::line(&format!("commit-graph not written: {}", e.message));
        }
    }
    // Remember what is packed now; a lost write only means the next pack walks a little more.
    std::fs::create_dir_all(repo.boulder_dir())?;
    crate::fsutil::write_atomic(&tips_path(repo), hex(&ids).join("\n").as_bytes())?;
    Ok(Packed { refs: tips.len(), objects, rolled_up: rolled })
}

/// The loose objects of the repository, estimated from one fan-out folder as `git gc --auto` does.
pub fn loose_estimate(repo: &Repo) -> u64 {
    let dir = repo.objects_dir().join("17");
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let n = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.len() >= 38 && name.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .count() as u64;
    n * 256
}

/// The threshold of [`auto`]: `boulder.gcAuto`, else `gc.auto`, else [`DEFAULT_AUTO`].
fn threshold(repo: &Repo) -> u64 {
    let read = |key: &str| repo.config_string(key).and_then(|v| v.trim().parse::<u64>().ok());
    read("boulder.gcAuto").or_else(|| read("gc.auto")).unwrap_or(DEFAULT_AUTO)
}

/// Pack the state when the loose objects are above the threshold; best effort (a failure leaves
/// everything as it was and is only traced). Returns what it packed, if it did.
pub fn auto(repo: &Repo) -> Option<Packed> {
    let limit = threshold(repo);
    if limit == 0 || loose_estimate(repo) <= limit {
        return None;
    }
    crate::progress::show("packing git-boulder's state objects");
    let result = pack(repo);
    crate::progress::done();
    match result {
        Ok(p) => Some(p),
        Err(e) => {
            crate::trace::line(&format!("automatic pack failed: {}", e.message));
            None
        }
    }
}
