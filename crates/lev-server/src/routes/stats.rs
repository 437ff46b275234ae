//! `GET /v1/stats?since=7d` (or `from=`/`to=`, RFC 3339; admin and
//! approvers): how human review performed over the window, per kind and
//! policy rule, from the store (`lev stats`, the dashboard's Stats page).

use axum::Json;
use axum::extract::State;
use lev_protocol::api::Role;
use lev_protocol::stats::Stats;
use serde::Deserialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::Q;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The longest window one report covers.
const MAX_WINDOW: time::Duration = time::Duration::days(366);

/// The query of `GET /v1/stats`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatsQuery {
    /// The window ends now and starts this long before (e.g. `24h`, `7d`;
    /// default `7d`). Not with `from`.
    since: Option<String>,
    /// The window's start, RFC 3339.
    from: Option<String>,
    /// The window's end (exclusive), RFC 3339; default now.
    to: Option<String>,
}

fn instant(field: &str, text: &str) -> ApiResult<OffsetDateTime> {
    OffsetDateTime::parse(text, &Rfc3339).map_err(|_| {
        ApiError::Invalid(format!(
            "{field}: expected an RFC 3339 time such as 2026-01-31T09:00:00Z, found {text:?}"
        ))
    })
}

impl StatsQuery {
    /// `[from, to)`, checked.
    fn window(&self, now: OffsetDateTime) -> ApiResult<(OffsetDateTime, OffsetDateTime)> {
        let to = match &self.to {
            Some(t) => instant("to", t)?,
            None => now,
        };
        let from = match (&self.since, &self.from) {
            (Some(_), Some(_)) => {
                return Err(ApiError::Invalid(
                    "since and from: expected one of them".into(),
                ));
            }
            (_, Some(f)) => instant("from", f)?,
            (since, None) => {
                let text = since.as_deref().unwrap_or("7d");
                let d = crate::config::parse_duration(text)
                    .map_err(|e| ApiError::Invalid(format!("since: {e}")))?;
                let d = time::Duration::try_from(d)
                    .ok()
                    .filter(|d| *d <= MAX_WINDOW)
                    .ok_or_else(|| {
                        ApiError::Invalid(format!("since: expected at most 366d, found {text:?}"))
                    })?;
                to - d
            }
        };
        if from >= to {
            return Err(ApiError::Invalid("from: expected a time before to".into()));
        }
        if to - from > MAX_WINDOW {
            return Err(ApiError::Invalid(
                "from and to: expected a window of at most 366 days".into(),
            ));
        }
        Ok((from, to))
    }
}

/// The report over the interactions created in the window.
#[utoipa::path(
    get, path = "/v1/stats", tag = "interactions", params(StatsQuery),
    responses((status = 200, description = "Counts, rates, decision times and answerers per kind and rule", body = Stats))
)]
pub async fn stats(
    State(state): State<AppState>,
    principal: Principal,
    Q(query): Q<StatsQuery>,
) -> ApiResult<Json<Stats>> {
    principal.require(&[Role::Approver])?;
    let (from, to) = query.window(OffsetDateTime::now_utc())?;
    let stats = state
        .timed(
            "interaction_stats",
            state.store().interaction_stats(from, to),
        )
        .await?;
    Ok(Json(stats))
}
