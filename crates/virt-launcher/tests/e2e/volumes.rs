//! Volumes a real guest reads: cloud-init NoCloud and config drive ISOs
//! (the test guest's init mounts them, takes its hostname from the
//! meta-data and runs `#!` user-data, whose output reaches the serial
//! console), and config disks, which the user-data mounts and prints.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};

use crate::bad_input::{assert_refused, assert_refused_late};
use crate::harness::{give_to_qemu_user, repo_root, Launcher, Opts, BOOT_TIMEOUT};

/// The test guest with one more disk, `extra_disk` (YAML list item), and
/// one more volume, `extra_volume`.
fn vmi(name: &str, extra_disk: &str, extra_volume: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: {name}
  namespace: e2e
spec:
  terminationGracePeriodSeconds: 5
  domain:
    firmware: {{uuid: 5f1c3a44-8d2e-4b6f-9a10-0c2d3e4f5a6b}}
    memory: {{guest: 128Mi}}
    devices:
      disks:
      - name: containerdisk
        bootOrder: 1
        disk: {{bus: virtio}}
{extra_disk}
  volumes:
  - name: containerdisk
    containerDisk: {{image: test-guest}}
{extra_volume}"
    )
}

/// Indents a `#!/bin/sh` script as a YAML block scalar under `userData: |`.
fn block(script: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    script
        .lines()
        .map(|l| format!("{pad}{l}\n"))
        .collect::<String>()
}

fn shutdown(mut l: Launcher) {
    l.stop(std::time::Duration::from_secs(120));
}

#[test]
fn nocloud_user_data_runs_and_meta_data_sets_the_hostname() {
    let script = "#!/bin/sh\necho \"NOCLOUD-MARKER host=$(hostname) iid=$(cat /run/instance-id) src=$(cat /run/cidata/source)\"\necho 'UTF8-MARKER Grüße – 日本語 ✓'\necho \"META $(cat /run/cidata/meta-data)\"\n";
    let y = vmi(
        "ci-nocloud.example",
        "      - name: cloudinit\n        disk: {bus: virtio}",
        &format!(
            "  - name: cloudinit\n    cloudInitNoCloud:\n      userData: |\n{}",
            block(script, 8)
        ),
    )
    .replace(
        "  terminationGracePeriodSeconds: 5\n",
        "  terminationGracePeriodSeconds: 5\n  accessCredentials:\n  - sshPublicKey:\n      source: {secret: {secretName: my-keys}}\n      propagationMethod: {noCloud: {}}\n",
    );
    // The access credential's secret: one public key.
    let keys = tempfile::tempdir().unwrap();
    fs::write(
        keys.path().join("key1"),
        "ssh-ed25519 AAAAC3NzaE2E e2e@test",
    )
    .unwrap();
    let arg = format!("my-keys={}", keys.path().display());
    let (l, serial) = Launcher::boot(&y, &["--access-credential", &arg]);
    assert!(
        serial.contains(
            "NOCLOUD-MARKER host=ci-nocloud iid=5f1c3a44-8d2e-4b6f-9a10-0c2d3e4f5a6b src=nocloud"
        ),
        "{serial}"
    );
    assert!(serial.contains("UTF8-MARKER Grüße – 日本語 ✓"), "{serial}");
    assert!(serial.contains("GUEST-USERDATA-DONE exit=0"), "{serial}");
    assert!(
        serial.contains("GUEST-READY hostname=ci-nocloud "),
        "{serial}"
    );
    let xml = l.domain_xml();
    assert!(
        xml.contains(
            "/var/run/kubevirt-ephemeral-disks/cloud-init-data/e2e/ci-nocloud.example/noCloud.iso"
        ),
        "{xml}"
    );
    // The data files are gone once the ISO is built (as in KubeVirt).
    let dir = l
        .state
        .join("ephemeral/cloud-init-data/e2e/ci-nocloud.example");
    assert!(dir.join("noCloud.iso").is_file());
    assert!(!dir.join("data").exists());
    shutdown(l);
}

#[test]
fn config_drive_user_data_runs_and_meta_data_sets_the_hostname() {
    let script = "#!/bin/sh\necho \"CONFIGDRIVE-MARKER host=$(hostname) src=$(cat /run/cidata/source)\"\ncat /run/cidata/meta_data.json; echo\n";
    let y = vmi(
        "ci-configdrive",
        "      - name: cloudinit\n        disk: {bus: virtio}",
        &format!(
            "  - name: cloudinit\n    cloudInitConfigDrive:\n      userDataBase64: {}\n",
            base64_std(script.as_bytes())
        ),
    )
    .replace(
        "  terminationGracePeriodSeconds: 5\n",
        "  terminationGracePeriodSeconds: 5\n  hostname: drive-host\n",
    );
    let (l, serial) = Launcher::boot(&y, &[]);
    assert!(
        serial.contains("CONFIGDRIVE-MARKER host=drive-host src=configdrive"),
        "{serial}"
    );
    assert!(
        serial.contains(r#"{"instance_id":"ci-configdrive.e2e","hostname":"drive-host","uuid":"5f1c3a44-8d2e-4b6f-9a10-0c2d3e4f5a6b"}"#),
        "{serial}"
    );
    assert!(
        serial.contains("GUEST-READY hostname=drive-host "),
        "{serial}"
    );
    assert!(l
        .state
        .join("ephemeral/cloud-init-data/e2e/ci-configdrive/configdrive.iso")
        .is_file());
    shutdown(l);
}

/// Standard base64 (the test's own encoder, checked against `base64`).
fn base64_std(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn kubevirt_vmi_nocloud_example_boots_with_the_test_guest() {
    let y = fs::read_to_string(repo_root().join("tests/data/examples/vmi-nocloud.yaml")).unwrap();
    let (l, serial) = Launcher::boot(&y, &[]);
    assert!(
        serial.contains("printed from cloud-init userdata"),
        "{serial}"
    );
    assert!(serial.contains("GUEST-USERDATA-DONE exit=0"), "{serial}");
    assert!(
        serial.contains("GUEST-READY hostname=vmi-nocloud "),
        "{serial}"
    );
    shutdown(l);
}

#[test]
fn config_map_disk_is_read_by_the_guest_with_its_label_and_modes() {
    config_map_disk_is_read(false);
}

#[test]
fn pod_mode_reads_a_config_map_that_kubelet_mounted_in_the_private_directory() {
    // In a pod, kubelet mounts the ConfigMap under /var/run/kubevirt-private;
    // the launcher must see it there, not hide it behind its own state.
    config_map_disk_is_read(true);
}

/// A ConfigMap directory as kubelet lays it out: the files (name, content,
/// mode) in a timestamped directory, `..data` linking to it, and a link
/// per file through `..data`.
fn kubelet_config_map(files: &[(&str, &str, u32)]) -> tempfile::TempDir {
    let src = tempfile::tempdir().unwrap();
    let ts = src.path().join("..2026_11_30_12_00_00.1");
    fs::create_dir(&ts).unwrap();
    for (name, content, mode) in files {
        fs::write(ts.join(name), content).unwrap();
        fs::set_permissions(ts.join(name), fs::Permissions::from_mode(*mode)).unwrap();
    }
    symlink("..2026_11_30_12_00_00.1", src.path().join("..data")).unwrap();
    for (name, _, _) in files {
        symlink(format!("..data/{name}"), src.path().join(name)).unwrap();
    }
    // kubelet's fsGroup: a non-root pod's launcher reads them as 107.
    give_to_qemu_user(src.path());
    src
}

/// The test guest with a config disk `appcfg` (a configMap labelled
/// `label`) and cloud-init user-data `script` that reads it.
fn config_disk_vmi(name: &str, label: &str, script: &str) -> String {
    vmi(
        name,
        "      - name: cloudinit\n        disk: {bus: virtio}\n      - name: appcfg\n        disk: {bus: virtio}",
        &format!(
            "  - name: cloudinit\n    cloudInitNoCloud:\n      userData: |\n{}  - name: appcfg\n    configMap: {{name: app, volumeLabel: {label}}}\n",
            block(script, 8)
        ),
    )
}

fn config_map_disk_is_read(pod: bool) {
    let src = kubelet_config_map(&[
        ("app.conf", "colour=blau ✓\n", 0o640),
        ("run.sh", "#!/bin/sh\necho from-config-map\n", 0o755),
    ]);
    let ts = src.path().join("..2026_11_30_12_00_00.1");

    let script = "#!/bin/sh\nmkdir -p /cfg\ndev=$(findfs LABEL=APPCFG) || { echo CFG-NOT-FOUND; exit 1; }\nmount -t iso9660 -o ro \"$dev\" /cfg || exit 1\necho \"CFG-CONTENT $(cat /cfg/app.conf)\"\necho \"CFG-MODES $(stat -c %a /cfg/app.conf) $(stat -c %a /cfg/run.sh)\"\necho \"CFG-RUN $(/cfg/run.sh)\"\n";
    let y = config_disk_vmi("cfg-disk", "APPCFG", script);
    let arg = format!("appcfg={}", src.path().display());
    let mut l = if pod {
        Launcher::start_wrapped(
            &y,
            &Opts {
                pod: true,
                pod_mounts: &[("config-map/appcfg", src.path())],
                ..Opts::default()
            },
            crate::harness::POD_WRAPPER,
        )
    } else {
        Launcher::start(
            &y,
            &Opts {
                args: &["--config-volume", &arg],
                ..Opts::default()
            },
        )
    };
    let serial = l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    assert!(serial.contains("CFG-CONTENT colour=blau ✓"), "{serial}");
    assert!(serial.contains("CFG-MODES 640 755"), "{serial}");
    assert!(serial.contains("CFG-RUN from-config-map"), "{serial}");
    assert!(serial.contains("GUEST-USERDATA-DONE exit=0"), "{serial}");
    let xml = l.domain_xml();
    assert!(
        xml.contains("/var/run/kubevirt-private/config-map-disks/appcfg.iso"),
        "{xml}"
    );
    shutdown(l);
    // kubelet's mount was only read.
    assert_eq!(
        fs::read_to_string(ts.join("app.conf")).unwrap(),
        "colour=blau ✓\n"
    );
}

const BAD_HEAD: &str = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: bad, namespace: e2e}\nspec:\n  domain:\n    memory: {guest: 64Mi}\n    devices:\n      disks:\n      - {name: containerdisk}\n      - {name: v}\n  volumes:\n  - name: containerdisk\n    containerDisk: {image: x}\n";

#[test]
fn bad_cloud_init_and_config_volumes_are_refused_by_field() {
    assert_refused(
        &format!("{BAD_HEAD}  - name: v\n    cloudInitNoCloud: {{userDataBase64: I2Nsb3VkLWNvbmZpZwo_}}\n"),
        &[],
        "spec.volumes[1].cloudInitNoCloud.userDataBase64: is not valid base64",
    );
    assert_refused(
        &format!(
            "{BAD_HEAD}  - name: v\n    cloudInitNoCloud: {{userData: {}}}\n",
            "x".repeat(3000)
        ),
        &[],
        "spec.volumes[1].cloudInitNoCloud.userData: 3000 bytes exceed KubeVirt's 2048-byte limit",
    );
    assert_refused(
        &format!("{BAD_HEAD}  - name: v\n    cloudInitNoCloud: {{userData: \"\"}}\n"),
        &[],
        "spec.volumes[1].cloudInitNoCloud: userDataBase64, userData, networkDataBase64 or networkData is required",
    );
    assert_refused(
        &format!("{BAD_HEAD}  - name: v\n    cloudInitConfigDrive: {{userDataSecretRef: {{name: s}}}}\n"),
        &[],
        "spec.volumes[1].cloudInitConfigDrive.userDataSecretRef: standalone mode has no mounted secrets: pass --config-volume v=DIR",
    );
    assert_refused(
        &format!("{BAD_HEAD}  - name: v\n    secret: {{secretName: s}}\n"),
        &[],
        "spec.volumes[1].secret: standalone mode has no mounted secret volumes: pass --config-volume v=DIR",
    );
    assert_refused(
        &format!("{BAD_HEAD}  - name: v\n    configMap: {{name: c}}\n"),
        &["--config-volume", "containerdisk=/tmp"],
        "--config-volume containerdisk=...: volume \"containerdisk\" is not a configMap, secret, downwardAPI, serviceAccount, sysprep or cloud-init volume",
    );
    assert_refused(
        &format!(
            "{BAD_HEAD}  - name: v\n    ephemeral: {{persistentVolumeClaim: {{claimName: c}}}}\n"
        ),
        &[],
        "spec.volumes[1].ephemeral: standalone mode has no mounted claims: pass --pvc v=PATH, a raw disk image, a claim directory or a block device",
    );
    assert_refused(
        &format!(
            "{BAD_HEAD}  - name: v\n    ephemeral: {{persistentVolumeClaim: {{claimName: c}}}}\n"
        ),
        &["--pvc", "v=/dev/null"],
        "--pvc v=/dev/null: not a raw image file, a claim directory or a block device",
    );
    assert_refused(
        &format!("{BAD_HEAD}  - name: v\n    configMap: {{name: c}}\n"),
        &["--config-volume", "../../etc=/tmp"],
        "--config-volume ../../etc=...: the VMI has no volume named",
    );
    assert_refused(
        &format!("{BAD_HEAD}  - name: v\n    cloudInitNoCloud: {{userData: x}}\n  accessCredentials:\n  - sshPublicKey: {{source: {{secret: {{secretName: k}}}}, propagationMethod: {{noCloud: {{}}}}}}\n"),
        &[],
        "spec.accessCredentials[0].sshPublicKey.source.secret: standalone mode has no mounted secrets: pass --access-credential k=DIR",
    );
    // Path traversal in a config volume's name: refused before any path is built.
    assert_refused(
        &format!("{BAD_HEAD}  - name: ../../etc\n    configMap: {{name: c}}\n")
            .replace("{name: v}", "{name: ../../etc}"),
        &["--config-volume", "../../etc=/tmp"],
        "spec.volumes[1].name: \"../../etc\" must be",
    );
    // A link out of the directory: refused before libvirt starts (exit 2,
    // the field named, no ISO, no state left).
    let dir = tempfile::tempdir().unwrap();
    symlink("/etc/shadow", dir.path().join("shadow")).unwrap();
    let arg = format!("v={}", dir.path().display());
    assert_refused(
        &format!("{BAD_HEAD}  - name: v\n    configMap: {{name: c}}\n"),
        &["--config-volume", &arg],
        "outside the volume's directory",
    );
    // Sysprep: one source, and an answer file in it.
    assert_refused(
        &format!("{BAD_HEAD}  - name: v\n    sysprep: {{}}\n"),
        &[],
        "spec.volumes[1].sysprep: exactly one of configMap or secret is required",
    );
    let answers = tempfile::tempdir().unwrap();
    fs::write(answers.path().join("notes.txt"), "no answer file").unwrap();
    let arg = format!("v={}", answers.path().display());
    assert_refused(
        &format!("{BAD_HEAD}  - name: v\n    sysprep: {{secret: {{name: s}}}}\n"),
        &["--config-volume", &arg],
        "spec.volumes[1].sysprep: Sysprep drive should contain autounattend.xml or unattend.xml but neither were found.",
    );
}

#[test]
fn vfat_config_disk_is_read_by_the_guest() {
    let src = kubelet_config_map(&[
        ("app.conf", "colour=grün ✓\n", 0o644),
        ("grüße.txt", "umlaut-name\n", 0o644),
    ]);

    let script = "#!/bin/sh\nmkdir -p /cfg\ndev=$(findfs LABEL=FATCFG) || { echo FAT-NOT-FOUND; exit 1; }\nmount -t vfat -o ro,iocharset=utf8 \"$dev\" /cfg || exit 1\necho \"FAT-CONTENT $(cat /cfg/app.conf)\"\necho \"FAT-NAME $(cat /cfg/grüße.txt)\"\nfor f in /cfg/*; do echo \"FAT-FILE ${f#/cfg/}\"; done\n";
    let y = config_disk_vmi("cfg-vfat", "FATCFG", script);
    let arg = format!("appcfg={}", src.path().display());
    let (l, serial) = Launcher::boot(&y, &["--config-volume", &arg, "--config-disk-fs", "vfat"]);
    assert!(serial.contains("FAT-CONTENT colour=grün ✓"), "{serial}");
    assert!(serial.contains("FAT-NAME umlaut-name"), "{serial}");
    // The name as listed, not only found by a case-insensitive lookup.
    assert!(serial.contains("FAT-FILE grüße.txt\r\n"), "{serial}");
    assert!(serial.contains("FAT-FILE app.conf\r\n"), "{serial}");
    assert!(serial.contains("GUEST-USERDATA-DONE exit=0"), "{serial}");
    shutdown(l);
}

/// The test guest with one more disk, the volume `volume` (its source
/// `source`, YAML in flow style) with virtio serial `serial`, and user-data
/// running `body` with `$d` set to that disk's device node.
pub(crate) fn disk_vmi(name: &str, volume: &str, serial: &str, source: &str, body: &str) -> String {
    vmi(
        name,
        &format!("      - name: cloudinit\n        disk: {{bus: virtio}}\n      - name: {volume}\n        serial: {serial}\n        disk: {{bus: virtio}}"),
        &format!(
            "  - name: cloudinit\n    cloudInitNoCloud:\n      userData: |\n{}  - name: {volume}\n    {source}\n",
            block(&on_disk_with_serial(serial, body), 8)
        ),
    )
}

/// User-data that finds the disk whose virtio serial is `SERIAL` and runs
/// `body` with `$d` set to its device node.
fn on_disk_with_serial(serial: &str, body: &str) -> String {
    format!(
        "#!/bin/sh\nd=\nfor s in /sys/block/vd*/serial; do [ \"$(cat $s)\" = {serial} ] && d=/dev/$(basename $(dirname $s)); done\n[ -n \"$d\" ] || {{ echo DISK-NOT-FOUND; exit 1; }}\n{body}\n"
    )
}

fn sha256(p: &std::path::Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(p)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn ephemeral_volume_writes_go_to_the_overlay_never_to_the_claim() {
    let dir = tempfile::tempdir().unwrap();
    let claim = dir.path().join("claim.img");
    let mut content = b"CLAIM-ORIGINAL-DATA".to_vec();
    content.resize(8 << 20, 0);
    fs::write(&claim, &content).unwrap();
    let before = sha256(&claim);
    let body = "head -c 19 $d; echo\nprintf EPHEMERAL-WRITE-OK | dd of=$d conv=notrunc 2>/dev/null; sync\necho \"EPH-READBACK $(head -c 18 $d)\"";
    let y = disk_vmi(
        "eph",
        "scratch",
        "ephdisk",
        "ephemeral:\n      persistentVolumeClaim: {claimName: my-claim}",
        body,
    );
    let arg = format!("scratch={}", claim.display());
    let (l, serial) = Launcher::boot(&y, &["--pvc", &arg]);
    assert!(serial.contains("CLAIM-ORIGINAL-DATA"), "{serial}");
    assert!(
        serial.contains("EPH-READBACK EPHEMERAL-WRITE-OK"),
        "{serial}"
    );
    assert!(serial.contains("GUEST-USERDATA-DONE exit=0"), "{serial}");
    let xml = l.domain_xml();
    assert!(
        xml.contains("/var/run/kubevirt-ephemeral-disks/disk-data/scratch/disk.qcow2"),
        "{xml}"
    );
    assert!(
        xml.contains("/var/run/kubevirt-private/vmi-disks/scratch/disk.img"),
        "{xml}"
    );
    shutdown(l);
    assert_eq!(sha256(&claim), before, "the claim was written");
}

#[test]
fn pvc_writes_survive_a_launcher_restart() {
    let dir = tempfile::tempdir().unwrap();
    let claim = dir.path().join("pvc.img");
    fs::write(&claim, vec![0u8; 8 << 20]).unwrap();
    give_to_qemu_user(&claim);
    let body = "if [ \"$(head -c 16 $d)\" = PVC-PERSIST-MARK ]; then echo PVC-FOUND-MARK; else printf PVC-PERSIST-MARK | dd of=$d conv=notrunc 2>/dev/null; sync; echo PVC-WROTE-MARK; fi";
    let y = disk_vmi(
        "pvc",
        "data",
        "pvcdisk",
        "persistentVolumeClaim: {claimName: my-claim}",
        body,
    );
    let arg = format!("data={}", claim.display());
    let opts = Opts {
        args: &["--pvc", &arg],
        ..Opts::default()
    };
    let mut first = Launcher::start(&y, &opts);
    let serial = first.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    assert!(serial.contains("PVC-WROTE-MARK"), "{serial}");
    shutdown(first);
    assert_eq!(&fs::read(&claim).unwrap()[..16], b"PVC-PERSIST-MARK");
    let mut second = Launcher::start(&y, &opts);
    let serial = second.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    assert!(serial.contains("PVC-FOUND-MARK"), "{serial}");
    shutdown(second);
}

/// Boots KubeVirt example `yaml` with no container disk and `args`; checks
/// the guest is up and that libvirt's disk source is `source`.
fn boots_from(yaml: &str, args: &[&str], source: &str) {
    let mut l = Launcher::start(
        yaml,
        &Opts {
            container_disks: &[],
            args,
            ..Opts::default()
        },
    );
    let serial = l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    assert!(serial.contains("GUEST-READY hostname="), "{serial}");
    let xml = l.domain_xml();
    assert!(xml.contains(source), "{xml}");
    shutdown(l);
}

#[test]
fn kubevirt_vmi_pvc_example_boots_from_a_claim_image() {
    let dir = tempfile::tempdir().unwrap();
    let claim = dir.path().join("disk-alpine.img");
    fs::copy(crate::harness::guest_image(), &claim).unwrap();
    give_to_qemu_user(&claim);
    let y = fs::read_to_string(repo_root().join("tests/data/examples/vmi-pvc.yaml")).unwrap();
    let arg = format!("pvcdisk={}", claim.display());
    boots_from(
        &y,
        &["--pvc", &arg],
        "/var/run/kubevirt-private/vmi-disks/pvcdisk/disk.img",
    );
}

/// KubeVirt's host-disk example boots from the image at its host path,
/// used as it is; a second host disk of type DiskOrCreate, whose file does
/// not exist yet, is created at its declared path with its capacity, and
/// outlives the VM (one boot for both kinds).
#[test]
fn kubevirt_vmi_host_disk_example_boots_from_the_file_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let len = fs::copy(crate::harness::guest_image(), &img).unwrap();
    give_to_qemu_user(dir.path());
    let host = tempfile::tempdir().unwrap();
    give_to_qemu_user(host.path());
    let created = host.path().join("data.img");
    let y = fs::read_to_string(repo_root().join("tests/data/examples/vmi-host-disk.yaml"))
        .unwrap()
        .replace("/var/data/disk.img", img.to_str().unwrap())
        .replace(
            "        name: host-disk\n",
            "        name: host-disk\n      - disk:\n          bus: virtio\n        name: scratch\n",
        )
        .replace(
            "      type: DiskOrCreate\n    name: host-disk\n",
            &format!(
                "      type: DiskOrCreate\n    name: host-disk\n  - name: scratch\n    hostDisk: {{path: {}, type: DiskOrCreate, capacity: 32Mi}}\n",
                created.display()
            ),
        );
    assert!(y.contains("name: scratch\n    hostDisk"), "{y}");
    let mut l = Launcher::start(
        &y,
        &Opts {
            container_disks: &[],
            ..Opts::default()
        },
    );
    let serial = l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    assert!(serial.contains("GUEST-READY hostname="), "{serial}");
    let xml = l.domain_xml();
    assert!(
        xml.contains("/var/run/kubevirt-private/vmi-disks/host-disk/disk.img"),
        "{xml}"
    );
    assert!(
        xml.contains("/var/run/kubevirt-private/vmi-disks/scratch/data.img"),
        "{xml}"
    );
    assert_eq!(
        fs::metadata(&created).unwrap().len(),
        32 << 20,
        "created at the declared host path"
    );
    shutdown(l);
    // An existing image is used as it is: DiskOrCreate never resizes it.
    assert_eq!(fs::metadata(&img).unwrap().len(), len);
    assert!(created.is_file(), "a host disk outlives the VM");
}

/// Sparse? The allocated bytes of `p`.
fn allocated(p: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(p).unwrap().blocks() * 512
}

/// The `<disk>` element of the domain XML whose source mentions `needle`.
fn disk_xml<'a>(xml: &'a str, needle: &str) -> &'a str {
    xml.split("<disk ")
        .skip(1)
        .map(|d| d.split("</disk>").next().unwrap())
        .find(|d| d.contains(needle))
        .unwrap_or_else(|| panic!("no disk with {needle} in\n{xml}"))
}

#[test]
fn filesystem_claim_directory_gets_a_sparse_disk_img_that_expand_disks_grows() {
    let claim = tempfile::tempdir().unwrap();
    give_to_qemu_user(claim.path());
    // The guest prints the disk's size in 512-byte sectors and keeps a mark.
    let body = "echo \"CLAIM-SECTORS $(cat /sys/block/$(basename $d)/size)\"\nif [ \"$(head -c 15 $d)\" = CLAIM-DIR-MARK1 ]; then echo CLAIM-FOUND-MARK; else printf CLAIM-DIR-MARK1 | dd of=$d conv=notrunc 2>/dev/null; sync; echo CLAIM-WROTE-MARK; fi";
    let y = disk_vmi(
        "pvcdir",
        "data",
        "claimdir",
        "persistentVolumeClaim: {claimName: my-claim}",
        body,
    );
    let img = claim.path().join("disk.img");
    // First start: no disk.img; the launcher creates it, 64 MiB, sparse.
    let arg = format!("data={},capacity=64Mi", claim.path().display());
    let (l, serial) = Launcher::boot(&y, &["--pvc", &arg]);
    assert!(serial.contains("CLAIM-SECTORS 131072\r\n"), "{serial}");
    assert!(serial.contains("CLAIM-WROTE-MARK"), "{serial}");
    let xml = l.domain_xml();
    let d = disk_xml(&xml, "/var/run/kubevirt-private/vmi-disks/data/disk.img");
    assert!(
        d.contains("type='file'") && d.contains("discard='unmap'"),
        "{d}"
    );
    shutdown(l);
    assert_eq!(fs::metadata(&img).unwrap().len(), 64 << 20);
    assert!(allocated(&img) < 8 << 20, "not sparse: {}", allocated(&img));
    assert_eq!(&fs::read(&img).unwrap()[..15], b"CLAIM-DIR-MARK1");
    let names: Vec<_> = fs::read_dir(claim.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["disk.img"], "only the image is in the claim");

    // The claim grew to 128 Mi with 25 % file system overhead, and is
    // preallocated: with ExpandDisks the image grows to 96 MiB before the
    // domain starts, the guest's data stays, and the disk has no discard.
    let arg = format!(
        "data={},capacity=128Mi,filesystem-overhead=0.25,preallocated",
        claim.path().display()
    );
    let (l, serial) = Launcher::boot(&y, &["--pvc", &arg, "--expand-disks"]);
    assert!(serial.contains("CLAIM-SECTORS 196608\r\n"), "{serial}");
    assert!(serial.contains("CLAIM-FOUND-MARK"), "{serial}");
    let xml = l.domain_xml();
    let d = disk_xml(&xml, "/var/run/kubevirt-private/vmi-disks/data/disk.img");
    assert!(!d.contains("discard="), "{d}");
    shutdown(l);
    assert_eq!(fs::metadata(&img).unwrap().len(), 96 << 20);
}

#[test]
fn block_mode_claim_on_a_loop_device_is_read_and_written_by_the_guest() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("block-claim.img");
    let mut content = b"BLOCK-CLAIM-ORIG".to_vec();
    content.resize(16 << 20, 0);
    fs::write(&backing, &content).unwrap();
    let dev = crate::harness::LoopDevice::on(&backing);
    let body = "echo \"BLK-READ $(head -c 16 $d) sectors=$(cat /sys/block/$(basename $d)/size)\"\nprintf BLOCK-GUEST-WROTE | dd of=$d bs=512 seek=2048 conv=notrunc,fsync 2>/dev/null\necho \"BLK-READBACK $(dd if=$d bs=512 skip=2048 count=1 2>/dev/null | head -c 17)\"";
    let y = disk_vmi(
        "pvcblock",
        "blockclaim",
        "blockdisk",
        "persistentVolumeClaim: {claimName: my-block-claim}",
        body,
    );
    let host_node = std::path::Path::new("/dev/blockclaim");
    assert!(!host_node.exists());
    let arg = format!("blockclaim={}", dev.0);
    let (l, serial) = Launcher::boot(&y, &["--pvc", &arg]);
    assert!(
        serial.contains("BLK-READ BLOCK-CLAIM-ORIG sectors=32768\r\n"),
        "{serial}"
    );
    assert!(
        serial.contains("BLK-READBACK BLOCK-GUEST-WROTE"),
        "{serial}"
    );
    let xml = l.domain_xml();
    let d = disk_xml(&xml, "/dev/blockclaim");
    assert!(d.starts_with("type='block'"), "{d}");
    assert!(d.contains("<source dev='/dev/blockclaim'"), "{d}");
    assert!(!host_node.exists(), "the host's /dev was written");
    shutdown(l);
    drop(dev);
    let data = fs::read(&backing).unwrap();
    assert_eq!(&data[..16], b"BLOCK-CLAIM-ORIG");
    assert_eq!(&data[1 << 20..(1 << 20) + 17], b"BLOCK-GUEST-WROTE");
    assert!(!host_node.exists());
}

/// Runs `f` in a thread of its own with a private mount namespace where a
/// tmpfs of `size` bytes is mounted at `dir`; processes it spawns see it,
/// the host never does, and it vanishes with the thread.
pub(crate) fn on_small_fs<T: Send>(
    dir: &std::path::Path,
    size: u64,
    f: impl FnOnce() -> T + Send,
) -> T {
    use nix::mount::{mount, MsFlags};
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).expect("unshare(CLONE_NEWNS)");
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .expect("make / private");
            mount(
                Some("tmpfs"),
                dir,
                Some("tmpfs"),
                MsFlags::empty(),
                Some(format!("size={size}").as_str()),
            )
            .expect("mount a small tmpfs");
            f()
        })
        .join()
        .unwrap()
    })
}

#[test]
fn claims_too_small_full_or_with_a_planted_link_are_refused_naming_the_volume() {
    let y = vmi(
        "pvcbad",
        "      - name: data\n        disk: {bus: virtio}",
        "  - name: data\n    persistentVolumeClaim: {claimName: my-claim}\n",
    );
    let claim = tempfile::tempdir().unwrap();
    let listing = |d: &std::path::Path| -> Vec<String> {
        fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    let arg = format!("data={},capacity=64Mi", claim.path().display());
    // A 4 MiB claim for a 64 MiB disk: beyond the 10 % toleration.
    on_small_fs(claim.path(), 4 << 20, || {
        assert_refused_late(
            &y,
            &["--pvc", &arg],
            "spec.volumes[1].persistentVolumeClaim: unable to create the disk image of volume data: not enough space, demanded size 67108864 B",
        );
        assert!(
            listing(claim.path()).is_empty(),
            "{:?}",
            listing(claim.path())
        );
    });
    // A full file system under the claim (filled from beside the claim
    // directory, which may hold only disk.img): nothing fits, nothing is left.
    on_small_fs(claim.path(), 4 << 20, || {
        let dir = claim.path().join("claim");
        fs::create_dir(&dir).unwrap();
        let filler = claim.path().join("filler");
        let mut f = fs::File::create(&filler).unwrap();
        while std::io::Write::write_all(&mut f, &[0x5a; 65536]).is_ok() {}
        drop(f);
        let arg = format!("data={},capacity=1Mi", dir.display());
        assert_refused_late(
            &y,
            &["--pvc", &arg],
            "unable to create the disk image of volume data: not enough space",
        );
        assert!(listing(&dir).is_empty(), "{:?}", listing(&dir));
    });
    // disk.img a link to a file outside the claim: refused, never followed.
    let outside = tempfile::NamedTempFile::new().unwrap();
    fs::write(outside.path(), b"HOST FILE").unwrap();
    symlink(outside.path(), claim.path().join("disk.img")).unwrap();
    assert_refused_late(
        &y,
        &["--pvc", &arg],
        "spec.volumes[1].persistentVolumeClaim: /var/run/kubevirt-private/vmi-disks/data/disk.img is a symbolic link; refusing to use it",
    );
    assert_eq!(fs::read(outside.path()).unwrap(), b"HOST FILE");
    // A directory without disk.img and without a size: refused up front.
    fs::remove_file(claim.path().join("disk.img")).unwrap();
    let bare = format!("data={}", claim.path().display());
    assert_refused_late(
        &y,
        &["--pvc", &bare],
        "the claim has no disk.img and its size is unknown: give it as --pvc data=",
    );
}

#[test]
fn pod_claim_image_is_created_within_the_toleration_and_grown_online_when_virt_handler_reports_a_larger_claim(
) {
    let claim = tempfile::tempdir().unwrap();
    // A background loop prints the disk's size (512-byte sectors) whenever
    // it changes; the user-data itself ends at once.
    let body = "( last=; while :; do n=$(cat /sys/block/$(basename $d)/size); [ \"$n\" != \"$last\" ] && echo \"CLAIM-SIZE $n\" >/dev/ttyS0; last=$n; sleep 0.5; done ) &";
    let status = |cap: &str| {
        format!("status:\n  volumeStatus:\n  - name: data\n    target: vdc\n    persistentVolumeClaimInfo: {{claimName: my-claim, volumeMode: Filesystem, capacity: {{storage: {cap}}}, requests: {{storage: {cap}}}, filesystemOverhead: '0.25'}}\n")
    };
    let y = disk_vmi(
        "pvconline",
        "data",
        "onlinedisk",
        "persistentVolumeClaim: {claimName: my-claim}",
        body,
    );
    let first = format!("{y}{}", status("64Mi"));
    // The claim's file system has 60 MiB: 64 MiB do not fit, but the
    // shortfall is within the 10 % toleration.
    on_small_fs(claim.path(), 60 << 20, || {
        let mut l = Launcher::start_wrapped(
            &first,
            &Opts {
                pod: true,
                handler: true,
                pod_mounts_rw: &[("vmi-disks/data", claim.path())],
                ..Opts::default()
            },
            crate::harness::POD_WRAPPER,
        );
        let json = |doc: &str, file: &str| {
            let mut v: serde_json::Value = serde_yaml_ng::from_str(doc).unwrap();
            v["metadata"]["uid"] = serde_json::Value::String(l.uid.clone());
            let p = l.dir.path().join(file);
            fs::write(&p, v.to_string()).unwrap();
            p
        };
        let vmi_json = json(&first, "vmi.json");
        // The claim grew to 128 Mi: usable (1 − 0.25) × 128 Mi = 96 MiB.
        let grown = json(&format!("{y}{}", status("128Mi")), "vmi-grown.json");
        let serial = l.serial_log_path();
        let h = crate::protocol::virt_handler(
            &l,
            &vmi_json,
            &[
                "--serial",
                serial.to_str().unwrap(),
                "--expand-disks",
                "--resync-vmi",
                grown.to_str().unwrap(),
                "--resync-marker",
                "CLAIM-SIZE 196608",
            ],
        );
        let out = h.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("RESYNC-SEEN") && stdout.contains("OK"),
            "virt-handler stand-in:\n{stdout}\n{}\n--- launcher ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            l.log()
        );
        l.wait_success(std::time::Duration::from_secs(60));
        // Created at what fits of the claim's 64 MiB (60 MiB less the
        // 128 KiB reserve, aligned down: 59 MiB; its usable 48 MiB is smaller:
        // never shrunk), then grown while the guest ran.
        let s = l.serial();
        assert!(s.contains("CLAIM-SIZE 120832"), "{s}");
        assert!(s.contains("CLAIM-SIZE 196608"), "{s}");
        let img = claim.path().join("disk.img");
        assert_eq!(fs::metadata(&img).unwrap().len(), 96 << 20);
        assert!(allocated(&img) < 8 << 20);
        // virt-handler was told, as KubeVirt tells it (HandleK8sEvent).
        let log = fs::read_to_string(l.dir.path().join("events.jsonl")).unwrap();
        let ev: serde_json::Value = log
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .find(|e| e["type"] == "K8S" && e["event"]["reason"] == "ToleratedSmallPV")
            .unwrap_or_else(|| panic!("no ToleratedSmallPV event:\n{log}"))["event"]
            .clone();
        assert_eq!(ev["type"], "Normal", "{ev}");
        assert_eq!(
        ev["message"],
        "PV size too small: expected 64Mi, found 59Mi. Using it anyway, it is within 10 % toleration",
        "{ev}"
    );
        assert_eq!(ev["involvedObject"]["uid"], l.uid.as_str(), "{ev}");
    });
}

#[test]
fn a_block_device_the_host_has_mounted_is_refused_as_a_claim() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("mounted.img");
    fs::write(&backing, vec![0u8; 8 << 20]).unwrap();
    let dev = crate::harness::LoopDevice::on(&backing);
    let mkfs = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&dev.0)
        .output()
        .expect("mkfs.ext4 (e2fsprogs)");
    assert!(mkfs.status.success(), "{mkfs:?}");
    let y = vmi(
        "pvcbusy",
        "      - name: data\n        disk: {bus: virtio}",
        "  - name: data\n    persistentVolumeClaim: {claimName: my-claim}\n",
    );
    let mnt = tempfile::tempdir().unwrap();
    let arg = format!("data={}", dev.0);
    // Mounted (in a private namespace of this test's thread: the kernel's
    // exclusive claim on the device is global all the same).
    std::thread::scope(|s| {
        s.spawn(|| {
            use nix::mount::{mount, umount2, MntFlags, MsFlags};
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .unwrap();
            mount(
                Some(dev.0.as_str()),
                mnt.path(),
                Some("ext4"),
                MsFlags::empty(),
                None::<&str>,
            )
            .expect("mount the loop device");
            assert_refused(
                &y,
                &["--pvc", &arg],
                &format!("--pvc {arg}: the block device is in use on this host (mounted or held); refusing to give it to a guest"),
            );
            umount2(mnt.path(), MntFlags::MNT_DETACH).unwrap();
        })
        .join()
        .unwrap();
    });
}

/// KubeVirt's config drive device metadata: a tagged interface is listed
/// in `meta_data.json` with the PCI address libvirt gave it at define time
/// (the ISO is rebuilt after define), read by the real guest.
#[test]
fn config_drive_lists_tagged_interfaces_with_their_pci_address() {
    let script = "#!/bin/sh\necho \"DEVMETA $(cat /run/cidata/meta_data.json)\"\n";
    let y = format!(
        "{}  - name: cloudinit\n    cloudInitConfigDrive:\n      userDataBase64: {}\n",
        crate::network::masquerade_vmi("ci-tagged")
            .replace(
                "        masquerade: {}\n",
                "        masquerade: {}\n        tag: specialNet\n"
            )
            .replace(
                "      - name: scratch\n        disk: {bus: virtio}\n",
                "      - name: scratch\n        disk: {bus: virtio}\n      - name: cloudinit\n        disk: {bus: virtio}\n"
            ),
        base64_std(script.as_bytes())
    );
    assert!(
        y.contains("tag: specialNet") && y.contains("- name: cloudinit\n        disk"),
        "{y}"
    );
    let mut l = Launcher::start_args(&y, &["--setup-pod-network"]);
    let serial = l.wait_serial("DEVMETA", 1, BOOT_TIMEOUT);
    let xml = l.domain_xml();
    // The interface's address as libvirt has it, e.g.
    // <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>
    let iface = &xml[xml.find("<interface").unwrap()..xml.find("</interface>").unwrap()];
    let attr = |name: &str| {
        let at = iface
            .find(&format!(" {name}='0x"))
            .unwrap_or_else(|| panic!("{iface}"));
        let rest = &iface[at + name.len() + 5..];
        rest[..rest.find('\'').unwrap()].to_owned()
    };
    let address = format!(
        "{}:{}:{}.{}",
        attr("domain"),
        attr("bus"),
        attr("slot"),
        attr("function")
    );
    let want = format!(
        r#""devices":[{{"type":"nic","bus":"pci","address":"{address}","mac":"02:54:00:ab:cd:ef","tags":["specialNet"]}}]"#
    );
    assert!(serial.contains(&want), "{want}\n{serial}");
    shutdown(l);
}

/// A downwardMetrics volume: the launcher creates KubeVirt's vhostmd
/// image (256 KiB, `mvbd` header, empty metrics) and the guest sees it as
/// a read-only virtio disk with that content.
#[test]
fn downward_metrics_volume_is_a_vhostmd_disk_the_guest_reads() {
    let script = "#!/bin/sh\nfor d in /dev/vd?; do\n  if [ \"$(head -c 4 $d)\" = mvbd ]; then\n    echo \"VHOSTMD dev=$d size=$(blockdev --getsize64 $d) ro=$(blockdev --getro $d) body=$(dd if=$d bs=1 skip=16 count=19 2>/dev/null)\"\n  fi\ndone\necho VHOSTMD-DONE\n";
    let y = vmi(
        "ci-metrics",
        "      - name: cloudinit\n        disk: {bus: virtio}\n      - name: metrics\n        disk: {bus: virtio}",
        &format!(
            "  - name: cloudinit\n    cloudInitNoCloud:\n      userDataBase64: {}\n  - name: metrics\n    downwardMetrics: {{}}\n",
            base64_std(script.as_bytes())
        ),
    );
    let mut l = Launcher::start(&y, &Opts::default());
    let serial = l.wait_serial("VHOSTMD-DONE", 1, BOOT_TIMEOUT);
    assert!(
        serial.contains("size=262144 ro=1 body=<metrics></metrics>"),
        "{serial}"
    );
    let xml = l.domain_xml();
    assert!(
        xml.contains("/var/run/kubevirt-private/downwardapi-disks/vhostmd0"),
        "{xml}"
    );
    shutdown(l);
}
