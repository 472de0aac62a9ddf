//! Whole domains: KubeVirt's golden domain and examples, names and
//! sockets, refusals that span concerns, fuzz findings, unknown values.

use super::*;

#[test]
fn defaults_mirror_kubevirts_golden_domain() {
    let d = conv(&data("examples/vmi-ephemeral.yaml"), Arch::Amd64).unwrap();
    let uid = vmi(&data("examples/vmi-ephemeral.yaml"), Arch::Amd64)
        .metadata
        .uid
        .unwrap();
    let f = d.features.as_ref().unwrap();
    assert!(f.acpi.is_some());
    assert_eq!(f.vmport.as_ref().unwrap().state, "off");
    assert_eq!(d.cpu.as_ref().unwrap().mode.as_deref(), Some("host-model"));
    let serial = &d.devices.serial[0];
    assert_eq!(
        serial.source.as_ref().unwrap().path.as_deref(),
        Some(format!("/var/run/kubevirt-private/{uid}/virt-serial0").as_str())
    );
    assert_eq!(
        serial.log.as_ref().unwrap().file,
        format!("/var/run/kubevirt-private/{uid}/virt-serial0-log")
    );
    assert_eq!(d.devices.console[0].console_type, "pty");
    assert_eq!(
        d.devices.channel[0].target.name.as_deref(),
        Some("org.qemu.guest_agent.0")
    );
    assert_eq!(
        d.devices.graphics[0].listen[0].socket.as_deref(),
        Some(format!("/var/run/kubevirt-private/{uid}/virt-vnc").as_str())
    );
    assert_eq!(d.devices.video[0].model.model_type, "vga");
    let models: Vec<_> = d
        .devices
        .controller
        .iter()
        .map(|c| (c.controller_type.as_str(), c.model.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(
        models,
        [
            ("usb", "none"),
            ("scsi", "virtio-non-transitional"),
            ("virtio-serial", "virtio-non-transitional")
        ]
    );
    let b = d.devices.memballoon.as_ref().unwrap();
    assert_eq!(
        (b.model.as_str(), b.stats.as_ref().unwrap().period),
        ("virtio-non-transitional", 10)
    );
    assert_eq!(b.free_page_reporting.as_deref(), Some("on"));
    let sys = &d.sysinfo.as_ref().unwrap().system.as_ref().unwrap().entry;
    assert_eq!(sys[0].name, "uuid");
    assert_eq!(Some(sys[0].value.as_str()), d.uuid.as_deref());
    assert_eq!(
        d.metadata.as_ref().unwrap().kubevirt.as_ref().unwrap().uid,
        uid
    );
    assert!(d.devices.rng.is_empty());
}

#[test]
fn case_008_socket_paths_depend_on_the_uid_only() {
    let d = conv(
        &data("cases/008-long-vmi-name-socket-paths.yaml"),
        Arch::Amd64,
    )
    .unwrap();
    assert_eq!(d.name.len(), 126);
    let serial = d.devices.serial[0]
        .source
        .as_ref()
        .unwrap()
        .path
        .clone()
        .unwrap();
    let vnc = d.devices.graphics[0].listen[0].socket.clone().unwrap();
    assert_eq!(
        serial,
        "/var/run/kubevirt-private/4c2f3a5e-9a0b-4d8e-8c61-0123456789ab/virt-serial0"
    );
    assert_eq!(
        vnc,
        "/var/run/kubevirt-private/4c2f3a5e-9a0b-4d8e-8c61-0123456789ab/virt-vnc"
    );
    assert!(serial.len() <= 107 && vnc.len() <= 107);
    // A private dir so deep the socket would not fit is a clear error.
    let v = vmi(
        &data("cases/008-long-vmi-name-socket-paths.yaml"),
        Arch::Amd64,
    );
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    ctx.paths.private_dir = format!("/{}", "p".repeat(60));
    let e = convert(&v, &ctx).unwrap_err().to_string();
    assert!(e.contains("over the 107-byte limit"), "{e}");
}

/// Case 008 with the longest names KubeVirt admits and libvirt holds: a
/// 182-character name with dots in the case's 62-character namespace (a
/// 245-byte domain name, the most with a TPM), booting EFI with a TPM. Every Unix socket in the
/// XML stays keyed by the UID; the file names libvirt derives are those
/// `api::names` budgets for.
#[test]
fn case_008_longest_names_keep_sockets_short_and_files_within_budget() {
    let name = format!("{}.{}.{}", "a".repeat(150), "b".repeat(20), "c".repeat(10));
    assert_eq!(name.len(), 182);
    let doc = data("cases/008-long-vmi-name-socket-paths.yaml")
        .replace(
            "aaa123456789012345678901234567890123456789012345678901234567890",
            &name,
        )
        .replace(
            "    resources:\n",
            "    firmware: {bootloader: {efi: {secureBoot: false}}}\n    resources:\n",
        )
        .replace("      disks:\n", "      tpm: {}\n      disks:\n");
    let v = vmi(&doc, Arch::Amd64);
    assert_eq!(
        api::names::libvirt_files(&v),
        [
            api::names::LibvirtFile::Definition,
            api::names::LibvirtFile::SwtpmLog,
            api::names::LibvirtFile::Nvram
        ]
    );
    let d = convert(&v, &ConvertContext::new(Arch::Amd64, VirtType::Kvm)).unwrap();
    assert_eq!(d.name.len(), 245);
    assert_eq!(d.name, v.domain_name());
    // The EFI variables are named as api::names budgets them.
    let nvram = d.os.nvram.as_ref().unwrap().path.clone();
    let file = nvram.rsplit('/').next().unwrap();
    assert_eq!(
        format!("{file}.new"),
        api::names::LibvirtFile::Nvram.file_name(&d.name, &name)
    );
    assert!(
        nvram.starts_with(api::names::LibvirtFile::Nvram.dir()),
        "{nvram}"
    );
    // Every socket path in the XML: the UID's directory, never the name.
    let xml = d.to_xml().unwrap();
    let mut sockets = 0;
    for attr in ["path='", "socket='", "path=\"", "socket=\""] {
        for part in xml.split(attr).skip(1) {
            let value = &part[..part.find(['\'', '"']).unwrap()];
            if value.contains("virt-serial0") && !value.ends_with("-log")
                || value.ends_with("virt-vnc")
            {
                sockets += 1;
                assert!(value.len() <= 107, "{value}");
                assert!(
                    value.contains("4c2f3a5e-9a0b-4d8e-8c61-0123456789ab"),
                    "{value}"
                );
            }
            assert!(!value.contains(&name) || value == nvram, "{value}");
        }
    }
    assert_eq!(sockets, 2, "{xml}");
    // The guest agent's channel: libvirt picks its socket (in the domain's
    // short-named channel directory), the XML names none.
    let agent = d
        .devices
        .channel
        .iter()
        .find(|c| c.target.name.as_deref() == Some("org.qemu.guest_agent.0"))
        .unwrap();
    assert!(
        agent.source.as_ref().is_none_or(|s| s.path.is_none()),
        "{xml}"
    );
}

#[test]
fn every_example_converts_or_names_the_missing_feature() {
    let dir = format!("{}/../../tests/data/examples", env!("CARGO_MANIFEST_DIR"));
    let mut converted = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let doc = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for arch in Arch::ALL {
            match conv(&doc, arch) {
                Ok(d) => {
                    d.to_xml().unwrap();
                    if arch == Arch::Amd64 {
                        converted.push(name.clone());
                    }
                }
                Err(ConvertError::Unsupported { path, feature }) => {
                    assert!(path.starts_with("spec."), "{name}: {path}");
                    assert!(!feature.is_empty());
                }
                Err(e) if arch != Arch::Amd64 => {
                    // EFI examples are x86-only, for instance; the error must still name a field.
                    assert!(e.to_string().contains("spec."), "{name} on {arch}: {e}");
                }
                Err(e) => panic!("{name}: {e}"),
            }
        }
    }
    converted.sort();
    // Every KubeVirt example converts on amd64 now.
    assert_eq!(
        converted,
        [
            "vmi-alpine-efi.yaml",
            "vmi-arm.yaml",
            "vmi-ephemeral.yaml",
            "vmi-fedora.yaml",
            "vmi-host-disk.yaml",
            "vmi-kernel-boot.yaml",
            "vmi-masquerade.yaml",
            "vmi-migratable.yaml",
            "vmi-multus-multiple-net.yaml",
            "vmi-nocloud.yaml",
            "vmi-pvc.yaml",
            "vmi-sata.yaml",
            "vmi-windows.yaml",
        ]
    );
    // Fedora: masquerade on the pod network plus a NoCloud disk, both converted.
    let d = conv(&data("examples/vmi-fedora.yaml"), Arch::Amd64).unwrap();
    assert_eq!(disk(&d, "cloudinitdisk").target.dev, "vdb");
    assert_eq!(d.devices.interface.len(), 1);
    assert_eq!(
        d.devices.interface[0]
            .alias
            .as_ref()
            .map(|a| a.name.as_str()),
        Some("ua-default")
    );
}

#[test]
fn per_arch_machine_and_devices() {
    let doc = data("examples/vmi-ephemeral.yaml");
    let expect = [
        (Arch::Amd64, "x86_64", "q35", "vga", true, true),
        (Arch::Arm64, "aarch64", "virt", "virtio", true, true),
        // pseries has no ACPI (libvirt refuses `<acpi/>` there).
        (Arch::Ppc64le, "ppc64le", "pseries", "vga", false, false),
        (
            Arch::S390x,
            "s390x",
            "s390-ccw-virtio",
            "virtio",
            false,
            false,
        ),
    ];
    for (arch, name, machine, video, smbios, acpi) in expect {
        let d = conv(&doc, arch).unwrap();
        assert_eq!(d.os.os_type.arch.as_deref(), Some(name));
        assert_eq!(d.os.os_type.machine.as_deref(), Some(machine));
        assert_eq!(d.devices.video[0].model.model_type, video);
        assert_eq!(d.os.smbios.is_some(), smbios, "{arch}");
        assert_eq!(d.features.as_ref().unwrap().acpi.is_some(), acpi, "{arch}");
    }
    let arm = conv(&doc, Arch::Arm64).unwrap();
    assert_eq!(
        arm.cpu.as_ref().unwrap().mode.as_deref(),
        Some("host-passthrough")
    );
    assert_eq!(
        arm.os.loader.as_ref().unwrap().path,
        "/usr/share/AAVMF/AAVMF_CODE.fd"
    );
    assert_eq!(
        arm.devices.controller[0].model.as_deref(),
        Some("qemu-xhci")
    );
    let s390 = conv(&doc, Arch::S390x).unwrap();
    assert!(s390.devices.disk[0].model.is_none());
    assert_eq!(s390.devices.memballoon.as_ref().unwrap().model, "virtio");
}

#[test]
fn virt_type_choice() {
    assert_eq!(choose_virt_type(true, false, false), Ok(VirtType::Kvm));
    assert_eq!(choose_virt_type(true, true, false), Ok(VirtType::Kvm));
    assert_eq!(choose_virt_type(false, true, false), Ok(VirtType::Qemu));
    assert_eq!(choose_virt_type(true, false, true), Ok(VirtType::Qemu));
    assert_eq!(
        choose_virt_type(false, false, false)
            .unwrap_err()
            .to_string(),
        "hardware emulation device '/dev/kvm' not present"
    );
}

#[test]
fn free_text_is_escaped_or_refused() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: k}\nspec:\n  domain:\n    memory: {guest: 64Mi}\n    firmware:\n      kernelBoot:\n        kernelArgs: \"console=ttyS0 a=\\\"<b>&\\\"\"\n        container: {image: x, kernelPath: /boot/../vmlinuz}\n";
    let d = conv(doc, Arch::Amd64).unwrap();
    let xml = d.to_xml().unwrap();
    assert!(
        xml.contains("<cmdline>console=ttyS0 a=\"&lt;b&gt;&amp;\"</cmdline>"),
        "{xml}"
    );
    assert_eq!(
        d.os.kernel.as_deref(),
        Some("/var/run/kubevirt/container-disks/kernel-boot/vmlinuz")
    );
    let bad = doc.replace("a=\\\"<b>&\\\"", "a=\\u0001");
    let e = conv(&bad, Arch::Amd64).unwrap_err().to_string();
    assert_eq!(e, "spec.domain.firmware.kernelBoot.kernelArgs: contains the character U+0001, which XML cannot carry");
    let bad = doc.replace("/boot/../vmlinuz", "/boot/..");
    let e = conv(&bad, Arch::Amd64).unwrap_err().to_string();
    assert!(
        e.starts_with("spec.domain.firmware.kernelBoot.container.kernelPath"),
        "{e}"
    );
}

#[test]
fn access_credentials_convert_and_bad_ones_are_refused_by_field() {
    let base = "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: ac}
spec:
  domain:
    memory: {guest: 64Mi}
  accessCredentials:
";
    let ok = format!("{base}  - sshPublicKey: {{source: {{secret: {{secretName: k}}}}, propagationMethod: {{noCloud: {{}}}}}}\n");
    conv(&ok, Arch::Amd64).unwrap();
    // Through the guest agent: nothing in the domain (the agent channel
    // is always there); the launcher propagates them once the guest runs.
    let qga = format!("{base}  - sshPublicKey: {{source: {{secret: {{secretName: k}}}}, propagationMethod: {{qemuGuestAgent: {{users: [root]}}}}}}\n");
    conv(&qga, Arch::Amd64).unwrap();
    let pw = format!("{base}  - userPassword: {{source: {{secret: {{secretName: k}}}}, propagationMethod: {{qemuGuestAgent: {{}}}}}}\n");
    conv(&pw, Arch::Amd64).unwrap();
    // KubeVirt's validateAccessCredentials, its words.
    for (yaml, want) in [
        (
            format!("{base}  - sshPublicKey: {{source: {{secret: {{secretName: k}}}}, propagationMethod: {{qemuGuestAgent: {{users: []}}}}}}\n"),
            "spec.accessCredentials[0].sshPublicKey.propagationMethod.qemuGuestAgent.users: spec.accessCredentials[0] requires at least one user to be present in the users list",
        ),
        (
            format!("{base}  - userPassword: {{source: {{}}, propagationMethod: {{qemuGuestAgent: {{}}}}}}\n"),
            "spec.accessCredentials[0].userPassword.source: spec.accessCredentials[0] must have exactly one source set",
        ),
        (
            format!("{base}  - userPassword: {{source: {{secret: {{secretName: k}}}}, propagationMethod: {{}}}}\n"),
            "spec.accessCredentials[0].userPassword.propagationMethod: spec.accessCredentials[0] must have exactly one propagationMethod set",
        ),
    ] {
        let err = api::load_vmi(yaml.as_bytes(), Arch::Amd64)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err}");
    }
    let bad = format!("{base}  - userPassword: {{source: {{secret: {{secretName: ../x}}}}, propagationMethod: {{qemuGuestAgent: {{}}}}}}\n");
    let err = api::load_vmi(bad.as_bytes(), Arch::Amd64)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.accessCredentials[0].userPassword.source.secret.secretName: \"../x\""),
        "{err}"
    );
    let bad = format!("{base}  - sshPublicKey: {{source: {{secret: {{secretName: ../../etc}}}}, propagationMethod: {{noCloud: {{}}}}}}\n");
    let err = api::load_vmi(bad.as_bytes(), Arch::Amd64)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "spec.accessCredentials[0].sshPublicKey.source.secret.secretName: \"../../etc\""
        ),
        "{err}"
    );
}

/// Found by `bench/fuzz.sh`'s virt-xml-validate replay (vmi_bytes, a
/// mutated corpus VMI): a device name with a space became the alias
/// `ua-t usb`, which libvirt's schema refuses. Now refused by field.
#[test]
fn fuzz_device_names_must_fit_libvirt_aliases() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: headless, namespace: corpus}\nspec:\n  domain:\n    memory: {guest: 1G}\n    devices:\n      inputs:\n      - name: tet\n      - name: t usb\n        type: tablet\n      disks:\n      - name: root\n  volumes:\n  - name: root\n    containerDisk: {image: x}\n";
    let e = conv(doc, Arch::Amd64).unwrap_err().to_string();
    assert_eq!(
        e,
        "spec.domain.devices.inputs[1].name: \"t usb\" contains ' ': a device name may have only letters, digits, '_', '-' and '.' (libvirt alias ua-<name>)"
    );
    for (devices, field) in [
        (
            "watchdog: {name: \"w/1\", i6300esb: {}}",
            "spec.domain.devices.watchdog.name",
        ),
        ("sound: {name: \"a:b\"}", "spec.domain.devices.sound.name"),
    ] {
        let doc = format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: a}}\nspec:\n  domain:\n    memory: {{guest: 1G}}\n    devices:\n      {devices}\n");
        let e = conv(&doc, Arch::Amd64).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{field}: ")), "{e}");
    }
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec:\n  domain:\n    memory: {guest: 1G}\n    devices:\n      interfaces:\n      - {name: \"blue net\", bridge: {}}\n  networks:\n  - {name: \"blue net\", multus: {networkName: blue}}\n";
    let e = conv(doc, Arch::Amd64).unwrap_err().to_string();
    assert!(
        e.starts_with("spec.domain.devices.interfaces[0].name: \"blue net\" contains ' '"),
        "{e}"
    );
}

/// Found by `bench/fuzz.sh`'s virt-xml-validate replay (vmi_structured):
/// `machine.type: "!"` reached `<type machine='!'>`, which libvirt's schema
/// refuses. Now refused by field, on every arch.
#[test]
fn fuzz_machine_type_must_fit_libvirt_schema() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec:\n  domain:\n    memory: {guest: 128Mi}\n    machine: {type: \"!\"}\n";
    for arch in [Arch::Amd64, Arch::Arm64, Arch::Ppc64le, Arch::S390x] {
        let e = conv(doc, arch).unwrap_err().to_string();
        assert_eq!(
            e,
            "spec.domain.machine.type: \"!\" is not a machine type: letters, digits, '_', '.' and '-' only"
        );
    }
    let ok = doc.replace("\"!\"", "pc-q35-rhel9.6.0");
    assert!(conv(&ok, Arch::Amd64).is_ok());
}

/// Found by `bench/fuzz.sh`'s virt-xml-validate replay (vmi_structured): a
/// chassis with only empty values gave `<chassis/>`, which libvirt's schema
/// refuses; now no chassis element at all.
#[test]
fn fuzz_empty_chassis_writes_no_chassis_element() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec:\n  domain:\n    memory: {guest: 128Mi}\n    chassis: {manufacturer: \"\", sku: \"\"}\n";
    let d = conv(doc, Arch::Amd64).unwrap();
    assert!(d.sysinfo.as_ref().unwrap().chassis.is_none());
    assert!(!d.to_xml().unwrap().contains("chassis"));
    let d = conv(&doc.replace("sku: \"\"", "sku: S1"), Arch::Amd64).unwrap();
    let c = d.sysinfo.as_ref().unwrap().chassis.as_ref().unwrap();
    assert_eq!((c.entry.len(), c.entry[0].value.as_str()), (1, "S1"));
}

/// Values of KubeVirt's string-typed fields that it does not name are
/// kept (an unknown `startStrategy` is ignored, as by KubeVirt's
/// converter) or refused by the field that holds them.
#[test]
fn unknown_values_of_named_string_fields_keep_their_field_errors() {
    let base = |domain: &str, volumes: &str| {
        format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: e, uid: u1}}\nspec:\n  domain:\n    memory: {{guest: 64Mi}}\n{domain}  volumes:\n{volumes}")
    };
    let cd = "  - {name: c, containerDisk: {image: x}}\n";
    let pod = "  networks:\n  - {name: default, pod: {}}\n";
    let cases = [
        (
            "    devices:\n      interfaces:\n      - {name: default, masquerade: {}, state: sideways}\n".to_owned() + pod,
            "spec.domain.devices.interfaces[0].state: \"sideways\" is not one of up, down, absent",
        ),
        (
            "    devices:\n      interfaces:\n      - {name: default, masquerade: {}, model: e100}\n".to_owned() + pod,
            "spec.domain.devices.interfaces[0].model: \"e100\" is not one of e1000, e1000e, igb, ne2k_pci, pcnet, rtl8139, virtio",
        ),
        (
            "    devices:\n      interfaces:\n      - {name: default, masquerade: {}, model: \"\"}\n".to_owned() + pod,
            "spec.domain.devices.interfaces[0].model: \"\" is not one of e1000, e1000e, igb, ne2k_pci, pcnet, rtl8139, virtio",
        ),
        (
            "    devices:\n      disks:\n      - {name: c, cdrom: {tray: ajar}}\n".to_owned(),
            "spec.domain.devices.disks[0].cdrom.tray: \"ajar\" is not open or closed",
        ),
        (
            "    clock: {utc: {}, timer: {rtc: {tickPolicy: skip}}}\n".to_owned(),
            "spec.domain.clock.timer.rtc.tickPolicy: \"skip\" is not one of delay, catchup, merge, discard",
        ),
        (
            "    clock: {utc: {}, timer: {pit: {track: guest}}}\n".to_owned(),
            "spec.domain.clock.timer.pit.track: \"guest\" is not valid here (rtc only: guest or wall)",
        ),
        (
            "    clock: {utc: {}, timer: {rtc: {track: host}}}\n".to_owned(),
            "spec.domain.clock.timer.rtc.track: \"host\" is not valid here (rtc only: guest or wall)",
        ),
        (
            "    clock: {utc: {}, timer: {kvm: {tickPolicy: merge}}}\n".to_owned(),
            "spec.domain.clock.timer.kvm.tickPolicy: \"merge\" is not valid here (the kvm timer has only present)",
        ),
        (
            "    clock: {utc: {}, timer: {hyperv: {tickPolicy: delay}}}\n".to_owned(),
            "spec.domain.clock.timer.hyperv.tickPolicy: \"delay\" is not valid here (the hyperv timer has only present)",
        ),
        (
            "    cpu: {model: Haswell, features: [{name: vmx, policy: maybe}]}\n".to_owned(),
            "spec.domain.cpu.features[0].policy: \"maybe\" is not one of force, require, optional, disable, forbid",
        ),
        (
            "    devices:\n      inputs:\n      - {name: m, type: mouse}\n".to_owned(),
            "spec.domain.devices.inputs[0].type: \"mouse\" is not supported: only tablet",
        ),
        (
            "    devices:\n      inputs:\n      - {name: m, bus: ps2}\n".to_owned(),
            "spec.domain.devices.inputs[0].bus: \"ps2\" is not supported: use usb or virtio",
        ),
        (
            "    devices:\n      video: {type: qxl}\n".to_owned(),
            "spec.domain.devices.video.type: \"qxl\" is not supported on amd64: use one of ",
        ),
        (
            "    devices:\n      video: {}\n".to_owned(),
            "spec.domain.devices.video.type: \"\" is not supported on amd64: use one of ",
        ),
        (
            "    devices:\n      sound: {name: s, model: sb16}\n".to_owned(),
            "spec.domain.devices.sound.model: \"sb16\" is not supported: use ich9 or ac97",
        ),
        (
            "    devices:\n      watchdog: {name: w, i6300esb: {action: explode}}\n".to_owned(),
            "spec.domain.devices.watchdog.i6300esb.action: \"explode\" is not one of poweroff, reset, shutdown",
        ),
        (
            "    ioThreadsPolicy: many\n".to_owned(),
            "spec.domain.ioThreadsPolicy: Invalid IOThreadsPolicy (many)",
        ),
    ];
    let mut bad = Vec::new();
    for (domain, want) in cases {
        let doc = base(&domain, cd);
        match conv(&doc, Arch::Amd64) {
            Ok(_) => bad.push(format!("{want}: converted")),
            Err(e) if e.to_string().starts_with(want) => {}
            Err(e) => bad.push(format!("{want}: got {e}")),
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");

    // A hostDisk type is refused by validation, naming the field.
    let doc = base("", "  - {name: h, hostDisk: {path: /x.img, type: Maybe}}\n");
    let e = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.volumes[0].hostDisk.type: \"Maybe\" is not Disk or DiskOrCreate"
    );

    // An unknown start strategy starts the guest as usual, and the VMI's
    // JSON keeps the value (as every unknown one) as it was written.
    let doc = base("", cd).replace("spec:\n", "spec:\n  startStrategy: Later\n");
    let v = vmi(&doc, Arch::Amd64);
    let d = convert(&v, &ConvertContext::new(Arch::Amd64, VirtType::Kvm)).unwrap();
    assert!(d.os.bootmenu.is_none());
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["spec"]["startStrategy"], "Later");
    let paused = vmi(
        &base("", cd).replace("spec:\n", "spec:\n  startStrategy: Paused\n"),
        Arch::Amd64,
    );
    let d = convert(&paused, &ConvertContext::new(Arch::Amd64, VirtType::Kvm)).unwrap();
    assert!(d.os.bootmenu.is_some());
}
