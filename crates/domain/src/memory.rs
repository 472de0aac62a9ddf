//! Memory sizes and `<memoryBacking>` (hugepages, memfd, shared access).

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::Empty;

/// A memory size with its unit (`<memory unit='b'>134217728</memory>`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryValue {
    /// `b`, `KiB`, `MiB` ... (libvirt reads back in `KiB`).
    #[serde(rename = "@unit")]
    pub unit: String,
    /// Amount in `unit`.
    #[serde(rename = "$text")]
    pub value: u64,
}

impl MemoryValue {
    /// The size in bytes, when the unit is one libvirt uses.
    pub fn bytes(&self) -> Option<u64> {
        let mult: u64 = match self.unit.as_str() {
            "b" | "bytes" => 1,
            "KB" => 1000,
            "k" | "KiB" | "" => 1 << 10,
            "MB" => 1_000_000,
            "M" | "MiB" => 1 << 20,
            "GB" => 1_000_000_000,
            "G" | "GiB" => 1 << 30,
            _ => return None,
        };
        self.value.checked_mul(mult)
    }
}

/// `<maxMemory unit='b' slots='0'>BYTES</maxMemory>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MaxMemory {
    /// `b`.
    #[serde(rename = "@unit")]
    pub unit: String,
    /// DIMM slots (KubeVirt: 0, virtio-mem needs none).
    #[serde(rename = "@slots")]
    pub slots: Option<u32>,
    /// Amount in `unit`.
    #[serde(rename = "$text")]
    pub value: u64,
}

/// `<memoryBacking>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryBacking {
    /// Back guest memory with hugepages.
    pub hugepages: Option<Hugepages>,
    /// Keep KSM away from guest memory.
    pub nosharepages: Option<Empty>,
    /// `<source type='memfd'/>`.
    pub source: Option<MemorySource>,
    /// `<access mode='shared'/>`.
    pub access: Option<MemoryAccess>,
    /// `<allocation mode='immediate'/>`.
    pub allocation: Option<MemoryAllocation>,
}

/// `<hugepages>` with optional per-cell page sizes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Hugepages {
    /// Page sizes per NUMA cell (none = the default hugepage size).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub page: Vec<HugePage>,
}

/// `<page size='2097152' unit='b' nodeset='0'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HugePage {
    /// Page size in `unit`.
    #[serde(rename = "@size")]
    pub size: u64,
    /// `b`.
    #[serde(rename = "@unit")]
    pub unit: Option<String>,
    /// Guest NUMA cells.
    #[serde(rename = "@nodeset")]
    pub nodeset: Option<String>,
}

/// `<source type='memfd'/>` of `<memoryBacking>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemorySource {
    /// `memfd`, `file`, `anonymous`.
    #[serde(rename = "@type")]
    pub source_type: String,
}

/// `<access mode='shared'/>` of `<memoryBacking>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryAccess {
    /// `shared` / `private`.
    #[serde(rename = "@mode")]
    pub mode: String,
}

/// `<allocation mode='immediate'/>` of `<memoryBacking>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryAllocation {
    /// `immediate` / `ondemand`.
    #[serde(rename = "@mode")]
    pub mode: String,
}
