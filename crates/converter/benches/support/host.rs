//! The benchmark VMIs and the host they are converted for, shared by
//! `benches/convert.rs`, `examples/throughput.rs` and `tests/large_vmi.rs`.

// Each includer uses a part of it.
#![allow(dead_code)]

use api::Arch;
use converter::numa::HostNumaCell;
use converter::{ConvertContext, VirtType};

/// KubeVirt's vmi-ephemeral example as JSON (one container disk, 128Mi).
pub const SMALL: &str = include_str!("../small.json");

/// The large VMI as virt-handler would send it (compact JSON): 16 disks on
/// virtio/SATA/SCSI (container, empty and PVC volumes, one dedicated I/O
/// thread), 8 NICs (masquerade on the pod network with ports, 7 bridges on
/// Multus networks; virtio with multiqueue, e1000e, rtl8139), 16 dedicated
/// vCPUs (2 sockets × 4 cores × 2 threads, isolated emulator thread,
/// custom model with features), 16Gi in 2Mi hugepages with guest NUMA
/// passthrough, EFI secure boot with SMM, Hyper-V, timers, TPM, watchdog,
/// RNG, virtio tablet.
pub const LARGE: &str = include_str!("../large.json");

/// An amd64 KVM host as the launcher would probe it: a pod cpuset of 64
/// CPUs on two NUMA nodes numbered alternately (node 0 the even CPUs,
/// node 1 the odd ones, as on many two-socket servers), so the large VMI's
/// 16 pinned vCPUs span both nodes and its guest gets two NUMA cells.
pub fn host() -> ConvertContext {
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    ctx.pod_cpuset = Some((0..64).collect());
    ctx.host_numa = Some(
        (0..2)
            .map(|id| HostNumaCell {
                id,
                cpus: (0..64).filter(|c| c % 2 == id).collect(),
            })
            .collect(),
    );
    ctx
}
