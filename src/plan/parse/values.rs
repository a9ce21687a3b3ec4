//! The plan's values and their checks: strings and lists of them, booleans, words of a fixed set,
//! counts, the backoff multiplier, durations.

use std::fmt;
use std::time::Duration;

use serde::de::{self, DeserializeSeed, Deserializer, SeqAccess, Visitor};

use super::errors::quote;
use super::reader::Ctx;
use crate::plan::{AdhocStreams, Level, MergeStrategy, OnConflict};

/// A string value; `None` for null, `~` or an empty string.
pub(super) struct Str<'a> {
    pub(super) what: &'a str,
}

impl<'de> DeserializeSeed<'de> for Str<'_> {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Str<'_> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a string", self.what)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(match v {
            "" | "~" | "null" | "Null" | "NULL" => None,
            v => Some(v.to_string()),
        })
    }
}

/// A list of strings (or, when `single` is set, one string standing for a list of one).
pub(super) struct StrList<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) what: &'a str,
    pub(super) example: &'a str,
    pub(super) single: bool,
}

impl<'de> DeserializeSeed<'de> for StrList<'_> {
    type Value = Vec<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrList<'_> {
    type Value = Vec<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a list, e.g. {}", self.what, self.example)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if !self.single {
            return Err(de::Error::invalid_type(de::Unexpected::Str(v), &self));
        }
        if v.is_empty() {
            return Err(self.ctx.fail(format!("{} holds an empty string", self.what), None));
        }
        self.ctx.count()?;
        Ok(vec![v.to_string()])
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element_seed(Entry { ctx: self.ctx, what: self.what })? {
            out.push(item);
        }
        Ok(out)
    }
}

/// One entry of a string list: the scalar's text as written (`1.10` stays `1.10`).
pub(super) struct Entry<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) what: &'a str,
}

impl<'de> DeserializeSeed<'de> for Entry<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Entry<'_> {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "each entry of {} to be a string", self.what)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        self.ctx.count()?;
        if matches!(v, "" | "~" | "null" | "Null" | "NULL") {
            return Err(self.ctx.fail(format!("{} has an empty entry", self.what), None));
        }
        Ok(v.to_string())
    }
}

/// A boolean; `None` for null.
pub(super) struct Bool<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) what: &'a str,
}

impl<'de> DeserializeSeed<'de> for Bool<'_> {
    type Value = Option<bool>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bool<'_> {
    type Value = Option<bool>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be true or false", self.what)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => Ok(Some(true)),
            "false" | "no" | "off" => Ok(Some(false)),
            _ => Err(self.ctx.fail(format!("{} must be true or false, not {}", self.what, quote(v)), None)),
        }
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(format!("{} must be true or false, not {v}", self.what), None))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(format!("{} must be true or false, not {v}", self.what), None))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Err(self.ctx.fail(format!("{} must be true or false, not {v:?}", self.what), None))
    }
}

/// One of a fixed set of words; `None` for null.
pub(super) struct Word<'a, T: Copy> {
    pub(super) ctx: &'a Ctx,
    pub(super) what: &'a str,
    /// Accepted spellings and their values; `shown` are the ones listed in messages.
    pub(super) words: &'a [(&'a str, T)],
    pub(super) shown: &'a str,
}

impl<'de, T: Copy> DeserializeSeed<'de> for Word<'_, T> {
    type Value = Option<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, T: Copy> Visitor<'de> for Word<'_, T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be one of {}", self.what, self.shown)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if matches!(v, "" | "~" | "null" | "Null" | "NULL") {
            return Ok(None);
        }
        let lower = v.to_ascii_lowercase();
        match self.words.iter().find(|(w, _)| *w == lower) {
            Some((_, t)) => Ok(Some(*t)),
            None => Err(self.ctx.fail(format!("{} must be one of {}, not {}", self.what, self.shown, quote(v)), None)),
        }
    }
}

pub(super) const STRATEGIES: &[(&str, MergeStrategy)] =
    &[("rebase", MergeStrategy::Rebase), ("merge", MergeStrategy::Merge), ("squash", MergeStrategy::Squash)];
pub(super) const ON_CONFLICT: &[(&str, OnConflict)] = &[("stop", OnConflict::Stop), ("agent", OnConflict::Agent)];
pub(super) const ADHOC_STREAMS: &[(&str, AdhocStreams)] =
    &[("allow", AdhocStreams::Allow), ("refuse", AdhocStreams::Refuse)];
pub(super) const LEVELS: &[(&str, Level)] = &[
    ("error", Level::Error),
    ("warn", Level::Warn),
    ("warning", Level::Warn),
    ("ignore", Level::Off),
    ("off", Level::Off),
    ("allow", Level::Off),
];

pub(super) fn strategy<'a>(ctx: &'a Ctx, what: &'a str) -> Word<'a, MergeStrategy> {
    Word { ctx, what, words: STRATEGIES, shown: "rebase, merge or squash" }
}

pub(super) fn level<'a>(ctx: &'a Ctx, what: &'a str, shown: &'a str) -> Word<'a, Level> {
    Word { ctx, what, words: LEVELS, shown }
}

/// A whole number in `min..=u32::MAX`; `None` for null.
pub(super) struct Count<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) what: &'a str,
    pub(super) min: u32,
}

impl Count<'_> {
    pub(super) fn bad<E: de::Error>(&self, found: impl fmt::Display) -> E {
        self.ctx.fail(format!("{} must be a whole number of at least {}, not {found}", self.what, self.min), None)
    }
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = Option<u32>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = Option<u32>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a whole number", self.what)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        match u32::try_from(v) {
            Ok(n) if n >= self.min => Ok(Some(n)),
            _ => Err(self.bad(v)),
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        match u64::try_from(v) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(self.bad(v)),
        }
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v.fract() == 0.0 && v >= 0.0 && v <= u32::MAX as f64 {
            return self.visit_u64(v as u64);
        }
        Err(self.bad(format!("{v:?}")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim().parse::<u64>() {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(self.bad(quote(v))),
        }
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Err(self.bad(v))
    }
}

/// `backoff_multiplier`: a number from 1 to 1000; `None` for null.
pub(super) struct Multiplier<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) what: &'a str,
}

impl Multiplier<'_> {
    pub(super) fn check<E: de::Error>(&self, v: f64, shown: impl fmt::Display) -> Result<Option<f64>, E> {
        if v.is_finite() && (1.0..=1000.0).contains(&v) {
            Ok(Some(v))
        } else {
            Err(self.ctx.fail(format!("{} must be a number from 1 to 1000, not {shown}", self.what), None))
        }
    }
}

impl<'de> DeserializeSeed<'de> for Multiplier<'_> {
    type Value = Option<f64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Multiplier<'_> {
    type Value = Option<f64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a number", self.what)
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
        self.check(v, format!("{v:?}"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim().parse::<f64>() {
            Ok(n) => self.check(n, quote(v)),
            Err(_) => self.check(f64::NAN, quote(v)),
        }
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        self.check(f64::NAN, v)
    }
}

/// A duration: `30s`, `5m`, `1h30m`, or a number of seconds; `None` for null.
pub(super) struct Dur<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) what: &'a str,
}

pub(super) const MAX_SECS: f64 = 1e12;

impl Dur<'_> {
    pub(super) fn bad<E: de::Error>(&self, found: impl fmt::Display) -> E {
        self.ctx.fail(
            format!("{} must be a duration such as 30s, 5m or 1h30m (or a number of seconds), not {found}", self.what),
            None,
        )
    }
    pub(super) fn secs<E: de::Error>(&self, v: f64, shown: impl fmt::Display) -> Result<Option<Duration>, E> {
        if v.is_finite() && (0.0..=MAX_SECS).contains(&v) {
            // `max` turns -0.0 into 0.0.
            Ok(Some(Duration::from_secs_f64(v.max(0.0))))
        } else {
            Err(self.bad(shown))
        }
    }
}

impl<'de> DeserializeSeed<'de> for Dur<'_> {
    type Value = Option<Duration>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Dur<'_> {
    type Value = Option<Duration>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be a duration such as 30s or 5m", self.what)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.secs(v as f64, v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.secs(v as f64, v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.secs(v, format!("{v:?}"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        // A bare number is handled here: `parse_duration` would hand any finite number to
        // `Duration::from_secs_f64`, which panics on overflow.
        if let Ok(n) = v.trim().parse::<f64>() {
            return self.secs(n, quote(v));
        }
        match crate::time::parse_duration(v) {
            Ok(d) => Ok(Some(d)),
            Err(_) => Err(self.bad(quote(v))),
        }
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Err(self.bad(v))
    }
}
