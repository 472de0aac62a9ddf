//! SR-IOV interfaces (kubevirt-facts §4.4): every interface with the
//! `sriov` binding becomes a PCI host device, the virtual function Multus
//! or the device plugin gave the pod, instead of an `<interface>`.
//!
//! The rule is KubeVirt v1.6.6's (`virtwrap/device/hostdevice/sriov`):
//! `<hostdev type='pci' managed='no'>` with the VF's host address in
//! `<source>`, alias `ua-sriov-<interface name>`, the guest address from
//! `pciAddress` and the boot order from `bootOrder`. KubeVirt leaves
//! `mode` to libvirt's default; it is written here as `subsystem`, which is
//! what libvirt reads back either way. The source address carries no
//! `type` (libvirt's schema has none there; libvirt drops KubeVirt's).
//!
//! KubeVirt builds host devices only for SR-IOV interfaces whose VMI
//! status says Multus reported them (an interface not plugged yet is
//! skipped); the VMI status is not an input here, so every live SR-IOV
//! interface needs its VF, and one without is refused rather than dropped.
//!
//! The host addresses are host facts: the launcher reads them (the pod's
//! network-info downward API file, else the device plugin's environment)
//! into [`crate::ConvertContext::sriov_pci`]; this module does no I/O.

use std::collections::BTreeMap;

use api::vmi::{Interface as ApiInterface, InterfaceState};
use api::VirtualMachineInstance;
use domain::{BootOrder, HostDevice, HostDeviceSource};

use crate::interfaces::pci_address;
use crate::{ConvertContext, ConvertError};

/// Prefix of an SR-IOV host device's name in its alias (KubeVirt's
/// `deviceinfo.SRIOVAliasPrefix`): the XML alias is `ua-sriov-<name>`.
pub const ALIAS_PREFIX: &str = "sriov-";

/// Whether `iface` uses the SR-IOV binding.
pub fn is_sriov(iface: &ApiInterface) -> bool {
    iface.sriov.is_some()
}

/// The SR-IOV interfaces that get a host device: those not `absent`, as
/// (index in `spec.domain.devices.interfaces`, interface), in spec order.
pub fn live_interfaces(vmi: &VirtualMachineInstance) -> Vec<(usize, &ApiInterface)> {
    vmi.spec
        .domain
        .devices
        .interfaces
        .iter()
        .enumerate()
        .filter(|(_, i)| is_sriov(i) && !i.is_absent())
        .collect()
}

/// Builds one `<hostdev>` per live SR-IOV interface, in spec order.
/// `sriov_pci` maps interface names to host PCI addresses (`dddd:bb:ss.f`).
///
/// # Errors
/// [`ConvertError::Invalid`] naming the field for: an SR-IOV interface
/// whose network is not a Multus one, `state: down` (a VF has no link
/// state libvirt can set), a `model` or `acpiIndex` (a VF is the host's
/// NIC: neither applies), boot order 0, a malformed guest `pciAddress`, a
/// name libvirt cannot carry in an alias; [`ConvertError::Host`] for an
/// interface without a host address, a malformed host address, or two
/// interfaces given the same VF.
pub fn convert(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
) -> Result<Vec<HostDevice>, ConvertError> {
    let mut out = Vec::new();
    let mut used: BTreeMap<String, &str> = BTreeMap::new();
    for (i, iface) in live_interfaces(vmi) {
        let path = format!("spec.domain.devices.interfaces[{i}]");
        let multus = vmi
            .spec
            .networks
            .iter()
            .find(|n| n.name == iface.name)
            .is_some_and(|n| n.multus.is_some());
        if !multus {
            return Err(ConvertError::invalid(
                format!("{path}.sriov"),
                format!(
                    "SR-IOV needs a Multus network: spec.networks[name={}] must have multus",
                    iface.name
                ),
            ));
        }
        if iface.state == Some(InterfaceState::Down) {
            return Err(ConvertError::invalid(
                format!("{path}.state"),
                "an SR-IOV interface is a host device and has no link state to set down",
            ));
        }
        if let Some(model) = &iface.model {
            return Err(ConvertError::invalid(
                format!("{path}.model"),
                format!(
                    "{:?}: an SR-IOV interface is the host's VF, it has no NIC model",
                    model.as_str()
                ),
            ));
        }
        if iface.acpi_index.is_some() {
            return Err(ConvertError::invalid(
                format!("{path}.acpiIndex"),
                "an SR-IOV host device takes no ACPI index",
            ));
        }
        let alias = crate::user_alias(
            &format!("{path}.name"),
            &format!("{ALIAS_PREFIX}{}", iface.name),
        )?;
        // `ua-sriov-<name>` must not be another interface's `ua-<name>`
        // (libvirt refuses duplicate aliases only at define time).
        let clash = format!("{ALIAS_PREFIX}{}", iface.name);
        if let Some(j) = vmi
            .spec
            .domain
            .devices
            .interfaces
            .iter()
            .position(|o| o.name == clash)
        {
            return Err(ConvertError::invalid(
                format!("spec.domain.devices.interfaces[{j}].name"),
                format!(
                    "{clash:?} is the alias of SR-IOV interface {:?}'s host device (ua-{clash}); rename one of them",
                    iface.name
                ),
            ));
        }
        let Some(host) = ctx.sriov_pci.get(&iface.name) else {
            return Err(ConvertError::Host(format!(
                "{path}.sriov: no host PCI address for SR-IOV interface {:?} (the pod's network-info file, or --network-info FILE standalone)",
                iface.name
            )));
        };
        let source = pci_address(&format!("{path}.sriov"), host).map_err(|_| {
            ConvertError::Host(format!(
                "{path}.sriov: host PCI address {host:?} of SR-IOV interface {:?} is not of the form dddd:bb:ss.f",
                iface.name
            ))
        })?;
        // libvirt's schema has no `type` on a host device's source
        // address (KubeVirt writes `type='pci'`, which libvirt's parser
        // ignores but virt-xml-validate refuses); libvirt reads it back
        // without `type` either way.
        let source = domain::Address {
            address_type: String::new(),
            ..source
        };
        let key = canonical(&source);
        if let Some(other) = used.insert(key.clone(), &iface.name) {
            return Err(ConvertError::Host(format!(
                "{path}.sriov: SR-IOV interfaces {other:?} and {:?} were both given the host device {key}",
                iface.name
            )));
        }
        let boot = match iface.boot_order {
            Some(0) => {
                return Err(ConvertError::invalid(
                    format!("{path}.bootOrder"),
                    "must be 1 or more",
                ))
            }
            other => other.map(|order| BootOrder { order }),
        };
        let address = iface
            .pci_address
            .as_deref()
            .map(|a| pci_address(&format!("{path}.pciAddress"), a))
            .transpose()?;
        out.push(HostDevice {
            mode: Some("subsystem".into()),
            hostdev_type: "pci".into(),
            managed: Some("no".into()),
            source: HostDeviceSource {
                address: Some(source),
            },
            boot,
            alias: Some(alias),
            address,
            ..HostDevice::default()
        });
    }
    Ok(out)
}

/// Refuses two live interfaces (SR-IOV or not) with the same guest
/// `pciAddress`: libvirt would refuse the domain ("Attempted double use of
/// PCI Address").
///
/// # Errors
/// [`ConvertError::Invalid`] naming the second interface's `pciAddress`.
pub fn check_guest_addresses(vmi: &VirtualMachineInstance) -> Result<(), ConvertError> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for (i, iface) in vmi.spec.domain.devices.interfaces.iter().enumerate() {
        let Some(text) = iface.pci_address.as_deref() else {
            continue;
        };
        if iface.is_absent() {
            continue;
        }
        let path = format!("spec.domain.devices.interfaces[{i}].pciAddress");
        let key = canonical(&pci_address(&path, text)?);
        if let Some(other) = seen.insert(key.clone(), &iface.name) {
            return Err(ConvertError::invalid(
                path,
                format!("{key} is already the address of interface {other:?}"),
            ));
        }
    }
    Ok(())
}

/// `dddd:bb:ss.f` of a parsed PCI address (lower-case hex).
fn canonical(a: &domain::Address) -> String {
    let f = |v: &Option<String>| {
        v.as_deref()
            .and_then(|s| s.strip_prefix("0x"))
            .unwrap_or_default()
            .to_owned()
    };
    format!(
        "{}:{}:{}.{}",
        f(&a.domain),
        f(&a.bus),
        f(&a.slot),
        f(&a.function)
    )
}
