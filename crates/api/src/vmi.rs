//! Serde types for `kubevirt.io/v1` `VirtualMachineInstance` (KubeVirt v1.6.6
//! `staging/src/kubevirt.io/api/core/v1/types.go`, `schema.go`).
//!
//! JSON keys are KubeVirt's (camelCase). Unknown keys are tolerated, because
//! every KubeVirt release adds fields; a known key with the wrong type is an
//! error that names its path (see [`crate::load`]). Fields whose feature the
//! launcher does not implement yet are kept as raw JSON (`Option<Value>`) so the
//! converter can refuse them by name instead of silently dropping them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::quantity::Quantity;

/// A KubeVirt VirtualMachineInstance object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstance {
    /// `kubevirt.io/v1` (also accepted: `kubevirt.io/v1alpha3`).
    #[serde(default)]
    pub api_version: String,
    /// `VirtualMachineInstance`.
    #[serde(default)]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: VmiSpec,
    /// Observed state, kept verbatim (virt-handler fills it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub status: Option<Value>,
}

/// Kubernetes `ObjectMeta`, the fields the launcher reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name (DNS-1123 subdomain).
    #[serde(default)]
    pub name: String,
    /// Namespace; `default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Kubernetes UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations (several `kubevirt.io/...` ones change conversion).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `spec` of a VMI.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct VmiSpec {
    /// Virtual hardware.
    #[serde(default)]
    pub domain: DomainSpec,
    /// Volumes the disks refer to by name.
    #[serde(default)]
    pub volumes: Vec<Volume>,
    /// Networks the interfaces refer to by name.
    #[serde(default)]
    pub networks: Vec<Network>,
    /// Seconds between the termination signal and a hard kill; default 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// Guest hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Guest DNS subdomain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    /// CPU architecture: `amd64`, `arm64`, `ppc64le`, `s390x`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// `Paused` starts the domain paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_strategy: Option<String>,
    /// Credentials put into the guest (SSH keys through cloud-init).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_credentials: Vec<AccessCredential>,
}

/// `spec.domain`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DomainSpec {
    /// Pod resources (`requests`/`limits` of `cpu` and `memory`).
    #[serde(default)]
    pub resources: ResourceRequirements,
    /// CPU topology and model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    /// Guest memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// Machine type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// Firmware (UUID, serial, boot loader, kernel boot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    /// Guest clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Clock>,
    /// Machine features (ACPI, APIC, SMM ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    /// Devices.
    #[serde(default)]
    pub devices: Devices,
    /// `shared`, `auto` or `supplementalPool` (see the converter's
    /// `iothreads` module).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_threads_policy: Option<String>,
    /// Threads of the `supplementalPool` policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_threads: Option<IoThreads>,
    /// SMBIOS chassis (type 3) fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chassis: Option<Chassis>,
    /// Not implemented yet; refused when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub launch_security: Option<Value>,
}

/// `spec.domain.chassis`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Chassis {
    /// Manufacturer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    /// Version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Serial number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// Asset tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asset: Option<String>,
    /// SKU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
}

/// `spec.domain.resources`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// Requests by resource name (`cpu`, `memory`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
    /// Limits by resource name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
    /// Do not add the VMI overhead to the pod's memory request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overcommit_guest_overhead: bool,
}

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
    pub policy: String,
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

/// `spec.domain.machine`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Machine {
    /// QEMU machine type (`q35`, `pc-q35-rhel9.6.0`, `virt`, ...).
    #[serde(default, rename = "type")]
    pub machine_type: String,
}

/// `spec.domain.firmware`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Firmware {
    /// SMBIOS system UUID; becomes the domain UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// SMBIOS system serial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// BIOS or EFI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootloader: Option<Bootloader>,
    /// Direct kernel boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_boot: Option<KernelBoot>,
    /// ACPI SLIC/MSDM tables; not implemented yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub acpi: Option<Value>,
}

/// `spec.domain.firmware.bootloader`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Bootloader {
    /// SeaBIOS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios: Option<Bios>,
    /// OVMF/AAVMF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efi: Option<Efi>,
}

/// `bootloader.bios`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Bios {
    /// Send SeaBIOS output to the serial console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_serial: Option<bool>,
}

/// `bootloader.efi`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Efi {
    /// Secure boot; KubeVirt's default is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
    /// Keep EFI variables across restarts; not implemented yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent: Option<bool>,
}

/// `firmware.kernelBoot`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct KernelBoot {
    /// Kernel command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_args: Option<String>,
    /// Container image holding the kernel and initrd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<KernelBootContainer>,
}

/// `firmware.kernelBoot.container`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct KernelBootContainer {
    /// Image reference (informational for the launcher).
    #[serde(default)]
    pub image: String,
    /// Path of the kernel inside the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_path: Option<String>,
    /// Path of the initrd inside the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initrd_path: Option<String>,
}

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
    pub tick_policy: Option<String>,
    /// rtc only: `guest` or `wall`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track: Option<String>,
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

/// `spec.domain.devices`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Devices {
    /// Disks, each naming a volume.
    #[serde(default)]
    pub disks: Vec<Disk>,
    /// Network interfaces, each naming a network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    /// One queue per vCPU on virtio interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interface_multiqueue: Option<bool>,
    /// Add a default pod interface when none is given (virt-api's job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_pod_interface: Option<bool>,
    /// VNC + video; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_graphics_device: Option<bool>,
    /// Serial console; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_serial_console: Option<bool>,
    /// Memory balloon; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_mem_balloon: Option<bool>,
    /// Tablet input; default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_input_device: Option<bool>,
    /// Virtio RNG backed by `/dev/urandom` when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub rng: Option<Value>,
    /// Input devices (tablet on usb or virtio).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<Input>,
    /// Attach a vsock device (its CID comes from `status.vsockCID`).
    #[serde(
        rename = "autoattachVSOCK",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub autoattach_vsock: Option<bool>,
    /// Use `virtio-transitional` models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_virtio_transitional: Option<bool>,
    /// No virtio-scsi controller reserved for hot-plug.
    #[serde(default)]
    pub disable_hotplug: bool,
    /// Log the serial console to a file; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_serial_console: Option<bool>,
    /// Multi-queue virtio-blk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_multi_queue: Option<bool>,
    /// Watchdog device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<Watchdog>,
    /// Emulated TPM 2.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<Tpm>,
    /// Sound card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sound: Option<SoundDevice>,
    /// Not implemented yet; refused when present.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::vec_value))]
    pub gpus: Vec<Value>,
    /// Not implemented yet; refused when present.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::vec_value))]
    pub host_devices: Vec<Value>,
    /// Shared directories (virtiofs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<Filesystem>,
    /// USB redirection from the client (`{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub client_passthrough: Option<Value>,
    /// Host metrics channel for vhostmd (`{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub downward_metrics: Option<Value>,
    /// Video adapter model of the autoattached graphics device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<VideoDevice>,
}

/// `devices.watchdog`: a name and one of the models.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Watchdog {
    /// Device name (alias `ua-<name>`).
    #[serde(default)]
    pub name: String,
    /// Intel 6300ESB (amd64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub i6300esb: Option<WatchdogModel>,
    /// IBM diag288 (s390x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diag288: Option<WatchdogModel>,
}

/// A watchdog model's settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct WatchdogModel {
    /// `poweroff`, `reset` (default) or `shutdown`.
    #[serde(default)]
    pub action: String,
}

/// `devices.tpm`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Tpm {
    /// No TPM when `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Keep the TPM state across restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent: Option<bool>,
}

/// `devices.sound`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct SoundDevice {
    /// Device name (alias `ua-<name>`).
    #[serde(default)]
    pub name: String,
    /// `ich9` (default) or `ac97`.
    #[serde(default)]
    pub model: String,
}

/// `devices.filesystems[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Filesystem {
    /// Name of the volume shared (also the mount tag).
    pub name: String,
    /// Share through virtiofs (`{}`; the only kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub virtiofs: Option<Value>,
}

/// `devices.video`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct VideoDevice {
    /// libvirt video model (`vga`, `virtio`, `bochs`, `cirrus`, `ramfb`).
    #[serde(rename = "type", default)]
    pub video_type: String,
}

/// Disk bus (`disks[].disk.bus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum Bus {
    /// virtio-blk (`vdX`).
    Virtio,
    /// AHCI (`sdX`).
    Sata,
    /// virtio-scsi (`sdX`).
    Scsi,
    /// USB storage (`sdX`).
    Usb,
}

impl Bus {
    /// The name libvirt uses in `<target bus=...>`.
    pub fn as_str(self) -> &'static str {
        match self {
            Bus::Virtio => "virtio",
            Bus::Sata => "sata",
            Bus::Scsi => "scsi",
            Bus::Usb => "usb",
        }
    }
}

/// `disks[].cache`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// O_DIRECT, no host page cache.
    None,
    /// Host page cache, writes synced.
    Writethrough,
    /// Host page cache, writes not synced.
    Writeback,
}

/// `disks[].io`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum IoMode {
    /// Linux AIO.
    Native,
    /// Thread pool.
    Threads,
}

/// `disks[].errorPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum ErrorPolicy {
    /// Pause the guest on I/O error (KubeVirt's default).
    Stop,
    /// Ignore errors.
    Ignore,
    /// Report errors to the guest.
    Report,
    /// Pause on ENOSPC only.
    Enospace,
}

/// A `spec.domain.devices.disks[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    /// Name of the volume this disk exposes.
    pub name: String,
    /// Attach as a disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskTarget>,
    /// Attach as a SCSI LUN (block volumes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lun: Option<DiskTarget>,
    /// Attach as a CD-ROM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdrom: Option<CdromTarget>,
    /// Boot order (1 = first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_order: Option<u32>,
    /// Serial number shown to the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// Host cache mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheMode>,
    /// I/O mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoMode>,
    /// I/O error policy; default `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_policy: Option<ErrorPolicy>,
    /// Own I/O thread.
    #[serde(
        rename = "dedicatedIOThread",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub dedicated_io_thread: Option<bool>,
    /// Shared between VMs; not implemented yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shareable: Option<bool>,
    /// Device tag for cloud-init metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Block sizes shown to the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<BlockSize>,
}

/// `disks[].disk` / `disks[].lun`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DiskTarget {
    /// Bus; defaulted per architecture when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<Bus>,
    /// Read-only.
    #[serde(default)]
    pub readonly: bool,
    /// Guest PCI address `dddd:bb:ss.f` (virtio only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
    /// SCSI persistent reservation through the pr-helper (`lun` only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reservation: bool,
}

/// `disks[].blockSize`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct BlockSize {
    /// Fixed sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<CustomBlockSize>,
    /// Sizes probed from the volume (`{enabled: true}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_volume: Option<FeatureState>,
}

/// `blockSize.custom`, in bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct CustomBlockSize {
    /// Logical block size.
    #[serde(default)]
    pub logical: u32,
    /// Physical block size.
    #[serde(default)]
    pub physical: u32,
}

/// `disks[].cdrom`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct CdromTarget {
    /// Bus; defaulted per architecture when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<Bus>,
    /// Read-only; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    /// `open` or `closed` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tray: Option<String>,
}

/// A `spec.domain.devices.inputs[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Input {
    /// Device name (alias `ua-<name>`).
    pub name: String,
    /// `usb` (default) or `virtio`.
    #[serde(default)]
    pub bus: String,
    /// `tablet` (the only supported type).
    #[serde(default, rename = "type")]
    pub input_type: String,
}

/// A `spec.volumes[]` entry: a name and exactly one source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// Volume name (DNS-1123 label), referenced by disks.
    pub name: String,
    /// Disk image shipped in a container image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_disk: Option<ContainerDiskSource>,
    /// Scratch disk created by the launcher, discarded with the VMI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_disk: Option<EmptyDiskSource>,
    /// A PersistentVolumeClaim mounted into the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PvcSource>,
    /// A CDI DataVolume (a PVC underneath).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_volume: Option<DataVolumeSource>,
    /// A disk image on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_disk: Option<HostDiskSource>,
    /// A PVC the guest reads through a qcow2 overlay: its writes are
    /// discarded with the VMI, the PVC is never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<EphemeralSource>,
    /// cloud-init NoCloud data, served to the guest as an ISO labelled `cidata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_no_cloud: Option<CloudInitSource>,
    /// cloud-init OpenStack config drive data, an ISO labelled `config-2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_config_drive: Option<CloudInitSource>,
    /// A ConfigMap's files, served as an ISO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    /// A Secret's files, served as an ISO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretSource>,
    /// The pod's service account token, CA and namespace, served as an ISO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountSource>,
    /// Downward API files (pod labels, annotations, ...), served as an ISO.
    #[serde(
        default,
        rename = "downwardAPI",
        skip_serializing_if = "Option::is_none"
    )]
    pub downward_api: Option<DownwardApiSource>,
    /// Not implemented yet; refused when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub downward_metrics: Option<Value>,
    /// Windows answer files from a ConfigMap or Secret, served as an ISO
    /// labelled `unattendCD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sysprep: Option<SysprepSource>,
    /// KubeVirt's memory dump volume (`MemoryDumpVolumeSource`: a
    /// hot-plugged claim, `claimName`, `readOnly`, `hotpluggable`): the
    /// target of VirtualMachineMemoryDump, which virt-handler mounts under
    /// `/var/run/kubevirt/hotplug-disks/<name>/`; never a disk of the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_dump: Option<PvcSource>,
}

/// A reference to a Secret in the VMI's namespace (`LocalObjectReference`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Secret name.
    #[serde(default)]
    pub name: String,
}

/// `volumes[].cloudInitNoCloud` and `volumes[].cloudInitConfigDrive` (the
/// two share their fields in KubeVirt). Inline text wins over base64
/// (`readRawOrBase64Data`); a secret reference is read from the secret
/// mounted at `/var/run/kubevirt-private/secret/<volume>/` (files
/// `userdata` or `userData`, `networkdata` or `networkData`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct CloudInitSource {
    /// User data as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// User data, base64 (standard alphabet, padded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_base64: Option<String>,
    /// User data from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_secret_ref: Option<SecretRef>,
    /// Network configuration as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<String>,
    /// Network configuration, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_base64: Option<String>,
    /// Network configuration from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_secret_ref: Option<SecretRef>,
}

/// `volumes[].configMap`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSource {
    /// ConfigMap name.
    #[serde(default)]
    pub name: String,
    /// The pod starts even when the ConfigMap is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// ISO volume label (default `cfgdata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// `volumes[].sysprep`: exactly one of a ConfigMap or a Secret holding
/// `autounattend.xml` or `unattend.xml` (KubeVirt `SysprepSource`).
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SysprepSource {
    /// The ConfigMap (`LocalObjectReference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<LocalRef>,
    /// The Secret (`LocalObjectReference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<LocalRef>,
}

/// `LocalObjectReference`: an object in the VMI's namespace, by name.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalRef {
    /// The object's name.
    #[serde(default)]
    pub name: String,
}

/// `volumes[].secret`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct SecretSource {
    /// Secret name.
    #[serde(default)]
    pub secret_name: String,
    /// The pod starts even when the Secret is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// ISO volume label (default `cfgdata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// `volumes[].serviceAccount`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountSource {
    /// Service account name.
    #[serde(default)]
    pub service_account_name: String,
}

/// `volumes[].downwardAPI`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiSource {
    /// Kubernetes `DownwardAPIVolumeFile`s (kubelet writes them; kept verbatim).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::vec_value))]
    pub fields: Vec<Value>,
    /// ISO volume label (default `cfgdata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// `volumes[].containerDisk`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ContainerDiskSource {
    /// Image reference; the launcher sees the image's disk as a file.
    #[serde(default)]
    pub image: String,
    /// Path of the disk inside the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Pull policy (virt-handler's concern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
}

/// `volumes[].emptyDisk`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct EmptyDiskSource {
    /// Virtual size of the disk.
    pub capacity: Quantity,
}

/// `volumes[].persistentVolumeClaim`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct PvcSource {
    /// Claim name.
    #[serde(default)]
    pub claim_name: String,
    /// Mount read-only.
    #[serde(default)]
    pub read_only: bool,
    /// Hot-plugged volume; not implemented yet.
    #[serde(default)]
    pub hotpluggable: bool,
}

/// `spec.accessCredentials[]`: exactly one of its fields is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct AccessCredential {
    /// SSH public keys from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_public_key: Option<SshPublicKeyAccessCredential>,
    /// User passwords set through the guest agent (not implemented yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub user_password: Option<Value>,
}

/// `accessCredentials[].sshPublicKey`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct SshPublicKeyAccessCredential {
    /// Where the keys come from.
    #[serde(default)]
    pub source: AccessCredentialSource,
    /// How they reach the guest.
    #[serde(default)]
    pub propagation_method: PropagationMethod,
}

/// `sshPublicKey.source`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct AccessCredentialSource {
    /// A Secret whose every entry is a public key (mounted at
    /// `/var/run/kubevirt-private/secret/<secretName>-access-cred/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<AccessCredentialSecret>,
}

/// `sshPublicKey.source.secret`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct AccessCredentialSecret {
    /// Secret name.
    #[serde(default)]
    pub secret_name: String,
}

/// `sshPublicKey.propagationMethod`: exactly one is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct PropagationMethod {
    /// Keys go into the NoCloud meta-data (`public-keys`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub no_cloud: Option<Value>,
    /// Keys go into the config drive meta-data (`public_keys`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub config_drive: Option<Value>,
    /// Keys written by the guest agent (not implemented yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub qemu_guest_agent: Option<Value>,
}

/// `volumes[].ephemeral`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct EphemeralSource {
    /// The claim whose image backs the overlay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PvcSource>,
}

/// `volumes[].dataVolume`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSource {
    /// DataVolume name.
    #[serde(default)]
    pub name: String,
    /// Hot-plugged volume; not implemented yet.
    #[serde(default)]
    pub hotpluggable: bool,
}

/// `volumes[].hostDisk`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct HostDiskSource {
    /// Path of the image on the host (virt-handler mounts its directory).
    #[serde(default)]
    pub path: String,
    /// `Disk` (must exist) or `DiskOrCreate`.
    #[serde(default, rename = "type")]
    pub disk_type: String,
    /// Size when created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Quantity>,
    /// Shared between VMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
}

impl Volume {
    /// Names of the sources set on this volume (KubeVirt allows exactly one).
    pub fn source_kinds(&self) -> Vec<&'static str> {
        let mut k = Vec::new();
        let mut add = |set: bool, name: &'static str| {
            if set {
                k.push(name);
            }
        };
        add(self.container_disk.is_some(), "containerDisk");
        add(self.empty_disk.is_some(), "emptyDisk");
        add(
            self.persistent_volume_claim.is_some(),
            "persistentVolumeClaim",
        );
        add(self.data_volume.is_some(), "dataVolume");
        add(self.host_disk.is_some(), "hostDisk");
        add(self.ephemeral.is_some(), "ephemeral");
        add(self.cloud_init_no_cloud.is_some(), "cloudInitNoCloud");
        add(
            self.cloud_init_config_drive.is_some(),
            "cloudInitConfigDrive",
        );
        add(self.config_map.is_some(), "configMap");
        add(self.secret.is_some(), "secret");
        add(self.service_account.is_some(), "serviceAccount");
        add(self.downward_api.is_some(), "downwardAPI");
        add(self.downward_metrics.is_some(), "downwardMetrics");
        add(self.sysprep.is_some(), "sysprep");
        add(self.memory_dump.is_some(), "memoryDump");
        k
    }
}

impl VirtualMachineInstance {
    /// Namespace, `default` when unset.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// UID, empty when unset.
    pub fn uid(&self) -> &str {
        self.metadata.uid.as_deref().unwrap_or("")
    }

    /// libvirt domain name: `<namespace>_<name>` (KubeVirt `VMINamespaceKeyFunc`).
    pub fn domain_name(&self) -> String {
        format!("{}_{}", self.namespace(), self.metadata.name)
    }

    /// The guest's hostname as KubeVirt derives it: `spec.hostname`, else
    /// the name's first dot-separated part cut to 63 bytes
    /// ([`crate::names::hostname`], KubeVirt's `dns.SanitizeHostname`).
    pub fn hostname(&self) -> String {
        crate::names::hostname(&self.metadata.name, self.spec.hostname.as_deref())
    }

    /// Grace period in seconds (`terminationGracePeriodSeconds`, default 30).
    pub fn grace_period_seconds(&self) -> i64 {
        self.spec
            .termination_grace_period_seconds
            .unwrap_or(crate::defaults::DEFAULT_GRACE_PERIOD_SECONDS)
    }
}

/// `spec.networks[]`: where an interface is connected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// Name the interface refers to.
    pub name: String,
    /// The pod's own network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodNetwork>,
    /// A Multus secondary network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multus: Option<MultusNetwork>,
}

/// `networks[].pod`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct PodNetwork {
    /// Masquerade IPv4 CIDR; default `10.0.2.0/24`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "vmNetworkCIDR")]
    pub vm_network_cidr: Option<String>,
    /// Masquerade IPv6 CIDR; default `fd10:0:2::/120`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "vmIPv6NetworkCIDR")]
    pub vm_ipv6_network_cidr: Option<String>,
}

/// `networks[].multus`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct MultusNetwork {
    /// `[namespace/]name` of the NetworkAttachmentDefinition.
    pub network_name: String,
    /// Replaces the pod network.
    #[serde(default)]
    pub default: bool,
}

/// `spec.domain.devices.interfaces[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    /// Name of the network it connects to (and of the alias `ua-<name>`).
    pub name: String,
    /// NIC model: `virtio` (default), `e1000`, `e1000e`, `igb`, `ne2k_pci`,
    /// `pcnet`, `rtl8139`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Bridge binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub bridge: Option<Value>,
    /// Masquerade (NAT) binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub masquerade: Option<Value>,
    /// SR-IOV binding: the interface is a PCI host device (a VF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub sriov: Option<Value>,
    /// Slirp binding (removed upstream; refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub slirp: Option<Value>,
    /// Core passt binding, removed in KubeVirt v1.3 (refused, naming the
    /// `binding: {name: passt}` plugin that replaces it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub passt: Option<Value>,
    /// macvtap binding (refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub macvtap: Option<Value>,
    /// Network binding plugin (`{name: passt}`; other names are refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub binding: Option<Value>,
    /// Ports forwarded by masquerade (programmed by phase 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::vec_value))]
    pub ports: Vec<Value>,
    /// Guest MAC (`de:ad:00:00:be:af`, `DE-AD-00-00-BE-AF`, `dead.0000.beaf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    /// Boot order (1 = first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_order: Option<u32>,
    /// Guest PCI address `dddd:bb:ss.f`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
    /// DHCP extra options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp_options: Option<DhcpOptions>,
    /// Device tag for cloud-init metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// ACPI index (guest NIC naming).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi_index: Option<u32>,
    /// `up`, `down` or `absent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl Interface {
    /// The binding's KubeVirt name (`masquerade`, `bridge`, ...), or
    /// `None` when no binding is set.
    pub fn binding_name(&self) -> Option<&'static str> {
        [
            (self.masquerade.is_some(), "masquerade"),
            (self.bridge.is_some(), "bridge"),
            (self.sriov.is_some(), "sriov"),
            (self.slirp.is_some(), "slirp"),
            (self.passt.is_some(), "passt"),
            (self.macvtap.is_some(), "macvtap"),
            (self.binding.is_some(), "binding"),
        ]
        .into_iter()
        .find(|(set, _)| *set)
        .map(|(_, n)| n)
    }

    /// The binding plugin's name (`binding: {name: passt}` → `passt`), or
    /// `None` when `binding` is absent or has no string `name`.
    pub fn plugin_name(&self) -> Option<&str> {
        self.binding.as_ref()?.get("name")?.as_str()
    }
}

/// `interfaces[].dhcpOptions`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DhcpOptions {
    /// Option 67.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_file_name: Option<String>,
    /// Option 66.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tftp_server_name: Option<String>,
    /// Option 42, IPv4 addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ntp_servers: Vec<String>,
    /// Options 224–254.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_options: Vec<DhcpPrivateOption>,
}

/// `dhcpOptions.privateOptions[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DhcpPrivateOption {
    /// Option code, 224–254.
    pub option: i64,
    /// Value, sent as its bytes.
    pub value: String,
}
