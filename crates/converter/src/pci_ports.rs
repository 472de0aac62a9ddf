//! The free PCIe root ports KubeVirt reserves for hot-plug (KubeVirt v1.6.6
//! `virtwrap/manager.go`, at define time; facts section 4.6).
//!
//! After the domain is defined, libvirt has given every PCI device a
//! `pcie-root-port` of its own. KubeVirt then appends empty ports so that a
//! hot-plugged disk or NIC finds one: 8 root ports in total for guests with
//! up to 2 GiB of memory (at least 3 free), 16 above (at least 6 free),
//! counting the devices that already need one.
//!
//! For NIC hot-plug, a VMI with interfaces also gets placeholder
//! interfaces at the first define (P = 4 − #interfaces, or the annotation
//! `kubevirt.io/pci-interface-slot-count` − #interfaces): libvirt gives each
//! a root port, the placeholders are then removed and their ports stay
//! empty; the free ports appended after that are D − P.
//!
//! Without placeholders (P = 0: a VMI without interfaces) KubeVirt never
//! reads libvirt's addressed definition back: it appends the D ports to
//! the converted spec itself, which has no PCI controllers yet, so they
//! are ports 1..D and libvirt puts the devices on them as on ports of its
//! own ([`with_root_ports`]). Checked against KubeVirt's procedure on real
//! libvirt by the e2e test `parity`: the converter benchmark's VMI without
//! a NIC ends with 4 root ports, all used, not 8.

use api::{Arch, VirtualMachineInstance};
use domain::{Domain, Interface, InterfaceTarget, Model};

use crate::ConvertError;

/// Annotation that places every device on the root bus (no hot-plug ports).
pub const PLACE_ON_ROOT_COMPLEX: &str = "kubevirt.io/placePCIDevicesOnRootComplex";
/// Guest memory above which more ports are reserved (2 GiB).
pub const LARGE_GUEST_BYTES: u64 = 2 << 30;
/// Highest PCI controller index KubeVirt allocates.
pub const MAX_PCI_INDEX: u32 = 31;
/// Annotation setting how many interface slots (spec interfaces plus
/// placeholders) a VMI reserves.
pub const PCI_INTERFACE_SLOT_COUNT: &str = "kubevirt.io/pci-interface-slot-count";
/// Interface slots reserved without the annotation (KubeVirt's
/// `ReservedInterfaces`).
pub const RESERVED_INTERFACES: u32 = 4;
/// Tap name prefix of the placeholder interfaces (`placeholder-<i>`).
pub const PLACEHOLDER_PREFIX: &str = "placeholder-";

/// Devices of the converted domain that take a PCI slot: interfaces, PCI
/// host devices, every controller except `pci-root`/`pcie-root`, virtio
/// disks and inputs, watchdogs, RNGs and the memory balloon (always
/// counted, as KubeVirt counts it).
pub fn pci_devices(dom: &Domain) -> u32 {
    let d = &dom.devices;
    let controllers = d
        .controller
        .iter()
        .filter(|c| !matches!(c.model.as_deref(), Some("pci-root" | "pcie-root")))
        .count();
    let disks = d
        .disk
        .iter()
        .filter(|x| x.target.bus.as_deref() == Some("virtio"))
        .count();
    let inputs = d
        .input
        .iter()
        .filter(|x| x.bus.as_deref() == Some("virtio"))
        .count();
    let hostdevs = d.hostdev.iter().filter(|h| h.hostdev_type == "pci").count();
    let n = d.interface.len()
        + controllers
        + disks
        + inputs
        + hostdevs
        + d.watchdog.len()
        + d.rng.len()
        + 1;
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// How many empty `pcie-root-port` controllers to add after the first
/// define (E): 0 unless the VMI is amd64 or arm64 (or names no
/// architecture) on a `q35` / `virt*` machine and lacks the annotation
/// `kubevirt.io/placePCIDevicesOnRootComplex: "true"`; otherwise
/// D − P (at least 0) with D = max(16 − U, 6) above 2 GiB of memory, else
/// max(8 − U, 3), U = [`pci_devices`], P = [`placeholder_count`].
pub fn free_ports_wanted(vmi: &VirtualMachineInstance, arch: Arch, dom: &Domain) -> u32 {
    if !reserves_ports(vmi, arch, dom) {
        return 0;
    }
    let used = pci_devices(dom);
    let memory = dom.memory.bytes().unwrap_or(0);
    let (total, floor): (u32, u32) = if memory > LARGE_GUEST_BYTES {
        (16, 6)
    } else {
        (8, 3)
    };
    let placeholders = placeholder_count(vmi, arch, dom).unwrap_or(0);
    total
        .saturating_sub(used)
        .max(floor)
        .saturating_sub(placeholders)
}

/// How many placeholder interfaces the first define carries (P): none
/// where no ports are reserved ([`free_ports_wanted`]'s conditions) or
/// when the VMI has no interfaces; else the annotation
/// [`PCI_INTERFACE_SLOT_COUNT`] (or [`RESERVED_INTERFACES`]) minus the
/// spec's interfaces, at least 0 (KubeVirt v1.6.6 `virtwrap/manager.go`).
///
/// # Errors
/// [`ConvertError::Invalid`] naming the annotation when its value is not
/// a number from 0 to 32.
pub fn placeholder_count(
    vmi: &VirtualMachineInstance,
    arch: Arch,
    dom: &Domain,
) -> Result<u32, ConvertError> {
    let slots = match vmi.metadata.annotations.get(PCI_INTERFACE_SLOT_COUNT) {
        Some(v) => v
            .parse::<u32>()
            .ok()
            .filter(|n| *n <= MAX_PCI_INDEX + 1)
            .ok_or_else(|| {
                ConvertError::invalid(
                    format!("metadata.annotations[{PCI_INTERFACE_SLOT_COUNT}]"),
                    format!("{v:?} is not a number of slots from 0 to 32"),
                )
            })?,
        None if vmi.spec.domain.devices.interfaces.is_empty() => return Ok(0),
        None => RESERVED_INTERFACES,
    };
    if !reserves_ports(vmi, arch, dom) {
        return Ok(0);
    }
    let ifaces = u32::try_from(vmi.spec.domain.devices.interfaces.len()).unwrap_or(u32::MAX);
    Ok(slots.saturating_sub(ifaces))
}

/// `dom` with `count` placeholder interfaces appended: `<interface
/// type='ethernet'>` on tap `placeholder-<i>` (`managed='no'`), of the
/// virtio model the VMI's own virtio NICs get. Only ever defined, never
/// started: [`remove_placeholders`] takes them out again.
pub fn with_placeholders(
    vmi: &VirtualMachineInstance,
    arch: Arch,
    dom: &Domain,
    count: u32,
) -> Domain {
    let model = crate::arch::virtio_model(crate::arch::caps(arch), vmi);
    let mut out = dom.clone();
    out.devices.interface.extend((0..count).map(|i| Interface {
        interface_type: "ethernet".into(),
        target: Some(InterfaceTarget {
            dev: format!("{PLACEHOLDER_PREFIX}{i}"),
            managed: Some("no".into()),
        }),
        model: Some(Model {
            model_type: model.into(),
        }),
        ..Interface::default()
    }));
    out
}

/// libvirt's inactive domain XML without the placeholder interfaces
/// ([`with_placeholders`]); everything else, the root ports libvirt made
/// for them included, stays as libvirt wrote it. Text surgery for the
/// reason given at [`add_root_ports`]: each `<interface ...>...</interface>`
/// element whose target is a `placeholder-<i>` tap is cut out.
///
/// # Errors
/// [`ConvertError::Host`] when an interface element is not closed.
pub fn remove_placeholders(inactive_xml: &str) -> Result<String, ConvertError> {
    let mut out = String::with_capacity(inactive_xml.len());
    let mut rest = inactive_xml;
    while let Some(start) = rest.find("<interface ") {
        let Some(len) = rest[start..].find("</interface>") else {
            return Err(ConvertError::Host(
                "libvirt's domain XML has an unclosed <interface>".into(),
            ));
        };
        let end = start + len + "</interface>".len();
        let element = &rest[start..end];
        let placeholder = element.contains(&format!("<target dev='{PLACEHOLDER_PREFIX}"))
            || element.contains(&format!("<target dev=\"{PLACEHOLDER_PREFIX}"));
        if placeholder {
            // Drop the element and the indentation before it.
            out.push_str(rest[..start].trim_end_matches([' ', '\t']));
            rest = rest[end..].strip_prefix('\n').unwrap_or(&rest[end..]);
            if !out.ends_with('\n') {
                out.push('\n');
            }
        } else {
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The highest index of `dom`'s PCI controllers (0 without any).
fn max_pci_index(dom: &Domain) -> u32 {
    dom.devices
        .controller
        .iter()
        .filter(|c| c.controller_type == "pci")
        .filter_map(|c| c.index.parse::<u32>().ok())
        .max()
        .unwrap_or(0)
}

/// `dom` (as converted, no addresses yet) with `count` `<controller
/// type='pci' model='pcie-root-port'>` appended, indices after its highest
/// PCI controller index (so from 1), never above 31: KubeVirt's define of
/// a VMI without placeholder interfaces.
pub fn with_root_ports(dom: &Domain, count: u32) -> Domain {
    let max = max_pci_index(dom);
    let mut out = dom.clone();
    out.devices
        .controller
        .extend(
            (max + 1..=MAX_PCI_INDEX)
                .take(count as usize)
                .map(|i| domain::Controller {
                    controller_type: "pci".into(),
                    index: i.to_string(),
                    model: Some("pcie-root-port".into()),
                    ..domain::Controller::default()
                }),
        );
    out
}

/// Whether KubeVirt reserves hot-plug ports for this VMI: amd64 or arm64
/// (or no architecture named) on a `q35` / `virt*` machine, without
/// [`PLACE_ON_ROOT_COMPLEX`] set to `true`.
fn reserves_ports(vmi: &VirtualMachineInstance, arch: Arch, dom: &Domain) -> bool {
    let arch_ok = match vmi.spec.architecture.as_deref() {
        None | Some("") => matches!(arch, Arch::Amd64 | Arch::Arm64),
        Some(a) => a == "amd64" || a == "arm64",
    };
    let machine = dom.os.os_type.machine.as_deref().unwrap_or("");
    let machine_ok = machine.is_empty() || machine.contains("q35") || machine.starts_with("virt");
    let root_complex = vmi
        .metadata
        .annotations
        .get(PLACE_ON_ROOT_COMPLEX)
        .is_some_and(|v| v == "true");
    arch_ok && machine_ok && !root_complex
}

/// Appends `count` `<controller type='pci' model='pcie-root-port'>` to
/// libvirt's inactive domain XML, with indices after the highest PCI
/// controller index there, never above 31.
///
/// The XML is libvirt's own, with addresses and defaults it added that the
/// [`domain`] model does not carry; re-serialising it through the model
/// would drop them. So the controllers are inserted as text before the
/// closing `</devices>`, and the model is used only to read the indices.
///
/// # Errors
/// [`ConvertError::Host`] when libvirt's XML cannot be read or has no
/// `</devices>`.
pub fn add_root_ports(inactive_xml: &str, count: u32) -> Result<String, ConvertError> {
    if count == 0 {
        return Ok(inactive_xml.to_owned());
    }
    let dom = Domain::from_xml(inactive_xml)
        .map_err(|e| ConvertError::Host(format!("libvirt's domain XML: {e}")))?;
    let max = max_pci_index(&dom);
    let at = inactive_xml
        .rfind("</devices>")
        .ok_or_else(|| ConvertError::Host("libvirt's domain XML has no </devices>".into()))?;
    let mut out = String::with_capacity(inactive_xml.len() + 64 * count as usize);
    out.push_str(&inactive_xml[..at]);
    for index in (max + 1..=MAX_PCI_INDEX).take(count as usize) {
        out.push_str(&format!(
            "  <controller type='pci' index='{index}' model='pcie-root-port'/>\n  "
        ));
    }
    out.push_str(&inactive_xml[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{convert, ConvertContext, VirtType};

    fn dom(
        mem: &str,
        devices: &str,
        arch: Arch,
        annotations: &str,
    ) -> (VirtualMachineInstance, Domain) {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: p, uid: u1{annotations}}}\nspec:\n  domain:\n    memory: {{guest: {mem}}}\n    devices:\n{devices}"
        );
        let v = api::load_vmi(doc.as_bytes(), arch).unwrap();
        let d = convert(&v, &ConvertContext::new(arch, VirtType::Kvm)).unwrap();
        (v, d)
    }

    #[test]
    fn small_and_large_guests_get_8_or_16_ports_with_a_floor() {
        // usb, virtio-serial, scsi controllers + balloon = 4 (sata disk: no slot).
        let (v, d) = dom("1Gi", "      disks:\n      - {name: a, disk: {bus: sata}}\n  volumes:\n  - {name: a, emptyDisk: {capacity: 1Gi}}\n", Arch::Amd64, "");
        assert_eq!(pci_devices(&d), 4);
        assert_eq!(free_ports_wanted(&v, Arch::Amd64, &d), 4);
        // Exactly 2 GiB is still small; above it the total is 16.
        let (v, d) = dom("2Gi", "      disks:\n      - {name: a, disk: {bus: sata}}\n  volumes:\n  - {name: a, emptyDisk: {capacity: 1Gi}}\n", Arch::Amd64, "");
        assert_eq!(free_ports_wanted(&v, Arch::Amd64, &d), 4);
        let (v, d) = dom("3Gi", "      disks:\n      - {name: a, disk: {bus: sata}}\n  volumes:\n  - {name: a, emptyDisk: {capacity: 1Gi}}\n", Arch::Amd64, "");
        assert_eq!(free_ports_wanted(&v, Arch::Amd64, &d), 12);
        // Many virtio devices: the floor of 3 free ports holds.
        let many = "      rng: {}\n      disks:\n      - {name: a, disk: {bus: virtio}}\n      - {name: b, disk: {bus: virtio}}\n      - {name: c, disk: {bus: virtio}}\n  volumes:\n  - {name: a, emptyDisk: {capacity: 1Gi}}\n  - {name: b, emptyDisk: {capacity: 1Gi}}\n  - {name: c, emptyDisk: {capacity: 1Gi}}\n";
        let (v, d) = dom("1Gi", many, Arch::Amd64, "");
        assert_eq!(pci_devices(&d), 8);
        assert_eq!(free_ports_wanted(&v, Arch::Amd64, &d), 3);
    }

    #[test]
    fn other_arches_and_root_complex_placement_get_none() {
        let dev = "      disks: []\n";
        for arch in [Arch::Ppc64le, Arch::S390x] {
            let (v, d) = dom("1Gi", dev, arch, "");
            assert_eq!(free_ports_wanted(&v, arch, &d), 0, "{arch}");
        }
        let (v, d) = dom("1Gi", dev, Arch::Arm64, "");
        assert!(free_ports_wanted(&v, Arch::Arm64, &d) >= 3);
        // (The annotation itself is refused by the converter until root
        // complex placement is built; the rule still honours it.)
        let (mut v, d) = dom("1Gi", dev, Arch::Amd64, "");
        v.metadata
            .annotations
            .insert(PLACE_ON_ROOT_COMPLEX.into(), "true".into());
        assert_eq!(free_ports_wanted(&v, Arch::Amd64, &d), 0);
    }

    const IFACES: &str = "      interfaces:\n      - {name: a, masquerade: {}}\n  networks:\n  - {name: a, pod: {}}\n";

    #[test]
    fn interfaces_count_and_get_placeholders_up_to_four_slots() {
        // No interfaces: no placeholders.
        let (v, d) = dom("1Gi", "      disks: []\n", Arch::Amd64, "");
        assert_eq!(placeholder_count(&v, Arch::Amd64, &d).unwrap(), 0);
        // One interface: it takes a slot (U = 5: usb, virtio-serial, the
        // NIC, balloon... as counted), 3 placeholders, E = D - P.
        let (v, d) = dom("1Gi", IFACES, Arch::Amd64, "");
        let without = dom("1Gi", "      disks: []\n", Arch::Amd64, "").1;
        assert_eq!(pci_devices(&d), pci_devices(&without) + 1);
        assert_eq!(placeholder_count(&v, Arch::Amd64, &d).unwrap(), 3);
        let d_ports = 8u32.saturating_sub(pci_devices(&d)).max(3);
        assert_eq!(free_ports_wanted(&v, Arch::Amd64, &d), d_ports - 3);
        // The annotation sets the slots; fewer than the interfaces: none.
        let ann = ", annotations: {kubevirt.io/pci-interface-slot-count: '6'}";
        let (v, d) = dom("1Gi", IFACES, Arch::Amd64, ann);
        assert_eq!(placeholder_count(&v, Arch::Amd64, &d).unwrap(), 5);
        assert_eq!(
            free_ports_wanted(&v, Arch::Amd64, &d),
            8u32.saturating_sub(pci_devices(&d))
                .max(3)
                .saturating_sub(5)
        );
        let ann0 = ", annotations: {kubevirt.io/pci-interface-slot-count: '0'}";
        let (v, d) = dom("1Gi", IFACES, Arch::Amd64, ann0);
        assert_eq!(placeholder_count(&v, Arch::Amd64, &d).unwrap(), 0);
        // Not on s390x/ppc64le; a bad value is refused by name.
        let (v, d) = dom("1Gi", IFACES, Arch::S390x, "");
        assert_eq!(placeholder_count(&v, Arch::S390x, &d).unwrap(), 0);
        for bad in ["x", "-1", "33", ""] {
            let ann = format!(", annotations: {{kubevirt.io/pci-interface-slot-count: '{bad}'}}");
            let doc = format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: p, uid: u1{ann}}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n    devices:\n{IFACES}");
            let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
            let e = convert(&v, &ConvertContext::new(Arch::Amd64, VirtType::Kvm))
                .unwrap_err()
                .to_string();
            assert_eq!(e, format!("metadata.annotations[kubevirt.io/pci-interface-slot-count]: {bad:?} is not a number of slots from 0 to 32"));
        }
    }

    #[test]
    fn placeholders_are_added_to_the_model_and_cut_from_libvirts_xml() {
        let (v, d) = dom("1Gi", IFACES, Arch::Amd64, "");
        let with = with_placeholders(&v, Arch::Amd64, &d, 3);
        assert_eq!(with.devices.interface.len(), 4);
        let xml = with.to_xml().unwrap();
        assert!(
            xml.contains("<target dev=\"placeholder-2\" managed=\"no\"/>"),
            "{xml}"
        );
        assert!(
            xml.contains("<model type=\"virtio-non-transitional\"/>"),
            "{xml}"
        );
        // As libvirt writes it back: addresses added, single quotes.
        let libvirt = "<domain>\n  <devices>\n    <interface type='ethernet'>\n      <mac address='02:00:00:00:00:01'/>\n      <target dev='tap0' managed='no'/>\n      <model type='virtio-non-transitional'/>\n      <alias name='ua-a'/>\n      <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>\n    </interface>\n    <interface type='ethernet'>\n      <mac address='52:54:00:12:34:56'/>\n      <target dev='placeholder-0' managed='no'/>\n      <model type='virtio-non-transitional'/>\n      <address type='pci' domain='0x0000' bus='0x02' slot='0x00' function='0x0'/>\n    </interface>\n    <controller type='pci' index='2' model='pcie-root-port'/>\n  </devices>\n</domain>\n";
        let out = remove_placeholders(libvirt).unwrap();
        assert!(!out.contains("placeholder"), "{out}");
        assert!(out.contains("<target dev='tap0' managed='no'/>"), "{out}");
        assert!(
            out.contains("<controller type='pci' index='2' model='pcie-root-port'/>"),
            "{out}"
        );
        assert_eq!(out.matches("<interface ").count(), 1, "{out}");
        assert!(out.contains("    </interface>\n    <controller"), "{out}");
        assert!(remove_placeholders("<domain><devices><interface type='ethernet'>").is_err());
        assert_eq!(
            remove_placeholders(libvirt.split("    <interface").next().unwrap()).unwrap(),
            libvirt.split("    <interface").next().unwrap()
        );
    }

    #[test]
    fn without_placeholders_the_ports_join_the_converted_spec_from_index_1() {
        let (v, d) = dom("128Mi", "      disks:\n      - {name: a, disk: {bus: virtio}}\n  volumes:\n  - {name: a, emptyDisk: {capacity: 1Gi}}\n", Arch::Amd64, ", annotations: {}");
        // usb, scsi, virtio-serial, the disk, the balloon: D = 3, P = 0.
        assert_eq!(pci_devices(&d), 5);
        assert_eq!(placeholder_count(&v, Arch::Amd64, &d).unwrap(), 0);
        let n = free_ports_wanted(&v, Arch::Amd64, &d);
        assert_eq!(n, 3);
        let with = with_root_ports(&d, n);
        let ports: Vec<(&str, Option<&str>)> = with
            .devices
            .controller
            .iter()
            .filter(|c| c.controller_type == "pci")
            .map(|c| (c.index.as_str(), c.model.as_deref()))
            .collect();
        assert_eq!(
            ports,
            [
                ("1", Some("pcie-root-port")),
                ("2", Some("pcie-root-port")),
                ("3", Some("pcie-root-port"))
            ]
        );
        assert_eq!(
            with.devices.controller.len(),
            d.devices.controller.len() + 3
        );
        assert_eq!(
            with_root_ports(&d, 40).devices.controller.len(),
            d.devices.controller.len() + 31
        );
    }

    #[test]
    fn ports_are_appended_after_the_highest_index_up_to_31() {
        let xml = "<domain type='kvm'><name>n</name><memory unit='KiB'>1</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices><controller type='pci' index='0' model='pcie-root'/><controller type='pci' index='3' model='pcie-root-port'/><controller type='usb' index='0'/></devices></domain>";
        let out = add_root_ports(xml, 2).unwrap();
        assert!(
            out.contains("<controller type='pci' index='4' model='pcie-root-port'/>"),
            "{out}"
        );
        assert!(
            out.contains("<controller type='pci' index='5' model='pcie-root-port'/>"),
            "{out}"
        );
        assert!(out.ends_with("</devices></domain>"), "{out}");
        let back = Domain::from_xml(&out).unwrap();
        assert_eq!(back.devices.controller.len(), 5);
        let xml31 = xml.replace("index='3'", "index='30'");
        let out = add_root_ports(&xml31, 5).unwrap();
        assert_eq!(out.matches("pcie-root-port").count(), 2, "{out}");
        assert_eq!(add_root_ports(xml, 0).unwrap(), xml);
        assert!(add_root_ports("<domain/>", 1).is_err());
    }
}
