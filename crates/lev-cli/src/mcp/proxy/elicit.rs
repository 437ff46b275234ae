//! `--elicit`: a call lev asks a person about is also put to the client's
//! own user, as an MCP elicitation (`elicitation/create`, a form: approve or
//! deny, and feedback), when the client declared `elicitation`. The user's
//! answer is recorded in lev with the approver token given for them, so it is
//! that person's decision, signed and audited like any other; lev's other
//! channels (dashboard, Slack, `lev watch`) may answer first, and the first
//! answer wins. The gate's wait then verifies the decision as always: the
//! elicitation only answers lev's question, it never lets a call through.

use std::sync::Arc;

use lev_protocol::{ApprovalScope, InteractionResponse};
use serde_json::{Map, Value, json};

use super::relay::Shared;

/// The form the client's user fills in.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "enum": ["approve", "deny"],
            },
            "feedback": {
                "type": "string",
                "title": "Feedback for the model (when denying)",
            },
        },
        "required": ["decision"],
    })
}

/// What the user's answer comes to in lev: `None` when they cancelled
/// (lev's other channels still may answer).
pub fn answer(interaction: &str, result: &Value) -> Option<InteractionResponse> {
    let action = result.get("action").and_then(Value::as_str)?;
    let content = result.get("content");
    let field = |name: &str| content.and_then(|c| c.get(name)).and_then(Value::as_str);
    match action {
        "accept" if field("decision") == Some("approve") => Some(InteractionResponse::approval(
            interaction,
            true,
            ApprovalScope::Once,
        )),
        "accept" => Some(InteractionResponse::deny_with_feedback(
            interaction,
            field("feedback").unwrap_or_default(),
        )),
        "decline" => Some(InteractionResponse::deny_with_feedback(
            interaction,
            field("feedback").unwrap_or("declined in the client"),
        )),
        _ => None,
    }
}

/// Withdraws the elicitation from the client when dropped unanswered: lev
/// decided some other way, or the call was cancelled.
struct Outstanding<'a> {
    shared: &'a Shared,
    id: Option<Value>,
}

impl Drop for Outstanding<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.shared.withdraw_client_request(&id, "decided in lev");
        }
    }
}

/// Ask the client's user about `interaction` (the call of `tool` with
/// `input`), and record their answer in lev. Returns once they answered
/// (or the client refused); cancelling the future withdraws the question.
pub async fn ask(shared: &Arc<Shared>, interaction: &str, tool: &str, input: &Map<String, Value>) {
    let Some(elicit) = shared.config.elicit.clone() else {
        return;
    };
    if !shared.client_elicits() {
        return;
    }
    let args = Value::Object(input.clone()).to_string();
    let message = format!(
        "lev asks whether this tool call may run:\n\n{tool} {args}\n\nApprove it, or deny it with feedback for the model."
    );
    let (id, response) = shared.ask_client(
        "elicitation/create",
        json!({"message": message, "requestedSchema": schema()}),
    );
    let mut outstanding = Outstanding {
        shared,
        id: Some(id),
    };
    let Ok(response) = response.await else {
        return;
    };
    outstanding.id = None;
    let Some(result) = response.get("result") else {
        eprintln!(
            "lev mcp proxy: the client refused the elicitation: {}",
            response["error"]
        );
        return;
    };
    let Some(answer) = answer(interaction, result) else {
        return;
    };
    if let Err(e) = elicit.respond(interaction, &answer).await {
        // Answered already elsewhere (409), or the token may not answer.
        eprintln!("lev mcp proxy: the client user's answer was not recorded in lev: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        let approve = answer(
            "i",
            &json!({"action": "accept", "content": {"decision": "approve"}}),
        )
        .unwrap();
        assert_eq!(approve.approved, Some(true));
        let deny = answer(
            "i",
            &json!({"action": "accept", "content": {"decision": "deny", "feedback": "no"}}),
        )
        .unwrap();
        assert_eq!(
            (deny.approved, deny.feedback.as_deref()),
            (Some(false), Some("no"))
        );
        let declined = answer("i", &json!({"action": "decline"})).unwrap();
        assert_eq!(declined.approved, Some(false));
        assert!(answer("i", &json!({"action": "cancel"})).is_none());
    }
}
