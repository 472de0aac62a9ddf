//! `spec.networks[]` and `spec.domain.devices.interfaces[]`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{InterfaceModel, InterfaceState};

/// `spec.networks[]`: where an interface is connected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// Name the interface refers to.
    pub name: String,
    /// The pod's own network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodNetwork>,
    /// A Multus secondary network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multus: Option<MultusNetwork>,
}

/// `networks[].pod`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct PodNetwork {
    /// Masquerade IPv4 CIDR; default `10.0.2.0/24`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "vmNetworkCIDR")]
    pub vm_network_cidr: Option<String>,
    /// Masquerade IPv6 CIDR; default `fd10:0:2::/120`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "vmIPv6NetworkCIDR")]
    pub vm_ipv6_network_cidr: Option<String>,
}

/// `networks[].multus`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct MultusNetwork {
    /// `[namespace/]name` of the NetworkAttachmentDefinition.
    pub network_name: String,
    /// Replaces the pod network.
    #[serde(default)]
    pub default: bool,
}

/// `spec.domain.devices.interfaces[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    /// Name of the network it connects to (and of the alias `ua-<name>`).
    pub name: String,
    /// NIC model: `virtio` (default), `e1000`, `e1000e`, `igb`, `ne2k_pci`,
    /// `pcnet`, `rtl8139`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<InterfaceModel>,
    /// Bridge binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub bridge: Option<Value>,
    /// Masquerade (NAT) binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub masquerade: Option<Value>,
    /// SR-IOV binding: the interface is a PCI host device (a VF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub sriov: Option<Value>,
    /// Slirp binding (removed upstream; refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub slirp: Option<Value>,
    /// Core passt binding, removed in KubeVirt v1.3 (refused, naming the
    /// `binding: {name: passt}` plugin that replaces it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub passt: Option<Value>,
    /// macvtap binding (refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub macvtap: Option<Value>,
    /// Network binding plugin (`{name: passt}`; other names are refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub binding: Option<Value>,
    /// Ports forwarded by masquerade (programmed by phase 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::vec_value))]
    pub ports: Vec<Value>,
    /// Guest MAC (`de:ad:00:00:be:af`, `DE-AD-00-00-BE-AF`, `dead.0000.beaf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    /// Boot order (1 = first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_order: Option<u32>,
    /// Guest PCI address `dddd:bb:ss.f`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
    /// DHCP extra options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp_options: Option<DhcpOptions>,
    /// Device tag for cloud-init metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// ACPI index (guest NIC naming).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi_index: Option<u32>,
    /// `up`, `down` or `absent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<InterfaceState>,
}

/// The binding method of an interface: which of its binding fields is set
/// (KubeVirt `InterfaceBindingMethod`, and `binding` for a plugin).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binding {
    /// `bridge`.
    Bridge,
    /// `masquerade` (NAT).
    Masquerade,
    /// `sriov`: a PCI host device (a VF).
    Sriov,
    /// `slirp` (removed upstream).
    Slirp,
    /// `passt`, the core binding removed in KubeVirt v1.3.
    Passt,
    /// `macvtap`.
    Macvtap,
    /// `binding`: a network binding plugin (`{name: passt}`).
    Plugin,
}

impl Binding {
    /// Every binding, in the order of KubeVirt's "only one of" message.
    pub const ALL: [Binding; 7] = [
        Binding::Bridge,
        Binding::Masquerade,
        Binding::Sriov,
        Binding::Slirp,
        Binding::Passt,
        Binding::Macvtap,
        Binding::Plugin,
    ];

    /// The field's name (`masquerade`, ..., `binding`).
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::Bridge => "bridge",
            Binding::Masquerade => "masquerade",
            Binding::Sriov => "sriov",
            Binding::Slirp => "slirp",
            Binding::Passt => "passt",
            Binding::Macvtap => "macvtap",
            Binding::Plugin => "binding",
        }
    }
}

impl Interface {
    /// Whether binding `b`'s field is set.
    pub fn has_binding(&self, b: Binding) -> bool {
        match b {
            Binding::Bridge => self.bridge.is_some(),
            Binding::Masquerade => self.masquerade.is_some(),
            Binding::Sriov => self.sriov.is_some(),
            Binding::Slirp => self.slirp.is_some(),
            Binding::Passt => self.passt.is_some(),
            Binding::Macvtap => self.macvtap.is_some(),
            Binding::Plugin => self.binding.is_some(),
        }
    }

    /// The interface's binding (masquerade first, then bridge, sriov,
    /// slirp, passt, macvtap, a plugin, when several are set, which the
    /// converter refuses), or `None` when no binding is set.
    pub fn binding_kind(&self) -> Option<Binding> {
        [
            Binding::Masquerade,
            Binding::Bridge,
            Binding::Sriov,
            Binding::Slirp,
            Binding::Passt,
            Binding::Macvtap,
            Binding::Plugin,
        ]
        .into_iter()
        .find(|b| self.has_binding(*b))
    }

    /// The binding's KubeVirt name (`masquerade`, `bridge`, ...), or
    /// `None` when no binding is set ([`Interface::binding_kind`]).
    pub fn binding_name(&self) -> Option<&'static str> {
        self.binding_kind().map(Binding::as_str)
    }

    /// The link state: `state`, `up` when absent or empty.
    pub fn link_state(&self) -> &InterfaceState {
        match &self.state {
            None | Some(InterfaceState::Unset) => &InterfaceState::Up,
            Some(s) => s,
        }
    }

    /// `state: absent`: the interface is not attached to the domain.
    pub fn is_absent(&self) -> bool {
        self.state == Some(InterfaceState::Absent)
    }

    /// The binding plugin's name (`binding: {name: passt}` → `passt`), or
    /// `None` when `binding` is absent or has no string `name`.
    pub fn plugin_name(&self) -> Option<&str> {
        self.binding.as_ref()?.get("name")?.as_str()
    }
}

/// `interfaces[].dhcpOptions`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DhcpOptions {
    /// Option 67.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_file_name: Option<String>,
    /// Option 66.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tftp_server_name: Option<String>,
    /// Option 42, IPv4 addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ntp_servers: Vec<String>,
    /// Options 224–254.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_options: Vec<DhcpPrivateOption>,
}

/// `dhcpOptions.privateOptions[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DhcpPrivateOption {
    /// Option code, 224–254.
    pub option: i64,
    /// Value, sent as its bytes.
    pub value: String,
}
