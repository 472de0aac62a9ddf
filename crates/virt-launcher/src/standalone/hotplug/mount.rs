//! virt-handler's mount of a hot-plugged image: the image (or block
//! device) given by the user, bind-mounted at its pod path inside the
//! launcher's mount namespace, and unmounted after the detach (see the
//! module docs of [`super`]).

// open_tree(2) and move_mount(2) have no safe wrapper (nix, std).
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::LauncherError;

/// The image a volume is hot-plugged from: a regular file or a block
/// device, never through a symbolic link; a block device is mounted at
/// `<volume>`, a file at `<volume>.img`.
pub struct Image {
    file: File,
    /// The image is a block device.
    pub block: bool,
}

impl Image {
    /// Opens `path` with the one check of a given host path
    /// ([`crate::standalone::given::open`]: no link, no block device the
    /// host uses).
    ///
    /// # Errors
    /// Input error naming `--image`.
    pub fn open(path: &Path) -> Result<Image, LauncherError> {
        let (file, kind) =
            crate::standalone::given::open("--image", path, false).map_err(|mut e| {
                e.message = format!("{}: {}", path.display(), e.message);
                e
            })?;
        Ok(Image {
            file,
            block: kind == crate::standalone::given::GivenKind::Block,
        })
    }

    /// For a non-root launcher (the VMI's `status.runtimeUser` `uid`, not
    /// 0): QEMU, running as `uid`, must read and write the image. In a
    /// non-root pod virt-handler gives a hot-plugged image to 107; the
    /// stand-in never changes the owner of the user's files, so one `uid`
    /// cannot use is refused, as `run --run-as-nonroot` refuses its other
    /// files.
    ///
    /// # Errors
    /// Input error naming `--image`.
    pub fn check_user(&self, path: &Path, name: &str, uid: u32) -> Result<(), LauncherError> {
        if uid == 0 {
            return Ok(());
        }
        let meta = self
            .file
            .metadata()
            .map_err(|e| LauncherError::input_at("--image", format!("{}: {e}", path.display())))?;
        match crate::standalone::container::access(&meta, uid) {
            (true, true, _) => Ok(()),
            _ => Err(LauncherError::input_at(
                "--image",
                format!(
                    "uid {uid} (KubeVirt's non-root qemu user) cannot read and write {} (for {}); give it to uid {uid} (chown {uid}:{uid}) as virt-handler does in a non-root pod, or run as root",
                    path.display(),
                    self.pod_path(name)
                ),
            )),
        }
    }

    /// Where virt-handler would mount it for volume `name`, in the pod.
    pub fn pod_path(&self, name: &str) -> String {
        if self.block {
            api::hotplug::block_path(name)
        } else {
            api::hotplug::image_path(name)
        }
    }
}

/// The pid of the process serving the command socket `socket` (the
/// launcher, `SO_PEERCRED`).
///
/// # Errors
/// Runtime error when it cannot be reached.
pub fn server_pid(socket: &Path) -> Result<i32, LauncherError> {
    let s = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| LauncherError::runtime(format!("{}: {e}", socket.display())))?;
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| LauncherError::runtime(format!("SO_PEERCRED on {}: {e}", socket.display())))?;
    Ok(cred.pid())
}

/// The placeholder file (or device mount point) in the state directory
/// where the launcher sees `pod_path`: `<state>/share/hotplug-disks/<name>`.
fn placeholder(state: &Path, pod_path: &str) -> Option<PathBuf> {
    let rel = pod_path.strip_prefix("/var/run/kubevirt/")?;
    Some(state.join("share").join(rel))
}

/// Runs `f` on a thread of its own that entered the mount namespace of
/// `pid` (a thread may, after `unshare(CLONE_FS)`, while the process keeps
/// its own).
fn in_mount_namespace<T: Send + 'static>(
    pid: i32,
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, LauncherError> {
    let ns = File::open(format!("/proc/{pid}/ns/mnt"))
        .map_err(|e| LauncherError::runtime(format!("mount namespace of {pid}: {e}")))?;
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS)
            .map_err(|e| format!("unshare(CLONE_FS): {e}"))?;
        nix::sched::setns(ns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNS)
            .map_err(|e| format!("entering the launcher's mount namespace: {e}"))?;
        f()
    })
    .join()
    .map_err(|_| LauncherError::runtime("the mount thread panicked"))?
    .map_err(LauncherError::runtime)
}

/// Bind-mounts `image` at its pod path for volume `name` inside the mount
/// namespace of the launcher `pid` whose state directory is `state`.
///
/// # Errors
/// Runtime error naming the step; nothing is left mounted.
pub fn mount(pid: i32, state: &Path, name: &str, image: &Image) -> Result<(), LauncherError> {
    let pod_path = image.pod_path(name);
    let place = placeholder(state, &pod_path)
        .ok_or_else(|| LauncherError::runtime(format!("{pod_path} is outside the share")))?;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&place)
        .map_err(|e| LauncherError::runtime(format!("{}: {e}", place.display())))?;
    // A detached clone of the image's mount, made here (the image is the
    // caller's path), attached there.
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
    // SAFETY: open_tree with a valid fd, an empty NUL-terminated path and
    // flags; the result is checked.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            image.file.as_raw_fd(),
            c"".as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint,
        )
    };
    if tree < 0 {
        let e = std::io::Error::last_os_error();
        let _ = std::fs::remove_file(&place);
        return Err(LauncherError::runtime(format!(
            "open_tree of the image: {e}"
        )));
    }
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as i32) };
    let target = std::ffi::CString::new(pod_path.clone())
        .map_err(|_| LauncherError::runtime("a NUL in the path"))?;
    let r = in_mount_namespace(pid, move || {
        // SAFETY: move_mount with a valid fd and NUL-terminated paths.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                tree.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_FDCWD,
                target.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            )
        };
        if rc < 0 {
            return Err(format!(
                "mounting the image at {}: {}",
                target.to_string_lossy(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&place);
    }
    r
}

/// Unmounts volume `name`'s image (at `pod_path`) in the launcher `pid`'s
/// mount namespace and removes its placeholder from `state`.
///
/// # Errors
/// Runtime error naming the step.
pub fn unmount(pid: i32, state: &Path, pod_path: &str) -> Result<(), LauncherError> {
    let target = pod_path.to_owned();
    in_mount_namespace(pid, move || {
        nix::mount::umount2(target.as_str(), nix::mount::MntFlags::MNT_DETACH)
            .map_err(|e| format!("unmounting {target}: {e}"))
    })?;
    if let Some(place) = placeholder(state, pod_path) {
        std::fs::remove_file(&place)
            .map_err(|e| LauncherError::runtime(format!("{}: {e}", place.display())))?;
    }
    Ok(())
}

/// Which pod path volume `name` is mounted at: the block node or the image
/// (whichever placeholder exists in `state`).
pub fn mounted_path(state: &Path, name: &str) -> Option<String> {
    [
        api::hotplug::block_path(name),
        api::hotplug::image_path(name),
    ]
    .into_iter()
    .find(|p| placeholder(state, p).is_some_and(|f| f.symlink_metadata().is_ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_root_launcher_needs_an_image_its_user_can_write() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.img");
        std::fs::write(&f, b"x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let img = Image::open(&f).unwrap();
        assert!(!img.block);
        img.check_user(&f, "hp", 0).unwrap();
        let e = img.check_user(&f, "hp", 107).unwrap_err().to_string();
        assert!(
            e.contains("--image: uid 107 (KubeVirt's non-root qemu user) cannot read and write")
                && e.contains("(for /var/run/kubevirt/hotplug-disks/hp.img)"),
            "{e}"
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        Image::open(&f).unwrap().check_user(&f, "hp", 107).unwrap();
        // Never through a link.
        let l = dir.path().join("l.img");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        assert!(Image::open(&l).is_err());
    }

    #[test]
    fn the_placeholder_of_a_pod_path() {
        assert_eq!(
            placeholder(Path::new("/s"), "/var/run/kubevirt/hotplug-disks/hp.img").unwrap(),
            Path::new("/s/share/hotplug-disks/hp.img")
        );
    }
}
