//! Changed block tracking overlays (KubeVirt main's
//! `pkg/virt-launcher/virtwrap/storage/cbt.go`): for each tracked volume a
//! qcow2 file whose guest data is the volume's own raw image or device
//! (`data-file`, `data-file-raw: true`), so that the volume keeps its raw
//! content while the qcow2 file carries the persistent dirty bitmaps that
//! libvirt's checkpoints are made of.
//!
//! `qemu-img create -o data_file=...` would create (truncate) the data file,
//! destroying the claim's content; KubeVirt therefore formats the overlay
//! with `blockdev-create` in `qemu-storage-daemon`, which opens the data
//! file as it is. So does this module, over the daemon's QMP monitor on
//! stdio (one command per line, JSON answers and events per line; the QMP
//! protocol is JSON lines, parsed with `serde_json`). The session is bounded:
//! 30 s in all (KubeVirt's), lines of at most 64 KiB, 1 MiB in all.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use api::VirtualMachineInstance;

use crate::files::{ensure_parent_under, exists_regular};
use crate::staging::{open_no_follow, Staging};
use crate::{io_err, volume_err, StorageError};

/// KubeVirt's overlay cluster size: 256 KiB.
pub const CLUSTER_SIZE: u64 = 1 << 18;
/// The whole `qemu-storage-daemon` session's limit (KubeVirt: 30 s).
const SESSION_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest QMP line read.
const MAX_LINE: u64 = 64 << 10;
/// Most QMP output read in all.
const MAX_OUTPUT: usize = 1 << 20;

/// A `--blockdev` option value: QEMU's option syntax doubles a comma.
fn opt_value(p: &Path) -> String {
    p.display().to_string().replace(',', ",,")
}

/// Makes the overlay of volume `volume` at `overlay` over `data` (the
/// claim's image or block device, `block`), `size` bytes, unless it exists
/// (KubeVirt keeps an existing overlay: its bitmaps are the checkpoints).
/// `owner`: the overlay's owner when QEMU runs unprivileged.
///
/// The daemon opens both files by path. The overlay is made in a private
/// directory and renamed into place ([`crate::staging`]). The data file's
/// path is recorded in the overlay's header (a `/proc/<pid>/fd/<n>` path
/// would be recorded as such), so it is given as it is, after a check on a
/// descriptor opened without following a link: a regular file (or block
/// device with `block`); the same file must still be at that path after
/// the session.
///
/// # Errors
/// [`StorageError`] naming `field`: the overlay path is not a regular
/// file, the data file is a link or of the wrong type, the daemon cannot
/// start, the job fails or the session times out (nothing is left at the
/// overlay's path).
pub fn ensure_overlay(
    field: &str,
    vmi: &VirtualMachineInstance,
    overlay: &Path,
    data: &Path,
    block: bool,
    size: u64,
    owner: Option<(u32, u32)>,
) -> Result<(), StorageError> {
    if exists_regular(field, overlay)? {
        return Ok(());
    }
    make_overlay(
        field,
        api::cbt::dir(vmi),
        overlay,
        data,
        OverlayData { block, size },
        owner,
    )
}

/// The data file of an overlay: a block device or not, and the guest's
/// size in bytes.
#[derive(Clone, Copy)]
pub(crate) struct OverlayData {
    /// The data file is a block device (else a regular file).
    pub(crate) block: bool,
    /// Bytes.
    pub(crate) size: u64,
}

/// [`ensure_overlay`]'s work below the directory `root` (KubeVirt's
/// changed block tracking directory; tests give their own).
pub(crate) fn make_overlay(
    field: &str,
    root: &str,
    overlay: &Path,
    data: &Path,
    OverlayData { block, size }: OverlayData,
    owner: Option<(u32, u32)>,
) -> Result<(), StorageError> {
    ensure_parent_under(field, root, overlay)?;
    let staging = Staging::new(field, Path::new(root), overlay)?;
    let out = staging.file();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&out)
        .map_err(io_err(field, "create", overlay))?;
    let held = checked_data_file(field, data, block)?;
    format_overlay(staging.dir(), staging.name(), data, block, size).map_err(|m| {
        volume_err(
            field,
            format!(
                "cannot create the changed block tracking overlay {}: {m}",
                overlay.display()
            ),
        )
    })?;
    match std::fs::symlink_metadata(data) {
        Ok(m) if m.dev() == held.dev() && m.ino() == held.ino() => {}
        _ => {
            return Err(volume_err(
                field,
                format!(
                    "{} was replaced while the changed block tracking overlay was made (refused)",
                    data.display()
                ),
            ))
        }
    }
    staging.finish(0o640, owner)
}

/// The data file's metadata, read on a descriptor opened without
/// following a link (nor blocking on a FIFO): a regular file, or a block
/// device when `block`.
fn checked_data_file(
    field: &str,
    data: &Path,
    block: bool,
) -> Result<std::fs::Metadata, StorageError> {
    let f = open_no_follow(data, false).map_err(io_err(field, "open", data))?;
    let m = f.metadata().map_err(io_err(field, "stat", data))?;
    let ok = if block {
        m.file_type().is_block_device()
    } else {
        m.is_file()
    };
    if !ok {
        return Err(volume_err(
            field,
            format!(
                "{} is not a {}",
                data.display(),
                if block {
                    "block device"
                } else {
                    "regular file"
                }
            ),
        ));
    }
    Ok(m)
}

/// The QMP session: capabilities, `blockdev-create` (qcow2, data file raw,
/// 256 KiB clusters), wait for the job to conclude, read its error, dismiss
/// it, quit. The daemon runs in `cwd` (`overlay` relative to it, `data` as
/// recorded in the header).
fn format_overlay(
    cwd: &Path,
    overlay: &Path,
    data: &Path,
    block: bool,
    size: u64,
) -> Result<(), String> {
    let mut cmd = Command::new("qemu-storage-daemon");
    cmd.current_dir(cwd)
        .args([
            "--chardev",
            "stdio,id=stdio",
            "--monitor",
            "stdio",
            "--blockdev",
        ])
        .arg(format!(
            "file,node-name=file,filename={}",
            opt_value(overlay)
        ))
        .arg("--blockdev")
        .arg(format!(
            "{},node-name=data-file,filename={}",
            if block { "host_device" } else { "file" },
            opt_value(data)
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = process::reaper()
        .spawn(&mut cmd)
        .map_err(|e| format!("cannot start qemu-storage-daemon: {e}"))?;
    let pid = child.id();
    let (mut stdin, stdout, stderr) =
        match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => {
                let _ = child.kill();
                process::reaper().wait(pid, Some(SESSION_TIMEOUT));
                return Err("qemu-storage-daemon has no stdio pipes".into());
            }
        };
    // Lines go to a channel so that the session's deadline holds while
    // the daemon says nothing.
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut total = 0usize;
        loop {
            let mut line = Vec::new();
            match (&mut r).take(MAX_LINE).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    total += n;
                    if total > MAX_OUTPUT
                        || tx
                            .send(String::from_utf8_lossy(&line).into_owned())
                            .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.take(MAX_OUTPUT as u64).read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + SESSION_TIMEOUT;
    let create = serde_json::json!({
        "execute": "blockdev-create",
        "arguments": {"job-id": "create", "options": {
            "driver": "qcow2", "file": "file", "data-file": "data-file",
            "data-file-raw": true, "size": size, "cluster-size": CLUSTER_SIZE}}
    });
    let mut result = writeln!(stdin, "{{\"execute\": \"qmp_capabilities\"}}\n{create}")
        .map_err(|e| format!("cannot talk to qemu-storage-daemon: {e}"));
    let mut concluded = false;
    let mut job_error = None;
    let mut sent_end = false;
    while result.is_ok() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            if !sent_end {
                result = Err(if Instant::now() >= deadline {
                    "qemu-storage-daemon did not finish within 30 s".into()
                } else {
                    "qemu-storage-daemon exited before the job concluded".into()
                });
            }
            break;
        };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line.trim()) else {
            continue;
        };
        if msg.get("error").is_some() && !concluded {
            result = Err(format!(
                "qemu-storage-daemon refused a command: {}",
                line.trim()
            ));
            break;
        }
        if !concluded && msg["event"] == "JOB_STATUS_CHANGE" && msg["data"]["status"] == "concluded"
        {
            concluded = true;
            result = writeln!(
                stdin,
                "{{\"execute\": \"query-jobs\"}}\n{{\"execute\": \"job-dismiss\", \"arguments\": {{\"id\": \"create\"}}}}\n{{\"execute\": \"quit\"}}"
            )
            .map_err(|e| format!("cannot talk to qemu-storage-daemon: {e}"));
            sent_end = true;
            continue;
        }
        if concluded && job_error.is_none() {
            if let Some(jobs) = msg["return"].as_array() {
                job_error = jobs
                    .iter()
                    .find(|j| j["id"] == "create")
                    .and_then(|j| j["error"].as_str())
                    .map(str::to_owned);
            }
        }
    }
    drop(stdin);
    let status = process::reaper().wait(
        pid,
        Some(deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(1)),
    );
    if status.is_none() {
        let _ = child.kill();
        process::reaper().wait(pid, Some(Duration::from_secs(5)));
    }
    let _ = reader.join();
    let stderr = err_reader.join().unwrap_or_default();
    let stderr = api::text::error_text(stderr.trim());
    if let Err(m) = result {
        return Err(if stderr.is_empty() {
            m
        } else {
            format!("{m}: {stderr}")
        });
    }
    if let Some(e) = job_error {
        return Err(format!("blockdev-create failed: {e}"));
    }
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(format!(
            "qemu-storage-daemon failed ({s}): {}",
            stderr.trim()
        )),
        None => Err("qemu-storage-daemon did not exit".into()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn vmi() -> VirtualMachineInstance {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {"domain": {"devices": {}}}
        }))
        .unwrap()
    }

    /// The overlay is formatted over the image without touching its
    /// content, reads back as the image through QEMU, and is kept when it
    /// exists; a missing data file fails and leaves no overlay.
    #[test]
    fn overlay_keeps_the_data_and_is_kept() {
        let _r = process::reaper();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("disk.img");
        let content: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
        std::fs::write(&data, &content).unwrap();
        // ensure_overlay makes the overlay below api::cbt::dir; the format
        // step itself works anywhere.
        let overlay = dir.path().join("data.qcow2");
        std::fs::File::create(&overlay).unwrap();
        format_overlay(dir.path(), Path::new("data.qcow2"), &data, false, 4 << 20).unwrap();
        assert_eq!(std::fs::read(&data).unwrap(), content, "data untouched");
        let mut cmd = Command::new("qemu-img");
        cmd.args(["info", "--output=json"]).arg(&overlay);
        let out = process::run(cmd, Duration::from_secs(30), 1 << 20).unwrap();
        let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(info["format"], "qcow2");
        assert_eq!(info["virtual-size"], 4 << 20);
        assert_eq!(info["format-specific"]["data"]["data-file-raw"], true);
        assert_eq!(info["cluster-size"], CLUSTER_SIZE);
        let mut cmd = Command::new("qemu-img");
        cmd.args(["compare", "-f", "qcow2", "-F", "raw"])
            .arg(&overlay)
            .arg(&data);
        process::run(cmd, Duration::from_secs(30), 1 << 20).unwrap();

        let missing = dir.path().join("none.img");
        let o2 = dir.path().join("o2.qcow2");
        std::fs::File::create(&o2).unwrap();
        let e = format_overlay(dir.path(), Path::new("o2.qcow2"), &missing, false, 4 << 20)
            .unwrap_err();
        assert!(e.contains("none.img"), "{e}");

        // An existing overlay is kept as it is.
        let v = vmi();
        let before = std::fs::read(&overlay).unwrap();
        ensure_overlay("f", &v, &overlay, &missing, false, 1, None).unwrap();
        assert_eq!(std::fs::read(&overlay).unwrap(), before);
    }
}
