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
    /// ACPI on unless the VMI disables it (s390x: off unless enabled).
    pub acpi_default: bool,
    /// `<vmport state='off'/>` in `<features>`.
    pub vmport: bool,
    /// The USB controller is always `qemu-xhci` (else `none` unless needed).
    pub usb_always: bool,
    /// No USB at all (s390x).
    pub usb_unsupported: bool,
    /// Video model of the autoattached graphics device.
    pub video_model: &'static str,
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
}

const AMD64: ArchCaps = ArchCaps {
    arch: Arch::Amd64,
    smbios: true,
    acpi_default: true,
    vmport: true,
    usb_always: false,
    usb_unsupported: false,
    video_model: "vga",
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
};

const ARM64: ArchCaps = ArchCaps {
    arch: Arch::Arm64,
    smbios: true,
    acpi_default: true,
    vmport: false,
    usb_always: true,
    usb_unsupported: false,
    video_model: "virtio",
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
};

const PPC64LE: ArchCaps = ArchCaps {
    arch: Arch::Ppc64le,
    smbios: false,
    acpi_default: true,
    vmport: false,
    usb_always: true,
    usb_unsupported: false,
    video_model: "vga",
    graphics_inputs: &[],
    virtio_model: "virtio-non-transitional",
    efi_default: false,
    efi_files: None,
    watchdog: None,
    tpm: false,
    sound: false,
    video_models: &["vga", "virtio"],
};

const S390X: ArchCaps = ArchCaps {
    arch: Arch::S390x,
    smbios: false,
    acpi_default: false,
    vmport: false,
    usb_always: false,
    usb_unsupported: true,
    video_model: "virtio",
    graphics_inputs: &[("keyboard", "virtio")],
    virtio_model: "virtio",
    efi_default: false,
    efi_files: None,
    watchdog: Some("diag288"),
    tpm: false,
    sound: false,
    video_models: &["virtio"],
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
