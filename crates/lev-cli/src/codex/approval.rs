//! What each Codex approval request is as a lev tool call, and what each lev
//! decision is as Codex's answer. Pure: the bridge does the IO.
//!
//! | Codex asks | lev gates |
//! | --- | --- |
//! | `item/commandExecution/requestApproval` (`kind: command`) | `codex.exec` `{"command", "argv", "cwd"}` ([`super::shell`]) |
//! | `item/commandExecution/requestApproval` with `networkApprovalContext` | `codex.network` `{"host", "protocol", "command", "cwd"}` |
//! | `item/fileChange/requestApproval` | `codex.apply_patch` `{"files", "changes"}` (the diff from the item's `item/started`) |
//! | `mcpServer/elicitation/request` marked `codex_approval_kind: mcp_tool_call` | `mcp__<server>__<tool>` with the tool's arguments |
//!
//! Anything else that asks (another command kind, a patch whose diff lev did
//! not see, a plain elicitation, a permissions request) cannot be mapped: it
//! is declined, never accepted, with a message to the model.

use serde_json::{Map, Value, json};

use super::shell::{ShellCommand, join, unwrap_shell};

/// The tool name of a Codex shell command.
pub const EXEC: &str = "codex.exec";
/// The tool name of a Codex file change.
pub const APPLY_PATCH: &str = "codex.apply_patch";
/// The tool name of a Codex network access request.
pub const NETWORK: &str = "codex.network";

/// What kind of request it is: how its answer is spelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A command (or network) approval: `{"decision": ...}` with execpolicy amendments.
    Command {
        /// The shell that runs it (from the wrapper), for compound argv.
        shell: String,
        /// The prefix rule Codex offers for "don't ask again", if it does.
        amendment: Option<Vec<String>>,
    },
    /// A file change: `{"decision": ...}`.
    FileChange,
    /// An MCP tool call approval: an elicitation answered with `{"action": ...}`.
    McpTool,
}

/// A Codex approval request as a lev tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// The Codex thread: lev's session and conversation.
    pub thread: String,
    /// The turn it belongs to (for `turn/steer`).
    pub turn: Option<String>,
    /// The item (tool call) id: the gate's request id.
    pub item: String,
    /// lev's tool name.
    pub tool: String,
    /// lev's args (a JSON object).
    pub args: Map<String, Value>,
    /// The model's justification.
    pub reason: Option<String>,
    /// Capabilities the call needs.
    pub capabilities: Vec<String>,
    /// How to answer it.
    pub kind: Kind,
    /// One line for the terminal.
    pub shown: String,
    /// Whether, once accepted, it runs outside the thread's sandbox: a
    /// command the model asked to escalate (Codex then carries the model's
    /// justification as `reason`), or a file change asking for more write
    /// access (`reason`, `grantRoot`).
    pub outside_sandbox: bool,
}

/// A request lev cannot map: declined with `reply`, the model told why.
#[derive(Debug, Clone, PartialEq)]
pub struct Unmappable {
    /// The thread, when the request names one.
    pub thread: Option<String>,
    /// The turn, when the request names one.
    pub turn: Option<String>,
    /// Why lev cannot gate it.
    pub why: String,
    /// The answer that declines it; `None` for a method lev does not know
    /// at all, which gets a JSON-RPC error instead.
    pub reply: Option<Value>,
}

/// How a Codex request maps.
#[derive(Debug, Clone, PartialEq)]
pub enum Mapping {
    /// Gate it.
    Ask(Box<Ask>),
    /// Decline it.
    Unmappable(Unmappable),
}

fn text(params: &Value, key: &str) -> Option<String> {
    params
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .filter(|s| !s.is_empty())
}

/// The args lev gates for a shell command `command` run by `shell` in `cwd`.
pub fn exec_args(command: &ShellCommand, cwd: &str) -> Map<String, Value> {
    let mut args = Map::new();
    args.insert("command".into(), Value::String(command.command.clone()));
    args.insert("argv".into(), json!(command.argv));
    args.insert("cwd".into(), Value::String(cwd.to_owned()));
    args
}

/// Map Codex's request `method` with `params`. `changes_of(item)` gives the
/// `changes` of a file-change item seen in `item/started` (the approval
/// request carries no diff).
pub fn map_request(
    method: &str,
    params: &Value,
    changes_of: impl Fn(&str) -> Option<Value>,
) -> Mapping {
    let thread = text(params, "threadId");
    let turn = text(params, "turnId");
    let unmappable = |why: String, reply: Option<Value>| {
        Mapping::Unmappable(Unmappable {
            thread: thread.clone(),
            turn: turn.clone(),
            why,
            reply,
        })
    };
    let Some(thread_id) = thread.clone() else {
        return unmappable(format!("{method} names no threadId"), None);
    };
    let mapped = match method {
        "item/commandExecution/requestApproval" => command_approval(params, thread_id, turn.clone()),
        "item/fileChange/requestApproval" => {
            file_change_approval(params, thread_id, turn.clone(), changes_of)
        }
        "mcpServer/elicitation/request" => mcp_tool_approval(params, thread_id, turn.clone()),
        "item/permissions/requestApproval" => refuse(
            "lev does not grant Codex extra sandbox permissions; ask for the command itself instead".into(),
            Some(json!({"permissions": {}, "scope": "turn"})),
        ),
        other => refuse(format!("lev does not answer Codex's {other} requests"), None),
    };
    match mapped {
        Ok(ask) => Mapping::Ask(Box::new(ask)),
        Err(Refused { why, reply }) => unmappable(why, reply),
    }
}

/// Why a request is not gated, and the answer that declines it.
struct Refused {
    why: String,
    reply: Option<Value>,
}

fn refuse(why: String, reply: Option<Value>) -> Result<Ask, Refused> {
    Err(Refused { why, reply })
}

/// A command approval: a shell command (`exec`), or a command's network
/// access (`network`).
fn command_approval(
    params: &Value,
    thread_id: String,
    turn: Option<String>,
) -> Result<Ask, Refused> {
    let decline = Some(json!({"decision": "decline"}));
    let Some(item) = text(params, "itemId") else {
        return refuse("the command approval names no itemId".into(), decline);
    };
    let kind = params
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("command");
    if kind != "command" {
        return refuse(
            format!("lev does not gate command approvals of kind {kind:?}"),
            decline,
        );
    }
    let Some(wrapped) = text(params, "command") else {
        return refuse("the command approval carries no command".into(), decline);
    };
    let Some(cwd) = text(params, "cwd") else {
        return refuse("the command approval carries no cwd".into(), decline);
    };
    let shell = unwrap_shell(&wrapped).map_or_else(|| "sh".to_owned(), |(s, _)| s);
    let command = ShellCommand::from_codex(&wrapped);
    // The gate's request id is the item id. Codex asks several
    // times about one item only for the subcommands of a zsh-forked
    // shell (and a stdin write, declined above), each with an
    // `approvalId`: each of those is its own call, so its id joins
    // the item's (the gate's idempotency key is session + request
    // id, and the same id for another call would be refused).
    let approval_id = text(params, "approvalId");
    let item = match approval_id {
        Some(a) => format!("{item}:{a}"),
        None => item,
    };
    let amendment = offered_amendment(params);
    let (tool, args, capabilities, shown) = match params.get("networkApprovalContext") {
        Some(network) if !network.is_null() => {
            let host = network
                .get("host")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let protocol = network
                .get("protocol")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mut args = Map::new();
            args.insert("host".into(), json!(host));
            args.insert("protocol".into(), json!(protocol));
            args.insert("command".into(), json!(command.command));
            args.insert("cwd".into(), json!(cwd));
            let shown = format!("network access to {host} ({protocol})");
            (NETWORK, args, vec!["net".to_owned()], shown)
        }
        _ => (
            EXEC,
            exec_args(&command, &cwd),
            vec!["proc-exec".to_owned()],
            command.command.clone(),
        ),
    };
    // A network request runs the command in the sandbox, with the
    // host let through.
    let outside_sandbox = tool == EXEC && text(params, "reason").is_some();
    Ok(Ask {
        thread: thread_id,
        turn,
        item,
        tool: tool.to_owned(),
        args,
        reason: text(params, "reason"),
        capabilities,
        kind: Kind::Command { shell, amendment },
        shown,
        outside_sandbox,
    })
}

/// A file change approval: the changes seen when the item started.
fn file_change_approval(
    params: &Value,
    thread_id: String,
    turn: Option<String>,
    changes_of: impl Fn(&str) -> Option<Value>,
) -> Result<Ask, Refused> {
    let decline = Some(json!({"decision": "decline"}));
    let Some(item) = text(params, "itemId") else {
        return refuse("the file change approval names no itemId".into(), decline);
    };
    let Some(changes) = changes_of(&item).filter(|c| c.as_array().is_some_and(|a| !a.is_empty()))
    else {
        return refuse(
            format!(
                "lev did not see the changes of file change {item} (they are sent before the approval request, when the item starts), so it cannot show what would be written"
            ),
            decline,
        );
    };
    let files = match changed_files(&changes) {
        Ok(files) => files,
        Err(why) => {
            return refuse(
                format!("lev cannot read the changes of file change {item}: {why}"),
                decline,
            );
        }
    };
    let mut args = Map::new();
    args.insert("files".into(), json!(files));
    args.insert("changes".into(), changes);
    if let Some(root) = text(params, "grantRoot") {
        args.insert("grant_root".into(), json!(root));
    }
    Ok(Ask {
        thread: thread_id,
        turn,
        item,
        tool: APPLY_PATCH.to_owned(),
        args,
        reason: text(params, "reason"),
        capabilities: vec!["fs-write".to_owned()],
        kind: Kind::FileChange,
        shown: format!("edit {}", files.join(", ")),
        outside_sandbox: text(params, "reason").is_some() || text(params, "grantRoot").is_some(),
    })
}

/// An MCP elicitation that asks to approve a tool call.
fn mcp_tool_approval(
    params: &Value,
    thread_id: String,
    turn: Option<String>,
) -> Result<Ask, Refused> {
    let decline = Some(json!({"action": "decline"}));
    let meta = params.get("_meta").cloned().unwrap_or(Value::Null);
    if meta.get("codex_approval_kind").and_then(Value::as_str) != Some("mcp_tool_call") {
        return refuse(
            "lev answers MCP elicitations only when they ask to approve a tool call (codex_approval_kind \"mcp_tool_call\")".into(),
            decline,
        );
    }
    let Some(server) = text(params, "serverName") else {
        return refuse("the MCP tool approval names no serverName".into(), decline);
    };
    let Some(tool) = text(&meta, "tool_name").or_else(|| quoted_tool(params)) else {
        return refuse(
            format!("the MCP tool approval from {server} does not name its tool"),
            decline,
        );
    };
    // Codex leaves `tool_params` out only for a call without
    // arguments. MCP arguments are an object: anything else is not
    // a call lev can show as made, so it is declined.
    let args = match meta.get("tool_params") {
        Some(Value::Object(args)) => args.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(other) => {
            return refuse(
                format!(
                    "the arguments of {server}'s tool {tool} are not a JSON object but {}",
                    match other {
                        Value::Array(_) => "an array",
                        Value::String(_) => "a string",
                        Value::Number(_) => "a number",
                        _ => "a boolean",
                    }
                ),
                decline,
            );
        }
    };
    let name = format!("mcp__{server}__{tool}");
    // An elicitation has no item: the gate's request id is made
    // from what identifies the call.
    let item = format!(
        "mcp-{}",
        super::short_hash(&format!(
            "{}\n{}\n{name}\n{}",
            thread_id,
            turn.as_deref().unwrap_or_default(),
            Value::Object(args.clone())
        ))
    );
    Ok(Ask {
        thread: thread_id,
        turn,
        item,
        tool: name.clone(),
        args,
        reason: text(params, "message"),
        capabilities: Vec::new(),
        kind: Kind::McpTool,
        shown: name,
        outside_sandbox: false,
    })
}

/// Every path a file change writes: each change's `path`, and the
/// `move_path` an update moves the file to. A change lev cannot read (no
/// path, an unknown kind, a move without a path) fails the whole list: a
/// policy rule on `/files` must see every file, or the call is not gated.
fn changed_files(changes: &Value) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    for change in changes.as_array().into_iter().flatten() {
        let Some(path) = change
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
        else {
            return Err(format!("a change names no path: {change}"));
        };
        files.push(path.to_owned());
        let kind = change.get("kind").unwrap_or(&Value::Null);
        match kind.get("type").and_then(Value::as_str) {
            Some("add" | "delete") => {}
            // Codex's versions spell the move `move_path` or `movePath`.
            Some("update") => {
                for key in ["move_path", "movePath"] {
                    match kind.get(key) {
                        None | Some(Value::Null) => {}
                        Some(Value::String(to)) if !to.is_empty() => files.push(to.clone()),
                        Some(other) => {
                            return Err(format!("the move of {path} names no path but {other}"));
                        }
                    }
                }
            }
            _ => return Err(format!("the change of {path} is of an unknown kind {kind}")),
        }
    }
    Ok(files)
}

/// The tool named in an MCP approval's message (`... run tool "NAME"?`).
fn quoted_tool(params: &Value) -> Option<String> {
    let message = params.get("message")?.as_str()?;
    let start = message.find("tool \"")? + "tool \"".len();
    let rest = &message[start..];
    let end = rest.find('"')?;
    Some(rest[..end].to_owned()).filter(|t| !t.is_empty())
}

/// The execpolicy amendment Codex offers in `availableDecisions`, if any.
fn offered_amendment(params: &Value) -> Option<Vec<String>> {
    let offered = params
        .get("availableDecisions")?
        .as_array()?
        .iter()
        .find_map(|d| d.get("acceptWithExecpolicyAmendment"))?
        .get("execpolicy_amendment")?
        .as_array()?
        .iter()
        .map(|w| w.as_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()?;
    Some(offered).filter(|a| !a.is_empty())
}

/// What lev answers Codex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Run it once.
    Accept,
    /// Run it, and let Codex stop asking about it for the session.
    AcceptForSession,
    /// Run it, and add Codex's prefix rule for good (`--codex-rules`).
    AcceptWithAmendment(Vec<String>),
    /// Do not run it; the turn goes on.
    Decline,
    /// Do not run it, and end the turn.
    Cancel,
}

impl Reply {
    /// The JSON result for a request of `kind`.
    pub fn to_json(&self, kind: &Kind) -> Value {
        match kind {
            Kind::Command { .. } => match self {
                Self::Accept => json!({"decision": "accept"}),
                Self::AcceptForSession => json!({"decision": "acceptForSession"}),
                Self::AcceptWithAmendment(rule) => json!({"decision": {
                    "acceptWithExecpolicyAmendment": {"execpolicy_amendment": rule}
                }}),
                Self::Decline => json!({"decision": "decline"}),
                Self::Cancel => json!({"decision": "cancel"}),
            },
            Kind::FileChange => match self {
                Self::Accept => json!({"decision": "accept"}),
                Self::AcceptForSession | Self::AcceptWithAmendment(_) => {
                    json!({"decision": "acceptForSession"})
                }
                Self::Decline => json!({"decision": "decline"}),
                Self::Cancel => json!({"decision": "cancel"}),
            },
            Kind::McpTool => match self {
                Self::Accept | Self::AcceptForSession | Self::AcceptWithAmendment(_) => {
                    json!({"action": "accept", "content": {}})
                }
                Self::Decline => json!({"action": "decline"}),
                Self::Cancel => json!({"action": "cancel"}),
            },
        }
    }

    /// How the terminal names it.
    pub fn word(&self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::AcceptForSession => "acceptForSession",
            Self::AcceptWithAmendment(_) => "acceptWithExecpolicyAmendment",
            Self::Decline => "decline",
            Self::Cancel => "cancel",
        }
    }
}

/// What an approver's edit of a call comes to: what the model is told to
/// run instead, and the args that re-issued call will have.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    /// The args lev will see when the model makes the edited call: a one-shot
    /// approval holds only for exactly these.
    pub expected: Map<String, Value>,
    /// What to tell the model to run instead.
    pub instruction: String,
    /// Whether `expected` is the signed edit itself: only then does the
    /// re-issued call run without asking again (lev's policy judged exactly
    /// those args); otherwise it is asked about again.
    pub exact: bool,
}

/// The edit `edited` (the signed `modified_args_json`) of a call `ask`.
///
/// For `codex.exec` the command that runs is the edited `command` when it
/// changed, else the edited `argv` joined back into a command line, in the
/// edited `cwd` (or the original one).
///
/// # Errors
/// An edit that is not a JSON object, or a `codex.exec` edit without a
/// command or argv of strings.
pub fn edit_of(ask: &Ask, edited: &str) -> Result<Edit, String> {
    let Ok(Value::Object(edited)) = serde_json::from_str::<Value>(edited) else {
        return Err("the edit is not a JSON object".to_owned());
    };
    let shell = match &ask.kind {
        Kind::Command { shell, .. } if ask.tool == EXEC => shell.clone(),
        _ => {
            let exact = true;
            return Ok(Edit {
                instruction: format!(
                    "Make exactly this call to {} instead:\n{}",
                    ask.tool,
                    Value::Object(edited.clone())
                ),
                expected: edited,
                exact,
            });
        }
    };
    let (command, cwd) = exec_edit(&ask.args, &edited)?;
    let expected = exec_args(&ShellCommand::from_script(&command, &shell), &cwd);
    let exact = expected == edited;
    Ok(Edit {
        instruction: format!("Run exactly this command instead, in {cwd}:\n{command}"),
        expected,
        exact,
    })
}

/// The command and cwd an edit of `codex.exec` args runs.
///
/// # Errors
/// An edit with neither a string command nor an argv of strings, or a cwd
/// that is not a string.
pub fn exec_edit(
    original: &Map<String, Value>,
    edited: &Map<String, Value>,
) -> Result<(String, String), String> {
    let original_command = original
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let edited_command = match edited.get("command") {
        None => None,
        Some(Value::String(c)) => Some(c.as_str()),
        Some(other) => return Err(format!("its \"command\" is not a string but {other}")),
    };
    let edited_argv = match edited.get("argv") {
        None => None,
        Some(Value::Array(words)) => Some(
            words
                .iter()
                .map(|w| w.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or("its \"argv\" holds something that is not a string")?,
        ),
        Some(other) => return Err(format!("its \"argv\" is not an array but {other}")),
    };
    let command = match (edited_command, edited_argv) {
        (Some(c), _) if c != original_command => c.to_owned(),
        (_, Some(argv)) if Some(&json!(argv)) != original.get("argv") => {
            if argv.is_empty() {
                return Err("its \"argv\" is empty".to_owned());
            }
            join(&argv)
        }
        (Some(c), _) => c.to_owned(),
        (None, None) => return Err("it has neither \"command\" nor \"argv\"".to_owned()),
        (None, Some(_)) => original_command.to_owned(),
    };
    if command.trim().is_empty() {
        return Err("its command is empty".to_owned());
    }
    let cwd = match edited.get("cwd") {
        None | Some(Value::Null) => original
            .get("cwd")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        Some(Value::String(c)) => c.clone(),
        Some(other) => return Err(format!("its \"cwd\" is not a string but {other}")),
    };
    Ok((command, cwd))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command_approval(command: &str) -> Value {
        json!({
            "kind": "command", "threadId": "th", "turnId": "tu", "itemId": "call_1",
            "startedAtMs": 1, "environmentId": "local", "reason": "Need to write outside",
            "command": command, "cwd": "/ws",
            "commandActions": [{"type": "unknown", "command": "x"}],
            "proposedExecpolicyAmendment": ["touch", "../x"],
            "availableDecisions": ["accept", {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch", "../x"]}}, "cancel"]
        })
    }

    fn ask(mapping: Mapping) -> Ask {
        match mapping {
            Mapping::Ask(ask) => *ask,
            Mapping::Unmappable(u) => panic!("unmappable: {}", u.why),
        }
    }

    #[test]
    fn a_command_approval_is_codex_exec_with_the_inner_argv() {
        let a = ask(map_request(
            "item/commandExecution/requestApproval",
            &command_approval("/bin/bash -lc 'rm -rf build'"),
            |_| None,
        ));
        assert_eq!(a.tool, EXEC);
        assert_eq!(
            Value::Object(a.args.clone()),
            json!({"command": "rm -rf build", "argv": ["rm", "-rf", "build"], "cwd": "/ws"})
        );
        assert_eq!(
            (a.thread.as_str(), a.turn.as_deref(), a.item.as_str()),
            ("th", Some("tu"), "call_1")
        );
        assert_eq!(a.reason.as_deref(), Some("Need to write outside"));
        assert_eq!(a.capabilities, ["proc-exec"]);
        // The model's justification: it asked to run outside the sandbox.
        assert!(a.outside_sandbox);
        let mut plain = command_approval("/bin/bash -lc 'cargo test'");
        plain["reason"] = Value::Null;
        let plain = ask(map_request(
            "item/commandExecution/requestApproval",
            &plain,
            |_| None,
        ));
        assert!(!plain.outside_sandbox);
        assert_eq!(
            a.kind,
            Kind::Command {
                shell: "/bin/bash".into(),
                amendment: Some(vec!["touch".into(), "../x".into()])
            }
        );
        assert_eq!(
            Reply::AcceptForSession.to_json(&a.kind),
            json!({"decision": "acceptForSession"})
        );
        assert_eq!(
            Reply::AcceptWithAmendment(vec!["touch".into()]).to_json(&a.kind),
            json!({"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch"]}}})
        );
    }

    #[test]
    fn the_request_id_is_the_item_and_each_callback_of_one_item_its_own() {
        let a = ask(map_request(
            "item/commandExecution/requestApproval",
            &command_approval("/bin/bash -lc ls"),
            |_| None,
        ));
        assert_eq!(a.item, "call_1");
        // A zsh-forked shell asks about each subcommand of one item, each
        // with its own approvalId: each is its own gate call.
        let mut params = command_approval("/bin/bash -lc ls");
        params["approvalId"] = json!("0c9d6f1e-5b7a-4d2e-9f3a-1b2c3d4e5f60");
        let a = ask(map_request(
            "item/commandExecution/requestApproval",
            &params,
            |_| None,
        ));
        assert_eq!(a.item, "call_1:0c9d6f1e-5b7a-4d2e-9f3a-1b2c3d4e5f60");
    }

    #[test]
    fn a_compound_command_reads_as_its_shell() {
        let a = ask(map_request(
            "item/commandExecution/requestApproval",
            &command_approval("/bin/bash -lc 'ls && rm -rf ~'"),
            |_| None,
        ));
        assert_eq!(a.args["argv"], json!(["bash", "-c", "ls && rm -rf ~"]));
    }

    #[test]
    fn a_file_change_carries_the_diff_seen_when_it_started() {
        let params = json!({"threadId": "th", "turnId": "tu", "itemId": "call_p", "startedAtMs": 1, "reason": null, "grantRoot": null});
        let changes = json!([{"path": "/ws/a.txt", "kind": {"type": "add"}, "diff": "hello\n"}]);
        let a = ask(map_request(
            "item/fileChange/requestApproval",
            &params,
            |item| (item == "call_p").then(|| changes.clone()),
        ));
        assert_eq!(a.tool, APPLY_PATCH);
        assert_eq!(
            Value::Object(a.args.clone()),
            json!({"files": ["/ws/a.txt"], "changes": changes})
        );
        assert_eq!(a.shown, "edit /ws/a.txt");
        assert!(!a.outside_sandbox);
        let mut wider = params.clone();
        wider["grantRoot"] = json!("/");
        let a = ask(map_request(
            "item/fileChange/requestApproval",
            &wider,
            |_| Some(changes.clone()),
        ));
        assert!(a.outside_sandbox);
        assert_eq!(
            Reply::Accept.to_json(&a.kind),
            json!({"decision": "accept"})
        );

        // A move writes the file it moves to: both are gated.
        let moved = json!([{"path": "/ws/a.txt", "kind": {"type": "update", "move_path": "/ws/.codex/config.toml"}, "diff": "x"}]);
        let a = ask(map_request(
            "item/fileChange/requestApproval",
            &params,
            |_| Some(moved.clone()),
        ));
        assert_eq!(
            a.args["files"],
            json!(["/ws/a.txt", "/ws/.codex/config.toml"])
        );
        let camel = json!([{"path": "/ws/a.txt", "kind": {"type": "update", "movePath": "/ws/b.txt"}, "diff": "x"}]);
        let a = ask(map_request(
            "item/fileChange/requestApproval",
            &params,
            |_| Some(camel.clone()),
        ));
        assert_eq!(a.args["files"], json!(["/ws/a.txt", "/ws/b.txt"]));
        // A change lev cannot read is not left out of the files: the whole
        // request is declined.
        for unreadable in [
            json!([{"path": "/ws/a.txt", "kind": {"type": "add"}, "diff": ""}, {"kind": {"type": "add"}, "diff": "x"}]),
            json!([{"path": "/ws/a.txt", "kind": {"type": "rename"}, "diff": ""}]),
            json!([{"path": "/ws/a.txt", "kind": {"type": "update", "move_path": 7}, "diff": ""}]),
            json!([{"path": "", "kind": {"type": "add"}, "diff": ""}]),
        ] {
            let Mapping::Unmappable(u) =
                map_request("item/fileChange/requestApproval", &params, |_| {
                    Some(unreadable.clone())
                })
            else {
                panic!("mapped changes lev cannot read: {unreadable}");
            };
            assert_eq!(u.reply, Some(json!({"decision": "decline"})));
        }

        // Without the diff it is declined, never accepted.
        let Mapping::Unmappable(u) =
            map_request("item/fileChange/requestApproval", &params, |_| None)
        else {
            panic!("mapped a patch lev never saw");
        };
        assert_eq!(u.reply, Some(json!({"decision": "decline"})));
        assert!(u.why.contains("did not see the changes"), "{}", u.why);
    }

    #[test]
    fn an_mcp_tool_approval_is_the_tool_by_name() {
        let params = json!({
            "serverName": "github", "threadId": "th", "turnId": "tu", "mode": "form",
            "message": "Allow the github MCP server to run tool \"create_issue\"?",
            "requestedSchema": {"type": "object", "properties": {}},
            "_meta": {"codex_approval_kind": "mcp_tool_call", "tool_params": {"title": "x"}, "persist": ["session", "always"]}
        });
        let a = ask(map_request(
            "mcpServer/elicitation/request",
            &params,
            |_| None,
        ));
        assert_eq!(a.tool, "mcp__github__create_issue");
        assert_eq!(Value::Object(a.args.clone()), json!({"title": "x"}));
        assert!(a.item.starts_with("mcp-"));
        assert_eq!(
            Reply::Accept.to_json(&a.kind),
            json!({"action": "accept", "content": {}})
        );
        assert_eq!(Reply::Cancel.to_json(&a.kind), json!({"action": "cancel"}));

        // Arguments that are not an object are not an MCP call lev can show.
        let mut odd = params.clone();
        odd["_meta"]["tool_params"] = json!(["x"]);
        let Mapping::Unmappable(u) = map_request("mcpServer/elicitation/request", &odd, |_| None)
        else {
            panic!("mapped arguments that are not an object");
        };
        assert_eq!(u.reply, Some(json!({"action": "decline"})));

        let mut plain = params.clone();
        plain["_meta"] = json!(null);
        let Mapping::Unmappable(u) = map_request("mcpServer/elicitation/request", &plain, |_| None)
        else {
            panic!("a plain elicitation is not a tool call");
        };
        assert_eq!(u.reply, Some(json!({"action": "decline"})));
    }

    #[test]
    fn what_lev_cannot_gate_is_declined_or_refused() {
        let mut other_kind = command_approval("/bin/bash -lc ls");
        other_kind["kind"] = json!("writeStdin");
        for (method, params, reply) in [
            (
                "item/commandExecution/requestApproval",
                other_kind,
                Some(json!({"decision": "decline"})),
            ),
            (
                "item/permissions/requestApproval",
                json!({"threadId": "t", "turnId": "u", "itemId": "i"}),
                Some(json!({"permissions": {}, "scope": "turn"})),
            ),
            ("item/tool/requestUserInput", json!({"threadId": "t"}), None),
            (
                "item/commandExecution/requestApproval",
                json!({"turnId": "u"}),
                None,
            ),
        ] {
            let Mapping::Unmappable(u) = map_request(method, &params, |_| None) else {
                panic!("{method} mapped");
            };
            assert_eq!(u.reply, reply, "{method}: {}", u.why);
        }
    }

    #[test]
    fn an_edit_names_the_command_to_run_and_whether_it_is_exact() {
        let a = ask(map_request(
            "item/commandExecution/requestApproval",
            &command_approval("/bin/bash -lc 'rm -rf build'"),
            |_| None,
        ));
        // The whole consistent edit: exact.
        let e = edit_of(
            &a,
            r#"{"command":"rm -rf build/tmp","argv":["rm","-rf","build/tmp"],"cwd":"/ws"}"#,
        )
        .unwrap();
        assert!(e.exact);
        assert_eq!(
            e.instruction,
            "Run exactly this command instead, in /ws:\nrm -rf build/tmp"
        );
        // Only the command changed, the argv stale: runs the command, but is asked again.
        let e = edit_of(
            &a,
            r#"{"command":"rm -rf build/tmp","argv":["rm","-rf","build"],"cwd":"/ws"}"#,
        )
        .unwrap();
        assert!(!e.exact);
        assert_eq!(e.expected["argv"], json!(["rm", "-rf", "build/tmp"]));
        // Only the argv changed: the command is its words joined.
        let e = edit_of(
            &a,
            r#"{"command":"rm -rf build","argv":["rm","-rf","build dir"],"cwd":"/ws"}"#,
        )
        .unwrap();
        assert_eq!(e.expected["command"], json!("rm -rf 'build dir'"));
        // No argv at all: runs the command, asked again.
        let e = edit_of(&a, r#"{"command":"ls"}"#).unwrap();
        assert!(!e.exact);
        assert_eq!(e.expected["cwd"], json!("/ws"));
        for bad in [
            "[1]",
            "{}",
            r#"{"command":3}"#,
            r#"{"argv":[1]}"#,
            r#"{"command":" "}"#,
            r#"{"command":"ls","cwd":1}"#,
        ] {
            assert!(edit_of(&a, bad).is_err(), "{bad}");
        }
    }
}
