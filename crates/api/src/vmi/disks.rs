//! `spec.domain.devices.disks[]`: targets, buses, cache, I/O and error modes.

use serde::{Deserialize, Serialize};

use super::{FeatureState, Tray};

/// Disk bus (`disks[].disk.bus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum Bus {
    /// virtio-blk (`vdX`).
    Virtio,
    /// AHCI (`sdX`).
    Sata,
    /// virtio-scsi (`sdX`).
    Scsi,
    /// USB storage (`sdX`).
    Usb,
}

impl Bus {
    /// The name libvirt uses in `<target bus=...>`.
    pub fn as_str(self) -> &'static str {
        match self {
            Bus::Virtio => "virtio",
            Bus::Sata => "sata",
            Bus::Scsi => "scsi",
            Bus::Usb => "usb",
        }
    }
}

/// `disks[].cache`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// O_DIRECT, no host page cache.
    None,
    /// Host page cache, writes synced.
    Writethrough,
    /// Host page cache, writes not synced.
    Writeback,
}

/// `disks[].io`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum IoMode {
    /// Linux AIO.
    Native,
    /// Thread pool.
    Threads,
}

/// `disks[].errorPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum ErrorPolicy {
    /// Pause the guest on I/O error (KubeVirt's default).
    Stop,
    /// Ignore errors.
    Ignore,
    /// Report errors to the guest.
    Report,
    /// Pause on ENOSPC only.
    Enospace,
}

/// A `spec.domain.devices.disks[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    /// Name of the volume this disk exposes.
    pub name: String,
    /// Attach as a disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskTarget>,
    /// Attach as a SCSI LUN (block volumes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lun: Option<DiskTarget>,
    /// Attach as a CD-ROM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdrom: Option<CdromTarget>,
    /// Boot order (1 = first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_order: Option<u32>,
    /// Serial number shown to the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// Host cache mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheMode>,
    /// I/O mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoMode>,
    /// I/O error policy; default `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_policy: Option<ErrorPolicy>,
    /// Own I/O thread.
    #[serde(
        rename = "dedicatedIOThread",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub dedicated_io_thread: Option<bool>,
    /// Shared between VMs; not implemented yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shareable: Option<bool>,
    /// Device tag for cloud-init metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Block sizes shown to the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<BlockSize>,
}

/// `disks[].disk` / `disks[].lun`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DiskTarget {
    /// Bus; defaulted per architecture when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<Bus>,
    /// Read-only.
    #[serde(default)]
    pub readonly: bool,
    /// Guest PCI address `dddd:bb:ss.f` (virtio only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
    /// SCSI persistent reservation through the pr-helper (`lun` only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reservation: bool,
}

/// `disks[].blockSize`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct BlockSize {
    /// Fixed sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<CustomBlockSize>,
    /// Sizes probed from the volume (`{enabled: true}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_volume: Option<FeatureState>,
}

/// `blockSize.custom`, in bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct CustomBlockSize {
    /// Logical block size.
    #[serde(default)]
    pub logical: u32,
    /// Physical block size.
    #[serde(default)]
    pub physical: u32,
}

/// `disks[].cdrom`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct CdromTarget {
    /// Bus; defaulted per architecture when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<Bus>,
    /// Read-only; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    /// `open` or `closed` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tray: Option<Tray>,
}
