//! `<disk>` elements from `spec.domain.devices.disks` and the volumes they
//! name (KubeVirt converter `Convert_v1_Disk_To_api_Disk`,
//! `Convert_v1_Volume_To_api_Disk` and the per-source functions).

use std::collections::{BTreeMap, BTreeSet};

use api::vmi::{Bus, CacheMode, Disk as VmiDisk, Volume};
use api::{Arch, VirtualMachineInstance};
use domain::{
    Address, Alias, BackingStore, BootOrder, Disk, DiskDriver, DiskSource, DiskTarget, Empty,
    Format,
};

use crate::{ConvertContext, ConvertError, ImageFormat};

/// QEMU refuses longer serial numbers on `scsi-hd` (QEMU commit 75997e18;
/// KubeVirt issue 13858).
pub const MAX_SCSI_SERIAL: usize = 36;

/// Guest device name for the `index`-th device with `prefix`:
/// `sda` … `sdz`, `sdaa` … (the Linux SCSI naming KubeVirt uses).
pub fn device_name(prefix: &str, index: usize) -> String {
    let mut letters = Vec::new();
    let mut n = index + 1;
    while n > 0 {
        n -= 1;
        letters.push(b'a' + u8::try_from(n % 26).unwrap_or(0));
        n /= 26;
    }
    letters.reverse();
    format!("{prefix}{}", String::from_utf8_lossy(&letters))
}

/// `vd` for virtio, `sd` for sata/scsi/usb.
fn prefix(bus: Bus) -> &'static str {
    match bus {
        Bus::Virtio => "vd",
        Bus::Sata | Bus::Scsi | Bus::Usb => "sd",
    }
}

/// Where a volume's image is, as KubeVirt lays it out in the pod.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeLocation {
    /// `file` or `block`.
    pub disk_type: &'static str,
    /// Format the guest device reads.
    pub format: ImageFormat,
    /// Image file or block device.
    pub source: DiskSource,
    /// Backing image (containerDisk overlays).
    pub backing: Option<BackingStore>,
}

/// The container disk image virt-handler mounts for the `index`-th volume:
/// `<container-disk-dir>/disk_<index>.img`.
pub fn container_disk_image(ctx: &ConvertContext, index: usize) -> String {
    format!(
        "{}/disk_{index}.img",
        ctx.paths.container_disk_dir.trim_end_matches('/')
    )
}

/// The writable qcow2 overlay of a containerDisk volume:
/// `<ephemeral-disk-dir>/disk-data/<vol>/disk.qcow2`.
pub fn container_disk_overlay(ctx: &ConvertContext, volume: &str) -> String {
    format!(
        "{}/disk-data/{volume}/disk.qcow2",
        ctx.paths.ephemeral_disk_dir.trim_end_matches('/')
    )
}

/// The image of an emptyDisk volume: `<empty-disk-dir>/<vol>.qcow2`.
pub fn empty_disk_image(ctx: &ConvertContext, volume: &str) -> String {
    format!(
        "{}/{volume}.qcow2",
        ctx.paths.empty_disk_dir.trim_end_matches('/')
    )
}

/// The image of a filesystem-mode PVC or DataVolume:
/// `<private-dir>/vmi-disks/<vol>/disk.img`.
pub fn pvc_image(ctx: &ConvertContext, volume: &str) -> String {
    format!(
        "{}/vmi-disks/{volume}/disk.img",
        ctx.paths.private_dir.trim_end_matches('/')
    )
}

/// The image of a hostDisk volume: `<private-dir>/vmi-disks/<vol>/<basename(path)>`.
///
/// # Errors
/// [`ConvertError::Invalid`] when `path` has no usable file name.
pub fn host_disk_image(
    ctx: &ConvertContext,
    volume: &str,
    path: &str,
    field: &str,
) -> Result<String, ConvertError> {
    let name = path.rsplit('/').next().unwrap_or("");
    if name.is_empty() || name == "." || name == ".." || !path.starts_with('/') {
        return Err(ConvertError::invalid(
            field,
            format!("{path:?} is not an absolute path to a file"),
        ));
    }
    crate::xml_text(field, name)?;
    Ok(format!(
        "{}/vmi-disks/{volume}/{name}",
        ctx.paths.private_dir.trim_end_matches('/')
    ))
}

/// Resolves the location of volume `v` (the `index`-th in `spec.volumes`).
///
/// # Errors
/// [`ConvertError::Unsupported`] for sources not built yet (normally caught
/// earlier by [`crate::unsupported::check`]), `Invalid` for bad host paths.
pub fn locate(
    ctx: &ConvertContext,
    index: usize,
    v: &Volume,
) -> Result<VolumeLocation, ConvertError> {
    let file = |f: String| DiskSource {
        file: Some(f),
        ..DiskSource::default()
    };
    if v.container_disk.is_some() {
        let fmt = ctx
            .prepared
            .container_disk_formats
            .get(&v.name)
            .copied()
            .unwrap_or(ImageFormat::Raw);
        return Ok(VolumeLocation {
            disk_type: "file",
            format: ImageFormat::Qcow2,
            source: file(container_disk_overlay(ctx, &v.name)),
            backing: Some(BackingStore {
                store_type: Some("file".into()),
                format: Some(Format {
                    format_type: fmt.as_str().into(),
                }),
                source: Some(file(container_disk_image(ctx, index))),
            }),
        });
    }
    if v.empty_disk.is_some() {
        return Ok(VolumeLocation {
            disk_type: "file",
            format: ImageFormat::Qcow2,
            source: file(empty_disk_image(ctx, &v.name)),
            backing: None,
        });
    }
    if v.persistent_volume_claim.is_some() || v.data_volume.is_some() {
        if ctx.prepared.block_volumes.contains(&v.name) {
            return Ok(VolumeLocation {
                disk_type: "block",
                format: ImageFormat::Raw,
                source: DiskSource {
                    dev: Some(format!("/dev/{}", v.name)),
                    name: Some(v.name.clone()),
                    ..DiskSource::default()
                },
                backing: None,
            });
        }
        return Ok(VolumeLocation {
            disk_type: "file",
            format: ImageFormat::Raw,
            source: file(pvc_image(ctx, &v.name)),
            backing: None,
        });
    }
    if let Some(h) = &v.host_disk {
        let field = format!("spec.volumes[{index}].hostDisk.path");
        return Ok(VolumeLocation {
            disk_type: "file",
            format: ImageFormat::Raw,
            source: file(host_disk_image(ctx, &v.name, &h.path, &field)?),
            backing: None,
        });
    }
    let kind = v.source_kinds().first().copied().unwrap_or("unknown");
    Err(ConvertError::unsupported(
        format!("spec.volumes[{index}].{kind}"),
        format!("{kind} volumes"),
    ))
}

/// Converts every disk, in spec order.
///
/// Names: the first free `vdX` / `sdX` per prefix in spec order. SCSI disks
/// get `<address type='drive' controller='0' bus='0' unit=N>` with N the
/// index of their name. Driver: `qemu`, the source's format, the disk's
/// cache (else the probed one), io, `error_policy` (default `stop`),
/// `discard='unmap'` for disks. `<readonly/>` for read-only disks, CD-ROMs
/// (default) and read-only PVCs; `<shareable/>` forces cache `none`.
///
/// # Errors
/// [`ConvertError::Invalid`] for KubeVirt's admission rules: CD-ROM on
/// virtio, read-only SATA disks, SCSI serials over 36 characters, a cache
/// other than `none` on a shareable disk, buses the architecture lacks.
pub fn convert(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    vcpus: u32,
) -> Result<Vec<Disk>, ConvertError> {
    let volumes: BTreeMap<&str, (usize, &Volume)> = vmi
        .spec
        .volumes
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.as_str(), (i, v)))
        .collect();
    let multi_queue = vmi.spec.domain.devices.block_multi_queue == Some(true);
    let mut used: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    let mut out = Vec::with_capacity(vmi.spec.domain.devices.disks.len());
    for (i, d) in vmi.spec.domain.devices.disks.iter().enumerate() {
        let path = format!("spec.domain.devices.disks[{i}]");
        let (device, bus, target_field) = match (&d.disk, &d.cdrom) {
            (Some(t), _) => ("disk", t.bus, "disk"),
            (None, Some(c)) => ("cdrom", c.bus, "cdrom"),
            (None, None) => ("disk", None, "disk"),
        };
        let bus = bus.unwrap_or_else(|| ctx.arch.default_disk_bus());
        check_bus(
            ctx.arch,
            device,
            bus,
            d,
            &format!("{path}.{target_field}.bus"),
        )?;

        let pre = prefix(bus);
        let taken = used.entry(pre).or_default();
        let idx = (0..).find(|n| !taken.contains(n)).unwrap_or(0);
        taken.insert(idx);
        let dev = device_name(pre, idx);

        let readonly_spec = match device {
            "cdrom" => d.cdrom.as_ref().and_then(|c| c.readonly).unwrap_or(true),
            _ => d.disk.as_ref().is_some_and(|t| t.readonly),
        };
        if device == "disk" && readonly_spec && bus == Bus::Sata {
            return Err(ConvertError::invalid(
                format!("{path}.disk.readonly"),
                format!(
                    "disk {:?}: read-only disks are not supported on the sata bus (use virtio or scsi, or a cdrom)",
                    d.name
                ),
            ));
        }
        if let Some(serial) = &d.serial {
            if bus == Bus::Scsi && serial.len() > MAX_SCSI_SERIAL {
                return Err(ConvertError::invalid(
                    format!("{path}.serial"),
                    format!(
                        "disk {:?}: a serial on the scsi bus may have at most {MAX_SCSI_SERIAL} characters, this one has {}",
                        d.name,
                        serial.len()
                    ),
                ));
            }
        }

        let mut disk = Disk {
            device: device.into(),
            target: DiskTarget {
                dev: dev.clone(),
                bus: Some(bus.as_str().into()),
                tray: d.cdrom.as_ref().and_then(|c| c.tray.clone()),
            },
            serial: d.serial.clone(),
            boot: d.boot_order.map(|order| BootOrder { order }),
            alias: Some(Alias::user(&d.name)),
            ..Disk::default()
        };
        if let Some(t) = &disk.target.tray {
            if t != "open" && t != "closed" {
                return Err(ConvertError::invalid(
                    format!("{path}.cdrom.tray"),
                    format!("{t:?} is not open or closed"),
                ));
            }
        }
        if bus == Bus::Virtio && ctx.arch != Arch::S390x {
            disk.model = Some(crate::arch::virtio_model(crate::arch::caps(ctx.arch), vmi).into());
        }
        if bus == Bus::Scsi {
            disk.address = Some(Address {
                address_type: "drive".into(),
                controller: Some("0".into()),
                bus: Some("0".into()),
                target: Some("0".into()),
                unit: Some(idx.to_string()),
                ..Address::default()
            });
        }

        let mut readonly = readonly_spec;
        let mut driver = DiskDriver {
            name: "qemu".into(),
            error_policy: Some(
                match d.error_policy.unwrap_or(api::vmi::ErrorPolicy::Stop) {
                    api::vmi::ErrorPolicy::Stop => "stop",
                    api::vmi::ErrorPolicy::Ignore => "ignore",
                    api::vmi::ErrorPolicy::Report => "report",
                    api::vmi::ErrorPolicy::Enospace => "enospace",
                }
                .into(),
            ),
            io: match d.io {
                Some(api::vmi::IoMode::Native) => Some("native".into()),
                Some(api::vmi::IoMode::Threads) => Some("threads".into()),
                None => ctx
                    .prepared
                    .native_io
                    .contains(&d.name)
                    .then(|| "native".into()),
            },
            ..DiskDriver::default()
        };
        match volumes.get(d.name.as_str()) {
            Some((vi, v)) => {
                let loc = locate(ctx, *vi, v)?;
                disk.disk_type = loc.disk_type.into();
                driver.format = Some(loc.format.as_str().into());
                disk.source = Some(loc.source);
                disk.backing_store = loc.backing;
                if device == "disk" {
                    driver.discard = Some("unmap".into());
                }
                if v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|p| p.read_only)
                {
                    readonly = true;
                }
            }
            None if device == "cdrom" => {
                // An empty CD-ROM drive: no medium (KubeVirt: block, raw, no source).
                disk.disk_type = "block".into();
                driver.format = Some("raw".into());
            }
            None => {
                return Err(ConvertError::invalid(
                    format!("{path}.name"),
                    format!("volume {:?} not found in spec.volumes", d.name),
                ))
            }
        }
        let cache = d
            .cache
            .or_else(|| ctx.prepared.cache_modes.get(&d.name).copied());
        if d.shareable == Some(true) {
            if cache.is_some_and(|c| c != CacheMode::None) && d.cache.is_some() {
                return Err(ConvertError::invalid(
                    format!("{path}.cache"),
                    "a shareable disk must use cache none",
                ));
            }
            disk.shareable = Some(Empty {});
            driver.cache = Some("none".into());
        } else {
            driver.cache = cache.map(|c| cache_str(c).into());
        }
        if multi_queue && bus == Bus::Virtio {
            driver.queues = Some(vcpus.max(1));
        }
        if readonly {
            disk.readonly = Some(Empty {});
        }
        disk.driver = Some(driver);
        out.push(disk);
    }
    Ok(out)
}

fn cache_str(c: CacheMode) -> &'static str {
    match c {
        CacheMode::None => "none",
        CacheMode::Writethrough => "writethrough",
        CacheMode::Writeback => "writeback",
    }
}

/// Buses each device kind may use, per KubeVirt's admission rules.
fn check_bus(
    arch: Arch,
    device: &str,
    bus: Bus,
    d: &VmiDisk,
    field: &str,
) -> Result<(), ConvertError> {
    if device == "cdrom" && bus == Bus::Virtio {
        return Err(ConvertError::invalid(
            field,
            format!(
                "disk {:?}: virtio is not a valid CD-ROM bus (use sata or scsi)",
                d.name
            ),
        ));
    }
    if arch == Arch::S390x && matches!(bus, Bus::Sata | Bus::Usb) {
        return Err(ConvertError::invalid(
            field,
            format!(
                "disk {:?}: bus {} is not supported on s390x",
                d.name,
                bus.as_str()
            ),
        ));
    }
    if let Some(s) = &d.serial {
        crate::xml_text(field, s)?;
    }
    Ok(())
}
