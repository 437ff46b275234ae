//! `GET /v1/audit?after=SEQ&limit=N` (admin): a page of entries and the
//! signed head, `{"items", "next_cursor", "head"}`. `next_cursor` is the
//! last entry's seq while the page stops short of the head; `?cursor=` takes
//! it as `?after=` does.

use axum::Json;
use axum::extract::State;
use lev_approval::audit::sign_head;
use lev_protocol::api::{AuditPage, Page, Role};
use serde::Deserialize;

use super::Q;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Entries per page unless `limit` says otherwise.
const DEFAULT_LIMIT: u32 = 1_000;
/// Most entries per page.
const MAX_LIMIT: u32 = 10_000;
/// A page stops once its entries' data passes this many bytes (it always
/// holds at least one entry): entries can be large (an answer's text, a
/// call's args), and a page must stay a reasonable response. A client pages
/// on with `after` = the last entry's seq until it reaches the head.
const PAGE_BYTES: usize = 4 * 1024 * 1024;

/// The query of `GET /v1/audit`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Entries after this seq.
    after: Option<u64>,
    /// The `next_cursor` of the page before (the same as `after`).
    #[param(pattern = "^[0-9]+$")]
    cursor: Option<String>,
    /// At most this many entries (1 to 10,000, default 1,000; outside
    /// that, 422).
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<u32>,
}

impl AuditQuery {
    /// The seq the page starts after: `after`, or the `cursor` of the page
    /// before (the same number as text); 0 when neither is given.
    fn start(&self) -> ApiResult<u64> {
        let cursor = match &self.cursor {
            None => None,
            Some(c) => Some(
                c.parse::<u64>()
                    .ok()
                    .filter(|_| c.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| {
                        ApiError::Invalid(
                            "cursor: expected a next_cursor from a previous page".into(),
                        )
                    })?,
            ),
        };
        match (self.after, cursor) {
            (Some(after), Some(cursor)) if after != cursor => Err(ApiError::Invalid(
                "after and cursor: expected one of them (cursor is the next_cursor of the page before)"
                    .into(),
            )),
            (after, cursor) => Ok(after.or(cursor).unwrap_or(0)),
        }
    }
}

/// The log after `after`, oldest first, and the head of the whole chain as
/// signed by the server. The head is read first and the entries cut at it,
/// so a page never runs past its own head.
#[utoipa::path(
    get, path = "/v1/audit", tag = "audit", params(AuditQuery),
    responses((status = 200, description = "Entries oldest first, and the signed head of the whole chain", body = AuditPage))
)]
pub async fn audit(
    State(state): State<AppState>,
    principal: Principal,
    Q(query): Q<AuditQuery>,
) -> ApiResult<Json<AuditPage>> {
    principal.require(&[Role::Admin])?;
    let after = query.start()?;
    let (head_seq, head_hash) = state.store().audit_head().await?;
    let limit = crate::extract::page_limit(query.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let mut entries = state.store().audit_after(after, limit).await?;
    entries.retain(|e| e.seq <= head_seq);
    let mut bytes = 0usize;
    let mut keep = entries.len();
    for (i, e) in entries.iter().enumerate() {
        bytes = bytes.saturating_add(e.data.to_string().len() + e.action.len() + e.actor.len());
        if bytes > PAGE_BYTES && i > 0 {
            keep = i;
            break;
        }
    }
    entries.truncate(keep);
    let next_cursor = entries
        .last()
        .filter(|e| e.seq < head_seq)
        .map(|e| e.seq.to_string());
    Ok(Json(AuditPage {
        page: Page {
            items: entries,
            next_cursor,
        },
        head: sign_head(head_seq, &head_hash, &state.keys().active()),
    }))
}
