//! `virt-tail`: what KubeVirt's `guest-console-log` container runs
//! (v1.6.6 `cmd/virt-tail/main.go`; virt-controller's
//! `serialconsolelog.go`: `/usr/bin/virt-tail --logfile
//! /var/run/kubevirt-private/<uid>/virt-serial0-log`, as uid 107 with no
//! capability).
//!
//! It follows the serial console's log file by name from its start and
//! prints every complete line to standard output (the container's log):
//! a file that does not exist yet is waited for; one that is replaced
//! (another inode at the path) or truncated is read again from its start;
//! an incomplete last line waits for its end. SIGTERM or SIGINT ends it
//! with status 0. Flags as pflag reads them with unknown flags allowed:
//! `--logfile P` or `--logfile=P`; any other flag is skipped (with the
//! next argument when that does not start with `-`). No `--logfile` (or
//! an empty one): exit 1. `VIRT_LAUNCHER_LOG_VERBOSITY` sets the log
//! level as in KubeVirt.
//!
//! The guest writes that file (through QEMU): a line without an end
//! would grow without bound, so a line is cut after [`MAX_LINE`] bytes
//! and the part printed as a line (KubeVirt's tail library has no bound).
//! The file is polled every [`POLL`] (the library uses inotify where it
//! can; what is printed is the same).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The longest line printed as one; longer ones are cut into parts.
pub const MAX_LINE: usize = 1 << 20;
/// How often the file is checked for new data, replacement or truncation.
pub const POLL: Duration = Duration::from_millis(250);

/// `--logfile`'s value from `args` (pflag with unknown flags allowed).
pub fn logfile(args: &[String]) -> Option<String> {
    let mut i = 0;
    let mut found = None;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            break;
        }
        let Some(name) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
            continue;
        };
        let (name, value) = match name.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (name, None),
        };
        let takes_next = value.is_none() && i < args.len() && !args[i].starts_with('-');
        if name == "logfile" {
            found = match value {
                Some(v) => Some(v),
                None if i < args.len() => {
                    i += 1;
                    Some(args[i - 1].clone())
                }
                None => None,
            };
        } else if takes_next {
            // An unknown flag takes the next argument as its value.
            i += 1;
        }
    }
    found.filter(|f| !f.is_empty())
}

/// Splits complete lines off `pending` and hands each (without its `\n`)
/// to `out`; a part longer than [`MAX_LINE`] without an end is handed on
/// as a line of its own.
pub fn drain_lines(pending: &mut Vec<u8>, out: &mut impl FnMut(&[u8])) {
    let mut start = 0;
    while let Some(n) = pending[start..].iter().position(|b| *b == b'\n') {
        out(&pending[start..start + n]);
        start += n + 1;
    }
    while pending.len() - start > MAX_LINE {
        out(&pending[start..start + MAX_LINE]);
        start += MAX_LINE;
    }
    pending.drain(..start);
}

/// Follows `path` until `stop` is set, writing each line to `out`.
///
/// # Errors
/// Writing to `out` failed (the container's log is gone).
pub fn follow(path: &Path, stop: &Arc<AtomicBool>, out: &mut impl Write) -> io::Result<()> {
    let mut pending = Vec::new();
    let mut open: Option<(File, u64)> = None;
    let mut offset = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    let mut werr = None;
    while !stop.load(Ordering::SeqCst) {
        // Reopen when the path names another file; start over when it shrank.
        match std::fs::metadata(path) {
            Ok(m) => {
                let same = open.as_ref().is_some_and(|(_, ino)| *ino == m.ino());
                if !same {
                    open = File::open(path).ok().map(|f| (f, m.ino()));
                    offset = 0;
                    pending.clear();
                } else if m.len() < offset {
                    offset = 0;
                    pending.clear();
                }
            }
            Err(_) => open = None,
        }
        let mut progressed = false;
        if let Some((f, _)) = open.as_mut() {
            f.seek(SeekFrom::Start(offset))?;
            loop {
                let n = match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                offset += n as u64;
                progressed = true;
                pending.extend_from_slice(&buf[..n]);
                drain_lines(&mut pending, &mut |line| {
                    if werr.is_none() {
                        if let Err(e) = out.write_all(line).and_then(|()| out.write_all(b"\n")) {
                            werr = Some(e);
                        }
                    }
                });
                if let Some(e) = werr.take() {
                    return Err(e);
                }
                if stop.load(Ordering::SeqCst) {
                    break;
                }
            }
            out.flush()?;
        }
        if !progressed {
            std::thread::sleep(POLL);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn logfile_is_read_with_unknown_flags_skipped_as_pflag_does() {
        assert_eq!(logfile(&args(&["--logfile", "/x"])), Some("/x".into()));
        assert_eq!(logfile(&args(&["--logfile=/x"])), Some("/x".into()));
        assert_eq!(
            logfile(&args(&["-v", "3", "--logfile", "/x"])),
            Some("/x".into())
        );
        // The unknown flag takes "--logfile"? No: it starts with '-'.
        assert_eq!(
            logfile(&args(&["--other", "--logfile", "/x"])),
            Some("/x".into())
        );
        // Here "/y" is the unknown flag's value.
        assert_eq!(logfile(&args(&["--other", "/y"])), None);
        assert_eq!(logfile(&args(&["--logfile="])), None);
        assert_eq!(logfile(&args(&[])), None);
        assert_eq!(logfile(&args(&["--", "--logfile", "/x"])), None);
    }

    #[test]
    fn only_complete_lines_are_handed_on_and_long_ones_are_cut() {
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut pending = b"one\ntwo\nthr".to_vec();
        drain_lines(&mut pending, &mut |l| got.push(l.to_vec()));
        assert_eq!(got, vec![b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(pending, b"thr");
        pending.extend_from_slice(b"ee\n\n");
        drain_lines(&mut pending, &mut |l| got.push(l.to_vec()));
        assert_eq!(got[2..], [b"three".to_vec(), Vec::new()]);
        assert!(pending.is_empty());
        got.clear();
        let mut pending = vec![b'x'; 2 * MAX_LINE + 5];
        drain_lines(&mut pending, &mut |l| got.push(l.to_vec()));
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|l| l.len() == MAX_LINE));
        assert_eq!(pending.len(), 5);
    }
}
