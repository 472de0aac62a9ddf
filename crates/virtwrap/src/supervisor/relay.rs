//! A daemon's standard error, re-logged line by line under the daemon's
//! name (`component`), at the level libvirt wrote into the line.

use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::process::ChildStderr;

use nix::fcntl::{fcntl, FcntlArg, OFlag};

/// Longest stderr line re-logged (KubeVirt scans up to 512 KiB); a longer
/// one is logged in pieces of this size.
pub(super) const MAX_LINE: usize = 512 * 1024;
/// Bytes read per call: 1 KiB, not std's 8 KiB buffer (the relay lives as
/// long as the daemon; a longer line is read in several fills, issue 20
/// item 3).
pub(super) const READ_CHUNK: usize = 1024;

/// One daemon's stderr pipe (non-blocking) and the line being assembled.
pub(super) struct Relay {
    name: String,
    pipe: ChildStderr,
    line: Vec<u8>,
}

impl Relay {
    /// The relay of `pipe`; `None` when the pipe cannot be made
    /// non-blocking (it is then closed: the daemon's writes fail, it runs on).
    pub(super) fn new(name: &str, pipe: ChildStderr) -> Option<Relay> {
        let fd = pipe.as_raw_fd();
        let flags = fcntl(fd, FcntlArg::F_GETFL).ok()?;
        fcntl(
            fd,
            FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
        )
        .ok()?;
        Some(Relay {
            name: name.to_owned(),
            pipe,
            line: Vec::new(),
        })
    }

    /// The pipe, for `poll`.
    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.pipe.as_fd()
    }

    /// Logs what the pipe holds now, line by line; false at end of file
    /// (or a read error): the relay is done, its last unterminated line
    /// logged.
    pub(super) fn pump(&mut self, buf: &mut [u8; READ_CHUNK]) -> bool {
        loop {
            match self.pipe.read(buf) {
                Ok(0) => break,
                Ok(n) => {
                    let name = &self.name;
                    feed(&mut self.line, &buf[..n], |l| log(name, l));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(_) => break,
            }
        }
        if !self.line.is_empty() {
            log(&self.name, &self.line);
            self.line.clear();
        }
        false
    }
}

/// Adds `data` to `line`, calling `emit` with each complete line (its
/// newline included) and with each [`MAX_LINE`] bytes of a longer one.
fn feed(line: &mut Vec<u8>, mut data: &[u8], mut emit: impl FnMut(&[u8])) {
    while !data.is_empty() {
        let room = MAX_LINE - line.len();
        let take = data.len().min(room);
        match data[..take].iter().position(|&b| b == b'\n') {
            Some(i) => {
                line.extend_from_slice(&data[..=i]);
                data = &data[i + 1..];
            }
            None => {
                line.extend_from_slice(&data[..take]);
                data = &data[take..];
                if line.len() < MAX_LINE {
                    return;
                }
            }
        }
        emit(line);
        line.clear();
    }
}

fn log(name: &str, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    // libvirt's lines read "<time>: <thread>: <level> : <message>".
    if text.contains(": error : ") {
        tracing::error!(component = %name, "{text}");
    } else if text.contains(": warning : ") {
        tracing::warn!(component = %name, "{text}");
    } else if !text.is_empty() {
        tracing::info!(component = %name, "{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let mut line = Vec::new();
        let mut out = Vec::new();
        for c in chunks {
            feed(&mut line, c, |l| out.push(l.to_vec()));
        }
        (out, line)
    }

    /// Lines split across reads are joined; several in one read are split;
    /// an unterminated tail waits for more.
    #[test]
    fn assembles_lines_across_reads() {
        let (out, rest) = lines(&[b"a: info : one\nb: er", b"ror : two\nc\n", b"tail"]);
        assert_eq!(
            out,
            vec![
                b"a: info : one\n".to_vec(),
                b"b: error : two\n".to_vec(),
                b"c\n".to_vec()
            ]
        );
        assert_eq!(rest, b"tail");
    }

    /// A line over the bound is logged in pieces of exactly the bound (as
    /// `take(MAX_LINE).read_until` did), its remainder as the next line.
    #[test]
    fn a_line_over_the_bound_is_cut_at_the_bound() {
        let long = vec![b'x'; MAX_LINE + 10];
        let mut data = long.clone();
        data.extend_from_slice(b"\nnext\n");
        let chunks: Vec<&[u8]> = data.chunks(READ_CHUNK).collect();
        let (out, rest) = lines(&chunks);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].len(), MAX_LINE);
        assert_eq!(out[1], [vec![b'x'; 10], b"\n".to_vec()].concat());
        assert_eq!(out[2], b"next\n");
        assert!(rest.is_empty());
    }
}
