//! `<os>` (machine type, firmware, direct kernel boot, boot menu) and
//! `<sysinfo>` (SMBIOS) from `spec.domain.machine` and `spec.domain.firmware`.

use api::vmi::StartStrategy;
use api::VirtualMachineInstance;
use domain::{
    BiosOptions, BootMenu, Loader, Nvram, Os, OsType, Smbios, SysInfo, SysInfoEntries, SysInfoEntry,
};

use crate::arch::ArchCaps;
use crate::{ConvertContext, ConvertError};

/// KubeVirt's boot menu timeout for `startStrategy: Paused`, in ms.
pub const PAUSED_BOOT_MENU_TIMEOUT_MS: u32 = 10_000;

/// Whether the VMI names an EFI boot loader (`firmware.bootloader.efi`,
/// KubeVirt's `IsBootloaderEFI`), whatever the architecture's default.
pub fn names_efi(vmi: &VirtualMachineInstance) -> bool {
    vmi.spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.bootloader.as_ref())
        .is_some_and(|b| b.efi.is_some())
}

/// Which EFI variant a VMI boots with, if any: `Some(secure_boot)`.
/// arm64 boots EFI (without secure boot) when no boot loader is named.
pub fn efi(vmi: &VirtualMachineInstance, caps: &ArchCaps) -> Option<bool> {
    let bl = vmi
        .spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.bootloader.as_ref());
    match bl {
        Some(b) if b.efi.is_some() => {
            Some(b.efi.as_ref().and_then(|e| e.secure_boot).unwrap_or(true))
        }
        Some(b) if b.bios.is_some() => None,
        _ if caps.efi_default => Some(false),
        _ => None,
    }
}

/// EFI code and variable-template paths for `secure_boot` under
/// `--ovmf-path`, chosen as KubeVirt does from the files present
/// ([`ConvertContext::ovmf_files`]; when not probed, all are assumed):
/// secure boot takes the secure-boot code and the secure-boot variable
/// template, falling back to the plain template; plain EFI takes the plain
/// code, falling back to the secure-boot code, and the plain template.
/// `None` on architectures without EFI.
///
/// # Errors
/// [`ConvertError::Host`] `EFI OVMF roms missing for booting in EFI mode
/// with SecureBoot=<b>, SEV=false` when a needed file is missing.
pub fn efi_files(
    ctx: &ConvertContext,
    caps: &ArchCaps,
    secure_boot: bool,
) -> Result<Option<(String, String)>, ConvertError> {
    let Some([sb_code, sb_vars, code, vars]) = caps.efi_files else {
        return Ok(None);
    };
    let present = |f: &str| ctx.ovmf_files.as_ref().is_none_or(|s| s.contains(f));
    let first = |names: &[&'static str]| names.iter().copied().find(|f| present(f));
    let (c, v) = if secure_boot {
        (first(&[sb_code]), first(&[sb_vars, vars]))
    } else {
        (first(&[code, sb_code]), first(&[vars]))
    };
    let (Some(c), Some(v)) = (c, v) else {
        return Err(ConvertError::Host(format!(
            "EFI OVMF roms missing for booting in EFI mode with SecureBoot={secure_boot}, SEV=false (looked in {})",
            ctx.paths.ovmf_dir
        )));
    };
    Ok(Some((ctx.paths.ovmf_file(c), ctx.paths.ovmf_file(v))))
}

/// `<os>`: `<type arch machine>hvm</type>`; `<smbios mode='sysinfo'/>` where
/// the arch has SMBIOS; EFI `<loader readonly='yes' secure type='pflash'>`
/// and `<nvram template>` at `<nvram-dir>/<vmi-name>_VARS.fd`; SeaBIOS
/// `<bios useserial='yes'/>`; direct kernel boot from
/// `<container-disk-dir>/kernel-boot/<file>`; a boot menu for `Paused`.
///
/// # Errors
/// [`ConvertError::Invalid`] for EFI on an arch without EFI firmware, secure
/// boot without SMM, BIOS or secure boot on arm64 (KubeVirt's admission),
/// `bios.useSerial` off amd64, kernel paths that are not plain file names, or text XML
/// cannot carry.
pub fn convert(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    caps: &ArchCaps,
) -> Result<Os, ConvertError> {
    let dom = &vmi.spec.domain;
    let machine = dom
        .machine
        .as_ref()
        .map(|m| m.machine_type.clone())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| ctx.arch.default_machine_type().to_owned());
    // libvirt's schema: `<type machine>` matches [a-zA-Z0-9_.-]+.
    if machine.is_empty()
        || !machine
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        return Err(ConvertError::invalid(
            "spec.domain.machine.type",
            format!("{machine:?} is not a machine type: letters, digits, '_', '.' and '-' only"),
        ));
    }
    let mut os = Os {
        os_type: OsType {
            arch: Some(ctx.arch.libvirt_name().to_owned()),
            machine: Some(machine),
            os: "hvm".into(),
        },
        ..Os::default()
    };
    if caps.smbios {
        os.smbios = Some(Smbios {
            mode: "sysinfo".into(),
        });
    }
    let firmware = dom.firmware.clone().unwrap_or_default();
    let bootloader = firmware.bootloader.as_ref();
    if caps.arch == api::Arch::Arm64 {
        // KubeVirt's arm64 admission (webhooks `validateBootOptions`).
        if bootloader.is_some_and(|b| b.bios.is_some()) {
            return Err(ConvertError::invalid(
                "spec.domain.firmware.bootloader.bios",
                "Arm64 does not support bios boot, please change to uefi boot",
            ));
        }
        if efi(vmi, caps) == Some(true) {
            return Err(ConvertError::invalid(
                "spec.domain.firmware.bootloader.efi.secureBoot",
                "UEFI secure boot is currently not supported on aarch64 Arch (set secureBoot: false)",
            ));
        }
    }
    if let Some(secure) = efi(vmi, caps) {
        let path = "spec.domain.firmware.bootloader.efi";
        let smm = dom
            .features
            .as_ref()
            .and_then(|f| f.smm.as_ref())
            .is_some_and(|s| s.is_enabled());
        if secure && !smm {
            return Err(ConvertError::invalid(
                format!("{path}.secureBoot"),
                "SecureBoot requires SMM, which is currently disabled (enable spec.domain.features.smm or set secureBoot: false)",
            ));
        }
        let (code, vars) = efi_files(ctx, caps, secure)?.ok_or_else(|| {
            ConvertError::invalid(path, format!("EFI is not available on {}", ctx.arch))
        })?;
        os.loader = Some(Loader {
            readonly: Some("yes".into()),
            secure: Some(if secure { "yes" } else { "no" }.into()),
            loader_type: Some("pflash".into()),
            path: code,
        });
        os.nvram = Some(Nvram {
            template: Some(vars),
            path: ctx.paths.nvram(vmi),
        });
    }
    if let Some(bios) = bootloader.and_then(|b| b.bios.as_ref()) {
        if bios.use_serial == Some(true) && !caps.bios_serial {
            return Err(ConvertError::invalid(
                "spec.domain.firmware.bootloader.bios.useSerial",
                format!(
                    "SeaBIOS serial output exists on amd64 only, not on {}",
                    ctx.arch
                ),
            ));
        }
        if bios.use_serial == Some(true) {
            if dom.devices.autoattach_serial_console == Some(false) {
                return Err(ConvertError::invalid(
                    "spec.domain.firmware.bootloader.bios.useSerial",
                    "needs a serial console, but spec.domain.devices.autoattachSerialConsole is false",
                ));
            }
            os.bios = Some(BiosOptions {
                useserial: Some("yes".into()),
            });
        }
    }
    if let Some(s) = &firmware.serial {
        crate::xml_text("spec.domain.firmware.serial", s)?;
    }
    if let Some(kb) = &firmware.kernel_boot {
        let base = "spec.domain.firmware.kernelBoot";
        if kb.kernel_args.is_some() && kb.container.is_none() {
            return Err(ConvertError::invalid(
                format!("{base}.kernelArgs"),
                "kernel arguments need a kernel: set kernelBoot.container",
            ));
        }
        if let Some(args) = &kb.kernel_args {
            crate::xml_text(&format!("{base}.kernelArgs"), args)?;
            os.cmdline = Some(args.clone());
        }
        if let Some(c) = &kb.container {
            let file = |field: &str, p: &Option<String>| -> Result<Option<String>, ConvertError> {
                let Some(p) = p.as_deref().filter(|p| !p.is_empty()) else {
                    return Ok(None);
                };
                let path = ctx.paths.kernel_boot_artifact(p).ok_or_else(|| {
                    ConvertError::invalid(
                        format!("{base}.container.{field}"),
                        format!("{p:?} does not name a file"),
                    )
                })?;
                crate::xml_text(&format!("{base}.container.{field}"), &path)?;
                Ok(Some(path))
            };
            os.kernel = file("kernelPath", &c.kernel_path)?;
            os.initrd = file("initrdPath", &c.initrd_path)?;
            if os.kernel.is_none() && os.initrd.is_none() {
                return Err(ConvertError::invalid(
                    format!("{base}.container"),
                    "kernelPath or initrdPath is required",
                ));
            }
        }
    }
    if vmi.spec.start_strategy == Some(StartStrategy::Paused) {
        os.bootmenu = Some(BootMenu {
            enable: "yes".into(),
            timeout: Some(PAUSED_BOOT_MENU_TIMEOUT_MS),
        });
    }
    Ok(os)
}

/// `<sysinfo type='smbios'>` with the system entries `uuid`, `serial`,
/// then the SMBIOS options (manufacturer, family, product, sku, version),
/// and the chassis entries (manufacturer, version, serial, asset, sku) of
/// `spec.domain.chassis`; empty values are left out. None on arches without
/// SMBIOS.
///
/// # Errors
/// [`ConvertError::Invalid`] for a chassis on an architecture without
/// SMBIOS, or chassis text XML cannot carry.
pub fn sysinfo(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    caps: &ArchCaps,
) -> Result<Option<SysInfo>, ConvertError> {
    let chassis = match &vmi.spec.domain.chassis {
        Some(_) if !caps.smbios => {
            return Err(ConvertError::invalid(
                "spec.domain.chassis",
                format!("SMBIOS is not available on {}", ctx.arch),
            ))
        }
        Some(c) => {
            let mut entries = Vec::new();
            for (name, v) in [
                ("manufacturer", &c.manufacturer),
                ("version", &c.version),
                ("serial", &c.serial),
                ("asset", &c.asset),
                ("sku", &c.sku),
            ] {
                let Some(v) = v.as_deref().filter(|v| !v.is_empty()) else {
                    continue;
                };
                crate::xml_text(&format!("spec.domain.chassis.{name}"), v)?;
                entries.push(SysInfoEntry {
                    name: name.into(),
                    value: v.into(),
                });
            }
            // No `<chassis/>` without entries: libvirt's schema wants at
            // least one (and Go's `chassis>entry` writes none either).
            (!entries.is_empty()).then_some(SysInfoEntries { entry: entries })
        }
        None => None,
    };
    if !caps.smbios {
        return Ok(None);
    }
    let fw = vmi.spec.domain.firmware.as_ref();
    let s = &ctx.smbios;
    let entries: Vec<SysInfoEntry> = [
        ("uuid", vmi.firmware_uuid().unwrap_or("")),
        ("serial", fw.and_then(|f| f.serial.as_deref()).unwrap_or("")),
        ("manufacturer", s.manufacturer.as_str()),
        ("family", s.family.as_str()),
        ("product", s.product.as_str()),
        ("sku", s.sku.as_str()),
        ("version", s.version.as_str()),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(n, v)| SysInfoEntry {
        name: n.into(),
        value: v.into(),
    })
    .collect();
    Ok(Some(SysInfo {
        sysinfo_type: "smbios".into(),
        system: Some(SysInfoEntries { entry: entries }),
        chassis,
    }))
}
