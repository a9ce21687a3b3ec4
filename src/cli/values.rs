//! Value parsers of the flags and arguments that need more than a type: durations and stream
//! names are checked once, as the command line is parsed. A bad value is a usage error (exit 2)
//! whose message reads like the rest of git-boulder's (`--cooldown: invalid duration "soon": …`,
//! `invalid stream name …` with its hint), and never echoes the raw value unescaped.

use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;

/// A duration: `30s`, `5m`, `1h30m`, `500ms` or a bare number of seconds.
#[derive(Debug, Clone, Copy)]
pub struct DurationParser;

/// The value parser of duration flags.
pub fn duration() -> DurationParser {
    DurationParser
}

impl TypedValueParser for DurationParser {
    type Value = Duration;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Duration, clap::Error> {
        let text = value.to_string_lossy();
        crate::time::parse_duration(&text).map_err(|e| usage_error(format!("{}{e}", flag(arg)), None))
    }
}

/// A growth factor of the cooldown: a number from 1 to 1000, as `backoff_multiplier` in the plan.
#[derive(Debug, Clone, Copy)]
pub struct MultiplierParser;

/// The value parser of `--backoff-multiplier`.
pub fn multiplier() -> MultiplierParser {
    MultiplierParser
}

impl TypedValueParser for MultiplierParser {
    type Value = f64;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<f64, clap::Error> {
        let text = value.to_string_lossy();
        match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && (1.0..=1000.0).contains(&v) => Ok(v),
            _ => Err(usage_error(format!("{}expected a number from 1 to 1000, not {text:?}", flag(arg)), None)),
        }
    }
}

/// A stream name: one valid ref component.
#[derive(Debug, Clone, Copy)]
pub struct StreamNameParser;

/// The value parser of stream names.
pub fn stream_name() -> StreamNameParser {
    StreamNameParser
}

impl TypedValueParser for StreamNameParser {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let name = value.to_string_lossy();
        crate::names::check("stream", &name).map_err(|e| usage_error(e.to_string(), Some(crate::names::RULE)))?;
        Ok(name.into_owned())
    }
}

/// `--NAME: `, the prefix naming the flag a bad value was given to.
fn flag(arg: Option<&clap::Arg>) -> String {
    arg.and_then(|a| a.get_long()).map(|l| format!("--{l}: ")).unwrap_or_default()
}

/// A usage error printed as git-boulder prints its own: `error: MESSAGE` (inert), then a hint,
/// without clap's usage lines.
fn usage_error(message: String, hint: Option<&str>) -> clap::Error {
    let mut text = crate::text::inert_lines(&message).into_owned();
    if let Some(h) = hint {
        text.push_str("\nhint: ");
        text.push_str(h);
    }
    clap::Error::raw(ErrorKind::ValueValidation, format!("{text}\n"))
}

/// A number from 0 to `max` (a whole one when `whole`): token counts and dollars of `spend add`.
#[derive(Debug, Clone, Copy)]
pub struct AmountParser {
    max: f64,
    whole: bool,
}

/// The value parser of a count of tokens (`--tokens-in`).
pub fn tokens() -> AmountParser {
    AmountParser { max: crate::state::op::MAX_TOKENS as f64, whole: true }
}

/// The value parser of a cost in US dollars (`--usd`).
pub fn usd() -> AmountParser {
    AmountParser { max: crate::state::op::MAX_USD, whole: false }
}

impl TypedValueParser for AmountParser {
    type Value = f64;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<f64, clap::Error> {
        let text = value.to_string_lossy();
        let what = if self.whole { "a whole number" } else { "a number" };
        match text.trim().trim_start_matches('$').replace('_', "").parse::<f64>() {
            Ok(v) if v.is_finite() && (0.0..=self.max).contains(&v) && (!self.whole || v.fract() == 0.0) => Ok(v),
            _ => Err(usage_error(format!("{}expected {what} from 0 to {}, not {text:?}", flag(arg), self.max), None)),
        }
    }
}
