//! libvirt itself accepts what the converter writes: every KubeVirt example,
//! corpus VMI and real-world case that converts is defined (and undefined)
//! in a launcher's real libvirtd, which checks it against the QEMU binary's
//! capabilities, not only the schema: for x86_64 (KVM and TCG), and under
//! TCG (`<domain type='qemu'>`) for aarch64, ppc64 and s390x against
//! qemu-system-aarch64, qemu-system-ppc64 and qemu-system-s390x.
//!
//! The launcher only lends its daemon here: its own guest starts paused
//! (`startStrategy: Paused`), so no guest CPU is burnt while defining.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{guest_vmi, Launcher, Opts, BOOT_TIMEOUT};

/// Domains libvirt refuses although the converter's output is what it
/// should be: (file name, `--arch`, words of libvirt's error, why this is
/// a libvirt/QEMU limit and not a converter bug). Each is asserted to fail
/// with that error, so a libvirt that lifts the limit makes the test fail
/// and the entry is removed. None today: everything libvirt refused so far
/// was a converter bug and is now refused by field or written differently
/// (ACPI on pseries/s390x, realtime on ppc64le, SeaBIOS serial output off
/// x86, KubeVirt's arm64 admission).
const LIBVIRT_LIMITS: &[(&str, &str, &str, &str)] = &[];

/// A launcher whose libvirtd the test borrows: the test guest, started
/// paused, so the daemon is up and no guest runs.
pub(crate) fn lend_daemon(name: &str) -> Launcher {
    let yaml = guest_vmi(name, "virtio").replace("spec:\n", "spec:\n  startStrategy: Paused\n");
    let l = Launcher::start(&yaml, &Opts::default());
    let start = Instant::now();
    loop {
        let st = l.domstate();
        if st.starts_with("paused") {
            return l;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the launcher's domain is not paused within 120 s ({st}):\n{}",
            l.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Ends the lent launcher: its paused guest cannot answer an ACPI
/// shutdown (SIGTERM would wait out the grace period), so the domain is
/// destroyed, and the launcher exits cleanly once its guest is gone.
pub(crate) fn stop(mut l: Launcher) {
    let (ok, msg) = l.virsh(&["destroy", &l.domain]);
    assert!(ok, "destroy {}: {msg}", l.domain);
    let st = l.wait_exit(Duration::from_secs(60));
    assert!(st.success(), "{st}\n{}", l.log());
}

use crate::inputs::{host_facts, inputs};

/// What defining one converted VMI gave.
pub(crate) struct Defined {
    /// File name of the VMI.
    pub(crate) file: String,
    /// `virsh dumpxml --inactive` of the defined domain: libvirt's view,
    /// with the emulator, machine and addresses it chose.
    pub(crate) xml: String,
}

/// Converts every input with `convert ARGS` and defines each result in
/// `l`'s libvirtd (then undefines it). Inputs refused by field (exit 2)
/// are skipped, as the convert tests cover them; a domain libvirt refuses
/// fails the test unless [`LIBVIRT_LIMITS`] names it, with its error.
pub(crate) fn define_all(l: &Launcher, arch: &str, args: &[&str]) -> Vec<Defined> {
    let mut defined = Vec::new();
    for p in inputs() {
        let file = p.file_name().unwrap().to_string_lossy().into_owned();
        let out = Command::new(crate::harness::launcher_bin())
            .arg("convert")
            .arg(&p)
            .args(["--arch", arch])
            .args(args)
            .args(host_facts(&p))
            .output()
            .unwrap();
        if out.status.code() == Some(2) {
            continue; // refused by field; covered by the convert tests
        }
        assert!(
            out.status.success(),
            "{file} ({arch} {args:?}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let xml_file = l.dir.path().join(format!("domain-{arch}.xml"));
        std::fs::write(&xml_file, &out.stdout).unwrap();
        let (ok, msg) = l.virsh(&["define", xml_file.to_str().unwrap()]);
        let limit = LIBVIRT_LIMITS
            .iter()
            .find(|(f, a, _, _)| *f == file && *a == arch);
        if let Some((_, _, error, why)) = limit {
            assert!(
                !ok && msg.contains(error),
                "{file} ({arch}): expected libvirt to refuse it with {error:?} ({why}), got: {msg}"
            );
            continue;
        }
        assert!(ok, "libvirt refused {file} ({arch} {args:?}): {msg}");
        let name = msg
            .split('\'')
            .nth(1)
            .unwrap_or_else(|| panic!("no domain name in {msg}"))
            .to_owned();
        let (ok, xml) = l.virsh(&["dumpxml", "--inactive", &name]);
        assert!(ok, "dumpxml {name}: {xml}");
        let (ok, msg) = l.virsh(&["undefine", "--nvram", &name]);
        assert!(ok, "undefine {name}: {msg}");
        defined.push(Defined { file, xml });
    }
    defined
}

/// The CPU modes libvirt supports for `arch` under TCG (domain
/// capabilities), checked against what the converter assumes
/// (`ArchCaps::tcg_cpu_modes`), and that every domain in `defined` uses
/// one of them (libvirt checks the mode only when the domain starts).
fn check_tcg_cpu_modes(l: &Launcher, arch: &str, defined: &[Defined]) {
    let a: api::Arch = arch.parse().unwrap();
    let (ok, caps) = l.virsh(&[
        "domcapabilities",
        "--arch",
        a.libvirt_name(),
        "--virttype",
        "qemu",
    ]);
    assert!(ok, "{caps}");
    let mut live: Vec<&str> = caps
        .split("<mode name='")
        .skip(1)
        .filter(|m| m.contains("' supported='yes'"))
        .filter_map(|m| m.split('\'').next())
        .filter(|m| *m != "custom")
        .collect();
    live.sort_unstable();
    let mut assumed = converter::arch::caps(a).tcg_cpu_modes.to_vec();
    assumed.sort_unstable();
    assert_eq!(live, assumed, "TCG CPU modes of {arch}:\n{caps}");
    for d in defined {
        if let Some(mode) = d.xml.split("<cpu mode='").nth(1) {
            let mode = mode.split('\'').next().unwrap_or("");
            assert!(
                mode == "custom" || live.contains(&mode),
                "{} ({arch}): CPU mode {mode} is not one TCG has ({live:?})",
                d.file
            );
        }
    }
}

#[test]
fn libvirt_defines_every_converted_vmi() {
    let l = lend_daemon("definer");
    let mut n = 0;
    for emu in [&["--use-emulation"][..], &[][..]] {
        let defined = define_all(&l, "amd64", emu);
        let kind = if emu.is_empty() { "kvm" } else { "qemu" };
        if !emu.is_empty() {
            check_tcg_cpu_modes(&l, "amd64", &defined);
        }
        for d in &defined {
            assert!(
                d.xml.starts_with(&format!("<domain type='{kind}'>")),
                "{}: {}",
                d.file,
                d.xml
            );
        }
        check_sriov_hostdevs(&defined);
        n += defined.len();
    }
    assert!(n >= 20, "only {n} defined");
    check_dra_hostdevs(&l);
    stop(l);
}

/// libvirt defines the DRA VMI (`tests/data/hostdevices/vmi-dra.yaml`:
/// a PCI GPU, a vGPU and a PCI host device from resource claims, their
/// addresses in `status.deviceStatus`), although none of the devices
/// exists here (a `managed='no'` PCI hostdev and an mdev are looked up
/// only at start), and keeps the three with KubeVirt's DRA aliases.
fn check_dra_hostdevs(l: &Launcher) {
    let p = crate::inputs::repo().join("tests/data/hostdevices/vmi-dra.yaml");
    let out = Command::new(crate::harness::launcher_bin())
        .arg("convert")
        .arg(&p)
        .arg("--use-emulation")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "convert {}: {}",
        p.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let xml_file = l.dir.path().join("domain-dra.xml");
    std::fs::write(&xml_file, &out.stdout).unwrap();
    let (ok, msg) = l.virsh(&["define", xml_file.to_str().unwrap()]);
    assert!(ok, "libvirt refused the DRA VMI: {msg}");
    let name = msg.split('\'').nth(1).expect("domain name").to_owned();
    let (ok, xml) = l.virsh(&["dumpxml", "--inactive", &name]);
    assert!(ok, "dumpxml {name}: {xml}");
    let (ok, undef) = l.virsh(&["undefine", &name]);
    assert!(ok, "undefine {name}: {undef}");
    assert_eq!(xml.matches("<hostdev ").count(), 3, "{xml}");
    for alias in ["ua-dra-gpu-", "ua-dra-hostdevice-"] {
        assert!(
            xml.contains(&format!("<alias name='{alias}")),
            "{alias}: {xml}"
        );
    }
    assert!(
        xml.contains("type='mdev'") && xml.contains("managed='no'"),
        "{xml}"
    );
}

/// libvirt defines the SR-IOV corpus VMI although neither VF exists here
/// (`managed='no'` PCI hostdevs are looked up only at start) and keeps
/// what KubeVirt writes: the host addresses, aliases, boot order and the
/// guest address.
fn check_sriov_hostdevs(defined: &[Defined]) {
    let d = defined
        .iter()
        .find(|d| d.file == "sriov-interfaces.yaml")
        .expect("the SR-IOV corpus VMI was not defined");
    let hostdevs: Vec<&str> = d.xml.split("<hostdev ").skip(1).collect();
    assert_eq!(hostdevs.len(), 2, "{}", d.xml);
    for (h, (host, alias)) in hostdevs.iter().zip([
        ("bus='0x81' slot='0x11' function='0x1'", "ua-sriov-red"),
        ("bus='0xaf' slot='0x02' function='0x7'", "ua-sriov-blue"),
    ]) {
        assert!(
            h.starts_with("mode='subsystem' type='pci' managed='no'>"),
            "{h}"
        );
        assert!(h.contains(host), "{host} not in {h}");
        assert!(h.contains(&format!("<alias name='{alias}'/>")), "{h}");
    }
    assert!(hostdevs[0].contains("<boot order='2'/>"), "{}", hostdevs[0]);
    assert!(
        hostdevs[0].contains("bus='0x00' slot='0x0b' function='0x0'/>"),
        "{}",
        hostdevs[0]
    );
}

/// The emulator and machine type libvirt must pick for each `--arch`, and
/// the address type virtio devices must get instead of PCI, if any.
fn foreign(arch: &str) -> (&'static str, &'static str, Option<&'static str>) {
    match arch {
        "arm64" => ("/usr/bin/qemu-system-aarch64", "machine='virt-", None),
        "ppc64le" => ("/usr/bin/qemu-system-ppc64", "machine='pseries-", None),
        "s390x" => (
            "/usr/bin/qemu-system-s390x",
            "machine='s390-ccw-virtio-",
            Some("ccw"),
        ),
        other => panic!("no emulator for {other}"),
    }
}

/// aarch64, ppc64 and s390x under TCG: every VMI that converts for the
/// architecture is defined against that architecture's real emulator.
fn defines_foreign(arch: &str) {
    let (emulator, machine, address) = foreign(arch);
    assert!(
        Path::new(emulator).exists(),
        "{emulator} is missing: run `bash .ci/install` (qemu-system-arm, qemu-system-ppc, qemu-system-s390x from bookworm-backports)"
    );
    let l = lend_daemon(&format!("definer-{arch}"));
    let started = Instant::now();
    let defined = define_all(&l, arch, &["--use-emulation"]);
    eprintln!(
        "{arch}: {} domains defined in {:?} (capability probing included)",
        defined.len(),
        started.elapsed()
    );
    check_tcg_cpu_modes(&l, arch, &defined);
    for d in &defined {
        let why = format!("{} ({arch}):\n{}", d.file, d.xml);
        assert!(d.xml.starts_with("<domain type='qemu'>"), "{why}");
        // libvirt may name a link to it (Debian's qemu-system-ppc64le).
        let used = d
            .xml
            .split("<emulator>")
            .nth(1)
            .and_then(|r| r.split("</emulator>").next())
            .unwrap_or_else(|| panic!("no <emulator> in {why}"));
        assert_eq!(
            std::fs::canonicalize(used).ok(),
            std::fs::canonicalize(emulator).ok(),
            "{used} is not {emulator}: {why}"
        );
        // libvirt expanded the machine alias from the emulator's list.
        assert!(d.xml.contains(machine), "{why}");
        if let Some(kind) = address {
            // s390x has channel I/O: virtio disks sit on ccw (only devices
            // given a PCI address, or without a ccw variant, use zPCI).
            for disk in d.xml.split("<disk ").skip(1) {
                let disk = disk.split("</disk>").next().unwrap_or("");
                if disk.contains("bus='virtio'") {
                    assert!(disk.contains(&format!("<address type='{kind}'")), "{why}");
                }
            }
        }
    }
    let files: Vec<&str> = defined.iter().map(|d| d.file.as_str()).collect();
    // Every KubeVirt example without x86-only parts converts and defines,
    // and so does the corpus VMI written for all four architectures.
    for must in [
        "arch-portable.yaml",
        "vmi-ephemeral.yaml",
        "vmi-fedora.yaml",
        "vmi-nocloud.yaml",
        "vmi-kernel-boot.yaml",
        "vmi-masquerade.yaml",
    ] {
        assert!(
            files.contains(&must),
            "{must} not defined on {arch}: {files:?}"
        );
    }
    assert!(
        defined.len() >= 25,
        "only {} defined on {arch}: {files:?}",
        defined.len()
    );
    stop(l);
}

#[test]
fn libvirt_defines_every_converted_vmi_for_aarch64() {
    defines_foreign("arm64");
}

#[test]
fn libvirt_defines_every_converted_vmi_for_ppc64() {
    defines_foreign("ppc64le");
}

#[test]
fn libvirt_defines_every_converted_vmi_for_s390x() {
    defines_foreign("s390x");
}

/// Numbers in `attr='0x..'` / `attr='..'` after each occurrence of `key`.
fn attr_values(xml: &str, elem_prefix: &str, attr: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for chunk in xml.split('<').filter(|c| c.starts_with(elem_prefix)) {
        let tag = chunk.split('>').next().unwrap_or("");
        if let Some(rest) = tag.split(&format!(" {attr}='")).nth(1) {
            let v = rest.split('\'').next().unwrap_or("");
            let n = match v.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16),
                None => v.parse(),
            };
            out.push(n.unwrap_or_else(|_| panic!("{attr}={v:?} in {tag}")));
        }
    }
    out
}

/// KubeVirt's hot-plug reservation on a VMI with one interface: the
/// first define carries 3 placeholder interfaces (4 slots − 1 NIC), whose
/// root ports stay empty once they are removed, and the launcher appends
/// D − 3 more free ports.
#[test]
fn launcher_reserves_free_pcie_root_ports() {
    let yaml = crate::network::masquerade_vmi("ports");
    let mut l = Launcher::start_args(&yaml, &["--setup-pod-network"]);
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let (ok, xml) = l.virsh(&["dumpxml", "--inactive", "e2e_ports"]);
    assert!(ok, "{xml}");
    // The converter's count for this VMI (128 MiB: 8 ports in total, at least 3 free).
    let mut vmi = api::load_vmi(yaml.as_bytes(), api::Arch::Amd64).unwrap();
    api::defaults::fill_missing_uid(&mut vmi);
    let ctx = converter::ConvertContext::new(api::Arch::Amd64, converter::VirtType::Qemu);
    let dom = converter::convert(&vmi, &ctx).unwrap();
    let wanted = converter::pci_ports::free_ports_wanted(&vmi, api::Arch::Amd64, &dom);
    let placeholders =
        converter::pci_ports::placeholder_count(&vmi, api::Arch::Amd64, &dom).unwrap();
    assert_eq!(placeholders, 3);
    // No placeholder survives; the guest's own NIC does.
    assert!(!xml.contains("placeholder-"), "{xml}");
    assert_eq!(
        xml.matches("<interface type='ethernet'>").count(),
        1,
        "{xml}"
    );
    let ports: Vec<u32> = xml
        .split('<')
        .filter(|c| c.starts_with("controller type='pci'") && c.contains("model='pcie-root-port'"))
        .map(|c| attr_values(&format!("<{c}"), "controller", "index")[0])
        .collect();
    let used = attr_values(&xml, "address type='pci'", "bus");
    let free: Vec<u32> = ports
        .iter()
        .copied()
        .filter(|p| !used.contains(p))
        .collect();
    // The launcher appends `wanted` empty ports after libvirt's own (the
    // highest indices); the placeholders' ports are empty too; libvirt
    // itself leaves at most one spare port when it adds the ports the
    // devices need. Free in all: D = wanted + placeholders (or one more).
    let appended = &ports[ports.len().saturating_sub(wanted as usize)..];
    let why = format!(
        "free root ports {free:?} of {ports:?} (buses in use {used:?}), U={}, wanted {wanted}, placeholders {placeholders}:\n{xml}",
        converter::pci_ports::pci_devices(&dom)
    );
    assert_eq!(appended.len(), wanted as usize, "{why}");
    assert!(appended.iter().all(|p| free.contains(p)), "{why}");
    let d = (wanted + placeholders) as usize;
    assert!(d >= 3, "{why}");
    assert!((d..=d + 1).contains(&free.len()), "{why}");
    assert!(ports.iter().all(|p| *p <= 31), "{ports:?}");
    l.stop(std::time::Duration::from_secs(90));
}
