//! The stand-in's copy of the VMI (the informer's): where `run` keeps it
//! and how `ctl` reads and replaces it.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::LauncherError;

/// Where `run` keeps the VMI it runs, relative to its state directory.
pub const STORE: &str = "standalone/vmi.json";
/// The largest stored VMI read back (bytes).
const STORE_MAX: u64 = 16 << 20;

/// The state directory of the launcher whose command socket is `socket`
/// (`<state>/share/sockets/launcher-sock`).
pub fn state_dir_of(socket: &Path) -> Result<PathBuf, LauncherError> {
    socket
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            LauncherError::input_at("--socket", "is not <state-dir>/share/sockets/launcher-sock")
        })
}

/// Writes `vmi` (JSON) as the stored VMI of the state directory `state`
/// (mode 0600, written under a temporary name and renamed).
///
/// # Errors
/// A runtime error naming the file.
pub fn write_store(state: &Path, vmi: &Value) -> Result<(), LauncherError> {
    let file = state.join(STORE);
    let dir = file.parent().unwrap_or(state);
    let io = |e: std::io::Error| LauncherError::runtime(format!("{}: {e}", file.display()));
    let tmp = dir.join(".vmi.json.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(io)?;
    std::io::Write::write_all(&mut f, vmi.to_string().as_bytes()).map_err(io)?;
    std::fs::rename(&tmp, &file).map_err(io)
}

/// Reads the stored VMI of the state directory `state`.
///
/// # Errors
/// Input error when there is none (the launcher is no standalone `run`'s),
/// runtime error when it cannot be read.
pub fn read_store(state: &Path) -> Result<Value, LauncherError> {
    let file = state.join(STORE);
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&file)
        .map_err(|e| {
            LauncherError::input_at(
                "--socket",
                format!(
                    "no VMI of a standalone run at {} ({e}): volumes are hot-plugged this way only for a launcher started by `virt-launcher run`; in a pod virt-handler does it",
                    file.display()
                ),
            )
        })?;
    let meta = f
        .metadata()
        .map_err(|e| LauncherError::runtime(format!("{}: {e}", file.display())))?;
    if !meta.is_file() || meta.len() > STORE_MAX {
        return Err(LauncherError::runtime(format!(
            "{} is not a VMI file of at most {STORE_MAX} bytes",
            file.display()
        )));
    }
    let mut s = String::new();
    f.take(STORE_MAX)
        .read_to_string(&mut s)
        .map_err(|e| LauncherError::runtime(format!("{}: {e}", file.display())))?;
    serde_json::from_str(&s).map_err(|e| LauncherError::runtime(format!("{}: {e}", file.display())))
}

/// How long a `ctl` change waits for another one of the same VMI.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Holds the stored VMI of a state directory for one change (released
/// when dropped).
#[derive(Debug)]
pub struct StoreLock(#[allow(dead_code)] std::fs::File);

/// Takes the stored VMI of `state` for one read-change-send-write round,
/// waiting (up to [`LOCK_WAIT`]) while another `ctl` holds it: an
/// exclusive `flock` on `<state>/standalone/vmi.json.lock`. virt-handler
/// handles one VMI on one worker at a time (its queue never hands a key to
/// two workers), and changes of the VMI object conflict through its
/// `resourceVersion`; without this, two concurrent `addvolume`s each sent
/// a VMI without the other's volume, and the later sync undid the earlier.
///
/// # Errors
/// Runtime error naming the lock file: it cannot be made, or another
/// change held it for [`LOCK_WAIT`].
pub fn lock_store(state: &Path) -> Result<StoreLock, LauncherError> {
    use rustix::fs::{flock, FlockOperation};
    let file = state.join(STORE).with_extension("json.lock");
    let io = |e: std::io::Error| LauncherError::runtime(format!("{}: {e}", file.display()));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&file)
        .map_err(io)?;
    let start = std::time::Instant::now();
    let mut said = false;
    loop {
        match flock(&f, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(StoreLock(f)),
            Err(rustix::io::Errno::WOULDBLOCK) if start.elapsed() < LOCK_WAIT => {
                if !said {
                    tracing::info!(
                        "another ctl change of this VMI runs; waiting for it ({})",
                        file.display()
                    );
                    said = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(LauncherError::runtime(format!(
                    "{}: another ctl change of this VMI has held it for {} s",
                    file.display(),
                    LOCK_WAIT.as_secs()
                )))
            }
            Err(e) => return Err(io(e.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_directory_of_a_socket() {
        assert_eq!(
            state_dir_of(Path::new("/s/share/sockets/launcher-sock")).unwrap(),
            Path::new("/s")
        );
    }

    #[test]
    fn one_change_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("standalone")).unwrap();
        let held = lock_store(dir.path()).unwrap();
        let lock = dir.path().join("standalone/vmi.json.lock");
        // A second holder (another open file description) is refused while
        // the first holds it, and gets it once it is dropped.
        let other = std::fs::File::open(&lock).unwrap();
        assert_eq!(
            rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive),
            Err(rustix::io::Errno::WOULDBLOCK)
        );
        drop(held);
        rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    }
}
