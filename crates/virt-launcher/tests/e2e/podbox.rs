//! Pod-in-a-box (issue 15 item 6): the pod virt-controller v1.6.6 renders
//! for a VMI, played around the launcher image's root file system
//! (`image/fast-rootfs`) by `tests/podbox/pod-in-a-box` (kubelet's part:
//! mount, PID, UTS and network namespaces, the volumes where the template
//! mounts them, uid 107 with only NET_BIND_SERVICE or uid 0, the template's
//! environment) with the container command verbatim from the template
//! (`harness::pod_box_command`). The virt-handler stand-in plays virt-handler:
//! phase 1 (a masquerade interface) before the container starts, then the
//! sync of the VMI (test guest, cloud-init), pause/unpause, the guest
//! agent, the deletion (shutdown), all over the command socket, reading the
//! notify events. Root or non-root as `VIRT_LAUNCHER_E2E_NONROOT` says.
//! The hook-sidecar variant runs with KubeVirt's ImageVolume gate
//! (`--image-volume`): its guest's disk comes through an image volume.

use std::time::Duration;

use crate::harness::{nonroot, Launcher};
use crate::hooks::{hooked_vmi, Sidecar, VENDOR};
use crate::network::{fields, masquerade_vmi};
use crate::protocol::{handler_for, handler_succeeded};

/// The masquerade test VMI with a cloud-init NoCloud volume whose script
/// prints a marker and the guest's host name.
fn podbox_vmi(name: &str) -> String {
    masquerade_vmi(name)
        .replace(
            "      - name: scratch\n        disk: {bus: virtio}\n",
            "      - name: scratch\n        disk: {bus: virtio}\n      - name: cloudinit\n        disk: {bus: virtio}\n",
        )
        .replace(
            "    emptyDisk: {capacity: 64Mi}\n",
            "    emptyDisk: {capacity: 64Mi}\n  - name: cloudinit\n    cloudInitNoCloud:\n      userData: |\n        #!/bin/sh\n        echo \"PODBOX-USERDATA host=$(hostname)\"\n",
        )
}

/// What every pod-in-a-box run checks after the pod ended: the monitor
/// (the pod's PID 1) ran the launcher and exited last; the launcher's
/// libvirt is the mode's (session as 107, system as root); the libvirt
/// daemon saw the pod's host name (its own UTS namespace).
fn check_pod(l: &Launcher, hostname: &str) {
    let log = l.log();
    assert!(
        log.contains("\"component\":\"virt-launcher-monitor\"")
            && log.contains("virt-launcher-monitor: Exiting..."),
        "no monitor lines:\n{log}"
    );
    assert!(!log.contains("pod-in-a-box:"), "{log}");
    let uri = if nonroot() {
        // The daemon's socket named, as KubeVirt's URI does.
        "\"uri\":\"qemu+unix:///session?socket=/var/run/libvirt/"
    } else {
        "\"uri\":\"qemu:///system\""
    };
    assert!(log.contains(uri), "{uri} not in:\n{log}");
    let host = format!(" info : hostname: {hostname}\"");
    assert!(log.contains(&host), "{host} not in:\n{log}");
}

#[test]
fn pod_in_a_box_runs_a_vmi_under_virt_handler() {
    let yaml = podbox_vmi("podbox");
    assert!(
        yaml.contains("cloudInitNoCloud") && yaml.contains("masquerade"),
        "{yaml}"
    );
    let mut l = Launcher::start_pod_box(&yaml, 0, None, false);
    let stdout = handler_succeeded(handler_for(&l, &yaml, &[]), &l);
    let serial = l.serial();
    // virt-handler's sync: the guest booted, ran the cloud-init script and
    // took KubeVirt's masquerade address from the launcher's DHCP server.
    assert!(serial.contains("PODBOX-USERDATA host=podbox"), "{serial}");
    let f = fields(&serial, "GUEST-DHCP");
    assert_eq!(f["ip"], "10.0.2.2/24", "{serial}");
    assert_eq!(f["router"], "10.0.2.1", "{serial}");
    assert!(serial.contains("GUEST-SHUTDOWN"), "{serial}");
    // The notify events, as virt-handler decoded them: ADDED first, then
    // MODIFIED updates, the final deletion last.
    let events = stdout
        .lines()
        .find(|s| s.starts_with("EVENTS "))
        .unwrap_or("");
    assert!(events.starts_with("EVENTS ADDED MODIFIED"), "{events}");
    assert!(events.ends_with("MODIFIED"), "{events}");
    // The pod's PID 1 (the monitor) exits 0 after the launcher.
    l.wait_success(Duration::from_secs(120));
    check_pod(&l, "podbox");
    l.assert_nothing_left();
}

/// The hook-sidecar pod also has KubeVirt's ImageVolume gate on: the
/// guest boots from its disk reached through the containerDisk's image
/// volume (`--image-volume`, `containerDisk.path` naming a link inside the
/// image), after a probe sync whose path leads out of the image was
/// refused with KubeVirt's words and left no link behind.
#[test]
fn pod_in_a_box_with_a_hook_sidecar_the_guest_reads_its_smbios_vendor() {
    // The sidecar container runs as the pod's user (107 in a non-root pod).
    let hooks = tempfile::tempdir().unwrap();
    let mut sidecar = Sidecar::start_as(hooks.path(), 0, &["--version", "v1alpha3"], nonroot());
    let script = "#!/bin/sh\necho \"BOARD-VENDOR $(cat /sys/class/dmi/id/board_vendor)\"\n";
    let yaml = hooked_vmi("podbox-hooked", script).replace(
        "containerDisk: {image: test-guest}",
        "containerDisk: {image: test-guest, path: /disk/boot.img}",
    );
    assert!(yaml.contains("path: /disk/boot.img"), "{yaml}");
    let mut l = Launcher::start_pod_box(&yaml, 1, Some(hooks.path()), true);
    let stdout = handler_succeeded(
        handler_for(
            &l,
            &yaml,
            &[
                "--image-volume",
                "--probe-bad-image-path",
                "/disk/escape.img",
            ],
        ),
        &l,
    );
    let probe = stdout
        .lines()
        .find_map(|s| s.strip_prefix("PROBE-SYNC-ERROR "))
        .unwrap_or_else(|| panic!("no probe line:\n{stdout}"));
    assert!(
        probe
            .contains("spec.volumes[0].containerDisk: failed to find disk file from ImageVolume: ")
            && probe.contains("leads out of /var/run/kubevirt-image-volume/disk_0"),
        "{probe}"
    );
    let log = l.log();
    assert!(log.contains("failed link ImageVolumeFilePaths"), "{log}");
    // The launcher's own link, in the pod's `public` emptyDir: to the disk
    // itself, the image's link resolved inside the image.
    let link = l.dir.path().join("share/container-disks/disk_0.img");
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        std::path::Path::new("/var/run/kubevirt-image-volume/disk_0/disk/guest.img")
    );
    let serial = l.serial();
    assert!(
        serial.contains(&format!("BOARD-VENDOR {VENDOR}")),
        "{serial}\n--- sidecar ---\n{}",
        sidecar.log()
    );
    l.wait_success(Duration::from_secs(120));
    check_pod(&l, "podbox-hooked");
    l.assert_nothing_left();
    // KubeVirt's shim exits after Shutdown (v1alpha3).
    assert!(
        sidecar.wait_exit(Duration::from_secs(30)),
        "{}",
        sidecar.log()
    );
}

/// The image's `node-labeller.sh` (virt-handler's node-labeller init
/// container) in the image's layout (`image/fast-rootfs`, chrooted, in a
/// mount and PID namespace of its own, `/var/lib/kubevirt-node-labeller` a
/// tmpfs as virt-handler's volume): it starts the image's libvirt daemon
/// (libvirtd: Debian 12 has no virtqemud) and writes libvirt's three
/// reports. No guest; the daemon ends with the namespace.
#[test]
fn node_labeller_script_writes_libvirts_reports() {
    crate::harness::require_stack();
    let dir = tempfile::Builder::new()
        .prefix("vl-labeller-")
        .tempdir()
        .unwrap();
    let bin_dir = crate::harness::launcher_bin().parent().unwrap().to_owned();
    let script = r#"set -e
mount --make-rprivate /
R=$1/root; mkdir "$R"
"$2/image/fast-rootfs" "$R" >/dev/null
mount -t proc proc "$R/proc"; mount --rbind /sys "$R/sys"; mount --rbind /dev "$R/dev"
mount -t tmpfs t "$R/run"; mount -t tmpfs t "$R/tmp"
O=$R/var/lib/kubevirt-node-labeller; mkdir -p "$O"; mount -t tmpfs t "$O"
chroot "$R" /usr/bin/node-labeller.sh >"$1/labeller.log" 2>&1
for f in virsh_domcapabilities.xml supported_features.xml capabilities.xml; do
    echo "== $f"; cat "$O/$f"
done
"#;
    let out = std::process::Command::new("unshare")
        .args([
            "--mount", "--pid", "--uts", "--fork", "bash", "-c", script, "labeller",
        ])
        .arg(dir.path())
        .arg(crate::harness::repo_root())
        .env("BIN_DIR", &bin_dir)
        .output()
        .expect("unshare");
    let log = std::fs::read_to_string(dir.path().join("labeller.log")).unwrap_or_default();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n--- node-labeller.sh ---\n{log}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(log.contains("libvirtd -d"), "{log}");
    let part = |name: &str| {
        stdout
            .split(&format!("== {name}\n"))
            .nth(1)
            .and_then(|s| s.split("\n== ").next())
            .unwrap_or("")
            .to_owned()
    };
    let dom = part("virsh_domcapabilities.xml");
    assert!(
        dom.contains("<domainCapabilities>") && dom.contains("<machine>pc-q35-"),
        "{dom}"
    );
    let features = part("supported_features.xml");
    assert!(features.contains("<cpu mode='custom'"), "{features}");
    let caps = part("capabilities.xml");
    assert!(caps.contains("<arch>x86_64</arch>"), "{caps}");
}
