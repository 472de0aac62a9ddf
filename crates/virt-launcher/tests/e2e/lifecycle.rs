//! Boot, observe, shut down: the launcher's whole life with a real guest.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::harness::{alive, give_to_qemu_user, guest_vmi, nonroot, Launcher, Opts, BOOT_TIMEOUT};

/// Asserts nothing the launcher started is still running.
fn assert_all_gone(l: &Launcher, qemu: u32, daemons: &[u32]) {
    assert!(!alive(qemu), "QEMU {qemu} still running");
    for d in daemons {
        assert!(!alive(*d), "daemon {d} still running");
    }
    l.assert_nothing_left();
}

#[test]
fn boots_the_test_guest_and_shuts_it_down_on_sigterm() {
    let (mut l, serial) = Launcher::boot(&guest_vmi("lifecycle", "virtio"), &[]);
    assert!(serial.contains("GUEST-READY hostname="), "{serial}");

    // The domain as libvirt sees it.
    assert_eq!(l.domstate(), "running (booted)");
    let xml = l.domain_xml();
    assert!(xml.contains("<name>e2e_lifecycle</name>"), "{xml}");
    assert!(
        xml.contains("<domain type='qemu'"),
        "TCG expected under --use-emulation: {xml}"
    );
    assert!(
        xml.contains(&format!("/var/run/kubevirt-private/{}/virt-serial0", l.uid)),
        "{xml}"
    );
    assert!(xml.contains("org.qemu.guest_agent.0"), "{xml}");
    assert!(xml.contains("<uid>"), "{xml}");
    // The empty disk exists, sparse, as qcow2; the container disk has its overlay.
    assert!(
        xml.contains("/var/run/libvirt/empty-disks/scratch.qcow2"),
        "{xml}"
    );
    assert!(xml.contains("disk-data/containerdisk/disk.qcow2"), "{xml}");
    assert!(l
        .state
        .join("libvirt/run/empty-disks/scratch.qcow2")
        .is_file());
    assert!(l
        .state
        .join("ephemeral/disk-data/containerdisk/disk.qcow2")
        .is_file());

    // The real guest agent answers through the launcher's libvirt.
    let (ok, out) = l.virsh(&[
        "qemu-agent-command",
        &l.domain,
        r#"{"execute":"guest-ping"}"#,
    ]);
    let mut tries = 0;
    let mut ok = ok;
    let mut out = out;
    while !ok && tries < 50 {
        std::thread::sleep(Duration::from_millis(200));
        (ok, out) = l.virsh(&[
            "qemu-agent-command",
            &l.domain,
            r#"{"execute":"guest-ping"}"#,
        ]);
        tries += 1;
    }
    assert!(ok && out.contains("\"return\""), "guest-ping: {out}");

    let qemu = l.qemu_pid().expect("qemu pid file");
    assert!(alive(qemu));
    let daemons = l.daemon_pids();
    assert_eq!(daemons.len(), 2, "virtlogd + libvirtd: {}", l.log());

    l.stop(Duration::from_secs(90));
    let serial = l.serial();
    assert!(
        serial.contains("GUEST-SHUTDOWN"),
        "the guest did not see the ACPI power button:\n{serial}"
    );
    assert!(l.log().contains("\"reason\":\"Shutdown\""), "{}", l.log());
    // Standalone has no virt-handler: its absence is not a warning.
    assert!(
        !l.log().contains("cannot reach virt-handler"),
        "{}",
        l.log()
    );
    assert_all_gone(&l, qemu, &daemons);
}

#[test]
fn boots_kubevirts_vmi_sata_example_unchanged() {
    // A manifest nobody here wrote: 128Mi, one containerDisk volume and no
    // disk entry, so KubeVirt's default SATA disk is added.
    let yaml = std::fs::read_to_string(
        crate::harness::repo_root().join("tests/data/examples/vmi-sata.yaml"),
    )
    .unwrap();
    let mut l = Launcher::start(&yaml, &Opts::default());
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let xml = l.domain_xml();
    assert!(xml.contains("<target dev='sda' bus='sata'/>"), "{xml}");
    let qemu = l.qemu_pid().expect("qemu pid");
    let daemons = l.daemon_pids();
    l.signal(Signal::SIGINT);
    l.wait_success(Duration::from_secs(90));
    assert_all_gone(&l, qemu, &daemons);
}

#[test]
fn exits_when_the_guest_powers_off_by_itself() {
    let mut l = Launcher::start(&guest_vmi("selfoff", "virtio"), &Opts::default());
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let qemu = l.qemu_pid().expect("qemu pid");
    let daemons = l.daemon_pids();
    // Ask the guest (through its real agent, not ACPI) to power off.
    let mut last = String::new();
    for _ in 0..50 {
        let (o, out) = l.virsh(&["shutdown", "--mode", "agent", &l.domain]);
        if o {
            last.clear();
            break;
        }
        last = out;
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        last.is_empty(),
        "agent shutdown never accepted: {last}\n{}",
        l.log()
    );
    let st = l.wait_exit(Duration::from_secs(90));
    assert!(st.success(), "exit {st}\n{}", l.log());
    assert_all_gone(&l, qemu, &daemons);
}

#[test]
fn kills_the_guest_when_the_grace_period_expires() {
    let mut l = Launcher::start(
        &guest_vmi("stubborn", "virtio"),
        &Opts {
            args: &["--grace-period-seconds", "3"],
            ..Opts::default()
        },
    );
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let qemu = l.qemu_pid().expect("qemu pid");
    let daemons = l.daemon_pids();
    // A paused guest cannot react to the power button.
    let (ok, out) = l.virsh(&["suspend", &l.domain]);
    assert!(ok, "{out}");
    let t = std::time::Instant::now();
    l.stop(Duration::from_secs(60));
    assert!(
        t.elapsed() >= Duration::from_secs(3),
        "killed before the grace period"
    );
    assert!(
        l.log().contains("grace period of 3 s expired"),
        "{}",
        l.log()
    );
    assert!(!l.serial().contains("GUEST-SHUTDOWN"));
    assert_all_gone(&l, qemu, &daemons);
}

#[test]
fn restarts_a_killed_libvirt_daemon_and_keeps_the_guest() {
    let mut l = Launcher::start(&guest_vmi("daemonkill", "virtio"), &Opts::default());
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let qemu = l.qemu_pid().expect("qemu pid");
    let libvirtd = l.daemon_pid("libvirtd").expect("libvirtd pid");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(libvirtd as i32), Signal::SIGKILL).unwrap();
    // The supervisor restarts it; the guest keeps running.
    let start = std::time::Instant::now();
    while l.daemon_starts() < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "daemon not restarted\n{}",
            l.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(alive(qemu), "QEMU died with the daemon");
    let mut state = String::new();
    for _ in 0..100 {
        state = l.domstate();
        if state.starts_with("running") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(state.starts_with("running"), "{state}");
    // The launcher reconnects and still shuts the guest down properly.
    let daemons = l.daemon_pids();
    l.stop(Duration::from_secs(90));
    assert!(l.serial().contains("GUEST-SHUTDOWN"), "{}", l.serial());
    assert!(l.log().contains("libvirt reconnected"), "{}", l.log());
    assert_all_gone(&l, qemu, &daemons);
}

#[test]
fn two_launchers_run_the_same_vmi_side_by_side() {
    // Same manifest, same domain name: each launcher has its own mount
    // namespace, daemons and sockets, so neither sees the other.
    let yaml = guest_vmi("twin", "virtio");
    let mut a = Launcher::start(&yaml, &Opts::default());
    let mut b = Launcher::start(&yaml, &Opts::default());
    a.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    b.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    assert_eq!(a.domain, b.domain);
    let (qa, qb) = (a.qemu_pid().unwrap(), b.qemu_pid().unwrap());
    assert_ne!(qa, qb);
    for l in [&a, &b] {
        let (ok, list) = l.virsh(&["list", "--name"]);
        assert!(ok, "{list}");
        assert_eq!(
            list.trim(),
            "e2e_twin",
            "each daemon knows exactly its own domain"
        );
    }
    let (da, db) = (a.daemon_pids(), b.daemon_pids());
    a.stop(Duration::from_secs(90));
    // Stopping one leaves the other untouched.
    assert!(alive(qb), "the other launcher's QEMU died");
    assert!(b.domstate().starts_with("running"), "{}", b.domstate());
    b.stop(Duration::from_secs(90));
    assert_all_gone(&a, qa, &da);
    assert_all_gone(&b, qb, &db);
}

#[test]
fn runs_as_pid_1_and_reaps_orphans_with_a_cold_capability_cache() {
    // As PID 1 of its own PID namespace (a container), the launcher must reap
    // the QEMU processes libvirt orphans while probing capabilities (a fresh,
    // empty cache forces the probe); otherwise libvirt stalls ~40 s per probe.
    let cache = tempfile::tempdir().unwrap();
    let cache_arg = cache.path().to_str().unwrap().to_owned();
    let mut l = Launcher::start_wrapped(
        &guest_vmi("pidone", "virtio"),
        &Opts {
            args: &["--libvirt-cache-dir", &cache_arg],
            ..Opts::default()
        },
        &["unshare", "--pid", "--fork", "--mount-proc"],
    );
    let start = std::time::Instant::now();
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}: orphaned probes were not reaped?\n{}",
        start.elapsed(),
        l.log()
    );
    // Non-root, the session daemon's own part of the shared cache.
    let filled = if nonroot() {
        cache.path().join("uid-107/qemu/capabilities")
    } else {
        cache.path().join("qemu/capabilities")
    };
    assert!(filled.is_dir(), "the capability cache was filled");
    l.stop(Duration::from_secs(90));
    assert!(l.serial().contains("GUEST-SHUTDOWN"));
    l.assert_nothing_left();
}

#[test]
fn pod_mode_runs_the_vmi_from_standalone_vmi() {
    // KubeVirt's command line (no subcommand), the VMI in STANDALONE_VMI, in
    // a mount namespace standing in for the pod.
    let yaml = std::fs::read_to_string(
        crate::harness::repo_root().join("tests/data/examples/vmi-sata.yaml"),
    )
    .unwrap();
    let mut l = Launcher::start_pod(&yaml);
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let xml = l.domain_xml();
    assert!(
        xml.contains("/var/run/kubevirt/container-disks/disk_0.img"),
        "{xml}"
    );
    l.stop(Duration::from_secs(90));
    assert!(l.serial().contains("GUEST-SHUTDOWN"));
    l.assert_nothing_left();
}

#[test]
fn leaves_no_qemu_behind_even_for_domains_it_did_not_start() {
    let mut l = Launcher::start(&guest_vmi("owner", "virtio"), &Opts::default());
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    // Someone starts a second domain in the launcher's private daemon.
    let intruder = l.dir.path().join("intruder.yaml");
    std::fs::write(
        &intruder,
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: intruder, namespace: e2e}\nspec:\n  domain:\n    memory: {guest: 32Mi}\n    devices: {autoattachGraphicsDevice: false, autoattachSerialConsole: false, autoattachPodInterface: false}\n",
    )
    .unwrap();
    let out = crate::run::output_ok(
        std::process::Command::new(crate::harness::launcher_bin())
            .args(["convert", "--use-emulation"])
            .arg(&intruder),
    );
    let xml = l.dir.path().join("intruder.xml");
    std::fs::write(&xml, &out.stdout).unwrap();
    let (ok, msg) = l.virsh(&["define", xml.to_str().unwrap()]);
    assert!(ok, "{msg}");
    let (ok, msg) = l.virsh(&["start", "e2e_intruder"]);
    assert!(ok, "{msg}");
    // Without --vm-stats-collector GetVMStats is KubeVirt's gRPC error.
    let (ok, _, err) = l.ctl(&["vmstats"]);
    assert!(
        !ok && err.contains("VMStatsCollector feature gate is not enabled"),
        "{err}"
    );
    // A domain without a display has no screenshot: libvirt says so
    // (what GetScreenshot answers for such a VMI).
    {
        let mut conn = virt::connect::Connect::open(Some(&l.uri())).unwrap();
        let dom = virt::domain::Domain::lookup_by_name(&conn, "e2e_intruder").unwrap();
        let e = virtwrap::screenshot::capture(&conn, &dom).unwrap_err();
        drop(dom);
        let _ = conn.close();
        assert!(
            e.to_string().contains("no screens to take screenshot from"),
            "{e}"
        );
    }
    let pid = l
        .qemu_pid_of("e2e_intruder")
        .expect("the second domain's QEMU");
    assert!(alive(pid));
    l.stop(Duration::from_secs(90));
    assert!(
        !alive(pid),
        "the second domain's QEMU outlived the launcher"
    );
    assert!(
        l.log().contains("killing a process left behind"),
        "{}",
        l.log()
    );
}

#[test]
fn sigkill_of_the_launcher_takes_everything_down_and_a_rerun_works() {
    let mut l = Launcher::start(&guest_vmi("killed", "virtio"), &Opts::default());
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let qemu = l.qemu_pid().expect("qemu pid");
    l.pid_ns().expect("run makes its own PID namespace");
    l.signal(Signal::SIGKILL);
    let st = l.wait_exit(Duration::from_secs(30));
    assert!(!st.success());
    // PID 1 of the namespace died with the outer process: the kernel killed the rest.
    let t = std::time::Instant::now();
    while !l.processes_left().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "left: {:?}",
            l.processes_left()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(qemu));
    // The same state directory serves the next run.
    let mut again = Launcher::start_in(
        &guest_vmi("killed", "virtio"),
        &Opts::default(),
        l.dir.path(),
    );
    again.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    again.stop(Duration::from_secs(90));
}

#[test]
fn qemu_timeout_is_honoured_while_the_domain_starts() {
    let mut l = Launcher::start(
        &guest_vmi("slow", "virtio"),
        &Opts {
            args: &["--qemu-timeout", "0s"],
            ..Opts::default()
        },
    );
    let st = l.wait_exit(Duration::from_secs(60));
    assert_eq!(st.code(), Some(1), "{}", l.log());
    assert!(
        l.log()
            .contains("waiting for the domain to start (--qemu-timeout)"),
        "{}",
        l.log()
    );
    l.assert_nothing_left();
}

/// Dedicated CPUs with an isolated emulator thread: KubeVirt creates the
/// domain paused (virt-handler moves the emulator thread, then its next
/// sync resumes it). Standalone has no virt-handler, so the launcher's own
/// second sync resumes it: the guest boots, libvirt says it was unpaused,
/// and the vCPU and emulator pinning are in effect.
#[test]
fn isolated_emulator_thread_starts_paused_then_runs() {
    let yaml = guest_vmi("isolated", "virtio").replace(
        "    cpu: {cores: 1}\n",
        "    cpu: {cores: 1, dedicatedCpuPlacement: true, isolateEmulatorThread: true}\n",
    );
    assert!(yaml.contains("isolateEmulatorThread"), "{yaml}");
    let (mut l, serial) = Launcher::boot(&yaml, &[]);
    assert!(serial.contains("GUEST-READY"), "{serial}");
    assert_eq!(l.domstate(), "running (unpaused)", "{}", l.log());
    assert!(l.log().contains("\"paused\":true"), "{}", l.log());
    let (ok, pins) = l.virsh(&["emulatorpin", &l.domain]);
    assert!(ok, "{pins}");
    let xml = l.domain_xml();
    assert!(xml.contains("<emulatorpin cpuset="), "{xml}");
    assert!(xml.contains("<vcpupin vcpu='0' cpuset="), "{xml}");
    l.stop(Duration::from_secs(90));
}

/// KubeVirt's backend storage standalone: with `--backend-storage DIR`,
/// the EFI variable store and the TPM state of a VMI asking for
/// persistence live in DIR (`nvram/`, `swtpm/`), outlive the launcher,
/// and the next run boots on them; without the flag the VMI is refused.
#[test]
fn persistent_efi_variables_and_tpm_state_live_on_backend_storage() {
    let yaml = guest_vmi("persist", "virtio").replace(
        "    memory: {guest: 128Mi}\n",
        "    memory: {guest: 256Mi}\n    firmware:\n      bootloader:\n        efi: {secureBoot: false, persistent: true}\n",
    ).replace("      rng: {}\n", "      rng: {}\n      tpm: {persistent: true}\n");
    assert!(yaml.contains("persistent: true"), "{yaml}");
    let (code, line) = crate::bad_input::refuse(&yaml, &[]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.contains("spec.domain.firmware.bootloader.efi.persistent: standalone mode has no backend storage; pass --backend-storage DIR"),
        "{line}"
    );

    let storage = tempfile::tempdir().unwrap();
    give_to_qemu_user(storage.path());
    let arg = storage.path().to_str().unwrap().to_owned();
    let vars = storage.path().join("nvram/persist_VARS.fd");
    let template = std::fs::read("/usr/share/OVMF/OVMF_VARS.fd").expect("ovmf installed");
    let mut inode = None;
    for run in 0..2 {
        let (mut l, serial) = Launcher::boot(&yaml, &["--backend-storage", &arg]);
        assert!(serial.contains("GUEST-READY"), "run {run}: {serial}");
        let xml = l.domain_xml();
        assert!(xml.contains("<tpm model='tpm-crb'>"), "{xml}");
        assert!(xml.contains("persistent_state='yes'"), "{xml}");
        l.stop(Duration::from_secs(90));
        // The variable store is in the backend storage, written by the
        // firmware (no longer the template), and the second run used the
        // same file rather than a fresh copy.
        let meta = std::fs::metadata(&vars).unwrap_or_else(|e| panic!("{}: {e}", vars.display()));
        assert_eq!(meta.len(), template.len() as u64);
        assert_ne!(
            std::fs::read(&vars).unwrap(),
            template,
            "run {run}: never written"
        );
        let ino = std::os::unix::fs::MetadataExt::ino(&meta);
        if let Some(first) = inode {
            assert_eq!(first, ino, "the second run replaced the variable store");
        }
        inode = Some(ino);
        // swtpm's state, per domain UUID, kept after the launcher is gone.
        let tpm_state: Vec<_> = walk(&storage.path().join("swtpm"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "permall"))
            .collect();
        assert_eq!(tpm_state.len(), 1, "run {run}: {tpm_state:?}");
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
