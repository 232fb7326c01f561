//! At the segment authority: what servers that number per-key sequences from it call over libpq
//! (seqsvr's StoreSvr). The spaces and each section's `max_seq` are the authority's own tables;
//! `seq_section_lease` says which server serves each section now.
//!
//! ## The rules
//!
//! - A section's numbers come only from its holder, under a lease (holder, generation, expiry).
//!   A raise is accepted only from the holder with the lease's current generation (the fencing
//!   token), committed with `synchronous_commit = on` before it is answered, so a server that lost
//!   the section can raise nothing more.
//! - A server that takes a section starts its keys at the section's `max_seq` (raised once more
//!   for it): every number the earlier holders served is at most that, since they served only below
//!   maxima raised here. So no number repeats, whatever the clocks say.
//! - A section held by a live server goes to another only once the lease ended and its margin
//!   passed on the authority's clock; the holder stops serving at its own deadline, the lease's
//!   length after it sent the renewal, earlier (the order of numbers across servers).
//! - The authority may go back (restored from a copy, failed over to a standby that lagged): its
//!   rows are then older than what holders served. Every request of a holder carries its limit of
//!   the section (renewals, raises and releases alike, answered or refused), and `max_seq` is
//!   raised to it first (a live holder repairs what went back); after its server's start, a new
//!   WAL timeline or a copy of its database (`store_state`), for the longest lease and margin it
//!   gave, the authority gives no section to a server that does not hold it, so that live holders
//!   are heard first. Not covered (docs/many-servers.md): a section whose holder died (or
//!   restarted, or was cut off for the whole wait) before such a request, and a wall clock stepped
//!   forward during the wait.

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::raise::{raise_row, Need, Outcome};
use super::spaces::{LEASE_TABLE, SECRET_TABLE, SECTION_TABLE, SPACE, SPACE_TABLE, STORE_STATE_TABLE};
use super::store_state::{self, Wait};
use crate::tables::{self, TextBytes, TextOut};
use crate::{authority_call, errors, settings};

/// What a request for one section asks (`raises[i]`): a raise of at least this many numbers (0:
/// the space's step), with the section taken first if `generations[i]` is 0; or only a renewal, or
/// a release.
pub const RENEW: i64 = -1;
pub const RELEASE: i64 = -2;

/// How long after its last ask a section handed over stays promised to the server that asked.
const PROMISE_MS: i32 = 1000;

/// The holder of a stand-in lease, for a section whose lease row was lost.
const LOST_ROW: &str = "(none: the section's lease row was lost, and its holder may still serve it for a lease)";

/// The most sections one call may name.
const MAX_REQUESTS: usize = 10_000;

#[allow(clippy::type_complexity)]
#[pg_extern(volatile, security_definer)]
#[search_path(pg_catalog, pg_temp)]
/// At the segment authority: the spaces of per-key sequences, with each keyed space's secret, for
/// the servers that serve them (called over libpq by their pg_idgen worker).
fn pg_idgen_seq_spaces() -> TableIterator<
    'static,
    (
        name!(space, TextOut),
        name!(id, i32),
        name!(step, i32),
        name!(section_keys, i32),
        name!(text_key_hash, TextOut),
        name!(secret, Option<Vec<u8>>),
    ),
> {
    let (Some(spaces), Some(secrets)) = (tables::extension_table_oid(SPACE_TABLE), tables::extension_table_oid(SECRET_TABLE)) else {
        errors::raise(PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE, "pg_idgen's sequence tables do not exist at the authority".into(), None, None)
    };
    const SPACES: &str = "SELECT pg_catalog.textsend(p.space), p.id, p.step, p.section_keys, pg_catalog.textsend(p.text_key_hash), k.secret
           FROM ONLY {spaces} AS p LEFT JOIN ONLY {secrets} AS k ON k.space OPERATOR(pg_catalog.=) p.space";
    let rows = tables::run_on_tables(&[("{spaces}", spaces), ("{secrets}", secrets)], tables::Run::Allocation, SPACES, |sql| {
        Spi::connect(|client| {
            let mut rows = Vec::new();
            for row in client.select(sql, None, &[])? {
                let bytes = |i: usize| row.get::<Vec<u8>>(i).map(Option::unwrap_or_default);
                let int = |i: usize| row.get::<i32>(i).map(Option::unwrap_or_default);
                rows.push((TextOut(bytes(1)?), int(2)?, int(3)?, int(4)?, TextOut(bytes(5)?), row.get::<Vec<u8>>(6)?));
            }
            Ok::<_, pgrx::spi::SpiError>(rows)
        })
    });
    match rows {
        Ok(Ok(rows)) => TableIterator::new(rows),
        Ok(Err(error)) => errors::raise(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, error.to_string(), None, None),
        Err(message) => errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, None, None),
    }
}

/// How a request relates to the lease the authority has for its section.
enum Lease {
    None,
    /// Held by the caller's server start, with this generation; whether another server asked for it.
    ThisStart(i64, bool),
    /// Held by an earlier start of the caller's server whose lease and margin have passed. (One
    /// whose lease runs is held, as another server's: a copy of a server, run beside it, has its
    /// name.)
    EarlierStart(i64),
    /// Held by another server whose lease and margin have passed.
    Lapsed(i64),
    /// Held by another server (its name).
    Held(String),
    /// Handed over by its holder to another server that asked (its name), which may take it first.
    Promised(String),
}

#[allow(clippy::too_many_arguments, clippy::type_complexity)]
#[pg_extern(volatile, security_definer)]
#[search_path(pg_catalog, pg_temp)]
/// At the segment authority: takes, raises, renews and releases sections of one space for a
/// server (`holder`, this start of it: `holder_start`), one row per request. Called over libpq by
/// that server's pg_idgen worker, as a statement of its own: what it answers is the caller's once
/// that statement committed.
fn pg_idgen_seq_sections(
    holder: &str,
    holder_start: &str,
    ttl_ms: i32,
    margin_ms: i32,
    space: TextBytes,
    space_id: i32,
    section_keys: i32,
    sections: Vec<i64>,
    generations: Vec<i64>,
    raises: Vec<i64>,
    limits: Vec<i64>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(section, i64),
        name!(outcome, String),
        name!(generation, i64),
        name!(old_max, Option<i64>),
        name!(new_max, Option<i64>),
        name!(held_by, Option<String>),
    ),
> {
    SPACE.check(space.0);
    authority_call::refuse_unless_committed_alone(fcinfo, c"pg_idgen_seq_sections()", "pg_idgen_seq_sections($1, …)", "a section's raise");
    let n = sections.len();
    if generations.len() != n || raises.len() != n || limits.len() != n || n > MAX_REQUESTS || holder.is_empty() || holder_start.is_empty() {
        errors::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid requests for sections of sequence space \"{}\"", tables::display(space.0)),
            Some(format!(
                "Sections, generations, raises and limits are arrays of one length, at most {MAX_REQUESTS}; holder and holder_start are not empty."
            )),
            None,
        );
    }
    let own = &settings::config().segments;
    // Why refused: the wait after the authority's start or reset is the longest lease and margin
    // it gave, and must cover every lease.
    let too_long = (ttl_ms < 0 || margin_ms < 0 || ttl_ms as u64 > own.seq_lease_ttl_ms || margin_ms as u64 > own.seq_lease_margin_ms)
        .then(|| format!("a section lease of {ttl_ms} ms with a margin of {margin_ms} ms is longer than the authority's"));
    if let Some(message) = &too_long {
        // A holder's requests are still heard for their limits (below): a standby promoted with
        // shorter settings is repaired all the same. A call that only takes is refused.
        if generations.iter().zip(&raises).all(|(&generation, &raise)| generation <= 0 && raise != RELEASE) {
            errors::raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                message.clone(),
                Some(format!(
                    "The authority's pg_idgen.seq_lease_ttl is {} ms and pg_idgen.seq_lease_margin {} ms.",
                    own.seq_lease_ttl_ms, own.seq_lease_margin_ms
                )),
                Some("Set pg_idgen.seq_lease_ttl and pg_idgen.seq_lease_margin on the authority at least as long as on every server."),
            );
        }
    }
    // Durable before it is answered, whatever the session (or a pooler between) says; a lease row
    // another server is changing is waited for, briefly.
    authority_call::set_parameter(c"synchronous_commit", c"on", pg_sys::GucAction::GUC_ACTION_LOCAL);
    authority_call::set_parameter(c"lock_timeout", c"1000", pg_sys::GucAction::GUC_ACTION_LOCAL);
    let (Some(spaces), Some(section_table), Some(leases)) =
        (tables::extension_table_oid(SPACE_TABLE), tables::extension_table_oid(SECTION_TABLE), tables::extension_table_oid(LEASE_TABLE))
    else {
        errors::raise(PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE, "pg_idgen's sequence tables do not exist at the authority".into(), None, None)
    };
    // Its rows may be older than what holders served (a start, a failover): only they can say.
    let wait = store_state::wait(tables::extension_table_oid(STORE_STATE_TABLE), (own.seq_lease_ttl_ms + own.seq_lease_margin_ms) as i64);
    let store = Store {
        holder,
        holder_start,
        ttl_ms,
        margin_ms,
        longest_ms: wait.longest_ms,
        wait,
        too_long,
        space: space.0,
        space_id,
        section_keys,
        spaces,
        sections: section_table,
        leases,
    };
    let space_here = store.space_is_here();
    let answers: Vec<_> = (0..n).map(|i| store.answer(sections[i], generations[i], raises[i], limits[i], space_here)).collect();
    TableIterator::new(answers)
}

/// One call's requests: who asks, for which space, and the tables.
struct Store<'a> {
    holder: &'a str,
    holder_start: &'a str,
    ttl_ms: i32,
    margin_ms: i32,
    /// The longest lease and margin this authority gave (its own settings, or longer ones before).
    longest_ms: i64,
    /// Its wait after a start or reset.
    wait: Wait,
    /// Why the caller's lease is refused: longer than the authority's.
    too_long: Option<String>,
    space: &'a [u8],
    space_id: i32,
    section_keys: i32,
    spaces: pg_sys::Oid,
    sections: pg_sys::Oid,
    leases: pg_sys::Oid,
}

impl Store<'_> {
    /// Runs a statement on the tables.
    fn run<T>(&self, statement: &str, run: impl FnOnce(&str) -> Result<T, pgrx::spi::SpiError>) -> T {
        store_state::run_at_authority(&[("{leases}", self.leases), ("{sections}", self.sections), ("{spaces}", self.spaces)], statement, run)
    }

    /// The section's lease, locked until the end of the call (also a section never leased: two
    /// servers taking it at once are served one after the other).
    fn lease(&self, section: i64) -> Lease {
        self.run("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended($1, $2))", |sql| {
            Spi::run_with_args(sql, &[tables::text_arg(self.space), section.into()])
        });
        // Promised: given up for another server that asked, which may take it first while it keeps
        // asking (its worker asks every 100 ms while a call waits).
        const LEASE: &str = "SELECT l.generation,
                    CASE WHEN l.reusable_at OPERATOR(pg_catalog.<=) pg_catalog.now() AND l.wanted_by OPERATOR(pg_catalog.<>) $3
                              AND l.wanted_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-)
                                  pg_catalog.make_interval(secs => $5::pg_catalog.float8 OPERATOR(pg_catalog./) 1000)) THEN 'promised'
                         WHEN l.holder OPERATOR(pg_catalog.=) $3 AND l.holder_start OPERATOR(pg_catalog.=) $4
                              AND l.wanted_by IS NOT NULL THEN 'this start, wanted'
                         WHEN l.holder OPERATOR(pg_catalog.=) $3 AND l.holder_start OPERATOR(pg_catalog.=) $4 THEN 'this start'
                         WHEN l.holder OPERATOR(pg_catalog.=) $3 AND l.reusable_at OPERATOR(pg_catalog.<=) pg_catalog.now() THEN 'earlier start'
                         WHEN l.reusable_at OPERATOR(pg_catalog.<=) pg_catalog.now() THEN 'lapsed'
                         ELSE 'held' END,
                    CASE WHEN l.reusable_at OPERATOR(pg_catalog.<=) pg_catalog.now() AND l.wanted_by IS NOT NULL
                         THEN l.wanted_by ELSE l.holder END
               FROM ONLY {leases} AS l
              WHERE l.space OPERATOR(pg_catalog.=) $1 AND l.section OPERATOR(pg_catalog.=) $2
                FOR UPDATE";
        let row = self.run(LEASE, |sql| {
            // Why update(): a row lock is a write; select() would run it read-only (no xid yet).
            Spi::connect_mut(|client| {
                let args = [tables::text_arg(self.space), section.into(), self.holder.into(), self.holder_start.into(), PROMISE_MS.into()];
                let table = client.update(sql, Some(1), &args)?;
                if table.is_empty() {
                    return Ok((None, None, None)); // never leased (or its row went)
                }
                table.first().get_three::<i64, String, String>()
            })
        });
        match row {
            (Some(generation), Some(relation), holder) => match relation.as_str() {
                "this start" => Lease::ThisStart(generation, false),
                "this start, wanted" => Lease::ThisStart(generation, true),
                "earlier start" => Lease::EarlierStart(generation),
                "lapsed" => Lease::Lapsed(generation),
                "promised" => Lease::Promised(holder.unwrap_or_default()),
                _ => Lease::Held(holder.unwrap_or_default()),
            },
            _ => Lease::None,
        }
    }

    /// Writes the caller's lease of the section with `generation`, from now for its length.
    fn write_lease(&self, section: i64, generation: i64) {
        const WRITE: &str = "INSERT INTO {leases} AS l (space, section, holder, holder_start, generation, expires_at, reusable_at)
             VALUES ($1, $2, $3, $4, $5,
                     pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $6::pg_catalog.float8 OPERATOR(pg_catalog./) 1000),
                     pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => ($6 OPERATOR(pg_catalog.+) $7)::pg_catalog.float8 OPERATOR(pg_catalog./) 1000))
             ON CONFLICT (space, section) DO UPDATE
                SET holder = EXCLUDED.holder, holder_start = EXCLUDED.holder_start, generation = EXCLUDED.generation,
                    expires_at = EXCLUDED.expires_at, reusable_at = EXCLUDED.reusable_at,
                    -- A renewal keeps another server's request, a take answers it.
                    wanted_by = CASE WHEN l.generation OPERATOR(pg_catalog.=) EXCLUDED.generation THEN l.wanted_by END,
                    wanted_at = CASE WHEN l.generation OPERATOR(pg_catalog.=) EXCLUDED.generation THEN l.wanted_at END";
        self.run(WRITE, |sql| {
            Spi::run_with_args(
                sql,
                &[
                    tables::text_arg(self.space),
                    section.into(),
                    self.holder.into(),
                    self.holder_start.into(),
                    generation.into(),
                    self.ttl_ms.into(),
                    self.margin_ms.into(),
                ],
            )
        });
    }

    /// Raises `max_seq` to at least the holder's limit: the authority went back, and the holder
    /// may have served up to its limit.
    fn repair(&self, section: i64, limit: i64) {
        const REPAIR: &str = "INSERT INTO {sections} AS t (space, section, max_seq)
             SELECT p.space, $2, $3 FROM ONLY {spaces} AS p
              WHERE p.id OPERATOR(pg_catalog.=) $4 AND p.space OPERATOR(pg_catalog.=) $1 AND p.section_keys OPERATOR(pg_catalog.=) $5
             ON CONFLICT (space, section) DO UPDATE SET max_seq = EXCLUDED.max_seq, updated_at = pg_catalog.now()
              WHERE t.max_seq OPERATOR(pg_catalog.<) EXCLUDED.max_seq";
        if limit > 0 {
            self.run(REPAIR, |sql| {
                Spi::run_with_args(sql, &[tables::text_arg(self.space), section.into(), limit.into(), self.space_id.into(), self.section_keys.into()])
            });
        }
    }

    /// Raises the section's `max_seq` (a load when `load`): the old and new maximum, or None when
    /// the space is not the caller's.
    fn raise(&self, section: i64, raise: i64, load: bool) -> Option<(i64, i64)> {
        let need = Need {
            index: 0,
            version: 0,
            space_id: self.space_id as u32,
            space: self.space.to_vec(),
            section_keys: self.section_keys as u32,
            section,
            raise,
            load,
            generation: 0,
            limit: 0,
        };
        match raise_row(self.spaces, self.sections, &need) {
            Ok(Outcome::Raised(old, new, _)) => Some((old, new)),
            Ok(_) => None,
            Err(message) => errors::raise(PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE, message, None, None),
        }
    }

    /// Whether the space the caller serves (its name, id and section size) is this authority's:
    /// locked against a drop (KEY SHARE) until the call ends.
    fn space_is_here(&self) -> bool {
        const SPACE: &str = "SELECT true FROM ONLY {spaces} AS p
          WHERE p.id OPERATOR(pg_catalog.=) $1 AND p.space OPERATOR(pg_catalog.=) $2 AND p.section_keys OPERATOR(pg_catalog.=) $3
            FOR KEY SHARE";
        self.run(SPACE, |sql| {
            Spi::connect_mut(|client| {
                let args = [self.space_id.into(), tables::text_arg(self.space), self.section_keys.into()];
                Ok(!client.update(sql, Some(1), &args)?.is_empty())
            })
        })
    }

    /// The answer to one request.
    fn answer(
        &self,
        section: i64,
        generation: i64,
        raise: i64,
        limit: i64,
        space_here: bool,
    ) -> (i64, String, i64, Option<i64>, Option<i64>, Option<String>) {
        let answer = |outcome: &str, generation: i64, raised: Option<(i64, i64)>, held_by: Option<String>| {
            (section, outcome.to_string(), generation, raised.map(|r| r.0), raised.map(|r| r.1), held_by)
        };
        let (wait, starting) = (&self.wait, self.wait.on);
        let lease = self.lease(section);
        // First, whatever the answer: a holder may have served up to its limit, and if this
        // authority went back (restored, failed over) its max_seq is below that. Raising it is
        // always safe.
        if generation > 0 || raise == RELEASE {
            self.repair(section, limit);
        }
        if !space_here {
            // Dropped (or made anew with another id or size): no lease, no number of it.
            return answer("nospace", generation, None, None);
        }
        if let Some(message) = &self.too_long {
            // Repaired, but no lease longer than the authority's: the holder stops serving it.
            return match generation > 0 || raise == RELEASE {
                true => answer("lost", generation, None, None),
                false => answer("held", 0, None, Some(format!("(none: {message})"))),
            };
        }
        if raise == RELEASE {
            return match lease {
                Lease::ThisStart(held, _) if held == generation => {
                    self.write_lease_ended(section);
                    answer("released", generation, None, None)
                }
                _ => answer("lost", generation, None, None),
            };
        }
        if generation > 0 {
            // The caller serves the section: it keeps it if the lease is its own, or if the row is
            // older than the lease it holds (the authority went back; its renewal restores it).
            let keeps = match lease {
                Lease::ThisStart(held, _) => held <= generation,
                Lease::None => true,
                Lease::EarlierStart(_) | Lease::Lapsed(_) | Lease::Held(_) | Lease::Promised(_) => false,
            };
            if !keeps {
                return answer("lost", generation, None, None);
            }
            if raise == RENEW {
                self.write_lease(section, generation);
                // Another server asked for it: the holder gives it up (retired there first).
                // Not in the wait after a start: nobody could take it then.
                let wanted = matches!(lease, Lease::ThisStart(_, true)) && !starting;
                return answer(if wanted { "wanted" } else { "renewed" }, generation, None, None);
            }
            return match self.raise(section, raise, false) {
                Some(raised) => {
                    self.write_lease(section, generation);
                    answer("raised", generation, Some(raised), None)
                }
                None => answer("nospace", generation, None, None),
            };
        }
        let last = match lease {
            Lease::Held(holder) => {
                if !starting {
                    self.ask_holder(section);
                }
                return answer("held", 0, None, Some(holder));
            }
            Lease::Promised(to) => return answer("held", 0, None, Some(format!("(handed over to {to})"))),
            // A row that may be older than the truth: its holder may still be serving (also a row
            // that names the caller: its cache may no longer hold the section, which another server
            // may have taken and served since the copy this authority was restored from).
            _ if starting => {
                let why = format!("(none: the authority gives no section out until {}: {})", wait.ends_at, wait.why);
                return answer("held", 0, None, Some(why));
            }
            // A section served before, whose lease row is gone (deleted, the table emptied): its
            // holder may still be serving it. A stand-in lease keeps it for the longest lease and
            // margin; the holder's next renewal finds it lost.
            Lease::None if self.was_served(section) => {
                self.write_stand_in(section);
                return answer("held", 0, None, Some(LOST_ROW.into()));
            }
            Lease::None => 0,
            Lease::ThisStart(last, _) | Lease::EarlierStart(last) | Lease::Lapsed(last) => last,
        };
        match self.raise(section, raise, true) {
            Some(raised) => {
                let generation = last.saturating_add(1);
                self.write_lease(section, generation);
                answer("taken", generation, Some(raised), None)
            }
            None => answer("nospace", 0, None, None),
        }
    }

    /// Whether the section has a maximum here: it was served before.
    fn was_served(&self, section: i64) -> bool {
        const SERVED: &str = "SELECT true FROM ONLY {sections} AS s WHERE s.space OPERATOR(pg_catalog.=) $1 AND s.section OPERATOR(pg_catalog.=) $2";
        self.run(SERVED, |sql| Spi::connect(|client| Ok(!client.select(sql, Some(1), &[tables::text_arg(self.space), section.into()])?.is_empty())))
    }

    /// A lease held by nobody for the longest lease and margin: what a lost row of a live holder
    /// may have promised it.
    fn write_stand_in(&self, section: i64) {
        const STAND_IN: &str = "INSERT INTO {leases} (space, section, holder, holder_start, generation, expires_at, reusable_at)
             VALUES ($1, $2, $3, '', 1, pg_catalog.now(),
                     pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $4::pg_catalog.float8 OPERATOR(pg_catalog./) 1000))
             ON CONFLICT (space, section) DO NOTHING";
        self.run(STAND_IN, |sql| Spi::run_with_args(sql, &[tables::text_arg(self.space), section.into(), LOST_ROW.into(), self.longest_ms.into()]));
    }

    /// Records that a server asked for the section another holds: its holder learns it at its next
    /// renewal, stops serving the section and releases it.
    fn ask_holder(&self, section: i64) {
        const ASK: &str = "UPDATE ONLY {leases} SET wanted_by = $3, wanted_at = pg_catalog.now()
          WHERE space OPERATOR(pg_catalog.=) $1 AND section OPERATOR(pg_catalog.=) $2";
        self.run(ASK, |sql| Spi::run_with_args(sql, &[tables::text_arg(self.space), section.into(), self.holder.into()]));
    }

    /// Ends the caller's lease now: another server may take the section at once.
    fn write_lease_ended(&self, section: i64) {
        const END: &str = "UPDATE ONLY {leases} SET expires_at = pg_catalog.now(), reusable_at = pg_catalog.now()
          WHERE space OPERATOR(pg_catalog.=) $1 AND section OPERATOR(pg_catalog.=) $2";
        self.run(END, |sql| Spi::run_with_args(sql, &[tables::text_arg(self.space), section.into()]));
    }
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION pg_idgen_seq_spaces() IS
    'Segment authority: the spaces of per-key sequences and their secrets, for other servers'' pg_idgen workers (called over libpq).';
COMMENT ON FUNCTION pg_idgen_seq_sections(text, text, int, int, text, int, int, bigint[], bigint[], bigint[], bigint[]) IS
    'Segment authority: takes, raises, renews and releases sections of per-key sequences for another server''s pg_idgen worker (called over libpq).';
-- Only the role the other servers' workers connect as (GRANT EXECUTE to it).
REVOKE EXECUTE ON FUNCTION pg_idgen_seq_spaces() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_idgen_seq_sections(text, text, int, int, text, int, int, bigint[], bigint[], bigint[], bigint[]) FROM PUBLIC;
"#,
    name = "seq_store",
    requires = [pg_idgen_seq_spaces, pg_idgen_seq_sections, "seq_tables"]
);
