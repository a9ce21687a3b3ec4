//! The one error type every command returns: what happened, hints that say how to fix it, and
//! the exit code class of DESIGN §6 (1 refused, 2 usage or configuration, 3 internal).

use std::fmt;

/// Which exit code an error maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The operation was refused (conflict, ownership violation, lock held, not complete): exit 1.
    Refused,
    /// Usage or configuration error (bad flags, bad YAML, bad names, no repository): exit 2.
    Usage,
    /// Anything unexpected: exit 3.
    Internal,
}

/// An error with its kind and hints (`Hint: …` lines printed after the message).
#[derive(Debug)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
    pub hints: Vec<String>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), hints: Vec::new() }
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
    /// Prefix the message with context, keeping kind and hints.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
    pub fn exit_code(&self) -> u8 {
        match self.kind {
            Kind::Refused => 1,
            Kind::Usage => 2,
            Kind::Internal => 3,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The message of an error that only says stdout was closed (`git boulder status | head`): the
/// binary exits 0 quietly on it.
pub const BROKEN_PIPE: &str = "broken pipe";

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Error::internal(BROKEN_PIPE);
        }
        Error::internal(format!("I/O error: {e}"))
    }
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        match e.downcast::<Error>() {
            Ok(err) => err,
            Err(e) => Error::internal(format!("{e:#}")),
        }
    }
}

/// Turn any displayable error into an internal [`Error`] with context.
pub trait ResultExt<T> {
    fn internal(self, context: impl fmt::Display) -> Result<T>;
}

impl<T, E: fmt::Display> ResultExt<T> for std::result::Result<T, E> {
    fn internal(self, context: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::internal(format!("{context}: {e}")))
    }
}
