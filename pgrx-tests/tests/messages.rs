//! System tests of what pg_idgen's error messages show clients.

use pg_idgen_system_tests::{sqlstate, started_cluster_with_environment};

/// Claim: on a server started with `RUST_BACKTRACE=1` in its environment, ordinary SQL errors raised
/// inside `segment_create()`, `segment_drop()`, `seq_space_create()` and `seq_space_drop()` (a tag
/// created by another transaction meanwhile: 23505; a role without rights on pg_idgen's tables:
/// 42501) reach the client with their own SQLSTATE and DETAIL, and no Rust backtrace in DETAIL
/// (nor in the message or HINT).
#[test]
fn errors_carry_no_rust_backtrace_when_the_server_has_rust_backtrace_set() {
    let cluster = started_cluster_with_environment("backtrace", &[("RUST_BACKTRACE", "1")], &["pg_idgen.node_id = 24"]);
    let mut db = cluster.connect();
    db.batch_execute(
        "SELECT segment_create('taken');
         SELECT seq_space_create('spaced');
         CREATE ROLE unprivileged LOGIN;",
    )
    .unwrap();
    let no_backtrace = |what: &str, error: &postgres::Error| {
        let error = error.as_db_error().unwrap_or_else(|| panic!("{what}: not a server error: {error}"));
        for (part, text) in [("message", Some(error.message())), ("DETAIL", error.detail()), ("HINT", error.hint())] {
            let text = text.unwrap_or_default();
            assert!(
                !text.contains("stack backtrace") && !text.contains("rust_begin_unwind") && !text.contains("   0: "),
                "{what}: a backtrace in the {part}:\n{text}"
            );
        }
    };

    // A tag that another transaction creates meanwhile: segment_create() finds no row, and its
    // INSERT waits for that transaction, then fails on the unique index (a tag committed before
    // the call is refused earlier, with 42710).
    let mut first = cluster.connect();
    first.batch_execute("BEGIN; SELECT segment_create('raced')").unwrap();
    let mut second = cluster.connect();
    let racing = std::thread::spawn(move || second.batch_execute("SELECT segment_create('raced')"));
    std::thread::sleep(std::time::Duration::from_millis(500));
    first.batch_execute("COMMIT").unwrap();
    let duplicate = racing.join().unwrap().expect_err("a tag created meanwhile");
    assert_eq!(sqlstate(&duplicate), "23505", "{duplicate:?}");
    no_backtrace("segment_create() of a tag created meanwhile", &duplicate);
    assert_eq!(duplicate.as_db_error().unwrap().detail(), Some("Key (tag)=(raced) already exists."));

    let mut unprivileged = cluster.connect_as("postgres", "unprivileged");
    for call in
        ["SELECT segment_create('mine')", "SELECT segment_drop('taken')", "SELECT seq_space_create('mine')", "SELECT seq_space_drop('spaced')"]
    {
        let error = unprivileged.batch_execute(call).expect_err("a role without rights on the tables");
        assert_eq!(sqlstate(&error), "42501", "{call}: {error:?}");
        no_backtrace(call, &error);
        assert_eq!(error.as_db_error().unwrap().detail(), None, "{call}");
    }
}
