//! Per-key sequences (WeChat's seqsvr): every key of a space has its own increasing numbers,
//! served from shared memory; only each *section* of neighbouring keys has a persisted maximum.
//!
//! Where things are:
//! - `cache`: the sections in shared memory, the sets they live in, taking and retiring them;
//! - `next`: the hot path, `seq_next()`, `seq_current()`, `seq_key()`;
//! - `spaces`: `seq_space_create()`, `seq_space_drop()`, the tables and their trigger;
//! - `raise`: the worker's side (loads and raises; `SectionSource`, `LocalSections`: this
//!   database's section table);
//! - `service`: the sections as a service of the database worker, from either source;
//! - `leased`: sections leased from the segment authority (`pg_idgen.seq_sections = authority`):
//!   takes, raises and renewals there, idle sections given up, `seq_lease_status()`;
//! - `lease_state`: what every process knows of the leases (their region, the calls' check);
//! - `mirror`: this database's copy of the authority's spaces;
//! - `store`: the authority's side, `pg_idgen_seq_sections()` and `pg_idgen_seq_spaces()`;
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
//! With sections leased from the segment authority the rule holds across servers: the authority's
//! `max_seq` is raised only for the section's current holder (fenced by the lease's generation),
//! and a server that takes a section loads it as above, so its keys continue above every number
//! an earlier holder served (`store`). A raise that finds `max_seq` above the section's `limit`
//! (someone else raised it) starts the keys above it too.
//!
//! ## The cache
//!
//! `pg_idgen.seq_cache_sections` sections of up to 256 keys in shared memory. A section lives in
//! one of the 8 sections of its set: consecutive sections of a space go to consecutive sets, from
//! a set that a hash of database, space and run of sections picks, so a space's dense keys fill
//! the sets evenly. A set's sections lie a set count apart (section `i` is in set `i % sets`), so
//! the sections of a dense run of keys, in one way of consecutive sets, are consecutive in memory.
//! A section is found by reading its set's tags (side by side), then the identity of the one that
//! matches, without a lock. A section's counters sit 6 to a 64-byte line, beside the line's
//! `stamp` (a copy of the section's `version`) and `raise_at` (a copy of the prefetch point). A
//! call's number is one `fetch_add` on its key's counter; a seqlock (`version`, odd while a section
//! changes what it holds, which every line's stamp follows) tells the call that the section still
//! held its key, or the number is dropped (a gap) and the call starts over. Taking a section for
//! another — the least recently used of the set — happens under the sections' LWLock (exclusive),
//! and so do publishing a load and retiring.
//!
//! One line in the common case: each backend remembers the sections it found ready (`recent`:
//! space and section to way and version). A call that finds its section there goes straight to
//! its key's line, takes its number, and reads the line's `raise_at` and then its `stamp`: the
//! stamp still the version means the section held the key throughout (versions only grow, so a
//! way taken for another section since can never show the old one's); a number at most `raise_at`
//! is below a `limit` already published. Only a number past `raise_at` reads the section's header
//! (`limit`, `want_raise`), under the header's `version`.
//!
//! Retiring a database changes its sections' headers only (state FREE, version moved on), not
//! their 43 lines: then it moves the database's retire epoch (`Header::epochs`), and a backend
//! whose map was filled under another epoch empties it before it looks. A call that read the
//! epoch before the move may still take a number from a retired section's counters, as a call
//! that passed its closing seqlock read before a change may: such a number is at most the
//! section's `limit`, below its persisted maximum, where the section's next load starts.
//!
//! Prefetch: a number past `raise_at` (half the last raise left) asks the worker for a raise;
//! a number past `limit` waits for it. A section raised again within a second doubles its
//! raise (up to `pg_idgen.segment_max_step`).
//!
//! What the rest of the server asks of the cache costs what it concerns, not the cache's size:
//! each database's sections are linked and counted (`databases`), so `retire_database` and
//! `seq_status()` take one database's; the worker learns which sections want a raise from a bitmap
//! that calls mark (`wanted`); numbers handed out are counted by each process on a line of its own
//! (`served`), which `seq_status()` sums.
//!
//! ## Who writes what
//!
//! | field | written by | protection |
//! |---|---|---|
//! | `version`, `state`, `database`, `space_id`, `section_keys`, `section`, `base` | take, load, retire | the lock; readers check `version` |
//! | each line's `stamp` | take, load (every change but a retire) | the lock; calls check it against the version they found |
//! | `keys[i]` (in the lines) | every call (`fetch_add`); the load (store) | atomic; the load under the lock |
//! | `limit`, `raise_at` and the lines' `raise_at` | the worker's publish (`fetch_max`; the lines after `limit`) | the lock |
//! | `want_raise` | calls set it (a waiting one before every sleep); a publish clears it, then sets it again if a key is already past the new `raise_at`; a failed or skipped raise sets it | atomic flag |
//! | the section's mark in `wanted` | whoever sets `want_raise`, after it; the worker clears it before it reads `want_raise` | atomic bits |
//! | the database lists and counts | take, load, retire, a space found gone | the lock |
//! | `last_used` | calls, when the use clock moved since this backend last wrote it | approximate |
//! | `raise`, `raised_at_ms`, `backoff` | the worker | one writer |
//! | `lease_generation`, `lease_until_ms` (leased sections) | the worker's publish and renewals | the lock; calls read `lease_until_ms` |
//! | a backend's `recent` map, its served counter | that backend | its own |
//!
//! Spaces carry an id (a space created anew gets another), and their sections the hash of the
//! space's name and of a keyed space's secret (an extension created anew numbers ids from 1
//! again, so a space made anew can have an old one's id, name and size, never its secret), so
//! cached sections of a dropped space are never found by the new one, nor the new one's by a
//! backend that still maps texts with the old secret; any change to the tables (but the
//! worker's raises) retires the database's cached sections.

mod cache;
mod databases;
mod fill;
mod lease_state;
mod leased;
mod mirror;
mod mix;
mod next;
mod raise;
mod recent;
mod served;
mod service;
mod spaces;
mod status;
mod store;
mod store_state;
mod text_key;
mod wanted;

pub use cache::CACHE;
pub use databases::DATABASES;
pub use lease_state::LEASES;
pub use served::SERVED;
pub use service::SECTIONS;
pub use wanted::WANTED;
