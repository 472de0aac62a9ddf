//! Container disks and kernel boot artifacts through Kubernetes image
//! volumes (`--image-volume`, KubeVirt's `ImageVolume` feature gate;
//! v1.6.6 `virtwrap/manager.go` `linkImageVolumeFilePaths`, facts §5.1).
//!
//! With image volumes virt-controller mounts each containerDisk's image
//! read-only at `/var/run/kubevirt-image-volume/disk_<i>` and the kernel
//! boot image at `/var/run/kubevirt-kernel-boot`, and there is no
//! container-disk sidecar. At every sync (and migration target
//! preparation), before the volumes are prepared, the launcher links
//! `<container-disk-dir>/disk_<i>.img` to the disk in the image (the file
//! at `containerDisk.path`, else the single entry of the image's `/disk`
//! directory) and `<container-disk-dir>/kernel-boot/<basename>` to each
//! kernel boot artifact; the rest of the launcher then finds them where a
//! container-disk sidecar would have put them.
//!
//! The path is resolved inside the image as KubeVirt's
//! `safepath.JoinAndResolveWithRelativeRoot` does, by a walk of our own
//! ([`resolve`]): one component at a time, each looked up relative to the
//! file descriptor of its directory without following links
//! (`O_PATH|O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`); a symbolic link in the
//! image is read and its target walked in its place, an absolute target
//! from the image's root, at most 256 path elements in all (KubeVirt's
//! bound, which also ends link loops). The result is a path of real
//! directories ending in a regular file. So the links the launcher makes
//! point at a path without any link in it: QEMU and `qemu-img`, which
//! open `disk_<i>.img`, follow only the link the launcher made.
//!
//! Deviations from KubeVirt, both stricter:
//! - the root of a containerDisk's walk is its own image
//!   (`.../disk_<i>`), not the directory of all images: a `..` or a link
//!   cannot reach another volume's image, and an absolute link in the
//!   image (`/disk/a.img`) means the image's own `/disk/a.img`;
//! - a `..` above the image's root is refused (KubeVirt stays at the
//!   root, as `chroot` does), and so is a final file that is not a
//!   regular file (a FIFO, a directory, a device), which QEMU could block
//!   on or not read as a disk.
//!
//! KubeVirt's messages are kept (`failed to find disk file from
//! ImageVolume: no file found in folder ..., no disk present`); an error
//! fails the sync, as KubeVirt's SyncVMI returns it (after logging
//! `failed link ImageVolumeFilePaths`).

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use api::layout::Paths;
use api::VirtualMachineInstance;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, CWD};

use crate::{volume_err, StorageError};

/// Where virt-controller mounts the containerDisks' image volumes
/// (KubeVirt's `util.VirtImageVolumeDir`); volume `i` at `disk_<i>`.
pub const IMAGE_VOLUME_DIR: &str = "/var/run/kubevirt-image-volume";
/// Where it mounts the kernel boot image (`util.VirtKernelBootVolumeDir`).
pub const KERNEL_BOOT_VOLUME_DIR: &str = "/var/run/kubevirt-kernel-boot";
/// The directory of an image whose single entry is the disk when
/// `containerDisk.path` is empty (`osdisk.DiskSourceFallbackPath`).
pub const DISK_SOURCE_FALLBACK: &str = "disk";
/// How many path elements one resolution may evaluate (KubeVirt's
/// `newLimitedFifo(256)`): bounds the work of any path and ends loops.
pub const MAX_PATH_ELEMENTS: usize = 256;

/// Where the image volumes are mounted (KubeVirt's paths by default;
/// tests use their own directories).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageVolumeRoots {
    /// [`IMAGE_VOLUME_DIR`].
    pub image_volume_dir: PathBuf,
    /// [`KERNEL_BOOT_VOLUME_DIR`].
    pub kernel_boot_dir: PathBuf,
}

impl Default for ImageVolumeRoots {
    fn default() -> Self {
        ImageVolumeRoots {
            image_volume_dir: PathBuf::from(IMAGE_VOLUME_DIR),
            kernel_boot_dir: PathBuf::from(KERNEL_BOOT_VOLUME_DIR),
        }
    }
}

impl ImageVolumeRoots {
    /// The image of the `index`-th volume: `<image-volume-dir>/disk_<index>`.
    pub fn disk_root(&self, index: usize) -> PathBuf {
        self.image_volume_dir.join(format!("disk_{index}"))
    }
}

/// A resolved file: its path (only real directories below the root) and
/// a descriptor (`O_PATH`) of it.
struct Resolved {
    path: PathBuf,
    fd: OwnedFd,
}

/// Resolves `rel` inside `root` (see the module docs) and returns the path
/// of the regular file it names, below `root` and without any symbolic
/// link below it.
///
/// # Errors
/// One line: a component missing or not a directory, a `..` or link
/// leading above `root`, more than [`MAX_PATH_ELEMENTS`] elements, a
/// final file that is not a regular file.
pub(crate) fn resolve(root: &Path, rel: &str) -> Result<PathBuf, String> {
    let r = walk(root, rel)?;
    let st = rfs::fstat(&r.fd).map_err(|e| format!("{}: {e}", r.path.display()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(format!("{} is not a regular file", r.path.display()));
    }
    Ok(r.path)
}

/// Pushes the components of `p` to the front of `queue`, in order,
/// counting them against the bound.
fn push_front(queue: &mut VecDeque<Vec<u8>>, count: &mut usize, p: &[u8]) -> Result<(), String> {
    let parts: Vec<&[u8]> = p
        .split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .collect();
    for c in parts.into_iter().rev() {
        *count += 1;
        if *count > MAX_PATH_ELEMENTS {
            return Err(format!(
                "more than {MAX_PATH_ELEMENTS} path elements evaluated"
            ));
        }
        queue.push_front(c.to_vec());
    }
    Ok(())
}

fn walk(root: &Path, rel: &str) -> Result<Resolved, String> {
    // The root is a configured directory (the mount point of the image
    // volume), opened as given; nothing below it is followed.
    let root_fd = rfs::openat(
        CWD,
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("{}: {e}", root.display()))?;
    let mut queue = VecDeque::new();
    let mut count = 0;
    push_front(&mut queue, &mut count, rel.as_bytes())?;
    // The directories walked so far, each with its descriptor.
    let mut stack: Vec<(Vec<u8>, OwnedFd)> = Vec::new();
    let here = |stack: &[(Vec<u8>, OwnedFd)]| -> PathBuf {
        let mut p = root.to_path_buf();
        for (c, _) in stack {
            p.push(OsStr::from_bytes(c));
        }
        p
    };
    while let Some(c) = queue.pop_front() {
        if c == b".." {
            if stack.pop().is_none() {
                return Err(format!(
                    "{rel:?} leads out of {}: refusing to follow it",
                    root.display()
                ));
            }
            continue;
        }
        let dir = stack.last().map_or(&root_fd, |(_, fd)| fd);
        let name = OsStr::from_bytes(&c);
        let at = |e: rustix::io::Errno| {
            let mut p = here(&stack);
            p.push(name);
            format!("{}: {}", p.display(), io::Error::from(e))
        };
        let st = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(at)?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
            let target = rfs::readlinkat(dir, name, Vec::new()).map_err(at)?;
            let target = target.as_bytes();
            if target.first() == Some(&b'/') {
                stack.clear();
            }
            push_front(&mut queue, &mut count, target)?;
            continue;
        }
        let fd = rfs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(at)?;
        stack.push((c, fd));
    }
    let path = here(&stack);
    let fd = match stack.pop() {
        Some((_, fd)) => fd,
        None => root_fd,
    };
    Ok(Resolved { path, fd })
}

/// The disk of the `index`-th volume in its image: `path` resolved inside
/// the image, or, when `path` is empty, the single entry of the image's
/// `/disk` directory (KubeVirt's `getDiskTargetPathFromImageVolumeView`,
/// with its messages).
///
/// # Errors
/// One line, KubeVirt's words where it has them.
pub(crate) fn disk_source(
    roots: &ImageVolumeRoots,
    index: usize,
    path: &str,
) -> Result<PathBuf, String> {
    let root = roots.disk_root(index);
    if !path.is_empty() {
        return resolve(&root, path);
    }
    let folder = root.join(DISK_SOURCE_FALLBACK);
    let fail = |e: String| format!("failed to check ImageVolume path {}: {e}", folder.display());
    let dir = walk(&root, DISK_SOURCE_FALLBACK).map_err(fail)?;
    let readable = rfs::openat(
        &dir.fd,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| fail(io::Error::from(e).to_string()))?;
    let entries = rfs::Dir::new(readable).map_err(|e| fail(io::Error::from(e).to_string()))?;
    // Two entries are enough to decide: the listing is never read further.
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| fail(io::Error::from(e).to_string()))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        names.push(name.to_vec());
        if names.len() > 1 {
            break;
        }
    }
    match names.as_slice() {
        [] => Err(format!(
            "no file found in folder {}, no disk present",
            folder.display()
        )),
        [one] => {
            let mut rel = DISK_SOURCE_FALLBACK.as_bytes().to_vec();
            rel.push(b'/');
            rel.extend_from_slice(one);
            resolve(&root, &String::from_utf8_lossy(&rel))
        }
        _ => Err(format!(
            "more than one file found in folder {}, only one disk is allowed",
            folder.display()
        )),
    }
}

/// A kernel boot artifact (`kernelPath`, `initrdPath`) inside the kernel
/// boot image (KubeVirt's `getKernelBootArtifactPathFromImageVolumeView`).
///
/// # Errors
/// One line (see [`resolve`]).
pub(crate) fn kernel_boot_source(
    roots: &ImageVolumeRoots,
    artifact: &str,
) -> Result<PathBuf, String> {
    resolve(&roots.kernel_boot_dir, artifact)
}

/// Makes `link` a symbolic link to `target`; an existing link to the same
/// target is kept (a later sync), anything else there is refused.
fn make_link(target: &Path, link: &Path) -> Result<(), String> {
    match std::os::unix::fs::symlink(target, link) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match std::fs::read_link(link) {
            Ok(t) if t == target => Ok(()),
            _ => Err(format!(
                "{} exists and is not the link to {}",
                link.display(),
                target.display()
            )),
        },
        Err(e) => Err(e.to_string()),
    }
}

/// KubeVirt's `linkImageVolumeFilePaths` for `vmi`: links every
/// containerDisk's `disk_<i>.img` and each kernel boot artifact in `paths`'
/// container-disk directory to its file in the image volumes under
/// `roots` (see the module docs).
///
/// # Errors
/// [`StorageError::Volume`] naming the volume or the kernel boot field,
/// with KubeVirt's message.
pub fn link(
    vmi: &VirtualMachineInstance,
    paths: &Paths,
    roots: &ImageVolumeRoots,
) -> Result<(), StorageError> {
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        let Some(cd) = &v.container_disk else {
            continue;
        };
        let field = format!("spec.volumes[{i}].containerDisk");
        let path = cd.path.as_deref().unwrap_or("");
        let source = disk_source(roots, i, path).map_err(|e| {
            volume_err(
                &field,
                format!("failed to find disk file from ImageVolume: {e}"),
            )
        })?;
        let link = PathBuf::from(paths.container_disk_image(i));
        make_link(&source, &link).map_err(|e| {
            volume_err(
                &field,
                format!("error creating symlink for containerDisk: {e}"),
            )
        })?;
    }
    let Some(kb) = vmi
        .spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.kernel_boot.as_ref())
        .and_then(|k| k.container.as_ref())
    else {
        return Ok(());
    };
    let base = "spec.domain.firmware.kernelBoot.container";
    let dir = paths.kernel_boot_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| volume_err(base, format!("error creating dir for KernelPath: {e}")))?;
    for (name, artifact) in [
        ("kernelPath", &kb.kernel_path),
        ("initrdPath", &kb.initrd_path),
    ] {
        let Some(artifact) = artifact.as_deref().filter(|a| !a.is_empty()) else {
            continue;
        };
        let field = format!("{base}.{name}");
        let link = paths
            .kernel_boot_artifact(artifact)
            .ok_or_else(|| volume_err(&field, format!("{artifact:?} does not name a file")))?;
        let source = kernel_boot_source(roots, artifact).map_err(|e| {
            volume_err(
                &field,
                format!("error getting kernel boot artifact path from ImageVolume: {e}"),
            )
        })?;
        make_link(&source, Path::new(&link)).map_err(|e| {
            volume_err(
                &field,
                format!("error creating symlink for KernelPath: {e}"),
            )
        })?;
    }
    Ok(())
}
