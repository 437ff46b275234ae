//! Identifier rules shared by every party.
//!
//! Identifiers (`id`, `session_id`, `conversation_id`, `turn_id`, `caller`,
//! token names) are 1 to 128 characters of `A-Z a-z 0-9 . _ : -`. A tool name is
//! 1 to 256 characters with no control character. Capability names are
//! kebab-case words.

/// Longest identifier accepted.
pub const MAX_ID_LEN: usize = 128;
/// Longest tool name accepted.
pub const MAX_TOOL_NAME_LEN: usize = 256;

/// Whether `s` is a valid identifier: 1 to 128 of `A-Z a-z 0-9 . _ : -`.
pub fn is_valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Whether `s` is a valid tool name: 1 to 256 characters, none of them a control character.
pub fn is_valid_tool_name(s: &str) -> bool {
    let n = s.chars().count();
    (1..=MAX_TOOL_NAME_LEN).contains(&n) && !s.chars().any(char::is_control)
}

/// Whether `s` is a capability name: `^[a-z][a-z0-9]*(-[a-z0-9]+)*$` (`net`, `fs-write`).
pub fn is_valid_capability(s: &str) -> bool {
    let mut words = s.split('-');
    let Some(first) = words.next() else {
        return false;
    };
    let first_ok = first.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
        && first
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    first_ok
        && words.all(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(is_valid_id("s-1"));
        assert!(is_valid_id("ir_01J:abc.def"));
        assert!(!is_valid_id(""));
        assert!(!is_valid_id("a b"));
        assert!(!is_valid_id("é"));
        assert!(!is_valid_id(&"a".repeat(129)));
        assert!(is_valid_id(&"a".repeat(128)));
    }

    #[test]
    fn tool_names() {
        assert!(is_valid_tool_name("mcp__fs__read file"));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("a\nb"));
        assert!(!is_valid_tool_name("a\u{7f}"));
        assert!(is_valid_tool_name(&"é".repeat(256)));
        assert!(!is_valid_tool_name(&"é".repeat(257)));
    }

    #[test]
    fn capabilities() {
        for ok in ["net", "fs-write", "proc-exec", "a1-b2-c3", "x"] {
            assert!(is_valid_capability(ok), "{ok}");
        }
        for bad in [
            "",
            "Net",
            "1net",
            "fs--write",
            "fs-",
            "-fs",
            "fs_write",
            "fs write",
        ] {
            assert!(!is_valid_capability(bad), "{bad}");
        }
    }
}

/// Most session patterns one token may carry.
pub const MAX_SESSION_PATTERNS: usize = 64;

/// Whether `s` is a session pattern (SPEC section 12): 1 to 128 characters of
/// the identifier set or `*`, where `*` matches any run of characters.
pub fn is_valid_session_pattern(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-' | b'*'))
}

/// Whether `session_id` matches `pattern` (`*` matches any run of
/// characters, everything else itself). Both are at most 128 bytes, and the
/// matcher backtracks only to the last `*`, so the cost is at most the
/// product of the two lengths.
pub fn session_pattern_matches(pattern: &str, session_id: &str) -> bool {
    let (p, s) = (pattern.as_bytes(), session_id.as_bytes());
    let (mut pi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((star_pi, star_si)) = star {
            pi = star_pi + 1;
            si = star_si + 1;
            star = Some((star_pi, star_si + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

/// The names lev writes itself as an approver or an actor: `policy` (a
/// rule's decision), `timeout` (an `on_timeout` answer), `system` (what no
/// token did), `operator`, and `lev` (an operator's escalation, a task's
/// start).
pub const RESERVED_NAMES: [&str; 5] = ["policy", "timeout", "system", "operator", "lev"];

/// The prefixes of names lev writes itself: `person:NAME:N` (a person's key),
/// `group:NAME` (a policy group), `task:ID`.
pub const RESERVED_PREFIXES: [&str; 3] = ["person", "group", "task"];

/// Whether `c` is one of the punctuation characters an identifier may hold.
fn is_name_punct(c: char) -> bool {
    matches!(c, '.' | '_' | ':' | '-')
}

/// The form in which names are compared for look-alikes: lower case (full
/// Unicode lower case, though an identifier is ASCII), every run of `.` `_`
/// `:` `-` written as one `-`, and such runs at either end dropped. So
/// `Policy`, `policy.` and `_POLICY_` all fold to `policy`, and `ops_team`,
/// `OPS.team` and `ops--team` to `ops-team`. Two names that fold alike read
/// alike to a person, so lev refuses to make a second one (SPEC section 12).
pub fn fold_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut pending_punct = false;
    for c in name.chars() {
        if is_name_punct(c) {
            pending_punct = !out.is_empty();
            continue;
        }
        if pending_punct {
            out.push('-');
            pending_punct = false;
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Whether two names fold alike ([`fold_name`]).
pub fn names_alike(a: &str, b: &str) -> bool {
    a == b || fold_name(a) == fold_name(b)
}

/// The names lev writes itself exactly as SPEC section 12 first listed them
/// (`policy`, `timeout`, `system`, `operator`, and `person:`, `group:` and
/// `task:` names): what a name already in use (a token made before look-alikes
/// were refused, which keeps working, or slack.toml's mapping to it) is
/// checked against. New names are checked with [`is_reserved_token_name`].
pub fn is_lev_name(name: &str) -> bool {
    matches!(name, "policy" | "timeout" | "system" | "operator")
        || name.starts_with("person:")
        || name.starts_with("group:")
        || name.starts_with("task:")
}

/// Token names the control plane writes itself (SPEC section 12), and
/// names that read like them: an approver named like them would pass for
/// the policy, a timeout or a group. Compared folded ([`fold_name`]): one of
/// [`RESERVED_NAMES`] in any case or with punctuation at its ends
/// (`Policy`, `policy.`), or one of [`RESERVED_PREFIXES`] in any case
/// followed by a run of punctuation holding a `:` (`person:ann`,
/// `Person:ann`, `.group::x`). `person-ann` and `task-runner` are names
/// like any other.
pub fn is_reserved_token_name(name: &str) -> bool {
    let folded = fold_name(name);
    if RESERVED_NAMES.contains(&folded.as_str()) {
        return true;
    }
    let trimmed = name.trim_start_matches(is_name_punct);
    RESERVED_PREFIXES.iter().any(|word| {
        trimmed
            .get(..word.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(word))
            && trimmed[word.len()..]
                .chars()
                .take_while(|c| is_name_punct(*c))
                .any(|c| c == ':')
    })
}

#[cfg(test)]
mod session_tests {
    use super::*;

    #[test]
    fn session_patterns_match_as_globs() {
        for (p, s, want) in [
            ("*", "anything", true),
            ("ci-*", "ci-42", true),
            ("ci-*", "ci-", true),
            ("ci-*", "build-7", false),
            ("build-7", "build-7", true),
            ("build-7", "build-70", false),
            ("*-7", "build-7", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("**", "", true),
            ("", "", true),
            ("", "x", false),
        ] {
            assert_eq!(session_pattern_matches(p, s), want, "{p} {s}");
        }
    }

    #[test]
    fn session_pattern_rules() {
        assert!(is_valid_session_pattern("ci-*"));
        assert!(is_valid_session_pattern("*"));
        assert!(!is_valid_session_pattern(""));
        assert!(!is_valid_session_pattern("ci ?"));
        assert!(!is_valid_session_pattern(&"a".repeat(129)));
    }

    #[test]
    fn reserved_names() {
        for name in [
            "policy",
            "timeout",
            "system",
            "operator",
            "person:ann",
            "group:oncall",
        ] {
            assert!(is_reserved_token_name(name), "{name}");
        }
        for name in ["ann", "policy-bot", "operators"] {
            assert!(!is_reserved_token_name(name), "{name}");
        }
    }

    #[test]
    fn names_that_read_like_reserved_ones_are_reserved() {
        for name in [
            "Policy",
            "POLICY",
            "policy.",
            "policy-",
            "_policy_",
            ":timeout:",
            "System",
            "Operator.",
            "lev",
            "LEV",
            "Person:ann",
            "PERSON:ann",
            ".person:ann",
            "person.:ann",
            "Group:oncall",
            "group::oncall",
            "Task:1",
        ] {
            assert!(is_reserved_token_name(name), "{name}");
        }
        for name in [
            "person-ann",
            "task-runner",
            "group.leads",
            "persona",
            "policy.bot",
            "levy",
            "tasks:1",
            "person",
        ] {
            assert!(!is_reserved_token_name(name), "{name}");
        }
    }

    #[test]
    fn names_fold_by_case_and_punctuation() {
        for (a, b) in [
            ("OPS", "ops"),
            ("ops.", "ops"),
            ("ops_team", "OPS-team"),
            ("ops--team", "ops:team"),
            ("-ops-", "ops"),
        ] {
            assert!(names_alike(a, b), "{a} {b}");
            assert_eq!(fold_name(a), fold_name(b));
        }
        for (a, b) in [("ops", "op-s"), ("ann", "anna"), ("a1", "al")] {
            assert!(!names_alike(a, b), "{a} {b}");
        }
        assert_eq!(fold_name("..."), "");
        assert_eq!(fold_name("A.b__C"), "a-b-c");
    }
}
