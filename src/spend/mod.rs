//! What the streams spend, and the budgets that stop them (docs/spend.md).
//!
//! * [`record`]: amounts (tokens, cost, agent time) appended to a stream's op-log as `spent`
//!   ops, each amount once by its key, so they travel with `push`/`pull`/`sync`.
//! * [`ledger`]: the totals read back from every stream's state (this machine's and what was
//!   pulled), by stream, machine, model or day.
//! * [`price`]: the cost of tokens, from the plan's `settings.prices` or git config
//!   `boulder.price.<model>.*`; a cost the harness reported wins.
//! * [`budget`]: whether a stream's or the plan's budget is spent ([`verdict`]).

pub mod budget;
pub mod ledger;
pub mod price;

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::state::{self, Store, StreamOp, StreamState};
use crate::workspace::Workspace;

pub use budget::{BudgetView, StreamView, Verdict, Why};
pub use ledger::{Figures, Ledger};
pub use price::Prices;

/// One amount: tokens, cost or an agent run's wall time, recorded once by its `key`.
pub type Amount = crate::state::op::SpendAmount;

/// The op kind amounts are recorded as (for messages).
const KIND: &str = "spent";

/// Record `amounts` in the op-log of `stream`: those whose key the stream has not recorded yet,
/// in ops of at most [`state::op::MAX_AMOUNTS`] amounts, each appended by compare-and-swap.
/// Returns how many were new; when none is, nothing is appended. An amount out of bounds
/// (negative or absurd numbers, a key or model too long) is a usage error and nothing is
/// recorded.
pub fn record(ws: &Workspace, stream: &str, amounts: Vec<Amount>) -> Result<usize> {
    crate::names::validate("stream", stream)?;
    for a in &amounts {
        a.check(KIND).map_err(|e| Error::usage(format!("stream {stream}: {e}")).with_source(e))?;
    }
    // The same key twice in one call counts once: the first is kept.
    let mut seen = BTreeSet::new();
    let amounts: Vec<Amount> = amounts.into_iter().filter(|a| seen.insert(a.key.clone())).collect();
    if amounts.is_empty() {
        return Ok(0);
    }
    let store = Store::new(&ws.repo)?;
    let sref = state::stream_ref(stream);
    let mut recorded = 0;
    for batch in amounts.chunks(state::op::MAX_AMOUNTS) {
        let mut new = 0;
        store.append_if::<StreamState>(&sref, |st| {
            let known = st.map(|s| &s.spend.keys);
            let fresh: Vec<Amount> =
                batch.iter().filter(|a| !known.is_some_and(|k| k.contains(&a.key))).cloned().collect();
            new = fresh.len();
            Ok((!fresh.is_empty()).then_some(StreamOp::Spent { amounts: fresh }))
        })?;
        recorded += new;
    }
    Ok(recorded)
}

/// Record a `spend_reset` for `stream`: its budget counts from nothing again.
pub fn reset(ws: &Workspace, stream: &str) -> Result<()> {
    crate::names::validate("stream", stream)?;
    let store = Store::new(&ws.repo)?;
    store.append::<StreamState>(&state::stream_ref(stream), StreamOp::SpendReset {})?;
    Ok(())
}

/// Whether `stream` may spend more: its own budget (since its last reset) and the plan's
/// (`settings.budget`, over every stream's state here, pulled ones included).
pub fn verdict(ws: &Workspace, plan: &Plan, stream: &str) -> Result<Verdict> {
    let ledger = Ledger::read(ws, plan)?;
    Ok(ledger.verdict(plan, stream))
}
