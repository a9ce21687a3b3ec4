//! Next-story selection: which open story an agent works on next.

use super::{Status, Story};

/// The first open story: lowest priority number first when the PRD has priorities, else file order.
/// Open means pending or in progress with every dependsOn done (or not in the list).
pub fn next_open(list: &[Story]) -> Option<&Story> {
    let done: std::collections::HashSet<&str> =
        list.iter().filter(|s| s.status.is_done()).map(|s| s.id.as_str()).collect();
    let ready = |s: &&Story| {
        matches!(s.status, Status::Pending | Status::InProgress)
            && s.depends_on.iter().all(|d| done.contains(d.as_str()) || !list.iter().any(|o| &o.id == d))
    };
    let mut open: Vec<(usize, &Story)> = list.iter().enumerate().filter(|(_, s)| ready(s)).collect();
    open.sort_by_key(|(i, s)| (s.priority.unwrap_or(i64::MAX), *i));
    open.first().map(|(_, s)| *s)
}
