//! SR-IOV host-device hot-plug (KubeVirt v1.6.6 `HotplugHostDevices`,
//! kubevirt-facts §8.6): asynchronous and one at a time. A call while an
//! earlier one still runs is refused at once with KubeVirt's words
//! ([`IN_PROGRESS`]); otherwise the call returns and a thread attaches,
//! under the manager's modify lock, every SR-IOV host device
//! (`ua-sriov-<interface>`, from the VMI and the interfaces' host PCI
//! addresses) the live domain lacks, with `VIR_DOMAIN_AFFECT_LIVE |
//! _CONFIG`; a failure is logged, as KubeVirt does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use api::VirtualMachineInstance;
use converter::{ClusterOptions, ConvertContext, Prepared};
use virt::domain::Domain as VirtDomain;
use virt::sys;

use super::{LibvirtDomainManager, ManagerError};

/// KubeVirt's refusal of a second concurrent call.
pub const IN_PROGRESS: &str = "hot-plug host-devices is in progress";

/// At most one run at a time (KubeVirt's one-slot channel).
#[derive(Debug, Default)]
pub struct SingleFlight(Arc<AtomicBool>);

/// The running flight; it lands when dropped.
#[derive(Debug)]
pub struct Flight(Arc<AtomicBool>);

impl Drop for Flight {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl SingleFlight {
    /// Starts a flight, `None` while another one runs.
    pub fn try_begin(&self) -> Option<Flight> {
        self.0
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| Flight(Arc::clone(&self.0)))
    }
}

/// The host devices of `wanted` whose alias the live domain (`live`) has
/// not: those to attach.
pub fn missing(
    live: &[domain::HostDevice],
    wanted: Vec<domain::HostDevice>,
) -> Vec<domain::HostDevice> {
    let have: BTreeSet<&str> = live
        .iter()
        .filter_map(|h| h.alias.as_ref().map(|a| a.name.as_str()))
        .collect();
    wanted
        .into_iter()
        .filter(|h| {
            h.alias
                .as_ref()
                .is_none_or(|a| !have.contains(a.name.as_str()))
        })
        .collect()
}

impl LibvirtDomainManager {
    /// KubeVirt's `HotplugHostDevices` for `vmi`, whose SR-IOV interfaces
    /// have the host PCI addresses `sriov_pci` (by interface name).
    ///
    /// # Errors
    /// [`ManagerError::Failed`] with [`IN_PROGRESS`] while an earlier call
    /// runs; nothing else (the attach runs after the call returned).
    pub fn hotplug_host_devices(
        self: &Arc<Self>,
        vmi: VirtualMachineInstance,
        sriov_pci: BTreeMap<String, String>,
    ) -> Result<(), ManagerError> {
        let Some(flight) = self.hostdev_flight.try_begin() else {
            return Err(ManagerError::Failed(IN_PROGRESS.into()));
        };
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            let _flight = flight;
            if let Err(e) = me.attach_sriov_devices(&vmi, sriov_pci) {
                tracing::error!(domain = %vmi.domain_name(), "failed to hot-plug host-devices: {e}");
            }
        });
        Ok(())
    }

    fn attach_sriov_devices(
        &self,
        vmi: &VirtualMachineInstance,
        sriov_pci: BTreeMap<String, String>,
    ) -> Result<(), ManagerError> {
        let _modifying = self.modifying();
        let ctx = ConvertContext::from_parts(
            &self.host,
            &ClusterOptions::default(),
            Prepared::default(),
            sriov_pci,
        );
        let wanted = converter::sriov::convert(vmi, &ctx)?;
        let name = vmi.domain_name();
        self.with_conn(|conn| {
            let dom = VirtDomain::lookup_by_name(conn, &name)?;
            let live = domain::Domain::from_xml(&dom.get_xml_desc(0)?)?;
            for h in missing(&live.devices.hostdev, wanted.clone()) {
                let alias = h.alias.as_ref().map_or("", |a| a.name.as_str());
                tracing::info!(domain = %name, alias, "attaching host device");
                dom.attach_device_flags(
                    &h.to_xml()?,
                    sys::VIR_DOMAIN_AFFECT_LIVE | sys::VIR_DOMAIN_AFFECT_CONFIG,
                )?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_flight_at_a_time() {
        let f = SingleFlight::default();
        let first = f.try_begin().expect("the first call runs");
        // A second call while the first runs: KubeVirt's refusal.
        assert!(f.try_begin().is_none());
        // From another thread too.
        let shared = Arc::new(f);
        let other = Arc::clone(&shared);
        assert!(std::thread::spawn(move || other.try_begin().is_none())
            .join()
            .unwrap());
        drop(first);
        assert!(shared.try_begin().is_some(), "free again once it ended");
    }

    #[test]
    fn only_devices_the_domain_lacks_are_attached() {
        let dev = |alias: &str| domain::HostDevice {
            hostdev_type: "pci".into(),
            alias: Some(domain::Alias { name: alias.into() }),
            ..domain::HostDevice::default()
        };
        let got = missing(
            &[dev("ua-sriov-red")],
            vec![dev("ua-sriov-red"), dev("ua-sriov-blue")],
        );
        assert_eq!(got, vec![dev("ua-sriov-blue")]);
    }
}
