//! How the calls of the workers that reach another server went: the region `pg_idgen remote
//! status`, read by `node_lease_status()` and `segment_authority_status()`.
//!
//! | field | written by | protection |
//! |---|---|---|
//! | `registry` | the lease worker | one writer |
//! | `authority` | the database workers of every database | counters atomic; the message under its version (odd while written), which writers take by compare-and-swap |

use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, AtomicU8};

use crate::shmem::{self, Shared};

/// The longest remote error kept.
pub const REMOTE_MESSAGE_BYTES: usize = 480;

/// How the calls of the workers that reach one server went.
#[repr(C)]
pub struct RemoteStatus {
    /// Calls that failed in a row, and in all.
    pub failures_in_a_row: AtomicU64,
    pub failures: AtomicU64,
    /// When a call last succeeded, Unix µs (0: never).
    pub succeeded_at_us: AtomicI64,
    /// The last error, as text (`message_version` odd while it is written).
    message_version: AtomicU32,
    message_len: AtomicU32,
    message: [AtomicU8; REMOTE_MESSAGE_BYTES],
}

/// The servers pg_idgen's workers reach.
#[repr(C)]
pub struct Statuses {
    /// The node registry (`pg_idgen.node_registry`), by the lease worker.
    registry: RemoteStatus,
    /// The segment authority (`pg_idgen.segment_authority`), by the database workers.
    authority: RemoteStatus,
}

pub static STATUSES: Shared<Statuses> = Shared::new(c"pg_idgen remote status", shmem::zeroed_is_ready);

/// How the lease worker's calls to the node registry went.
pub fn registry() -> &'static RemoteStatus {
    &STATUSES.get().registry
}

/// How the database workers' calls to the segment authority went.
pub fn authority() -> &'static RemoteStatus {
    &STATUSES.get().authority
}

impl RemoteStatus {
    /// Records a call that succeeded.
    pub fn succeeded(&self) {
        self.failures_in_a_row.store(0, Relaxed);
        self.succeeded_at_us.store(crate::clock::wall_unix_micros(), Relaxed);
        self.set_message("");
    }

    /// Records a call that failed; returns how many failed in a row. Only a server that could
    /// not be reached (`unreachable`) counts against `reachable()`: one that answered with an
    /// error (a lock, a privilege) was reached.
    pub fn failed(&self, message: &str, unreachable: bool) -> u64 {
        self.failures.fetch_add(1, Relaxed);
        self.set_message(message);
        if unreachable {
            self.failures_in_a_row.fetch_add(1, Relaxed) + 1
        } else {
            self.failures_in_a_row.load(Relaxed)
        }
    }

    /// Whether the last call succeeded (and one ever did).
    pub fn reachable(&self) -> bool {
        self.failures_in_a_row.load(Relaxed) == 0 && self.succeeded_at_us.load(Relaxed) != 0
    }

    /// What the status functions show of the failures: in a row, in all, and the last one's
    /// message (None when the last call succeeded).
    pub fn failures_shown(&self) -> (i64, i64, Option<String>) {
        let message = self.last_message();
        (self.failures_in_a_row.load(Relaxed) as i64, self.failures.load(Relaxed) as i64, (!message.is_empty()).then_some(message))
    }

    /// The last failure's message ("" when the last call succeeded).
    pub fn last_message(&self) -> String {
        loop {
            let version = self.message_version.load(Acquire);
            if !version.is_multiple_of(2) {
                std::hint::spin_loop();
                continue;
            }
            let len = (self.message_len.load(Relaxed) as usize).min(REMOTE_MESSAGE_BYTES);
            let bytes: Vec<u8> = self.message[..len].iter().map(|b| b.load(Relaxed)).collect();
            std::sync::atomic::fence(Acquire);
            if self.message_version.load(Relaxed) == version {
                return String::from_utf8_lossy(&bytes).into_owned();
            }
        }
    }

    fn set_message(&self, message: &str) {
        let mut end = message.len().min(REMOTE_MESSAGE_BYTES);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let bytes = &message.as_bytes()[..end];
        // Why a compare-and-swap to an odd version: several workers may write (the segment
        // workers of several databases share the authority's status); one at a time.
        let version = loop {
            let version = self.message_version.load(Acquire);
            if version.is_multiple_of(2) && self.message_version.compare_exchange_weak(version, version + 1, SeqCst, Relaxed).is_ok() {
                break version;
            }
            std::hint::spin_loop();
        };
        for (cell, &byte) in self.message.iter().zip(bytes) {
            cell.store(byte, Relaxed);
        }
        self.message_len.store(bytes.len() as u32, Relaxed);
        self.message_version.store(version + 2, SeqCst);
    }
}
