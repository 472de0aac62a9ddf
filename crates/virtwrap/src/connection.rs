//! Connecting to the launcher's own libvirt daemon.
//!
//! KubeVirt retries `virConnectOpen` every 500 ms for up to 15 s while its
//! daemon starts, which costs about half a second on every start. Here the
//! launcher watches for the daemon's socket (5 ms polls, a `stat` each) and
//! connects as soon as it appears, still bounded by the same 15 s.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use virt::connect::Connect;

use crate::manager::ManagerError;

/// KubeVirt's libvirt connection timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(5);

/// Could not connect in time.
#[derive(Debug, thiserror::Error)]
#[error("failed to connect to {daemon} at {uri} within {seconds} s: {last}")]
pub struct ConnectError {
    /// Daemon name.
    pub daemon: String,
    /// URI tried.
    pub uri: String,
    /// The timeout.
    pub seconds: u64,
    /// The last error seen.
    pub last: String,
}

/// Opens `uri` once `socket` exists, retrying until `timeout`.
///
/// # Errors
/// [`ConnectError`] with the last libvirt error when the deadline passes.
pub fn connect(
    daemon: &str,
    uri: &str,
    socket: &Path,
    timeout: Duration,
) -> Result<Connect, ConnectError> {
    // libvirt's default error handler prints every error to stderr; errors
    // are returned and logged by the launcher instead.
    virt::error::clear_error_callback();
    let start = Instant::now();
    let mut last = format!("socket {} did not appear", socket.display());
    loop {
        if socket.exists() {
            match Connect::open(Some(uri)) {
                Ok(c) => {
                    tracing::info!(
                        daemon,
                        uri,
                        ms = start.elapsed().as_millis() as u64,
                        "connected to libvirt"
                    );
                    return Ok(c);
                }
                Err(e) => last = e.to_string(),
            }
        }
        if start.elapsed() >= timeout {
            return Err(ConnectError {
                daemon: daemon.to_owned(),
                uri: uri.to_owned(),
                seconds: timeout.as_secs(),
                last,
            });
        }
        thread::sleep(POLL);
    }
}

/// How to (re)connect to the daemon.
#[derive(Clone, Debug)]
pub struct Connector {
    /// Daemon name for logs.
    pub daemon: String,
    /// libvirt URI (`qemu:///system`).
    pub uri: String,
    /// The daemon's socket.
    pub socket: std::path::PathBuf,
}

impl Connector {
    /// Connects, waiting up to [`CONNECT_TIMEOUT`].
    ///
    /// # Errors
    /// [`ConnectError`].
    pub fn connect(&self) -> Result<Connect, ConnectError> {
        connect(&self.daemon, &self.uri, &self.socket, CONNECT_TIMEOUT)
    }
}

/// Error codes that mean the connection itself is gone (KubeVirt's list:
/// INTERNAL_ERROR, INVALID_CONN, NO_MEMORY, SYSTEM_ERROR, RPC,
/// AUTH_FAILED, AUTH_CANCELLED).
const CONNECTION_ERRORS: [i32; 7] = [1, 3, 2, 38, 39, 45, 79];

/// The launcher's one connection to its daemon, shared by every caller
/// (the domain manager, the domain event watcher, the guest agent's
/// channels, the QEMU version probe), as KubeVirt's launcher has one
/// connection: each call takes a reference of its own ([`Shared::with`]) and
/// calls libvirt without holding a lock, so a slow call (libvirt's
/// guest-agent shutdown waits up to 60 s for the guest) holds up no other;
/// libvirt's `virConnect` is thread-safe and multiplexes concurrent calls
/// and events on one socket. When the daemon restarts, the next caller
/// reconnects. One connection is also one keepalive ping from the daemon
/// every 5 s of silence instead of one per connection.
pub struct Shared {
    current: Mutex<Connect>,
    connector: Connector,
}

impl Shared {
    /// Shares `conn`, reconnecting with `connector`.
    pub fn new(conn: Connect, connector: Connector) -> Shared {
        Shared {
            current: Mutex::new(conn),
            connector,
        }
    }

    /// Connects with `connector` (waiting up to [`CONNECT_TIMEOUT`]) and
    /// shares the connection.
    ///
    /// # Errors
    /// [`ConnectError`] when the first connection fails.
    pub fn open(connector: Connector) -> Result<Shared, ConnectError> {
        let conn = connector.connect()?;
        Ok(Shared::new(conn, connector))
    }

    /// The daemon's name, for logs.
    pub fn daemon(&self) -> &str {
        &self.connector.daemon
    }

    fn lock(&self) -> MutexGuard<'_, Connect> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn reconnect(&self, guard: &mut MutexGuard<'_, Connect>) {
        tracing::warn!(daemon = %self.connector.daemon, "libvirt connection lost; reconnecting");
        match self.connector.connect() {
            Ok(c) => {
                let mut old = std::mem::replace(&mut **guard, c);
                let _ = old.close();
                tracing::info!(daemon = %self.connector.daemon, "libvirt reconnected");
            }
            Err(e) => tracing::error!("{e}"),
        }
    }

    /// A reference of its own to the current connection, reconnecting
    /// first when it is dead (when that fails, the dead one: calls on it
    /// fail with libvirt's error); the lock is held only for that. Close it
    /// after use (the binding counts references and never closes on drop).
    pub(crate) fn reference(&self) -> Connect {
        let mut guard = self.lock();
        if !guard.is_alive().unwrap_or(false) {
            self.reconnect(&mut guard);
        }
        guard.clone()
    }

    /// Runs `op` on a reference to the connection; when it fails because
    /// the connection broke (the daemon died and was restarted), runs it
    /// once more on a new one. KubeVirt reconnects on the same error codes.
    ///
    /// # Errors
    /// `op`'s.
    pub fn with<T>(
        &self,
        op: impl Fn(&Connect) -> Result<T, ManagerError>,
    ) -> Result<T, ManagerError> {
        let mut conn = self.reference();
        let mut res = op(&conn);
        // A failed call marks a broken connection dead; other errors with
        // these codes (a QEMU that failed to start) are not retried.
        if let Err(ManagerError::Libvirt { code, .. }) = &res {
            if CONNECTION_ERRORS.contains(code) && !conn.is_alive().unwrap_or(false) {
                let _ = conn.close();
                conn = self.reference();
                res = op(&conn);
            }
        }
        let _ = conn.close();
        res
    }
}
