//! `settings` and `settings.boulder`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::budget::{BudgetSeed, PricesSeed};
use super::errors::{quote, unknown_key_message};
use super::reader::{next_key, Ctx, Seen};
use super::values::{level, strategy, Bool, Count, Dur, Multiplier, Str, StrList, Word, ADHOC_STREAMS, ON_CONFLICT};
use super::{BOULDER_KEYS, SETTINGS_KEYS};
use crate::plan::{BoulderSettings, Settings};

pub(super) struct SettingsSeed<'a> {
    pub(super) ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for SettingsSeed<'_> {
    type Value = Settings;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Settings, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SettingsSeed<'_> {
    type Value = Settings;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("settings to be a mapping, e.g. `base_branch: main`")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Settings, E> {
        Ok(Settings::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Settings, A::Error> {
        let ctx = self.ctx;
        let mut s = Settings::default();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("duplicate key {} in settings", quote(&key.name)))?;
            let w = format!("settings.{}", key.name);
            let w = w.as_str();
            match key.name.as_str() {
                "base_branch" => {
                    if let Some(v) = map.next_value_seed(Str { what: w })? {
                        s.base_branch = v;
                    }
                }
                "worktree_dir" => {
                    if let Some(v) = map.next_value_seed(Str { what: w })? {
                        s.worktree_dir = v;
                    }
                }
                "merge_strategy" => {
                    if let Some(v) = map.next_value_seed(strategy(ctx, w))? {
                        s.merge_strategy = v;
                    }
                }
                "auto_merge" => {
                    if let Some(v) = map.next_value_seed(Bool { ctx, what: w })? {
                        s.auto_merge = v;
                    }
                }
                "inherit_guardrails" => {
                    if let Some(v) = map.next_value_seed(Bool { ctx, what: w })? {
                        s.inherit_guardrails = v;
                    }
                }
                "inherit_progress" => {
                    if let Some(v) = map.next_value_seed(Bool { ctx, what: w })? {
                        s.inherit_progress = v;
                    }
                }
                "path_overlap" => {
                    if let Some(v) = map.next_value_seed(level(ctx, w, "error, warn or ignore"))? {
                        s.path_overlap = v;
                    }
                }
                "ownership" => {
                    if let Some(v) = map.next_value_seed(level(ctx, w, "error, warn or off"))? {
                        s.ownership = v;
                    }
                }
                "undeclared_paths" => {
                    if let Some(v) = map.next_value_seed(level(ctx, w, "error, warn or allow"))? {
                        s.undeclared_paths = v;
                    }
                }
                "shared_read" => {
                    s.shared_read =
                        map.next_value_seed(StrList { ctx, what: w, example: "[src/types/**]", single: true })?
                }
                "copy_into_worktree" => {
                    s.copy_into_worktree =
                        map.next_value_seed(StrList { ctx, what: w, example: "[.env]", single: true })?
                }
                "setup" => s.setup = map.next_value_seed(Str { what: w })?.unwrap_or_default(),
                "verify" => s.verify = map.next_value_seed(Str { what: w })?.unwrap_or_default(),
                "prompt_template" => {
                    let t = map.next_value_seed(Str { what: w })?.unwrap_or_default();
                    if let Err(why) = crate::plan::prompt::parse(&t) {
                        return Err(ctx.fail(format!("{w}: {why}"), key.at()));
                    }
                    s.prompt_template = t;
                }
                "port_base" | "port_stride" => {
                    if let Some(v) = map.next_value_seed(Count { ctx, what: w, min: 1 })? {
                        if v > 65535 {
                            return Err(
                                ctx.fail(format!("{w} must be a port number of at most 65535, not {v}"), key.at())
                            );
                        }
                        if key.name == "port_base" {
                            s.port_base = v;
                        } else {
                            s.port_stride = v;
                        }
                    }
                }
                "claim_remote" => s.claim_remote = map.next_value_seed(Str { what: w })?,
                "merge_remote" => s.merge_remote = map.next_value_seed(Str { what: w })?,
                "on_conflict" => {
                    if let Some(v) =
                        map.next_value_seed(Word { ctx, what: w, words: ON_CONFLICT, shown: "stop or agent" })?
                    {
                        s.on_conflict = v;
                    }
                }
                "adhoc_streams" => {
                    if let Some(v) =
                        map.next_value_seed(Word { ctx, what: w, words: ADHOC_STREAMS, shown: "allow or refuse" })?
                    {
                        s.adhoc_streams = v;
                    }
                }
                "agents" => s.agents = map.next_value_seed(Agents { ctx })?,
                "boulder" => s.boulder = map.next_value_seed(BoulderSeed { ctx })?,
                "budget" => s.budget = map.next_value_seed(BudgetSeed { ctx, what: w })?,
                "prices" => s.prices = map.next_value_seed(PricesSeed { ctx })?,
                other => return Err(ctx.fail(unknown_key_message(other, "in settings", SETTINGS_KEYS), key.at())),
            }
        }
        Ok(s)
    }
}

pub(super) struct Agents<'a> {
    pub(super) ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for Agents<'_> {
    type Value = BTreeMap<String, String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Agents<'_> {
    type Value = BTreeMap<String, String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("settings.agents to be a mapping from agent name to command, e.g. `claude: 'claude -p \"$BOULDER_PROMPT\"'`")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(BTreeMap::new())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let ctx = self.ctx;
        let mut out = BTreeMap::new();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("agent {} is defined twice in settings.agents", quote(&key.name)))?;
            if matches!(key.name.as_str(), "" | "~" | "null") {
                return Err(ctx.fail("settings.agents has an entry without a name", key.at()));
            }
            let what = format!("settings.agents.{}", key.name);
            match map.next_value_seed(Str { what: &what })? {
                Some(cmd) => {
                    out.insert(key.name, cmd);
                }
                None => {
                    return Err(ctx.fail(
                        format!(
                            "agent {} in settings.agents has no command; give the command line to run",
                            quote(&key.name)
                        ),
                        key.at(),
                    ))
                }
            }
        }
        Ok(out)
    }
}

pub(super) struct BoulderSeed<'a> {
    pub(super) ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for BoulderSeed<'_> {
    type Value = BoulderSettings;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BoulderSeed<'_> {
    type Value = BoulderSettings;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("settings.boulder to be a mapping, e.g. `cooldown: 30s`")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(BoulderSettings::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let ctx = self.ctx;
        let mut b = BoulderSettings::default();
        let mut seen = Seen::default();
        while let Some(key) = next_key(&mut map, ctx)? {
            seen.check(ctx, &key, || format!("duplicate key {} in settings.boulder", quote(&key.name)))?;
            let w = format!("settings.boulder.{}", key.name);
            let w = w.as_str();
            match key.name.as_str() {
                "idle_threshold" => {
                    if let Some(v) = map.next_value_seed(Dur { ctx, what: w })? {
                        b.idle_threshold = v;
                    }
                }
                "cooldown" => {
                    if let Some(v) = map.next_value_seed(Dur { ctx, what: w })? {
                        b.cooldown = v;
                    }
                }
                "recovery_window" => {
                    if let Some(v) = map.next_value_seed(Dur { ctx, what: w })? {
                        b.recovery_window = v;
                    }
                }
                "backoff_multiplier" => {
                    if let Some(v) = map.next_value_seed(Multiplier { ctx, what: w })? {
                        b.backoff_multiplier = v;
                    }
                }
                "max_failures" => {
                    if let Some(v) = map.next_value_seed(Count { ctx, what: w, min: 1 })? {
                        b.max_failures = v;
                    }
                }
                "max_depth" => {
                    if let Some(v) = map.next_value_seed(Count { ctx, what: w, min: 1 })? {
                        b.max_depth = v;
                    }
                }
                "parallel_limit" => {
                    if let Some(v) = map.next_value_seed(Count { ctx, what: w, min: 1 })? {
                        b.parallel_limit = v;
                    }
                }
                "inherit_cooldowns" => {
                    if let Some(v) = map.next_value_seed(Bool { ctx, what: w })? {
                        b.inherit_cooldowns = v;
                    }
                }
                other => {
                    return Err(ctx.fail(unknown_key_message(other, "in settings.boulder", BOULDER_KEYS), key.at()))
                }
            }
        }
        Ok(b)
    }
}
