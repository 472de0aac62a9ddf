//! `spec.domain.cpu`, `spec.domain.ioThreads` and `spec.domain.memory`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::quantity::Quantity;

use super::CpuFeaturePolicy;

/// `spec.domain.cpu`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    /// Cores per socket; 0 = unset.
    #[serde(default)]
    pub cores: u32,
    /// Sockets; 0 = unset.
    #[serde(default)]
    pub sockets: u32,
    /// Threads per core; 0 = unset.
    #[serde(default)]
    pub threads: u32,
    /// CPU hot-plug ceiling (sockets); 0 = no hot-plug.
    #[serde(default)]
    pub max_sockets: u32,
    /// `host-model`, `host-passthrough` or a named libvirt model.
    #[serde(default)]
    pub model: String,
    /// CPU features with policies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<CpuFeature>,
    /// Pin vCPUs to dedicated host CPUs (the pod's cpuset).
    #[serde(default)]
    pub dedicated_cpu_placement: bool,
    /// Pin the emulator thread to one more dedicated host CPU.
    #[serde(default)]
    pub isolate_emulator_thread: bool,
    /// Guest NUMA topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<CpuNuma>,
    /// Realtime vCPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime: Option<Realtime>,
}

/// `spec.domain.cpu.numa`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct CpuNuma {
    /// Mirror the host NUMA cells of the pinned CPUs (`{}` to enable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub guest_mapping_passthrough: Option<Value>,
}

/// `spec.domain.cpu.realtime`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Realtime {
    /// vCPUs that run realtime (`0-3,^1`); default all (applied by virt-handler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<String>,
}

/// `spec.domain.ioThreads`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct IoThreads {
    /// Number of I/O threads every virtio disk shares (`supplementalPool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supplemental_pool_thread_count: Option<u32>,
}

/// One `spec.domain.cpu.features[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct CpuFeature {
    /// libvirt feature name (`vmx`, `invtsc` ...).
    pub name: String,
    /// `force`, `require` (default), `optional`, `disable`, `forbid`.
    #[serde(default)]
    pub policy: CpuFeaturePolicy,
}

/// `spec.domain.memory`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// Memory the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<Quantity>,
    /// Hugepages backing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<Hugepages>,
    /// Memory hot-plug ceiling (`<maxMemory>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_guest: Option<Quantity>,
}

/// `spec.domain.memory.hugepages`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Hugepages {
    /// Page size (`2Mi`, `1Gi`).
    #[serde(default)]
    pub page_size: String,
}
