//! `<interface>`: tap (`ethernet`) and passt (`user`) NICs.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::{Address, Alias, BootOrder};

/// `<interface>`: `type='ethernet'`, a NIC on a tap device that network
/// phase 1 created (`managed='no'`), or `type='user'` with a passt
/// backend (KubeVirt's passt binding: libvirt starts `passt` in the pod's
/// network namespace and QEMU talks to it over a Unix socket).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interface {
    /// `ethernet` or `user`.
    #[serde(rename = "@type")]
    pub interface_type: String,
    /// Host link a `user` interface's passt takes addresses and routes
    /// from (`<source dev='eth0'/>`).
    pub source: Option<InterfaceSource>,
    /// Guest MAC.
    pub mac: Option<Mac>,
    /// Host tap device.
    pub target: Option<InterfaceTarget>,
    /// NIC model.
    pub model: Option<Model>,
    /// vhost driver and queues.
    pub driver: Option<InterfaceDriver>,
    /// MTU the guest sees.
    pub mtu: Option<Mtu>,
    /// Alias (`ua-<name>`).
    pub alias: Option<Alias>,
    /// Per-device boot order.
    pub boot: Option<BootOrder>,
    /// Option ROM (`enabled='no'` when the NIC is not a boot device).
    pub rom: Option<Rom>,
    /// Guest PCI address.
    pub address: Option<Address>,
    /// ACPI index.
    pub acpi: Option<AcpiIndex>,
    /// Link state.
    pub link: Option<LinkState>,
    /// User-mode backend (`<backend type='passt' logFile='...'/>`).
    pub backend: Option<InterfaceBackend>,
    /// Ports passt forwards to the guest, one element per protocol.
    #[serde(rename = "portForward", default, skip_serializing_if = "Vec::is_empty")]
    pub port_forward: Vec<PortForward>,
}

/// `<source dev='eth0'/>` of a `user` interface.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceSource {
    /// Host link name.
    #[serde(rename = "@dev")]
    pub dev: Option<String>,
}

/// `<backend type='passt' logFile='/var/run/kubevirt/passt.log'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceBackend {
    /// `passt` (libvirt's default for `user` is QEMU's slirp).
    #[serde(rename = "@type")]
    pub backend_type: Option<String>,
    /// File passt logs to (its `--log-file`).
    #[serde(rename = "@logFile")]
    pub log_file: Option<String>,
}

/// `<portForward proto='tcp' dev='eth0'>`: libvirt turns each into one
/// `--tcp-ports`/`--udp-ports` option of passt (no `<range>`: `all`).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortForward {
    /// `tcp` or `udp`.
    #[serde(rename = "@proto")]
    pub proto: String,
    /// Host address to bind (any when absent).
    #[serde(rename = "@address")]
    pub address: Option<String>,
    /// Host link to bind.
    #[serde(rename = "@dev")]
    pub dev: Option<String>,
    /// Ports or port ranges; none means every port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub range: Vec<PortRange>,
}

/// `<range start='8080'/>`, `<range start='15000' exclude='yes'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortRange {
    /// First port.
    #[serde(rename = "@start")]
    pub start: u16,
    /// Last port of a range.
    #[serde(rename = "@end")]
    pub end: Option<u16>,
    /// Guest port the first one maps to.
    #[serde(rename = "@to")]
    pub to: Option<u16>,
    /// `yes`: these ports are not forwarded.
    #[serde(rename = "@exclude")]
    pub exclude: Option<String>,
}

/// `<mac address='02:00:00:00:00:01'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mac {
    /// Lower-case, colon-separated.
    #[serde(rename = "@address")]
    pub address: String,
}

/// `<target dev='tap0' managed='no'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceTarget {
    /// Tap name.
    #[serde(rename = "@dev")]
    pub dev: String,
    /// `no`: libvirt uses the existing tap and does not delete it.
    #[serde(rename = "@managed")]
    pub managed: Option<String>,
}

/// `<model type='virtio-non-transitional'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// Model name.
    #[serde(rename = "@type")]
    pub model_type: String,
}

/// `<driver name='vhost' queues='4'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceDriver {
    /// `vhost`.
    #[serde(rename = "@name")]
    pub name: String,
    /// Queue pairs.
    #[serde(rename = "@queues")]
    pub queues: Option<u32>,
}

/// `<mtu size='1450'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mtu {
    /// Bytes.
    #[serde(rename = "@size")]
    pub size: u32,
}

/// `<rom enabled='no'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rom {
    /// `yes` / `no`.
    #[serde(rename = "@enabled")]
    pub enabled: String,
}

/// `<acpi index='1'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AcpiIndex {
    /// Index (guest NIC name `eno<N>`).
    #[serde(rename = "@index")]
    pub index: u32,
}

/// `<link state='down'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkState {
    /// `up` / `down`.
    #[serde(rename = "@state")]
    pub state: String,
}

impl Interface {
    /// The `<interface>` element alone, as libvirt's device calls
    /// (`virDomainUpdateDeviceFlags`, `AttachDeviceFlags`) take it.
    ///
    /// # Errors
    /// [`crate::XmlError::Write`] only on a model bug.
    pub fn to_xml(&self) -> Result<String, crate::XmlError> {
        let mut out = String::with_capacity(512);
        let ser = quick_xml::se::Serializer::with_root(&mut out, Some("interface"))
            .map_err(crate::XmlError::from)?;
        self.serialize(ser)?;
        Ok(out)
    }

    /// The link state the guest sees: `<link state>`, `up` without one.
    pub fn link_state(&self) -> &str {
        self.link.as_ref().map_or("up", |l| l.state.as_str())
    }
}
