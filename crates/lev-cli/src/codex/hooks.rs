//! Codex's command hooks: the events `lev hook codex` answers, what it
//! prints, and the `config.toml` block `lev codex install-hooks` writes.
//!
//! Codex (0.171) takes Claude Code's hook input, but acts on less of the
//! output: a PreToolUse hook may only block (`permissionDecision: deny`, or
//! exit 2) or rewrite (`allow` with `updatedInput`); an `allow` without
//! `updatedInput`, an `ask`, a timeout or output it does not understand are
//! ignored and the command runs. A PermissionRequest hook may allow (without
//! `updatedInput`) or deny. So lev stays silent on an approve, rewrites on an
//! edit, blocks on a deny, and blocks when it cannot decide (fail-closed)
//! unless told to fail open.
//!
//! Hooks run only once trusted: `[hooks.state."<file>:<event>:<group>:<handler>"]`
//! `trusted_hash = "sha256:<hex>"`, the hash of the hook's normalized
//! definition ([`trust_hash`]).

use std::path::Path;

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use super::approval::{APPLY_PATCH, EXEC, exec_args, exec_edit};
use super::shell::ShellCommand;

/// The events `lev hook codex` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventName {
    /// Before every tool call.
    PreToolUse,
    /// When Codex would ask for approval.
    PermissionRequest,
}

impl EventName {
    /// The wire name (`PreToolUse`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PermissionRequest => "PermissionRequest",
        }
    }

    /// The name in trust keys and hashes (`pre_tool_use`).
    pub fn snake(self) -> &'static str {
        match self {
            Self::PreToolUse => "pre_tool_use",
            Self::PermissionRequest => "permission_request",
        }
    }
}

/// A Codex hook event, as a command hook reads it on stdin.
#[derive(Debug, Clone, PartialEq)]
pub struct HookEvent {
    /// PreToolUse or PermissionRequest.
    pub name: EventName,
    /// Codex's session (its thread): lev's session and conversation.
    pub session_id: String,
    /// The working directory.
    pub cwd: Option<String>,
    /// `Bash`, `apply_patch`, or an MCP tool (`mcp__server__tool`).
    pub tool_name: String,
    /// The tool's input (`{"command": ...}` for Bash and apply_patch).
    pub tool_input: Map<String, Value>,
    /// The tool call's id (PreToolUse only).
    pub tool_use_id: Option<String>,
    /// Codex's permission mode (`default`, `bypassPermissions` under `codex exec`).
    pub permission_mode: Option<String>,
}

/// Read one hook event.
///
/// # Errors
/// What is wrong: not JSON, no event name, an event lev does not answer, a
/// missing or mistyped field.
pub fn parse_event(bytes: &[u8]) -> Result<HookEvent, String> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("malformed hook event: expected one JSON object, {e}"))?;
    let Value::Object(mut object) = value else {
        return Err("malformed hook event: expected one JSON object".to_owned());
    };
    let name = match object.get("hook_event_name").and_then(Value::as_str) {
        Some("PreToolUse") => EventName::PreToolUse,
        Some("PermissionRequest") => EventName::PermissionRequest,
        Some(other) => {
            return Err(format!(
                "unsupported hook event {other:?}: lev answers PreToolUse and PermissionRequest\nhint: register `lev hook codex` under those two events only (lev codex install-hooks does)"
            ));
        }
        None => {
            return Err("malformed hook event: expected a string `hook_event_name`".to_owned());
        }
    };
    let event = name.as_str();
    let mut string = |key: &str, required: bool| -> Result<Option<String>, String> {
        match object.remove(key) {
            Some(Value::String(s)) => Ok(Some(s)),
            None | Some(Value::Null) if !required => Ok(None),
            None | Some(Value::Null) => {
                Err(format!("malformed {event} event: missing field `{key}`"))
            }
            Some(other) => Err(format!(
                "malformed {event} event: expected `{key}` to be a string, found {other}"
            )),
        }
    };
    let session_id = string("session_id", true)?.unwrap_or_default();
    let tool_name = string("tool_name", true)?.unwrap_or_default();
    let cwd = string("cwd", false)?;
    let tool_use_id = string("tool_use_id", false)?;
    let permission_mode = string("permission_mode", false)?;
    let tool_input = match object.remove("tool_input") {
        Some(Value::Object(input)) => input,
        None => {
            return Err(format!(
                "malformed {event} event: missing field `tool_input`"
            ));
        }
        Some(other) => {
            return Err(format!(
                "malformed {event} event: expected `tool_input` to be an object, found {other}"
            ));
        }
    };
    Ok(HookEvent {
        name,
        session_id,
        cwd,
        tool_name,
        tool_input,
        tool_use_id,
        permission_mode,
    })
}

/// A hook event as a lev tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct HookCall {
    /// lev's tool name: `codex.exec`, `codex.apply_patch`, or the MCP tool's.
    pub tool: String,
    /// lev's args.
    pub args: Map<String, Value>,
    /// The model's justification (PermissionRequest's `description`).
    pub reason: Option<String>,
    /// Capabilities the call needs.
    pub capabilities: Vec<String>,
    /// The event's working directory.
    pub cwd: String,
}

/// The files an `apply_patch` patch touches (`*** Add File: x` and the
/// like), resolved against `cwd`.
pub fn patch_files(patch: &str, cwd: &str) -> Vec<String> {
    const HEADERS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    patch
        .lines()
        // Codex reads a header with padding around it (it trims the line),
        // so lev does too: a padded header's file is not left out.
        .filter_map(|line| HEADERS.iter().find_map(|h| line.trim().strip_prefix(h)))
        .map(|path| {
            let path = path.trim();
            if path.starts_with('/') || cwd.is_empty() {
                path.to_owned()
            } else {
                format!("{}/{path}", cwd.trim_end_matches('/'))
            }
        })
        .collect()
}

/// The call an event asks about. `shell` runs Codex's commands (for the
/// argv of a compound command).
///
/// # Errors
/// A Bash or apply_patch event without a string `command`.
pub fn call_of(event: &HookEvent, shell: &str) -> Result<HookCall, String> {
    let cwd = event.cwd.clone().unwrap_or_default();
    let command = || {
        event
            .tool_input
            .get("command")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                format!(
                    "malformed {} event: expected tool_input.command to be a string for {}",
                    event.name.as_str(),
                    event.tool_name
                )
            })
    };
    let reason = event
        .tool_input
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .filter(|d| !d.is_empty());
    Ok(match event.tool_name.as_str() {
        "Bash" => HookCall {
            tool: EXEC.to_owned(),
            args: exec_args(&ShellCommand::from_script(&command()?, shell), &cwd),
            reason,
            capabilities: vec!["proc-exec".to_owned()],
            cwd,
        },
        "apply_patch" => {
            let patch = command()?;
            let mut args = Map::new();
            args.insert("files".into(), json!(patch_files(&patch, &cwd)));
            args.insert("patch".into(), json!(patch));
            HookCall {
                tool: APPLY_PATCH.to_owned(),
                args,
                reason,
                capabilities: vec!["fs-write".to_owned()],
                cwd,
            }
        }
        other => HookCall {
            tool: other.to_owned(),
            args: event.tool_input.clone(),
            reason,
            capabilities: Vec::new(),
            cwd,
        },
    })
}

/// What the hook does about a call lev approved with `edited` args
/// (`updated_input` of the verdict): the tool input to run, or why it must
/// not run.
///
/// A rewrite runs at once, without lev seeing it again, so it must be
/// exactly what lev's policy judged: the edit's `argv` the words of its
/// command, its `files` those of its patch, its `cwd` unchanged.
///
/// # Errors
/// An edit that cannot be handed to Codex as it was signed.
pub fn rewrite(call: &HookCall, edited: &Value, shell: &str) -> Result<Value, String> {
    let Value::Object(edited) = edited else {
        return Err("the edit is not a JSON object".to_owned());
    };
    match call.tool.as_str() {
        EXEC => {
            let (command, cwd) = exec_edit(&call.args, edited)?;
            if Some(&json!(cwd)) != call.args.get("cwd") {
                return Err(format!(
                    "it moves the command to {cwd}, and a Codex hook can only change the command, not its directory"
                ));
            }
            if &exec_args(&ShellCommand::from_script(&command, shell), &cwd) != edited {
                return Err(format!(
                    "its argv is not the words of its command `{command}` (lev's policy judged the argv, so lev runs a command only with its own argv)"
                ));
            }
            Ok(json!({"command": command}))
        }
        APPLY_PATCH => {
            let patch = edited
                .get("patch")
                .and_then(Value::as_str)
                .ok_or("it has no \"patch\" string")?;
            if edited.get("files") != Some(&json!(patch_files(patch, &call.cwd))) {
                return Err(
                    "its files are not those its patch touches (lev's policy judged the files)"
                        .to_owned(),
                );
            }
            // Codex gets the patch alone: an edit with more in it is not
            // the call Codex would run.
            if let Some(extra) = edited
                .keys()
                .find(|k| !matches!(k.as_str(), "files" | "patch"))
            {
                return Err(format!(
                    "it adds {extra:?}, which Codex's apply_patch does not take (lev's policy judged it)"
                ));
            }
            Ok(json!({"command": patch}))
        }
        _ => Ok(Value::Object(edited.clone())),
    }
}

/// The output for `event` when lev allows the call as it is: nothing (Codex
/// runs it) for PreToolUse, an allow without `updatedInput` for
/// PermissionRequest.
pub fn allow_output(event: EventName) -> Option<Value> {
    match event {
        EventName::PreToolUse => None,
        EventName::PermissionRequest => Some(json!({"hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow"},
        }})),
    }
}

/// The output that rewrites a PreToolUse call to `input`.
pub fn rewrite_output(input: Value) -> Value {
    json!({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": input,
    }})
}

/// The output that blocks the call, `message` for the model.
pub fn deny_output(event: EventName, message: &str) -> Value {
    match event {
        EventName::PreToolUse => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": message,
        }}),
        EventName::PermissionRequest => json!({"hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": message},
        }}),
    }
}

/// Codex's trust hash of a command hook: `sha256:` and the hex SHA-256 of
/// the compact, key-sorted JSON of its normalized definition.
pub fn trust_hash(event: EventName, matcher: Option<&str>, command: &str, timeout: u64) -> String {
    let mut identity = Map::new();
    identity.insert("event_name".into(), json!(event.snake()));
    identity.insert(
        "hooks".into(),
        json!([{
            "async": false,
            "command": command,
            "timeout": timeout.max(1),
            "type": "command",
        }]),
    );
    if let Some(matcher) = matcher {
        identity.insert("matcher".into(), json!(matcher));
    }
    // serde_json's map is sorted by key: the canonical form Codex hashes.
    let text = Value::Object(identity).to_string();
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The first line of lev's block in `config.toml`.
pub const BLOCK_BEGIN: &str =
    "# >>> lev codex install-hooks (managed by lev: run it again to change this block) >>>";
/// The last line of lev's block.
pub const BLOCK_END: &str = "# <<< lev codex install-hooks <<<";

/// One hook lev installs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// Its event.
    pub event: EventName,
    /// The command Codex runs.
    pub command: String,
    /// Codex's timeout for it, in seconds.
    pub timeout: u64,
    /// Its trust key.
    pub key: String,
    /// Its trust hash.
    pub hash: String,
}

/// `config.toml`'s text with lev's hooks in it (in place of an earlier
/// block of lev's), and what they are.
///
/// # Errors
/// A file that is not TOML, half a block of lev's, hooks defined in a shape
/// lev cannot append to, a trust entry for lev's key outside lev's block.
pub fn install(
    config_path: &Path,
    existing: &str,
    hooks: &[(EventName, String, u64)],
) -> Result<(String, Vec<Installed>), String> {
    let rest = without_block(existing)?;
    let table: toml::Table = rest
        .parse()
        .map_err(|e| format!("{} is not valid TOML: {e}", config_path.display()))?;
    let hooks_table = table.get("hooks");
    let path = config_path.display().to_string();
    let mut block = vec![BLOCK_BEGIN.to_owned()];
    let mut state = Vec::new();
    let mut installed = Vec::new();
    let mut next_group: std::collections::HashMap<EventName, usize> = Default::default();
    for (event, command, timeout) in hooks {
        let group = match next_group.get(event) {
            Some(n) => *n,
            None => match hooks_table.and_then(|h| h.get(event.as_str())) {
                None => 0,
                Some(toml::Value::Array(groups)) => groups.len(),
                Some(_) => {
                    return Err(format!(
                        "{path} defines hooks.{} as something other than an array of tables; lev cannot add its hook after it",
                        event.as_str()
                    ));
                }
            },
        };
        next_group.insert(*event, group + 1);
        let key = format!("{path}:{}:{group}:0", event.snake());
        if hooks_table
            .and_then(|h| h.get("state"))
            .and_then(|s| s.get(&key))
            .is_some()
        {
            return Err(format!(
                "{path} already has a trust entry [hooks.state.\"{key}\"] outside lev's block{}remove that entry (it belongs to the hook at that place), then run lev codex install-hooks again",
                crate::report::HINT
            ));
        }
        let hash = trust_hash(*event, None, command, *timeout);
        block.push(format!("[[hooks.{}]]", event.as_str()));
        block.push(format!("[[hooks.{}.hooks]]", event.as_str()));
        block.push("type = \"command\"".to_owned());
        block.push(format!("command = {}", toml_string(command)));
        block.push(format!("timeout = {timeout}"));
        block.push(String::new());
        state.push(format!("[hooks.state.{}]", toml_string(&key)));
        state.push(format!("trusted_hash = {}", toml_string(&hash)));
        state.push(String::new());
        installed.push(Installed {
            event: *event,
            command: command.clone(),
            timeout: *timeout,
            key,
            hash,
        });
    }
    block.extend(state);
    block.push(BLOCK_END.to_owned());
    let mut text = rest.trim_end().to_owned();
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&block.join("\n"));
    text.push('\n');
    // The result must read back with lev's hooks where the keys say.
    let check: toml::Table = text.parse().map_err(|e| {
        format!("adding lev's hooks to {path} would not make valid TOML ({e}); it was not changed")
    })?;
    for hook in &installed {
        let group: usize = hook
            .key
            .rsplit(':')
            .nth(1)
            .and_then(|g| g.parse().ok())
            .unwrap_or_default();
        let found = check
            .get("hooks")
            .and_then(|h| h.get(hook.event.as_str()))
            .and_then(|g| g.get(group))
            .and_then(|g| g.get("hooks"))
            .and_then(|h| h.get(0))
            .and_then(|h| h.get("command"))
            .and_then(toml::Value::as_str);
        if found != Some(hook.command.as_str()) {
            return Err(format!(
                "{path} defines its {} hooks in a way lev cannot append to; it was not changed",
                hook.event.as_str()
            ));
        }
    }
    Ok((text, installed))
}

/// `text` less lev's block.
fn without_block(text: &str) -> Result<String, String> {
    let Some(begin) = text.find(BLOCK_BEGIN) else {
        return Ok(text.to_owned());
    };
    let Some(end) = text[begin..]
        .find(BLOCK_END)
        .map(|e| begin + e + BLOCK_END.len())
    else {
        return Err(format!(
            "config.toml holds the start of lev's block ({BLOCK_BEGIN:?}) but not its end; fix or remove it by hand"
        ));
    };
    let after = text[end..].strip_prefix('\n').unwrap_or(&text[end..]);
    Ok(format!("{}{}", &text[..begin], after))
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    // JSON's string escapes are TOML's, but for DEL, which TOML wants escaped.
    Value::String(s.to_owned())
        .to_string()
        .replace('\u{7f}', "\\u007F")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trust_hash_is_codexs() {
        // A hook Codex 0.171's `hooks/list` reported trusted with this hash.
        assert_eq!(
            trust_hash(
                EventName::PreToolUse,
                Some("Bash"),
                "python3 /work/scratch/codex/hooks/hook.py deny-json",
                10
            ),
            "sha256:fdd11428f07d2734ce44cf31b9dfee4c4ee58bd2c56c12d192afe99fbc11db92"
        );
    }

    #[test]
    fn events_parse_as_codex_sends_them() {
        let event = parse_event(br#"{"session_id":"s1","turn_id":"t","transcript_path":"/x","cwd":"/ws","hook_event_name":"PreToolUse","model":"gpt-5.5","permission_mode":"bypassPermissions","tool_name":"Bash","tool_input":{"command":"echo hi"},"tool_use_id":"call_h1"}"#).unwrap();
        assert_eq!(event.name, EventName::PreToolUse);
        assert_eq!(event.tool_use_id.as_deref(), Some("call_h1"));
        let call = call_of(&event, "/bin/bash").unwrap();
        assert_eq!(call.tool, EXEC);
        assert_eq!(
            Value::Object(call.args),
            json!({"command": "echo hi", "argv": ["echo", "hi"], "cwd": "/ws"})
        );

        let event = parse_event(br#"{"session_id":"s1","cwd":"/ws","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"touch ../x && echo y","description":"why"}}"#).unwrap();
        let call = call_of(&event, "/bin/bash").unwrap();
        assert_eq!(call.reason.as_deref(), Some("why"));
        assert_eq!(
            call.args["argv"],
            json!(["bash", "-c", "touch ../x && echo y"])
        );

        let event = parse_event(br#"{"session_id":"s","cwd":"/ws","hook_event_name":"PreToolUse","tool_name":"apply_patch","tool_input":{"command":"*** Begin Patch\n*** Add File: a/b.txt\n+hi\n*** Update File: /abs/c\n*** End Patch\n"}}"#).unwrap();
        let call = call_of(&event, "sh").unwrap();
        assert_eq!(call.tool, APPLY_PATCH);
        assert_eq!(call.args["files"], json!(["/ws/a/b.txt", "/abs/c"]));
        // Padded headers are headers to Codex, and so to lev.
        let padded = "*** Begin Patch\n  *** Add File: .codex/config.toml\n+x\n\t*** Update File: a\n *** Move to: /abs/b \n@@\n-x\n+y\n*** End Patch\n";
        assert_eq!(
            patch_files(padded, "/ws"),
            ["/ws/.codex/config.toml", "/ws/a", "/abs/b"]
        );

        for (bad, says) in [
            (&b"nope"[..], "expected one JSON object"),
            (br#"{"hook_event_name":"PostToolUse"}"#, "unsupported hook event \"PostToolUse\""),
            (br#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{}}"#, "missing field `session_id`"),
            (br#"{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Bash"}"#, "missing field `tool_input`"),
            (br#"{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Bash","tool_input":[]}"#, "expected `tool_input` to be an object"),
        ] {
            let e = parse_event(bad).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_rewrite_is_exactly_what_was_signed() {
        let event = parse_event(br#"{"session_id":"s","cwd":"/ws","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf build"}}"#).unwrap();
        let call = call_of(&event, "bash").unwrap();
        assert_eq!(
            rewrite(
                &call,
                &json!({"command": "rm -rf build/tmp", "argv": ["rm", "-rf", "build/tmp"], "cwd": "/ws"}),
                "bash"
            ),
            Ok(json!({"command": "rm -rf build/tmp"}))
        );
        // An edit of the argv alone leaves its command stale: what would run
        // is not what lev's policy read as the command.
        assert!(
            rewrite(
                &call,
                &json!({"command": "rm -rf build", "argv": ["rm", "-rf", "a b"], "cwd": "/ws"}),
                "bash"
            )
            .unwrap_err()
            .contains("its argv is not the words of its command `rm -rf 'a b'`")
        );
        let patch_event = parse_event(br#"{"session_id":"s","cwd":"/ws","hook_event_name":"PreToolUse","tool_name":"apply_patch","tool_input":{"command":"*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"}}"#).unwrap();
        let patch_call = call_of(&patch_event, "sh").unwrap();
        let edited_patch = "*** Begin Patch\n*** Add File: b.txt\n+hi\n*** End Patch\n";
        assert_eq!(
            rewrite(
                &patch_call,
                &json!({"files": ["/ws/b.txt"], "patch": edited_patch}),
                "sh"
            ),
            Ok(json!({"command": edited_patch}))
        );
        assert!(
            rewrite(
                &patch_call,
                &json!({"files": ["/ws/a.txt"], "patch": edited_patch}),
                "sh"
            )
            .is_err()
        );
        // More than Codex takes (found by the codex fuzz target): the policy
        // judged keys Codex never sees.
        assert!(
            rewrite(
                &patch_call,
                &json!({"files": ["/ws/b.txt"], "patch": edited_patch, "mode": "form"}),
                "sh"
            )
            .is_err()
        );
        for bad in [
            json!({"command": "rm -rf /", "argv": ["ls"], "cwd": "/ws"}),
            json!({"command": "ls", "argv": ["ls"], "cwd": "/elsewhere"}),
            json!({"command": "ls"}),
            json!("ls"),
        ] {
            assert!(rewrite(&call, &bad, "bash").is_err(), "{bad}");
        }
    }

    #[test]
    fn outputs_are_codexs_shapes() {
        assert_eq!(allow_output(EventName::PreToolUse), None);
        assert_eq!(
            allow_output(EventName::PermissionRequest),
            Some(
                json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})
            )
        );
        assert_eq!(
            deny_output(EventName::PreToolUse, "no"),
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}})
        );
        assert_eq!(
            deny_output(EventName::PermissionRequest, "no")["hookSpecificOutput"]["decision"],
            json!({"behavior": "deny", "message": "no"})
        );
    }

    #[test]
    fn install_appends_a_block_and_replaces_it_later() {
        let path = Path::new("/home/u/.codex/config.toml");
        let existing = "model = \"gpt-5.5\"\n\n[[hooks.PreToolUse]]\nmatcher = \"Bash\"\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"mine\"\n";
        let hooks = [(
            EventName::PreToolUse,
            "/usr/bin/lev hook codex --timeout 600".to_owned(),
            630,
        )];
        let (text, installed) = install(path, existing, &hooks).unwrap();
        assert_eq!(
            installed[0].key,
            "/home/u/.codex/config.toml:pre_tool_use:1:0"
        );
        assert_eq!(
            installed[0].hash,
            trust_hash(EventName::PreToolUse, None, &hooks[0].1, 630)
        );
        assert!(text.starts_with(existing.trim_end()), "{text}");
        assert!(text.contains("trusted_hash = \"sha256:"), "{text}");
        // Again: the block is replaced, not repeated.
        let (again, _) = install(path, &text, &hooks).unwrap();
        assert_eq!(again, text);
        assert_eq!(again.matches(BLOCK_BEGIN).count(), 1);

        let inline = "hooks = { PreToolUse = [] }\n";
        assert!(install(path, inline, &hooks).is_err());
        assert!(
            install(path, "not = [toml", &hooks)
                .unwrap_err()
                .contains("not valid TOML")
        );
        let half = format!("{BLOCK_BEGIN}\n[x]\n");
        assert!(
            install(path, &half, &hooks)
                .unwrap_err()
                .contains("not its end")
        );
        let taken =
            "[hooks.state.\"/home/u/.codex/config.toml:pre_tool_use:0:0\"]\ntrusted_hash = \"x\"\n";
        assert!(
            install(path, taken, &hooks)
                .unwrap_err()
                .contains("already has a trust entry")
        );
    }
}
