//! Server-made identifiers: a prefix, the creation time, randomness.
//!
//! `ir_` + 10 Crockford base32 digits of the Unix time in milliseconds + 16 of
//! randomness (80 bits): ids sort by creation time as plain strings, and two
//! made in the same millisecond still differ.

use time::OffsetDateTime;

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A fresh id with `prefix` (such as `ir_`), made at `now`.
///
/// # Errors
/// When the system has no randomness to give.
pub fn new_id(prefix: &str, now: OffsetDateTime) -> Result<String, getrandom::Error> {
    let ms = u64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or_default();
    let mut random = [0u8; 10];
    getrandom::fill(&mut random)?;
    let mut out = String::with_capacity(prefix.len() + 26);
    out.push_str(prefix);
    for i in (0..10).rev() {
        out.push(char::from(CROCKFORD[((ms >> (i * 5)) & 31) as usize]));
    }
    let mut bits: u128 = 0;
    for b in random {
        bits = (bits << 8) | u128::from(b);
    }
    for i in (0..16).rev() {
        out.push(char::from(CROCKFORD[((bits >> (i * 5)) & 31) as usize]));
    }
    Ok(out)
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_time_and_are_valid() {
        let t0 = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        let t1 = t0 + time::Duration::milliseconds(1);
        let a = new_id("ir_", t0).unwrap();
        let b = new_id("ir_", t1).unwrap();
        assert!(a < b, "{a} < {b}");
        assert_eq!(a.len(), 3 + 26);
        assert!(lev_protocol::ids::is_valid_id(&a));
        assert_ne!(new_id("ir_", t0).unwrap(), a);
    }
}
