//! Escalation: what the operator could not answer in time becomes an
//! interaction for people (an ask a `free_text`, a hook a `tool_approval` of
//! tool `spawn`), and the waiting worker gets the person's answer.
//!
//! The interaction expires with the caller's deadline (its `timeout_s` is the
//! time left), so nobody answers a question no one waits for.

use lev_protocol::api::InteractionView;
use lev_protocol::validate::validate_request;
use lev_protocol::{InteractionKind, InteractionRequest, InteractionStatus, StoredResponse};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::time::Instant;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// What to ask people, and why.
#[derive(Debug, Clone)]
pub struct Escalation {
    /// The session.
    pub session_id: String,
    /// The person the run acts for, when known.
    pub caller: Option<String>,
    /// Who made the original request (the worker token's name).
    pub actor: String,
    /// `ask` or `hook`.
    pub from: &'static str,
    /// One line for people.
    pub title: String,
    /// The question.
    pub kind: InteractionKind,
    /// Why it is not the operator answering.
    pub reason: String,
}

/// How the people's side ended.
#[derive(Debug)]
pub enum PeopleOutcome {
    /// A person answered.
    Answered {
        /// The answer.
        response: Box<StoredResponse>,
        /// Who answered.
        by: String,
    },
    /// It expired or was cancelled before anyone answered.
    Closed {
        /// The interaction.
        interaction_id: String,
        /// `expired` or `cancelled`.
        status: InteractionStatus,
    },
    /// The caller's deadline passed first.
    Deadline {
        /// The interaction.
        interaction_id: String,
    },
}

/// The text people read for an operator question: a string as it is, other
/// JSON pretty-printed; cut to the prompt limit.
pub fn question_text(question: &Value, limit: usize) -> String {
    let mut text = match question {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    if text.is_empty() {
        text = "(empty question)".into();
    }
    const CUT: &str = "\n[... cut: the question is longer than a prompt may be]";
    if text.len() > limit {
        let mut end = limit.saturating_sub(CUT.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(CUT);
    }
    text
}

/// Create the interaction for people, and wait for its end or `deadline`.
///
/// # Errors
/// When the interaction cannot be stored (too many pending, too large, the
/// store failing).
pub async fn ask_people(
    state: &AppState,
    escalation: Escalation,
    deadline: Instant,
) -> ApiResult<PeopleOutcome> {
    let now = OffsetDateTime::now_utc();
    let left = deadline.saturating_duration_since(Instant::now());
    let timeout_s = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    let id = crate::ids::new_id("ir_", now)
        .map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?;
    let mut request = InteractionRequest::new(escalation.session_id.clone(), escalation.kind);
    request.id = Some(id.clone());
    request.caller = escalation.caller;
    request.title = Some(escalation.title);
    request.timeout_s = Some(timeout_s.max(1));
    request.route = Some(vec!["human".into()]);
    request.metadata = Some(json!({
        "escalation": {
            "from": escalation.from,
            "reason": escalation.reason,
            "by": "lev",
            "at": now.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
        }
    }));
    validate_request(&request, &state.settings().limits)?;
    let new = crate::interactions::prepare(state, request, &escalation.actor, now, None)?;
    match crate::interactions::open(state, new).await {
        Ok(_) => {}
        Err(ApiError::TooMany(_)) => {
            return Err(ApiError::TooMany(format!(
                "the operator did not answer, and session {} has {} pending interactions, the \
                 most it may hold, so people cannot be asked either",
                escalation.session_id,
                state.settings().max_pending_per_session
            )));
        }
        Err(e) => return Err(e),
    }
    let view = crate::interactions::wait_final(state, &id, deadline, |_| Ok(())).await?;
    // Still pending at the deadline: the expiry task closes it at about this
    // time; say so now.
    Ok(ended(Some(view)).unwrap_or(PeopleOutcome::Deadline { interaction_id: id }))
}

/// The outcome once the interaction is final.
fn ended(view: Option<InteractionView>) -> Option<PeopleOutcome> {
    let view = view?;
    let interaction_id = view.request.id().to_owned();
    match view.request.status {
        InteractionStatus::Pending => None,
        InteractionStatus::Answered => Some(match view.response {
            Some(response) => PeopleOutcome::Answered {
                response: Box::new(response),
                by: view.request.answered_by.unwrap_or_default(),
            },
            None => PeopleOutcome::Closed {
                interaction_id,
                status: InteractionStatus::Answered,
            },
        }),
        status => Some(PeopleOutcome::Closed {
            interaction_id,
            status,
        }),
    }
}
