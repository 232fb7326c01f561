//! Host names looked up here, by a deadline, on a thread of their own: libpq looks names up
//! synchronously inside its connect call, where no deadline and no signal can end the wait.

use std::sync::atomic::Ordering::SeqCst;
use std::time::Instant;

use super::{in_slices, RemoteError};

/// The `host`, `hostaddr` and `port` lists to connect with: every host of a connection string's
/// `options` (as libpq parsed them) that is a name (not an address, not a socket directory, without an address of its own in
/// `hostaddr`) looked up here, by `deadline`, with `stop` asked every 100 ms, and listed once per
/// address it has, as libpq would try them. None when there is nothing to look up. Why: libpq
/// looks names up synchronously inside the connect call, so a resolver that does not answer would
/// hold a worker past every deadline and past SIGTERM. Names a service file gives are looked up by
/// libpq (give `hostaddr` there too).
pub(super) fn host_addresses(options: &[(String, String)], deadline: Instant, stop: &dyn Fn() -> bool) -> Result<Option<[String; 3]>, RemoteError> {
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
        return Err(RemoteError::Unreachable(format!(
            "could not look up host name \"{host}\": {MAX_PENDING_LOOK_UPS} earlier look-ups have not returned"
        )));
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
    in_slices(deadline, stop, &format!("looking up host name \"{host}\""), |slice| match receiver.recv_timeout(slice) {
        Ok(Ok(found)) => {
            let mut addresses: Vec<String> = Vec::new();
            for address in found {
                if !addresses.contains(&address) {
                    addresses.push(address);
                }
            }
            Some(if addresses.is_empty() { Err(RemoteError::Unreachable(format!("host name \"{host}\" has no address"))) } else { Ok(addresses) })
        }
        Ok(Err(e)) => Some(Err(RemoteError::Unreachable(format!("could not translate host name \"{host}\" to address: {e}")))),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            Some(Err(RemoteError::Unreachable(format!("could not look up host name \"{host}\""))))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::RemoteError;
    use super::host_addresses;
    use std::time::{Duration, Instant};

    /// The options of a connection string of `keyword=value` words, as libpq parses them.
    fn options(conninfo: &str) -> Vec<(String, String)> {
        conninfo.split_whitespace().map(|word| word.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).unwrap()).collect()
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn a_host_name_is_looked_up_here_and_listed_once_per_address() {
        let [hosts, addresses, ports] = host_addresses(&options("host=localhost port=5433 dbname=app"), soon(), &|| false).unwrap().expect("a name");
        let addresses: Vec<&str> = addresses.split(',').collect();
        assert!(addresses.iter().any(|a| *a == "127.0.0.1" || *a == "::1"), "{addresses:?}");
        assert_eq!(hosts.split(',').count(), addresses.len(), "one host entry per address");
        assert!(hosts.split(',').all(|h| h == "localhost") && ports.split(',').all(|p| p == "5433"), "{hosts} {ports}");
    }

    #[test]
    fn addresses_sockets_and_given_addresses_are_left_to_libpq() {
        for conninfo in ["host=127.0.0.1", "host=/tmp/pg", "host=localhost hostaddr=127.0.0.1", "dbname=app", "host=a,b hostaddr=127.0.0.1"] {
            assert!(host_addresses(&options(conninfo), soon(), &|| false).unwrap().is_none(), "{conninfo}");
        }
        let [hosts, addresses, ports] = host_addresses(&options("host=/tmp/pg,localhost"), soon(), &|| false).unwrap().expect("one name");
        assert!(hosts.starts_with("/tmp/pg,localhost") && addresses.starts_with(','), "{hosts} / {addresses}");
        assert_eq!(ports, "", "no port given: libpq's default for each");
    }

    #[test]
    fn a_look_up_ends_when_told_to_stop_or_at_its_deadline() {
        assert!(matches!(host_addresses(&options("host=localhost"), soon(), &|| true), Err(RemoteError::Stopped)));
        let started = Instant::now();
        // A name that no resolver answers for quickly on a machine without a network, or at all.
        let outcome = host_addresses(&options("host=pg-idgen-test.invalid"), started + Duration::from_millis(300), &|| false);
        assert!(matches!(outcome, Err(RemoteError::Unreachable(_))), "{outcome:?}");
        // Why the scale: `./dev test` runs this at the lowest priority beside the system suites
        // of other majors, and stretches upper bounds by it (docs/development.md, "Tests").
        let scale = std::env::var("PG_IDGEN_TEST_TIME_SCALE").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(1.0).max(1.0);
        assert!(started.elapsed() < Duration::from_millis(800).mul_f64(scale), "took {:?}", started.elapsed());
    }
}
