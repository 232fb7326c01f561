//! pg_idgen's SQL on its own tables: the tables named by their OIDs' names, the search path
//! pinned, and a hook that refuses the statement at analysis if it names another relation.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::display;
use crate::errors;

std::thread_local! {
    /// While pg_idgen runs a statement on its tables: their OIDs and the statement's text.
    static GUARDED: std::cell::RefCell<Option<(Vec<pg_sys::Oid>, std::ffi::CString)>> = const { std::cell::RefCell::new(None) };
}

/// How pg_idgen's statement on its tables meets their triggers and foreign keys, and with whose
/// rights it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    /// The worker's raise or allocation (also the authority's, for another server's worker):
    /// `session_replication_role = replica`, so only the triggers the tables' owner enabled ALWAYS
    /// or REPLICA fire (pg_idgen's own are ALWAYS). Why: a role granted TRIGGER on a table can add
    /// a trigger, not change when it fires, and it would run in the worker, a superuser's session.
    /// Foreign keys referencing the table do not act then; these statements change no column one
    /// can reference (`max_id`, `max_seq`, a section's new row).
    Allocation,
    /// A change a caller asked for (creating or dropping a tag or a space), with the caller's
    /// rights: `session_replication_role = origin`, so foreign keys referencing the tables hold
    /// (and act: `ON DELETE CASCADE`) as for the caller's own statement. A trigger that would
    /// fire on `events` (`TRIGGER_TYPE_INSERT`, `…_DELETE`) and that neither the tables' owner
    /// enabled ALWAYS nor PostgreSQL made (a foreign key's) refuses the statement (55000): a role
    /// granted TRIGGER may add one, and it would run with the caller's privileges. A statement
    /// that fires no trigger (`LOCK TABLE`: `events` 0) is not checked, nor is its table locked
    /// first: it takes the lock it names.
    Change { events: u32 },
    /// As `Change`, with the rights of the tables' owner: rows nobody is granted (a space's
    /// secret), written as part of a change the caller's rights allowed (the space's own row).
    ChangeAsOwner { events: u32 },
}

/// Runs `statement`, SQL text naming each of pg_idgen's `tables` by its placeholder, through
/// `run`, with the search path pinned and the analysis guard on: the statement runs only if every
/// relation it names is one of `tables`; its triggers and rights as `how` says.
pub fn run_on_tables<T>(tables: &[(&str, pg_sys::Oid)], how: Run, statement: &str, run: impl FnOnce(&str) -> T) -> Result<T, String> {
    /// Puts back what was guarded before, also when `run` raises an error (a PostgreSQL ERROR
    /// reaches Rust as a panic, which unwinds through this).
    struct Restore(Option<(Vec<pg_sys::Oid>, std::ffi::CString)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            GUARDED.with(|g| *g.borrow_mut() = self.0.take());
        }
    }
    let names =
        tables.iter().map(|(placeholder, table)| Ok((*placeholder, super::catalog::qualified_name(*table)?))).collect::<Result<Vec<_>, String>>()?;
    let sql = fill_placeholders(statement, &names);
    let text = std::ffi::CString::new(sql.clone()).map_err(|_| "the statement holds a NUL byte".to_string())?;
    let oids: Vec<pg_sys::Oid> = tables.iter().map(|(_, table)| *table).collect();
    if let Run::Change { events } | Run::ChangeAsOwner { events } = how {
        for &table in oids.iter().filter(|_| events != 0) {
            refuse_triggers_not_vouched_for(table, events);
        }
    }
    let owner = match how {
        // SAFETY: the table is locked (above); its owner is read from its relcache entry.
        Run::ChangeAsOwner { .. } => Some(unsafe { table_owner(oids[0]) }),
        _ => None,
    };
    let _restore = Restore(GUARDED.with(|g| g.borrow_mut().replace((oids, text))));
    Ok(with_catalog_settings(how == Run::Allocation, || as_role(owner, || run(&sql))))
}

/// Refuses (55000) a change of `table` while it has a trigger on `events` that would run with the
/// caller's privileges although nobody trusted with the table chose it (see `Run::Change`). The
/// table is locked first, in the mode the change takes anyway (ROW EXCLUSIVE): no trigger can be
/// added before the transaction ends (CREATE TRIGGER needs SHARE ROW EXCLUSIVE), and the relcache
/// entry read here is the one the statement fires from.
fn refuse_triggers_not_vouched_for(table: pg_sys::Oid, events: u32) {
    // SAFETY: the table exists (found by OID in this transaction); it is locked until the end of
    // the transaction, opened and closed here, and its trigger array read while open.
    unsafe {
        pg_sys::LockRelationOid(table, pg_sys::RowExclusiveLock as i32);
        let relation = pg_sys::table_open(table, pg_sys::NoLock as i32);
        let triggers = (*relation).trigdesc;
        let count = if triggers.is_null() { 0 } else { (*triggers).numtriggers as usize };
        // pg_idgen's own trigger functions are vouched for whatever fires them: a restore with
        // --disable-triggers leaves its ALWAYS triggers firing on origin only (ENABLE TRIGGER ALL).
        let extension = pg_sys::get_extension_oid(c"pg_idgen".as_ptr(), true);
        let unvouched = (0..count).map(|i| &*(*triggers).triggers.add(i)).find(|t| {
            t.tgenabled as u8 == pg_sys::TRIGGER_FIRES_ON_ORIGIN
                && !t.tgisinternal
                && (t.tgtype as u32) & events != 0
                && !(extension != pg_sys::InvalidOid && pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, t.tgfoid) == extension)
        });
        let found = unvouched
            .map(|t| (CStr::from_ptr(t.tgname).to_string_lossy().into_owned(), display(CStr::from_ptr(pg_sys::get_rel_name(table)).to_bytes())));
        pg_sys::table_close(relation, pg_sys::NoLock as i32);
        if let Some((trigger, table)) = found {
            errors::raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("pg_idgen does not change table \"{table}\" while it has trigger \"{trigger}\""),
                Some("The trigger would run with the privileges of the role calling pg_idgen's function. Only triggers that the table's owner enabled ALWAYS run with pg_idgen's statements: a role granted TRIGGER on the table can add a trigger, but not choose when it fires.".into()),
                Some(&format!("Drop the trigger, or, as the table's owner, let it run with pg_idgen's statements: ALTER TABLE {table} ENABLE ALWAYS TRIGGER {trigger}.")),
            );
        }
    }
}

/// The owner of a relation.
///
/// # Safety
/// `table` is an existing relation, locked by this transaction.
unsafe fn table_owner(table: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: per the function's contract.
    unsafe {
        let relation = pg_sys::table_open(table, pg_sys::NoLock as i32);
        let owner = (*(*relation).rd_rel).relowner;
        pg_sys::table_close(relation, pg_sys::NoLock as i32);
        owner
    }
}

/// Runs `f` as `role` (when given), as PostgreSQL runs a foreign key's check as its table's
/// owner: the user id changed for `f` only, `SET ROLE` and the like refused meanwhile; the
/// caller's user id comes back afterwards, also when `f` raises an error.
fn as_role<T>(role: Option<pg_sys::Oid>, f: impl FnOnce() -> T) -> T {
    let Some(role) = role else { return f() };
    struct Restore(pg_sys::Oid, i32);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: puts back the user id and security context read below.
            unsafe { pg_sys::SetUserIdAndSecContext(self.0, self.1) };
        }
    }
    let (mut user, mut context) = (pg_sys::InvalidOid, 0);
    // SAFETY: reads and sets this backend's user id and security context; `Restore` puts them back.
    unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
    let _restore = Restore(user, context);
    let restricted = (pg_sys::SECURITY_LOCAL_USERID_CHANGE | pg_sys::SECURITY_RESTRICTED_OPERATION) as i32;
    // SAFETY: as above.
    unsafe { pg_sys::SetUserIdAndSecContext(role, context | restricted) };
    f()
}

/// The statement with each placeholder replaced by its name, in one pass over the statement: a
/// name that holds another placeholder's text (a schema may be called "{table}") stays as it is.
fn fill_placeholders(statement: &str, names: &[(&str, String)]) -> String {
    let mut sql = String::with_capacity(statement.len() + 64);
    let mut rest = statement;
    while !rest.is_empty() {
        match names.iter().find(|(placeholder, _)| rest.starts_with(placeholder)) {
            Some((placeholder, name)) => {
                sql.push_str(name);
                rest = &rest[placeholder.len()..];
            }
            None => {
                let c = rest.chars().next().expect("not empty");
                sql.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    sql
}

/// The hook that was installed before the guard, called first. Why not `static mut`: set once, in
/// `_PG_init`, before the hook can run.
static PREVIOUS_POST_PARSE_ANALYZE_HOOK: std::sync::OnceLock<pg_sys::post_parse_analyze_hook_type> = std::sync::OnceLock::new();

/// Checks, after parse analysis, that pg_idgen's own statement names no relation but the tag
/// table (see the module note). Other statements pass untouched.
#[pg_guard]
unsafe extern "C-unwind" fn check_analyzed_statement(pstate: *mut pg_sys::ParseState, query: *mut pg_sys::Query, jstate: *mut pg_sys::JumbleState) {
    // SAFETY: the previous hook gets PostgreSQL's own arguments, behind the FFI guard; the parse
    // state and query are valid during the call.
    unsafe {
        if let Some(previous) = PREVIOUS_POST_PARSE_ANALYZE_HOOK.get().copied().flatten() {
            pg_sys::ffi::pg_guard_ffi_boundary(|| previous(pstate, query, jstate));
        }
        let source = (*pstate).p_sourcetext;
        if source.is_null() {
            return;
        }
        let expected =
            GUARDED.with(|g| g.borrow().as_ref().filter(|(_, text)| text.as_c_str() == CStr::from_ptr(source)).map(|(oids, _)| oids.clone()));
        if let Some(tables) = expected {
            if let Some(other) = relation_other_than(query, &tables) {
                errors::raise(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!("pg_idgen's statement on its own tables names another relation (OID {})", other.to_u32()),
                    Some(
                        "A schema was renamed or created meanwhile, so the table's name now means another relation; the statement did not run."
                            .into(),
                    ),
                    Some("Look for schemas that are being renamed in this database."),
                );
            }
        }
    }
}

/// The first relation a query (and its subqueries and CTEs) names other than `tables`.
///
/// # Safety
/// `query` is an analysed query.
unsafe fn relation_other_than(query: *mut pg_sys::Query, tables: &[pg_sys::Oid]) -> Option<pg_sys::Oid> {
    // SAFETY: lists of an analysed query hold the node types read here.
    unsafe {
        let list_pointers = |list: *mut pg_sys::List| -> Vec<*mut std::ffi::c_void> {
            if list.is_null() {
                return Vec::new();
            }
            (0..(*list).length as usize).map(|i| (*(*list).elements.add(i)).ptr_value).collect()
        };
        for rte in list_pointers((*query).rtable).into_iter().map(|p| p.cast::<pg_sys::RangeTblEntry>()) {
            match (*rte).rtekind {
                pg_sys::RTEKind::RTE_RELATION if !tables.contains(&(*rte).relid) => return Some((*rte).relid),
                pg_sys::RTEKind::RTE_SUBQUERY => {
                    if let Some(other) = relation_other_than((*rte).subquery, tables) {
                        return Some(other);
                    }
                }
                _ => {}
            }
        }
        for cte in list_pointers((*query).cteList).into_iter().map(|p| p.cast::<pg_sys::CommonTableExpr>()) {
            let inner = (*cte).ctequery.cast::<pg_sys::Query>();
            if let Some(other) = relation_other_than(inner, tables) {
                return Some(other);
            }
        }
        None
    }
}

/// Installs the analysis guard. Called from `_PG_init`, whenever the library is loaded (preloaded
/// or not): the hook is this process's (and, preloaded, its children's).
pub fn install_analysis_guard() {
    // SAFETY: _PG_init runs once per process, before any of pg_idgen's statements; PostgreSQL's
    // hook variable is a plain C global, chained by saving the previous value.
    unsafe {
        let _ = PREVIOUS_POST_PARSE_ANALYZE_HOOK.set(pg_sys::post_parse_analyze_hook);
        pg_sys::post_parse_analyze_hook = Some(check_analyzed_statement);
    }
}

/// Runs `f` with `flag` set, and clears it after, also when `f` raises an error: a flag the triggers
/// of pg_idgen's tables read to tell one of pg_idgen's own statements from others (the worker's
/// allocations, `seq_space_drop()`'s deletes).
pub fn as_own<T>(flag: &'static std::thread::LocalKey<std::cell::Cell<bool>>, f: impl FnOnce() -> T) -> T {
    struct Reset(&'static std::thread::LocalKey<std::cell::Cell<bool>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            self.0.set(false);
        }
    }
    flag.set(true);
    let _reset = Reset(flag);
    f()
}

/// Runs `f` with `search_path = pg_catalog, pg_temp`, as PostgreSQL runs its own internal SQL,
/// and `session_replication_role` as the statement needs (`Run`): `replica` for an allocation,
/// `origin` for a caller's change, whatever the session says. Only for pg_idgen's own statements
/// on its tables: never run a caller's SQL inside it. The previous settings come back afterwards
/// (also when `f` raises an error: the abort undoes them).
fn with_catalog_settings<T>(allocation: bool, f: impl FnOnce() -> T) -> T {
    let replication_role = if allocation { c"replica" } else { c"origin" };
    // SAFETY: a GUC nest level opened and closed around `f`, as for a function's SET clause.
    // PGC_SUSET for session_replication_role: pg_idgen sets it for its own statement only.
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        for (name, value, context) in [
            (c"search_path", c"pg_catalog, pg_temp", pg_sys::GucContext::PGC_USERSET),
            (c"session_replication_role", replication_role, pg_sys::GucContext::PGC_SUSET),
        ] {
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                context,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
        }
        let result = f();
        pg_sys::AtEOXact_GUC(true, level);
        result
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// The guard does not depend on winning a race: a statement of pg_idgen's that names another
    /// relation than the one it was run for is refused at analysis, before it runs.
    #[pg_test]
    #[should_panic(expected = "names another relation")]
    fn a_statement_naming_another_relation_is_refused() {
        Spi::run(
            "CREATE SCHEMA guard_a; CREATE TABLE guard_a.segment_tag (tag text); CREATE SCHEMA guard_b; CREATE TABLE guard_b.segment_tag (tag text)",
        )
        .unwrap();
        let table = Spi::get_one::<pg_sys::Oid>("SELECT 'guard_a.segment_tag'::regclass::oid").unwrap().unwrap();
        // {table} is guard_a's name; the text names guard_b's, as a schema swap would make it.
        let _ =
            super::run_on_tables(&[("{table}", table)], super::Run::Allocation, "SELECT count(*) FROM guard_b.segment_tag /* {table} */", |sql| {
                Spi::get_one::<i64>(sql)
            });
    }

    /// A schema named like a placeholder is not substituted again.
    #[pg_test]
    fn placeholders_are_filled_in_one_pass() {
        let names = [("{a}", "\"x{b}\".t".to_string()), ("{b}", "s.u".to_string())];
        assert_eq!(super::fill_placeholders("SELECT {a}, {b} FROM é{a}", &names), "SELECT \"x{b}\".t, s.u FROM é\"x{b}\".t");
    }

    #[pg_test]
    fn a_statement_naming_its_table_runs() {
        Spi::run("CREATE SCHEMA guard_c; CREATE TABLE guard_c.segment_tag (tag text)").unwrap();
        let table = Spi::get_one::<pg_sys::Oid>("SELECT 'guard_c.segment_tag'::regclass::oid").unwrap().unwrap();
        let count = super::run_on_tables(&[("{table}", table)], super::Run::Allocation, "SELECT count(*) FROM {table}", Spi::get_one::<i64>).unwrap();
        assert_eq!(count, Ok(Some(0)));
    }
}
