//! The one way an external tool (`qemu-img`, `xorrisofs`, `mkfs.vfat` and
//! `mcopy`, `qemu-storage-daemon`) makes a file in the launcher's
//! directories: inside a private directory made for it just now, then
//! renamed into place.
//!
//! Why: these tools open their output (and `mcopy` its image again later)
//! by path, with `O_CREAT|O_TRUNC` and following links. The directories
//! they wrote into (`/var/run/kubevirt-ephemeral-disks/...`,
//! `/var/run/kubevirt-private/...`) are emptyDirs that the pod's other
//! containers, a hostile image or a claim's other users can fill: a link
//! put at the output name (or at a fixed temporary name such as
//! `<iso>.staging`, in the moment between its removal and the tool's open)
//! had the tool truncate and write the file it names. A directory made by
//! `mkdirat` right now, mode 0700 and ours, holds nothing anyone planted,
//! and nobody else may enter it; the tool runs in it (its working
//! directory is set, between fork and exec, through the descriptor:
//! `/proc/self/fd/<n>`, which no rename of the directory can redirect) and
//! is given names relative to it. Not `/proc/<launcher's pid>/fd/<n>`: a
//! non-root launcher's children may not look into its descriptors (it
//! holds a capability they lack: the kernel's ptrace access rule). The finished file gets its mode and
//! owner on a descriptor and is `renameat`-ed between the two directory
//! descriptors: a rename replaces a link at the destination, it never
//! writes through it. The target's directory is opened below its
//! configured root with `openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)`, so
//! no link on the way is followed either. The private directory goes on
//! every path (success, error, the tool's timeout: [`Staging`]'s `Drop`).
//!
//! `virtwrap::memory_dump::private_dir` applies the same rule to the file
//! libvirt writes for a memory dump.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, ResolveFlags, CWD};

use crate::{volume_err, StorageError};

/// The prefix of the private directories ([`Staging`]), in the target's
/// directory: `.virt-launcher-staging.<pid>.<n>.<ns>`.
pub const STAGING_DIR_PREFIX: &str = ".virt-launcher-staging.";

/// How many names [`Staging::new`] tries when one is taken.
const NAME_ATTEMPTS: u32 = 16;

/// A private directory next to `target`, made for one tool run (see the
/// module's documentation). Removed with everything in it when dropped.
pub(crate) struct Staging {
    field: String,
    target: PathBuf,
    /// The target's directory.
    dir: OwnedFd,
    /// The private directory's name in it.
    name: OsString,
    /// The private directory.
    private: OwnedFd,
    /// `/proc/self/fd/<n>` of `private`: the directory in this process,
    /// and in a child between fork and exec.
    via: PathBuf,
}

impl Staging {
    /// Makes the private directory for `target`, a file below the
    /// configured directory `root` (a trusted path; the components between
    /// it and `target` must already exist and are never followed when they
    /// are links).
    ///
    /// # Errors
    /// [`StorageError`] at `field` naming the path: `target` not below
    /// `root`, a link or no directory on the way, the directory cannot be
    /// made, or it was swapped for another before use.
    pub(crate) fn new(field: &str, root: &Path, target: &Path) -> Result<Staging, StorageError> {
        let err = |what: &str, e: &dyn std::fmt::Display| {
            volume_err(field, format!("{}: {what}: {e}", target.display()))
        };
        if target.file_name().is_none()
            || !target
                .strip_prefix(root)
                .is_ok_and(|r| !r.as_os_str().is_empty())
        {
            return Err(volume_err(
                field,
                format!(
                    "{} is not a file below {}",
                    target.display(),
                    root.display()
                ),
            ));
        }
        let parent = target.parent().unwrap_or(root);
        let rel = parent.strip_prefix(root).unwrap_or(Path::new(""));
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(volume_err(
                field,
                format!(
                    "{} is not a plain path below {}",
                    target.display(),
                    root.display()
                ),
            ));
        }
        let dir_flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let root_fd = rfs::open(root, dir_flags & !OFlags::NOFOLLOW, Mode::empty())
            .map_err(|e| err(&format!("cannot open {}", root.display()), &e))?;
        let dir = if rel.as_os_str().is_empty() {
            root_fd
        } else {
            rfs::openat2(
                &root_fd,
                rel,
                dir_flags,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
            )
            .map_err(|e| {
                err(
                    &format!(
                        "cannot open its directory {} without following a link",
                        parent.display()
                    ),
                    &e,
                )
            })?
        };
        let (name, private) = make_private_dir(&dir).map_err(|e| {
            err(
                &format!("cannot make a private directory in {}", parent.display()),
                &e,
            )
        })?;
        let mut staging = Staging {
            field: field.to_owned(),
            target: target.to_owned(),
            dir,
            name,
            private,
            via: PathBuf::new(),
        };
        // What was opened must be what mkdirat made: a directory of ours,
        // 0700, on the target's file system (the rename needs that).
        let (st, dst) = (
            rfs::fstat(&staging.private).map_err(|e| err("stat", &e))?,
            rfs::fstat(&staging.dir).map_err(|e| err("stat", &e))?,
        );
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory
            || st.st_uid != rustix::process::geteuid().as_raw()
            || st.st_mode & 0o7777 != 0o700
            || st.st_dev != dst.st_dev
        {
            return Err(volume_err(
                field,
                format!(
                    "{}: the private directory was replaced before use (refused)",
                    target.display()
                ),
            ));
        }
        let via = PathBuf::from(format!("/proc/self/fd/{}", staging.private.as_raw_fd()));
        // The path must lead to that very directory (a /proc of another
        // PID namespace would not).
        match std::fs::metadata(&via) {
            Ok(m) if m.ino() == st.st_ino && m.dev() == st.st_dev => {}
            _ => {
                return Err(volume_err(
                    field,
                    format!(
                        "{}: cannot reach the private directory through {}",
                        target.display(),
                        via.display()
                    ),
                ))
            }
        }
        staging.via = via;
        Ok(staging)
    }

    /// The private directory as a path in this process (`/proc/self/fd/<n>`):
    /// for the launcher's own writes there (a tool's source tree), and as a
    /// tool's working directory ([`std::process::Command::current_dir`]
    /// changes to it in the child before exec, while the descriptor is
    /// still open there).
    pub(crate) fn dir(&self) -> &Path {
        &self.via
    }

    /// The file in the private directory, as a path in this process.
    pub(crate) fn file(&self) -> PathBuf {
        self.via.join(self.target_name())
    }

    /// The file's name relative to [`Staging::dir`], for a tool running
    /// there.
    pub(crate) fn name(&self) -> &Path {
        Path::new(self.target_name())
    }

    fn target_name(&self) -> &OsStr {
        self.target.file_name().unwrap_or(OsStr::new("file"))
    }

    /// Gives the finished file `mode` and, when QEMU runs unprivileged,
    /// `owner` (on a descriptor opened without following a link; it must
    /// be a regular file), then renames it onto the target: an entry there
    /// (a link included) is replaced, never written through. The private
    /// directory is removed.
    ///
    /// # Errors
    /// [`StorageError`] at the field naming the target: the tool left no
    /// regular file, or chmod, chown or the rename failed.
    pub(crate) fn finish(self, mode: u32, owner: Option<(u32, u32)>) -> Result<(), StorageError> {
        let name = self.target_name().to_owned();
        let at = |what: &str, e: &dyn std::fmt::Display| {
            volume_err(
                &self.field,
                format!("{}: {what}: {e}", self.target.display()),
            )
        };
        let f = rfs::openat(
            &self.private,
            &name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| at("the tool left no file", &e))?;
        let st = rfs::fstat(&f).map_err(|e| at("stat", &e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(volume_err(
                &self.field,
                format!(
                    "{}: the tool's output is not a regular file",
                    self.target.display()
                ),
            ));
        }
        rfs::fchmod(&f, Mode::from_raw_mode(mode)).map_err(|e| at("chmod", &e))?;
        if let Some((uid, gid)) = owner {
            rfs::fchown(
                &f,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            )
            .map_err(|e| at("chown", &e))?;
        }
        drop(f);
        rfs::renameat(&self.private, &name, &self.dir, &name)
            .map_err(|e| at("cannot move it into place", &e))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Err(e) = remove_private(&self.private, &self.via) {
            tracing::warn!(path = %self.via.display(), "cannot empty a private directory: {e}");
        }
        if let Err(e) = rfs::unlinkat(&self.dir, &self.name, AtFlags::REMOVEDIR) {
            tracing::warn!(target = %self.target.display(), "cannot remove the private directory {:?}: {e}", self.name);
        }
    }
}

/// `mkdirat(dir, <STAGING_DIR_PREFIX><pid>.<n>.<ns>, 0700)` and its
/// descriptor (`O_NOFOLLOW|O_DIRECTORY`). A name taken (planted, or left by
/// a killed launcher) is skipped: mkdirat never reuses an entry.
fn make_private_dir(dir: &OwnedFd) -> io::Result<(OsString, OwnedFd)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut attempt = 0;
    loop {
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = OsString::from(format!(
            "{STAGING_DIR_PREFIX}{}.{}.{ns}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        match rfs::mkdirat(dir, &name, Mode::from_raw_mode(0o700)) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) if attempt < NAME_ATTEMPTS => {
                attempt += 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        let fd = rfs::openat(
            dir,
            &name,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        return match fd {
            Ok(fd) => Ok((name, fd)),
            Err(e) => {
                let _ = rfs::unlinkat(dir, &name, AtFlags::REMOVEDIR);
                Err(e.into())
            }
        };
    }
}

/// Removes everything in the private directory: each entry through the
/// directory's own path `via` (std's `remove_dir_all` never follows a link
/// inside the tree; a link is removed as a link).
fn remove_private(private: &OwnedFd, via: &Path) -> io::Result<()> {
    if via.as_os_str().is_empty() {
        // Not reachable by path (refused in `new`): entries by descriptor.
        let d = rfs::Dir::read_from(private.as_fd())?;
        for e in d {
            let e = e?;
            let n = e.file_name().to_bytes();
            if n == b"." || n == b".." {
                continue;
            }
            let _ = rfs::unlinkat(private, e.file_name(), AtFlags::empty());
        }
        return Ok(());
    }
    for e in std::fs::read_dir(via)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            std::fs::remove_dir_all(e.path())?;
        } else {
            std::fs::remove_file(e.path())?;
        }
    }
    Ok(())
}

/// `File` of a path opened without following a link at its last
/// component and without blocking on a FIFO, for a tool that modifies an
/// existing file in place: the caller checks the type on the descriptor
/// and hands the tool [`fd_path`] of it.
///
/// # Errors
/// The open's error (`ELOOP` for a link).
pub(crate) fn open_no_follow(p: &Path, write: bool) -> io::Result<File> {
    let flags = OFlags::NOFOLLOW
        | OFlags::NONBLOCK
        | OFlags::CLOEXEC
        | if write { OFlags::RDWR } else { OFlags::RDONLY };
    Ok(File::from(rfs::openat(CWD, p, flags, Mode::empty())?))
}

/// `/proc/<pid>/fd/<n>` of `f`: a path that opens the very file `f` is
/// open on, whatever is renamed or linked meanwhile.
pub(crate) fn fd_path(f: &impl AsRawFd) -> PathBuf {
    PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), f.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn left(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(STAGING_DIR_PREFIX))
            .collect()
    }

    /// The private directory is ours and 0700; dropped without `finish`
    /// (a tool failed or timed out) it goes with a whole tree in it, and
    /// nothing reaches the target.
    #[test]
    fn an_unfinished_staging_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("a/b/disk.img");
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let s = Staging::new("f", d.path(), &target).unwrap();
        let m = std::fs::metadata(s.dir()).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o700);
        assert!(s.file().starts_with(s.dir()));
        std::fs::create_dir_all(s.dir().join("tree/x")).unwrap();
        std::fs::write(s.dir().join("tree/x/f"), b"1").unwrap();
        symlink("/etc/passwd", s.dir().join("tree/l")).unwrap();
        std::fs::write(s.file(), b"half").unwrap();
        assert_eq!(left(target.parent().unwrap()).len(), 1);
        drop(s);
        assert!(left(target.parent().unwrap()).is_empty());
        assert!(std::fs::symlink_metadata(&target).is_err());
        assert!(std::fs::metadata("/etc/passwd").is_ok());
    }

    /// `finish` gives the mode, replaces a link at the target (never
    /// writing through it) and refuses a tool's output that is no regular
    /// file; a directory on the way that is a link is refused by name.
    #[test]
    fn finish_replaces_a_link_and_links_on_the_way_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let root = d.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        let target = root.join("sub/out.iso");
        symlink(&victim, &target).unwrap();
        let s = Staging::new("f", &root, &target).unwrap();
        std::fs::write(s.file(), b"image").unwrap();
        s.finish(0o640, None).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let m = std::fs::symlink_metadata(&target).unwrap();
        assert!(m.is_file());
        assert_eq!(m.permissions().mode() & 0o777, 0o640);
        assert_eq!(std::fs::read(&target).unwrap(), b"image");
        assert!(left(&root.join("sub")).is_empty());

        let s = Staging::new("f", &root, &target).unwrap();
        symlink(&victim, s.file()).unwrap();
        let e = s.finish(0o600, None).unwrap_err().to_string();
        assert!(e.starts_with("f: ") && e.contains("out.iso"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"image");
        assert!(left(&root.join("sub")).is_empty());

        let elsewhere = tempfile::tempdir().unwrap();
        symlink(elsewhere.path(), root.join("linked")).unwrap();
        let e = Staging::new("f", &root, &root.join("linked/out.iso"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("f: ") && e.contains("linked"), "{e}");
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
        let e = Staging::new("f", &root, Path::new("/elsewhere/x"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("is not a file below"), "{e}");
    }
}
