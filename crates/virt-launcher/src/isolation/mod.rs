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

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};

mod state_dir;
pub use state_dir::StateDir;

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
    /// The directory (or its parent) can be changed by another user: it is
    /// owned by another user, or writable by group or others (a parent
    /// only without the sticky bit).
    #[error("state directory {path}: {why}; refusing to use it")]
    Unsafe {
        /// The directory at fault (the state directory or its parent).
        path: PathBuf,
        /// Its owner or mode, as found.
        why: String,
    },
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

/// True when `a` and `b` describe the same file (device and inode).
pub fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.ino() == b.ino() && a.dev() == b.dev()
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

    /// Bind-mounts the directory `source` holds over `target` (created if
    /// missing) without trusting its path (issue 19). `source` was opened
    /// before this mount namespace was made, so the kernel refuses to mount
    /// from it directly; its path `shown` is opened again here with no
    /// symbolic link followed anywhere (`openat2` with
    /// `RESOLVE_NO_SYMLINKS`), that descriptor must be the same directory
    /// (device and inode) as the held one, and the mount is made from it
    /// through `/proc/self/fd/<n>`: what is mounted is the directory that
    /// was checked, whatever happens to the path in between.
    ///
    /// # Errors
    /// [`IsolationError`] from mkdir, open or mount, or when the path now
    /// names another directory than the held one.
    pub fn bind_dir_fd(
        &mut self,
        source: &std::os::fd::OwnedFd,
        shown: &Path,
        target: &Path,
    ) -> Result<(), IsolationError> {
        use rustix::fs::{openat2, Mode, OFlags, ResolveFlags, CWD};
        use std::os::fd::AsRawFd;
        fs::create_dir_all(target).map_err(io_err("mkdir", target))?;
        let here = openat2(
            CWD,
            shown,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS,
        )
        .map_err(|e| io_err("open", shown)(e.into()))?;
        let (a, b) = (
            rustix::fs::fstat(source).map_err(|e| io_err("stat", shown)(e.into()))?,
            rustix::fs::fstat(&here).map_err(|e| io_err("stat", shown)(e.into()))?,
        );
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
            return Err(io_err("open", shown)(io::Error::other(
                "is no longer the directory the launcher created",
            )));
        }
        let held = PathBuf::from(format!("/proc/self/fd/{}", here.as_raw_fd()));
        tracing::debug!(source = %shown.display(), "bind mount from a checked descriptor");
        self.bind(&held, target, false)
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
