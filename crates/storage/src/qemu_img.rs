//! `qemu-img`: image inspection and creation. Runs through
//! [`process::run`] with time limits; `info` also under `prlimit` CPU and
//! address-space limits, as KubeVirt does, because it parses untrusted
//! image headers.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;

use crate::QEMU_IMG_CPU_SECONDS;
use converter::ImageFormat;

/// Longest `qemu-img info` JSON accepted (a normal answer is < 4 KiB).
const MAX_INFO_JSON: usize = 1 << 20;

/// The fields of `qemu-img info --output=json` the launcher reads.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct ImageInfo {
    /// `raw`, `qcow2`, ...
    pub format: String,
    /// Guest-visible size in bytes.
    #[serde(rename = "virtual-size")]
    pub virtual_size: u64,
    /// Bytes allocated on the host.
    #[serde(rename = "actual-size", default)]
    pub actual_size: u64,
    /// Backing file as recorded in the image header.
    #[serde(rename = "backing-filename", default)]
    pub backing_filename: Option<String>,
    /// Format-specific details (for qcow2: `data.data-file`, an external
    /// data file that, like a backing file, makes QEMU open another file).
    #[serde(rename = "format-specific", default)]
    pub format_specific: Option<serde_json::Value>,
}

impl ImageInfo {
    /// The external data file of a qcow2 image, if it names one.
    pub fn data_file(&self) -> Option<&str> {
        self.format_specific
            .as_ref()?
            .pointer("/data/data-file")?
            .as_str()
    }
}

/// Why `qemu-img` failed.
#[derive(Debug, thiserror::Error)]
pub enum QemuImgError {
    /// The command failed, timed out or could not start.
    #[error(transparent)]
    Run(#[from] process::RunError),
    /// `info` printed something that is not the expected JSON.
    #[error("cannot parse qemu-img info output: {0}")]
    Parse(#[from] serde_json::Error),
}

/// `qemu-img info --output=json --force-share PATH` limited to
/// [`QEMU_IMG_CPU_SECONDS`] of CPU and `memory_limit` bytes of address space.
///
/// # Errors
/// [`QemuImgError`] when it fails (not an image, limits hit) or prints
/// unexpected output.
pub fn info(path: &Path, memory_limit: u64) -> Result<ImageInfo, QemuImgError> {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--cpu={QEMU_IMG_CPU_SECONDS}"))
        .arg(format!("--as={memory_limit}"))
        .args(["qemu-img", "info", "--output=json", "--force-share", "--"])
        .arg(path);
    let out = process::run(
        cmd,
        Duration::from_secs(QEMU_IMG_CPU_SECONDS + 20),
        MAX_INFO_JSON,
    )?;
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Runs `qemu-img <args> <out> <trailing>` in the directory `cwd`.
/// `qemu-img create` opens `out` by path with `O_CREAT|O_TRUNC`, following
/// links: callers run it in a private directory
/// ([`crate::staging::Staging::dir`]), `out` relative to it, and rename
/// the file into place.
fn create(
    cwd: &Path,
    out: &Path,
    args: &[&OsStr],
    trailing: &[&OsStr],
) -> Result<(), QemuImgError> {
    let mut cmd = Command::new("qemu-img");
    cmd.current_dir(cwd).args(args).arg(out).args(trailing);
    process::run(cmd, Duration::from_secs(60), 64 * 1024)?;
    Ok(())
}

/// Creates the qcow2 `overlay` on top of `backing` (format
/// `backing_format`, recorded in the header; `backing` is only read, an
/// absolute path). `overlay` is relative to the private directory `cwd`
/// (see [`create`]).
///
/// # Errors
/// [`QemuImgError`] from qemu-img.
pub fn create_overlay(
    backing: &Path,
    backing_format: ImageFormat,
    cwd: &Path,
    overlay: &Path,
) -> Result<(), QemuImgError> {
    let args: [&OsStr; 7] = [
        "create".as_ref(),
        "-f".as_ref(),
        "qcow2".as_ref(),
        "-b".as_ref(),
        backing.as_os_str(),
        "-F".as_ref(),
        backing_format.as_str().as_ref(),
    ];
    create(cwd, overlay, &args, &[])
}

/// Creates an empty sparse qcow2 image of `bytes` virtual size at `out`,
/// relative to the private directory `cwd` (see [`create`]).
///
/// # Errors
/// [`QemuImgError`] from qemu-img.
pub fn create_empty(cwd: &Path, out: &Path, bytes: u64) -> Result<(), QemuImgError> {
    let size = bytes.to_string();
    let args: [&OsStr; 3] = ["create".as_ref(), "-f".as_ref(), "qcow2".as_ref()];
    create(cwd, out, &args, &[size.as_ref()])
}

/// Grows the raw image at `path` to `bytes` in place (`qemu-img resize -f
/// raw --preallocation=falloc|off`), KubeVirt's offline disk expansion. The
/// format is given, never probed: a guest-written header in a claim must
/// not make qemu-img treat the file as another format. `falloc` allocates
/// the new part, for images that were fully allocated before. `path` is
/// opened by qemu-img by path: callers give [`crate::staging::fd_path`] of
/// their own no-follow descriptor of the image.
///
/// # Errors
/// [`QemuImgError`] from qemu-img.
pub fn resize(path: &Path, bytes: u64, falloc: bool) -> Result<(), QemuImgError> {
    let mut cmd = Command::new("qemu-img");
    cmd.args(["resize", "-f", "raw"])
        .arg(if falloc {
            "--preallocation=falloc"
        } else {
            "--preallocation=off"
        })
        .arg(path)
        .arg(bytes.to_string());
    process::run(cmd, Duration::from_secs(120), 64 * 1024)?;
    Ok(())
}
