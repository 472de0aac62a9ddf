//! `<features>`: ACPI, APIC, SMM, Hyper-V enlightenments, KVM and PMU switches.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::Empty;

/// `<features>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Features {
    /// ACPI.
    pub acpi: Option<Empty>,
    /// APIC.
    pub apic: Option<Empty>,
    /// Hyper-V enlightenments.
    pub hyperv: Option<HyperV>,
    /// KVM features.
    pub kvm: Option<KvmFeatures>,
    /// Paravirtual spinlocks.
    pub pvspinlock: Option<FeatureState>,
    /// Performance monitoring unit (off for realtime).
    pub pmu: Option<FeatureState>,
    /// VMware I/O port.
    pub vmport: Option<FeatureState>,
    /// System management mode.
    pub smm: Option<Empty>,
}

/// `<hyperv mode='custom|passthrough'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HyperV {
    /// `passthrough` for every enlightenment the host has; else absent (custom).
    #[serde(rename = "@mode")]
    pub mode: Option<String>,
    /// Relaxed timing.
    pub relaxed: Option<FeatureState>,
    /// Virtual APIC.
    pub vapic: Option<FeatureState>,
    /// Spinlock retries.
    pub spinlocks: Option<HyperVSpinlocks>,
    /// Virtual processor index.
    pub vpindex: Option<FeatureState>,
    /// Runtime MSR.
    pub runtime: Option<FeatureState>,
    /// Synthetic interrupt controller.
    pub synic: Option<FeatureState>,
    /// Synthetic timers.
    pub stimer: Option<HyperVStimer>,
    /// Reset MSR.
    pub reset: Option<FeatureState>,
    /// Vendor id.
    pub vendor_id: Option<HyperVVendorId>,
    /// Frequency MSRs.
    pub frequencies: Option<FeatureState>,
    /// Re-enlightenment.
    pub reenlightenment: Option<FeatureState>,
    /// TLB flush.
    pub tlbflush: Option<FeatureState>,
    /// IPI.
    pub ipi: Option<FeatureState>,
    /// Enlightened VMCS.
    pub evmcs: Option<FeatureState>,
}

/// `<spinlocks state='on' retries='4096'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HyperVSpinlocks {
    /// `on` / `off`.
    #[serde(rename = "@state")]
    pub state: String,
    /// Retries (only with `on`).
    #[serde(rename = "@retries")]
    pub retries: Option<u32>,
}

/// `<stimer state='on'><direct state='on'/></stimer>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HyperVStimer {
    /// `on` / `off`.
    #[serde(rename = "@state")]
    pub state: String,
    /// Direct mode.
    pub direct: Option<FeatureState>,
}

/// `<vendor_id state='on' value='KVM Hv'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HyperVVendorId {
    /// `on` / `off`.
    #[serde(rename = "@state")]
    pub state: String,
    /// Vendor id (only with `on`).
    #[serde(rename = "@value")]
    pub value: Option<String>,
}

/// `<x state='on|off'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FeatureState {
    /// `on` / `off`.
    #[serde(rename = "@state")]
    pub state: String,
}

impl FeatureState {
    /// `on` when `enabled`, else `off`.
    pub fn on_off(enabled: bool) -> Self {
        FeatureState {
            state: if enabled { "on" } else { "off" }.to_owned(),
        }
    }
}

/// `<features><kvm>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KvmFeatures {
    /// Hide the KVM signature.
    pub hidden: Option<FeatureState>,
    /// Tell the guest its vCPUs are dedicated (`<hint-dedicated state='on'/>`).
    #[serde(rename = "hint-dedicated")]
    pub hint_dedicated: Option<FeatureState>,
}
