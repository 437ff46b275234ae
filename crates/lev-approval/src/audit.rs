//! The audit log's hash chain: how an entry's hash is computed, and how a
//! reader checks a chain (and its signed head) without trusting the server.
//!
//! `hash = SHA-256(compact JSON of {"seq","at","action","actor","data","prev_hash"})`
//! in that key order, `data` with its object keys sorted (serde_json's default
//! map), lowercase hex. The first entry's `prev_hash` is 64 zeros. The head is
//! `{"seq","hash"}` signed as a DSSE envelope of type [`AUDIT_HEAD_PAYLOAD_TYPE`].

use lev_protocol::Envelope;
use lev_protocol::api::{AuditEntry, AuditHead};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::b64::decode_base64;
use crate::dsse::sign_envelope;
use crate::keys::{SigningKeyPair, TrustedKeys};
use crate::pae::pae;

/// The DSSE payload type of a signed audit head.
pub const AUDIT_HEAD_PAYLOAD_TYPE: &str = "application/vnd.lev.audit-head+json; version=1";

/// The `prev_hash` of the first entry.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The hash of an entry with these fields.
pub fn entry_hash(
    seq: u64,
    at: &str,
    action: &str,
    actor: &str,
    data: &serde_json::Value,
    prev_hash: &str,
) -> String {
    // The compact JSON of {"seq","at","action","actor","data","prev_hash"}
    // in that order, written out: a JSON string or value always serialises,
    // so there is no error to swallow (nor empty bytes to hash).
    let text = |s: &str| serde_json::Value::from(s).to_string();
    let bytes = format!(
        "{{\"seq\":{seq},\"at\":{},\"action\":{},\"actor\":{},\"data\":{data},\"prev_hash\":{}}}",
        text(at),
        text(action),
        text(actor),
        text(prev_hash)
    );
    hex(&Sha256::digest(&bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The signed part of an audit head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadPayload {
    /// The last entry's seq.
    pub seq: u64,
    /// The last entry's hash.
    pub hash: String,
}

/// Sign a chain head.
pub fn sign_head(seq: u64, hash: &str, key: &SigningKeyPair) -> AuditHead {
    let payload = format!(
        "{{\"seq\":{seq},\"hash\":{}}}",
        serde_json::Value::from(hash)
    );
    AuditHead {
        seq,
        hash: hash.to_owned(),
        signature: sign_envelope(AUDIT_HEAD_PAYLOAD_TYPE, payload.as_bytes(), key),
    }
}

/// What is wrong with a chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// An entry's hash is not the hash of its fields: it was edited.
    #[error("entry {seq}: hash does not match its contents (edited entry)")]
    Edited {
        /// The entry.
        seq: u64,
    },
    /// An entry does not point at the one before it.
    #[error(
        "entry {seq}: prev_hash does not match entry {prev}'s hash (entry removed or reordered)"
    )]
    Broken {
        /// The entry.
        seq: u64,
        /// The entry before it.
        prev: u64,
    },
    /// Seqs are not consecutive.
    #[error("expected entry {expected}, found entry {found} (entries removed)")]
    Gap {
        /// The seq that should come next.
        expected: u64,
        /// The seq found.
        found: u64,
    },
    /// The signed head is not signed by a trusted key, or is malformed.
    #[error("head signature: {0}")]
    HeadSignature(String),
    /// The head does not name the chain's last entry.
    #[error(
        "head says entry {head_seq} with hash {head_hash}, the chain ends at entry {seq} with hash {hash}"
    )]
    HeadMismatch {
        /// The head's seq.
        head_seq: u64,
        /// The head's hash.
        head_hash: String,
        /// The chain's last seq.
        seq: u64,
        /// The chain's last hash.
        hash: String,
    },
    /// A head saved earlier is not in the chain any more.
    #[error(
        "the saved head (entry {seq}, hash {hash}) is not in the chain: entries were cut off or rewritten"
    )]
    SavedHeadMissing {
        /// The saved head's seq.
        seq: u64,
        /// The saved head's hash.
        hash: String,
    },
}

/// Check a whole chain from entry 1, its signed head, and optionally that it
/// still extends a head saved earlier.
///
/// # Errors
/// The first defect found.
pub fn verify_chain(
    entries: &[AuditEntry],
    head: &AuditHead,
    keys: &TrustedKeys,
    saved: Option<(u64, &str)>,
) -> Result<(), ChainError> {
    let mut prev_hash = GENESIS_HASH.to_owned();
    let mut expected = 1;
    for e in entries {
        if e.seq != expected {
            return Err(ChainError::Gap {
                expected,
                found: e.seq,
            });
        }
        if e.prev_hash != prev_hash {
            return Err(ChainError::Broken {
                seq: e.seq,
                prev: e.seq.saturating_sub(1),
            });
        }
        if entry_hash(e.seq, &e.at, &e.action, &e.actor, &e.data, &e.prev_hash) != e.hash {
            return Err(ChainError::Edited { seq: e.seq });
        }
        prev_hash.clone_from(&e.hash);
        expected = expected.saturating_add(1);
    }
    let last_seq = expected.saturating_sub(1);
    verify_head_signature(head, keys)?;
    if head.seq != last_seq || head.hash != prev_hash {
        return Err(ChainError::HeadMismatch {
            head_seq: head.seq,
            head_hash: head.hash.clone(),
            seq: last_seq,
            hash: prev_hash,
        });
    }
    if let Some((seq, hash)) = saved {
        let found = if seq == 0 {
            hash == GENESIS_HASH
        } else {
            entries.iter().any(|e| e.seq == seq && e.hash == hash)
        };
        if !found {
            return Err(ChainError::SavedHeadMissing {
                seq,
                hash: hash.to_owned(),
            });
        }
    }
    Ok(())
}

/// Check that `head`'s signature is by a trusted key and says what its fields say.
///
/// # Errors
/// [`ChainError::HeadSignature`] on any defect.
pub fn verify_head_signature(head: &AuditHead, keys: &TrustedKeys) -> Result<(), ChainError> {
    let env: &Envelope = &head.signature;
    let bad = |m: &str| ChainError::HeadSignature(m.to_owned());
    if env.payload_type != AUDIT_HEAD_PAYLOAD_TYPE {
        return Err(bad("wrong payload type"));
    }
    let payload = decode_base64(&env.payload).map_err(|_| bad("payload is not base64"))?;
    let message = pae(&env.payload_type, &payload);
    let ok = env.signatures.iter().any(|s| {
        let Ok(raw) = decode_base64(&s.sig) else {
            return false;
        };
        let Ok(bytes) = <[u8; 64]>::try_from(raw.as_slice()) else {
            return false;
        };
        let sig = ed25519_dalek::Signature::from_bytes(&bytes);
        keys.candidates(&s.keyid)
            .any(|k| k.verify_strict(&message, &sig).is_ok())
    });
    if !ok {
        return Err(bad("not signed by a trusted key"));
    }
    let signed: HeadPayload = serde_json::from_slice(&payload)
        .map_err(|e| ChainError::HeadSignature(format!("payload: {e}")))?;
    if signed.seq != head.seq || signed.hash != head.hash {
        return Err(bad("the signed head differs from the head's fields"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chain(n: u64) -> Vec<AuditEntry> {
        let mut prev = GENESIS_HASH.to_owned();
        (1..=n)
            .map(|seq| {
                let data = json!({"id": format!("ir_{seq}"), "b": 1, "a": [1, 2]});
                let at = "2026-11-30T07:00:00Z";
                let hash = entry_hash(seq, at, "interaction.created", "w", &data, &prev);
                let e = AuditEntry {
                    seq,
                    at: at.into(),
                    action: "interaction.created".into(),
                    actor: "w".into(),
                    data,
                    prev_hash: prev.clone(),
                    hash: hash.clone(),
                };
                prev = hash;
                e
            })
            .collect()
    }

    #[test]
    fn whole_chain_verifies_and_defects_show() {
        let key = SigningKeyPair::from_seed(&[1u8; 32]);
        let mut keys = TrustedKeys::new();
        keys.insert(key.verifying_key()).unwrap();
        let entries = chain(5);
        let head = sign_head(5, &entries[4].hash, &key);
        assert_eq!(verify_chain(&entries, &head, &keys, None), Ok(()));
        assert_eq!(
            verify_chain(&entries, &head, &keys, Some((3, &entries[2].hash))),
            Ok(())
        );

        let mut edited = entries.clone();
        edited[2].actor = "mallory".into();
        assert_eq!(
            verify_chain(&edited, &head, &keys, None),
            Err(ChainError::Edited { seq: 3 })
        );

        let mut removed = entries.clone();
        removed.remove(1);
        assert!(matches!(
            verify_chain(&removed, &head, &keys, None),
            Err(ChainError::Gap { .. })
        ));

        // A cut-off tail with a re-signed head passes alone, but not against a saved head.
        let cut = entries[..3].to_vec();
        let cut_head = sign_head(3, &cut[2].hash, &key);
        assert_eq!(verify_chain(&cut, &cut_head, &keys, None), Ok(()));
        assert!(matches!(
            verify_chain(&cut, &cut_head, &keys, Some((5, &entries[4].hash))),
            Err(ChainError::SavedHeadMissing { .. })
        ));

        let other = SigningKeyPair::from_seed(&[2u8; 32]);
        let forged_head = sign_head(5, &entries[4].hash, &other);
        assert!(matches!(
            verify_chain(&entries, &forged_head, &keys, None),
            Err(ChainError::HeadSignature(_))
        ));
    }
}
