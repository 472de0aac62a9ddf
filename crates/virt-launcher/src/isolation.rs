//! A private runtime for one launcher on a shared host (standalone mode).
//!
//! In a cluster every launcher has its pod's mount namespace, so KubeVirt's
//! fixed paths (`/var/run/kubevirt-private`, `/run/libvirt`, `/etc/libvirt`
//! ...) never collide. Standalone, the launcher makes the same guarantee
//! itself: it enters a mount namespace of its own (before any thread
//! exists) and bind-mounts directories of its state directory over those
//! paths. Its mounts are slaves of the host's: what the host mounts later
//! (as virt-handler mounts hot-plugged volumes into a pod whose
//! `hotplug-disks` volume has HostToContainer propagation) still appears
//! inside, while nothing the launcher mounts propagates back out. The
//! domain XML and every path inside the launcher stay exactly KubeVirt's,
//! nothing leaks into the host's view, and a system libvirtd or another
//! launcher is never touched. Only empty mount-point directories are created
//! on the host when missing.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};

/// Why the private runtime could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    /// Another launcher holds the state directory.
    #[error("state directory {0} is in use by another virt-launcher")]
    Busy(PathBuf),
    /// The path exists and is not a directory (a file, or a symbolic link).
    #[error("state directory {0} is not a directory (symbolic links are refused)")]
    NotADirectory(PathBuf),
    /// The directory exists, is not empty and was not made by a launcher.
    #[error("state directory {0} exists and was not created by virt-launcher; refusing to use (and empty) it")]
    Foreign(PathBuf),
    /// A file operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// A namespace or mount operation failed.
    #[error("{op} {path}: {source} (standalone mode needs root: CAP_SYS_ADMIN for a private mount namespace)")]
    Mount {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: nix::Error,
    },
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> IsolationError {
    let path = path.to_owned();
    move |source| IsolationError::Io { op, path, source }
}

/// File that marks a directory as a launcher's state directory.
const MARKER: &str = ".virt-launcher-state";

/// True when `a` and `b` describe the same file (device and inode).
pub fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.ino() == b.ino() && a.dev() == b.dev()
}

/// The launcher's state directory, locked for its lifetime.
#[derive(Debug)]
pub struct StateDir {
    root: PathBuf,
    _lock: Flock<File>,
    /// The launcher made `root` (it did not exist before).
    created: bool,
}

impl StateDir {
    /// Creates (mode 0700) and locks `root`, then empties it of any state a
    /// previous, crashed launcher left behind. A directory that exists, is
    /// not empty and lacks the launcher's marker file is never touched: the
    /// launcher empties its state directory, so pointing `--state-dir` at a
    /// directory of one's own must not delete its files.
    ///
    /// # Errors
    /// [`IsolationError::Busy`] when another launcher holds it,
    /// [`IsolationError::Foreign`] for somebody else's directory.
    pub fn acquire(root: &Path) -> Result<StateDir, IsolationError> {
        match fs::symlink_metadata(root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(IsolationError::NotADirectory(root.to_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("stat", root)(e)),
        }
        let created = !root.exists();
        let marker = root.join(MARKER);
        match fs::read_dir(root) {
            Ok(mut entries) => {
                if entries.next().is_some() && !marker.is_file() {
                    return Err(IsolationError::Foreign(root.to_owned()));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("read", root)(e)),
        }
        fs::create_dir_all(root).map_err(io_err("mkdir", root))?;
        fs::write(
            &marker,
            b"virt-launcher state directory; emptied on every start\n",
        )
        .map_err(io_err("create", &marker))?;
        fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(io_err("chmod", root))?;
        let lock_path = root.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err("open", &lock_path))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|_| IsolationError::Busy(root.to_owned()))?;
        // A launcher that exited may have unlinked the lock file we opened
        // (see `remove`): only a lock on the file at the path counts.
        let same = match (fs::metadata(&lock_path), lock.metadata()) {
            (Ok(a), Ok(b)) => same_file(&a, &b),
            _ => false,
        };
        if !same {
            return Err(IsolationError::Busy(root.to_owned()));
        }
        let dir = StateDir {
            root: root.to_owned(),
            _lock: lock,
            created,
        };
        dir.clear()?;
        Ok(dir)
    }

    /// Whether the launcher made the directory (it did not exist before).
    pub fn created(&self) -> bool {
        self.created
    }

    /// Removes a state directory a launcher that gave up root left behind
    /// (handed over through [`crate::pidns::hand_over_state`]): locked and
    /// removed as [`StateDir::remove`] does, the directory itself only
    /// when that launcher created it. A directory without the launcher's
    /// marker is never touched.
    ///
    /// # Errors
    /// [`IsolationError`] as for [`StateDir::acquire`] and [`StateDir::remove`].
    pub fn remove_left(root: &Path, created: bool) -> Result<(), IsolationError> {
        if !root.join(MARKER).is_file() {
            return Err(IsolationError::Foreign(root.to_owned()));
        }
        let mut dir = StateDir::acquire(root)?;
        dir.created = created;
        dir.remove()
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// A subdirectory, created.
    ///
    /// # Errors
    /// The mkdir error.
    pub fn subdir(&self, rel: &str) -> Result<PathBuf, IsolationError> {
        let p = self.root.join(rel);
        fs::create_dir_all(&p).map_err(io_err("mkdir", &p))?;
        Ok(p)
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
        for name in [MARKER, ".lock"] {
            let p = self.root.join(name);
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove", &p)(e)),
            }
        }
        if self.created {
            // Still locked until `self` drops; an acquirer that opened the
            // old lock file notices the unlinked inode and backs off.
            fs::remove_dir(&self.root).map_err(io_err("remove", &self.root))?;
        }
        Ok(())
    }

    /// Removes everything but the lock file. Never follows symbolic links.
    ///
    /// # Errors
    /// The first removal error.
    pub fn clear(&self) -> Result<(), IsolationError> {
        for entry in fs::read_dir(&self.root).map_err(io_err("read", &self.root))? {
            let entry = entry.map_err(io_err("read", &self.root))?;
            if entry.file_name() == ".lock" || entry.file_name() == MARKER {
                continue;
            }
            let p = entry.path();
            let res = if entry.file_type().map_err(io_err("stat", &p))?.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
            res.map_err(io_err("remove", &p))?;
        }
        Ok(())
    }
}

/// Enters a new mount namespace and makes every mount in it a slave
/// (`MS_REC | MS_SLAVE` on `/`): mounts and unmounts the host makes later
/// below a shared mount propagate in (a memory dump or hot-plug volume
/// virt-handler mounts after the launcher started, Kubernetes'
/// HostToContainer propagation), and the launcher's own mounts never
/// propagate back to the host. Mounts that were private on the host stay
/// private. Must run before the process starts any thread.
///
/// # Errors
/// [`IsolationError::Mount`] (EPERM without CAP_SYS_ADMIN).
pub fn enter_private_mount_namespace() -> Result<(), IsolationError> {
    unshare(CloneFlags::CLONE_NEWNS).map_err(|source| IsolationError::Mount {
        op: "unshare mount namespace",
        path: "/".into(),
        source,
    })?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(|source| IsolationError::Mount {
        op: "make mounts slaves of the host's",
        path: "/".into(),
        source,
    })
}

/// The devices KubeVirt's device plugins give a pod (below `/dev`).
pub const DEVICE_PLUGIN_NODES: [&str; 3] = ["kvm", "net/tun", "vhost-net"];

/// Bind mounts made by this launcher, undone in reverse order.
#[derive(Debug, Default)]
pub struct Mounts {
    targets: Vec<PathBuf>,
}

impl Mounts {
    /// Bind-mounts directory `source` over `target` (created if missing).
    ///
    /// # Errors
    /// [`IsolationError`] from mkdir or mount.
    pub fn bind_dir(&mut self, source: &Path, target: &Path) -> Result<(), IsolationError> {
        fs::create_dir_all(source).map_err(io_err("mkdir", source))?;
        fs::create_dir_all(target).map_err(io_err("mkdir", target))?;
        self.bind(source, target, false)
    }

    /// Bind-mounts directory `source` (which must exist: a claim's
    /// directory is never created) over `target` (created if missing),
    /// read-only when `read_only`.
    ///
    /// # Errors
    /// [`IsolationError`] from mkdir or mount.
    pub fn bind_dir_as(
        &mut self,
        source: &Path,
        target: &Path,
        read_only: bool,
    ) -> Result<(), IsolationError> {
        fs::create_dir_all(target).map_err(io_err("mkdir", target))?;
        self.bind(source, target, read_only)
    }

    /// Replaces `/dev` (in the private mount namespace only) by a tmpfs
    /// built in `staging`: the host's device nodes recreated with `mknod`
    /// (same numbers, modes and owners), its links copied, its directories
    /// and other entries (`pts`, `shm`, `mqueue`, ...) bind-mounted, plus a
    /// block device node `/dev/<vol>` for each `(vol, device)` claim, which
    /// replaces a host entry of that name. kubelet gives a pod's block
    /// claims such nodes; the host's `/dev` is never written. With `owner`
    /// (a non-root launcher's uid/gid), the claims' nodes and KubeVirt's
    /// device-plugin devices ([`DEVICE_PLUGIN_NODES`]: `/dev/kvm`,
    /// `/dev/net/tun`, `/dev/vhost-net`) are made for that user, as the
    /// device plugins and virt-handler give them to a non-root pod (its
    /// `/dev/net` is then a directory of the private `/dev`).
    ///
    /// # Errors
    /// [`IsolationError`] from a mount, mknod or a `device` that is not a
    /// block device. The staging mount is registered first, so a failure
    /// half-way still gets it (and everything below it) detached.
    pub fn private_dev(
        &mut self,
        staging: &Path,
        claims: &[(String, PathBuf)],
        owner: Option<u32>,
    ) -> Result<(), IsolationError> {
        use nix::sys::stat::{mknod, Mode, SFlag};
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let merr = |op, path: &Path| {
            let path = path.to_owned();
            move |source| IsolationError::Mount { op, path, source }
        };
        mount(
            Some("tmpfs"),
            staging,
            Some("tmpfs"),
            MsFlags::MS_NOSUID,
            Some("mode=0755,size=1m"),
        )
        .map_err(merr("mount tmpfs", staging))?;
        self.targets.push(staging.to_owned());
        let node = |path: &Path, kind: SFlag, perm: u32, rdev: u64, uid, gid| {
            mknod(path, kind, Mode::from_bits_truncate(perm & 0o7777), rdev)
                .map_err(merr("mknod", path))?;
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(io_err("chown", path))?;
            // mknod applies the umask: the host's mode exactly (a 0666
            // /dev/null must stay writable for a non-root launcher).
            fs::set_permissions(
                path,
                std::os::unix::fs::PermissionsExt::from_mode(perm & 0o7777),
            )
            .map_err(io_err("chmod", path))
        };
        let host = Path::new("/dev");
        for entry in fs::read_dir(host).map_err(io_err("read", host))? {
            let entry = entry.map_err(io_err("read", host))?;
            let name = entry.file_name();
            if claims.iter().any(|(v, _)| name == v.as_str()) {
                continue;
            }
            if owner.is_some() && name == "net" {
                // Made below, with the tun node for the owner.
                continue;
            }
            let src = entry.path();
            let dst = staging.join(&name);
            let m = fs::symlink_metadata(&src).map_err(io_err("stat", &src))?;
            let ft = m.file_type();
            if ft.is_symlink() {
                let t = fs::read_link(&src).map_err(io_err("readlink", &src))?;
                std::os::unix::fs::symlink(&t, &dst).map_err(io_err("symlink", &dst))?;
            } else if ft.is_char_device() || ft.is_block_device() {
                let kind = if ft.is_char_device() {
                    SFlag::S_IFCHR
                } else {
                    SFlag::S_IFBLK
                };
                node(&dst, kind, m.mode(), m.rdev(), m.uid(), m.gid())?;
            } else {
                if ft.is_dir() {
                    fs::create_dir(&dst).map_err(io_err("mkdir", &dst))?;
                } else {
                    File::create(&dst).map_err(io_err("create", &dst))?;
                }
                mount(
                    Some(&src),
                    &dst,
                    None::<&str>,
                    MsFlags::MS_BIND | MsFlags::MS_REC,
                    None::<&str>,
                )
                .map_err(merr("bind mount", &dst))?;
            }
        }
        for (vol, dev) in claims {
            let m = fs::metadata(dev).map_err(io_err("stat", dev))?;
            if !m.file_type().is_block_device() {
                return Err(IsolationError::Io {
                    op: "use as a block claim",
                    path: dev.clone(),
                    source: io::Error::other("not a block device"),
                });
            }
            let id = owner.unwrap_or(0);
            node(&staging.join(vol), SFlag::S_IFBLK, 0o660, m.rdev(), id, id)?;
        }
        if let Some(id) = owner {
            for rel in DEVICE_PLUGIN_NODES {
                let src = host.join(rel);
                let Ok(m) = fs::metadata(&src) else { continue };
                if !m.file_type().is_char_device() {
                    continue;
                }
                let dst = staging.join(rel);
                if let Some(parent) = dst.parent() {
                    fs::create_dir_all(parent).map_err(io_err("mkdir", parent))?;
                }
                match fs::remove_file(&dst) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_err("remove", &dst)(e)),
                }
                node(&dst, SFlag::S_IFCHR, 0o660, m.rdev(), id, id)?;
            }
        }
        mount(
            Some(staging),
            host,
            None::<&str>,
            MsFlags::MS_MOVE,
            None::<&str>,
        )
        .map_err(merr("move the private /dev", host))?;
        self.targets.pop();
        self.targets.push(host.to_owned());
        tracing::debug!(claims = claims.len(), "private /dev with block claims");
        Ok(())
    }

    /// Bind-mounts file `source` read-only over `target` (an empty file is
    /// created as the mount point): the guest image cannot be modified.
    ///
    /// # Errors
    /// [`IsolationError`] from the file creation or mount.
    pub fn bind_file_read_only(
        &mut self,
        source: &Path,
        target: &Path,
    ) -> Result<(), IsolationError> {
        self.bind_file(source, target, true)
    }

    /// Bind-mounts file `source` over `target` (an empty file is created
    /// as the mount point), read-only when `read_only`.
    ///
    /// # Errors
    /// [`IsolationError`] from the file creation or mount.
    pub fn bind_file(
        &mut self,
        source: &Path,
        target: &Path,
        read_only: bool,
    ) -> Result<(), IsolationError> {
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(io_err("mkdir", parent))?;
        }
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(target)
            .map_err(io_err("create", target))?;
        self.bind(source, target, read_only)
    }

    fn bind(
        &mut self,
        source: &Path,
        target: &Path,
        read_only: bool,
    ) -> Result<(), IsolationError> {
        let merr = |op, source| IsolationError::Mount {
            op,
            path: target.to_owned(),
            source,
        };
        mount(
            Some(source),
            target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| merr("bind mount", e))?;
        self.targets.push(target.to_owned());
        if read_only {
            mount(
                None::<&str>,
                target,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                None::<&str>,
            )
            .map_err(|e| merr("remount read-only", e))?;
        }
        tracing::debug!(source = %source.display(), target = %target.display(), read_only, "bind mount");
        Ok(())
    }

    /// Mounts a fresh `/proc` for the launcher's own PID namespace, so
    /// libvirt's and the launcher's pid lookups see the namespace's pids.
    ///
    /// # Errors
    /// [`IsolationError::Mount`].
    pub fn mount_proc(&mut self) -> Result<(), IsolationError> {
        let target = Path::new("/proc");
        mount(
            Some("proc"),
            target,
            Some("proc"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            None::<&str>,
        )
        .map_err(|source| IsolationError::Mount {
            op: "mount proc",
            path: target.to_owned(),
            source,
        })?;
        self.targets.push(target.to_owned());
        Ok(())
    }

    /// Detaches every mount, last first (before the state directory is
    /// removed, so no removal can reach through a mount).
    pub fn unmount_all(&mut self) {
        while let Some(t) = self.targets.pop() {
            if let Err(e) = umount2(&t, MntFlags::MNT_DETACH) {
                tracing::warn!(target = %t.display(), "unmount: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_directories_are_never_emptied() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("precious"), b"x").unwrap();
        let e = StateDir::acquire(d.path()).unwrap_err();
        assert!(matches!(e, IsolationError::Foreign(_)), "{e}");
        assert!(d.path().join("precious").is_file());
        assert!(matches!(
            StateDir::acquire(Path::new("/")),
            Err(IsolationError::Foreign(_))
        ));
        let file = d.path().join("precious");
        assert!(matches!(
            StateDir::acquire(&file),
            Err(IsolationError::NotADirectory(_))
        ));
        let empty = tempfile::tempdir().unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(empty.path(), &link).unwrap();
        assert!(matches!(
            StateDir::acquire(&link),
            Err(IsolationError::NotADirectory(_))
        ));
    }

    #[test]
    fn removal_at_exit_leaves_nothing_of_the_launchers_own() {
        let d = tempfile::tempdir().unwrap();
        // A directory the launcher creates goes entirely.
        let made = d.path().join("state");
        let s = StateDir::acquire(&made).unwrap();
        fs::create_dir_all(s.subdir("libvirt/run").unwrap()).unwrap();
        fs::write(made.join("libvirt/run/x"), b"x").unwrap();
        s.remove().unwrap();
        assert!(!made.exists());
        // The user's own empty directory stays, empty.
        let mine = d.path().join("mine");
        fs::create_dir(&mine).unwrap();
        let s = StateDir::acquire(&mine).unwrap();
        fs::write(mine.join("y"), b"y").unwrap();
        s.remove().unwrap();
        assert!(mine.is_dir());
        assert_eq!(fs::read_dir(&mine).unwrap().count(), 0);
        // After a removal the directory can be claimed again, once.
        let again = StateDir::acquire(&mine).unwrap();
        assert!(matches!(
            StateDir::acquire(&mine),
            Err(IsolationError::Busy(_))
        ));
        drop(again);
    }

    #[test]
    fn own_directories_are_reused_and_emptied() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("state");
        {
            let s = StateDir::acquire(&root).unwrap();
            fs::write(s.subdir("private").unwrap().join("old"), b"x").unwrap();
            // A second launcher on the same directory is refused while the first holds it.
            assert!(matches!(
                StateDir::acquire(&root),
                Err(IsolationError::Busy(_))
            ));
        }
        let _s = StateDir::acquire(&root).unwrap();
        assert!(!root.join("private").exists(), "stale state is removed");
        assert!(root.join(MARKER).is_file());
    }
}
