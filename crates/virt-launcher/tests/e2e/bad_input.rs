//! Bad input to `virt-launcher run`: a clear one-line error naming the
//! field, exit code 2, and nothing started or left behind.

use std::process::Command;

use crate::harness::{guest_image, launcher_bin, processes_mentioning, require_stack};

const HEAD: &str = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: bad, namespace: e2e}\n";

fn volumes() -> &'static str {
    "  volumes:\n  - name: containerdisk\n    containerDisk: {image: x}\n"
}

/// Runs the launcher on `yaml`; returns (exit code, last stderr line).
pub(crate) fn refuse(yaml: &str, extra: &[&str]) -> (i32, String) {
    let (code, last, started) = refuse_reporting_start(yaml, extra);
    assert!(
        !started,
        "input refused only after libvirt was started (it must be checked first): {last}"
    );
    (code, last)
}

/// [`refuse`] for input that can only be judged once the runtime exists
/// (an image's format, read by qemu-img inside it): also returns whether a
/// daemon was started.
pub(crate) fn refuse_reporting_start(yaml: &str, extra: &[&str]) -> (i32, String, bool) {
    require_stack();
    let dir = tempfile::tempdir().unwrap();
    let vmi = dir.path().join("vmi.yaml");
    std::fs::write(&vmi, yaml).unwrap();
    let state = dir.path().join("state");
    let img = guest_image();
    let mut cmd = Command::new(launcher_bin());
    cmd.arg("run")
        .arg(&vmi)
        .arg("--use-emulation")
        .arg("--state-dir")
        .arg(&state);
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let uid = format!(
        "bad-input-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    if !extra.contains(&"--uid") {
        cmd.args(["--uid", &uid]);
    }
    if !extra.contains(&"--no-disk") {
        cmd.arg("--container-disk")
            .arg(format!("containerdisk={}", img.display()));
    }
    cmd.args(extra.iter().filter(|a| **a != "--no-disk"));
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let last = stderr.lines().last().unwrap_or("").to_owned();
    // Refused before anything starts: no state directory; refused later
    // (a volume checked once the runtime exists): removed again.
    let left: Vec<String> = std::fs::read_dir(&state)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        left.is_empty() && !state.exists(),
        "state left behind for refused input: {left:?}\n{stderr}"
    );
    assert!(processes_mentioning(&uid).is_empty());
    // One plain line for people, not repeated as a JSON log line.
    if let Some(msg) = last.strip_prefix("virt-launcher: ") {
        assert_eq!(
            stderr.matches(msg).count(),
            1,
            "refusal repeated:\n{stderr}"
        );
    }
    let started = stderr
        .lines()
        .any(|l| l.contains("\"daemon\":") && l.contains("\"msg\":\"started\""));
    // Refused before anything started: the refusal is all a user sees.
    if !started {
        assert_eq!(
            stderr.lines().count(),
            1,
            "more than the refusal printed:\n{stderr}"
        );
    }
    (out.status.code().unwrap_or(-1), last, started)
}

/// [`assert_refused`] for input judged only inside the runtime (a claim's
/// free space, where it is mounted): libvirt may have started, but the exit
/// is still 2 with the field named and nothing left behind.
pub(crate) fn assert_refused_late(yaml: &str, extra: &[&str], expect: &str) {
    let (code, line, _) = refuse_reporting_start(yaml, extra);
    assert_eq!(code, 2, "{line}");
    assert!(line.starts_with("virt-launcher: "), "{line}");
    assert!(line.contains(expect), "expected {expect:?} in {line:?}");
}

pub(crate) fn assert_refused(yaml: &str, extra: &[&str], expect: &str) {
    let (code, line) = refuse(yaml, extra);
    assert_eq!(code, 2, "{line}");
    assert!(line.starts_with("virt-launcher: "), "{line}");
    assert!(line.contains(expect), "expected {expect:?} in {line:?}");
}

#[test]
fn malformed_yaml() {
    assert_refused(
        "apiVersion: kubevirt.io/v1\nkind: [\n",
        &[],
        "malformed document",
    );
}

#[test]
fn wrong_kind() {
    assert_refused(
        "apiVersion: kubevirt.io/v1\nkind: Pod\nmetadata: {name: a}\n",
        &[],
        "kind: \"Pod\" is not VirtualMachineInstance",
    );
}

#[test]
fn missing_name() {
    assert_refused(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {}\nspec: {}\n",
        &[],
        "metadata.name: required",
    );
}

#[test]
fn impossible_quantities() {
    let y = format!(
        "{HEAD}spec:\n  domain:\n    memory: {{guest: 12XB}}\n{}",
        volumes()
    );
    assert_refused(
        &y,
        &[],
        "spec.domain.memory.guest: \"12XB\" is not a quantity",
    );
    let y = format!(
        "{HEAD}spec:\n  domain:\n    memory: {{guest: \"1e30\"}}\n{}",
        volumes()
    );
    assert_refused(&y, &[], "spec.domain.memory.guest: 1e30 is too large");
    let y = format!(
        "{HEAD}spec:\n  domain:\n    memory: {{guest: -1Gi}}\n{}",
        volumes()
    );
    assert_refused(&y, &[], "spec.domain.memory.guest: -1Gi is negative");
}

#[test]
fn unknown_bus() {
    let y = format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n    devices:\n      disks:\n      - name: containerdisk\n        disk: {{bus: floppy}}\n{}", volumes());
    assert_refused(
        &y,
        &[],
        "spec.domain.devices.disks[0].disk.bus: unknown variant `floppy`",
    );
}

#[test]
fn disk_naming_a_missing_volume() {
    let y = format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n    devices:\n      disks:\n      - name: data\n{}", volumes());
    assert_refused(
        &y,
        &[],
        "spec.domain.devices.disks[0].name: volume \"data\" not found in spec.volumes",
    );
}

#[test]
fn container_disk_file_missing() {
    let y = format!(
        "{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n{}",
        volumes()
    );
    assert_refused(
        &y,
        &[
            "--no-disk",
            "--container-disk",
            "containerdisk=/nonexistent/disk.img",
        ],
        "spec.volumes[0].containerDisk: image /nonexistent/disk.img",
    );
    assert_refused(&y, &["--no-disk"], "spec.volumes[0].containerDisk: no image for volume \"containerdisk\": pass --container-disk containerdisk=FILE");
    assert_refused(
        &y,
        &["--container-disk", "other=/etc/hostname"],
        "the VMI has no containerDisk volume named \"other\"",
    );
}

#[test]
fn path_traversal_in_names() {
    let y = format!("{HEAD}spec:\n  domain: {{memory: {{guest: 64Mi}}}}\n  volumes:\n  - name: ../../etc\n    emptyDisk: {{capacity: 1Gi}}\n");
    assert_refused(
        &y,
        &["--no-disk"],
        "spec.volumes[0].name: \"../../etc\" must be",
    );
    let y = format!(
        "{HEAD}spec:\n  domain: {{memory: {{guest: 64Mi}}}}\n{}",
        volumes()
    );
    assert_refused(
        &y,
        &["--uid", "../../x"],
        "metadata.uid: \"../../x\" must be 1-64 letters",
    );
    let y = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a, uid: ../../x}\nspec: {domain: {memory: {guest: 64Mi}}}\n";
    assert_refused(
        y,
        &["--no-disk", "--uid", "../../y"],
        "metadata.uid: \"../../x\" must be",
    );
}

#[test]
fn unsupported_feature_is_named() {
    let y = format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n    devices:\n      interfaces:\n      - name: default\n        macvtap: {{}}\n  networks:\n  - name: default\n    pod: {{}}\n{}", volumes());
    assert_refused(
        &y,
        &["--setup-pod-network"],
        "spec.domain.devices.interfaces[0].macvtap: macvtap interfaces is not supported yet",
    );
}

/// `run` of a VMI with an SR-IOV interface needs the VF's host address
/// (`--network-info`, KubeVirt's downward API format) and the VF itself
/// on this host: without either, or with a bad file, it is refused in one
/// line naming the field, the file or the device, before anything starts.
/// (This machine has no VF, so the run that would start is not tested.)
#[test]
fn sriov_run_is_refused_without_a_real_vf() {
    let y = format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n    devices:\n      interfaces:\n      - name: red\n        sriov: {{}}\n  networks:\n  - name: red\n    multus: {{networkName: red-net}}\n{}", volumes());
    assert_refused(
        &y,
        &[],
        "spec.domain.devices.interfaces[0].sriov: the host address of the SR-IOV VF is needed: pass --network-info FILE (KubeVirt's network-info format)",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("network-info");
    let f = file.to_str().unwrap();
    std::fs::write(
        &file,
        r#"{"interfaces":[{"network":"red","deviceInfo":{"type":"pci","pci":{"pci-address":"0000:fe:1f.7"}}}]}"#,
    )
    .unwrap();
    assert_refused(
        &y,
        &["--network-info", f],
        &format!("spec.domain.devices.interfaces[0].sriov: host PCI device 0000:fe:1f.7 (from {f}) does not exist on this host (/sys/bus/pci/devices/0000:fe:1f.7): running needs a real SR-IOV VF bound to vfio-pci"),
    );
    // A device that exists but is no VF bound to vfio-pci (the first PCI
    // device of this machine, e.g. its host bridge): refused up front, not
    // left to libvirt's start error (exit 1).
    let present = std::fs::read_dir("/sys/bus/pci/devices")
        .expect("/sys/bus/pci/devices")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|d| {
            std::fs::read_link(format!("/sys/bus/pci/devices/{d}/driver"))
                .map_or(true, |l| !l.ends_with("vfio-pci"))
        })
        .expect("a PCI device not bound to vfio-pci on this machine");
    std::fs::write(
        &file,
        format!(r#"{{"interfaces":[{{"network":"red","deviceInfo":{{"pci":{{"pci-address":"{present}"}}}}}}]}}"#),
    )
    .unwrap();
    let (code, line) = refuse(&y, &["--network-info", f]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.contains(&format!("spec.domain.devices.interfaces[0].sriov: host PCI device {present} (from {f}) is bound to"))
            && line.ends_with("not bound to vfio-pci: running needs a real SR-IOV VF bound to vfio-pci"),
        "{line}"
    );
    std::fs::write(&file, r#"{"interfaces":[{"network":"blue","deviceInfo":{"pci":{"pci-address":"0000:fe:1f.7"}}}]}"#).unwrap();
    assert_refused(
        &y,
        &["--network-info", f],
        &format!("spec.domain.devices.interfaces[0].sriov: {f}: no PCI address for SR-IOV network \"red\""),
    );
    std::fs::write(&file, "{\"interfaces\":[{\"network\":1}]}").unwrap();
    assert_refused(
        &y,
        &["--network-info", f],
        &format!("--network-info {f}: interfaces[0].network: invalid type: integer `1`"),
    );
    // The flag's file is checked whether or not the VMI has an SR-IOV
    // interface, as `convert` checks it (new-user trial: `run` started).
    let plain = format!(
        "{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n{}",
        volumes()
    );
    let missing = dir.path().join("nonexist");
    let m = missing.to_str().unwrap();
    assert_refused(
        &plain,
        &["--network-info", m],
        &format!("--network-info {m}: No such file or directory"),
    );
}

#[test]
fn host_block_devices_are_never_taken_for_a_pvc() {
    // /dev/vda is this machine's disk: a PVC named vda must not become it.
    let y = format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n    devices:\n      disks:\n      - name: vda\n        disk: {{bus: virtio}}\n  volumes:\n  - name: vda\n    persistentVolumeClaim: {{claimName: x}}\n");
    let (code, line) = refuse(&y, &["--no-disk"]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.contains("spec.volumes[0].persistentVolumeClaim: standalone mode has no mounted claims: pass --pvc vda=PATH"),
        "{line}"
    );
    // Asked for explicitly: a block device the host uses (the one holding
    // its root file system) is refused, never handed to the guest.
    let out = Command::new("findmnt")
        .args(["-n", "-o", "SOURCE", "/"])
        .output()
        .expect("findmnt (util-linux)");
    let root = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        std::fs::metadata(&root)
            .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type())),
        "the test needs / on a block device, found {root:?}"
    );
    let arg = format!("vda={root}");
    let (code, line) = refuse(&y, &["--no-disk", "--pvc", &arg]);
    assert_eq!(code, 2, "{line}");
    // EBUSY from the exclusive open; a host that denies opening its root
    // disk at all (EPERM, some sandboxes) refuses it as well.
    assert!(
        line.contains(&format!("--pvc {arg}: the block device is in use on this host (mounted or held); refusing to give it to a guest"))
            || line.contains(&format!("--pvc {arg}: Operation not permitted")),
        "{line}"
    );
}

#[test]
fn nul_in_free_text_is_refused_not_a_panic() {
    let y = format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n    firmware: {{serial: \"a\\u0000b\"}}\n{}", volumes());
    assert_refused(
        &y,
        &[],
        "spec.domain.firmware.serial: contains the character U+0000",
    );
}

#[test]
fn input_that_is_not_a_regular_file() {
    require_stack();
    let out = Command::new(launcher_bin())
        .args(["convert", "/dev/zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/dev/zero: not a regular file"));
}

#[test]
fn a_foreign_state_directory_is_never_emptied() {
    require_stack();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("precious"), b"keep me").unwrap();
    let vmi = dir.path().join("vmi.yaml");
    std::fs::write(
        &vmi,
        format!(
            "{HEAD}spec:\n  domain: {{memory: {{guest: 64Mi}}}}\n{}",
            volumes()
        ),
    )
    .unwrap();
    let out = Command::new(launcher_bin())
        .arg("run")
        .arg(&vmi)
        .args(["--use-emulation", "--state-dir"])
        .arg(dir.path())
        .arg("--container-disk")
        .arg(format!("containerdisk={}", guest_image().display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--state-dir: state directory")
            && err.contains("was not created by virt-launcher"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("precious")).unwrap(),
        b"keep me"
    );
}

/// Issue 19, reproduced against the binary: `--state-dir D` with
/// `D/.virt-launcher-state` a link to a root-owned file and `D/.lock` a
/// directory overwrote the file with the marker text; with the marker a
/// regular file and `.lock` a link, root created a file at the link's
/// target; a directory of another user was emptied and used. Each is
/// refused by flag (exit 2), the victims unchanged.
#[test]
fn issue19_planted_links_and_foreign_owners_in_the_state_directory() {
    require_stack();
    let dir = tempfile::tempdir().unwrap();
    let vmi = dir.path().join("vmi.yaml");
    std::fs::write(
        &vmi,
        format!(
            "{HEAD}spec:\n  domain: {{memory: {{guest: 64Mi}}}}\n{}",
            volumes()
        ),
    )
    .unwrap();
    let run = |state: &std::path::Path| {
        let out = Command::new(launcher_bin())
            .arg("run")
            .arg(&vmi)
            .args(["--use-emulation", "--state-dir"])
            .arg(state)
            .arg("--container-disk")
            .arg(format!("containerdisk={}", guest_image().display()))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--state-dir: "), "{err}");
        err
    };
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"root's data\n").unwrap();
    // The marker a link, the lock a directory.
    let s1 = dir.path().join("s1");
    std::fs::create_dir(&s1).unwrap();
    std::os::unix::fs::symlink(&victim, s1.join(".virt-launcher-state")).unwrap();
    std::fs::create_dir(s1.join(".lock")).unwrap();
    run(&s1);
    assert_eq!(std::fs::read(&victim).unwrap(), b"root's data\n");
    // The lock a link to where root would create a file.
    let s2 = dir.path().join("s2");
    std::fs::create_dir(&s2).unwrap();
    std::fs::write(s2.join(".virt-launcher-state"), b"x").unwrap();
    let target = dir.path().join("created-by-root");
    std::os::unix::fs::symlink(&target, s2.join(".lock")).unwrap();
    run(&s2);
    assert!(std::fs::symlink_metadata(&target).is_err());
    // Another user's directory, marked as a launcher's.
    let s3 = dir.path().join("s3");
    std::fs::create_dir(&s3).unwrap();
    std::fs::write(s3.join(".virt-launcher-state"), b"x").unwrap();
    std::fs::write(s3.join("theirs"), b"y").unwrap();
    std::os::unix::fs::chown(&s3, Some(65534), Some(65534)).unwrap();
    let err = run(&s3);
    assert!(err.contains("owned by uid 65534"), "{err}");
    assert!(s3.join("theirs").is_file(), "not emptied");
}

/// A container disk that is a qcow2 whose backing file is a host file: the
/// image is judged by `qemu-img info` inside the runtime (so libvirt has
/// started), refused by volume, and QEMU never opens the host file.
#[test]
fn container_disk_with_a_backing_file_on_the_host_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("evil.qcow2");
    crate::run::output_ok(
        Command::new("qemu-img")
            .args(["create", "-f", "qcow2", "-F", "raw", "-b", "/etc/hostname"])
            .arg(&img),
    );
    let y = format!(
        "{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n{}",
        volumes()
    );
    let arg = format!("containerdisk={}", img.display());
    let (code, line, _) = refuse_reporting_start(&y, &["--no-disk", "--container-disk", &arg]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("virt-launcher: spec.volumes[0].containerDisk"),
        "{line}"
    );
    assert!(line.contains("backing"), "{line}");
}

/// A spec for another architecture than the run's: input to correct (exit
/// 2, the flag named), not a host fault.
#[test]
fn spec_architecture_other_than_the_runs_is_refused_naming_the_flag() {
    assert_refused(
        &format!(
            "{HEAD}spec:\n  architecture: s390x\n  domain:\n    memory: {{guest: 64Mi}}\n{}",
            volumes()
        ),
        &[],
        "spec.architecture is s390x but this run is for amd64: pass --arch s390x",
    );
}

/// A claim directory or backend storage that holds other files (a typo
/// such as `/etc`) is refused before anything is written into it; a
/// duplicate or unknown `--pvc` is reported as such.
#[test]
fn claim_and_backend_storage_directories_with_other_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("precious"), b"x").unwrap();
    let before: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let pvc = format!(
        "{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n    devices: {{disks: [{{name: containerdisk}}, {{name: d}}]}}\n{}  - name: d\n    persistentVolumeClaim: {{claimName: c}}\n",
        volumes()
    );
    let arg = format!("d={},capacity=1Gi", dir.path().display());
    assert_refused(
        &pvc,
        &["--pvc", &arg],
        "holds precious, but may hold only disk.img, lost+found; refusing to use it",
    );
    let empty = tempfile::tempdir().unwrap();
    let twice = format!("d={},capacity=1Gi", empty.path().display());
    assert_refused(
        &pvc,
        &["--pvc", &arg, "--pvc", &twice],
        "--pvc d=... is given twice",
    );
    assert_refused(
        &pvc,
        &["--pvc", &twice, "--pvc", "other=/tmp"],
        "--pvc other=...: the VMI has no volume named \"other\"",
    );
    let tiny = format!("d={},capacity=1Ki", empty.path().display());
    assert_refused(
        &pvc,
        &["--pvc", &tiny],
        "--pvc d=...,capacity=1Ki: the size for volume d is too low, must be at least 1MiB",
    );
    let efi = format!(
        "{HEAD}spec:\n  domain:\n    memory: {{guest: 256Mi}}\n    firmware: {{bootloader: {{efi: {{secureBoot: false, persistent: true}}}}}}\n{}",
        volumes()
    );
    let bs = dir.path().to_str().unwrap().to_owned();
    assert_refused(
        &efi,
        &["--backend-storage", &bs],
        "holds precious, but may hold only nvram, swtpm, cbt, lost+found; refusing to use it",
    );
    let after: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(before, after, "the directory was written");
}

#[test]
fn bad_flag_values_are_one_line_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let vmi = dir.path().join("vmi.yaml");
    std::fs::write(&vmi, volumes()).unwrap();
    for (args, expect) in [
        (vec!["--pvc", "disk=/tmp/x,capacity=-5Gi"], "--pvc"),
        (
            vec!["--pvc", "disk=/tmp/x,capacity=1e30"],
            "1e30 is too large",
        ),
        (
            vec!["--grace-period-seconds", "soon"],
            "--grace-period-seconds",
        ),
        (vec!["--no-such-flag"], "--no-such-flag"),
    ] {
        let out = Command::new(launcher_bin())
            .arg("run")
            .arg(&vmi)
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: not one line:\n{err}");
        assert!(err.starts_with("virt-launcher: "), "{err}");
        assert!(
            err.contains(expect),
            "{args:?}: expected {expect:?} in {err}"
        );
    }
    let help = Command::new(launcher_bin())
        .args(["run", "--help"])
        .output()
        .unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--pvc"));
}

/// Network values phase 2 reads (CIDRs, `dhcpOptions`, `ports`) are
/// refused by `convert` as by `run`, before anything starts, naming the
/// field (a new-user trial found `convert` accepting them).
#[test]
fn network_values_are_refused_by_convert_and_run_alike() {
    let iface = |extra: &str, net: &str| {
        format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n    devices:\n      interfaces:\n      - name: default\n        masquerade: {{}}\n{extra}  networks:\n  - name: default\n    pod: {{{net}}}\n{}", volumes())
    };
    for (yaml, expect) in [
        (
            iface("", "vmNetworkCIDR: garbage"),
            "spec.networks[name=default].pod: vmNetworkCIDR \"garbage\" is not an IPv4 CIDR",
        ),
        (
            iface(
                "        dhcpOptions: {privateOptions: [{option: 223, value: x}]}\n",
                "",
            ),
            "spec.domain.devices.interfaces[0].dhcpOptions: ",
        ),
        (
            iface("        dhcpOptions: {ntpServers: [pool.ntp.org]}\n", ""),
            "spec.domain.devices.interfaces[0].dhcpOptions: ",
        ),
        (
            iface("        ports: [{port: 80, protocol: SCTP}]\n", ""),
            "spec.domain.devices.interfaces[0].ports[0].protocol: \"SCTP\" is not TCP or UDP",
        ),
        (
            iface(
                "        ports: [{port: 80}, {port: 80, protocol: tcp}]\n",
                "",
            ),
            "spec.domain.devices.interfaces[0].ports[1].port: 80/TCP is listed twice",
        ),
        (
            iface("        ports: [{port: 65536}]\n", ""),
            "spec.domain.devices.interfaces[0].ports[0].port: 65536 is not a port number (1-65535)",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let vmi = dir.path().join("vmi.yaml");
        std::fs::write(&vmi, &yaml).unwrap();
        let out = Command::new(launcher_bin())
            .arg("convert")
            .arg(&vmi)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "convert: {err}");
        assert!(
            err.contains(expect),
            "convert: expected {expect:?} in {err}"
        );
        assert_refused(&yaml, &["--setup-pod-network"], expect);
    }
}

/// Pod mode's VMI from `STANDALONE_VMI`: an error names the variable
/// before the field (or alone, for a document that does not parse), exit
/// 2, before anything starts.
#[test]
fn a_bad_standalone_vmi_variable_is_named_in_the_error() {
    require_stack();
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("{\"bad", "virt-launcher: STANDALONE_VMI: malformed document"),
        (
            "{\"apiVersion\":\"kubevirt.io/v1\",\"kind\":\"VirtualMachineInstance\",\"metadata\":{\"name\":\"bad\"},\"spec\":{\"domain\":{\"devices\":{},\"cpu\":[3,2]}}}",
            "virt-launcher: STANDALONE_VMI: spec.domain.cpu: is a list where an object belongs",
        ),
    ];
    for (doc, want) in cases {
        let state = dir.path().join("state");
        let out = Command::new(launcher_bin())
            .env("STANDALONE_VMI", doc)
            .args([
                "--uid",
                "bad-standalone-vmi",
                "--use-emulation",
                "--state-dir",
            ])
            .arg(&state)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or("");
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(last.starts_with(want), "{last}");
        assert!(!state.exists(), "refused input made the state directory");
    }
}

/// Pod mode started by hand outside a pod (new-user trial, issue 19): in
/// the host's mount namespace it refuses at once; in a mount namespace of
/// its own without the pod's volume mounts it refuses naming the first
/// missing one and writes nothing below `/run` (a fresh tmpfs there, listed
/// before and after the launcher). Exit 2 both times, no state directory.
#[test]
fn pod_mode_outside_a_pod_is_refused_and_writes_nothing() {
    require_stack();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let vmi = format!("{HEAD}spec: {{domain: {{devices: {{}}, memory: {{guest: 64Mi}}}}}}\n");
    let pod_flags = |c: &mut Command| {
        c.env("STANDALONE_VMI", &vmi)
            .args(["--uid", "outside-a-pod", "--use-emulation", "--state-dir"])
            .arg(&state);
    };
    let mut host = Command::new(launcher_bin());
    pod_flags(&mut host);
    let out = host.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.lines().last().unwrap_or("").starts_with(
            "virt-launcher: pod mode: the launcher runs in the host's mount namespace"
        ),
        "{stderr}"
    );
    assert!(!state.exists(), "the refusal made the state directory");

    // Own mount namespace, an empty /run, the share directory mounted but
    // not the private one.
    let script = "set -e; mount --make-rprivate /; mount -t tmpfs tmpfs /run; \
        mkdir -p /run/kubevirt; mount -t tmpfs tmpfs /run/kubevirt; \
        before=$(find /run -mindepth 1 | sort); \
        rc=0; \"$@\" || rc=$?; echo \"rc=$rc\"; \
        after=$(find /run -mindepth 1 | sort); \
        if [ \"$before\" = \"$after\" ]; then echo unchanged; else echo \"$after\"; fi";
    let mut sandboxed = Command::new("unshare");
    sandboxed
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(launcher_bin());
    pod_flags(&mut sandboxed);
    let out = sandboxed.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout, "rc=2\nunchanged\n", "{stderr}");
    assert!(
        stderr.lines().last().unwrap_or("").starts_with(
            "virt-launcher: /var/run/kubevirt-private: /var/run/kubevirt-private cannot be examined"
        ),
        "{stderr}"
    );
    assert!(!state.exists(), "the refusal made the state directory");
}

/// `pod-network-phase1` (the stand-in for virt-handler's network phase 1)
/// refuses the host's network namespace; in a namespace where PID 1's
/// cannot be read (a user namespace, as some sandboxes are) it cannot tell,
/// says so in a warning naming the file, and checks the links alone (a
/// fresh namespace has only `lo`: the VMI without interfaces passes).
#[test]
fn pod_network_phase1_refuses_the_hosts_namespace_and_warns_when_it_cannot_tell() {
    require_stack();
    let dir = tempfile::tempdir().unwrap();
    let vmi = dir.path().join("vmi.yaml");
    std::fs::write(
        &vmi,
        format!("{HEAD}spec:\n  domain:\n    devices: {{autoattachPodInterface: false}}\n"),
    )
    .unwrap();
    let out = Command::new(launcher_bin())
        .arg("pod-network-phase1")
        .arg(&vmi)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    // Where this process cannot read PID 1's namespace either (this host
    // may itself be such a sandbox), the host's links refuse it.
    let why = if std::fs::metadata("/proc/1/ns/net").is_ok() {
        "pod-network-phase1: this is the host's network namespace"
    } else {
        "pod-network-phase1: the network namespace already has links"
    };
    assert!(stderr.contains(why), "{stderr}");
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "--net"])
        .arg(launcher_bin())
        .arg("pod-network-phase1")
        .arg(&vmi)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("cannot tell whether this is the host's network namespace"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("/proc/1/ns/net: "), "{stderr}");
}
