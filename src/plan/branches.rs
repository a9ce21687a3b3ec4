//! The streams of a plan by branch, kept beside the plan's very text: what the post-commit hook
//! needs of the plan on every commit, without parsing YAML again while the text is unchanged
//! (parsing is most of what the plan costs a commit, and grows with the plan).
//!
//! Pure: [`Branches::encode`] writes the plan's text and its streams' names and branches;
//! [`Branches::decode`] gives them back only for exactly that text, written by this version of
//! git-boulder (which parses it the same way), and `None` for anything else — another text, another
//! version, a file cut short or not ours.

use super::Plan;

/// The first line of the encoding; the version of git-boulder follows it.
const HEADER: &str = "git-boulder plan-branches 1";
/// Its last line.
const END: &str = "end\n";

/// The streams of a plan: name and branch of each, in the plan's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branches {
    streams: Vec<(String, String)>,
}

impl Branches {
    /// Those of `plan`.
    pub fn of(plan: &Plan) -> Self {
        Branches { streams: plan.streams.iter().map(|s| (s.name.clone(), s.branch.clone())).collect() }
    }

    /// The name of the stream whose branch is `branch`, if any ([`Plan::stream_for_branch`]).
    pub fn stream_for_branch(&self, branch: &str) -> Option<&str> {
        self.streams.iter().find(|(_, b)| b == branch).map(|(n, _)| n.as_str())
    }

    /// Whether the plan has a stream named `name`.
    pub fn has_stream(&self, name: &str) -> bool {
        self.streams.iter().any(|(n, _)| n == name)
    }

    /// These branches with `text`, the plan they are of.
    pub fn encode(&self, text: &str) -> Vec<u8> {
        let mut out = format!("{HEADER} {}\n{}\n", env!("CARGO_PKG_VERSION"), text.len()).into_bytes();
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(format!("\n{}\n", self.streams.len()).as_bytes());
        for (name, branch) in &self.streams {
            out.extend_from_slice(format!("{name}\t{branch}\n").as_bytes());
        }
        out.extend_from_slice(END.as_bytes());
        out
    }

    /// The branches `bytes` ([`Branches::encode`]) hold for the plan `text`; `None` unless they
    /// were written for exactly that text by this version.
    pub fn decode(bytes: &[u8], text: &str) -> Option<Self> {
        let (header, rest) = split_line(bytes)?;
        if header != format!("{HEADER} {}", env!("CARGO_PKG_VERSION")).as_bytes() {
            return None;
        }
        let (len, rest) = split_line(rest)?;
        let len: usize = std::str::from_utf8(len).ok()?.parse().ok()?;
        if rest.get(..len)? != text.as_bytes() {
            return None;
        }
        let rest = rest[len..].strip_prefix(b"\n")?;
        let (count, mut rest) = split_line(rest)?;
        let count: usize = std::str::from_utf8(count).ok()?.parse().ok()?;
        let mut streams = Vec::with_capacity(count.min(rest.len() / 4));
        for _ in 0..count {
            let (line, after) = split_line(rest)?;
            let (name, branch) = std::str::from_utf8(line).ok()?.split_once('\t')?;
            if crate::names::problem(name).is_some() || branch.is_empty() || branch.chars().any(char::is_control) {
                return None;
            }
            streams.push((name.to_string(), branch.to_string()));
            rest = after;
        }
        (rest == END.as_bytes()).then_some(Branches { streams })
    }
}

/// The first line of `bytes` (without its newline) and what follows it; `None` without a newline.
fn split_line(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = bytes.iter().position(|&b| b == b'\n')?;
    Some((&bytes[..at], &bytes[at + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn plan(streams: &[(&str, &str)]) -> (String, Plan) {
        let mut text = String::from("version: 1\nstreams:\n");
        for (name, branch) in streams {
            text.push_str(&format!("  {name}:\n    paths: [src/{name}/**]\n"));
            if !branch.is_empty() {
                text.push_str(&format!("    branch: {branch}\n"));
            }
        }
        let parsed = crate::plan::parse(&text).unwrap();
        (text, parsed)
    }

    #[test]
    fn the_branches_of_a_plan_come_back_for_its_text_only() {
        let (text, parsed) = plan(&[("auth", ""), ("api", "team/api"), ("project", "")]);
        let branches = Branches::of(&parsed);
        let bytes = branches.encode(&text);
        let back = Branches::decode(&bytes, &text).unwrap();
        assert_eq!(back, branches);
        assert_eq!(back.stream_for_branch("boulder/auth"), Some("auth"));
        assert_eq!(back.stream_for_branch("team/api"), Some("api"));
        assert_eq!(back.stream_for_branch("boulder/api"), None);
        assert!(back.has_stream("project") && !back.has_stream("web"));
        // One byte of the plan changed, the encoding cut short, or another version's: nothing.
        assert_eq!(Branches::decode(&bytes, &text.replace("auth", "auht")), None);
        for cut in [1, 10, bytes.len() / 2, bytes.len() - 1] {
            assert_eq!(Branches::decode(&bytes[..cut], &text), None, "cut at {cut}");
        }
        let other = String::from_utf8(bytes.clone()).unwrap().replacen(env!("CARGO_PKG_VERSION"), "0.0.0-other", 1);
        assert_eq!(Branches::decode(other.as_bytes(), &text), None);
        // A name no plan could have is not taken from the file.
        let forged = String::from_utf8(bytes).unwrap().replace("auth\tboulder/auth", "../x\tboulder/auth");
        assert_eq!(Branches::decode(forged.as_bytes(), &text), None);
    }

    proptest! {
        #[test]
        fn any_branches_round_trip_and_any_bytes_decode_without_panic(
            streams in proptest::collection::vec(("[a-z][a-z0-9-]{0,12}", "[a-z][a-z0-9/_.-]{0,20}"), 0..20),
            text in "(?s).{0,200}",
            noise in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let branches = Branches { streams };
            let bytes = branches.encode(&text);
            prop_assert_eq!(Branches::decode(&bytes, &text), Some(branches.clone()));
            // Another text never matches; garbage decodes to nothing or something, never a panic.
            let other = format!("{text}x");
            prop_assert_eq!(Branches::decode(&bytes, &other), None);
            let _ = Branches::decode(&noise, &text);
            let mut spliced = bytes.clone();
            spliced.extend_from_slice(&noise);
            if !noise.is_empty() {
                prop_assert_eq!(Branches::decode(&spliced, &text), None);
            }
        }
    }
}
