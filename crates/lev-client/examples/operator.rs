//! A small operator: it answers its session's questions, vets spawns, and
//! runs each spawn as a simulated sub-agent that posts its result over HTTP
//! with the task's token, then acks `{}` so that posted result is the one the
//! worker gets.
//!
//! ```sh
//! lev token create main-ai --role operator --sessions 's-*'   # prints the token
//! LEV_URL=http://127.0.0.1:7420 LEV_TOKEN=lev_... \
//!     cargo run -p lev-client --example operator -- s-1
//! ```
//!
//! Questions whose JSON contains "human" are escalated on purpose (the
//! operator just never answers them, so they reach people after the reply
//! timeout); spawns with `"dangerous": true` are rejected.

use std::sync::Arc;
use std::time::Duration;

use lev_client::Client;
use lev_client::operator::{
    Ask, Hook, HookDecision, Operator, OperatorHandler, SpawnOrder, SpawnOutcome,
    post_worker_result,
};
use lev_protocol::WorkerResult;
use serde_json::{Value, json};

struct ExampleOperator {
    /// The HTTP client, made once: each sub-agent uses its pool with the
    /// task's token.
    client: Client,
}

impl OperatorHandler for ExampleOperator {
    async fn ask(&self, ask: Ask) -> Value {
        if ask.question.to_string().contains("human") {
            // Leave it to people: never answered, so it escalates.
            std::future::pending::<()>().await;
        }
        if let Some(interaction) = ask.question.get("interaction") {
            // Triage: approve read-only tools, hand the rest to people.
            let kind = &interaction["kind"];
            return if kind["type"] == "tool_approval" && kind["tool_name"] == "fs.read" {
                json!({"approved": true, "reason": "read-only"})
            } else {
                json!({"escalate": "the example operator only approves fs.read"})
            };
        }
        eprintln!("operator: ask {}: {}", ask.req_id, ask.question);
        json!({"answer": format!("the operator read your question: {}", ask.question)})
    }

    async fn hook_before(&self, hook: Hook) -> HookDecision {
        if hook.spawn.get("dangerous") == Some(&Value::Bool(true)) {
            HookDecision::Reject("the example operator does not run dangerous spawns".into())
        } else {
            HookDecision::Allow
        }
    }

    async fn spawn(&self, order: SpawnOrder) -> SpawnOutcome {
        eprintln!("operator: spawn {} as {}", order.spawn, order.task_id);
        // The sub-agent: it would be another process, holding only the task
        // token; here it shares the operator's connection pool.
        let sub_agent = order.sub_agent(&self.client);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let result = WorkerResult {
            task_id: order.task_id.clone(),
            value: json!({"done": order.spawn}),
            ok: true,
            error: None,
            output_tail: Some("sub-agent: finished\n".into()),
        };
        match post_worker_result(&sub_agent, &result).await {
            Ok(_) => SpawnOutcome::deferred(),
            Err(e) => SpawnOutcome::failed(format!("the sub-agent could not post its result: {e}")),
        }
    }

    fn on_connect(&self, pending: &[String]) {
        eprintln!("operator: connected, {} message(s) pending", pending.len());
    }

    fn on_error(&self, req_id: Option<&str>, code: &str, message: &str) {
        eprintln!("operator: the server refused {req_id:?}: {code}: {message}");
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let url = std::env::var("LEV_URL").unwrap_or_else(|_| "http://127.0.0.1:7420".into());
    let Ok(token) = std::env::var("LEV_TOKEN") else {
        eprintln!(
            "error: set LEV_TOKEN to an operator token (lev token create NAME --role operator --sessions PATTERNS)"
        );
        return std::process::ExitCode::from(2);
    };
    let session = std::env::args().nth(1).unwrap_or_else(|| "s-1".into());
    let operator = match Operator::new(&url, &token, &session) {
        Ok(op) => op,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    eprintln!("operator: serving session {session} at {url}");
    let client = operator.client().with_token(None);
    match operator.run(Arc::new(ExampleOperator { client })).await {
        Ok(stopped) => {
            eprintln!("operator: stopped: {stopped:?}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
