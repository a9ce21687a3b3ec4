//! What each harness's file holds once git-boulder is in it: the hook entries merged into a
//! Claude Code or Codex settings file (and taken out again), the OpenCode plugin file, and how a
//! file on disk compares with that ([`presence`]). Pure: bytes in, bytes or a verdict out.

use super::json::Json;
use super::Harness;

/// The OpenCode plugin, as this binary installs it.
pub const OPENCODE_PLUGIN: &str = include_str!("../../harness/opencode/git-boulder.js");

/// The line that marks a plugin file as git-boulder's.
const PLUGIN_MARK: &str = "git-boulder OpenCode plugin";

/// The command every installed hook of `harness` runs.
pub fn command(harness: Harness) -> String {
    format!("git boulder agent hook {harness}")
}

/// The untracked per-worktree file `agent install` writes (relative to the worktree, `/`-separated).
pub fn local_file(harness: Harness) -> &'static str {
    match harness {
        Harness::Claude => ".claude/settings.local.json",
        Harness::Codex => ".codex/hooks.json",
        Harness::Opencode => ".opencode/plugins/git-boulder.js",
    }
}

/// The tracked project file `agent install --commit` writes and commits.
pub fn project_file(harness: Harness) -> &'static str {
    match harness {
        Harness::Claude => ".claude/settings.json",
        Harness::Codex => ".codex/hooks.json",
        Harness::Opencode => ".opencode/plugins/git-boulder.js",
    }
}

/// The hook groups a settings file gets: (event, matcher).
fn events(harness: Harness) -> &'static [(&'static str, Option<&'static str>)] {
    match harness {
        Harness::Claude => &[
            ("SessionStart", Some("startup|resume|clear|compact")),
            ("PreToolUse", Some("Edit|Write|MultiEdit|NotebookEdit")),
            ("Stop", None),
            ("SubagentStop", None),
            ("WorktreeCreate", None),
            ("WorktreeRemove", None),
        ],
        Harness::Codex => &[("SessionStart", None), ("PreToolUse", Some("apply_patch|Write|Edit")), ("Stop", None)],
        Harness::Opencode => &[],
    }
}

/// Why a file cannot take git-boulder's entries; nothing is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileError {
    /// Not JSON: the line and the parser's message.
    Invalid { line: usize, message: String },
    /// JSON of the wrong shape at `at` (`the top level`, `hooks`, `hooks.Stop` …).
    Shape { at: String, found: &'static str, want: &'static str },
    /// A plugin file of that name that is not git-boulder's.
    Foreign,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::Invalid { line, message } => write!(f, "is not valid JSON (line {line}): {message}"),
            FileError::Shape { at, found, want } => write!(f, "holds {found} at {at} where {want} belongs"),
            FileError::Foreign => f.write_str("exists and is not git-boulder's plugin"),
        }
    }
}

impl std::error::Error for FileError {}

/// How a file on disk stands against what `agent install` puts in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// Every entry of ours, with this binary's command (or this binary's plugin).
    Present,
    /// Entries of ours, but not all of them or with another command (or an older plugin).
    Stale,
    /// None of ours (or no file).
    Missing,
    /// Unreadable as the harness's file.
    Broken(FileError),
}

/// What taking git-boulder out of a file leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// Nothing of ours is in it: leave the file as it is.
    Untouched,
    /// These bytes.
    Write(Vec<u8>),
    /// Nothing at all: the file can go.
    Empty,
}

/// The bytes of the file once git-boulder's entries are in it, from what is there (`None`: no
/// file). `Ok(None)` when they are all there already (the file stays byte for byte).
pub fn merged(harness: Harness, current: Option<&[u8]>) -> Result<Option<Vec<u8>>, FileError> {
    if harness == Harness::Opencode {
        return match current {
            Some(bytes) if bytes == OPENCODE_PLUGIN.as_bytes() => Ok(None),
            Some(bytes) if !is_our_plugin(bytes) => Err(FileError::Foreign),
            _ => Ok(Some(OPENCODE_PLUGIN.as_bytes().to_vec())),
        };
    }
    let mut root = parse(current.unwrap_or_default())?;
    let cmd = command(harness);
    let mut changed = false;
    let hooks = hooks_of(&mut root, true)?.expect("made when absent");
    // Entries of another git-boulder version go: they are replaced by this one's.
    if let Json::Object(events) = &mut *hooks {
        for (_, groups) in events.iter_mut() {
            let Json::Array(list) = groups else { continue };
            for group in list.iter_mut() {
                if let Some(Json::Array(handlers)) = group.get_mut("hooks") {
                    let before = handlers.len();
                    handlers.retain(|h| {
                        !h.get("command").and_then(Json::as_str).is_some_and(|c| is_our_command(c) && c != cmd)
                    });
                    changed |= handlers.len() != before;
                }
            }
            list.retain(|g| !matches!(g.get("hooks"), Some(Json::Array(h)) if h.is_empty()));
        }
    }
    for (event, matcher) in events(harness) {
        let groups = hooks.entry(event, Json::Array(Vec::new())).expect("hooks is an object");
        let Json::Array(list) = groups else {
            return Err(FileError::Shape { at: format!("hooks.{event}"), found: groups.kind(), want: "an array" });
        };
        if list.iter().any(|g| group_matches(g, *matcher) && group_commands(g).any(|c| c == cmd)) {
            continue;
        }
        list.push(our_group(&cmd, *matcher));
        changed = true;
    }
    Ok(changed.then(|| root.to_bytes()))
}

/// The bytes of the file with git-boulder's entries (any command of ours, current or stale)
/// taken out and everything else kept in its order.
pub fn unmerged(harness: Harness, current: &[u8]) -> Result<Removal, FileError> {
    if harness == Harness::Opencode {
        return Ok(if is_our_plugin(current) { Removal::Empty } else { Removal::Untouched });
    }
    let mut root = parse(current)?;
    let Some(hooks) = hooks_of(&mut root, false)? else { return Ok(Removal::Untouched) };
    let Json::Object(events) = hooks else { return Ok(Removal::Untouched) };
    let mut removed = false;
    for (_, groups) in events.iter_mut() {
        let Json::Array(list) = groups else { continue };
        for group in list.iter_mut() {
            if let Some(Json::Array(handlers)) = group.get_mut("hooks") {
                let before = handlers.len();
                handlers.retain(|h| !h.get("command").and_then(Json::as_str).is_some_and(is_our_command));
                removed |= handlers.len() != before;
            }
        }
        // A group left without handlers was ours (or held only ours).
        list.retain(|g| !matches!(g.get("hooks"), Some(Json::Array(h)) if h.is_empty()));
    }
    if !removed {
        return Ok(Removal::Untouched);
    }
    events.retain(|(_, groups)| !matches!(groups, Json::Array(list) if list.is_empty()));
    if events.is_empty() {
        root.remove("hooks");
    }
    Ok(match &root {
        Json::Object(entries) if entries.is_empty() => Removal::Empty,
        _ => Removal::Write(root.to_bytes()),
    })
}

/// How `current` (`None`: no file) stands against what install writes.
pub fn presence(harness: Harness, current: Option<&[u8]>) -> Presence {
    let Some(bytes) = current else { return Presence::Missing };
    if harness == Harness::Opencode {
        return if bytes == OPENCODE_PLUGIN.as_bytes() {
            Presence::Present
        } else if is_our_plugin(bytes) {
            Presence::Stale
        } else {
            Presence::Missing
        };
    }
    let mut root = match parse(bytes) {
        Ok(root) => root,
        Err(e) => return Presence::Broken(e),
    };
    let hooks = match hooks_of(&mut root, false) {
        Ok(Some(hooks)) => hooks.clone(),
        Ok(None) => return Presence::Missing,
        Err(e) => return Presence::Broken(e),
    };
    let cmd = command(harness);
    let all = events(harness).iter().all(|(event, matcher)| match hooks.get(event) {
        Some(Json::Array(list)) => {
            list.iter().any(|g| group_matches(g, *matcher) && group_commands(g).any(|c| c == cmd))
        }
        _ => false,
    });
    let any_ours = match &hooks {
        Json::Object(events) => events.iter().any(|(_, groups)| match groups {
            Json::Array(list) => list.iter().any(|g| group_commands(g).any(is_our_command)),
            _ => false,
        }),
        _ => false,
    };
    if all {
        Presence::Present
    } else if any_ours {
        Presence::Stale
    } else {
        Presence::Missing
    }
}

fn parse(bytes: &[u8]) -> Result<Json, FileError> {
    let root = Json::parse(bytes).map_err(|e| FileError::Invalid { line: e.line, message: e.message })?;
    match root {
        Json::Object(_) => Ok(root),
        other => Err(FileError::Shape { at: "the top level".into(), found: other.kind(), want: "an object" }),
    }
}

/// The `hooks` object of a settings file; made (at the end) when `make` and absent.
fn hooks_of(root: &mut Json, make: bool) -> Result<Option<&mut Json>, FileError> {
    if root.get("hooks").is_none() {
        if !make {
            return Ok(None);
        }
        root.entry("hooks", Json::Object(Vec::new()));
    }
    let hooks = root.get_mut("hooks").expect("present");
    match hooks {
        Json::Object(_) => Ok(Some(hooks)),
        other => Err(FileError::Shape { at: "hooks".into(), found: other.kind(), want: "an object" }),
    }
}

fn our_group(cmd: &str, matcher: Option<&str>) -> Json {
    let handler = Json::Object(vec![("type".into(), Json::str("command")), ("command".into(), Json::str(cmd))]);
    let mut group = Vec::new();
    if let Some(m) = matcher {
        group.push(("matcher".into(), Json::str(m)));
    }
    group.push(("hooks".into(), Json::Array(vec![handler])));
    Json::Object(group)
}

fn group_matches(group: &Json, matcher: Option<&str>) -> bool {
    let have = group.get("matcher").and_then(Json::as_str).filter(|m| !m.is_empty() && *m != "*");
    have == matcher
}

fn group_commands(group: &Json) -> impl Iterator<Item = &str> {
    let handlers = match group.get("hooks") {
        Some(Json::Array(list)) => list.as_slice(),
        _ => &[],
    };
    handlers.iter().filter_map(|h| h.get("command").and_then(Json::as_str))
}

/// A command of git-boulder's hooks (this binary's or another version's).
fn is_our_command(cmd: &str) -> bool {
    let cmd = cmd.trim();
    ["git boulder agent hook", "git-boulder agent hook"].iter().any(|p| cmd.starts_with(p))
}

fn is_our_plugin(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(512)];
    String::from_utf8_lossy(head).contains(PLUGIN_MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_appends_and_keeps_what_is_there() {
        let before = br#"{"model":"x","hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"}]}]},"z":1}"#;
        let after = merged(Harness::Claude, Some(before)).unwrap().unwrap();
        let text = String::from_utf8(after.clone()).unwrap();
        assert!(text.find("say done").unwrap() < text.find("git boulder agent hook claude").unwrap());
        assert!(text.find("\"model\"").unwrap() < text.find("\"hooks\"").unwrap());
        assert!(text.find("\"hooks\"").unwrap() < text.find("\"z\"").unwrap());
        assert_eq!(merged(Harness::Claude, Some(&after)).unwrap(), None);
        assert_eq!(presence(Harness::Claude, Some(&after)), Presence::Present);
        let Removal::Write(back) = unmerged(Harness::Claude, &after).unwrap() else { panic!() };
        assert_eq!(Json::parse(&back).unwrap(), Json::parse(before).unwrap());
    }

    #[test]
    fn an_absent_file_comes_back_empty() {
        let after = merged(Harness::Codex, None).unwrap().unwrap();
        assert_eq!(unmerged(Harness::Codex, &after).unwrap(), Removal::Empty);
    }

    #[test]
    fn a_stale_command_is_seen() {
        let text =
            br#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"git-boulder agent hook codex --old"}]}]}}"#;
        assert_eq!(presence(Harness::Codex, Some(text)), Presence::Stale);
    }
}
