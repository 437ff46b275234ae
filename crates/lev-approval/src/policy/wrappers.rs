//! Deny and ask rules that a wrapper walks around: `env rm`, `sudo rm`,
//! `exec rm`, `command rm`, `sh -c 'rm x'`, `git -C . push`, `git  push`.
//!
//! An args pattern sees the words of a call, not what runs: a rule anchored
//! on `/argv/0` (or on a command line's first word, or on `git push` with
//! one space) no longer matches once something else is put in front or in
//! between, and the call then falls through to what the rest of the policy
//! says. Under `default = "allow"` (also when no default is set) that is an
//! allow. [`wrapper_warnings`] finds such rules by trying it: for each deny
//! or ask rule over a command, it makes a call the rule matches out of the
//! rule's own patterns, wraps it each way, and warns when the policy allows a
//! wrapped call (by its default or by an allow rule), naming the rule's line
//! and the fix. The work is linear in the size of the policy: at most
//! [`MAX_PROBED`] rules probed, a fixed number of wrappings each, one match
//! of each rule per wrapping.

use regex::Regex;
use serde_json::{Map, Value};

use super::{Policy, RuleDecision};

/// Programs that run the rest of their argv, with what they are given
/// before it.
const PREFIXES: &[&[&str]] = &[
    &["sudo"],
    &["exec"],
    &["command"],
    &["nice"],
    &["nohup"],
    &["timeout", "60"],
    &["xargs"],
    &["busybox"],
];

/// The ways a call is wrapped.
#[derive(Debug, Clone, Copy)]
enum Wrap {
    /// A program in front: `env rm`.
    Prefix(&'static [&'static str]),
    /// Through a shell: `sh -c 'rm x'`.
    ShellC,
    /// An option between the program and its subcommand: `git -C . push`.
    OptionAfterProgram,
    /// Two blanks between words: `git  push` (a command line only).
    DoubleBlank,
    /// A tab between words (a command line only).
    Tab,
    /// A backslash before the program (the shell runs the same program,
    /// bypassing aliases; a command line only).
    Backslash,
    /// Behind another command: `true && rm x` (a command line only).
    Chained,
}

/// Every wrapping tried, in the order examples are given (the most unlike
/// first, since a warning shows four).
fn wraps() -> impl Iterator<Item = Wrap> {
    [
        Wrap::Prefix(&["env"]),
        Wrap::OptionAfterProgram,
        Wrap::DoubleBlank,
        Wrap::ShellC,
    ]
    .into_iter()
    .chain(PREFIXES.iter().copied().map(Wrap::Prefix))
    .chain([Wrap::Tab, Wrap::Backslash, Wrap::Chained])
}

/// Field names whose value is a whole command line (`{"command": "rm x"}`).
fn holds_a_command_line(field: &str) -> bool {
    matches!(
        field.to_ascii_lowercase().as_str(),
        "command" | "cmd" | "cmdline" | "command_line" | "commandline" | "script" | "shell"
    )
}

/// One pointer of a rule, as the probe sees it.
enum Slot {
    /// `/argv/N`: element N of the array at `parent`.
    Element { parent: Vec<String>, index: usize },
    /// A string field holding a command line.
    Line(Vec<String>),
    /// Any other field: given a value the pattern matches, never wrapped.
    Other(Vec<String>),
}

/// The most deny and ask rules over arguments probed: the work stays
/// linear in the policy's size (each probe matches every rule once per
/// wrapping).
const MAX_PROBED: usize = 100;

/// The warnings of [`super::Policy::warnings`] for rules a wrapper walks
/// around, each naming the rule's line.
pub(super) fn wrapper_warnings(policy: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    let probed = policy
        .rules
        .iter()
        .filter(|r| r.decision != RuleDecision::Allow && !r.patterns.is_empty());
    if let Some(rule) = probed.clone().nth(MAX_PROBED) {
        out.push(format!(
            "line {}: only the first {MAX_PROBED} deny and ask rules with args patterns are \
             checked for wrappers that walk around them; this one and those after it are not",
            rule.line
        ));
    }
    for rule in probed.take(MAX_PROBED) {
        let Some(tool) = tool_named_by(&rule.tool) else {
            continue;
        };
        if !rule.glob.is_match(&tool) {
            continue;
        }
        let Some(call) = sample_call(&rule.patterns) else {
            continue;
        };
        // The rules for this tool, in order (their globs matched once).
        let for_tool: Vec<&super::Rule> = policy
            .rules
            .iter()
            .filter(|r| r.glob.is_match(&tool))
            .collect();
        let first_match = |args: &Value| for_tool.iter().find(|r| r.args.matches(args)).copied();
        // A call that an earlier rule decides never reaches this one.
        if first_match(&call.args).is_none_or(|r| r.line != rule.line) {
            continue;
        }
        let mut walked: Vec<String> = Vec::new();
        let mut by: Option<(String, String)> = None;
        for wrap in wraps() {
            let Some((args, shown)) = call.wrapped(wrap) else {
                continue;
            };
            let allowed_by = match first_match(&args) {
                None if policy.default == RuleDecision::Allow => Some((
                    if policy.default_set {
                        "the policy's default = \"allow\"".to_owned()
                    } else {
                        "the policy's default (none set: allow)".to_owned()
                    },
                    "set default = \"ask\" (or \"deny\") and allow what may run with \
                     anchored allow rules"
                        .to_owned(),
                )),
                Some(r) if r.decision == RuleDecision::Allow => Some((
                    format!("the allow rule on line {}", r.line),
                    format!(
                        "make the allow rule on line {} name what may run, not a program that \
                         runs others",
                        r.line
                    ),
                )),
                _ => None,
            };
            if let Some(allowed_by) = allowed_by {
                by.get_or_insert(allowed_by);
                if walked.len() < 4 {
                    walked.push(shown);
                }
            }
        }
        if let Some((by, fix)) = by {
            let kind = if rule.decision == RuleDecision::Deny {
                "deny"
            } else {
                "ask"
            };
            out.push(format!(
                "line {}: this {kind} rule is walked around by wrappers: {} do not match it, \
                 and {by} allows them; a rule over a command's words cannot see through env, \
                 sudo, exec, sh -c, scripts or aliases (it is no sandbox): {fix}",
                rule.line,
                walked.join(", "),
            ));
        }
    }
    out
}

/// A tool name `glob` matches: its `*` and `?` as `x`.
fn tool_named_by(glob: &str) -> Option<String> {
    let name: String = glob
        .chars()
        .map(|c| if matches!(c, '*' | '?') { 'x' } else { c })
        .collect();
    (!name.is_empty()).then_some(name)
}

/// A call a rule matches, built from its patterns, with where each value
/// went.
struct SampleCall {
    args: Value,
    slots: Vec<Slot>,
}

impl SampleCall {
    /// The call wrapped, and how it reads; `None` when the wrapping changes
    /// nothing of it (a blank between words of a call with one word, or
    /// an argv-only wrapping of a call without an argv).
    fn wrapped(&self, wrap: Wrap) -> Option<(Value, String)> {
        let mut args = self.args.clone();
        let mut shown = None;
        let mut seen_parents: Vec<&Vec<String>> = Vec::new();
        for slot in &self.slots {
            match slot {
                Slot::Element { parent, .. } => {
                    if seen_parents.contains(&parent) {
                        continue;
                    }
                    seen_parents.push(parent);
                    let words: Vec<String> = match pointer_mut(&mut args, parent) {
                        Some(Value::Array(items)) => items
                            .iter()
                            .map(|v| v.as_str().unwrap_or_default().to_owned())
                            .collect(),
                        _ => continue,
                    };
                    let Some(new) = wrap_argv(&words, wrap) else {
                        continue;
                    };
                    shown.get_or_insert_with(|| serde_json::to_string(&new).unwrap_or_default());
                    if let Some(slot) = pointer_mut(&mut args, parent) {
                        *slot = Value::Array(new.into_iter().map(Value::String).collect());
                    }
                }
                Slot::Line(path) => {
                    let Some(Value::String(line)) = pointer_mut(&mut args, path) else {
                        continue;
                    };
                    let Some(new) = wrap_line(line, wrap) else {
                        continue;
                    };
                    shown.get_or_insert_with(|| format!("{new:?}"));
                    *line = new;
                }
                Slot::Other(_) => {}
            }
        }
        shown.map(|s| (args, s))
    }
}

fn wrap_argv(words: &[String], wrap: Wrap) -> Option<Vec<String>> {
    let owned = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    match wrap {
        Wrap::Prefix(prefix) => Some(
            owned(prefix)
                .into_iter()
                .chain(words.iter().cloned())
                .collect(),
        ),
        Wrap::ShellC => Some(vec!["sh".into(), "-c".into(), words.join(" ")]),
        Wrap::OptionAfterProgram if words.len() >= 2 => {
            let mut out = vec![words[0].clone(), "-C".into(), ".".into()];
            out.extend(words[1..].iter().cloned());
            Some(out)
        }
        _ => None,
    }
}

fn wrap_line(line: &str, wrap: Wrap) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let first = words.first()?;
    Some(match wrap {
        Wrap::Prefix(prefix) => format!("{} {line}", prefix.join(" ")),
        Wrap::ShellC => format!("sh -c '{line}'"),
        Wrap::OptionAfterProgram if words.len() >= 2 => {
            format!("{first} -C . {}", words[1..].join(" "))
        }
        Wrap::DoubleBlank if words.len() >= 2 => words.join("  "),
        Wrap::Tab if words.len() >= 2 => words.join("\t"),
        Wrap::Backslash => format!("\\{line}"),
        Wrap::Chained => format!("true && {line}"),
        _ => return None,
    })
}

/// A call every pattern of `patterns` matches, when one can be made from
/// the patterns' own words; `None` for a rule over no command (no argv
/// element, no command line) or whose patterns yield no matching words.
fn sample_call(patterns: &std::collections::BTreeMap<String, String>) -> Option<SampleCall> {
    let mut slots = Vec::new();
    let mut values: Vec<(Slot, String)> = Vec::new();
    let mut compiled = Vec::with_capacity(patterns.len());
    for (pointer, pattern) in patterns {
        let path = parse_pointer(pointer)?;
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .ok()?;
        let word = sample_text(pattern, &re)?;
        compiled.push((pointer, re));
        let (last, parent) = path.split_last()?;
        // Only the last segment may be an array index.
        if parent.iter().any(|s| s.parse::<usize>().is_ok()) {
            return None;
        }
        let slot = match last.parse::<usize>() {
            Ok(index) if index < 8 => Slot::Element {
                parent: parent.to_vec(),
                index,
            },
            Ok(_) => return None,
            Err(_) if holds_a_command_line(last) => Slot::Line(path.clone()),
            Err(_) => Slot::Other(path.clone()),
        };
        values.push((slot, word));
    }
    if !values
        .iter()
        .any(|(s, _)| matches!(s, Slot::Element { .. } | Slot::Line(_)))
    {
        return None;
    }
    let mut args = Value::Object(Map::new());
    for (slot, word) in values {
        match &slot {
            Slot::Element { parent, index } => {
                let target = object_path(&mut args, parent)?;
                if target.is_null() {
                    *target = Value::Array(Vec::new());
                }
                let items = target.as_array_mut()?;
                while items.len() <= *index {
                    items.push(Value::String("x".into()));
                }
                items[*index] = Value::String(word);
            }
            Slot::Line(path) | Slot::Other(path) => {
                *object_path(&mut args, path)? = Value::String(word);
            }
        }
        slots.push(slot);
    }
    // Positions no pattern names hold `x`: the call must still match.
    let matches = compiled
        .iter()
        .all(|(pointer, re)| match args.pointer(pointer) {
            Some(Value::String(s)) => re.is_match(s),
            _ => false,
        });
    matches.then_some(SampleCall { args, slots })
}

/// Text a pattern matches, made of its own words: the pattern with its
/// anchors and blanks' classes read as plain text, its words joined by a
/// blank, each word alone, each pair of words.
fn sample_text(pattern: &str, re: &Regex) -> Option<String> {
    let plain = pattern
        .replace("(.*/)?", "")
        .replace("\\s+", " ")
        .replace("\\s*", " ")
        .replace("\\s", " ")
        .replace(" +", " ")
        .replace("\\b", "")
        .replace(['^', '$'], "");
    let words: Vec<&str> = pattern
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .filter(|w| w.chars().any(|c| c.is_ascii_alphabetic()))
        .collect();
    let mut candidates = vec![
        plain.clone(),
        plain.trim().to_owned(),
        format!("{} x", plain.trim()),
        words.join(" "),
    ];
    candidates.extend(words.iter().map(|w| (*w).to_owned()));
    candidates.extend(words.windows(2).map(|p| p.join(" ")));
    candidates
        .into_iter()
        .filter(|c| !c.is_empty())
        .find(|c| re.is_match(c))
}

/// The segments of a JSON pointer (`~1` is `/`, `~0` is `~`); `None` for
/// the empty pointer.
fn parse_pointer(pointer: &str) -> Option<Vec<String>> {
    let rest = pointer.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

/// The value at `path` below objects only, made (as null) when missing.
fn object_path<'a>(root: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut at = root;
    for key in path {
        if at.is_null() {
            *at = Value::Object(Map::new());
        }
        at = at
            .as_object_mut()?
            .entry(key.clone())
            .or_insert(Value::Null);
    }
    Some(at)
}

fn pointer_mut<'a>(root: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut at = root;
    for key in path {
        at = at.as_object_mut()?.get_mut(key)?;
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::policy::{GateCall, GateVerdict, Policy, decide};

    fn verdict(policy: &Policy, tool: &str, args: &Value) -> GateVerdict {
        decide(
            policy,
            &GateCall {
                caller: "alice",
                conversation_id: "c",
                sandbox_mode: "danger-full-access",
                tool_name: tool,
                args,
                required_capabilities: &[],
            },
            &[],
        )
        .verdict
    }

    const MODES: &str = "[sandbox_modes]\n\"danger-full-access\" = [\"*\"]\n";

    /// Each row: a rule over a command, a call it stops, and a wrapped call
    /// that walks around it. Under `default = "allow"` the wrapped call is
    /// allowed (the hole) and `lev policy check` warns, naming the rule's
    /// line; under `default = "ask"` it asks, and nothing is warned about.
    #[test]
    fn wrappers_walk_around_command_rules_and_are_warned_about() {
        let table: &[(&str, &str, Value, Value)] = &[
            (
                "shell",
                r#"args = { "/argv/0" = "^(.*/)?(rm|dd|mkfs)$" }"#,
                json!({"argv": ["rm", "-rf", "/"]}),
                json!({"argv": ["env", "rm", "-rf", "/"]}),
            ),
            (
                "shell",
                r#"args = { "/argv/0" = "^(.*/)?rm$" }"#,
                json!({"argv": ["rm", "x"]}),
                json!({"argv": ["sudo", "rm", "x"]}),
            ),
            (
                "shell",
                r#"args = { "/argv/0" = "^rm$" }"#,
                json!({"argv": ["rm", "x"]}),
                json!({"argv": ["exec", "rm", "x"]}),
            ),
            (
                "shell",
                r#"args = { "/argv/0" = "^(.*/)?rm$" }"#,
                json!({"argv": ["rm", "x"]}),
                json!({"argv": ["command", "rm", "x"]}),
            ),
            (
                "shell",
                r#"args = { "/argv/0" = "^(.*/)?git$", "/argv/1" = "^push$" }"#,
                json!({"argv": ["git", "push"]}),
                json!({"argv": ["git", "-C", ".", "push"]}),
            ),
            (
                "Bash",
                r#"args = { "/command" = "git push" }"#,
                json!({"command": "git push origin main"}),
                json!({"command": "git  push origin main"}),
            ),
            (
                "Bash",
                r#"args = { "/command" = "git push" }"#,
                json!({"command": "git push"}),
                json!({"command": "git -C . push"}),
            ),
            (
                "Bash",
                r#"args = { "/command" = "^rm " }"#,
                json!({"command": "rm -rf /"}),
                json!({"command": "env rm -rf /"}),
            ),
            (
                "codex.exec",
                r#"args = { "/argv/0" = "^(.*/)?(rm|dd)$" }"#,
                json!({"argv": ["dd", "if=/dev/zero"]}),
                json!({"argv": ["sh", "-c", "dd if=/dev/zero"]}),
            ),
        ];
        for (decision, line) in [("deny", 5), ("ask", 5)] {
            for (tool, args, stopped, walked) in table {
                let text = format!(
                    "default = \"allow\"\n{MODES}\n[[rule]]\ntool = \"{tool}\"\n{args}\n\
                     decision = \"{decision}\"\n"
                );
                let p = Policy::parse(&text).unwrap();
                let caught = verdict(&p, tool, stopped);
                match decision {
                    "deny" => assert!(matches!(caught, GateVerdict::Deny { .. }), "{args}"),
                    _ => assert!(matches!(caught, GateVerdict::Ask { .. }), "{args}"),
                }
                // The hole: the wrapped call is allowed.
                assert!(
                    matches!(verdict(&p, tool, walked), GateVerdict::AllowByPolicy { .. }),
                    "{args}: {walked}"
                );
                // And the check says so, on the rule's line.
                let warnings = p.warnings();
                let w = warnings
                    .iter()
                    .find(|w| w.contains("walked around"))
                    .unwrap_or_else(|| panic!("{args}: no warning in {warnings:?}"));
                assert!(w.starts_with(&format!("line {line}:")), "{w}");
                assert!(w.contains(&format!("this {decision} rule")), "{w}");
                assert!(
                    w.contains("default = \\\"ask\\\"") || w.contains("default = \"ask\""),
                    "{w}"
                );
                // Without a default (allow): the same.
                let p = Policy::parse(&text.replace("default = \"allow\"\n", "")).unwrap();
                assert!(
                    p.warnings().iter().any(|w| w.contains("walked around")),
                    "{args}"
                );
                // Under default = "ask" the wrapped call asks: no warning.
                for default in ["ask", "deny"] {
                    let p = Policy::parse(
                        &text.replace("default = \"allow\"", &format!("default = \"{default}\"")),
                    )
                    .unwrap();
                    assert!(
                        !matches!(verdict(&p, tool, walked), GateVerdict::AllowByPolicy { .. }),
                        "{args} under {default}"
                    );
                    assert!(
                        !p.warnings().iter().any(|w| w.contains("walked around")),
                        "{args} under {default}: {:?}",
                        p.warnings()
                    );
                }
            }
        }
    }

    #[test]
    fn an_allow_rule_that_takes_the_wrapped_call_is_named() {
        let text = format!(
            "default = \"ask\"\n{MODES}\n[[rule]]\ntool = \"shell\"\n\
             args = {{ \"/argv/0\" = \"^(.*/)?rm$\" }}\ndecision = \"deny\"\n\n\
             [[rule]]\ntool = \"shell\"\nargs = {{ \"/argv/0\" = \"^(.*/)?(env|nice)$\" }}\n\
             decision = \"allow\"\n"
        );
        let p = Policy::parse(&text).unwrap();
        assert!(matches!(
            verdict(&p, "shell", &json!({"argv": ["env", "rm", "x"]})),
            GateVerdict::AllowByPolicy { .. }
        ));
        let warnings = p.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("the allow rule on line 10"),
            "{}",
            warnings[0]
        );
        assert!(warnings[0].contains(r#"["env","rm"]"#), "{}", warnings[0]);
    }

    #[test]
    fn rules_over_no_command_and_robust_rules_are_not_warned_about() {
        for args in [
            // Not a command: a file list, a URL.
            r#"args = { "/files" = "\\.env" }"#,
            r#"args = { "/url" = "^https?://internal\\." }"#,
            // A word anywhere in a command line, whatever precedes it.
            r#"args = { "/command" = "\\bgit\\b.*\\bpush\\b" }"#,
            // No args: every call of the tool.
            "",
        ] {
            let text = format!(
                "default = \"allow\"\n{MODES}\n[[rule]]\ntool = \"shell\"\n{args}\n\
                 decision = \"deny\"\n"
            );
            let p = Policy::parse(&text).unwrap();
            assert!(
                !p.warnings().iter().any(|w| w.contains("walked around")),
                "{args}: {:?}",
                p.warnings()
            );
        }
    }
}
