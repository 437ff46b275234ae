//! What this process keeps of the database between requests, and how it
//! learns that it changed on another process.
//!
//! - **Tokens**: every request looks its bearer token up
//!   ([`lev_store::TokenStore::token_by_hash`]); a token found is kept here
//!   (at most [`MAX_TOKENS`], each for at most [`TOKEN_TTL`]). Triggers on
//!   `tokens` (migration 6) notify `lev_tokens` with the hash of every row
//!   updated or deleted, delivered when the change commits, on every process
//!   (the listener, module `listener`); a revocation on this process also
//!   forgets the token itself right after its commit. The cache serves only
//!   while the listener's connection is up: after it drops, lookups go to the
//!   database until it is back, and then the cache starts empty (a
//!   notification missed meanwhile must not leave a revoked token usable).
//!   A connection that went silent without failing counts as gone once the
//!   listener has not completed a round trip on it for [`HEARD_WITHIN`] (it
//!   makes one every second).
//!   A lookup that raced a change is not kept (a generation counter, bumped
//!   by every forgetting).
//! - **Signing keys**: a trigger on `signing_keys` notifies `lev_keys`; each
//!   notification, and each reconnect of the listener, bumps
//!   [`Changes::keys`], which the server follows to read the keys again.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use lev_store::TokenRecord;
use tokio::sync::watch;

/// The channel of changed tokens (payload: the token's hash, or empty for
/// "any": a `TRUNCATE`).
pub(crate) const TOKENS: &str = "lev_tokens";
/// The channel of changed signing keys.
pub(crate) const KEYS: &str = "lev_keys";

/// Most tokens kept; past it the cache starts over (amortised linear).
pub(crate) const MAX_TOKENS: usize = 10_000;
/// Longest a token is kept: a safety net, the notifications are the rule.
pub(crate) const TOKEN_TTL: Duration = Duration::from_secs(30);
/// The cache serves only while the listener completed a round trip this
/// recently (a notification sent before it has arrived).
pub(crate) const HEARD_WITHIN: Duration = Duration::from_secs(3);

/// The process's caches and change signals, shared by the store's handles
/// and its listener.
#[derive(Debug)]
pub(crate) struct Changes {
    tokens: Mutex<Tokens>,
    keys: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Tokens {
    by_hash: HashMap<String, (TokenRecord, Instant)>,
    /// Bumped by every forgetting: a lookup that began before keeps nothing.
    generation: u64,
    /// When the listener last completed a round trip on a connection that
    /// LISTENs (notifications arrive); `None` while it has none.
    heard: Option<Instant>,
}

impl Tokens {
    fn serving(&self) -> bool {
        self.heard.is_some_and(|at| at.elapsed() < HEARD_WITHIN)
    }
}

impl Changes {
    pub(crate) fn new() -> Self {
        Self {
            tokens: Mutex::new(Tokens::default()),
            keys: watch::channel(0).0,
        }
    }

    fn tokens(&self) -> std::sync::MutexGuard<'_, Tokens> {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A kept token, fresh, while notifications arrive.
    pub(crate) fn token(&self, hash: &str) -> Option<TokenRecord> {
        let tokens = self.tokens();
        if !tokens.serving() {
            return None;
        }
        tokens
            .by_hash
            .get(hash)
            .filter(|(_, at)| at.elapsed() < TOKEN_TTL)
            .map(|(record, _)| record.clone())
    }

    /// Where a lookup starts: `None` when nothing may be kept now.
    pub(crate) fn lookup_starts(&self) -> Option<u64> {
        let tokens = self.tokens();
        tokens.serving().then_some(tokens.generation)
    }

    /// Keep what a lookup that started at `generation` found, unless a change
    /// was heard meanwhile.
    pub(crate) fn keep(&self, generation: u64, record: &TokenRecord) {
        let mut tokens = self.tokens();
        if !tokens.serving() || tokens.generation != generation {
            return;
        }
        if tokens.by_hash.len() >= MAX_TOKENS {
            tokens.by_hash.clear();
        }
        tokens
            .by_hash
            .insert(record.hash.clone(), (record.clone(), Instant::now()));
    }

    /// Token `hash` changed (empty: any token may have).
    pub(crate) fn forget_token(&self, hash: &str) {
        let mut tokens = self.tokens();
        tokens.generation += 1;
        if hash.is_empty() {
            tokens.by_hash.clear();
        } else {
            tokens.by_hash.remove(hash);
        }
    }

    /// The signing keys changed (or may have).
    pub(crate) fn keys_changed(&self) {
        self.keys.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn subscribe_keys(&self) -> watch::Receiver<u64> {
        self.keys.subscribe()
    }

    /// The listener is listening again: whatever changed while it was not
    /// is unknown, so forget everything and read the keys again.
    pub(crate) fn connected(&self) {
        {
            let mut tokens = self.tokens();
            tokens.generation += 1;
            tokens.by_hash.clear();
            tokens.heard = Some(Instant::now());
        }
        self.keys_changed();
    }

    /// The listener completed a round trip on its connection.
    pub(crate) fn heard(&self) {
        let mut tokens = self.tokens();
        if tokens.heard.is_some() {
            tokens.heard = Some(Instant::now());
        }
    }

    /// The listener's connection is gone: no notification arrives, so
    /// nothing is served from the cache until it is back.
    pub(crate) fn disconnected(&self) {
        let mut tokens = self.tokens();
        tokens.generation += 1;
        tokens.by_hash.clear();
        tokens.heard = None;
    }

    /// A notification on `channel`; false when it is not one of these.
    pub(crate) fn notified(&self, channel: &str, payload: &str) -> bool {
        match channel {
            TOKENS => self.forget_token(payload),
            KEYS => self.keys_changed(),
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use lev_protocol::api::{Role, TokenInfo};

    use super::*;

    fn record(hash: &str) -> TokenRecord {
        TokenRecord {
            info: TokenInfo {
                name: "t".into(),
                role: Role::Worker,
                caller: None,
                sessions: None,
                created_at: time::OffsetDateTime::UNIX_EPOCH,
            },
            hash: hash.into(),
        }
    }

    #[test]
    fn nothing_is_kept_without_a_listener_nor_across_a_change() {
        let c = Changes::new();
        // No listener yet: nothing kept.
        assert_eq!(c.lookup_starts(), None);
        c.connected();
        let g = c.lookup_starts().unwrap();
        c.keep(g, &record("a"));
        assert!(c.token("a").is_some());
        // A lookup that began before a change keeps nothing.
        let g = c.lookup_starts().unwrap();
        c.forget_token("zz");
        c.keep(g, &record("b"));
        assert!(c.token("b").is_none());
        c.forget_token("a");
        assert!(c.token("a").is_none());
        // Kept again, then the listener drops: nothing served, and a
        // reconnect starts empty.
        let g = c.lookup_starts().unwrap();
        c.keep(g, &record("a"));
        c.disconnected();
        assert!(c.token("a").is_none());
        c.heard();
        assert_eq!(c.lookup_starts(), None);
        c.connected();
        assert!(c.token("a").is_none());
        // A truncate forgets every token.
        let g = c.lookup_starts().unwrap();
        c.keep(g, &record("a"));
        assert!(c.notified(TOKENS, ""));
        assert!(c.token("a").is_none());
        assert!(!c.notified("lev_events", "1"));
    }

    #[test]
    fn keys_changes_are_signalled() {
        let c = Changes::new();
        let mut rx = c.subscribe_keys();
        assert!(!rx.has_changed().unwrap());
        assert!(c.notified(KEYS, ""));
        assert!(rx.has_changed().unwrap());
        rx.mark_unchanged();
        c.connected();
        assert!(rx.has_changed().unwrap());
    }
}
