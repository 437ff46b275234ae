//! The one error type of every handler, and its JSON body.
//!
//! Every error reaches the client as `{"error": {"code", "message"}}` (SPEC
//! section 3), a 409 `already_answered` with the winning answer beside it.
//! Server faults (5xx) are logged with their details and answered with a
//! generic message: nothing internal leaks to a client.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use lev_protocol::api::{ErrorBody, ErrorDetail, InteractionView};
use lev_protocol::{StoredResponse, ValidationError, ValidationErrorKind};
use lev_store::StoreError;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the body is not JSON, or the request is malformed.
    #[error("{0}")]
    Malformed(String),
    /// 401: no token, or a token lev does not know.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: the token's role (or bound caller) does not allow this.
    #[error("{message}")]
    Forbidden {
        /// Stable code: `forbidden`, `caller_mismatch`.
        code: &'static str,
        /// For a person.
        message: String,
    },
    /// 404: no such thing.
    #[error("{0}")]
    NotFound(String),
    /// 409: a conflict other than an answer that lost.
    #[error("{message}")]
    Conflict {
        /// Stable code: `id_conflict`, `name_taken`.
        code: &'static str,
        /// For a person.
        message: String,
    },
    /// 409 `already_answered`, with the answer that won.
    #[error("the interaction was already answered")]
    AlreadyAnswered(Box<StoredResponse>),
    /// 410: expired or cancelled.
    #[error("{0}")]
    Gone(String),
    /// 413: over a size limit.
    #[error("{0}")]
    TooLarge(String),
    /// 422: well-formed but invalid; the message names the field.
    #[error("{0}")]
    Invalid(String),
    /// 422 `invalid` on a form's answer: each failing property and why.
    #[error("{message}")]
    InvalidFields {
        /// Every failing property, for a person.
        message: String,
        /// The same, by property.
        fields: std::collections::BTreeMap<String, String>,
    },
    /// 422 with a code of its own (`invalid_vote`, `signed_vote_required`).
    #[error("{message}")]
    Unprocessable {
        /// Stable code.
        code: &'static str,
        /// For a person.
        message: String,
    },
    /// 429: over a limit on how many.
    #[error("{0}")]
    TooMany(String),
    /// 502: the party the server relied on (a session's operator) failed.
    #[error("{message}")]
    Upstream {
        /// Stable code: `spawn_failed`.
        code: &'static str,
        /// For a person.
        message: String,
    },
    /// 504: nobody answered within the caller's time.
    #[error("{0}")]
    Timeout(String),
    /// 503: the server is shutting down; retry elsewhere or later.
    #[error("the server is shutting down, retry shortly")]
    ShuttingDown,
    /// 503 `store_unavailable`: the database cannot be reached; nothing was
    /// committed, retry shortly.
    #[error("the database is unavailable, retry shortly")]
    StoreUnavailable,
    /// 500: a fault of the server. The details are logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
    /// 408 `request_timeout`: the body did not arrive in time; the
    /// connection is closed after the answer.
    #[error("{0}")]
    RequestTimeout(String),
}

impl ApiError {
    /// 403 `forbidden` for a role that may not call a route.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::Forbidden {
            code: "forbidden",
            message: message.into(),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Malformed(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict { .. } | Self::AlreadyAnswered(_) => StatusCode::CONFLICT,
            Self::Gone(_) => StatusCode::GONE,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Invalid(_) | Self::InvalidFields { .. } | Self::Unprocessable { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Self::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Upstream { .. } => StatusCode::BAD_GATEWAY,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::ShuttingDown | Self::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
        }
    }

    /// The stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::Unauthorized(_) => "unauthorized",
            Self::Forbidden { code, .. }
            | Self::Conflict { code, .. }
            | Self::Unprocessable { code, .. }
            | Self::Upstream { code, .. } => code,
            Self::NotFound(_) => "not_found",
            Self::AlreadyAnswered(_) => "already_answered",
            Self::Gone(_) => "gone",
            Self::TooLarge(_) => "too_large",
            Self::Invalid(_) | Self::InvalidFields { .. } => "invalid",
            Self::TooMany(_) => "too_many",
            Self::Timeout(_) => "timeout",
            Self::ShuttingDown => "shutting_down",
            Self::StoreUnavailable => "store_unavailable",
            Self::Internal(_) => "internal",
            Self::RequestTimeout(_) => "request_timeout",
        }
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        match e.kind {
            ValidationErrorKind::TooLarge => Self::TooLarge(e.to_string()),
            ValidationErrorKind::Invalid if !e.fields.is_empty() => Self::InvalidFields {
                message: e.to_string(),
                fields: e.fields,
            },
            ValidationErrorKind::Invalid => Self::Invalid(e.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Closed => Self::ShuttingDown,
            StoreError::Unavailable(cause) => {
                crate::log::error(&format!("store unavailable: {cause}"));
                Self::StoreUnavailable
            }
            other => Self::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let code = self.code().to_owned();
        let close = matches!(self, Self::RequestTimeout(_));
        let mut fields = std::collections::BTreeMap::new();
        let (message, response) = match self {
            Self::Internal(details) => {
                crate::log::error(&format!("internal error: {details}"));
                (
                    "something went wrong on the server; the details are in its log".to_owned(),
                    None,
                )
            }
            Self::AlreadyAnswered(winner) => (
                "the interaction was already answered; the first answer wins".to_owned(),
                Some(*winner),
            ),
            Self::InvalidFields {
                message,
                fields: by_field,
            } => {
                fields = by_field;
                (message, None)
            }
            other => (other.to_string(), None),
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code,
                message,
                fields,
            },
            response,
        };
        let mut response = (status, axum::Json(body)).into_response();
        if close {
            // The rest of a body that came too slowly is not waited for.
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        response
    }
}

/// Result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

/// 409 `already_answered` carrying the winner.
pub fn already_answered(view: InteractionView) -> ApiError {
    match view.response {
        Some(winner) => ApiError::AlreadyAnswered(Box::new(winner)),
        None => ApiError::Conflict {
            code: "already_answered",
            message: "the interaction was already answered".into(),
        },
    }
}

/// 410 for an expired or cancelled interaction.
pub fn gone(view: &InteractionView) -> ApiError {
    ApiError::Gone(format!(
        "interaction {} is {}; it takes no answer",
        view.request.id(),
        view.request.status.as_str()
    ))
}
