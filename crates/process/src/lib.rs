//! Child processes of the launcher.
//!
//! The launcher is a child subreaper (`PR_SET_CHILD_SUBREAPER`), so QEMU and
//! libvirt's short-lived helper processes, which libvirt daemonises, are
//! re-parented to it when their parent exits. Someone must `wait` for them:
//! an un-reaped QEMU capability probe stalls libvirt about 40 s, and a
//! zombie QEMU looks alive to a pid check. KubeVirt's virt-launcher-monitor
//! does this as PID 1; here one reaper thread collects every child's exit
//! status with `waitpid(-1)`, and code that started a child asks the reaper
//! for its status ([`Reaper::wait`]). Nothing else in the process may call
//! `wait` (`Command::output`, `Command::status`, `Child::wait` would race
//! with the reaper and fail with ECHILD): use [`run`] instead.

pub mod tunables;

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;

/// How long the status of a child nobody asked about is kept.
const KEEP_UNCLAIMED: Duration = Duration::from_secs(600);

#[derive(Default)]
struct State {
    exited: HashMap<u32, (ExitStatus, Instant)>,
}

/// The process-wide reaper (see the module docs).
pub struct Reaper {
    state: Mutex<State>,
    changed: Condvar,
}

static REAPER: OnceLock<Arc<Reaper>> = OnceLock::new();

/// The reaper, started on first use.
pub fn reaper() -> &'static Arc<Reaper> {
    REAPER.get_or_init(|| {
        let r = Arc::new(Reaper {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let worker = Arc::clone(&r);
        let spawned = thread::Builder::new()
            .name("reaper".into())
            .spawn(move || worker.run());
        if let Err(e) = spawned {
            tracing::error!("cannot start the reaper thread: {e}");
        }
        r
    })
}

/// Makes this process the subreaper of its descendants, so orphaned
/// processes (QEMU, libvirt helpers) are re-parented here and reaped.
///
/// # Errors
/// The `prctl` error.
pub fn become_subreaper() -> Result<(), Errno> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// True when this process is PID 1 of its PID namespace.
pub fn is_pid1() -> bool {
    std::process::id() == 1
}

fn to_exit_status(ws: WaitStatus) -> Option<(u32, ExitStatus)> {
    match ws {
        WaitStatus::Exited(pid, code) => Some((
            pid.as_raw().unsigned_abs(),
            ExitStatus::from_raw((code & 0xff) << 8),
        )),
        WaitStatus::Signaled(pid, sig, _) => Some((
            pid.as_raw().unsigned_abs(),
            ExitStatus::from_raw(sig as i32),
        )),
        _ => None,
    }
}

impl Reaper {
    fn run(&self) {
        loop {
            match waitpid(None::<Pid>, None) {
                Ok(ws) => {
                    if let Some((pid, status)) = to_exit_status(ws) {
                        let mut st = self.lock();
                        let now = Instant::now();
                        st.exited
                            .retain(|_, (_, t)| now.duration_since(*t) < KEEP_UNCLAIMED);
                        st.exited.insert(pid, (status, now));
                        drop(st);
                        self.changed.notify_all();
                    }
                }
                Err(Errno::ECHILD) => {
                    // No children right now: sleep until one is spawned
                    // (orphans re-parented to us wake the next waitpid too).
                    let st = self.lock();
                    let _unused = self
                        .changed
                        .wait_timeout(st, Duration::from_millis(50))
                        .map(|(g, _)| g);
                }
                Err(Errno::EINTR) => {}
                Err(e) => {
                    tracing::error!("waitpid: {e}");
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Spawns `cmd`. Its exit status is collected by the reaper: never call
    /// `wait` on the returned child, ask [`Reaper::wait`].
    ///
    /// # Errors
    /// The spawn error (program not found, ...).
    pub fn spawn(&self, cmd: &mut Command) -> std::io::Result<Child> {
        let child = cmd.spawn()?;
        // Wake the reaper if it is idling because there were no children.
        self.changed.notify_all();
        Ok(child)
    }

    /// Waits up to `timeout` (forever when `None`) for `pid` to exit and
    /// returns its status, or `None` on timeout.
    pub fn wait(&self, pid: u32, timeout: Option<Duration>) -> Option<ExitStatus> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.lock();
        loop {
            if let Some((status, _)) = st.exited.remove(&pid) {
                return Some(status);
            }
            match deadline {
                None => {
                    st = self
                        .changed
                        .wait(st)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                }
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    st = self
                        .changed
                        .wait_timeout(st, d - now)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0);
                }
            }
        }
    }

    /// The exit status of `pid` if it has exited (removes it from the table).
    pub fn try_wait(&self, pid: u32) -> Option<ExitStatus> {
        self.lock().exited.remove(&pid).map(|(s, _)| s)
    }

    /// True when `pid` has exited and nobody has collected it yet.
    pub fn has_exited(&self, pid: u32) -> bool {
        self.lock().exited.contains_key(&pid)
    }
}

/// What a finished command produced.
#[derive(Clone, Debug)]
pub struct Output {
    /// Exit status.
    pub status: ExitStatus,
    /// Standard output, at most the requested limit.
    pub stdout: Vec<u8>,
    /// Standard error, at most the requested limit.
    pub stderr: Vec<u8>,
}

/// Why [`run`] failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// Program name.
        program: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The program ran longer than allowed and was killed.
    #[error("{program} did not finish within {seconds} s and was killed")]
    Timeout {
        /// Program name.
        program: String,
        /// The limit.
        seconds: u64,
    },
    /// The program exited unsuccessfully.
    #[error("{program} failed ({status}): {stderr}")]
    Failed {
        /// Program name.
        program: String,
        /// Its exit status.
        status: ExitStatus,
        /// The first line(s) of its standard error.
        stderr: String,
    },
}

/// Runs `cmd` to completion with no stdin, capturing at most `max_output`
/// bytes of each output stream, killing it after `timeout`.
///
/// # Errors
/// [`RunError`]: not started, timed out (killed), or non-zero exit (with
/// its standard error).
pub fn run(cmd: Command, timeout: Duration, max_output: usize) -> Result<Output, RunError> {
    run_inner(cmd, None, timeout, max_output)
}

/// [`run`] with `input` written to the program's standard input (then
/// closed), e.g. `nft -f -`.
///
/// # Errors
/// As [`run`].
pub fn run_with_input(
    cmd: Command,
    input: &[u8],
    timeout: Duration,
    max_output: usize,
) -> Result<Output, RunError> {
    run_inner(cmd, Some(input.to_vec()), timeout, max_output)
}

fn run_inner(
    mut cmd: Command,
    input: Option<Vec<u8>>,
    timeout: Duration,
    max_output: usize,
) -> Result<Output, RunError> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let r = reaper();
    let mut child = r.spawn(&mut cmd).map_err(|source| RunError::Spawn {
        program: program.clone(),
        source,
    })?;
    let pid = child.id();
    if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
        // A writer thread, so a program that does not read cannot block us
        // past the timeout; the pipe closes when the thread ends.
        thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&data);
        });
    }
    let read = |s: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(s) = s {
                let mut limited = s.take(u64::try_from(max_output).unwrap_or(u64::MAX));
                let _ = limited.read_to_end(&mut buf);
                // Drain the rest so the child never blocks on a full pipe.
                let mut rest = limited.into_inner();
                let _ = std::io::copy(&mut rest, &mut std::io::sink());
            }
            buf
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let status = match r.wait(pid, Some(timeout)) {
        Some(s) => s,
        None => {
            let _ = kill(
                Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
                Signal::SIGKILL,
            );
            r.wait(pid, Some(Duration::from_secs(5)));
            return Err(RunError::Timeout {
                program,
                seconds: timeout.as_secs(),
            });
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        let text = String::from_utf8_lossy(&stderr);
        return Err(RunError::Failed {
            program,
            status,
            stderr: text.trim().chars().take(2000).collect(),
        });
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_captures() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo out; echo err >&2"]);
        let o = run(c, Duration::from_secs(10), 1024).unwrap();
        assert_eq!(o.stdout, b"out\n");
        assert_eq!(o.stderr, b"err\n");
    }

    #[test]
    fn input_reaches_stdin_and_a_program_that_never_reads_it_still_times_out() {
        let mut c = Command::new("sh");
        c.args(["-c", "tr a-z A-Z"]);
        let big = "nft rules\n".repeat(100_000); // more than a pipe buffer
        let out = run_with_input(c, big.as_bytes(), Duration::from_secs(20), 4 << 20).unwrap();
        assert_eq!(out.stdout, big.to_uppercase().as_bytes());
        let mut c = Command::new("sleep");
        c.arg("30");
        let e = run_with_input(c, big.as_bytes(), Duration::from_millis(300), 1024).unwrap_err();
        assert!(matches!(e, RunError::Timeout { .. }), "{e}");
    }

    #[test]
    fn failure_carries_stderr() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo boom >&2; exit 3"]);
        match run(c, Duration::from_secs(10), 1024) {
            Err(RunError::Failed { status, stderr, .. }) => {
                assert_eq!(status.code(), Some(3));
                assert_eq!(stderr, "boom");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn timeout_kills() {
        let mut c = Command::new("sleep");
        c.arg("30");
        let t = Instant::now();
        assert!(matches!(
            run(c, Duration::from_millis(200), 16),
            Err(RunError::Timeout { .. })
        ));
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn output_is_bounded() {
        let mut c = Command::new("sh");
        c.args(["-c", "head -c 100000 /dev/zero"]);
        let o = run(c, Duration::from_secs(10), 1000).unwrap();
        assert_eq!(o.stdout.len(), 1000);
    }

    #[test]
    fn missing_program() {
        let c = Command::new("/nonexistent/program");
        assert!(matches!(
            run(c, Duration::from_secs(1), 16),
            Err(RunError::Spawn { .. })
        ));
    }
}
