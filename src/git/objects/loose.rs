//! The loose-object writer of objects new by construction ([`Loose`]), and the object store
//! view gix's notes trees write through it ([`WriteFresh`]).

use crate::git::ObjectId;

/// A writer of loose objects for objects new by construction (an op's blobs, tree and commit, a
/// note's blob, notes trees and commit): each is hashed and written as git writes a loose
/// object, a temporary file in the object's own fan-out folder renamed onto its name. Nothing
/// asks the store first whether it holds the object; a writer making the very same object
/// meanwhile replaces it with the same bytes.
///
/// The zlib stream is stored, not compressed, as git writes with `core.looseCompression=0`:
/// these objects are a few hundred bytes, a file system block either way, and packing
/// compresses them. A compressor costs more than the object: gix's makes and zeroes some
/// 400 KiB of state per object (a page fault per 4 KiB), more than the whole write.
///
/// A batch writer ([`Loose::batch`]) keeps the objects instead, for [`Loose::flush`] to write as
/// one pack.
pub(crate) struct Loose {
    /// The object directory.
    dir: std::path::PathBuf,
    hash: gix::hash::Kind,
    /// The objects kept for one pack; `None`: each is written loose at once.
    pub(super) pending: Option<std::cell::RefCell<Vec<crate::git::packfile::Object>>>,
}

impl Loose {
    pub(crate) fn new(g: &gix::Repository) -> Loose {
        Loose { dir: g.objects.store_ref().path().to_path_buf(), hash: g.object_hash(), pending: None }
    }

    /// A writer that keeps its objects for [`Loose::flush`], where the object folder takes a new
    /// pack ([`crate::git::packfile::usable`]); else one like [`Loose::new`].
    pub(crate) fn batch(g: &gix::Repository) -> Loose {
        let mut loose = Loose::new(g);
        if crate::git::packfile::usable(&loose.dir) {
            loose.pending = Some(Default::default());
        }
        loose
    }

    /// Write the objects kept so far as one pack (loose, each, if that fails); the pack's `.keep`,
    /// for the caller to remove once refs name its objects.
    pub(crate) fn flush(&self) -> std::io::Result<Option<std::path::PathBuf>> {
        let Some(pending) = &self.pending else { return Ok(None) };
        let mut list = std::mem::take(&mut *pending.borrow_mut());
        if list.is_empty() {
            return Ok(None);
        }
        let options = crate::git::packfile::Options { keep: true, sync: false };
        match crate::git::packfile::write(&self.dir, self.hash, &mut list, options) {
            Ok((_, keep)) => Ok(keep),
            Err(e) => {
                crate::trace::line(&format!("new objects written loose: no pack: {e}"));
                for o in &list {
                    self.write_loose(o.kind, &o.data)?;
                }
                Ok(None)
            }
        }
    }

    /// A kept object, by id.
    pub(crate) fn kept(&self, id: &gix::hash::oid) -> Option<(gix::objs::Kind, Vec<u8>)> {
        let pending = self.pending.as_ref()?.borrow();
        pending.iter().find(|o| o.id == id).map(|o| (o.kind, o.data.clone()))
    }

    /// Write `object`; its id.
    pub(crate) fn write(&self, object: &dyn gix::objs::WriteTo) -> std::io::Result<ObjectId> {
        let mut data = Vec::with_capacity(object.size() as usize);
        object.write_to(&mut data)?;
        self.write_buf(object.kind(), &data)
    }

    /// Write the object of `kind` whose bytes are `data`; its id.
    pub(crate) fn write_buf(&self, kind: gix::objs::Kind, data: &[u8]) -> std::io::Result<ObjectId> {
        if let Some(pending) = &self.pending {
            let id = gix::objs::compute_hash(self.hash, kind, data).map_err(std::io::Error::other)?;
            pending.borrow_mut().push(crate::git::packfile::Object { kind, data: data.to_vec(), id });
            return Ok(id);
        }
        self.write_loose(kind, data)
    }

    fn write_loose(&self, kind: gix::objs::Kind, data: &[u8]) -> std::io::Result<ObjectId> {
        use std::io::Write;
        let header = gix::objs::encode::loose_header(kind, data.len() as u64);
        let mut hasher = gix::hash::hasher(self.hash);
        hasher.update(&header);
        hasher.update(data);
        let id = hasher.try_finalize().map_err(std::io::Error::other)?;
        let bytes = crate::git::packfile::stored_zlib(&header, data);

        let hex = id.to_hex().to_string();
        let folder = self.dir.join(&hex[..2]);
        let path = folder.join(&hex[2..]);
        let tmp = folder.join(format!("tmp_obj_{:016x}", fastrand::u64(..)));
        let create = || {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o444);
            options.open(&tmp)
        };
        // The fan-out folder may be missing, or go between making it and using it
        // (`git prune-packed` removes empty ones): make it and try again, a few times.
        let mut tries = 0;
        let mut file = loop {
            match create() {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 5 => {
                    tries += 1;
                    match std::fs::create_dir(&folder) {
                        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
                        _ => {}
                    }
                }
                other => break other?,
            }
        };
        let written = file.write_all(&bytes).and_then(|()| {
            drop(file);
            std::fs::rename(&tmp, &path)
        });
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map(|()| id)
    }
}

/// The repository's objects for reading, [`Loose`] for writing: for gix's notes trees, which
/// are new whenever a note is new.
pub(crate) struct WriteFresh<'a> {
    pub(crate) repo: &'a gix::Repository,
    pub(crate) loose: &'a Loose,
}

impl gix::objs::Find for WriteFresh<'_> {
    fn try_find<'a>(&self, id: &gix::hash::oid, buffer: &'a mut Vec<u8>) -> gix::Result<Option<gix::objs::Data<'a>>> {
        if let Some((kind, data)) = self.loose.kept(id) {
            *buffer = data;
            return Ok(Some(gix::objs::Data { kind, data: buffer, object_hash: self.repo.object_hash() }));
        }
        gix::objs::Find::try_find(self.repo, id, buffer)
    }
}

impl gix::objs::Write for WriteFresh<'_> {
    fn write(&self, object: &dyn gix::objs::WriteTo) -> gix::Result<ObjectId> {
        self.loose.write(object).map_err(gix::Error::from_error)
    }

    fn write_buf(&self, kind: gix::objs::Kind, from: &[u8]) -> gix::Result<ObjectId> {
        self.loose.write_buf(kind, from).map_err(gix::Error::from_error)
    }

    fn write_buf_with_known_id(&self, kind: gix::objs::Kind, from: &[u8], _id: ObjectId) -> gix::Result<ObjectId> {
        self.write_buf(kind, from)
    }

    fn write_stream(&self, kind: gix::objs::Kind, _size: u64, from: &mut dyn std::io::Read) -> gix::Result<ObjectId> {
        let mut data = Vec::new();
        from.read_to_end(&mut data).map_err(gix::Error::from_error)?;
        self.write_buf(kind, &data)
    }

    fn write_stream_with_known_id(
        &self,
        kind: gix::objs::Kind,
        size: u64,
        from: &mut dyn std::io::Read,
        _id: ObjectId,
    ) -> gix::Result<ObjectId> {
        self.write_stream(kind, size, from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::Repo;

    #[test]
    fn adler32_of_a_known_text() {
        use crate::git::packfile::adler32;
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
        // Long enough for the sums to be reduced along the way.
        let long = vec![0xffu8; 100_000];
        let (mut a, mut b) = (1u64, 0u64);
        for &x in &long {
            a = (a + u64::from(x)) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(adler32(&long), ((b << 16) | a) as u32);
    }

    #[test]
    fn loose_objects_read_back_as_gix_writes_them() {
        let dir = tempfile::tempdir().unwrap();
        crate::git::init(dir.path()).unwrap();
        let repo = Repo::open(dir.path()).unwrap();
        let loose = Loose::new(&repo.repo);
        // Small, empty, and over one stored block (64 KiB) of data.
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for data in [&b"{\"a\": 1}\n"[..], b"", &big] {
            let id = loose.write_buf(gix::objs::Kind::Blob, data).unwrap();
            let expected = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, data).unwrap();
            assert_eq!(id, expected);
            let reopened = Repo::open(dir.path()).unwrap();
            assert_eq!(reopened.objects().read(id).unwrap(), data, "{} bytes", data.len());
        }
        // Writing the same object again replaces it with the same bytes.
        let again = loose.write_buf(gix::objs::Kind::Blob, b"").unwrap();
        assert_eq!(Repo::open(dir.path()).unwrap().objects().read(again).unwrap(), b"");
        let leftovers: Vec<_> =
            std::fs::read_dir(dir.path().join(".git/objects").join(&again.to_hex().to_string()[..2]))
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("tmp_obj_"))
                .collect();
        assert!(leftovers.is_empty(), "no temporary files are left behind");
    }
}
