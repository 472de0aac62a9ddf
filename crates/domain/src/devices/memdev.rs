//! `<memory model='virtio-mem'>`: the hot-pluggable memory device (KubeVirt
//! `api.MemoryDevice`, attached by SyncVirtualMachineMemory).

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::{Address, Alias, MemoryValue};

/// `<memory model='virtio-mem'><target>...</target></memory>` in
/// `<devices>`. libvirt adds `<current>` (what the guest has plugged), an
/// alias and an address to the live one.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryDevice {
    /// `virtio-mem` (libvirt also knows `dimm`, `nvdimm`, ...).
    #[serde(rename = "@model")]
    pub model: String,
    /// Sizes and the guest NUMA node.
    #[serde(default)]
    pub target: MemoryDeviceTarget,
    /// Alias (libvirt's `virtiomem0`).
    pub alias: Option<Alias>,
    /// Guest PCI address.
    pub address: Option<Address>,
}

/// `<target>` of a memory device: every size in `unit='b'` as KubeVirt
/// writes them (libvirt reads them back in KiB).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryDeviceTarget {
    /// The most the device can plug.
    pub size: Option<MemoryValue>,
    /// The guest NUMA node (`0`).
    pub node: Option<String>,
    /// The plug granularity.
    pub block: Option<MemoryValue>,
    /// What the guest is asked to plug.
    pub requested: Option<MemoryValue>,
    /// What the guest has plugged (live XML only).
    pub current: Option<MemoryValue>,
}

impl MemoryDevice {
    /// The `<memory>` element alone, as libvirt's device calls
    /// (`virDomainAttachDeviceFlags`, `UpdateDeviceFlags`) take it.
    ///
    /// # Errors
    /// [`crate::XmlError::Write`] only on a model bug.
    pub fn to_xml(&self) -> Result<String, crate::XmlError> {
        let mut out = String::with_capacity(512);
        let ser = quick_xml::se::Serializer::with_root(&mut out, Some("memory"))
            .map_err(crate::XmlError::from)?;
        self.serialize(ser)?;
        Ok(out)
    }

    /// Whether this is KubeVirt's hot-plug device (`virtio-mem`).
    pub fn is_virtio_mem(&self) -> bool {
        self.model == "virtio-mem"
    }
}
