//! The record layer every backend shares: what each change writes beside
//! itself (its event and its audit entry), built by pure functions here, and
//! how a row's columns decode into the store's types. A backend keeps only
//! its SQL: it runs the statement, hands the rows' values to a decoder
//! here, and writes the [`Change`] a builder here made.
//!
//! Event kinds ([`EventKind`]) and audit actions ([`AuditAction`]) are
//! typed, each with its wire string in one place. What goes into the
//! hash-chained audit log is built as a `Result`: a value that cannot be
//! written is an error, never `null` (the chain's hashes would keep it for
//! ever).

use std::collections::BTreeMap;

use lev_protocol::api::{AuditEntry, GateResponse, Grant, InteractionView, PersonJwk, Role, Task};
use lev_protocol::{
    ApprovalScope, Envelope, Interaction, InteractionRequest, InteractionStatus, OnTimeout,
    StoredResponse,
};
use serde_json::{Map, Value, json};

use crate::codec::{corrupt, parse_time};
use crate::gate::{GateCallRecord, NewVote};
use crate::people::PersonKeyRecord;
use crate::webhooks::Endpoint;
use crate::{AuditRecord, Result, StoredEvent, TokenRecord, TransitionOutcome};

/// An event the store writes for a change of its own (the server's free
/// events go through [`crate::TaskStore::append_event`] with their kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `interaction.created`
    InteractionCreated,
    /// `interaction.answered`
    InteractionAnswered,
    /// `interaction.expired`
    InteractionExpired,
    /// `interaction.cancelled`
    InteractionCancelled,
    /// `interaction.voted`
    InteractionVoted,
    /// `interaction.escalated`
    InteractionEscalated,
    /// `interaction.reminder`
    InteractionReminder,
    /// `task.updated`
    TaskUpdated,
}

impl EventKind {
    /// The kind as `GET /v1/events`, webhooks and the events table spell it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InteractionCreated => "interaction.created",
            Self::InteractionAnswered => "interaction.answered",
            Self::InteractionExpired => "interaction.expired",
            Self::InteractionCancelled => "interaction.cancelled",
            Self::InteractionVoted => "interaction.voted",
            Self::InteractionEscalated => "interaction.escalated",
            Self::InteractionReminder => "interaction.reminder",
            Self::TaskUpdated => "task.updated",
        }
    }

    /// The event of an interaction moving into `status`.
    #[must_use]
    pub const fn of_status(status: InteractionStatus) -> Self {
        match status {
            InteractionStatus::Pending => Self::InteractionCreated,
            InteractionStatus::Answered => Self::InteractionAnswered,
            InteractionStatus::Expired => Self::InteractionExpired,
            InteractionStatus::Cancelled => Self::InteractionCancelled,
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An audit action the store writes for a change of its own (the server
/// names the actions of the entries it hands in, [`AuditRecord::action`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditAction {
    /// `interaction.created`
    InteractionCreated,
    /// `interaction.answered`
    InteractionAnswered,
    /// `interaction.expired`
    InteractionExpired,
    /// `interaction.cancelled`
    InteractionCancelled,
    /// `interaction.voted`
    InteractionVoted,
    /// `interaction.escalated`
    InteractionEscalated,
    /// `token.created`
    TokenCreated,
    /// `token.revoked`
    TokenRevoked,
    /// `grant.created`
    GrantCreated,
    /// `grant.renewed`
    GrantRenewed,
    /// `grant.revoked`
    GrantRevoked,
    /// `person_key.added`
    PersonKeyAdded,
    /// `person_key.revoked`
    PersonKeyRevoked,
    /// `key.rotated`
    KeyRotated,
    /// `key.removed`
    KeyRemoved,
    /// `task.created`
    TaskCreated,
    /// `task.started`
    TaskStarted,
    /// `task.result`
    TaskResult,
    /// `task.finished`
    TaskFinished,
    /// `webhook.created`
    WebhookCreated,
    /// `webhook.deleted`
    WebhookDeleted,
    /// `webhook.disabled`
    WebhookDisabled,
}

impl AuditAction {
    /// The action as the audit log (and its hashes) spell it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InteractionCreated => "interaction.created",
            Self::InteractionAnswered => "interaction.answered",
            Self::InteractionExpired => "interaction.expired",
            Self::InteractionCancelled => "interaction.cancelled",
            Self::InteractionVoted => "interaction.voted",
            Self::InteractionEscalated => "interaction.escalated",
            Self::TokenCreated => "token.created",
            Self::TokenRevoked => "token.revoked",
            Self::GrantCreated => "grant.created",
            Self::GrantRenewed => "grant.renewed",
            Self::GrantRevoked => "grant.revoked",
            Self::PersonKeyAdded => "person_key.added",
            Self::PersonKeyRevoked => "person_key.revoked",
            Self::KeyRotated => "key.rotated",
            Self::KeyRemoved => "key.removed",
            Self::TaskCreated => "task.created",
            Self::TaskStarted => "task.started",
            Self::TaskResult => "task.result",
            Self::TaskFinished => "task.finished",
            Self::WebhookCreated => "webhook.created",
            Self::WebhookDeleted => "webhook.deleted",
            Self::WebhookDisabled => "webhook.disabled",
        }
    }
}

impl std::fmt::Display for AuditAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AuditRecord {
    /// An entry of one of the store's own actions.
    #[must_use]
    pub fn new(action: AuditAction, actor: impl Into<String>, data: Value) -> Self {
        Self {
            action: action.as_str().to_owned(),
            actor: actor.into(),
            data,
        }
    }
}

/// An event to write beside a change (its seq comes with the commit).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The object concerned, as the event's `data`.
    pub data: Value,
}

/// What a change writes beside itself, in its transaction: an event, an
/// audit entry, or both.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The change's event.
    pub event: Option<Event>,
    /// The change's audit entry.
    pub audit: Option<AuditRecord>,
}

impl Change {
    fn both(kind: EventKind, data: Value, audit: AuditRecord) -> Self {
        Self {
            event: Some(Event { kind, data }),
            audit: Some(audit),
        }
    }

    fn event(kind: EventKind, data: Value) -> Self {
        Self {
            event: Some(Event { kind, data }),
            audit: None,
        }
    }

    fn audit(audit: AuditRecord) -> Self {
        Self {
            event: None,
            audit: Some(audit),
        }
    }
}

/// `value` as JSON, or [`crate::StoreError::Corrupt`] naming `what`.
macro_rules! to_json {
    ($what:expr, $value:expr) => {
        serde_json::to_value($value).map_err(|e| corrupt($what, e))
    };
}

// ---------------------------------------------------------------------------
// Interactions
// ---------------------------------------------------------------------------

/// An interaction as the JSON of its event.
///
/// # Errors
/// [`crate::StoreError::Corrupt`] should it not serialise.
pub fn view_json(view: &InteractionView) -> Result<Value> {
    to_json!(view.request.id(), view)
}

/// What the audit log says of an interaction, beside the action: the same
/// fields whichever backend writes the entry.
#[must_use]
pub fn audit_summary(view: &InteractionView) -> Map<String, Value> {
    let req = &view.request.request;
    let mut m = Map::new();
    m.insert("id".into(), Value::from(view.request.id()));
    m.insert("session_id".into(), Value::from(req.session_id.as_str()));
    m.insert("kind".into(), Value::from(req.kind.type_name()));
    if let Some(caller) = &req.caller {
        m.insert("caller".into(), Value::from(caller.as_str()));
    }
    if let lev_protocol::InteractionKind::ToolApproval {
        tool_name,
        args_json,
        ..
    } = &req.kind
    {
        m.insert("tool_name".into(), Value::from(tool_name.as_str()));
        m.insert("args_json".into(), Value::from(args_json.as_str()));
    }
    m
}

/// A new interaction: `interaction.created`, audited as its creator's.
///
/// # Errors
/// A view that does not serialise.
pub fn interaction_created(view: &InteractionView, actor: &str) -> Result<Change> {
    Ok(Change::both(
        EventKind::InteractionCreated,
        view_json(view)?,
        AuditRecord::new(
            AuditAction::InteractionCreated,
            actor,
            Value::Object(audit_summary(view)),
        ),
    ))
}

/// An answer that won (`view` after it): `interaction.answered`, audited
/// with who answered, the response, and the server's `extra` details.
///
/// # Errors
/// A view or response that does not serialise.
pub fn interaction_answered(
    view: &InteractionView,
    answered_by: &str,
    response: &StoredResponse,
    extra: BTreeMap<String, Value>,
) -> Result<Change> {
    let mut data = audit_summary(view);
    data.insert("answered_by".into(), json!(answered_by));
    data.insert("response".into(), to_json!(view.request.id(), response)?);
    data.extend(extra);
    Ok(Change::both(
        EventKind::InteractionAnswered,
        view_json(view)?,
        AuditRecord::new(
            AuditAction::InteractionAnswered,
            answered_by,
            Value::Object(data),
        ),
    ))
}

/// A cancel that won: `interaction.cancelled`, by `actor`.
///
/// # Errors
/// A view that does not serialise.
pub fn interaction_cancelled(view: &InteractionView, actor: &str) -> Result<Change> {
    Ok(Change::both(
        EventKind::InteractionCancelled,
        view_json(view)?,
        AuditRecord::new(
            AuditAction::InteractionCancelled,
            actor,
            Value::Object(audit_summary(view)),
        ),
    ))
}

/// A page of at most `limit` interactions from `rows` (decoded in the
/// listing's order, asked for with one more than `limit`): where the next
/// page starts when that one more came. Rows past the page are not decoded.
///
/// # Errors
/// The first row that fails.
pub fn page_of(
    limit: i64,
    rows: impl IntoIterator<Item = Result<(i64, InteractionView)>>,
) -> Result<crate::ListPage> {
    let mut items = Vec::new();
    let mut last_seq = None;
    for row in rows {
        if items.len() as i64 == limit {
            return Ok(crate::ListPage {
                items,
                next_before: last_seq,
            });
        }
        let (seq, view) = row?;
        last_seq = Some(seq);
        items.push(view);
    }
    Ok(crate::ListPage {
        items,
        next_before: None,
    })
}

/// What `on_timeout` makes of interaction `id` at its expiry: the status it
/// moves to, and the answer given for it (a default choice).
#[must_use]
pub fn timeout_outcome(
    id: &str,
    request: &InteractionRequest,
) -> (InteractionStatus, Option<StoredResponse>) {
    match request.effective_on_timeout() {
        OnTimeout::Deny => (InteractionStatus::Expired, None),
        OnTimeout::Cancel => (InteractionStatus::Cancelled, None),
        OnTimeout::Choice(n) => (
            InteractionStatus::Answered,
            Some(StoredResponse::choice(id.to_owned(), n)),
        ),
    }
}

/// An expiry applied (`view` after it, now `status`): its status's event,
/// audited as `timeout` with the status.
///
/// # Errors
/// A view that does not serialise.
pub fn interaction_timed_out(view: &InteractionView, status: InteractionStatus) -> Result<Change> {
    let mut data = audit_summary(view);
    data.insert("status".into(), json!(status.as_str()));
    let action = match status {
        InteractionStatus::Answered => AuditAction::InteractionAnswered,
        InteractionStatus::Cancelled => AuditAction::InteractionCancelled,
        InteractionStatus::Expired => AuditAction::InteractionExpired,
        InteractionStatus::Pending => AuditAction::InteractionCreated,
    };
    Ok(Change::both(
        EventKind::of_status(status),
        view_json(view)?,
        AuditRecord::new(action, "timeout", Value::Object(data)),
    ))
}

/// Why a compare-and-set `pending` -> final found `view` not pending: the
/// winner, or that it is gone; `Ok(view)` while it is pending.
///
/// # Errors
/// The outcome to answer with, when it is not pending (or not there).
pub fn still_pending(
    view: Option<InteractionView>,
) -> std::result::Result<InteractionView, TransitionOutcome> {
    match view {
        None => Err(TransitionOutcome::NotFound),
        Some(v) => match v.request.status {
            InteractionStatus::Pending => Ok(v),
            InteractionStatus::Answered => Err(TransitionOutcome::AlreadyAnswered(Box::new(v))),
            InteractionStatus::Expired | InteractionStatus::Cancelled => {
                Err(TransitionOutcome::Gone(Box::new(v)))
            }
        },
    }
}

/// `request` with the escalation note (`reason`, `by`, `at`) in its
/// metadata: under `escalation`, beside what was there (or with a
/// non-object metadata kept under `metadata`).
#[must_use]
pub fn with_escalation_note(
    mut request: InteractionRequest,
    reason: &str,
    actor: &str,
    at: &str,
) -> InteractionRequest {
    let note = json!({ "reason": reason, "by": actor, "at": at });
    request.metadata = Some(match request.metadata.take() {
        None => json!({ "escalation": note }),
        Some(Value::Object(mut m)) => {
            m.insert("escalation".into(), note);
            Value::Object(m)
        }
        Some(other) => json!({ "escalation": note, "metadata": other }),
    });
    request
}

/// An escalation by hand (`view` after its note): `interaction.escalated`,
/// audited with the reason.
///
/// # Errors
/// A view that does not serialise.
pub fn interaction_escalated(view: &InteractionView, reason: &str, actor: &str) -> Result<Change> {
    let mut data = audit_summary(view);
    data.insert("reason".into(), json!(reason));
    Ok(Change::both(
        EventKind::InteractionEscalated,
        view_json(view)?,
        AuditRecord::new(
            AuditAction::InteractionEscalated,
            actor,
            Value::Object(data),
        ),
    ))
}

/// A quorum's escalation, recorded once: `interaction.escalated` with
/// `data` (the interaction with its `escalation`), audited as `system`.
#[must_use]
pub fn escalated_once(data: Value) -> Change {
    let audit = AuditRecord::new(
        AuditAction::InteractionEscalated,
        "system",
        escalation_audit(&data),
    );
    Change::both(EventKind::InteractionEscalated, data, audit)
}

/// The audit entry of a quorum's escalation, from its event's `data` (the
/// interaction with its `escalation`).
#[must_use]
pub fn escalation_audit(data: &Value) -> Value {
    let mut m = Map::new();
    let request = data.get("request");
    for key in ["id", "session_id", "caller"] {
        if let Some(v) = request.and_then(|r| r.get(key)) {
            m.insert(key.into(), v.clone());
        }
    }
    if let Some(e) = data.get("escalation") {
        m.insert("escalation".into(), e.clone());
    }
    Value::Object(m)
}

/// Reminder of a pending interaction: `interaction.reminder` with `data`,
/// not audited.
#[must_use]
pub fn reminded(data: Value) -> Change {
    Change::event(EventKind::InteractionReminder, data)
}

// ---------------------------------------------------------------------------
// Votes
// ---------------------------------------------------------------------------

/// What a vote finds before it is recorded on `view` (read under the
/// interaction's lock): `None` when it may be recorded, else why not.
#[must_use]
pub fn vote_refused(
    view: &InteractionView,
    new: &NewVote,
    authority_holds: bool,
) -> Option<crate::VoteOutcome> {
    use crate::VoteOutcome;
    match still_pending(Some(view.clone())) {
        Err(closed) => Some(VoteOutcome::Closed(closed)),
        Ok(_) if view.request.votes.iter().any(|v| v.voter == new.vote.voter) => {
            Some(VoteOutcome::AlreadyVoted(Box::new(view.clone())))
        }
        Ok(_) if view.request.votes != new.seen_votes || !authority_holds => {
            Some(VoteOutcome::Stale(Box::new(view.clone())))
        }
        Ok(_) => None,
    }
}

/// Whether a token of `role` (as stored) may vote.
#[must_use]
pub fn role_votes(role: &str) -> bool {
    matches!(role, "approver" | "admin" | "operator")
}

/// A vote recorded (`view` after it): `interaction.voted` and
/// [`vote_audit`].
///
/// # Errors
/// A view or vote that does not serialise.
pub fn interaction_voted(view: &InteractionView, vote: &NewVote) -> Result<Change> {
    Ok(Change::both(
        EventKind::InteractionVoted,
        view_json(view)?,
        vote_audit(view, vote)?,
    ))
}

/// Votes voided by a revocation (`view` after it): `interaction.voted`,
/// audited in the revocation's own entry.
///
/// # Errors
/// A view that does not serialise.
pub fn votes_voided(view: &InteractionView) -> Result<Change> {
    Ok(Change::event(EventKind::InteractionVoted, view_json(view)?))
}

/// The `interaction.voted` audit entry of `vote` on `view` (after the
/// vote): the same fields whichever backend writes it. Each vote is
/// audited on its own, its signed envelope's payload included.
///
/// # Errors
/// A scope that does not serialise.
pub fn vote_audit(view: &InteractionView, vote: &NewVote) -> Result<AuditRecord> {
    let v = &vote.vote;
    let mut data = audit_summary(view);
    data.insert("voter".into(), Value::from(v.voter.as_str()));
    data.insert("approved".into(), Value::from(v.approved));
    data.insert("signed".into(), Value::from(v.signed));
    data.insert(
        "scope".into(),
        to_json!(view.request.id(), &v.response.scope)?,
    );
    if let Some(envelope) = &v.envelope {
        data.insert(
            "vote_payload".into(),
            Value::from(envelope.payload.as_str()),
        );
        data.insert(
            "vote_keyids".into(),
            Value::from(
                envelope
                    .signatures
                    .iter()
                    .map(|s| Value::from(s.keyid.as_str()))
                    .collect::<Vec<_>>(),
            ),
        );
    }
    data.insert("votes".into(), Value::from(view.request.votes.len()));
    data.insert(
        "approvals_needed".into(),
        Value::from(view.request.approvals_needed()),
    );
    data.insert("decides".into(), Value::from(vote.decision.is_some()));
    data.extend(vote.audit.clone());
    Ok(AuditRecord::new(
        AuditAction::InteractionVoted,
        v.voter.as_str(),
        Value::Object(data),
    ))
}

// ---------------------------------------------------------------------------
// Tokens, grants, people's keys, webhooks
// ---------------------------------------------------------------------------

/// A token stored.
#[must_use]
pub fn token_created(token: &lev_protocol::api::TokenInfo, actor: &str) -> Change {
    Change::audit(AuditRecord::new(
        AuditAction::TokenCreated,
        actor,
        json!({"name": token.name, "role": token.role.as_str(), "caller": token.caller,
               "sessions": token.sessions}),
    ))
}

/// A token revoked, with the kids revoked and the votes voided with it.
#[must_use]
pub fn token_revoked(name: &str, actor: &str, keys: &[String], voided: &[Value]) -> Change {
    Change::audit(AuditRecord::new(
        AuditAction::TokenRevoked,
        actor,
        json!({"name": name, "person_keys_revoked": keys, "votes_voided": voided}),
    ))
}

/// A grant stored (`grant.created`), or a twin in force renewed
/// (`grant.renewed`, `grant` then carrying the twin's id), or revoked.
///
/// # Errors
/// A grant that does not serialise.
pub fn grant_changed(action: AuditAction, grant: &Grant, actor: &str) -> Result<Change> {
    Ok(Change::audit(AuditRecord::new(
        action,
        actor,
        to_json!(&grant.id, grant)?,
    )))
}

/// A person's key added (its kid written into `jwk`).
///
/// # Errors
/// A key that does not serialise.
pub fn person_key_added(
    jwk: &PersonJwk,
    person: &str,
    fingerprint: &str,
    actor: &str,
) -> Result<Change> {
    let jwk_json = to_json!(&jwk.kid, jwk)?;
    Ok(Change::audit(AuditRecord::new(
        AuditAction::PersonKeyAdded,
        actor,
        json!({"kid": jwk.kid, "person": person, "fingerprint": fingerprint, "jwk": jwk_json}),
    )))
}

/// A person's key revoked, with the votes voided with it.
#[must_use]
pub fn person_key_revoked(kid: &str, person: &str, actor: &str, voided: &[Value]) -> Change {
    Change::audit(AuditRecord::new(
        AuditAction::PersonKeyRevoked,
        actor,
        json!({"kid": kid, "person": person, "votes_voided": voided}),
    ))
}

/// A signing key made the active one (`previous`: the one it replaced).
#[must_use]
pub fn key_rotated(kid: &str, previous: Option<&str>, actor: &str) -> Change {
    Change::audit(AuditRecord::new(
        AuditAction::KeyRotated,
        actor,
        json!({"kid": kid, "previous": previous}),
    ))
}

/// An inactive signing key removed: it no longer verifies.
#[must_use]
pub fn key_removed(kid: &str, actor: &str) -> Change {
    Change::audit(AuditRecord::new(
        AuditAction::KeyRemoved,
        actor,
        json!({"kid": kid}),
    ))
}

/// A webhook endpoint added (its secret never audited).
#[must_use]
pub fn webhook_created(endpoint: &Endpoint) -> Change {
    Change::audit(AuditRecord::new(
        AuditAction::WebhookCreated,
        endpoint.created_by.as_str(),
        json!({
            "id": endpoint.id,
            "kind": endpoint.kind.as_str(),
            "url": endpoint.url,
            "events": endpoint.events,
        }),
    ))
}

/// A webhook endpoint deleted.
#[must_use]
pub fn webhook_deleted(id: &str, actor: &str) -> Change {
    Change::audit(AuditRecord::new(
        AuditAction::WebhookDeleted,
        actor,
        json!({ "id": id }),
    ))
}

/// A webhook endpoint disabled, and why.
#[must_use]
pub fn webhook_disabled(id: &str, reason: &str, actor: &str) -> Change {
    Change::audit(AuditRecord::new(
        AuditAction::WebhookDisabled,
        actor,
        json!({ "id": id, "reason": reason }),
    ))
}

// ---------------------------------------------------------------------------
// Tasks
// ---------------------------------------------------------------------------

/// A task's status as stored.
#[must_use]
pub const fn task_status_str(s: lev_protocol::api::TaskStatus) -> &'static str {
    use lev_protocol::api::TaskStatus;
    match s {
        TaskStatus::Pending => "pending",
        TaskStatus::Running => "running",
        TaskStatus::Succeeded => "succeeded",
        TaskStatus::Failed => "failed",
    }
}

/// A task's status read back.
#[must_use]
pub fn parse_task_status(s: &str) -> Option<lev_protocol::api::TaskStatus> {
    use lev_protocol::api::TaskStatus;
    Some(match s {
        "pending" => TaskStatus::Pending,
        "running" => TaskStatus::Running,
        "succeeded" => TaskStatus::Succeeded,
        "failed" => TaskStatus::Failed,
        _ => return None,
    })
}

/// A task changed (`task` as it now is): `task.updated`, audited as
/// `action` with `data` and the task's id, session and status.
///
/// # Errors
/// A task that does not serialise.
pub fn task_changed(
    task: &Task,
    action: AuditAction,
    actor: String,
    mut data: Value,
) -> Result<Change> {
    let event = to_json!(&task.id, task)?;
    if let Value::Object(m) = &mut data {
        m.insert("task_id".into(), json!(task.id));
        m.insert("session_id".into(), json!(task.session_id));
        m.insert("status".into(), json!(task_status_str(task.status)));
    }
    Ok(Change::both(
        EventKind::TaskUpdated,
        event,
        AuditRecord::new(action, actor, data),
    ))
}

// ---------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------

/// One row's values, by column index, as a backend's driver gives them:
/// what the decoders below read. A value of the wrong type or a missing
/// column is the driver's error.
pub trait Columns {
    /// A text column.
    ///
    /// # Errors
    /// The driver's, for a column that is not text or is null.
    fn text(&self, i: usize) -> Result<String>;
    /// A nullable text column.
    ///
    /// # Errors
    /// The driver's, for a column that is not text.
    fn text_opt(&self, i: usize) -> Result<Option<String>>;
    /// An integer column.
    ///
    /// # Errors
    /// The driver's, for a column that is not an integer or is null.
    fn int(&self, i: usize) -> Result<i64>;
}

/// JSON text read back, or [`crate::StoreError::Corrupt`] naming `what`.
macro_rules! parse_json {
    ($what:expr, $text:expr) => {
        serde_json::from_str($text).map_err(|e| corrupt($what, e))
    };
}

/// Nullable JSON text read back.
macro_rules! parse_json_opt {
    ($what:expr, $text:expr) => {
        $text
            .map(|s| serde_json::from_str(&s))
            .transpose()
            .map_err(|e| corrupt($what, e))
    };
}

fn parse_time_opt(what: &str, text: Option<String>) -> Result<Option<time::OffsetDateTime>> {
    text.map(|s| parse_time(what, &s)).transpose()
}

/// The columns [`decode_view`] reads, in its order.
pub const VIEW_COLUMNS: &str = "seq, id, request_json, status, created_at, expires_at, answered_at, answered_by, response_json, approval_json, votes_json";

/// A row of [`VIEW_COLUMNS`]: its position (`seq`) and the interaction.
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for a value that does not decode.
pub fn decode_view(row: &impl Columns) -> Result<(i64, InteractionView)> {
    let seq = row.int(0)?;
    let id = row.text(1)?;
    let what = format!("interaction {id}");
    let request: InteractionRequest = parse_json!(&what, &row.text(2)?)?;
    let status =
        InteractionStatus::parse(&row.text(3)?).ok_or_else(|| corrupt(&what, "unknown status"))?;
    let created_at = parse_time(&what, &row.text(4)?)?;
    let expires_at = parse_time_opt(&what, row.text_opt(5)?)?;
    let answered_at = parse_time_opt(&what, row.text_opt(6)?)?;
    let answered_by = row.text_opt(7)?;
    let response: Option<StoredResponse> = parse_json_opt!(&what, row.text_opt(8)?)?;
    let approval: Option<Envelope> = parse_json_opt!(&what, row.text_opt(9)?)?;
    let votes: Vec<lev_protocol::Vote> =
        parse_json_opt!(&what, row.text_opt(10)?)?.unwrap_or_default();
    Ok((
        seq,
        InteractionView {
            request: Interaction {
                request,
                status,
                created_at,
                expires_at,
                answered_at,
                answered_by,
                votes,
            },
            response,
            approval,
        },
    ))
}

/// A task row: `seq, id, session_id, status, spawn_json,
/// last_result_json, OUTPUT_TAIL, ERROR, created_at, updated_at, caller`,
/// where the output tail and the error (free text) are read with
/// `free_text`, as the backend keeps them.
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for a value that does not decode.
pub fn decode_task(
    row: &impl Columns,
    free_text: impl Fn(&str, Option<String>) -> Result<Option<String>>,
) -> Result<(i64, Task)> {
    let seq = row.int(0)?;
    let id = row.text(1)?;
    let what = format!("task {id}");
    let status =
        parse_task_status(&row.text(3)?).ok_or_else(|| corrupt(&what, "unknown status"))?;
    let spawn: Value = parse_json!(&what, &row.text(4)?)?;
    let last_result: Option<Value> = parse_json_opt!(&what, row.text_opt(5)?)?;
    let created_at = parse_time(&what, &row.text(8)?)?;
    let updated_at = parse_time(&what, &row.text(9)?)?;
    Ok((
        seq,
        Task {
            session_id: row.text(2)?,
            status,
            spawn,
            last_result,
            output_tail: free_text(&what, row.text_opt(6)?)?,
            error: free_text(&what, row.text_opt(7)?)?,
            caller: row.text_opt(10)?,
            created_at,
            updated_at,
            id,
        },
    ))
}

/// The columns [`decode_token`] reads.
pub const TOKEN_COLUMNS: &str = "name, role, caller, created_at, hash, sessions_json";

/// A token row. A role, time or session list that does not decode is an
/// error, never a default: a corrupt row must not become a working token.
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for a value that does not decode.
pub fn decode_token(row: &impl Columns) -> Result<TokenRecord> {
    let name = row.text(0)?;
    let what = format!("token {name}");
    let role = row.text(1)?;
    let role =
        Role::parse(&role).ok_or_else(|| corrupt(&what, format!("unknown role {role:?}")))?;
    let created_at = parse_time(&what, &row.text(3)?)?;
    let sessions: Option<Vec<String>> = parse_json_opt!(&what, row.text_opt(5)?)?;
    Ok(TokenRecord {
        info: lev_protocol::api::TokenInfo {
            name,
            role,
            caller: row.text_opt(2)?,
            sessions,
            created_at,
        },
        hash: row.text(4)?,
    })
}

/// The columns [`decode_audit`] reads.
pub const AUDIT_COLUMNS: &str = "seq, at, action, actor, data_json, prev_hash, hash";

/// An audit row.
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for data that does not parse.
pub fn decode_audit(row: &impl Columns) -> Result<AuditEntry> {
    let seq = row.int(0)?;
    Ok(AuditEntry {
        seq: u64::try_from(seq).unwrap_or_default(),
        at: row.text(1)?,
        action: row.text(2)?,
        actor: row.text(3)?,
        data: parse_json!(&format!("audit entry {seq}"), &row.text(4)?)?,
        prev_hash: row.text(5)?,
        hash: row.text(6)?,
    })
}

/// The columns [`decode_event`] reads.
pub const EVENT_COLUMNS: &str = "seq, kind, data_json";

/// An event row.
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for data that does not parse.
pub fn decode_event(row: &impl Columns) -> Result<StoredEvent> {
    let seq = row.int(0)?;
    Ok(StoredEvent {
        seq,
        kind: row.text(1)?,
        data: parse_json!(&format!("event {seq}"), &row.text(2)?)?,
    })
}

/// The columns [`decode_gate_call`] reads.
pub const GATE_COLUMNS: &str = "session_id, request_id, call_json, decision_json, created_at";

/// A gate call row.
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for a value that does not decode.
pub fn decode_gate_call(row: &impl Columns) -> Result<GateCallRecord> {
    let session_id = row.text(0)?;
    let request_id = row.text(1)?;
    let what = format!("gate call {session_id}/{request_id}");
    let call: Value = parse_json!(&what, &row.text(2)?)?;
    let decision: GateResponse = parse_json!(&what, &row.text(3)?)?;
    let created_at = parse_time(&what, &row.text(4)?)?;
    Ok(GateCallRecord {
        session_id,
        request_id,
        call,
        decision,
        created_at,
    })
}

/// The columns [`decode_grant`] reads (and a grant is inserted with).
pub const GRANT_COLUMNS: &str = "id, scope, caller, conversation_id, sandbox_mode, tool_name, covered_json, grant_args_json, approver, interaction_id, created_at";

/// A grant row.
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for a value that does not decode.
pub fn decode_grant(row: &impl Columns) -> Result<Grant> {
    let id = row.text(0)?;
    let what = format!("grant {id}");
    let scope = match row.text(1)?.as_str() {
        "session" => ApprovalScope::Session,
        "always" => ApprovalScope::Always,
        other => return Err(corrupt(&what, format!("unknown scope {other:?}"))),
    };
    let covered_capabilities: Vec<String> = parse_json!(&what, &row.text(6)?)?;
    let grant_args = parse_json_opt!(&what, row.text_opt(7)?)?;
    let created_at = parse_time(&what, &row.text(10)?)?;
    Ok(Grant {
        id,
        scope,
        caller: row.text(2)?,
        conversation_id: row.text_opt(3)?,
        sandbox_mode: row.text(4)?,
        tool_name: row.text(5)?,
        covered_capabilities,
        grant_args,
        approver: row.text(8)?,
        interaction_id: row.text_opt(9)?,
        created_at,
    })
}

/// A grant's columns as written: its covered capabilities and its args
/// pattern as JSON text (also the key its twin is found by).
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for a value that does not serialise.
pub fn grant_json(grant: &Grant) -> Result<(String, Option<String>)> {
    let covered =
        serde_json::to_string(&grant.covered_capabilities).map_err(|e| corrupt(&grant.id, e))?;
    let args = grant
        .grant_args
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| corrupt(&grant.id, e))?;
    Ok((covered, args))
}

/// The columns [`decode_person_key`] reads.
pub const PERSON_KEY_COLUMNS: &str = "kid, person, fingerprint, jwk_json, created_at, revoked_at";

/// A person's key row.
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for a value that does not decode.
pub fn decode_person_key(row: &impl Columns) -> Result<PersonKeyRecord> {
    let kid = row.text(0)?;
    let what = format!("person key {kid}");
    let mut jwk: PersonJwk = parse_json!(&what, &row.text(3)?)?;
    jwk.kid = kid;
    Ok(PersonKeyRecord {
        jwk,
        person: row.text(1)?,
        fingerprint: row.text(2)?,
        created_at: parse_time(&what, &row.text(4)?)?,
        revoked_at: parse_time_opt(&what, row.text_opt(5)?)?,
    })
}

/// The columns [`decode_endpoint`] reads.
pub const ENDPOINT_COLUMNS: &str =
    "id, kind, url, events, secret, created_by, created_at, disabled_at, disabled_reason";

/// A webhook endpoint row.
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for a value that does not decode.
pub fn decode_endpoint(row: &impl Columns) -> Result<Endpoint> {
    let id = row.text(0)?;
    let what = format!("webhook {id}");
    let kind = row.text(1)?;
    Ok(Endpoint {
        kind: crate::EndpointKind::parse(&kind).ok_or_else(|| corrupt(&what, "unknown kind"))?,
        url: row.text(2)?,
        events: crate::webhooks::filter_events(&row.text(3)?),
        secret: row.text(4)?,
        created_by: row.text(5)?,
        created_at: parse_time(&what, &row.text(6)?)?,
        disabled_at: parse_time_opt(&what, row.text_opt(7)?)?,
        disabled_reason: row.text_opt(8)?,
        id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_actions_keep_their_wire_strings() {
        assert_eq!(
            EventKind::of_status(InteractionStatus::Expired).as_str(),
            "interaction.expired"
        );
        assert_eq!(EventKind::TaskUpdated.to_string(), "task.updated");
        assert_eq!(AuditAction::PersonKeyAdded.as_str(), "person_key.added");
        assert_eq!(
            AuditRecord::new(AuditAction::WebhookDisabled, "a", Value::Null).action,
            "webhook.disabled"
        );
    }

    struct Values(Vec<Option<String>>);

    impl Columns for Values {
        fn text(&self, i: usize) -> Result<String> {
            self.text_opt(i)?.ok_or_else(|| corrupt("row", "null"))
        }
        fn text_opt(&self, i: usize) -> Result<Option<String>> {
            self.0
                .get(i)
                .cloned()
                .ok_or_else(|| corrupt("row", "no column"))
        }
        fn int(&self, i: usize) -> Result<i64> {
            self.text(i)?.parse().map_err(|e| corrupt("row", e))
        }
    }

    #[test]
    fn a_token_row_with_an_unknown_role_is_corrupt() {
        let row = |role: &str| {
            Values(vec![
                Some("ops".into()),
                Some(role.into()),
                None,
                Some("2025-01-01T00:00:00Z".into()),
                Some("h".into()),
                None,
            ])
        };
        assert_eq!(decode_token(&row("admin")).unwrap().info.role, Role::Admin);
        assert!(matches!(
            decode_token(&row("root")),
            Err(crate::StoreError::Corrupt { .. })
        ));
    }
}
