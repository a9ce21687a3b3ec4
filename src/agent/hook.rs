//! `agent hook HARNESS`: one JSON payload on stdin, the harness's answer out. What is decided is
//! the same for every harness: the boulder gates of `check` when the agent stops ([`stop`]), the
//! stream's context when a session starts ([`session_context`]), the ownership rules of the git
//! hooks when a file is about to be written ([`edit`]). How a payload is read and an answer worded
//! is each harness's own: [`super::claude`], [`super::codex`], [`super::opencode`]; what two of them
//! share is here ([`deny`], the denial Claude Code and Codex both read; [`patch_files`], the patch
//! format of Codex and of OpenCode's patch tools), so no harness's adapter reads another's.
//!
//! The workspace is the one at the payload's `cwd`, not the process's. Outside a git repository,
//! or in one without git-boulder state (no plan, no PRD at the default path, no boulder), every
//! answer is "go on" and nothing is written.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::boulder::enforce::{check, check_continued, Overrides};
use crate::boulder::tree;
use crate::error::{Error, Result};
use crate::git::Repo;
use crate::plan::ownership::{check_paths, Rule};
use crate::plan::Level;
use crate::state::{self, BoulderOp, BoulderState, Opt, Store};
use crate::workspace::Workspace;

/// The largest payload read. Most are a few kilobytes, but a `Write` carries the whole file: a
/// lock file or generated code of several megabytes must still be judged, not let through
/// unread. 64 MiB, the bound of a PRD.
pub const MAX_PAYLOAD: u64 = 64 << 20;

/// The longest story text put into a session's context.
const MAX_STORY_TEXT: usize = 16 * 1024;

/// One payload: a JSON object, unknown fields kept (and ignored).
#[derive(Debug, Clone)]
pub struct Payload(pub Map<String, Value>);

impl Payload {
    /// Read one JSON object of at most [`MAX_PAYLOAD`] bytes.
    pub fn read(input: impl Read) -> Result<Payload> {
        Payload::parse(&read_raw(input)?)
    }

    /// One JSON object from the bytes [`read_raw`] read.
    pub fn parse(bytes: &[u8]) -> Result<Payload> {
        if bytes.len() as u64 > MAX_PAYLOAD {
            return Err(Error::refused(format!("the hook payload is larger than {MAX_PAYLOAD} bytes")));
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(Error::refused("no hook payload on stdin (expected one JSON object)"));
        }
        match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Object(map)) => Ok(Payload(map)),
            Ok(_) => Err(Error::refused("the hook payload is not a JSON object")),
            Err(e) => Err(Error::refused(format!("the hook payload is not JSON: {e}"))),
        }
    }

    /// A string field; `None` when missing, `null` or not a string.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    /// A boolean field; false when missing or not a boolean.
    pub fn flag(&self, key: &str) -> bool {
        self.0.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    /// Whether the field is there and not `null`.
    pub fn has(&self, key: &str) -> bool {
        self.0.get(key).is_some_and(|v| !v.is_null())
    }

    /// `hook_event_name`.
    pub fn event(&self) -> Result<&str> {
        self.str("hook_event_name").ok_or_else(|| Error::refused("the hook payload has no hook_event_name"))
    }

    /// `cwd`, the folder the agent works in.
    pub fn cwd(&self) -> Result<PathBuf> {
        match self.str("cwd") {
            Some(c) if !c.is_empty() => Ok(PathBuf::from(c)),
            _ => Err(Error::refused("the hook payload has no cwd")),
        }
    }
}

/// The bytes on stdin, at most one more than [`MAX_PAYLOAD`] (so that a larger payload is seen).
pub fn read_raw(input: impl Read) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    input
        .take(MAX_PAYLOAD + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::refused(format!("cannot read the hook payload on stdin: {e}")))?;
    Ok(bytes)
}

/// The string value of the top-level `key` of a payload that did not parse, found by scanning its
/// text: a key whose quotes are not escaped (a quote inside a JSON string always is), the same
/// value every time it occurs. `None` when it is not there, or not one clear value.
pub fn scan_field(raw: &[u8], key: &str) -> Option<String> {
    let needle = format!("\"{key}\"");
    let needle = needle.as_bytes();
    let mut found: Option<String> = None;
    let mut at = 0;
    while let Some(pos) = raw[at..].windows(needle.len()).position(|w| w == needle) {
        let start = at + pos;
        at = start + needle.len();
        let backslashes = raw[..start].iter().rev().take_while(|b| **b == b'\\').count();
        if backslashes % 2 == 1 {
            continue;
        }
        let rest = &raw[at..];
        let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
        let Some(rest) = rest.strip_prefix(b":") else { continue };
        let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
        let rest = rest.strip_prefix(b"\"")?;
        let end = rest.iter().position(|b| *b == b'"' || *b == b'\\')?;
        if rest[end] != b'"' {
            return None;
        }
        let value = String::from_utf8(rest[..end].to_vec()).ok()?;
        match &found {
            Some(v) if *v != value => return None,
            _ => found = Some(value),
        }
    }
    found
}

/// An edit whose payload git-boulder could not read (`why`), in the session at `session`: the
/// reason to deny it with when that is a stream's worktree under `ownership: error` — an edit
/// git-boulder cannot judge is never let through there. `None` anywhere else (outside a
/// repository, without git-boulder state, in the main worktree, under `ownership: warn|off`), and
/// when the scanned text names another event or a tool that writes no file.
pub fn unreadable_edit(session: &Path, raw: &[u8], why: &str, edit_tools: &[&str]) -> Option<String> {
    if scan_field(raw, "hook_event_name").is_some_and(|e| e != "PreToolUse") {
        return None;
    }
    if scan_field(raw, "tool_name").is_some_and(|t| !edit_tools.contains(&t.as_str())) {
        return None;
    }
    let ws = open(session)?;
    let plan = ws.plan_if_any().ok()??;
    let stream = ws.here_stream(&plan)?;
    if plan.settings.ownership != Level::Error {
        return None;
    }
    let me = crate::text::inert(&stream.name).into_owned();
    record_denial(&ws, "(unreadable payload)", "unreadable", None);
    Some(format!(
        "git-boulder could not read this edit's hook payload ({}), so it cannot tell which file it writes; in \
         the worktree of stream {me} an edit it cannot judge is denied. Retry it with content that is valid \
         JSON text (no unpaired UTF-16 surrogates, at most 128 levels of nesting, at most {} MiB).",
        crate::text::inert(why),
        MAX_PAYLOAD >> 20
    ))
}

/// A `PreToolUse` denial with `reason`, in the form Claude Code and Codex both read.
pub fn deny(reason: String) -> Value {
    json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": reason}})
}

/// Every file a patch in Codex's `apply_patch` format (which OpenCode's patch tools take too) adds, updates, deletes or moves to, in the
/// order they come (`*** Add File: P`, `*** Update File: P`, `*** Delete File: P`, `*** Move to:
/// P`).
pub fn patch_files(patch: &str) -> Vec<String> {
    const HEADERS: &[&str] = &["*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"];
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim_start();
        for h in HEADERS {
            if let Some(path) = line.strip_prefix(h) {
                let path = path.trim();
                if !path.is_empty() && !out.iter().any(|p| p == path) {
                    out.push(path.to_string());
                }
            }
        }
    }
    out
}

/// The workspace at `cwd`, when it is a git repository with git-boulder state.
pub fn open(cwd: &Path) -> Option<Workspace> {
    let repo = Repo::discover_at(cwd).ok()?;
    let ws = Workspace::from_repo(repo, None);
    has_state(&ws).then_some(ws)
}

/// A plan, a PRD at the default path, or any boulder: git-boulder is in use here.
fn has_state(ws: &Workspace) -> bool {
    if ws.plan_text().is_ok() {
        return true;
    }
    if ws.prd_path(None, None).is_ok_and(|p| p.is_file()) {
        return true;
    }
    Store::new(&ws.repo).and_then(|s| s.list(state::BOULDERS)).is_ok_and(|l| !l.is_empty())
}

/// The agent is stopping: run the gates of `check` on this worktree's boulder with the agent's
/// last message (recording an enforcement as `check` does). `Some(message)` to send the agent
/// back to work with; `None` to let it stop (no boulder here, or a gate said so).
///
/// `continued`: the agent is already going on because of a stop hook (`stop_hook_active`), and
/// the harness honours fewer than this many blocks in a row: held again only on new work (see
/// [`check_continued`]).
pub fn stop(ws: &Workspace, message: Option<&str>, continued: Option<u32>) -> Result<Option<String>> {
    // A plan that does not parse is an error, never a reason to let the agent stop unchecked.
    ws.plan_if_any()?;
    let Ok(id) = tree::target(ws, None) else { return Ok(None) };
    if tree::read(&Store::new(&ws.repo)?, &id)?.is_none() {
        return Ok(None);
    }
    let c = match continued {
        Some(cap) => check_continued(ws, &id, cap, message)?,
        None => check(ws, &id, &Overrides::default(), false, message)?,
    };
    Ok(c.decision.enforce.then(|| crate::text::inert_lines(&c.message).into_owned()))
}

/// What the harness says it spent (`read`, called only in a stream's worktree) recorded on this
/// worktree's stream, then the stream's budget verdict: `Some(why)` when its budget, or the
/// plan's, is spent — the agent is then let stop, told why. Never an error: the hook's answer
/// does not depend on whether the amounts could be read or recorded (what could not is kept for
/// `doctor` and said under `-v`, see [`super::usage::note`]).
pub fn spent(ws: &Workspace, source: &str, read: impl FnOnce() -> super::usage::Usage) -> Option<String> {
    let plan = ws.plan_if_any().ok()??;
    let stream = ws.here_stream(&plan)?.name.clone();
    let usage = {
        let _t = crate::trace::span(format!("agent hook: read {source} usage"));
        read()
    };
    let what = format!("{source} usage of stream {stream}");
    let mut failed = None;
    if !usage.amounts.is_empty() {
        let _t = crate::trace::span(format!("agent hook: record {} amount(s)", usage.amounts.len()));
        match crate::spend::record(ws, &stream, usage.amounts.clone()) {
            Ok(n) => crate::trace::line(&format!("agent hook: {n} new amount(s) recorded on stream {stream}")),
            Err(e) => failed = Some(format!("not recorded: {}", e.message)),
        }
    }
    super::usage::note(ws, &what, &usage, failed);
    let verdict = crate::spend::verdict(ws, &plan, &stream).ok()?;
    let line = verdict.line()?;
    let fix = match &verdict {
        crate::spend::Verdict::Spent { why: crate::spend::Why::Plan, .. } => {
            "raise settings.budget in the plan, or `git boulder spend reset STREAM` for the streams it counts"
                .to_string()
        }
        _ => format!("raise stream {stream}'s budget in the plan, or run `git boulder spend reset {stream}`"),
    };
    Some(
        crate::text::inert_lines(&format!(
            "git-boulder: {line}. Stream {stream} is not held at this stop: the agent may stop. To go on, {fix}."
        ))
        .into_owned(),
    )
}

/// What an agent starting (or resuming) a session here is told: its stream, the next story with
/// its text, where it may write and what it may only read, the last checkpoint and open todos;
/// in the main worktree or without a plan, the project boulder's view (the PRD, its waves, the
/// current story). Text from the PRD and the op-log is kept, terminal controls made inert.
pub fn session_context(ws: &Workspace) -> Result<String> {
    let plan = ws.plan_if_any()?;
    let r = crate::boulder::resume::resume(ws)?;
    let here = plan.as_ref().and_then(|p| ws.here_stream(p));
    let clean = |t: &str| crate::text::inert_lines(t).into_owned();
    let mut s = String::new();
    let prd = ws.root().ok().and_then(|root| r.prd.strip_prefix(root).ok()).unwrap_or(&r.prd);
    let iteration = r.state.as_ref().map(|b| b.iteration).unwrap_or(0);
    let boulder = r.boulder.as_deref().unwrap_or_default();
    match (&plan, here) {
        (Some(plan), Some(stream)) => {
            s.push_str(&format!(
                "git-boulder: you are working on stream {} (boulder {}, iteration {iteration}) in this worktree.\n",
                clean(&stream.name),
                clean(boulder)
            ));
            s.push_str(&format!(
                "You may change only these paths (stream {} owns them): {}\n",
                clean(&stream.name),
                clean(&crate::stream::prompt::owned_paths(plan, &stream.name))
            ));
            s.push_str(&format!(
                "Read-only paths (read them, never change them): {}\n",
                clean(&crate::stream::prompt::read_only_paths(plan))
            ));
            let others: Vec<String> = plan
                .streams
                .iter()
                .filter(|o| o.name != stream.name && !o.paths.is_empty())
                .map(|o| format!("{} ({})", o.paths.join(", "), o.name))
                .collect();
            if !others.is_empty() {
                s.push_str(&format!("Other streams own (never change them): {}\n", clean(&others.join("; "))));
            }
        }
        _ if r.boulder.is_none() => s.push_str(&format!(
            "git-boulder: this worktree is on no stream's branch and has no boulder; PRD: {}\n",
            clean(&prd.display().to_string())
        )),
        _ => {
            s.push_str(&format!(
                "git-boulder: project boulder {} (iteration {iteration}); PRD: {}\n",
                clean(boulder),
                clean(&prd.display().to_string())
            ));
            let waves: Vec<String> = r
                .waves
                .iter()
                .filter(|(w, _, _)| !w.is_empty())
                .map(|(w, d, t)| format!("wave {w}: {d}/{t}"))
                .collect();
            if !waves.is_empty() {
                s.push_str(&format!("Wave plan: {}\n", clean(&waves.join(", "))));
            }
        }
    }
    let done = r.stories.iter().filter(|st| st.status.is_done()).count();
    s.push_str(&format!("Progress: {done}/{} stories done.\n", r.stories.len()));
    match &r.next {
        Some(story) => {
            s.push_str(&format!("Next story: {}: {}\n", clean(&story.id), clean(&story.title)));
            let mut text = story.text.trim().to_string();
            if text.len() > MAX_STORY_TEXT {
                let mut cut = MAX_STORY_TEXT;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push_str("\n[…]");
            }
            s.push_str(&format!("--- story {} ---\n{}\n--- end of story ---\n", clean(&story.id), clean(&text)));
            s.push_str(&format!(
                "Commit your progress with git; mark the story done in {} when its acceptance criteria are met.\n",
                clean(&prd.display().to_string())
            ));
        }
        None if r.stories.is_empty() => {}
        None => s.push_str("No open story is ready.\n"),
    }
    if let Some(c) = r.state.as_ref().and_then(|b| b.checkpoint.as_ref()) {
        s.push_str(&format!("Last checkpoint ({}): {}\n", clean(&c.at), clean(&c.message)));
    }
    let todos: Vec<String> = r
        .state
        .iter()
        .flat_map(|b| b.todos.iter())
        .filter(|t| !t.done)
        .map(|t| format!("- {}: {}", clean(&t.id), clean(&t.text)))
        .collect();
    if !todos.is_empty() {
        s.push_str(&format!("Open todos:\n{}\n", todos.join("\n")));
    }
    Ok(s)
}

/// An edit of `file` (absolute, or relative to `cwd`) is about to happen in a session of the
/// worktree of `ws` (the session's project folder, whatever `cwd` the agent moved to):
/// `Some(reason)` when the worktree is a stream's and the stream may not change that path (by the
/// ownership rules of the pre-commit and pre-push hooks, under `ownership: error`) — the denial
/// is recorded on the worktree's boulder; `None` for everything else.
pub fn edit(ws: &Workspace, cwd: &Path, file: &Path) -> Result<Option<String>> {
    // No plan: nothing is owned. A plan that does not parse: an error, never every edit allowed.
    let Some(plan) = ws.plan_if_any()? else { return Ok(None) };
    let Some(stream) = ws.here_stream(&plan) else { return Ok(None) };
    if plan.settings.ownership != Level::Error {
        return Ok(None);
    }
    let Some(root) = ws.repo.work_dir.as_deref() else { return Ok(None) };
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let me = stream.name.clone();
    // From here on the edit is judged for a stream under `ownership: error`: an error of
    // git-boulder's own denies it, never lets it through.
    Ok(judge(ws, &plan, &me, &root, cwd, file).unwrap_or_else(|e| {
        Some(format!(
            "git-boulder could not judge this edit ({}); in the worktree of stream {me} an edit it cannot \
             judge is denied.",
            crate::text::inert(&e.message)
        ))
    }))
}

fn judge(
    ws: &Workspace,
    plan: &crate::plan::Plan,
    me: &str,
    root: &Path,
    cwd: &Path,
    file: &Path,
) -> Result<Option<String>> {
    let target = resolve(cwd, file);
    let shown_target = crate::text::inert(&target.display().to_string()).into_owned();
    if let Some(git) = in_git_data(ws, &target)? {
        let reason = format!(
            "{shown_target} is in {git}, git's own data for this repository's worktrees; stream {me} never writes \
             there (it would change what git records for every worktree). Use git commands instead."
        );
        record_denial(ws, &target.display().to_string(), "git_dir", None);
        return Ok(Some(reason));
    }
    if let Some(other) = other_worktree(ws, plan, root, &target)? {
        let reason = format!(
            "{shown_target} is in {other}, not in this worktree ({}); stream {me} works only in its own worktree. Make \
             the change here, in a path stream {me} owns, or leave it to that worktree's stream.",
            crate::text::inert(&root.display().to_string()),
        );
        record_denial(ws, &target.display().to_string(), "other_stream", None);
        return Ok(Some(reason));
    }
    let Ok(rel) = target.strip_prefix(root) else { return Ok(None) };
    if rel.as_os_str().is_empty() {
        return Ok(None);
    }
    let rel: String =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/");
    let found = check_paths(plan, me, &[(String::new(), rel.clone())]);
    let Some(v) = found.into_iter().find(|v| v.refused) else { return Ok(None) };
    let owned = crate::stream::prompt::owned_paths(plan, me);
    let shown = crate::text::inert(&rel);
    let reason = match (v.rule, v.owner.as_deref()) {
        (Rule::OtherStream, Some(owner)) => format!(
            "{shown} is owned by stream {owner}; stream {me} may change only its own paths ({owned}). Leave this \
             change to stream {owner} (note it with `git boulder todo add` if it is needed)."
        ),
        (Rule::SharedRead, _) => format!(
            "{shown} is shared_read: every stream may read it, none may change it. Stream {me} may change only its \
             own paths ({owned})."
        ),
        _ => format!(
            "{shown} is owned by no stream and settings.undeclared_paths is error; stream {me} may change only its \
             own paths ({owned})."
        ),
    };
    let rule = match v.rule {
        Rule::OtherStream => "other_stream",
        Rule::SharedRead => "shared_read",
        Rule::Undeclared => "undeclared",
    };
    record_denial(ws, &rel, rule, v.owner.as_deref());
    Ok(Some(reason))
}

/// Where `target` lies in git's own data of this repository, described for a reason: the common
/// git dir (objects, refs, hooks, config, every linked worktree's admin folder under
/// `worktrees/`), this worktree's git dir, or the `.git` file or folder of any of the
/// repository's worktrees.
fn in_git_data(ws: &Workspace, target: &Path) -> Result<Option<String>> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let common = canon(&ws.repo.common_dir);
    if target.starts_with(&common) {
        return Ok(Some(format!("the repository's git dir ({})", crate::text::inert(&common.display().to_string()))));
    }
    let own = canon(&ws.repo.git_dir);
    if target.starts_with(&own) {
        return Ok(Some(format!("this worktree's git dir ({})", crate::text::inert(&own.display().to_string()))));
    }
    let mut trees: Vec<PathBuf> = ws.repo.main_work_dir.iter().map(|m| canon(m)).collect();
    trees.extend(ws.repo.work_dir.iter().map(|w| canon(w)));
    for reg in crate::git::worktree::registrations(&ws.repo)? {
        trees.extend(reg.base.as_deref().map(canon));
        let admin = canon(&reg.admin);
        if target.starts_with(&admin) {
            return Ok(Some(format!(
                "the admin folder of a worktree ({})",
                crate::text::inert(&admin.display().to_string())
            )));
        }
    }
    for t in trees {
        let dot_git = t.join(".git");
        if target.starts_with(&dot_git) {
            return Ok(Some(format!("the .git of the worktree {}", crate::text::inert(&t.display().to_string()))));
        }
    }
    Ok(None)
}

/// The other worktree of this repository `target` lies in — the innermost one holding it, when
/// that is not this stream's worktree `root` (the main worktree holds the stream worktrees under
/// `worktree_dir`, so the innermost decides) — described for a reason: "the worktree of stream
/// X" or "the main worktree". `None` when `target` is in this worktree or in none of them.
fn other_worktree(ws: &Workspace, plan: &crate::plan::Plan, root: &Path, target: &Path) -> Result<Option<String>> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let main = ws.repo.main_work_dir.as_deref().map(canon);
    let mut trees: Vec<(PathBuf, Option<String>)> = main.clone().map(|m| (m, None)).into_iter().collect();
    for reg in crate::git::worktree::registrations(&ws.repo)? {
        if let Some(base) = &reg.base {
            trees.push((canon(base), reg.branch()));
        }
    }
    let Some((inner, branch)) =
        trees.into_iter().filter(|(t, _)| target.starts_with(t)).max_by_key(|(t, _)| t.as_os_str().len())
    else {
        return Ok(None);
    };
    if inner == root {
        return Ok(None);
    }
    Ok(Some(match branch.as_deref().and_then(|b| plan.stream_for_branch(b)) {
        Some(s) => format!("the worktree of stream {}", s.name),
        None if main.as_deref() == Some(inner.as_path()) => "the main worktree".to_string(),
        None => format!("another worktree ({})", crate::text::inert(&inner.display().to_string())),
    }))
}

/// Record a denied edit on the worktree's boulder, when it exists. A failure to record never
/// turns a denial into an error.
fn record_denial(ws: &Workspace, path: &str, rule: &str, owner: Option<&str>) {
    let mut path = path.to_string();
    if path.len() > 4096 {
        let mut cut = 4096;
        while !path.is_char_boundary(cut) {
            cut -= 1;
        }
        path.truncate(cut);
    }
    let recorded = (|| -> Result<()> {
        let id = tree::target(ws, None)?;
        let store = Store::new(&ws.repo)?;
        let op = BoulderOp::Denied {
            path,
            rule: rule.to_string(),
            owner: owner.map(str::to_owned).map_or(Opt::Absent, Opt::Set),
        };
        store.append_if::<BoulderState>(&state::boulder_ref(&id), |cur| Ok(cur.map(|_| op.clone())))?;
        Ok(())
    })();
    if let Err(e) = recorded {
        eprintln!("git-boulder: the denial was not recorded: {}", crate::text::inert(&e.message));
    }
}

/// `file` as an absolute path with symlinks resolved: its longest existing ancestor is
/// canonicalized (symlinks and `..` resolved by the file system), the rest appended with `.` and
/// `..` folded. A dangling symlink on the way is followed too: writing through it creates its
/// target.
pub fn resolve(cwd: &Path, file: &Path) -> PathBuf {
    let joined = if file.is_absolute() { file.to_path_buf() } else { cwd.join(file) };
    resolve_from(joined, 0)
}

/// As many links as Linux follows in one path (`ELOOP` past that).
const MAX_LINKS: usize = 40;

fn resolve_from(joined: PathBuf, links: usize) -> PathBuf {
    let comps: Vec<Component> = joined.components().collect();
    for i in (1..=comps.len()).rev() {
        let prefix: PathBuf = comps[..i].iter().collect();
        if let Ok(mut out) = std::fs::canonicalize(&prefix) {
            for c in &comps[i..] {
                match c {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::Normal(n) => out.push(n),
                    _ => {}
                }
            }
            return out;
        }
        if links < MAX_LINKS {
            if let Ok(link) = std::fs::read_link(&prefix) {
                let mut next = prefix.parent().map(Path::to_path_buf).unwrap_or_default().join(link);
                next.extend(&comps[i..]);
                return resolve_from(next, links + 1);
            }
        }
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_a_patch_is_found() {
        let patch = "*** Begin Patch\n*** Add File: src/a.rs\n+x\n*** Update File: src/b.rs\n*** Move to: src/c.rs\n@@\n-a\n+b\n*** Delete File: src/d.rs\n*** End Patch\n";
        assert_eq!(patch_files(patch), ["src/a.rs", "src/b.rs", "src/c.rs", "src/d.rs"]);
        assert!(patch_files("no headers").is_empty());
    }

    #[test]
    fn payloads_are_one_bounded_object() {
        assert!(Payload::read(&b"{\"cwd\":\"/x\",\"extra\":[1]}"[..]).is_ok());
        for bad in [&b""[..], b"  \n", b"[1]", b"{", b"\"s\"", b"{\"a\":1} {\"b\":2}"] {
            let e = Payload::read(bad).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::Refused, "{:?}", String::from_utf8_lossy(bad));
        }
        let big = format!("{{\"x\":\"{}\"}}", "a".repeat(MAX_PAYLOAD as usize));
        assert!(Payload::read(big.as_bytes()).unwrap_err().message.contains("larger"));
    }

    #[test]
    fn scan_field_finds_a_key_but_never_text_inside_a_string() {
        let raw = br#"{"hook_event_name": "PreToolUse", "tool_input": {"new_string": "\"hook_event_name\":\"Stop\" \\"}, "tool_name":"Write"}"#;
        assert_eq!(scan_field(raw, "hook_event_name").as_deref(), Some("PreToolUse"));
        assert_eq!(scan_field(raw, "tool_name").as_deref(), Some("Write"));
        assert_eq!(scan_field(b"{\"tool_name\": 3", "tool_name"), None);
        // Two values: none is trusted.
        assert_eq!(scan_field(br#"{"a":"x","a":"y"}"#, "a"), None);
        assert_eq!(scan_field(b"garbage", "a"), None);
    }

    #[test]
    fn resolve_folds_dots_past_the_existing_ancestor() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        assert_eq!(resolve(&root, Path::new("a/../b/c/../d.rs")), root.join("b/d.rs"));
        assert_eq!(resolve(&root.join("a"), Path::new("../x")), root.join("x"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.join("a"), root.join("link")).unwrap();
            assert_eq!(resolve(&root, Path::new("link/new.rs")), root.join("a/new.rs"));
            // Dangling links are followed, relative ones from their folder, chains too.
            std::os::unix::fs::symlink("../b/new.rs", root.join("a/dangling")).unwrap();
            assert_eq!(resolve(&root, Path::new("a/dangling")), root.join("b/new.rs"));
            std::os::unix::fs::symlink("a/dangling", root.join("chain")).unwrap();
            assert_eq!(resolve(&root, Path::new("chain")), root.join("b/new.rs"));
            std::os::unix::fs::symlink("gone/deeper", root.join("dir-link")).unwrap();
            assert_eq!(resolve(&root, Path::new("dir-link/../f")), root.join("gone/f"));
            // A loop ends, wherever.
            std::os::unix::fs::symlink("loop2", root.join("loop1")).unwrap();
            std::os::unix::fs::symlink("loop1", root.join("loop2")).unwrap();
            let _ = resolve(&root, Path::new("loop1"));
        }
    }
}
