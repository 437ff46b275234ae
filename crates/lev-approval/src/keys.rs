//! Ed25519 keys: key ids, the signing key pair, and the set of trusted public keys.

use std::fmt;

use ed25519_dalek::{SigningKey, VerifyingKey};
use lev_protocol::api::{Jwk, Jwks};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::b64::{decode_base64, encode_base64url};

/// Why a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// A small-order public key: signatures under it can be forged.
    #[error("weak (small-order) public key {kid} refused: signatures under it can be forged")]
    Weak {
        /// The refused key's id.
        kid: String,
    },
    /// Not 32 bytes of a valid Ed25519 point.
    #[error("expected a 32-byte Ed25519 public key, found {0}")]
    Invalid(String),
    /// Not a key file, JWKS or base64url key.
    #[error("{0}")]
    Malformed(String),
    /// The system's random source failed.
    #[error("no randomness available: {0}")]
    Random(String),
}

impl KeyError {
    /// A stable snake_case name for the kind of failure: `weak_key`,
    /// `invalid_key`, `malformed_key` or `no_randomness`.
    pub fn class(&self) -> &'static str {
        match self {
            Self::Weak { .. } => "weak_key",
            Self::Invalid(_) => "invalid_key",
            Self::Malformed(_) => "malformed_key",
            Self::Random(_) => "no_randomness",
        }
    }
}

/// The key id of a raw public key: the first 16 lowercase hex digits of its SHA-256.
pub fn key_id(public_key: &[u8; 32]) -> String {
    let digest = Sha256::digest(public_key);
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// A signing key with its key id. `Debug` never shows the secret.
#[derive(Clone)]
pub struct SigningKeyPair {
    signing: SigningKey,
    kid: String,
}

impl fmt::Debug for SigningKeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKeyPair")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// The private key file: a JWK with the secret in `d`.
#[derive(Serialize, Deserialize)]
struct PrivateJwk {
    kty: String,
    crv: String,
    x: String,
    d: String,
    #[serde(default)]
    kid: String,
}

impl SigningKeyPair {
    /// A new key from the system's random source.
    ///
    /// # Errors
    /// When the system has no randomness to give.
    pub fn generate() -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(Self::from_seed(&seed))
    }

    /// The key whose 32-byte secret seed is `seed`.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let signing = SigningKey::from_bytes(seed);
        let kid = key_id(signing.verifying_key().as_bytes());
        Self { signing, kid }
    }

    /// The key id.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public half.
    pub fn verifying_key(&self) -> VerifyingKey {
        self.signing.verifying_key()
    }

    /// The raw public key in base64url without padding.
    pub fn public_base64url(&self) -> String {
        encode_base64url(self.signing.verifying_key().as_bytes())
    }

    /// The public key as a JWK.
    pub fn public_jwk(&self) -> Jwk {
        jwk_of(&self.signing.verifying_key())
    }

    /// A raw Ed25519 signature over `message` (what a DSSE envelope's
    /// signature is over the PAE; what a passkey signs over its
    /// authenticator data and client data hash).
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer as _;
        self.signing.sign(message).to_bytes()
    }

    /// The key file's text: a private JWK (`kty`, `crv`, `x`, `d`, `kid`).
    pub fn to_private_jwk(&self) -> String {
        let jwk = PrivateJwk {
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            x: self.public_base64url(),
            d: encode_base64url(self.signing.as_bytes()),
            kid: self.kid.clone(),
        };
        serde_json::to_string_pretty(&jwk).unwrap_or_default() + "\n"
    }

    /// Read a key file written by [`Self::to_private_jwk`].
    ///
    /// # Errors
    /// When the text is not an Ed25519 private JWK, or `x` is not `d`'s public key.
    pub fn from_private_jwk(text: &str) -> Result<Self, KeyError> {
        let jwk: PrivateJwk = serde_json::from_str(text)
            .map_err(|e| KeyError::Malformed(format!("expected an Ed25519 private JWK, {e}")))?;
        if jwk.kty != "OKP" || jwk.crv != "Ed25519" {
            return Err(KeyError::Malformed(format!(
                "expected kty OKP and crv Ed25519, found {} and {}",
                jwk.kty, jwk.crv
            )));
        }
        let d = decode_base64(&jwk.d).map_err(|e| KeyError::Malformed(format!("d: {e}")))?;
        let seed: [u8; 32] = d
            .as_slice()
            .try_into()
            .map_err(|_| KeyError::Malformed(format!("d: expected 32 bytes, found {}", d.len())))?;
        let pair = Self::from_seed(&seed);
        if decode_base64(&jwk.x).ok().as_deref() != Some(pair.verifying_key().as_bytes().as_slice())
        {
            return Err(KeyError::Malformed("x is not the public key of d".into()));
        }
        Ok(pair)
    }
}

fn jwk_of(key: &VerifyingKey) -> Jwk {
    Jwk {
        kty: "OKP".into(),
        crv: "Ed25519".into(),
        x: encode_base64url(key.as_bytes()),
        kid: key_id(key.as_bytes()),
        alg: Some("EdDSA".into()),
        use_: Some("sig".into()),
    }
}

/// The public keys a verifier trusts. Weak keys never get in.
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys {
    keys: Vec<(String, VerifyingKey)>,
}

impl TrustedKeys {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trust `key`.
    ///
    /// # Errors
    /// [`KeyError::Weak`] for a small-order key.
    pub fn insert(&mut self, key: VerifyingKey) -> Result<(), KeyError> {
        let kid = key_id(key.as_bytes());
        if key.is_weak() {
            return Err(KeyError::Weak { kid });
        }
        if !self.keys.iter().any(|(k, _)| *k == kid) {
            self.keys.push((kid, key));
        }
        Ok(())
    }

    /// Trust the raw 32-byte public key `bytes`.
    ///
    /// # Errors
    /// When the bytes are not a valid point, or the key is weak.
    pub fn insert_bytes(&mut self, bytes: &[u8]) -> Result<(), KeyError> {
        let raw: [u8; 32] = bytes
            .try_into()
            .map_err(|_| KeyError::Invalid(format!("{} bytes", bytes.len())))?;
        let key = VerifyingKey::from_bytes(&raw)
            .map_err(|_| KeyError::Invalid("bytes that are not a curve point".into()))?;
        self.insert(key)
    }

    /// Parse a JWKS (`{"keys": [...]}`), one JWK, or one public key in base64.
    ///
    /// # Errors
    /// When the text is none of those, or a key in it is invalid or weak.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let text = text.trim();
        let mut set = Self::new();
        if text.starts_with('{') {
            let value: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| KeyError::Malformed(format!("expected a JWKS or a JWK, {e}")))?;
            let jwks: Vec<Jwk> = if value.get("keys").is_some() {
                serde_json::from_value::<Jwks>(value)
                    .map_err(|e| KeyError::Malformed(format!("expected a JWKS, {e}")))?
                    .keys
            } else {
                vec![
                    serde_json::from_value::<Jwk>(value)
                        .map_err(|e| KeyError::Malformed(format!("expected a JWK, {e}")))?,
                ]
            };
            for jwk in jwks {
                if jwk.kty != "OKP" || jwk.crv != "Ed25519" {
                    return Err(KeyError::Malformed(format!(
                        "expected kty OKP and crv Ed25519, found {} and {}",
                        jwk.kty, jwk.crv
                    )));
                }
                let x =
                    decode_base64(&jwk.x).map_err(|e| KeyError::Malformed(format!("x: {e}")))?;
                set.insert_bytes(&x)?;
            }
        } else {
            let raw = decode_base64(text).map_err(|_| {
                KeyError::Malformed("expected a JWKS, a JWK or a base64url public key".into())
            })?;
            set.insert_bytes(&raw)?;
        }
        if set.keys.is_empty() {
            return Err(KeyError::Malformed("the key set holds no key".into()));
        }
        Ok(set)
    }

    /// The keys, the one with id `kid` first (a hint, never a restriction).
    pub fn candidates<'a>(&'a self, kid: &'a str) -> impl Iterator<Item = &'a VerifyingKey> + 'a {
        let hinted = self.keys.iter().filter(move |(k, _)| k == kid);
        let others = self.keys.iter().filter(move |(k, _)| k != kid);
        hinted.chain(others).map(|(_, key)| key)
    }

    /// Whether a key with this id is trusted.
    pub fn contains_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|(k, _)| k == kid)
    }

    /// How many keys are trusted.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is trusted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The set as a JWKS.
    pub fn to_jwks(&self) -> Jwks {
        Jwks {
            keys: self.keys.iter().map(|(_, k)| jwk_of(k)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_id_is_sha256_prefix() {
        // SHA-256 of 32 zero bytes starts 66687aadf862bd77.
        assert_eq!(key_id(&[0u8; 32]), "66687aadf862bd77");
    }

    #[test]
    fn private_jwk_round_trips() {
        let pair = SigningKeyPair::from_seed(&[7u8; 32]);
        let back = SigningKeyPair::from_private_jwk(&pair.to_private_jwk()).unwrap();
        assert_eq!(back.kid(), pair.kid());
        assert!(!format!("{pair:?}").contains(&encode_base64url(&[7u8; 32])));
    }

    #[test]
    fn weak_keys_are_refused() {
        // The identity point (y = 1) has small order.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let err = TrustedKeys::new().insert_bytes(&identity).unwrap_err();
        assert!(matches!(err, KeyError::Weak { .. }), "{err}");
        assert!(TrustedKeys::parse(&encode_base64url(&identity)).is_err());
    }

    #[test]
    fn parses_every_form() {
        let pair = SigningKeyPair::from_seed(&[9u8; 32]);
        let b64 = pair.public_base64url();
        let jwk = serde_json::to_string(&pair.public_jwk()).unwrap();
        let jwks = format!("{{\"keys\":[{jwk}]}}");
        for text in [b64.as_str(), jwk.as_str(), jwks.as_str()] {
            let set = TrustedKeys::parse(text).unwrap();
            assert!(set.contains_kid(pair.kid()), "{text}");
        }
        assert!(TrustedKeys::parse("{\"keys\":[]}").is_err());
        assert!(TrustedKeys::parse("hello").is_err());
    }
}
