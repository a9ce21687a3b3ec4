//! What a stream spent, as its op-log keeps it: the amounts of a `spent` op ([`SpendAmount`]),
//! and the ledger of [`super::StreamState`] they add to ([`Spend`]).
//!
//! An amount is recorded once: its `key` (a harness's message or session id, `spend add --id`,
//! a run's id) is kept in the ledger, and an amount whose key is there already adds nothing. So
//! ops from several machines merged in any order give the same totals, and a hook that runs
//! twice counts once. One `spent` op carries up to [`MAX_AMOUNTS`] amounts, so a hook appends
//! one op for each batch of new entries it read, not one per entry.
//!
//! The ledger keeps totals, not amounts: one row per (reset, UTC day, actor, model, whether the
//! harness reported the cost), which is what `git boulder spend --since/--by` and the budgets
//! need. Costs the harness reported are kept in micro-dollars (whole numbers), so sums do not
//! depend on the order they were added in.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{field, opt, Op, OpError, Opt};

/// Amounts one `spent` op may carry.
pub const MAX_AMOUNTS: usize = 1000;
/// The longest key accepted (bytes).
pub const MAX_KEY: usize = 256;
/// The longest model name accepted (bytes).
pub const MAX_MODEL: usize = 128;
/// The most tokens of one kind one amount may claim (more is not usage, it is garbage).
pub const MAX_TOKENS: u64 = 1_000_000_000;
/// The largest cost one amount may claim, in US dollars.
pub const MAX_USD: f64 = 100_000.0;
/// The longest wall time one amount may claim (seven days, in seconds).
pub const MAX_SECONDS: u64 = 7 * 24 * 3600;
/// The sources git-boulder writes (any short lowercase word is accepted: newer writers may add).
pub const SOURCES: &[&str] = &["claude", "codex", "opencode", "manual", "run"];

/// One amount of a `spent` op: tokens, cost, or an agent run's wall time, identified by `key`.
/// Fields in the order of their keys sorted, as written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendAmount {
    /// Tokens read from the prompt cache.
    #[serde(skip_serializing_if = "Opt::is_absent")]
    pub cache_read: Opt<u64>,
    /// Tokens written to the prompt cache.
    #[serde(skip_serializing_if = "Opt::is_absent")]
    pub cache_write: Opt<u64>,
    /// How an agent run ended (its exit code), for `source: run`.
    #[serde(skip_serializing_if = "Opt::is_absent")]
    pub exit: Opt<i64>,
    /// What identifies the amount once (1 to [`MAX_KEY`] bytes, no control characters).
    pub key: String,
    /// The model that spent it, as the harness names it.
    #[serde(skip_serializing_if = "Opt::is_absent")]
    pub model: Opt<String>,
    /// Wall time of an agent run, in whole seconds.
    #[serde(skip_serializing_if = "Opt::is_absent")]
    pub seconds: Opt<u64>,
    /// Where it was read: `claude`, `codex`, `opencode`, `manual`, `run`.
    pub source: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// The cost in US dollars, when the harness reported it (it wins over the price table).
    #[serde(skip_serializing_if = "Opt::is_absent")]
    pub usd: Opt<f64>,
}

impl SpendAmount {
    /// An amount of `tokens_in` and `tokens_out` under `key`, from `source`, nothing else said.
    pub fn tokens(key: impl Into<String>, source: &str, tokens_in: u64, tokens_out: u64) -> SpendAmount {
        SpendAmount {
            cache_read: Opt::Absent,
            cache_write: Opt::Absent,
            exit: Opt::Absent,
            key: key.into(),
            model: Opt::Absent,
            seconds: Opt::Absent,
            source: source.to_string(),
            tokens_in,
            tokens_out,
            usd: Opt::Absent,
        }
    }

    /// Read one entry of `data.amounts`.
    fn parse(kind: &str, v: &serde_json::Value) -> Result<SpendAmount, OpError> {
        let serde_json::Value::Object(_) = v else { return Err(bad(kind, "amounts", "an entry is not an object")) };
        // The entry read with the envelope's field readers.
        let op =
            Op { v: 1, kind: kind.to_string(), lamport: 1, at: String::new(), actor: String::new(), data: v.clone() };
        if let Some(k) = v.as_object().and_then(|o| o.keys().find(|k| !AMOUNT_KEYS.contains(&k.as_str()))) {
            return Err(bad(kind, "amounts", &format!("an entry has the unknown field {k:?}")));
        }
        // Types here; bounds in `check`, so that a typed op is refused as its JSON would be.
        let a = SpendAmount {
            cache_read: opt(&op, "cache_read", || number(&op, "cache_read"))?,
            cache_write: opt(&op, "cache_write", || number(&op, "cache_write"))?,
            exit: opt(&op, "exit", || {
                field(&op, "exit")
                    .and_then(|v| v.as_i64())
                    .ok_or_else(|| bad(kind, "exit", "must be a whole number (an exit code)"))
            })?,
            key: text(&op, "key")?,
            model: opt(&op, "model", || text(&op, "model"))?,
            seconds: opt(&op, "seconds", || number(&op, "seconds"))?,
            source: text(&op, "source")?,
            tokens_in: number(&op, "tokens_in")?,
            tokens_out: number(&op, "tokens_out")?,
            usd: opt(&op, "usd", || {
                field(&op, "usd")
                    .and_then(|v| v.as_f64())
                    .ok_or_else(|| bad(kind, "usd", "must be a number of US dollars"))
            })?,
        };
        a.check(kind)?;
        Ok(a)
    }

    /// The bounds of every field: what `parse` refuses, `check` refuses typed.
    pub fn check(&self, kind: &str) -> Result<(), OpError> {
        let name = |key: &'static str, s: &str, max: usize| {
            if s.is_empty() || s.len() > max || s.chars().any(char::is_control) {
                return Err(bad(kind, key, &format!("must be 1 to {max} bytes without control characters")));
            }
            Ok(())
        };
        name("key", &self.key, MAX_KEY)?;
        self.model.get().map_or(Ok(()), |m| name("model", m, MAX_MODEL))?;
        super::check_word(kind, "source", &self.source)?;
        for (key, n) in [
            ("tokens_in", Some(&self.tokens_in)),
            ("tokens_out", Some(&self.tokens_out)),
            ("cache_write", self.cache_write.get()),
            ("cache_read", self.cache_read.get()),
        ] {
            if n.is_some_and(|n| *n > MAX_TOKENS) {
                return Err(bad(kind, key, &format!("must be a whole number of tokens up to {MAX_TOKENS}")));
            }
        }
        if self.seconds.get().is_some_and(|s| *s > MAX_SECONDS) {
            return Err(bad(kind, "seconds", &format!("must be a whole number of seconds up to {MAX_SECONDS}")));
        }
        if self.usd.get().is_some_and(|u| !(u.is_finite() && (0.0..=MAX_USD).contains(u))) {
            return Err(bad(kind, "usd", &format!("must be a number of US dollars from 0 to {MAX_USD}")));
        }
        if self.exit.get().is_some_and(|n| !(i64::from(i32::MIN)..=i64::from(u32::MAX)).contains(n)) {
            return Err(bad(kind, "exit", "must be a whole number (an exit code)"));
        }
        Ok(())
    }
}

const AMOUNT_KEYS: &[&str] =
    &["cache_read", "cache_write", "exit", "key", "model", "seconds", "source", "tokens_in", "tokens_out", "usd"];

fn bad(kind: &str, key: &'static str, why: &str) -> OpError {
    OpError::Bad { kind: kind.to_string(), key, why: why.to_string() }
}

/// A whole number, not negative (a JSON integer: `1.5` or `-1` are refused).
fn number(op: &Op, key: &'static str) -> Result<u64, OpError> {
    match field(op, key) {
        None => Err(OpError::MissingField { kind: op.kind.clone(), key }),
        Some(v) => v.as_u64().ok_or_else(|| bad(&op.kind, key, "must be a whole number, not negative")),
    }
}

/// A string, any (its bounds are checked by `check`).
fn text(op: &Op, key: &'static str) -> Result<String, OpError> {
    match field(op, key) {
        None => Err(OpError::MissingField { kind: op.kind.clone(), key }),
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(OpError::NotAString { kind: op.kind.clone(), key }),
    }
}

/// Read `data.amounts` of a `spent` op: 1 to [`MAX_AMOUNTS`] entries.
pub(super) fn parse_amounts(op: &Op) -> Result<Vec<SpendAmount>, OpError> {
    let Some(list) = field(op, "amounts") else {
        return Err(OpError::MissingField { kind: op.kind.clone(), key: "amounts" });
    };
    let Some(list) = list.as_array() else { return Err(bad(&op.kind, "amounts", "must be a list")) };
    let amounts = list.iter().map(|v| SpendAmount::parse(&op.kind, v)).collect::<Result<Vec<_>, _>>()?;
    check_amounts(&op.kind, &amounts)?;
    Ok(amounts)
}

/// The list's own bounds.
pub(super) fn check_amounts(kind: &str, amounts: &[SpendAmount]) -> Result<(), OpError> {
    if amounts.is_empty() || amounts.len() > MAX_AMOUNTS {
        return Err(bad(kind, "amounts", &format!("must hold 1 to {MAX_AMOUNTS} entries")));
    }
    amounts.iter().try_for_each(|a| a.check(kind))
}

/// Micro-dollars of a cost in dollars (checked to be within [`MAX_USD`]).
pub fn micros(usd: f64) -> u64 {
    (usd * 1e6).round().max(0.0) as u64
}

/// A stream's ledger: the keys recorded and the totals they add up to.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spend {
    /// Every key recorded: an amount whose key is here adds nothing.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub keys: BTreeSet<String>,
    /// Totals by (reset, day, actor, model, reported), sorted by them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<SpendRow>,
    /// How many `spend_reset` ops there were: the budget counts the rows of the last one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resets: u64,
    /// When the last reset was made, and by which actor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_by: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The totals of one (reset, day, actor, model, reported) group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpendRow {
    /// The count of `spend_reset` ops before these amounts (0: before any).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reset: u64,
    /// The UTC day the amounts were recorded (`YYYY-MM-DD`).
    pub day: String,
    /// The machine that recorded them.
    pub actor: String,
    /// The model (`null`: none said, as for a run's wall time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The harness reported the cost of these amounts (`usd_micros`); otherwise it is priced.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reported: bool,
    pub amounts: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tokens_in: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tokens_out: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read: u64,
    /// The cost the harness reported, in millionths of a US dollar.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub usd_micros: u64,
    /// Agent wall time, in seconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seconds: u64,
    /// Agent runs (amounts that said how long they ran).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub runs: u64,
}

impl Spend {
    /// Whether nothing was ever recorded or reset (the state then leaves the field out).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.rows.is_empty() && self.resets == 0
    }

    /// Add the amounts whose key is new; the rest change nothing.
    pub fn add(&mut self, amounts: &[SpendAmount], at: &str, actor: &str) {
        let day = crate::time::parse_rfc3339(at).map(crate::time::format_secs).unwrap_or_else(|| at.to_string());
        let day = day.get(..10).unwrap_or(&day).to_string();
        for a in amounts {
            if !self.keys.insert(a.key.clone()) {
                continue;
            }
            let usd = a.usd.get().copied();
            let model = a.model.get().cloned();
            let at = self.rows.binary_search_by(|r| {
                (r.reset, r.day.as_str(), r.actor.as_str(), r.model.as_deref(), r.reported).cmp(&(
                    self.resets,
                    day.as_str(),
                    actor,
                    model.as_deref(),
                    usd.is_some(),
                ))
            });
            let i = match at {
                Ok(i) => i,
                Err(i) => {
                    let row = SpendRow {
                        reset: self.resets,
                        day: day.clone(),
                        actor: actor.to_string(),
                        model,
                        reported: usd.is_some(),
                        ..SpendRow::default()
                    };
                    self.rows.insert(i, row);
                    i
                }
            };
            let r = &mut self.rows[i];
            r.amounts = r.amounts.saturating_add(1);
            r.tokens_in = r.tokens_in.saturating_add(a.tokens_in);
            r.tokens_out = r.tokens_out.saturating_add(a.tokens_out);
            r.cache_write = r.cache_write.saturating_add(a.cache_write.get().copied().unwrap_or(0));
            r.cache_read = r.cache_read.saturating_add(a.cache_read.get().copied().unwrap_or(0));
            r.usd_micros = r.usd_micros.saturating_add(usd.map_or(0, micros));
            if let Some(s) = a.seconds.get() {
                r.seconds = r.seconds.saturating_add(*s);
                r.runs = r.runs.saturating_add(1);
            }
        }
    }

    /// A `spend_reset`: what the budget counts starts again from nothing.
    pub fn reset(&mut self, at: &str, actor: &str) {
        self.resets = self.resets.saturating_add(1);
        self.reset_at = Some(at.to_string());
        self.reset_by = Some(actor.to_string());
    }

    /// Check a ledger read from anywhere (a remote included): its keys and models bounded.
    pub fn validate(&self) -> Result<(), super::StateError> {
        let bad = |s: &str, max: usize| s.is_empty() || s.len() > max || s.chars().any(char::is_control);
        if self.keys.iter().any(|k| bad(k, MAX_KEY))
            || self.rows.iter().any(|r| r.model.as_deref().is_some_and(|m| bad(m, MAX_MODEL)))
        {
            return Err(super::StateError::SpendKey);
        }
        Ok(())
    }

    /// The rows the budget counts: those since the last reset.
    pub fn current(&self) -> impl Iterator<Item = &SpendRow> {
        self.rows.iter().filter(move |r| r.reset == self.resets)
    }
}
