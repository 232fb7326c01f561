//! Segment numbers (Leaf-segment): dense, increasing numbers per tag, served from ranges cached
//! in shared memory and obtained only by the database worker (`worker`, whose service the ranges
//! are: `ranges::RANGES`), from a range source (the local tag table, in committed and flushed
//! transactions of its own; or the segment authority).
//!
//! Where things are:
//! - `slot`: a tag's cache in shared memory (the region `pg_idgen segment slots`, with the LWLock of
//!   the protocol below);
//! - `next`: the hot path, `segment_next()`;
//! - `block`: `segment_next_range()`, a block of numbers in one call;
//! - `tags`: `segment_create()`, `segment_drop()`;
//! - `table`: the tag table as pg_idgen reaches it (lookups, guarded SQL, its trigger);
//! - `ranges`: the service of the database worker (what is wanted, publishing what was obtained);
//! - `source`: where ranges come from (`RangeSource`: the local tag table, the segment authority);
//! - `status`: `segment_status()`, `segment_authority_status()`.
//!
//! Each tag in use has a slot with two ranges. The slot's `cursor` is `generation << 32 |
//! offset`; a call takes the next offset by one `fetch_add` and reads range `generation` from
//! `ranges[generation % 2]`. When a set share of a range is used, the worker is asked (latch) to
//! load range `generation + 1` into the other cell; when a range is used up, the call that finds
//! it so switches the cursor to the next generation under the LWLock. Only when the next range is
//! not loaded yet does a call wait, on a condition variable.
//!
//! Why ranges are never allocated by the caller: a range allocated in the caller's transaction
//! could be rolled back after its numbers were handed out, and handed out again.
//!
//! ## Who writes what
//!
//! | field | written by | protection |
//! |---|---|---|
//! | `version` | take, retire, drop, exhaust | the lock; odd while the slot changes, even when stable |
//! | `state`, `database`, `tag` | take, retire, drop, exhaust | the lock; readers check `version` |
//! | `cursor` | every call (`fetch_add`); switch and take (store) | atomic; stores under the lock |
//! | `ranges` | the worker's publish; take | the lock; readers check each cell's generation |
//! | `step`, `last_load_ms`, `issued_before` | publish, switch | the lock |
//! | `want_next` | calls set it, publish clears it | atomic flag |
//! | `want_len` | block calls raise it, publish clears it | atomic |
//! | `end_generation` | publish (the tag is at bigint's end), take | the lock |
//! | `left` | publish (what is left after the range, or the block that did not fit), take | the lock; only shrinks between takes |
//! | `backoff` | the worker of the slot's database (its pause is also ended by any worker whose authority answers again) | one writer each; an ended pause only means an early retry |
//! | `waits`, `history_*` | calls, the worker | atomic counters, approximate |
//!
//! A call reads `version`, takes its offset and reads the range, then reads `version` again: if
//! it changed, the slot was retired or given to another tag meanwhile, and the number taken is
//! dropped (a gap). Versions only grow, so a (version, generation) pair never names two ranges.
//!
//! A block call (`segment_next_range(tag, n)`) moves the cursor by `n` with a compare-and-swap,
//! and only when the block fits in the current range. Otherwise, under the lock, it switches the
//! cursor to the next range with its block taken at once, again by compare-and-swap (a lost race
//! with a `fetch_add` retries). A next range too short for the block is switched past unused (a
//! gap), and the call asks the worker for a range of at least `n` (`want_len`) and waits for it.
//! Near bigint's end the worker allocates a range for a block only if all of it fits, and
//! otherwise publishes how many numbers are left (`left`) and allocates nothing. A block that
//! fits neither the ranges in shared memory nor what is `left` after them fails before it
//! switches or takes anything: the numbers left stay for smaller blocks and single calls, and the
//! tag's `max_id` does not move.

mod block;
mod next;
mod ranges;
mod slot;
mod source;
mod status;
mod table;
mod tags;

pub use ranges::RANGES;
pub use slot::SLOTS;
