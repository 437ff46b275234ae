//! The shutdown signal every long-running task and waiter selects on.

use tokio::sync::watch;

/// Resolves once shutdown has begun (or the state is gone).
pub async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await.map(|_| ());
}
