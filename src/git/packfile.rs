//! Small packs of new objects.
//!
//! The post-commit hook records a commit with a handful of new objects (an op commit, its tree
//! and two blobs for each op-log it appends to; the note's blob, notes trees and commit). Written
//! loose, each is a file of its own, often in a fan-out folder that has to be made first; on
//! ext4 creating a file or a folder is the dearest thing the hook does (0.1–1.2 ms each, measured,
//! depending on what the disk just freed). So the hook writes them as one pack: a pack file and
//! its index, two files however many objects ([`write`]).
//!
//! A pack per commit would leave a pack per commit: every lookup probes each pack's index, and
//! git's `gc --auto` repacks the whole repository once there are more than `gc.autoPackLimit`
//! (50). So, once [`ROLL_UP_AT`] small packs have gathered, the next hook rolls them up into one
//! ([`roll_up`]), as `git repack --geometric` rolls up small packs; a rolled-up pack past
//! [`SMALL`] is left to git's own maintenance.
//!
//! Only packs that look like these are rolled up: small, their objects stored whole (not as
//! deltas, not compressed), with no `.keep`, `.promisor`, `.mtimes` (cruft) or `.bitmap` beside
//! them; and none while a `multi-pack-index` exists (it would name packs that are gone: then
//! [`usable`] is false and the hook writes loose objects, as before).
//!
//! Safety, as git's own pack writers: a pack and its index are written under temporary names
//! (`tmp_pack_*`, `tmp_idx_*`, which `git gc` cleans up if a writer is killed) and renamed into
//! place pack first, index last, so a reader sees a pack only once it is whole; the objects a
//! ref will name are in place before the ref moves. A roll-up deletes a small pack only after
//! the pack holding all of its objects is in place, and deletes its index first; a reader that
//! misses an object looks at the pack folder again (git and gix both do), and finds it in the
//! new pack. Two roll-ups at once each write a whole pack before deleting what it holds.
//!
//! Why by hand: gix 0.90 writes packs only from a pack stream it receives, and leaves a `.keep`
//! beside each for the fetch to remove; the hook needs neither the indexing machinery nor the
//! third file. The format is git's pack version 2 and index version 2 (`gitformat-pack(5)`),
//! with the object ids and checksums of the repository's hash.

use std::path::{Path, PathBuf};

use super::ObjectId;

/// A pack no larger than this (bytes) is small: it is rolled up.
pub const SMALL: u64 = 256 * 1024;

/// Small packs that trigger a roll-up.
pub const ROLL_UP_AT: usize = 8;

/// Whether new objects may go into a new pack in the object folder `objects`: there is a pack
/// folder and no multi-pack-index.
pub(crate) fn usable(objects: &Path) -> bool {
    let pack = objects.join("pack");
    pack.is_dir() && !pack.join("multi-pack-index").exists()
}

/// One object for [`write`].
pub(crate) struct Object {
    pub kind: gix::objs::Kind,
    pub data: Vec<u8>,
    pub id: ObjectId,
}

fn type_code(kind: gix::objs::Kind) -> u8 {
    match kind {
        gix::objs::Kind::Commit => 1,
        gix::objs::Kind::Tree => 2,
        gix::objs::Kind::Blob => 3,
        gix::objs::Kind::Tag => 4,
    }
}

/// The bytes of a pack of `objects` (each once, in id order) and of its index; the pack's name
/// (its checksum, as git names packs).
fn encode(hash: gix::hash::Kind, objects: &mut Vec<Object>) -> std::io::Result<(Vec<u8>, Vec<u8>, ObjectId)> {
    objects.sort_by_key(|o| o.id);
    objects.dedup_by(|a, b| a.id == b.id);
    let count = u32::try_from(objects.len()).map_err(|_| std::io::Error::other("too many objects for one pack"))?;
    let mut pack = Vec::with_capacity(12 + objects.iter().map(|o| o.data.len() + 20).sum::<usize>());
    pack.extend_from_slice(b"PACK");
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&count.to_be_bytes());
    let mut entries = Vec::with_capacity(objects.len());
    for o in objects.iter() {
        let start = pack.len();
        let offset = u32::try_from(start)
            .ok()
            .filter(|o| *o < 0x8000_0000)
            .ok_or_else(|| std::io::Error::other("pack too large for 32-bit offsets"))?;
        // Type and size: 3 bits of type and the low 4 bits of the size, then 7 bits a byte.
        let mut size = o.data.len() as u64;
        let mut byte = (type_code(o.kind) << 4) | (size & 0x0f) as u8;
        size >>= 4;
        while size > 0 {
            pack.push(byte | 0x80);
            byte = (size & 0x7f) as u8;
            size >>= 7;
        }
        pack.push(byte);
        pack.extend_from_slice(&super::objects::stored_zlib(&[], &o.data));
        entries.push((offset, crc32fast::hash(&pack[start..])));
    }
    let checksum = digest(hash, &pack)?;
    pack.extend_from_slice(checksum.as_bytes());

    let mut idx = Vec::with_capacity(8 + 1024 + objects.len() * (checksum.as_bytes().len() + 8) + 40);
    idx.extend_from_slice(&[0xff, b't', b'O', b'c']);
    idx.extend_from_slice(&2u32.to_be_bytes());
    let mut fanout = [0u32; 256];
    for o in objects.iter() {
        fanout[usize::from(o.id.as_bytes()[0])] += 1;
    }
    let mut total = 0u32;
    for n in fanout {
        total += n;
        idx.extend_from_slice(&total.to_be_bytes());
    }
    for o in objects.iter() {
        idx.extend_from_slice(o.id.as_bytes());
    }
    for (_, crc) in &entries {
        idx.extend_from_slice(&crc.to_be_bytes());
    }
    for (offset, _) in &entries {
        idx.extend_from_slice(&offset.to_be_bytes());
    }
    idx.extend_from_slice(checksum.as_bytes());
    let own = digest(hash, &idx)?;
    idx.extend_from_slice(own.as_bytes());
    Ok((pack, idx, checksum))
}

fn digest(hash: gix::hash::Kind, bytes: &[u8]) -> std::io::Result<ObjectId> {
    let mut hasher = gix::hash::hasher(hash);
    hasher.update(bytes);
    hasher.try_finalize().map_err(std::io::Error::other)
}

/// Create `path` (which must not exist) read-only with `bytes`.
fn create(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o444);
    let mut file = options.open(path)?;
    file.write_all(bytes)
}

/// Write `objects` as one pack (and its index) into the object folder `objects`; the path of
/// its index. Nothing is left behind on an error but what `git gc` cleans up.
pub(crate) fn write(objects: &Path, hash: gix::hash::Kind, mut list: Vec<Object>) -> std::io::Result<PathBuf> {
    let (pack, idx, name) = encode(hash, &mut list)?;
    let dir = objects.join("pack");
    let tag = format!("{:016x}", fastrand::u64(..));
    let (tmp_pack, tmp_idx) = (dir.join(format!("tmp_pack_{tag}")), dir.join(format!("tmp_idx_{tag}")));
    let base = dir.join(format!("pack-{name}"));
    let (pack_path, idx_path) = (base.with_extension("pack"), base.with_extension("idx"));
    let written = create(&tmp_pack, &pack)
        .and_then(|()| create(&tmp_idx, &idx))
        .and_then(|()| std::fs::rename(&tmp_pack, &pack_path))
        .and_then(|()| std::fs::rename(&tmp_idx, &idx_path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp_pack);
        let _ = std::fs::remove_file(&tmp_idx);
    }
    written.map(|()| idx_path)
}

/// The small packs of the pack folder `dir` a roll-up may take, by the path of their index.
fn small_packs(dir: &Path, names: &[String]) -> Vec<PathBuf> {
    let has = |name: &str| names.iter().any(|n| n == name);
    let mut out = Vec::new();
    for name in names {
        let Some(stem) = name.strip_suffix(".idx") else { continue };
        if !stem.starts_with("pack-")
            || [".keep", ".promisor", ".mtimes", ".bitmap"].iter().any(|ext| has(&format!("{stem}{ext}")))
        {
            continue;
        }
        let pack = dir.join(format!("{stem}.pack"));
        match std::fs::metadata(&pack) {
            Ok(m) if m.is_file() && m.len() <= SMALL && stored_whole(&pack) => out.push(dir.join(name)),
            _ => {}
        }
    }
    out
}

/// Whether the first object of the pack at `path` is stored whole, as [`write`] stores objects:
/// not a delta, and a zlib stream of stored blocks.
fn stored_whole(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 32];
    let Ok(mut file) = std::fs::File::open(path) else { return false };
    let Ok(n) = file.read(&mut head) else { return false };
    let head = &head[..n];
    if head.len() < 16 || &head[..4] != b"PACK" {
        return false;
    }
    let mut at = 12;
    let kind = (head[at] >> 4) & 7;
    if !(1..=4).contains(&kind) {
        return false;
    }
    while head.get(at).is_some_and(|b| b & 0x80 != 0) {
        at += 1;
    }
    at += 1;
    // The zlib header of the fastest level, then a stored block (BTYPE 00).
    head.get(at..at + 3).is_some_and(|z| z[0] == 0x78 && z[1] == 0x01 && z[2] & 0b110 == 0)
}

/// Roll the small packs of the object folder `objects` up into one once there are at least
/// `at` of them; how many packs were rolled up (0: none). Best effort for the caller: an error
/// leaves every pack in place.
pub(crate) fn roll_up(objects: &Path, hash: gix::hash::Kind, at: usize) -> std::io::Result<usize> {
    if !usable(objects) {
        return Ok(0);
    }
    let dir = objects.join("pack");
    let names: Vec<String> =
        std::fs::read_dir(&dir)?.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()).collect();
    // Cheap first: fewer indexes than `at` in all.
    if names.iter().filter(|n| n.ends_with(".idx")).count() < at.max(2) {
        return Ok(0);
    }
    let small = small_packs(&dir, &names);
    if small.len() < at.max(2) {
        return Ok(0);
    }
    let mut list = Vec::new();
    let mut inflate = gix::zlib::Inflate::default();
    let mut buf = Vec::new();
    for idx in &small {
        let bundle = gix::odb::pack::Bundle::at(idx, hash).map_err(std::io::Error::other)?;
        for i in 0..bundle.index.num_objects() {
            let id = bundle.index.oid_at_index(i).to_owned();
            let (data, _) = bundle
                .get_object_by_index(i, &mut buf, &mut inflate, &mut gix::odb::pack::cache::Never)
                .map_err(std::io::Error::other)?;
            list.push(Object { kind: data.kind, data: data.data.to_vec(), id });
        }
    }
    let new = write(objects, hash, list)?;
    for idx in small.iter().filter(|i| **i != new) {
        // The index first: from then on no reader finds the pack.
        std::fs::remove_file(idx)?;
        let _ = std::fs::remove_file(idx.with_extension("rev"));
        let _ = std::fs::remove_file(idx.with_extension("pack"));
    }
    Ok(small.len())
}

impl super::Repo {
    /// Roll up the small packs of the object folder once [`ROLL_UP_AT`] have gathered (`all`:
    /// any two or more); how many were rolled up. Best effort: a failure leaves every pack in
    /// place, and is only traced.
    pub fn roll_up_packs(&self, all: bool) -> usize {
        let at = if all { 2 } else { ROLL_UP_AT };
        match roll_up(&self.objects_dir(), self.repo.object_hash(), at) {
            Ok(n) => n,
            Err(e) => {
                crate::trace::line(&format!("small packs not rolled up: {e}"));
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(hash: gix::hash::Kind, kind: gix::objs::Kind, data: &[u8]) -> ObjectId {
        gix::objs::compute_hash(hash, kind, data).unwrap()
    }

    #[test]
    fn a_written_pack_reads_back_through_gix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pack")).unwrap();
        let hash = gix::hash::Kind::Sha1;
        let big = vec![b'x'; 70_000];
        let objects: Vec<Object> = [b"one\n".to_vec(), Vec::new(), big.clone(), b"one\n".to_vec()]
            .into_iter()
            .map(|data| Object { kind: gix::objs::Kind::Blob, id: id_of(hash, gix::objs::Kind::Blob, &data), data })
            .collect();
        let idx = write(dir.path(), hash, objects).unwrap();
        let bundle = gix::odb::pack::Bundle::at(&idx, hash).unwrap();
        assert_eq!(bundle.index.num_objects(), 3, "the duplicate is stored once");
        let mut buf = Vec::new();
        let mut inflate = gix::zlib::Inflate::default();
        let want = id_of(hash, gix::objs::Kind::Blob, &big);
        let found = bundle.find(&want, &mut buf, &mut inflate, &mut gix::odb::pack::cache::Never).unwrap();
        assert_eq!(found.map(|(d, _)| d.data.to_vec()), Some(big));
        bundle.index.verify_checksum(&mut gix::progress::Discard, &Default::default()).unwrap();
        assert!(stored_whole(&idx.with_extension("pack")));
    }
}
