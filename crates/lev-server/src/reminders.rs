//! Reminders (SPEC section 14): an interaction still pending after
//! `remind_after_s` (its ask rule's, else `lev serve --remind-after`) is
//! notified again, once per interval, to the same channels: the store
//! records reminder N of an interaction once across every server and
//! commits an `interaction.reminder` event with it, which the outbox turns
//! into webhook deliveries and a reply in the Slack message's thread.
//!
//! The same pass escalates quorums (SPEC section 13): a tool approval still
//! pending `escalate_after_s` after it was made lets its `escalate_to`
//! vote too (that follows from the time alone) and notifies them: the store
//! records the escalation once across servers with an
//! `interaction.escalated` event (`data` is the interaction with
//! `escalation: {to, after_s, at}`) and its audit entry.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use lev_protocol::InteractionStatus;
use lev_store::ListFilter;
use time::OffsetDateTime;

use crate::log;
use crate::state::AppState;

/// Pending interactions read per page.
const PAGE: u32 = 500;

/// Run until shutdown; returns at once when nothing asks for reminders.
pub async fn run(state: AppState) {
    let default = state.settings().webhooks.remind_after;
    let policy = &state.settings().policy;
    let shortest = [
        default,
        policy.shortest_reminder().map(Duration::from_secs),
        policy.shortest_escalation().map(Duration::from_secs),
    ]
    .into_iter()
    .flatten()
    .min();
    let Some(shortest) = shortest else {
        return;
    };
    let tick = (shortest / 4).clamp(Duration::from_millis(200), Duration::from_secs(30));
    let mut shutdown = state.shutdown_signal();
    // Reminder numbers already recorded by this server (the store keeps
    // them once across servers; this only spares it the asking).
    let mut sent: HashMap<String, u32> = HashMap::new();
    // Escalations already recorded (by any server, as far as this one knows).
    let mut escalated: HashSet<String> = HashSet::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(tick) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        if let Err(e) = pass(&state, default, &mut sent, &mut escalated).await {
            log::info(&format!("reminders: {e}"));
        }
    }
}

async fn pass(
    state: &AppState,
    default: Option<Duration>,
    sent: &mut HashMap<String, u32>,
    escalated: &mut HashSet<String>,
) -> Result<(), lev_store::StoreError> {
    let store = state.store();
    let mut before = None;
    let mut pending = HashSet::new();
    loop {
        let page = store
            .list_interactions(ListFilter {
                status: Some(InteractionStatus::Pending),
                session_id: None,
                limit: PAGE,
                before,
            })
            .await?;
        let now = OffsetDateTime::now_utc();
        for view in &page.items {
            let id = view.request.id().to_owned();
            pending.insert(id.clone());
            if let Some(at) = view.request.escalates_at()
                && now >= at
                && !escalated.contains(&id)
            {
                let mut data = lev_store::view_json(view)?;
                let q = view.request.request.quorum.clone().unwrap_or_default();
                if let Some(obj) = data.as_object_mut() {
                    obj.insert(
                        "escalation".into(),
                        serde_json::json!({
                            "to": q.escalate_to,
                            "after_s": q.escalate_after_s,
                            "at": at.format(&time::format_description::well_known::Rfc3339)
                                .unwrap_or_default(),
                        }),
                    );
                }
                if store.escalate_once(&id, data).await? {
                    state.metrics().escalated();
                }
                escalated.insert(id.clone());
            }
            let interval = view
                .request
                .request
                .gate
                .as_ref()
                .and_then(|g| g.remind_after_s)
                .map(Duration::from_secs)
                .or(default);
            let Some(interval) = interval.filter(|i| !i.is_zero()) else {
                continue;
            };
            let waited = Duration::try_from(now - view.request.created_at).unwrap_or_default();
            let n =
                u32::try_from(waited.as_millis() / interval.as_millis().max(1)).unwrap_or(u32::MAX);
            if n == 0 || sent.get(&id).is_some_and(|&m| m >= n) {
                continue;
            }
            let mut data = lev_store::view_json(view)?;
            if let Some(obj) = data.as_object_mut() {
                obj.insert(
                    "reminder".into(),
                    serde_json::json!({ "n": n, "pending_s": waited.as_secs() }),
                );
            }
            store.remind(&id, n, data).await?;
            sent.insert(id, n);
        }
        match page.next_before {
            Some(b) => before = Some(b),
            None => break,
        }
    }
    sent.retain(|id, _| pending.contains(id));
    escalated.retain(|id| pending.contains(id));
    Ok(())
}
