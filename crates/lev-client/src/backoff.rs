//! Waiting before trying again. Every reconnect or retry loop of lev (the
//! operator's WebSocket, `lev watch`'s event stream, a waiter riding out a
//! server restart) waits longer after each failure, up to a cap, with
//! jitter: a server that is down, or that accepts and closes at once, is not
//! hammered, a closed input never turns into a busy loop, and many clients
//! do not come back in step.

use std::hash::{BuildHasher as _, Hasher as _};
use std::time::Duration;

/// `d` less a random part of its half: between `d / 2` and `d`.
pub fn jittered(d: Duration) -> Duration {
    let half = d / 2;
    let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return d;
    }
    half + Duration::from_nanos(random() % (nanos + 1))
}

/// A random number: std's hasher keys are random per process and change
/// with each `RandomState`, which is all jitter needs (no crate for it).
fn random() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos().into()),
    );
    hasher.finish()
}

/// Doubling delays from `first` up to `max`, each jittered.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Delays from `first`, doubling up to `max` (at least `first`).
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max: max.max(first),
            next: first,
        }
    }

    /// The delay before the next try ([`jittered`]); the one after is twice
    /// as long, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let delay = jittered(self.next);
        self.next = self.next.saturating_mul(2).min(self.max);
        delay
    }

    /// Start again from the first delay.
    pub fn reset(&mut self) {
        self.next = self.first;
    }

    /// Start again from the first delay only when the connection that ended
    /// had lasted at least the cap: one that drops at once (a server that
    /// accepts and closes) is a failure like any other, or a loop would
    /// reconnect at the first delay for ever.
    pub fn reset_if_lasted(&mut self, lasted: Duration) {
        if lasted >= self.max {
            self.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_with_jitter_below_each() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100), ms(1000));
        let mut bounds = Vec::new();
        for _ in 0..8 {
            bounds.push(b.next_delay());
        }
        let expected = [100, 200, 400, 800, 1000, 1000, 1000, 1000];
        for (d, e) in bounds.iter().zip(expected) {
            assert!(*d >= ms(e) / 2 && *d <= ms(e), "{d:?} for {e} ms");
        }
        // A connection that dropped at once does not start again from 100 ms.
        b.reset_if_lasted(ms(5));
        assert!(b.next_delay() >= ms(500));
        b.reset_if_lasted(ms(1000));
        assert!(b.next_delay() <= ms(100));
    }

    #[test]
    fn jitter_varies_and_stays_in_range() {
        let d = Duration::from_secs(1);
        let seen: std::collections::HashSet<Duration> = (0..50).map(|_| jittered(d)).collect();
        assert!(seen.len() > 1, "no jitter");
        assert!(seen.iter().all(|j| *j >= d / 2 && *j <= d));
        assert_eq!(jittered(Duration::ZERO), Duration::ZERO);
    }
}
