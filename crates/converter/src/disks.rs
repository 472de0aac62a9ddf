//! `<disk>` elements from `spec.domain.devices.disks` and the volumes they
//! name (KubeVirt converter `Convert_v1_Disk_To_api_Disk`,
//! `Convert_v1_Volume_To_api_Disk` and the per-source functions).

use std::collections::BTreeMap;

use api::layout::{ClaimData, VolumeFiles, PR_HELPER_SOCKET};
use api::vmi::{Bus, CacheMode, Disk as VmiDisk, Tray, Volume};
use api::{Arch, VirtualMachineInstance};
use domain::{
    Address, BackingStore, BlockIo, BootOrder, Disk, DiskDriver, DiskSource, DiskTarget, Empty,
    Format, Reservations, ReservationsSource,
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

/// How the guest sees a disk (`disks[]` sets exactly one of `disk`, `lun`,
/// `cdrom`; none is a disk): libvirt's `<disk device=...>`, also the VMI
/// field's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskDevice {
    /// A block device.
    Disk,
    /// A SCSI LUN passed through (block-mode claims only).
    Lun,
    /// A CD-ROM drive.
    Cdrom,
}

impl DiskDevice {
    /// libvirt's and KubeVirt's name (`disk`, `lun`, `cdrom`).
    pub fn as_str(self) -> &'static str {
        match self {
            DiskDevice::Disk => "disk",
            DiskDevice::Lun => "lun",
            DiskDevice::Cdrom => "cdrom",
        }
    }
}

/// What a disk's source is: libvirt's `<disk type=...>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceType {
    /// An image file (`<source file=...>`).
    File,
    /// A block device (`<source dev=...>`).
    Block,
}

impl SourceType {
    /// libvirt's name (`file`, `block`).
    pub fn as_str(self) -> &'static str {
        match self {
            SourceType::File => "file",
            SourceType::Block => "block",
        }
    }
}

/// Where a volume's image is, as KubeVirt lays it out in the pod.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeLocation {
    /// File or block device.
    pub disk_type: SourceType,
    /// Format the guest device reads.
    pub format: ImageFormat,
    /// Image file or block device.
    pub source: DiskSource,
    /// Backing image (containerDisk overlays).
    pub backing: Option<BackingStore>,
}

/// Resolves the location of volume `v` (the `index`-th in `spec.volumes`)
/// from KubeVirt's layout ([`VolumeFiles`]): disk type, format, source and
/// backing store of its `<disk>`; `hotplug`: the status marks it a
/// hot-plug volume.
///
/// # Errors
/// [`ConvertError::Unsupported`] for sources not built yet (normally caught
/// earlier by [`crate::unsupported::check`]), `Invalid` for bad host paths,
/// a sysprep volume without exactly one source, or a memory dump volume.
pub fn locate(
    ctx: &ConvertContext,
    vmi: &VirtualMachineInstance,
    index: usize,
    v: &Volume,
    hotplug: bool,
) -> Result<VolumeLocation, ConvertError> {
    let block = ctx.prepared.block_volumes.contains(&v.name);
    let Some(files) = VolumeFiles::of(&ctx.paths, vmi, index, v, block, hotplug)? else {
        return Err(no_disk(index, v));
    };
    let file = |f: String| DiskSource {
        file: Some(f),
        ..DiskSource::default()
    };
    let raw_file = |f: String| VolumeLocation {
        disk_type: SourceType::File,
        format: ImageFormat::Raw,
        source: file(f),
        backing: None,
    };
    // A qcow2 overlay the guest writes, on a backing file of `format`.
    let overlay = |overlay: String, format: ImageFormat, backing: &ClaimData| VolumeLocation {
        disk_type: SourceType::File,
        format: ImageFormat::Qcow2,
        source: file(overlay),
        backing: Some(BackingStore {
            store_type: Some(
                match backing {
                    ClaimData::Block(_) => SourceType::Block,
                    ClaimData::Image(_) => SourceType::File,
                }
                .as_str()
                .into(),
            ),
            format: Some(Format {
                format_type: format.as_str().into(),
            }),
            source: Some(claim_source(backing.clone())),
        }),
    };
    // Changed block tracking (KubeVirt main's convertVolumeWithCBT): the
    // guest writes through a qcow2 overlay whose data lives in the claim's
    // raw image or device (`data-file-raw`), so the overlay holds only the
    // checkpoints' dirty bitmaps.
    if let Some(overlay) = ctx.prepared.cbt_overlays.get(&v.name) {
        let data = match &files {
            VolumeFiles::Claim(c) => Some(c.clone()),
            VolumeFiles::HostDisk(image) => Some(ClaimData::Image(image.clone())),
            _ => None,
        };
        if let Some(c) = data {
            return Ok(cbt_location(overlay, c));
        }
    }
    Ok(match files {
        VolumeFiles::CloudInit { iso, .. } | VolumeFiles::DownwardMetrics(iso) => raw_file(iso),
        VolumeFiles::Config { iso, .. } => {
            if let Some(s) = &v.sysprep {
                if s.config_map.is_some() == s.secret.is_some() {
                    return Err(ConvertError::invalid(
                        format!("spec.volumes[{index}].sysprep"),
                        "exactly one of configMap or secret is required",
                    ));
                }
            }
            raw_file(iso)
        }
        VolumeFiles::ContainerDisk { image, overlay: o } => {
            let fmt = ctx
                .prepared
                .container_disk_formats
                .get(&v.name)
                .copied()
                .unwrap_or(ImageFormat::Raw);
            overlay(o, fmt, &ClaimData::Image(image))
        }
        // KubeVirt: a qcow2 overlay in the ephemeral disk directory on the
        // PVC, read as raw (block device or the claim's disk.img).
        VolumeFiles::Ephemeral { claim, overlay: o } => overlay(o, ImageFormat::Raw, &claim),
        VolumeFiles::EmptyDisk(image) => VolumeLocation {
            disk_type: SourceType::File,
            format: ImageFormat::Qcow2,
            source: file(image),
            backing: None,
        },
        // KubeVirt also writes `name='<volume>'` on a block claim's
        // source, which libvirt's schema has only for network disks
        // (virt-xml-validate refuses it here) and its parser ignores.
        VolumeFiles::Claim(c @ ClaimData::Block(_)) => VolumeLocation {
            disk_type: SourceType::Block,
            format: ImageFormat::Raw,
            source: claim_source(c),
            backing: None,
        },
        VolumeFiles::Claim(ClaimData::Image(image)) | VolumeFiles::HostDisk(image) => {
            raw_file(image)
        }
    })
}

/// A tracked volume's `<disk>`: the qcow2 `overlay` with `data` as its raw
/// `<dataStore>`.
fn cbt_location(overlay: &str, data: ClaimData) -> VolumeLocation {
    VolumeLocation {
        disk_type: SourceType::File,
        format: ImageFormat::Qcow2,
        source: DiskSource {
            file: Some(overlay.to_owned()),
            data_store: Some(Box::new(domain::DataStore {
                store_type: match &data {
                    ClaimData::Block(_) => SourceType::Block,
                    ClaimData::Image(_) => SourceType::File,
                }
                .as_str()
                .into(),
                format: Some(Format {
                    format_type: ImageFormat::Raw.as_str().into(),
                }),
                source: Some(claim_source(data)),
            })),
            ..DiskSource::default()
        },
        backing: None,
    }
}

/// `<source dev=...>` of a block device, `<source file=...>` of an image.
fn claim_source(c: ClaimData) -> DiskSource {
    match c {
        ClaimData::Block(dev) => DiskSource {
            dev: Some(dev),
            ..DiskSource::default()
        },
        ClaimData::Image(f) => DiskSource {
            file: Some(f),
            ..DiskSource::default()
        },
    }
}

/// Why volume `v` has no disk: a memory dump target, or a source not built.
fn no_disk(index: usize, v: &Volume) -> ConvertError {
    if v.memory_dump.is_some() {
        // KubeVirt counts no disk for a memory dump volume (admitHotplug:
        // expected disks = volumes - memory dump volumes).
        return ConvertError::invalid(
            format!("spec.volumes[{index}].memoryDump"),
            format!(
                "volume {:?} is a memory dump target (VirtualMachineMemoryDump), never a disk",
                v.name
            ),
        );
    }
    let kind = v.source_kinds().first().copied().unwrap_or("unknown");
    ConvertError::unsupported(
        format!("spec.volumes[{index}].{kind}"),
        format!("{kind} volumes"),
    )
}

/// Converts every disk, in spec order.
///
/// Names: the first free `vdX` / `sdX` per prefix in spec order. SCSI
/// disks and LUNs (not CD-ROMs) get `<address type='drive' controller='0'
/// bus='0' unit=N>` with N the index of their name. Driver: `qemu`, the
/// source's format, the disk's cache (else the probed one), io,
/// `error_policy` (default `stop`), `discard='unmap'` for disks and luns
/// except preallocated volumes ([`ConvertContext::volumes_discard_ignore`])
/// and the downwardMetrics disk, whose driver KubeVirt keeps bare (no
/// discard, queues, cache or io of its own). `<readonly/>` for read-only
/// disks, CD-ROMs (default) and read-only PVCs (mounted read-only, where a
/// writable disk could not be opened: a deliberate difference from
/// KubeVirt, see the parity test); `<shareable/>` forces cache `none`.
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
    let statuses = api::hotplug::VolumeStatuses::of(vmi);
    let mut names = DeviceNamer::new(vmi, ctx.arch, &statuses);
    let mut out = Vec::with_capacity(vmi.spec.domain.devices.disks.len());
    for (i, d) in vmi.spec.domain.devices.disks.iter().enumerate() {
        let path = format!("spec.domain.devices.disks[{i}]");
        let (device, bus) = match (&d.disk, &d.lun, &d.cdrom) {
            (Some(t), _, _) => (DiskDevice::Disk, t.bus),
            (None, Some(t), _) => (DiskDevice::Lun, t.bus),
            (None, None, Some(c)) => (DiskDevice::Cdrom, c.bus),
            (None, None, None) => (DiskDevice::Disk, None),
        };
        let bus = bus.unwrap_or_else(|| ctx.arch.default_disk_bus());
        check_bus(
            ctx.arch,
            device,
            bus,
            d,
            &format!("{path}.{}.bus", device.as_str()),
        )?;

        let (dev, idx) = names.name(d, device, bus);

        let readonly_spec = match device {
            DiskDevice::Cdrom => d.cdrom.as_ref().and_then(|c| c.readonly).unwrap_or(true),
            DiskDevice::Lun => d.lun.as_ref().is_some_and(|t| t.readonly),
            DiskDevice::Disk => d.disk.as_ref().is_some_and(|t| t.readonly),
        };
        if device == DiskDevice::Disk && readonly_spec && bus == Bus::Sata {
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
            device: device.as_str().into(),
            target: DiskTarget {
                dev: dev.clone(),
                bus: Some(bus.as_str().into()),
                tray: d
                    .cdrom
                    .as_ref()
                    .and_then(|c| c.tray.as_ref())
                    .map(|t| t.as_str().to_owned()),
            },
            // KubeVirt writes no <serial> for an empty one.
            serial: d.serial.clone().filter(|s| !s.is_empty()),
            boot: d.boot_order.map(|order| BootOrder { order }),
            alias: Some(crate::user_alias(&format!("{path}.name"), &d.name)?),
            ..Disk::default()
        };
        if let Some(Tray::Other(t)) = d.cdrom.as_ref().and_then(|c| c.tray.as_ref()) {
            return Err(ConvertError::invalid(
                format!("{path}.cdrom.tray"),
                format!("{t:?} is not open or closed"),
            ));
        }
        if bus == Bus::Virtio && ctx.arch != Arch::S390x {
            disk.model = Some(crate::arch::virtio_model(crate::arch::caps(ctx.arch), vmi).into());
        }
        if let Some(pci) = d.disk.as_ref().and_then(|t| t.pci_address.as_deref()) {
            let field = format!("{path}.disk.pciAddress");
            if bus != Bus::Virtio {
                return Err(ConvertError::invalid(
                    field,
                    format!(
                        "setting a pci address is not allowed for non-virtio bus types, for disk {}",
                        d.name
                    ),
                ));
            }
            if ctx.arch == Arch::S390x {
                return Err(ConvertError::invalid(
                    field,
                    "s390x has no PCI bus for disks",
                ));
            }
            disk.address = Some(pci_address(pci, &field)?);
        }
        if let Some(custom) = d.block_size.as_ref().and_then(|b| b.custom.as_ref()) {
            let field = format!("{path}.blockSize.custom");
            for (name, v) in [("logical", custom.logical), ("physical", custom.physical)] {
                if !v.is_power_of_two() || !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&v) {
                    return Err(ConvertError::invalid(
                        format!("{field}.{name}"),
                        format!(
                            "{v} must be a power of 2 from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE}"
                        ),
                    ));
                }
            }
            if custom.logical > custom.physical {
                return Err(ConvertError::invalid(
                    format!("{field}.logical"),
                    format!(
                        "{} must not be larger than the physical block size {}",
                        custom.logical, custom.physical
                    ),
                ));
            }
            disk.blockio = Some(BlockIo {
                logical_block_size: Some(custom.logical),
                physical_block_size: Some(custom.physical),
            });
        }
        // KubeVirt places SCSI disks and LUNs on the controller by the
        // index of their name; libvirt places SCSI CD-ROMs itself (from the
        // same name, as long as the units fit one controller).
        if bus == Bus::Scsi && device != DiskDevice::Cdrom {
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
        // KubeVirt replaces a downwardMetrics disk's driver with a bare
        // one (qemu, raw): no discard, no queues, none of the disk's own
        // cache or io settings (the launcher's probes still apply).
        let metrics = volumes
            .get(d.name.as_str())
            .is_some_and(|(_, v)| v.downward_metrics.is_some());
        if metrics {
            driver.io = ctx
                .prepared
                .native_io
                .contains(&d.name)
                .then(|| "native".into());
        }
        match volumes.get(d.name.as_str()) {
            Some((vi, v)) => {
                let mut loc = locate(ctx, vmi, *vi, v, statuses.is_hotplug(&v.name))?;
                if device == DiskDevice::Lun {
                    if loc.disk_type != SourceType::Block || loc.backing.is_some() {
                        return Err(ConvertError::invalid(
                            format!("{path}.lun"),
                            format!(
                                "disk {:?}: a lun needs a block-mode persistentVolumeClaim or dataVolume",
                                d.name
                            ),
                        ));
                    }
                    if d.lun.as_ref().is_some_and(|t| t.reservation) {
                        loc.source.reservations = Some(Reservations {
                            managed: "no".into(),
                            source: Some(ReservationsSource {
                                source_type: "unix".into(),
                                path: PR_HELPER_SOCKET.into(),
                                mode: "client".into(),
                            }),
                        });
                    }
                }
                disk.disk_type = loc.disk_type.as_str().into();
                driver.format = Some(loc.format.as_str().into());
                disk.source = Some(loc.source);
                disk.backing_store = loc.backing;
                // KubeVirt: unmap for disks and luns unless virt-handler
                // lists the volume as preallocated; the launcher's own
                // sparse images (containerDisk, emptyDisk, ephemeral
                // overlays) always unmap.
                let own_image =
                    v.container_disk.is_some() || v.empty_disk.is_some() || v.ephemeral.is_some();
                if matches!(device, DiskDevice::Disk | DiskDevice::Lun)
                    && !metrics
                    && (own_image || !ctx.volumes_discard_ignore.contains(&v.name))
                {
                    driver.discard = Some("unmap".into());
                }
                if v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|p| p.read_only)
                    || v.downward_metrics.is_some()
                {
                    readonly = true;
                }
            }
            None if device == DiskDevice::Cdrom => {
                // An empty CD-ROM drive: no medium (KubeVirt: block, raw, no source).
                disk.disk_type = SourceType::Block.as_str().into();
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
            .filter(|_| !metrics)
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
        if multi_queue && bus == Bus::Virtio && !metrics {
            driver.queues = Some(vcpus.max(1));
        }
        if readonly {
            disk.readonly = Some(Empty {});
        }
        disk.driver = Some(driver);
        // KubeVirt's domain has a hot-plug volume's disk once virt-handler
        // made it ready, a permanent one when the status lists it (or
        // lists none yet), and every empty CD-ROM drive.
        let empty_cdrom = !volumes.contains_key(d.name.as_str());
        if empty_cdrom || statuses.disk_wanted(&d.name) {
            out.push(disk);
        }
    }
    Ok(out)
}

/// KubeVirt's `deviceNamer`: the target names (`vda`, `sdb`, ...) of the
/// disks, in spec order. A `disk` device keeps the target its volume's
/// status entry records (so a hot-plug or unplug never renames another
/// disk); every other device takes the first name of its prefix that is
/// neither recorded nor given yet. Names are never given back, so the
/// search per prefix resumes where it stopped (50,000 disks cost a
/// counter, not a search each: issue 19).
struct DeviceNamer<'a> {
    /// Recorded targets of `disk` devices, by disk name.
    recorded: BTreeMap<&'a str, &'a str>,
    /// Names recorded or given, per prefix.
    taken: BTreeMap<&'static str, std::collections::BTreeSet<String>>,
    /// Where the search for a free name resumes, per prefix.
    next: BTreeMap<&'static str, usize>,
}

impl<'a> DeviceNamer<'a> {
    fn new(
        vmi: &'a VirtualMachineInstance,
        arch: Arch,
        statuses: &'a api::hotplug::VolumeStatuses,
    ) -> Self {
        let mut recorded = BTreeMap::new();
        let mut taken: BTreeMap<&'static str, std::collections::BTreeSet<String>> = BTreeMap::new();
        for d in &vmi.spec.domain.devices.disks {
            let Some(t) = &d.disk else { continue };
            let Some(target) = statuses.targets.get(&d.name) else {
                continue;
            };
            let pre = prefix(t.bus.unwrap_or_else(|| arch.default_disk_bus()));
            // A recorded name of another prefix (the bus changed) is not
            // this disk's any more.
            if target.starts_with(pre) && name_index(pre, target).is_some() {
                recorded.insert(d.name.as_str(), target.as_str());
                taken.entry(pre).or_default().insert(target.clone());
            }
        }
        DeviceNamer {
            recorded,
            taken,
            next: BTreeMap::new(),
        }
    }

    /// The target name of disk `d` and its index among its prefix's names
    /// (the SCSI unit).
    fn name(&mut self, d: &VmiDisk, device: DiskDevice, bus: Bus) -> (String, usize) {
        let pre = prefix(bus);
        if device == DiskDevice::Disk {
            if let Some(t) = self.recorded.get(d.name.as_str()) {
                if let Some(i) = name_index(pre, t) {
                    return ((*t).to_owned(), i);
                }
            }
        }
        let taken = self.taken.entry(pre).or_default();
        let next = self.next.entry(pre).or_default();
        loop {
            let name = device_name(pre, *next);
            let i = *next;
            *next += 1;
            if taken.insert(name.clone()) {
                return (name, i);
            }
        }
    }
}

/// The index of device name `name` of `prefix` (`vdc` → 2, `sdaa` → 26),
/// `None` for a name not of that form.
pub fn name_index(prefix: &str, name: &str) -> Option<usize> {
    let letters = name.strip_prefix(prefix)?;
    if letters.is_empty() || letters.len() > 3 || !letters.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    let mut n = 0usize;
    for b in letters.bytes() {
        n = n * 26 + usize::from(b - b'a') + 1;
    }
    Some(n - 1)
}

/// Smallest custom block size (bytes).
pub const MIN_BLOCK_SIZE: u32 = 512;
/// Largest custom block size (bytes; 2 MiB, QEMU's limit).
pub const MAX_BLOCK_SIZE: u32 = 2 << 20;

/// Parses a PCI address `dddd:bb:ss.f` (hex; domain 0, bus ≤ 0xff, slot
/// ≤ 0x1f, function ≤ 7) into `<address type='pci' …>`.
///
/// # Errors
/// [`ConvertError::Invalid`] naming `field` for anything else.
pub fn pci_address(s: &str, field: &str) -> Result<Address, ConvertError> {
    let bad = || {
        ConvertError::invalid(
            field,
            format!("{s:?} is not a PCI address of the form 0000:bb:ss.f"),
        )
    };
    let (dom, rest) = s.split_once(':').ok_or_else(bad)?;
    let (bus, rest) = rest.split_once(':').ok_or_else(bad)?;
    let (slot, func) = rest.split_once('.').ok_or_else(bad)?;
    let hex = |x: &str, len: usize, max: u32| {
        (x.len() == len && x.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(x, 16).ok())
            .flatten()
            .filter(|v| *v <= max)
            .ok_or_else(bad)
    };
    let (dom, bus, slot, func) = (
        hex(dom, 4, 0)?,
        hex(bus, 2, 0xff)?,
        hex(slot, 2, 0x1f)?,
        hex(func, 1, 7)?,
    );
    Ok(Address {
        address_type: "pci".into(),
        domain: Some(format!("{dom:#06x}")),
        bus: Some(format!("{bus:#04x}")),
        slot: Some(format!("{slot:#04x}")),
        function: Some(format!("{func:#x}")),
        ..Address::default()
    })
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
    device: DiskDevice,
    bus: Bus,
    d: &VmiDisk,
    field: &str,
) -> Result<(), ConvertError> {
    if device == DiskDevice::Cdrom && bus == Bus::Virtio {
        return Err(ConvertError::invalid(
            field,
            format!(
                "disk {:?}: virtio is not a valid CD-ROM bus (use sata or scsi)",
                d.name
            ),
        ));
    }
    if device == DiskDevice::Lun && !matches!(bus, Bus::Scsi | Bus::Virtio) {
        return Err(ConvertError::invalid(
            field,
            format!(
                "disk {:?}: a lun needs the scsi or virtio bus, not {}",
                d.name,
                bus.as_str()
            ),
        ));
    }
    if arch == Arch::Arm64 && !matches!(bus, Bus::Virtio | Bus::Scsi) {
        // KubeVirt's arm64 admission (webhooks `validateDiskBus`).
        return Err(ConvertError::invalid(
            field,
            format!(
                "disk {:?}: bus {} is not supported on arm64 (use virtio or scsi)",
                d.name,
                bus.as_str()
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

#[cfg(test)]
mod tests {
    use api::Arch;

    use crate::{convert, ConvertContext, ConvertError, VirtType};

    fn conv(disks: &str, volumes: &str, block: &[&str]) -> Result<domain::Domain, ConvertError> {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: d, uid: u1}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n    devices:\n      disks:\n{disks}  volumes:\n{volumes}"
        );
        let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
        ctx.prepared.block_volumes = block.iter().map(|s| (*s).to_owned()).collect();
        convert(&v, &ctx)
    }

    const PVC: &str = "  - {name: a, persistentVolumeClaim: {claimName: c}}\n";

    /// Changed block tracking: a claim image and a block claim become
    /// qcow2 overlays with the claim as raw data store (KubeVirt main's
    /// convertVolumeWithCBT); a volume without an overlay stays raw.
    #[test]
    fn tracked_claims_write_through_their_overlay() {
        let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: d, uid: u1}\nspec:\n  domain:\n    memory: {guest: 1Gi}\n    devices:\n      disks:\n      - {name: a, disk: {bus: virtio}}\n      - {name: b, disk: {bus: virtio}}\n      - {name: c, disk: {bus: virtio}}\n  volumes:\n  - {name: a, persistentVolumeClaim: {claimName: a}}\n  - {name: b, dataVolume: {name: b}}\n  - {name: c, persistentVolumeClaim: {claimName: c}}\n";
        let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
        ctx.prepared.block_volumes = ["b".to_owned()].into();
        for n in ["a", "b"] {
            ctx.prepared
                .cbt_overlays
                .insert(n.into(), format!("/var/lib/libvirt/qemu/cbt/{n}.qcow2"));
        }
        let d = convert(&v, &ctx).unwrap();
        let xml = d.to_xml().unwrap();
        let flat = xml.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains("<source file=\"/var/lib/libvirt/qemu/cbt/a.qcow2\"> <dataStore type=\"file\"> <format type=\"raw\"/> <source file=\"/var/run/kubevirt-private/vmi-disks/a/disk.img\"/>"), "{xml}");
        assert!(
            flat.contains(
                "<dataStore type=\"block\"> <format type=\"raw\"/> <source dev=\"/dev/b\"/>"
            ),
            "{xml}"
        );
        let disks = &d.devices.disk;
        assert_eq!(
            disks[0].driver.as_ref().unwrap().format.as_deref(),
            Some("qcow2")
        );
        assert_eq!(
            disks[2].driver.as_ref().unwrap().format.as_deref(),
            Some("raw")
        );
        assert_eq!(domain::Domain::from_xml(&xml).unwrap(), d);
    }

    /// A VMI with a boot claim and two hot-plug claims, `status` its
    /// `volumeStatus` entries.
    fn hotplug(status: &str, block: &[&str]) -> Result<domain::Domain, ConvertError> {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: d, uid: u1}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n    devices:\n      disks:\n      - {{name: boot, disk: {{bus: virtio}}}}\n      - {{name: hp1, disk: {{bus: virtio}}, serial: s1, cache: writethrough}}\n      - {{name: hp2, disk: {{bus: scsi}}}}\n  volumes:\n  - {{name: boot, persistentVolumeClaim: {{claimName: b}}}}\n  - {{name: hp1, persistentVolumeClaim: {{claimName: c1, hotpluggable: true}}}}\n  - {{name: hp2, dataVolume: {{name: c2, hotpluggable: true}}}}\nstatus:\n  volumeStatus:\n{status}"
        );
        let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
        ctx.prepared.block_volumes = block.iter().map(|s| (*s).to_owned()).collect();
        convert(&v, &ctx)
    }

    #[test]
    fn hotplug_volumes_are_where_virt_handler_mounts_them_once_ready() {
        let d = hotplug(
            "  - {name: boot, target: vda}\n  - {name: hp1, phase: MountedToPod, hotplugVolume: {attachPodName: p}}\n  - {name: hp2, phase: Ready, target: sda, hotplugVolume: {attachPodName: p}}\n",
            &["hp2"],
        )
        .unwrap();
        let x = d.to_xml().unwrap();
        assert_eq!(d.devices.disk.len(), 3, "{x}");
        assert!(x.contains("<disk type=\"file\" device=\"disk\" model=\"virtio-non-transitional\">\n      <driver name=\"qemu\" type=\"raw\" cache=\"writethrough\" error_policy=\"stop\" discard=\"unmap\"/>\n      <source file=\"/var/run/kubevirt/hotplug-disks/hp1.img\"/>\n      <target dev=\"vdb\" bus=\"virtio\"/>\n      <serial>s1</serial>\n      <alias name=\"ua-hp1\"/>"), "{x}");
        assert!(x.contains("<disk type=\"block\" device=\"disk\">"), "{x}");
        assert!(x.contains("<source dev=\"/var/run/kubevirt/hotplug-disks/hp2\"/>\n      <target dev=\"sda\" bus=\"scsi\"/>"), "{x}");
        assert!(
            x.contains(
                "<address type=\"drive\" bus=\"0\" controller=\"0\" target=\"0\" unit=\"0\"/>"
            ),
            "{x}"
        );
        // The permanent claim is where it always is.
        assert!(
            x.contains("/var/run/kubevirt-private/vmi-disks/boot/disk.img"),
            "{x}"
        );
    }

    #[test]
    fn a_hotplug_volume_not_ready_has_no_disk() {
        for phase in ["Pending", "Bound", "AttachedToNode", ""] {
            let d = hotplug(
                &format!("  - {{name: boot, target: vda}}\n  - {{name: hp1, phase: \"{phase}\", hotplugVolume: {{}}}}\n  - {{name: hp2, phase: Ready, hotplugVolume: {{}}}}\n"),
                &[],
            )
            .unwrap();
            let targets: Vec<_> = d
                .devices
                .disk
                .iter()
                .map(|d| d.target.dev.as_str())
                .collect();
            // hp1 keeps its name reserved in spec order: vdb is not reused.
            assert_eq!(targets, ["vda", "sda"], "phase {phase:?}");
        }
    }

    #[test]
    fn recorded_targets_are_kept_when_a_disk_before_them_goes() {
        // hp1 was unplugged: hp2 keeps the name the status records, and a
        // new disk takes the first free one.
        let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: d, uid: u1}\nspec:\n  domain:\n    memory: {guest: 1Gi}\n    devices:\n      disks:\n      - {name: boot, disk: {bus: virtio}}\n      - {name: hp2, disk: {bus: virtio}}\n      - {name: hp3, disk: {bus: virtio}}\n      - {name: cd, cdrom: {bus: sata}}\n  volumes:\n  - {name: boot, persistentVolumeClaim: {claimName: b}}\n  - {name: hp2, persistentVolumeClaim: {claimName: c2, hotpluggable: true}}\n  - {name: hp3, persistentVolumeClaim: {claimName: c3, hotpluggable: true}}\nstatus:\n  volumeStatus:\n  - {name: boot, target: vda}\n  - {name: hp2, target: vdc, phase: Ready, hotplugVolume: {}}\n  - {name: hp3, phase: MountedToPod, hotplugVolume: {}}\n";
        let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        let d = convert(&v, &ConvertContext::new(Arch::Amd64, VirtType::Kvm)).unwrap();
        let targets: Vec<_> = d
            .devices
            .disk
            .iter()
            .map(|d| d.target.dev.as_str())
            .collect();
        assert_eq!(targets, ["vda", "vdc", "vdb", "sda"]);
        assert_eq!(super::name_index("vd", "vdc"), Some(2));
        assert_eq!(super::name_index("sd", "sdaa"), Some(26));
        assert_eq!(super::name_index("sd", "vda"), None);
        assert_eq!(super::name_index("vd", "vd1"), None);
    }

    #[test]
    fn pci_address_on_virtio_disks_only() {
        let d = conv(
            "      - {name: a, disk: {bus: virtio, pciAddress: \"0000:81:01.0\"}}\n",
            PVC,
            &[],
        )
        .unwrap();
        let x = d.to_xml().unwrap();
        assert!(x.contains("<address type=\"pci\" domain=\"0x0000\" bus=\"0x81\" slot=\"0x01\" function=\"0x0\"/>"), "{x}");
        let e = conv(
            "      - {name: a, disk: {bus: sata, pciAddress: \"0000:81:01.0\"}}\n",
            PVC,
            &[],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "spec.domain.devices.disks[0].disk.pciAddress: setting a pci address is not allowed for non-virtio bus types, for disk a");
        for bad in [
            "0000:81:20.0",
            "0001:00:01.0",
            "00:01.0",
            "0000:81:01.8",
            "zzzz:81:01.0",
        ] {
            let e = conv(
                &format!("      - {{name: a, disk: {{bus: virtio, pciAddress: \"{bad}\"}}}}\n"),
                PVC,
                &[],
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("is not a PCI address of the form 0000:bb:ss.f"),
                "{bad}: {e}"
            );
        }
    }

    /// KubeVirt admits serials of `[A-Za-z0-9_.+-]` up to 256 characters,
    /// and an empty one is unset: no `<serial>`.
    #[test]
    fn serials_as_kubevirt_admits_them() {
        let d = conv(
            "      - {name: a, serial: \"\", disk: {bus: virtio}}\n",
            PVC,
            &[],
        )
        .unwrap();
        assert_eq!(d.devices.disk[0].serial, None);
        let long = format!("A+b_c.d-{}", "s".repeat(248));
        let d = conv(
            &format!("      - {{name: a, serial: \"{long}\", disk: {{bus: virtio}}}}\n"),
            PVC,
            &[],
        )
        .unwrap();
        let x = d.to_xml().unwrap();
        assert!(x.contains(&format!("<serial>{long}</serial>")), "{x}");
    }

    #[test]
    fn custom_block_sizes() {
        let d = conv("      - {name: a, blockSize: {custom: {logical: 512, physical: 4096}}, disk: {bus: virtio}}\n", PVC, &[]).unwrap();
        let x = d.to_xml().unwrap();
        assert!(
            x.contains("<blockio logical_block_size=\"512\" physical_block_size=\"4096\"/>"),
            "{x}"
        );
        let e = conv("      - {name: a, blockSize: {custom: {logical: 4096, physical: 512}}, disk: {bus: virtio}}\n", PVC, &[]).unwrap_err().to_string();
        assert_eq!(e, "spec.domain.devices.disks[0].blockSize.custom.logical: 4096 must not be larger than the physical block size 512");
        let e = conv("      - {name: a, blockSize: {custom: {logical: 513, physical: 4096}}, disk: {bus: virtio}}\n", PVC, &[]).unwrap_err().to_string();
        assert_eq!(e, "spec.domain.devices.disks[0].blockSize.custom.logical: 513 must be a power of 2 from 512 to 2097152");
        let e = conv(
            "      - {name: a, blockSize: {matchVolume: {}}, disk: {bus: virtio}}\n",
            PVC,
            &[],
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "spec.domain.devices.disks[0].blockSize.matchVolume: block sizes probed from the volume is not supported yet");
    }

    #[test]
    fn lun_with_reservation_on_a_block_volume() {
        let d = conv(
            "      - {name: a, lun: {bus: scsi, reservation: true}}\n",
            PVC,
            &["a"],
        )
        .unwrap();
        let x = d.to_xml().unwrap();
        assert!(x.contains("<disk type=\"block\" device=\"lun\">"), "{x}");
        assert!(x.contains("<source dev=\"/dev/a\">\n        <reservations managed=\"no\">\n          <source type=\"unix\" path=\"/var/run/kubevirt/daemons/pr/pr-helper.sock\" mode=\"client\"/>"), "{x}");
        assert!(x.contains("<target dev=\"sda\" bus=\"scsi\"/>"), "{x}");
        let e = conv("      - {name: a, lun: {bus: scsi}}\n", PVC, &[])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "spec.domain.devices.disks[0].lun: disk \"a\": a lun needs a block-mode persistentVolumeClaim or dataVolume");
        let e = conv("      - {name: a, lun: {}}\n", PVC, &["a"])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "spec.domain.devices.disks[0].lun.bus: disk \"a\": a lun needs the scsi or virtio bus, not sata");
    }
}
