//! The key-encryption key: 32 random bytes (base64 in a file given with
//! `--key-encryption-key-file`) that seal the signing keys before they reach
//! the store, so a database dump alone cannot sign. Every server sharing a
//! database is given the same file.
//!
//! A sealed key is `sealed:v1:` and base64url of a 12-byte random nonce and
//! the ChaCha20-Poly1305 ciphertext of the private JWK, with the key id as
//! associated data (a sealed key moved under another kid does not open).

use std::path::Path;

use lev_approval::{decode_base64, encode_base64url};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

const PREFIX: &str = "sealed:v1:";

/// A key-encryption key.
pub struct Kek(LessSafeKey);

impl std::fmt::Debug for Kek {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Kek(<secret>)")
    }
}

impl Kek {
    /// The key in `path`: 32 bytes, base64 (either alphabet), on one line.
    ///
    /// # Errors
    /// When the file cannot be read or does not hold such a key; the message
    /// names the file.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = lev_io::files::read_text(path, lev_io::files::limit::SECRET).map_err(|e| {
            format!("--key-encryption-key-file {e}\nhint: lev keys kek --out FILE makes one")
        })?;
        Self::from_base64(text.trim())
            .map_err(|e| format!("--key-encryption-key-file {}: {e}", path.display()))
    }

    /// The key from its base64 text.
    ///
    /// # Errors
    /// When it is not base64 of exactly 32 bytes.
    pub fn from_base64(text: &str) -> Result<Self, String> {
        let bytes = decode_base64(text)
            .map_err(|_| "expected 32 random bytes in base64, found text that is not base64")?;
        if bytes.len() != 32 {
            return Err(format!(
                "expected 32 random bytes in base64, found {} bytes",
                bytes.len()
            ));
        }
        let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .map_err(|_| "the key-encryption key was refused".to_owned())?;
        Ok(Self(LessSafeKey::new(key)))
    }

    /// A new random key, as base64 text for its file.
    ///
    /// # Errors
    /// When the system has no randomness to give.
    pub fn generate_base64() -> Result<String, String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
        Ok(lev_approval::encode_base64(&bytes))
    }

    /// Seal `plain` (a private JWK) of key `kid`.
    ///
    /// # Errors
    /// When the system has no randomness to give.
    pub fn seal(&self, kid: &str, plain: &str) -> Result<String, String> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| format!("no randomness: {e}"))?;
        let mut data = plain.as_bytes().to_vec();
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(kid.as_bytes()),
                &mut data,
            )
            .map_err(|_| "sealing a signing key failed".to_owned())?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(format!("{PREFIX}{}", encode_base64url(&out)))
    }

    /// Open a sealed key of `kid`.
    ///
    /// # Errors
    /// When it was sealed with another key-encryption key, for another kid,
    /// or is damaged.
    pub fn open(&self, kid: &str, sealed: &str) -> Result<String, String> {
        let wrong = || {
            format!(
                "does not open with this key-encryption key (kid {kid}): every server \
                 sharing the database must be given the same --key-encryption-key-file"
            )
        };
        let body = sealed.strip_prefix(PREFIX).ok_or_else(wrong)?;
        let bytes = decode_base64(body).map_err(|_| wrong())?;
        if bytes.len() < NONCE_LEN {
            return Err(wrong());
        }
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| wrong())?;
        let mut data = data.to_vec();
        let plain = self
            .0
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(kid.as_bytes()),
                &mut data,
            )
            .map_err(|_| wrong())?;
        String::from_utf8(plain.to_vec()).map_err(|_| wrong())
    }
}

/// Whether stored key material is sealed.
pub fn is_sealed(material: &str) -> bool {
    material.starts_with(PREFIX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn seals_and_opens_only_with_the_same_key_and_kid() {
        let a = Kek::from_base64(&Kek::generate_base64().unwrap()).unwrap();
        let b = Kek::from_base64(&Kek::generate_base64().unwrap()).unwrap();
        let sealed = a.seal("0123456789abcdef", "{\"d\":\"secret\"}").unwrap();
        assert!(is_sealed(&sealed));
        assert!(!sealed.contains("secret"));
        assert_eq!(
            a.open("0123456789abcdef", &sealed).unwrap(),
            "{\"d\":\"secret\"}"
        );
        assert!(b.open("0123456789abcdef", &sealed).is_err(), "another KEK");
        assert!(a.open("fedcba9876543210", &sealed).is_err(), "another kid");
        let mut damaged = sealed.clone();
        damaged.pop();
        damaged.push('A');
        assert!(a.open("0123456789abcdef", &damaged).is_err());
        assert!(a.open("0123456789abcdef", "sealed:v1:").is_err());
        assert!(a.open("0123456789abcdef", "{}").is_err());
    }

    #[test]
    fn a_bad_key_file_is_named() {
        assert!(Kek::from_base64("not base64!").is_err());
        let short = lev_approval::encode_base64(&[1u8; 16]);
        assert!(Kek::from_base64(&short).unwrap_err().contains("16 bytes"));
    }
}
