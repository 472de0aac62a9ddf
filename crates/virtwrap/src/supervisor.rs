//! Starting and supervising the libvirt daemons (KubeVirt
//! `virtwrap/util/libvirt_helper.go`: both daemons restarted one second
//! after any exit, killed when the launcher stops).
//!
//! Each daemon runs in the foreground as a child of the launcher; its
//! standard error is re-logged line by line with the daemon's name. When a
//! daemon exits unexpectedly it is restarted after [`RESTART_DELAY`]; more
//! than [`MAX_RESTARTS`] exits within [`RESTART_WINDOW`] is reported as
//! fatal through [`Supervisor::fatal`], so the launcher fails loudly
//! instead of looping.

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

/// Pause before a crashed daemon is restarted (KubeVirt: 1 s).
pub const RESTART_DELAY: Duration = Duration::from_secs(1);
/// Restarts tolerated within [`RESTART_WINDOW`] before giving up.
pub const MAX_RESTARTS: usize = 5;
/// Window over which restarts are counted.
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);
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

    /// Waits up to `timeout` for a daemon that could not be kept running.
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
            d.stopping.store(true, Ordering::SeqCst);
            let pid = d.pid.load(Ordering::SeqCst);
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
    let mut r = BufReader::new(err);
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

fn supervise(d: &Supervised, fatal: &Sender<DaemonFailure>, delay: Duration) {
    let mut exits: Vec<Instant> = Vec::new();
    loop {
        let pid = d.pid.load(Ordering::SeqCst);
        let status = process::reaper().wait(pid, None);
        if d.stopping.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        exits.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
        exits.push(now);
        let how = status.map_or_else(|| "unknown status".to_owned(), |s| s.to_string());
        if exits.len() > MAX_RESTARTS {
            let message = format!(
                "exited {} times within {} s (last: {how}); giving up",
                exits.len(),
                RESTART_WINDOW.as_secs()
            );
            tracing::error!(daemon = %d.spec.name, "{message}");
            let _ = fatal.send(DaemonFailure {
                name: d.spec.name.clone(),
                message,
            });
            return;
        }
        tracing::error!(daemon = %d.spec.name, pid, "exited unexpectedly ({how}); restarting in {} ms", delay.as_millis());
        if let Some(lost) = &d.spec.restart_loses {
            tracing::warn!(daemon = %d.spec.name, "{lost}");
        }
        thread::sleep(delay);
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

    #[test]
    fn gives_up_loudly_on_a_crash_loop() {
        let mut s = Supervisor::new();
        s.set_restart_delay(Duration::from_millis(20));
        s.start(sh("crasher", "exit 1")).unwrap();
        let f = s.fatal(Duration::from_secs(30)).expect("fatal report");
        assert_eq!(f.name, "crasher");
        assert!(f.message.contains("giving up"), "{}", f.message);
    }
}
