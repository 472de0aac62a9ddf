//! Hook sidecars end to end (`--hook-sidecars N`): a real sidecar written
//! in Python with grpcio (`tests/hooks/hook-sidecar`, playing KubeVirt's
//! sidecar shim with its smbios hook) serves KubeVirt's hook protocol on a
//! socket below a directory that `run --hook-sidecar-dir` mounts where
//! KubeVirt's pod has it (`/var/run/kubevirt-hooks`). The guest reads the
//! SMBIOS base board vendor the sidecar set in OnDefineDomain; the
//! sidecar's PreCloudInitIso adds a line to the user data the guest runs;
//! the sidecar gets Shutdown when the launcher exits. Bad input: a socket
//! that never answers (`--qemu-timeout`), a sidecar answering XML that does
//! not parse (on the first define, and on the second of KubeVirt's two), a
//! sidecar that crashes in the call: clear errors naming the sidecar, no
//! domain left defined, nothing left running.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{
    guest_image, launcher_bin, processes_mentioning, repo_root, require_stack, Launcher,
    BOOT_TIMEOUT,
};

/// A running `tests/hooks/hook-sidecar`, killed when dropped.
pub(crate) struct Sidecar {
    child: Child,
    log: PathBuf,
    socket: PathBuf,
}

impl Sidecar {
    /// Starts the sidecar in `<hooks>/hook-sidecar-<i>` (as KubeVirt's pod
    /// has sidecar i) with `args`; waits until its socket listens.
    pub(crate) fn start(hooks: &Path, i: usize, args: &[&str]) -> Sidecar {
        Self::start_as(hooks, i, args, false)
    }

    /// [`Sidecar::start`]; with `as_qemu`, as uid/gid 107 (a sidecar
    /// container of a non-root pod), its directories given to 107 first.
    pub(crate) fn start_as(hooks: &Path, i: usize, args: &[&str], as_qemu: bool) -> Sidecar {
        let dir = hooks.join(format!("hook-sidecar-{i}"));
        fs::create_dir_all(&dir).unwrap();
        let ready = hooks.join(format!("ready-{i}"));
        let log = hooks.join(format!("sidecar-{i}.log"));
        let script = repo_root().join("tests/hooks/hook-sidecar");
        // As 107, Debian's python3 (.ci/install gives it grpcio): a
        // python3 found first on root's PATH may live under /root, which
        // 107 cannot reach.
        let mut cmd = if as_qemu {
            let mut c = Command::new("/usr/bin/python3");
            c.arg(&script);
            c
        } else {
            Command::new(&script)
        };
        if as_qemu {
            crate::harness::give_to_qemu_user(hooks);
            crate::harness::give_to_qemu_user(&dir);
            std::os::unix::process::CommandExt::uid(&mut cmd, 107);
            std::os::unix::process::CommandExt::gid(&mut cmd, 107);
            cmd.env("HOME", &dir);
        }
        let child = cmd
            .arg("--dir")
            .arg(&dir)
            .arg("--ready-file")
            .arg(&ready)
            .args(args)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&log).unwrap())
            .stderr(fs::File::options().append(true).open(&log).unwrap())
            .spawn()
            .expect("python3 tests/hooks/hook-sidecar (python3-grpcio: bash .ci/install)");
        let mut s = Sidecar {
            child,
            log,
            socket: PathBuf::new(),
        };
        let start = Instant::now();
        while !ready.exists() {
            if let Some(st) = s.child.try_wait().unwrap() {
                panic!("the sidecar exited ({st}) before listening:\n{}", s.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the sidecar did not listen within 60 s:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        s.socket = PathBuf::from(fs::read_to_string(&ready).unwrap());
        s
    }

    pub(crate) fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The socket as the launcher sees it (below `/var/run/kubevirt-hooks`).
    fn launcher_path(&self) -> String {
        let sub = self.socket.parent().unwrap().file_name().unwrap();
        let name = self.socket.file_name().unwrap();
        format!(
            "/var/run/kubevirt-hooks/{}/{}",
            sub.to_string_lossy(),
            name.to_string_lossy()
        )
    }

    /// Waits for the sidecar to exit by itself (after Shutdown).
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) const VENDOR: &str = "Hooked Boards & Co";

/// The test guest with a NoCloud volume running `script`, and the smbios
/// hook's annotation.
pub(crate) fn hooked_vmi(name: &str, script: &str) -> String {
    let block: String = script.lines().map(|l| format!("        {l}\n")).collect();
    format!(
        "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: {name}
  namespace: e2e
  annotations:
    smbios.vm.kubevirt.io/baseBoardManufacturer: \"{VENDOR}\"
    hooks.kubevirt.io/hookSidecars: '[{{\"args\": [\"--version\", \"v1alpha3\"], \"image\": \"quay.io/kubevirt/sidecar-shim\"}}]'
spec:
  terminationGracePeriodSeconds: 5
  domain:
    firmware: {{uuid: 7a1c3a44-8d2e-4b6f-9a10-0c2d3e4f5a6b}}
    memory: {{guest: 128Mi}}
    devices:
      autoattachPodInterface: false
      disks:
      - name: containerdisk
        bootOrder: 1
        disk: {{bus: virtio}}
      - name: cloudinit
        disk: {{bus: virtio}}
  volumes:
  - name: containerdisk
    containerDisk: {{image: test-guest}}
  - name: cloudinit
    cloudInitNoCloud:
      userData: |
{block}"
    )
}

#[test]
fn the_guest_reads_the_smbios_vendor_the_sidecar_set() {
    let hooks = tempfile::tempdir().unwrap();
    let mut sidecar = Sidecar::start(
        hooks.path(),
        0,
        &[
            "--version",
            "v1alpha3",
            "--pre-cloud-init",
            "PRECLOUD-MARKER",
        ],
    );
    let script = "#!/bin/sh\necho \"BOARD-VENDOR $(cat /sys/class/dmi/id/board_vendor)\"\n";
    let y = hooked_vmi("hooked", script);
    let dir = hooks.path().display().to_string();
    let mut l = Launcher::start_args(&y, &["--hook-sidecars", "1", "--hook-sidecar-dir", &dir]);
    let serial = l.wait_serial("GUEST-USERDATA-DONE", 1, BOOT_TIMEOUT);
    assert!(
        serial.contains(&format!("BOARD-VENDOR {VENDOR}")),
        "{serial}\n--- sidecar ---\n{}",
        sidecar.log()
    );
    // PreCloudInitIso's line ran too, after the VMI's own.
    assert!(serial.contains("PRECLOUD-MARKER"), "{serial}");
    assert!(serial.contains("GUEST-USERDATA-DONE exit=0"), "{serial}");
    let xml = l.domain_xml();
    assert!(
        xml.contains("<smbios mode='sysinfo'/>")
            && xml.contains("<entry name='manufacturer'>Hooked Boards &amp; Co</entry>"),
        "{xml}"
    );
    let log = sidecar.log();
    // KubeVirt's JSON shapes reached the sidecar.
    let got = log
        .lines()
        .find_map(|l| l.strip_prefix("HOOK-SIDECAR PreCloudInitIso got "))
        .unwrap_or_else(|| panic!("no PreCloudInitIso call:\n{log}"));
    let got: serde_json::Value = serde_json::from_str(got).unwrap();
    assert_eq!(got["DataSource"], "noCloud", "{got}");
    assert_eq!(got["VolumeName"], "cloudinit", "{got}");
    assert_eq!(
        got["NoCloudMetaData"]["instance-id"], "7a1c3a44-8d2e-4b6f-9a10-0c2d3e4f5a6b",
        "{got}"
    );
    assert_eq!(got["ConfigDriveMetaData"], serde_json::Value::Null, "{got}");
    assert!(got["UserData"].as_str().unwrap().contains("BOARD-VENDOR"));
    let llog = l.log();
    assert!(
        llog.contains("Collected all requested hook sidecar sockets"),
        "{llog}"
    );
    assert!(llog.contains(&sidecar.launcher_path()), "{llog}");
    l.stop_and_check(Duration::from_secs(120));
    // Shutdown reached the sidecar, which exits then (as KubeVirt's shim).
    assert!(
        sidecar.wait_exit(Duration::from_secs(10)),
        "sidecar still running after the launcher's exit:\n{}",
        sidecar.log()
    );
    let log = sidecar.log();
    assert!(log.contains("HOOK-SIDECAR Shutdown"), "{log}");
    // Each define went through OnDefineDomain (one here: no placeholders).
    assert_eq!(
        log.matches("HOOK-SIDECAR OnDefineDomain").count(),
        1,
        "{log}"
    );
}

#[test]
fn in_a_pod_sidecars_of_older_versions_apply_in_kubevirts_order() {
    // KubeVirt's pod: the sockets volume at /var/run/kubevirt-hooks, one
    // subdirectory per sidecar; the VMI from STANDALONE_VMI. Sidecar 0
    // speaks v1alpha1 (OnDefineDomain only), sidecar 1 v1alpha2 (and
    // PreCloudInitIso; no Shutdown): both write the base board, sidecar 1
    // last.
    let hooks = tempfile::tempdir().unwrap();
    let s0 = Sidecar::start(
        hooks.path(),
        0,
        &["--version", "v1alpha1", "--vendor-suffix", " v1alpha1"],
    );
    let mut s1 = Sidecar::start(
        hooks.path(),
        1,
        &[
            "--version",
            "v1alpha2",
            "--vendor-suffix",
            " v1alpha2",
            "--pre-cloud-init",
            "PRECLOUD-V1ALPHA2",
        ],
    );
    let script = "#!/bin/sh\necho \"BOARD-VENDOR $(cat /sys/class/dmi/id/board_vendor)\"\n";
    let y = hooked_vmi("hooked-pod", script);
    let mut l = Launcher::start_wrapped(
        &y,
        &crate::harness::Opts {
            pod: true,
            args: &["--hook-sidecars", "2"],
            env: &[("POD_HOOKS", hooks.path().as_os_str())],
            ..crate::harness::Opts::default()
        },
        crate::harness::POD_WRAPPER,
    );
    let serial = l.wait_serial("GUEST-USERDATA-DONE", 1, BOOT_TIMEOUT);
    assert!(
        serial.contains(&format!("BOARD-VENDOR {VENDOR} v1alpha2")),
        "{serial}\n--- sidecar 0 ---\n{}\n--- sidecar 1 ---\n{}",
        s0.log(),
        s1.log()
    );
    assert!(serial.contains("PRECLOUD-V1ALPHA2"), "{serial}");
    assert!(s0.log().contains("HOOK-SIDECAR OnDefineDomain"));
    assert!(!s0.log().contains("PreCloudInitIso"));
    let log = l.log();
    assert!(log.contains("\"version\":\"v1alpha1\""), "{log}");
    assert!(log.contains("\"version\":\"v1alpha2\""), "{log}");
    l.stop_and_check(Duration::from_secs(120));
    // No Shutdown below v1alpha3: sidecar 1 is still there.
    assert!(!s1.wait_exit(Duration::from_millis(500)), "{}", s1.log());
    assert!(!s1.log().contains("Shutdown"), "{}", s1.log());
}

/// Runs `run` on `yaml` with `args` (no `--keep-state`) until it exits;
/// returns (exit code, stderr, how long it took). Asserts that the state
/// directory is gone and nothing mentions the VMI's UID.
fn run_to_exit(yaml: &str, args: &[&str]) -> (i32, String, Duration) {
    require_stack();
    let dir = tempfile::tempdir().unwrap();
    let vmi = dir.path().join("vmi.yaml");
    fs::write(&vmi, yaml).unwrap();
    let state = dir.path().join("state");
    let uid = format!("hooks-{}-{}", std::process::id(), rand_suffix());
    let start = Instant::now();
    let out = Command::new(launcher_bin())
        .arg("run")
        .arg(&vmi)
        .arg("--use-emulation")
        .arg("--state-dir")
        .arg(&state)
        .args(["--uid", &uid])
        .arg("--container-disk")
        .arg(format!("containerdisk={}", guest_image().display()))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!state.exists(), "state left behind:\n{stderr}");
    assert!(
        processes_mentioning(&uid).is_empty(),
        "processes left:\n{stderr}"
    );
    (out.status.code().unwrap_or(-1), stderr, took)
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(u64::from(std::process::id()));
    h.finish() % 1_000_000
}

#[test]
fn a_hook_socket_that_never_answers_times_out_at_qemu_timeout() {
    let hooks = tempfile::tempdir().unwrap();
    let _silent = Sidecar::start(hooks.path(), 0, &["--silent"]);
    let dir = hooks.path().display().to_string();
    let (code, stderr, took) = run_to_exit(
        &crate::harness::guest_vmi("hook-silent", "virtio"),
        &[
            "--hook-sidecars",
            "1",
            "--hook-sidecar-dir",
            &dir,
            "--qemu-timeout",
            "3s",
        ],
    );
    assert_eq!(code, 1, "{stderr}");
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("virt-launcher: Failed to collect all expected sidecar hook sockets within given timeout (0 of 1 hook sidecars answered Info in /var/run/kubevirt-hooks within 3 s)"),
        "{stderr}"
    );
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(30),
        "{took:?}"
    );
    // Nothing was started: the sidecars come before libvirt.
    assert!(!stderr.contains("\"msg\":\"started\""), "{stderr}");
}

#[test]
fn a_termination_signal_while_waiting_for_sidecars_stops_at_once() {
    let hooks = tempfile::tempdir().unwrap();
    let _silent = Sidecar::start(hooks.path(), 0, &["--silent"]);
    let dir = hooks.path().display().to_string();
    let mut l = Launcher::start_args(
        &crate::harness::guest_vmi("hook-sigterm", "virtio"),
        &[
            "--hook-sidecars",
            "1",
            "--hook-sidecar-dir",
            &dir,
            "--qemu-timeout",
            "300s",
        ],
    );
    let start = Instant::now();
    while !l.log().contains("Sidecar server might not be ready yet") {
        assert!(start.elapsed() < Duration::from_secs(60), "{}", l.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let sent = Instant::now();
    l.signal(nix::sys::signal::Signal::SIGTERM);
    l.wait_success_and_check(Duration::from_secs(20));
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "{:?}",
        sent.elapsed()
    );
    let log = l.log();
    assert!(
        log.contains("termination signal while waiting for the hook sidecars"),
        "{log}"
    );
    assert!(!log.contains("\"msg\":\"started\""), "{log}");
}

#[test]
fn a_sidecar_answering_invalid_xml_leaves_no_domain() {
    let hooks = tempfile::tempdir().unwrap();
    let sidecar = Sidecar::start(hooks.path(), 0, &["--on-define", "garbage"]);
    let dir = hooks.path().display().to_string();
    let (code, stderr, _) = run_to_exit(
        &crate::harness::guest_vmi("hook-garbage", "virtio"),
        &["--hook-sidecars", "1", "--hook-sidecar-dir", &dir],
    );
    assert_eq!(code, 1, "{stderr}");
    let last = stderr.lines().last().unwrap_or("");
    let want = format!(
        "virt-launcher: hook sidecar {}: OnDefineDomain returned an invalid domain: ",
        sidecar.launcher_path()
    );
    assert!(last.starts_with(&want), "{want}\n{stderr}");
    // libvirt never had the domain: the final clean-up found none to
    // undefine, and no define was logged.
    assert!(!stderr.contains("domain undefined"), "{stderr}");
    assert!(!stderr.contains("domain defined"), "{stderr}");
    assert!(sidecar.log().contains("HOOK-SIDECAR OnDefineDomain"));
}

#[test]
fn invalid_xml_on_the_second_define_undefines_the_first() {
    // A NIC makes KubeVirt's define two defines (with placeholder
    // interfaces, then without); the sidecar fails the second one.
    let hooks = tempfile::tempdir().unwrap();
    let sidecar = Sidecar::start(hooks.path(), 0, &["--on-define", "garbage-second"]);
    let dir = hooks.path().display().to_string();
    let (code, stderr, _) = run_to_exit(
        &crate::network::masquerade_vmi("hook-second"),
        &[
            "--setup-pod-network",
            "--hook-sidecars",
            "1",
            "--hook-sidecar-dir",
            &dir,
        ],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("OnDefineDomain returned an invalid domain"),
        "{stderr}"
    );
    assert_eq!(
        sidecar.log().matches("HOOK-SIDECAR OnDefineDomain").count(),
        2,
        "{}",
        sidecar.log()
    );
    assert!(
        stderr.contains("define failed half-way: undefining"),
        "{stderr}"
    );
    // The half-defined domain was gone before the final clean-up.
    assert!(!stderr.contains("domain undefined"), "{stderr}");
}

#[test]
fn a_sidecar_renaming_the_domain_is_refused() {
    let hooks = tempfile::tempdir().unwrap();
    let sidecar = Sidecar::start(hooks.path(), 0, &["--on-define", "rename"]);
    let dir = hooks.path().display().to_string();
    let (code, stderr, _) = run_to_exit(
        &crate::harness::guest_vmi("hook-rename", "virtio"),
        &["--hook-sidecars", "1", "--hook-sidecar-dir", &dir],
    );
    assert_eq!(code, 1, "{stderr}");
    let last = stderr.lines().last().unwrap_or("");
    let want = format!(
        "virt-launcher: hook sidecar {}: OnDefineDomain returned an invalid domain: the domain renamed to \"e2e_hook-rename-renamed\" (it is \"e2e_hook-rename\")",
        sidecar.launcher_path()
    );
    assert_eq!(last, want, "{stderr}");
    assert!(!stderr.contains("domain undefined"), "{stderr}");
}

#[test]
fn a_sidecar_that_crashes_in_the_call_is_named() {
    let hooks = tempfile::tempdir().unwrap();
    let sidecar = Sidecar::start(hooks.path(), 0, &["--on-define", "crash"]);
    let dir = hooks.path().display().to_string();
    let (code, stderr, _) = run_to_exit(
        &crate::harness::guest_vmi("hook-crash", "virtio"),
        &["--hook-sidecars", "1", "--hook-sidecar-dir", &dir],
    );
    assert_eq!(code, 1, "{stderr}");
    let last = stderr.lines().last().unwrap_or("");
    let want = format!(
        "virt-launcher: hook sidecar {}: OnDefineDomain failed: ",
        sidecar.launcher_path()
    );
    assert!(last.starts_with(&want), "{want}\n{stderr}");
    assert!(!stderr.contains("domain undefined"), "{stderr}");
}

#[test]
fn standalone_hook_flags_are_checked_before_anything_starts() {
    let y = crate::harness::guest_vmi("hook-flags", "virtio");
    let (code, line) = crate::bad_input::refuse(&y, &["--hook-sidecars", "2"]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("virt-launcher: --hook-sidecars: 2 hook sidecars wanted, but standalone mode has no hook sidecar directory: pass --hook-sidecar-dir DIR"),
        "{line}"
    );
    let f = tempfile::NamedTempFile::new().unwrap();
    let p = f.path().display().to_string();
    let (code, line) =
        crate::bad_input::refuse(&y, &["--hook-sidecars", "1", "--hook-sidecar-dir", &p]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.contains("--hook-sidecar-dir: ") && line.contains("is not a directory"),
        "{line}"
    );
    let d = tempfile::tempdir().unwrap();
    let p = d.path().display().to_string();
    let (code, line) = crate::bad_input::refuse(&y, &["--hook-sidecar-dir", &p]);
    assert_eq!(code, 2, "{line}");
    assert!(line.contains("given without --hook-sidecars N"), "{line}");
}
