//! Codex's session rollout (`transcript_path` of its Stop payload, a JSON-lines file under
//! `$CODEX_HOME/sessions/`). Codex writes a `token_usage_record` line after each model response:
//! `{"type":"token_usage_record","payload":{"session_id","turn_id","response_id","usage":
//! {input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, …}}}`: each
//! response counts once, by its `response_id` (the API's, unique). Its `input_tokens` include the
//! cached ones, so the uncached input is `input_tokens - cached_input_tokens`; `output_tokens`
//! include the reasoning ones. The model is the one of the turn's `turn_context` line.
//!
//! A rollout without `token_usage_record` lines (an older Codex) is read from its `token_count`
//! events instead: each `last_token_usage`, keyed by the session and the cumulative
//! `total_token_usage.total_tokens` after it — which grows with every response, and is the same
//! when Codex repeats an event — so a repeated event counts once too.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{contains, key, model, parse_line, some, tail, tokens, Bad, Skipped, Usage};
use crate::spend::Amount;

/// The source of the amounts read here.
pub const SOURCE: &str = "codex";

/// The usage of every model response in the rollout at `path` (its tail, see
/// [`super::MAX_READ`]).
pub fn read(path: &Path) -> Usage {
    let mut skipped = Skipped::default();
    let tail = tail(path, &mut skipped);
    let mut models: BTreeMap<String, String> = BTreeMap::new();
    let mut last_model: Option<String> = None;
    let mut session: Option<String> = None;
    let mut records = Vec::new();
    let mut counts = Vec::new();
    for line in tail.lines() {
        let wanted = [&b"token_usage_record"[..], b"token_count", b"turn_context", b"session_meta"];
        if !wanted.iter().any(|w| contains(line, w)) {
            if !line.trim_ascii().starts_with(b"{") || !line.trim_ascii().ends_with(b"}") {
                skipped.not_json += 1;
            }
            continue;
        }
        let Some(v) = parse_line(line, &mut skipped) else { continue };
        let payload = v.get("payload").cloned().unwrap_or(Value::Null);
        let s = |k: &str| payload.get(k).and_then(Value::as_str).map(str::to_owned);
        match v.get("type").and_then(Value::as_str) {
            Some("session_meta") => session = s("id").or(session),
            Some("turn_context") => {
                if let Some(m) = s("model") {
                    if let Some(t) = s("turn_id") {
                        models.insert(t, m.clone());
                    }
                    last_model = Some(m);
                }
            }
            Some("token_usage_record") => records.push(payload),
            Some("event_msg") if s("type").as_deref() == Some("token_count") => counts.push(payload),
            _ => {}
        }
    }
    let model_of = |p: &Value| {
        p.get("turn_id").and_then(Value::as_str).and_then(|t| models.get(t)).or(last_model.as_ref()).cloned()
    };
    let mut amounts = Vec::new();
    if !records.is_empty() {
        for p in &records {
            let Some(id) = p.get("response_id").and_then(Value::as_str) else {
                skipped.not_json += 1;
                continue;
            };
            match amount(key(SOURCE, id), p.get("usage"), model_of(p)) {
                Ok(Some(a)) => amounts.push(a),
                Ok(None) => {}
                Err(bad) => bad.count(&mut skipped),
            }
        }
    } else {
        let session = session.or_else(|| file_session(path)).unwrap_or_default();
        for p in &counts {
            let info = p.get("info");
            let total = info.and_then(|i| i.get("total_token_usage")).and_then(|t| t.get("total_tokens"));
            let Some(total) = total.and_then(Value::as_u64) else { continue };
            let k = key(SOURCE, &format!("{session}:t{total}"));
            match amount(k, info.and_then(|i| i.get("last_token_usage")), last_model.clone()) {
                Ok(Some(a)) => amounts.push(a),
                Ok(None) => {}
                Err(bad) => bad.count(&mut skipped),
            }
        }
    }
    let mut usage = Usage { amounts, skipped, from: path.display().to_string() };
    usage.bound();
    usage
}

/// The session id at the end of a rollout's file name (`rollout-DATE-ID.jsonl`).
fn file_session(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    (stem.len() > 36).then(|| stem[stem.len() - 36..].to_string())
}

/// The amount of one usage object (Codex's token usage shape).
fn amount(key: Result<String, Bad>, usage: Option<&Value>, name: Option<String>) -> Result<Option<Amount>, Bad> {
    let Some(u) = usage.filter(|u| u.is_object()) else { return Ok(None) };
    let key = key?;
    let input = tokens(u.get("input_tokens"))?;
    let cached = tokens(u.get("cached_input_tokens"))?;
    let cache_write = tokens(u.get("cache_write_input_tokens"))?;
    let out = tokens(u.get("output_tokens"))?;
    if cached > input {
        return Err(Bad::Absurd);
    }
    if input + out + cache_write == 0 {
        return Ok(None);
    }
    let mut a = Amount::tokens(key, SOURCE, input - cached, out);
    a.model = model(name.as_deref());
    a.cache_read = some(cached);
    a.cache_write = some(cache_write);
    Ok(Some(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_response_counts_once_uncached_input_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rollout-2026-11-28T21-29-21-01a22410-0e00-7461-9c3a-824468b66f66.jsonl");
        let rec = |rid: &str, usage: &str| {
            format!("{{\"type\":\"token_usage_record\",\"payload\":{{\"turn_id\":\"t1\",\"response_id\":\"{rid}\",\"usage\":{usage}}}}}\n")
        };
        let mut text =
            String::from("{\"type\":\"turn_context\",\"payload\":{\"turn_id\":\"t1\",\"model\":\"gpt-x\"}}\n");
        text += &rec("r1", r#"{"input_tokens":1000,"cached_input_tokens":600,"output_tokens":50}"#);
        text += &rec("r2", r#"{"input_tokens":-1,"output_tokens":5}"#);
        text += &rec("r3", r#"{"input_tokens":10,"cached_input_tokens":20,"output_tokens":5}"#);
        text += "garbage\n";
        std::fs::write(&path, text).unwrap();
        let u = read(&path);
        assert_eq!(u.amounts.len(), 1);
        let a = &u.amounts[0];
        assert_eq!((a.key.as_str(), a.tokens_in, a.tokens_out, a.cache_read.get()), ("codex:r1", 400, 50, Some(&600)));
        assert_eq!(a.model.get().map(String::as_str), Some("gpt-x"));
        assert_eq!((u.skipped.negative, u.skipped.absurd, u.skipped.not_json), (1, 1, 1));
    }

    #[test]
    fn without_records_token_count_events_count_once_each() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rollout-x.jsonl");
        let ev = |total: u64, last: u64| {
            format!("{{\"type\":\"event_msg\",\"payload\":{{\"type\":\"token_count\",\"info\":{{\"total_token_usage\":{{\"total_tokens\":{total}}},\"last_token_usage\":{{\"input_tokens\":{last},\"output_tokens\":1}}}}}}}}\n")
        };
        let text = String::from("{\"type\":\"session_meta\",\"payload\":{\"id\":\"S\"}}\n")
            + &ev(11, 10)
            + &ev(11, 10)
            + &ev(22, 10);
        std::fs::write(&path, text).unwrap();
        let keys: Vec<String> = read(&path).amounts.into_iter().map(|a| a.key).collect();
        assert_eq!(keys, ["codex:S:t11", "codex:S:t11", "codex:S:t22"]);
    }
}
