//! KubeVirt's cache and io modes for disks that set none
//! (`SetDriverCacheMode`, `SetOptimalIOMode`): probed on the files the
//! guest's I/O reaches.

use std::fs;
use std::path::PathBuf;

use api::layout::VolumeFiles;
use api::vmi::CacheMode;
use api::VirtualMachineInstance;
use converter::{ConvertContext, Prepared};

use crate::files::{preallocated, supports_direct_io};
use crate::{volume_err, StorageError};

/// KubeVirt's cache mode rule for disks that set none: `none` when the
/// image (and its backing file) can be opened with O_DIRECT, else
/// `writethrough`. An explicit `none` where O_DIRECT does not work is an
/// error; other explicit modes are kept.
pub(crate) fn choose_cache_modes(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    prepared: &mut Prepared,
) -> Result<(), StorageError> {
    let statuses = api::hotplug::VolumeStatuses::of(vmi);
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        let Some(disk) = vmi
            .spec
            .domain
            .devices
            .disks
            .iter()
            .find(|d| d.name == v.name)
        else {
            continue;
        };
        let block = prepared.block_volumes.contains(&v.name);
        // The downwardMetrics disk keeps the cache the launcher's probe
        // gives no mode to (KubeVirt's bare driver); a hostDisk path that
        // makes no image is refused by the converter.
        let files: Vec<PathBuf> =
            match VolumeFiles::of(&ctx.paths, vmi, i, v, block, statuses.is_hotplug(&v.name)) {
                Ok(Some(VolumeFiles::DownwardMetrics(_)) | None) | Err(_) => continue,
                Ok(Some(f)) => f.guest_files().into_iter().map(PathBuf::from).collect(),
            };
        // A hot-plug volume virt-handler has not mounted yet gets its mode
        // when it is attached (a later sync).
        if files.first().is_some_and(|f| {
            f.starts_with(api::hotplug::HOTPLUG_DISK_DIR) && fs::symlink_metadata(f).is_err()
        }) {
            continue;
        }
        let mut direct = true;
        for f in &files {
            match supports_direct_io(f) {
                Ok(true) => {}
                Ok(false) => direct = false,
                Err(e) => {
                    tracing::warn!(volume = %v.name, file = %f.display(), "cannot probe O_DIRECT, using writethrough: {e}");
                    direct = false;
                }
            }
        }
        // KubeVirt's io rule: no io given, cache none, and a block device
        // or a fully allocated image → io native.
        let none = match disk.cache {
            Some(c) => c == CacheMode::None,
            None => direct,
        };
        if none && disk.io.is_none() && (block || files.first().is_some_and(|f| preallocated(f))) {
            prepared.native_io.insert(v.name.clone());
        }
        match disk.cache {
            Some(CacheMode::None) if !direct => {
                let p = files
                    .first()
                    .map(|f| f.display().to_string())
                    .unwrap_or_default();
                return Err(volume_err(
                    &format!("spec.domain.devices.disks[{}].cache", vmi.spec.domain.devices.disks.iter().position(|d| d.name == v.name).unwrap_or(0)),
                    format!("Unable to use 'none' cache mode, file system where {p} is stored does not support direct I/O"),
                ));
            }
            Some(_) => {}
            None => {
                prepared.cache_modes.insert(
                    v.name.clone(),
                    if direct {
                        CacheMode::None
                    } else {
                        CacheMode::Writethrough
                    },
                );
            }
        }
    }
    Ok(())
}
