//! The tool-name glob, the one every tool pattern is matched with: the
//! policy's rules and `[[tool]]` entries, and the SDK's gatekeeper (which
//! tools need people's own signed votes).
//!
//! `*` matches any run of characters (none included), `?` exactly one, and
//! every other character itself, case and all; the glob covers the whole
//! name. A newline is a character like any other (a valid tool name holds
//! none). Matching is linear in the name's length, whatever the glob.

use std::fmt;

use regex::Regex;

/// A compiled tool-name glob.
#[derive(Clone)]
pub struct ToolGlob {
    text: String,
    matcher: Matcher,
}

#[derive(Clone)]
enum Matcher {
    /// `*`: every name.
    Any,
    /// Anything else, compiled to an anchored regex.
    Pattern(Regex),
}

/// A glob too large to compile.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct GlobError(#[from] regex::Error);

impl ToolGlob {
    /// `*`: every tool name.
    pub fn any() -> Self {
        Self {
            text: "*".to_owned(),
            matcher: Matcher::Any,
        }
    }

    /// Compile `glob`.
    ///
    /// # Errors
    /// When its regex would pass the regex crate's size limit (a glob of
    /// many thousands of wildcards).
    pub fn new(glob: &str) -> Result<Self, GlobError> {
        if glob == "*" {
            return Ok(Self::any());
        }
        let mut re = String::with_capacity(glob.len() + 8);
        re.push('^');
        for c in glob.chars() {
            match c {
                '*' => re.push_str("(?s:.*)"),
                '?' => re.push_str("(?s:.)"),
                c => re.push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
            }
        }
        re.push('$');
        Ok(Self {
            text: glob.to_owned(),
            matcher: Matcher::Pattern(Regex::new(&re)?),
        })
    }

    /// Whether `name` matches, whole.
    pub fn is_match(&self, name: &str) -> bool {
        match &self.matcher {
            Matcher::Any => true,
            Matcher::Pattern(re) => re.is_match(name),
        }
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for ToolGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ToolGlob").field(&self.text).finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn glob_match(glob: &str, name: &str) -> bool {
        ToolGlob::new(glob).unwrap().is_match(name)
    }

    #[test]
    fn globs() {
        let g = ToolGlob::new("mcp__*__read?").unwrap();
        assert!(g.is_match("mcp__fs__reads"));
        assert!(!g.is_match("mcp__fs__read"));
        assert_eq!(g.as_str(), "mcp__*__read?");
        assert!(glob_match("a.b", "a.b"));
        assert!(!glob_match("a.b", "axb"));
    }

    #[test]
    fn globs_match_as_the_gatekeeper_s_did() {
        assert!(glob_match("deploy*", "deploy-web"));
        assert!(glob_match("*", ""));
        assert!(glob_match("mcp__*__read?", "mcp__fs__reads"));
        assert!(!glob_match("mcp__*__read?", "mcp__fs__read"));
        assert!(!glob_match("pay", "payment"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        assert!(glob_match("?", "é"));
        assert!(!glob_match("Deploy", "deploy"));
        // A newline is a character like any other.
        assert!(glob_match("a*b", "a\nb"));
        assert!(glob_match("a?b", "a\nb"));
        // Any glob as long as a tool name compiles; one of many thousands of
        // wildcards is refused.
        assert!(ToolGlob::new(&"?*".repeat(256)).is_ok());
        assert!(ToolGlob::new(&"?".repeat(100_000)).is_err());
        // Bounded: a hostile glob against a long name returns at once.
        let name = "a".repeat(10_000);
        assert!(!glob_match(&"*a".repeat(50).replace("a", "b"), &name));
    }

    proptest::proptest! {
        /// The glob agrees with a plain wildcard matcher on every input.
        #[test]
        fn agrees_with_a_wildcard_matcher(
            glob in "[ab*?\n.]{0,8}",
            name in "[ab\n.]{0,10}",
        ) {
            proptest::prop_assert_eq!(glob_match(&glob, &name), wildcard(&glob, &name));
        }
    }

    /// `glob` against `name` by backtracking, the definition.
    fn wildcard(glob: &str, name: &str) -> bool {
        let g: Vec<char> = glob.chars().collect();
        let n: Vec<char> = name.chars().collect();
        fn at(g: &[char], n: &[char]) -> bool {
            match g.split_first() {
                None => n.is_empty(),
                Some(('*', rest)) => (0..=n.len()).any(|i| at(rest, &n[i..])),
                Some(('?', rest)) => !n.is_empty() && at(rest, &n[1..]),
                Some((c, rest)) => n.first() == Some(c) && at(rest, &n[1..]),
            }
        }
        at(&g, &n)
    }
}
