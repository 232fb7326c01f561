//! Another PostgreSQL server, reached with libpq as postgres_fdw and dblink reach theirs: users
//! keep their connection strings, service files, `.pgpass` and TLS. Only background workers use
//! it, never a backend's call, and never under a lock or inside a transaction of their own.
//!
//! Every step has a deadline: connecting and each statement run on a non-blocking connection
//! that is polled in short slices, so a server that does not answer (down, frozen, behind a
//! firewall that drops packets) costs at most `pg_idgen.remote_timeout`, and a worker told to
//! stop stops within a slice. A connection whose statement timed out is dropped, never reused:
//! its answer may still arrive.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
use std::time::{Duration, Instant};

pub use crate::shmem::RemoteStatus;
use crate::shmem::REMOTE_MESSAGE_BYTES;

/// The longest one wait on the socket lasts before the caller's `stop` is asked again.
const POLL_SLICE: Duration = Duration::from_millis(100);

#[repr(C)]
struct PGconn {
    _opaque: [u8; 0],
}
#[repr(C)]
struct PGresult {
    _opaque: [u8; 0],
}
#[repr(C)]
struct PQconninfoOption {
    keyword: *mut c_char,
    envvar: *mut c_char,
    compiled: *mut c_char,
    val: *mut c_char,
    label: *mut c_char,
    dispchar: *mut c_char,
    dispsize: c_int,
}

// libpq-fe.h, the functions and constants used here.
const CONNECTION_OK: c_int = 0;
const PGRES_POLLING_FAILED: c_int = 0;
const PGRES_POLLING_READING: c_int = 1;
const PGRES_POLLING_WRITING: c_int = 2;
const PGRES_POLLING_OK: c_int = 3;
const PGRES_COMMAND_OK: c_int = 1;
const PGRES_TUPLES_OK: c_int = 2;
const PG_DIAG_SQLSTATE: c_int = b'C' as c_int;
const PG_DIAG_MESSAGE_PRIMARY: c_int = b'M' as c_int;

unsafe extern "C" {
    fn PQconnectStartParams(keywords: *const *const c_char, values: *const *const c_char, expand_dbname: c_int) -> *mut PGconn;
    fn PQconnectPoll(conn: *mut PGconn) -> c_int;
    fn PQstatus(conn: *const PGconn) -> c_int;
    fn PQsocket(conn: *const PGconn) -> c_int;
    fn PQerrorMessage(conn: *const PGconn) -> *const c_char;
    fn PQfinish(conn: *mut PGconn);
    fn PQsetnonblocking(conn: *mut PGconn, arg: c_int) -> c_int;
    fn PQsendQueryParams(
        conn: *mut PGconn,
        command: *const c_char,
        n_params: c_int,
        param_types: *const u32,
        param_values: *const *const c_char,
        param_lengths: *const c_int,
        param_formats: *const c_int,
        result_format: c_int,
    ) -> c_int;
    fn PQflush(conn: *mut PGconn) -> c_int;
    fn PQconsumeInput(conn: *mut PGconn) -> c_int;
    fn PQisBusy(conn: *mut PGconn) -> c_int;
    fn PQgetResult(conn: *mut PGconn) -> *mut PGresult;
    fn PQresultStatus(res: *const PGresult) -> c_int;
    fn PQresultErrorMessage(res: *const PGresult) -> *const c_char;
    fn PQresultErrorField(res: *const PGresult, fieldcode: c_int) -> *const c_char;
    fn PQntuples(res: *const PGresult) -> c_int;
    fn PQnfields(res: *const PGresult) -> c_int;
    fn PQgetisnull(res: *const PGresult, row: c_int, column: c_int) -> c_int;
    fn PQgetvalue(res: *const PGresult, row: c_int, column: c_int) -> *const c_char;
    fn PQclear(res: *mut PGresult);
    fn PQconninfoParse(conninfo: *const c_char, errmsg: *mut *mut c_char) -> *mut PQconninfoOption;
    fn PQconninfoFree(options: *mut PQconninfoOption);
    fn PQfreemem(ptr: *mut c_void);
}

/// Why a remote call failed.
#[derive(Debug)]
pub enum RemoteError {
    /// No connection, or it broke, or the deadline passed: the server may not have seen the
    /// statement, or may have run it.
    Unreachable(String),
    /// The server ran the statement and raised an error: its SQLSTATE and message.
    Refused { sqlstate: String, message: String },
    /// The caller was told to stop while waiting.
    Stopped,
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteError::Unreachable(message) => write!(f, "{message}"),
            RemoteError::Refused { sqlstate, message } => write!(f, "{message} (SQLSTATE {sqlstate})"),
            RemoteError::Stopped => write!(f, "stopped while waiting"),
        }
    }
}

impl RemoteStatus {
    /// Records a call that succeeded.
    pub fn succeeded(&self) {
        self.failures_in_a_row.store(0, Relaxed);
        self.succeeded_at_us.store(crate::clock::wall_unix_micros(), Relaxed);
        self.set_message("");
    }

    /// Records a call that failed; returns how many failed in a row. Only a server that could
    /// not be reached (`unreachable`) counts against `reachable()`: one that answered with an
    /// error (a lock, a privilege) was reached.
    pub fn failed(&self, message: &str, unreachable: bool) -> u64 {
        self.failures.fetch_add(1, Relaxed);
        self.set_message(message);
        if unreachable {
            self.failures_in_a_row.fetch_add(1, Relaxed) + 1
        } else {
            self.failures_in_a_row.load(Relaxed)
        }
    }

    /// Whether the last call succeeded (and one ever did).
    pub fn reachable(&self) -> bool {
        self.failures_in_a_row.load(Relaxed) == 0 && self.succeeded_at_us.load(Relaxed) != 0
    }

    /// The last failure's message ("" when the last call succeeded).
    pub fn last_message(&self) -> String {
        loop {
            let version = self.message_version.load(Acquire);
            if !version.is_multiple_of(2) {
                std::hint::spin_loop();
                continue;
            }
            let len = (self.message_len.load(Relaxed) as usize).min(REMOTE_MESSAGE_BYTES);
            let bytes: Vec<u8> = self.message[..len].iter().map(|b| b.load(Relaxed)).collect();
            std::sync::atomic::fence(Acquire);
            if self.message_version.load(Relaxed) == version {
                return String::from_utf8_lossy(&bytes).into_owned();
            }
        }
    }

    fn set_message(&self, message: &str) {
        let mut end = message.len().min(REMOTE_MESSAGE_BYTES);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let bytes = &message.as_bytes()[..end];
        // Why a compare-and-swap to an odd version: several workers may write (the segment
        // workers of several databases share the authority's status); one at a time.
        let version = loop {
            let version = self.message_version.load(Acquire);
            if version.is_multiple_of(2) && self.message_version.compare_exchange_weak(version, version + 1, SeqCst, Relaxed).is_ok() {
                break version;
            }
            std::hint::spin_loop();
        };
        for (cell, &byte) in self.message.iter().zip(bytes) {
            cell.store(byte, Relaxed);
        }
        self.message_len.store(bytes.len() as u32, Relaxed);
        self.message_version.store(version + 2, SeqCst);
    }
}

/// A row of text values (NULL: None).
pub type Row = Vec<Option<String>>;

/// Checks a connection string's syntax (the setting's check hook): libpq's own parser, so an
/// unknown keyword or a missing quote stops the server at start instead of every connection.
pub fn check_conninfo(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Ok(());
    }
    let conninfo = CString::new(text).map_err(|_| "It must not contain a zero byte.".to_string())?;
    let mut error: *mut c_char = std::ptr::null_mut();
    // SAFETY: the parser reads the C string; both results are freed with libpq's functions.
    unsafe {
        let options = PQconninfoParse(conninfo.as_ptr(), &mut error);
        if options.is_null() {
            let message = if error.is_null() { "out of memory".into() } else { text_of(error) };
            if !error.is_null() {
                PQfreemem(error.cast());
            }
            return Err(format!("It is not a valid libpq connection string: {}", message.trim_end()));
        }
        PQconninfoFree(options);
    }
    Ok(())
}

/// Where a connection string points, for messages and status: host, port and database, never
/// the password or any other option.
pub fn describe_conninfo(text: &str) -> String {
    let Some(options) = parsed_options(text) else { return "?".into() };
    let parts: Vec<String> = options
        .iter()
        .filter(|(keyword, _)| ["host", "hostaddr", "port", "dbname", "service"].contains(&keyword.as_str()))
        .map(|(keyword, value)| format!("{keyword}={value}"))
        .collect();
    if parts.is_empty() { "(libpq defaults)".into() } else { parts.join(" ") }
}

/// The options a connection string sets, in libpq's order, or None when libpq cannot parse it.
fn parsed_options(text: &str) -> Option<Vec<(String, String)>> {
    let conninfo = CString::new(text).ok()?;
    let mut error: *mut c_char = std::ptr::null_mut();
    // SAFETY: as in check_conninfo; the options array ends with a null keyword.
    unsafe {
        let options = PQconninfoParse(conninfo.as_ptr(), &mut error);
        if options.is_null() {
            if !error.is_null() {
                PQfreemem(error.cast());
            }
            return None;
        }
        let mut found = Vec::new();
        let mut option = options;
        while !(*option).keyword.is_null() {
            if !(*option).val.is_null() {
                found.push((text_of((*option).keyword), text_of((*option).val)));
            }
            option = option.add(1);
        }
        PQconninfoFree(options);
        Some(found)
    }
}

/// The `host`, `hostaddr` and `port` lists to connect with: every host of the connection string
/// that is a name (not an address, not a socket directory, without an address of its own in
/// `hostaddr`) looked up here, by `deadline`, with `stop` asked every 100 ms, and listed once per
/// address it has, as libpq would try them. None when there is nothing to look up. Why: libpq
/// looks names up synchronously inside the connect call, so a resolver that does not answer would
/// hold a worker past every deadline and past SIGTERM. Names a service file gives are looked up by
/// libpq (give `hostaddr` there too).
fn host_addresses(conninfo: &str, deadline: Instant, stop: &dyn Fn() -> bool) -> Result<Option<[String; 3]>, RemoteError> {
    let options = parsed_options(conninfo).unwrap_or_default();
    let list = |name: &str| -> Vec<String> {
        options.iter().find(|(keyword, _)| keyword == name).map(|(_, value)| value.split(',').map(String::from).collect()).unwrap_or_default()
    };
    let (hosts, given, ports) = (list("host"), list("hostaddr"), list("port"));
    let lists_fit = (given.is_empty() || given.len() == hosts.len()) && (ports.len() <= 1 || ports.len() == hosts.len());
    if hosts.is_empty() || !lists_fit {
        return Ok(None); // nothing to look up, or lists libpq will refuse itself
    }
    let is_name = |host: &str| !host.is_empty() && !host.starts_with('/') && !host.starts_with('@') && host.parse::<std::net::IpAddr>().is_err();
    if !hosts.iter().enumerate().any(|(i, host)| is_name(host) && given.get(i).is_none_or(String::is_empty)) {
        return Ok(None);
    }
    let mut expanded: [Vec<String>; 3] = Default::default();
    for (i, host) in hosts.iter().enumerate() {
        let port = ports.get(i).or(ports.first().filter(|_| ports.len() == 1)).cloned().unwrap_or_default();
        let address = given.get(i).cloned().unwrap_or_default();
        let addresses = if address.is_empty() && is_name(host) { look_up(host, deadline, stop)? } else { vec![address] };
        for address in addresses {
            for (list, value) in expanded.iter_mut().zip([host.clone(), address, port.clone()]) {
                list.push(value);
            }
        }
    }
    if ports.is_empty() {
        expanded[2].clear(); // libpq's default port for each
    }
    Ok(Some(expanded.map(|list| list.join(","))))
}

/// Look-ups given up on that have not returned yet, at most: a resolver that never answers must
/// not gather threads in a worker that retries for hours.
const MAX_PENDING_LOOK_UPS: usize = 4;
static PENDING_LOOK_UPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A host name's addresses, in the resolver's order, looked up on a thread of its own so that the
/// caller can give up at its deadline or when told to stop (the thread then ends on its own, or
/// with the process).
fn look_up(host: &str, deadline: Instant, stop: &dyn Fn() -> bool) -> Result<Vec<String>, RemoteError> {
    use std::net::{SocketAddr, ToSocketAddrs};
    if PENDING_LOOK_UPS.load(SeqCst) >= MAX_PENDING_LOOK_UPS {
        return Err(RemoteError::Unreachable(format!("could not look up host name \"{host}\": {MAX_PENDING_LOOK_UPS} earlier look-ups have not returned")));
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    let name = host.to_string();
    // Why every signal blocked while the thread starts (it inherits the mask, then the caller's
    // is put back): PostgreSQL's signals must reach the process's main thread, never this one.
    // SAFETY: sets and restores this thread's signal mask; both sets are initialised.
    let spawned = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
        PENDING_LOOK_UPS.fetch_add(1, SeqCst);
        let spawned = std::thread::Builder::new().name("pg_idgen resolver".into()).spawn(move || {
            // An IPv6 link-local address keeps its zone (`%index`), which libpq's hostaddr takes.
            let text = |address: SocketAddr| match address {
                SocketAddr::V6(v6) if v6.scope_id() != 0 => format!("{}%{}", v6.ip(), v6.scope_id()),
                other => other.ip().to_string(),
            };
            let found = (name.as_str(), 0).to_socket_addrs().map(|found| found.map(text).collect::<Vec<_>>());
            PENDING_LOOK_UPS.fetch_sub(1, SeqCst);
            let _ = sender.send(found);
        });
        if spawned.is_err() {
            PENDING_LOOK_UPS.fetch_sub(1, SeqCst);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        spawned
    };
    spawned.map_err(|e| RemoteError::Unreachable(format!("could not look up host name \"{host}\": {e}")))?;
    loop {
        if stop() {
            return Err(RemoteError::Stopped);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(RemoteError::Unreachable(format!("timed out looking up host name \"{host}\" (pg_idgen.remote_timeout)")));
        }
        match receiver.recv_timeout(left.min(POLL_SLICE)) {
            Ok(Ok(found)) => {
                let mut addresses: Vec<String> = Vec::new();
                for address in found {
                    if !addresses.contains(&address) {
                        addresses.push(address);
                    }
                }
                return if addresses.is_empty() { Err(RemoteError::Unreachable(format!("host name \"{host}\" has no address"))) } else { Ok(addresses) };
            }
            Ok(Err(e)) => return Err(RemoteError::Unreachable(format!("could not translate host name \"{host}\" to address: {e}"))),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(RemoteError::Unreachable(format!("could not look up host name \"{host}\"")));
            }
        }
    }
}

/// One open connection; closed when dropped.
pub struct Connection {
    conn: *mut PGconn,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: the connection is ours and used nowhere else.
        unsafe { PQfinish(self.conn) };
    }
}

impl Connection {
    /// Connects to `conninfo` by `deadline`. `application_name` and the read-write target are
    /// defaults the connection string may override; `client_encoding`, when given, is not (text
    /// is sent in that encoding). `stop` is asked between waits.
    pub fn open(
        conninfo: &str,
        application_name: &str,
        client_encoding: Option<&str>,
        deadline: Instant,
        stop: &dyn Fn() -> bool,
    ) -> Result<Connection, RemoteError> {
        let unreachable = |m: String| RemoteError::Unreachable(m);
        let hostaddr = host_addresses(conninfo, deadline, stop)?;
        let values = [
            CString::new(application_name).unwrap_or_default(),
            CString::new("read-write").unwrap_or_default(),
            CString::new(conninfo).map_err(|_| unreachable("the connection string contains a zero byte".into()))?,
            CString::new(client_encoding.unwrap_or("auto")).unwrap_or_default(),
        ];
        let listed = hostaddr.map(|lists| lists.map(|list| CString::new(list).unwrap_or_default()));
        // Why this order: later keywords override earlier ones, and the connection string is
        // expanded in place of dbname; so what it says wins over the defaults before it.
        let mut keywords = vec![c"fallback_application_name".as_ptr(), c"target_session_attrs".as_ptr(), c"dbname".as_ptr()];
        let mut value_ptrs = vec![values[0].as_ptr(), values[1].as_ptr(), values[2].as_ptr()];
        if client_encoding.is_some() {
            keywords.push(c"client_encoding".as_ptr());
            value_ptrs.push(values[3].as_ptr());
        }
        if let Some([hosts, addresses, ports]) = &listed {
            // The names looked up above, by the deadline: libpq then looks nothing up itself.
            for (keyword, value) in [(c"host", hosts), (c"hostaddr", addresses), (c"port", ports)] {
                if !value.is_empty() {
                    keywords.push(keyword.as_ptr());
                    value_ptrs.push(value.as_ptr());
                }
            }
        }
        keywords.push(std::ptr::null());
        value_ptrs.push(std::ptr::null());
        // SAFETY: null-terminated arrays of C strings that outlive the call.
        let conn = unsafe { PQconnectStartParams(keywords.as_ptr(), value_ptrs.as_ptr(), 1) };
        if conn.is_null() {
            return Err(unreachable("out of memory".into()));
        }
        let connection = Connection { conn };
        // libpq: behave as if PQconnectPoll had first answered "writing".
        connection.wait(libc::POLLOUT, deadline, stop, "connecting")?;
        loop {
            // SAFETY: a connection being opened.
            let status = unsafe { PQconnectPoll(conn) };
            let direction = match status {
                PGRES_POLLING_OK => break,
                PGRES_POLLING_FAILED => return Err(unreachable(connection.error_message())),
                PGRES_POLLING_READING => libc::POLLIN,
                PGRES_POLLING_WRITING => libc::POLLOUT,
                _ => libc::POLLIN | libc::POLLOUT,
            };
            connection.wait(direction, deadline, stop, "connecting")?;
        }
        // SAFETY: an open connection.
        unsafe {
            if PQstatus(conn) != CONNECTION_OK {
                return Err(unreachable(connection.error_message()));
            }
            if PQsetnonblocking(conn, 1) != 0 {
                return Err(unreachable(connection.error_message()));
            }
        }
        Ok(connection)
    }

    /// Runs one statement with text parameters and returns its rows, by `deadline`. A statement
    /// that does not finish in time leaves the connection unusable: drop it.
    pub fn query(&self, sql: &str, params: &[&[u8]], deadline: Instant, stop: &dyn Fn() -> bool) -> Result<Vec<Row>, RemoteError> {
        let sql = CString::new(sql).map_err(|_| RemoteError::Unreachable("a statement contains a zero byte".into()))?;
        let params: Vec<CString> = params
            .iter()
            .map(|p| CString::new(*p).map_err(|_| RemoteError::Unreachable("a parameter contains a zero byte".into())))
            .collect::<Result<_, _>>()?;
        let pointers: Vec<*const c_char> = params.iter().map(|p| p.as_ptr()).collect();
        // SAFETY: the statement and the parameters outlive the call; types are left to the
        // server (the statement casts them), all in text format.
        let sent = unsafe {
            PQsendQueryParams(
                self.conn,
                sql.as_ptr(),
                pointers.len() as c_int,
                std::ptr::null(),
                pointers.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                0,
            )
        };
        if sent == 0 {
            return Err(RemoteError::Unreachable(self.error_message()));
        }
        // The statement may not fit in the socket's buffer at once.
        loop {
            // SAFETY: a connection with a statement being sent.
            match unsafe { PQflush(self.conn) } {
                0 => break,
                1 => self.wait(libc::POLLIN | libc::POLLOUT, deadline, stop, "sending a statement")?,
                _ => return Err(RemoteError::Unreachable(self.error_message())),
            }
            // SAFETY: as above; reading what arrived keeps the server from blocking on us.
            if unsafe { PQconsumeInput(self.conn) } == 0 {
                return Err(RemoteError::Unreachable(self.error_message()));
            }
        }
        let mut rows = Vec::new();
        let mut failure = None;
        loop {
            // SAFETY: as above.
            unsafe {
                if PQconsumeInput(self.conn) == 0 {
                    return Err(RemoteError::Unreachable(self.error_message()));
                }
                if PQisBusy(self.conn) != 0 {
                    self.wait(libc::POLLIN, deadline, stop, "waiting for an answer")?;
                    continue;
                }
                let result = PQgetResult(self.conn);
                if result.is_null() {
                    break;
                }
                match PQresultStatus(result) {
                    PGRES_TUPLES_OK | PGRES_COMMAND_OK => {
                        for row in 0..PQntuples(result) {
                            rows.push(
                                (0..PQnfields(result))
                                    .map(|column| (PQgetisnull(result, row, column) == 0).then(|| text_of(PQgetvalue(result, row, column))))
                                    .collect(),
                            );
                        }
                    }
                    _ => {
                        let field = |code| {
                            let text = PQresultErrorField(result, code);
                            (!text.is_null()).then(|| text_of(text))
                        };
                        failure.get_or_insert(RemoteError::Refused {
                            sqlstate: field(PG_DIAG_SQLSTATE).unwrap_or_else(|| "?????".into()),
                            message: field(PG_DIAG_MESSAGE_PRIMARY)
                                .unwrap_or_else(|| text_of(PQresultErrorMessage(result)).trim_end().to_string()),
                        });
                    }
                }
                PQclear(result);
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(rows),
        }
    }

    /// Waits until the socket is ready for `events`, the deadline passes, or `stop` says so.
    fn wait(&self, events: libc::c_short, deadline: Instant, stop: &dyn Fn() -> bool, doing: &str) -> Result<(), RemoteError> {
        // SAFETY: an open connection has a socket.
        let socket = unsafe { PQsocket(self.conn) };
        if socket < 0 {
            return Err(RemoteError::Unreachable(self.error_message()));
        }
        loop {
            if stop() {
                return Err(RemoteError::Stopped);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RemoteError::Unreachable(format!("timed out {doing} (pg_idgen.remote_timeout)")));
            }
            let mut fd = libc::pollfd { fd: socket, events, revents: 0 };
            // SAFETY: one pollfd, for the time given.
            let ready = unsafe { libc::poll(&mut fd, 1, left.min(POLL_SLICE).as_millis().max(1) as c_int) };
            if ready > 0 {
                return Ok(());
            }
            if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return Err(RemoteError::Unreachable(format!("poll() failed: {}", std::io::Error::last_os_error())));
            }
        }
    }

    fn error_message(&self) -> String {
        // SAFETY: libpq keeps the message with the connection.
        unsafe { text_of(PQerrorMessage(self.conn)) }.trim_end().to_string()
    }
}

/// Pins what a pg_idgen session at another server relies on, above what that server's role or
/// database settings say: its commits are durable before they are answered (`on`: a synchronous
/// standby there has them too), its statements run with no planted search path, and a lock or a
/// slow statement fails in time instead of holding the worker.
pub fn pin_session(connection: &Connection, timeout_ms: u64, deadline: Instant, stop: &dyn Fn() -> bool) -> Result<(), RemoteError> {
    let timeout = timeout_ms.to_string();
    connection.query(
        "SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false),
                pg_catalog.set_config('synchronous_commit', 'on', false),
                pg_catalog.set_config('default_transaction_read_only', 'off', false),
                pg_catalog.set_config('default_transaction_isolation', 'read committed', false),
                pg_catalog.set_config('statement_timeout', $1, false),
                pg_catalog.set_config('lock_timeout', $1, false)",
        &[timeout.as_bytes()],
        deadline,
        stop,
    )?;
    Ok(())
}

/// The schema of extension pg_idgen at the other server, quoted for a statement. Why looked up
/// on every call: the schema may be renamed, the extension dropped and created again.
///
/// Why the schema's owner must be a superuser (for a schema owned by `pg_database_owner`, as
/// `public` is: the database's owner): the function
/// is then called by name in a second statement, and a schema's owner could rename it away in
/// between and plant a function under the old name, which would run as the worker's role and
/// could answer with numbers already handed out.
pub fn extension_schema(connection: &Connection, deadline: Instant, stop: &dyn Fn() -> bool) -> Result<String, RemoteError> {
    let rows = connection.query(
        "SELECT n.nspname,
                COALESCE(
                    (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                      WHERE r.oid OPERATOR(pg_catalog.=) CASE
                          WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
                          THEN (SELECT d.datdba FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                          ELSE n.nspowner END), false),
                pg_catalog.pg_get_userbyid(n.nspowner)
           FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
             ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
          WHERE e.extname OPERATOR(pg_catalog.=) 'pg_idgen'",
        &[],
        deadline,
        stop,
    )?;
    match rows.first().map(|row| (row[0].clone(), row[1].as_deref() == Some("t"), row[2].clone().unwrap_or_default())) {
        Some((Some(schema), true, _)) => Ok(format!("\"{}\"", schema.replace('"', "\"\""))),
        Some((Some(schema), false, owner)) => Err(RemoteError::Refused {
            sqlstate: "42501".into(),
            message: format!(
                "pg_idgen's schema \"{schema}\" there is owned by \"{owner}\", who is not a superuser; install the extension in a schema a superuser owns"
            ),
        }),
        _ => Err(RemoteError::Refused { sqlstate: "42704".into(), message: "extension pg_idgen is not installed in that database".into() }),
    }
}

/// A C string of libpq's as Rust text (its bytes lossily: messages may be in any encoding).
///
/// # Safety
/// `text` is a valid C string.
unsafe fn text_of(text: *const c_char) -> String {
    // SAFETY: per the function's contract.
    unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::{host_addresses, RemoteError};
    use std::time::{Duration, Instant};

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn a_host_name_is_looked_up_here_and_listed_once_per_address() {
        let [hosts, addresses, ports] = host_addresses("host=localhost port=5433 dbname=app", soon(), &|| false).unwrap().expect("a name");
        let addresses: Vec<&str> = addresses.split(',').collect();
        assert!(addresses.iter().any(|a| *a == "127.0.0.1" || *a == "::1"), "{addresses:?}");
        assert_eq!(hosts.split(',').count(), addresses.len(), "one host entry per address");
        assert!(hosts.split(',').all(|h| h == "localhost") && ports.split(',').all(|p| p == "5433"), "{hosts} {ports}");
    }

    #[test]
    fn addresses_sockets_and_given_addresses_are_left_to_libpq() {
        for conninfo in ["host=127.0.0.1", "host=/tmp/pg", "host=localhost hostaddr=127.0.0.1", "dbname=app", "host=a,b hostaddr=127.0.0.1"] {
            assert!(host_addresses(conninfo, soon(), &|| false).unwrap().is_none(), "{conninfo}");
        }
        let [hosts, addresses, ports] = host_addresses("host=/tmp/pg,localhost", soon(), &|| false).unwrap().expect("one name");
        assert!(hosts.starts_with("/tmp/pg,localhost") && addresses.starts_with(','), "{hosts} / {addresses}");
        assert_eq!(ports, "", "no port given: libpq's default for each");
    }

    #[test]
    fn a_look_up_ends_when_told_to_stop_or_at_its_deadline() {
        assert!(matches!(host_addresses("host=localhost", soon(), &|| true), Err(RemoteError::Stopped)));
        let started = Instant::now();
        // A name that no resolver answers for quickly on a machine without a network, or at all.
        let outcome = host_addresses("host=pg-idgen-test.invalid", started + Duration::from_millis(300), &|| false);
        assert!(matches!(outcome, Err(RemoteError::Unreachable(_))), "{outcome:?}");
        assert!(started.elapsed() < Duration::from_millis(800), "took {:?}", started.elapsed());
    }
}
