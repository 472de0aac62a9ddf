//! Per-architecture differences as data (KubeVirt v1.6.6
//! `converter/arch/{amd64,arm64,ppc64le,s390x}.go` and `pkg/defaults`).

use api::Arch;

/// What differs between architectures in the domain KubeVirt writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchCaps {
    /// The architecture.
    pub arch: Arch,
    /// `<os><smbios mode='sysinfo'/>` and a `<sysinfo>` block.
    pub smbios: bool,
    /// The machine type has ACPI: `<acpi/>` unless the VMI disables it.
    /// Where it has none (pseries, s390-ccw-virtio) an enabled ACPI is
    /// refused: libvirt rejects `<acpi/>` there ("machine type
    /// 'pseries-10.0' does not support ACPI", checked by the e2e `define`
    /// tests against QEMU's own capabilities). KubeVirt v1.6.6 writes
    /// `<acpi/>` on ppc64le by default, a domain libvirt 11.3 refuses.
    pub acpi: bool,
    /// `<pmu state='off'/>` (realtime) is possible; libvirt refuses it on
    /// ppc64le ("PMU is always enabled for architecture 'ppc64le'").
    pub pmu_off: bool,
    /// SeaBIOS' serial output (`<bios useserial='yes'/>`) exists: x86 only
    /// (libvirt: "BIOS serial console only supported on x86 architectures").
    pub bios_serial: bool,
    /// `<vmport state='off'/>` in `<features>`.
    pub vmport: bool,
    /// The USB controller is always `qemu-xhci` (else `none` unless needed).
    pub usb_always: bool,
    /// No USB at all (s390x).
    pub usb_unsupported: bool,
    /// Video model of the autoattached graphics device.
    pub video_model: &'static str,
    /// Default video model of a guest that boots EFI (a `bootloader.efi`
    /// it names), when the cluster's Bochs display for EFI guests is on
    /// ([`crate::ConvertContext::bochs_for_efi_guests`]): `bochs`, without
    /// `vram`, on amd64 (KubeVirt's `AddGraphicsDevice`); `None`: the
    /// usual [`ArchCaps::video_model`].
    pub efi_video_model: Option<&'static str>,
    /// Tablet and keyboard added with graphics (arm64: usb; s390x: virtio keyboard).
    pub graphics_inputs: &'static [(&'static str, &'static str)],
    /// Name of virtio device models (`virtio-non-transitional`, s390x `virtio`).
    pub virtio_model: &'static str,
    /// Boots through EFI when the VMI names no boot loader (arm64).
    pub efi_default: bool,
    /// EFI code and variable store file names under `--ovmf-path`
    /// (secure-boot code, secure-boot vars, plain code, plain vars).
    pub efi_files: Option<[&'static str; 4]>,
    /// Watchdog model (`spec.domain.devices.watchdog.<model>`), if any.
    pub watchdog: Option<&'static str>,
    /// An emulated TPM (`tpm-tis`) is available.
    pub tpm: bool,
    /// An emulated sound card (`ich9`, `ac97`) is available.
    pub sound: bool,
    /// Video models `spec.domain.devices.video.type` may name.
    pub video_models: &'static [&'static str],
    /// CPU modes libvirt supports for this architecture under TCG
    /// (`virsh domcapabilities --arch A --virttype qemu`, libvirt 11.3 with
    /// QEMU 10.0 on an x86_64 host; the e2e `define` tests compare them
    /// with the live answer). `host-passthrough` is never among them.
    pub tcg_cpu_modes: &'static [&'static str],
}

impl ArchCaps {
    /// The `<cpu mode>` for `host-model`/`host-passthrough` under TCG: the
    /// mode itself where TCG has it, else `maximum` (QEMU's `-cpu max`,
    /// the nearest to the host's CPU), else none: QEMU's default CPU for
    /// the machine (ppc64, whose TCG has only named POWER models).
    pub fn tcg_cpu_mode(&self, mode: &'static str) -> Option<&'static str> {
        [mode, "maximum"]
            .into_iter()
            .find(|m| self.tcg_cpu_modes.contains(m))
    }
}

const AMD64: ArchCaps = ArchCaps {
    arch: Arch::Amd64,
    smbios: true,
    acpi: true,
    pmu_off: true,
    bios_serial: true,
    vmport: true,
    usb_always: false,
    usb_unsupported: false,
    video_model: "vga",
    efi_video_model: Some("bochs"),
    graphics_inputs: &[],
    virtio_model: "virtio-non-transitional",
    efi_default: false,
    efi_files: Some([
        "OVMF_CODE.secboot.fd",
        "OVMF_VARS.secboot.fd",
        "OVMF_CODE.fd",
        "OVMF_VARS.fd",
    ]),
    watchdog: Some("i6300esb"),
    tpm: true,
    sound: true,
    video_models: &["vga", "cirrus", "virtio", "ramfb", "bochs"],
    tcg_cpu_modes: &["host-model", "maximum"],
};

const ARM64: ArchCaps = ArchCaps {
    arch: Arch::Arm64,
    smbios: true,
    acpi: true,
    pmu_off: true,
    bios_serial: false,
    vmport: false,
    usb_always: true,
    usb_unsupported: false,
    video_model: "virtio",
    efi_video_model: None,
    graphics_inputs: &[("tablet", "usb"), ("keyboard", "usb")],
    virtio_model: "virtio-non-transitional",
    efi_default: true,
    efi_files: Some([
        "AAVMF_CODE.fd",
        "AAVMF_VARS.fd",
        "AAVMF_CODE.fd",
        "AAVMF_VARS.fd",
    ]),
    watchdog: None,
    tpm: false,
    sound: false,
    video_models: &["virtio", "ramfb"],
    tcg_cpu_modes: &["maximum"],
};

const PPC64LE: ArchCaps = ArchCaps {
    arch: Arch::Ppc64le,
    smbios: false,
    acpi: false,
    pmu_off: false,
    bios_serial: false,
    vmport: false,
    usb_always: true,
    usb_unsupported: false,
    video_model: "vga",
    efi_video_model: None,
    graphics_inputs: &[],
    virtio_model: "virtio-non-transitional",
    efi_default: false,
    efi_files: None,
    watchdog: None,
    tpm: false,
    sound: false,
    video_models: &["vga", "virtio"],
    tcg_cpu_modes: &[],
};

const S390X: ArchCaps = ArchCaps {
    arch: Arch::S390x,
    smbios: false,
    acpi: false,
    pmu_off: true,
    bios_serial: false,
    vmport: false,
    usb_always: false,
    usb_unsupported: true,
    video_model: "virtio",
    efi_video_model: None,
    graphics_inputs: &[("keyboard", "virtio")],
    virtio_model: "virtio",
    efi_default: false,
    efi_files: None,
    watchdog: Some("diag288"),
    tpm: false,
    sound: false,
    video_models: &["virtio"],
    tcg_cpu_modes: &["maximum"],
};

/// The virtio model name for `vmi` on `caps`: `virtio-transitional` when
/// `spec.domain.devices.useVirtioTransitional` is true, except on s390x,
/// where it is always plain `virtio`.
pub fn virtio_model(caps: &ArchCaps, vmi: &api::VirtualMachineInstance) -> &'static str {
    if caps.virtio_model != "virtio"
        && vmi.spec.domain.devices.use_virtio_transitional == Some(true)
    {
        "virtio-transitional"
    } else {
        caps.virtio_model
    }
}

/// The capabilities of `arch`.
pub fn caps(arch: Arch) -> &'static ArchCaps {
    match arch {
        Arch::Amd64 => &AMD64,
        Arch::Arm64 => &ARM64,
        Arch::Ppc64le => &PPC64LE,
        Arch::S390x => &S390X,
    }
}
