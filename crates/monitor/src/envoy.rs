//! Ending an Istio sidecar with the VM: if an Envoy proxy answers its
//! readiness endpoint (`GET localhost:15021/healthz/ready` with header
//! `server: envoy`), the monitor asks it to quit (`POST
//! localhost:15020/quitquitquit`), so the pod can complete (KubeVirt's
//! `terminateIstioProxy`).
//!
//! KubeVirt's retry rule, kept: up to 4 attempts per request, retried only
//! on "connection refused" or "connection reset" (and, for the quit request,
//! on HTTP 503), sleeping 50 ms, 250 ms, 1.25 s and 6.25 s after the
//! attempts; each request times out after 2 s. So where no Envoy listens the
//! monitor spends about 7.8 s here before it exits, as KubeVirt's does.
//!
//! A minimal HTTP/1.1 client on `std::net` (no HTTP crate): one request per
//! connection, `Connection: close`, at most 64 KiB of response read.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Envoy's merged Prometheus telemetry port (serves `quitquitquit`).
pub const TELEMETRY_PORT: u16 = 15020;
/// Envoy's health check port.
pub const HEALTH_PORT: u16 = 15021;
/// KubeVirt's HTTP request timeout.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Attempts per request.
pub const RETRIES: u32 = 4;
/// The first sleep; each later one is 5 times longer.
pub const FIRST_SLEEP: Duration = Duration::from_millis(50);

const MAX_RESPONSE: u64 = 64 * 1024;

/// Where the proxy is looked for (KubeVirt: `localhost`, the ports above).
#[derive(Debug, Clone)]
pub struct Envoy {
    /// Host name or address.
    pub host: String,
    /// The health check port.
    pub health_port: u16,
    /// The port of `quitquitquit`.
    pub telemetry_port: u16,
    /// The first back-off sleep (tests shorten it).
    pub first_sleep: Duration,
}

impl Default for Envoy {
    fn default() -> Self {
        Envoy {
            host: "localhost".to_owned(),
            health_port: HEALTH_PORT,
            telemetry_port: TELEMETRY_PORT,
            first_sleep: FIRST_SLEEP,
        }
    }
}

/// A response: status code and the `server` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The `Server` header's value ("" when absent).
    pub server: String,
}

/// Why a request failed.
#[derive(Debug)]
pub enum Failure {
    /// The connection could not be made or broke.
    Io(io::Error),
    /// 503 from `quitquitquit` (retried).
    Unavailable,
    /// Anything else (not retried).
    Other(String),
}

impl Failure {
    fn retriable(&self) -> bool {
        match self {
            Failure::Io(e) => matches!(
                e.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset
            ),
            Failure::Unavailable => true,
            Failure::Other(_) => false,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Io(e) => write!(f, "{e}"),
            Failure::Unavailable => write!(f, "service unavailable"),
            Failure::Other(m) => write!(f, "{m}"),
        }
    }
}

/// Reads a response until the server closes, `MAX_RESPONSE` bytes or the
/// `deadline`, whichever comes first; what arrived by then (an error only
/// when nothing did).
fn read_bounded(s: &mut TcpStream, deadline: Instant) -> io::Result<Vec<u8>> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let limit = usize::try_from(MAX_RESPONSE).unwrap_or(usize::MAX);
    while raw.len() < limit {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        s.set_read_timeout(Some(left))?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n.min(limit - raw.len())]),
            Err(e) if raw.is_empty() => return Err(e),
            Err(_) => break,
        }
    }
    Ok(raw)
}

/// Parses an HTTP/1.x response head: status code and `Server` header.
pub fn parse_response(raw: &[u8]) -> Option<Response> {
    let text = String::from_utf8_lossy(raw);
    let head = text.split("\r\n\r\n").next()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let mut parts = status_line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status = parts.next()?.parse().ok()?;
    let server = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("server"))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    Some(Response { status, server })
}

impl Envoy {
    fn request(&self, port: u16, method: &str, path: &str) -> Result<Response, Failure> {
        // Go's http.Client.Timeout: the whole request, body included.
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let addrs: Vec<_> = (self.host.as_str(), port)
            .to_socket_addrs()
            .map_err(Failure::Io)?
            .collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT) {
                Ok(mut s) => {
                    s.set_read_timeout(Some(REQUEST_TIMEOUT))
                        .map_err(Failure::Io)?;
                    s.set_write_timeout(Some(REQUEST_TIMEOUT))
                        .map_err(Failure::Io)?;
                    let req = format!(
                        "{method} {path} HTTP/1.1\r\nHost: {}:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        self.host
                    );
                    s.write_all(req.as_bytes()).map_err(Failure::Io)?;
                    let raw = read_bounded(&mut s, deadline).map_err(Failure::Io)?;
                    return parse_response(&raw)
                        .ok_or_else(|| Failure::Other("malformed HTTP response".to_owned()));
                }
                Err(e) => last = e,
            }
        }
        Err(Failure::Io(last))
    }

    fn retry<T>(&self, mut f: impl FnMut() -> Result<T, Failure>) -> Result<T, Failure> {
        let mut sleep = self.first_sleep;
        let mut last = Failure::Other("no attempt".to_owned());
        for _ in 0..RETRIES {
            match f() {
                Ok(v) => return Ok(v),
                Err(e) if e.retriable() => last = e,
                Err(e) => return Err(e),
            }
            std::thread::sleep(sleep);
            sleep = sleep.saturating_mul(5);
        }
        Err(last)
    }

    /// True when an Envoy proxy answers the health endpoint.
    pub fn present(&self) -> bool {
        let r = self.retry(|| {
            let resp = self
                .request(self.health_port, "GET", "/healthz/ready")
                .inspect_err(|e| {
                    tracing::debug!(reason = %e, "error when checking for istio-proxy presence");
                })?;
            if resp.server == "envoy" {
                Ok(())
            } else {
                Err(Failure::Other(format!(
                    "received response from non-istio health server: {}",
                    resp.server
                )))
            }
        });
        r.is_ok()
    }

    /// Asks a present proxy to quit; returns whether a quit request was
    /// answered (any status but 503, as KubeVirt counts it).
    pub fn terminate(&self) -> bool {
        if !self.present() {
            return false;
        }
        let r = self.retry(|| {
            let resp = self
                .request(self.telemetry_port, "POST", "/quitquitquit")
                .inspect_err(|e| {
                    tracing::error!(reason = %e, "failed to request istio-proxy termination, retrying...");
                })?;
            if resp.status != 200 {
                tracing::error!("status code received: {}", resp.status);
                if resp.status == 503 {
                    return Err(Failure::Unavailable);
                }
            }
            Ok(())
        });
        match r {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(reason = %e, "all attempts to terminate istio-proxy failed");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;
    use std::thread;

    /// A one-port HTTP server answering `replies` in order; sends each
    /// request line it saw.
    fn serve(replies: Vec<&'static str>) -> (u16, mpsc::Receiver<String>) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for reply in replies {
                let Ok((mut s, _)) = l.accept() else { return };
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]);
                let _ = tx.send(req.lines().next().unwrap_or("").to_owned());
                let _ = s.write_all(reply.as_bytes());
            }
        });
        (port, rx)
    }

    fn free_port() -> u16 {
        // Bound and closed again: nothing listens there afterwards.
        TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port()
    }

    fn envoy(health: u16, telemetry: u16) -> Envoy {
        Envoy {
            host: "127.0.0.1".to_owned(),
            health_port: health,
            telemetry_port: telemetry,
            first_sleep: Duration::from_millis(1),
        }
    }

    #[test]
    fn parses_response_heads() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nServer: envoy\r\ncontent-length: 0\r\n\r\n")
            .expect("parses");
        assert_eq!(
            r,
            Response {
                status: 200,
                server: "envoy".into()
            }
        );
        let r = parse_response(b"HTTP/1.0 503 Service Unavailable\r\n\r\n").expect("parses");
        assert_eq!(r.status, 503);
        assert_eq!(r.server, "");
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n").is_none());
        assert!(parse_response(b"").is_none());
    }

    #[test]
    fn quits_a_present_envoy_after_a_503() {
        let (health, hrx) = serve(vec!["HTTP/1.1 200 OK\r\nserver: envoy\r\n\r\n"]);
        let (tele, trx) = serve(vec![
            "HTTP/1.1 503 Service Unavailable\r\n\r\n",
            "HTTP/1.1 200 OK\r\n\r\n",
        ]);
        assert!(envoy(health, tele).terminate());
        assert_eq!(hrx.recv().expect("health"), "GET /healthz/ready HTTP/1.1");
        assert_eq!(trx.recv().expect("quit 1"), "POST /quitquitquit HTTP/1.1");
        assert_eq!(trx.recv().expect("quit 2"), "POST /quitquitquit HTTP/1.1");
    }

    #[test]
    fn another_server_is_not_envoy() {
        let (health, rx) = serve(vec!["HTTP/1.1 200 OK\r\nServer: nginx\r\n\r\n"]);
        let e = envoy(health, free_port());
        assert!(!e.present());
        assert_eq!(
            rx.recv().expect("one request"),
            "GET /healthz/ready HTTP/1.1"
        );
        // Not retried: the server saw one request only.
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    }

    #[test]
    fn a_server_that_never_closes_is_cut_at_the_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else { return };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nServer: envoy\r\n\r\n");
            // Keeps the connection open until the test ends.
            let _ = done_rx.recv_timeout(Duration::from_secs(30));
        });
        // Answered within the request timeout, read until it.
        assert!(envoy(port, free_port()).present());
        let _ = done_tx.send(());
    }

    #[test]
    fn nothing_listening_is_retried_then_given_up() {
        let e = envoy(free_port(), free_port());
        let t = std::time::Instant::now();
        assert!(!e.terminate());
        // 4 attempts with sleeps of 1, 5, 25 and 125 ms.
        assert!(
            t.elapsed() >= Duration::from_millis(150),
            "{:?}",
            t.elapsed()
        );
    }
}
