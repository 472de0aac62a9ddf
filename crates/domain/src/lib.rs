//! The libvirt domain XML model (<https://libvirt.org/formatdomain.html>),
//! the subset virt-launcher writes and reads back.
//!
//! Types serialise with `quick-xml`'s serde support: a field renamed `@x` is
//! the attribute `x`, `$text` is character data, every other field is a child
//! element. All text is escaped by the serialiser. Every `Option` field is
//! omitted when `None` (`serde_with::skip_serializing_none`), and unknown
//! elements and attributes are ignored when parsing libvirt's own output.
//!
//! One module per part of `<domain>`, every type re-exported here
//! (`domain::Disk`): [`Domain`] itself with its XML reading and writing in
//! this file, then `metadata`, `memory`, `cpu` (vCPUs, tuning, NUMA, CPU
//! model), `os` (boot, firmware, SMBIOS), `features`, `clock`, and
//! `devices` with one module per device kind (`disk`, `interface`,
//! `hostdev`, `controller`, `chardev`, `display`, `misc`).

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

mod backup;
mod clock;
mod cpu;
mod devices;
mod features;
mod memory;
mod metadata;
mod os;

pub use backup::{
    BackupDisk, BackupDisks, BackupDriver, BackupServer, CheckpointDisk, CheckpointDisks,
    CheckpointParent, DomainBackup, DomainCheckpoint, FileRef,
};
pub use clock::{Clock, Timer};
pub use cpu::{
    Cpu, CpuFeature, CpuNuma, CpuPin, CpuTopology, CpuTune, EmulatorPin, IoThreadPin, MemNode,
    NumaCell, NumaTune, NumaTuneMemory, Vcpu, VcpuState, Vcpus,
};
pub use devices::{
    AcpiIndex, Address, Alias, BackingStore, BalloonStats, BlockIo, BootOrder, Channel,
    ChannelTarget, CharLog, CharSource, Console, ConsoleTarget, Controller, ControllerDriver,
    DataStore, Devices, Disk, DiskDriver, DiskSource, DiskTarget, DriverIoThread, DriverIoThreads,
    Filesystem, FilesystemDriver, FilesystemSource, FilesystemTarget, Format, Graphics,
    GraphicsListen, HostDevice, HostDeviceSource, Input, Interface, InterfaceBackend,
    InterfaceDriver, InterfaceSource, InterfaceTarget, LinkState, Mac, MemBalloon, MemoryDevice,
    MemoryDeviceTarget, Model, Mtu, PortForward, PortRange, RedirDev, Reservations,
    ReservationsSource, Rng, RngBackend, Rom, Serial, SerialTarget, Sound, Tpm, TpmBackend, Video,
    VideoModel, Vsock, VsockCid, Watchdog,
};
pub use features::{
    FeatureState, Features, HyperV, HyperVSpinlocks, HyperVStimer, HyperVVendorId, KvmFeatures,
};
pub use memory::{
    HugePage, Hugepages, MaxMemory, MemoryAccess, MemoryAllocation, MemoryBacking, MemorySource,
    MemoryValue,
};
pub use metadata::{GracePeriodMetadata, KubeVirtMetadata, Metadata};
pub use os::{
    BiosOptions, BootMenu, Loader, Nvram, Os, OsBoot, OsType, Smbios, SysInfo, SysInfoEntries,
    SysInfoEntry,
};

/// Why XML could not be produced or read.
#[derive(Debug, thiserror::Error)]
pub enum XmlError {
    /// Serialisation failed (a model bug, not an input problem).
    #[error("cannot write domain XML: {0}")]
    Write(#[from] quick_xml::SeError),
    /// libvirt's XML did not match the model.
    #[error("cannot read domain XML: {0}")]
    Read(#[from] quick_xml::DeError),
}

/// An element with no content and no attributes (`<acpi/>`, `<readonly/>`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// `<domain>`: the root element.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "domain")]
pub struct Domain {
    /// Hypervisor: `kvm`, or `qemu` for TCG emulation.
    #[serde(rename = "@type")]
    pub domain_type: String,
    /// `http://libvirt.org/schemas/domain/qemu/1.0` when `qemu:` elements are used.
    #[serde(rename = "@xmlns:qemu")]
    pub xmlns_qemu: Option<String>,
    /// Domain name, `<namespace>_<name>` for a VMI.
    pub name: String,
    /// Domain UUID (the VMI's firmware UUID).
    pub uuid: Option<String>,
    /// Application metadata (`<kubevirt xmlns="http://kubevirt.io">`).
    pub metadata: Option<Metadata>,
    /// Memory hot-plug ceiling (`<maxMemory unit='b' slots='0'>`).
    #[serde(rename = "maxMemory")]
    pub max_memory: Option<MaxMemory>,
    /// Maximum memory at boot (`unit='b'` as KubeVirt writes it).
    pub memory: MemoryValue,
    /// Current balloon target.
    #[serde(rename = "currentMemory")]
    pub current_memory: Option<MemoryValue>,
    /// Hugepages, memfd and shared memory.
    #[serde(rename = "memoryBacking")]
    pub memory_backing: Option<MemoryBacking>,
    /// vCPU count.
    pub vcpu: Vcpu,
    /// Per-vCPU hot-plug state (CPU hot-plug).
    pub vcpus: Option<Vcpus>,
    /// Number of I/O threads.
    pub iothreads: Option<u32>,
    /// vCPU, emulator and I/O thread pinning.
    pub cputune: Option<CpuTune>,
    /// Host NUMA memory policy.
    pub numatune: Option<NumaTune>,
    /// SMBIOS information.
    pub sysinfo: Option<SysInfo>,
    /// Boot configuration.
    pub os: Os,
    /// Machine features.
    pub features: Option<Features>,
    /// CPU model and topology.
    pub cpu: Option<Cpu>,
    /// Guest clock.
    pub clock: Option<Clock>,
    /// Devices.
    pub devices: Devices,
    /// Extra QEMU arguments (`<qemu:commandline>`, libvirt's QEMU
    /// namespace; needs [`Domain::xmlns_qemu`]). KubeVirt writes it only
    /// for the SeaBIOS debug console (see [`QEMU_XMLNS`]). quick-xml's
    /// reader matches element names without their prefix, hence the two
    /// spellings.
    #[serde(rename(serialize = "qemu:commandline", deserialize = "commandline"))]
    pub qemu_commandline: Option<QemuCommandline>,
}

/// libvirt's QEMU XML namespace, the value of `xmlns:qemu` on `<domain>`
/// when [`Domain::qemu_commandline`] is used.
pub const QEMU_XMLNS: &str = "http://libvirt.org/schemas/domain/qemu/1.0";

/// `<qemu:commandline>`: arguments appended to QEMU's command line, in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QemuCommandline {
    /// `<qemu:arg value='...'/>`, one per argument.
    #[serde(rename(serialize = "qemu:arg", deserialize = "arg"), default)]
    pub arg: Vec<QemuArg>,
}

/// `<qemu:arg value='...'/>`: one QEMU argument.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QemuArg {
    /// The argument, verbatim.
    #[serde(rename = "@value")]
    pub value: String,
}

/// `xml` (quick-xml's output) with the leading and trailing whitespace of
/// every text value written as character references (`&#32;`, `&#9;`,
/// `&#10;`, `&#13;`). quick-xml's deserializer trims the edges of text
/// before it decodes references, unconditionally (0.37), so a value such as
/// an SMBIOS entry `"ACME "` would otherwise read back as `"ACME"`; libvirt
/// reads both forms as the same characters. Every literal `>` in quick-xml's
/// output ends a tag (it escapes `>` in attribute values and text), so a
/// text value is what lies between a `>` and the next `<`; runs made only of
/// whitespace are the indentation and are left alone. Hand-written because
/// no option of quick-xml does this.
fn keep_edge_whitespace(xml: &str) -> String {
    fn reference(c: char) -> Option<&'static str> {
        match c {
            ' ' => Some("&#32;"),
            '\t' => Some("&#9;"),
            '\n' => Some("&#10;"),
            '\r' => Some("&#13;"),
            _ => None,
        }
    }
    let mut out = String::with_capacity(xml.len());
    let mut rest = xml;
    while let Some(gt) = rest.find('>') {
        out.push_str(&rest[..=gt]);
        rest = &rest[gt + 1..];
        let end = rest.find('<').unwrap_or(rest.len());
        let text = &rest[..end];
        let body = text.trim_matches(|c| reference(c).is_some());
        if body.is_empty() {
            out.push_str(text);
        } else {
            let lead =
                &text[..text.len() - text.trim_start_matches(|c| reference(c).is_some()).len()];
            let trail = &text[text.trim_end_matches(|c| reference(c).is_some()).len()..];
            lead.chars()
                .filter_map(reference)
                .for_each(|r| out.push_str(r));
            out.push_str(body);
            trail
                .chars()
                .filter_map(reference)
                .for_each(|r| out.push_str(r));
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

impl Domain {
    /// The domain as indented XML text, all values escaped.
    ///
    /// # Errors
    /// [`XmlError::Write`] only on a model bug (quick-xml cannot represent a value).
    pub fn to_xml(&self) -> Result<String, XmlError> {
        let mut out = String::with_capacity(4096);
        let mut ser = quick_xml::se::Serializer::new(&mut out);
        ser.indent(' ', 2);
        self.serialize(ser)?;
        let mut out = keep_edge_whitespace(&out);
        out.push('\n');
        Ok(out)
    }

    /// Parses libvirt's XML (`virsh dumpxml`, `virDomainGetXMLDesc`).
    ///
    /// # Errors
    /// [`XmlError::Read`] when the text is not XML or lacks required elements.
    pub fn from_xml(xml: &str) -> Result<Domain, XmlError> {
        Ok(quick_xml::de::from_str(xml)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_with_whitespace_at_its_edges_reads_back_the_same() {
        let xml = "<a>\n  <b> x y\t</b>\n  <c v=\"1\">z</c>\n</a>";
        assert_eq!(
            keep_edge_whitespace(xml),
            "<a>\n  <b>&#32;x y&#9;</b>\n  <c v=\"1\">z</c>\n</a>"
        );
    }

    #[test]
    fn none_fields_are_omitted_and_text_is_escaped() {
        let d = Domain {
            domain_type: "kvm".into(),
            name: "ns_a<b>&'\"".into(),
            memory: MemoryValue {
                unit: "b".into(),
                value: 134_217_728,
            },
            vcpu: Vcpu {
                placement: Some("static".into()),
                current: None,
                count: 1,
            },
            os: Os {
                os_type: OsType {
                    arch: Some("x86_64".into()),
                    machine: Some("q35".into()),
                    os: "hvm".into(),
                },
                cmdline: Some("console=ttyS0 x=\"<y>\"".into()),
                ..Os::default()
            },
            ..Domain::default()
        };
        let xml = d.to_xml().unwrap();
        assert!(xml.contains("<name>ns_a&lt;b&gt;&amp;'\"</name>"), "{xml}");
        assert!(
            xml.contains("<memory unit=\"b\">134217728</memory>"),
            "{xml}"
        );
        assert!(
            xml.contains("<cmdline>console=ttyS0 x=\"&lt;y&gt;\"</cmdline>"),
            "{xml}"
        );
        assert!(!xml.contains("uuid"), "{xml}");
        assert!(!xml.contains("features"), "{xml}");
        assert!(!xml.contains("readonly"), "{xml}");
        let back = Domain::from_xml(&xml).unwrap();
        assert_eq!(back, d);
    }

    /// An SR-IOV hostdev as the converter writes it: KubeVirt's attributes,
    /// the host address in `<source>` (no `type`: libvirt's schema has
    /// none there), and a round trip
    /// that keeps every field; libvirt's read-back form (no `type` in the
    /// source address) parses too and is written back without `type=""`.
    #[test]
    fn sriov_hostdev_xml_both_ways() {
        let pci = |bus: &str, slot: &str, function: &str| Address {
            address_type: "pci".into(),
            domain: Some("0x0000".into()),
            bus: Some(bus.into()),
            slot: Some(slot.into()),
            function: Some(function.into()),
            ..Address::default()
        };
        let h = HostDevice {
            mode: Some("subsystem".into()),
            hostdev_type: "pci".into(),
            managed: Some("no".into()),
            source: HostDeviceSource {
                address: Some(Address {
                    address_type: String::new(),
                    ..pci("0x81", "0x11", "0x1")
                }),
            },
            boot: Some(BootOrder { order: 3 }),
            alias: Some(Alias::user("sriov-red")),
            address: Some(pci("0x07", "0x00", "0x0")),
            ..HostDevice::default()
        };
        let d = Domain {
            domain_type: "kvm".into(),
            name: "a".into(),
            memory: MemoryValue {
                unit: "b".into(),
                value: 1 << 27,
            },
            vcpu: Vcpu {
                placement: None,
                current: None,
                count: 1,
            },
            os: Os {
                os_type: OsType {
                    os: "hvm".into(),
                    ..OsType::default()
                },
                ..Os::default()
            },
            devices: Devices {
                hostdev: vec![h],
                ..Devices::default()
            },
            ..Domain::default()
        };
        let xml = d.to_xml().unwrap();
        for want in [
            r#"<hostdev mode="subsystem" type="pci" managed="no">"#,
            "<source>\n        <address domain=\"0x0000\" bus=\"0x81\" slot=\"0x11\" function=\"0x1\"/>\n      </source>",
            r#"<boot order="3"/>"#,
            r#"<alias name="ua-sriov-red"/>"#,
            r#"<address type="pci" domain="0x0000" bus="0x07" slot="0x00" function="0x0"/>"#,
        ] {
            assert!(xml.contains(want), "{want} not in {xml}");
        }
        for absent in ["model=", "display=", "ramfb="] {
            assert!(!xml.contains(absent), "{absent} in {xml}");
        }
        assert_eq!(Domain::from_xml(&xml).unwrap(), d);

        let libvirt = "<domain type='kvm'><name>a</name><memory unit='KiB'>1</memory><vcpu>1</vcpu>\
            <os><type>hvm</type></os><devices><hostdev mode='subsystem' type='pci' managed='no'>\
            <driver name='vfio'/><source><address domain='0x0000' bus='0x81' slot='0x11' function='0x1'/></source>\
            <alias name='ua-sriov-red'/></hostdev></devices></domain>";
        let back = Domain::from_xml(libvirt).unwrap();
        let src = back.devices.hostdev[0].source.address.as_ref().unwrap();
        assert_eq!(src.address_type, "");
        assert_eq!(src.bus.as_deref(), Some("0x81"));
        let again = back.to_xml().unwrap();
        assert!(
            again.contains(r#"<address domain="0x0000" bus="0x81" slot="0x11" function="0x1"/>"#),
            "{again}"
        );
    }

    #[test]
    fn qemu_commandline_round_trips_after_the_devices() {
        let plain = r#"<domain type='qemu'><name>default_vmi</name><memory unit='b'>134217728</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices/></domain>"#;
        let mut dom = Domain::from_xml(plain).unwrap();
        assert_eq!(dom.qemu_commandline, None);
        dom.xmlns_qemu = Some(QEMU_XMLNS.into());
        dom.qemu_commandline = Some(QemuCommandline {
            arg: vec![
                QemuArg {
                    value: "-device".into(),
                },
                QemuArg {
                    value: "isa-debugcon,iobase=0x402".into(),
                },
            ],
        });
        let xml = dom.to_xml().unwrap();
        assert!(
            xml.contains(&format!(
                "<domain type=\"qemu\" xmlns:qemu=\"{QEMU_XMLNS}\">"
            )),
            "{xml}"
        );
        let devices = xml.find("<devices").unwrap();
        let cmdline = xml.find("<qemu:commandline>").unwrap();
        assert!(devices < cmdline, "{xml}");
        assert!(
            xml.contains("<qemu:arg value=\"isa-debugcon,iobase=0x402\"/>"),
            "{xml}"
        );
        assert_eq!(Domain::from_xml(&xml).unwrap(), dom);
    }

    #[test]
    fn reads_libvirt_output_with_unknown_parts() {
        let xml = r#"<domain type='kvm' id='3' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>default_vmi</name>
  <uuid>5d307ca9-b3ef-428c-8861-06e72d69f223</uuid>
  <metadata><kubevirt xmlns="http://kubevirt.io"><uid>abc</uid><graceperiod><deletionGracePeriodSeconds>30</deletionGracePeriodSeconds></graceperiod></kubevirt></metadata>
  <memory unit='KiB'>131072</memory>
  <currentMemory unit='KiB'>131072</currentMemory>
  <vcpu placement='static'>1</vcpu>
  <resource><partition>/machine</partition></resource>
  <os><type arch='x86_64' machine='pc-q35-10.0'>hvm</type><boot dev='hd'/></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='/a' index='1'/><target dev='vda' bus='virtio'/><alias name='ua-root'/><address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></disk>
    <channel type='unix'><source mode='bind' path='/x'/><target type='virtio' name='org.qemu.guest_agent.0' state='connected'/></channel>
  </devices>
</domain>"#;
        let d = Domain::from_xml(xml).unwrap();
        assert_eq!(d.name, "default_vmi");
        assert_eq!(d.memory.bytes(), Some(128 << 20));
        assert_eq!(d.metadata.unwrap().kubevirt.unwrap().uid, "abc");
        assert_eq!(d.devices.disk[0].alias.as_ref().unwrap().name, "ua-root");
        assert_eq!(
            d.devices.channel[0].target.state.as_deref(),
            Some("connected")
        );
    }
}
