//! Per-key sequences (WeChat's seqsvr): every key of a space has its own increasing numbers,
//! served from shared memory; only each *section* of neighbouring keys has a persisted maximum.
//!
//! Where things are:
//! - `cache`: the sections in shared memory, the sets they live in, taking and retiring them;
//! - `next`: the hot path, `seq_next()`, `seq_current()`, `seq_key()`;
//! - `spaces`: `seq_space_create()`, `seq_space_drop()`, the tables and their trigger;
//! - `raise`: the worker's side (loads and raises, `SectionSource`: the local table today);
//! - `fill`: the trigger `seq_fill()`;
//! - `text_key`: what a text key stands for in its space (keyed by the space's secret), and
//!   which texts may be keys;
//! - `status`: `seq_status()`.
//!
//! ## The rule
//!
//! A section's `max_seq` (table `seq_section`) is at least every number ever handed out for its
//! keys. Only the worker raises it, in a transaction of its own, committed and flushed before
//! the section's `limit` in shared memory is raised to it (the rule of segment ranges). A call
//! hands out a number only when it is at most `limit`. A section that is loaded into the cache
//! — the first time, after a restart or a crash, after an eviction — is first raised once more,
//! and all its keys continue from the maximum found *before* that raise. So no number repeats:
//! everything handed out before is at most that maximum.
//!
//! ## The cache
//!
//! `pg_idgen.seq_cache_sections` sections of up to 256 keys in shared memory. A section lives in
//! one of the 8 sections of its set: consecutive sections of a space go to consecutive sets, from
//! a set that a hash of database, space and run of sections picks, so a space's dense keys fill
//! the sets evenly. It is found by reading those 8 without a lock. A call's number is one `fetch_add` on its key's
//! counter; a seqlock (`version`, odd while a section changes what it holds) tells the call that
//! the section still held its key, or the number is dropped (a gap) and the call starts over.
//! Taking a section for another — the least recently used of the set — happens under the
//! sections' LWLock (exclusive), and so do publishing a load and retiring.
//!
//! Prefetch: a number past `raise_at` (half the last raise left) asks the worker for a raise;
//! a number past `limit` waits for it. A section raised again within a second doubles its
//! raise (up to `pg_idgen.segment_max_step`).
//!
//! ## Who writes what
//!
//! | field | written by | protection |
//! |---|---|---|
//! | `version`, `state`, `database`, `space_id`, `section_keys`, `section`, `base` | take, load, retire | the lock; readers check `version` |
//! | `keys[i]` | every call (`fetch_add`); the load (store) | atomic; the load under the lock |
//! | `limit`, `raise_at` | the worker's publish (`fetch_max`) | the lock |
//! | `want_raise` | calls set it (a waiting one before every sleep); a publish clears it, then sets it again if a key is already past the new `raise_at`; a failed or skipped raise sets it | atomic flag |
//! | `last_used` | calls, when the use clock moved | approximate |
//! | `raise`, `raised_at_ms`, `failures`, `retry_at_ms`, `warned_at_ms` | the worker | one writer |
//!
//! Spaces carry an id (a space created anew gets another), so cached sections of a dropped
//! space are never found by the new one; any change to the tables (but the worker's raises)
//! retires the database's cached sections.

mod cache;
mod fill;
mod next;
mod raise;
mod spaces;
mod status;
mod text_key;

pub use cache::{cache_size, retire_database};
pub use spaces::CACHED_TABLES;
pub use raise::serve_round;
