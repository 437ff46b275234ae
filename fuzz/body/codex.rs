//! The body of the `codex` fuzz target, shared with lev-cli's smoke test
//! (`crates/lev-cli/src/fuzz_smoke.rs`), which runs it on stable Rust.
//!
//! Untrusted bytes from Codex reach these decoders of lev-cli: an
//! app-server message (`wire::parse`) and, when it is a request, its mapping
//! to a lev tool call (`approval::map_request`) and an approver's edit of
//! that call (`approval::edit_of`); a hook event (`hooks::parse_event`), its
//! call (`hooks::call_of`) and the rewrite of an approved edit
//! (`hooks::rewrite`); a shell command line (`shell`). Nothing may panic,
//! and what the code promises must hold:
//!
//! - a rewrite that a hook hands Codex reads back, as Codex's next event,
//!   as exactly the args lev's policy judged;
//! - an edit said to be exact expects exactly the signed args;
//! - the argv lev reads joins back into a command line that splits into the
//!   same argv.
//!
//! The input is one or two parts: the first line, and the rest (an edit).
//!
//! The including crate provides `crate::codex::{approval, hooks, shell,
//! wire}` (lev-cli's modules).

use serde_json::{Value, json};

use crate::codex::approval::{self, Mapping};
use crate::codex::hooks;
use crate::codex::shell::{self, ShellCommand};
use crate::codex::wire::{self, Incoming};

/// What one run reached, so a smoke test can tell that its inputs go deep.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reached {
    /// An app-server request mapped to a lev call.
    pub mapped: bool,
    /// A hook event became a lev call.
    pub hook_call: bool,
    /// An approved edit was rewritten for a hook.
    pub rewritten: bool,
    /// A command split into simple words.
    pub simple: bool,
}

/// Run one input.
pub fn run(data: &[u8]) -> Reached {
    let mut reached = Reached::default();
    let (first, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &data[data.len()..]),
    };
    let edit = std::str::from_utf8(rest).ok();

    if let Ok(text) = std::str::from_utf8(first) {
        if let Ok(Incoming::Request { method, params, .. }) = wire::parse(text) {
            let changes = params.get("changes").cloned();
            if let Mapping::Ask(ask) = approval::map_request(&method, &params, |_| changes.clone())
            {
                reached.mapped = true;
                for reply in [
                    approval::Reply::Accept,
                    approval::Reply::AcceptForSession,
                    approval::Reply::Decline,
                    approval::Reply::Cancel,
                ] {
                    let _ = reply.to_json(&ask.kind);
                }
                if let Some(edit) = edit
                    && let Ok(made) = approval::edit_of(&ask, edit)
                    && made.exact
                {
                    let signed: Value = serde_json::from_str(edit).unwrap_or(Value::Null);
                    assert_eq!(Value::Object(made.expected), signed, "an exact edit");
                }
            }
        }
        // The first line as the command Codex hands over.
        let command = ShellCommand::from_codex(text);
        assert!(!command.argv.is_empty());
        if let Some(words) = shell::simple_words(text)
            && !words.is_empty()
        {
            reached.simple = true;
            assert_eq!(shell::simple_words(&shell::join(&words)), Some(words));
        }
    }

    // The first line as a hook event, the rest as an approved edit.
    if let Ok(event) = hooks::parse_event(first) {
        let _ = hooks::patch_files(
            event
                .tool_input
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            event.cwd.as_deref().unwrap_or_default(),
        );
        if let Ok(call) = hooks::call_of(&event, "/bin/bash") {
            reached.hook_call = true;
            if let Some(Ok(edited)) = edit.map(serde_json::from_str::<Value>)
                && let Ok(input) = hooks::rewrite(&call, &edited, "/bin/bash")
            {
                reached.rewritten = true;
                // What Codex runs is the rewritten input: read back as the
                // next event, it is the call lev judged.
                let Value::Object(input) = input else {
                    panic!("a rewrite that is not an object: {input}");
                };
                let mut next = event.clone();
                // Codex takes `updatedInput` as the tool's whole input.
                next.tool_input = input;
                let again = hooks::call_of(&next, "/bin/bash").expect("the rewrite reads back");
                assert_eq!(Value::Object(again.args), edited, "a rewrite reads back");
            }
        }
    }

    // Any JSON array of strings as an argv: join splits back into it.
    if let Ok(argv) = serde_json::from_slice::<Vec<String>>(first)
        && !argv.is_empty()
    {
        assert_eq!(
            shell::simple_words(&shell::join(&argv)),
            Some(argv.clone()),
            "{}",
            json!(argv)
        );
    }
    reached
}
