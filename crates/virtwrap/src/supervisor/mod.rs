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
//!
//! One thread (`daemons`) does all of it for every daemon: it waits in
//! `poll(2)` on each daemon's pidfd (readable once the daemon exited; its
//! status comes from the one reaper, `process::reaper()`), each stderr
//! pipe and a wake pipe, and sleeps with a timeout only while a restart is
//! due. Not a supervising and a relaying thread per daemon: each thread
//! keeps 8-16 KiB of stack resident for the launcher's life (issue 20).

mod relay;

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::{ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use relay::Relay;

/// Pause before a daemon that exited is started again, after every exit
/// (KubeVirt: `time.Sleep(time.Second)` "to avoid consuming all resources
/// in the event of a crash loop").
pub const RESTART_DELAY: Duration = Duration::from_secs(1);
/// How long the reaper may take to hand over the status of a daemon whose
/// pidfd says it exited (it reaps at once; this only bounds a surprise).
const STATUS_WAIT: Duration = Duration::from_secs(1);
/// Stack of the `daemons` thread: it polls, formats log lines (into the
/// heap) and spawns daemons; 256 KiB bound it well above what it uses
/// (std's default is 2 MiB).
const THREAD_STACK: usize = 256 * 1024;

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
    restart_delay: Duration,
    pid: AtomicU32,
    stopping: AtomicBool,
    /// Set by the `daemons` thread once the daemon is no longer supervised:
    /// it exited after [`Supervisor::stop`] began, or could not be started
    /// again.
    finished: AtomicBool,
    /// Held while a restart checks `stopping` and spawns, and while
    /// [`Supervisor::stop`] sets it and reads the pid: stop then signals
    /// the daemon that runs, never one started just after.
    spawn_lock: Mutex<()>,
}

/// What the callers hand to the `daemons` thread.
struct Shared {
    /// Every daemon started, in order.
    daemons: Mutex<Vec<Arc<Supervised>>>,
    /// Stderr pipes of daemons started by [`Supervisor::start`], not yet
    /// taken by the thread.
    new_relays: Mutex<Vec<Relay>>,
    /// The thread ends once every daemon is finished.
    shutdown: AtomicBool,
    /// Written to wake the thread (new daemon, stop, shutdown).
    wake_tx: std::io::PipeWriter,
}

impl Shared {
    fn wake(&self) {
        let _ = (&self.wake_tx).write(&[1]);
    }
}

/// Runs daemons and restarts them when they die.
pub struct Supervisor {
    shared: Option<Arc<Shared>>,
    thread: Option<thread::JoinHandle<()>>,
    restart_delay: Duration,
    fatal_tx: Sender<DaemonFailure>,
    fatal_rx: Mutex<Receiver<DaemonFailure>>,
}

impl Default for Supervisor {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Supervisor {
    /// An empty supervisor.
    pub fn new() -> Self {
        let (fatal_tx, fatal_rx) = mpsc::channel();
        Supervisor {
            shared: None,
            thread: None,
            restart_delay: RESTART_DELAY,
            fatal_tx,
            fatal_rx: Mutex::new(fatal_rx),
        }
    }

    /// Starts `spec` and keeps it running.
    ///
    /// # Errors
    /// The spawn error of the first start (missing binary ...), or the
    /// `daemons` thread's (pipe, thread) on the first call.
    pub fn start(&mut self, spec: DaemonSpec) -> std::io::Result<()> {
        let shared = match &self.shared {
            Some(s) => Arc::clone(s),
            None => self.start_thread()?,
        };
        let (first, stderr) = spawn(&spec)?;
        let d = Arc::new(Supervised {
            spec,
            restart_delay: self.restart_delay,
            pid: AtomicU32::new(first),
            stopping: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            spawn_lock: Mutex::new(()),
        });
        if let Some(r) = stderr.and_then(|e| Relay::new(&d.spec.name, e)) {
            lock(&shared.new_relays).push(r);
        }
        lock(&shared.daemons).push(d);
        shared.wake();
        Ok(())
    }

    fn start_thread(&mut self) -> std::io::Result<Arc<Shared>> {
        let (wake_rx, wake_tx) = std::io::pipe()?;
        set_nonblocking(&wake_rx)?;
        set_nonblocking(&wake_tx)?;
        let shared = Arc::new(Shared {
            daemons: Mutex::new(Vec::new()),
            new_relays: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            wake_tx,
        });
        let worker = Worker {
            shared: Arc::clone(&shared),
            wake_rx,
            fatal: self.fatal_tx.clone(),
            watches: Vec::new(),
            relays: Vec::new(),
        };
        let handle = thread::Builder::new()
            .name("daemons".into())
            .stack_size(THREAD_STACK)
            .spawn(move || worker.run())?;
        self.thread = Some(handle);
        self.shared = Some(Arc::clone(&shared));
        Ok(shared)
    }

    fn daemons(&self) -> Vec<Arc<Supervised>> {
        self.shared
            .as_ref()
            .map(|s| lock(&s.daemons).clone())
            .unwrap_or_default()
    }

    /// Current pid of the daemon called `name`.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.daemons()
            .iter()
            .find(|d| d.spec.name == name)
            .map(|d| d.pid.load(Ordering::SeqCst))
    }

    /// Waits up to `timeout` for a daemon that could not be started again
    /// (its restart's spawn failed); `None` while every daemon runs or is
    /// about to be restarted.
    pub fn fatal(&self, timeout: Duration) -> Option<DaemonFailure> {
        lock(&self.fatal_rx).recv_timeout(timeout).ok()
    }

    /// Stops every daemon, last started first: SIGTERM, then SIGKILL when
    /// it has not exited after `grace`.
    pub fn stop(&self, grace: Duration) {
        let Some(shared) = &self.shared else { return };
        for d in self.daemons().iter().rev() {
            let pid = {
                let _spawning = lock(&d.spawn_lock);
                d.stopping.store(true, Ordering::SeqCst);
                d.pid.load(Ordering::SeqCst)
            };
            shared.wake();
            let _ = kill(to_pid(pid), Signal::SIGTERM);
            // The `daemons` thread collects the exit status and marks it.
            let deadline = Instant::now() + grace;
            while !d.finished.load(Ordering::SeqCst) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(10));
            }
            if !d.finished.load(Ordering::SeqCst) {
                tracing::warn!(daemon = %d.spec.name, pid, "did not stop on SIGTERM, killing");
                let _ = kill(to_pid(pid), Signal::SIGKILL);
                while !d.finished.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_millis(10));
                }
            }
            tracing::info!(daemon = %d.spec.name, pid, "stopped");
        }
        shared.shutdown.store(true, Ordering::SeqCst);
        shared.wake();
    }

    /// Sets the pause before restarts of daemons started after it (tests
    /// shorten it).
    pub fn set_restart_delay(&mut self, delay: Duration) {
        self.restart_delay = delay;
    }
}

impl Drop for Supervisor {
    /// Waits for the `daemons` thread after [`Supervisor::stop`]; without a
    /// stop the daemons stay supervised for the process's life.
    fn drop(&mut self) {
        let stopped = self
            .shared
            .as_ref()
            .is_some_and(|s| s.shutdown.load(Ordering::SeqCst));
        if let (true, Some(t)) = (stopped, self.thread.take()) {
            let _ = t.join();
        }
    }
}

fn set_nonblocking(fd: &impl AsFd) -> std::io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use std::os::fd::AsRawFd;
    let raw = fd.as_fd().as_raw_fd();
    let flags = fcntl(raw, FcntlArg::F_GETFL)?;
    fcntl(
        raw,
        FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
    )?;
    Ok(())
}

fn to_pid(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX))
}

/// A pidfd of `pid` (`pidfd_open`), readable once it exited; `None` when
/// it is gone already (or the kernel has no pidfds): the thread then asks
/// the reaper at once.
fn pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

fn spawn(spec: &DaemonSpec) -> std::io::Result<(u32, Option<ChildStderr>)> {
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
    tracing::info!(daemon = %spec.name, pid, "started");
    Ok((pid, child.stderr.take()))
}

/// One supervised daemon as the `daemons` thread follows it.
struct Watch {
    d: Arc<Supervised>,
    /// The running daemon's pidfd; `None` once it exited (or when none
    /// could be had: its exit is then checked with the reaper).
    pidfd: Option<OwnedFd>,
    /// When it exited: the time of its restart.
    restart_at: Option<Instant>,
    exits: u64,
}

/// The `daemons` thread's state (see the module docs).
struct Worker {
    shared: Arc<Shared>,
    wake_rx: std::io::PipeReader,
    fatal: Sender<DaemonFailure>,
    watches: Vec<Watch>,
    relays: Vec<Relay>,
}

impl Worker {
    fn run(mut self) {
        let mut buf = [0u8; relay::READ_CHUNK];
        loop {
            self.take_new();
            let now = Instant::now();
            for i in 0..self.watches.len() {
                self.restart_if_due(i, now);
            }
            self.watches
                .retain(|w| !w.d.finished.load(Ordering::SeqCst));
            if self.shutdown_done() {
                for r in &mut self.relays {
                    r.pump(&mut buf);
                }
                return;
            }
            let (relay_ready, exited) = self.wait();
            let mut i = 0;
            self.relays.retain_mut(|r| {
                let keep = !relay_ready[i] || r.pump(&mut buf);
                i += 1;
                keep
            });
            for (i, gone) in exited.into_iter().enumerate() {
                if gone {
                    self.exited(i);
                }
            }
        }
    }

    /// Takes the daemons and stderr pipes [`Supervisor::start`] added.
    fn take_new(&mut self) {
        let mut drained = [0u8; 64];
        while matches!((&self.wake_rx).read(&mut drained), Ok(n) if n > 0) {}
        self.relays.append(&mut lock(&self.shared.new_relays));
        for d in lock(&self.shared.daemons).iter() {
            if !self.watches.iter().any(|w| Arc::ptr_eq(&w.d, d))
                && !d.finished.load(Ordering::SeqCst)
            {
                self.watches.push(Watch {
                    d: Arc::clone(d),
                    pidfd: pidfd(d.pid.load(Ordering::SeqCst)),
                    restart_at: None,
                    exits: 0,
                });
            }
        }
    }

    fn shutdown_done(&self) -> bool {
        self.shared.shutdown.load(Ordering::SeqCst) && self.watches.is_empty()
    }

    /// Sleeps in `poll` until a pipe or pidfd is readable, a wake-up, or
    /// the next restart is due; which relays have data and which daemons
    /// exited.
    fn wait(&self) -> (Vec<bool>, Vec<bool>) {
        let now = Instant::now();
        let due = self.watches.iter().filter_map(|w| w.restart_at).min();
        // A daemon without a pidfd is checked with the reaper every 100 ms.
        let blind = self
            .watches
            .iter()
            .any(|w| w.pidfd.is_none() && w.restart_at.is_none());
        let mut sleep = due.map(|t| t.saturating_duration_since(now));
        if blind {
            sleep = Some(sleep.map_or(Duration::from_millis(100), |s| {
                s.min(Duration::from_millis(100))
            }));
        }
        let timeout = sleep.map_or(PollTimeout::NONE, |s| {
            PollTimeout::try_from(s).unwrap_or(PollTimeout::MAX)
        });
        let mut fds = vec![PollFd::new(self.wake_rx.as_fd(), PollFlags::POLLIN)];
        fds.extend(
            self.relays
                .iter()
                .map(|r| PollFd::new(r.fd(), PollFlags::POLLIN)),
        );
        let watched: Vec<usize> = (0..self.watches.len())
            .filter(|&i| self.watches[i].pidfd.is_some() && self.watches[i].restart_at.is_none())
            .collect();
        for &i in &watched {
            if let Some(p) = &self.watches[i].pidfd {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
            }
        }
        if let Err(e) = poll(&mut fds, timeout) {
            if e != nix::errno::Errno::EINTR {
                tracing::warn!("daemon supervisor: poll: {e}");
                thread::sleep(Duration::from_millis(100));
            }
        }
        let ready = |f: &PollFd<'_>| f.revents().is_some_and(|r| !r.is_empty());
        let relays = self.relays.len();
        let relay_ready = fds[1..=relays].iter().map(ready).collect();
        let mut exited = vec![false; self.watches.len()];
        for (k, &i) in watched.iter().enumerate() {
            exited[i] = ready(&fds[1 + relays + k]);
        }
        for (i, w) in self.watches.iter().enumerate() {
            if w.pidfd.is_none() && w.restart_at.is_none() {
                exited[i] = process::reaper().has_exited(w.d.pid.load(Ordering::SeqCst));
            }
        }
        (relay_ready, exited)
    }

    /// The daemon of watch `i` exited: finished when it is being stopped,
    /// else logged and its restart scheduled.
    fn exited(&mut self, i: usize) {
        let w = &mut self.watches[i];
        w.pidfd = None;
        let pid = w.d.pid.load(Ordering::SeqCst);
        let status = process::reaper().wait(pid, Some(STATUS_WAIT));
        if w.d.stopping.load(Ordering::SeqCst) {
            w.d.finished.store(true, Ordering::SeqCst);
            return;
        }
        w.exits += 1;
        let delay = w.d.restart_delay;
        let how = status.map_or_else(|| "unknown status".to_owned(), |s| s.to_string());
        tracing::error!(daemon = %w.d.spec.name, pid, exits = w.exits, "exited unexpectedly ({how}); restarting in {} ms", delay.as_millis());
        if let Some(lost) = &w.d.spec.restart_loses {
            tracing::warn!(daemon = %w.d.spec.name, "{lost}");
        }
        w.restart_at = Some(Instant::now() + delay);
    }

    /// Starts the daemon of watch `i` again when its pause is over (or
    /// finishes it when it is being stopped).
    fn restart_if_due(&mut self, i: usize, now: Instant) {
        let w = &mut self.watches[i];
        let Some(at) = w.restart_at else { return };
        let _spawning = lock(&w.d.spawn_lock);
        if w.d.stopping.load(Ordering::SeqCst) {
            w.d.finished.store(true, Ordering::SeqCst);
            return;
        }
        if now < at {
            return;
        }
        w.restart_at = None;
        match spawn(&w.d.spec) {
            Ok((pid, stderr)) => {
                w.d.pid.store(pid, Ordering::SeqCst);
                w.pidfd = pidfd(pid);
                if let Some(r) = stderr.and_then(|e| Relay::new(&w.d.spec.name, e)) {
                    self.relays.push(r);
                }
            }
            Err(e) => {
                let message = format!("cannot restart: {e}");
                tracing::error!(daemon = %w.d.spec.name, "{message}");
                w.d.finished.store(true, Ordering::SeqCst);
                let _ = self.fatal.send(DaemonFailure {
                    name: w.d.spec.name.clone(),
                    message,
                });
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
