//! The pod's network as the launcher uses it, the same in both modes:
//! network phase 2 (KubeVirt does it in SyncVMI: the host facts of each
//! live pod interface and the DHCP servers that configure the guest) and
//! the host PCI address of each SR-IOV VF. [`PodNetwork`] is the one entry
//! point for both; it keeps what it found for later syncs and owns the
//! DHCP servers.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use api::VirtualMachineInstance;
use converter::interfaces::InterfaceHost;
use network::phase2::DhcpServers;

use crate::startup::PRIVATE_DIR;

/// Where the kernel lists the host's PCI devices (`<dddd:bb:ss.f>/`).
pub const SYS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// Where the host PCI addresses of SR-IOV VFs come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SriovSource {
    /// A pod: `/etc/podinfo/network-info` (KubeVirt's downward API file),
    /// else the device plugin's environment
    /// ([`network::sriov::pod_host_addresses`]).
    Pod,
    /// Standalone: the `--network-info` file as `run` read and checked it
    /// once before anything started, if given; each VF must exist on this
    /// host, bound to vfio-pci (libvirt could not start the domain
    /// otherwise, and with managed='no' it binds nothing itself).
    NetworkInfo(Option<network::sriov::NetworkInfoPci>),
}

/// For which interfaces a sync runs network phase 2 (for those of them
/// that have no host facts yet).
#[derive(Clone, Copy, Debug)]
pub enum Phase2<'a> {
    /// None: the domain runs and nothing is to be plugged.
    Skip,
    /// Every live pod interface: the domain is about to start (KubeVirt's
    /// `FilterNetsForVMStartup`).
    Start,
    /// The interfaces of these names: NICs to hot-plug into the running
    /// domain ([`virtwrap::manager::nics::networks_to_plug`]).
    Plug(&'a [String]),
}

impl Phase2<'_> {
    fn wants(&self, name: &str) -> bool {
        match self {
            Phase2::Skip => false,
            Phase2::Start => true,
            Phase2::Plug(names) => names.iter().any(|n| n == name),
        }
    }
}

/// The pod's network for this launcher's VMI (see the module docs).
#[derive(Debug)]
pub struct PodNetwork {
    sriov: SriovSource,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Host facts of each interface phase 2 prepared, by interface name.
    interfaces: BTreeMap<String, InterfaceHost>,
    /// Host PCI address of each SR-IOV interface found, by interface name.
    sriov_pci: BTreeMap<String, String>,
    /// The DHCP servers phase 2 started, by interface name.
    servers: BTreeMap<String, DhcpServers>,
}

impl PodNetwork {
    /// Nothing prepared yet; SR-IOV addresses from `sriov`.
    pub fn new(sriov: SriovSource) -> Self {
        PodNetwork {
            sriov,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The host facts of `vmi`'s live pod interfaces
    /// ([`api::vmi::Interface::is_live_pod_interface`]), after network
    /// phase 2 ran for those `phase2` names that have none yet: the one
    /// place it runs, once per interface, in the pod's network namespace,
    /// where phase 1 (virt-handler's, or the standalone stand-in's) made
    /// the links, reading phase 1's caches from the private directory and
    /// the pod's `/etc/resolv.conf`; each interface's DHCP servers start.
    /// Held locked while it runs, so two syncs never run it twice.
    ///
    /// # Errors
    /// One line naming the interface field (see
    /// [`network::phase2::prepare`]), or a DHCP server that cannot start;
    /// the interfaces prepared before the failing one stay prepared.
    pub fn interfaces(
        &self,
        vmi: &VirtualMachineInstance,
        phase2: Phase2<'_>,
    ) -> Result<BTreeMap<String, InterfaceHost>, String> {
        let mut st = self.state();
        let missing: Vec<String> = vmi
            .live_pod_interfaces()
            .map(|(_, i)| i.name.clone())
            .filter(|n| !st.interfaces.contains_key(n) && phase2.wants(n))
            .collect();
        if missing.is_empty() {
            return Ok(st.interfaces.clone());
        }
        let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        for name in missing {
            let p = network::phase2::prepare_for(
                vmi,
                &|n| n == name,
                Path::new(PRIVATE_DIR),
                &resolv,
                &network::phase1::pod_link,
                &network::phase1::link_exists,
            )
            .map_err(|e| e.to_string())?;
            let servers = DhcpServers::start(p.dhcp, p.dhcp6).map_err(|e| e.to_string())?;
            tracing::info!(interface = %name, "network phase 2 done for the synced VMI");
            st.interfaces.extend(p.hosts);
            st.servers.insert(name, servers);
        }
        Ok(st.interfaces.clone())
    }

    /// Forgets the interfaces phase 2 prepared that are no longer live pod
    /// interfaces of `vmi` (unplugged: `state: absent`, or gone from the
    /// spec) and stops their DHCP servers, so that a later plug of the same
    /// name runs phase 2 afresh. Called once the domain no longer has them.
    pub fn release_unplugged(&self, vmi: &VirtualMachineInstance) {
        let live: std::collections::BTreeSet<&str> = vmi
            .live_pod_interfaces()
            .map(|(_, i)| i.name.as_str())
            .collect();
        let gone: Vec<String> = self
            .state()
            .interfaces
            .keys()
            .filter(|n| !live.contains(n.as_str()))
            .cloned()
            .collect();
        self.forget(&gone);
    }

    /// Forgets what phase 2 prepared for the interfaces `names` and stops
    /// their DHCP servers.
    pub fn forget(&self, names: &[String]) {
        let mut st = self.state();
        for name in names {
            let known = st.interfaces.remove(name).is_some();
            if let Some(servers) = st.servers.remove(name) {
                servers.stop();
            }
            if known {
                tracing::info!(interface = %name, "network phase 2 of the interface undone: its DHCP servers stopped");
            }
        }
    }

    /// The host PCI address of each live SR-IOV interface of `vmi`, by
    /// interface name: those found before, and the missing ones read from
    /// the [`SriovSource`] (KubeVirt reads them at every SyncVMI). Empty
    /// when the VMI has no SR-IOV interface.
    ///
    /// # Errors
    /// One line naming the interface field and the file, variable or
    /// device.
    pub fn sriov_addresses(
        &self,
        vmi: &VirtualMachineInstance,
    ) -> Result<BTreeMap<String, String>, String> {
        let mut st = self.state();
        let live = converter::sriov::live_interfaces(vmi);
        if live.iter().all(|(_, x)| st.sriov_pci.contains_key(&x.name)) {
            return Ok(st.sriov_pci.clone());
        }
        let found = match &self.sriov {
            SriovSource::Pod => {
                network::sriov::pod_host_addresses(vmi).map_err(|e| e.to_string())?
            }
            SriovSource::NetworkInfo(info) => from_network_info(vmi, info.as_ref())?,
        };
        tracing::info!(interfaces = ?found, "SR-IOV host devices");
        st.sriov_pci.extend(found);
        Ok(st.sriov_pci.clone())
    }

    /// Stops the DHCP servers.
    pub fn stop(&self) {
        for servers in std::mem::take(&mut self.state().servers).into_values() {
            servers.stop();
        }
    }
}

/// [`SriovSource::NetworkInfo`]: the addresses `info` (the
/// `--network-info` file, read once by `run`) gives, each VF checked on
/// this host.
fn from_network_info(
    vmi: &VirtualMachineInstance,
    info: Option<&network::sriov::NetworkInfoPci>,
) -> Result<BTreeMap<String, String>, String> {
    let live = converter::sriov::live_interfaces(vmi);
    let Some(&(first, _)) = live.first() else {
        return Ok(BTreeMap::new());
    };
    let Some(info) = info else {
        return Err(format!(
            "spec.domain.devices.interfaces[{first}].sriov: the host address of the SR-IOV VF is needed: pass --network-info FILE (KubeVirt's network-info format)"
        ));
    };
    let name = info.file.clone();
    let found =
        network::sriov::host_addresses(vmi, Some(info), &name, None).map_err(|e| e.to_string())?;
    for (i, iface) in live {
        let addr = &found[&iface.name];
        // libvirt reads the device only when the domain starts, and fails
        // then; a missing device is refused before anything starts.
        let dev = Path::new(SYS_PCI_DEVICES).join(addr.to_ascii_lowercase());
        if !dev.exists() {
            return Err(format!(
                "spec.domain.devices.interfaces[{i}].sriov: host PCI device {addr} (from {name}) does not exist on this host ({}): running needs a real SR-IOV VF bound to vfio-pci",
                dev.display()
            ));
        }
        // managed='no' (KubeVirt's): libvirt neither detaches the device
        // from its host driver nor binds it to vfio-pci; it must be so.
        let driver = std::fs::read_link(dev.join("driver"))
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
        if driver.as_deref() != Some("vfio-pci") {
            return Err(format!(
                "spec.domain.devices.interfaces[{i}].sriov: host PCI device {addr} (from {name}) is {}, not bound to vfio-pci: running needs a real SR-IOV VF bound to vfio-pci",
                driver.map_or_else(|| "bound to no driver".to_owned(), |d| format!("bound to {d}"))
            ));
        }
    }
    Ok(found)
}
