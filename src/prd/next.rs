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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prd::{Marks, Span};

    fn story(id: &str, status: Status, depends_on: &[&str], priority: Option<i64>) -> Story {
        Story {
            id: id.into(),
            title: id.into(),
            status,
            wave: None,
            text: String::new(),
            span: Span::Index { index: 0 },
            depends_on: depends_on.iter().map(|d| d.to_string()).collect(),
            priority,
            marks: Marks::default(),
        }
    }

    fn next(list: &[Story]) -> Option<&str> {
        next_open(list).map(|s| s.id.as_str())
    }

    #[test]
    fn file_order_skips_done_blocked_and_waiting_stories() {
        let list = [
            story("A", Status::Completed, &[], None),
            story("B", Status::Blocked, &[], None),
            story("C", Status::Pending, &["D"], None),
            story("D", Status::InProgress, &["A", "unknown"], None),
        ];
        // C waits on D (open); D's dependencies are done or not in the list.
        assert_eq!(next(&list), Some("D"));
        // A dependency outside the list (another stream's story) does not hold a story back.
        assert_eq!(next(&list[..3]), Some("C"));
    }

    #[test]
    fn priorities_come_first_then_file_order() {
        let list = [
            story("A", Status::Pending, &[], None),
            story("B", Status::Pending, &[], Some(2)),
            story("C", Status::Pending, &[], Some(1)),
        ];
        assert_eq!(next(&list), Some("C"));
        assert_eq!(next(&[story("A", Status::Pending, &[], None), story("B", Status::Pending, &[], None)]), Some("A"));
        assert_eq!(next(&[story("A", Status::Completed, &[], None)]), None);
    }
}
