//! What handlers take from a request besides the body ([`crate::body`]):
//! the path parameter and the query string, each with a JSON error.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The one path parameter of a route, as text; a parameter that is not
/// valid percent-encoded UTF-8 is 400 (axum's own rejection is not JSON).
#[derive(Debug)]
pub struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<String>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(p)| PathParam(p))
            .map_err(|e| ApiError::Malformed(format!("path: {}", e.body_text())))
    }
}

/// The query string parsed into `T`; a bad one is 422 naming the parameter.
#[derive(Debug)]
pub struct Q<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(q)| Q(q))
            .map_err(|e| ApiError::Invalid(e.body_text()))
    }
}

/// A page's `limit` query parameter: `default` when absent, else 1 to
/// `max` (SPEC section 17's OpenAPI document says so for every list). Zero
/// or more than `max` is 422 naming the range, never a page of another
/// size; a value that is not a number (or is negative) was refused by
/// [`Q`] already.
///
/// # Errors
/// 422 for a limit outside 1 to `max`.
pub fn page_limit(limit: Option<u32>, default: u32, max: u32) -> Result<u32, ApiError> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::Invalid(format!(
            "limit: expected 1 to {max}, found {n}"
        ))),
    }
}

/// A list's `cursor` query parameter: the `next_cursor` of the page before,
/// a positive sequence number.
///
/// # Errors
/// 422 for anything else.
pub fn page_cursor(cursor: Option<&str>) -> Result<Option<i64>, ApiError> {
    cursor
        .map(|c| {
            c.parse::<u64>()
                .ok()
                .filter(|n| *n >= 1 && c.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| i64::try_from(n).ok())
                .ok_or_else(|| {
                    ApiError::Invalid("cursor: expected a next_cursor from a previous page".into())
                })
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_outside_their_range_are_refused() {
        assert_eq!(page_limit(None, 50, 500).unwrap(), 50);
        assert_eq!(page_limit(Some(1), 50, 500).unwrap(), 1);
        assert_eq!(page_limit(Some(500), 50, 500).unwrap(), 500);
        for bad in [0, 501, u32::MAX] {
            let e = page_limit(Some(bad), 50, 500).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("limit: expected 1 to 500, found {bad}")
            );
        }
    }

    #[test]
    fn cursors_are_positive_numbers() {
        assert_eq!(page_cursor(None).unwrap(), None);
        assert_eq!(page_cursor(Some("42")).unwrap(), Some(42));
        for bad in ["", "0", "-1", "+1", "1.5", "x", "99999999999999999999"] {
            assert!(page_cursor(Some(bad)).is_err(), "{bad}");
        }
    }
}
