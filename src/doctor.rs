//! `doctor`: what is out of step between git, git-boulder's state and this machine — worktrees
//! git knows that state does not (and the reverse), hooks, refs that fail validation, held locks —
//! each with the command that fixes it.

use serde::Serialize;

use crate::error::Result;
use crate::state::{self, BoulderState, PrdState, Store, StreamState};
use crate::workspace::Workspace;

/// One problem and its fix.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// `worktree`, `state`, `hooks`, `ref`, `lock` or `merge`.
    pub area: &'static str,
    pub message: String,
    /// The command (or action) that fixes it.
    pub fix: String,
}

/// Look at everything; an empty list means all is well.
pub fn examine(ws: &Workspace) -> Result<Vec<Problem>> {
    let mut problems = Vec::new();
    let store = Store::new(&ws.repo)?;
    let plan = ws.plan().ok();

    // Refs under refs/boulder/ that fail validation.
    for (name, tip) in store.list("refs/boulder/")? {
        let checked = if name.starts_with(state::STREAMS) {
            store.validate_chain::<StreamState>(tip)
        } else if name.starts_with(state::BOULDERS) {
            store.validate_chain::<BoulderState>(tip)
        } else if name == state::PRD_REF {
            store.validate_chain::<PrdState>(tip)
        } else {
            Ok(())
        };
        if let Err(why) = checked {
            problems.push(Problem {
                area: "ref",
                message: format!("{name} fails validation: {why}"),
                fix: format!("git update-ref -d {name}   (after saving it: git branch rescue {tip})"),
            });
        }
    }

    // Merges interrupted part-way (their record is still there).
    let merges = ws.repo.boulder_dir().join("merge");
    if let Ok(entries) = std::fs::read_dir(&merges) {
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_owned))
            .collect();
        names.sort();
        for name in names {
            problems.push(Problem {
                area: "merge",
                message: format!("an interrupted merge of stream {name} is waiting to be finished"),
                fix: format!("git boulder stream merge {name}"),
            });
        }
    }

    // Worktrees: what git knows under worktree_dir vs. what state records.
    if let Some(plan) = &plan {
        let known = crate::worktree::list(&ws.repo)?;
        for stream in &plan.streams {
            let Ok(path) = ws.worktree_path(plan, &stream.name) else { continue };
            let git_has = known.iter().find(|w| w.path == path);
            // An invalid ref is reported above; read it here as "nothing recorded".
            let entry = store.read::<StreamState>(&state::stream_ref(&stream.name)).ok().flatten();
            // A worktree is expected only on the machine that initialized the stream.
            let here = entry.as_ref().is_none_or(|e| e.state.initialized_by.as_ref().is_none_or(|a| *a == store.actor));
            let recorded = entry.map(|e| e.state.status).unwrap_or_default();
            let live = matches!(recorded.as_str(), "INITIALIZED" | "RUNNING" | "STOPPED" | "COMPLETED" | "FAILED");
            match git_has {
                Some(w) if w.missing => problems.push(Problem {
                    area: "worktree",
                    message: format!(
                        "stream {}: git knows a worktree at {} but the folder is gone",
                        stream.name,
                        path.display()
                    ),
                    fix: format!("git boulder stream cleanup --stale   (or git boulder stream init {})", stream.name),
                }),
                Some(_) if !live && recorded != "MERGED" => problems.push(Problem {
                    area: "state",
                    message: format!(
                        "stream {}: git has its worktree at {} but state records {}",
                        stream.name,
                        path.display(),
                        if recorded.is_empty() { "nothing" } else { &recorded }
                    ),
                    fix: format!("git boulder stream init {}", stream.name),
                }),
                None if live && here => problems.push(Problem {
                    area: "worktree",
                    message: format!(
                        "stream {}: state records it {recorded} but git has no worktree at {}",
                        stream.name,
                        path.display()
                    ),
                    fix: format!("git boulder stream init {}   (or git boulder stream cleanup --stale)", stream.name),
                }),
                _ => {}
            }
        }
        let root = ws.root().ok().map(|r| r.join(&plan.settings.worktree_dir));
        for w in &known {
            let under = root.as_ref().is_some_and(|r| w.path.starts_with(r));
            let named = plan.streams.iter().any(|s| ws.worktree_path(plan, &s.name).is_ok_and(|p| p == w.path));
            if under && !named {
                problems.push(Problem {
                    area: "worktree",
                    message: format!(
                        "{} is a worktree under {} that no stream of the plan names",
                        w.path.display(),
                        plan.settings.worktree_dir
                    ),
                    fix: format!("git worktree remove {}", w.path.display()),
                });
            }
        }
    }

    // Hooks.
    for h in crate::hooks::status(&ws.repo)? {
        if let Some((message, fix)) = h.problem() {
            problems.push(Problem { area: "hooks", message, fix });
        }
    }

    // Held locks.
    for (name, holder) in crate::lock::holders(&ws.repo) {
        problems.push(Problem {
            area: "lock",
            message: format!("lock {name} is held by {}", holder.describe()),
            fix: format!("wait for pid {} to finish (the lock is released when it exits)", holder.pid),
        });
    }
    Ok(problems)
}
