//! ISO 9660 images (with Joliet and Rock Ridge) of a directory, written by
//! `xorrisofs` as KubeVirt does (facts 5.2, 5.3).
//!
//! Why a program and not a Rust crate: KubeVirt v1.6.6 runs `xorrisofs`
//! (libisofs) for both cloud-init and config disks, so running it with the
//! same options gives guests the same volume descriptors, name mangling,
//! Joliet names and Rock Ridge modes they get under KubeVirt; libisofs has
//! written such images for fifteen years. The one maintained Rust writer
//! (`hadris-iso`) changed its API through three major versions within a
//! year, and whether its Rock Ridge output keeps file modes and its Joliet
//! names match libisofs's would itself need the checks below, so it buys
//! nothing but risk here. The image is written to `<iso>.staging` and
//! renamed, so a failure (or the 10 s timeout KubeVirt also applies) never
//! leaves a half-written image at the path the domain uses.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::LabelError;

/// KubeVirt's timeout for generating a cloud-init ISO (facts 9).
pub const ISO_TIMEOUT: Duration = Duration::from_secs(10);

/// The program that writes the images (Debian package `xorriso`).
pub const XORRISOFS: &str = "xorrisofs";

/// Longest ISO 9660 volume identifier (ECMA-119 8.4.6: 32 characters).
pub const MAX_LABEL: usize = 32;

/// Why an image (ISO here, FAT in [`crate::fat`]) could not be written.
#[derive(Debug, thiserror::Error)]
pub enum IsoError {
    /// The writing program failed, timed out or is not installed
    /// (packages xorriso, dosfstools, mtools).
    #[error("{0}")]
    Run(#[from] process::RunError),
    /// Reading the source tree failed.
    #[error("cannot read {0}: {1}")]
    Read(PathBuf, std::io::Error),
    /// Renaming the finished image failed.
    #[error("cannot move {0} into place: {1}")]
    Rename(PathBuf, std::io::Error),
}

/// `<iso>.staging`, where the image is written before the rename.
pub fn staging_path(iso: &Path) -> PathBuf {
    let mut p = iso.as_os_str().to_owned();
    p.push(".staging");
    PathBuf::from(p)
}

/// Checks a volume label: 1 to [`MAX_LABEL`] printable ASCII characters.
///
/// # Errors
/// [`LabelError::Length`] or [`LabelError::IsoCharacter`], naming the
/// label.
pub fn check_label(label: &str) -> Result<(), LabelError> {
    if label.is_empty() || label.len() > MAX_LABEL {
        return Err(LabelError::Length {
            label: label.to_owned(),
            max: MAX_LABEL,
            what: "an ISO 9660 volume identifier",
        });
    }
    if let Some(c) = label.chars().find(|c| !c.is_ascii_graphic() && *c != ' ') {
        return Err(LabelError::IsoCharacter {
            label: label.to_owned(),
            character: c,
        });
    }
    Ok(())
}

/// Writes an ISO 9660 image of the contents of `dir` (its entries become
/// the image's root) with volume identifier `label`, Joliet and Rock Ridge
/// (file modes as they are in `dir`), to `iso`, through `<iso>.staging`:
/// `xorrisofs -output <iso>.staging -volid <label> -joliet -rock
/// -partition_cyl_align on <dir>`. Symbolic links are recorded as links,
/// never followed (callers copy what they accept into `dir` first).
///
/// # Errors
/// [`IsoError`]; the staging file is removed on failure.
pub fn create(dir: &Path, label: &str, iso: &Path) -> Result<(), IsoError> {
    let staging = staging_path(iso);
    let _ = std::fs::remove_file(&staging);
    let mut cmd = Command::new(XORRISOFS);
    cmd.arg("-output")
        .arg(&staging)
        .args(["-volid", label, "-joliet", "-rock"])
        .args(["-partition_cyl_align", "on", "-quiet"])
        .arg(dir);
    let res = process::run(cmd, ISO_TIMEOUT, 64 * 1024)
        .map_err(IsoError::from)
        .and_then(|_| std::fs::rename(&staging, iso).map_err(|e| IsoError::Rename(iso.into(), e)));
    if res.is_err() {
        let _ = std::fs::remove_file(&staging);
    }
    res
}
