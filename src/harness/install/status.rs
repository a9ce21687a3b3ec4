//! `agent status` and what `doctor` reports of the harnesses: each installed file's standing
//! (present, modified, missing, stale, broken) in every worktree, and Codex's trust of the hooks.

use super::*;

/// One file's standing in `agent status`.
#[derive(Debug, Clone, Serialize)]
pub struct FileStatus {
    pub worktree: PathBuf,
    pub file: String,
    /// `present` (as install wrote it), `modified` (changed since, entries intact), `missing`
    /// (no file, or none of git-boulder's entries), `stale` (another command or an older plugin),
    /// `broken` (not readable as the harness's file).
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Codex only: what Codex says it does with git-boulder's hooks in this worktree (asked when
    /// `codex` is on `PATH`; see [`HarnessStatus::trust`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust: Option<Trust>,
}

impl FileStatus {
    /// A state `doctor` reports.
    pub fn is_problem(&self) -> bool {
        matches!(self.state, "missing" | "stale" | "broken")
    }
}

/// One harness in `agent status`.
#[derive(Debug, Clone, Serialize)]
pub struct HarnessStatus {
    pub harness: Harness,
    pub installed: bool,
    /// The file `--commit` writes, when the current worktree tracks it with git-boulder's entries.
    pub committed: bool,
    /// What the harness runs (the OpenCode plugin runs `check`).
    pub command: String,
    pub files: Vec<FileStatus>,
    /// Codex only, when it is installed or committed: its trust of git-boulder's hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust: Option<TrustReport>,
}

/// Codex's trust of git-boulder's hooks, over every worktree.
#[derive(Debug, Clone, Serialize)]
pub struct TrustReport {
    /// `trusted` (Codex runs them everywhere), `untrusted`, `modified` (changed since trusted:
    /// an upgrade), `disabled`, `not_loaded` (somewhere Codex loads none of them) — the worst
    /// of the worktrees' — or `unknown` (`codex` not on `PATH`, or no answer).
    pub state: &'static str,
    /// The `codex` asked.
    pub codex: Option<PathBuf>,
    /// Why unknown, or what Codex does and how to make it trust the hooks.
    pub detail: String,
}

/// `agent status`: every harness, and `git-boulder` on `PATH` (the installed commands run
/// `git boulder`, which git finds there).
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub on_path: Option<PathBuf>,
    pub harnesses: Vec<HarnessStatus>,
}

/// `agent status`.
pub fn status(repo: &Repo) -> Result<Status> {
    let record = load(repo)?;
    let worktrees = worktrees(repo)?;
    let mut harnesses = Vec::new();
    for harness in Harness::ALL {
        let installed = record.harnesses.get(harness.as_str());
        let mut statuses = Vec::new();
        if let Some(inst) = installed {
            let rel = files::local_file(harness);
            for wt in &worktrees {
                let rec = inst.files.iter().find(|f| &f.worktree == wt && f.file == rel);
                let mut st = file_status(harness, wt, rel, rec)?;
                if harness == Harness::Codex {
                    codex_reads_main(repo, wt, &mut st)?;
                }
                statuses.push(st);
            }
        }
        let committed = match &repo.work_dir {
            Some(wt) if crate::git::index::is_tracked(wt, files::project_file(harness))? => {
                let bytes = read_opt(&wt.join(files::project_file(harness)))?;
                files::presence(harness, bytes.as_deref()) == Presence::Present
            }
            _ => false,
        };
        harnesses.push(HarnessStatus {
            harness,
            installed: installed.is_some(),
            committed,
            command: match harness {
                Harness::Opencode => "git boulder check --json".to_string(),
                _ => files::command(harness),
            },
            trust: None,
            files: statuses,
        });
    }
    if let Some(h) = harnesses.iter_mut().find(|h| h.harness == Harness::Codex && (h.installed || h.committed)) {
        h.trust = Some(codex_trust(repo, &worktrees, &mut h.files));
    }
    Ok(Status { on_path: crate::fsutil::on_path("git-boulder"), harnesses })
}

fn file_status(harness: Harness, wt: &Path, rel: &str, rec: Option<&FileRecord>) -> Result<FileStatus> {
    let bytes = read_opt(&wt.join(rel))?;
    let (state, detail) = match files::presence(harness, bytes.as_deref()) {
        Presence::Present => match (rec, &bytes) {
            (Some(r), Some(b)) if id_of(b) != r.wrote => ("modified", None),
            _ => ("present", None),
        },
        Presence::Stale => ("stale", Some(format!("expected {}", stale_detail(harness)))),
        Presence::Missing if bytes.is_none() => ("missing", Some("no file".to_string())),
        Presence::Missing => ("missing", Some("git-boulder's hooks are not in it".to_string())),
        Presence::Broken(e) => ("broken", Some(e.to_string())),
    };
    Ok(FileStatus { worktree: wt.to_owned(), file: rel.to_string(), state, detail, trust: None })
}

/// Ask the `codex` on `PATH` what it does with git-boulder's hooks in each worktree, and set
/// each file's `trust`. Never an error: without an answer the trust is `unknown`.
fn codex_trust(repo: &Repo, worktrees: &[PathBuf], files: &mut [FileStatus]) -> TrustReport {
    let Some(codex) = crate::fsutil::on_path("codex") else {
        return TrustReport {
            state: "unknown",
            codex: None,
            detail: "codex is not on PATH, so its trust of git-boulder's hooks is unknown; Codex skips an \
                     untrusted hook without a word: check /hooks in codex"
                .to_string(),
        };
    };
    let answers = match codex_trust::ask(&codex, worktrees, &files::command(Harness::Codex)) {
        Ok(a) => a,
        Err(why) => return TrustReport { state: "unknown", codex: Some(codex), detail: why.to_string() },
    };
    for (wt, trust) in worktrees.iter().zip(&answers) {
        if let Some(f) = files.iter_mut().find(|f| &f.worktree == wt) {
            f.trust = Some(*trust);
        }
    }
    let rank = |t: &Trust| match t {
        Trust::Trusted => 0,
        Trust::NotLoaded => 1,
        Trust::Disabled => 2,
        Trust::Untrusted => 3,
        Trust::Modified => 4,
    };
    let worst = answers.iter().copied().max_by_key(rank).unwrap_or(Trust::Trusted);
    TrustReport {
        state: worst.as_str(),
        codex: Some(codex),
        detail: trust_detail(worst, repo.main_work_dir.as_deref()),
    }
}

/// What a trust means for the user, and what to do.
fn trust_detail(trust: Trust, main: Option<&Path>) -> String {
    let what = match trust {
        Trust::Trusted => return "Codex runs git-boulder's hooks in every worktree".to_string(),
        Trust::Untrusted => "Codex skips git-boulder's hooks without a word until you trust them",
        Trust::Modified => {
            "git-boulder's hooks changed since Codex trusted them (an upgrade changed the hook command), and Codex \
             skips them without a word until you trust them again"
        }
        Trust::Disabled => "git-boulder's hooks are turned off in Codex",
        Trust::NotLoaded => {
            "Codex loads none of git-boulder's hooks in some worktree (the project is not trusted in Codex, the \
             worktree has no .codex/ folder, or Codex's hooks are off)"
        }
    };
    format!("{what}: {}", trust_fix(trust, main))
}

/// The steps that make Codex run git-boulder's hooks again.
fn trust_fix(trust: Trust, main: Option<&Path>) -> String {
    match trust {
        Trust::Disabled => format!(
            "start `codex` in {}, type /hooks and turn the `git boulder agent hook codex` entries on",
            codex_trust::place(main)
        ),
        Trust::NotLoaded => format!(
            "start `codex` in {} and choose \"Trust and continue\" for the folder and \"Trust all and continue\" \
             for the hooks",
            codex_trust::place(main)
        ),
        _ => codex_trust::steps(main),
    }
}

/// Codex reads the hooks of a linked worktree from the main checkout's `.codex/hooks.json` (the
/// same folder relative to it), never from the worktree's own: the worktree's `.codex/` folder
/// only makes Codex look. A linked worktree whose own file is fine while the main checkout's lacks
/// git-boulder's hooks gets none of them: `missing`, saying why.
fn codex_reads_main(repo: &Repo, wt: &Path, st: &mut FileStatus) -> Result<()> {
    let Some(main) = repo.main_work_dir.as_deref() else { return Ok(()) };
    if crate::git::worktree::normalize(wt) == crate::git::worktree::normalize(main) {
        return Ok(());
    }
    if !matches!(st.state, "present" | "modified") {
        return Ok(());
    }
    let rel = files::local_file(Harness::Codex);
    let bytes = read_opt(&main.join(rel))?;
    if files::presence(Harness::Codex, bytes.as_deref()) != Presence::Present {
        st.state = "missing";
        st.detail = Some(format!(
            "Codex runs the hooks of the main checkout's {} in a linked worktree ({}), and that file lacks \
             git-boulder's hooks",
            rel,
            main.join(rel).display()
        ));
    }
    Ok(())
}

fn stale_detail(harness: Harness) -> String {
    match harness {
        Harness::Opencode => "the plugin of this git-boulder".to_string(),
        _ => format!("every hook to run `{}`", files::command(harness)),
    }
}

/// What `doctor` reports: per installed harness, a worktree whose file is missing, stale or
/// broken, with the command that fixes it.
pub fn problems(repo: &Repo) -> Result<Vec<(String, String)>> {
    let status = status(repo)?;
    let mut out = Vec::new();
    for h in &status.harnesses {
        for f in h.files.iter().filter(|f| f.is_problem()) {
            let detail = f.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default();
            // Install refuses a file it cannot read: that one is the user's to mend first.
            let fix = match f.state {
                "broken" => format!(
                    "fix {} (or move it aside), then git boulder agent install {}",
                    f.worktree.join(&f.file).display(),
                    h.harness
                ),
                _ => format!("git boulder agent install {}", h.harness),
            };
            out.push((
                format!("{} integration {} in {} ({}{detail})", h.harness, f.state, f.worktree.display(), f.file),
                fix,
            ));
        }
    }
    // Codex's trust: one problem per kind of refusal, naming the worktrees where Codex would run
    // none of git-boulder's hooks or skip some of them (a file that is itself a problem is
    // reported above).
    for h in status.harnesses.iter().filter(|h| h.trust.is_some()) {
        for trust in [Trust::Modified, Trust::Untrusted, Trust::Disabled, Trust::NotLoaded] {
            let wts: Vec<String> = h
                .files
                .iter()
                .filter(|f| f.trust == Some(trust) && !f.is_problem())
                .map(|f| f.worktree.display().to_string())
                .collect();
            if wts.is_empty() {
                continue;
            }
            let what = match trust {
                Trust::Modified => {
                    "changed since Codex trusted them (an upgrade changed the hook command): Codex skips them"
                }
                Trust::Untrusted => "not trusted in Codex: Codex skips them",
                Trust::Disabled => "turned off in Codex",
                _ => "not loaded by Codex (the project is not trusted in Codex, or hooks are off)",
            };
            out.push((
                format!("codex hooks {what} in {}", wts.join(", ")),
                trust_fix(trust, repo.main_work_dir.as_deref()),
            ));
        }
    }
    if status.harnesses.iter().any(|h| h.installed) && status.on_path.is_none() {
        out.push((
            "git-boulder is not on PATH: the installed agent hooks run `git boulder`".to_string(),
            "put the folder of git-boulder on PATH".to_string(),
        ));
    }
    Ok(out)
}
