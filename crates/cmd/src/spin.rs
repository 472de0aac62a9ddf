//! Brief busy-polling of live connections before a runtime thread sleeps.
//!
//! A request/response exchange on a Unix socket costs two thread wake-ups
//! when both ends sleep in `epoll_wait` between messages. On a nested
//! virtualised host such as the CI machines a wake-up is expensive: a
//! blocking one-byte ping-pong between two processes takes a median 88 µs
//! there, a polling one 6 µs. Go's runtime, on which KubeVirt's launcher
//! and virt-handler run, spins for a moment before it parks a thread, so
//! it rarely pays that price. [`Spinner`] does the same, bounded: when a
//! tracked connection carried data in the last [`ACTIVE_WINDOW`], the
//! thread polls (`poll(2)` with a zero timeout) the tracked sockets for up
//! to [`SPIN`] before it is allowed to sleep; data arriving meanwhile is
//! then picked up by the runtime without sleeping. An idle launcher never
//! spins, so it costs CPU only right after traffic (at most [`SPIN`] per
//! park).
//!
//! Use: [`Spinner::track`] each connection's stream and call
//! [`Spinner::park`] from the runtime's `on_thread_park` hook.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Longest busy-poll before a runtime thread may sleep.
pub const SPIN: Duration = Duration::from_micros(50);

/// Spinning happens only this soon after a tracked connection carried data.
pub const ACTIVE_WINDOW: Duration = Duration::from_millis(10);

/// The tracked connections of one runtime (see the module docs).
#[derive(Debug)]
pub struct Spinner {
    /// Duplicates of the tracked sockets (same open file, polled only).
    fds: Mutex<BTreeMap<u64, OwnedFd>>,
    next_id: AtomicU64,
    /// Longest busy-poll per park.
    spin: Duration,
    /// Nanoseconds after `epoch` of the last read that returned data.
    last_active: AtomicU64,
    epoch: Instant,
}

impl Spinner {
    /// A spinner with no connections that spins up to [`SPIN`].
    pub fn new() -> Arc<Spinner> {
        Self::with_spin(SPIN)
    }

    /// A spinner with no connections that spins up to `spin` per park.
    pub fn with_spin(spin: Duration) -> Arc<Spinner> {
        Arc::new(Spinner {
            fds: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(0),
            spin,
            last_active: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    /// Wraps `stream` so that it is polled while it is open and marks
    /// activity when it returns data. A stream whose descriptor cannot be
    /// duplicated (out of descriptors) is wrapped but not polled.
    pub fn track<S: AsFd>(self: &Arc<Self>, stream: S) -> Tracked<S> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(fd) = stream.as_fd().try_clone_to_owned() {
            self.lock().insert(id, fd);
        }
        Tracked {
            inner: stream,
            id,
            spinner: Arc::clone(self),
        }
    }

    /// How many connections are tracked.
    pub fn tracked(&self) -> usize {
        self.lock().len()
    }

    /// Busy-polls the tracked connections for up to its spin time if one of
    /// them was active within [`ACTIVE_WINDOW`]; returns at once when one
    /// becomes readable (or hangs up), or when none is tracked.
    pub fn park(&self) -> Spun {
        let now = self.nanos();
        let last = self.last_active.load(Ordering::Relaxed);
        if last == 0 || now.saturating_sub(last) > nanos(ACTIVE_WINDOW) {
            return Spun::Idle;
        }
        let fds = self.lock();
        if fds.is_empty() {
            return Spun::Idle;
        }
        let mut set: Vec<PollFd<'_>> = fds
            .values()
            .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
            .collect();
        let deadline = Instant::now() + self.spin;
        while Instant::now() < deadline {
            match poll(&mut set, PollTimeout::ZERO) {
                Ok(0) => std::hint::spin_loop(),
                // Readable, or an error the runtime will see itself.
                Ok(_) | Err(_) => return Spun::Ready,
            }
        }
        Spun::Timeout
    }

    fn mark_active(&self) {
        // 0 means "never"; the epoch's first nanosecond is as good as the next.
        self.last_active
            .store(self.nanos().max(1), Ordering::Relaxed);
    }

    fn nanos(&self) -> u64 {
        nanos(self.epoch.elapsed())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, OwnedFd>> {
        // The map stays consistent even if a holder panicked.
        self.fds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What [`Spinner::park`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spun {
    /// Nothing was active recently (or nothing is tracked): no spinning.
    Idle,
    /// A tracked connection became readable while spinning.
    Ready,
    /// Spun for [`SPIN`]; nothing arrived.
    Timeout,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A stream tracked by a [`Spinner`]; untracked when dropped.
#[derive(Debug)]
pub struct Tracked<S> {
    inner: S,
    id: u64,
    spinner: Arc<Spinner>,
}

impl<S> Tracked<S> {
    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S> Drop for Tracked<S> {
    fn drop(&mut self) {
        self.spinner.lock().remove(&self.id);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.spinner.mark_active();
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl tonic::transport::server::Connected for Tracked<tokio::net::UnixStream> {
    type ConnectInfo = <tokio::net::UnixStream as tonic::transport::server::Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tracks_while_open_and_spins_only_after_activity() {
        let s = Spinner::new();
        let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
        let mut a = s.track(a);
        assert_eq!(s.tracked(), 1);
        // Never active: no spinning, even with data pending.
        tokio::io::AsyncWriteExt::write_all(&mut b, b"x")
            .await
            .unwrap();
        assert_eq!(s.park(), Spun::Idle);
        let mut buf = [0u8; 1];
        tokio::io::AsyncReadExt::read_exact(&mut a, &mut buf)
            .await
            .unwrap();
        // Active, nothing pending: spins, then gives up.
        assert_eq!(s.park(), Spun::Timeout);
        // Active, data pending: poll sees it.
        tokio::io::AsyncWriteExt::write_all(&mut b, b"y")
            .await
            .unwrap();
        assert_eq!(s.park(), Spun::Ready);
        drop(a);
        assert_eq!(s.tracked(), 0);
        assert_eq!(s.park(), Spun::Idle);
    }
}
