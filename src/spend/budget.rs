//! Budgets: whether a stream, or the whole plan, has spent what the plan allows it.
//!
//! A stream's `budget:` counts what it spent since its last `spend reset`; the plan's
//! `settings.budget` counts the same for every stream whose state this machine holds (pulled
//! ones included, streams gone from the plan too: what was spent was spent). A budget is spent
//! once a figure reaches its limit. A cost that is partly unknown counts what is known of it.

use serde::Serialize;

use super::ledger::{Figures, Ledger};
use crate::plan::{Budget, Plan};

/// Whether a stream may spend more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// No budget it falls under is spent.
    Within,
    /// A budget is spent: `what` names it (`stream auth's budget`, `the plan's budget`),
    /// `figures` says by how much (`usd $10.20 of $10.00`).
    Spent { what: String, figures: String, why: Why },
}

/// Which budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    Stream,
    Plan,
}

impl Verdict {
    /// Whether a budget is spent.
    pub fn is_spent(&self) -> bool {
        matches!(self, Verdict::Spent { .. })
    }

    /// One line for people: `stream auth's budget is spent: usd $10.20 of $10.00`.
    pub fn line(&self) -> Option<String> {
        match self {
            Verdict::Within => None,
            Verdict::Spent { what, figures, .. } => Some(format!("{what} is spent: {figures}")),
        }
    }
}

impl Ledger {
    /// The verdict for `stream` under its own budget (in `plan`) and the plan's.
    pub fn verdict(&self, plan: &Plan, stream: &str) -> Verdict {
        if let Some(b) = plan.stream(stream).map(|s| s.budget) {
            if let Some(figures) = over(&b, &self.current(stream)) {
                return Verdict::Spent { what: format!("stream {stream}'s budget"), figures, why: Why::Stream };
            }
        }
        self.plan_verdict(plan)
    }

    /// The verdict of the plan's own budget.
    pub fn plan_verdict(&self, plan: &Plan) -> Verdict {
        match over(&plan.settings.budget, &self.plan_current()) {
            Some(figures) => Verdict::Spent { what: "the plan's budget".into(), figures, why: Why::Plan },
            None => Verdict::Within,
        }
    }
}

/// What of `budget` the figures `f` have reached, said for people; `None` while within it.
pub fn over(budget: &Budget, f: &Figures) -> Option<String> {
    let mut spent = Vec::new();
    if let Some(limit) = budget.usd {
        let known = f.usd_micros as f64 / 1e6;
        if known >= limit {
            spent.push(format!("usd {} of {}", usd(known), usd(limit)));
        }
    }
    if let Some(limit) = budget.tokens {
        if f.tokens() >= limit {
            spent.push(format!("tokens {} of {}", count(f.tokens()), count(limit)));
        }
    }
    if let Some(limit) = budget.time {
        if f.seconds >= limit.as_secs() {
            spent.push(format!("time {} of {}", duration(f.seconds), duration(limit.as_secs())));
        }
    }
    (!spent.is_empty()).then(|| spent.join(", "))
}

/// Dollars as people read them: `$12.40`, `$0.0031` below a cent.
pub fn usd(v: f64) -> String {
    if v != 0.0 && v.abs() < 0.01 {
        format!("${v:.4}")
    } else {
        format!("${v:.2}")
    }
}

/// A whole number with thousands separated: `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Seconds as `1h05m`, `12m30s`, `45s`.
pub fn duration(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s:02}s"),
        _ => format!("{h}h{m:02}m"),
    }
}

/// A stream's figures as the dashboard shows them (`status --json`, the ui's `spend`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamView {
    /// Everything it spent.
    pub total: Figures,
    /// The cost of `total` in US dollars; `null` while some tokens have no price.
    pub usd: Option<f64>,
    /// Its budget, when it has one: the limits and what they count (since its last reset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetView>,
    /// Set when its budget or the plan's is spent: which, and by how much.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spent: Option<String>,
    /// Which budget is spent: `stream` (its own) or `plan` (`settings.budget`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spent_budget: Option<Why>,
}

/// A budget's limits and what they count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetView {
    pub usd: Option<f64>,
    pub tokens: Option<u64>,
    pub time_seconds: Option<u64>,
    /// What the budget counts (since the last reset).
    pub counted: Figures,
}

impl BudgetView {
    /// The view of `b` counting `counted`, when `b` limits anything.
    pub fn of(b: &Budget, counted: &Figures) -> Option<BudgetView> {
        b.is_set().then(|| BudgetView {
            usd: b.usd,
            tokens: b.tokens,
            time_seconds: b.time.map(|t| t.as_secs()),
            counted: *counted,
        })
    }

    /// Each limit against what it counts: `$0.40/$1.00, 1,200/5,000 tokens, 5m00s/2h00m`.
    pub fn text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(limit) = self.usd {
            parts.push(format!("{}/{}", usd(self.counted.usd_micros as f64 / 1e6), usd(limit)));
        }
        if let Some(limit) = self.tokens {
            parts.push(format!("{}/{} tokens", count(self.counted.tokens()), count(limit)));
        }
        if let Some(limit) = self.time_seconds {
            parts.push(format!("{}/{}", duration(self.counted.seconds), duration(limit)));
        }
        parts.join(", ")
    }
}

/// The cost of `f` for people: dollars, `unknown`, or what is known `+unknown`.
pub fn cost(f: &Figures) -> String {
    match f.usd() {
        Some(v) => usd(v),
        None if f.usd_micros > 0 => format!("{}+unknown", usd(f.usd_micros as f64 / 1e6)),
        None => "unknown".into(),
    }
}

impl Ledger {
    /// Whether anything is to be shown: some spend recorded, or some budget in the plan.
    pub fn shown(&self, plan: &Plan) -> bool {
        // The wall time every `stream run` records is not reason enough: a plan that uses no
        // spend features keeps the dashboard it always had.
        self.has_usage() || plan.settings.budget.is_set() || plan.streams.iter().any(|s| s.budget.is_set())
    }

    /// What the dashboard shows of `stream`: `None` when it spent nothing and no budget applies.
    pub fn view(&self, plan: &Plan, stream: &str) -> Option<StreamView> {
        let total = self.streams.get(stream).map(|s| s.total).unwrap_or_default();
        let budget = plan.stream(stream).and_then(|s| BudgetView::of(&s.budget, &self.current(stream)));
        let verdict = self.verdict(plan, stream);
        let spent = verdict.line();
        let spent_budget = match verdict {
            Verdict::Spent { why, .. } => Some(why),
            Verdict::Within => None,
        };
        if total.is_empty() && budget.is_none() && spent.is_none() {
            return None;
        }
        Some(StreamView { usd: total.usd(), total, budget, spent, spent_budget })
    }
}
