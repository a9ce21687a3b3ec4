//! The totals read back: every stream's ledger (this machine's state, which holds what was
//! pulled from every other machine), priced, summed by stream, machine, model or day.

use std::collections::BTreeMap;

use serde::Serialize;

use super::price::{self, Prices};
use crate::error::Result;
use crate::plan::Plan;
use crate::state::{self, Spend, SpendRow, Store, StreamState};
use crate::workspace::Workspace;

/// Totals of some amounts, priced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Figures {
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cache_write: u64,
    pub cache_read: u64,
    /// The cost of what has a cost (reported by the harness, or priced), in micro-dollars.
    pub usd_micros: u64,
    /// Tokens no price covers: while there are any, the cost is unknown (`usd_micros` is what is
    /// known of it).
    pub unpriced_tokens: u64,
    /// Agent wall time, in seconds.
    pub seconds: u64,
    /// Agent runs (iterations).
    pub runs: u64,
    /// Amounts recorded.
    pub amounts: u64,
}

impl Figures {
    /// The figures of one row of a ledger, priced with `prices`.
    pub fn of_row(r: &SpendRow, prices: &Prices) -> Figures {
        let mut f = Figures {
            tokens_in: r.tokens_in,
            tokens_out: r.tokens_out,
            cache_write: r.cache_write,
            cache_read: r.cache_read,
            seconds: r.seconds,
            runs: r.runs,
            amounts: r.amounts,
            ..Figures::default()
        };
        if r.reported {
            f.usd_micros = r.usd_micros;
            return f;
        }
        let p = r.model.as_deref().and_then(|m| prices.get(m));
        for (tokens, per) in [
            (r.tokens_in, p.and_then(|p| p.input)),
            (r.tokens_out, p.and_then(|p| p.output)),
            (r.cache_write, p.and_then(|p| p.cache_write)),
            (r.cache_read, p.and_then(|p| p.cache_read)),
        ] {
            match per {
                _ if tokens == 0 => {}
                Some(per) => f.usd_micros = f.usd_micros.saturating_add(price::micros(tokens, per)),
                None => f.unpriced_tokens = f.unpriced_tokens.saturating_add(tokens),
            }
        }
        f
    }

    /// Add `o` to these.
    pub fn add(&mut self, o: &Figures) {
        self.tokens_in = self.tokens_in.saturating_add(o.tokens_in);
        self.tokens_out = self.tokens_out.saturating_add(o.tokens_out);
        self.cache_write = self.cache_write.saturating_add(o.cache_write);
        self.cache_read = self.cache_read.saturating_add(o.cache_read);
        self.usd_micros = self.usd_micros.saturating_add(o.usd_micros);
        self.unpriced_tokens = self.unpriced_tokens.saturating_add(o.unpriced_tokens);
        self.seconds = self.seconds.saturating_add(o.seconds);
        self.runs = self.runs.saturating_add(o.runs);
        self.amounts = self.amounts.saturating_add(o.amounts);
    }

    /// Input plus output tokens: what a `tokens` budget counts.
    pub fn tokens(&self) -> u64 {
        self.tokens_in.saturating_add(self.tokens_out)
    }

    /// The cost in US dollars, when every token has one.
    pub fn usd(&self) -> Option<f64> {
        (self.unpriced_tokens == 0).then(|| self.usd_micros as f64 / 1e6)
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.amounts == 0
    }

    /// Whether tokens or a cost were recorded: an agent's spend, not only the wall time `stream
    /// run` records of every run.
    pub fn has_usage(&self) -> bool {
        self.tokens_in + self.tokens_out + self.cache_write + self.cache_read + self.unpriced_tokens > 0
            || self.usd_micros > 0
    }
}

/// One stream's ledger as read.
#[derive(Debug, Clone)]
pub struct StreamSpend {
    pub stream: String,
    pub spend: Spend,
    /// Everything it ever spent.
    pub total: Figures,
    /// What its budget counts: since its last `spend reset`.
    pub current: Figures,
}

/// Every stream's ledger, priced.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// By stream name, for every stream whose state holds spend.
    pub streams: BTreeMap<String, StreamSpend>,
    pub prices: Prices,
}

impl Ledger {
    /// The ledgers of every stream's state in the repository of `ws`, priced by `plan` and git
    /// config.
    pub fn read(ws: &Workspace, plan: &Plan) -> Result<Ledger> {
        let store = Store::new(&ws.repo)?;
        let mut spends = Vec::new();
        for (refname, _) in store.list(state::STREAMS)? {
            let Some(name) = refname.strip_prefix(state::STREAMS) else { continue };
            let Some(entry) = store.read::<StreamState>(&refname)? else { continue };
            if !entry.state.spend.is_empty() {
                spends.push((name.to_string(), entry.state.spend));
            }
        }
        Ledger::of(ws, plan, spends)
    }

    /// The ledger of the given states' spend, priced.
    pub fn of(ws: &Workspace, plan: &Plan, spends: Vec<(String, Spend)>) -> Result<Ledger> {
        let models: Vec<String> =
            spends.iter().flat_map(|(_, s)| s.rows.iter().filter_map(|r| r.model.clone())).collect();
        let prices = Prices::load(&ws.repo, plan, models.iter().map(String::as_str))?;
        Ok(Ledger::priced(prices, spends))
    }

    /// The ledger of the given states' spend, priced with `prices`. Pure.
    pub fn priced(prices: Prices, spends: Vec<(String, Spend)>) -> Ledger {
        let mut streams = BTreeMap::new();
        for (stream, spend) in spends {
            let (mut total, mut current) = (Figures::default(), Figures::default());
            for r in &spend.rows {
                let f = Figures::of_row(r, &prices);
                total.add(&f);
                if r.reset == spend.resets {
                    current.add(&f);
                }
            }
            streams.insert(stream.clone(), StreamSpend { stream, spend, total, current });
        }
        Ledger { streams, prices }
    }

    /// What `stream`'s budget counts (nothing when it spent nothing).
    pub fn current(&self, stream: &str) -> Figures {
        self.streams.get(stream).map(|s| s.current).unwrap_or_default()
    }

    /// What the plan's budget counts: every stream's since its last reset.
    pub fn plan_current(&self) -> Figures {
        let mut f = Figures::default();
        self.streams.values().for_each(|s| f.add(&s.current));
        f
    }

    /// Whether anything was recorded at all.
    pub fn is_empty(&self) -> bool {
        self.streams.values().all(|s| s.total.is_empty())
    }

    /// Whether some stream recorded tokens or a cost.
    pub fn has_usage(&self) -> bool {
        self.streams.values().any(|s| s.total.has_usage())
    }

    /// Every row with its stream, priced, recorded on `since` (a `YYYY-MM-DD` day) or later.
    pub fn rows<'a>(&'a self, since: Option<&'a str>) -> impl Iterator<Item = (&'a str, &'a SpendRow, Figures)> + 'a {
        self.streams.values().flat_map(move |s| {
            s.spend
                .rows
                .iter()
                .filter(move |r| since.is_none_or(|d| r.day.as_str() >= d))
                .map(move |r| (s.stream.as_str(), r, Figures::of_row(r, &self.prices)))
        })
    }
}

/// What `git boulder spend --by` sums by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    #[default]
    Stream,
    /// The actor (machine) that recorded it.
    Machine,
    Model,
    /// The UTC day it was recorded.
    Day,
}

impl Ledger {
    /// The figures of `stream` (every stream when `None`) recorded on `since` or later, summed
    /// by `by`, in the order of their names (days oldest first); what has no model is `-`.
    pub fn groups(&self, by: By, stream: Option<&str>, since: Option<&str>) -> Vec<(String, Figures)> {
        let mut out: BTreeMap<String, Figures> = BTreeMap::new();
        for (name, r, f) in self.rows(since).filter(|(name, _, _)| stream.is_none_or(|s| s == *name)) {
            let key = match by {
                By::Stream => name.to_string(),
                By::Machine => r.actor.clone(),
                By::Model => r.model.clone().unwrap_or_else(|| "-".into()),
                By::Day => r.day.clone(),
            };
            out.entry(key).or_default().add(&f);
        }
        out.into_iter().collect()
    }

    /// The models whose tokens have no price, among `stream`'s (or every stream's) since `since`.
    pub fn unpriced_models(&self, stream: Option<&str>, since: Option<&str>) -> Vec<String> {
        let mut out: Vec<String> = self
            .rows(since)
            .filter(|(name, _, f)| f.unpriced_tokens > 0 && stream.is_none_or(|s| s == *name))
            .map(|(_, r, _)| r.model.clone().unwrap_or_else(|| "(no model named)".into()))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}
