//! Request bodies: read under a size limit, then parsed as JSON.
//!
//! An over-size body is refused from its `Content-Length` before a byte of it
//! is read, and a chunked body is cut off the moment it passes the limit: a
//! client cannot make the server buffer more than the limit. Malformed JSON is
//! 400; well-formed JSON of the wrong shape is 422 naming the field.

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_LENGTH;
use http_body_util::BodyExt as _;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body (1 MiB at most).
pub const JSON_LIMIT: usize = 1024 * 1024;
/// A respond body, parts included (40 MiB at most).
pub const RESPOND_LIMIT: usize = 40 * 1024 * 1024;

/// A JSON body of at most `LIMIT` bytes, parsed into `T`.
#[derive(Debug)]
pub struct JsonBody<T, const LIMIT: usize = JSON_LIMIT>(pub T);

/// Bodies larger than this are parsed on the blocking pool, so a burst of
/// large bodies cannot hold the async workers that answer everyone else.
const INLINE_PARSE_LIMIT: usize = 64 * 1024;

impl<S, T, const LIMIT: usize> FromRequest<S> for JsonBody<T, LIMIT>
where
    S: Send + Sync,
    T: DeserializeOwned + Send + 'static,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_limited(req, LIMIT).await?;
        parse_json_off_executor(bytes).await.map(JsonBody)
    }
}

/// [`parse_json`], on the blocking pool when the body is large.
///
/// # Errors
/// As [`parse_json`].
pub async fn parse_json_off_executor<T: DeserializeOwned + Send + 'static>(
    bytes: Vec<u8>,
) -> Result<T, ApiError> {
    if bytes.len() <= INLINE_PARSE_LIMIT {
        return parse_json(&bytes);
    }
    tokio::task::spawn_blocking(move || parse_json(&bytes))
        .await
        .map_err(|e| ApiError::Internal(format!("parsing the body: {e}")))?
}

fn too_large(limit: usize) -> ApiError {
    ApiError::TooLarge(format!(
        "the body is larger than the {} KiB this route accepts",
        limit / 1024
    ))
}

/// Read a request body, refusing it past `limit` bytes.
///
/// # Errors
/// 413 when the declared or actual length passes `limit`; 400 when the body
/// cannot be read; 408 when it does not arrive by the request's deadline.
pub async fn read_limited(req: Request, limit: usize) -> Result<Vec<u8>, ApiError> {
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    // The connection loop gives every request a deadline for its body
    // (`--body-timeout`): a body trickled a byte at a time does not hold a
    // connection and its buffer for ever.
    let deadline = req
        .extensions()
        .get::<crate::http::BodyDeadline>()
        .map(|d| d.0);
    let mut body: Body = req.into_body();
    if declared.is_some_and(|n| n > limit as u64) {
        drain_in_background(body);
        return Err(too_large(limit));
    }
    let capacity = declared.map_or(8 * 1024, |n| usize::try_from(n).unwrap_or(limit));
    let mut out = Vec::with_capacity(capacity.min(limit));
    loop {
        let next = match deadline {
            Some(at) => match tokio::time::timeout_at(at, body.frame()).await {
                Ok(next) => next,
                Err(_) => {
                    return Err(ApiError::RequestTimeout(format!(
                        "expected the whole request body within the server's body timeout, \
                         found {} bytes by then",
                        out.len()
                    )));
                }
            },
            None => body.frame().await,
        };
        let Some(frame) = next else { break };
        let frame =
            frame.map_err(|e| ApiError::Malformed(format!("cannot read the request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                drain_in_background(body);
                return Err(too_large(limit));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// Most bytes thrown away after a 413, and for how long.
const DRAIN_BYTES: usize = 64 * 1024 * 1024;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// Keep reading (and discarding) what the client still sends while the 413
/// goes out, for a bounded time and size: a client that writes its whole body
/// before reading then sees the 413 instead of a reset connection. Nothing is
/// kept, so this costs no memory.
fn drain_in_background(mut body: Body) {
    tokio::spawn(async move {
        let mut seen = 0usize;
        let _ = tokio::time::timeout(DRAIN_TIME, async {
            while let Some(Ok(frame)) = body.frame().await {
                seen += frame.data_ref().map_or(0, |d| d.len());
                if seen > DRAIN_BYTES {
                    break;
                }
            }
        })
        .await;
    });
}

/// Parse JSON: a syntax error is 400, a wrong shape 422 naming the field.
///
/// # Errors
/// As above.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    check_depth(bytes)?;
    // Well-formedness first, so that `{"a":1} trailing` is malformed (400)
    // rather than missing a field (422).
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(|e| classify("", e))?;
    // Every body is an object: serde would also fill a struct from an
    // array, by position (`[null, 5]` as `{"question": null, "timeout_s": 5}`).
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        _ => {
            return Err(ApiError::Invalid(format!(
                "expected a JSON object, found {}",
                json_kind(bytes)
            )));
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let mut path = e.path().to_string();
        let inner = e.into_inner();
        if let Some(field) = narrow::<T>(bytes, &path, &inner) {
            path = field;
        }
        classify(&path, inner)
    })?;
    de.end().map_err(|e| classify("", e))?;
    Ok(value)
}

/// What a well-formed JSON text is, for an error message.
fn json_kind(bytes: &[u8]) -> &'static str {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        Some(b'{') => "an object",
        _ => "a number",
    }
}

/// Deepest JSON nesting a body may have (SPEC section 9).
pub const MAX_DEPTH: usize = 64;

/// Refuse JSON nested deeper than [`MAX_DEPTH`], in one pass over the bytes
/// (strings skipped, escapes honoured), before any parser recurses into it.
///
/// # Errors
/// 400 naming the limit.
pub fn check_depth(bytes: &[u8]) -> Result<(), ApiError> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(ApiError::Malformed(format!(
                        "the body is nested deeper than {MAX_DEPTH} levels"
                    )));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Narrowing re-reads the body once per key of one object: only for small
/// bodies and objects, so its cost stays a small constant times the body's
/// size (a wider object is an attack or a mistake; the error then names
/// the object instead of the field).
const NARROW_MAX_BODY: usize = 64 * 1024;
const NARROW_MAX_KEYS: usize = 16;

/// Name the field inside an internally tagged enum (`kind`) that a type
/// error is about: serde buffers such an enum, so its error's path stops at
/// the enum. Each key of that object is left out in turn; the one whose
/// absence cures the error (or makes it "missing field" for that very key)
/// is the culprit. Runs on the error path only, and only within
/// [`NARROW_MAX_BODY`] and [`NARROW_MAX_KEYS`].
fn narrow<T: DeserializeOwned>(
    bytes: &[u8],
    path: &str,
    err: &serde_json::Error,
) -> Option<String> {
    if bytes.len() > NARROW_MAX_BODY {
        return None;
    }
    let message = err.to_string();
    if path.is_empty()
        || path == "."
        || path.contains('[')
        || message.starts_with("missing field")
        || message.starts_with("unknown variant")
    {
        return None;
    }
    let pointer = format!("/{}", path.replace('.', "/"));
    let root: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let object = root.pointer(&pointer)?.as_object()?;
    if object.len() > NARROW_MAX_KEYS {
        return None;
    }
    let keys: Vec<String> = object.keys().cloned().collect();
    for key in keys.into_iter().filter(|k| k != "type") {
        let mut copy = root.clone();
        copy.pointer_mut(&pointer)?.as_object_mut()?.remove(&key);
        let cured = match serde_path_to_error::deserialize::<_, T>(copy) {
            Ok(_) => true,
            Err(e) => e
                .inner()
                .to_string()
                .starts_with(&format!("missing field `{key}`")),
        };
        if cured {
            return Some(format!("{path}.{key}"));
        }
    }
    None
}

fn classify(path: &str, inner: serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    match inner.classify() {
        Category::Syntax | Category::Eof => {
            ApiError::Malformed(format!("expected a JSON body, {inner}"))
        }
        Category::Io => ApiError::Malformed(format!("cannot read the request body: {inner}")),
        Category::Data if path.is_empty() || path == "." => ApiError::Invalid(inner.to_string()),
        Category::Data => ApiError::Invalid(format!("{path}: {inner}")),
    }
}

#[cfg(test)]
mod tests {
    use lev_protocol::api::AskRequest;

    use super::parse_json;
    use crate::error::ApiError;

    #[test]
    fn a_body_is_an_object_never_an_array_filling_fields_by_position() {
        // serde fills a struct from an array: this was accepted as an ask.
        let err = parse_json::<AskRequest>(b" [null, 5]").expect_err("an array body");
        assert!(
            matches!(&err, ApiError::Invalid(m) if m == "expected a JSON object, found an array"),
            "{err:?}"
        );
        for (body, kind) in [
            (&b"\"x\""[..], "a string"),
            (b"7", "a number"),
            (b"null", "null"),
            (b"true", "a boolean"),
        ] {
            let err = parse_json::<AskRequest>(body).expect_err("not an object");
            assert!(
                matches!(&err, ApiError::Invalid(m) if m.ends_with(kind)),
                "{err:?}"
            );
        }
        let ok: AskRequest = parse_json(b"\n {\"question\": 1}").expect("an object");
        assert_eq!(ok.question, serde_json::json!(1));
    }
}
