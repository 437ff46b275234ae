//! The arguments of lev's two MCP tools, read from what the client sent:
//! pure, so that the fuzz target `mcp` reaches them.

use lev_protocol::InteractionKind;
use lev_protocol::claude_code::PermissionPromptInput;
use serde_json::Value;

/// `approval_prompt`'s arguments.
///
/// # Errors
/// What the tool answers the client when they do not fit.
pub fn approval_prompt(arguments: Value) -> Result<PermissionPromptInput, String> {
    serde_json::from_value(arguments).map_err(|e| {
        format!(
            "approval_prompt expects {{\"tool_name\": string, \"input\": object, \"tool_use_id\"?: string}}: {e}"
        )
    })
}

/// `ask_human`'s arguments, as the question they ask: free text, or a
/// multiple choice when options are given.
///
/// # Errors
/// What the tool answers the client when they do not fit.
pub fn ask_human(arguments: Value) -> Result<InteractionKind, String> {
    #[derive(serde::Deserialize)]
    struct AskHuman {
        question: String,
        #[serde(default)]
        options: Option<Vec<String>>,
    }
    let ask = match serde_json::from_value::<AskHuman>(arguments) {
        Ok(ask) if !ask.question.trim().is_empty() => ask,
        Ok(_) => return Err("ask_human expects a question that is not empty".to_owned()),
        Err(e) => {
            return Err(format!(
                "ask_human expects {{\"question\": string, \"options\"?: [string]}}: {e}"
            ));
        }
    };
    Ok(match ask.options.filter(|o| !o.is_empty()) {
        None => InteractionKind::FreeText {
            prompt: ask.question,
        },
        Some(options) => InteractionKind::MultipleChoice {
            prompt: ask.question,
            options,
        },
    })
}
