//! The launcher's state directory: claimed, locked, emptied and removed
//! through a directory descriptor, never through a path a user could
//! change (issue 19: links planted in `--state-dir`).
//!
//! The launcher runs as root and `--state-dir` may name a directory in a
//! place other users can write. Every step below is relative to a
//! descriptor of the directory opened with `O_NOFOLLOW`, after its owner
//! and mode were checked on that descriptor: a symbolic link in place of the
//! directory, of its marker or of its lock file is refused (never
//! followed), a directory owned by another user or writable by others is
//! refused (never emptied), and files are created with `O_EXCL`.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use nix::unistd::Uid;
use rustix::fs::{
    fchmod, fstat, mkdirat, openat, statat, unlinkat, AtFlags, Dir, FileType, Mode, OFlags, Stat,
    CWD,
};
use rustix::io::Errno;

use super::IsolationError;

/// File that marks a directory as a launcher's state directory.
pub(super) const MARKER: &str = ".virt-launcher-state";
/// The lock file, held (`flock`) for the launcher's lifetime.
const LOCK: &str = ".lock";

fn errno(op: &'static str, path: &Path) -> impl FnOnce(Errno) -> IsolationError {
    let path = path.to_owned();
    move |e| IsolationError::Io {
        op,
        path,
        source: io::Error::from(e),
    }
}

/// Opens directory `name` relative to `dir` (or `name` itself when `dir`
/// is `None`) without following a final symbolic link.
fn open_dir_at(dir: BorrowedFd<'_>, name: &Path) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn is_type(st: &Stat, t: FileType) -> bool {
    FileType::from_raw_mode(st.st_mode) == t
}

fn lstat_at(dir: BorrowedFd<'_>, name: impl rustix::path::Arg) -> Result<Stat, Errno> {
    statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
}

/// Refuses a directory another user could change: not owned by the
/// launcher's user, or writable by group or others (allowed for a parent
/// with the sticky bit, such as `/tmp`, where others cannot rename or remove
/// what is not theirs).
fn check_owner_and_mode(path: &Path, st: &Stat, parent: bool) -> Result<(), IsolationError> {
    let me = Uid::effective().as_raw();
    let mode = st.st_mode & 0o7777;
    let why = if st.st_uid != me && !(parent && st.st_uid == 0) {
        Some(format!("owned by uid {}, not {me}", st.st_uid))
    } else if mode & 0o022 != 0 && !(parent && mode & 0o1000 != 0) {
        Some(format!(
            "mode {mode:04o} lets group or others write in it{}",
            if parent {
                " (and it has no sticky bit)"
            } else {
                ""
            }
        ))
    } else {
        None
    };
    match why {
        Some(why) => Err(IsolationError::Unsafe {
            path: path.to_owned(),
            why,
        }),
        None => Ok(()),
    }
}

/// The launcher's state directory, locked for its lifetime and held open.
#[derive(Debug)]
pub struct StateDir {
    root: PathBuf,
    /// The directory, opened without following links; every file operation
    /// of this type is relative to it.
    dir: OwnedFd,
    _lock: Flock<File>,
    /// The launcher made `root` (it did not exist before).
    created: bool,
}

impl StateDir {
    /// Creates (mode 0700) or opens and locks `root`, then empties it of any
    /// state a previous, crashed launcher left behind.
    ///
    /// Rules (issue 19), each checked on the opened directory, not by path:
    /// `root` must be a real directory (a symbolic link is refused) owned by
    /// the launcher's user and not writable by group or others, in a parent
    /// that only root or that user can change (or that has the sticky bit);
    /// a directory that is not empty and lacks the launcher's marker file
    /// (a regular file, never a link) is never touched, so pointing
    /// `--state-dir` at a directory of one's own does not delete its files;
    /// the marker and the lock file are created with `O_EXCL`/`O_NOFOLLOW`
    /// relative to the directory.
    ///
    /// # Errors
    /// [`IsolationError::Busy`] when another launcher holds it,
    /// [`IsolationError::Foreign`] for somebody else's directory,
    /// [`IsolationError::NotADirectory`] for a file or link,
    /// [`IsolationError::Unsafe`] for a directory others can change or a
    /// lock file that is a link or not a regular file,
    /// [`IsolationError::Io`] for a failed file operation.
    pub fn acquire(root: &Path) -> Result<StateDir, IsolationError> {
        let (parent, name) = split_root(root)?;
        no_link_on_the_way(&parent)?;
        // Missing parents (`/run/virt-launcher` by default) are made as
        // `mkdir -p` does; the parent is checked below, once opened.
        std::fs::create_dir_all(&parent).map_err(|source| IsolationError::Io {
            op: "mkdir",
            path: parent.clone(),
            source,
        })?;
        let parent_fd = open_dir_at(CWD, &parent).map_err(errno("open", &parent))?;
        let pst = fstat(&parent_fd).map_err(errno("stat", &parent))?;
        check_owner_and_mode(&parent, &pst, true)?;
        let at = parent_fd.as_fd();
        let created = match mkdirat(at, name, Mode::from_raw_mode(0o700)) {
            Ok(()) => true,
            Err(Errno::EXIST) => false,
            Err(e) => return Err(errno("mkdir", root)(e)),
        };
        let dir = match open_dir_at(at, Path::new(name)) {
            Ok(fd) => fd,
            Err(Errno::LOOP | Errno::NOTDIR) => {
                return Err(IsolationError::NotADirectory(root.to_owned()))
            }
            Err(e) => return Err(errno("open", root)(e)),
        };
        let st = fstat(&dir).map_err(errno("stat", root))?;
        check_owner_and_mode(root, &st, false)?;
        // Not empty and not ours: never used, never emptied.
        let marker = root.join(MARKER);
        let has_marker = match lstat_at(dir.as_fd(), MARKER) {
            Ok(m) if is_type(&m, FileType::RegularFile) => true,
            Ok(_) => return Err(IsolationError::Foreign(root.to_owned())),
            Err(Errno::NOENT) => false,
            Err(e) => return Err(errno("stat", &marker)(e)),
        };
        if !has_marker {
            if !entries(dir.as_fd(), root)?.is_empty() {
                return Err(IsolationError::Foreign(root.to_owned()));
            }
            let mut f = create_file_at(dir.as_fd(), MARKER, &marker)?;
            io::Write::write_all(
                &mut f,
                b"virt-launcher state directory; emptied on every start\n",
            )
            .map_err(|source| IsolationError::Io {
                op: "write",
                path: marker.clone(),
                source,
            })?;
        }
        fchmod(&dir, Mode::from_raw_mode(0o700)).map_err(errno("chmod", root))?;
        let lock_path = root.join(LOCK);
        let file = open_lock_at(dir.as_fd(), &lock_path).map_err(|e| match e {
            IsolationError::Io {
                op: "open",
                ref source,
                ..
            } if source.raw_os_error() == Some(Errno::LOOP.raw_os_error())
                || source.kind() == io::ErrorKind::InvalidInput =>
            {
                IsolationError::Unsafe {
                    path: root.to_owned(),
                    why: format!("{LOCK} is a symbolic link or not a regular file"),
                }
            }
            e => e,
        })?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|_| IsolationError::Busy(root.to_owned()))?;
        // A launcher that exited may have unlinked the lock file we opened
        // (see `remove`): only a lock on the file at the name counts.
        let same = match (lstat_at(dir.as_fd(), LOCK), fstat(lock.as_fd())) {
            (Ok(a), Ok(b)) => a.st_ino == b.st_ino && a.st_dev == b.st_dev,
            _ => false,
        };
        if !same {
            return Err(IsolationError::Busy(root.to_owned()));
        }
        let dir = StateDir {
            root: root.to_owned(),
            dir,
            _lock: lock,
            created,
        };
        dir.clear()?;
        Ok(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Whether the launcher made the directory (it did not exist before).
    pub fn created(&self) -> bool {
        self.created
    }

    /// Removes a state directory a launcher that gave up root left behind
    /// (handed over through [`crate::pidns::hand_over_state`]): acquired
    /// and removed as [`StateDir::acquire`] and [`StateDir::remove`] do,
    /// the directory itself only when that launcher created it. A
    /// directory without the launcher's marker is never touched.
    ///
    /// # Errors
    /// [`IsolationError`] as for [`StateDir::acquire`] and [`StateDir::remove`].
    pub fn remove_left(root: &Path, created: bool) -> Result<(), IsolationError> {
        if !std::fs::symlink_metadata(root.join(MARKER)).is_ok_and(|m| m.is_file()) {
            return Err(IsolationError::Foreign(root.to_owned()));
        }
        let mut dir = StateDir::acquire(root)?;
        dir.created = created;
        dir.remove()
    }

    /// Subdirectory `rel` (plain components, such as `libvirt/run`),
    /// created (mode 0755, whatever the umask) relative to the held
    /// directory; an existing component must be a real directory (never
    /// followed as a link). 0755, not 0700: these directories are bind-mounted
    /// as the pod's runtime directories (`/var/lib/libvirt`, `/var/run/libvirt`,
    /// …) that daemons running as other users must traverse (swtpm as `tss`
    /// opens `/var/lib/libvirt/swtpm/<uuid>`); only root can write them, and
    /// the state root itself stays 0700.
    ///
    /// # Errors
    /// [`IsolationError::Io`] for a component that is not a plain name, a
    /// link, or a failed mkdir.
    pub fn subdir(&self, rel: &str) -> Result<PathBuf, IsolationError> {
        self.subdir_fd(rel).map(|(_, p)| p)
    }

    /// [`StateDir::subdir`], with a descriptor of the subdirectory itself
    /// (each component opened relative to the last, never through a link),
    /// so that it can be bind-mounted from the descriptor
    /// ([`super::Mounts::bind_dir_fd`]) rather than by a path someone could
    /// swap in between (issue 19).
    ///
    /// # Errors
    /// As [`StateDir::subdir`]; an empty `rel` is not a plain relative path.
    pub fn subdir_fd(&self, rel: &str) -> Result<(OwnedFd, PathBuf), IsolationError> {
        let p = self.root.join(rel);
        let mut cur: Option<OwnedFd> = None;
        for comp in Path::new(rel).components() {
            let Component::Normal(c) = comp else {
                return Err(IsolationError::Io {
                    op: "mkdir",
                    path: p,
                    source: io::Error::other("not a plain relative path"),
                });
            };
            let at = cur.as_ref().unwrap_or(&self.dir).as_fd();
            let created = match mkdirat(at, c, Mode::from_raw_mode(0o755)) {
                Ok(()) => true,
                Err(Errno::EXIST) => false,
                Err(e) => return Err(errno("mkdir", &p)(e)),
            };
            let fd = open_dir_at(at, Path::new(c)).map_err(errno("open", &p))?;
            if created {
                fchmod(&fd, Mode::from_raw_mode(0o755)).map_err(errno("chmod", &p))?;
            }
            cur = Some(fd);
        }
        match cur {
            Some(fd) => Ok((fd, p)),
            None => Err(IsolationError::Io {
                op: "mkdir",
                path: p,
                source: io::Error::other("not a plain relative path"),
            }),
        }
    }

    /// Removes the state at exit: everything in it, then the marker and the
    /// lock file, and the directory itself when the launcher created it (a
    /// `--state-dir` of the user's own is left, empty). Never follows
    /// symbolic links.
    ///
    /// # Errors
    /// The first removal error.
    pub fn remove(self) -> Result<(), IsolationError> {
        self.clear()?;
        for name in [MARKER, LOCK] {
            match unlinkat(&self.dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(errno("remove", &self.root.join(name))(e)),
            }
        }
        if self.created {
            // Still locked until `self` drops; an acquirer that opened the
            // old lock file notices the unlinked inode and backs off. The
            // directory is removed by its name in the parent only while that
            // name still is this directory.
            let (parent, name) = split_root(&self.root)?;
            let pfd = open_dir_at(CWD, &parent).map_err(errno("open", &parent))?;
            let here = fstat(&self.dir).map_err(errno("stat", &self.root))?;
            match lstat_at(pfd.as_fd(), name) {
                Ok(st) if st.st_ino == here.st_ino && st.st_dev == here.st_dev => {
                    unlinkat(&pfd, name, AtFlags::REMOVEDIR)
                        .map_err(errno("remove", &self.root))?;
                }
                _ => tracing::warn!(
                    path = %self.root.display(),
                    "the state directory was moved or replaced; not removing what is there now"
                ),
            }
        }
        Ok(())
    }

    /// Removes everything but the marker and the lock file, relative to the
    /// held directory. Never follows symbolic links.
    ///
    /// # Errors
    /// The first removal error.
    pub fn clear(&self) -> Result<(), IsolationError> {
        for (name, dir) in entries(self.dir.as_fd(), &self.root)? {
            if name.as_bytes() == LOCK.as_bytes() || name.as_bytes() == MARKER.as_bytes() {
                continue;
            }
            remove_at(self.dir.as_fd(), &name, dir, &self.root)?;
        }
        Ok(())
    }
}

/// `root` as (parent, last component); `root` must name a directory below
/// some parent (not `/`, not ending in `..`).
/// Refuses a `parent` path with a symbolic link among its existing
/// components (`/var/run` on Debian), naming it: the state's bind mounts
/// resolve the whole path without links and would fail later, less
/// clearly. The opens below check again on descriptors.
fn no_link_on_the_way(parent: &Path) -> Result<(), IsolationError> {
    for p in parent.ancestors() {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(IsolationError::Unsafe {
                path: p.to_owned(),
                why: "is a symbolic link, and no part of the state directory's path may be one \
                      (give the path without it: /run for /var/run)"
                    .into(),
            });
        }
    }
    Ok(())
}

fn split_root(root: &Path) -> Result<(PathBuf, &OsStr), IsolationError> {
    let bad = || IsolationError::NotADirectory(root.to_owned());
    let name = match root.components().next_back() {
        Some(Component::Normal(n)) => n,
        Some(Component::RootDir) => return Err(IsolationError::Foreign(root.to_owned())),
        _ => return Err(bad()),
    };
    let parent = match root.parent() {
        Some(p) if p.as_os_str().is_empty() => PathBuf::from("."),
        Some(p) => p.to_owned(),
        None => return Err(bad()),
    };
    Ok((parent, name))
}

/// The entries of directory `fd` (not `.` and `..`), each with whether it
/// is a directory as `lstat` sees it (a link to a directory is not one).
fn entries(fd: BorrowedFd<'_>, path: &Path) -> Result<Vec<(OsString, bool)>, IsolationError> {
    let mut d = Dir::read_from(fd).map_err(errno("read", path))?;
    let mut out = Vec::new();
    while let Some(e) = d.read() {
        let e = e.map_err(errno("read", path))?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name).to_owned();
        let is_dir = match e.file_type() {
            FileType::Unknown => {
                let st =
                    lstat_at(fd, name.as_os_str()).map_err(errno("stat", &path.join(&name)))?;
                is_type(&st, FileType::Directory)
            }
            t => t == FileType::Directory,
        };
        out.push((name, is_dir));
    }
    Ok(out)
}

/// Removes entry `name` of directory `fd`, a directory's contents first,
/// each level opened with `O_NOFOLLOW`.
fn remove_at(
    fd: BorrowedFd<'_>,
    name: &OsStr,
    is_dir: bool,
    parent: &Path,
) -> Result<(), IsolationError> {
    let path = parent.join(name);
    if is_dir {
        let sub = open_dir_at(fd, Path::new(name)).map_err(errno("open", &path))?;
        for (n, d) in entries(sub.as_fd(), &path)? {
            remove_at(sub.as_fd(), &n, d, &path)?;
        }
        unlinkat(fd, name, AtFlags::REMOVEDIR).map_err(errno("remove", &path))
    } else {
        unlinkat(fd, name, AtFlags::empty()).map_err(errno("remove", &path))
    }
}

/// Creates regular file `name` in directory `fd` (mode 0600), never
/// through an existing entry (`O_EXCL`, `O_NOFOLLOW`).
fn create_file_at(fd: BorrowedFd<'_>, name: &str, path: &Path) -> Result<File, IsolationError> {
    openat(
        fd,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map(File::from)
    .map_err(errno("create", path))
}

/// Opens the lock file: an existing regular file (never a link, which
/// fails with `ELOOP`, nor a directory), or a new one made with `O_EXCL`.
fn open_lock_at(fd: BorrowedFd<'_>, path: &Path) -> Result<File, IsolationError> {
    let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let f = match openat(fd, LOCK, flags, Mode::empty()) {
        Ok(f) => f,
        Err(Errno::NOENT) => openat(
            fd,
            LOCK,
            flags | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(0o600),
        )
        .map_err(errno("create", path))?,
        Err(e) => return Err(errno("open", path)(e)),
    };
    let st = fstat(&f).map_err(errno("stat", path))?;
    if !is_type(&st, FileType::RegularFile) {
        return Err(IsolationError::Io {
            op: "open",
            path: path.to_owned(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
        });
    }
    Ok(File::from(f))
}

#[cfg(test)]
mod tests;
