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
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;

mod pump;

/// How long the status of a child nobody asked about is kept.
const KEEP_UNCLAIMED: Duration = Duration::from_secs(600);

/// Stack of the reaper thread: it waits, keeps a table and logs errors
/// (8 KiB of its stack are resident in a running launcher, the thread's
/// own data included); the limit bounds it well above that, below std's
/// 2 MiB default.
const REAPER_STACK: usize = 128 * 1024;

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
            .stack_size(REAPER_STACK)
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
    let deadline = Instant::now() + timeout;
    let (pumped, stdout, stderr) = pump::pump(
        child.stdin.take().zip(input),
        child.stdout.take(),
        child.stderr.take(),
        max_output,
        deadline,
        || r.has_exited(pid),
    );
    let remaining = deadline.saturating_duration_since(Instant::now());
    let status = match pumped {
        pump::Pumped::Done => r.wait(pid, Some(remaining)),
        pump::Pumped::TimedOut => None,
    };
    let Some(status) = status else {
        let _ = kill(
            Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
            Signal::SIGKILL,
        );
        r.wait(pid, Some(Duration::from_secs(5)));
        return Err(RunError::Timeout {
            program,
            seconds: timeout.as_secs(),
        });
    };
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

    /// A background process that keeps the output pipes open does not
    /// hold up the run: it ends when the program exits, with what the
    /// program wrote, and no thread is left blocked on the pipes.
    #[test]
    fn a_descendant_holding_the_pipes_does_not_hold_up_the_run() {
        let mut c = Command::new("sh");
        c.args(["-c", "sleep 30 & echo done; echo warn >&2"]);
        let t = Instant::now();
        let o = run(c, Duration::from_secs(20), 1024).unwrap();
        assert_eq!(o.stdout, b"done\n");
        assert_eq!(o.stderr, b"warn\n");
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }

    /// Output larger than a pipe on both streams at once, with input
    /// larger than a pipe: nothing deadlocks, the bound holds per stream.
    #[test]
    fn both_streams_and_input_beyond_a_pipe_buffer() {
        let mut c = Command::new("sh");
        c.args([
            "-c",
            "head -c 300000 /dev/zero >&2; cat; head -c 200000 /dev/zero",
        ]);
        let input = vec![b'x'; 500_000];
        let o = run_with_input(c, &input, Duration::from_secs(20), 400_000).unwrap();
        assert_eq!(o.stderr.len(), 300_000);
        assert_eq!(o.stdout.len(), 400_000);
        assert!(o.stdout.iter().all(|&b| b == b'x'));
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
