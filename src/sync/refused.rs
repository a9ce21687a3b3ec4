//! Op-log tips a pull refused for what they hold, remembered per remote ref so that a later pull
//! refuses the same tip again without walking it.

use std::collections::BTreeMap;

use crate::git::{ObjectId, Repo};

/// Op-log tips a pull refused for what they hold, per remote and remote ref, in
/// `$GIT_COMMON_DIR/boulder/refused.json` (this machine's only, never pushed): a later pull that
/// fetches the same tip refuses it again at no cost, until the remote's ref moves.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Refusals(pub(super) BTreeMap<String, BTreeMap<String, RefusedTip>>);

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct RefusedTip {
    pub(super) tip: String,
    pub(super) why: String,
}

impl RefusedTip {
    pub(super) fn is(&self, id: ObjectId) -> bool {
        ObjectId::from_hex(self.tip.as_bytes()).ok() == Some(id)
    }
}

fn refusals_path(repo: &Repo) -> std::path::PathBuf {
    repo.boulder_dir().join("refused.json")
}

impl Refusals {
    /// What is recorded (nothing when the file is missing or does not parse: each tip is then
    /// checked again, the cost of a first pull).
    pub(super) fn load(repo: &Repo) -> Refusals {
        std::fs::read(refusals_path(repo)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    pub(super) fn save(&self, repo: &Repo) {
        if let Ok(text) = serde_json::to_vec_pretty(self) {
            let _ = std::fs::create_dir_all(repo.boulder_dir());
            let _ = crate::fsutil::write_atomic(&refusals_path(repo), &text);
        }
    }

    /// Why the op-log tip `id` of `remote_ref` on the remote `key` was refused before, if it was.
    pub(super) fn of(&self, key: &str, remote_ref: &str, id: ObjectId) -> Option<&str> {
        let r = self.0.get(key)?.get(remote_ref)?;
        r.is(id).then_some(r.why.as_str())
    }
}
