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
//! nothing but risk here. The image is written in a private directory
//! ([`crate::staging`]) and renamed into place, so a failure (or the 10 s
//! timeout KubeVirt also applies) never leaves a half-written image at the
//! path the domain uses, and `xorrisofs` never opens a path anyone else
//! can put a link at.

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
/// (file modes as they are in `dir`), to `out`: `xorrisofs -output <out>
/// -volid <label> -joliet -rock -partition_cyl_align on <dir>`, run in the
/// directory `cwd` (`dir` and `out` relative to it). Symbolic links are
/// recorded as links, never followed (callers copy what they accept into
/// `dir` first). `cwd` is a private directory
/// ([`crate::staging::Staging::dir`]) from which the caller renames `out`
/// into place: `xorrisofs` opens it by path, following links.
///
/// # Errors
/// [`IsoError`] (the caller's private directory goes with what was
/// written).
pub fn create(cwd: &Path, dir: &Path, label: &str, out: &Path) -> Result<(), IsoError> {
    let mut cmd = Command::new(XORRISOFS);
    cmd.current_dir(cwd)
        .arg("-output")
        .arg(out)
        .args(["-volid", label, "-joliet", "-rock"])
        .args(["-partition_cyl_align", "on", "-quiet"])
        .arg(dir);
    process::run(cmd, ISO_TIMEOUT, 64 * 1024)?;
    Ok(())
}
