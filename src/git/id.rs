//! Object ids as they are written in git-boulder's own records (ops, the merge journal, notes):
//! 40 lowercase hex digits, read back into an [`ObjectId`] once, where the record is read.
//!
//! Use with serde: `#[serde(with = "crate::git::id::hex")]` on an `ObjectId` field,
//! `#[serde(with = "crate::git::id::hex_opt")]` on an `Option<ObjectId>` field (absent or null is
//! `None`; pair it with `default` and, where the field is left out when absent,
//! `skip_serializing_if = "Option::is_none"`).

use super::ObjectId;

/// An object id as git-boulder shows it to a person: its first 8 hex digits.
pub fn short(id: ObjectId) -> String {
    id.to_hex_with_len(8).to_string()
}

/// Parse 40 hex digits (either case) into an object id; `None` for anything else.
pub fn parse(text: &str) -> Option<ObjectId> {
    if text.len() != 40 {
        return None;
    }
    ObjectId::from_hex(text.as_bytes()).ok()
}

/// An `ObjectId` field written as its hex string.
pub mod hex {
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    use super::ObjectId;

    pub fn serialize<S: Serializer>(id: &ObjectId, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&id.to_hex())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectId, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        super::parse(&text).ok_or_else(|| D::Error::custom(format!("not a commit id: {text:?}")))
    }
}

/// An `Option<ObjectId>` field written as its hex string, or null/absent for `None`.
pub mod hex_opt {
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    use super::ObjectId;

    pub fn serialize<S: Serializer>(id: &Option<ObjectId>, s: S) -> Result<S::Ok, S::Error> {
        match id {
            Some(id) => s.collect_str(&id.to_hex()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ObjectId>, D::Error> {
        match <Option<std::borrow::Cow<'de, str>>>::deserialize(d)? {
            None => Ok(None),
            Some(text) => {
                super::parse(&text).map(Some).ok_or_else(|| D::Error::custom(format!("not a commit id: {text:?}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Record {
        #[serde(with = "hex")]
        id: ObjectId,
        #[serde(default, with = "hex_opt", skip_serializing_if = "Option::is_none")]
        other: Option<ObjectId>,
    }

    #[test]
    fn ids_are_written_as_hex_and_read_back() {
        let hex = "0123456789abcdef0123456789abcdef01234567";
        let r = Record { id: parse(hex).unwrap(), other: None };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(text, format!(r#"{{"id":"{hex}"}}"#));
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
        let both = format!(r#"{{"id":"{hex}","other":"{hex}"}}"#);
        assert_eq!(serde_json::from_str::<Record>(&both).unwrap().other, Some(r.id));
    }

    #[test]
    fn anything_but_forty_hex_digits_is_refused() {
        for bad in ["", "0123", "zz23456789abcdef0123456789abcdef01234567", "0123456789abcdef0123456789abcdef012345678"]
        {
            assert!(parse(bad).is_none(), "{bad}");
            let text = format!(r#"{{"id":"{bad}"}}"#);
            assert!(serde_json::from_str::<Record>(&text).is_err(), "{bad}");
        }
    }
}
