//! Reading a PRD file from disk ([`read_file`]): only a regular file (a symlink is followed; a
//! device, FIFO, socket or folder is refused, so `prd.md -> /dev/zero` is not read until memory
//! runs out), and at most [`MAX_BYTES`], checked on the file's metadata before reading and
//! enforced while reading, so a file that grows meanwhile cannot pass either.
//!
//! Where the file may be (the plan's `prd:` stays inside the repository) is the workspace's
//! concern: see [`crate::workspace::Workspace::prd_path`].

use std::io::Read;
use std::path::Path;

/// The largest PRD read, in bytes: 64 MiB, far above any PRD people write (100,000 stories are
/// about 10 MB of text).
pub const MAX_BYTES: u64 = 64 << 20;

/// Why a PRD file is not read, carried inside the [`std::io::Error`] [`read_file`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadRefusal {
    /// A device, FIFO, socket or folder (after following symlinks): `what` it is.
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    /// Larger than [`MAX_BYTES`].
    #[error("it is larger than {} MiB, the most a PRD may be", MAX_BYTES >> 20)]
    TooLarge,
}

impl ReadRefusal {
    /// The refusal an error of [`read_file`] carries, if it is one.
    pub fn of(e: &std::io::Error) -> Option<ReadRefusal> {
        e.get_ref().and_then(|inner| inner.downcast_ref::<ReadRefusal>()).copied()
    }

    fn into_io(self) -> std::io::Error {
        let kind = match self {
            ReadRefusal::NotRegular(_) => std::io::ErrorKind::InvalidInput,
            ReadRefusal::TooLarge => std::io::ErrorKind::FileTooLarge,
        };
        std::io::Error::new(kind, self)
    }
}

/// The bytes of the PRD at `path`, symlinks followed: a regular file of at most [`MAX_BYTES`],
/// else an error carrying the [`ReadRefusal`] (and nothing read beyond `MAX_BYTES + 1`).
pub fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    // Checked before opening: opening a FIFO would wait for a writer.
    check(&std::fs::metadata(path)?)?;
    let file = std::fs::File::open(path)?;
    // And again on what was opened, in case the path changed in between.
    let meta = file.metadata()?;
    check(&meta)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(ReadRefusal::TooLarge.into_io());
    }
    Ok(bytes)
}

fn check(meta: &std::fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let what = if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a folder")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("a special file")
    };
    if let Some(what) = what {
        return Err(ReadRefusal::NotRegular(what).into_io());
    }
    if meta.len() > MAX_BYTES {
        return Err(ReadRefusal::TooLarge.into_io());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_a_folder_and_a_file_over_the_limit_are_refused() {
        let e = read_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(ReadRefusal::of(&e), Some(ReadRefusal::NotRegular("a character device")));
        let dir = tempfile::tempdir().unwrap();
        let e = read_file(dir.path()).unwrap_err();
        assert_eq!(ReadRefusal::of(&e), Some(ReadRefusal::NotRegular("a folder")));
        let big = dir.path().join("big.md");
        std::fs::File::create(&big).unwrap().set_len(MAX_BYTES + 1).unwrap();
        let e = read_file(&big).unwrap_err();
        assert_eq!(ReadRefusal::of(&e), Some(ReadRefusal::TooLarge));
        assert_eq!(e.to_string(), "it is larger than 64 MiB, the most a PRD may be");
    }

    #[test]
    fn a_regular_file_is_read_and_a_missing_one_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("prd.md");
        std::fs::write(&at, "### [ ] US-001: x\n").unwrap();
        assert_eq!(read_file(&at).unwrap(), b"### [ ] US-001: x\n");
        let e = read_file(&dir.path().join("missing.md")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(ReadRefusal::of(&e), None);
    }
}
