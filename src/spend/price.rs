//! The cost of tokens: US dollars per million tokens of each kind, per model.
//!
//! Where a price comes from, first found wins: the plan's `settings.prices.<model>` (shared by
//! every machine, so every machine's budgets agree), then git config
//! `boulder.price.<model>.{input,output,cache_write,cache_read}` (for a model the plan does not
//! price). A cost the harness itself reported is never priced again. A model no table names, or
//! a kind of token its price leaves out, makes the cost unknown: tokens are shown, a cost is
//! never guessed.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::git::Repo;
use crate::plan::{Plan, Price};

/// The kinds of token priced, as written in the plan and in git config.
pub const KINDS: [&str; 4] = ["input", "output", "cache_write", "cache_read"];
/// The highest price accepted, in US dollars per million tokens.
pub const MAX_PRICE: f64 = 1_000_000.0;

/// The prices of the models met so far.
#[derive(Debug, Clone, Default)]
pub struct Prices {
    /// Model → its price and where it came from (`plan` or `git config`); `None`: no price.
    known: BTreeMap<String, Option<(Price, &'static str)>>,
}

impl Prices {
    /// The prices of `models`, from `plan` and the git config of `repo`. A price in git config
    /// that is not a number is a usage error naming the key and the fix.
    pub fn load<'m>(repo: &Repo, plan: &Plan, models: impl IntoIterator<Item = &'m str>) -> Result<Prices> {
        let mut known = BTreeMap::new();
        for model in models {
            if known.contains_key(model) {
                continue;
            }
            let price = match plan.settings.prices.get(model) {
                Some(p) => Some((*p, "plan")),
                None => config_price(repo, model)?.map(|p| (p, "git config")),
            };
            known.insert(model.to_string(), price);
        }
        Ok(Prices { known })
    }

    /// The price of `model`, if one is known.
    pub fn get(&self, model: &str) -> Option<&Price> {
        self.known.get(model).and_then(|p| p.as_ref()).map(|(p, _)| p)
    }

    /// Where the price of `model` came from (`plan`, `git config`).
    pub fn source(&self, model: &str) -> Option<&'static str> {
        self.known.get(model).and_then(|p| p.as_ref()).map(|(_, s)| *s)
    }
}

/// `boulder.price.<model>.*`, when any of its four keys is set.
fn config_price(repo: &Repo, model: &str) -> Result<Option<Price>> {
    let mut price = Price::default();
    let mut any = false;
    for kind in KINDS {
        let key = format!("boulder.price.{model}.{kind}");
        let Some(text) = repo.config_string(&key) else { continue };
        let v = parse(&text).ok_or_else(|| {
            Error::usage(format!(
                "git config {key} is {text:?}, not a price: US dollars per million tokens, a number from 0 to {MAX_PRICE}"
            ))
            .hint(format!("git config {key} 3.00"))
        })?;
        any = true;
        match kind {
            "input" => price.input = Some(v),
            "output" => price.output = Some(v),
            "cache_write" => price.cache_write = Some(v),
            _ => price.cache_read = Some(v),
        }
    }
    Ok(any.then_some(price))
}

/// A price as written: a number of US dollars per million tokens, `0..=MAX_PRICE`.
pub fn parse(text: &str) -> Option<f64> {
    let v: f64 = text.trim().trim_start_matches('$').parse().ok()?;
    (v.is_finite() && (0.0..=MAX_PRICE).contains(&v)).then_some(v)
}

/// The cost of `tokens` at `per_million` dollars per million, in micro-dollars (tokens × dollars
/// per million is micro-dollars).
pub fn micros(tokens: u64, per_million: f64) -> u64 {
    (tokens as f64 * per_million).round().max(0.0) as u64
}
