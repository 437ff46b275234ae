//! How every backend writes times and reads its rows back: RFC 3339 text
//! and milliseconds since the epoch, and what a row that does not decode
//! becomes ([`StoreError::Corrupt`], never a panic).

use time::OffsetDateTime;

use crate::{Result, StoreError};

/// A row or value that does not decode: `what` it was, and why.
pub fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        what: what.to_owned(),
        message: e.to_string(),
    }
}

/// `t` as RFC 3339 text.
pub fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// RFC 3339 text read back.
///
/// # Errors
/// [`StoreError::Corrupt`] naming `what`.
pub fn parse_time(what: &str, s: &str) -> Result<OffsetDateTime> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|e| corrupt(what, e))
}

/// `t` in milliseconds since the epoch.
pub fn millis(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// Milliseconds since the epoch read back.
///
/// # Errors
/// [`StoreError::Corrupt`] naming `what`, for a time out of range.
pub fn from_millis(what: &str, ms: i64) -> Result<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| corrupt(what, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_and_bad_ones_are_corrupt() {
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_764_000_000_123_000_000).unwrap();
        assert_eq!(from_millis("t", millis(t)).unwrap(), t);
        assert_eq!(parse_time("t", &rfc3339(t)).unwrap(), t);
        assert!(matches!(
            parse_time("t", "yesterday"),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(matches!(
            from_millis("t", i64::MAX),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
