//! Memory hot-plug on a running domain (KubeVirt v1.6.6 `UpdateGuestMemory`,
//! the launcher's SyncVirtualMachineMemory, kubevirt-facts §8.4). The domain
//! was defined with `<maxMemory slots='0'>` (`spec.domain.memory.maxGuest`)
//! and no memory device; the first hot-plug attaches KubeVirt's virtio-mem
//! device ([`converter::memory::hotplug_device`]) with
//! `VIR_DOMAIN_AFFECT_LIVE | _CONFIG`, later ones change its `requested`
//! size with `VIR_DOMAIN_AFFECT_LIVE` only (as KubeVirt: the persistent
//! definition keeps the first request). The guest plugs the memory itself;
//! libvirt then raises `<currentMemory>`, which virt-handler copies into
//! `status.memory.guestCurrent`.

use api::VirtualMachineInstance;
use virt::domain::Domain as VirtDomain;
use virt::sys;

use super::{LibvirtDomainManager, ManagerError};

/// KubeVirt's error prefix.
pub const ERROR_PREFIX: &str = "failed to update Guest Memory";

/// What a memory hot-plug does to the live device list `live`: the device
/// to send and whether it is an update of the one the domain has (else an
/// attach). Only `requested` of a present device changes.
pub fn plan(
    live: &[domain::MemoryDevice],
    wanted: domain::MemoryDevice,
) -> (domain::MemoryDevice, bool) {
    match live.iter().find(|d| d.is_virtio_mem()) {
        Some(d) => {
            let mut d = d.clone();
            d.target.requested = wanted.target.requested;
            // libvirt reports what the guest plugged; it is no request.
            d.target.current = None;
            (d, true)
        }
        None => (wanted, false),
    }
}

impl LibvirtDomainManager {
    /// KubeVirt's `UpdateGuestMemory` for `vmi`'s domain.
    ///
    /// # Errors
    /// [`ManagerError::Prefixed`] with [`ERROR_PREFIX`] when the domain is
    /// not found or its XML does not parse; the device's conversion error
    /// (by field: `status.memory.guestAtBoot`, `spec.domain.memory.guest`
    /// below the boot memory) and libvirt's refusal of the update or
    /// attach (e.g. a request above the device's size) unprefixed, as
    /// KubeVirt returns them.
    pub fn update_guest_memory(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        let _modifying = self.modifying();
        let prefixed = |e: ManagerError| ManagerError::Prefixed {
            prefix: ERROR_PREFIX,
            source: Box::new(e),
        };
        let name = vmi.domain_name();
        self.with_conn(|conn| {
            let dom = VirtDomain::lookup_by_name(conn, &name)
                .map_err(|e| prefixed(ManagerError::from(e)))?;
            let wanted = converter::memory::hotplug_device(vmi)?;
            let live = dom
                .get_xml_desc(0)
                .map_err(ManagerError::from)
                .and_then(|x| Ok(domain::Domain::from_xml(&x)?))
                .map_err(prefixed)?;
            let (device, update) = plan(&live.devices.memory, wanted);
            let xml = device.to_xml()?;
            let requested = device.target.requested.as_ref().map_or(0, |r| r.value);
            if update {
                dom.update_device_flags(&xml, sys::VIR_DOMAIN_AFFECT_LIVE)
                    .inspect_err(|e| tracing::error!(domain = %name, "updating virtio-mem device: {e}"))?;
            } else {
                dom.attach_device_flags(
                    &xml,
                    sys::VIR_DOMAIN_AFFECT_LIVE | sys::VIR_DOMAIN_AFFECT_CONFIG,
                )
                .inspect_err(|e| tracing::error!(domain = %name, "attaching virtio-mem device: {e}"))?;
            }
            tracing::info!(domain = %name, requested_bytes = requested, update, "hotplugging guest memory");
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::{MemoryDevice, MemoryDeviceTarget, MemoryValue};

    fn dev(requested: u64, current: Option<u64>) -> MemoryDevice {
        let b = |value| MemoryValue {
            unit: "b".into(),
            value,
        };
        MemoryDevice {
            model: "virtio-mem".into(),
            target: MemoryDeviceTarget {
                size: Some(b(3 << 30)),
                node: Some("0".into()),
                block: Some(b(2 << 20)),
                requested: Some(b(requested)),
                current: current.map(b),
            },
            alias: Some(domain::Alias {
                name: "virtiomem0".into(),
            }),
            address: None,
        }
    }

    #[test]
    fn first_hot_plug_attaches_later_ones_update_requested() {
        let wanted = dev(1 << 30, None);
        assert_eq!(plan(&[], wanted.clone()), (wanted.clone(), false));
        // The live device keeps its alias and size; only requested changes
        // and libvirt's `current` is not sent back.
        let live = dev(0, Some(0));
        let (d, update) = plan(std::slice::from_ref(&live), dev(2 << 30, None));
        assert!(update);
        assert_eq!(d.alias, live.alias);
        assert_eq!(d.target.requested.unwrap().value, 2 << 30);
        assert_eq!(d.target.current, None);
        // A DIMM is no virtio-mem device.
        let mut dimm = live;
        dimm.model = "dimm".into();
        assert!(!plan(&[dimm], wanted).1);
    }
}
