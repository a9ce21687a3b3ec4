//! Partial clones (`git clone --filter=blob:none`): their objects arrive when git needs them, but
//! gix reads only what is there. Before a step reads objects a partial clone may lack, it asks
//! for them here, and they are fetched in one batch from the promisor remote, as git fetches what
//! a checkout needs. In a full clone nothing happens.

use super::{cli, ObjectId, Repo};
use crate::error::{Error, Result};

impl Repo {
    /// The promisor remote of a partial clone (`remote.<name>.promisor`, or the older
    /// `extensions.partialClone`); `None` in a full clone.
    pub fn promisor_remote(&self) -> Option<String> {
        let config = self.repo.config_snapshot();
        if let Some(name) = config.string("extensions.partialClone") {
            return Some(name.to_string());
        }
        self.repo
            .remote_names()
            .iter()
            .map(|n| n.to_string())
            .find(|n| config.boolean(format!("remote.{n}.promisor").as_str()) == Some(true))
    }

    /// Make sure the objects `revs` reach (`git rev-list` arguments: tips, trees, `--not` and what
    /// is already had) and the objects `ids` are here, fetching those a partial clone lacks.
    pub fn prefetch(&self, revs: &[String], ids: &[ObjectId]) -> Result<()> {
        let Some(remote) = self.promisor_remote() else { return Ok(()) };
        let _span = crate::trace::span("partial clone: fetch missing objects");
        let mut missing = if revs.is_empty() { Vec::new() } else { cli::missing_objects(&self.common_dir, revs)? };
        let objects = self.objects();
        missing.extend(ids.iter().filter(|id| !objects.has(**id)).map(|id| id.to_string()));
        missing.sort();
        missing.dedup();
        if missing.is_empty() {
            return Ok(());
        }
        cli::fetch_objects(&self.common_dir, &remote, &missing).map_err(|e| {
            Error::refused(format!(
                "this partial clone lacks {} object(s) git-boulder needs, and fetching them from {remote} failed: {}",
                missing.len(),
                e.message
            ))
            .hint(format!("check that {remote} is reachable (git fetch {remote}), then rerun"))
        })
    }

    /// Before a three-way merge of `ours` and `theirs` (a replay of one onto the other): the
    /// objects either side reached since their merge base, the merge base's version of each path
    /// both sides changed (the ancestor every merge of that path reads), and the file `also` at
    /// each of the three commits (the PRD, which a merge reads whole).
    pub fn prefetch_for_merge(&self, ours: ObjectId, theirs: ObjectId, also: &str) -> Result<()> {
        if self.promisor_remote().is_none() {
            return Ok(());
        }
        let objects = self.objects();
        let Some(base) = objects.merge_base(ours, theirs) else { return Ok(()) };
        let tree = |c| super::tree_of(&self.repo, c);
        let (b, o, t) = (tree(base)?, tree(ours)?, tree(theirs)?);
        let ours_changed: std::collections::HashSet<_> =
            super::diff::changes(&self.repo, b, o)?.into_iter().map(|c| c.path).collect();
        let mut ids: Vec<ObjectId> = super::diff::changes(&self.repo, b, t)?
            .into_iter()
            .filter(|c| ours_changed.contains(&c.path))
            .filter_map(|c| c.old.map(|(id, _)| id))
            .collect();
        for c in [base, ours, theirs] {
            ids.extend(self.blob_id_at(c, also)?);
        }
        let revs = [ours.to_string(), theirs.to_string(), "--not".into(), base.to_string()];
        self.prefetch(&revs, &ids)
    }
}
