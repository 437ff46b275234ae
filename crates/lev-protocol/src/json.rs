//! Strict JSON checks for text that is bound byte for byte (`args_json`).
//!
//! `serde_json` keeps the last of two equal keys in an object; two parties that
//! read duplicated keys differently could each see a different call. lev refuses
//! such text outright.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Deepest nesting accepted (serde_json's own recursion limit is 128).
const MAX_DEPTH: usize = 128;

/// Check that `text` is one JSON value with no object holding a key twice.
///
/// # Errors
/// A message saying what is wrong and where (line and column).
pub fn check_strict_json(text: &str) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_str(text);
    StrictValue { depth: 0 }
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| {
            let msg = e.to_string();
            if e.is_syntax() || e.is_eof() {
                format!("expected JSON text, {msg}")
            } else {
                msg
            }
        })
}

struct StrictValue {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(de::Error::custom("nested too deeply"));
        }
        while seq.next_element_seed(StrictValue { depth })?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(de::Error::custom("nested too deeply"));
        }
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format_args!(
                    "an object holds the key {key:?} twice"
                )));
            }
            map.next_value_seed(StrictValue { depth })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::check_strict_json;

    #[test]
    fn accepts_plain_json() {
        for ok in [
            r#"{"a":1}"#,
            "[1,2,{}]",
            "null",
            r#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#,
            " 1 ",
        ] {
            assert_eq!(check_strict_json(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn refuses_duplicates_at_any_depth() {
        let err = check_strict_json(r#"{"a":1,"a":2}"#).unwrap_err();
        assert!(err.contains("\"a\" twice"), "{err}");
        assert!(check_strict_json(r#"[{"x":{"k":1,"k":1}}]"#).is_err());
        // An escaped key is the same key.
        assert!(check_strict_json(r#"{"a":1,"\u0061":2}"#).is_err());
    }

    #[test]
    fn refuses_non_json() {
        for bad in ["", "{", "{'a':1}", "[1,]", "1 2", "{\"a\":1}x"] {
            let err = check_strict_json(bad).unwrap_err();
            assert!(!err.is_empty(), "{bad}");
        }
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(check_strict_json(&deep).is_err());
    }
}
