//! What a KubeVirt cluster adds to a VMI before its launcher sees it, for
//! a VMI run without one (`virt-launcher convert` and `run`).
//!
//! In a cluster, virt-api's mutating webhooks (the VM mutator for a
//! VirtualMachine, then `SetDefaultVirtualMachineInstance` for its VMI) and
//! virt-controller apply defaults that depend on the cluster's
//! configuration; the VMI reaches virt-handler, and the launcher, with them.
//! [`crate::defaults::apply`] covers the defaults every VMI gets whatever
//! the cluster; this module adds those of KubeVirt's *default* cluster
//! configuration (KubeVirt v1.6.6 `pkg/virt-config`, `pkg/defaults`,
//! `pkg/network/vmispec`, `pkg/virt-api/webhooks/mutating-webhook/mutators`):
//!
//! - the default network interface: a VMI with no interfaces and no
//!   networks (and `autoattachPodInterface` not `false`) gets interface
//!   `default` with the bridge binding on the pod network (the cluster's
//!   `network.defaultNetworkInterface`, `bridge` by default, allowed on the
//!   pod network by default);
//! - under the VM rollout strategy `LiveUpdate` (the default), the CPU and
//!   memory hot-plug maximums: `maxSockets` ← 4 × `sockets` (the default
//!   `maxHotplugRatio`, at most 512 vCPUs in all), and `maxGuest` ← 4 ×
//!   `guest` when memory hot-plug suits the VMI (amd64, at least 1 GiB,
//!   2 MiB aligned — 1 GiB with 1 GiB hugepages —, not realtime, no guest
//!   NUMA passthrough, no launch security); neither on arm64;
//! - for a VirtualMachine, the VM mutator's firmware defaults: a
//!   `firmware.serial` (SMBIOS system serial). KubeVirt picks a random
//!   UUID; here it is derived from namespace and name, as the firmware UUID
//!   and the UID are ([`crate::defaults`]), so re-running a manifest keeps
//!   the machine's identity.
//!
//! Never applied in a pod: there the VMI arrives already defaulted by the
//! real cluster, whatever its configuration.

use std::fmt;
use std::str::FromStr;

use crate::arch::Arch;
use crate::quantity::Quantity;
use crate::vmi::{Interface, Network, PodNetwork, VirtualMachineInstance};

/// KubeVirt's `spec.configuration.vmRolloutStrategy`: how changes to a
/// running VM's spec reach it. Under `LiveUpdate` virt-api prepares every
/// VMI for CPU and memory hot-plug; under `Stage` it does not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VmRolloutStrategy {
    /// Changes wait for the next restart; no hot-plug maximums.
    Stage,
    /// KubeVirt's default: hot-plug maximums set at creation.
    #[default]
    LiveUpdate,
}

impl VmRolloutStrategy {
    /// KubeVirt's spelling (`Stage`, `LiveUpdate`).
    pub fn as_str(self) -> &'static str {
        match self {
            VmRolloutStrategy::Stage => "Stage",
            VmRolloutStrategy::LiveUpdate => "LiveUpdate",
        }
    }
}

impl fmt::Display for VmRolloutStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rollout strategy KubeVirt does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a VM rollout strategy (Stage or LiveUpdate)")]
pub struct UnknownRolloutStrategy(pub String);

impl FromStr for VmRolloutStrategy {
    type Err = UnknownRolloutStrategy;

    /// KubeVirt's exact spelling: `Stage` or `LiveUpdate`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Stage" => Ok(VmRolloutStrategy::Stage),
            "LiveUpdate" => Ok(VmRolloutStrategy::LiveUpdate),
            other => Err(UnknownRolloutStrategy(other.to_owned())),
        }
    }
}

/// The cluster settings standalone defaulting plays: KubeVirt's default
/// configuration except for what a flag changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterDefaults {
    /// `vmRolloutStrategy` (default `LiveUpdate`).
    pub vm_rollout_strategy: VmRolloutStrategy,
}

/// KubeVirt's default `liveUpdateConfiguration.maxHotplugRatio`.
pub const MAX_HOTPLUG_RATIO: u32 = 4;
/// Most vCPUs the CPU hot-plug maximum may give (KubeVirt's bound for
/// every machine type).
pub const MAX_HOTPLUG_VCPUS: u32 = 512;
/// Least guest memory for memory hot-plug (1 GiB).
pub const MIN_HOTPLUG_GUEST_BYTES: u64 = 1 << 30;
/// Alignment of guest memory and its maximum for memory hot-plug (2 MiB,
/// the virtio-mem block), and with 1 GiB hugepages (1 GiB).
pub const HOTPLUG_BLOCK_BYTES: u64 = 2 << 20;
/// Block of memory hot-plug with 1 GiB hugepages.
pub const HOTPLUG_BLOCK_1G_BYTES: u64 = 1 << 30;
/// Name of the default interface and of its pod network.
pub const DEFAULT_NETWORK_NAME: &str = "default";

/// What [`apply`] added, for the front ends that act on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// The VMI got the default pod interface (it named none).
    pub default_pod_interface: bool,
}

/// Applies the cluster's defaults to a VMI already through
/// [`crate::defaults::apply`] (its architecture, topology and guest memory
/// are set), for `arch` when the VMI names no architecture. `from_vm`: the
/// VMI is a VirtualMachine's template, which also gets the VM mutator's
/// firmware serial. Applying it twice changes nothing.
pub fn apply(
    vmi: &mut VirtualMachineInstance,
    arch: Arch,
    from_vm: bool,
    cluster: &ClusterDefaults,
) -> Applied {
    let arch = vmi.arch_or(arch);
    if from_vm {
        set_vm_firmware_serial(vmi);
    }
    let applied = Applied {
        default_pod_interface: set_default_network_interface(vmi),
    };
    set_guest_memory_status(vmi);
    if cluster.vm_rollout_strategy == VmRolloutStrategy::LiveUpdate && arch != Arch::Arm64 {
        set_cpu_hotplug_maximum(vmi);
        set_memory_hotplug_maximum(vmi, arch);
    }
    applied
}

/// `setGuestMemoryStatus` (KubeVirt `pkg/defaults`, when the VMI is
/// created): `status.memory` `{guestAtBoot, guestCurrent, guestRequested}`
/// all `spec.domain.memory.guest`, what memory hot-plug measures from. A
/// VMI that arrives with a `status.memory` keeps it (so applying twice,
/// or to a VMI a cluster defaulted, changes nothing).
fn set_guest_memory_status(vmi: &mut VirtualMachineInstance) {
    let Some(guest) = vmi
        .spec
        .domain
        .memory
        .as_ref()
        .and_then(|m| m.guest.as_ref())
        .map(|q| q.as_str().to_owned())
    else {
        return;
    };
    let status = vmi
        .status
        .get_or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    if let Some(map) = status.as_object_mut() {
        map.entry("memory").or_insert_with(|| {
            serde_json::json!({
                "guestAtBoot": guest,
                "guestCurrent": guest,
                "guestRequested": guest,
            })
        });
    }
}

/// `SetDefaultNetworkInterface` under the default cluster configuration:
/// interface `default` (bridge binding) on network `default` (the pod
/// network), when `autoattachPodInterface` is not `false` and the VMI has
/// neither interfaces nor networks. Returns whether it added them.
fn set_default_network_interface(vmi: &mut VirtualMachineInstance) -> bool {
    let spec = &mut vmi.spec;
    if spec.domain.devices.autoattach_pod_interface == Some(false)
        || !spec.networks.is_empty()
        || !spec.domain.devices.interfaces.is_empty()
    {
        return false;
    }
    spec.domain.devices.interfaces.push(Interface {
        name: DEFAULT_NETWORK_NAME.into(),
        bridge: Some(serde_json::Value::Object(serde_json::Map::new())),
        ..Interface::default()
    });
    spec.networks.push(Network {
        name: DEFAULT_NETWORK_NAME.into(),
        pod: Some(PodNetwork::default()),
        multus: None,
    });
    true
}

/// `setupCPUHotplug` with no `maximumSockets` configured: `maxSockets` ←
/// `sockets` × [`MAX_HOTPLUG_RATIO`], lowered (not below `sockets`) so that
/// `maxSockets × cores × threads` stays within [`MAX_HOTPLUG_VCPUS`].
fn set_cpu_hotplug_maximum(vmi: &mut VirtualMachineInstance) {
    let Some(cpu) = vmi.spec.domain.cpu.as_mut() else {
        return;
    };
    if cpu.max_sockets != 0 {
        return;
    }
    let mut max = cpu.sockets.saturating_mul(MAX_HOTPLUG_RATIO);
    let per_socket = cpu.cores.saturating_mul(cpu.threads);
    if per_socket != 0 && max.saturating_mul(per_socket) > MAX_HOTPLUG_VCPUS {
        max = (MAX_HOTPLUG_VCPUS / per_socket).max(cpu.sockets);
    }
    cpu.max_sockets = max;
}

/// The virtio-mem block (bytes) of `memory`: 1 GiB when 1Gi hugepages
/// back the guest, else 2 MiB (KubeVirt `pkg/liveupdate/memory`: the
/// alignment of `guest` and `maxGuest` and the device's `<block>`).
pub fn memory_hotplug_block(memory: &crate::vmi::Memory) -> u64 {
    match memory.hugepages.as_ref() {
        Some(h) if h.page_size == "1Gi" => HOTPLUG_BLOCK_1G_BYTES,
        _ => HOTPLUG_BLOCK_BYTES,
    }
}

/// `setupMemoryHotplug` with no `maximumGuestMemory` configured: `maxGuest`
/// ← `guest` × [`MAX_HOTPLUG_RATIO`] when KubeVirt's `ValidateLiveUpdateMemory`
/// accepts it (otherwise memory hot-plug stays off, silently, as there).
fn set_memory_hotplug_maximum(vmi: &mut VirtualMachineInstance, arch: Arch) {
    let dom = &vmi.spec.domain;
    if dom.memory.as_ref().is_some_and(|m| m.max_guest.is_some()) {
        return;
    }
    let cpu = dom.cpu.as_ref();
    if cpu.is_some_and(|c| c.realtime.is_some())
        || cpu
            .and_then(|c| c.numa.as_ref())
            .is_some_and(|n| n.guest_mapping_passthrough.is_some())
        || dom.launch_security.is_some()
        || arch != Arch::Amd64
    {
        return;
    }
    let Some(memory) = vmi.spec.domain.memory.as_mut() else {
        return;
    };
    let Some(guest) = memory.guest.as_ref().and_then(|q| q.to_bytes().ok()) else {
        return;
    };
    let block = memory_hotplug_block(memory);
    let Some(max) = guest.checked_mul(u64::from(MAX_HOTPLUG_RATIO)) else {
        return;
    };
    if guest % block != 0 || max % block != 0 || guest < MIN_HOTPLUG_GUEST_BYTES {
        return;
    }
    if let Ok(q) = Quantity::parse(&Quantity::binary_si(max)) {
        memory.max_guest = Some(q);
    }
}

/// The VM mutator's `firmware.serial` for a VirtualMachine that sets none,
/// derived from namespace and name.
fn set_vm_firmware_serial(vmi: &mut VirtualMachineInstance) {
    let key = format!(
        "kubevirt.io/v1/namespaces/{}/virtualmachines/{}/serial",
        vmi.namespace(),
        vmi.metadata.name
    );
    let firmware = vmi
        .spec
        .domain
        .firmware
        .get_or_insert_with(Default::default);
    if firmware.serial.as_deref().is_none_or(str::is_empty) {
        firmware.serial = Some(crate::defaults::derived_uuid(&key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(doc: &str, arch: Arch, strategy: VmRolloutStrategy) -> VirtualMachineInstance {
        let (mut vmi, kind) = crate::load::from_slice_with_kind(doc.as_bytes()).unwrap();
        crate::defaults::apply(&mut vmi, arch);
        apply(
            &mut vmi,
            arch,
            kind == crate::load::Kind::VirtualMachine,
            &ClusterDefaults {
                vm_rollout_strategy: strategy,
            },
        );
        vmi
    }

    const HEAD: &str =
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a, namespace: n}\n";

    #[test]
    fn strategy_spelling_is_kubevirts() {
        assert_eq!("Stage".parse(), Ok(VmRolloutStrategy::Stage));
        assert_eq!("LiveUpdate".parse(), Ok(VmRolloutStrategy::LiveUpdate));
        assert_eq!(
            "liveupdate"
                .parse::<VmRolloutStrategy>()
                .unwrap_err()
                .to_string(),
            "\"liveupdate\" is not a VM rollout strategy (Stage or LiveUpdate)"
        );
        assert_eq!(VmRolloutStrategy::default(), VmRolloutStrategy::LiveUpdate);
    }

    #[test]
    fn a_vmi_without_networks_gets_the_default_bridge_interface() {
        let vmi = defaulted(
            &format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 128Mi}}\n"),
            Arch::Amd64,
            VmRolloutStrategy::Stage,
        );
        let i = &vmi.spec.domain.devices.interfaces;
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].name, "default");
        assert_eq!(i[0].bridge, Some(serde_json::json!({})));
        assert_eq!(vmi.spec.networks[0].name, "default");
        assert!(vmi.spec.networks[0].pod.is_some());
        // Opted out, or networks of its own: nothing added.
        let off = defaulted(
            &format!("{HEAD}spec:\n  domain:\n    devices: {{autoattachPodInterface: false}}\n    memory: {{guest: 128Mi}}\n"),
            Arch::Amd64,
            VmRolloutStrategy::Stage,
        );
        assert!(off.spec.domain.devices.interfaces.is_empty());
        assert!(off.spec.networks.is_empty());
        let own = defaulted(
            &format!("{HEAD}spec:\n  domain:\n    devices:\n      interfaces: [{{name: default, masquerade: {{}}}}]\n    memory: {{guest: 128Mi}}\n  networks: [{{name: default, pod: {{}}}}]\n"),
            Arch::Amd64,
            VmRolloutStrategy::Stage,
        );
        assert_eq!(own.spec.domain.devices.interfaces.len(), 1);
        assert!(own.spec.domain.devices.interfaces[0].masquerade.is_some());
    }

    #[test]
    fn live_update_sets_hotplug_maximums_stage_does_not() {
        let doc = format!("{HEAD}spec:\n  domain:\n    cpu: {{sockets: 2, cores: 2}}\n    memory: {{guest: 2Gi}}\n");
        let live = defaulted(&doc, Arch::Amd64, VmRolloutStrategy::LiveUpdate);
        assert_eq!(live.spec.domain.cpu.as_ref().unwrap().max_sockets, 8);
        let mem = live.spec.domain.memory.as_ref().unwrap();
        assert_eq!(mem.max_guest.as_ref().unwrap().as_str(), "8Gi");
        // setGuestMemoryStatus: what memory hot-plug measures from.
        assert_eq!(
            live.status.as_ref().unwrap()["memory"],
            serde_json::json!({"guestAtBoot": "2Gi", "guestCurrent": "2Gi", "guestRequested": "2Gi"})
        );
        let stage = defaulted(&doc, Arch::Amd64, VmRolloutStrategy::Stage);
        assert_eq!(stage.spec.domain.cpu.as_ref().unwrap().max_sockets, 0);
        assert!(stage
            .spec
            .domain
            .memory
            .as_ref()
            .unwrap()
            .max_guest
            .is_none());
        // Idempotent.
        let mut again = live.clone();
        apply(&mut again, Arch::Amd64, false, &ClusterDefaults::default());
        assert_eq!(again, live);
    }

    #[test]
    fn memory_hotplug_only_where_kubevirt_allows_it() {
        let max = |doc: String, arch| {
            defaulted(&doc, arch, VmRolloutStrategy::LiveUpdate)
                .spec
                .domain
                .memory
                .unwrap()
                .max_guest
                .map(|q| q.as_str().to_owned())
        };
        // Below 1 GiB, not 2 MiB aligned, realtime, arm64 / s390x: none.
        assert_eq!(
            max(
                format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 1023Mi}}\n"),
                Arch::Amd64
            ),
            None
        );
        assert_eq!(
            max(
                format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 1025Mi}}\n"),
                Arch::Amd64
            ),
            None
        );
        assert_eq!(max(format!("{HEAD}spec:\n  domain:\n    cpu: {{realtime: {{}}}}\n    memory: {{guest: 1Gi}}\n"), Arch::Amd64), None);
        assert_eq!(
            max(
                format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 1Gi}}\n"),
                Arch::Arm64
            ),
            None
        );
        assert_eq!(
            max(
                format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 1Gi}}\n"),
                Arch::S390x
            ),
            None
        );
        assert_eq!(
            max(
                format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 1Gi}}\n"),
                Arch::Amd64
            )
            .as_deref(),
            Some("4Gi")
        );
        assert_eq!(
            max(
                format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 1536Mi}}\n"),
                Arch::Amd64
            )
            .as_deref(),
            Some("6Gi")
        );
        // 1 GiB hugepages need a 1 GiB aligned guest.
        assert_eq!(max(format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 1026Mi, hugepages: {{pageSize: 1Gi}}}}\n"), Arch::Amd64), None);
        // A maximum already set stays.
        assert_eq!(
            max(
                format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 1Gi, maxGuest: 2Gi}}\n"),
                Arch::Amd64
            )
            .as_deref(),
            Some("2Gi")
        );
    }

    #[test]
    fn cpu_hotplug_maximum_is_bounded_and_skipped_on_arm64() {
        let max = |cpu: &str, arch| {
            defaulted(
                &format!("{HEAD}spec:\n  domain:\n    cpu: {cpu}\n    memory: {{guest: 128Mi}}\n"),
                arch,
                VmRolloutStrategy::LiveUpdate,
            )
            .spec
            .domain
            .cpu
            .unwrap()
            .max_sockets
        };
        // A topology naming only cores keeps sockets at 0, and so the maximum.
        assert_eq!(max("{cores: 2}", Arch::Amd64), 0);
        assert_eq!(max("{sockets: 1}", Arch::Amd64), 4);
        assert_eq!(max("{sockets: 3}", Arch::Amd64), 12);
        // At most 512 vCPUs, never fewer sockets than the VMI has; an unset
        // threads count (0) leaves the product at 0, unbounded, as in KubeVirt.
        assert_eq!(max("{sockets: 2, cores: 100, threads: 1}", Arch::Amd64), 5);
        assert_eq!(max("{sockets: 8, cores: 100, threads: 1}", Arch::Amd64), 8);
        assert_eq!(max("{sockets: 2, cores: 100}", Arch::Amd64), 8);
        assert_eq!(max("{sockets: 2, maxSockets: 3}", Arch::Amd64), 3);
        assert_eq!(max("{sockets: 2}", Arch::Arm64), 0);
        assert_eq!(max("{sockets: 2}", Arch::S390x), 8);
    }

    #[test]
    fn a_virtual_machine_gets_a_stable_firmware_serial() {
        let vm = "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: vm1, namespace: ns}\nspec:\n  template:\n    spec:\n      domain:\n        memory: {guest: 64Mi}\n";
        let a = defaulted(vm, Arch::Amd64, VmRolloutStrategy::Stage);
        let b = defaulted(vm, Arch::Amd64, VmRolloutStrategy::LiveUpdate);
        let serial = a
            .spec
            .domain
            .firmware
            .as_ref()
            .unwrap()
            .serial
            .clone()
            .unwrap();
        assert!(uuid::Uuid::parse_str(&serial).is_ok(), "{serial}");
        assert_eq!(b.spec.domain.firmware.unwrap().serial.unwrap(), serial);
        assert_ne!(
            Some(serial.as_str()),
            a.spec.domain.firmware.unwrap().uuid.as_deref()
        );
        // One the VM sets is kept; a VMI gets none.
        let own = defaulted(
            &vm.replace(
                "memory: {guest: 64Mi}",
                "memory: {guest: 64Mi}\n        firmware: {serial: mine}",
            ),
            Arch::Amd64,
            VmRolloutStrategy::Stage,
        );
        assert_eq!(
            own.spec.domain.firmware.unwrap().serial.as_deref(),
            Some("mine")
        );
        let vmi = defaulted(
            &format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n"),
            Arch::Amd64,
            VmRolloutStrategy::Stage,
        );
        assert_eq!(vmi.spec.domain.firmware.unwrap().serial, None);
    }
}
