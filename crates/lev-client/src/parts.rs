//! Attachments: storing an answer's parts where the worker chose, under
//! names that cannot escape that directory, and building parts to send.
//!
//! The server already reduces a part's name to a plain file name; the SDK
//! does so again, because a worker must not trust the server (or a proxy)
//! with the paths it writes to.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use lev_protocol::{InboundPart, StoredPart};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::error::{Error, Result};

/// The longest file name the SDK writes, in bytes.
const MAX_NAME_BYTES: usize = 120;

/// An attachment stored by the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedPart {
    /// The name the answer gave it.
    pub name: String,
    /// Where it was stored.
    pub path: PathBuf,
    /// Its media type.
    pub media_type: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the bytes, lowercase hex.
    pub sha256: String,
}

/// A part to send with an answer, from a file's bytes.
pub fn inbound_part(name: &str, media_type: &str, bytes: &[u8]) -> InboundPart {
    InboundPart {
        name: name.to_owned(),
        media_type: media_type.to_owned(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
    }
}

/// A name that is one plain file name: the last path component, control,
/// invisible and reserved characters replaced, no leading dot (no hidden
/// files, no `..`), at most [`MAX_NAME_BYTES`] bytes, never empty.
pub fn safe_file_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let replaced: String = base
        .chars()
        .map(|c| {
            if c.is_control()
                || is_invisible(c)
                || matches!(c, ':' | '*' | '?' | '"' | '<' | '>' | '|')
            {
                '_'
            } else {
                c
            }
        })
        .collect();
    let trimmed = replaced.trim_matches(|c: char| c == '.' || c.is_whitespace());
    let mut out = String::new();
    for c in trimmed.chars() {
        if out.len() + c.len_utf8() > MAX_NAME_BYTES {
            break;
        }
        out.push(c);
    }
    if out.is_empty() {
        "attachment".to_owned()
    } else {
        out
    }
}

/// Characters that change how text is shown without being seen: bidi
/// controls, zero-width characters, tags, fillers and the rest of
/// [`lev_protocol::text::HIDDEN`].
pub fn is_invisible(c: char) -> bool {
    lev_protocol::text::is_hidden(c)
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Store `bytes` of `part` in `dir` (created if missing). The name is
/// [`safe_file_name`]; when a different file holds it, the digest's first
/// 12 hex digits go before the extension. The same bytes stored twice reuse
/// the file.
pub(crate) async fn store(dir: &Path, part: &StoredPart, bytes: &[u8]) -> Result<SavedPart> {
    let digest = sha256_hex(bytes);
    if !digest.eq_ignore_ascii_case(&part.sha256) {
        return Err(Error::Part {
            name: part.name.clone(),
            reason: format!(
                "expected bytes with SHA-256 {}, found {digest}",
                part.sha256
            ),
        });
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    tokio::fs::create_dir_all(dir).await.map_err(io(dir))?;
    let name = safe_file_name(&part.name);
    let candidates = [name.clone(), with_digest(&name, &digest)];
    for candidate in candidates {
        let path = dir.join(&candidate);
        match tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await
        {
            Ok(mut file) => {
                file.write_all(bytes).await.map_err(io(&path))?;
                file.flush().await.map_err(io(&path))?;
                return Ok(saved(part, path, bytes.len(), digest));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Reuse a regular file that already holds these bytes; never
                // follow a link someone put there.
                let meta = tokio::fs::symlink_metadata(&path)
                    .await
                    .map_err(io(&path))?;
                if meta.is_file() && u64::try_from(bytes.len()).is_ok_and(|n| n == meta.len()) {
                    // Read no more than these bytes and one: the file may
                    // have grown since its size was read.
                    let mut existing = Vec::with_capacity(bytes.len());
                    tokio::fs::File::open(&path)
                        .await
                        .map_err(io(&path))?
                        .take(bytes.len() as u64 + 1)
                        .read_to_end(&mut existing)
                        .await
                        .map_err(io(&path))?;
                    if sha256_hex(&existing) == digest {
                        return Ok(saved(part, path, bytes.len(), digest));
                    }
                }
            }
            Err(e) => return Err(io(&path)(e)),
        }
    }
    Err(Error::Part {
        name: part.name.clone(),
        reason: format!(
            "expected a free file name in {}, found {name:?} and its digest-suffixed form taken by other files",
            dir.display()
        ),
    })
}

fn saved(part: &StoredPart, path: PathBuf, size: usize, sha256: String) -> SavedPart {
    SavedPart {
        name: part.name.clone(),
        path,
        media_type: part.media_type.clone(),
        size: u64::try_from(size).unwrap_or(u64::MAX),
        sha256,
    }
}

fn with_digest(name: &str, digest: &str) -> String {
    let short = &digest[..12.min(digest.len())];
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}-{short}.{ext}"),
        _ => format!("{name}-{short}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_plain() {
        let cases = [
            ("notes.md", "notes.md"),
            ("../../etc/passwd", "passwd"),
            ("C:\\Users\\x\\evil.bat", "evil.bat"),
            ("..", "attachment"),
            ("", "attachment"),
            (".bashrc", "bashrc"),
            ("a\nb\x1b[31m.txt", "a_b_[31m.txt"),
            ("rep\u{202E}txt.exe", "rep_txt.exe"),
            ("dir/", "attachment"),
            ("what?.txt", "what_.txt"),
        ];
        for (input, want) in cases {
            assert_eq!(safe_file_name(input), want, "input {input:?}");
        }
        let long = "é".repeat(200);
        assert!(safe_file_name(&long).len() <= MAX_NAME_BYTES);
    }

    #[tokio::test]
    async fn stores_checks_and_dedups() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io {
            path: PathBuf::from("tmp"),
            source,
        })?;
        let part = |bytes: &[u8]| StoredPart {
            name: "../report.txt".into(),
            media_type: "text/plain".into(),
            size: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
            sha256: sha256_hex(bytes),
            original_name: None,
        };
        let a = store(dir.path(), &part(b"one"), b"one").await?;
        assert_eq!(a.path, dir.path().join("report.txt"));
        let again = store(dir.path(), &part(b"one"), b"one").await?;
        assert_eq!(again.path, a.path);
        let b = store(dir.path(), &part(b"two"), b"two").await?;
        assert_ne!(b.path, a.path);
        assert!(b.path.starts_with(dir.path()));
        assert_eq!(
            tokio::fs::read(&b.path).await.ok().as_deref(),
            Some(&b"two"[..])
        );
        let mut wrong = part(b"one");
        wrong.sha256 = sha256_hex(b"other");
        assert!(matches!(
            store(dir.path(), &wrong, b"one").await,
            Err(Error::Part { .. })
        ));
        Ok(())
    }
}
