//! Preparation of the volumes whose image the launcher checks or creates:
//! containerDisk (verified, with a qcow2 overlay), emptyDisk, hostDisk,
//! ephemeral (an overlay on the claim) and filesystem-mode claims. Paths
//! come from KubeVirt's layout ([`api::layout::VolumeFiles`]).

use std::fs;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use api::layout::ClaimData;
use api::vmi::{EmptyDiskSource, HostDiskSource, HostDiskType, Volume};
use api::VirtualMachineInstance;
use converter::{ConvertContext, ImageFormat};

use crate::files::{claim_dir_under, ensure_parent_under, exists_regular, finish_file};
use crate::qemu_img::ImageInfo;
use crate::staging::Staging;
use crate::{io_err, pvc, qemu_img, volume_err, PrepareOptions, StorageError};

/// One volume's preparation: the field its errors name, the launcher's
/// directories and the options of [`crate::prepare`].
pub(crate) struct Step<'a> {
    /// `spec.volumes[<i>].<source>`.
    pub field: &'a str,
    /// Directories ([`ConvertContext::paths`]).
    pub ctx: &'a ConvertContext,
    /// Options.
    pub opts: &'a PrepareOptions,
}

/// `qemu-img`'s failure about `field`.
fn qemu_img_err(field: &str) -> impl FnOnce(qemu_img::QemuImgError) -> StorageError + '_ {
    move |source| StorageError::QemuImg {
        path: field.to_owned(),
        source,
    }
}

impl Step<'_> {
    /// The qcow2 overlay the guest writes over a containerDisk `image`,
    /// after the image's checks ([`verify_container_disk`]); returns the
    /// image's format.
    ///
    /// # Errors
    /// [`StorageError`] naming the field: the image's checks, or the
    /// overlay's creation.
    pub(crate) fn container_disk(
        &self,
        image: &Path,
        overlay: &Path,
    ) -> Result<ImageFormat, StorageError> {
        let info = verify_container_disk(self.field, image, self.opts)?;
        let format = match info.format.as_str() {
            "qcow2" => ImageFormat::Qcow2,
            _ => ImageFormat::Raw,
        };
        self.create_overlay(image, format, overlay)?;
        Ok(format)
    }

    /// Creates the qcow2 `overlay` on `backing` (read as `format`) below
    /// the ephemeral disk directory, unless it exists.
    fn create_overlay(
        &self,
        backing: &Path,
        format: ImageFormat,
        overlay: &Path,
    ) -> Result<(), StorageError> {
        let field = self.field;
        if exists_regular(field, overlay)? {
            return Ok(());
        }
        let root = Path::new(&self.ctx.paths.ephemeral_disk_dir);
        ensure_parent_under(field, &self.ctx.paths.ephemeral_disk_dir, overlay)?;
        let staging = Staging::new(field, root, overlay)?;
        qemu_img::create_overlay(backing, format, staging.dir(), staging.name())
            .map_err(qemu_img_err(field))?;
        staging.finish(0o640, self.opts.owner)
    }

    /// An emptyDisk's sparse qcow2 `image` of its capacity rounded down
    /// to 1 MiB, unless it exists.
    pub(crate) fn empty_disk(
        &self,
        v: &Volume,
        e: &EmptyDiskSource,
        image: &Path,
    ) -> Result<(), StorageError> {
        let field = self.field;
        let bytes = e
            .capacity
            .to_bytes()
            .map_err(|err| volume_err(&format!("{field}.capacity"), err.to_string()))?;
        let bytes = bytes - bytes % (1 << 20);
        if bytes == 0 {
            return Err(volume_err(
                &format!("{field}.capacity"),
                format!("the size for volume {} is too low", v.name),
            ));
        }
        if !exists_regular(field, image)? {
            let root = Path::new(&self.ctx.paths.empty_disk_dir);
            ensure_parent_under(field, &self.ctx.paths.empty_disk_dir, image)?;
            let staging = Staging::new(field, root, image)?;
            qemu_img::create_empty(staging.dir(), staging.name(), bytes)
                .map_err(qemu_img_err(field))?;
            staging.finish(0o640, self.opts.owner)?;
        }
        Ok(())
    }

    /// A hostDisk's `image`: it must exist (`Disk`), or is created sparse
    /// of its capacity (`DiskOrCreate`).
    pub(crate) fn host_disk(
        &self,
        v: &Volume,
        h: &HostDiskSource,
        image: &Path,
    ) -> Result<(), StorageError> {
        let field = self.field;
        if exists_regular(field, image)? {
            return Ok(());
        }
        match &h.disk_type {
            HostDiskType::DiskOrCreate => {
                let cap = h.capacity.as_ref().ok_or_else(|| {
                    volume_err(&format!("{field}.capacity"), "required for DiskOrCreate")
                })?;
                let bytes = cap
                    .to_bytes()
                    .map_err(|e| volume_err(&format!("{field}.capacity"), e.to_string()))?;
                ensure_parent_under(field, &self.ctx.paths.private_dir, image)?;
                self.create_claim_image(&v.name, image, bytes)
            }
            HostDiskType::Disk | HostDiskType::Unset => Err(volume_err(
                field,
                format!("disk image {} does not exist", image.display()),
            )),
            HostDiskType::Other(other) => Err(volume_err(
                &format!("{field}.type"),
                format!("{other:?} is not Disk or DiskOrCreate"),
            )),
        }
    }

    /// An ephemeral volume's overlay on its claim: the block device
    /// `block` (as probed), else the claim's image, which must exist. The
    /// claim is only ever read: the guest writes to a qcow2 overlay whose
    /// backing file is read as raw (`-F raw`), so no header in the PVC can
    /// make QEMU open another file.
    pub(crate) fn ephemeral(
        &self,
        block: Option<PathBuf>,
        claim: &ClaimData,
        overlay: &Path,
    ) -> Result<(), StorageError> {
        let backing = match block {
            Some(d) => d,
            None => {
                let image = PathBuf::from(claim.path());
                if !exists_regular(self.field, &image)? {
                    return Err(volume_err(
                        self.field,
                        format!("the claim's disk image {} does not exist", image.display()),
                    ));
                }
                image
            }
        };
        self.create_overlay(&backing, ImageFormat::Raw, overlay)
    }

    /// A filesystem-mode claim's `image`: kept when it exists, else
    /// created sparse in the mounted claim from the size the VMI's status
    /// gives (KubeVirt: virt-handler's host-disk step).
    pub(crate) fn claim_image(
        &self,
        vmi: &VirtualMachineInstance,
        v: &Volume,
        image: &Path,
    ) -> Result<(), StorageError> {
        let field = self.field;
        if exists_regular(field, image)? {
            return Ok(());
        }
        match pvc::info(vmi, &v.name)?.filter(|p| !p.is_block()) {
            Some(info) => {
                claim_dir_under(field, &self.ctx.paths.private_dir, image)?;
                let size = pvc::image_size(&info, &v.name)
                    .map_err(|e| volume_err(field, e.to_string()))?;
                self.create_claim_image(&v.name, image, size)
            }
            None => {
                let block = match &self.opts.block_device_dir {
                    Some(d) => format!("neither block device {} nor ", d.join(&v.name).display()),
                    None => "no ".to_owned(),
                };
                Err(volume_err(
                    field,
                    format!("{block}disk image {} exists, and status.volumeStatus gives no claim size to create it", image.display()),
                ))
            }
        }
    }

    /// Creates a claim's (or DiskOrCreate hostDisk's) sparse raw image of
    /// `bytes`, with the room and toleration rules of
    /// [`pvc::create_image`], and gives it its mode and owner.
    fn create_claim_image(
        &self,
        volume: &str,
        image: &Path,
        bytes: u64,
    ) -> Result<(), StorageError> {
        let (field, opts) = (self.field, self.opts);
        if bytes == 0 {
            return Err(volume_err(
                field,
                format!("the size for volume {volume} is too low, must be at least 1 byte"),
            ));
        }
        let reserve = opts.space.minimum_reserve_bytes;
        let size = pvc::create_image(field, volume, image, bytes, opts.space, &|d| {
            pvc::room(d, reserve)
        })?;
        if let (Some(sink), Some(event)) = (
            &opts.events,
            pvc::tolerated_small_pv(bytes, size, opts.space.less_pvc_space_toleration),
        ) {
            (sink.0)(event);
        }
        finish_file(field, image, 0o660, opts.owner)
    }
}

/// Checks a container disk image: present, a regular file, `qemu-img info`
/// (CPU- and memory-limited) says raw, or qcow2 without a backing file. A
/// backing file could make QEMU read any host file, so it is refused.
fn verify_container_disk(
    field: &str,
    image: &Path,
    opts: &PrepareOptions,
) -> Result<ImageInfo, StorageError> {
    match fs::metadata(image) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(volume_err(
                field,
                format!("{} is not a regular file", image.display()),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(volume_err(
                field,
                format!("container disk image {} not found", image.display()),
            ))
        }
        Err(e) => return Err(io_err(field, "stat", image)(e)),
    }
    let info = qemu_img::info(image, opts.disk_memory_limit).map_err(qemu_img_err(field))?;
    if let Some(df) = info.data_file() {
        return Err(volume_err(
            field,
            format!("image {} has an external data file ({df:?}); container disks must be self-contained", image.display()),
        ));
    }
    if info.virtual_size == 0 {
        return Err(volume_err(
            field,
            format!("image {} is empty (virtual size 0)", image.display()),
        ));
    }
    match (info.format.as_str(), info.backing_filename.as_deref()) {
        ("raw", _) | ("qcow2", None) => Ok(info),
        ("qcow2", Some(b)) => Err(volume_err(
            field,
            format!(
                "image {} has a backing file ({b:?}); container disks must be self-contained",
                image.display()
            ),
        )),
        (f, _) => Err(volume_err(
            field,
            format!(
                "image {} has format {f:?}; only raw and qcow2 are accepted",
                image.display()
            ),
        )),
    }
}

/// Whether hot-plug volume `name` is a block device: virt-handler's node
/// [`api::hotplug::block_path`] (KubeVirt's `isHotplugBlockDeviceVolume`;
/// a symbolic link there is none).
pub fn is_hotplug_block_device(name: &str) -> bool {
    fs::symlink_metadata(api::hotplug::block_path(name))
        .is_ok_and(|m| m.file_type().is_block_device())
}

/// The block device of claim `name`, if it is one (see
/// [`PrepareOptions::block_volumes`]).
pub(crate) fn block_device(
    opts: &PrepareOptions,
    field: &str,
    name: &str,
) -> Result<Option<PathBuf>, StorageError> {
    let Some(dir) = &opts.block_device_dir else {
        return Ok(None);
    };
    let d = dir.join(name);
    let is_block = fs::metadata(&d).is_ok_and(|m| m.file_type().is_block_device());
    match &opts.block_volumes {
        None => Ok(is_block.then_some(d)),
        Some(set) if set.contains(name) => {
            if is_block {
                Ok(Some(d))
            } else {
                Err(volume_err(
                    field,
                    format!("{} is not a block device", d.display()),
                ))
            }
        }
        Some(_) => Ok(None),
    }
}
