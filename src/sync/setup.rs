//! `remote setup`: the refspecs that make plain `git fetch` and `git push` carry the state too.

use super::fetch_specs;
use crate::error::{Error, Result};
use crate::git::config::ConfigFile;
use crate::git::remote::RemoteName;
use crate::git::Repo;
use crate::state::{self, NOTES_REF};

/// The push refspecs `remote setup` adds (globs, so a ref that does not exist yet is no error).
pub fn setup_push_specs() -> Vec<String> {
    vec![
        format!("{}*:{}*", state::STREAMS, state::STREAMS),
        format!("{}*:{}*", state::BOULDERS, state::BOULDERS),
        format!("{}*:{}*", state::PRD_REF, state::PRD_REF),
        format!("{NOTES_REF}*:{NOTES_REF}*"),
    ]
}

/// Add (or with `undo`, remove) the refspecs of `remote` in the repository's config file. When
/// the remote had no push refspecs, `HEAD` is added first so a plain `git push` still pushes the
/// current branch (as `push.default=current` would). Returns the `key value` lines changed.
pub fn setup(repo: &Repo, remote: &str, undo: bool) -> Result<Vec<String>> {
    if !repo.has_remote(remote) {
        return Err(Error::usage(format!("no remote named {remote:?}"))
            .hint("`git remote -v` lists them; add one with `git remote add NAME URL`"));
    }
    let r = RemoteName::new(repo, remote)?;
    let path = repo.common_dir.join("config");
    let mut file = ConfigFile::read(&path)?;
    let marker_key = "boulderSetup";
    let fetch = fetch_specs(&r.key);
    let push = setup_push_specs();
    let mut changed = Vec::new();
    {
        let mut section = file
            .section("remote", Some(remote))
            .map_err(|e| Error::internal(format!("cannot edit remote.{remote}: {e}")).with_source(e))?;
        let fetch_now = section.values("fetch");
        let push_now = section.values("push");
        let added_head = section.values(marker_key).iter().any(|v| v == "head");
        if undo {
            let keep = |now: &[String], ours: &[String]| -> Vec<String> {
                now.iter().filter(|v| !ours.contains(v)).cloned().collect()
            };
            let mut ours_push = push.clone();
            if added_head {
                ours_push.push("HEAD".into());
            }
            for (key, now, ours) in [("fetch", &fetch_now, &fetch), ("push", &push_now, &ours_push)] {
                let kept = keep(now, ours);
                if kept.len() == now.len() {
                    continue;
                }
                section.remove_all(key);
                for v in &kept {
                    section.push(key, v)?;
                }
                for v in now.iter().filter(|v| !kept.contains(v)) {
                    changed.push(format!("-remote.{remote}.{key} {v}"));
                }
            }
            section.remove_all(marker_key);
        } else {
            for spec in fetch.iter().filter(|s| !fetch_now.contains(s)) {
                section.push("fetch", spec)?;
                changed.push(format!("+remote.{remote}.fetch {spec}"));
            }
            let missing: Vec<&String> = push.iter().filter(|s| !push_now.contains(s)).collect();
            if !missing.is_empty() && push_now.is_empty() {
                section.push("push", "HEAD")?;
                section.push(marker_key, "head")?;
                changed.push(format!("+remote.{remote}.push HEAD"));
            }
            for spec in missing {
                section.push("push", spec)?;
                changed.push(format!("+remote.{remote}.push {spec}"));
            }
        }
    }
    if !changed.is_empty() {
        crate::fsutil::write_atomic(&path, &file.to_bytes()?)?;
    }
    Ok(changed)
}
