//! KubeVirt's ExpandDisks at start: filesystem-mode claim images (and
//! hostDisks) grown offline to the usable size their claim's status
//! gives ([`pvc::usable_size`]); online growth is `BlockResize` in
//! virtwrap's manager.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use api::VirtualMachineInstance;
use converter::{ConvertContext, Prepared};

use crate::{pvc, qemu_img, StorageError};

/// A claim image ExpandDisks may grow: volume, image path (as the launcher
/// sees it), usable size in bytes ([`pvc::usable_size`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpansionTarget {
    /// The volume.
    pub volume: String,
    /// The raw image (`vmi-disks/<vol>/disk.img`, or a hostDisk's file).
    pub image: PathBuf,
    /// What the claim's status allows, in bytes.
    pub usable: u64,
}

/// The images ExpandDisks considers: filesystem-mode claims (and hostDisks)
/// whose status gives a usable size; block claims (in `block_volumes`, or
/// `volumeMode: Block` in the status) and read-only claims are left out.
///
/// # Errors
/// [`StorageError::Volume`] for a status field that does not parse.
pub fn expansion_targets(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    block_volumes: &BTreeSet<String>,
) -> Result<Vec<ExpansionTarget>, StorageError> {
    let mut out = Vec::new();
    let statuses = api::hotplug::VolumeStatuses::of(vmi);
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        let claim = v.persistent_volume_claim.is_some() || v.data_volume.is_some();
        if !(claim || v.host_disk.is_some()) || block_volumes.contains(&v.name) {
            continue;
        }
        if v.persistent_volume_claim
            .as_ref()
            .is_some_and(|p| p.read_only)
        {
            continue;
        }
        let Some(usable) = pvc::info(vmi, &v.name)?
            .filter(|i| !i.is_block())
            .as_ref()
            .and_then(pvc::usable_size)
        else {
            continue;
        };
        let image = match &v.host_disk {
            Some(h) => {
                match ctx
                    .paths
                    .host_disk_image(&v.name, &h.path, &format!("spec.volumes[{i}]"))
                {
                    Ok(p) => PathBuf::from(p),
                    Err(_) => continue,
                }
            }
            // A hot-plug claim's image is virt-handler's mount.
            None if statuses.is_hotplug(&v.name) => {
                PathBuf::from(api::hotplug::image_path(&v.name))
            }
            None => PathBuf::from(ctx.paths.pvc_image(&v.name)),
        };
        out.push(ExpansionTarget {
            volume: v.name.clone(),
            image,
            usable,
        });
    }
    Ok(out)
}

/// KubeVirt's offline ExpandDisks step: each [`expansion_targets`] image
/// smaller than its usable size is grown with `qemu-img resize` (falloc
/// when the image is fully allocated); never shrunk. As in KubeVirt, a
/// failed resize is logged and the domain starts with the image as it is.
pub(crate) fn expand_claim_images(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    prepared: &Prepared,
) -> Result<(), StorageError> {
    for t in expansion_targets(vmi, ctx, &prepared.block_volumes)? {
        // The image is opened once, without following a link and without
        // blocking on a FIFO, checked on the descriptor, and resized
        // through that descriptor (`/proc/<pid>/fd/<n>`): whoever can
        // write the claim's directory cannot swap the file between the
        // check and the resize (issue 19).
        let Ok(file) = crate::staging::open_no_follow(&t.image, true) else {
            continue;
        };
        let Ok(meta) = file.metadata() else { continue };
        if !meta.is_file() || meta.len() >= t.usable {
            continue;
        }
        let allocated = meta.blocks().saturating_mul(512) >= meta.len();
        match qemu_img::resize(&crate::staging::fd_path(&file), t.usable, allocated) {
            Ok(()) => {
                tracing::info!(volume = %t.volume, from = meta.len(), to = t.usable, "expanded the disk image to the claim's usable size")
            }
            Err(e) => {
                tracing::error!(volume = %t.volume, "failed to expand the disk image at start: {e}")
            }
        }
    }
    Ok(())
}
