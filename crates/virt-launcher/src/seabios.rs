//! SeaBIOS' debug output in the launcher's log (KubeVirt v1.6.6
//! `libvirt_helper.go`, `startQEMUSeaBiosLogging`).
//!
//! The launcher makes the FIFO [`SEABIOS_DEBUG_PIPE`] (mode 0666, as
//! KubeVirt: QEMU may run as another user) and logs every non-blank line
//! written into it as `[SeaBios]: <line>`. QEMU writes into it only when the
//! converter added the `isa-debugcon` device, i.e. with
//! `VIRT_LAUNCHER_LOG_VERBOSITY` above 5 on amd64
//! ([`converter::firmware_log`]); as in KubeVirt the FIFO is made whatever
//! the verbosity.
//!
//! Differences from KubeVirt, on purpose: the FIFO is opened read-write,
//! so the reader holds a writer itself and never sees an end of file
//! between QEMU runs (KubeVirt's read-only open waits for QEMU, and its
//! reader stops at QEMU's first close after logging "exited,
//! restarting"); a FIFO already there (a launcher restarted in the same
//! pod) is reused, anything else at that path is left alone and logged;
//! lines are cut at [`MAX_LINE`] bytes (KubeVirt's scanner stops at its
//! 64 KiB limit).

use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub use converter::firmware_log::SEABIOS_DEBUG_PIPE;

/// The longest line logged, in bytes; the rest of a longer line is dropped.
pub const MAX_LINE: usize = 64 * 1024;

/// Log prefix of every firmware line (KubeVirt's).
pub const PREFIX: &str = "[SeaBios]:";

/// Makes the FIFO at `path` and, when `read` (QEMU gets the `isa-debugcon`
/// device that writes into it: [`converter::firmware_log::wanted`]),
/// starts the thread that logs what is written into it; without the
/// device nothing ever writes there, and the idle launcher keeps one
/// thread less. Failures are logged (as in KubeVirt, where they only
/// cost the firmware's debug output), never returned.
pub fn start(path: &Path, read: bool) {
    match open_fifo(path) {
        Ok(_) if !read => {}
        Ok(fifo) => {
            let spawned = std::thread::Builder::new()
                .name("seabios-log".into())
                .spawn(move || log_lines(fifo, |l| tracing::info!(subcomponent = "qemu", "{l}")));
            if let Err(e) = spawned {
                tracing::error!("{PREFIX} cannot start the reader: {e}");
            }
        }
        Err(e) => tracing::error!(
            "{PREFIX} failed creating a pipe for sea bios debug logs at {}: {e}",
            path.display()
        ),
    }
}

/// Creates (or reuses) the FIFO at `path`, mode 0666, and opens it
/// read-write without following a symbolic link.
///
/// # Errors
/// The failing call; a non-FIFO at `path` is `AlreadyExists`.
pub fn open_fifo(path: &Path) -> std::io::Result<std::fs::File> {
    use nix::sys::stat::Mode;
    match nix::unistd::mkfifo(path, Mode::from_bits_truncate(0o666)) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => return Err(e.into()),
    }
    let fifo = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = fifo.metadata()?;
    if !meta.file_type().is_fifo() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "a file that is not a FIFO is in the way",
        ));
    }
    // The umask narrowed mkfifo's mode; KubeVirt chmods it back.
    fifo.set_permissions(std::fs::Permissions::from_mode(0o666))?;
    // Reads block from now on (the open itself had to be non-blocking so
    // that a non-FIFO could never block it).
    let flags = nix::fcntl::fcntl(fifo.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)?;
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) & !nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(fifo.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(flags))?;
    Ok(fifo)
}

/// Reads `input` line by line until its end (never, for the FIFO) and
/// hands each non-blank line, prefixed with [`PREFIX`] and cut at
/// [`MAX_LINE`] bytes, to `log`.
pub fn log_lines(input: impl Read, mut log: impl FnMut(&str)) {
    let mut reader = BufReader::new(input);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // Read at most MAX_LINE bytes of the line, then skip its rest.
        let n = match (&mut reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut buf)
        {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::error!("{PREFIX} reader failed with an error: {e}");
                return;
            }
        };
        if n == 0 {
            return;
        }
        if buf.last() != Some(&b'\n') && buf.len() == MAX_LINE {
            skip_rest_of_line(&mut reader);
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        log(&format!("{PREFIX} {line}"));
    }
}

/// Drops input up to and including the next newline, a buffer at a time
/// (memory stays bounded however long the line).
fn skip_rest_of_line(reader: &mut impl BufRead) {
    loop {
        let (used, done) = match reader.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(chunk) => match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            },
        };
        reader.consume(used);
        if done {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_are_prefixed_blank_ones_skipped_long_ones_cut() {
        let long = "x".repeat(MAX_LINE + 10);
        let text =
            format!("SeaBIOS (version 1.16)\n\n   \nBooting from Hard Disk...\r\n{long}\nafter\n");
        let mut got = Vec::new();
        log_lines(text.as_bytes(), |l| got.push(l.to_owned()));
        assert_eq!(
            got.len(),
            4,
            "{:?}",
            got.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(got[0], "[SeaBios]: SeaBIOS (version 1.16)");
        assert_eq!(got[1], "[SeaBios]: Booting from Hard Disk...");
        assert_eq!(got[2], format!("[SeaBios]: {}", "x".repeat(MAX_LINE)));
        assert_eq!(got[3], "[SeaBios]: after");
    }

    #[test]
    fn the_fifo_is_world_writable_reused_and_never_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("QEMUSeaBiosDebugPipe");
        let fifo = open_fifo(&path).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_fifo());
        assert_eq!(meta.permissions().mode() & 0o777, 0o666);
        // A writer (QEMU) opening it gets its lines to the reader.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || log_lines(fifo, |l| tx.send(l.to_owned()).unwrap()));
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        w.write_all(b"one\ntwo\n").unwrap();
        drop(w);
        let wait = std::time::Duration::from_secs(10);
        assert_eq!(rx.recv_timeout(wait).unwrap(), "[SeaBios]: one");
        assert_eq!(rx.recv_timeout(wait).unwrap(), "[SeaBios]: two");
        // The writer closed; the reader still waits for the next one.
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        w.write_all(b"three\n").unwrap();
        assert_eq!(rx.recv_timeout(wait).unwrap(), "[SeaBios]: three");
        // An existing FIFO is reused.
        assert!(open_fifo(&path).is_ok());
        // A symbolic link or a regular file is refused, never followed.
        let target = dir.path().join("target");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(open_fifo(&link).is_err());
        assert!(open_fifo(&target).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }
}
