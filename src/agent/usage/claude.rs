//! Claude Code's transcript (`transcript_path` of a hook payload; a subagent's own transcript is
//! `agent_transcript_path`, under `<session>/subagents/`): JSON lines, the assistant's messages
//! as `{"type":"assistant","message":{"id","model","usage":{input_tokens, output_tokens,
//! cache_creation_input_tokens, cache_read_input_tokens}}}`. Claude Code writes one line per
//! content block of a message, each with the same message id and usage: a message counts once,
//! by its id (the API's, unique), with the largest figures its lines give (an earlier block's
//! line may hold a count the stream had not finished).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{contains, key, model, some, tail, tokens, Bad, Skipped, Usage};
use crate::spend::Amount;

/// The source of the amounts read here.
pub const SOURCE: &str = "claude";

/// The most subagent transcripts read at one Stop (the newest).
pub const MAX_SUBAGENTS: usize = 64;

/// The usage of every assistant message in the transcript at `path` (its tail, see
/// [`super::MAX_READ`]).
pub fn read(path: &Path) -> Usage {
    let mut skipped = Skipped::default();
    let tail = tail(path, &mut skipped);
    let mut by_id: BTreeMap<String, (usize, Amount)> = BTreeMap::new();
    for (n, line) in tail.lines().enumerate() {
        // Only lines that may be an assistant's message are parsed; any other line that is not
        // even shaped as a JSON object is counted.
        if !contains(line, b"\"usage\"") || !contains(line, b"\"assistant\"") {
            if !line.trim_ascii().starts_with(b"{") || !line.trim_ascii().ends_with(b"}") {
                skipped.not_json += 1;
            }
            continue;
        }
        // Only the fields read are kept: the content (text, tool input) is skipped unparsed.
        let Ok(entry) = serde_json::from_slice::<Line>(line) else {
            skipped.not_json += 1;
            continue;
        };
        if entry.kind.as_deref() != Some("assistant") {
            continue;
        }
        let Some(message) = entry.message else { continue };
        match amount(&message) {
            Ok(Some(a)) => {
                let entry = by_id.entry(a.key.clone()).or_insert((n, a.clone()));
                entry.1 = larger(&entry.1, &a);
            }
            Ok(None) => {}
            Err(bad) => bad.count(&mut skipped),
        }
    }
    // In the order the transcript has them.
    let mut amounts: Vec<(usize, Amount)> = by_id.into_values().collect();
    amounts.sort_by_key(|(n, _)| *n);
    let amounts = amounts.into_iter().map(|(_, a)| a).collect();
    let mut usage = Usage { amounts, skipped, from: path.display().to_string() };
    usage.bound();
    usage
}

/// The fields of a transcript line that are read.
#[derive(serde::Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<Message>,
}

#[derive(serde::Deserialize)]
struct Message {
    id: Option<Value>,
    model: Option<Value>,
    usage: Option<Value>,
}

/// A main agent's Stop: its transcript, and those of its subagents (`<transcript without
/// .jsonl>/subagents/*.jsonl`, the [`MAX_SUBAGENTS`] newest), in case a SubagentStop did not
/// record them (a background subagent, a hook that timed out). Keys make a second reading free.
pub fn read_session(transcript: &Path) -> Usage {
    let mut usage = read(transcript);
    let dir = transcript.with_extension("").join("subagents");
    let Ok(entries) = std::fs::read_dir(&dir) else { return usage };
    let mut files: Vec<(std::time::SystemTime, std::path::PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    files.sort();
    let over = files.len().saturating_sub(MAX_SUBAGENTS);
    usage.skipped.over_limit += over as u64;
    for (_, f) in files.into_iter().skip(over) {
        usage.extend(read(&f));
    }
    usage
}

/// The amount of one assistant `message`; `None` for one that spent nothing (Claude Code's own
/// `<synthetic>` messages, an error shown as a message).
fn amount(message: &Message) -> Result<Option<Amount>, Bad> {
    let Some(id) = message.id.as_ref().and_then(Value::as_str) else { return Ok(None) };
    let Some(usage) = message.usage.as_ref().filter(|u| u.is_object()) else { return Ok(None) };
    let name = message.model.as_ref().and_then(Value::as_str);
    if name == Some("<synthetic>") {
        return Ok(None);
    }
    let tokens_in = tokens(usage.get("input_tokens"))?;
    let tokens_out = tokens(usage.get("output_tokens"))?;
    let cache_write = tokens(usage.get("cache_creation_input_tokens"))?;
    let cache_read = tokens(usage.get("cache_read_input_tokens"))?;
    if tokens_in + tokens_out + cache_write + cache_read == 0 {
        return Ok(None);
    }
    let mut a = Amount::tokens(key(SOURCE, id)?, SOURCE, tokens_in, tokens_out);
    a.model = model(name);
    a.cache_write = some(cache_write);
    a.cache_read = some(cache_read);
    Ok(Some(a))
}

/// The larger figures of two lines of one message.
fn larger(a: &Amount, b: &Amount) -> Amount {
    let max = |x: Option<&u64>, y: Option<&u64>| super::some(*x.unwrap_or(&0).max(y.unwrap_or(&0)));
    let mut out = b.clone();
    out.tokens_in = a.tokens_in.max(b.tokens_in);
    out.tokens_out = a.tokens_out.max(b.tokens_out);
    out.cache_write = max(a.cache_write.get(), b.cache_write.get());
    out.cache_read = max(a.cache_read.get(), b.cache_read.get());
    if out.model.is_absent() {
        out.model = a.model.clone();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, usage: &str) -> String {
        format!(
            "{{\"type\":\"assistant\",\"message\":{{\"id\":\"{id}\",\"model\":\"claude-x\",\"role\":\"assistant\",\"usage\":{usage}}}}}\n"
        )
    }

    #[test]
    fn each_message_counts_once_with_its_largest_figures_and_bad_lines_are_counted() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let mut text = String::from("{\"type\":\"user\",\"message\":{\"content\":\"hi\"}}\n");
        text += &line("m1", r#"{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":5}"#);
        text += &line("m1", r#"{"input_tokens":10,"output_tokens":30,"cache_read_input_tokens":5}"#);
        text += "not json at all\n{\"type\":\"assistant\",\"usage\": broken\n";
        text += &line("m2", r#"{"input_tokens":-4,"output_tokens":3}"#);
        text += &line("m3", r#"{"input_tokens":4000000000,"output_tokens":3}"#);
        text += &line("m4", r#"{"input_tokens":7,"output_tokens":2,"cache_creation_input_tokens":100}"#);
        std::fs::write(&path, text).unwrap();
        let u = read(&path);
        type Row = (String, u64, u64, Option<u64>, Option<u64>);
        let got: Vec<Row> = u
            .amounts
            .iter()
            .map(|a| {
                (a.key.clone(), a.tokens_in, a.tokens_out, a.cache_write.get().copied(), a.cache_read.get().copied())
            })
            .collect();
        assert_eq!(got, [("claude:m1".into(), 10, 30, None, Some(5)), ("claude:m4".into(), 7, 2, Some(100), None)]);
        assert_eq!(u.amounts[0].model.get().map(String::as_str), Some("claude-x"));
        assert_eq!((u.skipped.not_json, u.skipped.negative, u.skipped.absurd), (2, 1, 1));
    }
}
