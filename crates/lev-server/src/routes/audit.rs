//! `GET /v1/audit?after=SEQ&limit=N` (admin): entries and the signed head.

use axum::Json;
use axum::extract::State;
use lev_approval::audit::sign_head;
use lev_protocol::api::{AuditPage, Role};
use serde::Deserialize;

use super::Q;
use crate::auth::Principal;
use crate::error::ApiResult;
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
#[derive(Debug, Deserialize)]
pub struct AuditQuery {
    after: Option<u64>,
    limit: Option<u32>,
}

/// The log after `after`, oldest first, and the head of the whole chain as
/// signed by the server. The head is read first and the entries cut at it,
/// so a page never runs past its own head.
pub async fn audit(
    State(state): State<AppState>,
    principal: Principal,
    Q(query): Q<AuditQuery>,
) -> ApiResult<Json<AuditPage>> {
    principal.require(&[Role::Admin])?;
    let (head_seq, head_hash) = state.store().audit_head().await?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let mut entries = state
        .store()
        .audit_after(query.after.unwrap_or(0), limit)
        .await?;
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
    Ok(Json(AuditPage {
        entries,
        head: sign_head(head_seq, &head_hash, &state.keys().active()),
    }))
}
