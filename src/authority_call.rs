//! What a function that other servers' workers call over libpq (the segment authority's
//! allocation, its section leases) checks and sets: that its answer is the caller's only once
//! committed, and the superuser's settings it runs with.

use pgrx::pg_sys;
use pgrx::prelude::*;

/// Sets a parameter as the superuser a SECURITY DEFINER function of pg_idgen runs as: until the
/// end of the transaction (`GUC_ACTION_LOCAL`), or until the current GUC nest level is popped
/// (`GUC_ACTION_SAVE`).
pub fn set_parameter(name: &std::ffi::CStr, value: &std::ffi::CStr, action: pg_sys::GucAction::Type) {
    // SAFETY: sets a parameter; both are C strings.
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_SESSION,
            action,
            true,
            0,
            false,
        );
    }
}

/// Refuses (25001) unless the answer (a range, a section's raise) is the caller's only once it is committed: the call must be
/// the whole of its statement, `SELECT … FROM` the function `form` shows (constants or parameters)
/// with plain columns, and that statement a transaction of its own that commits as soon as it
/// ends. Why: a range allocated in a transaction that is then rolled back is allocated again
/// later, and a caller who saw it first (a row sent before a later statement of a transaction
/// block fails, a `DO` block or function that raises after the call, a notice from an
/// expression around it, a serialization failure at commit) holds numbers that will be handed
/// out to servers. `PreventInTransactionBlock` refuses blocks and subtransactions, and makes the
/// extended protocol commit right after this statement rather than at its Sync.
pub fn refuse_unless_committed_alone(fcinfo: pg_sys::FunctionCallInfo, caller: &'static std::ffi::CStr, form: &str, answer: &str) {
    // SAFETY: checks the current transaction; raises an ERROR in a block or a subtransaction.
    unsafe { pg_sys::PreventInTransactionBlock(true, caller.as_ptr()) };
    // SAFETY: reads the active portal's plan, valid while it runs, and this call's fcinfo.
    let alone = unsafe { is_whole_top_level_statement(fcinfo) };
    // SAFETY: reads the transaction's isolation level.
    let serializable = unsafe { pg_sys::XactIsoLevel } == pg_sys::XACT_SERIALIZABLE as i32;
    if !alone || serializable {
        crate::errors::raise(
            PgSqlErrorCode::ERRCODE_ACTIVE_SQL_TRANSACTION,
            format!("{} must be called alone, as a statement and transaction of its own", caller.to_string_lossy()),
            Some(if serializable {
                format!("At isolation level SERIALIZABLE its commit could fail after {answer} was seen.")
            } else {
                format!("Only SELECT … FROM {form}, with no other expression, function or statement around it, is accepted: {answer} is the caller's only once that statement committed.")
            }),
            None,
        );
    }
}

/// Whether this call is the one function of the top-level statement's plan: a SELECT whose plan
/// is a single function scan of it with constant or parameter arguments, plain columns and no
/// filter, subplan or init plan. (Not seen: an Execute message with a row limit, which suspends
/// the portal after the row; PostgreSQL no longer records the limit in the portal.) A nested call (from a function or `DO` block) has its own
/// expression node, never the top-level plan's.
///
/// # Safety
/// `fcinfo` is this call's; the active portal's statements are valid while it runs.
unsafe fn is_whole_top_level_statement(fcinfo: pg_sys::FunctionCallInfo) -> bool {
    use pg_sys::NodeTag::*;
    // SAFETY: the caller's promise; every pointer is checked before it is followed.
    unsafe {
        let tag = |node: *const pg_sys::Node| if node.is_null() { T_Invalid } else { (*node).type_ };
        let only = |list: *mut pg_sys::List| -> Option<*mut std::ffi::c_void> {
            (!list.is_null() && (*list).length == 1).then(|| (*(*list).elements).ptr_value)
        };
        let portal = pg_sys::ActivePortal;
        if portal.is_null() || fcinfo.is_null() || (*fcinfo).flinfo.is_null() {
            return false;
        }
        let Some(statement) = only((*portal).stmts).map(|p| p.cast::<pg_sys::PlannedStmt>()) else { return false };
        if tag(statement.cast()) != T_PlannedStmt
            || (*statement).commandType != pg_sys::CmdType::CMD_SELECT
            || !(*statement).subplans.is_null()
            || !(*statement).utilityStmt.is_null()
        {
            return false;
        }
        let plan = (*statement).planTree;
        if tag(plan.cast()) != T_FunctionScan
            || !(*plan).initPlan.is_null()
            || !(*plan).qual.is_null()
            || !(*plan).lefttree.is_null()
            || !(*plan).righttree.is_null()
        {
            return false;
        }
        let target_list = (*plan).targetlist;
        if !target_list.is_null() {
            for i in 0..(*target_list).length as usize {
                let entry = (*(*target_list).elements.add(i)).ptr_value.cast::<pg_sys::TargetEntry>();
                if tag((*entry).expr.cast()) != T_Var {
                    return false;
                }
            }
        }
        let Some(function) = only((*plan.cast::<pg_sys::FunctionScan>()).functions).map(|p| p.cast::<pg_sys::RangeTblFunction>()) else {
            return false;
        };
        let call = (*function).funcexpr;
        if call != (*(*fcinfo).flinfo).fn_expr || tag(call) != T_FuncExpr {
            return false;
        }
        let args = (*call.cast::<pg_sys::FuncExpr>()).args;
        (0..if args.is_null() { 0 } else { (*args).length as usize })
            .all(|i| matches!(tag((*(*args).elements.add(i)).ptr_value.cast()), T_Const | T_Param))
    }
}
