//! vCPUs and their hot-plug state, `<cputune>` pinning, `<numatune>`, and
//! `<cpu>` (model, features, topology, guest NUMA cells).

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// `<vcpus>`: one entry per possible vCPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Vcpus {
    /// Entries by id.
    #[serde(default)]
    pub vcpu: Vec<VcpuState>,
}

/// `<vcpu id='0' enabled='yes' hotpluggable='no'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VcpuState {
    /// vCPU id.
    #[serde(rename = "@id")]
    pub id: u32,
    /// `yes` when online at boot.
    #[serde(rename = "@enabled")]
    pub enabled: String,
    /// `yes` when it may be unplugged/plugged.
    #[serde(rename = "@hotpluggable")]
    pub hotpluggable: String,
}

/// `<cputune>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTune {
    /// vCPU pins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vcpupin: Vec<CpuPin>,
    /// I/O thread pins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iothreadpin: Vec<IoThreadPin>,
    /// Emulator thread pin.
    pub emulatorpin: Option<EmulatorPin>,
}

impl CpuTune {
    /// The element alone (`<cputune>…</cputune>`), for a rewrite of
    /// libvirt's own XML that keeps everything else as libvirt wrote it
    /// (the destination XML of a migration with dedicated CPUs).
    ///
    /// # Errors
    /// [`crate::XmlError::Write`] only on a model bug.
    pub fn to_xml(&self) -> Result<String, crate::XmlError> {
        Ok(quick_xml::se::to_string_with_root("cputune", self)?)
    }
}

/// `<vcpupin vcpu='0' cpuset='2'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuPin {
    /// vCPU id.
    #[serde(rename = "@vcpu")]
    pub vcpu: u32,
    /// Host CPU list.
    #[serde(rename = "@cpuset")]
    pub cpuset: String,
}

/// `<iothreadpin iothread='1' cpuset='2'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IoThreadPin {
    /// I/O thread id (from 1).
    #[serde(rename = "@iothread")]
    pub iothread: u32,
    /// Host CPU list.
    #[serde(rename = "@cpuset")]
    pub cpuset: String,
}

/// `<emulatorpin cpuset='3'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EmulatorPin {
    /// Host CPU list.
    #[serde(rename = "@cpuset")]
    pub cpuset: String,
}

/// `<numatune>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaTune {
    /// Policy for all guest memory.
    pub memory: NumaTuneMemory,
    /// Per guest cell policies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memnode: Vec<MemNode>,
}

/// `<memory mode='strict' nodeset='0-1'/>` of `<numatune>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaTuneMemory {
    /// `strict`, `preferred`, `interleave`.
    #[serde(rename = "@mode")]
    pub mode: String,
    /// Host NUMA nodes.
    #[serde(rename = "@nodeset")]
    pub nodeset: String,
}

/// `<memnode cellid='0' mode='strict' nodeset='1'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemNode {
    /// Guest cell.
    #[serde(rename = "@cellid")]
    pub cellid: u32,
    /// `strict`.
    #[serde(rename = "@mode")]
    pub mode: String,
    /// Host NUMA nodes.
    #[serde(rename = "@nodeset")]
    pub nodeset: String,
}

/// `<vcpu placement='static' current='2'>N</vcpu>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Vcpu {
    /// `static`.
    #[serde(rename = "@placement")]
    pub placement: Option<String>,
    /// vCPUs online at boot when fewer than `count` (CPU hot-plug).
    #[serde(rename = "@current", default)]
    pub current: Option<u32>,
    /// Number of vCPUs.
    #[serde(rename = "$text")]
    pub count: u32,
}

/// `<cpu>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cpu {
    /// `host-model`, `host-passthrough`, `custom`.
    #[serde(rename = "@mode")]
    pub mode: Option<String>,
    /// Named model for `custom`.
    pub model: Option<String>,
    /// Feature policies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature: Vec<CpuFeature>,
    /// Sockets, cores, threads.
    pub topology: Option<CpuTopology>,
    /// Guest NUMA cells.
    #[serde(default)]
    pub numa: Option<CpuNuma>,
}

/// `<cpu><numa>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuNuma {
    /// Cells in order.
    #[serde(default)]
    pub cell: Vec<NumaCell>,
}

/// `<cell id='0' cpus='0-1' memory='1048576' unit='KiB' memAccess='shared'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaCell {
    /// Cell number.
    #[serde(rename = "@id")]
    pub id: String,
    /// vCPU list (`0-1`).
    #[serde(rename = "@cpus", default)]
    pub cpus: String,
    /// Memory in `unit`.
    #[serde(rename = "@memory", default)]
    pub memory: Option<u64>,
    /// Unit of `memory`.
    #[serde(rename = "@unit", default)]
    pub unit: Option<String>,
    /// `shared` / `private`.
    #[serde(rename = "@memAccess", default)]
    pub mem_access: Option<String>,
}

/// `<feature policy='require' name='vmx'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuFeature {
    /// `force`, `require`, `optional`, `disable`, `forbid`.
    #[serde(rename = "@policy")]
    pub policy: String,
    /// Feature name.
    #[serde(rename = "@name")]
    pub name: String,
}

/// `<topology sockets='1' cores='1' threads='1'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTopology {
    /// Sockets.
    #[serde(rename = "@sockets")]
    pub sockets: u32,
    /// Cores per socket.
    #[serde(rename = "@cores")]
    pub cores: u32,
    /// Threads per core.
    #[serde(rename = "@threads")]
    pub threads: u32,
}
