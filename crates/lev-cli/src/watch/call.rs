//! What a tool call will do, read from its args: a shell command line, a file
//! write, an HTTP request. Only a reading for people: the exact args are
//! always shown beside it, and nothing here is trusted.

use serde_json::Value;

/// A tool call, as a person should read it before approving it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// A command: its argv as a shell would need it quoted, and where it runs.
    Shell {
        /// The command line, each word quoted when it has to be.
        line: String,
        /// The working directory, when given.
        cwd: Option<String>,
    },
    /// A file written: its path and its new text.
    Write {
        /// The file.
        path: String,
        /// What it will hold.
        text: String,
    },
    /// An HTTP request.
    Http {
        /// `GET` unless the args say otherwise.
        method: String,
        /// The URL.
        url: String,
        /// The body, as text (JSON re-encoded when it is not a string).
        body: Option<String>,
    },
}

/// The call `args_json` makes, when its shape is one of the known ones;
/// `None` otherwise (the exact args are then all there is).
pub fn describe(args_json: &str) -> Option<Call> {
    let args: Value = serde_json::from_str(args_json).ok()?;
    let obj = args.as_object()?;
    let text_of = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| obj.get(*k).and_then(Value::as_str))
            .map(str::to_owned)
    };
    // A command: argv (or command/cmd) as an array of strings, or one string.
    for key in ["argv", "command", "cmd"] {
        match obj.get(key) {
            Some(Value::Array(words)) if !words.is_empty() => {
                let words: Option<Vec<&str>> = words.iter().map(Value::as_str).collect();
                if let Some(words) = words {
                    return Some(Call::Shell {
                        line: words
                            .iter()
                            .map(|w| shell_quote(w))
                            .collect::<Vec<_>>()
                            .join(" "),
                        cwd: text_of(&["cwd", "workdir", "dir"]),
                    });
                }
            }
            Some(Value::String(line)) if !line.is_empty() => {
                return Some(Call::Shell {
                    line: line.clone(),
                    cwd: text_of(&["cwd", "workdir", "dir"]),
                });
            }
            _ => {}
        }
    }
    // An HTTP request: a URL, with a method and a body perhaps.
    if let Some(url) = text_of(&["url", "uri"]) {
        let body = ["body", "data", "json"]
            .iter()
            .find_map(|k| obj.get(*k))
            .filter(|v| !v.is_null())
            .map(|v| match v {
                Value::String(s) => s.clone(),
                // Raw, not inert: the view spells hidden characters out and flags them.
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            });
        let method = text_of(&["method"])
            .map(|m| m.to_uppercase())
            .unwrap_or_else(|| if body.is_some() { "POST" } else { "GET" }.to_owned());
        return Some(Call::Http { method, url, body });
    }
    // A file write: a path and its text.
    let path = text_of(&["file_path", "path", "filename", "file"]);
    let text = text_of(&["content", "contents", "text", "new_string"]);
    if let (Some(path), Some(text)) = (path, text) {
        return Some(Call::Write { path, text });
    }
    None
}

/// `word` as a POSIX shell reads it back: bare when it holds only safe
/// characters, else in single quotes (a `'` inside written `'\''`).
pub fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_commands_are_quoted_as_a_shell_reads_them() {
        assert_eq!(
            describe(r#"{"argv":["rm","-rf","my dir","it's",""],"cwd":"/w"}"#),
            Some(Call::Shell {
                line: r#"rm -rf 'my dir' 'it'\''s' ''"#.into(),
                cwd: Some("/w".into())
            })
        );
        assert_eq!(
            describe(r#"{"command":"ls -la | wc -l"}"#),
            Some(Call::Shell {
                line: "ls -la | wc -l".into(),
                cwd: None
            })
        );
    }

    #[test]
    fn writes_and_http_calls_are_recognised() {
        assert_eq!(
            describe(r#"{"file_path":"/etc/hosts","content":"a\nb"}"#),
            Some(Call::Write {
                path: "/etc/hosts".into(),
                text: "a\nb".into()
            })
        );
        assert_eq!(
            describe(r#"{"url":"https://x.test/a","method":"put","body":{"k":1}}"#),
            Some(Call::Http {
                method: "PUT".into(),
                url: "https://x.test/a".into(),
                body: Some("{\n  \"k\": 1\n}".into())
            })
        );
        assert_eq!(
            describe(r#"{"url":"https://x.test"}"#)
                .map(|c| matches!(c, Call::Http { method, .. } if method == "GET")),
            Some(true)
        );
        assert_eq!(describe(r#"{"n":1}"#), None);
        assert_eq!(describe("not json"), None);
    }
}
