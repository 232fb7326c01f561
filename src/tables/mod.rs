//! pg_idgen's own tables as its code reaches them: the segment tags, the spaces and sections of
//! per-key sequences.
//!
//! - A table is found through the catalogs (the relation of that name that belongs to extension
//!   pg_idgen), never by a name on the search path, and found again on every use: the schema may
//!   be renamed, the extension dropped and created again.
//! - Calls look a row up with an index scan through the C API (`with_row`): no SQL, no search
//!   path, no transaction id (so it works in parallel workers and read-only transactions), and a
//!   locked table makes it wait at most `pg_idgen.segment_wait_timeout`.
//! - SQL that pg_idgen does run (the worker's allocations and raises, creating and dropping tags
//!   and spaces) names every object with its schema and runs with `search_path = pg_catalog,
//!   pg_temp`: a database owner cannot plant an operator or function that pg_idgen's SQL would
//!   call. The tables' names are pasted into that SQL, and a schema's owner could rename schemas so
//!   that a name means another table by the time the statement is parsed; so while pg_idgen's
//!   statement is analysed, a hook checks that every relation it names is one of the tables found
//!   by their OIDs, and refuses it before it can run otherwise.
//! - Which triggers fire on that SQL, and with whose rights it runs, `Run` says: the worker's
//!   allocations and raises fire only the triggers the tables' owner enabled ALWAYS or REPLICA; a
//!   change a caller asked for keeps the foreign keys of other tables in force, and is refused
//!   while a trigger the owner did not enable ALWAYS would run with the caller's privileges.
//! - Arguments that name a tag or a space are their bytes in the database's encoding
//!   (`TextBytes`): they need not be UTF-8.
//!
//! `catalog`: finding a table and reading a row; `guard`: running pg_idgen's SQL on its tables;
//! `text`: tags and names as bytes, in arguments, results and messages, and their check; `tuple`:
//! a row's columns read by name and type.

mod catalog;
mod guard;
mod text;
mod tuple;

pub use catalog::{extension_table_oid, lock_until, row_inserted_here, with_latest_snapshot, with_row};
pub use guard::{as_own, install_analysis_guard, run_on_tables, Run};
pub use text::{display, text_arg, Name, TextBytes, TextOut, MAX_NAME_LEN};
pub use tuple::{Owner, Row};
