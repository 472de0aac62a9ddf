//! Whole-domain tests: real KubeVirt examples and real-world cases in,
//! domain model assertions out.

// Tests read their fixtures from tests/data; the converter itself stays pure.
#![allow(clippy::disallowed_methods)]

use api::{Arch, VirtualMachineInstance};
use domain::Domain;

use crate::{choose_virt_type, convert, ConvertContext, ConvertError, VirtType};

fn data(rel: &str) -> String {
    let p = format!("{}/../../tests/data/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn vmi(doc: &str, arch: Arch) -> VirtualMachineInstance {
    let mut v = api::load_vmi(doc.as_bytes(), arch).unwrap();
    api::defaults::fill_missing_uid(&mut v);
    v
}

fn conv(doc: &str, arch: Arch) -> Result<Domain, ConvertError> {
    convert(&vmi(doc, arch), &ConvertContext::new(arch, VirtType::Kvm))
}

fn disk<'a>(d: &'a Domain, name: &str) -> &'a domain::Disk {
    let alias = format!("ua-{name}");
    d.devices
        .disk
        .iter()
        .find(|x| x.alias.as_ref().is_some_and(|a| a.name == alias))
        .unwrap_or_else(|| panic!("no disk {name}"))
}

#[test]
fn case_020_vmi_sata_gets_its_default_disk() {
    let d = conv(&data("cases/020-example-vmi-sata.yaml"), Arch::Amd64).unwrap();
    assert_eq!(d.devices.disk.len(), 1);
    let x = disk(&d, "containerdisk");
    assert_eq!((x.disk_type.as_str(), x.device.as_str()), ("file", "disk"));
    assert_eq!(x.target.dev, "sda");
    assert_eq!(x.target.bus.as_deref(), Some("sata"));
    let drv = x.driver.as_ref().unwrap();
    assert_eq!(
        (
            drv.name.as_str(),
            drv.format.as_deref(),
            drv.error_policy.as_deref(),
            drv.discard.as_deref()
        ),
        ("qemu", Some("qcow2"), Some("stop"), Some("unmap"))
    );
    let bs = x.backing_store.as_ref().unwrap();
    assert_eq!(
        bs.source.as_ref().unwrap().file.as_deref(),
        Some("/var/run/kubevirt/container-disks/disk_0.img")
    );
    assert_eq!(
        x.source.as_ref().unwrap().file.as_deref(),
        Some("/var/run/kubevirt-ephemeral-disks/disk-data/containerdisk/disk.qcow2")
    );
    assert_eq!((d.memory.unit.as_str(), d.memory.value), ("b", 134_217_728));
    assert_eq!(d.vcpu.count, 1);
    let t = d.cpu.as_ref().unwrap().topology.as_ref().unwrap();
    assert_eq!((t.sockets, t.cores, t.threads), (1, 1, 1));
    assert_eq!(d.name, "default_vmi-sata");
    assert_eq!(d.domain_type, "kvm");
    assert_eq!(d.os.os_type.machine.as_deref(), Some("q35"));
    // arm64: the same input lands on virtio.
    let a = conv(&data("cases/020-example-vmi-sata.yaml"), Arch::Arm64).unwrap();
    assert_eq!(disk(&a, "containerdisk").target.dev, "vda");
    assert_eq!(
        disk(&a, "containerdisk").target.bus.as_deref(),
        Some("virtio")
    );
}

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
fn case_004_long_scsi_serial_is_refused_naming_the_disk() {
    let e = conv(
        &data("cases/004-scsi-disk-serial-over-36.yaml"),
        Arch::Amd64,
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("spec.domain.devices.disks[0].serial: disk \"root\""),
        "{msg}"
    );
    assert!(msg.contains("at most 36 characters"), "{msg}");
    // Within the limit: passes through unchanged, and short virtio serials are untouched.
    let ok = data("cases/004-scsi-disk-serial-over-36.yaml").replace(
        "disk-serial-length-greater-than-36-characters",
        "disk-serial-length-greater-than-3",
    );
    let d = conv(&ok, Arch::Amd64).unwrap();
    assert_eq!(
        disk(&d, "root").serial.as_deref(),
        Some("disk-serial-length-greater-than-3")
    );
    assert_eq!(disk(&d, "root").target.bus.as_deref(), Some("scsi"));
    assert_eq!(
        disk(&d, "root").address.as_ref().unwrap().unit.as_deref(),
        Some("0")
    );
    assert_eq!(
        disk(&d, "data").serial.as_deref(),
        Some("SHORT-SERIAL-0001")
    );
    assert_eq!(disk(&d, "data").target.dev, "vda");
}

#[test]
fn case_005_read_only_sata_disk_is_refused() {
    let doc = data("cases/005-sata-readonly-disk.yaml");
    let msg = conv(&doc, Arch::Amd64).unwrap_err().to_string();
    assert!(
        msg.starts_with("spec.domain.devices.disks[1].disk.readonly: disk \"ro-data\""),
        "{msg}"
    );
    assert!(msg.contains("not supported on the sata bus"), "{msg}");
    // Without it: the read-only SATA CD-ROM is legal.
    let without = doc.replace(
        "      - name: ro-data\n        disk:\n          bus: sata\n          readonly: true\n",
        "",
    );
    let d = conv(&without, Arch::Amd64).unwrap();
    let iso = disk(&d, "iso");
    assert_eq!(
        (iso.device.as_str(), iso.target.dev.as_str()),
        ("cdrom", "sda")
    );
    assert!(iso.readonly.is_some());
    // Read-only on virtio is legal.
    let virtio = doc.replacen(
        "          bus: sata\n          readonly: true",
        "          bus: virtio\n          readonly: true",
        1,
    );
    let d = conv(&virtio, Arch::Amd64).unwrap();
    assert!(disk(&d, "ro-data").readonly.is_some());
    assert_eq!(disk(&d, "ro-data").target.dev, "vdb");
}

#[test]
fn case_006_cdrom_on_virtio_is_refused_and_defaults_hold() {
    let doc = data("cases/006-cdrom-virtio-bus-and-default.yaml");
    let msg = conv(&doc, Arch::Amd64).unwrap_err().to_string();
    assert!(
        msg.starts_with("spec.domain.devices.disks[2].cdrom.bus: disk \"drivers\""),
        "{msg}"
    );
    assert!(msg.contains("virtio is not a valid CD-ROM bus"), "{msg}");
    let d = conv(
        &doc.replace("          bus: virtio\n  resources", "X")
            .replace(
                "        cdrom:\n          bus: virtio",
                "        cdrom:\n          bus: sata",
            ),
        Arch::Amd64,
    )
    .unwrap();
    let inst = disk(&d, "installer");
    assert_eq!(
        (
            inst.target.dev.as_str(),
            inst.target.bus.as_deref(),
            inst.target.tray.as_deref()
        ),
        ("sda", Some("sata"), Some("closed"))
    );
    assert!(inst.readonly.is_some());
    assert_eq!(inst.boot.as_ref().unwrap().order, 1);
    let drv = disk(&d, "drivers");
    assert_eq!(
        (drv.target.dev.as_str(), drv.target.bus.as_deref()),
        ("sdb", Some("sata"))
    );
    assert!(drv.readonly.is_some());
    let root = disk(&d, "root");
    assert_eq!(
        (root.target.dev.as_str(), root.boot.as_ref().unwrap().order),
        ("vda", 2)
    );
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
fn cloud_init_volumes_are_raw_iso_files_at_kubevirts_paths() {
    let d = conv(&data("examples/vmi-nocloud.yaml"), Arch::Amd64).unwrap();
    let x = disk(&d, "cloudinitdisk");
    assert_eq!((x.disk_type.as_str(), x.device.as_str()), ("file", "disk"));
    assert_eq!(x.target.dev, "vdb");
    assert_eq!(
        x.source.as_ref().unwrap().file.as_deref(),
        Some("/var/run/kubevirt-ephemeral-disks/cloud-init-data/default/vmi-nocloud/noCloud.iso")
    );
    let drv = x.driver.as_ref().unwrap();
    assert_eq!(drv.format.as_deref(), Some("raw"));
    assert!(x.backing_store.is_none());

    let doc = data("cases/011-nocloud-userdata-base64-and-utf8.yaml")
        .replace("cloudInitNoCloud", "cloudInitConfigDrive")
        .replace("namespace: default", "namespace: ns1");
    let d = conv(&doc, Arch::Amd64).unwrap();
    assert_eq!(
        disk(&d, "cloudinit")
            .source
            .as_ref()
            .unwrap()
            .file
            .as_deref(),
        Some("/var/run/kubevirt-ephemeral-disks/cloud-init-data/ns1/b64-test/configdrive.iso")
    );
}

#[test]
fn config_volumes_are_raw_iso_files_at_kubevirts_paths() {
    let doc = "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: cfg}
spec:
  domain:
    memory: {guest: 64Mi}
    devices:
      disks:
      - {name: cm, disk: {bus: virtio}}
      - {name: sec, cdrom: {bus: sata}}
      - {name: dapi, disk: {bus: scsi}}
      - {name: sa, disk: {}}
  volumes:
  - {name: cm, configMap: {name: app-config, volumeLabel: APPCFG}}
  - {name: sec, secret: {secretName: app-secret}}
  - name: dapi
    downwardAPI:
      fields:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
  - {name: sa, serviceAccount: {serviceAccountName: default}}
";
    let d = conv(doc, Arch::Amd64).unwrap();
    for (name, path, device) in [
        (
            "cm",
            "/var/run/kubevirt-private/config-map-disks/cm.iso",
            "disk",
        ),
        (
            "sec",
            "/var/run/kubevirt-private/secret-disks/sec.iso",
            "cdrom",
        ),
        (
            "dapi",
            "/var/run/kubevirt-private/downwardapi-disks/dapi.iso",
            "disk",
        ),
        (
            "sa",
            "/var/run/kubevirt-private/service-account-disk/service-account.iso",
            "disk",
        ),
    ] {
        let x = disk(&d, name);
        assert_eq!(x.disk_type, "file", "{name}");
        assert_eq!(x.device, device, "{name}");
        assert_eq!(x.source.as_ref().unwrap().file.as_deref(), Some(path));
        assert_eq!(x.driver.as_ref().unwrap().format.as_deref(), Some("raw"));
    }
    assert!(disk(&d, "sec").readonly.is_some(), "a cdrom is read-only");
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
fn device_names_follow_scsi_naming() {
    use crate::disks::device_name;
    assert_eq!(device_name("sd", 0), "sda");
    assert_eq!(device_name("sd", 25), "sdz");
    assert_eq!(device_name("sd", 26), "sdaa");
    assert_eq!(device_name("vd", 27), "vdab");
    assert_eq!(device_name("vd", 701), "vdzz");
    assert_eq!(device_name("vd", 702), "vdaaa");
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
fn ephemeral_volume_is_a_qcow2_overlay_on_the_claim_read_as_raw() {
    let doc = "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: eph}
spec:
  domain:
    memory: {guest: 64Mi}
    devices:
      disks:
      - {name: e, disk: {bus: virtio}}
  volumes:
  - name: e
    ephemeral: {persistentVolumeClaim: {claimName: c}}
";
    let v = vmi(doc, Arch::Amd64);
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    let d = convert(&v, &ctx).unwrap();
    let x = disk(&d, "e");
    assert_eq!(x.disk_type, "file");
    assert_eq!(x.driver.as_ref().unwrap().format.as_deref(), Some("qcow2"));
    assert_eq!(x.driver.as_ref().unwrap().discard.as_deref(), Some("unmap"));
    assert_eq!(
        x.source.as_ref().unwrap().file.as_deref(),
        Some("/var/run/kubevirt-ephemeral-disks/disk-data/e/disk.qcow2")
    );
    let bs = x.backing_store.as_ref().unwrap();
    assert_eq!(bs.store_type.as_deref(), Some("file"));
    assert_eq!(bs.format.as_ref().unwrap().format_type, "raw");
    assert_eq!(
        bs.source.as_ref().unwrap().file.as_deref(),
        Some("/var/run/kubevirt-private/vmi-disks/e/disk.img")
    );
    ctx.prepared.block_volumes.insert("e".into());
    let d = convert(&v, &ctx).unwrap();
    let bs = disk(&d, "e").backing_store.clone().unwrap();
    assert_eq!(bs.store_type.as_deref(), Some("block"));
    assert_eq!(bs.source.unwrap().dev.as_deref(), Some("/dev/e"));
}

#[test]
fn a_memory_dump_volume_is_no_disk_and_a_disk_on_it_is_refused() {
    let doc = data("corpus/memory-dump-volume.yaml");
    let d = conv(&doc, Arch::Amd64).unwrap();
    assert_eq!(d.devices.disk.len(), 1, "only the container disk");
    disk(&d, "containerdisk");
    let with_disk = doc.replace(
        "        disk: {bus: virtio}\n",
        "        disk: {bus: virtio}\n      - name: memvol\n        disk: {bus: virtio}\n",
    );
    let e = conv(&with_disk, Arch::Amd64).unwrap_err().to_string();
    assert_eq!(
        e,
        "spec.volumes[1].memoryDump: volume \"memvol\" is a memory dump target (VirtualMachineMemoryDump), never a disk"
    );
    let no_claim = doc.replace("memoryDump: {claimName: memvol-pvc, ", "memoryDump: {");
    let e = api::load_vmi(no_claim.as_bytes(), Arch::Amd64).unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.volumes[1].memoryDump.claimName: required"
    );
}

#[test]
fn access_credentials_other_than_cloud_init_ssh_keys_are_refused_by_name() {
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
    let qga = format!("{base}  - sshPublicKey: {{source: {{secret: {{secretName: k}}}}, propagationMethod: {{qemuGuestAgent: {{users: [root]}}}}}}\n");
    assert_eq!(
        conv(&qga, Arch::Amd64).unwrap_err().to_string(),
        "spec.accessCredentials[0].sshPublicKey.propagationMethod.qemuGuestAgent: SSH keys through the guest agent is not supported yet"
    );
    let pw = format!("{base}  - userPassword: {{source: {{secret: {{secretName: k}}}}, propagationMethod: {{qemuGuestAgent: {{}}}}}}\n");
    assert_eq!(
        conv(&pw, Arch::Amd64).unwrap_err().to_string(),
        "spec.accessCredentials[0].userPassword: user passwords (guest agent propagation) is not supported yet"
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

fn iface<'a>(d: &'a Domain, name: &str) -> &'a domain::Interface {
    let alias = format!("ua-{name}");
    d.devices
        .interface
        .iter()
        .find(|x| x.alias.as_ref().is_some_and(|a| a.name == alias))
        .unwrap_or_else(|| panic!("no interface {name}"))
}

/// Case 007: MACs in any Go form are rendered canonical; bridge on a
/// Multus network and masquerade on the pod network, taps by KubeVirt's
/// naming scheme.
#[test]
fn case_007_mac_address_formats() {
    let d = conv(&data("cases/007-mac-address-formats.yaml"), Arch::Amd64).unwrap();
    let xml = d.to_xml().unwrap();
    assert!(
        xml.contains("<mac address=\"de:ad:00:00:be:af\"/>"),
        "{xml}"
    );
    let def = iface(&d, "default");
    assert_eq!(def.mac.as_ref().unwrap().address, "de:ad:00:00:be:af");
    assert_eq!(def.target.as_ref().unwrap().dev, "tap0");
    assert_eq!(def.target.as_ref().unwrap().managed.as_deref(), Some("no"));
    let second = iface(&d, "second");
    assert_eq!(second.mac.as_ref().unwrap().address, "02:54:00:6a:9a:15");
    // tap + the pod interface name without "pod": first 11 hex digits of
    // sha256("second").
    let tap = &second.target.as_ref().unwrap().dev;
    assert_eq!(tap.len(), 14);
    assert_eq!(
        crate::interfaces::pod_iface_name("second", false),
        format!("pod{}", &tap[3..])
    );
    let doc = data("cases/007-mac-address-formats.yaml");
    for (mac, expect) in [
        ("dead.0000.beaf", Ok("de:ad:00:00:be:af")),
        (
            "de:ad:00:00:be",
            Err("invalid MAC address \"de:ad:00:00:be\""),
        ),
        ("de:ad:00:00:be:af:00:01", Err("has 8 octets")),
        (
            "02:00:00:00:00:00",
            Err("reserved for the masquerade bridge"),
        ),
        ("fe:54:00:12:34:56", Err("0xFE")),
    ] {
        let doc = doc.replace("DE-AD-00-00-BE-AF", mac);
        match (conv(&doc, Arch::Amd64), expect) {
            (Ok(d), Ok(want)) => {
                assert_eq!(iface(&d, "default").mac.as_ref().unwrap().address, want)
            }
            (Err(e), Err(want)) => {
                let e = e.to_string();
                assert!(
                    e.starts_with("spec.domain.devices.interfaces[0].macAddress: ")
                        && e.contains(want),
                    "{mac}: {e}"
                );
            }
            (got, want) => panic!("{mac}: got {got:?}, want {want:?}"),
        }
    }
}

/// A Multus network marked `default` replaces the pod network: its pod
/// link is `eth0`, so its tap is `tap0`; a secondary one gets the hashed
/// tap (`pod` + sha256("blue")[..11] without `pod`).
#[test]
fn multus_default_network_gets_tap0() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: n}\nspec:\n  domain:\n    memory: {guest: 128Mi}\n    devices:\n      interfaces:\n      - {name: prim, bridge: {}}\n      - {name: blue, bridge: {}}\n  networks:\n  - {name: prim, multus: {networkName: ns/prim, default: true}}\n  - {name: blue, multus: {networkName: ns/blue}}\n";
    let d = conv(doc, Arch::Amd64).unwrap();
    assert_eq!(iface(&d, "prim").target.as_ref().unwrap().dev, "tap0");
    assert_eq!(
        iface(&d, "blue").target.as_ref().unwrap().dev,
        "tap16477688c0e"
    );
}

/// One primary pod link: a second pod network, a second default Multus
/// network, or a pod network with a default Multus one is refused by
/// field (it used to fail in phase 1 with `ip`'s "File exists").
#[test]
fn only_one_primary_pod_network() {
    let doc = |nets: &str| {
        format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: n}}\nspec:\n  domain:\n    memory: {{guest: 128Mi}}\n    devices:\n      interfaces:\n      - {{name: a, bridge: {{}}}}\n      - {{name: b, bridge: {{}}}}\n  networks:\n{nets}")
    };
    for (nets, msg) in [
        (
            "  - {name: a, pod: {}}\n  - {name: b, pod: {}}\n",
            "spec.networks: more than one interface is connected to a pod network",
        ),
        (
            "  - {name: a, multus: {networkName: x, default: true}}\n  - {name: b, multus: {networkName: y, default: true}}\n",
            "spec.networks: more than one Multus network is marked default",
        ),
        (
            "  - {name: a, pod: {}}\n  - {name: b, multus: {networkName: y, default: true}}\n",
            "spec.networks: a pod network and a default Multus network cannot both be the primary pod link",
        ),
    ] {
        let e = conv(&doc(nets), Arch::Amd64).unwrap_err().to_string();
        assert_eq!(e, msg);
    }
}

/// Found by a new-user trial: a bridge interface named `sriov-red` next
/// to an SR-IOV interface `red` gave two `ua-sriov-red` aliases (libvirt
/// refused them only at define time, exit 1); two networks of one name
/// were accepted.
#[test]
fn alias_clashes_and_duplicate_networks_are_refused_by_field() {
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    ctx.sriov_pci.insert("red".into(), "0000:81:11.1".into());
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: n}\nspec:\n  domain:\n    memory: {guest: 128Mi}\n    devices:\n      interfaces:\n      - {name: red, sriov: {}}\n      - {name: sriov-red, bridge: {}}\n  networks:\n  - {name: red, multus: {networkName: r}}\n  - {name: sriov-red, multus: {networkName: b}}\n";
    let e = convert(&vmi(doc, Arch::Amd64), &ctx)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "spec.domain.devices.interfaces[1].name: \"sriov-red\" is the alias of SR-IOV interface \"red\"'s host device (ua-sriov-red); rename one of them");
    let dup = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: n}\nspec:\n  domain:\n    memory: {guest: 128Mi}\n    devices:\n      interfaces:\n      - {name: x, bridge: {}}\n  networks:\n  - {name: x, multus: {networkName: a}}\n  - {name: x, multus: {networkName: b}}\n";
    assert_eq!(
        conv(dup, Arch::Amd64).unwrap_err().to_string(),
        "spec.networks[1].name: duplicate network name \"x\""
    );
    let unnamed = dup
        .replace("{name: x, bridge: {}}", "{name: \"\", bridge: {}}")
        .replace("  - {name: x, multus: {networkName: b}}\n", "");
    assert_eq!(
        conv(&unnamed, Arch::Amd64).unwrap_err().to_string(),
        "spec.domain.devices.interfaces[0].name: required"
    );
}

/// QEMU's s390x emulator has no e1000, ne2k_pci, pcnet or rtl8139: libvirt
/// defines such a domain and QEMU fails only at start, so they are refused
/// by field (found by the s390x define test's follow-up).
#[test]
fn nic_models_missing_on_s390x_are_refused() {
    let doc = |model: &str| {
        format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: n}}\nspec:\n  domain:\n    memory: {{guest: 128Mi}}\n    devices:\n      interfaces:\n      - {{name: b, bridge: {{}}, model: {model}}}\n  networks:\n  - {{name: b, multus: {{networkName: blue}}}}\n")
    };
    let e = conv(&doc("rtl8139"), Arch::S390x).unwrap_err().to_string();
    assert_eq!(
        e,
        "spec.domain.devices.interfaces[0].model: \"rtl8139\" does not exist on s390x: use one of e1000e, igb, virtio"
    );
    assert!(conv(&doc("e1000e"), Arch::S390x).is_ok());
    assert!(conv(&doc("rtl8139"), Arch::Amd64).is_ok());
}

#[test]
fn interface_model_boot_pci_acpi_link_multiqueue() {
    let doc = r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: nics, uid: 0b4c1a4e-0000-4000-8000-000000000001}
spec:
  domain:
    cpu: {cores: 3}
    devices:
      networkInterfaceMultiqueue: true
      interfaces:
      - {name: default, masquerade: {}, bootOrder: 2, pciAddress: "0000:00:0a.0", acpiIndex: 3}
      - {name: nic2, bridge: {}, model: e1000e, state: down}
      - {name: nic3, bridge: {}, state: absent}
    resources: {requests: {memory: 64Mi}}
  networks:
  - {name: default, pod: {}}
  - {name: nic2, multus: {networkName: br-net}}
  - {name: nic3, multus: {networkName: br-net}}
"#;
    let v = vmi(doc, Arch::Amd64);
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    ctx.prepared.interfaces.insert(
        "default".into(),
        crate::interfaces::InterfaceHost {
            tap: "tap0".into(),
            mac: Some("0a:58:0a:f4:00:05".into()),
            mtu: Some(1450),
            source_dev: None,
        },
    );
    let d = convert(&v, &ctx).unwrap();
    assert_eq!(d.devices.interface.len(), 2, "absent interface is left out");
    let a = iface(&d, "default");
    assert_eq!(a.interface_type, "ethernet");
    assert_eq!(a.mac.as_ref().unwrap().address, "0a:58:0a:f4:00:05");
    assert_eq!(a.mtu.as_ref().unwrap().size, 1450);
    assert_eq!(
        a.model.as_ref().unwrap().model_type,
        "virtio-non-transitional"
    );
    let drv = a.driver.as_ref().unwrap();
    assert_eq!((drv.name.as_str(), drv.queues), ("vhost", Some(3)));
    assert_eq!(a.boot.as_ref().unwrap().order, 2);
    assert!(a.rom.is_none());
    let addr = a.address.as_ref().unwrap();
    assert_eq!(
        (
            addr.domain.as_deref(),
            addr.bus.as_deref(),
            addr.slot.as_deref(),
            addr.function.as_deref()
        ),
        (Some("0x0000"), Some("0x00"), Some("0x0a"), Some("0x0"))
    );
    assert_eq!(a.acpi.as_ref().unwrap().index, 3);
    assert!(a.link.is_none());
    let b = iface(&d, "nic2");
    assert_eq!(b.model.as_ref().unwrap().model_type, "e1000e");
    assert!(b.driver.is_none(), "multiqueue is virtio only");
    assert_eq!(b.rom.as_ref().unwrap().enabled, "no");
    assert_eq!(b.link.as_ref().unwrap().state, "down");
    assert!(b.mac.is_none() && b.mtu.is_none());
    let xml = d.to_xml().unwrap();
    assert!(
        xml.contains("<target dev=\"tap0\" managed=\"no\"/>"),
        "{xml}"
    );
    assert!(xml.contains("<link state=\"down\"/>"), "{xml}");

    let bad = |from: &str, to: &str, want: &str| {
        let e = conv(&doc.replace(from, to), Arch::Amd64)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{to}: {e}");
    };
    bad(
        "model: e1000e",
        "model: tulip",
        "interfaces[1].model: \"tulip\" is not one of",
    );
    bad("0000:00:0a.0", "0000:00:20.0", "interfaces[0].pciAddress");
    bad("0000:00:0a.0", "00:0a.0", "interfaces[0].pciAddress");
    bad(
        "bootOrder: 2",
        "bootOrder: 0",
        "interfaces[0].bootOrder: must be 1 or more",
    );
    bad("state: down", "state: sleeping", "interfaces[1].state");
    // No ACPI index where the machine has no ACPI: libvirt refuses it on
    // s390x ("ACPI index is only supported for PCI devices", e2e define).
    for arch in [Arch::Ppc64le, Arch::S390x] {
        let e = conv(doc, arch).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("spec.domain.devices.interfaces[0].acpiIndex: ACPI is not available on {arch}")
        );
        conv(&doc.replace(", acpiIndex: 3", ""), arch).unwrap();
    }
    assert!(iface(&conv(doc, Arch::Arm64).unwrap(), "default")
        .acpi
        .is_some());
    bad(
        "{name: nic3, multus",
        "{name: other, multus",
        "interfaces[2].name: no spec.networks entry named \"nic3\"",
    );
    bad(
        "{name: nic2, bridge: {}",
        "{name: nic2, masquerade: {}",
        "interfaces[1].masquerade: masquerade is only allowed on the pod network",
    );
    bad(
        "{name: nic3, bridge: {}",
        "{name: nic2, bridge: {}",
        "duplicate interface name",
    );
    for binding in ["slirp", "macvtap"] {
        let e = conv(
            &doc.replace("nic2, bridge: {}", &format!("nic2, {binding}: {{}}")),
            Arch::Amd64,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            format!("spec.domain.devices.interfaces[1].{binding}: {binding} interfaces is not supported yet")
        );
    }
    // Binding plugins: passt is built (on the pod network only), any
    // other is refused by name; the discontinued passt field names its
    // successor.
    let e = conv(
        &doc.replace("nic2, bridge: {}", "nic2, binding: {name: sidecar-x}"),
        Arch::Amd64,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "spec.domain.devices.interfaces[1].binding: the network binding plugin \"sidecar-x\" is not supported yet"
    );
    bad(
        "nic2, bridge: {}",
        "nic2, binding: {name: passt}",
        "spec.domain.devices.interfaces[1].binding: the passt binding is supported for pod network interfaces only",
    );
    bad(
        "nic2, bridge: {}",
        "nic2, binding: {}",
        "spec.domain.devices.interfaces[1].binding.name: required",
    );
    bad(
        "nic2, bridge: {}",
        "nic2, bridge: {}, binding: {name: passt}",
        "spec.domain.devices.interfaces[1]: only one of bridge, masquerade,",
    );
    bad(
        "nic2, bridge: {}",
        "nic2, passt: {}",
        "spec.domain.devices.interfaces[1].passt: the passt field was discontinued in KubeVirt v1.3; use binding: {name: passt}",
    );
}

const PASST: &str = r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: passt, uid: 0b4c1a4e-0000-4000-8000-000000000002}
spec:
  domain:
    devices:
      interfaces:
      - name: default
        binding: {name: passt}
        macAddress: "02-54-00-AB-CD-EF"
        pciAddress: "0000:00:0a.0"
        acpiIndex: 2
        ports: [{name: http, port: 8080}, {port: 53, protocol: UDP}, {port: 22, protocol: tcp}]
    resources: {requests: {memory: 64Mi}}
  networks: [{name: default, pod: {}}]
"#;

/// The passt binding gives the XML KubeVirt's passt sidecar writes.
#[test]
fn passt_binding_is_the_sidecars_user_interface() {
    let d = conv(PASST, Arch::Amd64).unwrap();
    let xml = d.to_xml().unwrap();
    let start = xml.find("<interface").unwrap();
    let end = xml.find("</interface>").unwrap() + "</interface>".len();
    let one_line: String = xml[start..end].lines().map(str::trim).collect();
    assert_eq!(
        one_line,
        "<interface type=\"user\">\
         <source dev=\"eth0\"/>\
         <mac address=\"02:54:00:ab:cd:ef\"/>\
         <model type=\"virtio-non-transitional\"/>\
         <alias name=\"ua-default\"/>\
         <address type=\"pci\" domain=\"0x0000\" bus=\"0x00\" slot=\"0x0a\" function=\"0x0\"/>\
         <acpi index=\"2\"/>\
         <backend type=\"passt\" logFile=\"/var/run/kubevirt/passt.log\"/>\
         <portForward proto=\"tcp\" dev=\"eth0\"><range start=\"8080\"/><range start=\"22\"/></portForward>\
         <portForward proto=\"udp\" dev=\"eth0\"><range start=\"53\"/></portForward>\
         </interface>"
    );
    // Read back as libvirt would report it.
    assert_eq!(Domain::from_xml(&xml).unwrap(), d);

    // No ports: everything forwarded, TCP and UDP; no MAC, address or
    // index when the spec has none; transitional and other models.
    let plain = r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: passt2}
spec:
  domain:
    devices:
      useVirtioTransitional: true
      networkInterfaceMultiqueue: true
      interfaces: [{name: default, binding: {name: passt}}]
    resources: {requests: {memory: 64Mi}}
  networks: [{name: default, pod: {}}]
"#;
    let d = conv(plain, Arch::Amd64).unwrap();
    let a = iface(&d, "default");
    assert_eq!(a.model.as_ref().unwrap().model_type, "virtio-transitional");
    assert!(a.mac.is_none() && a.address.is_none() && a.acpi.is_none());
    assert!(a.driver.is_none() && a.rom.is_none() && a.target.is_none());
    let xml: String = d.to_xml().unwrap().lines().map(str::trim).collect();
    assert!(
        xml.contains(
            "<portForward proto=\"tcp\" dev=\"eth0\"/><portForward proto=\"udp\" dev=\"eth0\"/>"
        ),
        "{xml}"
    );
    // Another model as given (one pod network per VMI: a second VMI).
    let e1000e = plain.replace(
        "binding: {name: passt}}",
        "binding: {name: passt}, model: e1000e}",
    );
    let d = conv(&e1000e, Arch::Amd64).unwrap();
    assert_eq!(
        iface(&d, "default").model.as_ref().unwrap().model_type,
        "e1000e"
    );

    // The pod's ovn-udn1 link, when phase 2 found one.
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    ctx.prepared.interfaces.insert(
        "default".into(),
        crate::interfaces::InterfaceHost {
            source_dev: Some("ovn-udn1".into()),
            ..Default::default()
        },
    );
    let d = convert(&vmi(PASST, Arch::Amd64), &ctx).unwrap();
    let a = iface(&d, "default");
    assert_eq!(a.source.as_ref().unwrap().dev.as_deref(), Some("ovn-udn1"));
    assert_eq!(a.port_forward[0].dev.as_deref(), Some("eth0"));

    // Istio's proxy: its ports are excluded first.
    let istio = PASST.replace(
        "metadata: {name: passt,",
        "metadata: {annotations: {sidecar.istio.io/inject: \"True\"}, name: passt,",
    );
    let d = conv(&istio, Arch::Amd64).unwrap();
    let tcp = &iface(&d, "default").port_forward[0];
    assert_eq!(tcp.range.len(), 12);
    assert_eq!(tcp.range[0].start, 15000);
    assert_eq!(tcp.range[0].exclude.as_deref(), Some("yes"));
    assert_eq!(tcp.range[10].exclude, None);
}

#[test]
fn passt_binding_refuses_what_it_does_not_apply() {
    let bad = |from: &str, to: &str, want: &str| {
        let e = conv(&PASST.replace(from, to), Arch::Amd64)
            .unwrap_err()
            .to_string();
        assert_eq!(e, want, "{to}");
    };
    let p = "spec.domain.devices.interfaces[0]";
    bad(
        "acpiIndex: 2",
        "bootOrder: 1",
        &format!("{p}.bootOrder: the passt binding does not apply a boot order (use the masquerade or bridge binding)"),
    );
    bad(
        "acpiIndex: 2",
        "state: down",
        &format!("{p}.state: the passt binding does not apply link state down (use the masquerade or bridge binding)"),
    );
    bad(
        "acpiIndex: 2",
        "dhcpOptions: {ntpServers: [10.0.0.1]}",
        &format!("{p}.dhcpOptions: the passt binding does not apply DHCP options (passt's DHCP server has none of them) (use the masquerade or bridge binding)"),
    );
    bad(
        "port: 8080",
        "port: 70000",
        &format!("{p}.ports[0].port: 70000 is not a port number (1-65535)"),
    );
    bad(
        "{name: http, port: 8080}",
        "{name: http}",
        &format!("{p}.ports[0].port: nothing is not a port number (1-65535)"),
    );
    bad(
        "protocol: UDP",
        "protocol: SCTP",
        &format!("{p}.ports[1].protocol: \"SCTP\" is not TCP or UDP"),
    );
    bad(
        "02-54-00-AB-CD-EF",
        "03-54-00-AB-CD-EF",
        &format!("{p}.macAddress: MAC address \"03-54-00-AB-CD-EF\" is a multicast address"),
    );
    bad(
        "0000:00:0a.0",
        "0000:00:0a",
        &format!("{p}.pciAddress: \"0000:00:0a\" is not a PCI address of the form dddd:bb:ss.f"),
    );
    let e = conv(PASST, Arch::S390x).unwrap_err().to_string();
    assert_eq!(e, format!("{p}.acpiIndex: ACPI is not available on s390x"));
    // `state: absent` leaves it out, as for every binding.
    let d = conv(&PASST.replace("acpiIndex: 2", "state: absent"), Arch::Amd64).unwrap();
    assert!(d.devices.interface.is_empty());
}

#[test]
fn transitional_model_and_s390x_rom() {
    let doc = r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: nics, uid: 0b4c1a4e-0000-4000-8000-000000000001}
spec:
  domain:
    devices:
      useVirtioTransitional: true
      interfaces: [{name: default, masquerade: {}}]
    resources: {requests: {memory: 64Mi}}
  networks: [{name: default, pod: {}}]
"#;
    let d = conv(doc, Arch::Amd64).unwrap();
    let a = iface(&d, "default");
    assert_eq!(a.model.as_ref().unwrap().model_type, "virtio-transitional");
    assert_eq!(a.rom.as_ref().unwrap().enabled, "no");
    let d = conv(doc, Arch::S390x).unwrap();
    let a = iface(&d, "default");
    assert_eq!(a.model.as_ref().unwrap().model_type, "virtio");
    assert!(a.rom.is_none());
}

#[test]
fn preallocated_volumes_get_no_discard_except_the_launchers_own_images() {
    let doc = "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: pre}
spec:
  domain:
    memory: {guest: 64Mi}
    devices:
      disks:
      - {name: thick, disk: {bus: virtio}}
      - {name: thin, disk: {bus: virtio}}
      - {name: dv, disk: {bus: virtio}}
      - {name: scratch, disk: {bus: virtio}}
      - {name: eph, disk: {bus: virtio}}
      - {name: root, disk: {bus: virtio}}
  volumes:
  - {name: thick, persistentVolumeClaim: {claimName: a}}
  - {name: thin, persistentVolumeClaim: {claimName: b}}
  - {name: dv, dataVolume: {name: d}}
  - {name: scratch, emptyDisk: {capacity: 1Gi}}
  - {name: eph, ephemeral: {persistentVolumeClaim: {claimName: e}}}
  - {name: root, containerDisk: {image: x}}
";
    let v = vmi(doc, Arch::Amd64);
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    let discard = |d: &Domain, n: &str| {
        disk(d, n)
            .driver
            .as_ref()
            .unwrap()
            .discard
            .clone()
            .unwrap_or_default()
    };
    let d = convert(&v, &ctx).unwrap();
    for n in ["thick", "thin", "dv", "scratch", "eph", "root"] {
        assert_eq!(discard(&d, n), "unmap", "{n}");
    }
    ctx.volumes_discard_ignore = ["thick", "dv", "scratch", "eph", "root"]
        .into_iter()
        .map(String::from)
        .collect();
    let d = convert(&v, &ctx).unwrap();
    assert_eq!(discard(&d, "thick"), "");
    assert_eq!(discard(&d, "dv"), "");
    for n in ["thin", "scratch", "eph", "root"] {
        assert_eq!(discard(&d, n), "unmap", "{n}");
    }
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

const SRIOV_VMI: &str = r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vf, namespace: ns}
spec:
  domain:
    memory: {guest: 128Mi}
    devices:
      interfaces:
      - {name: default, masquerade: {}}
      - {name: red, sriov: {}, bootOrder: 2, pciAddress: "0000:07:00.0", macAddress: "02:00:00:00:00:aa"}
      - {name: blue, sriov: {}}
  networks:
  - {name: default, pod: {}}
  - {name: red, multus: {networkName: sriov/red-net}}
  - {name: blue, multus: {networkName: blue-net}}
"#;

fn sriov_ctx(pairs: &[(&str, &str)]) -> ConvertContext {
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    ctx.sriov_pci = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    ctx
}

fn sriov_conv(doc: &str, pairs: &[(&str, &str)]) -> Result<Domain, ConvertError> {
    convert(&vmi(doc, Arch::Amd64), &sriov_ctx(pairs))
}

/// KubeVirt's "creates SRIOV hostdev": each SR-IOV interface is a PCI
/// hostdev (managed='no', alias ua-sriov-<name>, host address from the
/// context, guest address and boot order from the interface), not an
/// <interface>; the masquerade NIC stays an interface.
#[test]
fn sriov_interfaces_become_pci_hostdevs() {
    let d = sriov_conv(
        SRIOV_VMI,
        &[("red", "0000:81:11.1"), ("blue", "0000:AF:02.7")],
    )
    .unwrap();
    assert_eq!(d.devices.interface.len(), 1);
    assert_eq!(
        d.devices.interface[0].alias.as_ref().unwrap().name,
        "ua-default"
    );
    let xml = d.to_xml().unwrap();
    let want = r#"<hostdev mode="subsystem" type="pci" managed="no">
      <source>
        <address domain="0x0000" bus="0x81" slot="0x11" function="0x1"/>
      </source>
      <boot order="2"/>
      <alias name="ua-sriov-red"/>
      <address type="pci" domain="0x0000" bus="0x07" slot="0x00" function="0x0"/>
    </hostdev>
    <hostdev mode="subsystem" type="pci" managed="no">
      <source>
        <address domain="0x0000" bus="0xaf" slot="0x02" function="0x7"/>
      </source>
      <alias name="ua-sriov-blue"/>
    </hostdev>"#;
    assert!(xml.contains(want), "{xml}");
    // PCI host devices take a PCIe root port each (KubeVirt counts them).
    let without = conv(
        &SRIOV_VMI
            .replace("      - {name: red, sriov: {}, bootOrder: 2, pciAddress: \"0000:07:00.0\", macAddress: \"02:00:00:00:00:aa\"}\n", "")
            .replace("      - {name: blue, sriov: {}}\n", ""),
        Arch::Amd64,
    )
    .unwrap();
    assert_eq!(
        crate::pci_ports::pci_devices(&d),
        crate::pci_ports::pci_devices(&without) + 2
    );
    // An absent SR-IOV interface gets no device and needs no address.
    let absent = SRIOV_VMI.replace(
        "{name: blue, sriov: {}}",
        "{name: blue, sriov: {}, state: absent}",
    );
    let d = sriov_conv(&absent, &[("red", "0000:81:11.1")]).unwrap();
    assert_eq!(d.devices.hostdev.len(), 1);
}

/// Missing or bad host facts and specs a VF cannot honour are refused with
/// one line naming the interface field; nothing is guessed.
#[test]
fn sriov_bad_input_is_refused_by_field() {
    let ok = [("red", "0000:81:11.1"), ("blue", "0000:81:11.2")];
    type Case<'a> = (String, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            SRIOV_VMI.into(),
            vec![("red", "0000:81:11.1")],
            "spec.domain.devices.interfaces[2].sriov: no host PCI address for SR-IOV interface \"blue\" (the pod's network-info file, or --network-info FILE standalone)",
        ),
        (
            SRIOV_VMI.into(),
            vec![("red", "0000:81:11.1"), ("blue", "81:11.2")],
            "spec.domain.devices.interfaces[2].sriov: host PCI address \"81:11.2\" of SR-IOV interface \"blue\" is not of the form dddd:bb:ss.f",
        ),
        (
            SRIOV_VMI.into(),
            vec![("red", "0000:81:11.1"), ("blue", "0000:81:11.1")],
            "spec.domain.devices.interfaces[2].sriov: SR-IOV interfaces \"red\" and \"blue\" were both given the host device 0000:81:11.1",
        ),
        (
            SRIOV_VMI
                .replace("{name: blue, multus: {networkName: blue-net}}", "{name: blue, pod: {}}")
                .replace("{name: default, pod: {}}", "{name: default, multus: {networkName: d}}")
                .replace("{name: default, masquerade: {}}", "{name: default, bridge: {}}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].sriov: SR-IOV needs a Multus network: spec.networks[name=blue] must have multus",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, state: down}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].state: an SR-IOV interface is a host device and has no link state to set down",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, model: e1000}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].model: \"e1000\": an SR-IOV interface is the host's VF, it has no NIC model",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, acpiIndex: 3}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].acpiIndex: an SR-IOV host device takes no ACPI index",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, bootOrder: 0}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].bootOrder: must be 1 or more",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, pciAddress: \"0000:07:00\"}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].pciAddress: \"0000:07:00\" is not a PCI address of the form dddd:bb:ss.f",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, pciAddress: \"0000:07:00.0\"}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].pciAddress: 0000:07:00.0 is already the address of interface \"red\"",
        ),
    ];
    for (doc, pairs, want) in cases {
        let e = sriov_conv(&doc, &pairs).unwrap_err().to_string();
        assert_eq!(e, want);
        assert_eq!(e.lines().count(), 1);
    }
}

/// KubeVirt replaces a downwardMetrics disk's driver with a bare one: no
/// discard, no multi-queue, none of the disk's own cache (issue 21).
#[test]
fn downward_metrics_disk_driver_is_bare_as_kubevirts() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: m, uid: u1}\nspec:\n  domain:\n    memory: {guest: 128Mi}\n    devices:\n      blockMultiQueue: true\n      disks:\n      - {name: metrics, cache: writethrough, disk: {bus: virtio}}\n      - {name: data, cache: writethrough, disk: {bus: virtio}}\n  volumes:\n  - {name: metrics, downwardMetrics: {}}\n  - {name: data, emptyDisk: {capacity: 1Gi}}\n";
    let d = conv(doc, Arch::Amd64).unwrap();
    let m = disk(&d, "metrics").driver.as_ref().unwrap();
    assert_eq!(
        (m.discard.as_deref(), m.queues, m.cache.as_deref()),
        (None, None, None)
    );
    assert_eq!(m.error_policy.as_deref(), Some("stop"));
    assert!(disk(&d, "metrics").readonly.is_some());
    let x = disk(&d, "data").driver.as_ref().unwrap();
    assert_eq!(
        (x.discard.as_deref(), x.queues, x.cache.as_deref()),
        (Some("unmap"), Some(1), Some("writethrough"))
    );
}

/// KubeVirt addresses SCSI disks and LUNs on the controller; SCSI CD-ROMs
/// are left to libvirt (issue 21).
#[test]
fn scsi_cdroms_are_left_to_libvirt_to_address() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: s, uid: u1}\nspec:\n  domain:\n    memory: {guest: 128Mi}\n    devices:\n      disks:\n      - {name: a, disk: {bus: scsi}}\n      - {name: b, cdrom: {bus: scsi}}\n  volumes:\n  - {name: a, emptyDisk: {capacity: 1Gi}}\n  - {name: b, emptyDisk: {capacity: 1Gi}}\n";
    let d = conv(doc, Arch::Amd64).unwrap();
    let a = disk(&d, "a").address.as_ref().unwrap();
    assert_eq!(
        (a.address_type.as_str(), a.unit.as_deref()),
        ("drive", Some("0"))
    );
    assert_eq!(disk(&d, "b").target.dev, "sdb");
    assert!(disk(&d, "b").address.is_none());
}

/// With CPU hot-plug, queues follow the vCPUs online at boot, not the
/// maximum (KubeVirt's `CalculateRequestedVCPUs`; issue 21).
#[test]
fn queues_follow_the_vcpus_online_at_boot() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: q, uid: u1}\nspec:\n  domain:\n    cpu: {sockets: 2, cores: 1, threads: 1, maxSockets: 8}\n    memory: {guest: 128Mi}\n    devices:\n      blockMultiQueue: true\n      networkInterfaceMultiqueue: true\n      disks:\n      - {name: a, disk: {bus: virtio}}\n      interfaces:\n      - {name: default, masquerade: {}}\n  networks:\n  - {name: default, pod: {}}\n  volumes:\n  - {name: a, emptyDisk: {capacity: 1Gi}}\n";
    let d = conv(doc, Arch::Amd64).unwrap();
    assert_eq!(d.vcpu.count, 8);
    assert_eq!(disk(&d, "a").driver.as_ref().unwrap().queues, Some(2));
    let x = d.to_xml().unwrap();
    assert!(x.contains("<driver name=\"vhost\" queues=\"2\"/>"), "{x}");
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
