//! Standalone runs as PID 1 of its own PID namespace.
//!
//! In a pod, the container is torn down with the launcher, so nothing it
//! started can outlive it. Standalone, the launcher gives itself the same
//! guarantee: `virt-launcher run` creates a PID namespace and re-executes
//! itself as its first process (PID 1). When PID 1 exits, for any reason
//! including SIGKILL, the kernel kills every process in the namespace:
//! libvirt's daemons and QEMU never become orphans that a later run could
//! collide with. The outer process only forwards termination signals and
//! passes the exit status on; if it is killed, the inner one is killed too
//! (`PR_SET_PDEATHSIG`), with a pipe closing the window before that is set.
//!
//! No `fork` is needed (and no `unsafe`): after `unshare(CLONE_NEWPID)` the
//! calling process stays where it is and its next child is the new
//! namespace's PID 1.

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Command, ExitCode};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::error::LauncherError;

/// Set in the inner process: `<read-fd>,<write-fd>` of the liveness pipe.
const ENV_INNER: &str = "VIRT_LAUNCHER_PIDNS_PIPE";

/// Set in the inner process: the write end of the hand-over pipe, through
/// which an inner process that gives up root (`run --run-as-nonroot`)
/// leaves the removal of its state directory to the outer one.
const ENV_STATE: &str = "VIRT_LAUNCHER_PIDNS_STATE";

/// The inner process's end of the hand-over pipe (close-on-exec).
static HAND_OVER: std::sync::Mutex<Option<std::fs::File>> = std::sync::Mutex::new(None);

/// True when this process should create the namespace and re-execute
/// itself: not already PID 1 (inside `unshare --pid`, say) and not the
/// inner process.
pub fn needed() -> bool {
    !process::is_pid1() && std::env::var_os(ENV_INNER).is_none()
}

/// The outer process: creates the PID namespace, starts this program again
/// inside it with the same arguments, forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT
/// and returns the inner process's exit status.
///
/// # Errors
/// a runtime failure ([`LauncherError`], exit 1) when the namespace or the child cannot be
/// created (without root: EPERM).
pub fn run_outer() -> Result<ExitCode, LauncherError> {
    let fail =
        |what: &str, e: &dyn std::fmt::Display| LauncherError::runtime(format!("{what}: {e}"));
    unshare(CloneFlags::CLONE_NEWPID).map_err(|e| {
        fail(
            "cannot create a PID namespace (standalone mode needs root)",
            &e,
        )
    })?;
    // Not close-on-exec: the inner process inherits both ends and keeps the
    // read end; it sees EOF (POLLHUP) once this process is gone.
    let (r, w) = nix::unistd::pipe().map_err(|e| fail("pipe", &e))?;
    let (state_r, state_w) = nix::unistd::pipe().map_err(|e| fail("pipe", &e))?;
    let exe = std::env::current_exe().map_err(|e| fail("cannot find this program", &e))?;
    let mut child = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(ENV_INNER, format!("{},{}", r.as_raw_fd(), w.as_raw_fd()))
        .env(ENV_STATE, state_w.as_raw_fd().to_string())
        .env(
            process::tunables::GLIBC_TUNABLES,
            process::tunables::for_launcher(),
        )
        .spawn()
        .map_err(|e| fail("cannot start the launcher in its PID namespace", &e))?;
    drop(r);
    drop(state_w);
    let child_pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    // SIGCHLD too: the process sleeps in `wait()` until a signal comes (no
    // timer: it used to look every 20 ms, 3,000 wake-ups a minute). The
    // child's exit is checked before each sleep, so an exit before the
    // handler was in place is seen as well.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
        signal_hook::consts::SIGCHLD,
    ])
    .map_err(|e| fail("cannot install signal handlers", &e))?;
    // From here on this process only waits and forwards signals: what its
    // start-up mapped and allocated goes back (see `footprint`).
    crate::footprint::release_startup_memory();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                drop(w);
                remove_handed_over_state(state_r);
                let code = status
                    .code()
                    .or_else(|| {
                        std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s)
                    })
                    .unwrap_or(1);
                return Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)));
            }
            Ok(None) => {}
            Err(e) => return Err(fail("waiting for the launcher", &e)),
        }
        for sig in signals.wait() {
            if sig == signal_hook::consts::SIGCHLD {
                continue;
            }
            if let Ok(s) = Signal::try_from(sig) {
                let _ = kill(child_pid, s);
            }
        }
    }
}

/// Reads what the inner process handed over (nothing, or `<created>\t<state
/// directory>`) and removes that state directory: the inner process ran as
/// uid 107 at the end and could not. Its mount namespace is gone with it,
/// so no removal reaches through its bind mounts.
fn remove_handed_over_state(r: std::os::fd::OwnedFd) {
    use std::io::Read;
    let _ = nix::fcntl::fcntl(
        r.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    );
    let mut f = std::fs::File::from(r);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    // Bounded: a path and a flag.
    while buf.len() < 8192 {
        match f.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let Some((created, path)) = text.split_once('\t') else {
        return;
    };
    let path = std::path::Path::new(path);
    if let Err(e) = crate::isolation::StateDir::remove_left(path, created == "1") {
        logging::stderr_line(&format!(
            "virt-launcher: cannot remove the state {}: {e}",
            path.display()
        ));
    }
}

/// Inner process, before it gives up root: hands the removal of the state
/// directory `path` (`created`: the launcher made it) to the outer
/// process. Returns false when there is no outer process to take it.
pub fn hand_over_state(path: &std::path::Path, created: bool) -> bool {
    use std::io::Write;
    let mut guard = HAND_OVER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(mut f) = guard.take() else {
        return false;
    };
    let msg = format!("{}\t{}", u8::from(created), path.display());
    f.write_all(msg.as_bytes()).is_ok()
}

/// Inner process, after its credentials changed (which clears the
/// parent-death signal): dies with the outer process again.
///
/// # Errors
/// a runtime failure ([`LauncherError`]) from `PR_SET_PDEATHSIG`.
pub fn rearm_after_credential_change() -> Result<(), LauncherError> {
    if std::env::var_os(ENV_INNER).is_none() {
        return Ok(());
    }
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| LauncherError::runtime(format!("PR_SET_PDEATHSIG: {e}")))
}

/// The inner process, first thing: dies with the outer process, and
/// refuses to go on if it is already gone.
///
/// # Errors
/// a runtime failure ([`LauncherError`], exit 1) when the outer process has already exited.
pub fn setup_inner() -> Result<(), LauncherError> {
    let Some(fds) = std::env::var_os(ENV_INNER) else {
        return Ok(());
    };
    let parse = |s: Option<&str>| s.and_then(|v| v.parse::<RawFd>().ok());
    let text = fds.to_string_lossy().into_owned();
    let mut it = text.split(',');
    let (Some(r), Some(w)) = (parse(it.next()), parse(it.next())) else {
        return Err(LauncherError::runtime(format!(
            "{ENV_INNER}={text} is malformed"
        )));
    };
    let _ = nix::unistd::close(w);
    if let Some(fd) = std::env::var(ENV_STATE)
        .ok()
        .and_then(|v| v.parse::<RawFd>().ok())
    {
        // Reopened close-on-exec: no daemon or QEMU keeps it.
        if let Ok(f) = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/self/fd/{fd}"))
        {
            *HAND_OVER
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(f);
        }
        let _ = nix::unistd::close(fd);
    }
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| LauncherError::runtime(format!("PR_SET_PDEATHSIG: {e}")))?;
    // Reopen the inherited read end through /proc (no raw-descriptor
    // borrowing needed); with no writer left, poll reports a hang-up.
    let pipe = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{r}"))
        .map_err(|e| LauncherError::runtime(format!("liveness pipe: {e}")))?;
    let _ = nix::unistd::close(r);
    let mut pfd = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
    if poll(&mut pfd, PollTimeout::ZERO).is_ok_and(|n| n > 0) {
        return Err(LauncherError::runtime(
            "the outer virt-launcher process is gone",
        ));
    }
    Ok(())
}
