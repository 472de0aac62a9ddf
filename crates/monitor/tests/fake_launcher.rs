//! The real `virt-launcher-monitor` binary over a fake `virt-launcher` (a
//! shell script next to a copy of the monitor, where the monitor looks
//! first): argument passing, signal forwarding, exit code mapping, reaping
//! of orphans, the leftover QEMU, ambient capability, the container-disk
//! sockets, the log dumps, `--keep-after-failure`. No guest, no libvirt.
//!
//! Each monitor runs in a network namespace of its own with `lo` down, so
//! its Istio probe fails at once ("network unreachable" is not retried, as in
//! KubeVirt); on a host network with nothing on `localhost:15021` it would
//! retry for 7.8 s (the retry rule is tested in `envoy`'s unit tests).
//!
//! Needs root (namespaces, uid switches) and util-linux's `unshare` and
//! `setpriv`; fails loudly without them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    missing_docs
)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const MONITOR: &str = env!("CARGO_BIN_EXE_virt-launcher-monitor");

/// A monitor copy and its fake launcher in a directory of their own.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(launcher_script: &str) -> Setup {
        assert!(
            nix::unistd::geteuid().is_root(),
            "these tests need root (namespaces, uid switches)"
        );
        let dir = tempfile::Builder::new()
            .prefix("vlm-test-")
            .tempdir()
            .expect("tempdir");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
        fs::copy(MONITOR, dir.path().join("virt-launcher-monitor")).expect("copy monitor");
        let l = dir.path().join("virt-launcher");
        fs::write(
            &l,
            format!(
                "#!/bin/bash\nOUT={}\n{launcher_script}",
                dir.path().display()
            ),
        )
        .expect("write fake launcher");
        fs::set_permissions(&l, fs::Permissions::from_mode(0o755)).expect("chmod");
        let out = dir.path().join("out");
        fs::create_dir(&out).expect("out dir");
        fs::set_permissions(&out, fs::Permissions::from_mode(0o777)).expect("chmod");
        Setup { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Starts the monitor (through `wrapper` if given) with `args`.
    fn start(&self, wrapper: &[&str], args: &[&str]) -> Running {
        let log = self.path("monitor.log");
        let f = fs::File::create(&log).expect("log");
        let monitor = self.path("virt-launcher-monitor");
        let mut cmd = Command::new("unshare");
        cmd.arg("--net").args(wrapper).arg(&monitor);
        let child = cmd
            .args(args)
            .env_remove("VIRT_LAUNCHER_LOG_VERBOSITY")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(f.try_clone().expect("dup"))
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", monitor.display()));
        Running { child, log }
    }

    fn out(&self, name: &str) -> String {
        fs::read_to_string(self.path("out").join(name)).unwrap_or_default()
    }

    fn wait_out(&self, name: &str, timeout: Duration) -> String {
        let start = Instant::now();
        loop {
            let s = self.out(name);
            if !s.is_empty() {
                return s;
            }
            assert!(start.elapsed() < timeout, "no {name} after {timeout:?}");
            thread::sleep(Duration::from_millis(50));
        }
    }
}

struct Running {
    child: Child,
    log: PathBuf,
}

impl Running {
    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("pid"))
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            assert!(
                start.elapsed() < timeout,
                "monitor still running after {timeout:?}\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn json_lines(&self) -> Vec<serde_json::Value> {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn logged(&self, msg: &str) -> bool {
        self.json_lines().iter().any(|v| v["msg"] == msg)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(self.pid(), Signal::SIGKILL);
            let _ = self.child.try_wait();
        }
    }
}

/// Enough for the launcher and a leftover QEMU's 10 s.
const EXIT: Duration = Duration::from_secs(40);

/// Live processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let zombie = fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if !zombie && String::from_utf8_lossy(&cmd).contains(needle) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn arguments_and_exit_codes_pass_through() {
    let s = Setup::new("printf '%s\\n' \"$@\" > $OUT/out/args\nexit 3\n");
    let args = [
        "--qemu-timeout",
        "251s",
        "--name",
        "vmi",
        "--uid",
        "1234",
        "--keep-after-failure=false",
        "--container-disk-dir",
        "/nonexistent-vlm-test",
        "--allow-emulation",
    ];
    let mut m = s.start(&[], &args);
    let st = m.wait(EXIT);
    assert_eq!(st.code(), Some(3), "{}", m.log());
    // Only the bare `--keep-after-failure` is removed (none here).
    let got: Vec<String> = s.out("args").lines().map(str::to_owned).collect();
    assert_eq!(got, args);
    assert!(
        m.logged("dirty virt-launcher shutdown: exit-code 3"),
        "{}",
        m.log()
    );
    assert!(m.logged("Reaped Launcher main pid"), "{}", m.log());
    // KubeVirt's JSON lines, as the monitor's component.
    let lines = m.json_lines();
    assert!(!lines.is_empty(), "{}", m.log());
    assert!(lines
        .iter()
        .all(|v| v["component"] == "virt-launcher-monitor"
            && v["level"].is_string()
            && v["timestamp"].is_string()));
}

#[test]
fn termination_signals_reach_the_launcher_as_sigterm() {
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGQUIT] {
        let s = Setup::new(
            "trap 'echo TERM > $OUT/out/got; exit 0' TERM\n\
             trap 'echo INT > $OUT/out/got; exit 7' INT\n\
             trap 'echo QUIT > $OUT/out/got; exit 7' QUIT\n\
             echo up > $OUT/out/up\nwhile :; do sleep 0.1; done\n",
        );
        let mut m = s.start(&[], &["--keep-after-failure"]);
        s.wait_out("up", Duration::from_secs(10));
        kill(m.pid(), sig).expect("signal monitor");
        let st = m.wait(EXIT);
        assert_eq!(s.out("got").trim(), "TERM", "{sig}: {}", m.log());
        assert_eq!(st.code(), Some(0), "{sig}: {}", m.log());
        assert!(m.logged("signalling virt-launcher to shut down"));
        assert!(m.logged("virt-launcher-monitor: Exiting..."), "{}", m.log());
    }
}

#[test]
fn a_launcher_killed_by_a_signal_exits_255() {
    let s = Setup::new("echo $$ > $OUT/out/pid\nwhile :; do sleep 0.1; done\n");
    let mut m = s.start(&[], &[]);
    let pid: i32 = s
        .wait_out("pid", Duration::from_secs(10))
        .trim()
        .parse()
        .expect("pid");
    kill(Pid::from_raw(pid), Signal::SIGKILL).expect("kill launcher");
    let st = m.wait(EXIT);
    assert_eq!(st.code(), Some(255), "{}", m.log());
    assert!(
        m.logged("dirty virt-launcher shutdown: exit-code -1"),
        "{}",
        m.log()
    );
}

#[test]
fn a_launcher_that_cannot_start_exits_1() {
    let s = Setup::new("");
    // Not executable any more: the spawn fails.
    fs::set_permissions(s.path("virt-launcher"), fs::Permissions::from_mode(0o644)).expect("chmod");
    // The monitor then falls back to /usr/bin/virt-launcher; hide it.
    let mut m = s.start(
        &[
            "unshare",
            "-m",
            "sh",
            "-c",
            "mount --make-rprivate / && mount -t tmpfs tmpfs /usr/bin && exec \"$@\"",
            "sh",
        ],
        &[],
    );
    let st = m.wait(EXIT);
    assert_eq!(st.code(), Some(1), "{}", m.log());
    assert!(m.logged("failed to run virt-launcher"), "{}", m.log());
    assert!(m.logged("monitoring virt-launcher failed"), "{}", m.log());
}

/// The fake launcher waits until its background child runs the stand-in.
const EXECED: &str =
    "until tr '\\0' ' ' < /proc/$!/cmdline | grep -q qemu-system; do sleep 0.05; done";

#[test]
fn an_orphaned_qemu_is_terminated_and_reaped() {
    // The launcher leaves a "QEMU" behind and exits: it is re-parented to
    // the monitor (a subreaper), which sends it SIGTERM.
    let tag = format!("qemu-system-vlmtest-{}", std::process::id());
    let s = Setup::new(&format!(
        "(exec -a {tag} sleep 1000) &\n{EXECED}\necho $! > $OUT/out/qemu\nexit 0\n"
    ));
    let mut m = s.start(&[], &[]);
    let st = m.wait(EXIT);
    assert_eq!(st.code(), Some(0), "{}", m.log());
    assert!(m.logged("Killing QEMU gracefully."), "{}", m.log());
    assert!(processes_with(&tag).is_empty(), "the QEMU stand-in is left");
    let qemu = s.out("qemu").trim().to_owned();
    assert!(
        m.logged(&format!("Reaped pid {qemu} with status 15")),
        "the orphan was not reaped by the monitor\n{}",
        m.log()
    );
}

#[test]
fn a_qemu_ignoring_sigterm_makes_exit_1_and_is_killed_at_the_end() {
    let tag = format!("qemu-system-vlmstubborn-{}", std::process::id());
    let s = Setup::new(&format!(
        "(trap '' TERM; exec -a {tag} sleep 1000) &\n{EXECED}\nexit 0\n"
    ));
    let mut m = s.start(&[], &[]);
    let st = m.wait(EXIT);
    assert_eq!(st.code(), Some(1), "{}", m.log());
    assert!(m.logged("Killing QEMU gracefully."), "{}", m.log());
    // Not PID 1: what the kernel would do to the pod, the monitor does.
    assert!(processes_with(&tag).is_empty(), "the stubborn QEMU is left");
}

#[test]
fn another_processes_qemu_is_never_touched() {
    // A "QEMU" that is not the monitor's descendant.
    let tag = format!("qemu-system-vlmforeign-{}", std::process::id());
    let mut foreign = Command::new("bash")
        .args(["-c", &format!("exec -a {tag} sleep 1000")])
        .spawn()
        .expect("spawn foreign");
    let s = Setup::new("exit 0\n");
    let mut m = s.start(&[], &[]);
    let st = m.wait(EXIT);
    let alive = !processes_with(&tag).is_empty();
    let _ = foreign.kill();
    let _ = foreign.try_wait();
    assert_eq!(st.code(), Some(0), "{}", m.log());
    assert!(alive, "the monitor killed a QEMU that was not its own");
    assert!(!m.logged("Killing QEMU gracefully."), "{}", m.log());
}

/// Bit 10 of the capability sets in `/proc/<pid>/status`.
const NET_BIND_SERVICE: u64 = 1 << 10;

fn cap_line(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no {name} in {status}"))
}

#[test]
fn net_bind_service_is_ambient_when_permitted() {
    let script = "cat /proc/self/status > $OUT/out/status\nid -u > $OUT/out/uid\nexit 0\n";
    // As root: permitted, so ambient in the launcher.
    let s = Setup::new(script);
    let mut m = s.start(&[], &[]);
    assert_eq!(m.wait(EXIT).code(), Some(0), "{}", m.log());
    assert_eq!(cap_line(&s.out("status"), "CapAmb:"), NET_BIND_SERVICE);

    // As uid 107 holding it (the image's file capability plays this),
    // with only it in the bounding set, as in KubeVirt's compute container.
    let s = Setup::new(script);
    let mut m = s.start(
        &[
            "setpriv",
            "--reuid=107",
            "--regid=107",
            "--clear-groups",
            "--inh-caps=-all,+net_bind_service",
            "--ambient-caps=+net_bind_service",
            "--bounding-set=-all,+net_bind_service",
        ],
        &[],
    );
    assert_eq!(m.wait(EXIT).code(), Some(0), "{}", m.log());
    assert_eq!(s.out("uid").trim(), "107");
    let status = s.out("status");
    assert_eq!(cap_line(&status, "CapAmb:"), NET_BIND_SERVICE);
    assert_eq!(cap_line(&status, "CapEff:"), NET_BIND_SERVICE);

    // As uid 107 without it: the launcher starts without it.
    let s = Setup::new(script);
    let mut m = s.start(
        &[
            "setpriv",
            "--reuid=107",
            "--regid=107",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ],
        &[],
    );
    assert_eq!(m.wait(EXIT).code(), Some(0), "{}", m.log());
    assert_eq!(cap_line(&s.out("status"), "CapAmb:"), 0);
    assert!(
        m.log().contains("CAP_NET_BIND_SERVICE is not permitted"),
        "{}",
        m.log()
    );
}

#[test]
fn the_images_file_capability_reaches_the_launcher() {
    // As in the launcher image: the monitor binary carries
    // cap_net_bind_service=ep and runs as uid 107 with only that capability
    // in its bounding set and none inherited.
    let script = "cat /proc/self/status > $OUT/out/status\nexit 0\n";
    let as_107 = [
        "setpriv",
        "--reuid=107",
        "--regid=107",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all,+net_bind_service",
    ];
    let s = Setup::new(script);
    let st = Command::new("setcap")
        .arg("cap_net_bind_service=+ep")
        .arg(s.path("virt-launcher-monitor"))
        .status()
        .expect("setcap (libcap2-bin) runs");
    assert!(st.success(), "setcap failed");
    let mut m = s.start(&as_107, &[]);
    assert_eq!(m.wait(EXIT).code(), Some(0), "{}", m.log());
    assert_eq!(cap_line(&s.out("status"), "CapAmb:"), NET_BIND_SERVICE);

    // Under no_new_privs (a container's allowPrivilegeEscalation: false):
    // whether the kernel grants the file capability depends on its version
    // (6.18 does, older ones did not); either way the launcher has it
    // ambient exactly when the monitor (its parent) has it permitted.
    let s = Setup::new(
        "cat /proc/self/status > $OUT/out/status\ncat /proc/$PPID/status > $OUT/out/parent\nexit 0\n",
    );
    let st = Command::new("setcap")
        .arg("cap_net_bind_service=+ep")
        .arg(s.path("virt-launcher-monitor"))
        .status()
        .expect("setcap runs");
    assert!(st.success(), "setcap failed");
    let mut nnp = as_107.to_vec();
    nnp.push("--no-new-privs");
    let mut m = s.start(&nnp, &[]);
    assert_eq!(m.wait(EXIT).code(), Some(0), "{}", m.log());
    let parent = s.out("parent");
    assert_eq!(
        parent.lines().find(|l| l.starts_with("NoNewPrivs:")),
        Some("NoNewPrivs:\t1")
    );
    let permitted = cap_line(&parent, "CapPrm:") & NET_BIND_SERVICE;
    assert_eq!(cap_line(&s.out("status"), "CapAmb:"), permitted);
    assert_eq!(
        m.log().contains("CAP_NET_BIND_SERVICE is not permitted"),
        permitted == 0,
        "{}",
        m.log()
    );
}

#[test]
fn container_disk_sockets_are_removed() {
    let s = Setup::new("exit 0\n");
    let cd = s.path("container-disks");
    fs::create_dir(&cd).expect("mkdir");
    let _a = UnixListener::bind(cd.join("disk_0.sock")).expect("bind");
    let _b = UnixListener::bind(cd.join("disk_1.sock")).expect("bind");
    fs::write(cd.join("disk_0.img"), "img").expect("img");
    let victim = s.path("victim");
    fs::write(&victim, "keep").expect("victim");
    std::os::unix::fs::symlink(&victim, cd.join("link.sock")).expect("symlink");
    let mut m = s.start(&[], &["--container-disk-dir", cd.to_str().expect("utf-8")]);
    assert_eq!(m.wait(EXIT).code(), Some(0), "{}", m.log());
    let left: Vec<String> = fs::read_dir(&cd)
        .expect("read")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    assert_eq!(left, vec!["disk_0.img".to_owned()]);
    assert_eq!(fs::read_to_string(&victim).expect("victim"), "keep");
}

/// Plays the pod's `/run` (a tmpfs) with passt's and QEMU's logs in it.
const LOGS_POD: &str = "set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /run
mkdir -p /run/kubevirt /run/kubevirt-private/libvirt/qemu/log
printf 'passt line 1\\npasst line 2\\n' > /run/kubevirt/passt.log
printf 'qemu says hello\\n' > /run/kubevirt-private/libvirt/qemu/log/default_vmi.log
exec \"$@\"";

#[test]
fn passt_and_qemu_logs_are_dumped() {
    let s = Setup::new("exit 0\n");
    let mut m = s.start(&["unshare", "-m", "sh", "-c", LOGS_POD, "sh"], &[]);
    assert_eq!(m.wait(EXIT).code(), Some(0), "{}", m.log());
    let msgs: Vec<String> = m
        .json_lines()
        .iter()
        .filter_map(|v| v["msg"].as_str().map(str::to_owned))
        .collect();
    let pos = |m: &str| msgs.iter().position(|x| x == m);
    let order = [
        "dump log file: /var/run/kubevirt/passt.log",
        "passt line 1",
        "passt line 2",
        "dump log file: /run/kubevirt-private/libvirt/qemu/log/default_vmi.log",
        "qemu says hello",
    ];
    let at: Vec<Option<usize>> = order.iter().map(|m| pos(m)).collect();
    assert!(at.iter().all(Option::is_some), "{msgs:#?}");
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "out of order: {msgs:#?}"
    );
}

#[test]
fn keep_after_failure_blocks_until_killed() {
    let s = Setup::new("exit 4\n");
    let mut m = s.start(&[], &["--keep-after-failure"]);
    let start = Instant::now();
    while !m
        .logged("keeping virt-launcher container alive since --keep-after-failure is set to true")
    {
        assert!(start.elapsed() < EXIT, "{}", m.log());
        assert!(
            m.child.try_wait().expect("try_wait").is_none(),
            "exited\n{}",
            m.log()
        );
        thread::sleep(Duration::from_millis(100));
    }
    // SIGTERM does not end it (KubeVirt's monitor handles it and stays).
    kill(m.pid(), Signal::SIGTERM).expect("signal");
    thread::sleep(Duration::from_secs(2));
    assert!(
        m.child.try_wait().expect("try_wait").is_none(),
        "{}",
        m.log()
    );
    assert!(m
        .log()
        .contains("received signal terminated but can't signal virt-launcher to shut down"));
    kill(m.pid(), Signal::SIGKILL).expect("kill");
    let st = m.wait(Duration::from_secs(5));
    assert!(st.code().is_none(), "ended by SIGKILL only");
}

#[test]
fn keep_after_failure_exits_normally_on_success() {
    let s = Setup::new("exit 0\n");
    let mut m = s.start(&[], &["--keep-after-failure"]);
    assert_eq!(m.wait(EXIT).code(), Some(0), "{}", m.log());
}

#[test]
fn a_bad_flag_is_refused_by_name() {
    let s = Setup::new("exit 0\n");
    let mut m = s.start(&[], &["--uid"]);
    assert_eq!(m.wait(Duration::from_secs(10)).code(), Some(2));
    assert!(
        m.log().contains("--uid: flag needs an argument"),
        "{}",
        m.log()
    );
}
