//! The libvirt domain XML model (<https://libvirt.org/formatdomain.html>),
//! the subset virt-launcher writes and reads back.
//!
//! Types serialise with `quick-xml`'s serde support: a field renamed `@x` is
//! the attribute `x`, `$text` is character data, every other field is a child
//! element. All text is escaped by the serialiser. Every `Option` field is
//! omitted when `None` (`serde_with::skip_serializing_none`), and unknown
//! elements and attributes are ignored when parsing libvirt's own output.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

pub mod interfaces_status;
pub mod kubevirt_json;

/// Why XML could not be produced or read.
#[derive(Debug, thiserror::Error)]
pub enum XmlError {
    /// Serialisation failed (a model bug, not an input problem).
    #[error("cannot write domain XML: {0}")]
    Write(#[from] quick_xml::SeError),
    /// libvirt's XML did not match the model.
    #[error("cannot read domain XML: {0}")]
    Read(#[from] quick_xml::DeError),
}

/// An element with no content and no attributes (`<acpi/>`, `<readonly/>`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// `<domain>`: the root element.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "domain")]
pub struct Domain {
    /// Hypervisor: `kvm`, or `qemu` for TCG emulation.
    #[serde(rename = "@type")]
    pub domain_type: String,
    /// `http://libvirt.org/schemas/domain/qemu/1.0` when `qemu:` elements are used.
    #[serde(rename = "@xmlns:qemu")]
    pub xmlns_qemu: Option<String>,
    /// Domain name, `<namespace>_<name>` for a VMI.
    pub name: String,
    /// Domain UUID (the VMI's firmware UUID).
    pub uuid: Option<String>,
    /// Application metadata (`<kubevirt xmlns="http://kubevirt.io">`).
    pub metadata: Option<Metadata>,
    /// Memory hot-plug ceiling (`<maxMemory unit='b' slots='0'>`).
    #[serde(rename = "maxMemory")]
    pub max_memory: Option<MaxMemory>,
    /// Maximum memory at boot (`unit='b'` as KubeVirt writes it).
    pub memory: MemoryValue,
    /// Current balloon target.
    #[serde(rename = "currentMemory")]
    pub current_memory: Option<MemoryValue>,
    /// Hugepages, memfd and shared memory.
    #[serde(rename = "memoryBacking")]
    pub memory_backing: Option<MemoryBacking>,
    /// vCPU count.
    pub vcpu: Vcpu,
    /// Per-vCPU hot-plug state (CPU hot-plug).
    pub vcpus: Option<Vcpus>,
    /// Number of I/O threads.
    pub iothreads: Option<u32>,
    /// vCPU, emulator and I/O thread pinning.
    pub cputune: Option<CpuTune>,
    /// Host NUMA memory policy.
    pub numatune: Option<NumaTune>,
    /// SMBIOS information.
    pub sysinfo: Option<SysInfo>,
    /// Boot configuration.
    pub os: Os,
    /// Machine features.
    pub features: Option<Features>,
    /// CPU model and topology.
    pub cpu: Option<Cpu>,
    /// Guest clock.
    pub clock: Option<Clock>,
    /// Devices.
    pub devices: Devices,
}

/// `<metadata>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// KubeVirt's own metadata.
    pub kubevirt: Option<KubeVirtMetadata>,
}

/// `<metadata><kubevirt xmlns="http://kubevirt.io">`: what the launcher
/// needs to recognise a domain as its VMI's after a restart.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeVirtMetadata {
    /// Always `http://kubevirt.io` (libvirt requires namespaced metadata).
    #[serde(rename = "@xmlns")]
    pub xmlns: Option<String>,
    /// VMI UID.
    pub uid: String,
    /// Termination grace period.
    pub graceperiod: Option<GracePeriodMetadata>,
}

/// `<graceperiod>` inside the KubeVirt metadata.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GracePeriodMetadata {
    /// Seconds between shutdown request and kill.
    #[serde(rename = "deletionGracePeriodSeconds")]
    pub deletion_grace_period_seconds: i64,
}

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

/// `<sysinfo type='smbios'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SysInfo {
    /// `smbios`.
    #[serde(rename = "@type")]
    pub sysinfo_type: String,
    /// SMBIOS type 1 (system) entries.
    pub system: Option<SysInfoEntries>,
    /// SMBIOS type 3 (chassis) entries.
    pub chassis: Option<SysInfoEntries>,
}

/// A list of `<entry name='...'>value</entry>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SysInfoEntries {
    /// Entries in order.
    #[serde(default)]
    pub entry: Vec<SysInfoEntry>,
}

/// `<entry name='uuid'>...</entry>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SysInfoEntry {
    /// Field name (`uuid`, `serial`, `manufacturer` ...).
    #[serde(rename = "@name")]
    pub name: String,
    /// Field value.
    #[serde(rename = "$text", default)]
    pub value: String,
}

/// `<os>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Os {
    /// `<type arch=... machine=...>hvm</type>`.
    #[serde(rename = "type")]
    pub os_type: OsType,
    /// Firmware image (EFI).
    pub loader: Option<Loader>,
    /// EFI variable store.
    pub nvram: Option<Nvram>,
    /// Direct-boot kernel path.
    pub kernel: Option<String>,
    /// Direct-boot initrd path.
    pub initrd: Option<String>,
    /// Kernel command line.
    pub cmdline: Option<String>,
    /// Boot menu.
    pub bootmenu: Option<BootMenu>,
    /// `<smbios mode='sysinfo'/>`.
    pub smbios: Option<Smbios>,
    /// SeaBIOS options.
    pub bios: Option<BiosOptions>,
    /// Boot device order (`<boot dev='hd'/>`; libvirt adds one to the live
    /// XML when no device has a per-device boot order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boot: Vec<OsBoot>,
}

/// `<os><boot dev='hd'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OsBoot {
    /// `hd`, `cdrom`, `network`, `fd`.
    #[serde(rename = "@dev")]
    pub dev: String,
}

/// `<os><type>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OsType {
    /// libvirt architecture (`x86_64`).
    #[serde(rename = "@arch")]
    pub arch: Option<String>,
    /// Machine type (`q35`).
    #[serde(rename = "@machine")]
    pub machine: Option<String>,
    /// `hvm`.
    #[serde(rename = "$text")]
    pub os: String,
}

/// `<loader readonly='yes' secure='no' type='pflash'>PATH</loader>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Loader {
    /// `yes`.
    #[serde(rename = "@readonly")]
    pub readonly: Option<String>,
    /// `yes` / `no`.
    #[serde(rename = "@secure")]
    pub secure: Option<String>,
    /// `pflash`.
    #[serde(rename = "@type")]
    pub loader_type: Option<String>,
    /// Firmware code path.
    #[serde(rename = "$text")]
    pub path: String,
}

/// `<nvram template=VARS>PATH</nvram>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Nvram {
    /// Template copied on first start.
    #[serde(rename = "@template")]
    pub template: Option<String>,
    /// Per-VM variable store.
    #[serde(rename = "$text")]
    pub path: String,
}

/// `<bootmenu enable='yes' timeout='10000'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BootMenu {
    /// `yes` / `no`.
    #[serde(rename = "@enable")]
    pub enable: String,
    /// Milliseconds.
    #[serde(rename = "@timeout")]
    pub timeout: Option<u32>,
}

/// `<smbios mode='sysinfo'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Smbios {
    /// `sysinfo`.
    #[serde(rename = "@mode")]
    pub mode: String,
}

/// `<bios useserial='yes'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BiosOptions {
    /// `yes` to mirror SeaBIOS output to the serial port.
    #[serde(rename = "@useserial")]
    pub useserial: Option<String>,
}

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

/// `<clock offset='utc'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    /// `utc`, `timezone`, `localtime`, `variable`.
    #[serde(rename = "@offset")]
    pub offset: String,
    /// Time zone name when `offset='timezone'`.
    #[serde(rename = "@timezone")]
    pub timezone: Option<String>,
    /// Seconds, or `reset`.
    #[serde(rename = "@adjustment")]
    pub adjustment: Option<String>,
    /// Timers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timer: Vec<Timer>,
}

/// `<timer name='rtc' tickpolicy='catchup' present='yes'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timer {
    /// `rtc`, `pit`, `hpet`, `kvmclock`, `hypervclock`, `tsc`.
    #[serde(rename = "@name")]
    pub name: String,
    /// `delay`, `catchup`, `merge`, `discard`.
    #[serde(rename = "@tickpolicy")]
    pub tickpolicy: Option<String>,
    /// `yes` / `no`.
    #[serde(rename = "@present")]
    pub present: Option<String>,
    /// `guest`, `wall`, `realtime` (rtc only).
    #[serde(rename = "@track")]
    pub track: Option<String>,
    /// Frequency in Hz (`tsc` only).
    #[serde(rename = "@frequency", default)]
    pub frequency: Option<u64>,
}

/// `<devices>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Devices {
    /// QEMU binary (libvirt picks one when absent).
    pub emulator: Option<String>,
    /// Disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disk: Vec<Disk>,
    /// Controllers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controller: Vec<Controller>,
    /// Network interfaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interface: Vec<Interface>,
    /// Host devices passed through (SR-IOV VFs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostdev: Vec<HostDevice>,
    /// Serial ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serial: Vec<Serial>,
    /// Consoles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub console: Vec<Console>,
    /// virtio-serial channels (guest agent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channel: Vec<Channel>,
    /// Input devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input: Vec<Input>,
    /// Remote displays.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphics: Vec<Graphics>,
    /// Video adapters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub video: Vec<Video>,
    /// Memory balloon (libvirt adds one unless `model='none'`).
    pub memballoon: Option<MemBalloon>,
    /// Random number generators.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rng: Vec<Rng>,
    /// Shared directories (virtiofs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystem: Vec<Filesystem>,
    /// Watchdogs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watchdog: Vec<Watchdog>,
    /// TPMs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tpm: Vec<Tpm>,
    /// Sound cards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sound: Vec<Sound>,
    /// USB redirection channels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redirdev: Vec<RedirDev>,
    /// VM socket device.
    pub vsock: Option<Vsock>,
}

/// `<filesystem type='mount' accessmode='passthrough'>` (virtiofs).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Filesystem {
    /// `mount`.
    #[serde(rename = "@type")]
    pub fs_type: String,
    /// `passthrough`.
    #[serde(rename = "@accessmode")]
    pub access_mode: Option<String>,
    /// `<driver type='virtiofs' queue='1024'/>`.
    pub driver: Option<FilesystemDriver>,
    /// `<source socket=.../>` of an external virtiofsd.
    pub source: Option<FilesystemSource>,
    /// `<target dir='TAG'/>`.
    pub target: FilesystemTarget,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<driver type='virtiofs' queue='1024'/>` of a filesystem.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FilesystemDriver {
    /// `virtiofs`.
    #[serde(rename = "@type")]
    pub driver_type: String,
    /// Queue size.
    #[serde(rename = "@queue")]
    pub queue: Option<u32>,
}

/// `<source socket='...'/>` of a filesystem.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FilesystemSource {
    /// virtiofsd's socket.
    #[serde(rename = "@socket")]
    pub socket: Option<String>,
}

/// `<target dir='TAG'/>` of a filesystem (the guest mount tag).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FilesystemTarget {
    /// Mount tag.
    #[serde(rename = "@dir")]
    pub dir: String,
}

/// `<watchdog model='i6300esb' action='reset'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Watchdog {
    /// `i6300esb`, `diag288`.
    #[serde(rename = "@model")]
    pub model: String,
    /// `reset`, `poweroff`, `shutdown` ...
    #[serde(rename = "@action")]
    pub action: Option<String>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<tpm model='tpm-tis'><backend type='emulator' version='2.0'/></tpm>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tpm {
    /// `tpm-tis`, `tpm-crb`.
    #[serde(rename = "@model")]
    pub model: String,
    /// swtpm backend.
    pub backend: TpmBackend,
}

/// `<backend type='emulator' version='2.0' persistent_state='yes'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TpmBackend {
    /// `emulator`.
    #[serde(rename = "@type")]
    pub backend_type: String,
    /// `2.0`.
    #[serde(rename = "@version")]
    pub version: Option<String>,
    /// `yes` to keep the state after the domain is undefined.
    #[serde(rename = "@persistent_state")]
    pub persistent_state: Option<String>,
}

/// `<sound model='ich9'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sound {
    /// `ich9`, `ac97`.
    #[serde(rename = "@model")]
    pub model: String,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<redirdev type='unix' bus='usb'><source mode='bind' path=.../></redirdev>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RedirDev {
    /// `unix`.
    #[serde(rename = "@type")]
    pub redir_type: String,
    /// `usb`.
    #[serde(rename = "@bus")]
    pub bus: String,
    /// Socket QEMU listens on.
    pub source: Option<CharSource>,
}

/// `<vsock model='virtio-non-transitional'><cid auto='no' address='3'/></vsock>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Vsock {
    /// virtio model.
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// Context id.
    pub cid: VsockCid,
}

/// `<cid auto='no' address='3'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VsockCid {
    /// `no`: the address is fixed.
    #[serde(rename = "@auto")]
    pub auto: String,
    /// Context id (from 3).
    #[serde(rename = "@address")]
    pub address: u32,
}

/// `<interface>`: `type='ethernet'`, a NIC on a tap device that network
/// phase 1 created (`managed='no'`), or `type='user'` with a passt
/// backend (KubeVirt's passt binding: libvirt starts `passt` in the pod's
/// network namespace and QEMU talks to it over a Unix socket).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interface {
    /// `ethernet` or `user`.
    #[serde(rename = "@type")]
    pub interface_type: String,
    /// Host link a `user` interface's passt takes addresses and routes
    /// from (`<source dev='eth0'/>`).
    pub source: Option<InterfaceSource>,
    /// Guest MAC.
    pub mac: Option<Mac>,
    /// Host tap device.
    pub target: Option<InterfaceTarget>,
    /// NIC model.
    pub model: Option<Model>,
    /// vhost driver and queues.
    pub driver: Option<InterfaceDriver>,
    /// MTU the guest sees.
    pub mtu: Option<Mtu>,
    /// Alias (`ua-<name>`).
    pub alias: Option<Alias>,
    /// Per-device boot order.
    pub boot: Option<BootOrder>,
    /// Option ROM (`enabled='no'` when the NIC is not a boot device).
    pub rom: Option<Rom>,
    /// Guest PCI address.
    pub address: Option<Address>,
    /// ACPI index.
    pub acpi: Option<AcpiIndex>,
    /// Link state.
    pub link: Option<LinkState>,
    /// User-mode backend (`<backend type='passt' logFile='...'/>`).
    pub backend: Option<InterfaceBackend>,
    /// Ports passt forwards to the guest, one element per protocol.
    #[serde(rename = "portForward", default, skip_serializing_if = "Vec::is_empty")]
    pub port_forward: Vec<PortForward>,
}

/// `<source dev='eth0'/>` of a `user` interface.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceSource {
    /// Host link name.
    #[serde(rename = "@dev")]
    pub dev: Option<String>,
}

/// `<backend type='passt' logFile='/var/run/kubevirt/passt.log'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceBackend {
    /// `passt` (libvirt's default for `user` is QEMU's slirp).
    #[serde(rename = "@type")]
    pub backend_type: Option<String>,
    /// File passt logs to (its `--log-file`).
    #[serde(rename = "@logFile")]
    pub log_file: Option<String>,
}

/// `<portForward proto='tcp' dev='eth0'>`: libvirt turns each into one
/// `--tcp-ports`/`--udp-ports` option of passt (no `<range>`: `all`).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortForward {
    /// `tcp` or `udp`.
    #[serde(rename = "@proto")]
    pub proto: String,
    /// Host address to bind (any when absent).
    #[serde(rename = "@address")]
    pub address: Option<String>,
    /// Host link to bind.
    #[serde(rename = "@dev")]
    pub dev: Option<String>,
    /// Ports or port ranges; none means every port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub range: Vec<PortRange>,
}

/// `<range start='8080'/>`, `<range start='15000' exclude='yes'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortRange {
    /// First port.
    #[serde(rename = "@start")]
    pub start: u16,
    /// Last port of a range.
    #[serde(rename = "@end")]
    pub end: Option<u16>,
    /// Guest port the first one maps to.
    #[serde(rename = "@to")]
    pub to: Option<u16>,
    /// `yes`: these ports are not forwarded.
    #[serde(rename = "@exclude")]
    pub exclude: Option<String>,
}

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

/// `<mac address='02:00:00:00:00:01'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mac {
    /// Lower-case, colon-separated.
    #[serde(rename = "@address")]
    pub address: String,
}

/// `<target dev='tap0' managed='no'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceTarget {
    /// Tap name.
    #[serde(rename = "@dev")]
    pub dev: String,
    /// `no`: libvirt uses the existing tap and does not delete it.
    #[serde(rename = "@managed")]
    pub managed: Option<String>,
}

/// `<model type='virtio-non-transitional'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// Model name.
    #[serde(rename = "@type")]
    pub model_type: String,
}

/// `<driver name='vhost' queues='4'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceDriver {
    /// `vhost`.
    #[serde(rename = "@name")]
    pub name: String,
    /// Queue pairs.
    #[serde(rename = "@queues")]
    pub queues: Option<u32>,
}

/// `<mtu size='1450'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mtu {
    /// Bytes.
    #[serde(rename = "@size")]
    pub size: u32,
}

/// `<rom enabled='no'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rom {
    /// `yes` / `no`.
    #[serde(rename = "@enabled")]
    pub enabled: String,
}

/// `<acpi index='1'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AcpiIndex {
    /// Index (guest NIC name `eno<N>`).
    #[serde(rename = "@index")]
    pub index: u32,
}

/// `<link state='down'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkState {
    /// `up` / `down`.
    #[serde(rename = "@state")]
    pub state: String,
}

/// `<disk type='file' device='disk'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Disk {
    /// `file` or `block`.
    #[serde(rename = "@type")]
    pub disk_type: String,
    /// `disk`, `cdrom`, `lun`.
    #[serde(rename = "@device")]
    pub device: String,
    /// virtio model (`virtio-non-transitional`).
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// QEMU driver options.
    pub driver: Option<DiskDriver>,
    /// Image or device.
    pub source: Option<DiskSource>,
    /// Backing image of a qcow2 overlay.
    #[serde(rename = "backingStore")]
    pub backing_store: Option<BackingStore>,
    /// Guest device name and bus.
    pub target: DiskTarget,
    /// Serial number.
    pub serial: Option<String>,
    /// Per-device boot order.
    pub boot: Option<BootOrder>,
    /// Read-only.
    pub readonly: Option<Empty>,
    /// Shareable between domains.
    pub shareable: Option<Empty>,
    /// Block sizes.
    pub blockio: Option<BlockIo>,
    /// Alias (`ua-<name>` for user devices).
    pub alias: Option<Alias>,
    /// Guest address.
    pub address: Option<Address>,
}

/// `<driver name='qemu' type='raw' cache='none' .../>` of a disk.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskDriver {
    /// `qemu`.
    #[serde(rename = "@name")]
    pub name: String,
    /// Image format: `raw`, `qcow2`.
    #[serde(rename = "@type")]
    pub format: Option<String>,
    /// `none`, `writethrough`, `writeback`.
    #[serde(rename = "@cache")]
    pub cache: Option<String>,
    /// `native`, `threads`.
    #[serde(rename = "@io")]
    pub io: Option<String>,
    /// `stop`, `ignore`, `report`, `enospace`.
    #[serde(rename = "@error_policy")]
    pub error_policy: Option<String>,
    /// `unmap` / `ignore`.
    #[serde(rename = "@discard")]
    pub discard: Option<String>,
    /// virtio-blk queues.
    #[serde(rename = "@queues")]
    pub queues: Option<u32>,
    /// Dedicated I/O thread.
    #[serde(rename = "@iothread", default)]
    pub iothread: Option<u32>,
    /// `on` to put the device behind the vIOMMU.
    #[serde(rename = "@iommu", default)]
    pub iommu: Option<String>,
    /// Several I/O threads (`supplementalPool`).
    #[serde(default)]
    pub iothreads: Option<DriverIoThreads>,
}

/// `<iothreads><iothread id='1'/>...</iothreads>` of a disk driver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DriverIoThreads {
    /// Threads by id.
    #[serde(default)]
    pub iothread: Vec<DriverIoThread>,
}

/// `<iothread id='1'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DriverIoThread {
    /// I/O thread id (from 1).
    #[serde(rename = "@id")]
    pub id: u32,
}

/// `<source file=.../>` or `<source dev=.../>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskSource {
    /// Image file.
    #[serde(rename = "@file")]
    pub file: Option<String>,
    /// Block device.
    #[serde(rename = "@dev")]
    pub dev: Option<String>,
    /// Volume name (KubeVirt sets it on block PVCs).
    #[serde(rename = "@name")]
    pub name: Option<String>,
    /// SCSI persistent reservations (`lun` disks).
    pub reservations: Option<Reservations>,
}

/// `<reservations managed='no'><source type='unix' path=... mode='client'/></reservations>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reservations {
    /// `no`: an external pr-helper serves them.
    #[serde(rename = "@managed")]
    pub managed: String,
    /// The pr-helper's socket.
    pub source: Option<ReservationsSource>,
}

/// `<source type='unix' path=... mode='client'/>` of `<reservations>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReservationsSource {
    /// `unix`.
    #[serde(rename = "@type")]
    pub source_type: String,
    /// Socket path.
    #[serde(rename = "@path")]
    pub path: String,
    /// `client`.
    #[serde(rename = "@mode")]
    pub mode: String,
}

/// `<blockio logical_block_size='512' physical_block_size='4096'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockIo {
    /// Logical block size in bytes.
    #[serde(rename = "@logical_block_size")]
    pub logical_block_size: Option<u32>,
    /// Physical block size in bytes.
    #[serde(rename = "@physical_block_size")]
    pub physical_block_size: Option<u32>,
}

/// `<backingStore type='file'><format type='raw'/><source file=.../></backingStore>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackingStore {
    /// `file` or `block`.
    #[serde(rename = "@type")]
    pub store_type: Option<String>,
    /// Backing image format.
    pub format: Option<Format>,
    /// Backing image location.
    pub source: Option<DiskSource>,
}

/// `<format type='raw'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Format {
    /// `raw`, `qcow2`.
    #[serde(rename = "@type")]
    pub format_type: String,
}

/// `<target dev='vda' bus='virtio'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskTarget {
    /// Guest device name (`vda`, `sda`).
    #[serde(rename = "@dev")]
    pub dev: String,
    /// `virtio`, `sata`, `scsi`, `usb`.
    #[serde(rename = "@bus")]
    pub bus: Option<String>,
    /// CD-ROM tray: `open` / `closed`.
    #[serde(rename = "@tray")]
    pub tray: Option<String>,
}

/// `<boot order='1'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BootOrder {
    /// 1 = first.
    #[serde(rename = "@order")]
    pub order: u32,
}

/// `<alias name='ua-disk0'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Alias {
    /// Alias; user-defined aliases start with `ua-`.
    #[serde(rename = "@name")]
    pub name: String,
}

impl Alias {
    /// The user alias KubeVirt gives a device named `name`: `ua-<name>`.
    pub fn user(name: &str) -> Self {
        Alias {
            name: format!("ua-{name}"),
        }
    }
}

/// `<address type='pci' .../>` or `type='drive'`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Address {
    /// `pci`, `drive`, `ccw` ...; empty (omitted) in a host device's
    /// `<source>` as libvirt writes it back.
    #[serde(rename = "@type", default, skip_serializing_if = "String::is_empty")]
    pub address_type: String,
    /// PCI domain.
    #[serde(rename = "@domain")]
    pub domain: Option<String>,
    /// PCI or drive bus.
    #[serde(rename = "@bus")]
    pub bus: Option<String>,
    /// PCI slot.
    #[serde(rename = "@slot")]
    pub slot: Option<String>,
    /// PCI function.
    #[serde(rename = "@function")]
    pub function: Option<String>,
    /// Drive controller.
    #[serde(rename = "@controller")]
    pub controller: Option<String>,
    /// Drive target.
    #[serde(rename = "@target")]
    pub target: Option<String>,
    /// Drive unit.
    #[serde(rename = "@unit")]
    pub unit: Option<String>,
    /// mdev UUID.
    #[serde(rename = "@uuid", default)]
    pub uuid: Option<String>,
    /// USB device number.
    #[serde(rename = "@device", default)]
    pub device: Option<String>,
    /// CCW channel subsystem id (s390x).
    #[serde(rename = "@cssid", default)]
    pub cssid: Option<String>,
    /// CCW subchannel set id (s390x).
    #[serde(rename = "@ssid", default)]
    pub ssid: Option<String>,
    /// CCW device number (s390x).
    #[serde(rename = "@devno", default)]
    pub devno: Option<String>,
}

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

/// `<serial type='unix'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Serial {
    /// `unix`, `pty`, `file`.
    #[serde(rename = "@type")]
    pub serial_type: String,
    /// Guest port.
    pub target: Option<SerialTarget>,
    /// Host side.
    pub source: Option<CharSource>,
    /// Copy of the output in a file.
    pub log: Option<CharLog>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<target port='0'/>` of a serial port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SerialTarget {
    /// Port number.
    #[serde(rename = "@port")]
    pub port: u32,
}

/// `<source mode='bind' path='...'/>` of a character device.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CharSource {
    /// `bind` (QEMU listens) or `connect`.
    #[serde(rename = "@mode")]
    pub mode: Option<String>,
    /// Unix socket path.
    #[serde(rename = "@path")]
    pub path: Option<String>,
}

/// `<log file='...' append='on'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CharLog {
    /// Log file path.
    #[serde(rename = "@file")]
    pub file: String,
    /// `on` to append across restarts.
    #[serde(rename = "@append")]
    pub append: Option<String>,
}

/// `<console type='pty'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Console {
    /// `pty`.
    #[serde(rename = "@type")]
    pub console_type: String,
    /// Which serial port it shows.
    pub target: Option<ConsoleTarget>,
}

/// `<target type='serial' port='0'/>` of a console.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsoleTarget {
    /// `serial`, `virtio`.
    #[serde(rename = "@type")]
    pub target_type: Option<String>,
    /// Port.
    #[serde(rename = "@port")]
    pub port: Option<u32>,
}

/// `<channel type='unix'>` (the guest agent's virtio-serial port).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    /// `unix`.
    #[serde(rename = "@type")]
    pub channel_type: String,
    /// Host socket; libvirt chooses one when absent.
    pub source: Option<CharSource>,
    /// Guest port name.
    pub target: ChannelTarget,
}

/// `<target type='virtio' name='org.qemu.guest_agent.0' state=.../>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelTarget {
    /// `virtio`.
    #[serde(rename = "@type")]
    pub target_type: String,
    /// Port name.
    #[serde(rename = "@name")]
    pub name: Option<String>,
    /// `connected` / `disconnected` (live XML only).
    #[serde(rename = "@state")]
    pub state: Option<String>,
}

/// `<input type='tablet' bus='usb'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Input {
    /// `tablet`, `keyboard`, `mouse`.
    #[serde(rename = "@type")]
    pub input_type: String,
    /// `usb`, `virtio`, `ps2`.
    #[serde(rename = "@bus")]
    pub bus: Option<String>,
    /// virtio model.
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<graphics type='vnc'>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Graphics {
    /// `vnc`.
    #[serde(rename = "@type")]
    pub graphics_type: String,
    /// Where it listens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listen: Vec<GraphicsListen>,
}

/// `<listen type='socket' socket='...'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphicsListen {
    /// `socket`, `address`.
    #[serde(rename = "@type")]
    pub listen_type: String,
    /// Unix socket path.
    #[serde(rename = "@socket")]
    pub socket: Option<String>,
}

/// `<video><model type='vga' heads='1' vram='16384'/></video>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Video {
    /// Model.
    pub model: VideoModel,
}

/// `<model>` of a video device.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VideoModel {
    /// `vga`, `virtio`, `bochs`.
    #[serde(rename = "@type")]
    pub model_type: String,
    /// Heads.
    #[serde(rename = "@heads")]
    pub heads: Option<u32>,
    /// Video RAM in KiB.
    #[serde(rename = "@vram")]
    pub vram: Option<u32>,
}

/// `<memballoon model='virtio-non-transitional' freePageReporting='on'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemBalloon {
    /// Model, or `none` for no balloon.
    #[serde(rename = "@model")]
    pub model: String,
    /// `on` / `off`.
    #[serde(rename = "@freePageReporting")]
    pub free_page_reporting: Option<String>,
    /// Statistics polling.
    pub stats: Option<BalloonStats>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<stats period='10'/>` (seconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BalloonStats {
    /// Seconds between statistics updates.
    #[serde(rename = "@period")]
    pub period: u32,
}

/// `<rng model='virtio-non-transitional'><backend model='random'>/dev/urandom</backend></rng>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rng {
    /// virtio model.
    #[serde(rename = "@model")]
    pub model: String,
    /// Host entropy source.
    pub backend: RngBackend,
}

/// `<backend model='random'>/dev/urandom</backend>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RngBackend {
    /// `random`.
    #[serde(rename = "@model")]
    pub model: String,
    /// Host device.
    #[serde(rename = "$text")]
    pub source: String,
}

impl Domain {
    /// The domain as indented XML text, all values escaped.
    ///
    /// # Errors
    /// [`XmlError::Write`] only on a model bug (quick-xml cannot represent a value).
    pub fn to_xml(&self) -> Result<String, XmlError> {
        let mut out = String::with_capacity(4096);
        let mut ser = quick_xml::se::Serializer::new(&mut out);
        ser.indent(' ', 2);
        self.serialize(ser)?;
        out.push('\n');
        Ok(out)
    }

    /// Parses libvirt's XML (`virsh dumpxml`, `virDomainGetXMLDesc`).
    ///
    /// # Errors
    /// [`XmlError::Read`] when the text is not XML or lacks required elements.
    pub fn from_xml(xml: &str) -> Result<Domain, XmlError> {
        Ok(quick_xml::de::from_str(xml)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_fields_are_omitted_and_text_is_escaped() {
        let d = Domain {
            domain_type: "kvm".into(),
            name: "ns_a<b>&'\"".into(),
            memory: MemoryValue {
                unit: "b".into(),
                value: 134_217_728,
            },
            vcpu: Vcpu {
                placement: Some("static".into()),
                current: None,
                count: 1,
            },
            os: Os {
                os_type: OsType {
                    arch: Some("x86_64".into()),
                    machine: Some("q35".into()),
                    os: "hvm".into(),
                },
                cmdline: Some("console=ttyS0 x=\"<y>\"".into()),
                ..Os::default()
            },
            ..Domain::default()
        };
        let xml = d.to_xml().unwrap();
        assert!(xml.contains("<name>ns_a&lt;b&gt;&amp;'\"</name>"), "{xml}");
        assert!(
            xml.contains("<memory unit=\"b\">134217728</memory>"),
            "{xml}"
        );
        assert!(
            xml.contains("<cmdline>console=ttyS0 x=\"&lt;y&gt;\"</cmdline>"),
            "{xml}"
        );
        assert!(!xml.contains("uuid"), "{xml}");
        assert!(!xml.contains("features"), "{xml}");
        assert!(!xml.contains("readonly"), "{xml}");
        let back = Domain::from_xml(&xml).unwrap();
        assert_eq!(back, d);
    }

    /// An SR-IOV hostdev as the converter writes it: KubeVirt's attributes,
    /// the host address in `<source>` (no `type`: libvirt's schema has
    /// none there), and a round trip
    /// that keeps every field; libvirt's read-back form (no `type` in the
    /// source address) parses too and is written back without `type=""`.
    #[test]
    fn sriov_hostdev_xml_both_ways() {
        let pci = |bus: &str, slot: &str, function: &str| Address {
            address_type: "pci".into(),
            domain: Some("0x0000".into()),
            bus: Some(bus.into()),
            slot: Some(slot.into()),
            function: Some(function.into()),
            ..Address::default()
        };
        let h = HostDevice {
            mode: Some("subsystem".into()),
            hostdev_type: "pci".into(),
            managed: Some("no".into()),
            source: HostDeviceSource {
                address: Some(Address {
                    address_type: String::new(),
                    ..pci("0x81", "0x11", "0x1")
                }),
            },
            boot: Some(BootOrder { order: 3 }),
            alias: Some(Alias::user("sriov-red")),
            address: Some(pci("0x07", "0x00", "0x0")),
            ..HostDevice::default()
        };
        let d = Domain {
            domain_type: "kvm".into(),
            name: "a".into(),
            memory: MemoryValue {
                unit: "b".into(),
                value: 1 << 27,
            },
            vcpu: Vcpu {
                placement: None,
                current: None,
                count: 1,
            },
            os: Os {
                os_type: OsType {
                    os: "hvm".into(),
                    ..OsType::default()
                },
                ..Os::default()
            },
            devices: Devices {
                hostdev: vec![h],
                ..Devices::default()
            },
            ..Domain::default()
        };
        let xml = d.to_xml().unwrap();
        for want in [
            r#"<hostdev mode="subsystem" type="pci" managed="no">"#,
            "<source>\n        <address domain=\"0x0000\" bus=\"0x81\" slot=\"0x11\" function=\"0x1\"/>\n      </source>",
            r#"<boot order="3"/>"#,
            r#"<alias name="ua-sriov-red"/>"#,
            r#"<address type="pci" domain="0x0000" bus="0x07" slot="0x00" function="0x0"/>"#,
        ] {
            assert!(xml.contains(want), "{want} not in {xml}");
        }
        for absent in ["model=", "display=", "ramfb="] {
            assert!(!xml.contains(absent), "{absent} in {xml}");
        }
        assert_eq!(Domain::from_xml(&xml).unwrap(), d);

        let libvirt = "<domain type='kvm'><name>a</name><memory unit='KiB'>1</memory><vcpu>1</vcpu>\
            <os><type>hvm</type></os><devices><hostdev mode='subsystem' type='pci' managed='no'>\
            <driver name='vfio'/><source><address domain='0x0000' bus='0x81' slot='0x11' function='0x1'/></source>\
            <alias name='ua-sriov-red'/></hostdev></devices></domain>";
        let back = Domain::from_xml(libvirt).unwrap();
        let src = back.devices.hostdev[0].source.address.as_ref().unwrap();
        assert_eq!(src.address_type, "");
        assert_eq!(src.bus.as_deref(), Some("0x81"));
        let again = back.to_xml().unwrap();
        assert!(
            again.contains(r#"<address domain="0x0000" bus="0x81" slot="0x11" function="0x1"/>"#),
            "{again}"
        );
    }

    #[test]
    fn reads_libvirt_output_with_unknown_parts() {
        let xml = r#"<domain type='kvm' id='3' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>default_vmi</name>
  <uuid>5d307ca9-b3ef-428c-8861-06e72d69f223</uuid>
  <metadata><kubevirt xmlns="http://kubevirt.io"><uid>abc</uid><graceperiod><deletionGracePeriodSeconds>30</deletionGracePeriodSeconds></graceperiod></kubevirt></metadata>
  <memory unit='KiB'>131072</memory>
  <currentMemory unit='KiB'>131072</currentMemory>
  <vcpu placement='static'>1</vcpu>
  <resource><partition>/machine</partition></resource>
  <os><type arch='x86_64' machine='pc-q35-10.0'>hvm</type><boot dev='hd'/></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='/a' index='1'/><target dev='vda' bus='virtio'/><alias name='ua-root'/><address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></disk>
    <channel type='unix'><source mode='bind' path='/x'/><target type='virtio' name='org.qemu.guest_agent.0' state='connected'/></channel>
  </devices>
</domain>"#;
        let d = Domain::from_xml(xml).unwrap();
        assert_eq!(d.name, "default_vmi");
        assert_eq!(d.memory.bytes(), Some(128 << 20));
        assert_eq!(d.metadata.unwrap().kubevirt.unwrap().uid, "abc");
        assert_eq!(d.devices.disk[0].alias.as_ref().unwrap().name, "ua-root");
        assert_eq!(
            d.devices.channel[0].target.state.as_deref(),
            Some("connected")
        );
    }
}
