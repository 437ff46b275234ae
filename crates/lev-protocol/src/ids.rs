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
