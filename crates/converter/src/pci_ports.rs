//! The free PCIe root ports KubeVirt reserves for hot-plug (KubeVirt v1.6.6
//! `virtwrap/manager.go`, at define time; facts section 4.6).
//!
//! After the domain is defined, libvirt has given every PCI device a
//! `pcie-root-port` of its own. KubeVirt then appends empty ports so that a
//! hot-plugged disk or NIC finds one: 8 root ports in total for guests with
//! up to 2 GiB of memory (at least 3 free), 16 above (at least 6 free),
//! counting the devices that already need one.
//!
//! The legacy placeholder interfaces (annotation
//! `kubevirt.io/pci-interface-slot-count`) only matter for VMIs with
//! interfaces, which this launcher does not build yet: with none, KubeVirt
//! reserves no placeholder, so P = 0 here and the annotation is refused by
//! [`crate::unsupported`].

use api::{Arch, VirtualMachineInstance};
use domain::Domain;

use crate::ConvertError;

/// Annotation that places every device on the root bus (no hot-plug ports).
pub const PLACE_ON_ROOT_COMPLEX: &str = "kubevirt.io/placePCIDevicesOnRootComplex";
/// Guest memory above which more ports are reserved (2 GiB).
pub const LARGE_GUEST_BYTES: u64 = 2 << 30;
/// Highest PCI controller index KubeVirt allocates.
pub const MAX_PCI_INDEX: u32 = 31;

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
    let n = controllers + disks + inputs + hostdevs + d.watchdog.len() + d.rng.len() + 1;
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// How many empty `pcie-root-port` controllers to add after the first
/// define (E): 0 unless the VMI is amd64 or arm64 (or names no
/// architecture) on a `q35` / `virt*` machine and lacks the annotation
/// `kubevirt.io/placePCIDevicesOnRootComplex: "true"`; otherwise
/// D − P with D = max(16 − U, 6) above 2 GiB of memory, else max(8 − U, 3),
/// U = [`pci_devices`], P = 0 placeholders.
pub fn free_ports_wanted(vmi: &VirtualMachineInstance, arch: Arch, dom: &Domain) -> u32 {
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
    if !arch_ok || !machine_ok || root_complex {
        return 0;
    }
    let used = pci_devices(dom);
    let memory = dom.memory.bytes().unwrap_or(0);
    let (total, floor): (u32, u32) = if memory > LARGE_GUEST_BYTES {
        (16, 6)
    } else {
        (8, 3)
    };
    total.saturating_sub(used).max(floor)
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
    let max = dom
        .devices
        .controller
        .iter()
        .filter(|c| c.controller_type == "pci")
        .filter_map(|c| c.index.parse::<u32>().ok())
        .max()
        .unwrap_or(0);
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
