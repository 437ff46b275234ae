//! The tools `lev mcp` lists: names, descriptions a model can act on
//! unprompted, and exact input schemas.

use std::sync::Arc;
use std::time::Duration;

use lev_protocol::claude_code::{APPROVAL_PROMPT_TOOL, ASK_HUMAN_TOOL};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

/// The most options `ask_human` takes (SPEC section 9).
pub const MAX_OPTIONS: usize = 64;

/// Every tool, in a fixed order (2026-07-28 clients cache the list).
pub fn all(timeout: Duration) -> Vec<Tool> {
    vec![approval_prompt(timeout), ask_human(timeout)]
}

fn minutes(timeout: Duration) -> String {
    let secs = timeout.as_secs();
    if secs >= 120 && secs.is_multiple_of(60) {
        format!("{} minutes", secs / 60)
    } else {
        format!("{secs} seconds")
    }
}

fn approval_prompt(timeout: Duration) -> Tool {
    let description = format!(
        "Ask whether a tool call may run, before running it. lev decides through its policy, \
the grants people gave earlier, or a person who answers in lev's dashboard; every decision \
is signed and audited. This is Claude Code's permission-prompt tool \
(--permission-prompt-tool mcp__lev__approval_prompt); any agent may call it before a tool \
call that changes files, runs commands, spends money or reaches the network. It waits \
until someone decides (at most {}). It returns one text block holding JSON: \
{{\"behavior\":\"allow\",\"updatedInput\":{{...}}}} means run the tool with updatedInput, \
which may be an edit of what you proposed (run that, not your original); \
{{\"behavior\":\"deny\",\"message\":\"...\"}} means do not run it, and the message says why \
or what to do instead.",
        minutes(timeout)
    );
    Tool::new(
        APPROVAL_PROMPT_TOOL,
        description,
        schema(json!({
            "type": "object",
            "properties": {
                "tool_name": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The tool that needs permission, such as \"Bash\", \"Edit\" or \"mcp__github__create_issue\"."
                },
                "input": {
                    "type": "object",
                    "description": "The arguments the tool would run with, exactly as proposed.",
                    "additionalProperties": true
                },
                "tool_use_id": {
                    "type": "string",
                    "description": "The id of this tool call, when there is one: asking again with the same id gets the same decision."
                }
            },
            "required": ["tool_name", "input"]
        })),
    )
    .with_title("Ask lev for permission to run a tool")
    .with_annotations(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

fn ask_human(timeout: Duration) -> Tool {
    let description = format!(
        "Ask a person a question and wait for the answer. Use it when you need a decision, a \
preference, a fact or a secret only a person has, or a go-ahead before something you cannot \
undo, instead of guessing. The question shows in lev's dashboard and terminal; the call waits \
until the person answers (at most {}). Without options the person types an answer and you get \
their text; with options (2 to {MAX_OPTIONS} short choices) they pick one and you get the \
chosen option's text. If nobody answers in time, the result says so.",
        minutes(timeout)
    );
    Tool::new(
        ASK_HUMAN_TOOL,
        description,
        schema(json!({
            "type": "object",
            "properties": {
                "question": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The question, complete enough to answer without seeing your conversation."
                },
                "options": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "maxItems": MAX_OPTIONS,
                    "description": "Choices to pick from; leave out for a free-text answer."
                }
            },
            "required": ["question"]
        })),
    )
    .with_title("Ask a person")
    .with_annotations(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(false)
            .open_world(true),
    )
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}
