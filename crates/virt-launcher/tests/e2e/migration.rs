//! Live migration between two launchers on this host (issue 16), each in
//! its own private runtime (mount and PID namespaces, its own libvirt
//! daemon with a host UUID of its own), through `virt-launcher
//! migration-proxy` (virt-handler's proxies) and `ctl migrate`.
//!
//! One guest for everything: the cheap refusals first (the guest must keep
//! running on the source after each), a migration cancelled mid-way, one
//! whose target launcher is killed mid-way and one aborted past its
//! completion budget (each with a target launcher of its own, which must
//! then end cleanly, or leave nothing behind when killed), then the
//! migration itself. Cost: one guest boot (the targets' QEMUs are incoming
//! guests), four target launchers without a boot, ~3 s of migration under
//! TCG: about 55-60 s of test time.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::harness::{guest_vmi, launcher_bin, Launcher, Opts, BOOT_TIMEOUT, POD_WRAPPER};
use crate::protocol::handler_for;

/// The guest's uptime in seconds, read through the guest agent.
fn uptime(l: &Launcher) -> f64 {
    let (ok, out, err) = l.ctl(&["exec", "--", "cat", "/proc/uptime"]);
    assert!(ok, "exec cat /proc/uptime: {err}\n{}", l.log());
    out.split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("uptime: {out:?}"))
}

/// A request sent straight to the launcher's command server: (success,
/// message) of MigrateVirtualMachine with `vmi_json` and `options`.
fn migrate_raw(l: &Launcher, vmi_json: &str, options: &[u8]) -> (bool, String) {
    let socket = l.state.join("share/sockets/launcher-sock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = cmd::client::Client::connect(&socket).await.unwrap().cmd;
        let r = c
            .migrate_virtual_machine(cmd::proto::cmd::MigrationRequest {
                vmi: Some(cmd::proto::cmd::Vmi {
                    vmi_json: vmi_json.as_bytes().to_vec(),
                }),
                options: options.to_vec(),
            })
            .await
            .unwrap()
            .into_inner();
        (r.success, r.message)
    })
}

/// A VMIRequest command sent straight to the launcher: (success, message)
/// of FinalizeVirtualMachineMigration (`finalize`) or SignalTargetPodCleanup
/// (`cleanup`) for `vmi_json`.
fn vmi_command(l: &Launcher, command: &str, vmi_json: &str) -> (bool, String) {
    let socket = l.state.join("share/sockets/launcher-sock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = cmd::client::Client::connect(&socket).await.unwrap().cmd;
        let req = cmd::proto::cmd::VmiRequest {
            vmi: Some(cmd::proto::cmd::Vmi {
                vmi_json: vmi_json.as_bytes().to_vec(),
            }),
            options: None,
        };
        let r = match command {
            "finalize" => c.finalize_virtual_machine_migration(req).await,
            "cleanup" => c.signal_target_pod_cleanup(req).await,
            other => panic!("no command {other}"),
        }
        .unwrap()
        .into_inner();
        (r.success, r.message)
    })
}

/// A target launcher for `yaml` (`run --migration-target`), its command
/// server answering.
fn start_target(yaml: &str, uid: &str) -> Launcher {
    let mut t = Launcher::start(
        yaml,
        &Opts {
            uid: Some(uid),
            args: &["--migration-target"],
            // The pod name SignalTargetPodCleanup compares.
            env: &[("POD_NAME", std::ffi::OsStr::new("target-pod"))],
            ..Opts::default()
        },
    );
    let start = std::time::Instant::now();
    while !t.ctl(&["ping"]).0 {
        if let Some(st) = t.try_exit() {
            panic!("target exited ({st})\n{}", t.log());
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "target not ready\n{}",
            t.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t
}

/// `ctl migrate` from `source` to `target` with `options`: (success,
/// stdout, stderr); `wait` seconds for the end, or none.
fn ctl_migrate(
    source: &Launcher,
    target: &Launcher,
    migration_uid: &str,
    options: &str,
    wait: Option<&str>,
) -> (bool, String, String) {
    let socket = target.state.join("share/sockets/launcher-sock");
    let mut args = vec![
        "migrate",
        "--migration-uid",
        migration_uid,
        "--options",
        options,
        "--target-socket",
        socket.to_str().unwrap(),
    ];
    if let Some(w) = wait {
        args.extend(["--wait", w]);
    }
    source.ctl(&args)
}

/// The source's migration record (`Spec.Metadata.KubeVirt.Migration`)
/// once it has an end, within 60 s.
fn ended_record(source: &Launcher, migration_uid: &str) -> serde_json::Value {
    let start = std::time::Instant::now();
    loop {
        let (ok, out, err) = source.ctl(&["-o", "json", "domain"]);
        assert!(ok, "{err}");
        let dom: serde_json::Value = serde_json::from_str(&out).unwrap();
        let m = dom["Spec"]["Metadata"]["KubeVirt"]["Migration"].clone();
        if m["UID"] == migration_uid && m["EndTimestamp"].is_string() {
            return m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "migration {migration_uid} did not end: {m}\n{}",
            source.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The proxy process; stopped (SIGTERM) when dropped.
struct Proxy(Child);

impl Proxy {
    fn start(uid: &str, source: &Launcher, target: &Launcher, log: &Path) -> Proxy {
        let log = std::fs::File::create(log).unwrap();
        let child = Command::new(launcher_bin())
            .arg("migration-proxy")
            .args(["--uid", uid, "--block-migration"])
            .arg("--source-share")
            .arg(source.state.join("share"))
            .arg("--target-share")
            .arg(target.state.join("share"))
            .arg("--target-libvirt-socket")
            .arg(target.state.join("libvirt/run/libvirt-sock"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn migration-proxy");
        let mut p = Proxy(child);
        // It prints "ready" once every socket listens.
        let mut out = p.0.stdout.take().unwrap();
        let mut buf = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut buf).expect("proxy ready");
        assert_eq!(&buf, b"ready\n");
        p
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.0.wait();
    }
}

#[test]
fn migrates_between_two_launchers() {
    let uid = format!("mig-{}", std::process::id());
    let yaml = guest_vmi("migrating", "virtio");
    let mut source = Launcher::start(
        &yaml,
        &Opts {
            uid: Some(&uid),
            ..Opts::default()
        },
    );
    source.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let identity =
        format!(r#"{{"metadata":{{"name":"migrating","namespace":"e2e","uid":"{uid}"}}"#);
    let with_state = format!(
        r#"{identity},"status":{{"migrationMethod":"BlockMigration","migrationTransport":"Unix","migrationState":{{"migrationUID":"m-bad"}}}}}}"#
    );

    // Bad input, in KubeVirt's words; nothing starts.
    let (ok, msg) = migrate_raw(&source, &with_state, b"{\"ProgressTimeout\": soon}");
    assert!(!ok);
    assert!(
        msg.starts_with("no valid migration options object present in command server request: "),
        "{msg}"
    );
    let (ok, msg) = migrate_raw(&source, &with_state, b"");
    assert_eq!(
        (ok, msg.as_str()),
        (
            false,
            "migration options object not present in command server request"
        )
    );
    let (ok, msg) = migrate_raw(&source, &format!("{identity}}}"), b"{}");
    assert_eq!(
        (ok, msg.as_str()),
        (false, "cannot migrate VMI until migrationState is ready")
    );
    let (ok, _, err) = source.ctl(&["migrate-cancel"]);
    assert!(!ok);
    assert!(
        err.contains("failed to cancel migration - vmi is not migrating"),
        "{err}"
    );
    // No proxy yet: the source's libvirt finds no socket to the target;
    // the migration fails with libvirt's reason, the guest runs on.
    let (ok, _, err) = source.ctl(&["migrate", "--migration-uid", "m-bad", "--wait", "60"]);
    assert!(!ok, "a migration without a proxy succeeded");
    // KubeVirt records libvirt's error as its Go binding prints it.
    assert!(
        err.contains("virError(Code=")
            && err.contains(&format!(
                "Failed to connect socket to '/var/run/kubevirt/migrationproxy/{uid}-source.sock'"
            )),
        "{err}"
    );
    // The same migration again: KubeVirt's "already executed".
    let (ok, msg) = migrate_raw(&source, &with_state, b"{}");
    assert!(!ok);
    assert!(
        msg.starts_with("migration job m-bad already executed, finished at ")
            && msg.contains("failed: true, abortStatus: "),
        "{msg}"
    );
    // The guest still runs on the source (the agent answers).
    uptime(&source);

    // Cancelled mid-way (1 MiB/s: minutes to go): KubeVirt's abort; the
    // guest runs on at the source, the target's launcher ends cleanly.
    let slow = r#"{"Bandwidth":"1Mi","ProgressTimeout":150,"CompletionTimeoutPerGiB":150}"#;
    let mut target = start_target(&yaml, &uid);
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    let (ok, _, err) = ctl_migrate(&source, &target, "m-cancel", slow, None);
    assert!(ok, "{err}");
    let start = std::time::Instant::now();
    while !source
        .virsh(&["domjobinfo", &source.domain])
        .1
        .contains("Unbounded")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no migration job\n{}",
            source.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The same migration again while it runs: a no-op success (KubeVirt).
    let (ok, msg) = migrate_raw(&source, &with_state.replace("m-bad", "m-cancel"), b"{}");
    assert!(ok, "{msg}");
    let (ok, _, err) = source.ctl(&["migrate-cancel"]);
    assert!(ok, "{err}");
    // Cancelling again while the abort is under way: success too.
    let (ok, _, err) = source.ctl(&["migrate-cancel"]);
    assert!(
        ok || err.contains("failed to cancel migration - vmi is not migrating"),
        "{err}"
    );
    let m = ended_record(&source, "m-cancel");
    assert_eq!(
        (&m["Failed"], &m["AbortStatus"]),
        (&true.into(), &"Succeeded".into()),
        "{m}"
    );
    let reason = m["FailureReason"].as_str().unwrap_or("");
    // Whichever of the abort and libvirt's answer lands first (as in KubeVirt).
    assert!(
        reason == "Live migration aborted " || reason.contains("canceled by client"),
        "{m}"
    );
    target.wait_success(Duration::from_secs(60));
    assert!(target.processes_left().is_empty(), "{}", target.log());
    drop(proxy);
    uptime(&source);

    // The target's launcher killed mid-way: the source records the failure
    // and the guest runs on there.
    let mut target = start_target(&yaml, &uid);
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    let (ok, _, err) = ctl_migrate(&source, &target, "m-kill", slow, None);
    assert!(ok, "{err}");
    let start = std::time::Instant::now();
    while !source
        .virsh(&["domjobinfo", &source.domain])
        .1
        .contains("Unbounded")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no migration job\n{}",
            source.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    target.signal(nix::sys::signal::Signal::SIGKILL);
    let st = target.wait_exit(Duration::from_secs(30));
    assert!(!st.success());
    let m = ended_record(&source, "m-kill");
    assert_eq!(m["Failed"], true, "{m}");
    assert!(
        m["FailureReason"].as_str().is_some_and(|r| !r.is_empty()),
        "{m}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        target.processes_left().is_empty(),
        "left by the killed target"
    );
    drop(proxy);
    uptime(&source);
    let (ok, out, err) = source.ctl(&["domain"]);
    assert!(ok && out.contains("Running"), "{out}{err}");

    // Past the completion budget (1 s per GB, 1 MiB/s): KubeVirt's abort.
    let mut target = start_target(&yaml, &uid);
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    let budget = r#"{"Bandwidth":"1Mi","ProgressTimeout":150,"CompletionTimeoutPerGiB":1}"#;
    let (ok, _, err) = ctl_migrate(&source, &target, "m-slow", budget, Some("60"));
    assert!(!ok, "a 1 MiB/s migration kept its 1 s budget");
    assert!(
        err.contains("Live migration is not completed after 1 seconds and has been aborted"),
        "{err}"
    );
    let m = ended_record(&source, "m-slow");
    assert_eq!(m["AbortStatus"], "Succeeded", "{m}");
    target.wait_success(Duration::from_secs(60));
    assert!(target.processes_left().is_empty(), "{}", target.log());
    drop(proxy);
    let before = uptime(&source);

    // The migration: data written to the emptyDisk before it, read back on
    // the target after it (block migration of the local disks).
    let (ok, _, err) = source.ctl(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo migrated-scratch-data > /dev/vdb && sync",
    ]);
    assert!(ok, "{err}");
    let mut target = start_target(&yaml, &uid);
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    let defaults = r#"{"ProgressTimeout":150,"CompletionTimeoutPerGiB":150}"#;
    let (ok, out, err) = ctl_migrate(&source, &target, "m-1", defaults, Some("180"));
    assert!(
        ok,
        "migration failed: {err}\n--- source ---\n{}\n--- target ---\n{}",
        source.log(),
        target.log()
    );
    let record: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(record["UID"], "m-1");
    assert_eq!(record["Failed"], false);
    assert_eq!(record["Mode"], "PreCopy");
    assert!(record["StartTimestamp"].is_string() && record["EndTimestamp"].is_string());

    // The source is done: its QEMU left with the Migrated reason.
    source.wait_success(Duration::from_secs(60));
    let log = source.log();
    assert!(
        log.contains(r#""reason":"Migrated""#) && log.contains("the domain migrated away"),
        "{log}"
    );
    let left = source.processes_left();
    assert!(left.is_empty(), "left by the source: {left:?}");

    // The guest runs on the target, never restarted.
    let after = uptime(&target);
    assert!(
        after > before,
        "uptime {after} on the target, {before} on the source: the guest restarted"
    );
    let (ok, out, err) = target.ctl(&["exec", "--", "head", "-c", "21", "/dev/vdb"]);
    assert!(ok, "{err}");
    assert_eq!(out, "migrated-scratch-data");
    let (ok, out, err) = target.ctl(&["-o", "json", "domain"]);
    assert!(ok, "{err}");
    let dom: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(dom["Status"]["Status"], "Running", "{dom}");
    let m = &dom["Spec"]["Metadata"]["KubeVirt"]["Migration"];
    assert_eq!(m["UID"], "m-1", "{dom}");
    assert!(m["EndTimestamp"].is_string(), "{dom}");
    let (ok, out, err) = target.ctl(&["-o", "json", "guestinfo"]);
    assert!(ok, "{err}");
    let info: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(info["guestAgentVersion"].is_string(), "{info}");

    // FinalizeVirtualMachineMigration: the guest's clock set from the host
    // through the agent (KubeVirt's setGuestTime, in the background).
    let m1 = format!(
        r#"{identity},"status":{{"migrationState":{{"migrationUID":"m-1","targetPod":"target-pod"}}}}}}"#
    );
    let (ok, msg) = vmi_command(&target, "finalize", &m1);
    assert!(ok, "{msg}");
    let start = std::time::Instant::now();
    while !target
        .log()
        .contains("guest VM time sync finished successfully")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no guest time sync\n{}",
            target.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(proxy);
    // SignalTargetPodCleanup: another pod's name changes nothing; this
    // pod's (POD_NAME) ends the target's wait: the launcher stops.
    let other = m1.replace("target-pod", "another-pod");
    let (ok, msg) = vmi_command(&target, "cleanup", &other);
    assert!(ok, "{msg}");
    std::thread::sleep(Duration::from_millis(500));
    uptime(&target);
    let (ok, msg) = vmi_command(&target, "cleanup", &m1);
    assert!(ok, "{msg}");
    target.wait_success(Duration::from_secs(90));
    assert!(
        target
            .log()
            .contains("received early exit signal - stop waiting for e2e_migrating"),
        "{}",
        target.log()
    );
    target.assert_nothing_left();
}

/// A pod-mode launcher waiting for virt-handler (the stand-in), for the
/// migrating VMI `uid`, in a pod named `pod` (`POD_NAME`), with the
/// filesystem claim `data` mounted from `claim`.
fn pod_for_handler(yaml: &str, uid: &str, pod: &str, claim: &Path) -> Launcher {
    Launcher::start_wrapped(
        yaml,
        &Opts {
            pod: true,
            handler: true,
            uid: Some(uid),
            env: &[("POD_NAME", std::ffi::OsStr::new(pod))],
            pod_mounts_rw: &[("vmi-disks/data", claim)],
            ..Opts::default()
        },
        POD_WRAPPER,
    )
}

/// The migration as virt-handler drives it (issue 16): two pod-mode
/// launchers, each on its "node" with its own virt-handler (the stand-in's
/// two migration controllers, `tests/handler/virt_handler/migration.py`),
/// virt-controller's hand-over played by the stand-in. It checks, in
/// KubeVirt's order, the source launcher's events (MODIFIED with the
/// migration started, with it ended, Shutoff/Migrated, the final deletion)
/// and the target's (ADDED with the source's migration record, Running, the
/// end), the VMI's migrationState (detected, ready, completed, PreCopy,
/// moved to the target node), the calls (SyncMigrationTarget, Migrate,
/// Finalize twice, the source's DeleteVirtualMachine), and the target's
/// answers (GetDomain, GetGuestInfo, Exec: the uptime grew). The source
/// launcher then exits 0; the target runs on until its pod is deleted.
/// Cost: one guest boot, ~5 s of migration under TCG.
#[test]
fn migrates_under_virt_handler() {
    let uid = format!("migh-{}", std::process::id());
    // A filesystem claim both pods mount from one directory (shared
    // storage, as a ReadWriteMany claim): its disk.img is not copied; on
    // this host's local file system libvirt calls that unsafe, hence the
    // cluster's unsafeMigrationOverride.
    let yaml = guest_vmi("hmigrating", "virtio")
        .replace(
            "      - name: scratch\n        disk: {bus: virtio}\n",
            "      - name: scratch\n        disk: {bus: virtio}\n      - name: data\n        disk: {bus: virtio}\n",
        )
        .replace(
            "    emptyDisk: {capacity: 64Mi}\n",
            "    emptyDisk: {capacity: 64Mi}\n  - name: data\n    persistentVolumeClaim: {claimName: shared-claim}\nstatus:\n  volumeStatus:\n  - name: data\n    target: vdc\n    persistentVolumeClaimInfo: {claimName: shared-claim, volumeMode: Filesystem, accessModes: [ReadWriteMany], capacity: {storage: 64Mi}, requests: {storage: 64Mi}, filesystemOverhead: '0'}\n",
        );
    assert!(yaml.contains("shared-claim") && yaml.contains("name: data\n        disk"));
    let claim = tempfile::tempdir().unwrap();
    crate::harness::give_to_qemu_user(claim.path());
    let mut source = pod_for_handler(&yaml, &uid, "virt-launcher-source", claim.path());
    let mut target = pod_for_handler(&yaml, &uid, "target-pod", claim.path());
    let target_share = target.dir.path().join("share");
    let target_libvirt = target.state.join("libvirt/run/libvirt-sock");
    let target_events = target.dir.path().join("events.jsonl");
    let bin = launcher_bin();
    let h = handler_for(
        &source,
        &yaml,
        &[
            "--migrate-to",
            target_share.to_str().unwrap(),
            "--migrate-to-libvirt-socket",
            target_libvirt.to_str().unwrap(),
            "--launcher",
            bin.to_str().unwrap(),
            "--target-events",
            target_events.to_str().unwrap(),
            "--migration-config",
            r#"{"unsafeMigrationOverride": true}"#,
            "--checksum-device",
            "/dev/vdb",
            "--checksum-device",
            "/dev/vdc",
        ],
    );
    let out = h.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("\nOK"),
        "virt-handler stand-in:\n{stdout}\n{}\n--- source ---\n{}\n--- target ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        source.log(),
        target.log()
    );
    eprintln!("virt-handler stand-in:\n{stdout}");
    // The source launcher is done once its domain left.
    source.wait_success(Duration::from_secs(60));
    assert!(
        source.log().contains("the domain migrated away"),
        "{}",
        source.log()
    );
    let left = source.processes_left();
    assert!(left.is_empty(), "left by the source: {left:?}");
    // The target pod deleted: its launcher ends, nothing left.
    target.signal(nix::sys::signal::Signal::SIGTERM);
    target.wait_exit(Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(500));
    let left = target.processes_left();
    assert!(left.is_empty(), "left by the target: {left:?}");
}
