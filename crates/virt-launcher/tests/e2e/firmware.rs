//! Firmware boots under TCG through `virt-launcher run`: an x86_64 guest
//! through OVMF (EFI, no secure boot) all the way into the test guest, and
//! an aarch64 guest (machine `virt`, `--arch arm64`) through AAVMF to its
//! boot manager and UEFI shell. Each asserts the firmware's own lines on
//! the serial console, and the domain libvirt ran.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::harness::{guest_vmi, Launcher, Opts, BOOT_TIMEOUT};

#[test]
fn x86_64_efi_guest_boots_through_ovmf() {
    for need in [
        "/usr/share/OVMF/OVMF_CODE.fd",
        "/usr/share/OVMF/OVMF_VARS.fd",
    ] {
        assert!(
            std::path::Path::new(need).exists(),
            "{need} is missing: run `bash .ci/install` (ovmf)"
        );
    }
    let yaml = guest_vmi("efi", "virtio").replace(
        "    memory: {guest: 128Mi}\n",
        // OVMF keeps part of the memory: 128 MiB leave too little for the
        // guest's kernel and initramfs, loaded by systemd-boot.
        "    memory: {guest: 256Mi}\n    firmware:\n      bootloader:\n        efi: {secureBoot: false}\n",
    );
    assert!(yaml.contains("secureBoot: false"), "{yaml}");
    let mut l = Launcher::start(&yaml, &Opts::default());
    let started = Instant::now();
    // OVMF's boot manager (BdsDxe) prints what it boots: the test guest's
    // disk, through its EFI/BOOT/BOOTX64.EFI (systemd-boot).
    let serial = l.wait_serial("BdsDxe: starting Boot", 1, BOOT_TIMEOUT);
    let firmware_at = started.elapsed();
    assert!(
        serial.contains("BdsDxe: loading Boot0001 \"UEFI Misc Device\""),
        "{serial}"
    );
    let serial = l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let bds = serial.find("BdsDxe: starting Boot").unwrap();
    assert!(serial.find("GUEST-READY").unwrap() > bds, "{serial}");
    eprintln!(
        "OVMF: first BdsDxe line after {firmware_at:?}, guest ready after {:?}",
        started.elapsed()
    );
    let xml = l.domain_xml();
    for want in [
        "<loader readonly='yes' secure='no' type='pflash'",
        ">/usr/share/OVMF/OVMF_CODE.fd</loader>",
        "template='/usr/share/OVMF/OVMF_VARS.fd'",
        "<emulator>/usr/bin/qemu-system-x86_64</emulator>",
    ] {
        assert!(xml.contains(want), "{want} not in\n{xml}");
    }
    l.signal(Signal::SIGTERM);
    l.wait_serial("GUEST-SHUTDOWN", 1, Duration::from_secs(90));
    l.wait_success(Duration::from_secs(90));
}

#[test]
fn aarch64_guest_boots_aavmf_under_tcg() {
    for need in [
        "/usr/bin/qemu-system-aarch64",
        "/usr/share/AAVMF/AAVMF_CODE.fd",
        "/usr/share/AAVMF/AAVMF_VARS.fd",
    ] {
        assert!(
            std::path::Path::new(need).exists(),
            "{need} is missing: run `bash .ci/install` (qemu-system-arm, qemu-efi-aarch64)"
        );
    }
    let yaml = "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: aavmf
  namespace: e2e
spec:
  terminationGracePeriodSeconds: 1
  domain:
    memory: {guest: 128Mi}
    firmware:
      bootloader:
        efi: {secureBoot: false}
    devices:
      disks:
      - name: scratch
        disk: {bus: virtio}
  volumes:
  - name: scratch
    emptyDisk: {capacity: 16Mi}
";
    let mut l = Launcher::start(
        yaml,
        &Opts {
            container_disks: &[],
            args: &["--arch", "arm64", "--grace-period-seconds", "1"],
            ..Opts::default()
        },
    );
    let started = Instant::now();
    // AAVMF's banner is its first line; then its boot manager finds
    // nothing to boot on the empty disk and starts the built-in shell.
    let serial = l.wait_serial("UEFI firmware (version", 1, BOOT_TIMEOUT);
    let banner_at = started.elapsed();
    let serial = if serial.contains("UEFI Interactive Shell") {
        serial
    } else {
        l.wait_serial("UEFI Interactive Shell", 1, BOOT_TIMEOUT)
    };
    eprintln!(
        "AAVMF: banner after {banner_at:?}, UEFI shell after {:?}",
        started.elapsed()
    );
    let at = |s: &str| {
        serial
            .find(s)
            .unwrap_or_else(|| panic!("{s:?} not on the console:\n{serial}"))
    };
    assert!(at("UEFI firmware (version") < at("BdsDxe: "), "{serial}");
    assert!(at("BdsDxe: ") < at("UEFI Interactive Shell"), "{serial}");
    let xml = l.domain_xml();
    for want in [
        "<domain type='qemu'",
        "<type arch='aarch64' machine='virt-",
        "<loader readonly='yes' secure='no' type='pflash'",
        ">/usr/share/AAVMF/AAVMF_CODE.fd</loader>",
        "template='/usr/share/AAVMF/AAVMF_VARS.fd'",
        "<cpu mode='maximum'",
        "<emulator>/usr/bin/qemu-system-aarch64</emulator>",
    ] {
        assert!(xml.contains(want), "{want} not in\n{xml}");
    }
    // Whether or not the shell answers the ACPI power button, the launcher
    // stops the guest within the 1 s grace period and ends cleanly.
    l.stop(Duration::from_secs(60));
}

#[test]
fn run_refuses_an_unknown_arch_by_flag() {
    let dir = tempfile::tempdir().unwrap();
    let vmi = dir.path().join("vmi.yaml");
    std::fs::write(&vmi, guest_vmi("arch", "virtio")).unwrap();
    let out = std::process::Command::new(crate::harness::launcher_bin())
        .arg("run")
        .arg(&vmi)
        .args(["--arch", "riscv64", "--state-dir"])
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.trim_end().ends_with(
            "--arch: unknown architecture \"riscv64\" (expected amd64, arm64, ppc64le or s390x)"
        ),
        "{err}"
    );
    assert!(!dir.path().join("state").exists());
}

/// KubeVirt's verbosity rules end to end: `VIRT_LAUNCHER_LOG_VERBOSITY=6`
/// gives the daemon KubeVirt's level-6 `log_filters`, and the amd64 guest
/// the `isa-debugcon` device whose SeaBIOS output the launcher reads from
/// its FIFO and logs as `[SeaBios]: ...`.
#[test]
fn verbosity_six_logs_seabios_and_sets_libvirt_log_filters() {
    let yaml = guest_vmi("seabios-debug", "virtio");
    let six = std::ffi::OsStr::new("6");
    let mut l = Launcher::start(
        &yaml,
        &Opts {
            env: &[("VIRT_LAUNCHER_LOG_VERBOSITY", six)],
            ..Opts::default()
        },
    );
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let xml = l.domain_xml();
    for want in [
        "<qemu:arg value='file,id=firmwarelog,path=/var/run/kubevirt-private/QEMUSeaBiosDebugPipe'/>",
        "<qemu:arg value='isa-debugcon,iobase=0x402,chardev=firmwarelog'/>",
    ] {
        assert!(xml.contains(want), "{want} not in\n{xml}");
    }
    let log = l.log();
    let filters = "Enabling libvirt log filters: 3:remote 4:event 3:util.json 3:util.object \
                   3:util.dbus 3:util.netlink 3:node_device 3:rpc 3:access 3:util.threadjob \
                   3:cpu.cpu 3:qemu.qemu_monitor 1:*";
    assert!(log.contains(filters), "{filters} not in the log");
    assert!(
        log.contains("[SeaBios]: SeaBIOS (version"),
        "no SeaBIOS line in the launcher's log: {}",
        log.lines()
            .filter(|l| l.contains("SeaBios"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    l.signal(Signal::SIGTERM);
    l.wait_serial("GUEST-SHUTDOWN", 1, Duration::from_secs(90));
    l.wait_success(Duration::from_secs(90));
}
