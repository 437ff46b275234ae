//! Printing text that agents wrote: control characters and every other hidden
//! character ([`lev_protocol::text::is_hidden`]) made visible, never
//! interpreted, and colour only on a terminal without `NO_COLOR`.

use std::io::IsTerminal as _;

/// `text` safe to print on a terminal, on one line: escape, carriage return,
/// newline and every other control character shown as `\e`, `\r`, `\n`,
/// `^X`; every other hidden character (bidi controls, zero-width characters,
/// tags, variation selectors, fillers: [`lev_protocol::text::HIDDEN`]) as
/// `\u{...}`.
pub fn one_line(text: &str) -> String {
    escape(text, false)
}

/// As [`one_line`], but newlines and tabs are kept: for prompts and answers
/// shown in full.
pub fn multi_line(text: &str) -> String {
    escape(text, true)
}

/// Wait for `work`, saying on stderr what is awaited: a spinner with the time
/// waited when stderr is a terminal, one plain line otherwise. `None` when
/// the person pressed Ctrl-C first, or SIGTERM or SIGHUP (the terminal gone)
/// came: the caller cancels what it waited for rather than leave it behind.
///
/// `waiting` reads after "waiting for" (`an answer to ir_...`); `hint` is the
/// command that answers it.
pub async fn wait_with_spinner<T>(
    waiting: &str,
    hint: &str,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    use std::io::Write as _;
    let spinner = std::io::stderr().is_terminal();
    if !spinner {
        eprintln!("lev: waiting for {waiting} (answer with: {hint})");
    }
    let started = tokio::time::Instant::now();
    tokio::pin!(work);
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    let mut frame = 0;
    let mut signals = crate::signals::Terminating::new().ok();
    let stopped = async {
        match signals.as_mut() {
            Some(signals) => {
                let _ = signals.recv().await;
            }
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    tokio::pin!(stopped);
    let result = loop {
        tokio::select! {
            result = &mut work => break Some(result),
            () = &mut stopped => break None,
            _ = tick.tick(), if spinner => {
                let mut err = std::io::stderr();
                let _ = write!(
                    err,
                    "\r\x1b[2K{} waiting for {waiting} ({}s) - answer with: {hint}",
                    frames[frame % frames.len()],
                    started.elapsed().as_secs()
                );
                let _ = err.flush();
                frame += 1;
            }
        }
    };
    if spinner {
        eprint!("\r\x1b[2K");
    }
    result
}

fn escape(text: &str, keep_lines: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match escape_char(c, keep_lines) {
            Some(shown) => out.push_str(&shown),
            None => out.push(c),
        }
    }
    out
}

/// How `c` is shown when it must not reach the terminal raw: `\n`, `^G`,
/// `\u{202e}`...; `None` for a character printed as itself (newline and tab
/// too when `keep_lines`). [`one_line`] and [`multi_line`] are this over
/// every character; `lev watch` uses it to mark what it spelled out.
pub fn escape_char(c: char, keep_lines: bool) -> Option<String> {
    Some(match c {
        '\n' | '\t' if keep_lines => return None,
        '\n' => "\\n".to_owned(),
        '\t' => "\\t".to_owned(),
        '\r' => "\\r".to_owned(),
        '\u{1b}' => "\\e".to_owned(),
        '\u{7f}' => "^?".to_owned(),
        c if (c as u32) < 0x20 => format!("^{}", char::from(b'@' + c as u8)),
        c if lev_protocol::text::is_hidden(c) => format!("\\u{{{:x}}}", c as u32),
        _ => return None,
    })
}

/// At most `max` characters of `text` on one line, with `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    let line = one_line(text);
    if line.chars().count() <= max {
        return line;
    }
    let mut out: String = line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// ANSI styles, on only when stdout is a terminal and `NO_COLOR` is not set.
/// `CLICOLOR_FORCE=1` turns them on off a terminal (never over `NO_COLOR`).
#[derive(Debug, Clone, Copy)]
pub struct Style {
    on: bool,
}

impl Style {
    /// The style for stdout.
    pub fn stdout() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some();
        let forced = std::env::var_os("CLICOLOR_FORCE").is_some_and(|v| !v.is_empty() && v != "0");
        Self {
            on: !no_color && (forced || std::io::stdout().is_terminal()),
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// Bold.
    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Dim, for secondary detail.
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Green, for approvals and success.
    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Red, for denials and failures.
    pub fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    /// Yellow, for what waits.
    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Cyan, for ids.
    pub fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }
}

/// How long ago `then` was, shortly: `12s`, `5m`, `3h`, `2d`.
pub fn age(then: time::OffsetDateTime) -> String {
    let secs = (time::OffsetDateTime::now_utc() - then)
        .whole_seconds()
        .max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// An RFC 3339 time, or `-`.
pub fn rfc3339(t: Option<time::OffsetDateTime>) -> String {
    t.and_then(|t| t.replace_nanosecond(0).ok())
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "-".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_visible() {
        let cases = [
            ("plain", "plain", "plain"),
            ("a\x1b[2Jb", "a\\e[2Jb", "a\\e[2Jb"),
            ("line\nnext\ttab", "line\\nnext\\ttab", "line\nnext\ttab"),
            ("cr\rover", "cr\\rover", "cr\\rover"),
            (
                "bell\x07nul\0del\x7f",
                "bell^Gnul^@del^?",
                "bell^Gnul^@del^?",
            ),
            ("csi\u{9b}31m", "csi\\u{9b}31m", "csi\\u{9b}31m"),
            ("abc\u{202e}fed", "abc\\u{202e}fed", "abc\\u{202e}fed"),
            (
                "zero\u{200b}width\u{feff}",
                "zero\\u{200b}width\\u{feff}",
                "zero\\u{200b}width\\u{feff}",
            ),
            ("é 日本 😀", "é 日本 😀", "é 日本 😀"),
            (
                "a\u{e0049}\u{e0047}b\u{ad}c\u{3164}d\u{180e}e\u{fe0f}f\u{34f}g\u{e0100}",
                "a\\u{e0049}\\u{e0047}b\\u{ad}c\\u{3164}d\\u{180e}e\\u{fe0f}f\\u{34f}g\\u{e0100}",
                "a\\u{e0049}\\u{e0047}b\\u{ad}c\\u{3164}d\\u{180e}e\\u{fe0f}f\\u{34f}g\\u{e0100}",
            ),
        ];
        for (input, one, multi) in cases {
            assert_eq!(one_line(input), one, "one_line({input:?})");
            assert_eq!(multi_line(input), multi, "multi_line({input:?})");
        }
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("ab\ncd", 10), "ab\\ncd");
    }
}
