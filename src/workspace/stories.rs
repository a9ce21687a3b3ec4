//! The PRD in force — where it is (the plan's `prd`, a usual place, a bare repository's base
//! branch), read and parsed once per command — and each stream's view of its stories.

use std::path::{Path, PathBuf};

use super::{resolve, utf8, Workspace};
use crate::error::{Error, Result};
use crate::git::ObjectId;
use crate::plan::{self, Plan, StreamDef};
use crate::prd::{self, Prd, Status, Story};
use crate::state::{PrdState, Store, PRD_REF};

impl Workspace {
    /// The PRD with blob id `id`, parsed once per command.
    fn parsed(
        &self,
        plan: &Plan,
        id: ObjectId,
        bytes: impl FnOnce() -> Option<Vec<u8>>,
    ) -> Option<std::sync::Arc<Prd>> {
        let mut cache = self.prds.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(id)
            .or_insert_with(|| {
                let text = String::from_utf8(bytes()?).ok()?;
                prd::parse(&plan.prd, &text).ok().map(std::sync::Arc::new)
            })
            .clone()
    }

    /// Absolute path of the PRD: `explicit` (relative to the current directory: the user's own
    /// choice, any file), else the plan's `prd` relative to the main worktree, which must stay
    /// inside it: an absolute path or a `..` component ([`plan::prd_problem`]), or a symlink
    /// resolving outside the main worktree (`prd.md -> /dev/zero`, `-> ~/.ssh/id_ed25519`), is
    /// refused. Without a plan, the one PRD kept at a usual place ([`Workspace::find_prd`]), else
    /// the default path.
    pub fn prd_path(&self, plan: Option<&Plan>, explicit: Option<&Path>) -> Result<PathBuf> {
        if let Some(p) = explicit {
            return Ok(std::env::current_dir()?.join(p));
        }
        let root = self.root()?;
        let rel = match plan {
            Some(_) => plan_prd(plan)?.to_string(),
            // Lenient for what only looks (`resume`, the project boulder): the default unless one
            // PRD is found; commands that read the PRD ask `find_prd` first.
            None => match self.prd_candidates(None)?.as_slice() {
                [one] => one.clone(),
                _ => plan::DEFAULT_PRD.to_string(),
            },
        };
        let path = root.join(rel);
        let (real, real_root) = (resolve(&path), resolve(root));
        if !real.starts_with(&real_root) {
            return Err(Error::usage(format!(
                "the PRD {} resolves to {}, outside the repository {}",
                path.display(),
                real.display(),
                real_root.display()
            ))
            .hint("commit the PRD itself at that path, not a symlink leading out of the repository")
            .hint(plan::PRD_HINT));
        }
        Ok(path)
    }

    /// The PRDs of a repository without a plan: the files at a place where people keep PRDs
    /// ([`usual_prd_places`]), in the main worktree, or in a bare repository in the tree of
    /// `tip`; relative to the repository root.
    fn prd_candidates(&self, tip: Option<ObjectId>) -> Result<Vec<String>> {
        Ok(match (tip, &self.repo.main_work_dir) {
            (Some(tip), _) => usual_prd_places(self.repo.tree_paths(tip)?),
            (None, Some(root)) => {
                let mut files = Vec::new();
                for dir in PRD_PLACES.iter().map(|(dir, _)| *dir) {
                    let Ok(entries) = std::fs::read_dir(root.join(dir)) else { continue };
                    for e in entries.flatten() {
                        let Some(name) = e.file_name().to_str().map(str::to_string) else { continue };
                        let rel = if dir.is_empty() { name } else { format!("{dir}/{name}") };
                        // A regular file, or a symlink to one (where it leads is checked later).
                        if std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()) {
                            files.push(rel);
                        }
                    }
                }
                usual_prd_places(files)
            }
            (None, None) => Vec::new(),
        })
    }

    /// The PRD of a repository without a plan: the one of [`Workspace::prd_candidates`]. None
    /// there, or several, is a usage error that lists them and asks for `--prd`.
    pub fn find_prd(&self, tip: Option<ObjectId>) -> Result<String> {
        let found = self.prd_candidates(tip)?;
        let places = PRD_PLACES.iter().map(|(dir, name)| {
            let name = if *name == "prd*" { "prd*.md|json" } else { name };
            if dir.is_empty() {
                name.to_string()
            } else {
                format!("{dir}/{name}")
            }
        });
        match found.len() {
            1 => Ok(found.into_iter().next().unwrap_or_default()),
            0 => Err(Error::usage(format!(
                "no PRD found: there is no stream plan naming one, and none is where PRDs are kept ({})",
                places.collect::<Vec<_>>().join(", ")
            ))
            .hint(format!(
                "pass the PRD's path with --prd PATH, or keep it at one of those places ({} is the default)",
                plan::DEFAULT_PRD
            ))),
            _ => Err(Error::usage(format!(
                "{} PRDs found and no stream plan naming one: {}",
                found.len(),
                found.iter().map(|p| crate::text::inert(p)).collect::<Vec<_>>().join(", ")
            ))
            .hint("pass the one to use with --prd PATH")
            .hint(
                "`git boulder stream suggest --prd PATH --write` writes a plan whose `prd:` names it for every command",
            )),
        }
    }
    /// Read and parse the PRD: `explicit` or the plan's `prd` on disk ([`Workspace::prd_path`]),
    /// or in a bare repository (nothing explicit) the file at the base branch's tip.
    pub fn load_prd(&self, plan: Option<&Plan>, explicit: Option<&Path>) -> Result<(String, Prd)> {
        if explicit.is_some() || !self.repo.is_bare() {
            if plan.is_none() && explicit.is_none() {
                self.find_prd(None)?;
            }
            return load_prd(&self.prd_path(plan, explicit)?);
        }
        let tip = match plan {
            Some(p) => self.tree_commit(p)?,
            None => self.bare_source()?.map(|(t, _)| t),
        };
        let found;
        let rel = match plan {
            Some(_) => plan_prd(plan)?,
            None => {
                found = self.find_prd(Some(tip.ok_or_else(|| {
                    Error::usage("no PRD found: the repository has no commit yet")
                        .hint("pass the PRD's path with --prd PATH")
                })?))?;
                found.as_str()
            }
        };
        let branch = plan.map(|p| p.settings.base_branch.clone()).unwrap_or_else(|| "HEAD".into());
        let label = format!("{branch}:{rel}");
        // Bounded as a PRD on disk is, before it is read.
        if let Some(id) = match tip {
            Some(t) => self.repo.blob_id_at(t, rel)?,
            None => None,
        } {
            if self.repo.objects().header(id).is_ok_and(|(_, size)| size > crate::prd::MAX_BYTES) {
                return Err(Error::usage(format!(
                    "cannot read the PRD {label}: it is larger than {} MiB, the most a PRD may be",
                    crate::prd::MAX_BYTES >> 20
                ))
                .hint("split the PRD into smaller files, or set `prd:` in .boulder/streams.yaml to your PRD's path"));
            }
        }
        let bytes = match tip {
            Some(t) => self.repo.file_at(t, rel)?,
            None => None,
        };
        let bytes = bytes.ok_or_else(|| {
            Error::usage(format!("cannot read the PRD {label}: not found"))
                .hint("set `prd:` in .boulder/streams.yaml to your PRD's path")
        })?;
        parse_prd(bytes, &label, rel)
    }
    /// Story ids recorded done with `git boulder prd done`.
    pub fn recorded_done(&self) -> Result<std::collections::BTreeSet<String>> {
        let store = Store::new(&self.repo)?;
        Ok(store.read::<PrdState>(PRD_REF)?.map(|e| e.state.done).unwrap_or_default())
    }

    /// A stream's stories with their status: as its own copy of the PRD says (its worktree on
    /// disk, else its branch tip, else the main PRD), completed when `prd done` recorded them.
    pub fn stream_stories(
        &self,
        plan: &Plan,
        stream: &StreamDef,
        prd_main: &Prd,
        done: &std::collections::BTreeSet<String>,
    ) -> Result<Vec<Story>> {
        self.with_stream_stories(plan, stream, prd_main, |stories| {
            stories
                .cloned()
                .map(|mut s| {
                    if done.contains(&s.id) {
                        s.status = Status::Completed;
                    }
                    s
                })
                .collect()
        })
    }

    /// How many of a stream's stories are done, as [`Workspace::stream_stories`] counts them
    /// (without copying the stories).
    pub fn stream_done(
        &self,
        plan: &Plan,
        stream: &StreamDef,
        prd_main: &Prd,
        done: &std::collections::BTreeSet<String>,
    ) -> Result<usize> {
        self.with_stream_stories(plan, stream, prd_main, |stories| {
            stories.filter(|s| s.status.is_done() || done.contains(&s.id)).count()
        })
    }

    /// `f` of a stream's stories as its own copy of the PRD has them (else the main PRD's).
    fn with_stream_stories<T>(
        &self,
        plan: &Plan,
        stream: &StreamDef,
        prd_main: &Prd,
        f: impl FnOnce(&mut dyn Iterator<Item = &Story>) -> T,
    ) -> Result<T> {
        let own = self.stream_prd(plan, stream)?;
        let source = own.as_deref().unwrap_or(prd_main);
        Ok(f(&mut stream.stories.iter().filter_map(|id| source.story(id).or_else(|| prd_main.story(id)))))
    }

    /// The PRD as the stream sees it, when its worktree or branch has one.
    fn stream_prd(&self, plan: &Plan, stream: &StreamDef) -> Result<Option<std::sync::Arc<Prd>>> {
        if plan::prd_problem(&plan.prd).is_some() {
            return Ok(None);
        }
        // A bare repository has no worktrees: only the branch tip.
        if let Ok(wt) = self.worktree_path(plan, &stream.name) {
            // Only a PRD inside the worktree (no symlink leading out), read within bounds.
            let bytes = std::fs::canonicalize(wt.join(&plan.prd))
                .ok()
                .filter(|real| real.starts_with(&wt))
                .and_then(|real| prd::read_file(&real).ok());
            if let Some(bytes) = bytes {
                let id = self
                    .repo
                    .objects()
                    .blob(&bytes, false)
                    .map_err(|e| Error::internal(format!("cannot hash the PRD: {e}")).with_source(e))?;
                return Ok(self.parsed(plan, id, || Some(bytes)));
            }
        }
        if let Some(tip) = self.repo.branch_tip(&stream.branch)? {
            if let Some(id) = self.repo.blob_id_at(tip, &plan.prd)? {
                return Ok(self.parsed(plan, id, || self.repo.file_at(tip, &plan.prd).ok().flatten()));
            }
        }
        Ok(None)
    }
}

/// Read ([`prd::read_file`]: a regular file of at most [`prd::MAX_BYTES`]) and parse a PRD
/// file; errors name the file and line.
pub fn load_prd(path: &Path) -> Result<(String, Prd)> {
    load_prd_with(path, prd::read_file)
}

/// [`load_prd`] for a stream run, where another stream's merge may be rewriting the main
/// worktree's PRD at that moment, as `git checkout` does (removing the file, creating it empty,
/// writing it): read until the file is there and two reads in a row agree, within about 50 ms
/// ([`crate::fsutil::read_settled`]), so a run never takes a half-written PRD for one with fewer
/// stories.
pub fn load_prd_settled(path: &Path) -> Result<(String, Prd)> {
    load_prd_with(path, |p| {
        let mut last = crate::fsutil::read_settled(p, prd::read_file)?;
        for _ in 0..5 {
            let again = crate::fsutil::read_settled(p, prd::read_file)?;
            if again == last && !again.is_empty() {
                break;
            }
            last = again;
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Ok(last)
    })
}

fn load_prd_with(path: &Path, read: impl Fn(&Path) -> std::io::Result<Vec<u8>>) -> Result<(String, Prd)> {
    let bytes = read(path).map_err(|e| {
        let err = Error::usage(format!("cannot read the PRD {}: {e}", path.display()));
        let refusal = prd::ReadRefusal::of(&e);
        let not_found = e.kind() == std::io::ErrorKind::NotFound;
        let err = err.with_source(e);
        match refusal {
            Some(prd::ReadRefusal::NotRegular(_)) => err.hint(
                "commit the PRD itself at that path (not a symlink to a device, FIFO or folder), or set `prd:` in \
                 .boulder/streams.yaml to your PRD's path",
            ),
            Some(prd::ReadRefusal::TooLarge) => {
                err.hint("split the PRD into smaller files, or set `prd:` in .boulder/streams.yaml to your PRD's path")
            }
            None if not_found => err.hint("set `prd:` in .boulder/streams.yaml to your PRD's path"),
            None => err,
        }
    })?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    parse_prd(bytes, &path.display().to_string(), &name)
}

/// Where people keep PRDs, as (folder, file name): `prd*` is any name starting with `prd`
/// and ending in `.md` or `.json`. Ralph keeps `scripts/ralph/prd.json` (or `prd.json`,
/// `.ralph/prd.json`), its PRD skill writes `tasks/prd-NAME.md`, and git-boulder's default is
/// `.agents/tasks/prd.md`.
pub const PRD_PLACES: &[(&str, &str)] = &[
    (".agents/tasks", "prd*"),
    ("scripts/ralph", "prd.json"),
    ("", "prd.json"),
    ("tasks", "prd*"),
    ("", "PRD.md"),
    (".ralph", "prd.json"),
];

/// Those of `paths` (relative to the repository root) at a place of [`PRD_PLACES`], in the
/// order of the places, by name within one.
pub fn usual_prd_places(paths: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut found: Vec<(usize, String)> = paths
        .into_iter()
        .filter_map(|p| {
            let (dir, name) = p.rsplit_once('/').unwrap_or(("", &p));
            let at = PRD_PLACES.iter().position(|(d, n)| {
                *d == dir
                    && match n.strip_suffix('*') {
                        Some(stem) => name.starts_with(stem) && (name.ends_with(".md") || name.ends_with(".json")),
                        None => name == *n,
                    }
            })?;
            Some((at, p))
        })
        .collect();
    found.sort();
    found.dedup();
    found.into_iter().map(|(_, p)| p).collect()
}

/// The plan's `prd` (without a plan, the default), refused when it leaves the repository as
/// written ([`plan::prd_problem`]).
fn plan_prd(plan: Option<&Plan>) -> Result<&str> {
    let rel = plan.map(|p| p.prd.as_str()).unwrap_or(plan::DEFAULT_PRD);
    match plan::prd_problem(rel) {
        Some(message) => Err(Error::usage(message).hint(plan::PRD_HINT)),
        None => Ok(rel),
    }
}

/// Parse PRD bytes read from `label` (a path, or `branch:path`); `name` is the file's name.
fn parse_prd(bytes: Vec<u8>, label: &str, name: &str) -> Result<(String, Prd)> {
    let text = utf8(bytes, label)?;
    let name = name.rsplit('/').next().unwrap_or(name);
    let _span = crate::trace::span("parse the PRD");
    let prd = prd::parse(name, &text)
        .map_err(|e| Error::usage(format!("{label}: {e}")).hint("fix the PRD at the place named").with_source(e))?;
    for w in &prd.warnings {
        eprintln!("warning: {}: {}", crate::text::inert(label), crate::text::inert_lines(w));
    }
    Ok((text, prd))
}
