//! Starting and supervising the libvirt daemons, by KubeVirt v1.6.6's rule
//! (`pkg/virt-launcher/virtwrap/util/libvirt_helper.go`, `StartVirtqemud`
//! and `startVirtlogdLogging`): a daemon that exits is logged and started
//! again one second later, however often it exits, for as long as the
//! launcher runs; a daemon that cannot be started again (the `exec`
//! fails) is the launcher's end (KubeVirt panics). Both are killed when
//! the launcher stops.
//!
//! Each daemon runs in the foreground as a child of the launcher; its
//! standard error is re-logged line by line with the daemon's name. When a
//! daemon exits unexpectedly it is restarted after [`RESTART_DELAY`], each
//! time, with no limit on the count: the pause bounds a crash loop's cost
//! to one start a second, and giving up would end a guest that runs on
//! without its daemon (QEMU does not depend on it). Meanwhile virt-handler
//! sees what KubeVirt's launcher shows it: commands that need libvirt
//! fail (its SyncVMI is retried with backoff), the domain's last state
//! stays cached, and every reconnect is notified. A restart that cannot
//! spawn the daemon is reported through [`Supervisor::fatal`], which ends
//! the launcher.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Pause before a daemon that exited is started again, after every exit
/// (KubeVirt: `time.Sleep(time.Second)` "to avoid consuming all resources
/// in the event of a crash loop").
pub const RESTART_DELAY: Duration = Duration::from_secs(1);
/// Longest stderr line re-logged (KubeVirt scans up to 512 KiB).
const MAX_LINE: usize = 512 * 1024;

/// A daemon to run.
#[derive(Clone, Debug)]
pub struct DaemonSpec {
    /// Name in logs (`libvirtd`, `virtlogd`).
    pub name: String,
    /// Executable.
    pub program: PathBuf,
    /// Arguments.
    pub args: Vec<String>,
    /// Environment added to the launcher's (the session variables of a
    /// non-root launcher).
    pub env: Vec<(String, String)>,
    /// What a restart cannot bring back, logged as a warning with every
    /// restart (virtlogd: the running guest's serial console log).
    pub restart_loses: Option<String>,
}

/// A daemon that could not be kept running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonFailure {
    /// Daemon name.
    pub name: String,
    /// What happened.
    pub message: String,
}

struct Supervised {
    spec: DaemonSpec,
    pid: AtomicU32,
    stopping: AtomicBool,
    /// Held while a restart checks `stopping` and spawns, and while
    /// [`Supervisor::stop`] sets it and reads the pid: stop then signals
    /// the daemon that runs, never one started just after.
    spawn_lock: Mutex<()>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
}

/// Runs daemons and restarts them when they die.
pub struct Supervisor {
    daemons: Vec<Arc<Supervised>>,
    restart_delay: Duration,
    fatal_tx: Sender<DaemonFailure>,
    fatal_rx: Mutex<Receiver<DaemonFailure>>,
}

impl Default for Supervisor {
    fn default() -> Self {
        Self::new()
    }
}

impl Supervisor {
    /// An empty supervisor.
    pub fn new() -> Self {
        let (fatal_tx, fatal_rx) = mpsc::channel();
        Supervisor {
            daemons: Vec::new(),
            restart_delay: RESTART_DELAY,
            fatal_tx,
            fatal_rx: Mutex::new(fatal_rx),
        }
    }

    /// Starts `spec` and keeps it running.
    ///
    /// # Errors
    /// The spawn error of the first start (missing binary ...).
    pub fn start(&mut self, spec: DaemonSpec) -> std::io::Result<()> {
        let first = spawn(&spec)?;
        let d = Arc::new(Supervised {
            spec,
            pid: AtomicU32::new(first),
            stopping: AtomicBool::new(false),
            spawn_lock: Mutex::new(()),
            thread: Mutex::new(None),
        });
        let worker = Arc::clone(&d);
        let fatal = self.fatal_tx.clone();
        let delay = self.restart_delay;
        let handle = thread::Builder::new()
            .name(format!("supervise-{}", d.spec.name))
            .spawn(move || supervise(&worker, &fatal, delay))?;
        *d.thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(handle);
        self.daemons.push(d);
        Ok(())
    }

    /// Current pid of the daemon called `name`.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.daemons
            .iter()
            .find(|d| d.spec.name == name)
            .map(|d| d.pid.load(Ordering::SeqCst))
    }

    /// Waits up to `timeout` for a daemon that could not be started again
    /// (its restart's spawn failed); `None` while every daemon runs or is
    /// about to be restarted.
    pub fn fatal(&self, timeout: Duration) -> Option<DaemonFailure> {
        let rx = self
            .fatal_rx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        rx.recv_timeout(timeout).ok()
    }

    /// Stops every daemon, last started first: SIGTERM, then SIGKILL when
    /// it has not exited after `grace`.
    pub fn stop(&self, grace: Duration) {
        for d in self.daemons.iter().rev() {
            let pid = {
                let _spawning = d
                    .spawn_lock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                d.stopping.store(true, Ordering::SeqCst);
                d.pid.load(Ordering::SeqCst)
            };
            let _ = kill(to_pid(pid), Signal::SIGTERM);
            let handle = d
                .thread
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            let Some(handle) = handle else { continue };
            // The supervising thread collects the exit status and returns.
            let deadline = Instant::now() + grace;
            while !handle.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(10));
            }
            if !handle.is_finished() {
                tracing::warn!(daemon = %d.spec.name, pid, "did not stop on SIGTERM, killing");
                let _ = kill(to_pid(pid), Signal::SIGKILL);
            }
            let _ = handle.join();
            tracing::info!(daemon = %d.spec.name, pid, "stopped");
        }
    }

    /// Sets the pause before restarts (tests shorten it).
    pub fn set_restart_delay(&mut self, delay: Duration) {
        self.restart_delay = delay;
    }
}

fn to_pid(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX))
}

fn spawn(spec: &DaemonSpec) -> std::io::Result<u32> {
    let mut cmd = Command::new(&spec.program);
    // Own process group: a Ctrl-C on the launcher's terminal (SIGINT to the
    // foreground group) must reach the launcher only, which then shuts the
    // guest down in order; the daemons are stopped last.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = process::reaper().spawn(&mut cmd)?;
    let pid = child.id();
    if let Some(err) = child.stderr.take() {
        let name = spec.name.clone();
        let _ = thread::Builder::new()
            .name(format!("{name}-stderr"))
            .spawn(move || relay(&name, err));
    }
    tracing::info!(daemon = %spec.name, pid, "started");
    Ok(pid)
}

fn relay(name: &str, err: impl std::io::Read) {
    // 1 KiB, not std's 8 KiB: the reader lives as long as the daemon and a
    // longer line is read in several fills (issue 20 item 3).
    let mut r = BufReader::with_capacity(1024, err);
    let mut line = Vec::new();
    loop {
        line.clear();
        match r
            .by_ref()
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end();
                // libvirt's lines read "<time>: <thread>: <level> : <message>".
                if text.contains(": error : ") {
                    tracing::error!(component = %name, "{text}");
                } else if text.contains(": warning : ") {
                    tracing::warn!(component = %name, "{text}");
                } else if !text.is_empty() {
                    tracing::info!(component = %name, "{text}");
                }
            }
        }
    }
}

/// Waits for the daemon's exits and starts it again after `delay`, every
/// time, until it is stopped or a restart cannot spawn it.
fn supervise(d: &Supervised, fatal: &Sender<DaemonFailure>, delay: Duration) {
    let mut exits: u64 = 0;
    loop {
        let pid = d.pid.load(Ordering::SeqCst);
        let status = process::reaper().wait(pid, None);
        if d.stopping.load(Ordering::SeqCst) {
            return;
        }
        exits += 1;
        let how = status.map_or_else(|| "unknown status".to_owned(), |s| s.to_string());
        tracing::error!(daemon = %d.spec.name, pid, exits, "exited unexpectedly ({how}); restarting in {} ms", delay.as_millis());
        if let Some(lost) = &d.spec.restart_loses {
            tracing::warn!(daemon = %d.spec.name, "{lost}");
        }
        thread::sleep(delay);
        let _spawning = d
            .spawn_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if d.stopping.load(Ordering::SeqCst) {
            return;
        }
        match spawn(&d.spec) {
            Ok(p) => d.pid.store(p, Ordering::SeqCst),
            Err(e) => {
                let message = format!("cannot restart: {e}");
                tracing::error!(daemon = %d.spec.name, "{message}");
                let _ = fatal.send(DaemonFailure {
                    name: d.spec.name.clone(),
                    message,
                });
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(name: &str, script: &str) -> DaemonSpec {
        DaemonSpec {
            name: name.into(),
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: Vec::new(),
            restart_loses: None,
        }
    }

    #[test]
    fn restarts_a_dead_daemon_and_stops_cleanly() {
        let mut s = Supervisor::new();
        s.start(sh("sleeper", "sleep 60")).unwrap();
        let first = s.pid("sleeper").unwrap();
        kill(to_pid(first), Signal::SIGKILL).unwrap();
        let t = Instant::now();
        loop {
            let p = s.pid("sleeper").unwrap();
            if p != first {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "not restarted");
            thread::sleep(Duration::from_millis(50));
        }
        assert!(s.fatal(Duration::from_millis(10)).is_none());
        let second = s.pid("sleeper").unwrap();
        s.stop(Duration::from_secs(5));
        assert!(
            kill(to_pid(second), None).is_err(),
            "still running after stop"
        );
    }

    /// A scratch directory of the test's own, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!(
                "vl-supervisor-{name}-{}-{:?}",
                std::process::id(),
                Instant::now()
            ));
            std::fs::create_dir(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The start times (ns since the epoch) the script appended to `file`.
    fn starts(file: &std::path::Path) -> Vec<u128> {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// KubeVirt's rule: a daemon that keeps exiting is started again after
    /// the pause, every time (the old limit gave up after 6 exits in 60 s),
    /// never sooner than the pause after its previous start, and stop()
    /// ends the loop.
    #[test]
    fn a_crash_loop_is_restarted_forever_with_the_pause_between_starts() {
        let dir = Scratch::new("loop");
        let file = dir.0.join("starts");
        let mut s = Supervisor::new();
        let delay = Duration::from_millis(40);
        s.set_restart_delay(delay);
        s.start(sh(
            "crasher",
            &format!("date +%s%N >> '{}'; exit 1", file.display()),
        ))
        .unwrap();
        let t = Instant::now();
        while starts(&file).len() < 12 {
            assert!(
                s.fatal(Duration::ZERO).is_none(),
                "gave up after {} starts",
                starts(&file).len()
            );
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "only {} starts",
                starts(&file).len()
            );
            thread::sleep(Duration::from_millis(20));
        }
        s.stop(Duration::from_secs(5));
        assert!(s.fatal(Duration::ZERO).is_none());
        let seen = starts(&file);
        for w in seen.windows(2) {
            assert!(
                w[1] - w[0] >= delay.as_nanos(),
                "restarted {} ms after the previous start",
                (w[1] - w[0]) / 1_000_000
            );
        }
        thread::sleep(delay * 5);
        assert_eq!(
            starts(&file).len(),
            seen.len(),
            "started again after stop()"
        );
    }

    /// A daemon whose program is gone when it must be started again is
    /// reported as fatal, naming the daemon and the spawn's error.
    #[test]
    fn a_daemon_that_cannot_be_started_again_is_fatal() {
        let dir = Scratch::new("gone");
        let program = dir.0.join("daemon");
        std::fs::write(&program, "#!/bin/sh\nexec sleep 60\n").unwrap();
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let mut s = Supervisor::new();
        s.set_restart_delay(Duration::from_millis(20));
        s.start(DaemonSpec {
            name: "vanishing".into(),
            program: program.clone(),
            args: Vec::new(),
            env: Vec::new(),
            restart_loses: None,
        })
        .unwrap();
        std::fs::remove_file(&program).unwrap();
        kill(to_pid(s.pid("vanishing").unwrap()), Signal::SIGKILL).unwrap();
        let f = s.fatal(Duration::from_secs(30)).expect("fatal report");
        assert_eq!(f.name, "vanishing");
        assert!(f.message.starts_with("cannot restart: "), "{}", f.message);
        assert!(f.message.contains("No such file"), "{}", f.message);
        s.stop(Duration::from_secs(5));
    }
}
