//! Tracked files on disk against their index entries: one `lstat` each, relative to an open
//! handle of their folder, and the content read and hashed only where the stat cannot tell.

use std::path::Path;

use gix::bstr::{BStr, BString, ByteSlice};

use super::Fast;
use crate::git::ObjectId;

/// Could content filters (eol conversion, `ident`, filter drivers) make a file on disk differ from
/// its blob while git still calls it clean? Then a hash mismatch is not proof of a change.
fn filters_possible(repo: &gix::Repository, index: &gix::index::File) -> bool {
    let config = repo.config_snapshot();
    let autocrlf = config.string("core.autocrlf").map(|v| v.to_str_lossy().to_lowercase());
    if autocrlf.is_some_and(|v| v == "true" || v == "input") || config.string("core.eol").is_some() {
        return true;
    }
    if config.string("core.attributesFile").is_some() || repo.common_dir().join("info/attributes").exists() {
        return true;
    }
    index.entries().iter().any(|e| {
        let p = e.path(index);
        p == ".gitattributes" || p.ends_with(b"/.gitattributes")
    })
}

fn blob_hash(kind: gix::hash::Kind, data: &[u8]) -> Option<ObjectId> {
    gix::objs::compute_hash(kind, gix::objs::Kind::Blob, data).ok()
}

/// Comparing tracked files on disk with their index entries: stat, then content where the stat
/// cannot tell.
pub(super) struct Look<'a> {
    g: &'a gix::Repository,
    wt: &'a Path,
    index: &'a gix::index::File,
    index_mtime: Option<gix::index::entry::stat::Time>,
    opts: gix::index::entry::stat::Options,
    filemode: bool,
    filters: Option<bool>,
    dirs: DirCache<'a>,
    /// Files read and hashed so far.
    pub(super) hashed: usize,
}

impl<'a> Look<'a> {
    pub(super) fn new(
        g: &'a gix::Repository,
        wt: &'a Path,
        index: &'a gix::index::File,
        index_mtime: Option<gix::index::entry::stat::Time>,
    ) -> Self {
        Look {
            g,
            wt,
            index,
            index_mtime,
            opts: gix::index::entry::stat::Options::default(),
            filemode: g.config_snapshot().boolean("core.fileMode").unwrap_or(true),
            filters: None,
            dirs: DirCache::new(wt),
            hashed: 0,
        }
    }

    /// `None` when the file is as its entry says; else what that makes the worktree.
    pub(super) fn entry(&mut self, e: &gix::index::Entry) -> Option<Fast> {
        use gix::index::entry::{Flags, Mode};
        if e.flags.contains(Flags::SKIP_WORKTREE) || e.flags.contains(Flags::ASSUME_VALID) || e.mode == Mode::COMMIT {
            return None;
        }
        let rel = e.path(self.index);
        let meta = match self.dirs.lstat(rel) {
            Ok(m) => m,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Some(Fast::Dirty),
            Err(_) => return Some(Fast::Unsure),
        };
        let is_link = e.mode == Mode::SYMLINK;
        if meta.is_link != is_link || meta.is_dir {
            return Some(Fast::Dirty);
        }
        if self.filemode && !is_link && meta.executable != (e.mode == Mode::FILE_EXECUTABLE) {
            return Some(Fast::Dirty);
        }
        let racy = self.index_mtime.is_none_or(|t| e.stat.mtime >= t);
        if e.stat.matches(&meta.stat, self.opts) && !racy {
            return None;
        }
        self.hashed += 1;
        let Some(full) = gix::path::from_bstr(rel).ok().map(|p| self.wt.join(p)) else { return Some(Fast::Unsure) };
        let data = if is_link {
            match std::fs::read_link(&full).ok().and_then(|t| gix::path::into_bstr(t).ok().map(|b| b.into_owned())) {
                Some(b) => b.into(),
                None => return Some(Fast::Unsure),
            }
        } else {
            match std::fs::read(&full) {
                Ok(d) => d,
                Err(_) => return Some(Fast::Unsure),
            }
        };
        if blob_hash(self.g.object_hash(), &data) == Some(e.id) {
            return None;
        }
        let (g, index) = (self.g, self.index);
        if *self.filters.get_or_insert_with(|| filters_possible(g, index)) {
            return Some(Fast::Unsure);
        }
        Some(Fast::Dirty)
    }
}

/// What one `lstat` says about a tracked path.
struct Meta {
    is_link: bool,
    is_dir: bool,
    executable: bool,
    stat: gix::index::entry::Stat,
}

/// `lstat` of paths relative to a worktree, relative to an open handle of their folder: index
/// entries come sorted, so consecutive paths share the folder, and the kernel resolves one name
/// instead of the whole absolute path each time.
struct DirCache<'a> {
    wt: &'a Path,
    #[cfg(unix)]
    current: Option<(BString, rustix::fd::OwnedFd)>,
}

impl<'a> DirCache<'a> {
    fn new(wt: &'a Path) -> Self {
        DirCache {
            wt,
            #[cfg(unix)]
            current: None,
        }
    }

    #[cfg(unix)]
    fn lstat(&mut self, rel: &BStr) -> std::io::Result<Meta> {
        use rustix::fs::{AtFlags, FileType, Mode, OFlags};
        use std::os::unix::ffi::OsStrExt;
        let bytes: &[u8] = rel;
        let (dir, name) = match bytes.rfind_byte(b'/') {
            Some(i) => (&bytes[..i], &bytes[i + 1..]),
            None => (&b""[..], bytes),
        };
        if self.current.as_ref().is_none_or(|(d, _)| d.as_slice() != dir) {
            self.current = None;
            let path = self.wt.join(std::ffi::OsStr::from_bytes(dir));
            let fd = rustix::fs::open(&path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
            self.current = Some((dir.into(), fd));
        }
        let (_, fd) = self.current.as_ref().expect("opened above");
        let st = rustix::fs::statat(fd, std::ffi::OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW)?;
        let kind = FileType::from_raw_mode(st.st_mode as _);
        let time = |secs: i64, nsecs: i64| gix::index::entry::stat::Time { secs: secs as u32, nsecs: nsecs as u32 };
        Ok(Meta {
            is_link: kind == FileType::Symlink,
            is_dir: kind == FileType::Directory,
            executable: st.st_mode as u32 & 0o100 != 0,
            stat: gix::index::entry::Stat {
                mtime: time(st.st_mtime as i64, st.st_mtime_nsec as i64),
                ctime: time(st.st_ctime as i64, st.st_ctime_nsec as i64),
                dev: st.st_dev as u32,
                ino: st.st_ino as u32,
                uid: st.st_uid,
                gid: st.st_gid,
                size: st.st_size as u32,
            },
        })
    }

    #[cfg(not(unix))]
    fn lstat(&mut self, rel: &BStr) -> std::io::Result<Meta> {
        let path = gix::path::from_bstr(rel).map_err(|e| std::io::Error::other(e.to_string()))?;
        let m = gix::index::fs::Metadata::from_path_no_follow(&self.wt.join(path))?;
        Ok(Meta {
            is_link: m.is_symlink(),
            is_dir: m.is_dir(),
            executable: m.is_executable(),
            stat: gix::index::entry::Stat::from_fs(&m).map_err(|e| std::io::Error::other(e.to_string()))?,
        })
    }
}
