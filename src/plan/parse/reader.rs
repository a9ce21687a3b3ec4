//! Reading YAML with positions: the state shared by the visitors of one parse (the first
//! failure, the budget of entries), and keys read together with their line and column.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::errors::Failure;

/// Keys and list entries a plan may have all told (aliases count each time they are used).
pub(super) const MAX_ENTRIES: usize = 1_000_000;

/// The text of the deliberate error a key probe raises; control characters keep it unique.
const KEY_PROBE: &str = "\u{1}boulder-key-probe\u{1}";

#[derive(Default)]
pub(super) struct Ctx {
    pub(super) failure: RefCell<Option<Failure>>,
    pub(super) stashed_key: RefCell<Option<String>>,
    pub(super) entries: Cell<usize>,
}

impl Ctx {
    /// Record our own error; `at` overrides serde_yaml's mark (used for keys read earlier).
    pub(super) fn fail<E: de::Error>(&self, message: impl Into<String>, at: Option<(usize, usize)>) -> E {
        let message = message.into();
        let err = E::custom(&message);
        *self.failure.borrow_mut() = Some(Failure { message, at, bare: false });
        err
    }

    /// Record our own error that has no place in the file.
    pub(super) fn fail_bare<E: de::Error>(&self, message: &str) -> E {
        *self.failure.borrow_mut() = Some(Failure { message: message.into(), at: None, bare: true });
        E::custom(message)
    }

    /// Count one list entry or key against the budget.
    pub(super) fn count<E: de::Error>(&self) -> Result<(), E> {
        let n = self.entries.get() + 1;
        self.entries.set(n);
        if n > MAX_ENTRIES {
            return Err(self.fail(
                format!("the plan has more than {MAX_ENTRIES} keys and list entries (aliases count each time they are used)"),
                None,
            ));
        }
        Ok(())
    }
}

/// A mapping key with its 1-based position.
pub(super) struct Key {
    pub(super) name: String,
    pub(super) line: usize,
    pub(super) column: usize,
}

impl Key {
    pub(super) fn at(&self) -> Option<(usize, usize)> {
        Some((self.line, self.column))
    }
}

/// Read the next key of a mapping together with its position (see the module docs).
pub(super) fn next_key<'de, A: MapAccess<'de>>(map: &mut A, ctx: &Ctx) -> Result<Option<Key>, A::Error> {
    ctx.stashed_key.borrow_mut().take();
    match map.next_key_seed(KeyProbe { ctx }) {
        Ok(None) => Ok(None),
        Ok(Some(never)) => match never {},
        Err(err) => match ctx.stashed_key.borrow_mut().take() {
            Some(name) => {
                ctx.count()?;
                let (line, column) = probe_position(&err.to_string());
                Ok(Some(Key { name, line, column }))
            }
            None => Err(err),
        },
    }
}

/// The position serde_yaml appended to a key probe's message: ` at line L column C`, left out
/// only for the very first character of the document.
pub(super) fn probe_position(display: &str) -> (usize, usize) {
    let Some(i) = display.rfind(KEY_PROBE) else { return (0, 0) };
    let rest = &display[i + KEY_PROBE.len()..];
    let Some(rest) = rest.strip_prefix(" at line ") else { return (1, 1) };
    let mut parts = rest.split(" column ");
    let line = parts.next().and_then(|p| p.trim().parse().ok()).unwrap_or(0);
    let column = parts.next().and_then(|p| p.trim().parse().ok()).unwrap_or(0);
    (line, column)
}

pub(super) struct KeyProbe<'a> {
    pub(super) ctx: &'a Ctx,
}

pub(super) enum Never {}

impl<'de> DeserializeSeed<'de> for KeyProbe<'_> {
    type Value = Never;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Never, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyProbe<'_> {
    type Value = Never;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a plain key such as `paths`")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Never, E> {
        *self.ctx.stashed_key.borrow_mut() = Some(v.to_string());
        Err(E::custom(KEY_PROBE))
    }
}

/// Remember keys seen in one mapping; a repeat is an error at the repeat's line.
#[derive(Default)]
pub(super) struct Seen(HashMap<String, usize>);

impl Seen {
    pub(super) fn check<E: de::Error>(&mut self, ctx: &Ctx, key: &Key, what: impl FnOnce() -> String) -> Result<(), E> {
        if let Some(first) = self.0.get(&key.name) {
            return Err(ctx.fail(format!("{} (first at line {first})", what()), key.at()));
        }
        self.0.insert(key.name.clone(), key.line);
        Ok(())
    }
}
