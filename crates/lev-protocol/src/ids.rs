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

/// Token names the control plane writes itself (SPEC section 12): an
/// approver named like them would pass for the policy, a timeout or a group.
pub fn is_reserved_token_name(name: &str) -> bool {
    matches!(name, "policy" | "timeout" | "system" | "operator")
        || name.starts_with("person:")
        || name.starts_with("group:")
        || name.starts_with("task:")
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
}
