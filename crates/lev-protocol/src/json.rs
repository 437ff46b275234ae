//! Strict JSON checks for text that is bound byte for byte (`args_json`),
//! and JSON written inert for a screen ([`to_string_inert`]).
//!
//! `serde_json` keeps the last of two equal keys in an object; two parties that
//! read duplicated keys differently could each see a different call. lev refuses
//! such text outright.
//!
//! JSON that a program prints (`lev ls --json`, a hook's output) often ends up
//! on a terminal. [`to_string_inert`] writes every hidden character
//! ([`crate::text::HIDDEN`]: controls, DEL, C1, bidi controls, zero-width
//! characters, tags, line and paragraph separators ...) as a `\uXXXX` escape
//! (a surrogate pair above U+FFFF): the same value for any JSON parser, and
//! nothing that can move a cursor, reorder a line or hide a word on a screen.

use std::collections::HashSet;
use std::fmt;
use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter, PrettyFormatter};

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

/// `value` as JSON with every hidden character escaped as `\uXXXX`; pretty
/// (two spaces, as `serde_json::to_string_pretty`) or compact. It parses back
/// to the same value.
///
/// # Errors
/// When `value` cannot be written as JSON (a map with non-string keys, a
/// `Serialize` implementation that fails).
pub fn to_string_inert<T: Serialize + ?Sized>(
    value: &T,
    pretty: bool,
) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(128);
    if pretty {
        let mut ser =
            serde_json::Serializer::with_formatter(&mut out, Inert(PrettyFormatter::new()));
        value.serialize(&mut ser)?;
    } else {
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Inert(CompactFormatter));
        value.serialize(&mut ser)?;
    }
    // serde_json writes UTF-8 only, and every escape here is ASCII.
    String::from_utf8(out).map_err(|e| serde_json::Error::io(io::Error::other(e)))
}

/// A formatter that writes the hidden characters of strings (and keys) as
/// `\uXXXX`, around `F` for everything else.
#[derive(Debug, Clone, Default)]
pub struct Inert<F>(pub F);

impl<F: Formatter> Formatter for Inert<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            if !crate::text::is_hidden(c) {
                continue;
            }
            writer.write_all(&fragment.as_bytes()[start..at])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(writer, "\\u{unit:04x}")?;
            }
            start = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    // Everything else is `F`'s.
    fn write_null<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.write_null(w)
    }
    fn write_bool<W: ?Sized + io::Write>(&mut self, w: &mut W, v: bool) -> io::Result<()> {
        self.0.write_bool(w, v)
    }
    fn write_i64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: i64) -> io::Result<()> {
        self.0.write_i64(w, v)
    }
    fn write_u64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: u64) -> io::Result<()> {
        self.0.write_u64(w, v)
    }
    fn write_i128<W: ?Sized + io::Write>(&mut self, w: &mut W, v: i128) -> io::Result<()> {
        self.0.write_i128(w, v)
    }
    fn write_u128<W: ?Sized + io::Write>(&mut self, w: &mut W, v: u128) -> io::Result<()> {
        self.0.write_u128(w, v)
    }
    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: f64) -> io::Result<()> {
        self.0.write_f64(w, v)
    }
    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, v: f32) -> io::Result<()> {
        self.0.write_f32(w, v)
    }
    fn write_number_str<W: ?Sized + io::Write>(&mut self, w: &mut W, v: &str) -> io::Result<()> {
        self.0.write_number_str(w, v)
    }
    fn begin_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_string(w)
    }
    fn end_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_string(w)
    }
    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        self.0.write_char_escape(w, escape)
    }
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
    fn write_raw_fragment<W: ?Sized + io::Write>(&mut self, w: &mut W, f: &str) -> io::Result<()> {
        self.0.write_raw_fragment(w, f)
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

#[cfg(test)]
mod inert_tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::to_string_inert;
    use crate::text::{HIDDEN, is_hidden};

    fn no_raw_hidden(text: &str) {
        // The JSON text itself: its own newlines and indentation aside.
        for c in text.chars() {
            assert!(
                c == '\n' || !is_hidden(c),
                "raw {} in {text:?}",
                crate::text::code_point(c)
            );
        }
    }

    #[test]
    fn every_hidden_range_is_escaped_and_reads_back_the_same() {
        let mut all = String::new();
        for &(lo, hi) in HIDDEN {
            for cp in [lo, (lo + hi) / 2, hi] {
                if let Some(c) = char::from_u32(cp) {
                    all.push(c);
                }
            }
        }
        let value = json!({"text": format!("a{all}b"), all.clone(): [all.clone(), 1, null]});
        for pretty in [false, true] {
            let text = to_string_inert(&value, pretty).unwrap();
            no_raw_hidden(&text);
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        }
        let text = to_string_inert(&json!("\u{202E}\u{E0049}\u{7F}\u{85}"), false).unwrap();
        assert_eq!(text, r#""\u202e\udb40\udc49\u007f\u0085""#);
    }

    #[test]
    fn plain_text_is_written_as_serde_json_writes_it() {
        let value = json!({"a": "héllo 日本 😀", "b": [1, 2.5, true], "c": "line\nnext\t\"q\""});
        assert_eq!(
            to_string_inert(&value, false).unwrap(),
            serde_json::to_string(&value).unwrap()
        );
        assert_eq!(
            to_string_inert(&value, true).unwrap(),
            serde_json::to_string_pretty(&value).unwrap()
        );
    }

    proptest! {
        #[test]
        fn any_string_round_trips_with_nothing_hidden_raw(s in any::<String>(), pretty: bool) {
            let value = json!({"k": s.clone(), s.clone(): s});
            let text = to_string_inert(&value, pretty).unwrap();
            no_raw_hidden(&text);
            prop_assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        }
    }
}
