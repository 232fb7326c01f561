//! What every process knows of the sections leased from the segment authority (`leased`): the
//! region `pg_idgen section leases`, whether sections are leased at all, and the check of a
//! section's lease that calls make.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

use super::cache::Section;
use crate::shmem::Shared;
use crate::{clock, settings};

/// Requests for a copy of the authority's spaces, and copies, by database OID modulo `SLOTS`
/// (`mirror`).
pub const SLOTS: usize = 64;

/// Holders recorded for the errors of calls that wait: a section's is at `way % HELD_RECORDS`.
const HELD_RECORDS: usize = 16;
const HOLDER_LEN: usize = 120;

/// The last holder the authority named for a section another server holds.
#[repr(C)]
pub struct HeldRecord {
    /// `way + 1` of the section (0: none).
    way: AtomicU64,
    len: AtomicU32,
    name: [AtomicU8; HOLDER_LEN],
}

/// What every process of this server knows of its leases: the region `pg_idgen section leases`.
///
/// | field | written by | protection |
/// |---|---|---|
/// | `holder_start` | creation | written before any process attaches |
/// | `spaces_asked` | calls that found no space (`mirror`) | atomic, tagged with the database |
/// | `spaces_copied` | the worker of each database, after a copy | atomic, tagged with the database |
/// | `taken`, `lost`, `released`, `handed_over`, `refused` | the workers | atomic counters |
/// | `held` | the workers | one writer per section; read for messages only |
#[repr(C)]
pub struct Leases {
    /// This start of the server: a random token (the same start renews and takes its own sections;
    /// a later start, as another server, waits for their lease and margin).
    pub holder_start: [AtomicU64; 2],
    pub spaces_asked: [AtomicU64; SLOTS],
    pub spaces_copied: [AtomicU64; SLOTS],
    pub taken: AtomicU64,
    pub lost: AtomicU64,
    pub released: AtomicU64,
    pub handed_over: AtomicU64,
    pub refused: AtomicU64,
    held: [HeldRecord; HELD_RECORDS],
}

pub static LEASES: Shared<Leases> = Shared::new(c"pg_idgen section leases", init_leases);

/// A random token for this server start.
///
/// # Safety
/// As `Region::init`: zeroed memory of ours alone.
unsafe fn init_leases(at: *mut Leases) {
    // SAFETY: per the contract.
    let leases = unsafe { &*at };
    for (half, bytes) in leases.holder_start.iter().zip([crate::random::os_bytes::<8>(), crate::random::os_bytes::<8>()]) {
        half.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
    }
}

/// Whether this server's sequences are leased from the segment authority
/// (`pg_idgen.seq_sections = authority`, fixed at start).
#[inline]
pub fn leased() -> bool {
    static LEASED: OnceLock<bool> = OnceLock::new();
    *LEASED.get_or_init(|| settings::config().segments.seq_leased)
}

/// Whether the section's lease has ended on this server: no number of it may be handed out.
#[inline]
pub(super) fn lease_ended(section: &Section) -> bool {
    leased() && clock::coarse_monotonic_millis() >= section.lease_until_ms.load(Ordering::Acquire)
}

/// Records the holder the authority named for the section of `need`, for the errors of calls.
pub(super) fn record_holder(way: usize, holder: &str) {
    let leases = LEASES.get();
    leases.refused.fetch_add(1, Ordering::Relaxed);
    let record = &leases.held[way % HELD_RECORDS];
    let bytes = &holder.as_bytes()[..holder.len().min(HOLDER_LEN)];
    record.way.store(0, Ordering::Release);
    for (cell, byte) in record.name.iter().zip(bytes) {
        cell.store(*byte, Ordering::Relaxed);
    }
    record.len.store(bytes.len() as u32, Ordering::Relaxed);
    record.way.store(way as u64 + 1, Ordering::Release);
}

/// Forgets the holder named for the section at `way`: it is this server's now.
pub(super) fn forget_holder(way: usize) {
    let record = &LEASES.get().held[way % HELD_RECORDS];
    let _ = record.way.compare_exchange(way as u64 + 1, 0, Ordering::AcqRel, Ordering::Relaxed);
}

/// The holder last named for the section at `way`, if any.
pub(super) fn holder_of(way: usize) -> Option<String> {
    let record = &LEASES.get().held[way % HELD_RECORDS];
    if record.way.load(Ordering::Acquire) != way as u64 + 1 {
        return None;
    }
    let len = (record.len.load(Ordering::Relaxed) as usize).min(HOLDER_LEN);
    let name: Vec<u8> = record.name[..len].iter().map(|b| b.load(Ordering::Relaxed)).collect();
    Some(String::from_utf8_lossy(&name).into_owned())
}
