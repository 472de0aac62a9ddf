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
    let mut l = Launcher::start_pod_box(&yaml, 0, None);
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

#[test]
fn pod_in_a_box_with_a_hook_sidecar_the_guest_reads_its_smbios_vendor() {
    // The sidecar container runs as the pod's user (107 in a non-root pod).
    let hooks = tempfile::tempdir().unwrap();
    let mut sidecar = Sidecar::start_as(hooks.path(), 0, &["--version", "v1alpha3"], nonroot());
    let script = "#!/bin/sh\necho \"BOARD-VENDOR $(cat /sys/class/dmi/id/board_vendor)\"\n";
    let yaml = hooked_vmi("podbox-hooked", script);
    let mut l = Launcher::start_pod_box(&yaml, 1, Some(hooks.path()));
    handler_succeeded(handler_for(&l, &yaml, &[]), &l);
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
