//! The high-water marks: for each time-based family, a Unix time that none of its ids has
//! reached, made durable before the generator may reach it, together with what the ids below it
//! were made with. Why one mark per family: a family moved far ahead (an advance past a restored
//! id) must not drag the others' floors with it.
//!
//! The clock worker keeps each mark `pg_idgen.clock_reserve` ahead of its family's time in use. A
//! new record is first written to two files in the data directory (`pg_idgen.mark` and its copy
//! `pg_idgen/mark`, each fsynced and renamed into place), then to WAL as a record of pg_idgen's own
//! resource manager, flushed, and only then published to the generators as their limits.
//!
//! The files are read when shared memory is built, before any process can generate. Every
//! generator's floor is set past the mark: values continue from there, so after a restart, a crash
//! or a promotion nothing is handed out again, whatever the wall clock says, without a database
//! connection. A standby's startup process replays each mark into its files, then its shared
//! memory; a mark it cannot write stops recovery.
//!
//! What a record holds besides the mark — the snowflake layout and epoch, the node id, whether
//! snowflake ids were made — lets a start with changed settings refuse when its ids would not be
//! above the old ones. The two copies let a start notice a lost file: one copy missing means ids
//! were made here before, and the server refuses to start rather than repeat them.
//!
//! - `start`: reading the files when shared memory is built, refusing a start that would repeat
//!   ids, every generator's floor past the mark;
//! - `advance`: moving the marks while the server runs, advancing past a given id, the exact marks
//!   at a clean stop;
//! - `files`: the two files, each replaced durably;
//! - `wal`: the WAL resource manager that carries marks to crash recovery and standbys;
//! - `file_format`: the text both carry (pure).

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicI64};

mod advance;
mod file_format;
mod files;
mod start;
mod wal;

pub use advance::{advance_if_due, advance_past, newest_id_us, save_exact_marks};
pub use start::restore_at_start;
pub use wal::register_wal_resource_manager;

use self::file_format::MarkRecord;
use crate::families::COUNT as FAMILIES;
use crate::settings::Config;
use crate::shmem::{self, Shared};

/// The high-water marks as every process sees them: the region `pg_idgen marks`.
///
/// | field | written by | protection |
/// |---|---|---|
/// | `durable_us` | creation, the clock worker, WAL replay | `fetch_max`: only rise, once durable |
/// | `persisted_us` | creation, the clock worker, WAL replay | `fetch_max`: only rise, once both files hold them |
/// | `advanced_at_us` | the clock worker | one writer |
/// | `snowflake_made` | creation, WAL replay, `snowflake_advance_past()` | only ever set |
#[repr(C)]
pub struct MarkState {
    /// The durable marks (Unix µs): no generator hands out a value of its mark's time or later.
    pub durable_us: [AtomicI64; FAMILIES],
    /// When the clock worker last moved the marks (Unix µs), 0 before it has.
    pub advanced_at_us: AtomicI64,
    /// The marks both files hold (a standby's replay skips writing older ones).
    pub persisted_us: [AtomicI64; FAMILIES],
    /// Whether this server may have handed out a snowflake id (carried in every record).
    pub snowflake_made: AtomicBool,
}

pub static MARKS: Shared<MarkState> = Shared::new(c"pg_idgen marks", shmem::zeroed_is_ready);

/// The marks, or an ERROR that says how to fix a missing `shared_preload_libraries`.
pub fn marks() -> &'static MarkState {
    MARKS.get()
}

impl MarkState {
    /// The latest of the durable marks: no id of any family has reached it.
    pub fn latest_durable_us(&self) -> i64 {
        self.durable_us.iter().map(|m| m.load(Relaxed)).max().unwrap_or(0)
    }

    /// The earliest of the durable marks: the generator clock has not reached it (each mark is
    /// kept ahead of the clock; one family's may be far ahead after an advance).
    pub fn earliest_durable_us(&self) -> i64 {
        self.durable_us.iter().map(|m| m.load(Relaxed)).min().unwrap_or(0)
    }

    pub fn persisted(&self) -> [i64; FAMILIES] {
        std::array::from_fn(|i| self.persisted_us[i].load(Relaxed))
    }

    /// Records marks that both files now hold (each only ever rises).
    pub fn note_persisted(&self, marks_us: [i64; FAMILIES]) {
        for (persisted, mark_us) in self.persisted_us.iter().zip(marks_us) {
            persisted.fetch_max(mark_us, Relaxed);
        }
    }
}

/// The record for new marks: this server's layout and node id.
///
/// Why "made" is true whenever a node id is set or leased, not once an id was seen: a record must say so
/// before any snowflake id under its marks can be handed out, and a crash right after the first
/// ids would otherwise leave a record that says none were.
fn record_for(config: &Config, marks_us: [i64; FAMILIES]) -> MarkRecord {
    let made = config.node_id.is_some() || config.lease.is_some() || marks().snowflake_made.load(SeqCst);
    MarkRecord { marks_us, layout: Some(config.layout), node_id: config.node_id, snowflake_made: made }
}
