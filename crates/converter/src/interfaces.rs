//! Network interfaces (kubevirt-facts §4.4 and §6.2): every interface
//! that is not `absent` becomes `<interface type='ethernet'>` on the tap
//! device network phase 1 created, `managed='no'`; SR-IOV interfaces
//! become host devices instead ([`crate::sriov`]); the passt binding
//! plugin's becomes its sidecar's `<interface type='user'>`
//! ([`crate::passt`]).
//!
//! Host facts (the tap's name, the pod link's MAC and MTU) come from
//! [`crate::Prepared::interfaces`], filled by the launcher from the
//! phase 1 cache; without them the tap name follows KubeVirt's naming and
//! MAC/MTU are left to libvirt, which is what `virt-launcher convert`
//! shows.

use api::mac::{format_mac, parse_guest_mac};
use api::vmi::{Binding, Interface as ApiInterface, InterfaceModel, InterfaceState};
use api::{Arch, VirtualMachineInstance};
use domain::{
    AcpiIndex, Address, BootOrder, Interface, InterfaceDriver, InterfaceTarget, LinkState, Mac,
    Model, Mtu, Rom,
};
use sha2::{Digest, Sha256};

use crate::{ConvertContext, ConvertError};

/// Most vhost queues KubeVirt configures per NIC.
pub const MAX_QUEUES: u32 = 256;

/// The NIC models ([`InterfaceModel`]) that QEMU's s390x emulator has
/// (`qemu-system-s390x -device help`, QEMU 10.0: no e1000, ne2k_pci,
/// pcnet or rtl8139).
pub const S390X_MODELS: &[InterfaceModel] = &[
    InterfaceModel::E1000e,
    InterfaceModel::Igb,
    InterfaceModel::Virtio,
];

/// What network phase 1 found for one interface (phase 2's host facts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterfaceHost {
    /// Tap device in the pod namespace (`tap0`); empty for passt.
    pub tap: String,
    /// MAC of the pod link, used when the spec sets none (canonical form).
    pub mac: Option<String>,
    /// MTU of the pod link, bytes.
    pub mtu: Option<u32>,
    /// passt binding only: the pod link passt takes its addresses and
    /// routes from, `ovn-udn1` when the pod has it (see
    /// [`crate::passt::OVN_UDN_LINK`]), else `eth0` (also when `None`).
    pub source_dev: Option<String>,
}

/// The pod interface name KubeVirt gives a network: `eth0` for the pod
/// network (and a Multus network marked `default`: pass `true`), `pod` +
/// the first 11 hex digits of SHA-256(network name) for a secondary
/// Multus one (`pkg/network/namescheme`).
pub fn pod_iface_name(network_name: &str, is_pod_network: bool) -> String {
    if is_pod_network {
        return "eth0".into();
    }
    let hash = Sha256::digest(network_name.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("pod{}", &hex[..11])
}

/// The tap KubeVirt's phase 1 creates for a pod interface: `tap0` for
/// `eth0`, else `tap` + the name without its first 3 characters.
pub fn tap_name(pod_iface: &str) -> String {
    if pod_iface == "eth0" {
        "tap0".into()
    } else {
        format!("tap{}", pod_iface.get(3..).unwrap_or_default())
    }
}

/// The bridge phase 1 creates: `k6t-` + the pod interface name without
/// its `pod` prefix.
pub fn bridge_name(pod_iface: &str) -> String {
    format!("k6t-{}", pod_iface.strip_prefix("pod").unwrap_or(pod_iface))
}

/// Parses `dddd:bb:ss.f` (hex) into a PCI `<address>`.
///
/// # Errors
/// [`ConvertError::Invalid`] naming `path` for anything else.
pub fn pci_address(path: &str, text: &str) -> Result<Address, ConvertError> {
    let bad = || {
        ConvertError::invalid(
            path,
            format!("{text:?} is not a PCI address of the form dddd:bb:ss.f"),
        )
    };
    let (dbs, func) = text.split_once('.').ok_or_else(bad)?;
    let parts: Vec<&str> = dbs.split(':').collect();
    let [dom, bus, slot] = parts.as_slice() else {
        return Err(bad());
    };
    let hex = |s: &str, len: usize, max: u32| {
        if s.len() != len || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let v = u32::from_str_radix(s, 16).map_err(|_| bad())?;
        if v > max {
            return Err(bad());
        }
        Ok(format!("{v:#0w$x}", w = len + 2))
    };
    Ok(Address {
        address_type: "pci".into(),
        domain: Some(hex(dom, 4, 0xffff)?),
        bus: Some(hex(bus, 2, 0xff)?),
        slot: Some(hex(slot, 2, 0x1f)?),
        function: Some(hex(func, 1, 7)?),
        ..Address::default()
    })
}

/// A port forwarded to the guest (`interfaces[].ports[]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Port {
    /// `true` for UDP, `false` for TCP.
    pub udp: bool,
    /// Port number, 1–65535.
    pub port: u16,
}

/// Reads `interfaces[].ports[]` (KubeVirt's `Port`: `name`, `protocol`
/// TCP or UDP, case-insensitive, empty = TCP, `port` 1–65535): the
/// masquerade binding's NAT and passt's `<portForward>` forward them.
///
/// # Errors
/// [`ConvertError::Invalid`] naming `path.ports[j].port`, `.protocol` or
/// `.name`: not a port number, another protocol, a name or a
/// protocol/port pair given twice (KubeVirt's admission refuses a
/// duplicate name; a duplicate forward would be ambiguous).
pub fn ports(iface: &ApiInterface, path: &str) -> Result<Vec<Port>, ConvertError> {
    let mut out: Vec<Port> = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (j, p) in iface.ports.iter().enumerate() {
        let at = format!("{path}.ports[{j}]");
        if let Some(name) = p.get("name").and_then(serde_json::Value::as_str) {
            if !name.is_empty() && !names.insert(name) {
                return Err(ConvertError::invalid(
                    format!("{at}.name"),
                    format!("duplicate port name {name:?}"),
                ));
            }
        }
        let port = p
            .get("port")
            .and_then(serde_json::Value::as_u64)
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n != 0)
            .ok_or_else(|| {
                ConvertError::invalid(
                    format!("{at}.port"),
                    format!(
                        "{} is not a port number (1-65535)",
                        p.get("port").map_or("nothing".into(), ToString::to_string)
                    ),
                )
            })?;
        let udp = match p.get("protocol") {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::String(s)) if s.is_empty() || s.eq_ignore_ascii_case("tcp") => {
                false
            }
            Some(serde_json::Value::String(s)) if s.eq_ignore_ascii_case("udp") => true,
            Some(other) => {
                return Err(ConvertError::invalid(
                    format!("{at}.protocol"),
                    format!("{other} is not TCP or UDP"),
                ))
            }
        };
        if out.contains(&Port { udp, port }) {
            return Err(ConvertError::invalid(
                format!("{at}.port"),
                format!("{port}/{} is listed twice", if udp { "UDP" } else { "TCP" }),
            ));
        }
        out.push(Port { udp, port });
    }
    Ok(out)
}

/// Builds the `<interface>` elements, in spec order.
///
/// # Errors
/// [`ConvertError::Invalid`] naming the field for: an interface without
/// a network of its name, duplicate names, more than one binding, a
/// `binding` without a name, the discontinued `passt` field, masquerade
/// or the passt binding on a non-pod network, what the passt binding
/// does not apply (see [`crate::passt::interface`]), an unknown model, a malformed or reserved MAC, a bad PCI
/// address, boot order 0, an `acpiIndex` on an architecture without ACPI
/// (ppc64le, s390x), or a `state` other than up/down/absent.
pub fn convert(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    vcpus: u32,
) -> Result<Vec<Interface>, ConvertError> {
    let dev = &vmi.spec.domain.devices;
    let caps = crate::arch::caps(ctx.arch);
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let multiqueue = dev.network_interface_multiqueue == Some(true);
    let virtio_model = crate::arch::virtio_model(caps, vmi);
    let mut nets = std::collections::BTreeSet::new();
    for (i, n) in vmi.spec.networks.iter().enumerate() {
        if !nets.insert(n.name.as_str()) {
            return Err(ConvertError::invalid(
                format!("spec.networks[{i}].name"),
                format!("duplicate network name {:?}", n.name),
            ));
        }
    }
    // One primary pod link per pod (KubeVirt's admission): two pod
    // networks, two Multus defaults, or both, would need two eth0s.
    let pods = vmi.spec.networks.iter().filter(|n| n.pod.is_some()).count();
    let multus_defaults = vmi
        .spec
        .networks
        .iter()
        .filter(|n| n.multus.as_ref().is_some_and(|m| m.default))
        .count();
    if pods > 1 {
        return Err(ConvertError::invalid(
            "spec.networks",
            "more than one interface is connected to a pod network",
        ));
    }
    if multus_defaults > 1 {
        return Err(ConvertError::invalid(
            "spec.networks",
            "more than one Multus network is marked default",
        ));
    }
    if pods == 1 && multus_defaults == 1 {
        return Err(ConvertError::invalid(
            "spec.networks",
            "a pod network and a default Multus network cannot both be the primary pod link",
        ));
    }
    // The first network of each name, looked up per interface (a map, not
    // a search per interface: issue 19).
    let mut networks = std::collections::BTreeMap::new();
    for n in &vmi.spec.networks {
        networks.entry(n.name.as_str()).or_insert(n);
    }
    for (i, iface) in dev.interfaces.iter().enumerate() {
        let path = format!("spec.domain.devices.interfaces[{i}]");
        if iface.name.is_empty() {
            return Err(ConvertError::invalid(format!("{path}.name"), "required"));
        }
        if !seen.insert(iface.name.as_str()) {
            return Err(ConvertError::invalid(
                format!("{path}.name"),
                format!("duplicate interface name {:?}", iface.name),
            ));
        }
        crate::xml_text(&format!("{path}.name"), &iface.name)?;
        let Some(&net) = networks.get(iface.name.as_str()) else {
            return Err(ConvertError::invalid(
                format!("{path}.name"),
                format!("no spec.networks entry named {:?}", iface.name),
            ));
        };
        ports(iface, &path)?;
        let is_pod = net.pod.is_some();
        if !is_pod && net.multus.is_none() {
            return Err(ConvertError::invalid(
                format!("spec.networks[name={}]", net.name),
                "needs a source: pod or multus",
            ));
        }
        if Binding::ALL
            .iter()
            .filter(|b| iface.has_binding(**b))
            .count()
            > 1
        {
            let names: Vec<&str> = Binding::ALL.iter().map(|b| b.as_str()).collect();
            return Err(ConvertError::invalid(
                path,
                format!("only one of {} may be set", names.join(", ")),
            ));
        }
        if iface.binding.is_some() && iface.plugin_name().is_none() {
            return Err(ConvertError::invalid(
                format!("{path}.binding.name"),
                "required: the name of a binding plugin (passt)",
            ));
        }
        if iface.passt.is_some() {
            // KubeVirt's admission has refused this field since v1.3 ("Passt
            // network binding has been discontinued"); accepting it would run
            // a VMI no cluster admits, so it is refused with its successor.
            return Err(ConvertError::invalid(
                format!("{path}.passt"),
                "the passt field was discontinued in KubeVirt v1.3; use binding: {name: passt}",
            ));
        }
        let passt = crate::passt::is_passt(iface);
        if passt && !is_pod {
            return Err(ConvertError::invalid(
                format!("{path}.binding"),
                "the passt binding is supported for pod network interfaces only",
            ));
        }
        let masquerade = iface.masquerade.is_some();
        if masquerade && !is_pod {
            return Err(ConvertError::invalid(
                format!("{path}.masquerade"),
                "masquerade is only allowed on the pod network",
            ));
        }
        match &iface.state {
            None | Some(InterfaceState::Unset | InterfaceState::Up | InterfaceState::Down) => {}
            Some(InterfaceState::Absent) => continue,
            Some(InterfaceState::Other(other)) => {
                return Err(ConvertError::invalid(
                    format!("{path}.state"),
                    format!("{other:?} is not one of up, down, absent"),
                ))
            }
        }
        if crate::sriov::is_sriov(iface) {
            // A host device, not an <interface>: see crate::sriov.
            continue;
        }
        if passt {
            let model = checked_model(iface, &path, ctx.arch, virtio_model)?;
            out.push(crate::passt::interface(vmi, iface, &path, ctx, model)?);
            continue;
        }
        // A Multus network marked `default` replaces the pod network: its
        // pod link is eth0 (tap0), as KubeVirt's name scheme has it.
        let primary = is_pod || net.multus.as_ref().is_some_and(|m| m.default);
        out.push(one(
            iface,
            &path,
            ctx,
            primary,
            vcpus,
            multiqueue,
            virtio_model,
        )?);
    }
    Ok(out)
}

fn one(
    iface: &ApiInterface,
    path: &str,
    ctx: &ConvertContext,
    primary: bool,
    vcpus: u32,
    multiqueue: bool,
    virtio_model: &str,
) -> Result<Interface, ConvertError> {
    let model_type = checked_model(iface, path, ctx.arch, virtio_model)?;
    let host = ctx.prepared.interfaces.get(&iface.name);
    let mac = match &iface.mac_address {
        Some(text) => Some(format_mac(
            &parse_guest_mac(text, iface.masquerade.is_some())
                .map_err(|e| ConvertError::invalid(format!("{path}.macAddress"), e.to_string()))?,
        )),
        None => host.and_then(|h| h.mac.clone()),
    };
    let tap = match host {
        Some(h) => h.tap.clone(),
        None => tap_name(&pod_iface_name(&iface.name, primary)),
    };
    let virtio = iface
        .model
        .as_ref()
        .is_none_or(|m| *m == InterfaceModel::Virtio);
    // One queue pair per vCPU, as KubeVirt does, on virtio only.
    let queues = (multiqueue && virtio).then(|| vcpus.clamp(1, MAX_QUEUES));
    let boot = match iface.boot_order {
        Some(0) => {
            return Err(ConvertError::invalid(
                format!("{path}.bootOrder"),
                "must be 1 or more",
            ))
        }
        Some(order) => Some(BootOrder { order }),
        None => None,
    };
    let rom = (boot.is_none() && matches!(ctx.arch, Arch::Amd64 | Arch::Arm64 | Arch::Ppc64le))
        .then(|| Rom {
            enabled: "no".into(),
        });
    let address = iface
        .pci_address
        .as_deref()
        .map(|a| pci_address(&format!("{path}.pciAddress"), a))
        .transpose()?;
    if iface.acpi_index.is_some() && !crate::arch::caps(ctx.arch).acpi {
        // libvirt: "ACPI index is only supported for PCI devices" (s390x's
        // ccw NICs); pseries has no ACPI to read an index from either.
        return Err(ConvertError::invalid(
            format!("{path}.acpiIndex"),
            format!("ACPI is not available on {}", ctx.arch),
        ));
    }
    Ok(Interface {
        interface_type: "ethernet".into(),
        mac: mac.map(|address| Mac { address }),
        target: Some(InterfaceTarget {
            dev: tap,
            managed: Some("no".into()),
        }),
        model: Some(Model { model_type }),
        driver: queues.map(|q| InterfaceDriver {
            name: "vhost".into(),
            queues: Some(q),
        }),
        mtu: host.and_then(|h| h.mtu).map(|size| Mtu { size }),
        alias: Some(crate::user_alias(&format!("{path}.name"), &iface.name)?),
        boot,
        rom,
        address,
        acpi: iface.acpi_index.map(|index| AcpiIndex { index }),
        link: (iface.state == Some(InterfaceState::Down)).then(|| LinkState {
            state: "down".into(),
        }),
        ..Interface::default()
    })
}

/// The libvirt model of `iface`: `virtio_model` (the architecture's,
/// transitional when asked) for `virtio` or none, else the spec's.
///
/// # Errors
/// [`ConvertError::Invalid`] naming `path.model` for a model KubeVirt
/// does not know, or one QEMU's s390x emulator lacks.
fn checked_model(
    iface: &ApiInterface,
    path: &str,
    arch: Arch,
    virtio_model: &str,
) -> Result<String, ConvertError> {
    let model = iface.model.as_ref().unwrap_or(&InterfaceModel::Virtio);
    if let InterfaceModel::Other(m) = model {
        return Err(ConvertError::invalid(
            format!("{path}.model"),
            format!("{m:?} is not one of {}", InterfaceModel::choices()),
        ));
    }
    if arch == api::Arch::S390x && !S390X_MODELS.contains(model) {
        // libvirt defines such a domain; QEMU only fails at start.
        let names: Vec<&str> = S390X_MODELS.iter().map(InterfaceModel::as_str).collect();
        return Err(ConvertError::invalid(
            format!("{path}.model"),
            format!(
                "{:?} does not exist on s390x: use one of {}",
                model.as_str(),
                names.join(", ")
            ),
        ));
    }
    Ok(if *model == InterfaceModel::Virtio {
        virtio_model.to_owned()
    } else {
        model.as_str().to_owned()
    })
}
