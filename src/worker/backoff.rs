//! The pause of a request the worker failed to serve (a locked row, a remote server that does not
//! answer): it is retried after a pause that doubles from 100 ms to 5 s, while the other requests
//! are served, and logged the first time and then at most every 10 s.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicI64, AtomicU32};

/// A request's failures in a row, when it may be tried again, when its failure was last logged.
/// In shared memory, beside the request (a tag's slot, a section); written by the worker of the
/// request's database only (`retry_now` by any worker too: a cleared pause only means an early
/// retry).
#[repr(C)]
#[derive(Default)]
pub struct Backoff {
    retry_at_ms: AtomicI64,
    warned_at_ms: AtomicI64,
    failures: AtomicU32,
}

impl Backoff {
    /// Records a failure at `now_ms` (monotonic) and says whether to log it: the first of a run,
    /// then at most every 10 s.
    pub fn failed(&self, now_ms: i64) -> bool {
        let failures = self.failures.fetch_add(1, Relaxed) + 1;
        self.retry_at_ms.store(now_ms + (100i64 << failures.saturating_sub(1).min(6)).min(5000), Relaxed);
        let warn = now_ms - self.warned_at_ms.load(Relaxed) >= 10_000 || failures == 1;
        if warn {
            self.warned_at_ms.store(now_ms, Relaxed);
        }
        warn
    }

    /// Records a success: the run of failures is over.
    pub fn succeeded(&self) {
        self.failures.store(0, Relaxed);
    }

    /// Forgets everything: a request of another kind (a slot or section taken anew).
    pub fn reset(&self) {
        self.failures.store(0, Relaxed);
        self.retry_at_ms.store(0, Relaxed);
    }

    /// Ends the pause: what the request waited for answers again.
    pub fn retry_now(&self) {
        self.retry_at_ms.store(0, Relaxed);
    }

    /// Makes the pause end at `at_ms`, whatever the failures in a row say.
    pub fn retry_at(&self, at_ms: i64) {
        self.retry_at_ms.store(at_ms, Relaxed);
    }

    /// Whether the request waits out its pause at `now_ms`.
    pub fn pausing(&self, now_ms: i64) -> bool {
        self.retry_at_ms.load(Relaxed) > now_ms
    }

    /// The failures in a row.
    pub fn failures(&self) -> u32 {
        self.failures.load(Relaxed)
    }

    /// Whether the last try failed.
    pub fn failing(&self) -> bool {
        self.failures() > 0
    }
}

#[cfg(test)]
mod tests {
    use super::Backoff;

    /// Claim: the pause doubles from 100 ms up to 5 s, a failure is logged the first time and then
    /// once in 10 s, and a success starts the count again.
    #[test]
    fn the_pause_doubles_and_the_log_is_sparse() {
        let backoff = Backoff::default();
        let mut logged = Vec::new();
        let mut pauses = Vec::new();
        for i in 0..9 {
            let now_ms = 1_000_000 + i * 1000;
            logged.push(backoff.failed(now_ms));
            pauses.push(backoff.retry_at_ms.load(std::sync::atomic::Ordering::Relaxed) - now_ms);
        }
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        assert_eq!(logged, [true, false, false, false, false, false, false, false, false]);
        assert!(backoff.failed(1_000_000 + 10_000), "10 s after the first");
        assert!(backoff.pausing(1_010_000) && backoff.failing() && backoff.failures() == 10);
        backoff.retry_now();
        assert!(!backoff.pausing(1_010_000));
        backoff.succeeded();
        assert!(!backoff.failing());
        backoff.failed(2_000_000);
        assert_eq!(backoff.retry_at_ms.load(std::sync::atomic::Ordering::Relaxed), 2_000_100, "the count starts again");
    }
}
