//! libvirt's per-domain results in KubeVirt's statistics fields: memory
//! statistics tags, block and interface counters (`-1`: not provided),
//! migration job statistics, online vCPUs.

use virt::domain::{BlockInfo, BlockStats, InterfaceStats, JobStats};
use virt::sys;
use wire::api_domain::USER_ALIAS_PREFIX;
use wire::stats::{
    DomainJobInfo, DomainStatsBlock, DomainStatsMemory, DomainStatsNet, DomainStatsVcpu,
    VCPU_RUNNING,
};

/// Records one `virDomainMemoryStats` entry in `mem`; `false` for tags
/// KubeVirt does not report (`LAST_UPDATE`, `HUGETLB_*`, unknown tags).
///
/// `tag` is a `VIR_DOMAIN_MEMORY_STAT_*` number, `val` its value (KiB for
/// sizes, a count for faults).
pub fn apply_memory_stat(mem: &mut DomainStatsMemory, tag: u32, val: u64) -> bool {
    let (set, field) = match tag {
        sys::VIR_DOMAIN_MEMORY_STAT_SWAP_IN => (&mut mem.swap_in_set, &mut mem.swap_in),
        sys::VIR_DOMAIN_MEMORY_STAT_SWAP_OUT => (&mut mem.swap_out_set, &mut mem.swap_out),
        sys::VIR_DOMAIN_MEMORY_STAT_MAJOR_FAULT => (&mut mem.major_fault_set, &mut mem.major_fault),
        sys::VIR_DOMAIN_MEMORY_STAT_MINOR_FAULT => (&mut mem.minor_fault_set, &mut mem.minor_fault),
        sys::VIR_DOMAIN_MEMORY_STAT_UNUSED => (&mut mem.unused_set, &mut mem.unused),
        sys::VIR_DOMAIN_MEMORY_STAT_AVAILABLE => (&mut mem.available_set, &mut mem.available),
        sys::VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON => {
            (&mut mem.actual_balloon_set, &mut mem.actual_balloon)
        }
        sys::VIR_DOMAIN_MEMORY_STAT_RSS => (&mut mem.rss_set, &mut mem.rss),
        sys::VIR_DOMAIN_MEMORY_STAT_USABLE => (&mut mem.usable_set, &mut mem.usable),
        sys::VIR_DOMAIN_MEMORY_STAT_DISK_CACHES => (&mut mem.cached_set, &mut mem.cached),
        _ => return false,
    };
    *set = true;
    *field = val;
    true
}

/// `Memory` from `(tag, value)` pairs of `virDomainMemoryStats` and the
/// domain's current memory in KiB (`virDomainInfo.memory`, → `Total`).
/// A `…Set` flag is true only for what libvirt returned.
pub fn memory_from_stats<I>(stats: I, total_kib: Option<u64>) -> DomainStatsMemory
where
    I: IntoIterator<Item = (u32, u64)>,
{
    let mut mem = DomainStatsMemory::default();
    if let Some(total) = total_kib {
        mem.total_set = true;
        mem.total = total;
    }
    for (tag, val) in stats {
        apply_memory_stat(&mut mem, tag, val);
    }
    mem
}

/// libvirt reports `-1` for a counter the hypervisor does not provide.
fn counter(v: i64) -> Option<u64> {
    u64::try_from(v).ok()
}

fn put(set: &mut bool, field: &mut u64, v: Option<u64>) {
    if let Some(v) = v {
        *set = true;
        *field = v;
    }
}

/// KubeVirt's `Alias.GetName()`: the alias without the `ua-` prefix.
fn alias_name(alias: &str) -> &str {
    alias.strip_prefix(USER_ALIAS_PREFIX).unwrap_or(alias)
}

/// A disk as the domain XML describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskRef {
    /// `<target dev>`.
    pub dev: String,
    /// `<alias name>`, as written (with `ua-`).
    pub alias: Option<String>,
    /// `<source file>` or `<source dev>`.
    pub path: Option<String>,
    /// `<source index>`.
    pub index: Option<u32>,
}

/// A network interface as the domain XML describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterfaceRef {
    /// `<target dev>`: the host-side device libvirt reads counters from.
    pub dev: String,
    /// `<alias name>`, as written (with `ua-`).
    pub alias: Option<String>,
}

/// `Block` entry of `disk` from `virDomainBlockStats` and
/// `virDomainGetBlockInfo` results (either may be missing, e.g. for an
/// empty CD-ROM).
pub fn block_entry(
    disk: &DiskRef,
    stats: Option<&BlockStats>,
    info: Option<&BlockInfo>,
) -> DomainStatsBlock {
    let mut b = DomainStatsBlock {
        name_set: true,
        name: disk.dev.clone(),
        alias: disk
            .alias
            .as_deref()
            .map(alias_name)
            .unwrap_or_default()
            .to_owned(),
        ..Default::default()
    };
    if let Some(i) = disk.index {
        b.backing_index_set = true;
        b.backing_index = i;
    }
    if let Some(p) = &disk.path {
        b.path_set = true;
        b.path.clone_from(p);
    }
    if let Some(s) = stats {
        put(&mut b.rd_reqs_set, &mut b.rd_reqs, counter(s.rd_req));
        put(&mut b.rd_bytes_set, &mut b.rd_bytes, counter(s.rd_bytes));
        put(&mut b.wr_reqs_set, &mut b.wr_reqs, counter(s.wr_req));
        put(&mut b.wr_bytes_set, &mut b.wr_bytes, counter(s.wr_bytes));
        put(&mut b.errors_set, &mut b.errors, counter(s.errs));
    }
    if let Some(i) = info {
        put(&mut b.allocation_set, &mut b.allocation, Some(i.allocation));
        put(&mut b.capacity_set, &mut b.capacity, Some(i.capacity));
        put(&mut b.physical_set, &mut b.physical, Some(i.physical));
    }
    b
}

/// `Net` entry of `iface` from a `virDomainInterfaceStats` result.
pub fn net_entry(iface: &InterfaceRef, stats: Option<&InterfaceStats>) -> DomainStatsNet {
    let mut n = DomainStatsNet {
        name_set: true,
        name: iface.dev.clone(),
        // KubeVirt looks the device up in a map built from the same XML,
        // so the alias is "found" for every listed interface.
        alias_set: true,
        alias: iface
            .alias
            .as_deref()
            .map(alias_name)
            .unwrap_or_default()
            .to_owned(),
        ..Default::default()
    };
    if let Some(s) = stats {
        put(&mut n.rx_bytes_set, &mut n.rx_bytes, counter(s.rx_bytes));
        put(&mut n.rx_pkts_set, &mut n.rx_pkts, counter(s.rx_packets));
        put(&mut n.rx_errs_set, &mut n.rx_errs, counter(s.rx_errs));
        put(&mut n.rx_drop_set, &mut n.rx_drop, counter(s.rx_drop));
        put(&mut n.tx_bytes_set, &mut n.tx_bytes, counter(s.tx_bytes));
        put(&mut n.tx_pkts_set, &mut n.tx_pkts, counter(s.tx_packets));
        put(&mut n.tx_errs_set, &mut n.tx_errs, counter(s.tx_errs));
        put(&mut n.tx_drop_set, &mut n.tx_drop, counter(s.tx_drop));
    }
    n
}

/// `MigrateDomainJobInfo` from `virDomainGetJobStats` (for the migration
/// monitor, which keeps the latest value and hands it to [`collect`](super::collect)'s
/// caller). The dirty rate is pages/s × page size, set only when libvirt
/// returned both.
pub fn job_info_from(job: &JobStats) -> DomainJobInfo {
    let mut j = DomainJobInfo::default();
    put(&mut j.data_total_set, &mut j.data_total, job.data_total);
    put(
        &mut j.data_processed_set,
        &mut j.data_processed,
        job.data_processed,
    );
    put(&mut j.memory_bps_set, &mut j.memory_bps, job.mem_bps);
    put(
        &mut j.data_remaining_set,
        &mut j.data_remaining,
        job.data_remaining,
    );
    if let (Some(rate), Some(page)) = (job.mem_dirty_rate, job.mem_page_size) {
        j.mem_dirty_rate_set = true;
        j.mem_dirty_rate = rate.saturating_mul(page);
    }
    j
}

/// `count` online vCPUs as libvirt's QEMU driver lists them: it reports
/// every online vCPU as `VIR_VCPU_RUNNING`. Times stay unset.
pub fn online_vcpus(count: u32) -> Vec<DomainStatsVcpu> {
    (0..count)
        .map(|_| DomainStatsVcpu {
            state_set: true,
            state: VCPU_RUNNING,
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn memory_tags_map_to_kubevirt_fields() {
        let stats = [
            (sys::VIR_DOMAIN_MEMORY_STAT_SWAP_IN, 1),
            (sys::VIR_DOMAIN_MEMORY_STAT_SWAP_OUT, 2),
            (sys::VIR_DOMAIN_MEMORY_STAT_MAJOR_FAULT, 3),
            (sys::VIR_DOMAIN_MEMORY_STAT_MINOR_FAULT, 4),
            (sys::VIR_DOMAIN_MEMORY_STAT_UNUSED, 5),
            (sys::VIR_DOMAIN_MEMORY_STAT_AVAILABLE, 6),
            (sys::VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON, 7),
            (sys::VIR_DOMAIN_MEMORY_STAT_RSS, 8),
            (sys::VIR_DOMAIN_MEMORY_STAT_USABLE, 9),
            (sys::VIR_DOMAIN_MEMORY_STAT_LAST_UPDATE, 10),
            (sys::VIR_DOMAIN_MEMORY_STAT_DISK_CACHES, 11),
            (sys::VIR_DOMAIN_MEMORY_STAT_HUGETLB_PGALLOC, 12),
            (sys::VIR_DOMAIN_MEMORY_STAT_HUGETLB_PGFAIL, 13),
        ];
        let m = memory_from_stats(stats, Some(100));
        assert_eq!(
            m,
            DomainStatsMemory {
                swap_in_set: true,
                swap_in: 1,
                swap_out_set: true,
                swap_out: 2,
                major_fault_set: true,
                major_fault: 3,
                minor_fault_set: true,
                minor_fault: 4,
                unused_set: true,
                unused: 5,
                available_set: true,
                available: 6,
                actual_balloon_set: true,
                actual_balloon: 7,
                rss_set: true,
                rss: 8,
                usable_set: true,
                usable: 9,
                cached_set: true,
                cached: 11,
                total_set: true,
                total: 100,
            }
        );
    }

    #[test]
    fn memory_tag_numbers_are_libvirts() {
        // The raw numbers of virDomainMemoryStatTags (libvirt-domain.h).
        let mut m = DomainStatsMemory::default();
        for (tag, want) in [
            (0, true),
            (6, true),
            (7, true),
            (8, true),
            (9, false),
            (10, true),
        ] {
            assert_eq!(apply_memory_stat(&mut m, tag, 1), want, "tag {tag}");
        }
        assert!(!apply_memory_stat(&mut m, 11, 1));
        assert!(!apply_memory_stat(&mut m, 12, 1));
        assert!(!apply_memory_stat(&mut m, 99, 1));
        assert!(m.swap_in_set && m.actual_balloon_set && m.rss_set && m.usable_set);
        assert!(m.cached_set);
    }

    #[test]
    fn only_returned_memory_stats_are_set() {
        // A guest without a balloon driver: libvirt returns just the
        // balloon size and QEMU's RSS.
        let m = memory_from_stats(
            [
                (sys::VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON, 131072),
                (sys::VIR_DOMAIN_MEMORY_STAT_RSS, 240116),
            ],
            None,
        );
        assert!(m.actual_balloon_set && m.rss_set);
        assert!(!m.total_set && !m.unused_set && !m.available_set && !m.usable_set);
        assert!(!m.swap_in_set && !m.major_fault_set && !m.cached_set);
        assert_eq!((m.actual_balloon, m.rss), (131072, 240116));
    }

    #[test]
    fn block_entry_skips_unsupported_counters() {
        let disk = DiskRef {
            dev: "sda".into(),
            alias: Some("ua-containerdisk".into()),
            path: Some("/disk.qcow2".into()),
            index: Some(1),
        };
        let stats = BlockStats {
            rd_req: 319,
            rd_bytes: 17636864,
            wr_req: 0,
            wr_bytes: 0,
            errs: -1,
        };
        let info = BlockInfo {
            capacity: 20971520,
            allocation: 200704,
            physical: 196616,
        };
        let b = block_entry(&disk, Some(&stats), Some(&info));
        assert_eq!(b.name, "sda");
        assert_eq!(b.alias, "containerdisk");
        assert!(b.backing_index_set && b.backing_index == 1);
        assert!(b.path_set && b.path == "/disk.qcow2");
        assert!(b.rd_reqs_set && b.rd_reqs == 319 && b.rd_bytes == 17636864);
        assert!(b.wr_reqs_set && b.wr_bytes_set);
        assert!(!b.errors_set, "QEMU reports errs = -1");
        assert!(!b.rd_times_set && !b.fl_reqs_set && !b.fl_times_set);
        assert!(b.capacity_set && b.capacity == 20971520);
        assert!(b.allocation_set && b.physical_set);

        let empty = block_entry(
            &DiskRef {
                dev: "sdb".into(),
                alias: Some("cdrom".into()),
                ..Default::default()
            },
            None,
            None,
        );
        assert!(empty.name_set && !empty.path_set && !empty.rd_reqs_set);
        assert_eq!(empty.alias, "cdrom", "no ua- prefix: alias kept as is");
    }

    #[test]
    fn net_entry_maps_counters() {
        let iface = InterfaceRef {
            dev: "tap0".into(),
            alias: Some("ua-default".into()),
        };
        let stats = InterfaceStats {
            rx_bytes: 1,
            rx_packets: 2,
            rx_errs: 3,
            rx_drop: 4,
            tx_bytes: 5,
            tx_packets: 6,
            tx_errs: -1,
            tx_drop: 8,
        };
        let n = net_entry(&iface, Some(&stats));
        assert!(n.name_set && n.alias_set);
        assert_eq!((n.name.as_str(), n.alias.as_str()), ("tap0", "default"));
        assert_eq!(
            (n.rx_bytes, n.rx_pkts, n.rx_errs, n.rx_drop, n.tx_bytes, n.tx_pkts, n.tx_drop),
            (1, 2, 3, 4, 5, 6, 8)
        );
        assert!(!n.tx_errs_set);
        let bare = net_entry(&iface, None);
        assert!(bare.name_set && !bare.rx_bytes_set && !bare.tx_drop_set);
    }

    #[test]
    fn job_info_multiplies_dirty_pages_by_page_size() {
        let job = JobStats {
            data_total: Some(1000),
            data_processed: Some(400),
            data_remaining: Some(600),
            mem_bps: Some(50),
            mem_dirty_rate: Some(10),
            mem_page_size: Some(4096),
            ..Default::default()
        };
        let j = job_info_from(&job);
        assert!(j.data_total_set && j.data_processed_set && j.data_remaining_set);
        assert_eq!(
            (j.data_total, j.data_processed, j.data_remaining),
            (1000, 400, 600)
        );
        assert!(j.memory_bps_set && j.memory_bps == 50);
        assert!(j.mem_dirty_rate_set && j.mem_dirty_rate == 40960);

        let partial = job_info_from(&JobStats {
            mem_dirty_rate: Some(10),
            ..Default::default()
        });
        assert!(!partial.mem_dirty_rate_set && !partial.data_total_set);
    }

    #[test]
    fn vcpus_are_reported_running() {
        let v = online_vcpus(3);
        assert_eq!(v.len(), 3);
        assert!(v
            .iter()
            .all(|c| c.state_set && c.state == VCPU_RUNNING && !c.time_set));
        assert!(online_vcpus(0).is_empty());
    }
}
