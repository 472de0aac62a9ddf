//! The pod's network as the launcher uses it: SR-IOV addresses.

use std::path::Path;

use api::VirtualMachineInstance;

use crate::error::LauncherError;
use crate::startup::{Mode, RuntimeSettings};

/// Where the kernel lists the host's PCI devices (`<dddd:bb:ss.f>/`).
pub const SYS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// The host PCI address of each live SR-IOV interface, before anything
/// starts: standalone from `--network-info` (and the device must exist on
/// this host: libvirt could not start the domain otherwise), in a pod with
/// the VMI at hand from `/etc/podinfo/network-info` or the device
/// plugin's environment. Empty when the VMI has no SR-IOV interface.
///
/// # Errors
/// [`LauncherError::Input`], one line naming the interface field and the
/// file, variable or device.
pub fn sriov_addresses(
    vmi: &VirtualMachineInstance,
    settings: &RuntimeSettings,
) -> Result<std::collections::BTreeMap<String, String>, LauncherError> {
    let live = converter::sriov::live_interfaces(vmi);
    let Some(&(first, _)) = live.first() else {
        return Ok(std::collections::BTreeMap::new());
    };
    if settings.mode == Mode::Pod {
        return network::sriov::pod_host_addresses(vmi).map_err(LauncherError::Input);
    }
    let Some(file) = &settings.network_info else {
        return Err(LauncherError::Input(format!(
            "spec.domain.devices.interfaces[{first}].sriov: the host address of the SR-IOV VF is needed: pass --network-info FILE (KubeVirt's network-info format)"
        )));
    };
    let info = network::sriov::read_network_info(file, false, std::time::Duration::ZERO)
        .map_err(|e| LauncherError::Input(format!("--network-info {e}")))?;
    let name = file.display().to_string();
    let found = network::sriov::host_addresses(vmi, info.as_ref(), &name, None)
        .map_err(LauncherError::Input)?;
    for (i, iface) in live {
        let addr = &found[&iface.name];
        // libvirt reads the device only when the domain starts, and fails
        // then; a missing device is refused before anything starts.
        let dev = Path::new(SYS_PCI_DEVICES).join(addr.to_ascii_lowercase());
        if !dev.exists() {
            return Err(LauncherError::Input(format!(
                "spec.domain.devices.interfaces[{i}].sriov: host PCI device {addr} (from {name}) does not exist on this host ({}): running needs a real SR-IOV VF bound to vfio-pci",
                dev.display()
            )));
        }
        // managed='no' (KubeVirt's): libvirt neither detaches the device
        // from its host driver nor binds it to vfio-pci; it must be so.
        let driver = std::fs::read_link(dev.join("driver"))
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
        if driver.as_deref() != Some("vfio-pci") {
            return Err(LauncherError::Input(format!(
                "spec.domain.devices.interfaces[{i}].sriov: host PCI device {addr} (from {name}) is {}, not bound to vfio-pci: running needs a real SR-IOV VF bound to vfio-pci",
                driver.map_or_else(|| "bound to no driver".to_owned(), |d| format!("bound to {d}"))
            )));
        }
    }
    Ok(found)
}
