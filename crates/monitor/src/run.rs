//! Running and watching the launcher (KubeVirt's `RunAndMonitor`).
//!
//! One thread: SIGINT, SIGTERM, SIGQUIT and SIGCHLD are caught before the
//! launcher starts by handlers that write to a pipe per signal
//! (`signal-hook`), which the monitor polls. The signal mask stays empty, so
//! the launcher and everything it starts inherit no blocked signal (the
//! standard library does not reset the mask of a child).

use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::envoy::Envoy;
use crate::{files, procs};

/// KubeVirt's launcher path, used when none is next to the monitor.
pub const USR_BIN_LAUNCHER: &str = "/usr/bin/virt-launcher";

/// How long a leftover QEMU gets after SIGTERM (KubeVirt: 10 s, checked
/// every second).
pub const QEMU_GRACE: Duration = Duration::from_secs(10);

/// Everything the monitor works on; [`Config::kubevirt`] gives KubeVirt's
/// paths, tests point them elsewhere.
#[derive(Debug, Clone)]
pub struct Config {
    /// The launcher binary.
    pub launcher: PathBuf,
    /// Its arguments (the monitor's minus `--keep-after-failure`).
    pub args: Vec<String>,
    /// `--container-disk-dir`.
    pub container_disk_dir: PathBuf,
    /// passt's log ([`files::PASST_LOG`]).
    pub passt_log: PathBuf,
    /// QEMU's non-root log directory ([`files::QEMU_LOG_DIR`]).
    pub qemu_log_dir: PathBuf,
    /// Where processes are read (`/proc`).
    pub proc_root: PathBuf,
    /// The Istio proxy's endpoints.
    pub envoy: Envoy,
    /// [`QEMU_GRACE`].
    pub qemu_grace: Duration,
}

impl Config {
    /// KubeVirt's paths, the launcher found by [`launcher_path`].
    pub fn kubevirt(args: Vec<String>, container_disk_dir: PathBuf) -> Config {
        Config {
            launcher: launcher_path(std::env::current_exe().ok().as_deref()),
            args,
            container_disk_dir,
            passt_log: PathBuf::from(files::PASST_LOG),
            qemu_log_dir: PathBuf::from(files::QEMU_LOG_DIR),
            proc_root: PathBuf::from("/proc"),
            envoy: Envoy::default(),
            qemu_grace: QEMU_GRACE,
        }
    }
}

/// The launcher to run: `virt-launcher` in the monitor's own directory when
/// that is a regular executable file there (an installation such as
/// `target/release` or `/usr/local/bin` keeps both together), else KubeVirt's
/// `/usr/bin/virt-launcher` (the image, where both are in `/usr/bin`).
pub fn launcher_path(own_exe: Option<&Path>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = own_exe.and_then(Path::parent) {
        let next = dir.join("virt-launcher");
        let usable = std::fs::symlink_metadata(&next)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if usable {
            return next;
        }
    }
    PathBuf::from(USR_BIN_LAUNCHER)
}

/// Why the monitor could not do its job (exit 1, as KubeVirt's `err`).
#[derive(Debug)]
pub enum MonitorError {
    /// The signals could not be set up.
    Signals(std::io::Error),
    /// The launcher could not be started.
    Start(std::io::Error),
    /// `CAP_NET_BIND_SERVICE` is permitted but could not be made ambient.
    Capability(std::io::Error),
    /// A leftover QEMU did not go away within the grace period (KubeVirt
    /// returns exit code 1 then, with no error text).
    QemuSurvived(i32),
    /// A leftover QEMU could not be signalled.
    QemuSignal(i32, Errno),
}

impl std::fmt::Display for MonitorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MonitorError::Signals(e) => write!(f, "cannot set up signal handling: {e}"),
            MonitorError::Start(e) => write!(f, "{e}"),
            MonitorError::Capability(e) => {
                write!(f, "cannot make CAP_NET_BIND_SERVICE ambient: {e}")
            }
            MonitorError::QemuSurvived(pid) => {
                write!(
                    f,
                    "QEMU (pid {pid}) still runs after SIGTERM and the grace period"
                )
            }
            MonitorError::QemuSignal(pid, e) => write!(f, "cannot signal QEMU (pid {pid}): {e}"),
        }
    }
}

impl std::error::Error for MonitorError {}

/// What the launcher's exit becomes: its exit code, or -1 when a signal
/// ended it (Go's `WaitStatus.ExitStatus()`; `os.Exit(-1)` exits 255).
pub fn exit_code(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(..) => Some(-1),
        _ => None,
    }
}

/// The raw wait status Go logs ("Reaped pid N with status S").
pub fn raw_status(status: WaitStatus) -> i32 {
    match status {
        WaitStatus::Exited(_, code) => (code & 0xff) << 8,
        WaitStatus::Signaled(_, sig, core) => (sig as i32) | if core { 0x80 } else { 0 },
        _ => 0,
    }
}

/// Adds `CAP_NET_BIND_SERVICE` to the ambient set of this thread (so of the
/// launcher it starts) when it is in the permitted set, as KubeVirt's
/// `SysProcAttr.AmbientCaps` does; `Ok(false)` when it is not permitted (in
/// KubeVirt's image the monitor binary carries it as a file capability; a
/// monitor run without it starts the launcher without it).
///
/// # Errors
/// The `capset`/`prctl` error when the capability is permitted but cannot
/// be raised.
pub fn ambient_net_bind_service() -> std::io::Result<bool> {
    use rustix::thread::{self, CapabilitySet};
    let mut caps = thread::capabilities(None)?;
    if !caps.permitted.contains(CapabilitySet::NET_BIND_SERVICE) {
        return Ok(false);
    }
    caps.inheritable |= CapabilitySet::NET_BIND_SERVICE;
    thread::set_capabilities(None, caps)?;
    thread::configure_capability_in_ambient_set(CapabilitySet::NET_BIND_SERVICE, true)?;
    Ok(true)
}

/// Go's name of a signal (`os.Signal.String()`), as KubeVirt logs it.
pub fn go_name(sig: Signal) -> &'static str {
    match sig {
        Signal::SIGINT => "interrupt",
        Signal::SIGTERM => "terminated",
        Signal::SIGQUIT => "quit",
        Signal::SIGCHLD => "child exited",
        other => other.as_str(),
    }
}

/// The signals the monitor handles.
const HANDLED: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGQUIT,
    Signal::SIGCHLD,
];

/// The running monitor: the launcher's pid, its status once reaped.
pub struct Monitor {
    /// One pipe per handled signal: its handler writes a byte per delivery.
    pipes: Vec<(Signal, UnixStream)>,
    launcher: Option<Pid>,
    status: Option<i32>,
}

impl Monitor {
    /// Installs the handlers of the handled signals (each writes to a pipe
    /// the monitor polls; `signal-hook`'s self-pipe). Dispositions, not the
    /// signal mask: the launcher, which inherits the mask, gets them all
    /// unblocked, and its exec resets the handlers to their defaults.
    ///
    /// # Errors
    /// [`MonitorError::Signals`].
    pub fn new() -> Result<Monitor, MonitorError> {
        let mut pipes = Vec::new();
        for sig in HANDLED {
            let (rx, tx) = UnixStream::pair().map_err(MonitorError::Signals)?;
            rx.set_nonblocking(true).map_err(MonitorError::Signals)?;
            tx.set_nonblocking(true).map_err(MonitorError::Signals)?;
            signal_hook::low_level::pipe::register(sig as i32, tx)
                .map_err(MonitorError::Signals)?;
            pipes.push((sig, rx));
        }
        Ok(Monitor {
            pipes,
            launcher: None,
            status: None,
        })
    }

    /// Starts the launcher with the ambient capability (see
    /// [`ambient_net_bind_service`]), its output on the monitor's.
    ///
    /// # Errors
    /// [`MonitorError::Capability`], [`MonitorError::Start`].
    pub fn start(&mut self, launcher: &Path, args: &[String]) -> Result<(), MonitorError> {
        match ambient_net_bind_service() {
            Ok(true) => {}
            Ok(false) => tracing::info!(
                "CAP_NET_BIND_SERVICE is not permitted to virt-launcher-monitor: virt-launcher starts without it"
            ),
            Err(e) => return Err(MonitorError::Capability(e)),
        }
        let child = Command::new(launcher)
            .args(args)
            .env(
                process::tunables::GLIBC_TUNABLES,
                process::tunables::for_launcher(),
            )
            .spawn()
            .map_err(|e| {
                MonitorError::Start(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", launcher.display()),
                ))
            })?;
        // The Child is dropped without waiting: the reap loop collects it.
        let pid =
            i32::try_from(child.id()).map_err(|e| MonitorError::Start(std::io::Error::other(e)))?;
        self.launcher = Some(Pid::from_raw(pid));
        Ok(())
    }

    /// The launcher's pid once started.
    pub fn launcher_pid(&self) -> Option<Pid> {
        self.launcher
    }

    /// The launcher's exit code once reaped (see [`exit_code`]).
    pub fn launcher_status(&self) -> Option<i32> {
        self.status
    }

    /// Waits up to `timeout` (for ever with `None`) for signals and handles
    /// those that arrived: forwards termination signals, reaps children.
    pub fn handle_signals(&mut self, timeout: Option<Duration>) {
        let t = match timeout {
            None => PollTimeout::NONE,
            Some(d) => PollTimeout::from(u16::try_from(d.as_millis()).unwrap_or(u16::MAX)),
        };
        let mut fds: Vec<PollFd<'_>> = self
            .pipes
            .iter()
            .map(|(_, rx)| PollFd::new(rx.as_fd(), PollFlags::POLLIN))
            .collect();
        match poll(&mut fds, t) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                tracing::error!(reason = %e, "poll on the signal pipes failed");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        drop(fds);
        let mut arrived = Vec::new();
        for (sig, rx) in &self.pipes {
            let mut buf = [0u8; 64];
            let mut rx = rx;
            // Drain: one byte per delivery (coalesced ones are lost, as
            // pending signals are).
            while let Ok(n) = rx.read(&mut buf) {
                if n == 0 {
                    break;
                }
                arrived.extend(std::iter::repeat_n(*sig, n));
            }
        }
        for sig in arrived {
            if sig == Signal::SIGCHLD {
                self.reap();
            } else {
                self.forward(sig);
            }
        }
    }

    fn forward(&mut self, sig: Signal) {
        tracing::info!("signalling virt-launcher to shut down");
        let res = match (self.launcher, self.status) {
            (Some(pid), None) => kill(pid, Signal::SIGTERM).map_err(|e| e.to_string()),
            // Never signal a reaped pid: it may belong to someone else now.
            _ => Err("os: process already finished".to_owned()),
        };
        if let Err(e) = res {
            tracing::error!(
                reason = %e,
                "received signal {} but can't signal virt-launcher to shut down",
                go_name(sig)
            );
        }
    }

    /// Reaps every exited child (`wait4(-1, WNOHANG)` until none is left).
    pub fn reap(&mut self) {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => {
                    tracing::info!("No more processes to be reaped");
                    break;
                }
                Ok(st) => {
                    let Some(pid) = st.pid() else { continue };
                    if Some(pid) == self.launcher && self.status.is_none() {
                        if let Some(code) = exit_code(st) {
                            tracing::info!("Reaped Launcher main pid");
                            self.status = Some(code);
                        }
                    }
                    tracing::info!("Reaped pid {} with status {}", pid, raw_status(st));
                }
                Err(Errno::ECHILD) => {
                    tracing::error!(reason = %Errno::ECHILD, "Break reap loop");
                    break;
                }
                Err(Errno::EINTR) => {}
                Err(e) => {
                    tracing::error!(reason = %e, "Failed to reap process");
                    break;
                }
            }
        }
    }

    /// Handles signals until the launcher was reaped; its exit code.
    pub fn wait_launcher(&mut self) -> i32 {
        loop {
            if let Some(code) = self.status {
                return code;
            }
            self.handle_signals(None);
        }
    }

    /// Handles signals for `d`.
    pub fn idle(&mut self, d: Duration) {
        let end = Instant::now() + d;
        loop {
            let now = Instant::now();
            if now >= end {
                return;
            }
            self.handle_signals(Some(end - now));
        }
    }
}

/// The leftover QEMU: a descendant of this process whose command line has
/// `qemu-system`, else `qemu-kvm` (KubeVirt's two searches; see
/// [`procs`] for why only descendants). The name that matched comes along.
fn find_qemu(proc_root: &Path) -> Option<(i32, &'static str)> {
    let me = i32::try_from(std::process::id()).ok()?;
    let table = procs::read_table(proc_root);
    ["qemu-system", "qemu-kvm"]
        .into_iter()
        .find_map(|n| procs::find_descendant(&table, me, n).map(|p| (p, n)))
}

/// After the launcher's exit: a QEMU that survived it gets SIGTERM and
/// `grace` to go (checked every second, the first time at once); the
/// launcher's exit code, or an error (exit 1) when it stays.
///
/// # Errors
/// [`MonitorError::QemuSignal`], [`MonitorError::QemuSurvived`].
pub fn stop_leftover_qemu(m: &mut Monitor, cfg: &Config) -> Result<(), MonitorError> {
    let Some((pid, name)) = find_qemu(&cfg.proc_root) else {
        return Ok(());
    };
    tracing::info!(pid, "Killing QEMU gracefully.");
    kill(Pid::from_raw(pid), Signal::SIGTERM).map_err(|e| MonitorError::QemuSignal(pid, e))?;
    let deadline = Instant::now() + cfg.qemu_grace;
    loop {
        // Reap first: a QEMU re-parented here is a zombie until reaped.
        m.reap();
        let left = {
            let me = i32::try_from(std::process::id()).unwrap_or(0);
            let table = procs::read_table(&cfg.proc_root);
            procs::find_descendant(&table, me, name)
        };
        if left.is_none() {
            // Gone from the live processes; reap it (a zombie child of ours
            // until then), waiting at most a second for its exit to land.
            let until = Instant::now() + Duration::from_secs(1);
            while cfg.proc_root.join(pid.to_string()).exists() && Instant::now() < until {
                m.reap();
                m.idle(Duration::from_millis(20));
            }
            m.reap();
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(MonitorError::QemuSurvived(pid));
        }
        m.idle(Duration::from_secs(1).min(deadline - now));
    }
}

/// KubeVirt's `RunAndMonitor`: starts the launcher, handles signals until it
/// was reaped, dumps passt's and QEMU's logs, stops a leftover QEMU; then,
/// whatever happened, asks an Istio proxy to quit and removes the
/// container-disk sockets. Returns the launcher's exit code (see
/// [`exit_code`]) or the error that makes the monitor exit 1.
///
/// # Errors
/// See [`MonitorError`].
pub fn run_and_monitor(m: &mut Monitor, cfg: &Config) -> Result<i32, MonitorError> {
    let res = run_inner(m, cfg);
    // KubeVirt's deferred calls, in their order.
    cfg.envoy.terminate();
    if let Err(e) = files::remove_sockets(&cfg.container_disk_dir) {
        tracing::error!(
            reason = %e,
            "could not clean up ephemeral disk directory: {}",
            cfg.container_disk_dir.display()
        );
    }
    // Children that ended while no signal was handled (KubeVirt reaps on a
    // goroutine of its own all along).
    m.reap();
    res
}

fn run_inner(m: &mut Monitor, cfg: &Config) -> Result<i32, MonitorError> {
    if let Err(e) = m.start(&cfg.launcher, &cfg.args) {
        tracing::error!(reason = %e, "failed to run virt-launcher");
        return Err(e);
    }
    let code = m.wait_launcher();
    if code != 0 {
        tracing::error!("dirty virt-launcher shutdown: exit-code {code}");
    }
    files::dump_logs(&cfg.passt_log, &cfg.qemu_log_dir);
    stop_leftover_qemu(m, cfg)?;
    Ok(code)
}

/// When the monitor is not PID 1 (outside a pod), what the kernel would do
/// to the pod at its PID 1's exit: every process still descending from the
/// monitor (libvirt's daemons after a launcher crash, a QEMU that ignored
/// SIGTERM) is killed with SIGKILL and reaped. Returns their pids.
pub fn kill_descendants(m: &mut Monitor, proc_root: &Path) -> Vec<i32> {
    if std::process::id() == 1 {
        return Vec::new();
    }
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let mut killed = Vec::new();
    // A few rounds: a process may fork while its siblings die.
    for _ in 0..5 {
        let table = procs::read_table(proc_root);
        let left = procs::live_descendants(&table, me);
        if left.is_empty() {
            break;
        }
        for pid in left {
            tracing::info!(pid, "killing a process left in the pod");
            if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() && !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        m.idle(Duration::from_millis(100));
        m.reap();
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_as_go_reports_them() {
        let p = Pid::from_raw(5);
        assert_eq!(exit_code(WaitStatus::Exited(p, 0)), Some(0));
        assert_eq!(exit_code(WaitStatus::Exited(p, 2)), Some(2));
        assert_eq!(
            exit_code(WaitStatus::Signaled(p, Signal::SIGKILL, false)),
            Some(-1)
        );
        assert_eq!(exit_code(WaitStatus::StillAlive), None);
        assert_eq!(raw_status(WaitStatus::Exited(p, 3)), 768);
        assert_eq!(
            raw_status(WaitStatus::Signaled(p, Signal::SIGKILL, false)),
            9
        );
        assert_eq!(
            raw_status(WaitStatus::Signaled(p, Signal::SIGSEGV, true)),
            139
        );
    }

    #[test]
    fn launcher_next_to_the_monitor_first() {
        let d = tempfile::tempdir().expect("tempdir");
        let mon = d.path().join("virt-launcher-monitor");
        assert_eq!(launcher_path(Some(&mon)), PathBuf::from(USR_BIN_LAUNCHER));
        assert_eq!(launcher_path(None), PathBuf::from(USR_BIN_LAUNCHER));
        let l = d.path().join("virt-launcher");
        std::fs::write(&l, "#!/bin/sh\n").expect("write");
        // Not executable: not used.
        assert_eq!(launcher_path(Some(&mon)), PathBuf::from(USR_BIN_LAUNCHER));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&l, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(launcher_path(Some(&mon)), l);
        // A symbolic link there is not followed.
        std::fs::remove_file(&l).expect("rm");
        std::os::unix::fs::symlink("/bin/true", &l).expect("symlink");
        assert_eq!(launcher_path(Some(&mon)), PathBuf::from(USR_BIN_LAUNCHER));
    }
}
