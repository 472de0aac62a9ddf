//! `<controller>`.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::{Address, Alias};

/// `<controller type='scsi' index='0' model='virtio-non-transitional'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Controller {
    /// `usb`, `scsi`, `virtio-serial`, `pci`, `sata`.
    #[serde(rename = "@type")]
    pub controller_type: String,
    /// Index among controllers of this type.
    #[serde(rename = "@index")]
    pub index: String,
    /// Model (`none`, `qemu-xhci`, `virtio-non-transitional`, `pcie-root-port`).
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// Queue and I/O-thread options.
    #[serde(default)]
    pub driver: Option<ControllerDriver>,
    /// Alias.
    pub alias: Option<Alias>,
    /// Guest address.
    pub address: Option<Address>,
}

/// `<driver iothread='1' queues='2' iommu='on'/>` of a controller.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ControllerDriver {
    /// Dedicated I/O thread.
    #[serde(rename = "@iothread", default)]
    pub iothread: Option<u32>,
    /// Queues.
    #[serde(rename = "@queues", default)]
    pub queues: Option<u32>,
    /// `on` to put the controller behind the vIOMMU.
    #[serde(rename = "@iommu", default)]
    pub iommu: Option<String>,
}
