//! Webhook endpoints and their durable outbox (SPEC section 14).
//!
//! A delivery is written in the same transaction as its event, one per
//! enabled endpoint whose filter names the event's kind, so an event that
//! commits is delivered at least once and one that rolls back never is.
//! Deliveries are claimed with a lease: one server sends a delivery at a
//! time, and a server that dies mid-send leaves it to be claimed again once
//! the lease runs out. Every attempt is kept for the delivery log.
//!
//! The body of a delivery is fixed when it is written
//! (`{"type","timestamp","data"}`, see [`delivery_body`]), so every retry
//! sends the same bytes under the same id.

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::Result;

/// What kind of receiver an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointKind {
    /// An HTTP(S) URL that gets Standard Webhooks POSTs.
    Http,
    /// The Slack integration (`lev serve --slack-config`): the server turns
    /// deliveries into Slack API calls.
    Slack,
}

impl EndpointKind {
    /// As stored.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Slack => "slack",
        }
    }

    /// From its stored form.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "http" => Some(Self::Http),
            "slack" => Some(Self::Slack),
            _ => None,
        }
    }
}

/// A webhook endpoint as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `wh_...`.
    pub id: String,
    /// What receives the deliveries.
    pub kind: EndpointKind,
    /// Where deliveries go.
    pub url: String,
    /// The event kinds it gets; empty for every event.
    pub events: Vec<String>,
    /// The signing secret as the server keeps it (sealed when the server has
    /// a key-encryption key).
    pub secret: String,
    /// Who added it.
    pub created_by: String,
    /// When.
    pub created_at: OffsetDateTime,
    /// When it was disabled (a 410 from the receiver), if it was.
    pub disabled_at: Option<OffsetDateTime>,
    /// Why.
    pub disabled_reason: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("url", &self.url)
            .field("events", &self.events)
            .field("secret", &"<secret>")
            .field("disabled_at", &self.disabled_at)
            .finish_non_exhaustive()
    }
}

/// A delivery claimed for sending.
#[derive(Clone, PartialEq, Eq)]
pub struct DueDelivery {
    /// The `webhook-id`: the same on every attempt.
    pub id: String,
    /// The endpoint.
    pub endpoint_id: String,
    /// Its kind.
    pub kind: EndpointKind,
    /// Its URL.
    pub url: String,
    /// Its secret as stored.
    pub secret: String,
    /// The event's kind.
    pub event_kind: String,
    /// The exact bytes to send.
    pub body: String,
    /// Attempts made before this one.
    pub attempts: u32,
    /// When the delivery was written (with its event).
    pub created_at: OffsetDateTime,
}

impl std::fmt::Debug for DueDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DueDelivery")
            .field("id", &self.id)
            .field("endpoint_id", &self.endpoint_id)
            .field("event_kind", &self.event_kind)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

/// What an attempt leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// The receiver took it (2xx): done.
    Delivered,
    /// Try again at this time.
    Retry(OffsetDateTime),
    /// No more attempts (past the retry horizon, or refused for good).
    GiveUp,
    /// The receiver said 410 Gone: the delivery fails and the endpoint is
    /// disabled with this reason.
    Disable(String),
}

/// One attempt to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryAttempt {
    /// The delivery.
    pub delivery_id: String,
    /// When it was made.
    pub at: OffsetDateTime,
    /// The receiver's HTTP status, when it answered.
    pub status: Option<u16>,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// How long it took.
    pub duration_ms: u64,
    /// What happens next.
    pub outcome: AttemptOutcome,
}

/// One attempt, as the delivery log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// When.
    pub at: OffsetDateTime,
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// What went wrong.
    pub error: Option<String>,
    /// How long it took.
    pub duration_ms: u64,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryState {
    /// Waiting for its next attempt.
    Pending,
    /// Taken by the receiver.
    Delivered,
    /// Given up.
    Failed,
}

impl DeliveryState {
    /// As stored and shown.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    /// From its stored form.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "delivered" => Some(Self::Delivered),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }
}

/// A delivery with its attempts, for the delivery log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    /// The `webhook-id`.
    pub id: String,
    /// The event's kind.
    pub event_kind: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// When it was written.
    pub created_at: OffsetDateTime,
    /// When the next attempt is due, while pending.
    pub next_attempt_at: Option<OffsetDateTime>,
    /// Every attempt, oldest first.
    pub attempts: Vec<AttemptRecord>,
}

/// The body every delivery carries: `{"type","timestamp","data"}` with the
/// event's data as the exact JSON text the event stored. Both backends write
/// these bytes, so a receiver sees the same body whichever server wrote it.
#[must_use]
pub fn delivery_body(kind: &str, timestamp: &str, data_json: &str) -> String {
    let kind = serde_json::Value::from(kind).to_string();
    let timestamp = serde_json::Value::from(timestamp).to_string();
    format!(r#"{{"type":{kind},"timestamp":{timestamp},"data":{data_json}}}"#)
}

/// The stored form of an endpoint's event filter: `,a,b,` (empty for every
/// event), so that a backend matches a kind with one substring test.
#[must_use]
pub fn filter_text(events: &[String]) -> String {
    if events.is_empty() {
        String::new()
    } else {
        format!(",{},", events.join(","))
    }
}

/// The events of a stored filter.
#[must_use]
pub fn filter_events(text: &str) -> Vec<String> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Where webhook endpoints and their deliveries are kept.
#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    /// Add an endpoint (audited as `webhook.created`). Only events committed
    /// after it get deliveries. An endpoint with the same id is replaced and
    /// enabled again (the Slack endpoint is re-registered at every start).
    async fn put_endpoint(&self, endpoint: Endpoint) -> Result<()>;

    /// Every endpoint, oldest first.
    async fn endpoints(&self) -> Result<Vec<Endpoint>>;

    /// Remove an endpoint and its deliveries (audited as `webhook.deleted`
    /// by `actor`); false when there was none.
    async fn delete_endpoint(&self, id: &str, actor: &str) -> Result<bool>;

    /// Disable an endpoint (its deliveries wait) with a reason.
    async fn disable_endpoint(&self, id: &str, reason: &str) -> Result<bool>;

    /// Claim up to `limit` pending deliveries of enabled endpoints that are
    /// due at `now` and not leased, leasing them until `lease_until`: until
    /// then no other claim returns them.
    async fn claim_deliveries(
        &self,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<DueDelivery>>;

    /// Record an attempt and what follows from it; the lease ends.
    async fn record_attempt(&self, attempt: DeliveryAttempt) -> Result<()>;

    /// An endpoint's deliveries, newest first, at most `limit`.
    async fn deliveries(&self, endpoint_id: &str, limit: u32) -> Result<Vec<DeliveryRecord>>;

    /// When the next pending delivery of an enabled endpoint is due.
    async fn next_delivery_at(&self) -> Result<Option<OffsetDateTime>>;

    /// Delete finished deliveries written before `before`; returns how many.
    async fn prune_deliveries(&self, before: OffsetDateTime) -> Result<u64>;

    /// Remember what an endpoint made of an interaction (Slack: the channel
    /// and message `ts` of its post), so a later event can update it.
    async fn set_message_ref(&self, endpoint_id: &str, interaction_id: &str, r: &str)
    -> Result<()>;

    /// What [`Self::set_message_ref`] stored.
    async fn message_ref(&self, endpoint_id: &str, interaction_id: &str) -> Result<Option<String>>;

    /// Record that reminder number `n` of a pending interaction is due, once
    /// across every server: when it was not recorded before and the
    /// interaction is still pending, append the `interaction.reminder` event
    /// with `data` (in the same transaction, so it reaches the outbox) and
    /// return true.
    async fn remind(&self, interaction_id: &str, n: u32, data: serde_json::Value) -> Result<bool>;

    /// Record that a pending interaction's quorum escalated (SPEC section
    /// 13), once across every server: when not recorded before and still
    /// pending, append the `interaction.escalated` event with `data` and
    /// its audit entry (actor `system`), and return true.
    async fn escalate_once(&self, interaction_id: &str, data: serde_json::Value) -> Result<bool>;
}
