//! Attachments: decoding parts under their limit, reducing file names to a
//! plain name, and storing the bytes content-addressed.

use lev_protocol::{InboundPart, StoredPart};
use lev_store::Store;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ApiResult};

/// Longest stored file name, in bytes.
const MAX_NAME_BYTES: usize = 255;

/// Reduce a file name to a plain one: no directory, no control or
/// bidirectional-override character, no leading dot, at most 255 bytes;
/// `attachment` when nothing is left.
pub fn plain_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = base
        .chars()
        .filter(|c| !c.is_control() && !is_bidi_control(*c))
        .collect();
    let trimmed = cleaned.trim().trim_start_matches('.').trim_start();
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

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whether `media_type` is a plain `type/subtype` (parameters allowed), safe
/// to send back as a `Content-Type`.
fn is_media_type(media_type: &str) -> bool {
    let essence = media_type.split(';').next().unwrap_or_default().trim();
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    media_type.len() <= 255
        && media_type.bytes().all(|b| (0x20..0x7f).contains(&b))
        && essence
            .split_once('/')
            .is_some_and(|(t, s)| token(t) && token(s))
}

/// A decoded part, checked, not yet stored.
#[derive(Debug)]
pub struct DecodedPart {
    stored: StoredPart,
    bytes: Vec<u8>,
}

/// Decode and check every part: base64, media type, size.
///
/// # Errors
/// 422 naming the part's field for bad base64 or media type, 413 for a part
/// over `max_bytes`.
pub fn decode_parts(parts: Vec<InboundPart>, max_bytes: usize) -> ApiResult<Vec<DecodedPart>> {
    let mut out = Vec::with_capacity(parts.len());
    for (i, part) in parts.into_iter().enumerate() {
        // A base64 text of n bytes decodes to at least 3n/4 - 2: refuse early.
        if part.data.len() / 4 * 3 > max_bytes + 3 {
            return Err(part_too_large(i, max_bytes));
        }
        let bytes = lev_approval::decode_base64(part.data.trim())
            .map_err(|e| ApiError::Invalid(format!("parts[{i}].data: expected base64, {e}")))?;
        if bytes.len() > max_bytes {
            return Err(part_too_large(i, max_bytes));
        }
        if !is_media_type(&part.media_type) {
            return Err(ApiError::Invalid(format!(
                "parts[{i}].media_type: expected a media type such as text/plain, found {:?}",
                part.media_type.chars().take(64).collect::<String>()
            )));
        }
        let name = plain_name(&part.name);
        let original_name = (name != part.name).then_some(part.name);
        let sha256 = crate::ids::hex(&Sha256::digest(&bytes));
        out.push(DecodedPart {
            stored: StoredPart {
                name,
                media_type: part.media_type,
                size: bytes.len() as u64,
                sha256,
                original_name,
            },
            bytes,
        });
    }
    Ok(out)
}

fn part_too_large(i: usize, max_bytes: usize) -> ApiError {
    ApiError::TooLarge(format!(
        "parts[{i}].data: a part is at most {} MiB",
        max_bytes / (1024 * 1024)
    ))
}

/// Store decoded parts' bytes; returns their stored form.
///
/// # Errors
/// When the store refuses.
pub async fn store_parts(store: &dyn Store, parts: Vec<DecodedPart>) -> ApiResult<Vec<StoredPart>> {
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        store
            .put_blob(&part.stored.sha256, &part.stored.media_type, part.bytes)
            .await?;
        out.push(part.stored);
    }
    Ok(out)
}

/// Whether `s` is 64 lowercase hex digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_plain() {
        for (given, want) in [
            ("notes.md", "notes.md"),
            ("../../etc/passwd", "passwd"),
            ("C:\\Windows\\system32\\evil.dll", "evil.dll"),
            (".bashrc", "bashrc"),
            ("...", "attachment"),
            ("", "attachment"),
            ("dir/", "attachment"),
            ("a\nb\u{0}c.txt", "abc.txt"),
            ("invoice\u{202e}fdp.exe", "invoicefdp.exe"),
            ("  spaced.txt  ", "spaced.txt"),
        ] {
            assert_eq!(plain_name(given), want, "{given:?}");
        }
        assert_eq!(plain_name(&"é".repeat(300)).len(), 254);
    }

    #[test]
    fn media_types() {
        assert!(is_media_type("text/markdown"));
        assert!(is_media_type("text/plain; charset=utf-8"));
        assert!(!is_media_type("text"));
        assert!(!is_media_type("text/html\r\nX-Evil: 1"));
        assert!(!is_media_type(""));
    }
}
