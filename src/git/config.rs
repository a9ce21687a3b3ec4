//! Editing a git config file in place (the repository's `config`, a worktree's `config.worktree`),
//! leaving every value git-boulder does not touch as it was, byte for byte. Reading config values
//! as git resolves them is [`super::Repo::config_string`].

use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;

use super::objects::{failure, Failure};

/// Why a config file could not be read, written or changed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: crate::error::Source },
    #[error("cannot write the config: {0}")]
    Write(#[source] std::io::Error),
    /// A value could not be added under `key`.
    #[error("{source}")]
    Push { key: String, source: crate::error::Source },
}

/// An internal failure (exit 3).
impl From<ConfigError> for crate::Error {
    fn from(e: ConfigError) -> crate::Error {
        crate::Error::internal(e.to_string()).with_source(e)
    }
}

type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// One config file, read without following includes.
pub struct ConfigFile {
    file: gix::config::File,
}

/// One section of a [`ConfigFile`], to read and change its values.
pub struct Section<'a> {
    inner: gix::config::file::SectionMut<'a>,
}

impl ConfigFile {
    /// The repository config file at `path`.
    pub fn read(path: &Path) -> Result<ConfigFile> {
        gix::config::File::from_path_no_includes(path.to_path_buf(), gix::config::Source::Local)
            .map(|file| ConfigFile { file })
            .map_err(|e| ConfigError::Read { path: path.to_owned(), source: e.into() })
    }

    /// A worktree's own config file (`config.worktree`), if it can be read.
    pub fn read_worktree(path: &Path) -> Option<ConfigFile> {
        gix::config::File::from_path_no_includes(path.to_path_buf(), gix::config::Source::Worktree)
            .ok()
            .map(|file| ConfigFile { file })
    }

    /// The value of `key` (`section.name`), as written.
    pub fn string(&self, key: &str) -> Option<String> {
        self.file.string(key).map(|v| v.to_string())
    }

    /// Set `section.key` to `value` (replacing the last value, adding it when there is none).
    pub fn set(&mut self, section: &str, key: &str, value: &str) -> std::result::Result<(), Failure> {
        self.file.set_raw_value_by(section, None, key, value).map(|_| ()).map_err(failure)
    }

    /// Remove every `section.key` value, if the section exists; a section left with no value (and
    /// nothing else: no comment) goes too, so that setting a key and removing it again leaves the
    /// file as it was.
    pub fn remove_all(&mut self, section: &str, key: &str) {
        let emptied = match self.file.section_mut(section, None) {
            Ok(mut s) => {
                while s.remove(key).is_some() {}
                s.num_values() == 0 && s.to_bstring().lines().skip(1).all(|l| l.trim().is_empty())
            }
            Err(_) => false,
        };
        if emptied {
            self.file.remove_section(section, None);
        }
    }

    /// The section `name` (with `subsection`), created (empty) when there is none.
    pub fn section(&mut self, name: &str, subsection: Option<&str>) -> std::result::Result<Section<'_>, Failure> {
        let inner =
            self.file.section_mut_or_create_new(name, subsection.map(|s| s.as_bytes().as_bstr())).map_err(failure)?;
        Ok(Section { inner })
    }

    /// Remove the section `name` (with `subsection`).
    pub fn remove_section(&mut self, name: &str, subsection: Option<&str>) {
        self.file.remove_section(name, subsection.map(|s| s.as_bytes().as_bstr()));
    }

    /// The file's bytes, to write back.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.file.write_to(&mut out).map_err(ConfigError::Write)?;
        Ok(out)
    }
}

impl Section<'_> {
    /// Every value of `key` in this section, in order.
    pub fn values(&self, key: &str) -> Vec<String> {
        self.inner.values(key).iter().map(|v| v.to_string()).collect()
    }

    /// Remove every value of `key`.
    pub fn remove_all(&mut self, key: &str) {
        while self.inner.remove(key).is_some() {}
    }

    /// Add a value of `key` after the others.
    pub fn push(&mut self, key: &str, value: &str) -> Result<()> {
        self.inner
            .push(key, Some(value.as_bytes().as_bstr()))
            .map_err(|e| ConfigError::Push { key: key.to_string(), source: e.into() })?;
        Ok(())
    }

    /// How many values the section holds.
    pub fn num_values(&self) -> usize {
        self.inner.num_values()
    }
}
