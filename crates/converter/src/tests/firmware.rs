//! CPU, memory, firmware and boot (`cpu.rs`, `memory.rs`, `os.rs`,
//! `features.rs`).

use super::*;

#[test]
fn case_014_memory_is_exact_bytes() {
    for (q, bytes) in [
        ("64M", 64_000_000u64),
        ("64Mi", 67_108_864),
        ("1G", 1_000_000_000),
        ("1Gi", 1_073_741_824),
        ("1024M", 1_024_000_000),
        ("3G", 3_000_000_000),
        ("45Gi", 48_318_382_080),
        ("2780Gi", 2_985_002_270_720),
        ("1.5Gi", 1_610_612_736),
        ("451231", 451_231),
        ("8G", 8_000_000_000),
        ("2222222200m", 2_222_222),
    ] {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: m}}\nspec:\n  domain:\n    resources:\n      requests: {{memory: \"{q}\"}}\n"
        );
        let v = if bytes < 1 << 20 {
            // Below the 1Mi floor of validation: convert the raw defaulted VMI.
            let mut v = api::load::from_slice(doc.as_bytes()).unwrap();
            api::defaults::apply(&mut v, Arch::Amd64);
            api::defaults::fill_missing_uid(&mut v);
            v
        } else {
            vmi(&doc, Arch::Amd64)
        };
        let d = convert(&v, &ConvertContext::new(Arch::Amd64, VirtType::Kvm)).unwrap();
        assert_eq!(
            (d.memory.unit.as_str(), d.memory.value),
            ("b", bytes),
            "{q}"
        );
    }
    // guest wins over requests.
    let d = conv(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: m}\nspec:\n  domain:\n    memory: {guest: 1G}\n    resources:\n      requests: {memory: 1Gi}\n",
        Arch::Amd64,
    )
    .unwrap();
    assert_eq!(d.memory.value, 1_000_000_000);
    // Negative: an error, never a wrapped unsigned value.
    let mut v = api::load::from_slice(
        b"apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: m}\nspec:\n  domain:\n    memory: {guest: -45Gi}\n",
    )
    .unwrap();
    api::defaults::apply(&mut v, Arch::Amd64);
    api::defaults::fill_missing_uid(&mut v);
    let e = convert(&v, &ConvertContext::new(Arch::Amd64, VirtType::Kvm)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.domain.memory.guest: Memory size '-45Gi' must be greater than or equal to 0"
    );
    // The case's input: 1G is not a multiple of 2Mi hugepages.
    let doc = data("cases/014-memory-quantity-units.yaml");
    let e = conv(&doc, Arch::Amd64).unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.domain.memory.guest: '1G' is not a multiple of the page size spec.domain.memory.hugepages.pageSize '2Mi'"
    );
    // With 1Gi it converts: exact bytes, hugepages backed by memfd.
    let d = conv(&doc.replace("guest: 1G", "guest: 1Gi"), Arch::Amd64).unwrap();
    assert_eq!(d.memory.value, 1_073_741_824);
    let mb = d.memory_backing.as_ref().unwrap();
    assert!(mb.hugepages.is_some());
    assert_eq!(mb.source.as_ref().unwrap().source_type, "memfd");
}

#[test]
fn efi_kernel_boot_and_host_disk_paths() {
    let d = conv(&data("examples/vmi-alpine-efi.yaml"), Arch::Amd64).unwrap();
    let l = d.os.loader.as_ref().unwrap();
    assert_eq!(
        (l.path.as_str(), l.secure.as_deref()),
        ("/usr/share/OVMF/OVMF_CODE.fd", Some("no"))
    );
    let n = d.os.nvram.as_ref().unwrap();
    assert_eq!(n.path, "/var/lib/libvirt/qemu/nvram/vmi-alpine-efi_VARS.fd");
    assert_eq!(n.template.as_deref(), Some("/usr/share/OVMF/OVMF_VARS.fd"));
    let d = conv(&data("examples/vmi-kernel-boot.yaml"), Arch::Amd64).unwrap();
    assert_eq!(
        d.os.kernel.as_deref(),
        Some("/var/run/kubevirt/container-disks/kernel-boot/vmlinuz-virt")
    );
    assert_eq!(
        d.os.initrd.as_deref(),
        Some("/var/run/kubevirt/container-disks/kernel-boot/initramfs-virt")
    );
    assert_eq!(d.os.cmdline.as_deref(), Some("console=ttyS0"));
    let d = conv(&data("examples/vmi-host-disk.yaml"), Arch::Amd64).unwrap();
    assert_eq!(
        disk(&d, "host-disk")
            .source
            .as_ref()
            .unwrap()
            .file
            .as_deref(),
        Some("/var/run/kubevirt-private/vmi-disks/host-disk/disk.img")
    );
    let d = conv(&data("examples/vmi-pvc.yaml"), Arch::Amd64).unwrap();
    assert_eq!(
        disk(&d, "pvcdisk").source.as_ref().unwrap().file.as_deref(),
        Some("/var/run/kubevirt-private/vmi-disks/pvcdisk/disk.img")
    );
    // Secure boot needs SMM.
    let sb = data("examples/vmi-alpine-efi.yaml").replace("secureBoot: false", "secureBoot: true");
    let e = conv(&sb, Arch::Amd64).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "spec.domain.firmware.bootloader.efi.secureBoot: SecureBoot requires SMM, which is currently disabled"
        ),
        "{e}"
    );
    let sb = sb.replace(
        "    memory:\n",
        "    features:\n      smm: {}\n    memory:\n",
    );
    let d = conv(&sb, Arch::Amd64).unwrap();
    assert_eq!(
        d.os.loader.as_ref().unwrap().path,
        "/usr/share/OVMF/OVMF_CODE.secboot.fd"
    );
    assert!(d.features.as_ref().unwrap().smm.is_some());
}

#[test]
fn cpu_model_features_and_clock() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: c}\nspec:\n  domain:\n    memory: {guest: 64Mi}\n    cpu:\n      cores: 2\n      threads: 2\n      model: Haswell-noTSX\n      features:\n      - name: vmx\n      - {name: pcid, policy: disable}\n    clock:\n      utc: {offsetSeconds: 60}\n      timer:\n        rtc: {tickPolicy: catchup, track: guest}\n        hpet: {present: false}\n";
    let d = conv(doc, Arch::Amd64).unwrap();
    let cpu = d.cpu.as_ref().unwrap();
    assert_eq!(
        (cpu.mode.as_deref(), cpu.model.as_deref()),
        (Some("custom"), Some("Haswell-noTSX"))
    );
    let feats: Vec<_> = cpu
        .feature
        .iter()
        .map(|f| (f.name.as_str(), f.policy.as_str()))
        .collect();
    assert_eq!(
        feats,
        [("vmx", "require"), ("pcid", "disable"), ("mpx", "disable")]
    );
    assert_eq!(d.vcpu.count, 4);
    let clock = d.clock.as_ref().unwrap();
    assert_eq!(
        (clock.offset.as_str(), clock.adjustment.as_deref()),
        ("utc", Some("60"))
    );
    assert_eq!(clock.timer[0].track.as_deref(), Some("guest"));
    assert_eq!(clock.timer[1].present.as_deref(), Some("no"));
    let bad = doc.replace("policy: disable", "policy: sometimes");
    let e = conv(&bad, Arch::Amd64).unwrap_err().to_string();
    assert_eq!(e, "spec.domain.cpu.features[1].policy: \"sometimes\" is not one of force, require, optional, disable, forbid");
    let bad = doc.replace("tickPolicy: catchup", "tickPolicy: '<x>'");
    assert!(conv(&bad, Arch::Amd64)
        .unwrap_err()
        .to_string()
        .starts_with("spec.domain.clock.timer.rtc.tickPolicy"));
}

#[test]
fn bios_serial_output_needs_a_serial_console() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: b}\nspec:\n  domain:\n    memory: {guest: 64Mi}\n    firmware: {bootloader: {bios: {useSerial: true}}}\n    devices: {autoattachSerialConsole: false}\n";
    let e = conv(doc, Arch::Amd64).unwrap_err().to_string();
    assert_eq!(e, "spec.domain.firmware.bootloader.bios.useSerial: needs a serial console, but spec.domain.devices.autoattachSerialConsole is false");
    let d = conv(
        &doc.replace(
            "autoattachSerialConsole: false",
            "autoattachSerialConsole: true",
        ),
        Arch::Amd64,
    )
    .unwrap();
    assert_eq!(d.os.bios.unwrap().useserial.as_deref(), Some("yes"));
}

/// KubeVirt's arm64 admission (bios, secure boot, CPU model, disk buses),
/// which libvirt enforces too for BIOS ("ACPI requires UEFI on this
/// architecture") and secure boot ("Secure boot is supported with q35
/// machine types only"), and SeaBIOS serial output, which libvirt allows
/// on x86 only ("BIOS serial console only supported on x86
/// architectures"); all found by the e2e `define` tests.
#[test]
fn arm64_admission_and_bios_serial_per_arch() {
    let base = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec:\n  domain:\n    memory: {guest: 64Mi}\n";
    let with = |extra: &str| format!("{base}{extra}");
    let err = |doc: &str, arch| conv(doc, arch).unwrap_err().to_string();
    assert_eq!(
        err(&with("    firmware: {bootloader: {bios: {}}}\n"), Arch::Arm64),
        "spec.domain.firmware.bootloader.bios: Arm64 does not support bios boot, please change to uefi boot"
    );
    for efi in ["{}", "{secureBoot: true}"] {
        let doc = with(&format!(
            "    features: {{smm: {{}}}}\n    firmware: {{bootloader: {{efi: {efi}}}}}\n"
        ));
        assert_eq!(
            err(&doc, Arch::Arm64),
            "spec.domain.firmware.bootloader.efi.secureBoot: UEFI secure boot is currently not supported on aarch64 Arch (set secureBoot: false)"
        );
        assert!(conv(&doc, Arch::Amd64).unwrap().os.loader.is_some());
    }
    let plain = conv(
        &with("    firmware: {bootloader: {efi: {secureBoot: false}}}\n"),
        Arch::Arm64,
    )
    .unwrap();
    assert_eq!(plain.os.loader.unwrap().secure.as_deref(), Some("no"));
    assert_eq!(
        err(&with("    cpu: {model: host-model}\n"), Arch::Arm64),
        "spec.domain.cpu.model: currently, host-passthrough is the only model supported on Arm64, not \"host-model\""
    );
    let d = conv(base, Arch::Arm64).unwrap();
    assert_eq!(d.cpu.unwrap().mode.as_deref(), Some("host-passthrough"));
    let disks = |bus: &str, kind: &str| {
        with(&format!(
            "    devices:\n      disks:\n      - {{name: d, {kind}: {{bus: {bus}}}}}\n  volumes:\n  - {{name: d, emptyDisk: {{capacity: 1Gi}}}}\n"
        ))
    };
    for (bus, kind) in [("sata", "disk"), ("usb", "disk"), ("sata", "cdrom")] {
        assert_eq!(
            err(&disks(bus, kind), Arch::Arm64),
            format!("spec.domain.devices.disks[0].{kind}.bus: disk \"d\": bus {bus} is not supported on arm64 (use virtio or scsi)")
        );
        conv(&disks(bus, kind), Arch::Amd64).unwrap();
    }
    for (bus, kind) in [("virtio", "disk"), ("scsi", "disk"), ("scsi", "cdrom")] {
        conv(&disks(bus, kind), Arch::Arm64).unwrap();
    }
    let serial = with("    firmware: {bootloader: {bios: {useSerial: true}}}\n");
    assert!(conv(&serial, Arch::Amd64).unwrap().os.bios.is_some());
    for arch in [Arch::Ppc64le, Arch::S390x] {
        assert_eq!(
            err(&serial, arch),
            format!("spec.domain.firmware.bootloader.bios.useSerial: SeaBIOS serial output exists on amd64 only, not on {arch}")
        );
        let d = conv(&with("    firmware: {bootloader: {bios: {}}}\n"), arch).unwrap();
        assert!(d.os.bios.is_none() && d.os.loader.is_none(), "{arch}");
    }
}

/// libvirt refuses host-passthrough under TCG at start ("CPU mode
/// 'host-passthrough' for aarch64 qemu domain on x86_64 host is not
/// supported by hypervisor"; found by the e2e aarch64 firmware boot), and
/// host-model and maximum where TCG lacks them ("maximum CPU is not
/// supported by QEMU binary" for ppc64, found by the e2e define test).
#[test]
fn host_cpu_modes_under_tcg_are_what_tcg_has() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: c}\nspec:\n  domain:\n    memory: {guest: 64Mi}\n    cpu: {model: host-passthrough}\n";
    for arch in Arch::ALL {
        let v = vmi(doc, arch);
        let mode = |virt| {
            convert(&v, &ConvertContext::new(arch, virt))
                .unwrap()
                .cpu
                .unwrap()
                .mode
        };
        assert_eq!(
            mode(VirtType::Kvm),
            Some("host-passthrough".into()),
            "{arch}"
        );
        let tcg = (arch != Arch::Ppc64le).then(|| "maximum".to_owned());
        assert_eq!(mode(VirtType::Qemu), tcg, "{arch}");
    }
    // host-model: kept where TCG has it (x86_64), else maximum, else
    // QEMU's default CPU (ppc64: only named POWER models under TCG).
    let hm = doc.replace("host-passthrough", "host-model");
    for (arch, want) in [
        (Arch::Amd64, Some("host-model")),
        (Arch::Ppc64le, None),
        (Arch::S390x, Some("maximum")),
    ] {
        let d = convert(&vmi(&hm, arch), &ConvertContext::new(arch, VirtType::Qemu)).unwrap();
        let cpu = d.cpu.unwrap();
        assert_eq!(cpu.mode.as_deref(), want, "{arch}");
        assert!(cpu.topology.is_some() && cpu.model.is_none(), "{arch}");
        let k = convert(&vmi(&hm, arch), &ConvertContext::new(arch, VirtType::Kvm)).unwrap();
        assert_eq!(k.cpu.unwrap().mode.as_deref(), Some("host-model"), "{arch}");
    }
    // arm64's default model is host-passthrough: maximum under TCG too.
    let arm = vmi(
        &doc.replace("    cpu: {model: host-passthrough}\n", ""),
        Arch::Arm64,
    );
    let d = convert(&arm, &ConvertContext::new(Arch::Arm64, VirtType::Qemu)).unwrap();
    assert_eq!(d.cpu.unwrap().mode.as_deref(), Some("maximum"));
}

#[test]
fn kernel_arguments_need_a_kernel() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: k}\nspec:\n  domain:\n    memory: {guest: 64Mi}\n    firmware: {kernelBoot: {kernelArgs: console=ttyS0}}\n";
    let e = conv(doc, Arch::Amd64).unwrap_err().to_string();
    assert_eq!(e, "spec.domain.firmware.kernelBoot.kernelArgs: kernel arguments need a kernel: set kernelBoot.container");
}

#[test]
fn case_017_efi_firmware_follows_the_files_present() {
    let doc = data("cases/017-efi-secureboot-firmware.yaml");
    let all = [
        "OVMF_CODE.secboot.fd",
        "OVMF_VARS.secboot.fd",
        "OVMF_CODE.fd",
        "OVMF_VARS.fd",
    ];
    let run = |doc: &str, files: &[&str]| {
        let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
        ctx.ovmf_files = Some(files.iter().map(|f| (*f).to_owned()).collect());
        convert(&vmi(doc, Arch::Amd64), &ctx)
    };
    let base = |p: &str| p.rsplit('/').next().unwrap().to_owned();
    let unset = doc.replace("          secureBoot: true\n", "          {}\n");
    let plain = doc
        .replace("secureBoot: true", "secureBoot: false")
        .replace("      smm:\n        enabled: true\n", "");
    for (input, files, code, vars, secure) in [
        (
            &doc,
            &all[..],
            "OVMF_CODE.secboot.fd",
            "OVMF_VARS.secboot.fd",
            "yes",
        ),
        (
            &unset,
            &all[..],
            "OVMF_CODE.secboot.fd",
            "OVMF_VARS.secboot.fd",
            "yes",
        ),
        (&plain, &all[..], "OVMF_CODE.fd", "OVMF_VARS.fd", "no"),
        (
            &doc,
            &["OVMF_CODE.secboot.fd", "OVMF_VARS.fd"][..],
            "OVMF_CODE.secboot.fd",
            "OVMF_VARS.fd",
            "yes",
        ),
        // Plain EFI falls back to the secure-boot code.
        (
            &plain,
            &["OVMF_CODE.secboot.fd", "OVMF_VARS.fd"][..],
            "OVMF_CODE.secboot.fd",
            "OVMF_VARS.fd",
            "no",
        ),
    ] {
        let d = run(input, files).unwrap();
        let l = d.os.loader.as_ref().unwrap();
        let n = d.os.nvram.as_ref().unwrap();
        assert_eq!(
            (
                base(&l.path),
                base(n.template.as_ref().unwrap()),
                l.secure.as_deref(),
                l.readonly.as_deref(),
                l.loader_type.as_deref()
            ),
            (
                code.to_owned(),
                vars.to_owned(),
                Some(secure),
                Some("yes"),
                Some("pflash")
            ),
            "{files:?}"
        );
        assert_eq!(n.path, "/var/lib/libvirt/qemu/nvram/vmi-secureboot_VARS.fd");
        let f = d.features.as_ref().unwrap();
        assert!(f.acpi.is_some());
        assert_eq!(f.smm.is_some(), secure == "yes");
    }
    // Secure boot without SMM is refused before anything else.
    let no_smm = doc.replace("        enabled: true\n", "        enabled: false\n");
    let e = run(&no_smm, &all).unwrap_err().to_string();
    assert_eq!(e, "spec.domain.firmware.bootloader.efi.secureBoot: SecureBoot requires SMM, which is currently disabled (enable spec.domain.features.smm or set secureBoot: false)");
    // Missing firmware: KubeVirt's message, naming the directory.
    let e = run(&doc, &["OVMF_CODE.fd", "OVMF_VARS.fd"])
        .unwrap_err()
        .to_string();
    assert_eq!(e, "EFI OVMF roms missing for booting in EFI mode with SecureBoot=true, SEV=false (looked in /usr/share/OVMF)");
    let e = run(&plain, &[]).unwrap_err().to_string();
    assert!(
        e.starts_with("EFI OVMF roms missing for booting in EFI mode with SecureBoot=false"),
        "{e}"
    );
}

#[test]
fn seabios_debug_console_only_when_asked_and_on_amd64() {
    let doc = data("examples/vmi-ephemeral.yaml");
    for arch in Arch::ALL {
        let v = vmi(&doc, arch);
        let mut ctx = ConvertContext::new(arch, VirtType::Qemu);
        let plain = convert(&v, &ctx).unwrap();
        assert_eq!(plain.qemu_commandline, None, "{arch}");
        assert_eq!(plain.xmlns_qemu, None, "{arch}");
        ctx.firmware_debug_log = true;
        let d = convert(&v, &ctx).unwrap();
        if arch == Arch::Amd64 {
            assert_eq!(d.xmlns_qemu.as_deref(), Some(domain::QEMU_XMLNS));
            let args = d.qemu_commandline.as_ref().expect("debug console");
            assert_eq!(args.arg.len(), 4);
            assert_eq!(
                args.arg[1].value,
                "file,id=firmwarelog,path=/var/run/kubevirt-private/QEMUSeaBiosDebugPipe"
            );
            // Nothing else changes.
            let mut same = d.clone();
            same.qemu_commandline = None;
            same.xmlns_qemu = None;
            assert_eq!(same, plain);
        } else {
            assert_eq!(d, plain, "{arch}");
        }
    }
}
