//! JSON that lev prints: every `--json` output, `lev verify`'s approval and
//! verdict, hook outputs for agents. One writer for all of it,
//! [`lev_protocol::json::to_string_inert`]: hidden characters (controls,
//! bidi controls, zero-width characters, tags, ...) are written as `\uXXXX`,
//! the same value for a parser and nothing a terminal acts on.
//!
//! Nothing under `src/` writes JSON for stdout any other way (a test reads
//! the sources to keep it so).

use std::io::Write as _;

use anyhow::Context as _;
use serde::Serialize;

/// `value` as pretty JSON (two-space indent), hidden characters escaped.
///
/// # Errors
/// When `value` cannot be written as JSON.
pub fn json_pretty<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
    lev_protocol::json::to_string_inert(value, true).context("writing JSON")
}

/// Print `value` as pretty JSON and a newline on stdout.
///
/// # Errors
/// When it cannot be written, or stdout is closed.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    let text = json_pretty(value)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}")?;
    stdout.flush()?;
    Ok(())
}

/// Print `value` as one line of compact JSON on stdout (a hook's output).
///
/// # Errors
/// When it cannot be written, or stdout is closed.
pub fn print_json_line<T: Serialize + ?Sized>(value: &T) -> std::io::Result<()> {
    let text = lev_protocol::json::to_string_inert(value, false).map_err(std::io::Error::other)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}")?;
    stdout.flush()
}

#[cfg(test)]
mod tests {
    /// Every JSON lev prints goes through this module: no other place in
    /// the sources serialises JSON for stdout.
    #[test]
    fn nothing_else_prints_json() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut stack = vec![src];
        let mut offenders = Vec::new();
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") || path.ends_with("out.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let lines: Vec<&str> = text.lines().collect();
                for (n, line) in lines.iter().enumerate() {
                    // `lev watch` shows JSON itself, spelling hidden characters out.
                    if n > 0 && lines[n - 1].contains("the view spells hidden characters out") {
                        continue;
                    }
                    // Pretty JSON is for reading: it is printed, so it is written here.
                    let printing_json = line.contains("serde_json::to_writer")
                        || line.contains("to_string_pretty")
                        || (line.contains("print") && line.contains("serde_json::to_string"));
                    if printing_json {
                        offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "JSON printed without crate::out:\n{}",
            offenders.join("\n")
        );
    }
}
