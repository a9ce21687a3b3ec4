//! Small packs of new objects.
//!
//! The post-commit hook records a commit with a handful of new objects (an op commit, its tree
//! and two blobs for each op-log it appends to; the note's blob, notes trees and commit). Written
//! loose, each is a file of its own, often in a fan-out folder that has to be made first; on
//! ext4 creating a file or a folder is the dearest thing the hook does (0.1–1.2 ms each, measured,
//! depending on what the disk just freed). So the hook writes them as one pack: a pack file and
//! its index, two files however many objects ([`write`]).
//!
//! A pack per commit would leave a pack per commit: a lookup that misses loads each pack's index
//! in turn (gix takes the biggest first, so the newest state, in the smallest packs, is found
//! last; so a record reads the newest small pack whole first, [`newest_small_pack`]), and git's
//! `gc --auto` repacks the whole repository once there are more than
//! `gc.autoPackLimit` (50). So the hook rolls small packs up as they gather, by size tiers
//! ([`roll_up`]): a pack under 16 KiB is in tier 0, under 64 KiB tier 1, and so on by fours; once
//! [`ROLL_UP_AT`] packs share a tier, that tier and every tier below are rolled up into one pack
//! (and the tier above with it, when that makes it [`ROLL_UP_AT`] too). Each object is rewritten
//! a handful of times as it climbs (the hook writes about four times each record's size in all),
//! a roll-up happens every few commits, and at most three packs per tier remain: about ten small
//! packs for thousands of commits. Packs of more
//! than [`ROLL_UP_MAX`] are left to `git boulder gc` and git's own maintenance (one per few
//! hundred commits, by the size of a record).
//!
//! Only packs that look like these are rolled up: their objects stored whole (not as deltas, not
//! compressed), with no `.keep`, `.promisor`, `.mtimes` (cruft) or `.bitmap` beside them; and
//! none while a `multi-pack-index` exists (it would name packs that are gone: then [`usable`] is
//! false and the hook writes loose objects, as before).
//!
//! Safety, as git's own pack writers: a pack and its index are written under temporary names
//! (`tmp_pack_*`, `tmp_idx_*`, which `git gc` cleans up if a writer is killed) and renamed into
//! place pack first, index last, so a reader sees a pack only once it is whole; the objects a
//! ref will name are in place before the ref moves, with a `.keep` beside their pack until it has
//! moved (as a fetch keeps its pack), so `git repack -a -d` does not drop them meanwhile. A roll-up deletes a small pack only after
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

/// A pack larger than this (bytes) is not rolled up by the hook: rewriting it would cost a commit
/// more than it saves (four of these and the tiers below are about 5 MiB, some 30 ms).
pub const ROLL_UP_MAX: u64 = 1024 * 1024;

/// The same for `git boulder gc`, asked for.
pub const ROLL_UP_MAX_ALL: u64 = 64 * 1024 * 1024;

/// Packs in one size tier that trigger a roll-up.
pub const ROLL_UP_AT: usize = 4;

/// The size tier of a pack of `size` bytes: 0 under 16 KiB, then one more for each factor of 4.
fn tier(size: u64) -> u32 {
    let units = (size / 4096).max(1);
    (63 - units.leading_zeros()) / 2
}

/// A pack folder's entries that name a multi-pack-index: one file, or an incremental chain.
const MULTI_PACK_INDEX: [&str; 2] = ["multi-pack-index", "multi-pack-index.d"];

/// Whether new objects may go into a new pack in the object folder `objects`: there is a pack
/// folder and no multi-pack-index ([`MULTI_PACK_INDEX`]).
pub(crate) fn usable(objects: &Path) -> bool {
    let pack = objects.join("pack");
    pack.is_dir() && !MULTI_PACK_INDEX.iter().any(|name| pack.join(name).exists())
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
        pack.extend_from_slice(&stored_zlib(&[], &o.data));
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

/// Create `path` (which must not exist) read-only with `bytes`; `sync`: on disk before this
/// returns.
fn create(path: &Path, bytes: &[u8], sync: bool) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o444);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    if sync {
        file.sync_all()?;
    }
    Ok(())
}

/// What a `.keep` file [`write`] leaves says, where it cannot be a second name of the index:
/// whose it is (a roll-up removes one a killed writer left behind, by its first words
/// [`KEEP_MARK`]).
const KEEP_TEXT: &str = "git-boulder: the objects of a record whose refs are moving\n";
const KEEP_MARK: &str = "git-boulder:";
/// The first bytes of a pack index (version 2): a `.keep` that starts with them is a second name
/// of [`write`]'s index (git writes text in its own).
const IDX_MAGIC: &[u8] = b"\xfftOc";
/// What [`keep_new`]'s `.keep` files say.
const KEEP_FETCHED: &str = "git-boulder: fetched objects whose refs are moving\n";

/// How [`write`] writes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Options {
    /// Leave a `.keep` beside the pack, for the caller to remove once refs name its objects
    /// (as `git fetch` does): until then `git repack -a -d` would drop them as unreachable.
    pub keep: bool,
    /// Flush the pack and its index to disk before they are renamed into place, and the pack
    /// folder after (as git does for packs): for a roll-up that deletes packs already on disk.
    pub sync: bool,
}

/// Write `list` as one pack (and its index) into the object folder `objects`; the path of its
/// index, and of its `.keep` when asked for. On an error nothing is left but what was there, and
/// `list` still holds the objects (sorted by id, each once).
pub(crate) fn write(
    objects: &Path,
    hash: gix::hash::Kind,
    list: &mut Vec<Object>,
    options: Options,
) -> std::io::Result<(PathBuf, Option<PathBuf>)> {
    let (pack, idx, name) = encode(hash, list)?;
    let dir = objects.join("pack");
    let tag = format!("{:016x}", fastrand::u64(..));
    let (tmp_pack, tmp_idx) = (dir.join(format!("tmp_pack_{tag}")), dir.join(format!("tmp_idx_{tag}")));
    let base = dir.join(format!("pack-{name}"));
    let (pack_path, idx_path, keep_path) =
        (base.with_extension("pack"), base.with_extension("idx"), base.with_extension("keep"));
    // A pack of this very name holds these very objects (its name is their checksum): it stays.
    let renamed_pack = std::cell::Cell::new(false);
    let kept = std::cell::Cell::new(false);
    let written = (|| {
        create(&tmp_pack, &pack, options.sync)?;
        create(&tmp_idx, &idx, options.sync)?;
        if options.keep {
            // git needs only the name to be there. A second name of the index is a file whole
            // from its first moment, and one inode less to create (and free, when it goes) than
            // a new file: on ext4 those are the dearest steps of the hook. Where a folder takes no
            // second names, a file that says whose it is.
            let made = std::fs::hard_link(&tmp_idx, &keep_path).or_else(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Err(e),
                _ => create(&keep_path, KEEP_TEXT.as_bytes(), false),
            });
            match made {
                Ok(()) => kept.set(true),
                // The very same pack, being written by another writer: its `.keep` will do.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        if !pack_path.exists() {
            std::fs::rename(&tmp_pack, &pack_path)?;
            renamed_pack.set(true);
        }
        if !idx_path.exists() {
            std::fs::rename(&tmp_idx, &idx_path)?;
        }
        if options.sync {
            std::fs::File::open(&dir)?.sync_all()?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&tmp_pack);
    let _ = std::fs::remove_file(&tmp_idx);
    if let Err(e) = written {
        if renamed_pack.get() && !idx_path.exists() {
            let _ = std::fs::remove_file(&pack_path);
        }
        if kept.get() {
            let _ = std::fs::remove_file(&keep_path);
        }
        return Err(e);
    }
    Ok((idx_path, kept.get().then_some(keep_path)))
}

/// A pack a roll-up may take: the path of its index, its size and when it was written.
#[derive(Debug, Clone)]
struct Candidate {
    idx: PathBuf,
    size: u64,
    written: std::time::SystemTime,
}

/// The packs of the pack folder `dir` (whose entries are `names`) a roll-up may take: no larger
/// than `max` bytes.
fn candidates(dir: &Path, names: &[String], max: u64) -> Vec<Candidate> {
    let listed: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let has = |name: &str| listed.contains(name);
    let mut out = Vec::new();
    for name in names {
        let Some(stem) = name.strip_suffix(".idx") else { continue };
        if !stem.starts_with("pack-")
            || [".keep", ".promisor", ".mtimes", ".bitmap"].iter().any(|ext| has(&format!("{stem}{ext}")))
        {
            continue;
        }
        match std::fs::metadata(dir.join(format!("{stem}.pack"))) {
            Ok(m) if m.is_file() && m.len() <= max => out.push(Candidate {
                idx: dir.join(name),
                size: m.len(),
                written: m.modified().unwrap_or(std::time::UNIX_EPOCH),
            }),
            _ => {}
        }
    }
    out
}

/// Which of `packs` (index, size) to roll up: every tier up to the highest that has gathered
/// [`ROLL_UP_AT`] packs, counting the pack a roll-up of the tiers below adds to it; `all`: every
/// one. Empty: none.
fn chosen(packs: &[Candidate], all: bool) -> Vec<Candidate> {
    let mut counts = [0usize; 32];
    for p in packs {
        counts[tier(p.size) as usize] += 1;
    }
    let top = if all {
        Some(31)
    } else {
        let mut top = None;
        let mut carried = 0;
        for (t, n) in counts.iter().enumerate() {
            if n + carried >= ROLL_UP_AT {
                top = Some(t);
                carried = 1;
            } else if top.is_some() {
                break;
            }
        }
        top
    };
    let Some(top) = top else { return Vec::new() };
    let picked: Vec<Candidate> = packs.iter().filter(|p| tier(p.size) as usize <= top).cloned().collect();
    if picked.len() < 2 {
        return Vec::new();
    }
    picked
}

/// Whether every object of the pack `pack`, at `offsets`, is stored whole, as [`write`] stores
/// objects: not a delta, a zlib stream of stored blocks, and no larger than the bytes it takes
/// in the pack (what stored blocks make sure of: so decoding holds no more than the pack, whatever
/// a pack that only looks like these declares). Only such packs are rolled up: a pack of deltas
/// or compressed objects (git's own) would come out many times larger.
fn stored_whole(pack: &[u8], offsets: impl Iterator<Item = u64>) -> bool {
    if pack.len() < 12 || &pack[..4] != b"PACK" {
        return false;
    }
    let mut offsets: Vec<u64> = offsets.collect();
    offsets.sort_unstable();
    for (i, offset) in offsets.iter().enumerate() {
        let end = offsets.get(i + 1).copied().unwrap_or(pack.len() as u64);
        let Some(entry) = usize::try_from(*offset).ok().and_then(|o| pack.get(o..)) else { return false };
        match entry_stored(entry) {
            Some(size) if size < end.saturating_sub(*offset) => {}
            _ => return false,
        }
    }
    true
}

/// The size the pack entry starting `entry` declares, when it is an object stored whole (not a
/// delta; the zlib header of the fastest level, then a stored block, BTYPE 00).
fn entry_stored(entry: &[u8]) -> Option<u64> {
    let first = *entry.first()?;
    if !(1..=4).contains(&((first >> 4) & 7)) {
        return None;
    }
    let header = entry.iter().position(|b| b & 0x80 == 0)?;
    if header > 8 {
        return None;
    }
    let mut size = u64::from(first & 0x0f);
    for (k, b) in entry[1..=header].iter().enumerate() {
        size |= u64::from(b & 0x7f) << (4 + 7 * k);
    }
    let z = entry.get(header + 1..header + 4)?;
    (z[0] == 0x78 && z[1] == 0x01 && z[2] & 0b110 == 0).then_some(size)
}

/// Whether the first object of the pack at `path` is stored whole: a cheap first look (32 bytes)
/// that tells git's own packs (compressed, or deltas first) from these without reading them.
fn first_stored(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 32];
    let Ok(mut file) = std::fs::File::open(path) else { return false };
    let Ok(n) = file.read(&mut head) else { return false };
    n >= 16 && &head[..4] == b"PACK" && entry_stored(&head[12..n]).is_some()
}

/// The packs in the object folder `objects` now, by file name (`pack-<id>.pack`).
pub(crate) fn pack_names(objects: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(objects.join("pack")) else { return Vec::new() };
    let mut names: Vec<String> = dir
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("pack-") && n.ends_with(".pack"))
        .collect();
    names.sort_unstable();
    names
}

/// `.keep` files this process wrote beside packs that another process (a `git fetch` that wrote
/// no ref) left unreachable; removed when dropped, once refs name their objects.
#[derive(Debug, Default)]
pub(crate) struct Kept(Vec<PathBuf>);

impl Drop for Kept {
    fn drop(&mut self) {
        for keep in &self.0 {
            let _ = std::fs::remove_file(keep);
        }
    }
}

/// Keep the pack git's fetch just brought — a pack of `objects` not among `before` ([`pack_names`]
/// of the moment the fetch started) that holds one of `tips` (the ids the caller's refs will
/// name) — until the returned [`Kept`] is dropped: a fetch that wrote no ref no longer keeps its
/// pack, and `git repack -a -d` would drop its objects as unreachable meanwhile.
///
/// Only that pack. Any other new pack (a concurrent `git repack`'s, a finished fetch's) holds
/// objects refs already name; a `.keep` put on it and taken off again while a repack runs makes
/// that repack leave its objects out of the pack it writes (the `.keep` is there) and then delete
/// it (it was not kept when listed): reachable objects lost. So a tip counts only when it was in
/// none of the packs `before` nor loose — brought by this fetch, not packed by someone else — and
/// when a pack of `before` can no longer be read (a repack removed it), nothing is kept. A pack
/// that already has a `.keep` is left to whoever wrote it; one left by a killed process is removed
/// by a later roll-up, as [`write`]'s are.
pub(crate) fn keep_new(objects: &Path, before: &[String], tips: &[gix::ObjectId], hash: gix::hash::Kind) -> Kept {
    let dir = objects.join("pack");
    let index = |name: &str| {
        let stem = name.strip_suffix(".pack")?;
        gix::odb::pack::index::File::at(dir.join(format!("{stem}.idx")), hash).ok()
    };
    let loose = |id: &gix::ObjectId| {
        let hex = id.to_hex().to_string();
        objects.join(&hex[..2]).join(&hex[2..]).exists()
    };
    let mut fresh: Vec<gix::ObjectId> = tips.iter().filter(|id| !loose(id)).copied().collect();
    fresh.sort_unstable();
    fresh.dedup();
    for name in before {
        if fresh.is_empty() {
            return Kept::default();
        }
        let Some(idx) = index(name) else { return Kept::default() };
        fresh.retain(|id| idx.lookup(id).is_none());
    }
    let mut kept = Vec::new();
    for name in pack_names(objects) {
        if fresh.is_empty() || before.binary_search(&name).is_ok() {
            continue;
        }
        let Some(idx) = index(&name) else { continue };
        if !fresh.iter().any(|id| idx.lookup(id).is_some()) {
            continue;
        }
        let Some(stem) = name.strip_suffix(".pack") else { continue };
        let keep = dir.join(format!("{stem}.keep"));
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&keep)
            .and_then(|mut f| std::io::Write::write_all(&mut f, KEEP_FETCHED.as_bytes()));
        if made.is_ok() {
            kept.push(keep);
        }
    }
    Kept(kept)
}

/// Remove what a killed writer of these packs leaves in the pack folder `dir` (entries `names`),
/// once ten minutes old: its `.keep` ([`ours`]), and the pack beside it
/// when that pack never got its index. Nothing else: a pack without an index and without such a
/// `.keep` may be git's own, between renames.
fn clean_up(dir: &Path, names: &[String]) {
    let old = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > std::time::Duration::from_secs(600)))
    };
    for name in names {
        let Some(stem) = name.strip_suffix(".keep").filter(|s| s.starts_with("pack-")) else { continue };
        let keep = dir.join(name);
        if !ours(&keep) || !old(&keep) {
            continue;
        }
        let (pack, idx) = (dir.join(format!("{stem}.pack")), dir.join(format!("{stem}.idx")));
        if !idx.exists() {
            let _ = std::fs::remove_file(pack);
        }
        let _ = std::fs::remove_file(keep);
    }
}

/// Whether the `.keep` file `keep` is one [`write`] leaves: a second name of a pack index, or a
/// file that says it is git-boulder's.
fn ours(keep: &Path) -> bool {
    use std::io::Read as _;
    let mut start = Vec::with_capacity(KEEP_MARK.len());
    std::fs::File::open(keep)
        .and_then(|f| f.take(KEEP_MARK.len() as u64).read_to_end(&mut start))
        .is_ok_and(|_| start.starts_with(IDX_MAGIC) || start.starts_with(KEEP_MARK.as_bytes()))
}

/// Roll up the small packs of the object folder `objects` whose tiers have gathered (`all`:
/// every small pack, when there are two or more); how many packs were rolled up (0: none).
/// Best effort for the caller: an error leaves every pack in place.
pub(crate) fn roll_up(objects: &Path, hash: gix::hash::Kind, all: bool) -> std::io::Result<usize> {
    let dir = objects.join("pack");
    let names = folder_names(&dir)?;
    clean_up(&dir, &names);
    // The listing says whether a multi-pack-index is there ([`usable`] asks the disk again
    // before anything is deleted).
    if names_multi_pack_index(&names) {
        return Ok(0);
    }
    // Cheap first: too few indexes in all.
    let least = if all { 2 } else { ROLL_UP_AT };
    if names.iter().filter(|n| n.ends_with(".idx")).count() < least {
        return Ok(0);
    }
    let mut packs = candidates(&dir, &names, if all { ROLL_UP_MAX_ALL } else { ROLL_UP_MAX });
    // The packs due, each read and checked whole; one that is not all stored objects is left
    // out, and the choice made again without it: first by its first bytes, then whole.
    let mut read: Vec<(PathBuf, gix::odb::pack::Bundle)> = Vec::new();
    let picked = loop {
        let picked = chosen(&packs, all);
        if picked.is_empty() {
            return Ok(0);
        }
        let mut foreign = Vec::new();
        for p in &picked {
            if read.iter().any(|(idx, _)| *idx == p.idx) {
                continue;
            }
            if !first_stored(&p.idx.with_extension("pack")) {
                foreign.push(p.idx.clone());
                continue;
            }
            let bundle = gix::odb::pack::Bundle::at(&p.idx, hash).map_err(std::io::Error::other)?;
            let whole = {
                let data = bundle.pack.entry_slice(0..bundle.pack.data_len() as u64).unwrap_or_default();
                stored_whole(data, (0..bundle.index.num_objects()).map(|i| bundle.index.pack_offset_at_index(i)))
            };
            if whole {
                read.push((p.idx.clone(), bundle));
            } else {
                foreign.push(p.idx.clone());
            }
        }
        if foreign.is_empty() {
            break picked;
        }
        packs.retain(|p| !foreign.contains(&p.idx));
    };
    let mut list = Vec::new();
    let mut inflate = gix::zlib::Inflate::default();
    let mut buf = Vec::new();
    for p in &picked {
        let Some((_, bundle)) = read.iter().find(|(idx, _)| *idx == p.idx) else { continue };
        for i in 0..bundle.index.num_objects() {
            let id = bundle.index.oid_at_index(i).to_owned();
            let (data, _) = bundle
                .get_object_by_index(i, &mut buf, &mut inflate, &mut gix::odb::pack::cache::Never)
                .map_err(std::io::Error::other)?;
            list.push(Object { kind: data.kind, data: data.data.to_vec(), id });
        }
    }
    drop(read);
    // Packs older than a minute are likely on disk (writeback takes up to 30 s by default): the
    // new one has to be too before they go. A roll-up of packs just written (as durable as loose
    // objects are) needs not.
    let settled = std::time::Duration::from_secs(60);
    let sync = picked.iter().any(|p| p.written.elapsed().is_ok_and(|age| age > settled));
    let (new, keep) = write(objects, hash, &mut list, Options { keep: true, sync })?;
    if let Some(keep) = keep {
        let _ = std::fs::remove_file(keep);
    }
    // A multi-pack-index written meanwhile would name the packs about to go.
    if !usable(objects) {
        return Ok(0);
    }
    for p in picked.iter().filter(|p| p.idx != new) {
        // The index first: from then on no reader finds the pack.
        match std::fs::remove_file(&p.idx) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let _ = std::fs::remove_file(p.idx.with_extension("rev"));
        let _ = std::fs::remove_file(p.idx.with_extension("pack"));
    }
    // A picked pack that held every object already is the new one, and stays.
    Ok(picked.iter().filter(|p| p.idx != new).count())
}

/// The names (those that are UTF-8) in the pack folder `dir`; none when there is no such folder.
fn folder_names(dir: &Path) -> std::io::Result<Vec<String>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Whether a pack folder's `names` include a multi-pack-index ([`MULTI_PACK_INDEX`]).
fn names_multi_pack_index(names: &[String]) -> bool {
    names.iter().any(|n| MULTI_PACK_INDEX.contains(&n.as_str()))
}

/// A pack larger than this (bytes) is not read whole by [`newest_small_pack`].
const READ_WHOLE_MAX: u64 = 64 * 1024;

/// The objects of the newest pack of the object folder `objects`, read whole, when it is one of
/// these small packs ([`candidates`]: no `.keep` beside it, every object stored whole) of at most
/// [`READ_WHOLE_MAX`] bytes; `None` otherwise, or with a `multi-pack-index` (a lookup then reads
/// one index anyway).
///
/// What the last record wrote is in the newest pack, and the next record reads just that (the
/// tips of its op-logs and of the notes): gix looks through pack indexes largest first, so it
/// would open every other small pack's index before it found them. Reading it here costs the
/// listing the roll-up makes anyway and one pack.
pub(crate) fn newest_small_pack(objects: &Path, hash: gix::hash::Kind) -> Option<gix::odb::memory::Storage> {
    let dir = objects.join("pack");
    let names = folder_names(&dir).ok()?;
    if names_multi_pack_index(&names) {
        return None;
    }
    let newest = candidates(&dir, &names, READ_WHOLE_MAX).into_iter().max_by_key(|c| c.written)?;
    let bundle = gix::odb::pack::Bundle::at(&newest.idx, hash).ok()?;
    let offsets = (0..bundle.index.num_objects()).map(|i| bundle.index.pack_offset_at_index(i));
    if !stored_whole(bundle.pack.entry_slice(0..bundle.pack.data_len() as u64)?, offsets) {
        return None;
    }
    let mut objects = gix::odb::memory::Storage::default();
    let (mut buf, mut inflate) = (Vec::new(), gix::zlib::Inflate::default());
    for i in 0..bundle.index.num_objects() {
        let (data, _) =
            bundle.get_object_by_index(i, &mut buf, &mut inflate, &mut gix::odb::pack::cache::Never).ok()?;
        objects.insert(bundle.index.oid_at_index(i).to_owned(), (data.kind, data.data.to_vec()));
    }
    Some(objects)
}

impl super::Repo {
    /// Another handle on this repository ([`super::Repo::handle`]) that finds the objects of the newest
    /// small pack in memory before it asks the object store ([`newest_small_pack`]); `None`
    /// when there is no such pack. For reading only: an object written through this handle
    /// would stay in memory — [`super::Repo::objects_in_memory`] tells.
    pub fn reading_newest_pack(&self) -> Option<super::Repo> {
        let objects = newest_small_pack(&self.objects_dir(), self.repo.object_hash())?;
        crate::trace::line(&format!("the newest small pack read into memory: {} objects", objects.len()));
        let mut handle = self.handle();
        handle.repo.objects.set_object_memory(objects);
        Some(handle)
    }

    /// How many objects this handle holds in memory: 0 but for [`super::Repo::reading_newest_pack`].
    pub fn objects_in_memory(&self) -> usize {
        self.repo.objects.num_objects_in_memory()
    }

    /// Roll up the small packs of the object folder whose tiers have gathered (`all`: every
    /// small pack); how many were rolled up. Best effort: a failure leaves every pack in place,
    /// and is only traced.
    pub fn roll_up_packs(&self, all: bool) -> usize {
        match roll_up(&self.objects_dir(), self.repo.object_hash(), all) {
            Ok(n) => n,
            Err(e) => {
                crate::trace::line(&format!("small packs not rolled up: {e}"));
                0
            }
        }
    }
}

/// `header` then `data` as a zlib stream (RFC 1950) of stored deflate blocks (RFC 1951 §3.2.4).
pub(crate) fn stored_zlib(header: &[u8], data: &[u8]) -> Vec<u8> {
    const MAX_BLOCK: usize = 0xffff;
    let len = header.len() + data.len();
    let mut input = Vec::with_capacity(len);
    input.extend_from_slice(header);
    input.extend_from_slice(data);
    let mut out = Vec::with_capacity(len + 2 + 5 * (len / MAX_BLOCK + 1) + 4);
    // Deflate with a 32 KiB window, no preset dictionary, the fastest level; the check bits
    // make the first two bytes a multiple of 31.
    out.extend_from_slice(&[0x78, 0x01]);
    let mut blocks = input.chunks(MAX_BLOCK).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let last = blocks.peek().is_none();
        let n = block.len() as u16;
        out.push(u8::from(last));
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(!n).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&adler32(&input).to_be_bytes());
    out
}

/// The Adler-32 checksum of `bytes` (RFC 1950 §8.2).
pub(crate) fn adler32(bytes: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    // 5552 bytes is the most that can be summed before `b` could overflow 32 bits.
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in bytes.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_declaring_more_than_it_takes_is_not_stored_whole() {
        let data = b"hello\n".to_vec();
        let id = id_of(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &data);
        let mut list = vec![Object { kind: gix::objs::Kind::Blob, data, id }];
        let (mut pack, _, _) = encode(gix::hash::Kind::Sha1, &mut list).unwrap();
        assert_eq!(entry_stored(&pack[12..]), Some(6));
        assert!(stored_whole(&pack, std::iter::once(12)));
        // The same entry declaring 32 MiB (a stream that goes on compressed could inflate to it).
        pack[12] = (3 << 4) | 0x80;
        pack.splice(13..13, [0x80, 0x80, 0x80, 0x01]);
        assert_eq!(entry_stored(&pack[12..]), Some(1 << 25));
        assert!(!stored_whole(&pack, std::iter::once(12)));
    }

    #[test]
    fn tiers_go_by_fours_from_16_kib() {
        assert_eq!([0, 4095, 16383, 16384, 65535, 65536, 262144].map(tier), [0, 0, 0, 1, 1, 2, 3]);
    }

    #[test]
    fn a_tier_rolls_up_at_four_with_the_tiers_below_and_carries_up() {
        let p = |sizes: &[u64]| -> Vec<Candidate> {
            sizes
                .iter()
                .enumerate()
                .map(|(i, s)| Candidate {
                    idx: PathBuf::from(format!("p{i}")),
                    size: *s,
                    written: std::time::UNIX_EPOCH,
                })
                .collect()
        };
        let names = |v: Vec<Candidate>| v.into_iter().map(|p| p.idx.display().to_string()).collect::<Vec<_>>();
        // Three small packs: nothing yet.
        assert!(chosen(&p(&[3000, 3000, 3000]), false).is_empty());
        // Four in tier 0: they go, the big one stays.
        assert_eq!(names(chosen(&p(&[3000, 3000, 3000, 3000, 3_000_000]), false)), ["p0", "p1", "p2", "p3"]);
        // Tier 0 full and tier 1 at three: the roll-up of tier 0 makes tier 1 four, so both go.
        assert_eq!(chosen(&p(&[3000, 3000, 3000, 3000, 20_000, 20_000, 20_000]), false).len(), 7);
        // Tier 1 at four with one pack below: all five go.
        assert_eq!(chosen(&p(&[3000, 20_000, 20_000, 20_000, 20_000]), false).len(), 5);
        // `all`: any two.
        assert_eq!(chosen(&p(&[3000, 3_000_000]), true).len(), 2);
    }

    fn id_of(hash: gix::hash::Kind, kind: gix::objs::Kind, data: &[u8]) -> ObjectId {
        gix::objs::compute_hash(hash, kind, data).unwrap()
    }

    #[test]
    fn only_the_pack_a_fetch_brought_is_kept_never_one_another_process_packed_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pack")).unwrap();
        let hash = gix::hash::Kind::Sha1;
        let blob = |text: &str| {
            let data = text.as_bytes().to_vec();
            Object { kind: gix::objs::Kind::Blob, id: id_of(hash, gix::objs::Kind::Blob, &data), data }
        };
        let pack = |list: Vec<Object>| {
            let (idx, _) = write(dir.path(), hash, &mut { list }, Options::default()).unwrap();
            idx.with_extension("pack").file_name().unwrap().to_str().unwrap().to_string()
        };
        let (old, fetched, loose) = ("old\n", "fetched\n", "loose\n");
        let before_pack = pack(vec![blob(old)]);
        let before = pack_names(dir.path());
        // Meanwhile: a repack's pack of what refs already name, the fetch's pack, a fetched tip
        // that came loose (and is in a pack of someone else's too).
        let repacked = pack(vec![blob(old), blob(loose)]);
        let brought = pack(vec![blob(fetched)]);
        let (old, fetched, loose) = (blob(old), blob(fetched), blob(loose));
        let hex = loose.id.to_hex().to_string();
        std::fs::create_dir_all(dir.path().join(&hex[..2])).unwrap();
        std::fs::write(dir.path().join(&hex[..2]).join(&hex[2..]), b"").unwrap();
        let keeps = |kept: &Kept| {
            kept.0.iter().map(|k| k.file_stem().unwrap().to_str().unwrap().to_string()).collect::<Vec<_>>()
        };
        let stem = |name: &str| name.strip_suffix(".pack").unwrap().to_string();

        let tips = [old.id, fetched.id, loose.id];
        let kept = keep_new(dir.path(), &before, &tips, hash);
        assert_eq!(keeps(&kept), vec![stem(&brought)], "not {repacked}");
        drop(kept);
        assert!(pack_names(dir.path()).iter().all(|n| !dir
            .path()
            .join("pack")
            .join(format!("{}.keep", stem(n)))
            .exists()));
        // Nothing brought: nothing kept.
        assert!(keep_new(dir.path(), &before, &[old.id, loose.id], hash).0.is_empty());
        // A pack of before gone (a repack removed it): which objects are new cannot be told.
        let gone = dir.path().join("pack").join(format!("{}.idx", stem(&before_pack)));
        std::fs::remove_file(gone).unwrap();
        assert!(keep_new(dir.path(), &before, &tips, hash).0.is_empty());
    }

    #[test]
    fn a_written_pack_reads_back_through_gix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pack")).unwrap();
        let hash = gix::hash::Kind::Sha1;
        let big = vec![b'x'; 70_000];
        let mut objects: Vec<Object> = [b"one\n".to_vec(), Vec::new(), big.clone(), b"one\n".to_vec()]
            .into_iter()
            .map(|data| Object { kind: gix::objs::Kind::Blob, id: id_of(hash, gix::objs::Kind::Blob, &data), data })
            .collect();
        let (idx, keep) = write(dir.path(), hash, &mut objects, Options { keep: true, sync: true }).unwrap();
        // The `.keep` is a second name of the index, which says it is ours.
        let keep = keep.unwrap();
        assert_eq!(std::fs::read(&keep).unwrap(), std::fs::read(&idx).unwrap());
        assert!(ours(&keep));
        let bundle = gix::odb::pack::Bundle::at(&idx, hash).unwrap();
        assert_eq!(bundle.index.num_objects(), 3, "the duplicate is stored once");
        let mut buf = Vec::new();
        let mut inflate = gix::zlib::Inflate::default();
        let want = id_of(hash, gix::objs::Kind::Blob, &big);
        let found = bundle.find(&want, &mut buf, &mut inflate, &mut gix::odb::pack::cache::Never).unwrap();
        assert_eq!(found.map(|(d, _)| d.data.to_vec()), Some(big));
        bundle.index.verify_checksum(&mut gix::progress::Discard, &Default::default()).unwrap();
        let bytes = std::fs::read(idx.with_extension("pack")).unwrap();
        let offsets = (0..3).map(|i| bundle.index.pack_offset_at_index(i));
        assert!(stored_whole(&bytes, offsets));
        let names: Vec<String> = std::fs::read_dir(dir.path().join("pack"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with("tmp_")), "{names:?}");
    }
}
