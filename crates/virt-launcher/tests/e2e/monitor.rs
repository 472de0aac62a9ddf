//! `virt-launcher-monitor` over the real launcher in pod mode (KubeVirt's
//! command line, the VMI in `STANDALONE_VMI`), with a real TCG guest.
//!
//! The pod is played as the harness's pod mode does (a mount namespace with
//! the pod's directories, here also a network namespace), and, as in a pod,
//! the monitor is PID 1 of a PID namespace of its own (`unshare --pid --fork --mount-proc`): when it exits
//! the kernel ends whatever is left, and its search for a leftover QEMU sees
//! only the pod's processes.
//!
//! The monitor is found next to the launcher (`target/<profile>/`); a
//! workspace build (`cargo nextest run --workspace`, `test.sh`) makes it.

use std::fs;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::harness::{alive, guest_vmi, launcher_bin, Launcher, Opts, BOOT_TIMEOUT, POD_WRAPPER};

/// Longest wait for the monitor's exit (the guest's shutdown under TCG).
const EXIT: Duration = Duration::from_secs(120);

fn monitor_bin() -> PathBuf {
    let m = launcher_bin().with_file_name("virt-launcher-monitor");
    assert!(
        m.is_file(),
        "{} is missing: build it (cargo build -p virt-launcher-monitor, or a workspace build)",
        m.display()
    );
    m
}

/// The harness's pod script, run as PID 1 of a new PID namespace and ending
/// in the monitor (its first argument) instead of the launcher (its second,
/// which the monitor finds by itself next to its own binary).
fn wrapper() -> Vec<String> {
    let script = POD_WRAPPER
        .iter()
        .find(|a| a.contains("exec \"$@\""))
        .expect("the harness's pod script (ends in exec \"$@\")");
    let (head, _) = script
        .rsplit_once("exec \"$@\"")
        .expect("the pod script ends in exec \"$@\"");
    let script = format!("{head}m=$1; shift 2; exec \"$m\" \"$@\"\n");
    let monitor = monitor_bin();
    vec![
        "unshare".into(),
        "--mount".into(),
        "--pid".into(),
        "--fork".into(),
        // The pod's network namespace (the guests here have no interface):
        // with `lo` down the monitor's Istio probe fails at once instead of
        // retrying "connection refused" for 7.8 s.
        "--net".into(),
        "--mount-proc".into(),
        "sh".into(),
        "-c".into(),
        script,
        "sh".into(),
        monitor.to_string_lossy().into_owned(),
    ]
}

/// Starts the monitor in a played pod with `args` added.
fn start(name: &str, args: &[&str]) -> Launcher {
    let w = wrapper();
    let w: Vec<&str> = w.iter().map(String::as_str).collect();
    Launcher::start_wrapped(
        &guest_vmi(name, "virtio"),
        &Opts {
            pod: true,
            args,
            ..Opts::default()
        },
        &w,
    )
}

/// The direct children (host pids) of `pid`.
fn children(pid: u32) -> Vec<u32> {
    fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The monitor: `unshare`'s child, PID 1 of the pod's PID namespace.
fn monitor_pid(l: &Launcher) -> u32 {
    let start = Instant::now();
    loop {
        let exe = monitor_bin().canonicalize().expect("monitor path");
        if let Some(p) = children(l.pid())
            .into_iter()
            .find(|p| fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == exe))
        {
            return p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no monitor below {}",
            l.pid()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// Every process of the pod (host pids), by walking down from the monitor.
fn pod_processes(monitor: u32) -> Vec<u32> {
    let mut out = vec![monitor];
    let mut i = 0;
    while i < out.len() {
        out.extend(children(out[i]));
        i += 1;
    }
    out
}

fn cmdline(pid: u32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// The pod's QEMU: (host pid, pid in the pod's namespace).
fn qemu(monitor: u32) -> (u32, u32) {
    let pid = pod_processes(monitor)
        .into_iter()
        .find(|p| cmdline(*p).contains("qemu-system"))
        .expect("the pod runs QEMU");
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let inner = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_whitespace().last()?.parse().ok())
        .expect("NSpid");
    (pid, inner)
}

fn messages(l: &Launcher, component: &str) -> Vec<String> {
    l.log()
        .lines()
        .filter_map(|x| serde_json::from_str::<serde_json::Value>(x).ok())
        .filter(|v| v["component"] == component)
        .filter_map(|v| v["msg"].as_str().map(str::to_owned))
        .collect()
}

fn assert_logged(l: &Launcher, msg: &str) {
    assert!(
        messages(l, "virt-launcher-monitor")
            .iter()
            .any(|m| m == msg),
        "the monitor did not log {msg:?}\n--- log ---\n{}",
        l.log()
    );
}

fn assert_gone(pids: &[u32], what: &str) {
    let start = Instant::now();
    while pids.iter().any(|p| alive(*p)) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what} left running: {:?}",
            pids.iter()
                .filter(|p| alive(**p))
                .map(|p| (p, cmdline(*p)))
                .collect::<Vec<_>>()
        );
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn monitor_forwards_sigterm_and_the_guest_shuts_down() {
    let mut l = start("mon-term", &[]);
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let monitor = monitor_pid(&l);
    let pod = pod_processes(monitor);
    assert!(pod.len() >= 4, "monitor, launcher, daemons, QEMU: {pod:?}");
    // The launcher runs below the monitor, with KubeVirt's ambient capability.
    let launcher = children(monitor)
        .into_iter()
        .find(|p| {
            fs::read_link(format!("/proc/{p}/exe")).ok() == launcher_bin().canonicalize().ok()
        })
        .expect("the launcher is the monitor's child");
    let status = fs::read_to_string(format!("/proc/{launcher}/status")).expect("status");
    let amb = status
        .lines()
        .find_map(|x| x.strip_prefix("CapAmb:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .expect("CapAmb");
    assert_eq!(amb, 1 << 10, "CAP_NET_BIND_SERVICE ambient in the launcher");

    // What the monitor dumps: passt's log (in the pod's /var/run/kubevirt, a
    // tmpfs reached through the monitor's root; by /run, as the absolute
    // link /var/run would resolve in the test's own root) and a QEMU log (non-root
    // directory in the pod's private directory).
    let root = PathBuf::from(format!("/proc/{monitor}/root"));
    fs::write(root.join("run/kubevirt/passt.log"), "passt: e2e line\n").expect("passt.log");
    let qlog = l.dir.path().join("pod-private/libvirt/qemu/log");
    fs::create_dir_all(&qlog).expect("qemu log dir");
    fs::write(qlog.join("e2e_mon-term.log"), "qemu: e2e line\n").expect("qemu log");
    // A container-disk socket, held open through a directory descriptor so
    // it can be looked at after the pod is gone.
    let cd = root.join("run/kubevirt/container-disks");
    let _sock = std::os::unix::net::UnixListener::bind(cd.join("disk_0.sock")).expect("bind");
    let cd_fd = fs::File::open(&cd).expect("open container-disk dir");

    l.signal(Signal::SIGTERM);
    let st = l.wait_exit(EXIT);
    assert!(st.success(), "monitor exit {st}\n{}", l.log());
    assert!(l.serial().contains("GUEST-SHUTDOWN"), "{}", l.serial());
    assert_logged(&l, "signalling virt-launcher to shut down");
    assert_logged(&l, "Reaped Launcher main pid");
    assert_logged(&l, "dump log file: /var/run/kubevirt/passt.log");
    assert_logged(&l, "passt: e2e line");
    assert_logged(
        &l,
        "dump log file: /run/kubevirt-private/libvirt/qemu/log/e2e_mon-term.log",
    );
    assert_logged(&l, "qemu: e2e line");
    assert_logged(&l, "virt-launcher-monitor: Exiting...");
    // The launcher shut the guest down itself: no leftover QEMU.
    assert!(
        !messages(&l, "virt-launcher-monitor")
            .iter()
            .any(|m| m == "Killing QEMU gracefully."),
        "{}",
        l.log()
    );
    let left: Vec<String> = fs::read_dir(format!("/proc/self/fd/{}", cd_fd.as_raw_fd()))
        .expect("read container-disk dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    assert_eq!(
        left,
        vec!["disk_0.img".to_owned()],
        "the socket is removed, the disk kept"
    );
    assert_gone(&pod, "pod processes");
}

#[test]
fn monitor_exits_with_the_launchers_failure() {
    // KubeVirt's test hook: the launcher fails right after its directories.
    let mut l = start("mon-fail", &["--simulate-crash"]);
    let st = l.wait_exit(EXIT);
    assert_eq!(st.code(), Some(1), "{}", l.log());
    assert_logged(&l, "dirty virt-launcher shutdown: exit-code 1");
    assert!(
        l.log().contains("Simulated virt-launcher crash"),
        "{}",
        l.log()
    );
}

#[test]
fn monitor_terminates_the_qemu_a_killed_launcher_left() {
    let mut l = start("mon-kill", &[]);
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let monitor = monitor_pid(&l);
    let pod = pod_processes(monitor);
    let (qemu_host, qemu_inner) = qemu(monitor);
    let launcher = children(monitor)
        .into_iter()
        .find(|p| {
            fs::read_link(format!("/proc/{p}/exe")).ok() == launcher_bin().canonicalize().ok()
        })
        .expect("the launcher is the monitor's child");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(launcher).expect("pid")),
        Signal::SIGKILL,
    )
    .expect("kill the launcher");
    let st = l.wait_exit(EXIT);
    // Go's exit status of a signalled child (-1) exits 255.
    assert_eq!(st.code(), Some(255), "{}", l.log());
    assert_logged(&l, "dirty virt-launcher shutdown: exit-code -1");
    assert_logged(&l, "Killing QEMU gracefully.");
    // QEMU, re-parented to the monitor, ended on its SIGTERM and was reaped
    // by it (QEMU exits 0 on SIGTERM).
    assert_logged(&l, &format!("Reaped pid {qemu_inner} with status 0"));
    assert!(!alive(qemu_host));
    assert_gone(&pod, "pod processes");
}

#[test]
fn monitor_keeps_the_pod_after_a_failure_with_keep_after_failure() {
    let mut l = start("mon-keep", &["--simulate-crash", "--keep-after-failure"]);
    let start_t = Instant::now();
    while !messages(&l, "virt-launcher-monitor").iter().any(|m| {
        m == "keeping virt-launcher container alive since --keep-after-failure is set to true"
    }) {
        assert!(start_t.elapsed() < EXIT, "{}", l.log());
        thread::sleep(Duration::from_millis(200));
    }
    let monitor = monitor_pid(&l);
    assert!(
        l.log().contains("Simulated virt-launcher crash"),
        "{}",
        l.log()
    );
    // Still there, and SIGTERM does not end it.
    l.signal(Signal::SIGTERM);
    thread::sleep(Duration::from_secs(2));
    assert!(alive(monitor), "the monitor exited\n{}", l.log());
    assert!(
        l.log()
            .contains("received signal terminated but can't signal virt-launcher to shut down"),
        "{}",
        l.log()
    );
    l.signal(Signal::SIGKILL);
    let st = l.wait_exit(Duration::from_secs(20));
    assert!(!st.success());
    assert!(!alive(monitor));
}
