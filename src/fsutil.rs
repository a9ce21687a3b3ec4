//! Small file helpers: atomic writes (temp file + rename) so a killed command never leaves a
//! half-written file.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Write `bytes` to `path` atomically, creating parent directories.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, true)
}

/// Replace `path` with `bytes` as [`write_atomic`] does, without waiting for the disk: for a
/// cache, which a crash may leave empty or gone, never half-written under its name.
pub fn write_replacing(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, false)
}

/// [`write_atomic`], the file flushed to disk before it is renamed into place when `sync`.
fn replace(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::internal(format!("cannot create {}: {e}", dir.display())))?;
    // A new file gets the mode git gives the files it writes (0666 less the umask), not the
    // temp file's private 0600; an existing file keeps its own (below).
    use std::os::unix::fs::PermissionsExt;
    let mut tmp = tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|e| Error::internal(format!("cannot write in {}: {e}", dir.display())))?;
    tmp.write_all(bytes)?;
    if sync {
        tmp.as_file().sync_all()?;
    }
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path).map_err(|e| Error::internal(format!("cannot write {}: {}", path.display(), e.error)))?;
    Ok(())
}

/// Read a file of a worktree with `read` (`std::fs::read`, or a bounded reader such as
/// [`crate::prd::read_file`]), looking again a few times (within about 50 ms) when it is not
/// there: `git checkout`, and a merge writing files the way it does, replaces a file by removing
/// it and writing it anew, so a reader in between finds nothing (a stream run reading the PRD
/// while another stream's merge updates the main worktree). A file really missing is reported as
/// missing, 50 ms later.
pub fn read_settled(path: &Path, read: impl Fn(&Path) -> std::io::Result<Vec<u8>>) -> std::io::Result<Vec<u8>> {
    let mut tries = 0;
    loop {
        match read(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 5 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// The first executable `name` on `PATH`, as a shell finds it.
pub fn on_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

/// Whether `p` is a file someone may execute.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether `a` and `b` are the same file (following symlinks).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_new_file_gets_the_umask_mode_and_an_old_one_keeps_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.json");
        super::write_atomic(&new, b"{}").unwrap();
        let mode = std::fs::metadata(&new).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o044, 0o666 & 0o044 & mode, "readable as git makes files: {mode:o}");
        assert_ne!(mode, 0o600, "not the temp file's private mode");
        let old = dir.path().join("old.sh");
        std::fs::write(&old, b"x").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o750)).unwrap();
        super::write_atomic(&old, b"y").unwrap();
        assert_eq!(std::fs::metadata(&old).unwrap().permissions().mode() & 0o777, 0o750);
    }

    #[test]
    fn a_file_replaced_meanwhile_is_read_once_back_and_a_missing_one_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prd.md");
        let writer = {
            let path = path.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(5));
                // Whole at once, as a test cannot wait for a write in progress.
                let tmp = path.with_extension("tmp");
                std::fs::write(&tmp, b"# PRD\n").unwrap();
                std::fs::rename(tmp, path).unwrap();
            })
        };
        assert_eq!(super::read_settled(&path, |p| std::fs::read(p)).unwrap(), b"# PRD\n");
        writer.join().unwrap();
        let missing = dir.path().join("missing.md");
        assert_eq!(
            super::read_settled(&missing, |p| std::fs::read(p)).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }
}
