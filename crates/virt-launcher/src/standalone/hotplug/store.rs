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
}
