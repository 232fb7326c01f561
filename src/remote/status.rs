//! How the calls of the workers that reach one server went, in shared memory for
//! `node_lease_status()` and `segment_authority_status()`.

use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};

use crate::shmem::RemoteStatus;
use crate::shmem::REMOTE_MESSAGE_BYTES;

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

