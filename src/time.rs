//! Wall-clock time as RFC 3339 text (UTC), and durations such as `30s`, `5m`, `1h30m`.

use std::time::Duration;

/// Now, as RFC 3339 in UTC with millisecond precision, e.g. `2026-11-22T10:00:00.123Z`.
/// `BOULDER_NOW` (RFC 3339) overrides the clock, for tests and replays.
pub fn now_rfc3339() -> String {
    if let Ok(fixed) = std::env::var("BOULDER_NOW") {
        if parse_rfc3339(&fixed).is_some() {
            return fixed;
        }
    }
    let ts = jiff::Timestamp::now();
    format!("{:.3}", ts)
}

/// Seconds since the Unix epoch for an RFC 3339 timestamp, or `None` when it does not parse.
pub fn parse_rfc3339(text: &str) -> Option<f64> {
    let ts: jiff::Timestamp = text.parse().ok()?;
    Some(ts.as_millisecond() as f64 / 1000.0)
}

/// RFC 3339 (UTC, milliseconds) for seconds since the Unix epoch.
pub fn format_secs(secs: f64) -> String {
    match jiff::Timestamp::from_millisecond((secs * 1000.0).round() as i64) {
        Ok(ts) => format!("{ts:.3}"),
        Err(_) => "1970-01-01T00:00:00.000Z".into(),
    }
}

/// Seconds since the Unix epoch, now (honouring `BOULDER_NOW`).
pub fn now_secs() -> f64 {
    parse_rfc3339(&now_rfc3339()).unwrap_or(0.0)
}

/// Why a duration does not parse; each names the text given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("invalid duration {0:?}")]
    Invalid(String),
    #[error("invalid duration {0:?}: expected a number such as 30s, 5m or 1h")]
    NoNumber(String),
    #[error("invalid duration {0:?}: a unit is missing (ms, s, m, h, d)")]
    NoUnit(String),
    #[error("invalid duration {text:?}: unknown unit {unit:?} (use ms, s, m, h or d)")]
    UnknownUnit { text: String, unit: String },
    #[error("invalid duration {0:?}: too large")]
    TooLarge(String),
}

/// Parse `30s`, `5m`, `2h`, `1d`, `500ms`, `1h30m` or a bare number of seconds (also the value
/// parser of every duration flag).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(DurationError::Empty);
    }
    if let Ok(secs) = t.parse::<f64>() {
        if secs.is_finite() && (0.0..1e12).contains(&secs) {
            return Ok(Duration::from_secs_f64(secs));
        }
        return Err(DurationError::Invalid(text.into()));
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_len == 0 {
            return Err(DurationError::NoNumber(text.into()));
        }
        let n: f64 = rest[..num_len].parse().map_err(|_| DurationError::Invalid(text.into()))?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let factor = match unit {
            "ms" => 0.001,
            "s" | "sec" | "secs" => 1.0,
            "m" | "min" | "mins" => 60.0,
            "h" | "hr" | "hours" => 3600.0,
            "d" | "days" => 86400.0,
            "" => return Err(DurationError::NoUnit(text.into())),
            other => return Err(DurationError::UnknownUnit { text: text.into(), unit: other.into() }),
        };
        total += n * factor;
    }
    if !total.is_finite() || total > 1e12 {
        return Err(DurationError::TooLarge(text.into()));
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("1e300").is_err());
        assert!(parse_duration("1e300s").is_err());
        assert_eq!(
            parse_duration("5x").unwrap_err().to_string(),
            r#"invalid duration "5x": unknown unit "x" (use ms, s, m, h or d)"#
        );
        assert_eq!(parse_duration(" ").unwrap_err(), DurationError::Empty);
    }

    #[test]
    fn timestamps_round_trip() {
        let now = now_rfc3339();
        assert!(parse_rfc3339(&now).is_some(), "{now}");
    }
}
