//! Connecting to the launcher's own libvirt daemon.
//!
//! KubeVirt retries `virConnectOpen` every 500 ms for up to 15 s while its
//! daemon starts, which costs about half a second on every start. Here the
//! launcher watches for the daemon's socket (5 ms polls, a `stat` each) and
//! connects as soon as it appears, still bounded by the same 15 s.

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use virt::connect::Connect;

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
