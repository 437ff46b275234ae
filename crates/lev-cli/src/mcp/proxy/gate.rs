//! A client's `tools/call` through lev's gate: as tool `mcp__NAME__TOOL`
//! with its arguments, decided by [`gatekeep::verdict`] (the SDK's
//! Gatekeeper: gate, wait for a person, verify the signed decision against
//! the pinned keys, the exact call, the nonce spent). Only an allow that
//! verified is forwarded, with the approved arguments; everything else is a
//! tool error the model reads, and the upstream is never called.
//!
//! The upstream's tool annotations become capabilities the call requires
//! ([`capabilities`]), so a policy can treat read-only and destructive tools
//! apart; they are the upstream's word, not a security boundary.

use std::sync::{Arc, Mutex};

use lev_protocol::claude_code::Verdict;
use serde_json::{Map, Value, json};

use super::elicit;
use super::message::{self, Message, code};
use super::relay::{Hints, Shared};
use crate::deadline::Deadline;
use crate::gatekeep::{self, GateCall};

/// The capability a call of a tool not declared read-only requires.
pub const WRITE: &str = "mcp-write";
/// The capability a call of a tool that may be destructive requires.
pub const DESTRUCTIVE: &str = "mcp-destructive";

/// The capabilities a call of a tool with `hints` requires, by MCP's
/// defaults for annotations left out (`readOnlyHint` false,
/// `destructiveHint` true): none for a read-only tool, [`WRITE`] for any
/// other, and [`DESTRUCTIVE`] too unless it says it is not destructive. A
/// tool the upstream did not list is neither.
pub fn capabilities(hints: Option<Hints>) -> Vec<String> {
    let hints = hints.unwrap_or_default();
    if hints.read_only == Some(true) {
        return Vec::new();
    }
    let mut needed = vec![WRITE.to_owned()];
    if hints.destructive != Some(false) {
        needed.push(DESTRUCTIVE.to_owned());
    }
    needed
}

/// The gate's name of `tool` on the upstream `name`, as Claude Code names
/// MCP tools.
pub fn tool_name(name: &str, tool: &str) -> String {
    format!("mcp__{name}__{tool}")
}

/// What the person sees beside the call: the annotations, and whose word
/// they are.
fn reason(name: &str, hints: Option<Hints>) -> String {
    let word = |v: Option<bool>| v.map_or("not declared", |b| if b { "true" } else { "false" });
    match hints {
        Some(h) => format!(
            "MCP server {name:?} declares readOnlyHint {}, destructiveHint {} (the server's own word, not verified)",
            word(h.read_only),
            word(h.destructive)
        ),
        None => format!("MCP server {name:?} did not list this tool before the call"),
    }
}

/// Decide `message` (a `tools/call`) in lev, then forward it or answer it.
/// `interaction` is told the lev interaction a person decides, so that a
/// cancel by the client can withdraw it.
pub async fn call(shared: Arc<Shared>, message: Message, interaction: Arc<Mutex<Option<String>>>) {
    let Some((id, tool, input)) = read_call(&shared, &message) else {
        return;
    };
    let config = &shared.config;
    let gated_name = tool_name(&config.name, &tool);
    let call = gate_call(&shared, &tool, &gated_name, input.clone());
    let deadline = Deadline::from_now(config.timeout);
    // The interaction a person decides, for `--elicit`.
    let (found_tx, mut found_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let decide = async {
        let keys = match &config.pinned {
            Some(keys) => Some(keys),
            None => deadline
                .run(
                    shared
                        .keys
                        .get_or_try_init(|| gatekeep::pinned_keys(&config.client)),
                )
                .await
                .and_then(Result::ok),
        };
        gatekeep::verdict(&config.client, keys, &call, deadline, |found| {
            *interaction
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(found.to_owned());
            let _ = found_tx.send(found.to_owned());
        })
        .await
    };
    let token = message.progress_token().cloned();
    let decided = async {
        match token {
            Some(token) => with_progress(&shared, &id, token, decide).await,
            None => decide.await,
        }
    };
    // The client's user may answer too; lev's decision, verified, is what
    // counts, and the elicitation is withdrawn once there is one.
    let elicited = async {
        if let Some(found) = found_rx.recv().await {
            elicit::ask(&shared, &found, &gated_name, &input).await;
        }
        std::future::pending::<Verdict>().await
    };
    let verdict = tokio::select! {
        verdict = decided => verdict,
        verdict = elicited => verdict,
    };
    settle(&shared, message, &id, &gated_name, &interaction, verdict);
}

/// The call's id, tool and arguments; a call without them is answered with
/// the JSON-RPC error that says so (and `None`).
fn read_call(shared: &Shared, message: &Message) -> Option<(Value, String, Map<String, Value>)> {
    let id = message.id().cloned()?;
    let params = message.params().cloned().unwrap_or_default();
    let Some(tool) = params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        shared.answer_gated(
            &id,
            message::error(
                id.clone(),
                code::INVALID_PARAMS,
                "tools/call without a tool name",
            ),
        );
        return None;
    };
    let input: Map<String, Value> = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args.clone(),
        Some(_) => {
            shared.answer_gated(
                &id,
                message::error(
                    id.clone(),
                    code::INVALID_PARAMS,
                    "tools/call arguments must be an object",
                ),
            );
            return None;
        }
    };
    Some((id, tool, input))
}

/// What lev's gate is asked about the upstream's `tool`: `mcp__NAME__TOOL`
/// with its arguments, in the proxy's session, with the capabilities its
/// annotations imply.
fn gate_call(shared: &Shared, tool: &str, gated_name: &str, input: Map<String, Value>) -> GateCall {
    let config = &shared.config;
    let hints = shared.hints(tool);
    GateCall {
        session: shared.session(),
        conversation: config
            .conversation
            .clone()
            .unwrap_or_else(|| shared.session()),
        caller: config.caller.clone(),
        sandbox_mode: config.sandbox_mode.clone(),
        request_id: None,
        tool_name: gated_name.to_owned(),
        input,
        route: config.route.clone(),
        timeout: config.timeout,
        reason: Some(reason(&config.name, hints)),
        required_capabilities: capabilities(hints),
    }
}

/// Act on the verdict: forward an allowed call with the approved arguments,
/// or answer the client with a tool error (denied, or not decided: then
/// the question nobody waits for is withdrawn).
fn settle(
    shared: &Arc<Shared>,
    mut message: Message,
    id: &Value,
    gated_name: &str,
    interaction: &Mutex<Option<String>>,
    verdict: Verdict,
) {
    let config = &shared.config;
    match verdict {
        Verdict::Allow(allowed) => {
            if let Some(params) = message
                .value_mut()
                .get_mut("params")
                .and_then(Value::as_object_mut)
            {
                params.insert("arguments".into(), allowed.updated_input);
            }
            shared.forward_approved(message);
        }
        Verdict::Deny { message: text } => {
            shared.answer_gated(id, message::tool_error(id.clone(), text))
        }
        Verdict::Defer { reason } => {
            // Nobody waits for its question any more.
            let pending = interaction
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(pending) = pending {
                let client = config.client.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_secs(5),
                        client.cancel(&pending),
                    )
                    .await;
                });
            }
            shared.answer_gated(
                id,
                message::tool_error(
                    id.clone(),
                    format!("{reason}; the call to {gated_name} was not run."),
                ),
            );
        }
    }
}

/// Run `decide`, telling the client every [`super::Config::progress_every`]
/// that the call still waits (`notifications/progress` on its token), so
/// that its request timeout does not end a wait for a person.
async fn with_progress<F: std::future::Future<Output = Verdict>>(
    shared: &Shared,
    id: &Value,
    token: Value,
    decide: F,
) -> Verdict {
    let every = shared.config.progress_every;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tokio::pin!(decide);
    let mut progress = 0u64;
    loop {
        tokio::select! {
            verdict = &mut decide => return verdict,
            _ = ticks.tick() => {
                progress += 1;
                shared.progress_sent(id, progress);
                shared.to_client(message::notification(
                    "notifications/progress",
                    json!({
                        "progressToken": token,
                        "progress": progress,
                        "message": "waiting for a decision in lev",
                    }),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_become_capabilities() {
        let h = |read_only, destructive| {
            Some(Hints {
                read_only,
                destructive,
            })
        };
        assert!(capabilities(h(Some(true), None)).is_empty());
        assert!(capabilities(h(Some(true), Some(true))).is_empty());
        assert_eq!(capabilities(h(Some(false), Some(false))), [WRITE]);
        assert_eq!(capabilities(h(None, None)), [WRITE, DESTRUCTIVE]);
        assert_eq!(capabilities(None), [WRITE, DESTRUCTIVE]);
        for c in capabilities(None) {
            assert!(lev_protocol::ids::is_valid_capability(&c), "{c}");
        }
    }

    #[test]
    fn names_as_claude_code_does() {
        assert_eq!(tool_name("fs", "write_file"), "mcp__fs__write_file");
    }
}
