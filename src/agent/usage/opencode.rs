//! OpenCode's session messages. OpenCode keeps them in a SQLite database git-boulder does not
//! read; its plugin (`harness/opencode/git-boulder.js`) asks OpenCode for them when a session
//! goes idle and hands the assistant messages' info over in the payload's `messages`: `{id,
//! modelID, providerID, tokens: {input, output, reasoning, cache: {read, write}}, cost, time:
//! {completed}}`. Each message counts once, by its id, when it is completed (a message still
//! being written holds partial figures). OpenCode's `input` leaves the cached tokens out and its
//! `output` the reasoning ones, so the output counted is `output + reasoning`; `cost` is OpenCode's
//! own figure in US dollars from its model's prices, kept when above 0 (0 is what OpenCode says
//! for a model it has no price for: the price table decides then).

use serde_json::Value;

use super::{key, model, some, tokens, Bad, Skipped, Usage, MAX_AMOUNTS};
use crate::spend::Amount;
use crate::state::op::MAX_USD;
use crate::state::Opt;

/// The source of the amounts read here.
pub const SOURCE: &str = "opencode";

/// Where they come from, for a report.
pub const FROM: &str = "the messages the OpenCode plugin sent";

/// The usage of the completed assistant messages in `messages` (a payload's field); anything
/// else there is skipped and counted.
pub fn read(messages: Option<&Value>) -> Usage {
    let mut skipped = Skipped::default();
    let Some(list) = messages.and_then(Value::as_array) else {
        if messages.is_some_and(|m| !m.is_null()) {
            skipped.not_json += 1;
        }
        return Usage { amounts: Vec::new(), skipped, from: FROM.into() };
    };
    let start = list.len().saturating_sub(MAX_AMOUNTS);
    skipped.over_limit += start as u64;
    let mut amounts = Vec::new();
    for m in &list[start..] {
        let info = m.get("info").unwrap_or(m);
        if !info.is_object() {
            skipped.not_json += 1;
            continue;
        }
        if info.get("role").and_then(Value::as_str).is_some_and(|r| r != "assistant") {
            continue;
        }
        let completed = info.get("time").and_then(|t| t.get("completed")).is_some_and(|c| !c.is_null());
        if !completed {
            continue;
        }
        match amount(info) {
            Ok(Some(a)) => amounts.push(a),
            Ok(None) => {}
            Err(bad) => bad.count(&mut skipped),
        }
    }
    Usage { amounts, skipped, from: FROM.into() }
}

fn amount(info: &Value) -> Result<Option<Amount>, Bad> {
    let Some(id) = info.get("id").and_then(Value::as_str) else { return Err(Bad::Absurd) };
    let Some(t) = info.get("tokens").filter(|t| t.is_object()) else { return Ok(None) };
    let cache = t.get("cache");
    let input = tokens(t.get("input"))?;
    let out = tokens(t.get("output"))?;
    let reasoning = tokens(t.get("reasoning"))?;
    let read = tokens(cache.and_then(|c| c.get("read")))?;
    let write = tokens(cache.and_then(|c| c.get("write")))?;
    let usd = match info.get("cost") {
        None | Some(Value::Null) => None,
        Some(c) => match c.as_f64() {
            Some(c) if c < 0.0 => return Err(Bad::Negative),
            Some(c) if c.is_finite() && c <= MAX_USD => Some(c),
            _ => return Err(Bad::Absurd),
        },
    };
    if input + out + reasoning + read + write == 0 && usd.unwrap_or(0.0) == 0.0 {
        return Ok(None);
    }
    let mut a = Amount::tokens(key(SOURCE, id)?, SOURCE, input, out + reasoning);
    a.model = model(info.get("modelID").and_then(Value::as_str));
    a.cache_read = some(read);
    a.cache_write = some(write);
    a.usd = usd.filter(|c| *c > 0.0).map_or(Opt::Absent, Opt::Set);
    Ok(Some(a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn completed_assistant_messages_count_with_their_cost() {
        let done = json!({"completed": 2});
        let messages = json!([
            {"id": "u1", "role": "user"},
            {"id": "a1", "role": "assistant", "modelID": "m", "time": done,
             "tokens": {"input": 400, "output": 30, "reasoning": 20, "cache": {"read": 600, "write": 0}}, "cost": 0.00213},
            {"id": "a2", "role": "assistant", "time": {"created": 1}, "tokens": {"input": 1, "output": 1}},
            {"id": "a3", "role": "assistant", "time": done, "tokens": {"input": -1, "output": 1}},
            {"id": "a4", "role": "assistant", "time": done, "tokens": {"input": 1, "output": 1}, "cost": 1e9},
            {"info": {"id": "a5", "role": "assistant", "time": done, "tokens": {"input": 5, "output": 6}, "cost": 0}},
            "nonsense"
        ]);
        let u = read(Some(&messages));
        let got: Vec<(String, u64, u64, Option<f64>)> =
            u.amounts.iter().map(|a| (a.key.clone(), a.tokens_in, a.tokens_out, a.usd.get().copied())).collect();
        assert_eq!(got, [("opencode:a1".into(), 400, 50, Some(0.00213)), ("opencode:a5".into(), 5, 6, None)]);
        assert_eq!(u.amounts[0].cache_read.get(), Some(&600));
        assert_eq!((u.skipped.negative, u.skipped.absurd, u.skipped.not_json), (1, 1, 1));
        assert_eq!(read(Some(&json!("x"))).skipped.not_json, 1);
    }
}
