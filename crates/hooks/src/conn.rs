//! Dialling a sidecar's Unix socket. KubeVirt's dial blocks until the
//! gRPC connection is ready, which needs the server's HTTP/2 preface; a
//! socket that accepts but never speaks counts as "not ready yet". tonic's
//! connect returns before the server has said anything, so the connection
//! here records whether any byte came back ([`Spoke`]): a call that failed
//! on a connection that never spoke is a dial failure.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tower::service_fn;

/// Whether the server of a connection has sent anything yet.
#[derive(Clone, Debug, Default)]
pub(crate) struct Spoke(Arc<AtomicBool>);

impl Spoke {
    /// True once a byte arrived.
    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A Unix stream that sets its [`Spoke`] on the first byte read.
struct Tracked {
    inner: UnixStream,
    spoke: Spoke,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.spoke.0.store(true, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Connects to the socket at `path` within `timeout` (one connection, no
/// reconnects); returns the channel and its [`Spoke`].
///
/// # Errors
/// The connect error (no socket, refused, timeout) as text.
pub(crate) async fn dial(path: &Path, timeout: Duration) -> Result<(Channel, Spoke), String> {
    let spoke = Spoke::default();
    let s2 = spoke.clone();
    let path: PathBuf = path.to_owned();
    let endpoint = Endpoint::from_static("http://localhost").connect_timeout(timeout);
    let connect = endpoint.connect_with_connector(service_fn(move |_: Uri| {
        let path = path.clone();
        let spoke = s2.clone();
        async move {
            let inner = UnixStream::connect(&path).await?;
            Ok::<_, std::io::Error>(TokioIo::new(Tracked { inner, spoke }))
        }
    }));
    match tokio::time::timeout(timeout, connect).await {
        Ok(Ok(ch)) => Ok((ch, spoke)),
        Ok(Err(e)) => Err(source_chain(&e)),
        Err(_) => Err(format!("no connection within {} s", timeout.as_secs_f64())),
    }
}

/// An error with its sources, `a: b: c`.
pub(crate) fn source_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// A gRPC status as one line: code and message.
pub(crate) fn status_line(s: &tonic::Status) -> String {
    let mut out = format!("{:?}: {}", s.code(), s.message());
    if let Some(src) = std::error::Error::source(s) {
        let t = source_chain(src);
        if !out.contains(&t) {
            out.push_str(" (");
            out.push_str(&t);
            out.push(')');
        }
    }
    out
}
