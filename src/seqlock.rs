//! The seqlock of what a slot or a section holds in shared memory: a version, odd while its owner
//! changes the fields it protects (under the owner's LWLock), even otherwise. A reader reads the
//! version, then the fields, then the version again: the same even version both times means the
//! fields it read belong together. Pure: atomics only.

use std::sync::atomic::{fence, AtomicU64, Ordering};

#[repr(transparent)]
#[derive(Default)]
pub struct Seqlock(AtomicU64);

impl Seqlock {
    /// The version, to read the fields under: the opening read.
    #[inline]
    pub fn read(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Whether `version` was read while the fields changed (it is odd).
    #[inline]
    pub fn is_changing(version: u64) -> bool {
        version & 1 == 1
    }

    /// The closing read: whether nothing changed since `version` was read, so that what was read
    /// in between belongs to it.
    #[inline]
    pub fn still(&self, version: u64) -> bool {
        fence(Ordering::Acquire);
        self.0.load(Ordering::Relaxed) == version
    }

    /// The closing read against a copy of the version (see `change_mirrored`), kept beside the
    /// fields a reader reads instead of the version itself.
    #[inline]
    pub fn copy_still(copy: &AtomicU64, version: u64) -> bool {
        fence(Ordering::Acquire);
        copy.load(Ordering::Relaxed) == version
    }

    /// Reads the fields with `read`, under a stable version: what it read, and that version; None
    /// while they change, or when they changed meanwhile.
    #[inline]
    pub fn read_with<T>(&self, read: impl FnOnce() -> T) -> Option<(T, u64)> {
        let version = self.read();
        if Self::is_changing(version) {
            return None;
        }
        let value = read();
        self.still(version).then_some((value, version))
    }

    /// Changes the fields with `change`, between two steps of the version (odd meanwhile). Only
    /// ever one writer at a time: the owner's lock, held exclusively.
    pub fn change(&self, change: impl FnOnce()) {
        self.change_mirrored(std::iter::empty(), change)
    }

    /// `change`, with copies of the version beside fields that readers check instead of the version
    /// itself (a section's counter lines): they follow it, odd while the fields change.
    pub fn change_mirrored<'a>(&self, copies: impl IntoIterator<Item = &'a AtomicU64> + Clone, change: impl FnOnce()) {
        let odd = self.0.fetch_add(1, Ordering::AcqRel) + 1;
        for copy in copies.clone() {
            copy.store(odd, Ordering::Relaxed);
        }
        fence(Ordering::Release);
        change();
        for copy in copies {
            copy.store(odd + 1, Ordering::Release);
        }
        self.0.store(odd + 1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::Seqlock;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Claim: a read under a version sees the fields of that version, a change in between makes
    /// the closing read fail, and the copies follow the version.
    #[test]
    fn a_change_between_the_reads_is_seen() {
        let lock = Seqlock::default();
        let copy = AtomicU64::new(0);
        let version = lock.read();
        assert!(lock.still(version) && !Seqlock::is_changing(version));
        lock.change_mirrored([&copy], || assert!(Seqlock::is_changing(copy.load(Ordering::Relaxed))));
        assert!(!lock.still(version), "changed since");
        assert!(Seqlock::copy_still(&copy, lock.read()) && !Seqlock::copy_still(&copy, version));
        assert_eq!(copy.load(Ordering::Relaxed), lock.read());
        assert_eq!(lock.read_with(|| 5), Some((5, 2)));
        lock.change(|| {});
        assert_eq!(lock.read(), 4);
    }
}
