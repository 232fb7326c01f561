//! The sections of per-key sequences as a service of the database worker (`SECTIONS`): which are
//! to be loaded or raised now, raising them in the section table (`SectionSource`), and
//! publishing what was raised.

use std::sync::atomic::Ordering;
use std::time::Instant;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::cache::{self, header, sections, CACHE, DROPPED, LOADING, READY};
use super::spaces::{SECTION_TABLE, SPACE_TABLE};
use super::wanted;
use crate::tables;
use crate::worker::{self, Served, Serving};
use crate::{clock, settings};

/// A take of a section another server holds is tried again after this, for as long as its calls
/// wait (`pg_idgen.segment_wait_timeout`). Why not at once: the worker's answer wakes the waiting
/// call, whose request wakes the worker again, and the tries would follow each other by the
/// millisecond.
const HELD_RETRY_MS: i64 = 100;

/// A raise published less than this after the one before doubles the next (up to
/// `pg_idgen.segment_max_step`): a hot section then waits for the worker less often.
const FAST_RAISE_MS: i64 = 1000;

/// What the worker must do for one section now.
pub struct Need {
    pub index: usize,
    pub version: u64,
    /// The space's row this section was taken for: its id, name and section size all match, or
    /// the space is gone (a row of another definition must not be raised for it).
    pub space_id: u32,
    pub space: Vec<u8>,
    pub section_keys: u32,
    pub section: i64,
    /// How far to raise at least (0: the space's step).
    pub raise: i64,
    /// Whether the section is being loaded (its keys start at the maximum found) or raised.
    pub load: bool,
    /// The generation of the section's lease from the authority (0: none, or to be taken).
    pub generation: i64,
    /// The section's `limit`: the authority's `max_seq` must be at least this.
    pub limit: i64,
}

/// A section's lease from the segment authority, as a raise renewed or took it.
#[derive(Clone, Copy, Debug)]
pub struct Leased {
    pub generation: i64,
    /// When it ends on this server (monotonic ms): the lease's length after the call was sent.
    pub until_ms: i64,
}

/// What the source did for a section.
pub enum Outcome {
    /// The section's `max_seq` moved from the first to the second value, committed and flushed
    /// (under the lease, if the section is leased from the authority).
    Raised(i64, i64, Option<Leased>),
    /// Another server holds the section's lease (its name): the raise is retried, as a failed one.
    Held(String),
    /// The section's lease is another server's now: it is retired here, its numbers given up.
    Lost,
    /// The space is gone (dropped, or created anew with another id).
    NoSpace,
    /// The raise failed (a lock, …); the message is for the log.
    Failed(String),
    /// Not tried: the worker is stopping, or the round ran long (it is tried in the next round).
    Skipped,
}

/// Where a section's maximum comes from: the section table of this database (`LocalSections`), or
/// a lease of the section from the segment authority (`leased`: seqsvr's AllocSvr, one server
/// serves a section at a time).
pub trait SectionSource {
    /// Raises each section's persisted maximum by at least `need.raise`, one outcome per need;
    /// every new maximum must be durable before this returns.
    fn raise(&mut self, needs: &[Need]) -> Vec<Outcome>;
}

/// The section table of this database, in the worker's own session: the raises of one round are
/// one transaction (each in a subtransaction of its own, so that a locked row fails alone),
/// committed and flushed before any is published. Why together: a load is one durable write,
/// and a commit's flush costs more than the rest of it.
pub struct LocalSections;

/// Raises per transaction at most: each is a subtransaction with its own transaction id, and past
/// 64 a backend's cache of them overflows, which slows every snapshot of the server.
const RAISES_PER_TRANSACTION: usize = 64;
/// After this long in a transaction the rest of its raises wait for the next turn: each locked
/// row may cost `lock_timeout`, and a worker told to stop must not take a batch's worth of them.
const TRANSACTION_BUDGET: std::time::Duration = std::time::Duration::from_secs(1);

impl SectionSource for LocalSections {
    fn raise(&mut self, needs: &[Need]) -> Vec<Outcome> {
        let outcomes = worker::in_worker_transaction(|| raise_all(needs), |message| needs.iter().map(|_| Outcome::Failed(message.clone())).collect());
        if outcomes.iter().any(|outcome| matches!(outcome, Outcome::Raised(..))) {
            worker::flush_last_commit();
        }
        outcomes
    }
}

/// Raises each section in a subtransaction of the caller's transaction.
fn raise_all(needs: &[Need]) -> Vec<Outcome> {
    let (Some(spaces), Some(sections)) = (tables::extension_table_oid(SPACE_TABLE), tables::extension_table_oid(SECTION_TABLE)) else {
        return needs.iter().map(|_| Outcome::NoSpace).collect(); // the extension is gone from this database
    };
    let started = std::time::Instant::now();
    needs
        .iter()
        .map(|need| {
            if worker::told_to_stop() || started.elapsed() > TRANSACTION_BUDGET {
                return Outcome::Skipped;
            }
            in_subtransaction(|| raise_row(spaces, sections, need)).unwrap_or_else(Outcome::Failed)
        })
        .collect()
}

/// Runs `f` in a subtransaction: an error in it (a locked row), or an `Err` it returns (a raise it
/// found wrong), is rolled back alone and comes back as its message; the transaction goes on.
fn in_subtransaction<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    // SAFETY: in a transaction; the subtransaction is released or rolled back below, and the
    // memory context and resource owner put back, as PL/pgSQL does around an exception block.
    unsafe {
        let (context, owner) = (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner);
        // Why assert: what `f` leaves behind after an error is rolled back with the subtransaction.
        let f = std::panic::AssertUnwindSafe(f);
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        let restore = move || {
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::CurrentResourceOwner = owner;
        };
        PgTryBuilder::new(|| {
            let result = f();
            if result.is_ok() {
                pg_sys::ReleaseCurrentSubTransaction();
            } else {
                pg_sys::RollbackAndReleaseCurrentSubTransaction();
            }
            restore();
            result
        })
        .catch_others(|error| {
            restore();
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            restore();
            Err(worker::caught_message(&error))
        })
        .execute()
    }
}

/// Raises the section's row (inserting it at the first raise) in the caller's transaction.
pub(super) fn raise_row(spaces: pg_sys::Oid, sections: pg_sys::Oid, need: &Need) -> Result<Outcome, String> {
    // Every object qualified; the space is locked against a drop (KEY SHARE), the row against
    // anyone else (NOWAIT: the worker serves other sections meanwhile); clamped at bigint's end.
    const RAISE: &str = "UPDATE ONLY {sections} AS t
            SET max_seq = t.max_seq OPERATOR(pg_catalog.+) r.len, updated_at = pg_catalog.now()
           FROM (SELECT s.space, s.section, s.max_seq AS old_max,
                        LEAST(GREATEST($3, p.step::pg_catalog.int8),
                              9223372036854775807::pg_catalog.int8 OPERATOR(pg_catalog.-) s.max_seq) AS len
                   FROM ONLY {sections} AS s, ONLY {spaces} AS p
                  WHERE p.id OPERATOR(pg_catalog.=) $1 AND p.space OPERATOR(pg_catalog.=) $4
                    AND p.section_keys OPERATOR(pg_catalog.=) $5 AND s.space OPERATOR(pg_catalog.=) p.space
                    AND s.section OPERATOR(pg_catalog.=) $2
                    FOR UPDATE OF s NOWAIT FOR KEY SHARE OF p NOWAIT) AS r
          WHERE t.space OPERATOR(pg_catalog.=) r.space AND t.section OPERATOR(pg_catalog.=) r.section
      RETURNING r.old_max, t.max_seq";
    const INSERT: &str = "INSERT INTO {sections} AS t (space, section, max_seq)
         SELECT p.space, $2, GREATEST($3, p.step::pg_catalog.int8)
           FROM ONLY {spaces} AS p
          WHERE p.id OPERATOR(pg_catalog.=) $1 AND p.space OPERATOR(pg_catalog.=) $4
            AND p.section_keys OPERATOR(pg_catalog.=) $5
            FOR KEY SHARE NOWAIT
         ON CONFLICT DO NOTHING
      RETURNING 0::pg_catalog.int8, t.max_seq";
    let tables = [("{sections}", sections), ("{spaces}", spaces)];
    let args =
        || [(need.space_id as i32).into(), need.section.into(), need.raise.into(), tables::text_arg(&need.space), (need.section_keys as i32).into()];
    let run = |statement: &str| {
        tables::run_on_tables(&tables, tables::Run::Allocation, statement, |sql| {
            worker::as_allocation(|| Spi::get_two_with_args::<i64, i64>(sql, &args()))
        })
    };
    let checked = |row: Result<(Option<i64>, Option<i64>), pgrx::spi::SpiError>| {
        match row {
            // Why check: a trigger could have changed the new max_seq under the statement.
            Ok((Some(old), Some(new))) if (new > old || old == i64::MAX) && new > 0 => Some(Ok(Outcome::Raised(old, new, None))),
            Ok((Some(_), Some(_))) => Some(Err("the section's new max_seq is not above its old one: something changed it under the raise".into())),
            _ => None,
        }
    };
    if let Some(outcome) = checked(run(RAISE)?) {
        return outcome;
    }
    if let Some(outcome) = checked(run(INSERT)?) {
        return outcome;
    }
    // No row raised and none inserted: the space is gone, or a row appeared meanwhile.
    let space_exists = tables::run_on_tables(
        &tables,
        tables::Run::Allocation,
        "SELECT true FROM ONLY {spaces} AS p
          WHERE p.id OPERATOR(pg_catalog.=) $1 AND p.space OPERATOR(pg_catalog.=) $4 AND p.section_keys OPERATOR(pg_catalog.=) $5",
        |sql| Spi::get_one_with_args::<bool>(sql, &args()),
    )?;
    match space_exists {
        Ok(Some(true)) => Err("the section's row appeared during the raise; trying again".into()),
        _ => Ok(Outcome::NoSpace),
    }
}

/// Sections of `database` to load or raise now, not in a backoff: of the sections `wanted` marks,
/// not of the whole cache. The request stays set until the publish (which looks whether a key is
/// already past the new prefetch point): cleared here, calls past the old point would ask again
/// before the publish, and each prefetch would cost two raises. The mark is cleared here, before
/// `want_raise` is read: a request made after the read marks the section again.
pub fn needs(database: pg_sys::Oid) -> Vec<Need> {
    let now_ms = clock::monotonic_millis();
    let max_step = settings::config().segments.max_step as i64;
    let _lock = CACHE.shared();
    let all = sections();
    let mut needs = Vec::new();
    for index in wanted::marked() {
        let section = &all[index];
        let state = section.state.load(Ordering::Acquire);
        if !matches!(state, LOADING | READY) {
            // Free or dropped: nothing to raise (a take marks it again).
            wanted::clear(index);
            continue;
        }
        if section.database.load(Ordering::Acquire) != database.to_u32() || section.backoff.pausing(now_ms) {
            continue; // another database's worker's, or later
        }
        wanted::clear(index);
        if !section.want_raise.load(Ordering::Acquire) {
            continue;
        }
        let previous = section.raise.load(Ordering::Relaxed);
        let fast = previous > 0 && now_ms - section.raised_at_ms.load(Ordering::Relaxed) < FAST_RAISE_MS;
        needs.push(Need {
            index,
            version: section.version.read(),
            space_id: section.space_id.load(Ordering::Relaxed),
            space: section.space(),
            section_keys: section.section_keys.load(Ordering::Relaxed),
            section: section.section.load(Ordering::Relaxed),
            raise: if fast { previous.saturating_mul(2).min(max_step) } else { 0 },
            load: state == LOADING,
            generation: i64::from(section.lease_generation.load(Ordering::Relaxed)),
            limit: section.limit.load(Ordering::Relaxed),
        });
    }
    needs
}

/// Publishes what the source did for a section, unless the section changed meanwhile (then the
/// raise is a gap). A failure sets the section's backoff and says whether to log it (at most
/// every 10 s a section).
pub fn publish(need: &Need, outcome: &Outcome) -> bool {
    let section = &sections()[need.index];
    let now_ms = clock::monotonic_millis();
    let _lock = CACHE.exclusive();
    if section.version.read() != need.version {
        return false;
    }
    match *outcome {
        Outcome::Raised(old, new, lease) => {
            if let Some(lease) = lease {
                super::lease_state::forget_holder(need.index);
                section.lease_generation.store(lease.generation as u32, Ordering::Relaxed);
                section.lease_until_ms.fetch_max(lease.until_ms, Ordering::AcqRel);
            }
            let step = new - old;
            let raise_at = new - step / 2;
            // A raise that found the maximum above this section's limit: someone else raised the
            // row meanwhile (the segment authority's own cache beside servers that lease the
            // section, a raise committed whose answer was lost) and may be handing those numbers
            // out: the keys start above them, as after a load.
            if need.load || old > section.limit.load(Ordering::Acquire) {
                // The keys start at the maximum persisted before this raise: every number handed
                // out for them before (another life of the cache, before a crash, another
                // server) is at most that.
                section.change(|| {
                    for key in section.keys() {
                        key.store(old, Ordering::Relaxed);
                    }
                    section.base.store(old, Ordering::Relaxed);
                    section.limit.store(new, Ordering::Release);
                    section.set_raise_at(raise_at);
                    cache::set_state(section, READY);
                });
                header().loads.fetch_add(1, Ordering::Relaxed);
            } else {
                section.limit.fetch_max(new, Ordering::AcqRel);
                section.set_raise_at(raise_at);
                header().raises.fetch_add(1, Ordering::Relaxed);
            }
            section.raise.store(step, Ordering::Relaxed);
            section.raised_at_ms.store(now_ms, Ordering::Relaxed);
            section.backoff.succeeded();
            // The request is answered, unless a key is already past the new prefetch point (a call
            // that took its number meanwhile, or waits). Cleared first: a call past the point after
            // this look finds it clear and asks itself.
            section.want_raise.store(false, Ordering::Release);
            if section.keys().any(|key| key.load(Ordering::Acquire) > raise_at) {
                section.want_raise.store(true, Ordering::Release);
                wanted::mark(need.index);
            }
            false
        }
        Outcome::NoSpace => {
            section.change(|| cache::set_state(section, DROPPED));
            false
        }
        Outcome::Failed(_) => {
            section.want_raise.store(true, Ordering::Release);
            wanted::mark(need.index);
            section.backoff.failed(now_ms)
        }
        Outcome::Held(ref holder) => {
            // A short pause: the holder hands the section over at its next renewal (every third of
            // its lease), and the asker must be back for it soon.
            super::lease_state::record_holder(need.index, holder);
            // Asked for longer than a call waits (taken when first asked: `raised_at_ms` of a
            // section being loaded), its calls have given up: the section goes, and so do the asks
            // that would take it from the server its keys are routed to.
            if now_ms - section.raised_at_ms.load(Ordering::Relaxed) > settings::config().segments.wait_timeout_ms as i64 {
                cache::retire_section(need.index);
                return false;
            }
            section.want_raise.store(true, Ordering::Release);
            wanted::mark(need.index);
            section.backoff.failed(now_ms);
            section.backoff.retry_at(now_ms + HELD_RETRY_MS);
            false
        }
        Outcome::Lost => {
            cache::retire_section(need.index);
            false
        }
        Outcome::Skipped => {
            section.want_raise.store(true, Ordering::Release);
            wanted::mark(need.index);
            false
        }
    }
}

/// Moves the use clock on, at most once a second (takes move it too). Why not every round: a call
/// records its use of a section once for each value of the clock (a write to the section's first
/// line, apart from the key's), and a busy worker's rounds follow each other within milliseconds.
fn tick_use_clock() {
    std::thread_local! {
        static TICKED_AT_MS: std::cell::Cell<i64> = const { std::cell::Cell::new(i64::MIN) };
    }
    let now_ms = clock::monotonic_millis();
    if now_ms.saturating_sub(TICKED_AT_MS.get()) >= 1000 {
        TICKED_AT_MS.set(now_ms);
        header().use_clock.fetch_add(1, Ordering::Relaxed);
    }
}

impl Serving for LocalSections {
    fn serve(&mut self, database: pg_sys::Oid, until: Instant) -> Served {
        serve_from(self, database, until)
    }
}

/// Loads and raises what the database's sections want from `source`, in batches of up to
/// `RAISES_PER_TRANSACTION` raises, and wakes the waiting calls after each.
pub(super) fn serve_from(source: &mut dyn SectionSource, database: pg_sys::Oid, until: Instant) -> Served {
    tick_use_clock();
    let mut served = Served::default();
    for (i, batch) in needs(database).chunks(RAISES_PER_TRANSACTION).enumerate() {
        // Skipped, a batch is marked as wanted again, for the next turn.
        let skip = worker::told_to_stop() || (i > 0 && Instant::now() >= until);
        served.more |= skip;
        let outcomes = if skip { batch.iter().map(|_| Outcome::Skipped).collect() } else { source.raise(batch) };
        for (need, outcome) in batch.iter().zip(&outcomes) {
            served.more |= matches!(outcome, Outcome::Skipped);
            if publish(need, outcome) {
                if let Outcome::Failed(message) = outcome {
                    let failures = sections()[need.index].backoff.failures();
                    warning!(
                            "pg_idgen worker: could not raise section {} of sequence space \"{}\": {message} ({failures} attempts failed in a row; retrying)",
                            need.section,
                            tables::display(&need.space)
                        );
                }
            }
        }
        worker::notify_published();
    }
    let _lock = CACHE.shared();
    let all = sections();
    served.wanted = wanted::marked().into_iter().map(|index| &all[index]).any(|s| {
        s.database.load(Ordering::Acquire) == database.to_u32()
            && matches!(s.state.load(Ordering::Acquire), LOADING | READY)
            && s.want_raise.load(Ordering::Acquire)
            && !s.backoff.failing()
    });
    served
}
