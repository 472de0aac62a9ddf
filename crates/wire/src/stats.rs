//! KubeVirt's domain statistics: the JSON that `GetDomainStats` returns to
//! virt-handler (`stats.DomainStats`, KubeVirt v1.6
//! `pkg/virt-launcher/virtwrap/stats/types.go`). `virtwrap::stats` fills
//! it from libvirt.
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

use serde::{Deserialize, Deserializer, Serialize};

/// KubeVirt's `DomainStatsVersion`.
pub const DOMAIN_STATS_VERSION: &str = "v1";

/// `VIR_VCPU_OFFLINE`: the virtual CPU is offline.
pub const VCPU_OFFLINE: i32 = 0;
/// `VIR_VCPU_RUNNING`: the virtual CPU is running.
pub const VCPU_RUNNING: i32 = 1;
/// `VIR_VCPU_BLOCKED`: the virtual CPU is blocked on a resource.
pub const VCPU_BLOCKED: i32 = 2;

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
            memory: Some(DomainStatsMemory {
                actual_balloon_set: true,
                actual_balloon: 131072,
                total_set: true,
                total: 131072,
                ..Default::default()
            }),
            migrate_domain_job_info: Some(DomainJobInfo::default()),
            vcpu: vec![
                DomainStatsVcpu {
                    state_set: true,
                    state: VCPU_RUNNING,
                    ..Default::default()
                };
                2
            ],
            net: vec![DomainStatsNet {
                name_set: true,
                name: "tap0".into(),
                alias_set: true,
                alias: "default".into(),
                ..Default::default()
            }],
            block: vec![DomainStatsBlock {
                name_set: true,
                name: "vda".into(),
                ..Default::default()
            }],
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
}
