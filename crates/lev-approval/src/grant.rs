//! Grants ("don't ask again") and the args patterns shared with policy rules.
//!
//! A grant is keyed by caller, conversation (none for `always`), sandbox mode,
//! tool and the capability shortfall it covered. A later call matches only when
//! all of those agree and its own shortfall lies inside the covered set: when a
//! tool's required set grows, the old grant no longer matches and the gate asks
//! again.

use std::collections::{BTreeMap, BTreeSet};

use regex::{Regex, RegexBuilder};
use serde_json::Value;

/// A pattern that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pattern for {pointer:?}: {message}")]
pub struct PatternError {
    /// The JSON pointer whose pattern is bad.
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

/// JSON pointer -> regex patterns over a call's args, as policy rules and
/// `grant_args` use them. A call matches when every pointer resolves and its
/// regex finds a match in the value (a string as is, anything else as compact JSON).
#[derive(Debug, Clone, Default)]
pub struct ArgsMatcher {
    patterns: Vec<(String, Regex)>,
}

/// Upper bound on a compiled pattern, so hostile patterns cannot eat memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

impl ArgsMatcher {
    /// Compile `pointer -> regex` pairs.
    ///
    /// # Errors
    /// A pointer that does not start with `/` (and is not empty), or a regex
    /// that does not compile.
    pub fn compile(patterns: &BTreeMap<String, String>) -> Result<Self, PatternError> {
        let mut compiled = Vec::with_capacity(patterns.len());
        for (pointer, pattern) in patterns {
            if !(pointer.is_empty() || pointer.starts_with('/')) {
                return Err(PatternError {
                    pointer: pointer.clone(),
                    message: "expected a JSON pointer such as \"/argv/0\"".into(),
                });
            }
            let regex = RegexBuilder::new(pattern)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| PatternError {
                    pointer: pointer.clone(),
                    message: regex_error(&e),
                })?;
            compiled.push((pointer.clone(), regex));
        }
        Ok(Self { patterns: compiled })
    }

    /// Whether every pattern matches `args`.
    pub fn matches(&self, args: &Value) -> bool {
        self.patterns
            .iter()
            .all(|(pointer, regex)| match args.pointer(pointer) {
                Some(Value::String(s)) => regex.is_match(s),
                Some(other) => regex.is_match(&other.to_string()),
                None => false,
            })
    }

    /// Whether there are no patterns (matches any args).
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

/// A regex error on one line: regex's own message spans several (the
/// pattern, a caret under the fault, the error); this says `unclosed group
/// at character 2 of "^(git"`.
fn regex_error(e: &regex::Error) -> String {
    let regex::Error::Syntax(text) = e else {
        return e.to_string().replace('\n', " ");
    };
    let lines: Vec<&str> = text.lines().collect();
    let what = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or("regex parse error");
    // "    ^(git" then "     ^": the caret's column under the pattern.
    let at = lines.windows(2).find_map(|pair| {
        let pattern = pair[0].strip_prefix("    ")?;
        let caret = pair[1].strip_prefix("    ")?;
        let column = caret.find('^')?;
        caret.trim().chars().all(|c| c == '^').then(|| {
            (
                pattern,
                pattern[..column.min(pattern.len())].chars().count() + 1,
            )
        })
    });
    match at {
        Some((pattern, n)) => format!("{what} at character {n} of {pattern:?}"),
        None => what.to_owned(),
    }
}

/// The capabilities a call lacks: `required` minus what the sandbox mode grants
/// (`"*"` grants all).
pub fn shortfall<'a>(
    required: impl IntoIterator<Item = &'a str>,
    granted: &BTreeSet<String>,
) -> BTreeSet<String> {
    if granted.contains("*") {
        return BTreeSet::new();
    }
    required
        .into_iter()
        .filter(|c| !granted.contains(*c))
        .map(str::to_owned)
        .collect()
}

/// A recorded grant, ready to match calls.
#[derive(Debug, Clone)]
pub struct GrantRule {
    /// Whose calls it approves.
    pub caller: String,
    /// The conversation of a session grant; `None` for an always grant.
    pub conversation_id: Option<String>,
    /// The sandbox mode it holds under.
    pub sandbox_mode: String,
    /// The tool.
    pub tool_name: String,
    /// The shortfall it covered.
    pub covered_capabilities: BTreeSet<String>,
    /// Narrowing patterns over the args (`grant_args`), if any.
    pub args: Option<ArgsMatcher>,
}

/// The facts of a call, as a grant sees them.
#[derive(Debug, Clone, Copy)]
pub struct GrantMatch<'a> {
    /// Whom the call acts for.
    pub caller: &'a str,
    /// Its conversation.
    pub conversation_id: &'a str,
    /// Its sandbox mode.
    pub sandbox_mode: &'a str,
    /// Its tool.
    pub tool_name: &'a str,
    /// What it lacks.
    pub shortfall: &'a BTreeSet<String>,
    /// Its args, parsed.
    pub args: &'a Value,
}

impl GrantRule {
    /// Whether this grant approves the call: same caller, conversation (for a
    /// session grant), sandbox mode and tool; a shortfall inside the covered
    /// set; args matching its patterns.
    pub fn covers(&self, call: &GrantMatch<'_>) -> bool {
        self.caller == call.caller
            && self
                .conversation_id
                .as_deref()
                .is_none_or(|c| c == call.conversation_id)
            && self.sandbox_mode == call.sandbox_mode
            && self.tool_name == call.tool_name
            && call.shortfall.is_subset(&self.covered_capabilities)
            && self.args.as_ref().is_none_or(|m| m.matches(call.args))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn patterns_search_strings_and_compact_json() {
        let m = ArgsMatcher::compile(&BTreeMap::from([
            ("/argv/0".to_owned(), "^(ls|cat)$".to_owned()),
            ("/opts".to_owned(), r#""force":true"#.to_owned()),
        ]))
        .unwrap();
        assert!(m.matches(&json!({"argv": ["ls", "-l"], "opts": {"force": true}})));
        assert!(!m.matches(&json!({"argv": ["rm"], "opts": {"force": true}})));
        assert!(
            !m.matches(&json!({"argv": ["ls"]})),
            "an unresolved pointer fails"
        );
        assert!(
            ArgsMatcher::compile(&BTreeMap::from([("argv".to_owned(), "x".to_owned())])).is_err()
        );
        assert!(
            ArgsMatcher::compile(&BTreeMap::from([("/a".to_owned(), "(".to_owned())])).is_err()
        );
    }

    #[test]
    fn shortfall_respects_star() {
        assert_eq!(
            shortfall(["net", "fs-read"], &set(&["fs-read"])),
            set(&["net"])
        );
        assert!(shortfall(["net"], &set(&["*"])).is_empty());
    }

    #[test]
    fn a_grown_shortfall_asks_again() {
        let grant = GrantRule {
            caller: "alice".into(),
            conversation_id: Some("c1".into()),
            sandbox_mode: "workspace-write".into(),
            tool_name: "shell".into(),
            covered_capabilities: set(&["proc-exec"]),
            args: None,
        };
        let args = json!({});
        let narrow = set(&["proc-exec"]);
        let grown = set(&["net", "proc-exec"]);
        let call = |shortfall| GrantMatch {
            caller: "alice",
            conversation_id: "c1",
            sandbox_mode: "workspace-write",
            tool_name: "shell",
            shortfall,
            args: &args,
        };
        assert!(grant.covers(&call(&narrow)));
        assert!(!grant.covers(&call(&grown)));
        assert!(!grant.covers(&GrantMatch {
            conversation_id: "c2",
            ..call(&narrow)
        }));
        assert!(!grant.covers(&GrantMatch {
            caller: "bob",
            ..call(&narrow)
        }));
        let always = GrantRule {
            conversation_id: None,
            ..grant
        };
        assert!(always.covers(&GrantMatch {
            conversation_id: "c2",
            ..call(&narrow)
        }));
    }
}
