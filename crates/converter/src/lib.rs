//! VMI → libvirt domain conversion, KubeVirt v1.6.6 semantics
//! (`pkg/virt-launcher/virtwrap/converter`).
//!
//! The converter is pure: it reads a defaulted, validated VMI
//! ([`api::load_vmi`]) and a [`ConvertContext`] of host facts and settings,
//! and returns a [`domain::Domain`]. It touches no file, clock or
//! environment (enforced by this crate's `clippy.toml`); probing happens in
//! the launcher before conversion.
//!
//! One module per concern, assembled in [`convert`] in this order: identity
//! and metadata, [`cpu`], [`memory`], [`cputune`], [`numa`], [`os`] (machine, firmware, SMBIOS),
//! [`features`] and clock, [`disks`], [`iothreads`], [`filesystems`], [`devices`] (controllers, consoles,
//! graphics, input, RNG, balloon), [`interfaces`], [`sriov`] host devices. Inputs whose feature is not built yet are
//! refused first by [`unsupported`], so nothing is ever silently dropped.

pub mod arch;
pub mod context;
pub mod cpu;
pub mod cputune;
pub mod devices;
pub mod disks;
pub mod features;
pub mod filesystems;
pub mod firmware_log;
pub mod hostdevices;
pub mod interfaces;
pub mod iothreads;
pub mod memory;
pub mod numa;
pub mod os;
pub mod passt;
pub mod pci_ports;
pub mod sriov;
pub mod unsupported;

use std::collections::BTreeMap;

use api::{Arch, FieldError, VirtualMachineInstance};
pub use context::{ClusterOptions, HostFacts};
use domain::{Domain, GracePeriodMetadata, KubeVirtMetadata, Metadata};

/// Directories the converter writes into the domain: KubeVirt's layout,
/// [`api::layout::Paths`] (re-exported here for [`ConvertContext::paths`]).
pub use api::layout::Paths;

/// libvirt's qemu XML namespace (`xmlns:qemu`).
pub const QEMU_XMLNS: &str = "http://libvirt.org/schemas/domain/qemu/1.0";
/// Namespace of KubeVirt's domain metadata.
pub const KUBEVIRT_XMLNS: &str = "http://kubevirt.io";

/// Why a VMI cannot be converted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The spec is wrong or contradictory (what KubeVirt's admission rejects).
    #[error("{0}")]
    Invalid(FieldError),
    /// The spec uses a feature this launcher does not implement yet.
    #[error("{path}: {feature} is not supported yet")]
    Unsupported {
        /// Field that requests the feature.
        path: String,
        /// The feature, in KubeVirt's words.
        feature: String,
    },
    /// The host cannot run the VMI as configured.
    #[error("{0}")]
    Host(String),
}

impl ConvertError {
    /// An [`ConvertError::Invalid`] about `path`.
    pub fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConvertError::Invalid(FieldError::new(path, message))
    }

    /// An [`ConvertError::Unsupported`] about `path`.
    pub fn unsupported(path: impl Into<String>, feature: impl Into<String>) -> Self {
        ConvertError::Unsupported {
            path: path.into(),
            feature: feature.into(),
        }
    }
}

impl From<FieldError> for ConvertError {
    fn from(e: FieldError) -> Self {
        ConvertError::Invalid(e)
    }
}

/// The libvirt domain type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VirtType {
    /// Hardware virtualisation through `/dev/kvm` (`<domain type='kvm'>`).
    Kvm,
    /// QEMU's TCG software emulation (`<domain type='qemu'>`).
    Qemu,
}

impl VirtType {
    /// The value of `<domain type=...>`.
    pub fn as_str(self) -> &'static str {
        match self {
            VirtType::Kvm => "kvm",
            VirtType::Qemu => "qemu",
        }
    }
}

/// Chooses the domain type as KubeVirt does: KVM when `/dev/kvm` exists,
/// TCG when it does not and `--allow-emulation` is set, and always TCG with
/// `--use-emulation` (for hosts whose `/dev/kvm` cannot run guests).
///
/// # Errors
/// KubeVirt's message `hardware emulation device '/dev/kvm' not present`
/// when KVM is absent and emulation is not allowed.
pub fn choose_virt_type(
    kvm_present: bool,
    allow_emulation: bool,
    use_emulation: bool,
) -> Result<VirtType, ConvertError> {
    match (use_emulation, kvm_present, allow_emulation) {
        (true, _, _) => Ok(VirtType::Qemu),
        (false, true, _) => Ok(VirtType::Kvm),
        (false, false, true) => Ok(VirtType::Qemu),
        (false, false, false) => Err(ConvertError::Host(
            "hardware emulation device '/dev/kvm' not present".into(),
        )),
    }
}

/// Image format of a disk image (`qemu-img info` `format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// Raw image.
    Raw,
    /// QEMU copy-on-write v2.
    Qcow2,
}

impl ImageFormat {
    /// libvirt's name (`raw`, `qcow2`).
    pub fn as_str(self) -> &'static str {
        match self {
            ImageFormat::Raw => "raw",
            ImageFormat::Qcow2 => "qcow2",
        }
    }
}

/// SMBIOS system fields virt-handler sends (`VirtualMachineOptions.SMBios`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmbiosOptions {
    /// Default `KubeVirt`.
    pub manufacturer: String,
    /// Default `KubeVirt`.
    pub family: String,
    /// Default `None`.
    pub product: String,
    /// Default empty.
    pub sku: String,
    /// Default empty.
    pub version: String,
}

impl Default for SmbiosOptions {
    fn default() -> Self {
        SmbiosOptions {
            manufacturer: "KubeVirt".into(),
            family: "KubeVirt".into(),
            product: "None".into(),
            sku: String::new(),
            version: String::new(),
        }
    }
}

/// Per-volume facts found by probing before conversion.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Format of each containerDisk image, by volume name (default raw).
    pub container_disk_formats: BTreeMap<String, ImageFormat>,
    /// Cache mode chosen per volume (O_DIRECT probe) when the disk sets none.
    pub cache_modes: BTreeMap<String, api::vmi::CacheMode>,
    /// PVC/DataVolume volumes that are block devices (`/dev/<vol>`).
    pub block_volumes: std::collections::BTreeSet<String>,
    /// Volumes whose disk sets no io mode and gets `io='native'`: cache
    /// `none` on a block device or a fully allocated image (KubeVirt's
    /// `SetOptimalIOMode`).
    pub native_io: std::collections::BTreeSet<String>,
    /// What network phase 1 made for each interface, by interface name.
    pub interfaces: BTreeMap<String, interfaces::InterfaceHost>,
    /// Changed block tracking: the qcow2 overlay of each tracked volume,
    /// by volume name (KubeVirt main's `ConverterContext.ApplyCBT`); the
    /// volume's image becomes the overlay's raw data store.
    pub cbt_overlays: BTreeMap<String, String>,
}

/// Everything besides the VMI that conversion depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertContext {
    /// Architecture of the domain (the launcher's host arch in a cluster).
    pub arch: Arch,
    /// KVM or TCG.
    pub virt_type: VirtType,
    /// Directory layout.
    pub paths: Paths,
    /// SMBIOS system fields.
    pub smbios: SmbiosOptions,
    /// Balloon statistics period in seconds (virt-handler default 10; 0 = off).
    pub mem_balloon_stats_period: u32,
    /// Log the serial console to a file (cluster default true).
    pub serial_console_log: bool,
    /// Free page reporting allowed by the cluster (default true).
    pub free_page_reporting: bool,
    /// The cluster's Bochs display for EFI guests (virt-handler's
    /// `ClusterConfig.BochsDisplayForEFIGuests`, on unless the cluster
    /// enables `VGADisplayForEFIGuests`): an amd64 guest that names an EFI
    /// boot loader and no video type gets `<model type='bochs'/>`.
    pub bochs_for_efi_guests: bool,
    /// Volumes whose disks get no `discard='unmap'`: preallocated or
    /// thick-provisioned claims (virt-handler's
    /// `VirtualMachineOptions.PreallocatedVolumes`, KubeVirt's
    /// `VolumesDiscardIgnore`). containerDisk, emptyDisk and ephemeral
    /// volumes keep `unmap` regardless (their images are the launcher's
    /// sparse qcow2 files).
    pub volumes_discard_ignore: std::collections::BTreeSet<String>,
    /// The cluster's ExpandDisks feature gate (`ClusterConfig.ExpandDisksEnabled`
    /// of virt-handler's options; standalone `--expand-disks`): grow the
    /// images of filesystem-mode claims to their usable capacity before
    /// the domain starts (the storage crate's expansion, not the converter's).
    pub expand_disks_enabled: bool,
    /// Probe results.
    pub prepared: Prepared,
    /// Host CPUs the pod may use, in the kernel's order: the cgroup's
    /// `cpuset.cpus.effective` (v2) or `cpuset/cpuset.cpus` (v1), parsed
    /// with [`cputune::parse_cpu_list`]. `None` when unknown; VMIs with
    /// `dedicatedCpuPlacement` are then refused.
    pub pod_cpuset: Option<Vec<u32>>,
    /// File names found in [`Paths::ovmf_dir`] (probed by the launcher);
    /// `None` when not probed (converting for another host), and then
    /// KubeVirt's file names are assumed present. See [`os::efi_files`].
    pub ovmf_files: Option<std::collections::BTreeSet<String>>,
    /// The host's NUMA nodes and their CPUs (KubeVirt gets them from
    /// virt-handler; the launcher reads `/sys/devices/system/node`). `None`
    /// when unknown; guest NUMA passthrough is then refused.
    pub host_numa: Option<Vec<numa::HostNumaCell>>,
    /// Host PCI address (`dddd:bb:ss.f`) of the virtual function given to
    /// each SR-IOV interface, by interface name: read by the launcher from
    /// the pod's network-info downward API file (`/etc/podinfo/network-info`,
    /// standalone `--network-info FILE`), else the device plugin's
    /// `PCIDEVICE_*` environment (see [`sriov`]). An SR-IOV interface
    /// missing here is refused, never guessed.
    pub sriov_pci: BTreeMap<String, String>,
    /// SeaBIOS' debug console into the launcher's log (amd64; the
    /// launcher's `VIRT_LAUNCHER_LOG_VERBOSITY` above 5, see
    /// [`firmware_log`]).
    pub firmware_debug_log: bool,
    /// The device plugins' variables of the pod's environment
    /// (`PCI_RESOURCE_<RESOURCE>`, `MDEV_PCI_RESOURCE_<RESOURCE>`,
    /// `USB_RESOURCE_<RESOURCE>`: comma-separated host PCI addresses,
    /// mdev UUIDs or USB `bus:device` pairs), from which `gpus` and
    /// `hostDevices` get their devices (see [`hostdevices`]).
    pub device_plugin_env: BTreeMap<String, String>,
    /// The conversion is a migration target's (PrepareMigrationTarget):
    /// KubeVirt's `Convert` then gives the domain no `hostDevices` and
    /// `gpus` (device plugin or DRA), as libvirt takes the domain from the
    /// incoming migration. Default false.
    pub migration_target: bool,
}

impl ConvertContext {
    /// KubeVirt's defaults for `arch` and `virt_type`: the in-pod layout,
    /// nothing probed, KubeVirt's default cluster settings (see
    /// [`ConvertContext::from_parts`] for a context from its parts).
    pub fn new(arch: Arch, virt_type: VirtType) -> Self {
        ConvertContext::from_parts(
            &HostFacts::new(arch, virt_type),
            &ClusterOptions::default(),
            Prepared::default(),
            BTreeMap::new(),
        )
    }
}

/// Converts a defaulted, validated VMI into a domain.
///
/// # Errors
/// [`ConvertError::Unsupported`] for features not built yet,
/// [`ConvertError::Invalid`] for specs KubeVirt would reject (each naming the
/// field), [`ConvertError::Host`] when the VMI's architecture differs from
/// the context's.
pub fn convert(vmi: &VirtualMachineInstance, ctx: &ConvertContext) -> Result<Domain, ConvertError> {
    if let Some(a) = vmi.spec.architecture.as_deref() {
        let want: Arch = a.parse().map_err(|e: api::arch::UnknownArch| {
            ConvertError::invalid("spec.architecture", e.to_string())
        })?;
        if want != ctx.arch {
            return Err(ConvertError::Host(format!(
                "spec.architecture is {want} but this launcher converts for {}",
                ctx.arch
            )));
        }
    }
    unsupported::check(vmi)?;
    let caps = arch::caps(ctx.arch);

    let mut mem = memory::convert(vmi)?;
    let mut cpu = cpu::convert(vmi, ctx)?;
    // Every vCPU the domain may have (`maxSockets` with CPU hot-plug), and
    // those online at boot, which KubeVirt sizes queues by.
    let vcpus = cpu.vcpu.count;
    let online = cpu.current;
    let mut disks = disks::convert(vmi, ctx, online)?;
    let mut dev = devices::convert(vmi, ctx, &disks)?;
    dev.filesystem = filesystems::convert(vmi)?;
    let iothreads = iothreads::apply(vmi, online, &mut disks, &mut dev.controller)?;
    let cputune = cputune::convert(vmi, ctx, cpu.current, iothreads)?;
    let numa = numa::convert(
        vmi,
        ctx,
        cputune.as_ref(),
        mem.memory.value,
        mem.hugepage_size,
        &mut mem.backing,
    )?;
    let numatune = numa.map(|n| {
        cpu.cpu.numa = Some(domain::CpuNuma { cell: n.cells });
        n.numatune
    });
    if mem.memfd && cpu.cpu.numa.is_none() {
        // libvirt shares memfd memory per NUMA cell: one cell with every vCPU.
        cpu.cpu.numa = Some(domain::CpuNuma {
            cell: vec![domain::NumaCell {
                id: "0".into(),
                cpus: format!("0-{}", vcpus.saturating_sub(1)),
                memory: Some(mem.memory.value / 1024),
                unit: Some("KiB".into()),
                mem_access: None,
            }],
        });
    }
    let interface = interfaces::convert(vmi, ctx, online)?;
    // KubeVirt's order: generic host devices, GPUs, then SR-IOV.
    let mut hostdev = hostdevices::convert(vmi, ctx)?;
    hostdev.extend(sriov::convert(vmi, ctx)?);
    sriov::check_guest_addresses(vmi)?;
    let firmware_log = firmware_log::qemu_args(ctx.arch, ctx.firmware_debug_log);
    let dom = Domain {
        domain_type: ctx.virt_type.as_str().to_owned(),
        xmlns_qemu: firmware_log.as_ref().map(|_| domain::QEMU_XMLNS.to_owned()),
        name: vmi.domain_name(),
        uuid: vmi.firmware_uuid().map(str::to_owned),
        metadata: Some(Metadata {
            kubevirt: Some(KubeVirtMetadata {
                xmlns: Some(KUBEVIRT_XMLNS.to_owned()),
                uid: vmi.uid().to_owned(),
                graceperiod: Some(GracePeriodMetadata {
                    deletion_grace_period_seconds: vmi.grace_period_seconds(),
                }),
            }),
        }),
        max_memory: mem.max_memory,
        memory: mem.memory,
        current_memory: None,
        memory_backing: mem.backing,
        vcpu: cpu.vcpu,
        vcpus: cpu.vcpus,
        iothreads,
        cputune,
        numatune,
        sysinfo: os::sysinfo(vmi, ctx, caps)?,
        os: os::convert(vmi, ctx, caps)?,
        features: Some(features::convert(vmi, caps)?),
        cpu: Some(cpu.cpu),
        clock: features::clock(vmi)?,
        devices: domain::Devices {
            disk: disks,
            interface,
            hostdev,
            ..dev
        },
        qemu_commandline: firmware_log,
    };
    // The placeholder annotation is read at define time; refuse a bad
    // value now.
    pci_ports::placeholder_count(vmi, ctx.arch, &dom)?;
    Ok(dom)
}

/// The user alias `ua-<name>` of a device named at `path`.
///
/// # Errors
/// [`ConvertError::Invalid`] when `name` has a character libvirt's schema
/// does not allow in an alias (`aliasName`: `[a-zA-Z0-9_\-.]+`): libvirt
/// would refuse the whole domain.
pub fn user_alias(path: &str, name: &str) -> Result<domain::Alias, ConvertError> {
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(ConvertError::invalid(
            path,
            format!(
                "{name:?} contains {c:?}: a device name may have only letters, digits, '_', '-' and '.' (libvirt alias ua-<name>)"
            ),
        ));
    }
    Ok(domain::Alias::user(name))
}

/// Rejects text that XML 1.0 cannot carry ([`api::names::xml_text`]).
///
/// # Errors
/// [`ConvertError::Invalid`] naming `path` and the first bad character.
pub fn xml_text(path: &str, s: &str) -> Result<(), ConvertError> {
    api::names::xml_text(path, s).map_err(ConvertError::Invalid)
}

#[cfg(test)]
mod tests;
