//! One compare-and-swap of a ref ([`update`]), of several in one transaction ([`update_all`]),
//! and the plain move of a branch a command makes as the configured committer ([`move_ref`]).

use std::time::Duration;

use super::full_name;
use super::locks::{blocking_lock, locked};
use crate::error::{Error, Result};
use crate::git::identity::Signature;
use crate::git::{ObjectId, Repo};

/// What a ref must hold for an update to go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The ref must not exist (a creation).
    Absent,
    /// The ref must point at this object.
    At(ObjectId),
    /// Whatever the ref holds, or nothing.
    Anything,
}

impl Expect {
    /// [`Expect::At`] the value, or [`Expect::Absent`] when there is none.
    pub fn from_tip(tip: Option<ObjectId>) -> Self {
        tip.map_or(Expect::Absent, Expect::At)
    }

    fn previous(self) -> gix::refs::transaction::PreviousValue {
        use gix::refs::transaction::PreviousValue;
        match self {
            Expect::Absent => PreviousValue::MustNotExist,
            Expect::At(id) => PreviousValue::MustExistAndMatch(gix::refs::Target::Object(id)),
            Expect::Anything => PreviousValue::Any,
        }
    }
}

/// Who a ref update's reflog entry names.
#[derive(Clone, Copy)]
pub enum Writer<'a> {
    /// This identity.
    As(&'a Signature),
    /// The committer git config gives (the repository handle's own).
    Configured,
}

/// How a ref update failed.
#[derive(Debug)]
pub struct UpdateError {
    /// Worth retrying: the ref did not hold the expected value, or another writer holds its lock.
    pub transient: bool,
    /// gix's error.
    pub cause: crate::git::objects::Failure,
}

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.cause.fmt(f)
    }
}

impl std::error::Error for UpdateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.cause)
    }
}
/// Move `name` to `new` if it holds what `expected` says (compare-and-swap), with a reflog entry
/// `message` by `writer`, on the gix handle `g`. `Ok(false)`: the ref was to be created but
/// already held `new` (another writer made the very same object first), so this call did not
/// create it.
pub(crate) fn update_in(
    g: &gix::Repository,
    name: &gix::refs::FullName,
    expected: Expect,
    new: ObjectId,
    message: &str,
    writer: Writer<'_>,
) -> std::result::Result<bool, UpdateError> {
    use gix::refs::transaction::{Change, PreviousValue, RefEdit};
    let edit = RefEdit::update(name.clone(), new, expected.previous(), message);
    let mut buf = gix::date::parse::TimeBuf::default();
    let edited = match writer {
        Writer::As(sig) => g.edit_references_as([edit], Some(sig.0.to_ref(&mut buf))),
        Writer::Configured => g.edit_reference(edit),
    };
    match edited {
        // A creation that found the ref already there (with the same value) reports the value it
        // found as the expected one.
        Ok(edits) => Ok(!(expected == Expect::Absent
            && edits
                .iter()
                .any(|e| matches!(e.change, Change::Update { expected: PreviousValue::MustExistAndMatch(_), .. })))),
        Err(e) => Err(UpdateError {
            transient: e.is_conflict() || e.can_retry() || e.is_retryable(),
            cause: crate::git::objects::failure(e),
        }),
    }
}

/// One compare-and-swap of `name` (see [`update_with_retry`] for writers that race): move it to
/// `new` if it holds what `expected` says, with a reflog entry `message` by `writer`. `Ok(false)`:
/// the ref was to be created but already held `new`.
pub fn update(
    repo: &Repo,
    name: &str,
    expected: Expect,
    new: ObjectId,
    message: &str,
    writer: Writer<'_>,
) -> Result<std::result::Result<bool, UpdateError>> {
    Ok(update_in(&repo.repo, &full_name(name)?, expected, new, message, writer))
}

/// One compare-and-swap of [`update_all`].
#[derive(Debug, Clone)]
pub struct Swap {
    pub name: String,
    pub expected: Expect,
    pub new: ObjectId,
    /// The reflog message.
    pub message: String,
}

/// Several compare-and-swaps in one ref transaction, written into `packed-refs` (as
/// `git pack-refs` leaves refs): every ref moves or none does (a ref that no longer holds what it
/// was expected to, or whose lock another writer holds, fails them all; the error says whether
/// that is worth retrying). One lock and one file for all of them, where a loose ref each would
/// create a lock file and a ref file per ref; a loose copy of a moved ref is deleted, so the
/// packed value is the one read. Reflog entries name `writer`.
pub fn update_all(repo: &Repo, swaps: &[Swap], writer: &Signature) -> Result<std::result::Result<(), UpdateError>> {
    use gix::lock::acquire::Fail;
    use gix::refs::file::transaction::PackedRefs;
    use gix::refs::transaction::RefEdit;
    if swaps.is_empty() {
        return Ok(Ok(()));
    }
    let mut edits = Vec::with_capacity(swaps.len());
    for s in swaps {
        edits.push(RefEdit::update(full_name(&s.name)?, s.new, s.expected.previous(), s.message.as_str()));
    }
    let g = &repo.repo;
    let fail = |e: gix::Error| UpdateError {
        transient: e.is_conflict() || e.can_retry() || e.is_retryable(),
        cause: crate::git::objects::failure(e),
    };
    // Lock waits as git's defaults (core.filesRefLockTimeout 100 ms, core.packedRefsTimeout 1 s).
    let (files, packed) = (
        Fail::AfterDurationWithBackoff(Duration::from_millis(100)),
        Fail::AfterDurationWithBackoff(Duration::from_millis(1000)),
    );
    let mut buf = gix::date::parse::TimeBuf::default();
    let prepared = g
        .refs
        .transaction()
        .packed_refs(PackedRefs::DeletionsAndNonSymbolicUpdatesRemoveLooseSourceReference(Box::new(g.objects.clone())))
        .prepare(edits, files, packed);
    Ok(match prepared {
        Ok(t) => t.commit(Some(writer.0.to_ref(&mut buf))).map(|_| ()).map_err(fail),
        Err(e) => Err(fail(e)),
    })
}

/// Move a ref from `expected` to `new` (compare-and-swap) with a reflog `message`, logged as the
/// configured committer or `$USER <$USER@host>`. `Ok(false)` when the ref no longer points at
/// `expected` (someone moved it meanwhile).
pub fn move_ref(repo: &Repo, name: &str, expected: ObjectId, new: ObjectId, message: &str) -> Result<bool> {
    let full = full_name(name)?;
    let writer = crate::git::identity::with_identity(repo)?;
    match update_in(&writer, &full, Expect::At(expected), new, message, Writer::Configured) {
        Ok(_) => Ok(true),
        Err(_) if repo.ref_id(name)? != Some(expected) => Ok(false),
        Err(e) => Err(match blocking_lock(&repo.repo, &full, true) {
            Some(lock) => locked(name, &lock),
            None => Error::internal(format!("cannot update {name}: {e}")).with_source(e),
        }),
    }
}
