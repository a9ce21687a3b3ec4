//! `packed-refs` rewritten under its own lock: many refs moved in one file ([`update_packed`]),
//! and a deletion that takes the ref out of it first, as git does ([`delete`]).

use std::time::Duration;

use gix::bstr::ByteSlice;

use super::full_name;
use super::locks::locked;
use super::update::{Expect, Swap};
use crate::error::{Error, Result};
use crate::git::{ObjectId, Repo};

/// The first line of `packed-refs` as git writes it (and the traits it must name for
/// [`update_packed`] to rewrite the file).
const PACKED_HEADER: &[u8] = b"# pack-refs with: peeled fully-peeled sorted \n";

/// What [`update_packed`] did: the indexes of the swaps it left to [`update_all`] (`left`: a loose
/// file, a lock or a reflog), and of those it wrote that a loose writer touched meanwhile (`raced`).
#[derive(Debug, Default)]
pub struct PackedMove {
    pub left: Vec<usize>,
    pub raced: Vec<usize>,
}

/// [`update_all`] without a lock file per ref, for the refs that only `packed-refs` holds: under
/// `packed-refs.lock` alone (the one lock `git pack-refs` takes), each checked against what it was
/// expected to hold, the file rewritten whole — one file created where [`update_all`] creates one
/// per ref (on this kind of disk the creations are most of its time).
///
/// Why that is still a compare-and-swap against git-boulder's other writers: a gix ref
/// transaction that updates refs holds `packed-refs.lock` from before it reads the loose refs it
/// moves until it has written them, whenever `packed-refs` or its lock exists when it starts — so
/// it cannot write between this check and this write — and [`delete`] reads and rewrites
/// `packed-refs` under that lock, as git does. A writer that started while neither existed (or
/// git's own CLI, which never takes that lock for a loose ref) can slip in, and its loose file
/// would hide the packed value; so a ref with a loose file or lock is left out (`left`, with a ref
/// that has a reflog, which is owed an entry), and each written ref is looked at again after the
/// write (`raced`): the caller redoes those through [`update`], on top of whatever that writer
/// wrote. One hole is gix's own and as old as its transactions: it reads `packed-refs` just
/// before it takes that lock, so a writer that read it before this rewrite and then waited for the
/// lock compares against the old value — as it would after any other transaction's rewrite. For
/// an op-log the next pull brings back what such a write hid.
///
/// Also left to the transaction: a ref git keeps a reflog of (one that has a reflog, and under
/// `core.logAllRefUpdates`, read as git reads it, the branches, remote-tracking branches and
/// notes; every ref when it is `always`), a new value that is not a commit (a tag needs its
/// peeled value written), and all of them when `packed-refs` was written by something that does
/// not sort and peel it (its header says so).
///
/// `None`, with nothing written, when this cannot be done and a ref transaction would not do it
/// the way git does: a ref is not where it was expected, a name clashes with another as file and
/// folder (`a/b` beside `a/b/c`), or the lock is held past git's wait (`core.packedRefsTimeout`,
/// a second).
pub fn update_packed(repo: &Repo, swaps: &[Swap]) -> Result<Option<PackedMove>> {
    let common = &repo.common_dir;
    let objects = repo.objects();
    let mut moved = PackedMove::default();
    let mut edits: Vec<(&str, ObjectId, usize)> = Vec::with_capacity(swaps.len());
    // Every ref update logged (`core.logAllRefUpdates=always`): all of them to the transaction.
    let all_left = || Ok(Some(PackedMove { left: (0..swaps.len()).collect(), raced: Vec::new() }));
    let logged = match repo.config_string("core.logAllRefUpdates").map(|v| v.to_ascii_lowercase()).as_deref() {
        Some("always") => return all_left(),
        // As git reads it: a boolean (a bare key is true); unset, true where there is a worktree —
        // in a linked worktree of a bare repository too.
        _ => match repo.repo.config_snapshot().try_boolean("core.logAllRefUpdates") {
            Ok(Some(on)) => on,
            Err(_) => true,
            Ok(None) => repo.repo.workdir().is_some(),
        },
    };
    // The refs git gives a reflog of their own: branches, remote-tracking branches, notes.
    let owed_a_log = |name: &str| {
        logged && ["refs/heads/", "refs/remotes/", "refs/notes/"].iter().any(|p| name.starts_with(p))
            || std::fs::symlink_metadata(common.join("logs").join(name)).is_ok()
    };
    for (i, s) in swaps.iter().enumerate() {
        full_name(&s.name)?;
        // A value other than a commit (a tag) would need its peeled value written: gix does that.
        if loose_or_locked(common, &s.name)
            || owed_a_log(&s.name)
            || !matches!(objects.header(s.new), Ok((crate::git::objects::Kind::Commit, _)))
        {
            moved.left.push(i);
        } else {
            edits.push((s.name.as_str(), s.new, i));
        }
    }
    if edits.is_empty() {
        return Ok(Some(moved));
    }
    let Some((lock, packed)) = lock_packed(repo)? else { return Ok(None) };
    let buffer = match packed {
        Packed::Read(buffer) => buffer,
        Packed::Unsorted => return all_left(),
    };
    let path = common.join("packed-refs");
    let failed = |e: crate::error::Source| packed_failed(&path, e);
    for &(name, _, i) in &edits {
        let now = match &buffer {
            Some(b) => b.try_find(name).map_err(|e| failed(e.into()))?.map(|r| r.target()),
            None => None,
        };
        let as_expected = match swaps[i].expected {
            Expect::Absent => now.is_none(),
            Expect::At(id) => now == Some(id),
            Expect::Anything => true,
        };
        // A loose writer that came since the first look is refused too, before anything is written.
        if !as_expected || loose_or_locked(common, name) {
            return Ok(None);
        }
    }
    edits.sort_unstable_by(|a, b| a.0.cmp(b.0));
    if edits.windows(2).any(|w| w[0].0 == w[1].0) {
        return Ok(None);
    }
    // Names that clash with another as file and folder (`a/b` beside `a/b/c`) are left to a ref
    // transaction, which refuses them as git does.
    let edited = |n: &str| edits.binary_search_by(|(e, ..)| (*e).cmp(n)).is_ok();
    let named = |n: &str| -> Result<bool> {
        let packed = match &buffer {
            Some(b) => b.try_find(n).map_err(|e| failed(e.into()))?.is_some(),
            None => false,
        };
        Ok(packed || edited(n) || common.join(n).is_file())
    };
    for &(name, ..) in &edits {
        for (slash, _) in name.match_indices('/').skip(1) {
            if named(&name[..slash])? {
                return Ok(None);
            }
        }
        let folder = format!("{name}/");
        let below = match &buffer {
            Some(b) => b.iter_prefixed(folder.as_str().into()).map_err(|e| failed(e.into()))?.next().is_some(),
            None => false,
        };
        let first_below = edits.partition_point(|(e, ..)| *e < folder.as_str());
        if below || edits.get(first_below).is_some_and(|(e, ..)| e.starts_with(&folder)) {
            return Ok(None);
        }
    }
    let lines: Vec<(&str, Option<ObjectId>)> = edits.iter().map(|&(n, id, _)| (n, Some(id))).collect();
    write_packed(repo, lock, buffer.as_ref(), &lines)?;
    crate::failpoint::hit("packed-refs-written");
    moved.raced = edits.iter().filter(|(name, ..)| loose_or_locked(common, name)).map(|&(.., i)| i).collect();
    moved.raced.sort_unstable();
    Ok(Some(moved))
}

/// `packed-refs` as read under its lock ([`lock_packed`]).
enum Packed {
    /// Its refs (`None`: no file, or an empty one).
    Read(Option<gix::refs::packed::Buffer>),
    /// Written by something that does not sort and peel it (its header says so): left to gix,
    /// which reads it as git does.
    Unsorted,
}

/// Take `packed-refs.lock` — waiting as git does, `core.packedRefsTimeout` (a second); `None`
/// past that — and read `packed-refs` under it: what every other writer of it has finished
/// writing, never a copy read before.
fn lock_packed(repo: &Repo) -> Result<Option<(gix::lock::File, Packed)>> {
    use gix::lock::acquire::Fail;
    let path = repo.common_dir.join("packed-refs");
    let wait = Fail::AfterDurationWithBackoff(Duration::from_millis(1000));
    let Ok(lock) = gix::lock::File::acquire_to_update_resource(&path, wait, None, 0) else { return Ok(None) };
    let packed = match std::fs::read(&path) {
        Ok(bytes) if bytes.is_empty() => Packed::Read(None),
        Ok(bytes) => {
            let header = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
            let traits: Vec<&[u8]> = header.split(|&b| b == b' ').collect();
            if !header.starts_with(b"# pack-refs with:")
                || !traits.contains(&&b"fully-peeled"[..])
                || !traits.contains(&&b"sorted"[..])
            {
                Packed::Unsorted
            } else {
                let buffer = gix::refs::packed::Buffer::from_bytes(&bytes, repo.repo.object_hash())
                    .map_err(|e| packed_failed(&path, e))?;
                Packed::Read(Some(buffer))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Packed::Read(None),
        Err(e) => return Err(packed_failed(&path, e)),
    };
    Ok(Some((lock, packed)))
}

fn packed_failed(path: &std::path::Path, e: impl Into<crate::error::Source>) -> Error {
    Error::caused(crate::error::Kind::Internal, format_args!("cannot update {}", path.display()), e)
}

/// Write `packed-refs` through its `lock`: what `buffer` (read under that lock) holds with the
/// `edits` (sorted by name, each name once) applied — `Some` a new value, `None` the ref gone —
/// then have gix read it again.
fn write_packed(
    repo: &Repo,
    mut lock: gix::lock::File,
    buffer: Option<&gix::refs::packed::Buffer>,
    edits: &[(&str, Option<ObjectId>)],
) -> Result<()> {
    let path = repo.common_dir.join("packed-refs");
    let failed = |e: crate::error::Source| packed_failed(&path, e);
    let mut out = Vec::with_capacity(buffer.map_or(0, |b| b.as_ref().len()) + 64 * edits.len() + 64);
    out.extend_from_slice(PACKED_HEADER);
    let line = |out: &mut Vec<u8>, id: &dyn std::fmt::Display, name: &[u8]| {
        out.extend_from_slice(id.to_string().as_bytes());
        out.push(b' ');
        out.extend_from_slice(name);
        out.push(b'\n');
    };
    let mut next = edits.iter().peekable();
    if let Some(b) = buffer {
        for r in b.iter().map_err(|e| failed(e.into()))? {
            let r = r.map_err(|e| failed(e.into()))?;
            let name = r.name.as_bstr().as_bytes();
            while let Some((n, id)) = next.next_if(|(n, _)| n.as_bytes() < name) {
                if let Some(id) = id {
                    line(&mut out, id, n.as_bytes());
                }
            }
            if let Some((n, id)) = next.next_if(|(n, _)| n.as_bytes() == name) {
                if let Some(id) = id {
                    line(&mut out, id, n.as_bytes());
                }
                continue;
            }
            line(&mut out, &r.target, name);
            if let Some(peeled) = r.object {
                out.push(b'^');
                out.extend_from_slice(peeled);
                out.push(b'\n');
            }
        }
    }
    for (n, id) in next {
        if let Some(id) = id {
            line(&mut out, id, n.as_bytes());
        }
    }
    std::io::Write::write_all(&mut lock, &out).map_err(|e| failed(e.into()))?;
    // Renamed into place whole, as git and gix write it.
    lock.commit().map_err(|e| failed(e.into()))?;
    // gix keeps the file it read last and rereads it only when its modification time differs,
    // which a rewrite within the same clock tick does not change: read it again now, or the next
    // transaction here would rewrite packed-refs from the old copy and drop these refs.
    repo.repo.refs.force_refresh_packed_buffer().map_err(|e| failed(e.into()))?;
    Ok(())
}

/// Whether the ref `name` has a loose file or a loose lock in the common git dir `common`.
fn loose_or_locked(common: &std::path::Path, name: &str) -> bool {
    let path = common.join(name);
    let mut lock = path.clone().into_os_string();
    lock.push(".lock");
    std::fs::symlink_metadata(&path).is_ok() || std::fs::symlink_metadata(lock).is_ok()
}

/// Delete a ref only if it still points at `expected` (compare-and-swap), with its reflog, the
/// way git's own `update-ref -d` does: under the ref's lock, its `packed-refs` line goes first —
/// that file read and rewritten under its own lock — then the loose file, so the old packed value
/// never shows through. (A gix transaction that only deletes reads `packed-refs` before it takes
/// that file's lock, and would write back a copy without the refs another writer packed
/// meanwhile — as a pull does.)
pub fn delete(repo: &Repo, name: &str, expected: ObjectId) -> Result<()> {
    use gix::lock::acquire::Fail;
    let full = full_name(name)?;
    let moved = || Error::refused(format!("cannot delete {name}: it moved meanwhile")).hint("look again");
    let common = &repo.common_dir;
    let path = common.join(name);
    let refs_dir = common.join("refs");
    let wait = Fail::AfterDurationWithBackoff(Duration::from_millis(1000));
    let held = gix::lock::Marker::acquire_to_hold_resource(&path, wait, Some(refs_dir.clone()), 0).map_err(|e| {
        Error::refused(format!("cannot delete {name}: {e}")).with_source(e).hint("another command is moving it; rerun")
    })?;
    let loose = match repo.repo.refs.try_find_loose(full.as_ref()) {
        Ok(Some(r)) => match r.target {
            gix::refs::Target::Object(id) => Some(id),
            gix::refs::Target::Symbolic(_) => return Err(moved()),
        },
        Ok(None) => None,
        Err(e) => return Err(Error::internal(format!("cannot read {name}: {e}")).with_source(e)),
    };
    let Some((lock, packed)) = lock_packed(repo)? else {
        return Err(locked(name, &common.join("packed-refs.lock")));
    };
    let buffer = match packed {
        Packed::Read(buffer) => buffer,
        Packed::Unsorted => {
            drop((lock, held));
            return delete_in_transaction(repo, name, expected);
        }
    };
    let in_packed = match &buffer {
        Some(b) => b.try_find(name).map_err(|e| packed_failed(&common.join("packed-refs"), e))?.map(|r| r.target()),
        None => None,
    };
    if loose.or(in_packed) != Some(expected) {
        return Err(moved());
    }
    if in_packed.is_some() {
        write_packed(repo, lock, buffer.as_ref(), &[(name, None)])?;
    } else {
        drop(lock);
    }
    crate::failpoint::hit("ref-unpacked");
    let logs = common.join("logs").join(name);
    for file in [&path, &logs] {
        match std::fs::remove_file(file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::internal(format!("cannot delete {}: {e}", file.display())).with_source(e))
            }
            _ => {}
        }
    }
    drop(held);
    // The folders the ref and its log leave empty go too, as git removes them (`refs/` stays).
    for (file, top) in [(&path, refs_dir), (&logs, common.join("logs").join("refs"))] {
        let mut dir = file.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(&top) && *d != top.as_path()) {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
    Ok(())
}

/// [`delete`] through a gix ref transaction, for a `packed-refs` that is not sorted and peeled.
fn delete_in_transaction(repo: &Repo, name: &str, expected: ObjectId) -> Result<()> {
    use gix::refs::transaction::{Change, PreviousValue, RefEdit, RefLog};
    let full = full_name(name)?;
    repo.repo
        .edit_reference(RefEdit {
            change: Change::Delete {
                expected: PreviousValue::MustExistAndMatch(gix::refs::Target::Object(expected)),
                log: RefLog::AndReference,
            },
            name: full,
            deref: false,
        })
        .map_err(|e| {
            Error::refused(format!("cannot delete {name}: {e}")).with_source(e).hint("it moved meanwhile; look again")
        })?;
    Ok(())
}
