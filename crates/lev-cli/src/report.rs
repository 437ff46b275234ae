//! How `lev` talks on stderr: `lev: context: cause`, hints on their own lines,
//! control characters made visible (error text can carry agent-supplied text).

use std::fmt::Write as _;

/// The marker that starts a hint inside an error message.
pub const HINT: &str = "\nhint: ";

/// Print `err` and its chain of causes on stderr.
pub fn error(err: &anyhow::Error) {
    eprint!(
        "{}",
        render(without_repeats(err.chain().map(|e| e.to_string())))
    );
}

/// The causes, less each one that its predecessor already ends with: an
/// error whose message includes its source (`listen on X: {source}`) would
/// otherwise say the source twice.
fn without_repeats(causes: impl Iterator<Item = String>) -> impl Iterator<Item = String> {
    let mut last: Option<String> = None;
    causes.filter(move |cause| {
        let repeat = last
            .as_deref()
            .is_some_and(|prev| !cause.is_empty() && prev.ends_with(cause.as_str()));
        if !repeat {
            last = Some(cause.clone());
        }
        !repeat
    })
}

/// Print a message that is not an error (such as why a call is not authorized).
pub fn message(text: &str) {
    eprint!("{}", render(std::iter::once(text.to_owned())));
}

fn render(parts: impl Iterator<Item = String>) -> String {
    let mut causes = Vec::new();
    let mut hints = Vec::new();
    for part in parts {
        let mut pieces = part.split(HINT);
        causes.push(visible(pieces.next().unwrap_or_default()));
        hints.extend(pieces.map(visible));
    }
    let mut out = format!("lev: {}\n", causes.join(": "));
    for hint in hints {
        let _ = writeln!(out, "hint: {hint}");
    }
    out
}

/// `text` with every control character and every other hidden character
/// (bidi controls, zero-width characters, tags, ...:
/// [`lev_protocol::text::HIDDEN`]) escaped, so that it cannot move the
/// cursor, clear the screen, forge another line or hide what it says.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || lev_protocol::text::is_hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_causes_and_puts_hints_last() {
        let err = anyhow::anyhow!("no such file{HINT}make one").context("reading key");
        assert_eq!(
            render(err.chain().map(|e| e.to_string())),
            "lev: reading key: no such file\nhint: make one\n"
        );
    }

    #[test]
    fn a_source_already_in_its_context_is_said_once() {
        let causes = ["listen on 127.0.0.1:1: in use", "in use"].map(String::from);
        assert_eq!(
            render(without_repeats(causes.into_iter())),
            "lev: listen on 127.0.0.1:1: in use\n"
        );
    }

    #[test]
    fn control_characters_are_made_visible() {
        assert_eq!(visible("a\x1b[2Jb\rc\td"), "a\\u{1b}[2Jb\\rc\\td");
        assert_eq!(render(std::iter::once("x\ny".to_owned())), "lev: x\\ny\n");
        // Bidi controls, zero-width characters and tags are spelled out too.
        assert_eq!(
            visible("a\u{202e}b\u{200b}c\u{e0049}d\u{85}"),
            "a\\u{202e}b\\u{200b}c\\u{e0049}d\\u{85}"
        );
    }
}
