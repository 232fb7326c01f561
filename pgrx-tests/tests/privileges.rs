//! System test of what a database owner who is not a superuser can make pg_idgen do.

use std::thread;
use std::time::{Duration, Instant};

use pg_idgen_system_tests::{scaled, sqlstate, started_cluster, Client};

/// Everything pg_idgen's SQL uses, planted by the owner in `public` under the same name and
/// argument types: each logs its call and, if run by a superuser, makes the owner a superuser.
const PLANTS: &str = r#"
CREATE TABLE public.planted_calls (what text, by_user name);
GRANT INSERT ON public.planted_calls TO PUBLIC;
CREATE FUNCTION public.plant_hit(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.planted_calls VALUES (what, current_user);
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE owner SUPERUSER';
    END IF;
END $$;
CREATE FUNCTION public.quote_ident(name) RETURNS text LANGUAGE plpgsql AS
    $$ BEGIN PERFORM public.plant_hit('quote_ident(name)'); RETURN pg_catalog.quote_ident($1::text); END $$;
CREATE FUNCTION public.quote_ident(text) RETURNS text LANGUAGE plpgsql AS
    $$ BEGIN PERFORM public.plant_hit('quote_ident(text)'); RETURN pg_catalog.quote_ident($1); END $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS
    $$ BEGIN PERFORM public.plant_hit('now()'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION public.greatest(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS
    $$ BEGIN PERFORM public.plant_hit('greatest'); RETURN 1; END $$;
CREATE FUNCTION public.int8(integer) RETURNS bigint LANGUAGE plpgsql AS
    $$ BEGIN PERFORM public.plant_hit('int8(integer)'); RETURN $1; END $$;
CREATE FUNCTION public.planted_texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS
    $$ BEGIN PERFORM public.plant_hit('text = text'); RETURN pg_catalog.texteq($1, $2); END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_texteq);
CREATE FUNCTION public.planted_int8pl(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS
    $$ BEGIN PERFORM public.plant_hit('bigint + bigint'); RETURN pg_catalog.int8pl($1, $2); END $$;
CREATE OPERATOR public.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.planted_int8pl);
CREATE FUNCTION public.planted_int8mi(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS
    $$ BEGIN PERFORM public.plant_hit('bigint - bigint'); RETURN pg_catalog.int8mi($1, $2); END $$;
CREATE OPERATOR public.- (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.planted_int8mi);
CREATE FUNCTION public.planted_int84pl(bigint, integer) RETURNS bigint LANGUAGE plpgsql AS
    $$ BEGIN PERFORM public.plant_hit('bigint + integer'); RETURN pg_catalog.int84pl($1, $2); END $$;
CREATE OPERATOR public.+ (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = public.planted_int84pl);
CREATE FUNCTION public.planted_int8ge(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS
    $$ BEGIN PERFORM public.plant_hit('bigint >= bigint'); RETURN pg_catalog.int8ge($1, $2); END $$;
CREATE OPERATOR public.>= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.planted_int8ge);
-- The owner may also reorder the search path of every session in the database, the worker's
-- included.
ALTER DATABASE app SET search_path = public, pg_catalog;
"#;

/// What else the owner may set for every session of the database: commits asynchronous,
/// transactions read-only, and the role sessions run as (which would make the superuser worker
/// run as the owner).
const SETTINGS: &str = "ALTER DATABASE app SET synchronous_commit = off;
    ALTER DATABASE app SET default_transaction_read_only = on;
    ALTER DATABASE app SET session_authorization = owner;
    ALTER DATABASE app SET role = owner;";

fn planted_calls(db: &mut Client) -> Vec<String> {
    db.query("SELECT what || ' by ' || by_user FROM public.planted_calls", &[]).unwrap().iter().map(|r| r.get(0)).collect()
}

/// Restarts the worker, so that it connects with the database's current settings: returns once
/// another process has taken the terminated one's place (the postmaster starts it after 1 s).
fn restart_worker(db: &mut Client) {
    // (0 when the worker has not connected yet: then any worker that connects will do.)
    let old: i32 =
        db.query_one("SELECT coalesce(max(pid), 0) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'pg_idgen worker'", &[]).unwrap().get(0);
    db.batch_execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'pg_idgen worker'").unwrap();
    let deadline = Instant::now() + scaled(Duration::from_secs(10));
    let new = "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'pg_idgen worker' AND pid <> $1";
    while db.query_one(new, &[&old]).unwrap().get::<_, i64>(0) == 0 {
        assert!(Instant::now() < deadline, "no new worker after {:?}", scaled(Duration::from_secs(10)));
        thread::sleep(Duration::from_millis(50));
    }
}

/// As a superuser, in a session with the database's settings: creates a tag, takes 5,000 of its
/// numbers (500 ranges of 10, each allocated by the worker) and drops it; returns how many distinct.
fn use_segments(db: &mut Client, tag: &str) -> i64 {
    // (Statements of their own: a batch is one transaction, maybe begun read-only. This session
    // takes back what the database's settings changed of it; the worker must do so by itself.)
    for reset in ["SET SESSION AUTHORIZATION postgres", "SET ROLE NONE", "SET default_transaction_read_only = off"] {
        db.batch_execute(reset).unwrap();
    }
    db.execute("SELECT segment_create($1, step => 10)", &[&tag]).unwrap();
    let distinct: i64 = db.query_one("SELECT count(DISTINCT segment_next($1)) FROM generate_series(1, 5000)", &[&tag]).unwrap().get(0);
    db.execute("SELECT segment_drop($1)", &[&tag]).unwrap();
    distinct
}

/// Claim: the owner of pg_idgen.database, not a superuser, plants in `public` functions and
/// operators named like everything pg_idgen's SQL uses and puts `public` first on the database's
/// search path; then the pg_idgen worker (a superuser session, restarted to take the database's
/// settings) allocates ranges and a superuser runs segment_create, segment_next and segment_drop.
/// No planted object is ever called, the owner stays a non-superuser, and the numbers are right.
/// Then the owner makes the database's commits asynchronous, its transactions read-only and its
/// sessions run as the owner: the worker still allocates, as the superuser it connected as.
#[test]
fn a_database_owner_cannot_plant_code_that_pg_idgen_runs() {
    let cluster = started_cluster("privileges", &["pg_idgen.database = 'app'", "pg_idgen.segment_max_step = 10"]);
    let mut postgres = cluster.connect();
    postgres.batch_execute("CREATE ROLE owner LOGIN").unwrap();
    postgres.batch_execute("CREATE DATABASE app OWNER owner").unwrap();
    cluster.connect_to("app").batch_execute("CREATE EXTENSION pg_idgen").unwrap();
    let mut owner = cluster.connect_as("app", "owner");
    owner.batch_execute(PLANTS).unwrap();
    restart_worker(&mut postgres);

    let mut superuser = cluster.connect_to("app");
    let path: String = superuser.query_one("SHOW search_path", &[]).unwrap().get(0);
    assert_eq!(path, "public, pg_catalog", "the superuser's session runs with the owner's path");
    assert_eq!(use_segments(&mut superuser, "p"), 5000);
    assert_eq!(planted_calls(&mut superuser), Vec::<String>::new(), "pg_idgen called a planted object");
    let owner_is_superuser: bool = owner.query_one("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'owner'", &[]).unwrap().get(0);
    assert!(!owner_is_superuser, "the owner became a superuser");

    owner.batch_execute(SETTINGS).unwrap();
    restart_worker(&mut postgres);
    assert_eq!(use_segments(&mut cluster.connect_to("app"), "q"), 5000, "the worker allocates despite the database's settings");
}

/// Claim: the owner of pg_idgen.database swaps the extension's schema with a schema of their own
/// holding a look-alike `segment_tag` (renaming both, over and over, for 15 s) while the worker
/// allocates ranges and a superuser creates and drops tags. The look-alike's triggers, which would
/// make the owner a superuser, never run: a statement of pg_idgen's that the swap made name the
/// look-alike is refused before it runs.
#[test]
fn a_schema_swapped_under_pg_idgen_never_runs_the_owners_code() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let cluster =
        started_cluster("privileges-swap", &["pg_idgen.database = 'app'", "pg_idgen.segment_max_step = 10", "pg_idgen.segment_wait_timeout = 500"]);
    let mut postgres = cluster.connect();
    postgres.batch_execute("CREATE ROLE owner LOGIN").unwrap();
    postgres.batch_execute("CREATE DATABASE app OWNER owner").unwrap();
    let mut superuser = cluster.connect_to("app");
    superuser.batch_execute("CREATE EXTENSION pg_idgen").unwrap();
    superuser.batch_execute("SELECT segment_create('swap', step => 10)").unwrap();
    let mut owner = cluster.connect_as("app", "owner");
    owner
        .batch_execute(
            r#"CREATE SCHEMA stash;
               CREATE TABLE stash.planted_calls (what text, by_user name);
               GRANT USAGE ON SCHEMA stash TO PUBLIC;
               GRANT INSERT ON stash.planted_calls TO PUBLIC;
               CREATE FUNCTION stash.hit() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN
                   INSERT INTO stash.planted_calls VALUES (TG_OP, current_user);
                   IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
                       EXECUTE 'ALTER ROLE owner SUPERUSER';
                   END IF;
                   RETURN NULL;
               END $$;
               CREATE SCHEMA decoy;
               GRANT USAGE ON SCHEMA decoy TO PUBLIC;
               CREATE TABLE decoy.segment_tag (tag text PRIMARY KEY, max_id bigint, step int, description text, updated_at timestamptz);
               INSERT INTO decoy.segment_tag VALUES ('swap', 0, 1, NULL, now());
               GRANT ALL ON decoy.segment_tag TO PUBLIC;
               CREATE TRIGGER hit BEFORE INSERT OR UPDATE OR DELETE ON decoy.segment_tag
                   FOR EACH STATEMENT EXECUTE FUNCTION stash.hit();"#,
        )
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut swaps = 0;
            while !stop.load(Ordering::Relaxed) {
                owner
                    .batch_execute(
                        "BEGIN; ALTER SCHEMA public RENAME TO swapping; ALTER SCHEMA decoy RENAME TO public; COMMIT;
                         BEGIN; ALTER SCHEMA public RENAME TO decoy; ALTER SCHEMA swapping RENAME TO public; COMMIT;",
                    )
                    .unwrap();
                swaps += 1;
                thread::sleep(Duration::from_millis(2));
            }
            swaps
        })
    };
    // Calls resolve segment_next by name, which the swap moves away now and then: errors are
    // expected; what counts is what runs.
    let mut taken = 0;
    let started = Instant::now();
    let mut taker = cluster.connect_to("app");
    while started.elapsed() < Duration::from_secs(15) {
        if taker.query_one("SELECT segment_next('swap')", &[]).is_ok() {
            taken += 1;
        }
        let _ = superuser.batch_execute("SELECT segment_create('other'); SELECT segment_drop('other')");
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 100 && taken > 100, "{swaps} swaps, {taken} numbers taken");

    let mut check = cluster.connect_to("app");
    let calls: Vec<String> =
        check.query("SELECT what || ' by ' || by_user FROM stash.planted_calls", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(calls, Vec::<String>::new(), "the look-alike table's trigger ran");
    let owner_is_superuser: bool = check.query_one("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'owner'", &[]).unwrap().get(0);
    assert!(!owner_is_superuser, "the owner became a superuser");
    // How often the swap hit the moment between naming the table and parsing (for the record).
    let refused = cluster.log().matches("names another relation").count();
    println!("{swaps} swaps, {taken} numbers taken, {refused} statements refused (in the log)");
}

/// The pg_idgen worker's process id (one worker: pg_idgen.database's).
fn worker_pid(db: &mut Client) -> i32 {
    db.query_one("SELECT pid FROM pg_catalog.pg_stat_activity WHERE backend_type = 'pg_idgen worker'", &[]).unwrap().get(0)
}

/// Claim: a role the superuser granted every privilege on the tag table (TRIGGER included), not
/// its owner, adds a row trigger to `segment_tag` that would make the grantee a superuser and
/// hold every tag back; the worker allocates 500 ranges and the trigger never runs in it. Then
/// the database's owner sets `exit_on_error = on` for the database, and the worker, restarted
/// with it, cannot lock a tag row held by a session (an error it catches): it retries and serves the tag
/// once the row is free, and is still the same process (the error did not become an exit).
#[test]
fn a_trigger_added_by_a_grantee_never_runs_in_the_worker() {
    let cluster = started_cluster("privileges-grantee", &["pg_idgen.database = 'app'", "pg_idgen.segment_max_step = 10"]);
    let mut postgres = cluster.connect();
    postgres.batch_execute("CREATE ROLE owner LOGIN").unwrap();
    postgres.batch_execute("CREATE DATABASE app OWNER owner").unwrap();
    let mut superuser = cluster.connect_to("app");
    superuser.batch_execute("CREATE EXTENSION pg_idgen").unwrap();
    superuser.batch_execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO owner").unwrap();
    let mut owner = cluster.connect_as("app", "owner");
    owner
        .batch_execute(
            r#"CREATE TABLE public.planted_calls (what text, by_user name);
               GRANT INSERT ON public.planted_calls TO PUBLIC;
               CREATE FUNCTION public.hold_back() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN
                   INSERT INTO public.planted_calls VALUES (TG_OP, current_user);
                   IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
                       EXECUTE 'ALTER ROLE owner SUPERUSER';
                   END IF;
                   NEW.max_id := OLD.max_id;
                   RETURN NEW;
               END $$;
               CREATE TRIGGER hold_back BEFORE UPDATE ON public.segment_tag
                   FOR EACH ROW EXECUTE FUNCTION public.hold_back();"#,
        )
        .unwrap();

    assert_eq!(use_segments(&mut superuser, "t"), 5000);
    assert_eq!(planted_calls(&mut superuser), Vec::<String>::new(), "the grantee's trigger ran");
    let owner_is_superuser: bool = owner.query_one("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'owner'", &[]).unwrap().get(0);
    assert!(!owner_is_superuser, "the owner became a superuser");

    owner.batch_execute("ALTER DATABASE app SET exit_on_error = on").unwrap();
    restart_worker(&mut postgres);
    let worker = worker_pid(&mut postgres);
    superuser.batch_execute("SET exit_on_error = off; SELECT segment_create('locked', step => 10)").unwrap();
    let mut holder = cluster.connect_to("app");
    holder.batch_execute("SET exit_on_error = off; BEGIN; SELECT * FROM public.segment_tag WHERE tag = 'locked' FOR UPDATE").unwrap();
    let mut taker = cluster.connect_to("app");
    taker.batch_execute("SET exit_on_error = off").unwrap();
    let waiter = thread::spawn(move || taker.query_one("SELECT segment_next('locked')", &[]).unwrap().get::<_, i64>(0));
    // Until the worker has met the locked row (the error it must catch), and a moment for more tries.
    let deadline = Instant::now() + scaled(Duration::from_secs(10));
    while !cluster.log().contains("could not allocate a range for segment tag \"locked\"") {
        assert!(Instant::now() < deadline, "the worker never met the locked row the claim is about");
        thread::sleep(Duration::from_millis(50));
    }
    thread::sleep(Duration::from_millis(500));
    holder.batch_execute("COMMIT").unwrap();
    let first = waiter.join().unwrap();
    assert_eq!(first, 1);
    assert_eq!(worker_pid(&mut cluster.connect()), worker, "the worker exited on a caught error");
    assert!(
        cluster.log().contains("could not allocate a range for segment tag \"locked\""),
        "the worker never met the locked row the claim is about"
    );
}

/// A cluster whose database `app` belongs to `owner`, not a superuser, with pg_idgen in `public`
/// and, in a superuser's schema `data`, two serial tables to convert (`orders.id`, `invoices.no`).
/// Returns the cluster and a superuser's session in `app`.
fn app_with_tables_to_convert(name: &str) -> (pg_idgen_system_tests::Cluster, Client) {
    let cluster = started_cluster(name, &["pg_idgen.database = 'app'", "pg_idgen.node_id = 5"]);
    let mut postgres = cluster.connect();
    postgres.batch_execute("CREATE ROLE owner LOGIN").unwrap();
    postgres.batch_execute("CREATE DATABASE app OWNER owner").unwrap();
    let mut superuser = cluster.connect_to("app");
    superuser
        .batch_execute(
            "CREATE EXTENSION pg_idgen;
             CREATE SCHEMA data;
             CREATE TABLE data.orders (id serial PRIMARY KEY);
             CREATE TABLE data.invoices (no serial PRIMARY KEY);
             INSERT INTO data.orders DEFAULT VALUES;
             INSERT INTO data.invoices DEFAULT VALUES;",
        )
        .unwrap();
    (cluster, superuser)
}

/// As the database's owner: renames `public` (pg_idgen's schema) to `ext`, creates a new `public`
/// with the look-alikes of `PLANTS`, and functions named like every pg_idgen function a conversion
/// called in 0.6.0, also an overload with text arguments; each records its call.
fn plant_migration_lookalikes(owner: &mut Client) {
    owner.batch_execute("ALTER SCHEMA public RENAME TO ext; CREATE SCHEMA public;").unwrap();
    owner.batch_execute(PLANTS).unwrap();
    // (signature, result, the body's RETURN)
    for (signature, result, give_back) in [
        ("snowflake_next()", "bigint", "RETURN 1;"),
        ("snowflake_advance_past(bigint)", "void", "RETURN;"),
        ("segment_next(text)", "bigint", "RETURN 1;"),
        ("segment_create(text, bigint, integer, text)", "void", "RETURN;"),
        ("pg_idgen_generators()", "void", "RETURN;"),
        ("pg_idgen_require_segments(text)", "void", "RETURN;"),
        ("pg_idgen_require_ascending(regclass)", "void", "RETURN;"),
        ("pg_idgen_stop_sequence(regclass)", "void", "RETURN;"),
        ("pg_idgen_convert_column(regclass, name, text, text, integer)", "void", "RETURN;"),
        ("pg_idgen_convert_column(regclass, name, text, text, text)", "void", "RETURN;"),
    ] {
        owner
            .batch_execute(&format!(
                "CREATE FUNCTION public.{signature} RETURNS {result} LANGUAGE plpgsql AS
                     $$ BEGIN PERFORM public.plant_hit('{signature}'); {give_back} END $$;"
            ))
            .unwrap();
    }
}

/// Claim: the owner of a database, not a superuser, renames `public` (which holds pg_idgen) away
/// and creates a new `public` with functions named like every pg_idgen function the migration
/// calls, also overloads with text arguments; then a superuser converts a serial column to
/// snowflake ids and another to a segment tag. No planted function runs, the owner stays a
/// non-superuser, and the new defaults call pg_idgen's own generators.
#[test]
fn a_renamed_extension_schema_does_not_let_the_owner_plant_the_migrations_calls() {
    let (cluster, mut superuser) = app_with_tables_to_convert("privileges-migrate");
    let mut owner = cluster.connect_as("app", "owner");
    plant_migration_lookalikes(&mut owner);

    superuser.batch_execute("SELECT ext.snowflake_convert_column('data.orders', 'id')").unwrap();
    superuser.batch_execute("SELECT ext.segment_convert_column('data.invoices', 'no', 'invoices')").unwrap();
    assert_eq!(planted_calls(&mut superuser), Vec::<String>::new(), "the migration called a planted function");
    let owner_is_superuser: bool = owner.query_one("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'owner'", &[]).unwrap().get(0);
    assert!(!owner_is_superuser, "the owner became a superuser");
    let row = superuser
        .query_one(
            "SELECT (SELECT count(*) FROM pg_catalog.pg_depend AS d
                      JOIN pg_catalog.pg_attrdef AS ad ON ad.oid = d.objid
                     WHERE d.classid = 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                       AND d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                       AND ad.adrelid IN ('data.orders'::pg_catalog.regclass, 'data.invoices'::pg_catalog.regclass)
                       AND d.refobjid IN (SELECT m.objid FROM pg_catalog.pg_depend AS m
                                           WHERE m.refobjid = (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'pg_idgen')
                                             AND m.deptype = 'e'))",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 2, "both new defaults call the extension's own functions");
    let id: i64 = superuser.query_one("INSERT INTO data.orders DEFAULT VALUES RETURNING id", &[]).unwrap().get(0);
    assert!(id > 1 << 40, "a new order gets a snowflake id, not a planted one: {id}");
}

/// Claim: while a superuser's conversions wait for a lock on their table (another session holds
/// it), the owner of the database — a second session that waits until `pg_locks` shows the
/// conversion waiting — renames `public`, which holds pg_idgen, creates a new `public` and plants
/// functions with every signature the conversions call. No planted function runs, the owner stays
/// a non-superuser, and both new defaults call pg_idgen's own generators. (0.6.0 read the schema's
/// name before the wait and called the planted functions after it, as the superuser.)
#[test]
fn a_schema_renamed_while_a_conversion_waits_never_runs_the_owners_code() {
    let (cluster, mut superuser) = app_with_tables_to_convert("privileges-rename-wait");
    let mut postgres = cluster.connect();
    let orders: u32 = superuser.query_one("SELECT 'data.orders'::regclass::oid", &[]).unwrap().get(0);
    let invoices: u32 = superuser.query_one("SELECT 'data.invoices'::regclass::oid", &[]).unwrap().get(0);
    let mut holder = cluster.connect_to("app");
    holder.batch_execute("BEGIN; LOCK TABLE data.orders, data.invoices IN ACCESS SHARE MODE").unwrap();

    // One statement, its functions resolved before the rename: both conversions wait on the lock.
    let converting = thread::spawn(move || {
        superuser
            .batch_execute(&format!(
                "SELECT public.snowflake_convert_column({orders}::pg_catalog.oid::pg_catalog.regclass, 'id'),
                        public.segment_convert_column({invoices}::pg_catalog.oid::pg_catalog.regclass, 'no', 'invoices')"
            ))
            .map_err(|e| format!("{e:?}"))
    });
    let deadline = Instant::now() + scaled(Duration::from_secs(20));
    loop {
        let waiting: i64 = postgres
            .query_one("SELECT count(*) FROM pg_catalog.pg_locks WHERE relation = $1 AND NOT granted", &[&postgres::types::Oid::from(orders)])
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the conversion never waited for the lock");
        thread::sleep(Duration::from_millis(20));
    }
    let mut owner = cluster.connect_as("app", "owner");
    plant_migration_lookalikes(&mut owner);
    holder.batch_execute("COMMIT").unwrap();
    let converted = converting.join().unwrap();

    let mut check = cluster.connect_to("app");
    assert_eq!(planted_calls(&mut check), Vec::<String>::new(), "the conversion called a planted function");
    let owner_is_superuser: bool = check.query_one("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'owner'", &[]).unwrap().get(0);
    assert!(!owner_is_superuser, "the owner became a superuser");
    assert_eq!(converted, Ok(()), "the conversions ran");
    let defaults: Vec<String> = check
        .query(
            "SELECT d.refobjid::pg_catalog.regprocedure::text FROM pg_catalog.pg_depend AS d
               JOIN pg_catalog.pg_attrdef AS ad ON ad.oid = d.objid
              WHERE d.classid = 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                AND d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                AND ad.adrelid IN ($1, $2)
              ORDER BY 1",
            &[&postgres::types::Oid::from(orders), &postgres::types::Oid::from(invoices)],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(defaults, ["ext.segment_next(text)", "ext.snowflake_next()"], "the new defaults call pg_idgen's own generators");
    let id: i64 = check.query_one("INSERT INTO data.orders DEFAULT VALUES RETURNING id", &[]).unwrap().get(0);
    assert!(id > 1 << 40, "a new order gets a snowflake id, not a planted one: {id}");
}

/// Claim: a role granted every privilege on `segment_tag` and `node_lease` (TRIGGER included),
/// not their owner, adds row triggers to both that would make it a superuser; a superuser's
/// `segment_create()`, `segment_drop()` and conversion of a column to a tag (which creates one)
/// are refused (55000, naming the trigger), and succeed once the table's owner has disabled it;
/// the registry's functions run with `session_replication_role = replica`. The grantee's
/// triggers never run.
#[test]
fn a_trigger_added_by_a_grantee_never_runs_as_the_superuser_who_manages_tags() {
    let cluster = started_cluster("privileges-grantee-tags", &["pg_idgen.database = 'app'"]);
    let mut postgres = cluster.connect();
    postgres.batch_execute("CREATE ROLE owner LOGIN").unwrap();
    postgres.batch_execute("CREATE DATABASE app OWNER owner").unwrap();
    let mut superuser = cluster.connect_to("app");
    superuser
        .batch_execute(
            "CREATE EXTENSION pg_idgen;
             GRANT ALL ON public.segment_tag, public.node_lease TO owner;
             CREATE SCHEMA data;
             CREATE TABLE data.tickets (no serial PRIMARY KEY);",
        )
        .unwrap();
    let mut owner = cluster.connect_as("app", "owner");
    owner
        .batch_execute(
            r#"CREATE TABLE public.planted_calls (what text, by_user name);
               GRANT INSERT ON public.planted_calls TO PUBLIC;
               CREATE FUNCTION public.escalate() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN
                   INSERT INTO public.planted_calls VALUES (TG_TABLE_NAME || ' ' || TG_OP, current_user);
                   IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
                       EXECUTE 'ALTER ROLE owner SUPERUSER';
                   END IF;
                   RETURN COALESCE(NEW, OLD);
               END $$;
               CREATE TRIGGER escalate BEFORE INSERT OR UPDATE OR DELETE ON public.segment_tag
                   FOR EACH ROW EXECUTE FUNCTION public.escalate();
               CREATE TRIGGER escalate BEFORE INSERT OR UPDATE OR DELETE ON public.node_lease
                   FOR EACH ROW EXECUTE FUNCTION public.escalate();"#,
        )
        .unwrap();
    // The trigger works: a plain insert by the grantee fires it.
    owner.batch_execute("INSERT INTO public.segment_tag (tag, max_id, step) VALUES ('probe', 0, 10)").unwrap();
    assert_eq!(planted_calls(&mut superuser), ["segment_tag INSERT by owner"]);
    owner.batch_execute("DELETE FROM public.planted_calls").unwrap();

    let calls = [
        "SELECT public.segment_create('made', 1, 10)",
        "SELECT public.segment_drop('probe')",
        "SELECT public.segment_convert_column('data.tickets', 'no', 'tickets')",
    ];
    for call in calls {
        let error = superuser.batch_execute(call).expect_err(call);
        assert_eq!(sqlstate(&error), "55000", "{call}: {error:?}");
        let message = error.as_db_error().map(|e| e.message().to_string()).unwrap_or_default();
        assert!(message.contains("trigger \"escalate\""), "{call}: {message}");
    }
    assert_eq!(planted_calls(&mut superuser), Vec::<String>::new(), "the grantee's trigger ran as the superuser");
    superuser.batch_execute("ALTER TABLE public.segment_tag DISABLE TRIGGER escalate").unwrap();
    for call in calls {
        superuser.batch_execute(call).unwrap_or_else(|e| panic!("{call}: {e}"));
    }
    assert_eq!(planted_calls(&mut superuser), Vec::<String>::new(), "the grantee's trigger ran as the superuser");
    let owner_is_superuser: bool = owner.query_one("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'owner'", &[]).unwrap().get(0);
    assert!(!owner_is_superuser, "the owner became a superuser");
    // The registry's functions (their callers are other servers' lease workers): pinned likewise.
    let pinned: i64 = superuser
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_proc
              WHERE proname IN ('pg_idgen_node_lease_take', 'pg_idgen_node_lease_renew')
                AND 'session_replication_role=replica' = ANY (proconfig)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(pinned, 2, "both registry functions run with session_replication_role = replica");
}
