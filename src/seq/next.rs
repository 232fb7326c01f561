//! The hot path: `seq_next()` finds its key's section in the backend's map of sections it used
//! (`recent`), or in the cache without a lock, and takes the key's next number with one
//! `fetch_add` on the key's counter line; only a section not cached, or a key at its section's
//! limit, takes the slow path (the worker loads or raises it, the call waits).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::cache::{self, header, sections, Section, SectionId, DROPPED, LOADING, READY};
use super::recent::Recent;
use super::spaces::{space_inserted_here, space_row, Space, CREATE_SPACE, SPACE};
use super::text_key::{require_deterministic_argument, secret_missing};
use super::{lease_state as leased, mirror, served, wanted};
use crate::seqlock::Seqlock;
use crate::tables::{self, display, TextBytes};
use crate::worker::wait::{self, Awaited, Deadline};
use crate::{errors, settings, shmem, worker};

thread_local! {
    /// This backend's spaces, by name, as its last lookup found them, each with this backend's
    /// number for that row (`recent` knows sections by it). A stale entry only costs a miss
    /// (`SectionId` carries the hash of the name and of a keyed space's secret, and the section
    /// size, besides the id, so the sections of another space are never found with it), after
    /// which the row is read again, and a text key hashed again with what it says: a space's
    /// secret never changes, and a space made anew has another id or another secret.
    static SPACES: RefCell<HashMap<Vec<u8>, (Space, u32)>> = RefCell::new(HashMap::new());
    /// The last number given to a space row.
    static SPACE_NUMBERS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// What every call reads: the last space used and the sections this backend used. One
    /// thread-local: in a shared library each is a lookup of its own.
    static HOT: RefCell<Hot> = const { RefCell::new(Hot { last: None, recent: Recent::new() }) };
}

/// What a call of this backend reads first.
struct Hot {
    /// The last space used (its name, row and number), checked first: comparing bytes is cheaper
    /// than hashing them.
    last: Option<(Vec<u8>, Space, u32)>,
    /// The sections this backend used.
    recent: Recent,
}

/// A key as a call names it: a bigint, or a text that its space maps to one (`seq_key()`).
#[derive(Clone, Copy, Debug)]
pub(super) enum Key<'a> {
    Int(i64),
    Text(&'a [u8]),
}

impl Key<'_> {
    /// The bigint key in a space as `info` describes it; None for a text of a space whose secret
    /// is missing.
    #[inline]
    fn in_space(self, info: &Space) -> Option<i64> {
        match self {
            Key::Int(key) => Some(key),
            Key::Text(text) => info.text_keys.key(text),
        }
    }
}

#[pg_extern(volatile, parallel_safe)]
/// The next number of `key` in `space`: strictly above every number handed out for it before.
fn seq_next(space: TextBytes, key: i64) -> i64 {
    next(space.0, Key::Int(key))
}

#[pg_extern(volatile, parallel_safe)]
/// The next number of a text key, `seq_key(space, key)`. Why a name of its own and not an
/// overload: `seq_next('s', '5')` and a parameter sent untyped would resolve to the text form, and
/// key 5 would get a second counter.
fn seq_next_text(space: TextBytes, key: TextBytes, fcinfo: pg_sys::FunctionCallInfo) -> i64 {
    // SAFETY: the call's own fcinfo.
    require_deterministic_argument(unsafe { (*fcinfo).fncollation }, "seq_next_text()");
    next(space.0, Key::Text(key.0))
}

#[pg_extern(volatile, parallel_safe)]
/// A number at least every number handed out for `key` so far, and below the next one.
fn seq_current(space: TextBytes, key: i64) -> i64 {
    current(space.0, Key::Int(key))
}

#[pg_extern(volatile, parallel_safe)]
/// `seq_current()` of a text key, `seq_key(space, key)`.
fn seq_current_text(space: TextBytes, key: TextBytes, fcinfo: pg_sys::FunctionCallInfo) -> i64 {
    // SAFETY: the call's own fcinfo.
    require_deterministic_argument(unsafe { (*fcinfo).fncollation }, "seq_current_text()");
    current(space.0, Key::Text(key.0))
}

#[pg_extern(stable, parallel_safe, name = "seq_key")]
/// The bigint key a text key stands for in `space`: what `seq_next_text(space, key)` numbers.
/// Why not the 0.8.0 symbol's name (`seq_key`): that SQL declares `seq_key(text)` with it, and
/// would call this with one argument until the update (`text_key::seq_key_wrapper` answers it).
fn seq_key_in_space(space: TextBytes, key: TextBytes, fcinfo: pg_sys::FunctionCallInfo) -> i64 {
    // SAFETY: the call's own fcinfo.
    require_deterministic_argument(unsafe { (*fcinfo).fncollation }, "seq_key()");
    // The row, not this backend's copy: nothing here finds out that the copy is stale.
    SPACE.check(space.0);
    let info = find_space(space.0, &mut Deadline::new());
    remember(space.0, info);
    let Some(info) = info else { unknown_space(space.0) };
    Key::Text(key.0).in_space(&info).unwrap_or_else(|| secret_missing(space.0))
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION seq_next(text, bigint) IS
    'Next number of a key in a space of per-key sequences: strictly above every number handed out for the key before; a new key starts at 1.';
COMMENT ON FUNCTION seq_next_text(text, text) IS
    'Next number of a text key (seq_key(space, key)) in a space of per-key sequences.';
COMMENT ON FUNCTION seq_current(text, bigint) IS
    'A number at least every number handed out for the key so far, and below its next one; no increment.';
COMMENT ON FUNCTION seq_current_text(text, text) IS
    'seq_current() of a text key (seq_key(space, key)).';
COMMENT ON FUNCTION seq_key(text, text) IS
    'The bigint key of a text key in a space: SipHash-2-4 of its bytes under the space''s secret (FNV-1a 64 and SplitMix64 for spaces made before 0.9.0).';
-- Each new section a call touches is a row the worker writes: only roles granted it may number.
-- seq_key() likewise: a space's keys are what its secret keeps from those who may not number it.
REVOKE EXECUTE ON FUNCTION seq_next(text, bigint), seq_next_text(text, text), seq_current(text, bigint), seq_current_text(text, text), seq_key(text, text) FROM PUBLIC;
"#,
    name = "seq_next",
    requires = [seq_next, seq_next_text, seq_current, seq_current_text, seq_key_in_space]
);

/// The section of a key and its place in it (keys below 0 too: floor division).
#[inline]
fn split(key: i64, section_keys: u32) -> (i64, usize) {
    let k = i64::from(section_keys);
    (key.div_euclid(k), key.rem_euclid(k) as usize)
}

/// The next number of `key`.
#[inline]
pub(super) fn next(space: &[u8], key: Key) -> i64 {
    let mut deadline = Deadline::new();
    loop {
        let ready = ready_section(space, key, "seq_next()", &mut deadline);
        let (line, counter) = ready.section.counter(ready.index);
        let previous = counter.fetch_add(1, Ordering::AcqRel);
        let raise_at = line.raise_at.load(Ordering::Acquire);
        // The closing read of the seqlock: the section still holds this key, so the number and
        // the prefetch point are the key's. Otherwise the number taken is a gap, and the call
        // starts over.
        if Seqlock::copy_still(&line.stamp, ready.version) {
            // Why below bigint's end: at it, the counter wraps to a negative number.
            if !(0..i64::MAX).contains(&previous) {
                exhausted(space, key);
            }
            if leased::lease_ended(ready.section) {
                // The number is a gap: after the lease's end here, another server may serve the
                // section (above every number served here); wait for a renewal, or for it to go.
                wait_for_lease(&ready, space, &mut deadline);
                continue;
            }
            let number = previous + 1;
            // At most the prefetch point: below a limit published before it.
            if number <= raise_at || past_prefetch_point(&ready, number, space, &mut deadline) {
                served::add_one(ready.served.0, ready.served.1);
                return number;
            }
        }
        ready.forget();
        pgrx::check_for_interrupts!();
    }
}

/// A number past its section's prefetch point: the section's `limit` decides whether it can be
/// handed out now (and a raise is asked for), or after the worker raised the section (the call
/// waits). False when the section changed meanwhile: the number is a gap.
fn past_prefetch_point(ready: &Ready, number: i64, space: &[u8], deadline: &mut Deadline) -> bool {
    let section = ready.section;
    let limit = section.limit.load(Ordering::Acquire);
    if !section.version.still(ready.version) {
        return false;
    }
    if number <= limit {
        if !section.want_raise.load(Ordering::Relaxed) {
            ask_for_raise(section, ready.way);
        }
        return true;
    }
    // The number is this call's, but not durable yet: wait for the worker to raise.
    wait_for_limit(ready, number, space, deadline)
}

fn current(space: &[u8], key: Key) -> i64 {
    let mut deadline = Deadline::new();
    loop {
        let ready = ready_section(space, key, "seq_current()", &mut deadline);
        if leased::lease_ended(ready.section) {
            // Another server may be serving the key by now: its numbers are not in this counter.
            wait_for_lease(&ready, space, &mut deadline);
            continue;
        }
        let (line, counter) = ready.section.counter(ready.index);
        let number = counter.load(Ordering::Acquire);
        let limit = ready.section.limit.load(Ordering::Acquire);
        if Seqlock::copy_still(&line.stamp, ready.version) && ready.section.version.still(ready.version) {
            // A counter past the limit holds numbers that waiting calls took but have not handed
            // out; one that wrapped at bigint's end handed out bigint's last number.
            return if number < 0 { i64::MAX } else { number.min(limit) };
        }
        ready.forget();
        pgrx::check_for_interrupts!();
    }
}

/// A key's section, ready: the section, its way in the cache, the version it was found ready
/// under, the key's index in it, this process's counter of numbers handed out, and how `recent`
/// knows it (the space's number, the section).
struct Ready {
    section: &'static Section,
    way: usize,
    version: u64,
    index: usize,
    served: (&'static std::sync::atomic::AtomicU64, bool),
    remembered: (u32, i64),
}

impl Ready {
    /// The section changed since it was found: this backend forgets where it was, so that the
    /// call looks for it again.
    #[cold]
    fn forget(&self) {
        HOT.with_borrow_mut(|hot| hot.recent.forget(self.remembered.0, self.remembered.1));
    }
}

/// The loaded section of `key`: from this backend's map of sections it used, from the cache, or
/// loaded by the worker while the call waits.
#[inline]
fn ready_section(space: &[u8], key: Key, function: &str, deadline: &mut Deadline) -> Ready {
    shmem::require_preloaded();
    errors::refuse_during_recovery(function);
    // SAFETY: this backend's database.
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let (found, served) = HOT.with_borrow_mut(|hot| {
        let Hot { last, recent } = hot;
        let served = recent.start_call(database);
        let found = cached_space(last, space).and_then(|(info, number)| {
            let key = key.in_space(&info)?;
            let (section, index) = split(key, info.section_keys);
            let (way, version) = recent.find(number, section).or_else(|| {
                let found = cache::find(section_id(database, &info, section)).filter(|f| f.state == READY)?;
                found.section().touch(header().use_clock.load(Ordering::Relaxed));
                recent.remember(number, section, found.way, found.version);
                Some((found.way, found.version))
            })?;
            Some((way, version, index, (number, section)))
        });
        (found, served)
    });
    match found {
        Some((way, version, index, remembered)) => Ready { section: &sections()[way], way, version, index, served, remembered },
        None => load_section(space, key, database, deadline, served),
    }
}

#[inline]
fn section_id(database: u32, info: &Space, section: i64) -> SectionId {
    SectionId { database, space_id: info.id, section_keys: info.section_keys, space_hash: info.hash, section }
}

/// The space as this backend last found it (its id, section size and text keys), and its number
/// for that row.
#[inline]
fn cached_space(last: &mut Option<(Vec<u8>, Space, u32)>, space: &[u8]) -> Option<(Space, u32)> {
    let hit = last.as_ref().and_then(|(name, info, number)| (name == space).then_some((*info, *number)));
    hit.or_else(|| {
        let found = SPACES.with(|spaces| spaces.borrow().get(space).copied())?;
        *last = Some((space.to_vec(), found.0, found.1));
        Some(found)
    })
}

/// Records the space's row as a lookup found it (None: no such space), and returns this backend's
/// number for it: the number it had, if the row is the same, or a new one.
fn remember(space: &[u8], info: Option<Space>) -> u32 {
    let known = SPACES.with(|spaces| spaces.borrow().get(space).copied());
    let number = match (info, known) {
        (Some(info), Some((was, number))) if was == info => number,
        (Some(_), _) => {
            let number = SPACE_NUMBERS.get() + 1;
            SPACE_NUMBERS.set(number);
            number
        }
        (None, _) => 0,
    };
    SPACES.with(|spaces| match info {
        Some(info) => spaces.borrow_mut().insert(space.to_vec(), (info, number)),
        None => spaces.borrow_mut().remove(space),
    });
    HOT.with_borrow_mut(|hot| hot.last = info.map(|info| (space.to_vec(), info, number)));
    number
}

/// The slow path of a lookup: reads the space's row, takes a section for the key if none holds
/// it, and waits for the worker to load it.
#[cold]
fn load_section(space: &[u8], key: Key, database: u32, deadline: &mut Deadline, served: (&'static std::sync::atomic::AtomicU64, bool)) -> Ready {
    SPACE.check(space);
    let mut retook = false;
    loop {
        pgrx::check_for_interrupts!();
        let info = find_space(space, deadline);
        let number = remember(space, info);
        let Some(info) = info else { unknown_space(space) };
        let key = key.in_space(&info).unwrap_or_else(|| secret_missing(space));
        let (section, index) = split(key, info.section_keys);
        let id = section_id(database, &info, section);
        let taken = match cache::find(id) {
            Some(found) if found.state == DROPPED => {
                // The worker found no such space: the row this call sees was not committed
                // then. Once more (it may be now), then the call gives up.
                if retook {
                    if space_inserted_here(space, deadline.ms()) {
                        errors::created_in_this_transaction(format!("sequence space \"{}\"", display(space)));
                    }
                    SPACE.unknown(
                        space,
                        "The worker does not find it in seq_space: it was dropped, or it was created in a transaction that has not committed yet.",
                        Some(CREATE_SPACE),
                    );
                }
                retook = true;
                if leased::leased() {
                    // The authority's space may have changed: a fresh copy first.
                    mirror::ask_and_wait(space, deadline);
                    continue;
                }
                cache::retake(found, id, space)
            }
            Some(found) => Some(found),
            None => cache::find_or_take(id, space),
        };
        let Some(found) = taken else {
            // Every section of the set is being loaded: wait for one load to end.
            wait_until(None, deadline, space, || false);
            continue;
        };
        let section = found.section();
        match section.state.load(Ordering::Acquire) {
            READY if section.version.read() == found.version => {
                HOT.with_borrow_mut(|hot| hot.recent.remember(number, id.section, found.way, found.version));
                return Ready { section, way: found.way, version: found.version, index, served, remembered: (number, id.section) };
            }
            LOADING => wait_until(Some((section, found.way, found.version)), deadline, space, || section.state.load(Ordering::Acquire) != LOADING),
            _ => {}
        }
    }
}

/// The space's row. With a segment authority, the worker's copy of the authority's space, read
/// as it is now (the copy may be newer than the statement); a space not copied yet is asked for.
fn find_space(space: &[u8], deadline: &mut Deadline) -> Option<Space> {
    let found = if !leased::leased() {
        space_row(space, deadline.ms())
    } else {
        let ms = deadline.ms();
        tables::with_latest_snapshot(|| space_row(space, ms)).or_else(|| {
            mirror::ask_and_wait(space, deadline);
            tables::with_latest_snapshot(|| space_row(space, ms))
        })
    };
    // A copy's maxima are the authority's, a space of its own this server's: neither is numbered
    // from the other's (from 1 again, or beside the authority's).
    match found {
        Some(info) if info.copied != leased::leased() => mirror::refuse_mixed(space, info.copied),
        found => found,
    }
}

/// A space that `find_space` did not find: 42704, with where it would be.
#[cold]
fn unknown_space(space: &[u8]) -> ! {
    if leased::leased() {
        SPACE.unknown(
            space,
            "The segment authority (pg_idgen.segment_authority) does not have it.",
            Some("Create it at the authority with seq_space_create(space)."),
        )
    }
    SPACE.unknown(space, "It is not in seq_space.", Some(CREATE_SPACE))
}

/// Waits until the section's lease is renewed (or the section retired: it went to another server).
#[cold]
fn wait_for_lease(ready: &Ready, space: &[u8], deadline: &mut Deadline) {
    let section = ready.section;
    header().waits.fetch_add(1, Ordering::Relaxed);
    wait_until(Some((section, ready.way, ready.version)), deadline, space, || !leased::lease_ended(section));
}

/// Asks the worker to raise the section (prefetch, or a waiting call).
fn ask_for_raise(section: &Section, way: usize) {
    if !section.want_raise.swap(true, Ordering::AcqRel) {
        wanted::mark(way);
        worker::wake();
    }
}

/// Waits until the section's limit reaches `number` (true) or the section changed (false).
#[cold]
fn wait_for_limit(ready: &Ready, number: i64, space: &[u8], deadline: &mut Deadline) -> bool {
    let section = ready.section;
    header().waits.fetch_add(1, Ordering::Relaxed);
    wait_until(Some((section, ready.way, ready.version)), deadline, space, || section.limit.load(Ordering::Acquire) >= number);
    section.version.read() == ready.version
}

/// Waits until the section changed or `done()` (with no section: one round), asking the worker
/// for the section before each sleep (`wait::until`).
fn wait_until(section: Option<(&Section, usize, u64)>, deadline: &mut Deadline, space: &[u8], done: impl Fn() -> bool) {
    let mut rounds = 0;
    let ready = || match section {
        // Changed first: a section that holds another key now must not be asked for.
        Some((section, _, version)) => section.version.read() != version || done(),
        None => {
            rounds += 1;
            rounds > 1
        }
    };
    let ask = || {
        if let Some((section, way, _)) = section {
            section.want_raise.store(true, Ordering::Release);
            wanted::mark(way);
        }
        worker::wake();
    };
    wait::until(deadline, ready, ask, || no_numbers_in_time(space, section.map(|(_, way, _)| way)));
}

/// What the calls of per-key sequences wait for, in the words of their errors.
const SECTIONS: Awaited = Awaited { kind: "sequence space", numbers: "ready", work: "raise a section", failed: "raise its section" };

#[cold]
fn no_numbers_in_time(space: &[u8], way: Option<usize>) {
    if way.is_none() {
        errors::raise(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!("no section of the cache was free for {} in time", SPACE.quoted(space)),
            Some(format!(
                "Every section its key's section may live in was being loaded for pg_idgen.segment_wait_timeout ({} ms).",
                settings::config().segments.wait_timeout_ms
            )),
            Some("Raise pg_idgen.seq_cache_sections and restart the server."),
        )
    }
    let authority = |subject: String| {
        if !leased::leased() {
            return;
        }
        let timeout_ms = settings::config().segments.wait_timeout_ms;
        if let Some(holder) = way.and_then(leased::holder_of) {
            errors::raise(
                PgSqlErrorCode::ERRCODE_OBJECT_IN_USE,
                // A holder's name, the server a holder handed it to, or why no server may take the
                // section yet ("(none: …)").
                match holder.strip_prefix("(handed over to ").and_then(|to| to.strip_suffix(')')) {
                    Some(to) => format!("{subject}: the key's section was handed over to another server, which asked first: {to}"),
                    None if holder.starts_with('(') => format!("{subject}: the segment authority gives the key's section to no server yet {holder}"),
                    None => format!("{subject}: another server serves the key's section: {holder}"),
                },
                Some(format!(
                    "The segment authority leases each section to one server at a time; the call asked for it and waited pg_idgen.segment_wait_timeout ({timeout_ms} ms) for it to be handed over."
                )),
                Some("Send the calls of a key to one server (route by key): the holder hands a section over at its next renewal, every third of pg_idgen.seq_lease_ttl."),
            )
        }
        let status = crate::remote::authority();
        if !status.reachable() {
            errors::raise(
                PgSqlErrorCode::ERRCODE_CONNECTION_FAILURE,
                format!("{subject}, and the segment authority (pg_idgen.segment_authority) did not answer in time"),
                Some(format!(
                    "The call waited pg_idgen.segment_wait_timeout ({timeout_ms} ms); the authority did not answer the worker's last call."
                )),
                Some("Calls succeed again as soon as the authority answers; segment_authority_status() and the server log say why it does not."),
            )
        }
    };
    wait::no_numbers_in_time(
        &SECTIONS,
        space,
        authority,
        "The worker raises sections by updating seq_section, which may be locked; the server log says why it could not.",
        "Look for sessions holding locks on seq_section or seq_space (pg_locks), and at the server log.",
    )
}

#[cold]
fn exhausted(space: &[u8], key: Key) -> ! {
    let key = match key {
        Key::Int(key) => format!("key {key}"),
        Key::Text(text) => format!("text key \"{}\"", display(text)),
    };
    errors::raise(
        PgSqlErrorCode::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
        format!("seq_next: reached maximum value of {key} in sequence space \"{}\" ({})", display(space), i64::MAX),
        None,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::split;
    use crate::seq::cache::hash_bytes;

    /// Claim: an unkeyed space's text key never changes (sections persist what keys map to): FNV-1a
    /// 64 of the bytes, then SplitMix64's finaliser. The values were worked out apart from this code
    /// (in Python, from FNV-1a's published basis and prime: FNV-1a 64 of "a" is the published
    /// 0xaf63dc4c8601ec8c), so a change of the hash fails this test.
    #[test]
    fn text_keys_hash_to_fixed_values() {
        assert_eq!(hash_bytes(b"a"), crate::seq::mix::splitmix64(0xaf63_dc4c_8601_ec8c));
        assert_eq!(hash_bytes(b"a"), 198367012849983736_i64 as u64);
        assert_eq!(hash_bytes(b"alice"), -4192475849746331044_i64 as u64);
        assert_eq!(hash_bytes(b""), -780787492076525413_i64 as u64);
    }

    /// Claim: keys map to sections by floor division, so negative keys and bigint's ends have a
    /// section and a place in it like any other, and neighbours share a section.
    #[test]
    fn keys_split_into_sections_by_floor_division() {
        assert_eq!(split(0, 256), (0, 0));
        assert_eq!(split(255, 256), (0, 255));
        assert_eq!(split(256, 256), (1, 0));
        assert_eq!(split(-1, 256), (-1, 255));
        assert_eq!(split(-256, 256), (-1, 0));
        assert_eq!(split(i64::MIN, 256), (i64::MIN / 256, 0));
        assert_eq!(split(i64::MAX, 256), (i64::MAX / 256, 255));
        assert_eq!(split(i64::MAX, 1), (i64::MAX, 0));
        assert_eq!(split(7, 3), (2, 1));
    }
}
