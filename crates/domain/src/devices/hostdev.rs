//! `<hostdev>`: host PCI devices (SR-IOV virtual functions).

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::{Address, Alias, BootOrder};

/// `<hostdev mode='subsystem' type='pci' managed='no'>`: a host PCI
/// device given to the guest, here an SR-IOV virtual function the device
/// plugin or Multus allocated to the pod (KubeVirt `api.HostDevice`).
///
/// `managed='no'`: the VF is already bound to `vfio-pci` on the node, so
/// libvirt neither detaches nor re-attaches it. libvirt reads the device
/// (`/sys/bus/pci/devices/<address>`) and its VFIO group
/// (`/dev/vfio/<group>`) only when the domain starts, not at define time.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostDevice {
    /// `subsystem` (libvirt's default, written explicitly).
    #[serde(rename = "@mode")]
    pub mode: Option<String>,
    /// `pci` (`mdev`, `usb` for other host devices).
    #[serde(rename = "@type")]
    pub hostdev_type: String,
    /// `no`: the device is not bound to `vfio-pci` by libvirt.
    #[serde(rename = "@managed")]
    pub managed: Option<String>,
    /// `vfio-pci` for mediated devices.
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// `on` for a vGPU's display (mediated devices).
    #[serde(rename = "@display")]
    pub display: Option<String>,
    /// `on` for a vGPU's ramfb boot display (mediated devices).
    #[serde(rename = "@ramfb")]
    pub ramfb: Option<String>,
    /// The host device (`<source><address domain bus slot function/></source>`).
    #[serde(default)]
    pub source: HostDeviceSource,
    /// Per-device boot order.
    pub boot: Option<BootOrder>,
    /// Alias (`ua-sriov-<interface>` for SR-IOV).
    pub alias: Option<Alias>,
    /// Guest PCI address.
    pub address: Option<Address>,
}

/// `<source>` of a host device.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostDeviceSource {
    /// Host PCI address (libvirt writes it back without `type`), or an
    /// mdev `uuid`.
    pub address: Option<Address>,
}

impl HostDevice {
    /// The `<hostdev>` element alone, as libvirt's device calls
    /// (`virDomainAttachDeviceFlags`) take it.
    ///
    /// # Errors
    /// [`crate::XmlError::Write`] only on a model bug.
    pub fn to_xml(&self) -> Result<String, crate::XmlError> {
        let mut out = String::with_capacity(512);
        let ser = quick_xml::se::Serializer::with_root(&mut out, Some("hostdev"))
            .map_err(crate::XmlError::from)?;
        self.serialize(ser)?;
        Ok(out)
    }
}
