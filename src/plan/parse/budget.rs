//! `budget:` of a stream and `settings.budget` (`usd`, `tokens`, `time`), and
//! `settings.prices` (per model: `input`, `output`, `cache_write`, `cache_read`, US dollars per
//! million tokens). docs/spend.md says what each counts.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::errors::{quote, unknown_key_message};
use super::reader::{next_key, Ctx, Seen};
use super::values::Dur;
use crate::plan::{Budget, Price};

pub(crate) const BUDGET_KEYS: &[&str] = &["usd", "tokens", "time"];
pub(crate) const PRICE_KEYS: &[&str] = &["input", "output", "cache_write", "cache_read"];

/// The most a budget may name: dollars, tokens.
const MAX_USD: f64 = 1e9;
const MAX_TOKENS: u64 = 1_000_000_000_000_000;
/// The highest price: US dollars per million tokens.
const MAX_PRICE: f64 = 1_000_000.0;

/// A budget mapping; `what` is where it is (`settings.budget`, `budget of stream "auth"`).
pub(super) struct BudgetSeed<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) what: &'a str,
}

impl<'de> DeserializeSeed<'de> for BudgetSeed<'_> {
    type Value = Budget;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Budget, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BudgetSeed<'_> {
    type Value = Budget;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a mapping of usd, tokens and time, e.g. `{{usd: 20, time: 2h}}`", self.what)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Budget, E> {
        Ok(Budget::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Budget, A::Error> {
        let ctx = self.ctx;
        let mut b = Budget::default();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("duplicate key {} in {}", quote(&key.name), self.what))?;
            let w = format!("{}.{}", self.what, key.name);
            let w = w.as_str();
            match key.name.as_str() {
                "usd" => {
                    let example = "a number of US dollars above 0, e.g. `usd: 25`";
                    b.usd = map.next_value_seed(Number { ctx, what: w, max: MAX_USD, above_zero: true, example })?
                }
                "tokens" => {
                    let example = "a whole number of tokens above 0, e.g. `tokens: 2000000`";
                    b.tokens = map
                        .next_value_seed(Number { ctx, what: w, max: MAX_TOKENS as f64, above_zero: true, example })?
                        .map(|v| {
                            if v.fract() != 0.0 {
                                Err(ctx.fail(format!("{w} must be {example}, not {v}"), key.at()))
                            } else {
                                Ok(v as u64)
                            }
                        })
                        .transpose()?
                }
                "time" => {
                    b.time = map.next_value_seed(Dur { ctx, what: w })?;
                    if b.time.is_some_and(|t| t.is_zero()) {
                        return Err(ctx.fail(format!("{w} must be above 0, e.g. `time: 2h` or `time: 90m`"), key.at()));
                    }
                }
                other => {
                    return Err(
                        ctx.fail(unknown_key_message(other, &format!("in {}", self.what), BUDGET_KEYS), key.at())
                    )
                }
            }
        }
        Ok(b)
    }
}

/// `settings.prices`: model → price.
pub(super) struct PricesSeed<'a> {
    pub(super) ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for PricesSeed<'_> {
    type Value = BTreeMap<String, Price>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PricesSeed<'_> {
    type Value = BTreeMap<String, Price>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(
            "settings.prices to be a mapping from model to its price, e.g. `claude-sonnet-4-5: {input: 3, output: 15}`",
        )
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(BTreeMap::new())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let ctx = self.ctx;
        let mut out = BTreeMap::new();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("model {} is priced twice in settings.prices", quote(&key.name)))?;
            if matches!(key.name.as_str(), "" | "~" | "null") {
                return Err(ctx.fail("settings.prices has an entry without a model name", key.at()));
            }
            let what = format!("settings.prices.{}", key.name);
            let price = map.next_value_seed(PriceSeed { ctx, what: &what })?;
            out.insert(key.name, price);
        }
        Ok(out)
    }
}

struct PriceSeed<'a> {
    ctx: &'a Ctx,
    what: &'a str,
}

impl<'de> DeserializeSeed<'de> for PriceSeed<'_> {
    type Value = Price;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Price, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PriceSeed<'_> {
    type Value = Price;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{} to be a mapping of input, output, cache_write and cache_read, e.g. `{{input: 3, output: 15}}`",
            self.what
        )
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Price, A::Error> {
        let ctx = self.ctx;
        let mut p = Price::default();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("duplicate key {} in {}", quote(&key.name), self.what))?;
            let w = format!("{}.{}", self.what, key.name);
            let example = "US dollars per million tokens, a number from 0, e.g. `input: 3`";
            let v = map.next_value_seed(Number { ctx, what: &w, max: MAX_PRICE, above_zero: false, example })?;
            match key.name.as_str() {
                "input" => p.input = v,
                "output" => p.output = v,
                "cache_write" => p.cache_write = v,
                "cache_read" => p.cache_read = v,
                other => {
                    return Err(ctx.fail(unknown_key_message(other, &format!("in {}", self.what), PRICE_KEYS), key.at()))
                }
            }
        }
        Ok(p)
    }
}

/// A number `0..=max` (above 0 when `above_zero`); `None` for null. A leading `$` is allowed.
struct Number<'a> {
    ctx: &'a Ctx,
    what: &'a str,
    max: f64,
    above_zero: bool,
    example: &'a str,
}

impl Number<'_> {
    fn check<E: de::Error>(&self, v: f64, shown: impl fmt::Display) -> Result<Option<f64>, E> {
        let low = if self.above_zero { v > 0.0 } else { v >= 0.0 };
        if v.is_finite() && low && v <= self.max {
            Ok(Some(v))
        } else {
            Err(self.ctx.fail(format!("{} must be {}, not {shown}", self.what, self.example), None))
        }
    }
}

impl<'de> DeserializeSeed<'de> for Number<'_> {
    type Value = Option<f64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Number<'_> {
    type Value = Option<f64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be {}", self.what, self.example)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.check(v as f64, v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.check(v as f64, v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.check(v, v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if matches!(v.trim(), "" | "~" | "null") {
            return Ok(None);
        }
        match v.trim().trim_start_matches('$').replace('_', "").parse::<f64>() {
            Ok(n) => self.check(n, quote(v)),
            Err(_) => self.check(f64::NAN, quote(v)),
        }
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        self.check(f64::NAN, v)
    }
}
