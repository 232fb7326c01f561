//! libpq, as the workers use it: its functions, a connection on which every step has a deadline
//! (connecting, each statement), and connection strings parsed by libpq's own parser.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::time::Instant;

use super::{in_slices, lookup, RemoteError, Row};

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
    if parts.is_empty() {
        "(libpq defaults)".into()
    } else {
        parts.join(" ")
    }
}

/// The options a connection string sets, in libpq's order, or None when libpq cannot parse it.
pub(super) fn parsed_options(text: &str) -> Option<Vec<(String, String)>> {
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
        let hostaddr = lookup::host_addresses(&parsed_options(conninfo).unwrap_or_default(), deadline, stop)?;
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
                            message: field(PG_DIAG_MESSAGE_PRIMARY).unwrap_or_else(|| text_of(PQresultErrorMessage(result)).trim_end().to_string()),
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
        in_slices(deadline, stop, doing, |slice| {
            let mut fd = libc::pollfd { fd: socket, events, revents: 0 };
            // SAFETY: one pollfd, for the time given.
            let ready = unsafe { libc::poll(&mut fd, 1, slice.as_millis().max(1) as c_int) };
            if ready > 0 {
                return Some(Ok(()));
            }
            (ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted)
                .then(|| Err(RemoteError::Unreachable(format!("poll() failed: {}", std::io::Error::last_os_error()))))
        })
    }

    fn error_message(&self) -> String {
        // SAFETY: libpq keeps the message with the connection.
        unsafe { text_of(PQerrorMessage(self.conn)) }.trim_end().to_string()
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
