//! virt-handler's protocol end to end: the virt-handler stand-in written in
//! Python against the project's .proto files (no shared Rust types) drives
//! a real launcher in pod mode, with a real guest.

use std::process::Command;
use std::time::Duration;

use crate::harness::{alive, guest_vmi, repo_root, Launcher, BOOT_TIMEOUT};

pub(crate) fn vmi_json(l: &Launcher, name: &str) -> std::path::PathBuf {
    vmi_json_of(l, &guest_vmi(name, "virtio"))
}

/// The VMI manifest `yaml` as virt-handler sends it (JSON, the launcher's UID).
pub(crate) fn vmi_json_of(l: &Launcher, yaml: &str) -> std::path::PathBuf {
    let mut doc: serde_json::Value = serde_yaml_ng::from_str(yaml).unwrap();
    doc["metadata"]["uid"] = serde_json::Value::String(l.uid.clone());
    let p = l.dir.path().join("vmi.json");
    std::fs::write(&p, doc.to_string()).unwrap();
    p
}

/// Reads the handler's stdout until `marker`; returns what was read.
pub(crate) fn wait_for_marker(
    stdout: &mut std::process::ChildStdout,
    marker: &str,
    l: &Launcher,
) -> String {
    let mut seen = String::new();
    let start = std::time::Instant::now();
    while !seen.contains(marker) {
        assert!(
            start.elapsed() < BOOT_TIMEOUT,
            "handler never printed {marker}: {seen}\n{}",
            l.log()
        );
        let mut buf = [0u8; 256];
        let n = std::io::Read::read(stdout, &mut buf).unwrap();
        assert!(n > 0, "handler exited: {seen}\n{}", l.log());
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    seen
}

/// Starts the virt-handler stand-in (`tests/handler/virt-handler`) for the
/// pod-mode launcher `l` and the VMI manifest `vmi`, with `extra` scenario
/// flags; its notify events go to `events.jsonl` in the test's directory.
pub(crate) fn virt_handler(
    l: &Launcher,
    vmi: &std::path::Path,
    extra: &[&str],
) -> std::process::Child {
    Command::new("python3")
        .arg(repo_root().join("tests/handler/virt-handler"))
        .arg("--share")
        .arg(l.dir.path().join("share"))
        .arg("--vmi")
        .arg(vmi)
        .arg("--events")
        .arg(l.dir.path().join("events.jsonl"))
        .args(if crate::harness::nonroot() {
            &["--runtime-user", "107"][..]
        } else {
            &[]
        })
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 (grpcio-tools: bash .ci/install)")
}

/// [`virt_handler`] for `l` and the VMI manifest `yaml` (sent as
/// [`vmi_json_of`] writes it), reading the guest's serial console, with
/// `extra` scenario flags.
pub(crate) fn handler_for(l: &Launcher, yaml: &str, extra: &[&str]) -> std::process::Child {
    let vmi = vmi_json_of(l, yaml);
    let serial = l.serial_log_path();
    let mut args = vec!["--serial", serial.to_str().unwrap()];
    args.extend_from_slice(extra);
    virt_handler(l, &vmi, &args)
}

/// Waits for the virt-handler stand-in `h` and asserts it exited 0 printing
/// `OK` (else fails with its output and the launcher's log); its stdout.
pub(crate) fn handler_succeeded(h: std::process::Child, l: &Launcher) -> String {
    let out = h.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("OK"),
        "virt-handler stand-in:\n{stdout}\n{}\n--- launcher ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        l.log()
    );
    eprintln!(
        "virt-handler stand-in:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The pod-mode launcher for `yaml` in a pod network namespace where
/// phase 1 was played, driven through its whole life by the virt-handler
/// stand-in (which must succeed, see [`handler_succeeded`]); returns the
/// launcher and the guest's serial console.
pub(crate) fn run_under_handler_on_network(yaml: &str) -> (Launcher, String) {
    let l = Launcher::start_pod_for_handler_on_network(yaml);
    handler_succeeded(handler_for(&l, yaml, &[]), &l);
    let serial = l.serial();
    (l, serial)
}

/// The stand-in's own logic (strict Go decoding, the informer object, the
/// grace-period arithmetic, the phase mapping): its Python unit tests.
#[test]
fn stand_in_unit_tests() {
    let out = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s"])
        .arg(repo_root().join("tests/handler"))
        .output()
        .expect("python3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("\nOK"), "{err}");
}

/// The whole life of a VMI under the stand-in: its controller syncs the
/// Scheduled VMI, the VMI runs, the answers decode into KubeVirt's types, a
/// user pauses and unpauses it, the agent connects, then the VMI is deleted:
/// Shutdown (repeated while the grace period runs), the guest powers off,
/// DeleteVirtualMachine, the final notification. The stand-in's worker is
/// busy for 5 s when the domain shows Shutoff (a loaded node): the launcher
/// must wait for its DeleteVirtualMachine, as KubeVirt's does, for the VMI
/// to end Succeeded rather than Failed (a Running VMI without a domain).
#[test]
fn a_foreign_client_drives_sync_stats_pause_unpause_shutdown() {
    let yaml = guest_vmi("grpc", "virtio");
    let mut l = Launcher::start_pod_for_handler(&yaml);
    let stdout = handler_succeeded(handler_for(&l, &yaml, &["--busy-after-shutoff", "5"]), &l);
    // ADDED first, then MODIFIED updates, the final deletion last.
    let events = stdout
        .lines()
        .find(|s| s.starts_with("EVENTS "))
        .unwrap_or("");
    assert!(events.starts_with("EVENTS ADDED MODIFIED"), "{events}");
    assert!(events.ends_with("MODIFIED"), "{events}");
    l.wait_success(Duration::from_secs(60));
    assert!(l.serial().contains("GUEST-SHUTDOWN"));
    l.assert_nothing_left();
}

#[test]
fn a_killed_qemu_is_reported_as_a_crash() {
    let yaml = guest_vmi("crash", "virtio");
    let mut l = Launcher::start_pod_for_handler(&yaml);
    let vmi = vmi_json(&l, "crash");
    let mut h = virt_handler(&l, &vmi, &["--crash"]);
    // Wait until the handler is through pause/unpause, then kill QEMU.
    let mut stdout = h.stdout.take().unwrap();
    let seen = wait_for_marker(&mut stdout, "READY-FOR-CRASH", &l);
    let qemu = l.qemu_pid().expect("qemu pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(qemu as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let st = h.wait().unwrap();
    assert!(
        st.success() && rest.contains("OK"),
        "{seen}{rest}\n--- launcher ---\n{}",
        l.log()
    );
    let ex = l.wait_exit(Duration::from_secs(60));
    assert_eq!(ex.code(), Some(1), "a crash is a failure exit\n{}", l.log());
    assert!(
        l.log().contains("the guest ended abnormally"),
        "{}",
        l.log()
    );
    assert!(!alive(qemu));
}

/// The libvirt daemon killed under a running domain in a pod-mode launcher
/// (issue 19): the supervisor starts it again, the launcher reconnects and
/// notifies virt-handler's ERROR (Libvirt reconnect) and the Running
/// domain; the stand-in's GetDomain reads Running, its next
/// SyncVirtualMachine succeeds, and a pause and unpause after the restart
/// reach its notify server as Paused/User and Running events; the same
/// QEMU runs on until the VMI is deleted.
#[test]
fn a_killed_libvirt_daemon_is_reported_and_the_guest_runs_on() {
    let yaml = guest_vmi("reconnect", "virtio");
    let mut l = Launcher::start_pod_for_handler(&yaml);
    let mut h = handler_for(&l, &yaml, &["--daemon-kill"]);
    let mut stdout = h.stdout.take().unwrap();
    let seen = wait_for_marker(&mut stdout, "READY-FOR-DAEMON-KILL", &l);
    let qemu = l.qemu_pid().expect("qemu pid");
    let daemon = l.daemon_pid("libvirtd").unwrap_or_else(|| {
        panic!(
            "no libvirtd in the launcher's PID namespace: {:?}",
            l.pid_ns().map(|ns| crate::harness::processes_in_ns(&ns))
        )
    });
    // One libvirt connection for the manager, the event watcher and the
    // guest agent, as KubeVirt's launcher has (the reconnect below
    // re-registers the events on the new one).
    assert_eq!(
        l.libvirt_connections("libvirtd"),
        1,
        "launcher's connections to libvirtd\n{}",
        l.log()
    );
    // Start-up's deep calls ran on the main thread; once QEMU runs the
    // launcher hands those stack pages back (debug builds touch ~400 KiB).
    let (launcher, _) = l.supervisor_of("libvirtd");
    let stack_kib = crate::harness::mapping_rss_kib(launcher, "[stack]");
    eprintln!("launcher's main stack resident: {stack_kib} KiB");
    assert!(stack_kib <= 160, "main stack resident: {stack_kib} KiB");
    // At the default verbosity QEMU gets no debug console: no firmware log
    // reader waits on its FIFO.
    let threads = l.launcher_threads("libvirtd");
    assert!(
        threads.iter().any(|t| t == "agent-poller") && !threads.iter().any(|t| t == "seabios-log"),
        "{threads:?}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(h.stderr.as_mut().unwrap(), &mut err).unwrap();
    let st = h.wait().unwrap();
    assert!(
        st.success() && rest.contains("OK"),
        "{seen}{rest}\n{err}\n--- launcher ---\n{}",
        l.log()
    );
    // After the restart: a successful sync, then Paused/User and Running
    // again, in that order, among the notifications.
    let after: serde_json::Value = serde_json::from_str(
        rest.lines()
            .find_map(|l| l.strip_prefix("AFTER-DAEMON-KILL "))
            .unwrap_or_else(|| panic!("no AFTER-DAEMON-KILL line: {rest}")),
    )
    .unwrap();
    eprintln!("AFTER-DAEMON-KILL {after}");
    assert!(after["syncsOk"].as_u64().unwrap() >= 1, "{after}");
    let events: Vec<(String, String)> = after["eventsAfterPause"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e[1].as_str().unwrap_or("").to_owned(),
                e[2].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let paused = events
        .iter()
        .position(|(s, r)| s == "Paused" && r == "User")
        .unwrap_or_else(|| panic!("no Paused/User event after the restart: {after}"));
    assert!(
        events[paused..].iter().any(|(s, _)| s == "Running"),
        "no Running event after the unpause: {after}"
    );
    // The same QEMU ran through the daemon's death until the handler shut it down.
    assert!(l.serial().contains("GUEST-SHUTDOWN"), "{}", l.serial());
    l.wait_success(Duration::from_secs(60));
    assert!(
        l.daemon_starts() >= 3,
        "libvirtd was not restarted\n{}",
        l.log()
    );
    assert!(!alive(qemu));
    assert!(!alive(daemon));
}

/// The production path with two interfaces: virt-handler's phase 1 (played
/// by `pod-network-phase1 --cache-dir`) made the pod network's masquerade
/// and a Multus network's bridge (pod link `pod<hash>`, its cache
/// `vif-cache-pod<hash>.json` in the pod's private directory); phase 2 in
/// SyncVMI finds the hashed link, decorates each interface with its own
/// tap and starts one DHCP server per interface, and the guest gets a
/// lease on both NICs. Then, on the same guest, a NIC plug and unplug as
/// the cluster drives them (issue 17; the stand-in's `--plug-nic`,
/// `tests/handler/virt_handler/nichotplug.py`): virt-controller adds the
/// interface `green` on the Multus network `e2e/green` and its
/// `multus-status` entry, virt-handler runs phase 1 for it in the pod
/// (`pod-network-phase1 --interface`) and syncs; the guest gets its lease
/// and virt-handler reads the new interface back from GetDomain and the
/// agent; then `state: absent`: detached, torn down, gone.
#[test]
fn pod_mode_runs_network_phase_2_for_a_pod_and_a_multus_interface() {
    let yaml = crate::network::masquerade_vmi("podmulti")
        .replace(
            "        ports: [{name: http, port: 8080}]\n",
            "        ports: [{name: http, port: 8080}]\n      - name: blue\n        bridge: {}\n",
        )
        .replace(
            "  networks:\n  - name: default\n    pod: {}\n",
            "  networks:\n  - name: default\n    pod: {}\n  - name: blue\n    multus: {networkName: e2e/blue}\n",
        );
    assert!(yaml.contains("networkName: e2e/blue"), "{yaml}");
    let mut l = Launcher::start_pod_for_handler_on_network(&yaml);
    let launcher = crate::harness::launcher_bin();
    let out = handler_succeeded(
        handler_for(
            &l,
            &yaml,
            &[
                "--plug-nic",
                "green=e2e/green",
                "--launcher",
                launcher.to_str().unwrap(),
            ],
        ),
        &l,
    );
    let serial = l.serial();
    let lease = |ifc: &str| {
        serial
            .lines()
            .find(|s| s.starts_with(&format!("GUEST-DHCP interface={ifc} ")))
            .map(|s| crate::network::fields(s, "GUEST-DHCP"))
            .unwrap_or_else(|| panic!("no lease on {ifc}:\n{serial}\n{}", l.log()))
    };
    assert_eq!(lease("eth0")["ip"], "10.0.2.2/24", "{serial}");
    let eth1 = lease("eth1");
    assert_eq!(eth1["ip"], "10.245.1.5/24", "{serial}");
    assert_eq!(eth1["router"], "none", "{serial}");
    assert!(
        l.dir
            .path()
            .join("pod-private/vif-cache-pod16477688c0e.json")
            .exists(),
        "phase 1's cache for the Multus link is missing"
    );
    check_nic_plug(&out, &serial, &l);
    l.wait_success_and_check(Duration::from_secs(60));
}

/// What virt-handler read back of the NIC `green` plugged by the stand-in
/// (`NIC-PLUGGED`, `NIC-UNPLUGGED` in its output `out`) and what the guest
/// saw (`serial`): the third network's secondary addresses
/// (10.245.2.5/24, the pod link's MAC 0a:58:0a:f5:02:05), KubeVirt's
/// api.Domain interface, the status entry of all three sources.
fn check_nic_plug(out: &str, serial: &str, l: &Launcher) {
    let data = |marker: &str| -> serde_json::Value {
        let line = out
            .lines()
            .find_map(|s| s.strip_prefix(&format!("{marker} ")))
            .unwrap_or_else(|| panic!("no {marker} in the stand-in's output:\n{out}"));
        serde_json::from_str(line).unwrap()
    };
    let plugged = data("NIC-PLUGGED");
    let (d, st) = (&plugged["domain"], &plugged["status"]);
    let mac = "0a:58:0a:f5:02:05";
    assert_eq!(d["Alias"]["Name"], "green", "{plugged}");
    assert_eq!(d["MAC"]["MAC"], mac, "{plugged}");
    assert_eq!(d["Target"]["Device"], "tapba4788b226a", "{plugged}");
    assert_eq!(d["Target"]["Managed"], "no", "{plugged}");
    assert_eq!(d["Model"]["Type"], "virtio-non-transitional", "{plugged}");
    assert_eq!(
        st["infoSource"], "domain, guest-agent, multus-status",
        "{plugged}"
    );
    assert_eq!(st["podInterfaceName"], "podba4788b226a", "{plugged}");
    assert_eq!(st["mac"], mac, "{plugged}");
    assert_eq!(st["ipAddress"], "10.245.2.5", "{plugged}");
    assert_eq!(st["interfaceName"], "eth2", "{plugged}");
    let added = serial
        .lines()
        .find(|s| s.contains("GUEST-NIC-ADDED eth2 "))
        .unwrap_or_else(|| panic!("the guest saw no new NIC:\n{serial}\n{}", l.log()));
    assert!(added.ends_with(&format!("mac={mac}")), "{added}");
    let lease = crate::network::fields(
        &serial[serial
            .find("GUEST-DHCP interface=eth2 ")
            .expect("a lease on eth2")..],
        "GUEST-DHCP",
    );
    assert_eq!(lease["ip"], "10.245.2.5/24", "{serial}");
    assert_eq!(lease["router"], "none", "{serial}");
    let unplugged = data("NIC-UNPLUGGED");
    assert_eq!(
        unplugged,
        serde_json::json!({"domain": ["default", "blue"], "cache": false})
    );
    assert!(serial.contains("GUEST-NIC-REMOVED eth2"), "{serial}");
}

/// The production path of pod networking: virt-handler made the pod's
/// bridge and tap (phase 1, played by `virt-launcher pod-network-phase1` in
/// the pod's own network namespace), then syncs a VMI with a masquerade
/// interface; the launcher runs phase 2 in SyncVMI (interface facts, DHCP
/// server), and the real guest gets KubeVirt's address plan over DHCP.
#[test]
fn pod_mode_runs_network_phase_2_for_the_vmi_virt_handler_syncs() {
    let yaml = crate::network::masquerade_vmi("podnet");
    let (mut l, serial) = run_under_handler_on_network(&yaml);
    let f = crate::network::fields(&serial, "GUEST-DHCP");
    assert_eq!(f["ip"], "10.0.2.2/24", "{serial}");
    assert_eq!(f["router"], "10.0.2.1", "{serial}");
    assert_eq!(f["hostname"], "podnet", "{serial}");
    assert!(
        l.log().contains("network phase 2 done for the synced VMI"),
        "{}",
        l.log()
    );
    l.wait_success_and_check(Duration::from_secs(60));
}

/// An SR-IOV VMI synced by virt-handler: the launcher reads the VF's host
/// address then (no network-info file here, so the device plugin's
/// variables), defines the domain with the PCI hostdev, and the failed
/// start (no VF, no VFIO on this machine) is SyncVirtualMachine's error,
/// libvirt's own words, not a missing-address refusal.
#[test]
fn synced_sriov_vmi_gets_its_vf_from_the_device_plugin_environment() {
    let yaml = guest_vmi("sriovsync", "virtio")
        .replace(
            "      rng: {}\n",
            "      rng: {}\n      interfaces:\n      - name: red\n        sriov: {}\n",
        )
        .replace(
            "  volumes:\n",
            "  networks:\n  - name: red\n    multus: {networkName: red-net}\n  volumes:\n",
        );
    let mut l = Launcher::start_wrapped(
        &yaml,
        &crate::harness::Opts {
            pod: true,
            handler: true,
            env: &[
                (
                    "KUBEVIRT_RESOURCE_NAME_red",
                    std::ffi::OsStr::new("example.com/vf"),
                ),
                (
                    "PCIDEVICE_EXAMPLE_COM_VF",
                    std::ffi::OsStr::new("0000:fe:1f.6"),
                ),
            ],
            ..crate::harness::Opts::default()
        },
        crate::harness::POD_WRAPPER,
    );
    let vmi = vmi_json_of(&l, &yaml);
    let out = virt_handler(&l, &vmi, &[]).wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}\n{}", l.log());
    assert!(stdout.contains("FAIL: sync: "), "{stdout}\n{}", l.log());
    assert!(
        stdout.contains("host doesn't support passthrough of host PCI devices")
            || stdout.contains("0000:fe:1f.6"),
        "{stdout}\n{}",
        l.log()
    );
    assert!(l.log().contains("SR-IOV host devices"), "{}", l.log());
    l.terminate(Duration::from_secs(60));
    l.assert_nothing_left();
}

/// Pod mode, passt binding: the pod has only its link (`eth0`, made by
/// `virt-launcher pod-network-phase1`, which leaves passt's side to
/// libvirt); virt-handler syncs the VMI, phase 2 runs in SyncVMI with no
/// tap and no DHCP server, the domain is defined with the passt interface
/// and libvirt starts passt, which on this stack refuses libvirt's port
/// specifier (see `network::passt_binding_starts_passt_which_refuses_libvirts_port_spec`):
/// the sync fails with passt's message and the launcher stays up.
#[test]
fn pod_mode_sync_of_a_passt_vmi_runs_no_dhcp_and_reaches_passt() {
    let yaml = crate::network::masquerade_vmi("podpasst").replace(
        "        masquerade: {}\n",
        "        binding: {name: passt}\n",
    );
    let mut l = Launcher::start_pod_for_handler_on_network(&yaml);
    let vmi = vmi_json_of(&l, &yaml);
    let out = virt_handler(&l, &vmi, &[]).wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let log = l.log();
    assert!(
        !out.status.success()
            && stdout.contains("FAIL: sync:")
            && stdout.contains("--tcp-ports %eth0/8080")
            && stdout.contains("Invalid port specifier %eth0/8080"),
        "virt-handler stand-in:\n{stdout}\n{}\n--- launcher ---\n{log}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        log.contains("network phase 2 done for the synced VMI")
            && log.contains(r#""interface":"default""#)
            && log.contains("domain defined"),
        "{log}"
    );
    assert!(!log.contains("DHCP"), "{log}");
    l.stop_and_check(Duration::from_secs(60));
}
