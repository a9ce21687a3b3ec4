//! The top level of the plan and its streams.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::budget::BudgetSeed;
use super::errors::{quote, unknown_key_message};
use super::reader::{next_key, Ctx, Seen};
use super::settings::SettingsSeed;
use super::values::{strategy, Count, Str, StrList};
use super::EMPTY_PLAN;
use crate::plan::{Plan, Settings, StreamDef, DEFAULT_PRD, MAX_REVIEW};

/// Streams a plan may define.
const MAX_STREAMS: usize = 1000;

pub(crate) const TOP_KEYS: &[&str] = &["version", "prd", "streams", "settings"];
pub(crate) const STREAM_KEYS: &[&str] = &[
    "branch",
    "stories",
    "paths",
    "creates",
    "depends_on",
    "agent",
    "max_iterations",
    "merge_strategy",
    "budget",
    "review",
];

pub(super) struct PlanSeed<'a> {
    pub(super) ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for PlanSeed<'_> {
    type Value = Plan;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Plan, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PlanSeed<'_> {
    type Value = Plan;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the plan to be a mapping with the keys version, prd, streams and settings")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Plan, E> {
        Err(self.ctx.fail_bare(EMPTY_PLAN))
    }
    fn visit_none<E: de::Error>(self) -> Result<Plan, E> {
        Err(self.ctx.fail_bare(EMPTY_PLAN))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Plan, A::Error> {
        let ctx = self.ctx;
        let mut plan = Plan { version: 1, prd: DEFAULT_PRD.into(), streams: Vec::new(), settings: Settings::default() };
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("duplicate key {} at the top level", quote(&key.name)))?;
            match key.name.as_str() {
                "version" => plan.version = map.next_value_seed(Version { ctx })?.unwrap_or(1),
                "prd" => {
                    if let Some(prd) = map.next_value_seed(Str { what: "prd" })? {
                        plan.prd = prd;
                    }
                }
                "streams" => plan.streams = map.next_value_seed(Streams { ctx })?,
                "settings" => plan.settings = map.next_value_seed(SettingsSeed { ctx })?,
                other => return Err(ctx.fail(unknown_key_message(other, "at the top level", TOP_KEYS), key.at())),
            }
        }
        Ok(plan)
    }
}

pub(super) struct Version<'a> {
    pub(super) ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for Version<'_> {
    type Value = Option<u32>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Version<'_> {
    type Value = Option<u32>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("version to be 1")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim() {
            "" | "~" | "null" => Ok(None),
            "1" => Ok(Some(1)),
            other => {
                let shown = if other.chars().count() > 20 { quote(other) } else { other.to_string() };
                Err(self.ctx.fail(format!("unsupported plan version {shown}; this git-boulder reads version 1"), None))
            }
        }
    }
}

pub(super) struct Streams<'a> {
    pub(super) ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for Streams<'_> {
    type Value = Vec<StreamDef>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Streams<'_> {
    type Value = Vec<StreamDef>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("streams to be a mapping from stream name to its settings, e.g. `auth: {stories: [US-001]}`")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let ctx = self.ctx;
        let mut out: Vec<StreamDef> = Vec::new();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("stream {} is defined twice", quote(&key.name)))?;
            if out.len() >= MAX_STREAMS {
                return Err(ctx.fail(format!("the plan defines more than {MAX_STREAMS} streams"), key.at()));
            }
            let mut stream = map.next_value_seed(StreamSeed { ctx, name: &key.name })?;
            stream.line = key.line;
            out.push(stream);
        }
        Ok(out)
    }
}

pub(super) struct StreamSeed<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) name: &'a str,
}

impl<'de> DeserializeSeed<'de> for StreamSeed<'_> {
    type Value = StreamDef;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<StreamDef, D::Error> {
        d.deserialize_any(self)
    }
}

impl StreamSeed<'_> {
    pub(super) fn empty(&self) -> StreamDef {
        StreamDef::empty(self.name)
    }
}

impl<'de> Visitor<'de> for StreamSeed<'_> {
    type Value = StreamDef;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "stream {} to be a mapping of {}", quote(self.name), STREAM_KEYS.join(", "))
    }
    fn visit_unit<E: de::Error>(self) -> Result<StreamDef, E> {
        Ok(self.empty())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StreamDef, A::Error> {
        let ctx = self.ctx;
        let mut s = self.empty();
        let place = format!("in stream {}", quote(self.name));
        let mut seen = Seen::default();
        let what = |key: &str| format!("{key} of stream {}", quote(self.name));
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("duplicate key {} {place}", quote(&key.name)))?;
            let w = what(&key.name);
            match key.name.as_str() {
                "branch" => {
                    if let Some(b) = map.next_value_seed(Str { what: &w })? {
                        s.branch = b;
                    }
                }
                "stories" => {
                    s.stories =
                        map.next_value_seed(StrList { ctx, what: &w, example: "[US-001, US-002]", single: false })?
                }
                "paths" => {
                    s.paths = map.next_value_seed(StrList {
                        ctx,
                        what: &w,
                        example: "[src/auth/**, tests/auth/**]",
                        single: true,
                    })?
                }
                "creates" => {
                    s.creates =
                        map.next_value_seed(StrList { ctx, what: &w, example: "[src/auth/session.rs]", single: true })?
                }
                "depends_on" => {
                    s.depends_on = map.next_value_seed(StrList { ctx, what: &w, example: "[api, db]", single: true })?
                }
                "agent" => s.agent = map.next_value_seed(Str { what: &w })?,
                "max_iterations" => s.max_iterations = map.next_value_seed(Count { ctx, what: &w, min: 1 })?,
                "merge_strategy" => s.merge_strategy = map.next_value_seed(strategy(ctx, &w))?,
                "budget" => {
                    s.budget =
                        map.next_value_seed(BudgetSeed { ctx, what: &format!("streams.{}.budget", self.name) })?
                }
                "review" => {
                    s.review = map.next_value_seed(Count { ctx, what: &w, min: 0 })?;
                    if let Some(n) = s.review.filter(|n| *n > MAX_REVIEW) {
                        return Err(ctx.fail(
                            format!("{w} asks for {n} approvals; give a number from 0 to {MAX_REVIEW}"),
                            key.at(),
                        ));
                    }
                }
                other => return Err(ctx.fail(unknown_key_message(other, &place, STREAM_KEYS), key.at())),
            }
        }
        // What a stream will create it owns too: one list of owned globs for every check.
        for g in &s.creates {
            if !s.paths.contains(g) {
                s.paths.push(g.clone());
            }
        }
        Ok(s)
    }
}
