//! KubeVirt's non-root mode (`--run-as-nonroot`), whatever
//! `VIRT_LAUNCHER_E2E_NONROOT` says: who runs, with which capabilities,
//! and what is refused before anything starts.

use std::time::Duration;

use crate::bad_input::assert_refused;
use crate::harness::{guest_vmi, nonroot, processes_in_ns, Launcher};

/// (uid, gid, CapPrm, CapEff, CapBnd, CapAmb) of a process.
fn creds(pid: u32) -> (String, String, String, String, String, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().next().unwrap_or("").to_owned())
            .unwrap_or_default()
    };
    (
        field("Uid:"),
        field("Gid:"),
        field("CapPrm:"),
        field("CapEff:"),
        field("CapBnd:"),
        field("CapAmb:"),
    )
}

#[test]
fn launcher_daemons_and_qemu_run_as_107_with_only_net_bind_service() {
    let args: &[&str] = if nonroot() {
        &[]
    } else {
        &["--run-as-nonroot"]
    };
    let (mut l, serial) = Launcher::boot(&guest_vmi("nonroot", "virtio"), args);
    // The pod network's DHCP server bound port 67 with NET_BIND_SERVICE only.
    assert!(serial.contains("GUEST-READY"), "{serial}");
    let ns = l.pid_ns().expect("a PID namespace of its own");
    let procs = processes_in_ns(&ns);
    let qemu = l.qemu_pid().expect("QEMU runs");
    let launcher = l.worker_pid();
    let only_bind = "0000000000000400"; // CAP_NET_BIND_SERVICE (10)
    let mut seen = Vec::new();
    for (pid, comm) in &procs {
        let is_launcher = *pid == launcher;
        if !is_launcher
            && !["libvirtd", "virtlogd", "virtqemud"].contains(&comm.as_str())
            && *pid != qemu
        {
            continue;
        }
        let (uid, gid, prm, eff, bnd, amb) = creds(*pid);
        assert_eq!(
            (uid.as_str(), gid.as_str()),
            ("107", "107"),
            "{comm} ({pid})"
        );
        for (what, v) in [
            ("CapPrm", &prm),
            ("CapEff", &eff),
            ("CapBnd", &bnd),
            ("CapAmb", &amb),
        ] {
            assert_eq!(v, only_bind, "{what} of {comm} ({pid})");
        }
        seen.push(comm.clone());
    }
    assert!(
        seen.iter().any(|c| c == "libvirtd" || c == "virtqemud"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|c| c == "virtlogd"), "{seen:?}");
    assert!(seen.len() >= 4, "launcher, daemons and QEMU: {seen:?}");
    // The session daemon: QEMU's pid file where KubeVirt's monitor reads it
    // non-root, the configuration where the session daemon takes it.
    let state = l.state.clone();
    assert!(
        state
            .join("libvirt/run/qemu/run")
            .join(format!("{}.pid", l.domain))
            .is_file(),
        "pid file in /run/libvirt/qemu/run"
    );
    assert!(state.join("private/libvirt/qemu.conf").is_file());
    // The session daemon answers the session URI (whatever the harness's
    // mode), with the domain running.
    let out = std::process::Command::new("virsh")
        .arg("-c")
        .arg(format!(
            "qemu+unix:///session?socket={}/libvirt/run/libvirt-sock",
            state.display()
        ))
        .args(["domstate", &l.domain])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("running"), "{text}");
    l.stop(Duration::from_secs(90));
    assert!(l.serial().contains("GUEST-SHUTDOWN"));
    l.assert_nothing_left();
}

#[test]
fn files_the_qemu_user_cannot_use_are_refused_by_name_before_anything_starts() {
    // A hostDisk in a directory only root may write: virt-handler would
    // chown it for a non-root pod; the stand-in never changes the owner of
    // a user's files, so it is refused, naming the directory.
    let host = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        host.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let img = host.path().join("data.img");
    let yaml = guest_vmi("nrbad", "virtio").replace(
        "  - name: scratch\n    emptyDisk: {capacity: 64Mi}\n",
        &format!(
            "  - name: scratch\n    hostDisk: {{path: {}, type: DiskOrCreate, capacity: 32Mi}}\n",
            img.display()
        ),
    );
    assert_refused(
        &yaml,
        &["--run-as-nonroot"],
        &format!(
            "--run-as-nonroot: uid 107 (KubeVirt's non-root qemu user) cannot write to the directory {}",
            host.path().display()
        ),
    );
    assert!(!img.exists(), "nothing written");
    // A claim image 107 may not write.
    let claim = host.path().join("claim.img");
    std::fs::write(&claim, vec![0u8; 1 << 20]).unwrap();
    std::fs::set_permissions(&claim, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let yaml = guest_vmi("nrbad", "virtio").replace(
        "  - name: scratch\n    emptyDisk: {capacity: 64Mi}\n",
        "  - name: scratch\n    persistentVolumeClaim: {claimName: c}\n",
    );
    assert_refused(
        &yaml,
        &[
            "--run-as-nonroot",
            "--pvc",
            &format!("scratch={}", claim.display()),
        ],
        &format!("cannot read and write {}", claim.display()),
    );
}
