//! The monitor's file work after the launcher exited: the logs it copies
//! into its own log, and the container-disk sockets it removes.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// passt's log file (KubeVirt's `passtLogFile`).
pub const PASST_LOG: &str = "/var/run/kubevirt/passt.log";

/// The directory of QEMU's logs in non-root mode (KubeVirt dumps every file
/// in it; in root mode virtlogd writes elsewhere and nothing is there).
pub const QEMU_LOG_DIR: &str = "/run/kubevirt-private/libvirt/qemu/log";

/// The longest line copied (KubeVirt's scanner buffer: 512 KiB); a longer
/// one ends the dump with an error, as in KubeVirt.
pub const MAX_LINE: usize = 512 * 1024;

/// At most this much of one file is copied (KubeVirt copies all of it; a
/// bound keeps a runaway log from holding up the pod's exit).
pub const MAX_DUMP: u64 = 16 * 1024 * 1024;

/// Copies the file at `path` line by line into the log, as KubeVirt's
/// `dumpLogFile`: a missing file is skipped silently. Symbolic links are
/// never followed and only regular files are read (a FIFO would block).
/// Returns the number of lines copied.
pub fn dump_log_file(path: &Path) -> usize {
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return 0,
        Err(e) => {
            tracing::error!(reason = %e, "failed to open file {}", path.display());
            return 0;
        }
    };
    match file.metadata() {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            tracing::error!("failed to open file {}: not a regular file", path.display());
            return 0;
        }
        Err(e) => {
            tracing::error!(reason = %e, "failed to open file {}", path.display());
            return 0;
        }
    }
    tracing::info!("dump log file: {}", path.display());
    let mut reader = BufReader::new(file.take(MAX_DUMP));
    let mut lines = 0;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // One more byte than a line may have, to see an over-long one.
        let limit = u64::try_from(MAX_LINE + 1).unwrap_or(u64::MAX);
        match (&mut reader).take(limit).read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {
                let ended = buf.last() == Some(&b'\n');
                if !ended && buf.len() > MAX_LINE {
                    tracing::error!(
                        reason = "token too long",
                        "failed to read file {}",
                        path.display()
                    );
                    break;
                }
                let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                tracing::info!("{}", String::from_utf8_lossy(line));
                lines += 1;
            }
            Err(e) => {
                tracing::error!(reason = %e, "failed to read file {}", path.display());
                break;
            }
        }
    }
    lines
}

/// `O_NOFOLLOW | O_NONBLOCK`: no links, no blocking open of a FIFO.
fn libc_flags() -> i32 {
    (nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits()
}

/// The files KubeVirt dumps after the launcher's exit: passt's log, then
/// every entry of the QEMU log directory (in directory order, as Go's
/// `os.ReadDir` sorts them: by name).
pub fn dump_logs(passt_log: &Path, qemu_log_dir: &Path) {
    dump_log_file(passt_log);
    let entries = match read_dir_sorted(qemu_log_dir) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(reason = %e, "failed to read qemu log directory");
            return;
        }
    };
    for entry in entries {
        dump_log_file(&entry);
    }
}

fn read_dir_sorted(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let meta = fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other("not a directory"));
    }
    let mut out: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    out.sort();
    Ok(out)
}

/// Removes every `*.sock` entry of the container-disk directory, so that the
/// container-disk containers (which wait on their socket) terminate
/// (KubeVirt's `RemoveContents`). A socket, file or symbolic link is
/// unlinked (a link itself, never what it points to); a directory so named
/// is left alone and logged (KubeVirt would remove its whole tree). A `dir`
/// that is itself a symbolic link is refused. Returns what was removed.
///
/// # Errors
/// The first I/O error, as KubeVirt stops at it; `dir` missing is no error.
pub fn remove_sockets(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory (a symbolic link is never followed)",
            dir.display()
        )));
    }
    let mut removed = Vec::new();
    let mut names: Vec<_> = fs::read_dir(dir)?.filter_map(Result::ok).collect();
    names.sort_by_key(fs::DirEntry::file_name);
    for entry in names {
        let name = entry.file_name();
        if !name.as_encoded_bytes().ends_with(b".sock") {
            continue;
        }
        let path = entry.path();
        let ft = entry.file_type()?;
        if ft.is_dir() {
            tracing::warn!("not removing directory {}", path.display());
            continue;
        }
        match fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn sockets_removed_links_not_followed() {
        let d = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let target = outside.path().join("victim.sock");
        fs::write(&target, "keep").expect("write");
        let _l = UnixListener::bind(d.path().join("disk_0.sock")).expect("bind");
        std::os::unix::fs::symlink(&target, d.path().join("link.sock")).expect("symlink");
        fs::create_dir(d.path().join("dir.sock")).expect("mkdir");
        fs::write(d.path().join("dir.sock/inner"), "x").expect("write");
        fs::write(d.path().join("disk_0.img"), "img").expect("write");
        let removed = remove_sockets(d.path()).expect("removes");
        let names: Vec<_> = removed
            .iter()
            .filter_map(|p| p.file_name()?.to_str())
            .collect();
        assert_eq!(names, vec!["disk_0.sock", "link.sock"]);
        assert!(target.exists(), "a link's target is never touched");
        assert!(d.path().join("dir.sock/inner").exists());
        assert!(d.path().join("disk_0.img").exists());
        assert!(!d.path().join("disk_0.sock").exists());
    }

    #[test]
    fn socket_dir_missing_or_a_link() {
        let d = tempfile::tempdir().expect("tempdir");
        assert!(remove_sockets(&d.path().join("missing"))
            .expect("missing is fine")
            .is_empty());
        let real = d.path().join("real");
        fs::create_dir(&real).expect("mkdir");
        let _l = UnixListener::bind(real.join("a.sock")).expect("bind");
        std::os::unix::fs::symlink(&real, d.path().join("link")).expect("symlink");
        let e = remove_sockets(&d.path().join("link")).expect_err("a link is refused");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(real.join("a.sock").exists());
    }

    #[test]
    fn dump_counts_lines_and_refuses_links_and_fifos() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("passt.log");
        fs::write(&f, "one\ntwo\r\nthree").expect("write");
        assert_eq!(dump_log_file(&f), 3);
        assert_eq!(dump_log_file(&d.path().join("missing")), 0);
        std::os::unix::fs::symlink(&f, d.path().join("link")).expect("symlink");
        assert_eq!(dump_log_file(&d.path().join("link")), 0);
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        assert_eq!(
            dump_log_file(&fifo),
            0,
            "a FIFO is neither read nor waited on"
        );
    }

    #[test]
    fn dump_stops_at_an_over_long_line() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("qemu.log");
        let mut s = String::from("first\n");
        s.push_str(&"x".repeat(MAX_LINE + 10));
        s.push_str("\nafter\n");
        fs::write(&f, s).expect("write");
        assert_eq!(dump_log_file(&f), 1);
        // A line of exactly the limit is fine.
        fs::write(&f, format!("{}\nb\n", "y".repeat(MAX_LINE))).expect("write");
        assert_eq!(dump_log_file(&f), 2);
    }
}
