//! Single use: a spent nonce is refused forever, in whichever spelling it
//! comes back.
//!
//! A nonce is base64 (SPEC: base64url without padding), and lev accepts
//! base64 in the standard or the URL-safe alphabet, padded or not: so a
//! ledger remembers a nonce by its bytes ([`nonce_key`]), never by the text
//! it was handed, or `q-_x` spent once could be spent again as `q+/x` or
//! `q-_x==`.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::b64::encode_base64url;

/// The nonce was spent before.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nonce already spent: an approval is single-use")]
pub struct NonceSpent;

/// Where a verifier records the nonces it has spent.
///
/// The server's durable ledger (`POST /v1/nonces/consume`) survives restarts;
/// [`InMemoryNonceLedger`] lasts as long as the process. Both remember
/// [`nonce_key`], not the text given.
pub trait NonceLedger {
    /// Record `nonce` as spent.
    ///
    /// # Errors
    /// [`NonceSpent`] when it was spent before, in any spelling.
    fn consume(&self, nonce: &str) -> Result<(), NonceSpent>;
}

/// A ledger in memory, for one process.
#[derive(Debug, Default)]
pub struct InMemoryNonceLedger {
    spent: Mutex<HashSet<String>>,
}

impl NonceLedger for InMemoryNonceLedger {
    fn consume(&self, nonce: &str) -> Result<(), NonceSpent> {
        let mut spent = self
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if spent.insert(nonce_key(nonce)) {
            Ok(())
        } else {
            Err(NonceSpent)
        }
    }
}

/// The fewest bytes of an approval's nonce (SPEC: at least 128 random bits).
const NONCE_BYTES: usize = 16;

/// What a ledger remembers `nonce` by: the same key for every spelling of
/// the same bytes.
///
/// - Base64 of at least 16 bytes (an approval's nonce), in either alphabet
///   (or a mix), padded or not, and whatever the unused low bits of its
///   last character hold (decoders that ignore them read the same bytes):
///   its bytes, as base64url without padding (what lev writes, so a nonce
///   spelled as lev signed it is its own key).
/// - Shorter text that is base64 with those bits zero: its bytes, likewise.
/// - Anything else (not base64, or a short id whose last character carries
///   stray bits, so that `task-1` and `task-2` stay two ids): as written.
///
/// Text kept as written never equals a key made from bytes: it either holds
/// a character outside the base64url alphabet or has a length no base64url
/// text without padding has, or it is short base64 with stray bits, which
/// lev's encoding never writes.
#[must_use]
pub fn nonce_key(nonce: &str) -> String {
    let body = nonce.trim_end_matches('=');
    match decode_any_alphabet(body) {
        Some((bytes, stray_bits)) if bytes.len() >= NONCE_BYTES || !stray_bits => {
            encode_base64url(&bytes)
        }
        _ => nonce.to_owned(),
    }
}

/// The bytes of unpadded base64 in either alphabet (or a mix of both), and
/// whether the last character's unused bits were other than zero. `None`
/// when `body` is empty, holds any other character, or has a length no
/// base64 has.
fn decode_any_alphabet(body: &str) -> Option<(Vec<u8>, bool)> {
    if body.is_empty() || body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in body.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).unwrap_or(0));
            acc &= (1 << bits) - 1;
        }
    }
    Some((out, acc != 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::b64::encode_base64;

    #[test]
    fn spends_once() {
        let ledger = InMemoryNonceLedger::default();
        assert_eq!(ledger.consume("n1"), Ok(()));
        assert_eq!(ledger.consume("n2"), Ok(()));
        assert_eq!(ledger.consume("n1"), Err(NonceSpent));
    }

    /// Every spelling of one nonce's bytes: the URL-safe form lev signs,
    /// the standard alphabet, padding, over-padding, a mix of alphabets, and
    /// stray bits in the last character.
    fn spellings(bytes: &[u8]) -> Vec<String> {
        let url = encode_base64url(bytes);
        let std = encode_base64(bytes);
        let mut out = vec![
            url.clone(),
            std.clone(),
            std.trim_end_matches('=').to_owned(),
            format!("{url}=="),
            format!("{std}=="),
            url.replace('-', "+"),
            url.replace('_', "/"),
        ];
        // The last character's unused low bits set (16 bytes: 4 spare bits).
        if !bytes.len().is_multiple_of(3) {
            let mut chars: Vec<char> = url.chars().collect();
            if let Some(last) = chars.last_mut() {
                let i = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                    .find(*last)
                    .unwrap();
                let spare = if bytes.len() % 3 == 1 { 0b1111 } else { 0b11 };
                *last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                    .chars()
                    .nth(i | spare)
                    .unwrap();
            }
            out.push(chars.into_iter().collect());
        }
        out
    }

    #[test]
    fn a_nonce_spent_once_is_spent_in_every_spelling() {
        // Bytes whose base64 holds + and / (standard) or - and _ (URL-safe).
        let nonce: Vec<u8> = (0..16u8).map(|i| 0xfb ^ i.wrapping_mul(37)).collect();
        let all = spellings(&nonce);
        assert!(
            all.iter().any(|s| s.contains('+') || s.contains('/')),
            "{all:?}"
        );
        for first in &all {
            let ledger = InMemoryNonceLedger::default();
            assert_eq!(ledger.consume(first), Ok(()), "{first}");
            for again in &all {
                assert_eq!(
                    ledger.consume(again),
                    Err(NonceSpent),
                    "{first} then {again}"
                );
            }
            assert_eq!(nonce_key(first), encode_base64url(&nonce), "{first}");
        }
    }

    #[test]
    fn distinct_ids_stay_distinct() {
        // Short ids are not merged by stray bits; text that is not base64 is
        // kept as written; different bytes are different keys.
        for (a, b) in [
            ("task-1", "task-2"),
            ("nonce-1", "nonce-2"),
            ("n1", "n2"),
            ("a.b", "a-b"),
            ("=", "=="),
            ("abcd!", "abcd"),
        ] {
            assert_ne!(nonce_key(a), nonce_key(b), "{a} {b}");
        }
        let ledger = InMemoryNonceLedger::default();
        let one = encode_base64url(&[1u8; 16]);
        let two = encode_base64url(&[2u8; 16]);
        assert_eq!(ledger.consume(&one), Ok(()));
        assert_eq!(ledger.consume(&two), Ok(()));
        // A short id spelled two ways (padded, standard) is one id.
        assert_eq!(nonce_key("YWJj"), nonce_key("YWJj=="));
        assert_eq!(nonce_key("-_8"), nonce_key("+/8="));
        // What lev writes is its own key.
        assert_eq!(nonce_key(&one), one);
    }
}
