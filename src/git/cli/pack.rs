//! Packing the state's objects and writing the commit-graph, as `git gc` would for them.

use std::path::Path;
use std::process::Stdio;

use super::{git, run, run_with_input};
use crate::error::Result;

/// Pack the objects reachable from `tips` and not from `packed` that are still loose into one
/// new pack, then delete the loose copies of every packed object: `git pack-objects --revs
/// --unpacked` (revisions on stdin) and `git prune-packed`. Returns how many objects the new pack
/// holds.
///
/// Why the git CLI: gix 0.90 writes packs only as a fetch receives them; it has no pack-objects
/// (object enumeration, delta search, index writing) and no prune-packed. These two commands are
/// also exactly what `git gc` does for the same objects, so the result is what git itself reads
/// best; auto maintenance is left out (this is the maintenance).
pub fn pack_objects(dir: &Path, objects_dir: &Path, tips: &[String], packed: &[String]) -> Result<usize> {
    let mut cmd = git(dir);
    cmd.arg("pack-objects")
        .args(["--revs", "--unpacked", "--quiet", "--non-empty"])
        .arg(objects_dir.join("pack").join("pack"))
        .stdout(Stdio::piped());
    let mut input = String::new();
    for t in tips {
        input.push_str(t);
        input.push('\n');
    }
    if !packed.is_empty() {
        input.push_str("--not\n");
        for t in packed {
            input.push_str(t);
            input.push('\n');
        }
    }
    let out = run_with_input(cmd, input.as_bytes(), "pack the state objects")?;
    // The name of the pack written, if any: then its index says how many objects it holds.
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let count = if name.is_empty() {
        0
    } else {
        let idx = objects_dir.join("pack").join(format!("pack-{name}.idx"));
        idx_count(&idx).unwrap_or(0)
    };
    let mut prune = git(dir);
    prune.args(["prune-packed", "--quiet"]);
    run(prune, "delete the loose copies of packed objects")?;
    Ok(count)
}

/// Add the commits reachable from `tips` to the repository's commit-graph, as a new layer of a
/// split graph (what is there already is kept): `git commit-graph write --split --append
/// --stdin-commits`.
///
/// Why the git CLI: gix 0.90 reads commit-graphs but cannot write one. git's own `gc` writes
/// the same file for every ref, so git and git-boulder read the same graph.
pub fn write_commit_graph(dir: &Path, tips: &[String]) -> Result<()> {
    let mut cmd = git(dir);
    cmd.args(["commit-graph", "write", "--split", "--append", "--stdin-commits", "--no-progress"])
        .stdout(Stdio::null());
    run_with_input(cmd, tips.join("\n").as_bytes(), "write the commit-graph")?;
    Ok(())
}

/// The number of objects a pack index (version 2) lists: the last entry of its fan-out table.
fn idx_count(idx: &Path) -> Option<usize> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(idx).ok()?;
    f.seek(SeekFrom::Start(8 + 255 * 4)).ok()?;
    let mut b = [0u8; 4];
    f.read_exact(&mut b).ok()?;
    Some(u32::from_be_bytes(b) as usize)
}
