//! The outbound HTTP client (webhook deliveries, Slack's Web API) and what
//! an answer to one of its calls means: [`http_client`] connects only where
//! [`super::OutboundPolicy`] allows, [`from_response`] reads a receiver's
//! status, [`read_capped`] an answer's body under its cap.

use std::sync::Arc;
use std::time::Duration;

use super::{GuardedResolver, OutboundPolicy};

/// One attempt's time limit.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Most bytes of a failed response's body kept as its error.
const ERROR_BODY: usize = 300;

/// What one attempt came to.
#[derive(Debug)]
pub struct Sent {
    /// The receiver's status, when it answered.
    pub status: Option<u16>,
    /// What went wrong.
    pub error: Option<String>,
    /// How the receiver wants it retried (`Retry-After`).
    pub retry_after: Option<Duration>,
    /// Taken (2xx).
    pub ok: bool,
    /// Never again for this endpoint (410).
    pub gone: bool,
    /// The receiver's answer, when the sender reads it (Slack's).
    pub answer: Option<serde_json::Value>,
}

impl Sent {
    /// A failure before any answer.
    #[must_use]
    pub fn failed(error: String) -> Self {
        Self {
            status: None,
            error: Some(error),
            retry_after: None,
            ok: false,
            gone: false,
            answer: None,
        }
    }

    /// Done, with nothing to send (an event the receiver does not need).
    #[must_use]
    pub fn ok_nothing() -> Self {
        Self {
            status: None,
            error: None,
            retry_after: None,
            ok: true,
            gone: false,
            answer: None,
        }
    }

    /// With the receiver's answer kept.
    #[must_use]
    pub fn with_answer(mut self, answer: serde_json::Value) -> Self {
        self.answer = Some(answer);
        self
    }

    /// The receiver's answer, when it took the call.
    #[must_use]
    pub fn answer(&self) -> Option<&serde_json::Value> {
        self.answer.as_ref().filter(|_| self.ok)
    }
}

/// The HTTP client for deliveries: the system's roots, no redirects (a
/// redirect could move a signed body elsewhere), no proxy from the
/// environment, and a resolver that leaves out every address `policy`
/// refuses (checked when connecting, so DNS that answers otherwise than
/// when a URL was checked gains nothing).
///
/// # Errors
/// When TLS cannot be set up.
pub fn http_client(policy: OutboundPolicy) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .dns_resolver(GuardedResolver::new(Arc::new(policy)))
        .timeout(ATTEMPT_TIMEOUT)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("lev/", env!("CARGO_PKG_VERSION")))
        .tls_backend_preconfigured(lev_client::outbound_tls_config()?)
        .build()
        .map_err(|e| format!("cannot build the webhook HTTP client: {e}"))
}

/// Most bytes of an answer read from a service lev calls (Slack's Web
/// API): what it sends past this is not read, so a misbehaving or
/// impersonated endpoint cannot make the server buffer without bound
/// within its attempt's time.
pub const ANSWER_BYTES: usize = 1024 * 1024;

/// The body of `r`, at most `limit` bytes.
///
/// # Errors
/// When it cannot be read, or is longer than `limit`.
pub async fn read_capped(mut r: reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = r.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > limit {
            return Err(format!(
                "expected an answer of at most {} KiB, found more",
                limit / 1024
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What a receiver's answer means; the body is read only on failure, and
/// only its beginning.
pub async fn from_response(mut r: reqwest::Response) -> Sent {
    let status = r.status().as_u16();
    let retry_after = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    if r.status().is_success() {
        return Sent {
            status: Some(status),
            error: None,
            retry_after: None,
            ok: true,
            gone: false,
            answer: None,
        };
    }
    let mut body = Vec::new();
    while body.len() < ERROR_BODY {
        match r.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(ERROR_BODY);
    let text = String::from_utf8_lossy(&body).trim().to_owned();
    Sent {
        status: Some(status),
        error: Some(if text.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {text}")
        }),
        retry_after,
        ok: false,
        gone: status == 410,
        answer: None,
    }
}

/// A transport error as one line: its causes, never a secret (the URL's
/// query is not printed).
pub fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_redirect() {
        "redirected"
    } else {
        "failed"
    };
    let mut text = kind.to_owned();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn response(len: usize) -> reqwest::Response {
        reqwest::Response::from(axum::http::Response::new(vec![b'a'; len]))
    }

    /// An answer (Slack's Web API) is read up to its cap, never whole.
    #[tokio::test]
    async fn answers_are_read_up_to_their_cap() {
        assert_eq!(read_capped(response(1000), 1000).await.unwrap().len(), 1000);
        let e = read_capped(response(1001), 1000).await.unwrap_err();
        assert!(e.contains("at most"), "{e}");
    }
}
