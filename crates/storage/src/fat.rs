//! vFAT config disks (`--config-disk-fs vfat`): the same files as the ISO,
//! in a FAT file system some guests mount more easily. KubeVirt itself only
//! writes ISO 9660; this is the launcher's option from its design notes.
//!
//! Written by `mkfs.vfat` (dosfstools) and `mcopy` (mtools), not a Rust
//! crate: the latest `fatfs` release (0.3.6) writes long-name entries in
//! front of every subdirectory's `.` and `..` entries, which `fsck.fat`
//! reports as corruption, and Kubernetes' config directories always have
//! subdirectories (`..data`). dosfstools and mtools are what the project's
//! test-guest build already uses. FAT keeps no Unix modes: files are
//! readable by everyone in the guest (its mount options decide the rest).
//! The image is written in a private directory ([`crate::staging`]) by
//! the caller and renamed into place: both tools open it by path.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::iso::IsoError;
use crate::LabelError;

/// Longest FAT volume label (the boot sector field is 11 bytes).
pub const MAX_LABEL: usize = 11;

/// Time allowed to each tool.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Checks a FAT volume label: 1 to 11 ASCII characters, none of those FAT
/// forbids in labels.
///
/// # Errors
/// [`LabelError::Length`] or [`LabelError::FatCharacter`], naming the
/// label.
pub fn check_label(label: &str) -> Result<(), LabelError> {
    if label.is_empty() || label.len() > MAX_LABEL {
        return Err(LabelError::Length {
            label: label.to_owned(),
            max: MAX_LABEL,
            what: "a FAT volume label",
        });
    }
    if let Some(c) = label
        .chars()
        .find(|c| !(c.is_ascii_graphic() || *c == ' ') || "\"*+,./:;<=>?[\\]|".contains(*c))
    {
        return Err(LabelError::FatCharacter {
            label: label.to_owned(),
            character: c,
        });
    }
    Ok(())
}

/// Size of the file system for the files below `dir`: every file and
/// directory rounded up to a 4 KiB cluster, plus room for the FAT and
/// directories, in KiB, at least 1 MiB.
fn size_kib(dir: &Path) -> std::io::Result<u64> {
    fn walk(d: &Path, total: &mut u64) -> std::io::Result<()> {
        for e in std::fs::read_dir(d)? {
            let e = e?;
            let m = e.metadata()?;
            *total += m.len().div_ceil(4096) * 4096 + 4096;
            if m.is_dir() {
                walk(&e.path(), total)?;
            }
        }
        Ok(())
    }
    let mut total = 0;
    walk(dir, &mut total)?;
    Ok((total + total / 8 + (1 << 20)).div_ceil(1024))
}

/// Writes a FAT image of the contents of `dir` labelled `label` to `out`,
/// both relative to `cwd`, the private directory
/// ([`crate::staging::Staging::dir`]) the tools run in and from which the
/// caller renames `out` into place.
///
/// # Errors
/// [`IsoError`] (the tools failed, timed out or are missing).
pub fn create(cwd: &Path, dir: &Path, label: &str, out: &Path) -> Result<(), IsoError> {
    let here = cwd.join(dir);
    let kib = size_kib(&here).map_err(|e| IsoError::Read(dir.to_owned(), e))?;
    let mut mkfs = Command::new("mkfs.vfat");
    mkfs.current_dir(cwd)
        .args(["-C", "-n", label])
        .arg(out)
        .arg(kib.to_string());
    process::run(mkfs, TIMEOUT, 64 * 1024)?;
    let mut entries: Vec<_> = std::fs::read_dir(&here)
        .and_then(|r| {
            r.map(|e| e.map(|e| dir.join(e.file_name())))
                .collect::<Result<_, _>>()
        })
        .map_err(|e| IsoError::Read(dir.to_owned(), e))?;
    entries.sort();
    if !entries.is_empty() {
        let mut mcopy = Command::new("mcopy");
        // UTF-8 names become FAT long names; -s recursive, -p keep
        // attributes, -Q stop at the first error.
        mcopy
            .current_dir(cwd)
            .env("LC_ALL", "C.UTF-8")
            .env("MTOOLS_SKIP_CHECK", "1")
            .args(["-s", "-p", "-Q", "-i"])
            .arg(out)
            .args(&entries)
            .arg("::/");
        process::run(mcopy, TIMEOUT, 64 * 1024)?;
    }
    Ok(())
}
