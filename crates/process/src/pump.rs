//! The pipes of one [`crate::run`]: the child's input written and both of
//! its outputs read on the calling thread, by `poll(2)` over non-blocking
//! pipe ends.
//!
//! Not a reader thread per stream: every thread's stack stays mapped in
//! glibc's stack cache after the thread exits (12-24 KiB resident each,
//! issue 20), and a reader that blocks on a pipe a grandchild keeps open
//! would never end. Here the run ends when both outputs are at end of
//! file, or, once the child itself has exited, after what is already in
//! the pipes has been read.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// How often a run whose output pipes stay open asks whether the child has
/// exited (a grandchild may hold them); the normal end is the pipes'
/// end of file, which wakes `poll` at once.
const EXIT_CHECK: Duration = Duration::from_millis(50);
/// Bytes read or written per call.
const CHUNK: usize = 16 * 1024;

/// One output stream: its pipe end while open, what was kept of it.
struct Output<R> {
    pipe: Option<R>,
    kept: Vec<u8>,
}

impl<R: Read + AsFd> Output<R> {
    fn new(pipe: Option<R>) -> Self {
        let pipe = pipe.filter(|p| set_nonblocking(p.as_fd()));
        Output {
            pipe,
            kept: Vec::new(),
        }
    }

    /// Reads what the pipe holds now: up to `limit` bytes are kept, the
    /// rest is read and dropped (the child must never block on a full
    /// pipe). Closes the pipe at end of file or on an error.
    fn drain(&mut self, limit: usize, buf: &mut [u8]) {
        let Some(p) = self.pipe.as_mut() else { return };
        loop {
            match p.read(buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = limit.saturating_sub(self.kept.len());
                    self.kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        self.pipe = None;
    }
}

/// The child's standard input, while bytes remain to be written.
struct Input<W> {
    pipe: Option<W>,
    data: Vec<u8>,
    done: usize,
}

impl<W: Write + AsFd> Input<W> {
    /// Writes what the pipe takes now; closes it when everything is
    /// written or the child closed its end.
    fn feed(&mut self) {
        let Some(p) = self.pipe.as_mut() else { return };
        while self.done < self.data.len() {
            let end = self.data.len().min(self.done + CHUNK);
            match p.write(&self.data[self.done..end]) {
                Ok(n) => self.done += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        self.pipe = None;
    }
}

fn set_nonblocking(fd: BorrowedFd<'_>) -> bool {
    let Ok(flags) = fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL) else {
        return false;
    };
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags)).is_ok()
}

/// How a [`pump`] ended.
pub(crate) enum Pumped {
    /// Both outputs are closed (end of file), or the child exited and its
    /// output was read: its exit status is (about to be) with the reaper.
    Done,
    /// `deadline` passed first.
    TimedOut,
}

/// Writes `input` to `stdin` and reads `stdout` and `stderr` (at most
/// `limit` bytes kept of each) until both outputs end, the child has
/// exited (`exited`, asked after every wake-up, at least every
/// [`EXIT_CHECK`]), or `deadline`. Returns how it ended and the two outputs.
pub(crate) fn pump<I, O, E>(
    stdin: Option<(I, Vec<u8>)>,
    stdout: Option<O>,
    stderr: Option<E>,
    limit: usize,
    deadline: Instant,
    exited: impl Fn() -> bool,
) -> (Pumped, Vec<u8>, Vec<u8>)
where
    I: Write + AsFd,
    O: Read + AsFd,
    E: Read + AsFd,
{
    let mut input = match stdin {
        Some((pipe, data)) => Input {
            pipe: Some(pipe).filter(|p| set_nonblocking(p.as_fd())),
            data,
            done: 0,
        },
        None => Input {
            pipe: None,
            data: Vec::new(),
            done: 0,
        },
    };
    let mut out = Output::new(stdout);
    let mut err = Output::new(stderr);
    let mut buf = vec![0u8; CHUNK];
    input.feed();
    let ended = loop {
        if out.pipe.is_none() && err.pipe.is_none() {
            break Pumped::Done;
        }
        let now = Instant::now();
        if now >= deadline {
            break Pumped::TimedOut;
        }
        let wait = (deadline - now).min(EXIT_CHECK);
        let mut fds = Vec::with_capacity(3);
        for p in [
            out.pipe.as_ref().map(AsFd::as_fd),
            err.pipe.as_ref().map(AsFd::as_fd),
        ]
        .into_iter()
        .flatten()
        {
            fds.push(PollFd::new(p, PollFlags::POLLIN));
        }
        if let Some(p) = input.pipe.as_ref() {
            fds.push(PollFd::new(p.as_fd(), PollFlags::POLLOUT));
        }
        let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
        let _ = poll(&mut fds, timeout);
        drop(fds);
        out.drain(limit, &mut buf);
        err.drain(limit, &mut buf);
        input.feed();
        if exited() {
            // Everything the child wrote is in the pipes now that it has
            // exited, but it may have written after the drains above:
            // read it, then stop (the pipes are still open, else the loop
            // ended above: a descendant holds them).
            out.drain(limit, &mut buf);
            err.drain(limit, &mut buf);
            break Pumped::Done;
        }
    };
    (ended, out.kept, err.kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_child_wrote_just_before_its_exit_is_read() {
        // The child's last write lands between a drain and the exit check:
        // `exited` plays it, writing to the pipe before saying "exited".
        let (r, w) = std::io::pipe().unwrap();
        let (er, ew) = std::io::pipe().unwrap();
        let w = std::cell::RefCell::new(w);
        let (ended, out, err) = pump::<std::io::PipeWriter, _, _>(
            None,
            Some(r),
            Some(er),
            1024,
            Instant::now() + Duration::from_secs(5),
            || {
                w.borrow_mut().write_all(b"the last line\n").unwrap();
                true
            },
        );
        drop(ew);
        assert!(matches!(ended, Pumped::Done));
        assert_eq!(out, b"the last line\n");
        assert!(err.is_empty());
    }
}
