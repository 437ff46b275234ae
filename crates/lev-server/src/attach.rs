//! `@path` in a dashboard reply: attach that file from the server's machine,
//! only below `--attach-root` (off unless set), never outside it.
//!
//! The CLI reads `@path` on the person's own machine and sends the bytes as
//! parts; a browser cannot, so for an answer given through the dashboard's
//! session the server reads the file itself. A word `@x` whose path resolves
//! (symbolic links followed) to a regular file below the root attaches it; a
//! word that names no such file stays text (`@alice`), unless it plainly
//! meant a file (it holds a `/`), which is a 422 naming the word. Nothing
//! outside the root is read, and the error does not say whether such a file
//! exists.

use std::path::{Path, PathBuf};

use lev_protocol::{InboundPart, InteractionResponse};

use crate::config::Settings;
use crate::error::{ApiError, ApiResult};
use crate::session_auth::SessionInfo;

/// Add the files an answer's `@path` words name to its parts, when the answer
/// came through a dashboard session and the server has an attach root.
///
/// # Errors
/// 422 for a `@word/with/slash` naming no file below the root; 413 for a file
/// over the part limit; 500 when a file below the root cannot be read.
pub fn expand_at_paths(
    settings: &Settings,
    via: Option<&SessionInfo>,
    answer: &mut InteractionResponse,
) -> ApiResult<()> {
    let (Some(root), Some(_), Some(value)) = (&settings.attach_root, via, &answer.value) else {
        return Ok(());
    };
    let files = at_path_files(root, value)?;
    for file in files {
        answer
            .parts
            .push(read_part(&file, settings.max_part_bytes)?);
    }
    Ok(())
}

/// The files below `root` that `text`'s `@path` words name, in order, once each.
///
/// # Errors
/// 422 for a word with a `/` that names no file below the root.
pub fn at_path_files(root: &Path, text: &str) -> ApiResult<Vec<PathBuf>> {
    let root = root
        .canonicalize()
        .map_err(|e| ApiError::Internal(format!("--attach-root {}: {e}", root.display())))?;
    let mut files: Vec<PathBuf> = Vec::new();
    for word in text.split_whitespace() {
        let Some(raw) = word.strip_prefix('@') else {
            continue;
        };
        if raw.is_empty() {
            continue;
        }
        let trimmed = raw.trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
        let found = [raw, trimmed]
            .into_iter()
            .filter(|c| !c.is_empty())
            .find_map(|c| resolve_below(&root, c));
        match found {
            Some(path) if files.contains(&path) => {}
            Some(path) => files.push(path),
            None if raw.contains('/') => {
                return Err(ApiError::Invalid(format!(
                    "value: expected @{raw} to name a file below the server's attach root, found \
                     none"
                )));
            }
            None => {}
        }
    }
    Ok(files)
}

/// `candidate` (relative to `root`; a leading `/` is taken from the root too)
/// as a regular file below `root`, symbolic links resolved.
fn resolve_below(root: &Path, candidate: &str) -> Option<PathBuf> {
    let relative = candidate.trim_start_matches('/');
    if relative.is_empty() || relative.contains('\0') {
        return None;
    }
    let path = root.join(relative).canonicalize().ok()?;
    (path.starts_with(root) && path != root && path.is_file()).then_some(path)
}

/// Why a file named by `@name` could not be read: 503 `store_unavailable`
/// when the cause may pass (an IO error, no file handles or memory left),
/// else 422 naming it (it vanished since it was found, or is unreadable).
fn unreadable(name: &str, path: &Path, e: &std::io::Error) -> ApiError {
    if lev_store::io_may_pass(e) {
        crate::log::error(&format!("attach {}: {e}", path.display()));
        ApiError::StoreUnavailable
    } else {
        ApiError::Invalid(format!(
            "value: @{name} names a file below the server's attach root that cannot be read: {e}"
        ))
    }
}

fn read_part(path: &Path, max_bytes: usize) -> ApiResult<InboundPart> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "attachment".to_owned());
    // Under the limit even if the file grows after it was found.
    let bytes = lev_client::files::read(path, max_bytes as u64).map_err(|e| match e {
        lev_client::files::FileError::TooLarge { found, .. } => ApiError::TooLarge(format!(
            "value: @{name}: expected at most the {max_bytes} bytes one part may be, found {found}"
        )),
        lev_client::files::FileError::Io { source, .. } => unreadable(&name, path, &source),
        other => ApiError::Invalid(format!("value: @{name}: {other}")),
    })?;
    Ok(InboundPart {
        media_type: media_type(path, &bytes).to_owned(),
        name,
        data: lev_approval::encode_base64(&bytes),
    })
}

/// A media type from the file's extension, else `text/plain` for UTF-8 text
/// and `application/octet-stream` for the rest.
fn media_type(path: &Path, bytes: &[u8]) -> &'static str {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" | "log" => "text/plain",
        "csv" => "text/csv",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "diff" | "patch" => "text/x-diff",
        _ if std::str::from_utf8(bytes).is_ok() => "text/plain",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type R = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn words_attach_files_below_the_root_only() -> R {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("sub"))?;
        std::fs::write(root.join("notes.md"), "hi")?;
        std::fs::write(root.join("sub/log.txt"), "x")?;
        std::fs::write(dir.path().join("secret"), "s")?;
        let canon = root.canonicalize()?;
        let files = at_path_files(&root, "see @notes.md, and @sub/log.txt @notes.md @alice")?;
        assert_eq!(
            files,
            vec![canon.join("notes.md"), canon.join("sub/log.txt")]
        );
        // Escapes are refused whether the target exists or not.
        assert!(at_path_files(&root, "@../secret").is_err());
        assert!(at_path_files(&root, "@sub/../../secret").is_err());
        assert!(at_path_files(&root, "@/etc/passwd").is_err());
        assert!(at_path_files(&root, "@sub/").is_err());
        // A word that is not a path stays text.
        assert!(at_path_files(&root, "thanks @bob!")?.is_empty());
        Ok(())
    }

    #[cfg(unix)]
    #[test]
    fn a_link_out_of_the_root_is_refused() -> R {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root)?;
        std::fs::write(dir.path().join("secret"), "s")?;
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("link"))?;
        assert!(at_path_files(&root, "@link")?.is_empty());
        assert!(at_path_files(&root, "@./link").is_err());
        Ok(())
    }
}
