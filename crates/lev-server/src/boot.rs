//! Start-up: the state and every task of the floors above it (the webhook
//! dispatcher, reminders, the Slack endpoint, triage), so that the state
//! itself names none of them.

use std::sync::Arc;

use lev_store::Store;

use crate::config::Settings;
use crate::keys::KeyRing;
use crate::state::AppState;

/// The state, with every background task of the server started on the
/// current tokio runtime.
///
/// # Errors
/// When the Slack endpoint cannot be registered in the store.
pub async fn start(
    store: Arc<dyn Store>,
    keys: KeyRing,
    settings: Settings,
) -> Result<AppState, String> {
    let triage_events = store.subscribe();
    let state = AppState::start(store, keys, settings);
    state.spawn(crate::webhooks::dispatch::run(state.clone()));
    state.spawn(crate::reminders::run(state.clone()));
    crate::slack::deliver::register(&state)
        .await
        .map_err(|e| format!("the Slack endpoint: {e}"))?;
    // Interactions routed to an operator first are triaged as their
    // creation commits, whoever created them.
    state.spawn(crate::operators::triage::follow(
        state.clone(),
        triage_events,
    ));
    Ok(state)
}
