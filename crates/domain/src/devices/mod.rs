//! `<devices>`: the list of every device kind, and the parts all devices
//! share (alias, guest address, boot order). One module per device kind.

mod chardev;
mod controller;
mod disk;
mod display;
mod hostdev;
mod interface;
mod memdev;
mod misc;

pub use chardev::{
    Channel, ChannelTarget, CharLog, CharSource, Console, ConsoleTarget, Serial, SerialTarget,
};
pub use controller::{Controller, ControllerDriver};
pub use disk::{
    BackingStore, BlockIo, DataStore, Disk, DiskDriver, DiskSource, DiskTarget, DriverIoThread,
    DriverIoThreads, Format, Reservations, ReservationsSource,
};
pub use display::{Graphics, GraphicsListen, Input, Video, VideoModel};
pub use hostdev::{HostDevice, HostDeviceSource};
pub use interface::{
    AcpiIndex, Interface, InterfaceBackend, InterfaceDriver, InterfaceSource, InterfaceTarget,
    LinkState, Mac, Model, Mtu, PortForward, PortRange, Rom,
};
pub use memdev::{MemoryDevice, MemoryDeviceTarget};
pub use misc::{
    BalloonStats, Filesystem, FilesystemDriver, FilesystemSource, FilesystemTarget, MemBalloon,
    RedirDev, Rng, RngBackend, Sound, Tpm, TpmBackend, Vsock, VsockCid, Watchdog,
};

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// `<devices>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Devices {
    /// QEMU binary (libvirt picks one when absent).
    pub emulator: Option<String>,
    /// Disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disk: Vec<Disk>,
    /// Controllers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controller: Vec<Controller>,
    /// Network interfaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interface: Vec<Interface>,
    /// Host devices passed through (SR-IOV VFs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostdev: Vec<HostDevice>,
    /// Serial ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serial: Vec<Serial>,
    /// Consoles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub console: Vec<Console>,
    /// virtio-serial channels (guest agent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channel: Vec<Channel>,
    /// Input devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input: Vec<Input>,
    /// Remote displays.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphics: Vec<Graphics>,
    /// Video adapters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub video: Vec<Video>,
    /// Memory balloon (libvirt adds one unless `model='none'`).
    pub memballoon: Option<MemBalloon>,
    /// Random number generators.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rng: Vec<Rng>,
    /// Shared directories (virtiofs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystem: Vec<Filesystem>,
    /// Watchdogs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watchdog: Vec<Watchdog>,
    /// TPMs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tpm: Vec<Tpm>,
    /// Sound cards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sound: Vec<Sound>,
    /// USB redirection channels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redirdev: Vec<RedirDev>,
    /// VM socket device.
    pub vsock: Option<Vsock>,
    /// Memory devices (KubeVirt's virtio-mem, attached at memory hot-plug).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryDevice>,
}

/// `<boot order='1'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BootOrder {
    /// 1 = first.
    #[serde(rename = "@order")]
    pub order: u32,
}

/// `<alias name='ua-disk0'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Alias {
    /// Alias; user-defined aliases start with `ua-`.
    #[serde(rename = "@name")]
    pub name: String,
}

impl Alias {
    /// The user alias KubeVirt gives a device named `name`: `ua-<name>`.
    pub fn user(name: &str) -> Self {
        Alias {
            name: format!("ua-{name}"),
        }
    }
}

/// `<address type='pci' .../>` or `type='drive'`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Address {
    /// `pci`, `drive`, `ccw` ...; empty (omitted) in a host device's
    /// `<source>` as libvirt writes it back.
    #[serde(rename = "@type", default, skip_serializing_if = "String::is_empty")]
    pub address_type: String,
    /// PCI domain.
    #[serde(rename = "@domain")]
    pub domain: Option<String>,
    /// PCI or drive bus.
    #[serde(rename = "@bus")]
    pub bus: Option<String>,
    /// PCI slot.
    #[serde(rename = "@slot")]
    pub slot: Option<String>,
    /// PCI function.
    #[serde(rename = "@function")]
    pub function: Option<String>,
    /// Drive controller.
    #[serde(rename = "@controller")]
    pub controller: Option<String>,
    /// Drive target.
    #[serde(rename = "@target")]
    pub target: Option<String>,
    /// Drive unit.
    #[serde(rename = "@unit")]
    pub unit: Option<String>,
    /// mdev UUID.
    #[serde(rename = "@uuid", default)]
    pub uuid: Option<String>,
    /// USB device number.
    #[serde(rename = "@device", default)]
    pub device: Option<String>,
    /// CCW channel subsystem id (s390x).
    #[serde(rename = "@cssid", default)]
    pub cssid: Option<String>,
    /// CCW subchannel set id (s390x).
    #[serde(rename = "@ssid", default)]
    pub ssid: Option<String>,
    /// CCW device number (s390x).
    #[serde(rename = "@devno", default)]
    pub devno: Option<String>,
}
