//! The PRD never conflicts (DESIGN §9): it is merged story by story. Status marks are taken out
//! of the text merge ([`normalize`] resets each side's marks to the ancestor's), the rest of the
//! text merges as usual, then [`resolve`] sets each story's status: done on either side is done,
//! else the side that changed it wins. Pure: text in, text out.

use std::collections::BTreeSet;

use crate::prd::{self, Prd, Status};

fn parse(name: &str, text: &str) -> Option<Prd> {
    prd::parse(name, text).ok()
}

/// `side` with every story's status set back to what `ancestor` says (stories the ancestor lacks
/// keep theirs). `None` when a status cannot be written back by marks alone (then the caller
/// merges the texts as they are).
pub fn normalize(name: &str, ancestor: &str, side: &str) -> Option<String> {
    let anc = parse(name, ancestor)?;
    let mut text = side.to_string();
    let ids: Vec<(String, Status)> = parse(name, side)?
        .stories
        .iter()
        .filter_map(|s| anc.story(&s.id).filter(|a| a.status != s.status).map(|a| (s.id.clone(), a.status)))
        .collect();
    for (id, status) in ids {
        let current = parse(name, &text)?;
        text = prd::set_status(&text, &current, &id, status).ok()?;
    }
    Some(text)
}

/// The status a story gets from its three versions: completed when either side completed it,
/// else theirs when they changed it, else ours.
pub fn pick(ancestor: Option<Status>, ours: Option<Status>, theirs: Option<Status>) -> Option<Status> {
    if ours == Some(Status::Completed) || theirs == Some(Status::Completed) {
        return Some(Status::Completed);
    }
    if theirs.is_some() && theirs != ancestor {
        return theirs;
    }
    ours.or(theirs)
}

/// Set each story of `merged` (the text merge of the normalized sides) to the status [`pick`]
/// gives from `ancestor`, `ours` and `theirs`, touching only status marks. A story whose status
/// cannot be set by marks keeps what the text says.
pub fn resolve(name: &str, merged: &str, ancestor: &str, ours: &str, theirs: &str) -> String {
    let (Some(m), a, o, t) = (parse(name, merged), parse(name, ancestor), parse(name, ours), parse(name, theirs))
    else {
        return merged.to_string();
    };
    let status = |p: &Option<Prd>, id: &str| p.as_ref().and_then(|p| p.story(id)).map(|s| s.status);
    let mut text = merged.to_string();
    for story in &m.stories {
        let want = pick(status(&a, &story.id), status(&o, &story.id), status(&t, &story.id));
        let Some(want) = want.filter(|w| *w != story.status) else { continue };
        if let Some(current) = parse(name, &text) {
            if let Ok(new) = prd::set_status(&text, &current, &story.id, want) {
                text = new;
            }
        }
    }
    text
}

/// `text` with the stories `ids` marked completed (those it has), touching only status marks.
/// `None` when nothing changes. Stories whose marks cannot say completed are left as they are.
pub fn mark_done(name: &str, text: &str, ids: &BTreeSet<String>) -> Option<String> {
    mark(name, text, ids, Status::Completed)
}

/// `text` with the stories `ids` that are done marked pending again (the reverse of
/// [`mark_done`], for `stream unmerge`), touching only status marks. `None` when nothing changes.
pub fn mark_open(name: &str, text: &str, ids: &BTreeSet<String>) -> Option<String> {
    mark(name, text, ids, Status::Pending)
}

fn mark(name: &str, text: &str, ids: &BTreeSet<String>, to: Status) -> Option<String> {
    let mut out = text.to_string();
    let prd = parse(name, text)?;
    let wanted = |s: &prd::Story| ids.contains(&s.id) && s.status.is_done() != (to == Status::Completed);
    for story in prd.stories.iter().filter(|s| wanted(s)) {
        if let Some(current) = parse(name, &out) {
            if let Ok(new) = prd::set_status(&out, &current, &story.id, to) {
                out = new;
            }
        }
    }
    (out != text).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ANC: &str =
        "# PRD\n\n### [ ] US-001: One\nText one.\n\n### [ ] US-002: Two\nText two.\n\n### [ ] US-003: Three\n";

    #[test]
    fn normalize_resets_marks_only() {
        let side = ANC.replace("[ ] US-001", "[x] US-001").replace("Text two.", "Text two, edited.");
        let n = normalize("prd.md", ANC, &side).unwrap();
        assert_eq!(n, ANC.replace("Text two.", "Text two, edited."));
    }

    #[test]
    fn done_on_either_side_is_done() {
        let ours = ANC.replace("[ ] US-001", "[x] US-001");
        let theirs = ANC.replace("[ ] US-002", "[x] US-002").replace("[ ] US-003", "[~] US-003");
        let out = resolve("prd.md", ANC, ANC, &ours, &theirs);
        let p = prd::parse("prd.md", &out).unwrap();
        let st: Vec<Status> = p.stories.iter().map(|s| s.status).collect();
        assert_eq!(st, [Status::Completed, Status::Completed, Status::InProgress]);
    }

    #[test]
    fn pick_rules() {
        use Status::*;
        assert_eq!(pick(Some(Pending), Some(Completed), Some(Pending)), Some(Completed));
        assert_eq!(pick(Some(Completed), Some(Completed), Some(Pending)), Some(Completed));
        assert_eq!(pick(Some(Pending), Some(InProgress), Some(Blocked)), Some(Blocked));
        assert_eq!(pick(Some(Pending), Some(InProgress), Some(Pending)), Some(InProgress));
        assert_eq!(pick(None, None, Some(Pending)), Some(Pending));
    }

    #[test]
    fn mark_done_touches_marks_only() {
        let ids: BTreeSet<String> = ["US-002".to_string(), "US-404".to_string()].into();
        let out = mark_done("prd.md", ANC, &ids).unwrap();
        assert_eq!(out, ANC.replace("[ ] US-002", "[x] US-002"));
        assert!(mark_done("prd.md", &out, &ids).is_none());
        assert_eq!(mark_open("prd.md", &out, &ids).unwrap(), ANC);
        assert!(mark_open("prd.md", ANC, &ids).is_none());
        let json = r#"{"userStories": [{"id": "US-002", "title": "t", "passes": false}]}"#;
        assert_eq!(mark_done("prd.json", json, &ids).unwrap(), json.replace("false", "true"));
    }

    fn mark(i: u8) -> char {
        [' ', 'x', '~', '!'][usize::from(i % 4)]
    }

    fn doc(marks: &[u8]) -> String {
        let mut s = String::from("# PRD\n\n");
        for (i, m) in marks.iter().enumerate() {
            s.push_str(&format!("### [{}] US-{:03}: Story {i}\nBody {i}.\n\n", mark(*m), i + 1));
        }
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever marks the three versions carry, the resolved PRD has every story completed
        /// that either side completed, and normalizing makes both sides equal to the ancestor.
        #[test]
        fn story_wise_merge(a in prop::collection::vec(0u8..4, 1..8), o in prop::collection::vec(0u8..4, 8), t in prop::collection::vec(0u8..4, 8)) {
            let n = a.len();
            let (anc, ours, theirs) = (doc(&a), doc(&o[..n]), doc(&t[..n]));
            prop_assert_eq!(normalize("prd.md", &anc, &ours).unwrap(), anc.clone());
            prop_assert_eq!(normalize("prd.md", &anc, &theirs).unwrap(), anc.clone());
            let out = resolve("prd.md", &anc, &anc, &ours, &theirs);
            let p = prd::parse("prd.md", &out).unwrap();
            for (i, s) in p.stories.iter().enumerate() {
                if o[i] % 4 == 1 || t[i] % 4 == 1 {
                    prop_assert_eq!(s.status, Status::Completed);
                }
            }
            // Only status marks changed.
            let strip = |s: &str| s.replace(['x', '~', '!'], " ");
            prop_assert_eq!(strip(&out), strip(&anc));
        }
    }
}
