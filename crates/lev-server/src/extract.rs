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
