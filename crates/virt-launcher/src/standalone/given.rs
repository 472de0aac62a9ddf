//! A host path the standalone user gives for a guest to use (`run --pvc`,
//! `ctl addvolume --image`): one check for both. Nothing else reaches a
//! guest from the host: the user names the file, the stand-in never looks
//! for one.
//!
//! - A symbolic link is refused, not followed: the file reached must be
//!   the one named (a link may be swapped for another target between the
//!   check and the mount).
//! - A file on a file system of kernel interfaces (procfs, sysfs, cgroup,
//!   debugfs, securityfs: `/proc/self/mem`, `/sys/...`) is refused: those
//!   are no images.
//! - A block device the host uses (a mounted file system, a device held by
//!   md/dm: the kernel gives such a device to one opener, and `O_EXCL`
//!   fails with `EBUSY`) is refused: never the host's own disk.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::LauncherError;

/// What a given path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GivenKind {
    /// A regular file (a raw image).
    File,
    /// A directory (a filesystem-mode claim).
    Dir,
    /// A block device.
    Block,
}

/// Opens `path`, given by the user for `field` (`O_PATH`, never through a
/// symbolic link), and says what it is; `dir_ok`: a directory is
/// acceptable.
///
/// # Errors
/// Input error naming `field` (the caller's label, with the path where it
/// wants it): it cannot be opened, is on a file system of kernel
/// interfaces, is a link, a block
/// device the host uses, or another kind of file.
pub fn open(field: &str, path: &Path, dir_ok: bool) -> Result<(File, GivenKind), LauncherError> {
    let bad = |m: String| LauncherError::input_at(field, m);
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| bad(e.to_string()))?;
    let fs = nix::sys::statfs::fstatfs(&file).map_err(|e| bad(e.to_string()))?;
    if let Some(kind) = virtwrap::memory_dump::kernel_interface_fs(&fs) {
        return Err(bad(format!(
            "is on {kind}, a kernel interface, not an image (refused)"
        )));
    }
    let ft = file.metadata().map_err(|e| bad(e.to_string()))?.file_type();
    let kind = if ft.is_symlink() {
        return Err(bad(
            "is a symbolic link, which is not followed: give the file it points to".into(),
        ));
    } else if ft.is_file() {
        GivenKind::File
    } else if ft.is_block_device() {
        GivenKind::Block
    } else if ft.is_dir() && dir_ok {
        GivenKind::Dir
    } else if dir_ok {
        return Err(bad(
            "not a raw image file, a claim directory or a block device".into(),
        ));
    } else {
        return Err(bad("neither a regular file nor a block device".into()));
    };
    if kind == GivenKind::Block {
        if let Err(e) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
        {
            return Err(bad(if e.raw_os_error() == Some(libc::EBUSY) {
                "the block device is in use on this host (mounted or held); refusing to give it to a guest".into()
            } else {
                e.to_string()
            }));
        }
    }
    Ok((file, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_refused_and_kinds_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.img");
        std::fs::write(&f, b"x").unwrap();
        let l = dir.path().join("l.img");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        assert_eq!(open("--image", &f, false).unwrap().1, GivenKind::File);
        assert_eq!(open("--pvc a", dir.path(), true).unwrap().1, GivenKind::Dir);
        for (p, kind) in [("/proc/self/mem", "procfs"), ("/sys/kernel", "sysfs")] {
            let e = open("--image", Path::new(p), false)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("--image: is on {kind}, a kernel interface")),
                "{e}"
            );
        }
        for dir_ok in [false, true] {
            let e = open("--x", &l, dir_ok).unwrap_err().to_string();
            assert!(
                e.contains("--x: is a symbolic link, which is not followed"),
                "{e}"
            );
        }
        let e = open("--image", dir.path(), false).unwrap_err().to_string();
        assert!(
            e.contains("neither a regular file nor a block device"),
            "{e}"
        );
        let e = open("--pvc a", Path::new("/dev/null"), true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a raw image file, a claim directory or a block device"),
            "{e}"
        );
        let e = open("--image", &dir.path().join("none"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("No such file"), "{e}");
    }
}
