//! Which sections may want a raise: a bitmap by way that calls (and takes, and the worker's
//! publish) mark when they set a section's `want_raise`, and a summary with a bit per word of it.
//! The worker reads the marked ways instead of every section of the cache: a round costs what is
//! wanted (and a word of the summary per 4,096 sections).
//!
//! A mark is a hint: the section's `want_raise`, its state and its database decide. It is set
//! after `want_raise` (a worker that clears it and then reads `want_raise` misses no request), and
//! cleared only by a worker about to look at the section, or finding it free.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::settings;
use crate::shmem::SharedBytes;

/// The bitmap and its summary: the region `pg_idgen sections wanted`, zeroed (nothing marked).
pub static WANTED: SharedBytes = SharedBytes::new(c"pg_idgen sections wanted", || size(count()));

/// The sections of the cache, `pg_idgen.seq_cache_sections`.
fn count() -> usize {
    settings::config().segments.seq_cache_sections
}

/// Words of the bitmap, and of its summary, for `count` sections.
fn words(count: usize) -> (usize, usize) {
    let words = count.div_ceil(64);
    (words, words.div_ceil(64))
}

/// Bytes the bitmap and its summary take, for `count` sections.
fn size(count: usize) -> usize {
    let (words, summary) = words(count);
    (words + summary) * std::mem::size_of::<AtomicU64>()
}

/// The bitmap's words, then the summary's.
fn parts() -> (&'static [AtomicU64], &'static [AtomicU64]) {
    let (words, summary) = words(count());
    // SAFETY: the region holds `size(count)` bytes, zeroed (nothing marked).
    unsafe {
        let start = WANTED.start().cast::<AtomicU64>().cast_const();
        (std::slice::from_raw_parts(start, words), std::slice::from_raw_parts(start.add(words), summary))
    }
}

/// Marks section `way`: the worker will look at it. The word first, then the summary bit.
pub(super) fn mark(way: usize) {
    let (words, summary) = parts();
    words[way / 64].fetch_or(1 << (way % 64), Ordering::AcqRel);
    let word = way / 64;
    summary[word / 64].fetch_or(1 << (word % 64), Ordering::AcqRel);
}

/// Clears `way`'s mark (the worker, about to look at the section, or finding it needs nothing).
/// The summary bit stays: a summary bit over a word without marks costs one read of the word.
pub(super) fn clear(way: usize) {
    parts().0[way / 64].fetch_and(!(1 << (way % 64)), Ordering::AcqRel);
}

/// The marked ways, in order. Summary bits over words found empty are cleared (then the word is
/// read again: a mark set meanwhile sets its summary bit again, or is seen here).
pub(super) fn marked() -> Vec<usize> {
    let (words, summary) = parts();
    let mut ways = Vec::new();
    for (s, bits) in summary.iter().enumerate() {
        let mut bits = bits.load(Ordering::Acquire);
        while bits != 0 {
            let word = s * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let mut marks = words[word].load(Ordering::Acquire);
            if marks == 0 {
                summary[s].fetch_and(!(1 << (word % 64)), Ordering::AcqRel);
                marks = words[word].load(Ordering::Acquire);
                if marks != 0 {
                    summary[s].fetch_or(1 << (word % 64), Ordering::AcqRel);
                }
            }
            while marks != 0 {
                ways.push(word * 64 + marks.trailing_zeros() as usize);
                marks &= marks - 1;
            }
        }
    }
    ways
}
