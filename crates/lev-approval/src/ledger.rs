//! Single use: a spent nonce is refused forever.

use std::collections::HashSet;
use std::sync::Mutex;

/// The nonce was spent before.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nonce already spent: an approval is single-use")]
pub struct NonceSpent;

/// Where a verifier records the nonces it has spent.
///
/// The server's durable ledger (`POST /v1/nonces/consume`) survives restarts;
/// [`InMemoryNonceLedger`] lasts as long as the process.
pub trait NonceLedger {
    /// Record `nonce` as spent.
    ///
    /// # Errors
    /// [`NonceSpent`] when it was spent before.
    fn consume(&self, nonce: &str) -> Result<(), NonceSpent>;
}

/// A ledger in memory, for one process.
#[derive(Debug, Default)]
pub struct InMemoryNonceLedger {
    spent: Mutex<HashSet<String>>,
}

impl NonceLedger for InMemoryNonceLedger {
    fn consume(&self, nonce: &str) -> Result<(), NonceSpent> {
        let mut spent = self
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if spent.insert(nonce.to_owned()) {
            Ok(())
        } else {
            Err(NonceSpent)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spends_once() {
        let ledger = InMemoryNonceLedger::default();
        assert_eq!(ledger.consume("n1"), Ok(()));
        assert_eq!(ledger.consume("n2"), Ok(()));
        assert_eq!(ledger.consume("n1"), Err(NonceSpent));
    }
}
