//! Migrating an existing table in one call: `snowflake_convert_column()`,
//! `segment_convert_column()` and `segment_create_from_sequence()`, PL/pgSQL in `migrate.sql`
//! beside this file. They run with the caller's privileges, in the caller's transaction: a call
//! that fails changes nothing (but an advance of the snowflake ids, which comes last). pg_idgen's
//! own functions are reached through the schema `idgen_internal` (see the top of `migrate.sql`).

pgrx::extension_sql_file!(
    "migrate.sql",
    name = "migrate",
    requires = ["snowflake", "segment_tags", "decode", snowflake_next, snowflake_advance_past, segment_create, segment_next, pg_idgen_generators]
);
