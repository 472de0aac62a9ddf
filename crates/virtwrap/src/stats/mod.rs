//! KubeVirt's domain statistics (`GetDomainStats`): [`collect`] fills
//! [`wire::stats::DomainStats`] from the per-domain libvirt calls of the
//! `virt` binding; `mapping` turns each call's result into KubeVirt's
//! fields, `devices` lists the disks and interfaces of the live XML.
//!
//! # Where the numbers come from
//!
//! KubeVirt reads libvirt's bulk statistics (`virConnectGetAllDomainStats`),
//! which the safe API of the `virt` crate does not expose. [`collect`] uses
//! the per-domain calls instead; see its documentation for the field-by-field
//! sources and for what stays unset.

mod devices;
mod mapping;

pub use devices::devices_from_xml;
pub use mapping::{
    apply_memory_stat, block_entry, job_info_from, memory_from_stats, net_entry, online_vcpus,
    DiskRef, InterfaceRef,
};

use virt::domain::Domain as VirtDomain;
use virt::sys;
use wire::stats::{DomainStats, DomainStatsCpu};

/// Collects KubeVirt's statistics of a running or paused domain.
///
/// | JSON | libvirt call |
/// |---|---|
/// | `Name`, `UUID` | `virDomainGetName`, `virDomainGetUUIDString` |
/// | `Cpu.Time` | `virDomainGetInfo` `cpuTime` |
/// | `NrVirtCpu` | `virDomainGetInfo` `nrVirtCpu` |
/// | `Memory.Total` | `virDomainGetInfo` `memory` (KiB) |
/// | other `Memory` fields | `virDomainMemoryStats` ([`apply_memory_stat`]) |
/// | `Vcpu[i].State` | `virDomainGetVcpusFlags(LIVE)` online count, each `RUNNING` ([`online_vcpus`]) |
/// | `Block[i]` name/alias/path/backing index | live XML `<disk>` |
/// | `Block[i]` rd/wr reqs and bytes, errors | `virDomainBlockStats(<target dev>)` |
/// | `Block[i]` allocation/capacity/physical | `virDomainGetBlockInfo(<target dev>)`, name for name |
/// | `Net[i]` | live XML `<interface>` + `virDomainInterfaceStats(<target dev>)` |
///
/// Left unset because the safe `virt` API has no call for them:
/// `Cpu.User`/`System`, `Vcpu[i]` time/wait/delay, `Block[i]` rd/wr/fl
/// times and flush requests, `CPUMap` (`CPUMapSet` false, `null`),
/// `DirtyRate` (`null`). `MigrateDomainJobInfo` is `null`: KubeVirt reports
/// the migration monitor's latest value there (see [`job_info_from`]).
///
/// `virDomainGetBlockInfo` is not the bulk statistics' source for
/// allocation and physical: for a qcow2 file libvirt's bulk `allocation` is
/// QEMU's highest written offset and `physical` the image's on-disk size,
/// whereas `virDomainGetBlockInfo` gives the on-disk size as `allocation`
/// and the file length as `physical`. Capacity is the same in both.
///
/// Per-device and vCPU-count failures (an empty CD-ROM, a vanished tap)
/// leave those counters unset rather than failing the whole call.
///
/// # Errors
/// The domain-level calls (name, UUID, info, memory statistics, XML) fail,
/// e.g. because the domain is not running.
pub fn collect(dom: &VirtDomain) -> Result<DomainStats, virt::error::Error> {
    let name = dom.get_name()?;
    let uuid = dom.get_uuid_string()?;
    let info = dom.get_info()?;
    let mem_stats = dom.memory_stats(0)?;
    let xml_text = dom.get_xml_desc(0)?;

    let vcpu = match dom.get_vcpus_flags(sys::VIR_DOMAIN_VCPU_LIVE) {
        Ok(n) => online_vcpus(n),
        Err(e) => {
            tracing::debug!(domain = %name, error = %e, "vCPU count unavailable");
            Vec::new()
        }
    };

    let (disks, ifaces) = devices_from_xml(&xml_text).unwrap_or_else(|e| {
        tracing::warn!(domain = %name, error = %e, "domain XML unreadable; no disk or interface statistics");
        (Vec::new(), Vec::new())
    });

    let block = disks
        .iter()
        .map(|d| {
            let stats = dom
                .get_block_stats(&d.dev)
                .map_err(|e| tracing::debug!(disk = %d.dev, error = %e, "no block statistics"))
                .ok();
            let binfo = dom
                .get_block_info(&d.dev, 0)
                .map_err(|e| tracing::debug!(disk = %d.dev, error = %e, "no block info"))
                .ok();
            block_entry(d, stats.as_ref(), binfo.as_ref())
        })
        .collect();

    let net = ifaces
        .iter()
        .map(|i| {
            let stats = dom
                .interface_stats(&i.dev)
                .map_err(
                    |e| tracing::debug!(interface = %i.dev, error = %e, "no interface statistics"),
                )
                .ok();
            net_entry(i, stats.as_ref())
        })
        .collect();

    Ok(DomainStats {
        name,
        uuid,
        cpu: Some(DomainStatsCpu {
            time_set: true,
            time: info.cpu_time,
            ..Default::default()
        }),
        memory: Some(memory_from_stats(
            mem_stats.iter().map(|s| (s.tag, s.val)),
            Some(info.memory),
        )),
        migrate_domain_job_info: None,
        vcpu,
        net,
        block,
        cpu_map_set: false,
        cpu_map: None,
        nr_virt_cpu: info.nr_virt_cpu,
        dirty_rate: None,
        load: None,
    })
}
