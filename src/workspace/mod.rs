//! The workspace a command runs in: the repository, the stream plan in force (DESIGN §5) and the
//! PRD it names, with each stream's view of its stories.
//!
//! Here: opening it, the plan in force, and where stream worktrees go; the PRD in force and each
//! stream's stories in `stories.rs`.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::git::{ObjectId, Repo};
use crate::plan::{self, Plan, StreamDef};
use crate::prd::{self, Prd};

mod stories;

pub use stories::{load_prd, load_prd_settled, usual_prd_places, PRD_PLACES};

/// An opened repository plus where its plan comes from.
pub struct Workspace {
    pub repo: Repo,
    /// `--config PATH`, when given.
    pub config_override: Option<PathBuf>,
    /// PRDs parsed for streams, by blob id: stream worktrees and branches mostly hold the same
    /// PRD, so a dashboard of many streams parses each distinct one once.
    prds: std::sync::Mutex<std::collections::HashMap<ObjectId, Option<std::sync::Arc<Prd>>>>,
    /// [`Workspace::worktree_dir`] once resolved, by `settings.worktree_dir`: resolving walks
    /// every component of the path (a `readlink` each), and a dashboard of 1,000 streams asks
    /// for it twice per stream.
    worktree_dirs: std::sync::Mutex<Option<(String, PathBuf)>>,
}

/// Where the plan in force was read from, for messages.
#[derive(Debug, Clone)]
pub struct PlanSource {
    pub label: String,
}

impl Workspace {
    /// A workspace over an opened repository.
    pub fn from_repo(repo: Repo, config_override: Option<PathBuf>) -> Workspace {
        Workspace { repo, config_override, prds: Default::default(), worktree_dirs: Default::default() }
    }

    /// Discover the repository from the current directory.
    pub fn open(config_override: Option<PathBuf>) -> Result<Workspace> {
        let repo = Repo::discover()?;
        Ok(Workspace::from_repo(repo, config_override))
    }

    /// The root that relative plan paths (PRD, worktree_dir) are resolved against: the main worktree.
    pub fn root(&self) -> Result<&Path> {
        self.repo.main_work_dir.as_deref().ok_or_else(|| {
            Error::usage("this command needs a work tree, but the repository is bare")
                .hint("run it in a clone with a work tree")
        })
    }

    /// In a bare repository, the commit the plan is read from and its branch: the tip of HEAD's
    /// branch (the repository's default branch); when the plan there names another
    /// `settings.base_branch` that exists, that branch's tip. `None` with a work tree, or when
    /// there is no commit.
    pub fn bare_source(&self) -> Result<Option<(ObjectId, String)>> {
        if !self.repo.is_bare() {
            return Ok(None);
        }
        let (tip, name) = match self.repo.head_branch() {
            Some(b) => match self.repo.branch_tip(&b)? {
                Some(t) => (t, b),
                None => return Ok(None),
            },
            None => match self.repo.ref_id("HEAD")? {
                Some(t) => (t, "HEAD".to_string()),
                None => return Ok(None),
            },
        };
        let base = self
            .repo
            .file_at(tip, plan::PLAN_PATH)?
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|text| plan::parse(&text).ok())
            .map(|p| p.settings.base_branch)
            .filter(|b| *b != name);
        if let Some(base) = base {
            if let Some(t) = self.repo.branch_tip(&base)? {
                return Ok(Some((t, base)));
            }
        }
        Ok(Some((tip, name)))
    }

    /// The commit whose tree stands for the repository's files: HEAD, or in a bare repository
    /// the base branch's tip (see [`Workspace::bare_source`]).
    pub fn tree_commit(&self, plan: &Plan) -> Result<Option<ObjectId>> {
        if self.repo.is_bare() {
            if let Some(t) = self.repo.branch_tip(&plan.settings.base_branch)? {
                return Ok(Some(t));
            }
            return Ok(self.bare_source()?.map(|(t, _)| t));
        }
        self.repo.ref_id("HEAD")
    }

    /// The text of the plan in force and where it came from: `--config PATH`, else the main
    /// worktree's `.boulder/streams.yaml` on disk, else (bare repository) the file at the base
    /// branch's tip ([`Workspace::bare_source`]).
    pub fn plan_text(&self) -> Result<(String, PlanSource)> {
        if let Some(path) = &self.config_override {
            let bytes = read_plan(path).map_err(|e| {
                Error::usage(format!("cannot read the stream plan {}: {e}", path.display())).with_source(e)
            })?;
            let label = path.display().to_string();
            return Ok((utf8(bytes, &label)?, PlanSource { label }));
        }
        if let Some(root) = &self.repo.main_work_dir {
            let path = root.join(plan::PLAN_PATH);
            return match read_plan(&path) {
                Ok(bytes) => Ok((utf8(bytes, plan::PLAN_PATH)?, PlanSource { label: plan::PLAN_PATH.into() })),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let err = no_plan(&root.display().to_string());
                    // Committed, but gone from the worktree: say how it comes back.
                    let committed = self
                        .repo
                        .ref_id("HEAD")
                        .ok()
                        .flatten()
                        .is_some_and(|head| self.repo.file_at(head, plan::PLAN_PATH).is_ok_and(|f| f.is_some()));
                    Err(match (committed, self.repo.sparse_checkout()) {
                        (false, _) => err,
                        (true, true) => err.hint("the plan is committed, outside this sparse checkout's cone: git sparse-checkout add .boulder"),
                        (true, false) => err.hint("the plan is committed but gone from here: git checkout HEAD -- .boulder/streams.yaml"),
                    })
                }
                Err(e) => Err(Error::usage(format!("cannot read {}: {e}", path.display())).with_source(e)),
            };
        }
        let (tip, branch) =
            self.bare_source()?.ok_or_else(|| no_plan("HEAD's branch (the repository has no commits)"))?;
        let bytes = self.repo.file_at(tip, plan::PLAN_PATH)?.ok_or_else(|| no_plan(&format!("{branch}'s tree")))?;
        let label = format!("{branch}:{}", plan::PLAN_PATH);
        Ok((utf8(bytes, &label)?, PlanSource { label }))
    }

    /// Parse the plan in force; errors name the file and the line. Its streams are the plan
    /// file's, then the [ad-hoc streams](Workspace::adhoc_streams) recorded in state.
    pub fn plan(&self) -> Result<Plan> {
        let (text, source) = self.plan_text()?;
        let mut plan = parse_plan(&text, &source)?;
        let names: std::collections::HashSet<&str> = plan.streams.iter().map(|s| s.name.as_str()).collect();
        let branches: std::collections::HashSet<&str> = plan.streams.iter().map(|s| s.branch.as_str()).collect();
        let adhoc = self.adhoc_streams(|name, branch| names.contains(name) || branches.contains(branch));
        plan.streams.extend(adhoc);
        Ok(plan)
    }

    /// The ad-hoc streams recorded in state (an `initialized` op with `adhoc: true`, made for a
    /// worktree Claude Code asked for): those live or merged (not cleaned up), named by no stream
    /// of the plan file (`taken(name, branch)`), whose branch no stream of the plan has. Each owns
    /// no paths and has no stories; its branch is `boulder/<name>`, computed here, never taken
    /// from state. State that cannot be read is no ad-hoc stream.
    pub fn adhoc_streams(&self, taken: impl Fn(&str, &str) -> bool) -> Vec<StreamDef> {
        let Ok(store) = crate::state::Store::new(&self.repo) else { return Vec::new() };
        let Ok(refs) = store.list(crate::state::STREAMS) else { return Vec::new() };
        refs.iter()
            .filter_map(|(refname, _)| refname.strip_prefix(crate::state::STREAMS))
            .filter_map(|name| self.adhoc_stream(&store, name, &taken))
            .collect()
    }

    /// The ad-hoc stream `name` ([`Workspace::adhoc_streams`]), reading its one op-log: for the
    /// post-commit hook, which needs only the stream of HEAD's branch (`boulder/<name>`).
    pub fn adhoc_stream(
        &self,
        store: &crate::state::Store,
        name: &str,
        taken: impl Fn(&str, &str) -> bool,
    ) -> Option<StreamDef> {
        if crate::names::problem(name).is_some() {
            return None;
        }
        let def = StreamDef::adhoc(name);
        if taken(name, &def.branch) {
            return None;
        }
        let e = store.read::<crate::state::StreamState>(&crate::state::stream_ref(name)).ok()??;
        let s = &e.state;
        (s.adhoc && (s.status.is_live() || s.status == crate::state::StreamStatus::Merged)).then_some(def)
    }

    /// The streams of the plan file by branch, when the repository has a plan, for the post-commit
    /// hook (which asks [`Workspace::adhoc_stream`] for an ad-hoc stream's branch). The plan is parsed
    /// once per text: the result is kept with the text it came from in
    /// `$GIT_COMMON_DIR/boulder/plan-branches` ([`plan::Branches`]), and used while the plan
    /// reads the same, byte for byte.
    pub fn plan_branches(&self) -> Result<Option<plan::Branches>> {
        if self.config_override.is_some() {
            return Ok(self.plan_if_any()?.as_ref().map(plan::Branches::of));
        }
        let Ok((text, source)) = self.plan_text() else { return Ok(None) };
        let cache = self.repo.boulder_dir().join("plan-branches");
        if let Some(branches) = std::fs::read(&cache).ok().and_then(|b| plan::Branches::decode(&b, &text)) {
            return Ok(Some(branches));
        }
        let branches = plan::Branches::of(&parse_plan(&text, &source)?);
        // Best effort, and not flushed to disk: a file cut short by a crash reads as no file.
        let _ = crate::fsutil::write_replacing(&cache, &branches.encode(&text));
        Ok(Some(branches))
    }

    /// The plan, when the repository has one: `None` without a plan file, an error when the file is
    /// there and does not parse — which hooks and gates must say rather than act as if there were
    /// no plan (every edit allowed, every stop let through, no commit counted).
    pub fn plan_if_any(&self) -> Result<Option<Plan>> {
        match self.plan() {
            Ok(plan) => Ok(Some(plan)),
            Err(_) if self.plan_absent() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether there is no plan file at all (as opposed to one that cannot be read or parsed):
    /// none in the main worktree, or, bare, none at the base branch's tip (or no commits). A plan
    /// given with `--config` is never absent.
    fn plan_absent(&self) -> bool {
        if self.config_override.is_some() {
            return false;
        }
        if let Some(root) = &self.repo.main_work_dir {
            return std::fs::metadata(root.join(plan::PLAN_PATH))
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        }
        match self.bare_source() {
            Ok(None) => true,
            Ok(Some((tip, _))) => self.repo.file_at(tip, plan::PLAN_PATH).is_ok_and(|f| f.is_none()),
            Err(_) => false,
        }
    }

    /// The stream whose branch this worktree's HEAD is on, if any.
    pub fn here_stream<'p>(&self, plan: &'p Plan) -> Option<&'p StreamDef> {
        self.repo.head_branch().and_then(|b| plan.stream_for_branch(&b))
    }

    /// The stream named `name`, or a usage error listing the streams there are.
    pub fn stream<'p>(&self, plan: &'p Plan, name: &str) -> Result<&'p StreamDef> {
        crate::names::validate("stream", name)?;
        plan.stream(name).ok_or_else(|| {
            let known: Vec<&str> = plan.streams.iter().map(|s| s.name.as_str()).collect();
            Error::usage(format!("no stream {name:?} in the stream plan")).hint(if known.is_empty() {
                "the plan has no streams yet; add one to .boulder/streams.yaml".to_string()
            } else {
                format!("streams: {}", known.join(", "))
            })
        })
    }
    /// `stream suggest`: a plan proposed from the PRD (the one `explicit` names, else the one an
    /// existing plan names, else the one found at a usual place), for the base an existing plan sets explicitly,
    /// else the repository's real default branch, else `main`.
    pub fn suggest_plan(&self, explicit: Option<&Path>) -> Result<String> {
        // The PRD path comes from an existing plan when it parses, else the default.
        let existing = self.plan().ok();
        if existing.is_none() && explicit.is_none() {
            self.find_prd(None)?;
        }
        let prd_path = self.prd_path(existing.as_ref(), explicit)?;
        let (_, prd) = load_prd(&prd_path)?;
        let root = self.root()?;
        let prd_rel = prd_path.strip_prefix(root).unwrap_or(&prd_path).to_string_lossy().replace('\\', "/");
        let explicit_base =
            self.plan_text().is_ok_and(|(text, _)| text.lines().any(|l| l.trim_start().starts_with("base_branch:")));
        let base = existing
            .as_ref()
            .filter(|_| explicit_base)
            .map(|p| p.settings.base_branch.clone())
            .or_else(|| self.repo.default_branch())
            .unwrap_or_else(|| "main".into());
        let tree_paths = match self.repo.ref_id("HEAD")? {
            Some(head) => self.repo.tree_paths(head)?,
            None => Vec::new(),
        };
        let branch_exists = |name: &str| self.repo.branch_tip(name).ok().flatten().is_some();
        Ok(plan::suggest::propose(
            &prd,
            &prd_rel,
            &base,
            &plan::suggest::Repo { tree_paths: &tree_paths, branch_exists: &branch_exists },
        ))
    }

    /// `stream validate`: the plan in force and what is wrong with it — against its PRD's story
    /// ids, the files of the commit it is read from, and where worktrees would go.
    pub fn validate_plan(&self) -> Result<(Plan, Vec<plan::Finding>)> {
        let plan = self.plan()?;
        let mut findings = Vec::new();
        let ids = match self.load_prd(Some(&plan), None) {
            Ok((_, prd)) => Some(prd.stories.iter().map(|s| s.id.clone()).collect::<Vec<_>>()),
            // A `prd:` that leaves the repository as written is plan::validate's finding.
            Err(_) if plan::prd_problem(&plan.prd).is_some() => None,
            Err(e) => {
                findings.push(plan::Finding {
                    severity: plan::Severity::Error,
                    code: "prd",
                    message: e.message.clone(),
                    hint: e.hints.first().cloned(),
                });
                None
            }
        };
        let tree_paths = match self.tree_commit(&plan)? {
            Some(head) => self.repo.tree_paths(head)?,
            None => Vec::new(),
        };
        findings.extend(plan::validate(&plan, ids.as_deref(), &tree_paths));
        if let (Ok(_), Err(e)) = (self.root(), self.worktree_dir(&plan)) {
            let hint = Some(e.hints.join("; "));
            findings.push(plan::Finding {
                severity: plan::Severity::Error,
                code: "worktree_dir",
                message: e.message,
                hint,
            });
        }
        Ok((plan, findings))
    }

    /// The worktree path of a stream, always computed locally from the plan.
    pub fn worktree_path(&self, plan: &Plan, stream: &str) -> Result<PathBuf> {
        Ok(self.worktree_dir(plan)?.join(stream))
    }

    /// The folder stream worktrees go in (absolute, symlinks resolved): `settings.worktree_dir`
    /// against the main worktree. It
    /// must resolve (symlinks followed) inside the main worktree's folder, or inside its parent
    /// folder but not in a hidden folder there (`../repo-worktrees`, the sibling layout), unless
    /// the user's own `git config boulder.worktreeRoot` names a folder that holds it.
    pub fn worktree_dir(&self, plan: &Plan) -> Result<PathBuf> {
        let mut cached = self.worktree_dirs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((setting, dir)) = cached.as_ref() {
            if *setting == plan.settings.worktree_dir {
                return Ok(dir.clone());
            }
        }
        let dir = self.resolve_worktree_dir(plan)?;
        *cached = Some((plan.settings.worktree_dir.clone(), dir.clone()));
        Ok(dir)
    }

    fn resolve_worktree_dir(&self, plan: &Plan) -> Result<PathBuf> {
        let root = self.root()?;
        let dir = root.join(&plan.settings.worktree_dir);
        let real = resolve(&dir);
        let real_root = resolve(root);
        // Never inside the repository's git folder: files checked out there would be git's own
        // (hooks, config) — a plan with `worktree_dir: .git` and a stream named `hooks`.
        if [&self.repo.common_dir, &self.repo.git_dir].iter().any(|g| real.starts_with(resolve(g))) {
            return Err(Error::usage(format!(
                "settings.worktree_dir {:?} resolves to {}, inside the repository's git folder: what a worktree checks out there would be git's own files (hooks, config)",
                crate::text::inert(&plan.settings.worktree_dir),
                real.display()
            ))
            .hint("use a folder outside .git (default .boulder/worktrees)"));
        }
        if real.starts_with(&real_root) {
            return Ok(real);
        }
        if let Some(below) = real_root.parent().and_then(|p| real.strip_prefix(p).ok()) {
            if !below.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.')) {
                return Ok(real);
            }
        }
        if let Some(allowed) = self.repo.config_string("boulder.worktreeRoot").filter(|v| !v.is_empty()) {
            let allowed = match allowed.strip_prefix("~/") {
                Some(rest) => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(rest),
                None => root.join(allowed),
            };
            if real.starts_with(resolve(&allowed)) {
                return Ok(real);
            }
        }
        let parent = real_root.parent().unwrap_or(&real_root);
        Err(Error::usage(format!(
            "settings.worktree_dir {:?} resolves to {}: worktrees must stay inside the repository's folder {} or beside it in {} (not in a hidden folder)",
            crate::text::inert(&plan.settings.worktree_dir),
            real.display(),
            real_root.display(),
            parent.display()
        ))
        .hint("use a folder inside the repository (default .boulder/worktrees) or beside it (../NAME-worktrees)")
        .hint("to keep worktrees elsewhere, name that place in your own git config: git config boulder.worktreeRoot PATH"))
    }
}

/// Parse the plan `text` read from `source`; errors name the file and line.
fn parse_plan(text: &str, source: &PlanSource) -> Result<Plan> {
    let _span = crate::trace::span("parse the stream plan");
    plan::parse(text).map_err(|e| {
        Error::usage(format!("{}: {}", source.label, e.message))
            .hint("fix the stream plan, then check it with `git boulder stream validate`")
            .with_source(e)
    })
}

/// The bytes of a stream plan file: read as a PRD is ([`prd::read_file`]: a regular file, bounded),
/// so a plan symlinked to `/dev/zero` is refused rather than read until memory runs out.
fn read_plan(path: &Path) -> std::io::Result<Vec<u8>> {
    prd::read_file(path).map_err(|e| match prd::ReadRefusal::of(&e) {
        Some(prd::ReadRefusal::TooLarge) => std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("it is larger than {} MiB; a plan is at most 8 MiB of text", prd::MAX_BYTES >> 20),
        ),
        _ => e,
    })
}

/// `path` made absolute with every symlink in it resolved, component by component (`..` after a
/// symlink goes to the parent of its target, as the OS would); the part that does not exist yet
/// is taken by name.
fn resolve(path: &Path) -> PathBuf {
    use std::path::Component;
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map(|c| c.join(path)).unwrap_or_else(|_| path.to_path_buf())
    };
    let mut out = PathBuf::new();
    let mut real = true;
    for c in abs.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => out.push(c),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
                real = std::fs::symlink_metadata(&out).is_ok();
            }
            Component::Normal(name) => {
                out.push(name);
                if real {
                    match std::fs::canonicalize(&out) {
                        Ok(r) => out = r,
                        Err(_) => real = false,
                    }
                }
            }
        }
    }
    out
}

fn utf8(bytes: Vec<u8>, label: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        Error::usage(format!("{label} is not valid UTF-8 (first bad byte at offset {})", e.utf8_error().valid_up_to()))
            .hint("save the file as UTF-8")
    })
}

/// A repository that cannot be opened is a usage error, with how to get one git-boulder can use.
impl From<crate::git::OpenError> for Error {
    fn from(e: crate::git::OpenError) -> Error {
        use crate::git::OpenError as E;
        let hint = match &e {
            E::NotFound { .. } | E::NotARepository { .. } => {
                Some("run git boulder inside a git repository, or create one with `git init`")
            }
            E::RefStorage(_) => Some(
                "convert it with `git refs migrate --ref-format=files` (no linked worktrees; git 2.48+, or 2.46 and 2.47 for a repository without reflogs), or clone it in the files format: `git clone --ref-format=files --no-local REPO NEW`",
            ),
            E::ObjectFormat(_) => Some("use git-boulder in a SHA-1 repository (`git init --object-format=sha1`)"),
            E::CannotOpen { .. } => None,
        };
        let err = Error::usage(e.to_string());
        let err = if let Some(h) = hint { err.hint(h) } else { err };
        err.with_source(e)
    }
}

fn no_plan(place: &str) -> Error {
    Error::usage(format!("no stream plan: {} not found in {place}", plan::PLAN_PATH))
        .hint("write one with `git boulder stream suggest --write`, or pass --config PATH")
}
