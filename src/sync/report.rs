//! The refusal that ends a pull or a push whose report holds refs that were not taken.

use super::{PullReport, PushReport};
use crate::error::Error;

/// Why the server turned a push down, as far as `said` (its reasons and messages) shows, and what
/// to do: a lock file on the server (`cannot lock ref`: another push is writing that ref, or one
/// killed there left its `.lock`) passes or needs removing there; anything else is the server's
/// own rules, which trying again will not change (`else_ask`: whom to turn to then).
pub(crate) fn server_hint(said: &str, else_ask: &str) -> String {
    if said.contains("cannot lock ref") || said.contains(".lock': File exists") {
        return "a lock file on the server blocks that ref: another push is writing it (run this again in a \
                moment), or one killed on the server left its .lock behind, which whoever runs the server removes \
                (the path is in the message above)"
            .into();
    }
    format!(
        "the server's own rules (its hooks or receive.* settings) turned the push down; trying again will not \
         help: {else_ask}"
    )
}

/// How many refs a refusal names.
const SHOWN: usize = 10;

impl PullReport {
    /// The refusal a pull ends with: the refs that failed validation and were not taken.
    pub fn refusal(&self) -> Option<Error> {
        let r = self;
        let bad = r.refused();
        (!bad.is_empty()).then(|| {
            // Named up to a screenful: a remote can hold refs by the ten thousand.
            let mut names: Vec<&str> = bad.iter().take(SHOWN).map(|x| x.name.as_str()).collect();
            let more = format!("…and {} more", bad.len().saturating_sub(SHOWN));
            if bad.len() > SHOWN {
                names.push(&more);
            }
            let over = bad.iter().filter(|x| x.why.as_deref().is_some_and(|w| w.starts_with("more than"))).count();
            let error = Error::refused(format!(
                "{} ref(s) from {} failed validation and were not taken: {}",
                bad.len(),
                r.remote,
                names.join(", ")
            ));
            if over > 0 {
                return error.hint(format!(
                    "{} holds more than {} refs of git-boulder's state; {over} were left: delete those that should not be there (`git push {} --delete REF…`), then pull again",
                    r.remote,
                    super::MAX_REFS_PER_PULL,
                    r.remote
                ));
            }
            error.hint("the local state of those refs is unchanged; fix or delete them on the remote")
        })
    }
}

impl PushReport {
    /// The refusal a push ends with: refs the remote still rejects, and why as far as known.
    pub fn refusal(&self) -> Option<Error> {
        let r = self;
        let bad: Vec<&str> =
            r.refs.iter().filter(|x| x.result == crate::sync::RefResult::Rejected).map(|x| x.name.as_str()).collect();
        if bad.is_empty() {
            return None;
        }
        if r.refused_by_server {
            let reasons: Vec<String> = r
                .refs
                .iter()
                .filter(|x| x.result == crate::sync::RefResult::Rejected)
                .map(|x| format!("{} {}", x.name, x.why.as_deref().unwrap_or("")))
                .collect();
            let mut message = format!("the remote {} refused the push: {}", r.remote, reasons.join("; "));
            for line in &r.remote_messages {
                message.push('\n');
                message.push_str(line);
            }
            let hint = server_hint(&message, "ask whoever runs it");
            return Some(Error::refused(message).hint(hint));
        }
        let refused: Vec<&str> = r
            .pulled
            .iter()
            .filter(|x| x.result == crate::sync::RefResult::Refused && bad.contains(&x.name.as_str()))
            .map(|x| x.name.as_str())
            .collect();
        if !refused.is_empty() {
            return Some(
                Error::refused(format!(
                    "the remote {} holds invalid state for {}, so it cannot be merged and pushed",
                    r.remote,
                    refused.join(", ")
                ))
                .hint("fix or delete those refs on the remote (`git boulder pull` says why they are invalid)"),
            );
        }
        Some(
            Error::refused(format!(
                "the remote {} still rejects {} after {} pushes",
                r.remote,
                bad.join(", "),
                r.rounds + 1
            ))
            .hint("another machine keeps pushing, or the remote refuses these refs; see the reasons above"),
        )
    }
}
