//! `spec.domain.clock` and `spec.domain.features` (ACPI, APIC, SMM, Hyper-V, KVM).

use serde::{Deserialize, Serialize};

use super::{TickPolicy, TimerTrack};

/// `spec.domain.clock`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Clock {
    /// Guest clock in UTC, with an optional offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utc: Option<ClockUtc>,
    /// Guest clock in this time zone (`Europe/Berlin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// Timers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<Timers>,
}

/// `clock.timer`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Timers {
    /// High Precision Event Timer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpet: Option<TimerSpec>,
    /// KVM paravirtual clock (libvirt `kvmclock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kvm: Option<TimerSpec>,
    /// Programmable Interval Timer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pit: Option<TimerSpec>,
    /// Real Time Clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtc: Option<TimerSpec>,
    /// Hyper-V reference clock (libvirt `hypervclock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperv: Option<TimerSpec>,
}

/// One timer: presence, tick policy, and (rtc only) what it tracks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct TimerSpec {
    /// Present in the guest; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present: Option<bool>,
    /// `delay`, `catchup`, `merge` or `discard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_policy: Option<TickPolicy>,
    /// rtc only: `guest` or `wall`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track: Option<TimerTrack>,
}

/// `clock.utc`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ClockUtc {
    /// Seconds added to UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_seconds: Option<i64>,
}

/// `{enabled: bool}` feature toggle; absent `enabled` means on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct FeatureState {
    /// `None` or `Some(true)` enables the feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl FeatureState {
    /// True unless explicitly disabled.
    pub fn is_enabled(&self) -> bool {
        self.enabled != Some(false)
    }
}

/// `spec.domain.features`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// ACPI; on unless `enabled: false` (s390x defaults to off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi: Option<FeatureState>,
    /// APIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apic: Option<FeatureState>,
    /// System management mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smm: Option<FeatureState>,
    /// Paravirtual spinlocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvspinlock: Option<FeatureState>,
    /// KVM features (`hidden`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kvm: Option<FeatureKvm>,
    /// Hyper-V enlightenments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperv: Option<FeatureHyperv>,
    /// Hyper-V passthrough (every enlightenment the host offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperv_passthrough: Option<FeatureState>,
}

/// `features.hyperv`: each enlightenment a [`FeatureState`] (absent = not
/// mentioned; `{}` = on), plus the three with extra settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct FeatureHyperv {
    /// Relaxed timing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaxed: Option<FeatureState>,
    /// Virtual APIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vapic: Option<FeatureState>,
    /// Spinlock retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spinlocks: Option<FeatureSpinlocks>,
    /// Virtual processor index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpindex: Option<FeatureState>,
    /// Processor time spent on the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<FeatureState>,
    /// Synthetic interrupt controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synic: Option<FeatureState>,
    /// Synthetic timers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synictimer: Option<SyNicTimer>,
    /// Hypervisor reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<FeatureState>,
    /// Hypervisor vendor id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendorid: Option<FeatureVendorId>,
    /// TSC and APIC frequency MSRs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequencies: Option<FeatureState>,
    /// Re-enlightenment on migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reenlightenment: Option<FeatureState>,
    /// TLB flush hypercalls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlbflush: Option<FeatureState>,
    /// IPI hypercalls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipi: Option<FeatureState>,
    /// Enlightened VMCS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evmcs: Option<FeatureState>,
}

/// `hyperv.spinlocks`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct FeatureSpinlocks {
    /// Off only when `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Retries before notifying the hypervisor (KubeVirt default 4096, at least 4095).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spinlocks: Option<u32>,
}

/// `hyperv.synictimer`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct SyNicTimer {
    /// Off only when `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Direct-mode synthetic timers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<FeatureState>,
}

/// `hyperv.vendorid`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct FeatureVendorId {
    /// Off only when `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Vendor id, 1 to 12 characters.
    #[serde(default)]
    pub vendorid: String,
}

/// `features.kvm`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct FeatureKvm {
    /// Hide the KVM signature from the guest.
    #[serde(default)]
    pub hidden: bool,
}
