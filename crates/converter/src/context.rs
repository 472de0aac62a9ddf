//! The parts a [`ConvertContext`] is made of, grouped by where they come
//! from, so that a launcher keeps each part once and builds a fresh context
//! for every conversion ([`ConvertContext::from_parts`]):
//!
//! - [`HostFacts`]: this host and the pod's directory layout, probed once
//!   when the launcher starts;
//! - [`ClusterOptions`]: the cluster's settings, sent by virt-handler with
//!   every SyncVirtualMachine (`VirtualMachineOptions`; KubeVirt v1.6.6
//!   `manager.go` `generateConverterContext`), or the standalone defaults;
//! - [`Prepared`] and the SR-IOV addresses: what preparing this VMI's
//!   volumes and interfaces found, per sync.

use std::collections::{BTreeMap, BTreeSet};

use api::Arch;

use crate::{numa, ConvertContext, Paths, Prepared, SmbiosOptions, VirtType};

/// Facts about the host and the pod's layout, the same for every
/// conversion of one launcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFacts {
    /// Architecture of the domain (the launcher's host arch in a cluster).
    pub arch: Arch,
    /// KVM or TCG.
    pub virt_type: VirtType,
    /// Directory layout.
    pub paths: Paths,
    /// Host CPUs the pod may use (see [`ConvertContext::pod_cpuset`]).
    pub pod_cpuset: Option<Vec<u32>>,
    /// File names in the EFI firmware directory (see
    /// [`ConvertContext::ovmf_files`]); `None` when not probed.
    pub ovmf_files: Option<BTreeSet<String>>,
    /// The host's NUMA nodes (see [`ConvertContext::host_numa`]).
    pub host_numa: Option<Vec<numa::HostNumaCell>>,
    /// SeaBIOS' debug console (see [`ConvertContext::firmware_debug_log`]).
    pub firmware_debug_log: bool,
    /// The device plugins' variables (see [`ConvertContext::device_plugin_env`]).
    pub device_plugin_env: BTreeMap<String, String>,
}

impl HostFacts {
    /// KubeVirt's in-pod layout for `arch` (AAVMF instead of OVMF on
    /// arm64) and nothing probed.
    pub fn new(arch: Arch, virt_type: VirtType) -> Self {
        let mut paths = Paths::default();
        if arch == Arch::Arm64 {
            "/usr/share/AAVMF".clone_into(&mut paths.ovmf_dir);
        }
        HostFacts {
            arch,
            virt_type,
            paths,
            pod_cpuset: None,
            ovmf_files: None,
            host_numa: None,
            firmware_debug_log: false,
            device_plugin_env: BTreeMap::new(),
        }
    }
}

/// The cluster's settings a conversion depends on. The default is
/// KubeVirt's default cluster configuration (what standalone runs use).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterOptions {
    /// SMBIOS system fields (`VirtualMachineOptions.VirtualMachineSMBios`).
    pub smbios: SmbiosOptions,
    /// Balloon statistics period in seconds (virt-handler default 10; 0 = off).
    pub mem_balloon_stats_period: u32,
    /// Log the serial console to a file (cluster default true).
    pub serial_console_log: bool,
    /// Free page reporting allowed by the cluster (default true).
    pub free_page_reporting: bool,
    /// The cluster's Bochs display for EFI guests (see
    /// [`ConvertContext::bochs_for_efi_guests`]).
    pub bochs_for_efi_guests: bool,
    /// Preallocated or thick-provisioned volumes (see
    /// [`ConvertContext::volumes_discard_ignore`]).
    pub volumes_discard_ignore: BTreeSet<String>,
    /// The ExpandDisks feature gate (see
    /// [`ConvertContext::expand_disks_enabled`]).
    pub expand_disks_enabled: bool,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            smbios: SmbiosOptions::default(),
            mem_balloon_stats_period: 10,
            serial_console_log: true,
            free_page_reporting: true,
            bochs_for_efi_guests: true,
            volumes_discard_ignore: BTreeSet::new(),
            expand_disks_enabled: false,
        }
    }
}

impl ConvertContext {
    /// The context of one conversion: `host`'s facts, `cluster`'s
    /// settings, what preparing the VMI found (`prepared`) and the host
    /// PCI address of each SR-IOV interface (`sriov_pci`, by interface
    /// name).
    pub fn from_parts(
        host: &HostFacts,
        cluster: &ClusterOptions,
        prepared: Prepared,
        sriov_pci: BTreeMap<String, String>,
    ) -> Self {
        ConvertContext {
            arch: host.arch,
            virt_type: host.virt_type,
            paths: host.paths.clone(),
            smbios: cluster.smbios.clone(),
            mem_balloon_stats_period: cluster.mem_balloon_stats_period,
            serial_console_log: cluster.serial_console_log,
            free_page_reporting: cluster.free_page_reporting,
            bochs_for_efi_guests: cluster.bochs_for_efi_guests,
            volumes_discard_ignore: cluster.volumes_discard_ignore.clone(),
            expand_disks_enabled: cluster.expand_disks_enabled,
            prepared,
            pod_cpuset: host.pod_cpuset.clone(),
            ovmf_files: host.ovmf_files.clone(),
            host_numa: host.host_numa.clone(),
            sriov_pci,
            firmware_debug_log: host.firmware_debug_log,
            device_plugin_env: host.device_plugin_env.clone(),
            migration_target: false,
        }
    }

    /// The host part of this context.
    pub fn host_facts(&self) -> HostFacts {
        HostFacts {
            arch: self.arch,
            virt_type: self.virt_type,
            paths: self.paths.clone(),
            pod_cpuset: self.pod_cpuset.clone(),
            ovmf_files: self.ovmf_files.clone(),
            host_numa: self.host_numa.clone(),
            firmware_debug_log: self.firmware_debug_log,
            device_plugin_env: self.device_plugin_env.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_from_default_parts_is_the_default_context() {
        for arch in [Arch::Amd64, Arch::Arm64] {
            let ctx = ConvertContext::from_parts(
                &HostFacts::new(arch, VirtType::Qemu),
                &ClusterOptions::default(),
                Prepared::default(),
                BTreeMap::new(),
            );
            assert_eq!(ctx, ConvertContext::new(arch, VirtType::Qemu));
            assert_eq!(ctx.host_facts(), HostFacts::new(arch, VirtType::Qemu));
        }
        assert_eq!(
            ConvertContext::new(Arch::Arm64, VirtType::Kvm)
                .paths
                .ovmf_dir,
            "/usr/share/AAVMF"
        );
    }

    #[test]
    fn each_part_lands_in_its_fields() {
        let mut host = HostFacts::new(Arch::Amd64, VirtType::Kvm);
        host.pod_cpuset = Some(vec![2, 3]);
        host.ovmf_files = Some(BTreeSet::from(["OVMF_CODE.fd".to_owned()]));
        let cluster = ClusterOptions {
            mem_balloon_stats_period: 0,
            serial_console_log: false,
            bochs_for_efi_guests: false,
            volumes_discard_ignore: BTreeSet::from(["data".to_owned()]),
            expand_disks_enabled: true,
            ..ClusterOptions::default()
        };
        let mut prepared = Prepared::default();
        prepared.block_volumes.insert("blk".into());
        let sriov = BTreeMap::from([("red".to_owned(), "0000:01:00.1".to_owned())]);
        let ctx = ConvertContext::from_parts(&host, &cluster, prepared.clone(), sriov.clone());
        assert_eq!(ctx.host_facts(), host);
        assert_eq!(
            (ctx.mem_balloon_stats_period, ctx.serial_console_log),
            (0, false)
        );
        assert!(!ctx.bochs_for_efi_guests && ctx.expand_disks_enabled);
        assert!(ctx.free_page_reporting);
        assert_eq!(ctx.volumes_discard_ignore, cluster.volumes_discard_ignore);
        assert_eq!((ctx.prepared, ctx.sriov_pci), (prepared, sriov));
    }
}
