//! The shell command a Codex tool call runs, as lev's policy reads it.
//!
//! Codex hands its client one string per command: the model's command wrapped
//! in the user's shell, `/bin/bash -lc '<cmd>'` (or `sh -c`, `zsh -lc`). lev
//! gates `{"command": <cmd>, "argv": [...], "cwd": ...}`: `command` is what
//! the shell runs, and `argv` its words, so that a policy rule on `/argv/0`
//! sees `rm`, not `/bin/bash`.
//!
//! `argv` is only ever the words of a *simple* command: words of literal
//! characters, quoted or escaped as POSIX says. Anything the shell would
//! expand or chain (pipes, `&&`, `;`, redirections, `$...`, backquotes,
//! subshells, brace expansion, a glob such as `*.o` or `/bin/r[m]`, a tilde
//! such as `~/x` or `prefix=~`, a leading `VAR=value`, a reserved word such
//! as `if`, a comment, a newline, an unterminated quote) makes the command a
//! compound one, and its argv is `[<shell>, "-c", <cmd>]`: a rule keyed on
//! `/argv/0` then sees the shell, never a harmless first word (`ls`) in
//! front of a dangerous one (`; rm -rf ~`). Rules that must catch a word
//! anywhere in a command match `/command`.

/// A command split into what runs and what a policy reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellCommand {
    /// The text the shell runs (the model's command).
    pub command: String,
    /// Its words when it is a simple command, else `[shell, "-c", command]`.
    pub argv: Vec<String>,
}

impl ShellCommand {
    /// A command Codex will run as `wrapped` (`/bin/bash -lc '<cmd>'`): the
    /// inner command when the wrapper is a shell's `-c`, else the whole
    /// string as one command line.
    pub fn from_codex(wrapped: &str) -> Self {
        match unwrap_shell(wrapped) {
            Some((shell, inner)) => Self::from_script(&inner, &shell),
            None => Self::from_script(wrapped, "sh"),
        }
    }

    /// `command`, run by `shell` (a name or a path: the argv of a compound
    /// command starts with its file name).
    pub fn from_script(command: &str, shell: &str) -> Self {
        let argv = match simple_words(command) {
            Some(words) => words,
            None => vec![
                shell_name(shell).to_owned(),
                "-c".to_owned(),
                command.to_owned(),
            ],
        };
        Self {
            command: command.to_owned(),
            argv,
        }
    }
}

/// The file name of a shell path (`/bin/bash` -> `bash`).
fn shell_name(shell: &str) -> &str {
    shell
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("sh")
}

/// Shells whose `-c` lev unwraps.
const SHELLS: [&str; 5] = ["bash", "sh", "zsh", "dash", "ksh"];

/// Where a shell lev unwraps may live: a bare name (found on `PATH`) or one
/// of the system's own directories. The model may name the shell Codex runs
/// its command with; a `./bash` it wrote itself is a program like any other,
/// and stays the command's first word.
const SHELL_DIRS: [&str; 7] = [
    "/bin",
    "/usr/bin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
    "/opt/local/bin",
    "/run/current-system/sw/bin",
    "/usr/pkg/bin",
];

/// Whether `shell` names a shell lev unwraps: a known shell, by its bare
/// name or in a system directory.
fn is_system_shell(shell: &str) -> bool {
    let (dir, name) = shell.rsplit_once('/').unwrap_or(("", shell));
    SHELLS.contains(&name) && (!shell.contains('/') || SHELL_DIRS.contains(&dir))
}

/// `(shell, inner command)` of `<shell> [-l] -c '<cmd>'` (flags such as
/// `-lc`, `-c`, `-l -c`), or `None` when `wrapped` is not such a wrapper.
pub fn unwrap_shell(wrapped: &str) -> Option<(String, String)> {
    let words = simple_words(wrapped)?;
    let (shell, rest) = words.split_first()?;
    let (script, flags) = rest.split_last()?;
    if flags.is_empty() || !is_system_shell(shell) {
        return None;
    }
    let flag_ok = |f: &String| {
        f.len() > 1 && f.starts_with('-') && f[1..].chars().all(|c| c == 'l' || c == 'c')
    };
    if !flags.iter().all(flag_ok) || !flags.iter().any(|f| f.contains('c')) {
        return None;
    }
    Some((shell.clone(), script.clone()))
}

/// Words that start a compound command when they come first.
const RESERVED: [&str; 20] = [
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "function", "time", "coproc", "{", "}", "!", "[[",
];

/// The words of `text` when it is one simple command of literal words, as a
/// POSIX shell splits and unquotes them; `None` for anything else (see the
/// module's documentation).
pub fn simple_words(text: &str) -> Option<Vec<String>> {
    let mut words: Vec<String> = Vec::new();
    // The first word as written, before unquoting: `'if'` is a command, `if`
    // a reserved word; `A=1` an assignment, `'A=1'` a command.
    let mut first_raw: Option<String> = None;
    // The word being read (its value and its text), and whether one is open
    // (`''` is a word).
    let mut word = String::new();
    let mut raw = String::new();
    let mut open = false;
    // Brace expansion: an unquoted `{`, then `,` or `..`, then `}`.
    let mut brace = BraceScan::default();
    // An unquoted `[` in the word: with a `]` after it, a glob.
    let mut bracket = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !matches!(c, ' ' | '\t') {
            raw.push(c);
        }
        match c {
            ' ' | '\t' => {
                if open {
                    if bracket && raw.contains(']') {
                        return None;
                    }
                    bracket = false;
                    first_raw.get_or_insert_with(|| raw.clone());
                    words.push(std::mem::take(&mut word));
                    raw.clear();
                    open = false;
                    brace = BraceScan::default();
                }
            }
            '\n' | '|' | '&' | ';' | '<' | '>' | '(' | ')' | '$' | '`' => return None,
            '#' if !open => return None,
            '\\' => match chars.next() {
                None | Some('\n') => return None,
                Some(escaped) => {
                    raw.push(escaped);
                    word.push(escaped);
                    open = true;
                }
            },
            '\'' => {
                open = true;
                single_quoted(&mut chars, &mut raw, &mut word)?;
            }
            '"' => {
                open = true;
                double_quoted(&mut chars, &mut raw, &mut word)?;
            }
            // Globs: the shell replaces the word with the names it matches.
            '*' | '?' => return None,
            // zsh's `=cmd` is the path of `cmd`.
            '=' if !open => return None,
            // A tilde at the start of a word, or after an unquoted `=` or
            // `:` (bash expands `prefix=~/x` even as an argument).
            '~' if !open || matches!(raw.chars().rev().nth(1), Some('=' | ':')) => return None,
            other => {
                if other == '[' {
                    bracket = true;
                }
                if brace.step(other) {
                    return None;
                }
                word.push(other);
                open = true;
            }
        }
    }
    if open {
        if bracket && raw.contains(']') {
            return None;
        }
        first_raw.get_or_insert_with(|| raw.clone());
        words.push(word);
    }
    let first_raw = first_raw?;
    if RESERVED.contains(&first_raw.as_str()) || is_assignment(&first_raw) {
        return None;
    }
    Some(words)
}

/// The rest of a single-quoted string, after its opening `'`: every
/// character as written, up to the closing `'`. `None` when it never closes.
fn single_quoted(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    raw: &mut String,
    word: &mut String,
) -> Option<()> {
    loop {
        let q = chars.next()?;
        raw.push(q);
        if q == '\'' {
            return Some(());
        }
        word.push(q);
    }
}

/// The rest of a double-quoted string, after its opening `"`, up to the
/// closing `"`: `\"` and `\\` escaped, any other backslash kept. `None` when
/// it never closes, or holds an expansion (`$`, a backquote) or a
/// line continuation.
fn double_quoted(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    raw: &mut String,
    word: &mut String,
) -> Option<()> {
    loop {
        let q = chars.next()?;
        raw.push(q);
        match q {
            '$' | '`' => return None,
            '"' => return Some(()),
            '\\' => match chars.peek() {
                Some('\n') => return None,
                Some(&e @ ('"' | '\\')) => {
                    raw.push(e);
                    word.push(e);
                    chars.next();
                }
                _ => word.push('\\'),
            },
            q => word.push(q),
        }
    }
}

/// Whether a first word written as `raw` may be a variable assignment,
/// which a shell runs before the command rather than as it: an unquoted `=`
/// (`NAME=...`, bash's `NAME+=...` and `a[1]=...`, and anything else of the
/// kind: a command whose first word holds an unquoted `=` is compound).
fn is_assignment(raw: &str) -> bool {
    raw.split_once('=')
        .is_some_and(|(before, _)| !before.contains(['\'', '"', '\\']))
}

/// Tracks an unquoted `{ ... , ... }` or `{ .. }` within one word.
#[derive(Debug, Default)]
struct BraceScan {
    open: bool,
    list: bool,
    dot: bool,
}

impl BraceScan {
    /// Feed one unquoted character; true when a brace expansion closed.
    fn step(&mut self, c: char) -> bool {
        match c {
            '{' => {
                self.open = true;
                self.list = false;
                self.dot = false;
            }
            ',' if self.open => self.list = true,
            '.' if self.open => {
                if self.dot {
                    self.list = true;
                }
                self.dot = true;
                return false;
            }
            '}' if self.open && self.list => return true,
            _ => {}
        }
        self.dot = false;
        false
    }
}

/// `word` quoted for a POSIX shell: as is when it holds only characters no
/// shell treats specially, else in single quotes.
pub fn quote(word: &str) -> String {
    // A word starting with `=` is zsh's path lookup, and compound to
    // `simple_words`: quoted.
    let plain = !word.is_empty()
        && !word.starts_with('=')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `argv` as one shell command line that [`simple_words`] splits back into
/// exactly `argv` (a reserved first word is quoted too).
pub fn join(argv: &[String]) -> String {
    argv.iter()
        .enumerate()
        .map(|(i, w)| {
            if i == 0 && (RESERVED.contains(&w.as_str()) || w.contains('=')) {
                format!("'{}'", w.replace('\'', r"'\''"))
            } else {
                quote(w)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Option<Vec<String>> {
        simple_words(text)
    }

    fn v(words: &[&str]) -> Option<Vec<String>> {
        Some(words.iter().map(|w| (*w).to_owned()).collect())
    }

    #[test]
    fn simple_commands_split_as_a_shell_does() {
        assert_eq!(words("touch made.txt"), v(&["touch", "made.txt"]));
        assert_eq!(words("  ls   -la\t/tmp "), v(&["ls", "-la", "/tmp"]));
        assert_eq!(
            words("echo 'a b' \"c d\" e\\ f"),
            v(&["echo", "a b", "c d", "e f"])
        );
        assert_eq!(words("echo ''"), v(&["echo", ""]));
        assert_eq!(
            words(r#"echo "a\"b" "x\y" 'it'\''s'"#),
            v(&["echo", "a\"b", "x\\y", "it's"])
        );
        assert_eq!(
            words("git log --format=%H"),
            v(&["git", "log", "--format=%H"])
        );
        assert_eq!(
            words("git diff HEAD~1 -- a=b"),
            v(&["git", "diff", "HEAD~1", "--", "a=b"])
        );
        assert_eq!(
            words(r#"echo '*' \? "~" [ x ]"#),
            v(&["echo", "*", "?", "~", "[", "x", "]"])
        );
        assert_eq!(
            words("find . -name x -exec rm {} \\;"),
            v(&["find", ".", "-name", "x", "-exec", "rm", "{}", ";"])
        );
        assert_eq!(words("echo a#b"), v(&["echo", "a#b"]));
        assert_eq!(words("'A=1' rm x"), v(&["A=1", "rm", "x"]));
        assert_eq!(words("\"A+=1\" rm x"), v(&["A+=1", "rm", "x"]));
        assert_eq!(words("git config a.b=c"), v(&["git", "config", "a.b=c"]));
    }

    #[test]
    fn anything_a_shell_would_expand_or_chain_is_not_simple() {
        for compound in [
            "ls; rm -rf ~",
            "ls && rm x",
            "ls || rm x",
            "ls | sh",
            "ls & rm x",
            "echo x > f",
            "cat < f",
            "echo $(rm x)",
            "echo `rm x`",
            "echo $HOME",
            "echo \"$HOME\"",
            "echo \"`id`\"",
            "(rm x)",
            "ls\nrm x",
            "ls # ; rm",
            "A=1 rm x",
            "_A1=x rm",
            "if true; then rm x; fi",
            "{ rm x; }",
            "! rm x",
            "time rm x",
            "echo {a,b}",
            "echo x{1..3}",
            "rm *.o",
            "ls ?",
            "/bin/r[m] -rf x",
            "cat ~/x",
            "ls ~",
            "make prefix=~/x",
            "cp a b:~/c",
            "A+=x rm -rf /work",
            "a[1]=x rm x",
            "-x=1 rm x",
            "=rm -rf x",
            "ls =rm",
            "echo 'unterminated",
            "echo \"unterminated",
            "echo trailing\\",
            "echo \\\nrm",
            "",
            "   ",
        ] {
            assert_eq!(words(compound), None, "{compound:?}");
        }
    }

    #[test]
    fn codex_wrappers_are_unwrapped() {
        let c = ShellCommand::from_codex("/bin/bash -lc 'touch made.txt'");
        assert_eq!(c.command, "touch made.txt");
        assert_eq!(c.argv, ["touch", "made.txt"]);
        assert!(simple_words(&c.command).is_some());

        let c = ShellCommand::from_codex("/bin/bash -lc 'touch ../x.txt && echo wrote'");
        assert_eq!(c.command, "touch ../x.txt && echo wrote");
        assert_eq!(c.argv, ["bash", "-c", "touch ../x.txt && echo wrote"]);
        assert!(simple_words(&c.command).is_none());

        let c = ShellCommand::from_codex(r"/bin/bash -lc 'echo '\''hi there'\'''");
        assert_eq!(c.command, "echo 'hi there'");
        assert_eq!(c.argv, ["echo", "hi there"]);

        for (wrapped, inner) in [
            ("sh -c 'rm -rf build'", "rm -rf build"),
            ("/usr/bin/zsh -lc \"ls -la\"", "ls -la"),
            ("bash -l -c ls", "ls"),
            ("dash -c 'x'", "x"),
        ] {
            assert_eq!(
                unwrap_shell(wrapped),
                Some((
                    wrapped.split(' ').next().unwrap().to_owned(),
                    inner.to_owned()
                )),
                "{wrapped}"
            );
        }
        // Not a shell's -c: taken as one command line.
        for not_wrapped in [
            "python3 -c 'print(1)'",
            "bash script.sh",
            "bash -x -c ls",
            "bash -c",
            "ls",
        ] {
            assert_eq!(unwrap_shell(not_wrapped), None, "{not_wrapped}");
        }
        // A shell the model wrote itself is the command's first word.
        for own in [
            "./bash -lc 'cargo test'",
            "/ws/bin/bash -lc 'cargo test'",
            "bin/zsh -c ls",
        ] {
            assert_eq!(unwrap_shell(own), None, "{own}");
            let c = ShellCommand::from_codex(own);
            assert_ne!(c.argv[0], "cargo", "{own}");
            assert!(c.argv[0].contains('/'), "{own}: {:?}", c.argv);
        }
        for system in [
            "/usr/bin/bash -lc ls",
            "/opt/homebrew/bin/zsh -lc ls",
            "bash -lc ls",
        ] {
            assert_eq!(ShellCommand::from_codex(system).argv, ["ls"], "{system}");
        }
        let c = ShellCommand::from_codex("python3 -c 'print(1)'");
        assert_eq!(c.argv, ["python3", "-c", "print(1)"]);
        let c = ShellCommand::from_codex("ls | rm");
        assert_eq!(c.argv, ["sh", "-c", "ls | rm"]);
    }

    #[test]
    fn a_harmless_first_word_never_hides_a_dangerous_command() {
        for cmd in [
            "ls; rm -rf /",
            "ls && rm -rf /",
            "echo ok | rm",
            "X=ls rm -rf /",
            "ls $(rm -rf /)",
        ] {
            let c = ShellCommand::from_script(cmd, "/bin/bash");
            assert_eq!(c.argv[0], "bash", "{cmd}");
            assert_eq!(c.argv[2], cmd);
        }
    }

    #[test]
    fn join_round_trips() {
        for argv in [
            vec!["ls"],
            vec![
                "echo", "a b", "it's", "", "$HOME", "x;y", "`id`", "a\nb", "{a,b}", "#c",
            ],
            vec!["if", "x"],
            vec!["A=1", "b"],
            vec!["rm", "-rf", "build/tmp"],
            vec!["ls", "=rm", "a=b"],
        ] {
            let argv: Vec<String> = argv.into_iter().map(str::to_owned).collect();
            let line = join(&argv);
            assert_eq!(simple_words(&line), Some(argv.clone()), "{line}");
        }
    }

    /// The words the shell passes for `x COMMAND`, as arguments of `printf`
    /// (run in `dir`, with `HOME` where nothing is).
    fn shell_words(shell: &str, command: &str, dir: &std::path::Path) -> Vec<String> {
        let out = std::process::Command::new(shell)
            .arg("-c")
            .arg(format!("printf '%s\\0' x {command}"))
            .current_dir(dir)
            .env_clear()
            .env("HOME", "/nonexistent/home")
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell} -c {command:?}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let mut words: Vec<String> = text.split('\0').map(str::to_owned).collect();
        assert_eq!(words.pop().as_deref(), Some(""));
        words
    }

    /// What lev reads as argv is what the program gets: every command that
    /// `simple_words` splits is handed to bash and to dash as the arguments
    /// of `printf`, in a directory holding files that a glob would match and
    /// with a `HOME` a tilde would expand to; both shells pass exactly those
    /// words. (Before globs and tildes made a command compound, `/bin/r[m]`
    /// read as a harmless word that the shell turns into `/bin/rm`.)
    #[test]
    fn the_words_are_what_a_real_shell_passes() {
        use proptest::prelude::*;
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "ab", "b", "[a]", "a.b", "-", "a=b"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        const ALPHABET: &[char] = &[
            'a', 'b', '*', '?', '[', ']', '~', '{', '}', ',', '.', '\'', '"', '\\', ' ', '=', ':',
            '-', '/', '!', '#', '%', '^', '+',
        ];
        let commands = proptest::collection::vec(proptest::sample::select(ALPHABET), 1..14)
            .prop_map(|chars| chars.into_iter().collect::<String>());
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 600,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let split = std::cell::Cell::new(0u32);
        runner
            .run(&commands, |command| {
                if let Some(words) = simple_words(&format!("x {command}")) {
                    split.set(split.get() + 1);
                    for shell in ["bash", "dash"] {
                        let passed = shell_words(shell, &command, dir.path());
                        prop_assert_eq!(&passed, &words, "{} -c {:?}", shell, command);
                    }
                }
                Ok(())
            })
            .unwrap();
        // The alphabet reaches simple commands often enough to mean something.
        let split = split.get();
        assert!(split > 100, "only {split} of 600 commands were simple");
    }
}
