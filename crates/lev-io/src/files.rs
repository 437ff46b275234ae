//! Reading a file lev was pointed at, never past a limit: the one helper
//! every such read goes through, in the CLI (an envelope, args, keys, a
//! token, an attachment, a config, standard input) and in the server (the
//! policy, the Slack configuration, the key-encryption key, TLS files,
//! attachments under its root).
//!
//! A path may name `/dev/zero`, a FIFO or a file that grows while it is read:
//! the size on disk is checked first when there is one, and the read itself
//! stops at `limit + 1` bytes (`Read::take`), so no input can make lev hold
//! more than its limit. The error names the file, the limit and what was
//! found.
//!
//! It lives in `lev-io`, below both the SDK and the server (`lev-protocol`
//! and `lev-approval` are pure by rule); the SDK re-exports it as
//! `lev_client::files`.

use std::io::Read;
use std::path::{Path, PathBuf};

/// One kibibyte.
pub const KIB: u64 = 1024;
/// One mebibyte.
pub const MIB: u64 = 1024 * KIB;

/// The limits, by kind of file. Each is well above what lev itself writes
/// or accepts for that kind (SPEC section 9) and far below what would hurt.
pub mod limit {
    use super::{KIB, MIB};

    /// A token file (`admin.token`, a token given by file): a line.
    pub const TOKEN: u64 = 64 * KIB;
    /// A secret or key file: the key-encryption key, a webhook or Slack
    /// secret, a person's signing key.
    pub const SECRET: u64 = 64 * KIB;
    /// Public keys: a JWKS (the server's or people's), a JWK.
    pub const KEYS: u64 = MIB;
    /// A signed envelope (its payload holds args, an edit and votes).
    pub const ENVELOPE: u64 = 4 * MIB;
    /// A call's args, or an edit of them: a JSON body's limit (the args
    /// themselves are at most 256 KiB).
    pub const ARGS: u64 = MIB;
    /// A hook event on standard input: a JSON body's limit.
    pub const EVENT: u64 = MIB;
    /// A configuration file: the policy, the Slack configuration, Codex's
    /// `config.toml`.
    pub const CONFIG: u64 = MIB;
    /// A PEM file: a certificate chain, a CA bundle, a private key.
    pub const PEM: u64 = 4 * MIB;
    /// An attached file: one part (SPEC section 9).
    pub const PART: u64 = 10 * MIB;
    /// A saved audit head (`lev audit --head`).
    pub const HEAD: u64 = 64 * KIB;
}

/// A file (or standard input) that could not be read whole under its limit.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Longer than its limit.
    #[error("{}: expected at most {}, found {found}", shown(.path), human(*limit))]
    TooLarge {
        /// The file (`-` for standard input).
        path: PathBuf,
        /// The limit for its kind.
        limit: u64,
        /// What was found: its size, or "more" for a stream that went on.
        found: String,
    },
    /// Opening or reading it failed.
    #[error("{}: {source}", shown(.path))]
    Io {
        /// The file (`-` for standard input).
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Not UTF-8 text where text was expected.
    #[error("{}: expected UTF-8 text, found other bytes", shown(.path))]
    NotText {
        /// The file.
        path: PathBuf,
    },
}

impl FileError {
    /// The file it is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::TooLarge { path, .. } | Self::Io { path, .. } | Self::NotText { path } => path,
        }
    }

    /// What went wrong, without the file's name (for a message that names
    /// it already).
    pub fn reason(&self) -> String {
        match self {
            Self::TooLarge { limit, found, .. } => {
                format!("expected at most {}, found {found}", human(*limit))
            }
            Self::Io { source, .. } => source.to_string(),
            Self::NotText { .. } => "expected UTF-8 text, found other bytes".to_owned(),
        }
    }

    /// Whether the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

fn shown(path: &Path) -> String {
    if path == Path::new("-") {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    }
}

/// `bytes` for a person: `1 MiB`, `64 KiB`, `300 bytes`.
pub fn human(bytes: u64) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// The bytes of the file at `path`, at most `limit` of them.
///
/// A regular file larger than `limit` is refused from its size, unread; any
/// other file (a device, a FIFO, a file growing meanwhile) is read up to
/// `limit + 1` bytes and refused if it went on.
///
/// # Errors
/// [`FileError::TooLarge`] past the limit, [`FileError::Io`] when it cannot
/// be opened or read (a directory included).
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let io = |source| FileError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "expected a file, found a directory",
        )));
    }
    if meta.is_file() && meta.len() > limit {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
            limit,
            found: format!("{} bytes", meta.len()),
        });
    }
    read_from(file, path, limit)
}

/// [`read`], as UTF-8 text.
///
/// # Errors
/// As [`read`], and [`FileError::NotText`].
pub fn read_text(path: &Path, limit: u64) -> Result<String, FileError> {
    String::from_utf8(read(path, limit)?).map_err(|_| FileError::NotText {
        path: path.to_owned(),
    })
}

/// Standard input to its end, at most `limit` bytes.
///
/// # Errors
/// As [`read_from`], the path shown as "standard input".
pub fn read_stdin(limit: u64) -> Result<Vec<u8>, FileError> {
    read_from(std::io::stdin().lock(), Path::new("-"), limit)
}

/// `path` as [`read`] reads it, or standard input for `-`.
///
/// # Errors
/// As [`read`].
pub fn read_or_stdin(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    if path == Path::new("-") {
        read_stdin(limit)
    } else {
        read(path, limit)
    }
}

/// `reader` to its end, at most `limit` bytes; `path` names it in errors.
/// Never holds more than `limit + 1` bytes, whatever the reader gives.
///
/// # Errors
/// [`FileError::TooLarge`] when the reader goes past `limit`,
/// [`FileError::Io`] when it fails.
pub fn read_from(reader: impl Read, path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| FileError::Io {
            path: path.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
            limit,
            found: format!("more than {}", human(limit)),
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_file_within_its_limit_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read(&path, 5).unwrap(), b"12345");
        assert_eq!(read_text(&path, 5).unwrap(), "12345");
        let e = read(&path, 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: expected at most 4 bytes, found 5 bytes",
                path.display()
            )
        );
    }

    #[test]
    fn a_stream_that_never_ends_stops_at_the_limit() {
        let e = read_from(std::io::repeat(0), Path::new("-"), MIB).unwrap_err();
        assert_eq!(
            e.to_string(),
            "standard input: expected at most 1 MiB, found more than 1 MiB"
        );
        #[cfg(unix)]
        {
            let e = read(Path::new("/dev/zero"), 64 * KIB).unwrap_err();
            assert!(matches!(e, FileError::TooLarge { .. }), "{e}");
            assert_eq!(
                e.to_string(),
                "/dev/zero: expected at most 64 KiB, found more than 64 KiB"
            );
        }
    }

    #[test]
    fn directories_missing_files_and_bad_text_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let e = read(dir.path(), MIB).unwrap_err();
        assert!(
            e.to_string().contains("expected a file, found a directory"),
            "{e}"
        );
        let missing = dir.path().join("missing");
        assert!(read(&missing, MIB).unwrap_err().is_not_found());
        let bad = dir.path().join("bad");
        std::fs::write(&bad, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_text(&bad, MIB),
            Err(FileError::NotText { .. })
        ));
    }
}
