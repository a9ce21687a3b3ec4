//! Boulders and enforcement (DESIGN §8): the decision gates of `git boulder check`, completion
//! detection, and the enforcement message. Pure: states and a clock in, a decision out. The
//! boulder tree as stored ([`tree`]), the check that applies the gates to it ([`enforce`]), and
//! what a session resumes with ([`resume`]) live in submodules.

pub mod enforce;
pub mod record;
pub mod resume;
pub mod tree;

use std::time::Duration;

use serde::Serialize;

use crate::plan::BoulderSettings;
use crate::state::{BoulderState, BoulderStatus};

/// Phrases that say the agent thinks it is finished.
pub const COMPLETION_PHRASES: &[&str] = &[
    "i am done",
    "i'm done",
    "task complete",
    "task completed",
    "all done",
    "all tasks complete",
    "work is complete",
    "finished",
    "complete",
    "completed",
    "done",
];

/// Phrases that say work is still going on; any of them cancels completion detection.
pub const WORK_INDICATORS: &[&str] = &[
    "implement",
    "working on",
    "in progress",
    "tool",
    "let me",
    "i will",
    "i'll",
    "next",
    "now i",
    "continuing",
    "running",
    "fixing",
    "todo",
];

fn has_phrase(text: &str, phrase: &str) -> bool {
    let t = text.to_lowercase();
    let mut start = 0;
    while let Some(pos) = t[start..].find(phrase) {
        let a = start + pos;
        let b = a + phrase.len();
        let before = t[..a].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after = t[b..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        if before && after {
            return true;
        }
        start = b;
    }
    false
}

/// Completion detection: a completion phrase and no work indicator.
pub fn is_completion(message: &str) -> bool {
    COMPLETION_PHRASES.iter().any(|p| has_phrase(message, p)) && !WORK_INDICATORS.iter().any(|w| has_phrase(message, w))
}

/// The answer of `check`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Decision {
    pub enforce: bool,
    /// The gate that decided: `subagent`, `idle`, `cooldown`, `max_failures`, `stopped`,
    /// `children`, or `enforce` / `completion` when enforcing.
    pub gate: &'static str,
    pub reason: String,
    /// `warning` for completion, `error` for idle enforcement; `null` when not enforcing.
    pub variant: Option<&'static str>,
    /// True when the failure count should be reset first (recovery window passed).
    #[serde(skip)]
    pub reset_failures: bool,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Run the gates for `b` at time `now` (seconds since the epoch).
pub fn decide(
    b: &BoulderState,
    children: &[BoulderState],
    now: f64,
    t: &BoulderSettings,
    subagent: bool,
    message: Option<&str>,
) -> Decision {
    let no = |gate: &'static str, reason: String| Decision {
        enforce: false,
        gate,
        reason,
        variant: None,
        reset_failures: false,
    };
    if subagent {
        return no("subagent", "subagents are never enforced".into());
    }
    if b.status == BoulderStatus::Completed {
        return no("completed", "the boulder is completed (its work is done); nothing to push on".into());
    }
    let completion = message.is_some_and(is_completion);
    let at = |t: &Option<String>| t.as_deref().and_then(crate::time::parse_rfc3339);
    let last_activity = at(&b.last_activity).or_else(|| at(&b.updated_at));
    let last_enforcement = at(&b.last_enforcement);
    if !completion {
        if let Some(a) = last_activity {
            let idle = now - a;
            if idle < secs(t.idle_threshold) {
                return no("idle", format!("active {idle:.0}s ago; idle threshold is {:.0}s", secs(t.idle_threshold)));
            }
        }
    }
    let mut failures = b.failure_count;
    let mut reset = false;
    if let Some(e) = last_enforcement {
        // The count resets after a quiet recovery window — but not once max_failures is reached:
        // then only real progress (new activity) resets it, so enforcement cannot nag forever.
        if failures > 0 && failures < t.max_failures && now - e >= secs(t.recovery_window) {
            failures = 0;
            reset = true;
        }
        if !completion {
            let wait = secs(t.cooldown) * t.backoff_multiplier.powi(failures as i32);
            if now - e < wait {
                return no("cooldown", format!("last enforced {:.0}s ago; cooldown is {wait:.0}s", now - e));
            }
        }
    }
    if failures >= t.max_failures {
        return no(
            "max_failures",
            format!(
                "{failures} enforcements without progress (max_failures {}); waiting for a new commit",
                t.max_failures
            ),
        );
    }
    if b.stop_requested {
        return no("stopped", "stopped by the user; new activity clears it".into());
    }
    if let Some(c) = children.iter().find(|c| c.status != BoulderStatus::Completed) {
        let name = c.parent.as_deref().unwrap_or("");
        let _ = name;
        return no("children", format!("a child boulder is still {}; the parent waits", c.status));
    }
    Decision {
        enforce: true,
        gate: if completion { "completion" } else { "enforce" },
        reason: if completion {
            "the message says the work is finished, but the boulder is not".into()
        } else {
            "idle past the threshold".into()
        },
        variant: Some(if completion { "warning" } else { "error" }),
        reset_failures: reset,
    }
}

/// The enforcement message: for a boulder of its own `Boulder auth (iteration 3)`, for a child
/// the hierarchy, e.g. `Boulder [Parent: 12] → [Child: 5]`, with its parent and depth.
pub fn message(chain: &[(String, &BoulderState)], task: &str, failures: u32, max: u32) -> String {
    let (name, b) = chain.first().expect("the boulder itself");
    let mut s = String::from("Boulder ");
    if chain.len() > 1 {
        let path: Vec<String> = chain
            .iter()
            .rev()
            .enumerate()
            .map(|(i, (_, st))| {
                format!("[{}: {}]", if i + 1 == chain.len() { "Child" } else { "Parent" }, st.iteration)
            })
            .collect();
        s.push_str(&path.join(" → "));
    } else {
        s.push_str(&format!("{name} (iteration {})", b.iteration));
    }
    s.push_str(&format!("\n\nTask: {task}\n"));
    if let Some((parent, _)) = chain.get(1) {
        s.push_str(&format!("Parent: {parent}\n"));
        s.push_str(&format!("Boulder: {name} (iteration {}, depth {})\n", b.iteration, b.depth));
    }
    s.push_str("\nThe boulder never stops: continue with the next open story, commit your progress");
    if chain.len() > 1 {
        s.push_str(", and finish this subtask — its parent is waiting");
    }
    s.push_str(&format!(".\nReminder {} of {max}.", failures + 1));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> BoulderSettings {
        BoulderSettings {
            idle_threshold: Duration::from_secs(30),
            cooldown: Duration::from_secs(30),
            backoff_multiplier: 2.0,
            max_failures: 3,
            recovery_window: Duration::from_secs(300),
            ..BoulderSettings::default()
        }
    }

    fn at(secs: f64) -> Option<String> {
        let ts = jiff::Timestamp::from_millisecond((secs * 1000.0) as i64).unwrap();
        Some(format!("{ts:.3}"))
    }

    const NOW: f64 = 1_800_000_000.0;

    #[test]
    fn completion_keywords_and_work_indicators() {
        assert!(is_completion("I am done"));
        assert!(is_completion("Task complete."));
        assert!(is_completion("All finished!"));
        assert!(!is_completion("Let me complete the function"));
        assert!(!is_completion("I'm working on it, almost done"));
        assert!(!is_completion("Still implementing the parser"));
        assert!(!is_completion("The build is in progress"));
        assert!(!is_completion("abandoned"), "a word containing 'done' is not 'done'");
        assert!(!is_completion("hello"));
    }

    #[test]
    fn gates_in_order() {
        let t = t();
        let mut b = BoulderState { last_activity: at(NOW - 10.0), ..BoulderState::default() };
        assert_eq!(decide(&b, &[], NOW, &t, true, None).gate, "subagent");
        assert_eq!(decide(&b, &[], NOW, &t, false, None).gate, "idle");
        b.last_activity = at(NOW - 100.0);
        let d = decide(&b, &[], NOW, &t, false, None);
        assert!(d.enforce && d.gate == "enforce" && d.variant == Some("error"));
        b.last_enforcement = at(NOW - 40.0);
        b.failure_count = 1; // cooldown 60s
        assert_eq!(decide(&b, &[], NOW, &t, false, None).gate, "cooldown");
        b.last_enforcement = at(NOW - 61.0);
        assert!(decide(&b, &[], NOW, &t, false, None).enforce);
        b.failure_count = 3;
        b.last_enforcement = at(NOW - 1000.0);
        assert_eq!(decide(&b, &[], NOW, &t, false, None).gate, "max_failures", "no recovery once max is reached");
        b.failure_count = 2;
        let d = decide(&b, &[], NOW, &t, false, None);
        assert!(d.enforce && d.reset_failures, "recovery window resets below max");
        b.failure_count = 0;
        b.stop_requested = true;
        assert_eq!(decide(&b, &[], NOW, &t, false, None).gate, "stopped");
        b.stop_requested = false;
        let child = BoulderState { status: BoulderStatus::Active, ..BoulderState::default() };
        assert_eq!(decide(&b, &[child], NOW, &t, false, None).gate, "children");
        let done = BoulderState { status: BoulderStatus::Completed, ..BoulderState::default() };
        assert!(decide(&b, &[done], NOW, &t, false, None).enforce);
    }

    #[test]
    fn completion_skips_idle_and_cooldown() {
        let t = t();
        let b =
            BoulderState { last_activity: at(NOW - 1.0), last_enforcement: at(NOW - 1.0), ..BoulderState::default() };
        let d = decide(&b, &[], NOW, &t, false, Some("I am done"));
        assert!(d.enforce && d.gate == "completion" && d.variant == Some("warning"));
        assert_eq!(decide(&b, &[], NOW, &t, false, Some("let me complete it")).gate, "idle");
    }

    #[test]
    fn message_shows_the_hierarchy_and_never_repeats() {
        let parent = BoulderState { iteration: 12, ..BoulderState::default() };
        let child = BoulderState { iteration: 5, depth: 1, ..BoulderState::default() };
        let chain = vec![("oauth".to_string(), &child), ("auth".to_string(), &parent)];
        let m1 = message(&chain, "Set up OAuth", 0, 5);
        assert!(m1.starts_with("Boulder [Parent: 12] → [Child: 5]"), "{m1}");
        assert!(m1.contains("Task: Set up OAuth") && m1.contains("Parent: auth") && m1.contains("depth 1"));
        assert_ne!(m1, message(&chain, "Set up OAuth", 1, 5));
    }

    #[test]
    fn the_message_of_a_boulder_of_its_own_names_it_once() {
        let b = BoulderState::default();
        let m = message(&[("auth".to_string(), &b)], "auth", 0, 5);
        assert_eq!(
            m,
            "Boulder auth (iteration 0)\n\nTask: auth\n\nThe boulder never stops: continue with the next open story, \
             commit your progress.\nReminder 1 of 5."
        );
    }
}
