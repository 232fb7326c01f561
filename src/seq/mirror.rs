//! With a segment authority, the spaces are the authority's: this database's `seq_space` (and
//! `seq_space_secret`) hold a copy of them, made by the worker, which calls read as they read a
//! space of their own. A call that finds no space asks for a fresh copy (`ask_and_wait`), and the
//! worker copies every space from the authority (`copy`): rows the authority no longer has, or has
//! with another id, size or secret, are deleted here first (which retires the cached sections of
//! the database), then the authority's are inserted as they are there.

use std::sync::atomic::Ordering;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::lease_state::{LEASES, SLOTS};
use super::spaces::{self, SECRET_TABLE, SPACE_TABLE};
use crate::tables::{self, display};
use crate::worker::{self, wait};
use crate::{errors, remote};

/// Requests and copies, by database OID modulo `SLOTS`: `database << 32 | count`, the count of
/// requests of that database (`spaces_asked`) and the count a copy answered (`spaces_copied`).
/// Two databases that share a slot take it from each other: a call of the one that lost it waits
/// out its deadline, then finds the space or not as the copy it has.
fn tagged(database: u32, count: u32) -> u64 {
    u64::from(database) << 32 | u64::from(count)
}

/// The requests of `database`'s calls so far (0: none in its slot).
pub(super) fn asked(database: pg_sys::Oid) -> u64 {
    let database = database.to_u32();
    let asked = LEASES.get().spaces_asked[database as usize % SLOTS].load(Ordering::Acquire);
    if (asked >> 32) as u32 == database {
        asked
    } else {
        0
    }
}
/// A space as the authority has it.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Space {
    name: Vec<u8>,
    id: i32,
    step: i32,
    section_keys: i32,
    text_key_hash: String,
    secret: Option<Vec<u8>>,
    /// Here: a copy of the authority's (always, of a space the authority returns).
    copied: bool,
}

/// Refuses (55000) a space that is this server's own while its sections are leased from the
/// authority, or a copy of the authority's while they are not.
#[cold]
pub(super) fn refuse_mixed(space: &[u8], copied: bool) -> ! {
    if copied {
        errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("sequence space \"{}\" is a copy of the segment authority's", display(space)),
            Some("Its sections' maxima live at the authority, and pg_idgen.seq_sections is local: numbered here, its keys would start again.".into()),
            Some("Set pg_idgen.seq_sections = authority again, or drop the copy with seq_space_drop() and create the space anew."),
        )
    }
    errors::raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("sequence space \"{}\" is this server's own, and its sequences are leased from the segment authority", display(space)),
        Some("With pg_idgen.seq_sections = authority, every space is the authority's; this one was made here before.".into()),
        Some("Set pg_idgen.seq_sections = local to number it (or to drop it with seq_space_drop()), or create the space at the authority under another name."),
    )
}

/// Asks this database's worker to copy the spaces from the authority, and waits until it did (or
/// until `deadline`: then an unreachable authority raises 08006, naming it).
pub(super) fn ask_and_wait(space: &[u8], deadline: &mut wait::Deadline) {
    let leases = LEASES.get();
    // SAFETY: this backend's database.
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let slot = database as usize % SLOTS;
    let ticket = leases.spaces_asked[slot]
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |asked| {
            let count = if (asked >> 32) as u32 == database { (asked as u32).wrapping_add(1) } else { 1 };
            Some(tagged(database, count))
        })
        .map_or(1, |asked| if (asked >> 32) as u32 == database { (asked as u32).wrapping_add(1) } else { 1 });
    let copied = || {
        let done = leases.spaces_copied[slot].load(Ordering::Acquire);
        (done >> 32) as u32 == database && (done as u32).wrapping_sub(ticket) as i32 >= 0
    };
    wait::until(deadline, copied, worker::wake, || {
        let status = remote::authority();
        if status.failures_in_a_row.load(Ordering::Relaxed) > 0 {
            errors::raise(
                PgSqlErrorCode::ERRCODE_CONNECTION_FAILURE,
                format!("sequence space \"{}\" could not be looked up at the segment authority (pg_idgen.segment_authority)", display(space)),
                Some(format!("The last call to it failed: {}", status.last_message())),
                Some("See segment_authority_status() and the server log."),
            );
        }
        errors::raise(
            PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
            format!("sequence space \"{}\" could not be copied from the segment authority in time", display(space)),
            Some("The call waited pg_idgen.segment_wait_timeout for the pg_idgen worker to copy the spaces.".into()),
            Some("See the server log."),
        );
    });
}

/// Copies every space from the authority into this database's tables, and records the copy as
/// answering the requests up to `asked` (as `asked` returned it).
pub(super) fn copy(authority: &mut worker::Authority, database: pg_sys::Oid, asked: u64) -> Result<(), String> {
    let rows = authority.call(
        // The secret as hex text, whatever bytea_output the authority's role has.
        |schema| format!("SELECT space, id, step, section_keys, text_key_hash, pg_catalog.encode(secret, 'hex') FROM {schema}.pg_idgen_seq_spaces()"),
        &[],
        || {},
    )?;
    let spaces = rows.iter().map(space_of).collect::<Option<Vec<Space>>>().ok_or_else(|| {
        let message = format!("the segment authority ({}): its spaces are not as pg_idgen_seq_spaces() returns them", authority.described);
        warning!("pg_idgen worker: {message}");
        message
    })?;
    let copied = worker::in_worker_transaction(|| apply(&spaces).map(|_| ()), Err);
    if let Err(message) = &copied {
        warning!("pg_idgen worker: could not copy the sequence spaces of the segment authority: {message}");
        return copied;
    }
    let slot = &LEASES.get().spaces_copied[database.to_u32() as usize % SLOTS];
    slot.store(asked, Ordering::Release);
    worker::notify_published();
    Ok(())
}

/// A row of `pg_idgen_seq_spaces()`.
fn space_of(row: &remote::Row) -> Option<Space> {
    let int = |i: usize| row.get(i)?.as_deref()?.parse::<i32>().ok();
    let secret = match row.get(5)?.as_deref() {
        None => None,
        Some(text) => Some(decode_hex(text)?),
    };
    Some(Space {
        name: row.first()?.clone()?.into_bytes(),
        id: int(1)?,
        step: int(2)?,
        section_keys: int(3)?,
        text_key_hash: row.get(4)?.clone()?,
        secret,
        copied: true,
    })
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    text.len().is_multiple_of(2).then_some(())?;
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// Makes this database's spaces those of the authority, in the worker's transaction.
fn apply(authority: &[Space]) -> Result<usize, String> {
    let (Some(space_table), Some(secret_table)) = (tables::extension_table_oid(SPACE_TABLE), tables::extension_table_oid(SECRET_TABLE)) else {
        return Ok(0); // the extension is gone from this database
    };
    let both = [("{spaces}", space_table), ("{secrets}", secret_table)];
    const LOCAL: &str = "SELECT pg_catalog.textsend(p.space), p.id, p.step, p.section_keys, p.text_key_hash, k.secret, p.copied
           FROM ONLY {spaces} AS p LEFT JOIN ONLY {secrets} AS k ON k.space OPERATOR(pg_catalog.=) p.space";
    let local = tables::run_on_tables(&both, tables::Run::Allocation, LOCAL, |sql| {
        Spi::connect(|client| {
            let mut rows = Vec::new();
            for row in client.select(sql, None, &[])? {
                rows.push(Space {
                    name: row.get::<Vec<u8>>(1)?.unwrap_or_default(),
                    id: row.get::<i32>(2)?.unwrap_or_default(),
                    step: row.get::<i32>(3)?.unwrap_or_default(),
                    section_keys: row.get::<i32>(4)?.unwrap_or_default(),
                    text_key_hash: row.get::<String>(5)?.unwrap_or_default(),
                    secret: row.get::<Vec<u8>>(6)?,
                    copied: row.get::<bool>(7)?.unwrap_or(false),
                });
            }
            Ok::<_, pgrx::spi::SpiError>(rows)
        })
    })?
    .map_err(|e| e.to_string())?;
    // The step may differ: the authority raises by its own.
    let same = |a: &Space, b: &Space| Space { step: 0, ..a.clone() } == Space { step: 0, ..b.clone() };
    let mut changed = 0;
    // Only copies go: a space of this server's own (made before its sections were leased) keeps
    // its rows, and its name is not copied over it (its calls are refused: `refuse_mixed`).
    for gone in local.iter().filter(|l| l.copied && !authority.iter().any(|a| same(a, l))) {
        spaces::delete_space_rows(&gone.name)?;
        changed += 1;
    }
    for new in authority.iter().filter(|a| !local.iter().any(|l| l.copied && same(a, l))) {
        if local.iter().any(|l| !l.copied && l.name == new.name) {
            continue;
        }
        insert(space_table, secret_table, new)?;
        changed += 1;
    }
    Ok(changed)
}

/// Inserts the authority's space (and its secret) into this database's tables.
fn insert(space_table: pg_sys::Oid, secret_table: pg_sys::Oid, space: &Space) -> Result<(), String> {
    const SPACE: &str = "INSERT INTO {spaces} (space, id, step, section_keys, text_key_hash, description, copied)
         VALUES ($1, $2, $3, $4, $5, 'a copy of the segment authority''s space', true)";
    let args = [tables::text_arg(&space.name), space.id.into(), space.step.into(), space.section_keys.into(), space.text_key_hash.as_str().into()];
    tables::run_on_tables(&[("{spaces}", space_table)], tables::Run::Allocation, SPACE, |sql| Spi::run_with_args(sql, &args))?
        .map_err(|e| e.to_string())?;
    if let Some(secret) = &space.secret {
        // SAFETY: the bytes of a bytea value.
        let secret_arg = unsafe { pgrx::datum::DatumWithOid::new(&secret[..], pg_sys::BYTEAOID) };
        tables::run_on_tables(
            &[("{secrets}", secret_table)],
            tables::Run::Allocation,
            "INSERT INTO {secrets} (space, secret) VALUES ($1, $2)",
            |sql| Spi::run_with_args(sql, &[tables::text_arg(&space.name), secret_arg]),
        )?
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}
