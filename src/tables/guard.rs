//! pg_idgen's SQL on its own tables: the tables named by their OIDs' names, the search path
//! pinned, and a hook that refuses the statement at analysis if it names another relation.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::errors;

std::thread_local! {
    /// While pg_idgen runs a statement on its tables: their OIDs and the statement's text.
    static GUARDED: std::cell::RefCell<Option<(Vec<pg_sys::Oid>, std::ffi::CString)>> = const { std::cell::RefCell::new(None) };
}

/// Runs `statement`, SQL text naming each of pg_idgen's `tables` by its placeholder, through
/// `run`, with the search path pinned and the analysis guard on: the statement runs only if every
/// relation it names is one of `tables`.
pub fn run_on_tables<T>(tables: &[(&str, pg_sys::Oid)], statement: &str, run: impl FnOnce(&str) -> T) -> Result<T, String> {
    /// Puts back what was guarded before, also when `run` raises an error (a PostgreSQL ERROR
    /// reaches Rust as a panic, which unwinds through this).
    struct Restore(Option<(Vec<pg_sys::Oid>, std::ffi::CString)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            GUARDED.with(|g| *g.borrow_mut() = self.0.take());
        }
    }
    let names = tables.iter().map(|(placeholder, table)| Ok((*placeholder, super::catalog::qualified_name(*table)?))).collect::<Result<Vec<_>, String>>()?;
    let sql = fill_placeholders(statement, &names);
    let text = std::ffi::CString::new(sql.clone()).map_err(|_| "the statement holds a NUL byte".to_string())?;
    let oids = tables.iter().map(|(_, table)| *table).collect();
    let _restore = Restore(GUARDED.with(|g| g.borrow_mut().replace((oids, text))));
    Ok(with_catalog_search_path(|| run(&sql)))
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
unsafe extern "C-unwind" fn check_analyzed_statement(
    pstate: *mut pg_sys::ParseState,
    query: *mut pg_sys::Query,
    jstate: *mut pg_sys::JumbleState,
) {
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
        let expected = GUARDED.with(|g| g.borrow().as_ref().filter(|(_, text)| text.as_c_str() == CStr::from_ptr(source)).map(|(oids, _)| oids.clone()));
        if let Some(tables) = expected {
            if let Some(other) = relation_other_than(query, &tables) {
                errors::raise(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!("pg_idgen's statement on its own tables names another relation (OID {})", other.to_u32()),
                    Some("A schema was renamed or created meanwhile, so the table's name now means another relation; the statement did not run.".into()),
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

/// Runs `f` with `search_path = pg_catalog, pg_temp`, as PostgreSQL runs its own internal SQL,
/// and `session_replication_role = replica`: only the triggers the table's owner enabled ALWAYS
/// (pg_idgen's own) fire. Why: a role granted TRIGGER on the tag table would otherwise have its
/// trigger run with the privileges of whoever calls segment_create(), segment_drop() or a
/// conversion, a superuser among them (the workers pin the same for their sessions). Only for
/// pg_idgen's own statements on the tag table (the replica role also turns foreign-key triggers
/// off): never run a caller's SQL inside it. The previous settings come back afterwards (also
/// when `f` raises an error: the abort undoes them).
fn with_catalog_search_path<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: a GUC nest level opened and closed around `f`, as for a function's SET clause.
    // PGC_SUSET for session_replication_role: pg_idgen sets it for its own statement only.
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        for (name, value, context) in [
            (c"search_path", c"pg_catalog, pg_temp", pg_sys::GucContext::PGC_USERSET),
            (c"session_replication_role", c"replica", pg_sys::GucContext::PGC_SUSET),
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
        Spi::run("CREATE SCHEMA guard_a; CREATE TABLE guard_a.segment_tag (tag text); CREATE SCHEMA guard_b; CREATE TABLE guard_b.segment_tag (tag text)")
            .unwrap();
        let table = Spi::get_one::<pg_sys::Oid>("SELECT 'guard_a.segment_tag'::regclass::oid").unwrap().unwrap();
        // {table} is guard_a's name; the text names guard_b's, as a schema swap would make it.
        let _ = super::run_on_tables(&[("{table}", table)], "SELECT count(*) FROM guard_b.segment_tag /* {table} */", |sql| {
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
        let count = super::run_on_tables(&[("{table}", table)], "SELECT count(*) FROM {table}", Spi::get_one::<i64>).unwrap();
        assert_eq!(count, Ok(Some(0)));
    }
}

