//! The one error type every command returns: what happened, hints that say how to fix it, the
//! exit code class of DESIGN §6 (1 refused, 2 usage or configuration, 3 internal), and the
//! underlying cause when there is one ([`std::error::Error::source`]).
//!
//! Domain modules with failures of their own return typed errors (thiserror enums that name the
//! stream, ref or path involved); they become an [`Error`] of the right kind where a command
//! meets them, keeping the typed error as the source. A closed stdout (`git boulder status | head`)
//! is its own kind, [`Kind::BrokenPipe`], and ends the command quietly with exit 0, as git does.

use std::fmt;

/// Any error kept as the cause of an [`Error`].
pub type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Which exit code an error maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The operation was refused (conflict, ownership violation, lock held, not complete): exit 1.
    Refused,
    /// Usage or configuration error (bad flags, bad YAML, bad names, no repository): exit 2.
    Usage,
    /// Anything unexpected: exit 3.
    Internal,
    /// Stdout was closed by its reader: nothing to say, exit 0.
    BrokenPipe,
    /// A move interrupted half-way (the branch moved, its worktree not all) cannot be finished as
    /// the worktree is now: exit 1, and whatever records the unfinished command is kept, so that
    /// rerunning it once the paths named are dealt with finishes it.
    Unfinished,
}

/// Why a landing (`stream merge`, the merge queue) was refused, when the refusal is one only a
/// person or a new commit on the stream's branch can resolve: recorded in the stream's op-log as
/// a `refused` op. Refusals that pass by themselves (a lock held, a lost race, a dependency not
/// merged yet) carry none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// The stream's commits conflict with the base.
    Conflict,
    /// The stream changes paths it does not own.
    Ownership,
    /// `settings.verify` failed on the merged result.
    Verify,
    /// The stream's worktree has uncommitted changes (or a rebase or merge in progress).
    Uncommitted,
    /// Commits recorded for the stream are not in what would land.
    MissingWork,
}

impl Landing {
    /// As written in the `refused` op (`data.refusal`).
    pub fn as_str(self) -> &'static str {
        match self {
            Landing::Conflict => "conflict",
            Landing::Ownership => "ownership",
            Landing::Verify => "verify",
            Landing::Uncommitted => "uncommitted",
            Landing::MissingWork => "missing_work",
        }
    }
}

/// An error with its kind, hints (`Hint: …` lines printed after the message) and cause.
#[derive(Debug)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
    pub hints: Vec<String>,
    /// A refused landing that a person has to resolve ([`Error::landing`]).
    pub landing: Option<Landing>,
    source: Option<Source>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), hints: Vec::new(), landing: None, source: None }
    }
    /// A usage or configuration error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Kind::Usage, message)
    }
    /// A refusal (exit 1).
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(Kind::Refused, message)
    }
    /// An internal failure (exit 3).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Kind::Internal, message)
    }
    /// Add a hint line.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }
    /// Mark a refusal as a refused landing of this kind, to be recorded in the stream's op-log.
    pub fn landing(mut self, why: Landing) -> Self {
        self.landing = Some(why);
        self
    }
    /// Keep `cause` as the underlying error (the message is unchanged).
    pub fn with_source(mut self, cause: impl Into<Source>) -> Self {
        self.source = Some(cause.into());
        self
    }
    /// Prefix the message with context, keeping kind, hints and cause.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
    /// The texts of the causes below this error, outermost first, as `-v` prints them (`caused
    /// by: …`). A cause that only repeats what is already shown above it (a typed error made into
    /// this one with the same message) is left out.
    pub fn causes(&self) -> Vec<String> {
        let mut shown = vec![self.message.clone()];
        let mut next = std::error::Error::source(self);
        while let Some(cause) = next {
            let text = cause.to_string();
            if !shown.contains(&text) {
                shown.push(text);
            }
            next = cause.source();
        }
        shown.split_off(1)
    }
    /// Whether this only says that stdout was closed.
    pub fn is_broken_pipe(&self) -> bool {
        self.kind == Kind::BrokenPipe
    }
    pub fn exit_code(&self) -> u8 {
        match self.kind {
            Kind::Refused | Kind::Unfinished => 1,
            Kind::Usage => 2,
            Kind::Internal => 3,
            Kind::BrokenPipe => 0,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Error::new(Kind::BrokenPipe, "broken pipe").with_source(e);
        }
        Error::internal(format!("I/O error: {e}")).with_source(e)
    }
}

/// Turn any error into an [`Error`] of a kind, its message the context then the cause's text
/// (`cannot read X: permission denied`), keeping the cause as the source for `-v` to show.
pub trait ResultExt<T> {
    /// An internal error (exit 3).
    fn internal(self, context: impl fmt::Display) -> Result<T>;
    /// A usage or configuration error (exit 2).
    fn usage(self, context: impl fmt::Display) -> Result<T>;
    /// A refusal (exit 1).
    fn refused(self, context: impl fmt::Display) -> Result<T>;
}

impl<T, E: Into<Source>> ResultExt<T> for std::result::Result<T, E> {
    fn internal(self, context: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::caused(Kind::Internal, context, e))
    }
    fn usage(self, context: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::caused(Kind::Usage, context, e))
    }
    fn refused(self, context: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::caused(Kind::Refused, context, e))
    }
}

impl Error {
    /// An error of `kind` saying `{context}: {cause}`, keeping `cause` as the source.
    pub fn caused(kind: Kind, context: impl fmt::Display, cause: impl Into<Source>) -> Error {
        let cause = cause.into();
        Error::new(kind, format!("{context}: {cause}")).with_source(cause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn the_cause_is_kept() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "no entry");
        let e = Error::from(io);
        assert_eq!(e.exit_code(), 3);
        assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("no entry"));
        let e: Result<()> = Err(std::fmt::Error).internal("formatting");
        let e = e.unwrap_err();
        assert_eq!(e.message, "formatting: an error occurred when formatting an argument");
        assert!(e.source().is_some_and(|s| s.is::<std::fmt::Error>()));
    }

    #[test]
    fn broken_pipe_is_its_own_kind_and_exits_0() {
        let e = Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(e.is_broken_pipe());
        assert_eq!(e.kind, Kind::BrokenPipe);
        assert_eq!(e.exit_code(), 0);
        // Any other message about pipes is not mistaken for one.
        assert!(!Error::internal("broken pipe").is_broken_pipe());
    }
}
