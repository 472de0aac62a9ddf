//! `<disk>`: driver, source, backing store, target, block I/O sizes and
//! persistent reservations.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::{Address, Alias, BootOrder, Empty};

/// `<disk type='file' device='disk'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Disk {
    /// `file` or `block`.
    #[serde(rename = "@type")]
    pub disk_type: String,
    /// `disk`, `cdrom`, `lun`.
    #[serde(rename = "@device")]
    pub device: String,
    /// virtio model (`virtio-non-transitional`).
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// QEMU driver options.
    pub driver: Option<DiskDriver>,
    /// Image or device.
    pub source: Option<DiskSource>,
    /// Backing image of a qcow2 overlay.
    #[serde(rename = "backingStore")]
    pub backing_store: Option<BackingStore>,
    /// Guest device name and bus.
    pub target: DiskTarget,
    /// Serial number.
    pub serial: Option<String>,
    /// Per-device boot order.
    pub boot: Option<BootOrder>,
    /// Read-only.
    pub readonly: Option<Empty>,
    /// Shareable between domains.
    pub shareable: Option<Empty>,
    /// Block sizes.
    pub blockio: Option<BlockIo>,
    /// Alias (`ua-<name>` for user devices).
    pub alias: Option<Alias>,
    /// Guest address.
    pub address: Option<Address>,
}

/// `<driver name='qemu' type='raw' cache='none' .../>` of a disk.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskDriver {
    /// `qemu`.
    #[serde(rename = "@name")]
    pub name: String,
    /// Image format: `raw`, `qcow2`.
    #[serde(rename = "@type")]
    pub format: Option<String>,
    /// `none`, `writethrough`, `writeback`.
    #[serde(rename = "@cache")]
    pub cache: Option<String>,
    /// `native`, `threads`.
    #[serde(rename = "@io")]
    pub io: Option<String>,
    /// `stop`, `ignore`, `report`, `enospace`.
    #[serde(rename = "@error_policy")]
    pub error_policy: Option<String>,
    /// `unmap` / `ignore`.
    #[serde(rename = "@discard")]
    pub discard: Option<String>,
    /// virtio-blk queues.
    #[serde(rename = "@queues")]
    pub queues: Option<u32>,
    /// Dedicated I/O thread.
    #[serde(rename = "@iothread", default)]
    pub iothread: Option<u32>,
    /// `on` to put the device behind the vIOMMU.
    #[serde(rename = "@iommu", default)]
    pub iommu: Option<String>,
    /// Several I/O threads (`supplementalPool`).
    #[serde(default)]
    pub iothreads: Option<DriverIoThreads>,
}

/// `<iothreads><iothread id='1'/>...</iothreads>` of a disk driver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DriverIoThreads {
    /// Threads by id.
    #[serde(default)]
    pub iothread: Vec<DriverIoThread>,
}

/// `<iothread id='1'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DriverIoThread {
    /// I/O thread id (from 1).
    #[serde(rename = "@id")]
    pub id: u32,
}

/// `<source file=.../>` or `<source dev=.../>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskSource {
    /// Image file.
    #[serde(rename = "@file")]
    pub file: Option<String>,
    /// Block device.
    #[serde(rename = "@dev")]
    pub dev: Option<String>,
    /// Volume name (KubeVirt sets it on block PVCs).
    #[serde(rename = "@name")]
    pub name: Option<String>,
    /// SCSI persistent reservations (`lun` disks).
    pub reservations: Option<Reservations>,
    /// `<dataStore>`: the raw image a qcow2 file keeps its guest data in
    /// (qcow2's external data file), so that the qcow2 file holds only
    /// metadata such as persistent dirty bitmaps (KubeVirt's changed block
    /// tracking overlay, `api.DataStore`).
    #[serde(rename = "dataStore")]
    pub data_store: Option<Box<DataStore>>,
}

/// `<dataStore type='file|block'><format type='raw'/><source .../></dataStore>`
/// (libvirt's formatdomain, "dataStore").
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DataStore {
    /// `file` or `block`.
    #[serde(rename = "@type")]
    pub store_type: String,
    /// Format of the data file: always `raw` for KubeVirt.
    pub format: Option<Format>,
    /// Where the data is.
    pub source: Option<DiskSource>,
}

/// `<reservations managed='no'><source type='unix' path=... mode='client'/></reservations>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reservations {
    /// `no`: an external pr-helper serves them.
    #[serde(rename = "@managed")]
    pub managed: String,
    /// The pr-helper's socket.
    pub source: Option<ReservationsSource>,
}

/// `<source type='unix' path=... mode='client'/>` of `<reservations>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReservationsSource {
    /// `unix`.
    #[serde(rename = "@type")]
    pub source_type: String,
    /// Socket path.
    #[serde(rename = "@path")]
    pub path: String,
    /// `client`.
    #[serde(rename = "@mode")]
    pub mode: String,
}

/// `<blockio logical_block_size='512' physical_block_size='4096'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockIo {
    /// Logical block size in bytes.
    #[serde(rename = "@logical_block_size")]
    pub logical_block_size: Option<u32>,
    /// Physical block size in bytes.
    #[serde(rename = "@physical_block_size")]
    pub physical_block_size: Option<u32>,
}

/// `<backingStore type='file'><format type='raw'/><source file=.../></backingStore>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackingStore {
    /// `file` or `block`.
    #[serde(rename = "@type")]
    pub store_type: Option<String>,
    /// Backing image format.
    pub format: Option<Format>,
    /// Backing image location.
    pub source: Option<DiskSource>,
}

/// `<format type='raw'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Format {
    /// `raw`, `qcow2`.
    #[serde(rename = "@type")]
    pub format_type: String,
}

/// `<target dev='vda' bus='virtio'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskTarget {
    /// Guest device name (`vda`, `sda`).
    #[serde(rename = "@dev")]
    pub dev: String,
    /// `virtio`, `sata`, `scsi`, `usb`.
    #[serde(rename = "@bus")]
    pub bus: Option<String>,
    /// CD-ROM tray: `open` / `closed`.
    #[serde(rename = "@tray")]
    pub tray: Option<String>,
}

impl Disk {
    /// The `<disk>` element alone, as libvirt's device calls
    /// (`virDomainAttachDeviceFlags`, `DetachDeviceFlags`) take it.
    ///
    /// # Errors
    /// [`crate::XmlError::Write`] only on a model bug.
    pub fn to_xml(&self) -> Result<String, crate::XmlError> {
        let mut out = String::with_capacity(512);
        let mut ser = quick_xml::se::Serializer::with_root(&mut out, Some("disk"))
            .map_err(crate::XmlError::from)?;
        ser.indent(' ', 2);
        self.serialize(ser)?;
        out.push('\n');
        Ok(out)
    }
}

#[cfg(test)]
mod disk_xml_tests {
    use super::*;

    #[test]
    fn a_disk_alone_is_a_disk_element() {
        let d = Disk {
            disk_type: "file".into(),
            device: "disk".into(),
            source: Some(DiskSource {
                file: Some("/var/run/kubevirt/hotplug-disks/a&b.img".into()),
                ..DiskSource::default()
            }),
            target: DiskTarget {
                dev: "vdb".into(),
                bus: Some("virtio".into()),
                tray: None,
            },
            alias: Some(Alias::user("hp")),
            ..Disk::default()
        };
        let x = d.to_xml().unwrap();
        assert!(x.starts_with("<disk type=\"file\" device=\"disk\">"), "{x}");
        assert!(
            x.contains("file=\"/var/run/kubevirt/hotplug-disks/a&amp;b.img\""),
            "{x}"
        );
        assert!(x.contains("<alias name=\"ua-hp\"/>"), "{x}");
        assert!(x.trim_end().ends_with("</disk>"), "{x}");
    }
}
