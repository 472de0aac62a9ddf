//! KubeVirt's domain statistics: the JSON that `GetDomainStats` returns to
//! virt-handler (`stats.DomainStats`, KubeVirt v1.6
//! `pkg/virt-launcher/virtwrap/stats/types.go`), and [`collect`], which
//! fills it from the per-domain libvirt calls of the `virt` binding.
//!
//! # JSON shape
//!
//! The Go structs carry no JSON tags, so `encoding/json` names every key
//! after the Go field (`Name`, `UUID`, `Cpu`, `TimeSet` ...), keeps the
//! declaration order, and omits nothing: a nil pointer is `null`, a nil
//! slice is `null`, every number and `…Set` flag is always present. The
//! types below reproduce that: `Option` fields serialise as `null`, and the
//! per-device lists are always arrays (KubeVirt builds them with `make`, so
//! they are `[]`, never `null`, when empty). Deserialising accepts `null`
//! for the lists and missing keys (newer KubeVirt adds and drops fields).
//!
//! # Where the numbers come from
//!
//! KubeVirt reads libvirt's bulk statistics (`virConnectGetAllDomainStats`),
//! which the safe API of the `virt` crate does not expose. [`collect`] uses
//! the per-domain calls instead; see its documentation for the field-by-field
//! sources and for what stays unset.

use std::collections::HashMap;

use serde::{Deserialize, Deserializer, Serialize};
use virt::domain::{BlockInfo, BlockStats, Domain as VirtDomain, InterfaceStats, JobStats};
use virt::sys;

/// KubeVirt's `DomainStatsVersion`.
pub const DOMAIN_STATS_VERSION: &str = "v1";

/// `VIR_VCPU_OFFLINE`: the virtual CPU is offline.
pub const VCPU_OFFLINE: i32 = 0;
/// `VIR_VCPU_RUNNING`: the virtual CPU is running.
pub const VCPU_RUNNING: i32 = 1;
/// `VIR_VCPU_BLOCKED`: the virtual CPU is blocked on a resource.
pub const VCPU_BLOCKED: i32 = 2;

/// KubeVirt's prefix of user-defined device aliases.
const USER_ALIAS_PREFIX: &str = "ua-";

/// Go `nil` slices arrive as `null`; read them as empty lists.
fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// `stats.DomainStats`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainStats {
    /// Domain name (`<namespace>_<vmi>`).
    #[serde(rename = "Name")]
    pub name: String,
    /// Domain UUID.
    #[serde(rename = "UUID")]
    pub uuid: String,
    /// Whole-domain CPU time.
    #[serde(rename = "Cpu")]
    pub cpu: Option<DomainStatsCpu>,
    /// Balloon / memory statistics.
    #[serde(rename = "Memory")]
    pub memory: Option<DomainStatsMemory>,
    /// Progress of the running migration (`null` when none was seen).
    #[serde(rename = "MigrateDomainJobInfo")]
    pub migrate_domain_job_info: Option<DomainJobInfo>,
    /// One entry per online vCPU.
    #[serde(rename = "Vcpu", deserialize_with = "null_as_empty")]
    pub vcpu: Vec<DomainStatsVcpu>,
    /// One entry per network interface with a host-side device.
    #[serde(rename = "Net", deserialize_with = "null_as_empty")]
    pub net: Vec<DomainStatsNet>,
    /// One entry per disk.
    #[serde(rename = "Block", deserialize_with = "null_as_empty")]
    pub block: Vec<DomainStatsBlock>,
    /// Whether [`DomainStats::cpu_map`] is filled.
    #[serde(rename = "CPUMapSet")]
    pub cpu_map_set: bool,
    /// Per vCPU, which host CPUs it may run on.
    #[serde(rename = "CPUMap")]
    pub cpu_map: Option<Vec<Vec<bool>>>,
    /// Number of virtual CPUs (`virDomainInfo.nrVirtCpu`).
    #[serde(rename = "NrVirtCpu")]
    pub nr_virt_cpu: u32,
    /// Dirty-page rate (`null` here; KubeVirt computes it separately).
    #[serde(rename = "DirtyRate")]
    pub dirty_rate: Option<DomainStatsDirtyRate>,
    /// The guest's load averages from the guest agent (`null` until the
    /// agent reported them).
    #[serde(rename = "Load")]
    pub load: Option<DomainStatsLoad>,
}

/// `stats.DomainStatsLoad`: the guest's 1, 5 and 15 minute load averages
/// (`guest-get-load`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainStatsLoad {
    /// Present.
    #[serde(rename = "Load1mSet")]
    pub load1m_set: bool,
    /// 1-minute load average.
    #[serde(rename = "Load1m")]
    pub load1m: f64,
    /// Present.
    #[serde(rename = "Load5mSet")]
    pub load5m_set: bool,
    /// 5-minute load average.
    #[serde(rename = "Load5m")]
    pub load5m: f64,
    /// Present.
    #[serde(rename = "Load15mSet")]
    pub load15m_set: bool,
    /// 15-minute load average.
    #[serde(rename = "Load15m")]
    pub load15m: f64,
}

impl From<crate::agent::parse::GuestLoad> for DomainStatsLoad {
    fn from(l: crate::agent::parse::GuestLoad) -> Self {
        DomainStatsLoad {
            load1m_set: true,
            load1m: l.load1,
            load5m_set: true,
            load5m: l.load5,
            load15m_set: true,
            load15m: l.load15,
        }
    }
}

impl DomainStats {
    /// The JSON KubeVirt puts in `DomainStatsResponse.domainStats`.
    ///
    /// # Errors
    /// Only if serde_json fails, which these types never make it do.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }
}

/// `stats.DomainStatsCPU`: nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainStatsCpu {
    /// `cpu.time` present.
    #[serde(rename = "TimeSet")]
    pub time_set: bool,
    /// Total CPU time.
    #[serde(rename = "Time")]
    pub time: u64,
    /// `cpu.user` present.
    #[serde(rename = "UserSet")]
    pub user_set: bool,
    /// User CPU time.
    #[serde(rename = "User")]
    pub user: u64,
    /// `cpu.system` present.
    #[serde(rename = "SystemSet")]
    pub system_set: bool,
    /// System CPU time.
    #[serde(rename = "System")]
    pub system: u64,
}

/// `stats.DomainStatsVcpu`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainStatsVcpu {
    /// `vcpu.<n>.state` present.
    #[serde(rename = "StateSet")]
    pub state_set: bool,
    /// `VIR_VCPU_*` ([`VCPU_RUNNING`] ...).
    #[serde(rename = "State")]
    pub state: i32,
    /// `vcpu.<n>.time` present.
    #[serde(rename = "TimeSet")]
    pub time_set: bool,
    /// vCPU thread CPU time, ns.
    #[serde(rename = "Time")]
    pub time: u64,
    /// `vcpu.<n>.wait` present.
    #[serde(rename = "WaitSet")]
    pub wait_set: bool,
    /// Time waiting for a host CPU, ns.
    #[serde(rename = "Wait")]
    pub wait: u64,
    /// `vcpu.<n>.delay` present.
    #[serde(rename = "DelaySet")]
    pub delay_set: bool,
    /// Scheduling delay, ns.
    #[serde(rename = "Delay")]
    pub delay: u64,
}

/// `stats.DomainStatsNet`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainStatsNet {
    /// `net.<n>.name` present.
    #[serde(rename = "NameSet")]
    pub name_set: bool,
    /// Host-side device (`<target dev>`, e.g. `tap0`).
    #[serde(rename = "Name")]
    pub name: String,
    /// The device was found in the domain XML.
    #[serde(rename = "AliasSet")]
    pub alias_set: bool,
    /// Device alias without KubeVirt's `ua-` prefix (the VMI interface name).
    #[serde(rename = "Alias")]
    pub alias: String,
    /// Present.
    #[serde(rename = "RxBytesSet")]
    pub rx_bytes_set: bool,
    /// Received bytes.
    #[serde(rename = "RxBytes")]
    pub rx_bytes: u64,
    /// Present.
    #[serde(rename = "RxPktsSet")]
    pub rx_pkts_set: bool,
    /// Received packets.
    #[serde(rename = "RxPkts")]
    pub rx_pkts: u64,
    /// Present.
    #[serde(rename = "RxErrsSet")]
    pub rx_errs_set: bool,
    /// Receive errors.
    #[serde(rename = "RxErrs")]
    pub rx_errs: u64,
    /// Present.
    #[serde(rename = "RxDropSet")]
    pub rx_drop_set: bool,
    /// Dropped on receive.
    #[serde(rename = "RxDrop")]
    pub rx_drop: u64,
    /// Present.
    #[serde(rename = "TxBytesSet")]
    pub tx_bytes_set: bool,
    /// Sent bytes.
    #[serde(rename = "TxBytes")]
    pub tx_bytes: u64,
    /// Present.
    #[serde(rename = "TxPktsSet")]
    pub tx_pkts_set: bool,
    /// Sent packets.
    #[serde(rename = "TxPkts")]
    pub tx_pkts: u64,
    /// Present.
    #[serde(rename = "TxErrsSet")]
    pub tx_errs_set: bool,
    /// Send errors.
    #[serde(rename = "TxErrs")]
    pub tx_errs: u64,
    /// Present.
    #[serde(rename = "TxDropSet")]
    pub tx_drop_set: bool,
    /// Dropped on send.
    #[serde(rename = "TxDrop")]
    pub tx_drop: u64,
}

/// `stats.DomainStatsBlock`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainStatsBlock {
    /// `block.<n>.name` present.
    #[serde(rename = "NameSet")]
    pub name_set: bool,
    /// Guest device (`<target dev>`, e.g. `vda`).
    #[serde(rename = "Name")]
    pub name: String,
    /// Device alias without KubeVirt's `ua-` prefix (the VMI disk name).
    #[serde(rename = "Alias")]
    pub alias: String,
    /// Present.
    #[serde(rename = "BackingIndexSet")]
    pub backing_index_set: bool,
    /// libvirt's index of the image (`<source index>`).
    #[serde(rename = "BackingIndex")]
    pub backing_index: u32,
    /// Present.
    #[serde(rename = "PathSet")]
    pub path_set: bool,
    /// Host path of the image.
    #[serde(rename = "Path")]
    pub path: String,
    /// Present.
    #[serde(rename = "RdReqsSet")]
    pub rd_reqs_set: bool,
    /// Read requests.
    #[serde(rename = "RdReqs")]
    pub rd_reqs: u64,
    /// Present.
    #[serde(rename = "RdBytesSet")]
    pub rd_bytes_set: bool,
    /// Read bytes.
    #[serde(rename = "RdBytes")]
    pub rd_bytes: u64,
    /// Present.
    #[serde(rename = "RdTimesSet")]
    pub rd_times_set: bool,
    /// Time spent reading, ns.
    #[serde(rename = "RdTimes")]
    pub rd_times: u64,
    /// Present.
    #[serde(rename = "WrReqsSet")]
    pub wr_reqs_set: bool,
    /// Write requests.
    #[serde(rename = "WrReqs")]
    pub wr_reqs: u64,
    /// Present.
    #[serde(rename = "WrBytesSet")]
    pub wr_bytes_set: bool,
    /// Written bytes.
    #[serde(rename = "WrBytes")]
    pub wr_bytes: u64,
    /// Present.
    #[serde(rename = "WrTimesSet")]
    pub wr_times_set: bool,
    /// Time spent writing, ns.
    #[serde(rename = "WrTimes")]
    pub wr_times: u64,
    /// Present.
    #[serde(rename = "FlReqsSet")]
    pub fl_reqs_set: bool,
    /// Flush requests.
    #[serde(rename = "FlReqs")]
    pub fl_reqs: u64,
    /// Present.
    #[serde(rename = "FlTimesSet")]
    pub fl_times_set: bool,
    /// Time spent flushing, ns.
    #[serde(rename = "FlTimes")]
    pub fl_times: u64,
    /// Present.
    #[serde(rename = "ErrorsSet")]
    pub errors_set: bool,
    /// Errors (Xen only).
    #[serde(rename = "Errors")]
    pub errors: u64,
    /// Present.
    #[serde(rename = "AllocationSet")]
    pub allocation_set: bool,
    /// Allocated bytes.
    #[serde(rename = "Allocation")]
    pub allocation: u64,
    /// Present.
    #[serde(rename = "CapacitySet")]
    pub capacity_set: bool,
    /// Guest-visible size, bytes.
    #[serde(rename = "Capacity")]
    pub capacity: u64,
    /// Present.
    #[serde(rename = "PhysicalSet")]
    pub physical_set: bool,
    /// Host size of the image container, bytes.
    #[serde(rename = "Physical")]
    pub physical: u64,
}

/// `stats.DomainStatsMemory`: KiB, faults as counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainStatsMemory {
    /// Present.
    #[serde(rename = "UnusedSet")]
    pub unused_set: bool,
    /// Guest memory left unused (`VIR_DOMAIN_MEMORY_STAT_UNUSED`).
    #[serde(rename = "Unused")]
    pub unused: u64,
    /// Present.
    #[serde(rename = "CachedSet")]
    pub cached_set: bool,
    /// Guest disk caches (`VIR_DOMAIN_MEMORY_STAT_DISK_CACHES`).
    #[serde(rename = "Cached")]
    pub cached: u64,
    /// Present.
    #[serde(rename = "AvailableSet")]
    pub available_set: bool,
    /// Memory the guest sees (`VIR_DOMAIN_MEMORY_STAT_AVAILABLE`).
    #[serde(rename = "Available")]
    pub available: u64,
    /// Present.
    #[serde(rename = "ActualBalloonSet")]
    pub actual_balloon_set: bool,
    /// Current balloon size (`VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON`).
    #[serde(rename = "ActualBalloon")]
    pub actual_balloon: u64,
    /// Present.
    #[serde(rename = "RSSSet")]
    pub rss_set: bool,
    /// QEMU's resident set (`VIR_DOMAIN_MEMORY_STAT_RSS`).
    #[serde(rename = "RSS")]
    pub rss: u64,
    /// Present.
    #[serde(rename = "SwapInSet")]
    pub swap_in_set: bool,
    /// Swapped in (`VIR_DOMAIN_MEMORY_STAT_SWAP_IN`).
    #[serde(rename = "SwapIn")]
    pub swap_in: u64,
    /// Present.
    #[serde(rename = "SwapOutSet")]
    pub swap_out_set: bool,
    /// Swapped out (`VIR_DOMAIN_MEMORY_STAT_SWAP_OUT`).
    #[serde(rename = "SwapOut")]
    pub swap_out: u64,
    /// Present.
    #[serde(rename = "MajorFaultSet")]
    pub major_fault_set: bool,
    /// Major page faults (`VIR_DOMAIN_MEMORY_STAT_MAJOR_FAULT`).
    #[serde(rename = "MajorFault")]
    pub major_fault: u64,
    /// Present.
    #[serde(rename = "MinorFaultSet")]
    pub minor_fault_set: bool,
    /// Minor page faults (`VIR_DOMAIN_MEMORY_STAT_MINOR_FAULT`).
    #[serde(rename = "MinorFault")]
    pub minor_fault: u64,
    /// Present.
    #[serde(rename = "UsableSet")]
    pub usable_set: bool,
    /// Reclaimable without swapping (`VIR_DOMAIN_MEMORY_STAT_USABLE`).
    #[serde(rename = "Usable")]
    pub usable: u64,
    /// Present.
    #[serde(rename = "TotalSet")]
    pub total_set: bool,
    /// Current memory (`virDomainInfo.memory`).
    #[serde(rename = "Total")]
    pub total: u64,
}

/// `stats.DomainJobInfo`: migration progress.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainJobInfo {
    /// Present.
    #[serde(rename = "DataTotalSet")]
    pub data_total_set: bool,
    /// Bytes to transfer.
    #[serde(rename = "DataTotal")]
    pub data_total: u64,
    /// Present.
    #[serde(rename = "DataProcessedSet")]
    pub data_processed_set: bool,
    /// Bytes transferred.
    #[serde(rename = "DataProcessed")]
    pub data_processed: u64,
    /// Present.
    #[serde(rename = "MemoryBpsSet")]
    pub memory_bps_set: bool,
    /// Memory transfer rate, bytes/s.
    #[serde(rename = "MemoryBps")]
    pub memory_bps: u64,
    /// Present.
    #[serde(rename = "DataRemainingSet")]
    pub data_remaining_set: bool,
    /// Bytes left.
    #[serde(rename = "DataRemaining")]
    pub data_remaining: u64,
    /// Present.
    #[serde(rename = "MemDirtyRateSet")]
    pub mem_dirty_rate_set: bool,
    /// Dirtied bytes per second (pages/s × page size).
    #[serde(rename = "MemDirtyRate")]
    pub mem_dirty_rate: u64,
}

/// `stats.DomainStatsDirtyRate`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainStatsDirtyRate {
    /// Present.
    #[serde(rename = "CalcStatusSet")]
    pub calc_status_set: bool,
    /// `virDomainDirtyRateStatus`.
    #[serde(rename = "CalcStatus")]
    pub calc_status: i32,
    /// Present.
    #[serde(rename = "CalcStartTimeSet")]
    pub calc_start_time_set: bool,
    /// Start of the calculation, s since the epoch.
    #[serde(rename = "CalcStartTime")]
    pub calc_start_time: i64,
    /// Present.
    #[serde(rename = "CalcPeriodSet")]
    pub calc_period_set: bool,
    /// Calculation period, s.
    #[serde(rename = "CalcPeriod")]
    pub calc_period: i32,
    /// Present.
    #[serde(rename = "MegabytesPerSecondSet")]
    pub megabytes_per_second_set: bool,
    /// Dirty rate, MiB/s.
    #[serde(rename = "MegabytesPerSecond")]
    pub megabytes_per_second: i64,
}

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
/// monitor, which keeps the latest value and hands it to [`collect`]'s
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

/// Just the parts of the live domain XML the statistics need that the
/// `domain` crate does not model: interfaces and `<source index>`.
mod xml {
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize)]
    pub struct Domain {
        #[serde(default)]
        pub devices: Devices,
    }

    #[derive(Debug, Default, Deserialize)]
    pub struct Devices {
        #[serde(default)]
        pub disk: Vec<Disk>,
        #[serde(default)]
        pub interface: Vec<Interface>,
    }

    #[derive(Debug, Deserialize)]
    pub struct Disk {
        pub source: Option<Source>,
        pub target: Option<Target>,
    }

    #[derive(Debug, Deserialize)]
    pub struct Source {
        #[serde(rename = "@index")]
        pub index: Option<u32>,
    }

    #[derive(Debug, Deserialize)]
    pub struct Interface {
        pub target: Option<Target>,
        pub alias: Option<Alias>,
    }

    #[derive(Debug, Deserialize)]
    pub struct Target {
        #[serde(rename = "@dev")]
        pub dev: String,
    }

    #[derive(Debug, Deserialize)]
    pub struct Alias {
        #[serde(rename = "@name")]
        pub name: String,
    }
}

/// Disks and interfaces of a live domain XML, in document order. Disks come
/// from the `domain` crate's model; interfaces (and each disk's `<source
/// index>`) from a minimal model here. Interfaces without `<target dev>`
/// have no host-side counters and are left out, as libvirt's bulk
/// statistics leave them out.
///
/// # Errors
/// The XML does not parse.
pub fn devices_from_xml(
    xml_text: &str,
) -> Result<(Vec<DiskRef>, Vec<InterfaceRef>), domain::XmlError> {
    let dom = domain::Domain::from_xml(xml_text)?;
    let extra: xml::Domain = quick_xml::de::from_str(xml_text).map_err(domain::XmlError::from)?;
    let index: HashMap<String, u32> = extra
        .devices
        .disk
        .iter()
        .filter_map(|d| {
            let dev = d.target.as_ref()?.dev.clone();
            Some((dev, d.source.as_ref()?.index?))
        })
        .collect();
    let disks = dom
        .devices
        .disk
        .iter()
        .map(|d| DiskRef {
            dev: d.target.dev.clone(),
            alias: d.alias.as_ref().map(|a| a.name.clone()),
            path: d
                .source
                .as_ref()
                .and_then(|s| s.file.clone().or_else(|| s.dev.clone())),
            index: index.get(&d.target.dev).copied(),
        })
        .collect();
    let ifaces = extra
        .devices
        .interface
        .into_iter()
        .filter_map(|i| {
            Some(InterfaceRef {
                dev: i.target?.dev,
                alias: i.alias.map(|a| a.name),
            })
        })
        .collect();
    Ok((disks, ifaces))
}

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::Value;

    /// Keys of an object, in the order they appear in `json`.
    fn keys_in_order(json: &str) -> Vec<String> {
        // Only for flat objects: every `"Key":` at depth 1.
        let v: Value = serde_json::from_str(json).unwrap();
        let obj = v.as_object().unwrap();
        let mut keys: Vec<(usize, String)> = obj
            .keys()
            .map(|k| {
                let needle = format!("\"{k}\":");
                (json.find(&needle).unwrap(), k.clone())
            })
            .collect();
        keys.sort();
        keys.into_iter().map(|(_, k)| k).collect()
    }

    fn assert_keys<T: Serialize>(value: &T, expected: &[&str]) {
        let json = serde_json::to_string(value).unwrap();
        assert_eq!(keys_in_order(&json), expected, "{json}");
    }

    // Field lists of KubeVirt v1.6 pkg/virt-launcher/virtwrap/stats/types.go,
    // in declaration order (Go's encoding/json order).
    const DOMAIN_STATS: &[&str] = &[
        "Name",
        "UUID",
        "Cpu",
        "Memory",
        "MigrateDomainJobInfo",
        "Vcpu",
        "Net",
        "Block",
        "CPUMapSet",
        "CPUMap",
        "NrVirtCpu",
        "DirtyRate",
        "Load",
    ];
    const LOAD: &[&str] = &[
        "Load1mSet",
        "Load1m",
        "Load5mSet",
        "Load5m",
        "Load15mSet",
        "Load15m",
    ];
    const CPU: &[&str] = &["TimeSet", "Time", "UserSet", "User", "SystemSet", "System"];
    const VCPU: &[&str] = &[
        "StateSet", "State", "TimeSet", "Time", "WaitSet", "Wait", "DelaySet", "Delay",
    ];
    const NET: &[&str] = &[
        "NameSet",
        "Name",
        "AliasSet",
        "Alias",
        "RxBytesSet",
        "RxBytes",
        "RxPktsSet",
        "RxPkts",
        "RxErrsSet",
        "RxErrs",
        "RxDropSet",
        "RxDrop",
        "TxBytesSet",
        "TxBytes",
        "TxPktsSet",
        "TxPkts",
        "TxErrsSet",
        "TxErrs",
        "TxDropSet",
        "TxDrop",
    ];
    const BLOCK: &[&str] = &[
        "NameSet",
        "Name",
        "Alias",
        "BackingIndexSet",
        "BackingIndex",
        "PathSet",
        "Path",
        "RdReqsSet",
        "RdReqs",
        "RdBytesSet",
        "RdBytes",
        "RdTimesSet",
        "RdTimes",
        "WrReqsSet",
        "WrReqs",
        "WrBytesSet",
        "WrBytes",
        "WrTimesSet",
        "WrTimes",
        "FlReqsSet",
        "FlReqs",
        "FlTimesSet",
        "FlTimes",
        "ErrorsSet",
        "Errors",
        "AllocationSet",
        "Allocation",
        "CapacitySet",
        "Capacity",
        "PhysicalSet",
        "Physical",
    ];
    const MEMORY: &[&str] = &[
        "UnusedSet",
        "Unused",
        "CachedSet",
        "Cached",
        "AvailableSet",
        "Available",
        "ActualBalloonSet",
        "ActualBalloon",
        "RSSSet",
        "RSS",
        "SwapInSet",
        "SwapIn",
        "SwapOutSet",
        "SwapOut",
        "MajorFaultSet",
        "MajorFault",
        "MinorFaultSet",
        "MinorFault",
        "UsableSet",
        "Usable",
        "TotalSet",
        "Total",
    ];
    const JOB: &[&str] = &[
        "DataTotalSet",
        "DataTotal",
        "DataProcessedSet",
        "DataProcessed",
        "MemoryBpsSet",
        "MemoryBps",
        "DataRemainingSet",
        "DataRemaining",
        "MemDirtyRateSet",
        "MemDirtyRate",
    ];
    const DIRTY: &[&str] = &[
        "CalcStatusSet",
        "CalcStatus",
        "CalcStartTimeSet",
        "CalcStartTime",
        "CalcPeriodSet",
        "CalcPeriod",
        "MegabytesPerSecondSet",
        "MegabytesPerSecond",
    ];

    fn filled() -> DomainStats {
        DomainStats {
            name: "default_vmi".into(),
            uuid: "f1f1a9ea-ebab-5e49-884b-b944ba5caeda".into(),
            cpu: Some(DomainStatsCpu {
                time_set: true,
                time: 7,
                ..Default::default()
            }),
            memory: Some(memory_from_stats([(6, 131072)], Some(131072))),
            migrate_domain_job_info: Some(DomainJobInfo::default()),
            vcpu: online_vcpus(2),
            net: vec![net_entry(
                &InterfaceRef {
                    dev: "tap0".into(),
                    alias: Some("ua-default".into()),
                },
                None,
            )],
            block: vec![block_entry(
                &DiskRef {
                    dev: "vda".into(),
                    ..Default::default()
                },
                None,
                None,
            )],
            cpu_map_set: true,
            cpu_map: Some(vec![vec![true, false]]),
            nr_virt_cpu: 2,
            dirty_rate: Some(DomainStatsDirtyRate::default()),
            load: Some(DomainStatsLoad::default()),
        }
    }

    #[test]
    fn json_keys_are_kubevirts() {
        let s = filled();
        let v: Value = serde_json::to_value(&s).unwrap();
        let top: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = DOMAIN_STATS.to_vec();
        want.sort_unstable();
        assert_eq!(top, want);

        let sorted = |k: &[&str]| -> Vec<String> {
            let mut k: Vec<String> = k.iter().map(|s| (*s).to_owned()).collect();
            k.sort_unstable();
            k
        };
        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(keys(&v["Cpu"]), sorted(CPU));
        assert_eq!(keys(&v["Memory"]), sorted(MEMORY));
        assert_eq!(keys(&v["MigrateDomainJobInfo"]), sorted(JOB));
        assert_eq!(keys(&v["Vcpu"][0]), sorted(VCPU));
        assert_eq!(keys(&v["Net"][0]), sorted(NET));
        assert_eq!(keys(&v["Block"][0]), sorted(BLOCK));
        assert_eq!(keys(&v["DirtyRate"]), sorted(DIRTY));
    }

    #[test]
    fn json_key_order_is_go_declaration_order() {
        let s = filled();
        assert_keys(s.cpu.as_ref().unwrap(), CPU);
        assert_keys(s.memory.as_ref().unwrap(), MEMORY);
        assert_keys(s.migrate_domain_job_info.as_ref().unwrap(), JOB);
        assert_keys(&s.vcpu[0], VCPU);
        assert_keys(&s.net[0], NET);
        assert_keys(&s.block[0], BLOCK);
        assert_keys(s.dirty_rate.as_ref().unwrap(), DIRTY);
        assert_keys(s.load.as_ref().unwrap(), LOAD);
        // Top level without nested objects (whose keys would interleave).
        let flat = DomainStats {
            name: "n".into(),
            ..Default::default()
        };
        assert_keys(&flat, DOMAIN_STATS);
    }

    #[test]
    fn nothing_is_omitted_and_nil_is_null() {
        let json = DomainStats::default().to_json().unwrap();
        assert_eq!(
            json,
            r#"{"Name":"","UUID":"","Cpu":null,"Memory":null,"MigrateDomainJobInfo":null,"Vcpu":[],"Net":[],"Block":[],"CPUMapSet":false,"CPUMap":null,"NrVirtCpu":0,"DirtyRate":null,"Load":null}"#
        );
        let cpu = serde_json::to_string(&DomainStatsCpu::default()).unwrap();
        assert_eq!(
            cpu,
            r#"{"TimeSet":false,"Time":0,"UserSet":false,"User":0,"SystemSet":false,"System":0}"#
        );
    }

    #[test]
    fn round_trips_and_reads_go_nil_slices() {
        let s = filled();
        let back: DomainStats = serde_json::from_str(&s.to_json().unwrap()).unwrap();
        assert_eq!(back, s);

        let go = r#"{"Name":"x","UUID":"u","Cpu":null,"Memory":null,"MigrateDomainJobInfo":null,
            "Vcpu":null,"Net":null,"Block":null,"CPUMapSet":false,"CPUMap":null,"NrVirtCpu":1,
            "DirtyRate":null,"Load":null}"#;
        let d: DomainStats = serde_json::from_str(go).unwrap();
        assert!(d.vcpu.is_empty() && d.net.is_empty() && d.block.is_empty());
        assert_eq!(d.nr_virt_cpu, 1);
    }

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

    #[test]
    fn devices_come_from_the_live_xml() {
        let xml = r#"<domain type='qemu' id='1'>
  <name>default_vmi</name>
  <memory unit='KiB'>131072</memory>
  <vcpu placement='static'>1</vcpu>
  <os><type arch='x86_64' machine='pc-q35-10.0'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/var/run/disk.qcow2' index='1'/>
      <backingStore type='file' index='2'><format type='raw'/><source file='/base.img'/><backingStore/></backingStore>
      <target dev='sda' bus='sata'/>
      <alias name='ua-containerdisk'/>
    </disk>
    <disk type='block' device='disk'>
      <source dev='/dev/pvc'/>
      <target dev='vdb' bus='virtio'/>
      <alias name='ua-pvc'/>
    </disk>
    <disk type='file' device='cdrom'>
      <target dev='sdc' bus='sata'/>
      <alias name='sata0-0-2'/>
    </disk>
    <controller type='usb' index='0' model='none'/>
    <interface type='ethernet'>
      <mac address='02:00:00:00:00:01'/>
      <target dev='tap0' managed='no'/>
      <model type='virtio-non-transitional'/>
      <alias name='ua-default'/>
    </interface>
    <interface type='user'>
      <mac address='02:00:00:00:00:02'/>
      <alias name='ua-slirp'/>
    </interface>
    <serial type='pty'><target port='0'/></serial>
  </devices>
</domain>"#;
        let (disks, ifaces) = devices_from_xml(xml).unwrap();
        assert_eq!(
            disks,
            vec![
                DiskRef {
                    dev: "sda".into(),
                    alias: Some("ua-containerdisk".into()),
                    path: Some("/var/run/disk.qcow2".into()),
                    index: Some(1),
                },
                DiskRef {
                    dev: "vdb".into(),
                    alias: Some("ua-pvc".into()),
                    path: Some("/dev/pvc".into()),
                    index: None,
                },
                DiskRef {
                    dev: "sdc".into(),
                    alias: Some("sata0-0-2".into()),
                    path: None,
                    index: None,
                },
            ]
        );
        assert_eq!(
            ifaces,
            vec![InterfaceRef {
                dev: "tap0".into(),
                alias: Some("ua-default".into()),
            }]
        );
    }

    #[test]
    fn no_devices_no_entries() {
        let xml = r#"<domain type='kvm'><name>x</name><memory unit='KiB'>1024</memory>
<vcpu>1</vcpu><os><type>hvm</type></os><devices/></domain>"#;
        let (d, i) = devices_from_xml(xml).unwrap();
        assert!(d.is_empty() && i.is_empty());
    }
}
