//! Sections leased from the segment authority (`pg_idgen.segment_authority`): the source of a
//! server that serves per-key sequences of spaces the authority keeps (seqsvr's AllocSvr; the
//! authority's side is `store`).
//!
//! The worker takes a section's lease when a call first needs it (the take also raises it: the
//! keys start at the maximum found, as after a restart), raises it under the lease's generation,
//! renews all the leases it holds in one statement per space every third of
//! `pg_idgen.seq_lease_ttl`, and gives up the sections no call used for a whole lease (retired
//! here first, then released there), so that they can move. A section whose lease another server
//! holds is asked for again after a pause; the calls that wait for it fail at their deadline with
//! 55006, naming the holder. A lease this server cannot renew ends here at its deadline (the
//! lease's length after the renewal was sent, before the authority's expiry and margin): calls
//! hand out no number of a section after it (`lease_ended`), until a renewal succeeds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::cache::{self, sections, CACHE, READY};
use super::databases;
use super::lease_state::{leased, LEASES};
use super::mirror;
use super::raise::{self, Leased, Need, Outcome, SectionSource};
use super::store::{RELEASE, RENEW};
use crate::remote::Row;
use crate::worker::{self, Served, Serving};
use crate::{clock, settings};

/// Sections renewed in one call to the authority at most.
const RENEWALS_PER_CALL: usize = 500;

#[pg_extern(volatile, parallel_safe)]
/// With a segment authority: this database's sections held under a lease now, and the server's
/// sections taken, released (given up when idle, so that they can move), handed over (given up
/// because another server asked), lost (taken by another server while this one could not renew)
/// and refused (held by another server) since its start.
// Why allowed: pgrx takes the columns' names from the `name!` in the signature.
#[allow(clippy::type_complexity)]
fn seq_lease_status() -> TableIterator<
    'static,
    (
        name!(leased, bool),
        name!(held_sections, i32),
        name!(taken, i64),
        name!(released, i64),
        name!(handed_over, i64),
        name!(lost, i64),
        name!(refused, i64),
    ),
> {
    crate::shmem::require_preloaded();
    // SAFETY: this backend's database.
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let (held, taken, released, handed_over, lost, refused) = lease_counts(database);
    TableIterator::new(vec![(leased(), held, taken, released, handed_over, lost, refused)])
}

/// What `seq_lease_status()` and `seq_status()` show of the leases: the database's sections held
/// under a lease, and the server's sections taken, released, handed over, lost and refused.
pub(super) fn lease_counts(database: u32) -> (i32, i64, i64, i64, i64, i64) {
    let leases = LEASES.get();
    let counter = |c: &AtomicU64| c.load(Ordering::Relaxed) as i64;
    (
        held_sections(database) as i32,
        counter(&leases.taken),
        counter(&leases.released),
        counter(&leases.handed_over),
        counter(&leases.lost),
        counter(&leases.refused),
    )
}

pgrx::extension_sql!(
    r#"
COMMENT ON FUNCTION seq_lease_status() IS
    'Per-key sequences with a segment authority: sections this database holds under a lease, and the server''s sections taken, released, handed over, lost and refused since start.';
REVOKE EXECUTE ON FUNCTION seq_lease_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION seq_lease_status() TO pg_monitor;
"#,
    name = "seq_lease_status",
    requires = [seq_lease_status]
);

/// What this server is called at the authority: its `cluster_name` or system identifier, port and
/// database. Why the database: each database has a cache of its own, so each is a holder.
fn holder_name() -> String {
    // SAFETY: reads the control file's system identifier, this process's port and database name.
    unsafe {
        let system = pg_sys::GetSystemIdentifier();
        let cluster = std::ffi::CStr::from_ptr(pg_sys::cluster_name).to_string_lossy().into_owned();
        // In a transaction: the name is looked up in the catalog.
        let database = worker::in_worker_transaction(
            || {
                let name = pg_sys::get_database_name(pg_sys::MyDatabaseId);
                if name.is_null() {
                    String::new()
                } else {
                    std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
                }
            },
            |_| String::new(),
        );
        let server = if cluster.is_empty() { format!("system {system}") } else { format!("\"{cluster}\" (system {system})") };
        let port = pg_sys::PostPortNumber;
        format!("{server}, port {port}, database \"{database}\"")
    }
}

/// A request for one section, as `pg_idgen_seq_sections()` takes it.
#[derive(Clone, Copy)]
struct Request {
    section: i64,
    generation: i64,
    raise: i64,
    limit: i64,
}

/// The authority's answer for one section.
struct Answer {
    outcome: String,
    generation: i64,
    old_max: Option<i64>,
    new_max: Option<i64>,
    held_by: Option<String>,
}

/// The worker's source of sections with an authority: its session there, who it is, and when it
/// last renewed.
pub struct LeasedSections {
    authority: worker::Authority,
    holder: String,
    holder_start: String,
    ttl_ms: i64,
    margin_ms: i64,
    renewed_at_ms: i64,
    /// Each held section's way: its version, the sum of its keys' counters, and since when both
    /// have been so (monotonic ms).
    seen: std::collections::HashMap<usize, (u64, i64, i64)>,
    /// The request of this database's calls this worker last copied the spaces for (None: a copy
    /// is due, the authority said a space is not as copied here).
    copied_for: Option<u64>,
    /// Releases of sections retired here that the authority has not answered (it could not be
    /// reached): sent again at each renewal until answered. Why: each carries the section's limit,
    /// which repairs an authority that went back (failed over to a standby that lagged) before it
    /// gives the section to another server.
    unanswered: Vec<(SpaceOf, Request)>,
}

/// A space as the authority knows it: name, id and keys a section.
type SpaceOf = (Vec<u8>, u32, u32);

impl LeasedSections {
    pub fn new(conninfo: &str) -> LeasedSections {
        let segments = &settings::config().segments;
        // Why a third: a renewal every third of the lease, each of which may take this long.
        let timeout_ms = segments.remote_timeout_ms.min(segments.seq_lease_ttl_ms / 3);
        let start = &LEASES.get().holder_start;
        LeasedSections {
            authority: worker::Authority::new(conninfo, timeout_ms),
            holder: holder_name(),
            holder_start: format!("{:016x}{:016x}", start[0].load(Ordering::Relaxed), start[1].load(Ordering::Relaxed)),
            ttl_ms: segments.seq_lease_ttl_ms as i64,
            margin_ms: segments.seq_lease_margin_ms as i64,
            // A renewal at the first turn: a worker started again finds its sections' leases older.
            renewed_at_ms: i64::MIN / 2,
            seen: std::collections::HashMap::new(),
            // Why not None: a worker copies when a call asks, not at its start (a server that
            // takes only segment ranges from the authority must not call it for spaces).
            copied_for: Some(0),
            unanswered: Vec::new(),
        }
    }

    /// Sends releases the authority did not answer before; keeps those it still does not answer.
    fn send_unanswered_releases(&mut self, mut unanswered: Vec<(SpaceOf, Request)>) {
        for group in calls_of(&mut unanswered, |(space, request)| (space, request.section)) {
            let (space, space_id, section_keys) = &group[0].0;
            let requests: Vec<Request> = group.iter().map(|(_, request)| *request).collect();
            if self.call(space, *space_id, *section_keys, &requests).is_err() {
                self.unanswered.extend_from_slice(group);
            }
        }
    }

    /// One call for requests of one space; the answers in the requests' order.
    fn call(&mut self, space: &[u8], space_id: u32, section_keys: u32, requests: &[Request]) -> Result<Vec<Answer>, String> {
        let array = |f: &dyn Fn(&Request) -> i64| format!("{{{}}}", requests.iter().map(|r| f(r).to_string()).collect::<Vec<_>>().join(","));
        let (sections, generations, raises, limits) = (array(&|r| r.section), array(&|r| r.generation), array(&|r| r.raise), array(&|r| r.limit));
        let (ttl, margin, space_id, section_keys) =
            (self.ttl_ms.to_string(), self.margin_ms.to_string(), space_id.to_string(), section_keys.to_string());
        let params: [&[u8]; 11] = [
            self.holder.as_bytes(),
            self.holder_start.as_bytes(),
            ttl.as_bytes(),
            margin.as_bytes(),
            space,
            space_id.as_bytes(),
            section_keys.as_bytes(),
            sections.as_bytes(),
            generations.as_bytes(),
            raises.as_bytes(),
            limits.as_bytes(),
        ];
        let rows = self.authority.call(
            |schema| {
                format!(
                    "SELECT section, outcome, generation, old_max, new_max, held_by FROM {schema}.pg_idgen_seq_sections(
                       $1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.int4, $4::pg_catalog.int4, $5::pg_catalog.text,
                       $6::pg_catalog.int4, $7::pg_catalog.int4, $8::pg_catalog.int8[], $9::pg_catalog.int8[], $10::pg_catalog.int8[],
                       $11::pg_catalog.int8[])"
                )
            },
            &params,
            || {},
        )?;
        let answers: Option<Vec<Answer>> = rows.iter().zip(requests).map(|(row, request)| answer_of(row, request)).collect();
        match answers {
            Some(answers) if answers.len() == requests.len() => Ok(answers),
            _ => Err(format!("the segment authority ({}): its answer does not match the sections asked for", self.authority.described)),
        }
    }

    /// Renews the leases of the database's sections, and gives up those no call took a number of
    /// for a whole lease (their keys' counters did not move): retired here first, then released at
    /// the authority. Why the counters, not the use clock: a call that finds its section in its
    /// backend's map of sections does not record its use.
    fn renew(&mut self, database: pg_sys::Oid) {
        // Sent after the renewals: a release of an older generation must not end a lease the
        // renewal would keep (an authority that went back may show the older one).
        let unanswered = std::mem::take(&mut self.unanswered);
        let now_ms = clock::monotonic_millis();
        let mut held = Vec::new();
        let mut seen = std::collections::HashMap::new();
        {
            let _lock = CACHE.exclusive();
            let all = sections();
            for way in databases::sections_of(database.to_u32()) {
                let section = &all[way];
                let generation = i64::from(section.lease_generation.load(Ordering::Relaxed));
                if section.state.load(Ordering::Relaxed) != READY || generation == 0 {
                    continue;
                }
                let version = section.version.read();
                let taken = section.keys().fold(0i64, |sum, key| sum.wrapping_add(key.load(Ordering::Relaxed)));
                let since_ms = match self.seen.get(&way) {
                    Some(&(was_version, was_taken, since_ms)) if was_version == version && was_taken == taken => since_ms,
                    _ => now_ms,
                };
                // Idle, or its lease ended here (not renewed under it: see `raise`).
                let idle = now_ms - since_ms >= self.ttl_ms || section.lease_until_ms.load(Ordering::Acquire) <= now_ms;
                let request = Request {
                    section: section.section.load(Ordering::Relaxed),
                    generation,
                    raise: if idle { RELEASE } else { RENEW },
                    limit: section.limit.load(Ordering::Relaxed),
                };
                let space = (section.space(), section.space_id.load(Ordering::Relaxed), section.section_keys.load(Ordering::Relaxed));
                if idle {
                    // Before the release: once released, another server may start serving it.
                    cache::retire_section(way);
                    held.push((space, way, 0, request));
                } else {
                    seen.insert(way, (version, taken, since_ms));
                    held.push((space, way, version, request));
                }
            }
        }
        self.seen = seen;
        for group in calls_of(&mut held, |(space, _, _, request)| (space, request.section)) {
            let ((space, space_id, section_keys), ..) = &group[0];
            let sent_ms = clock::monotonic_millis();
            let requests: Vec<Request> = group.iter().map(|(_, _, _, r)| *r).collect();
            let Ok(answers) = self.call(space, *space_id, *section_keys, &requests) else {
                // The leases run on until their deadline; the next round tries again. The sections
                // retired here are not seen again: their releases are kept.
                let space: &SpaceOf = &group[0].0;
                self.unanswered.extend(requests.iter().filter(|r| r.raise == RELEASE).map(|r| (space.clone(), *r)));
                continue;
            };
            let mut handed_over = Vec::new();
            let lock = CACHE.exclusive();
            for ((_, way, version, request), answer) in group.iter().zip(answers) {
                let section = &sections()[*way];
                match answer.outcome.as_str() {
                    "renewed" if section.version.read() == *version => {
                        section.lease_until_ms.fetch_max(sent_ms + self.ttl_ms, Ordering::AcqRel);
                    }
                    "wanted" => {
                        // Another server asked for it: no number of it here from now on, then the
                        // release lets that server take it (also when the section went here since).
                        if section.version.read() == *version {
                            cache::retire_section(*way);
                        }
                        handed_over.push(Request { raise: RELEASE, ..*request });
                    }
                    "released" => {
                        LEASES.get().released.fetch_add(1, Ordering::Relaxed);
                    }
                    "lost" if *version != 0 && section.version.read() == *version => {
                        LEASES.get().lost.fetch_add(1, Ordering::Relaxed);
                        cache::retire_section(*way);
                    }
                    "nospace" => {
                        // The space was dropped at the authority: its copy here goes at the next copy.
                        if *version != 0 && section.version.read() == *version {
                            cache::retire_section(*way);
                        }
                        self.copied_for = None;
                    }
                    _ => {}
                }
            }
            drop(lock);
            if !handed_over.is_empty() {
                match self.call(space, *space_id, *section_keys, &handed_over) {
                    Ok(_) => _ = LEASES.get().handed_over.fetch_add(handed_over.len() as u64, Ordering::Relaxed),
                    Err(_) => self.unanswered.extend(handed_over.into_iter().map(|r| (group[0].0.clone(), r))),
                }
            }
        }
        self.send_unanswered_releases(unanswered);
        worker::notify_published();
    }
}

/// Renewals and releases as calls to the authority: sorted by section within a space (two servers'
/// calls lock the sections' rows in one order), one space and at most `RENEWALS_PER_CALL` a call
/// (one statement must end well inside its timeout; the authority takes at most 10,000 a call).
fn calls_of<T>(requests: &mut [T], key: impl Fn(&T) -> (&SpaceOf, i64)) -> impl Iterator<Item = &[T]> {
    requests.sort_by(|a, b| key(a).cmp(&key(b)));
    requests.chunk_by(move |a, b| key(a).0 == key(b).0).flat_map(|group| group.chunks(RENEWALS_PER_CALL))
}

/// Reads one row of `pg_idgen_seq_sections()` for `request`.
fn answer_of(row: &Row, request: &Request) -> Option<Answer> {
    // None: no such column or not a number; Some(None): NULL.
    let number = |i: usize| -> Option<Option<i64>> {
        match row.get(i)?.as_deref() {
            None => Some(None),
            Some(text) => text.parse().ok().map(Some),
        }
    };
    if number(0)?? != request.section {
        return None;
    }
    Some(Answer { outcome: row.get(1)?.clone()?, generation: number(2)??, old_max: number(3)?, new_max: number(4)?, held_by: row.get(5)?.clone() })
}

impl SectionSource for LeasedSections {
    /// One call per space of the round: takes (a section being loaded), raises under the lease.
    fn raise(&mut self, needs: &[Need]) -> Vec<Outcome> {
        let mut order: Vec<usize> = (0..needs.len()).collect();
        // By section within a space: two servers' calls lock the sections' rows in one order.
        order.sort_by(|&a, &b| {
            (&needs[a].space, needs[a].space_id, needs[a].section_keys, needs[a].section).cmp(&(
                &needs[b].space,
                needs[b].space_id,
                needs[b].section_keys,
                needs[b].section,
            ))
        });
        let now_ms = clock::monotonic_millis();
        // A section whose lease ended here is not raised under it (another server may have taken
        // and served it since; the authority may have gone back meanwhile): it is released, which
        // repairs the authority's maximum, and taken anew by its next call.
        let ended = |need: &Need| !need.load && need.generation > 0 && sections()[need.index].lease_until_ms.load(Ordering::Acquire) <= now_ms;
        let mut outcomes: Vec<Option<Outcome>> = needs.iter().map(|_| None).collect();
        for group in order.chunk_by(|&a, &b| {
            (&needs[a].space, needs[a].space_id, needs[a].section_keys) == (&needs[b].space, needs[b].space_id, needs[b].section_keys)
        }) {
            let first = &needs[group[0]];
            let requests: Vec<Request> = group
                .iter()
                .map(|&i| {
                    let need = &needs[i];
                    Request {
                        section: need.section,
                        generation: if need.load { 0 } else { need.generation },
                        raise: if ended(need) { RELEASE } else { need.raise.max(0) },
                        limit: need.limit.max(0),
                    }
                })
                .collect();
            let sent_ms = clock::monotonic_millis();
            match self.call(&first.space, first.space_id, first.section_keys, &requests) {
                Ok(answers) => {
                    for (&i, answer) in group.iter().zip(answers) {
                        outcomes[i] = Some(if ended(&needs[i]) { Outcome::Lost } else { self.outcome_of(answer, sent_ms) });
                    }
                }
                Err(message) => {
                    for &i in group {
                        outcomes[i] = Some(Outcome::Failed(message.clone()));
                    }
                }
            }
        }
        outcomes.into_iter().map(|outcome| outcome.unwrap_or(Outcome::Skipped)).collect()
    }
}

impl LeasedSections {
    fn outcome_of(&mut self, answer: Answer, sent_ms: i64) -> Outcome {
        let leases = LEASES.get();
        match (answer.outcome.as_str(), answer.old_max, answer.new_max) {
            ("taken" | "raised", Some(old), Some(new)) if new > old && old >= 0 && (1..=i64::from(u32::MAX)).contains(&answer.generation) => {
                if answer.outcome == "taken" {
                    leases.taken.fetch_add(1, Ordering::Relaxed);
                }
                Outcome::Raised(old, new, Some(Leased { generation: answer.generation, until_ms: sent_ms + self.ttl_ms }))
            }
            ("held", ..) => Outcome::Held(answer.held_by.unwrap_or_else(|| "another server".into())),
            ("lost", ..) => {
                leases.lost.fetch_add(1, Ordering::Relaxed);
                Outcome::Lost
            }
            ("nospace", ..) => {
                // This server's copy of the space may be out of date: copy the spaces again.
                self.copied_for = None;
                Outcome::NoSpace
            }
            _ => Outcome::Failed(format!("the segment authority ({}): an answer that is not a raise ({})", self.authority.described, answer.outcome)),
        }
    }
}

impl Serving for LeasedSections {
    /// Copies the spaces when a call asked (or at the start), renews the leases when a third of the
    /// lease has passed, then loads and raises what the calls want.
    fn serve(&mut self, database: pg_sys::Oid, until: Instant) -> Served {
        let asked = mirror::asked(database);
        if self.copied_for != Some(asked) {
            // Failed, it is tried again at the next request: calls ask before each wait.
            let _ = mirror::copy(&mut self.authority, database, asked);
            self.copied_for = Some(asked);
        }
        let now_ms = clock::monotonic_millis();
        if now_ms - self.renewed_at_ms >= self.ttl_ms / 3 {
            self.renewed_at_ms = now_ms;
            self.renew(database);
        }
        let mut served = raise::serve_from(self, database, until);
        // The worker of another database stays while it holds leases: they are renewed, and given
        // up when idle, rather than left to run out under their calls; and while releases wait for
        // an answer: their limits repair an authority that went back.
        served.wanted |= held_sections(database.to_u32()) > 0 || !self.unanswered.is_empty();
        served
    }
}

/// The database's sections held under a lease.
fn held_sections(database: u32) -> usize {
    let _lock = CACHE.shared();
    let all = sections();
    databases::sections_of(database)
        .into_iter()
        .filter(|&way| all[way].state.load(Ordering::Relaxed) == READY && all[way].lease_generation.load(Ordering::Relaxed) > 0)
        .count()
}
