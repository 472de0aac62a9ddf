//! Watching the QEMU process (KubeVirt `pkg/virt-launcher/monitor.go`) and
//! turning termination signals into a graceful guest shutdown.

use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use api::VirtualMachineInstance;
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use virtwrap::supervisor::Supervisor;
use virtwrap::{DomainManager, IncomingOutcome, LibvirtDomainManager, ShutdownRequest};

use crate::error::LauncherError;
use crate::user::RuntimeUser;

/// How often the monitor looks once QEMU runs: KubeVirt's monitor rate
/// (`monitorLoop`, 1 s). What needs a prompt answer does not wait for the
/// tick: a termination signal or SignalTargetPodCleanup writes to the
/// monitor's wake pipe ([`wake`]) and QEMU's exit makes its pidfd readable,
/// and the tick is cut short at the end of the grace period. The tick
/// itself only notices a daemon the supervisor gave up on and a finished
/// shutdown request (within a second, as in KubeVirt).
const TICK: Duration = Duration::from_secs(1);

/// How often the monitor looks for QEMU's pid file before QEMU appeared
/// (start-up only: the domain was just started, the file comes at once).
const PID_FILE_TICK: Duration = Duration::from_millis(100);

/// The monitor's self-pipe: `(read end, write end)`, both non-blocking.
/// Signal handlers write to it (`signal_hook::low_level::pipe`, async
/// signal safe), as does [`signal_early_exit`]; [`watch`] sleeps on it.
static WAKE: std::sync::OnceLock<Option<(OwnedFd, OwnedFd)>> = std::sync::OnceLock::new();

fn wake_pipe() -> Option<&'static (OwnedFd, OwnedFd)> {
    WAKE.get_or_init(|| {
        nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)
            .map_err(|e| tracing::warn!("no monitor wake pipe ({e}): the monitor ticks"))
            .ok()
    })
    .as_ref()
}

/// The write end of the monitor's wake pipe, for the signal handlers
/// (`signal_hook::low_level::pipe::register_raw`; it stays open for the
/// process's life); `None` without a pipe.
pub(crate) fn wake_writer() -> Option<RawFd> {
    wake_pipe().map(|(_, w)| w.as_raw_fd())
}

/// Wakes the monitor now (a full pipe already will).
fn wake() {
    if let Some((_, w)) = wake_pipe() {
        let _ = nix::unistd::write(w, &[1]);
    }
}

/// Sleeps up to `timeout`, less when the wake pipe or `pidfd` (QEMU's:
/// readable once it exited) becomes readable; empties the pipe.
fn sleep_or_wake(pidfd: Option<&OwnedFd>, timeout: Duration) {
    let Some((r, _)) = wake_pipe() else {
        thread::sleep(timeout);
        return;
    };
    let mut fds = vec![PollFd::new(r.as_fd(), PollFlags::POLLIN)];
    if let Some(p) = pidfd {
        fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
    }
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let _ = poll(&mut fds, PollTimeout::from(ms));
    let mut buf = [0u8; 64];
    while matches!(nix::unistd::read(r.as_raw_fd(), &mut buf), Ok(n) if n > 0) {}
}

/// A pidfd of QEMU (`pidfd_open`), readable once it exited; `None` when it
/// cannot be had (already gone: the next check sees that).
fn pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// The QEMU pid libvirt recorded for `vmi`'s domain, in `user`'s pid
/// directory ([`RuntimeUser::qemu_pid_dir`]: `/var/run/libvirt/qemu/<domain>.pid`
/// as root, `/var/run/libvirt/qemu/run/<domain>.pid` non-root).
pub fn qemu_pid(vmi: &VirtualMachineInstance, user: RuntimeUser) -> Option<u32> {
    let p = format!("{}/{}.pid", user.qemu_pid_dir(), vmi.domain_name());
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn alive(pid: u32) -> bool {
    if process::reaper().has_exited(pid) {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Field 3 (after the parenthesised command) is the state; Z = zombie.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// SignalTargetPodCleanup reached this launcher (KubeVirt's
/// `VIRT_LAUNCHER_TARGET_POD_EXIT_SIGNAL`): the monitor stops waiting.
static EARLY_EXIT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records SignalTargetPodCleanup's early exit signal for [`watch`].
pub fn signal_early_exit() {
    EARLY_EXIT.store(true, Ordering::SeqCst);
    wake();
}

fn to_pid(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX))
}

/// Watches the domain's QEMU until it exits. On the first termination
/// signal the runtime metadata is marked for graceful shutdown (what
/// virt-handler watches for) and the guest gets a shutdown request (guest
/// agent or ACPI, libvirt's choice); when it is still running
/// `grace` later it is killed. The request is made on a thread of its own:
/// libvirt's guest-agent shutdown waits up to 60 s for the guest to act,
/// and neither the watch nor the kill at the end of `grace` waits for it. While libvirt has the guest paused for a
/// memory dump the request waits: it is asked again every tick and goes
/// out as soon as libvirt resumes the guest after the dump (a paused guest
/// cannot act on it; the grace period keeps running meanwhile). A guest
/// paused by the user gets no request and is killed after `grace`. A
/// libvirt daemon that cannot be kept running ends the VM (it could no
/// longer be managed).
///
/// # Errors
/// a runtime failure ([`LauncherError`], exit 1) when QEMU never appeared within
/// `qemu_timeout` (no domain: KubeVirt's "timed out waiting for domain to
/// be defined"), SignalTargetPodCleanup came before any domain (KubeVirt's
/// "received early exit signal", see [`early_exit`]), a daemon failed, or
/// the guest crashed. A migration target
/// whose incoming domain went away before it ran here (the migration
/// failed or was aborted) ends with `Ok`, as KubeVirt's target exits 0.
pub fn watch(w: &Watch<'_>) -> Result<(), LauncherError> {
    thread::scope(|scope| {
        let ask = |again: bool| scope.spawn(move || request_shutdown(w.vmi, w.manager, again));
        watch_with(w, ask)
    })
}

/// What [`watch`] watches, and its time limits.
#[derive(Clone, Copy)]
pub struct Watch<'a> {
    /// The VMI whose domain's QEMU is watched.
    pub vmi: &'a VirtualMachineInstance,
    /// Who the launcher runs as (where libvirt writes QEMU's pid file).
    pub user: RuntimeUser,
    /// Its domain manager (shutdown request, kill, final state).
    pub manager: &'a LibvirtDomainManager,
    /// The libvirt daemons' supervisor (a daemon that cannot be kept
    /// running ends the VM).
    pub sup: &'a Supervisor,
    /// The last termination signal received (0: none yet).
    pub signals: &'a AtomicUsize,
    /// From the first termination signal to the kill.
    pub grace: Duration,
    /// How long QEMU may take to appear (`--qemu-timeout`).
    pub qemu_timeout: Duration,
}

/// [`watch`], with `ask(again)` starting a shutdown request whose result
/// (ask again after a memory dump) is read once it has finished.
fn watch_with<'s>(
    w: &Watch<'_>,
    ask: impl Fn(bool) -> thread::ScopedJoinHandle<'s, bool>,
) -> Result<(), LauncherError> {
    let Watch {
        vmi,
        user,
        manager,
        sup,
        signals,
        grace,
        qemu_timeout,
    } = *w;
    let start = Instant::now();
    let mut pid = None;
    let mut qemu_fd: Option<OwnedFd> = None;
    let mut shutdown_at: Option<Instant> = None;
    // The shutdown request waits for a memory dump to end (see above).
    let mut deferred = false;
    let mut pending: Option<thread::ScopedJoinHandle<'s, bool>> = None;
    let mut killed = false;
    loop {
        if pending
            .as_ref()
            .is_some_and(thread::ScopedJoinHandle::is_finished)
        {
            deferred = pending.take().is_some_and(|h| h.join().unwrap_or(false));
        }
        if let Some(f) = sup.fatal(Duration::ZERO) {
            if let Some(p) = pid {
                let _ = kill(to_pid(p), Signal::SIGKILL);
            }
            return Err(LauncherError::runtime(format!(
                "{} could not be kept running: {}",
                f.name, f.message
            )));
        }
        if EARLY_EXIT.load(Ordering::SeqCst) {
            return early_exit(vmi, manager, pid.is_some());
        }
        let sig = signals.load(Ordering::SeqCst);
        if sig != 0 && shutdown_at.is_none() {
            tracing::info!(
                signal = sig,
                grace_seconds = grace.as_secs(),
                "termination signal: shutting the guest down"
            );
            shutdown_at = Some(Instant::now());
            manager.mark_graceful_shutdown();
            pending = Some(ask(false));
        } else if deferred && !killed && pending.is_none() {
            deferred = false;
            pending = Some(ask(true));
        }
        if let Some(t) = shutdown_at {
            if !killed && t.elapsed() > grace {
                tracing::warn!(
                    "grace period of {} s expired: killing the guest",
                    grace.as_secs()
                );
                killed = true;
                if let Err(e) = manager.kill_vmi(vmi) {
                    tracing::warn!("kill failed ({e}); sending SIGTERM to QEMU");
                    if let Some(p) = pid {
                        let _ = kill(to_pid(p), Signal::SIGTERM);
                    }
                }
            }
        }
        match pid {
            None => {
                pid = qemu_pid(vmi, user);
                if let Some(p) = pid {
                    tracing::info!(pid = p, "watching QEMU");
                    qemu_fd = pidfd(p);
                    crate::footprint::release_now();
                } else if manager.incoming_outcome() == IncomingOutcome::WentAway {
                    // KubeVirt's target found the incoming domain, then its
                    // QEMU gone: the launcher exits 0 once virt-handler has
                    // the final (deletion) notification, which the bridge
                    // sends when the domain goes.
                    incoming_failed(vmi);
                    return Ok(());
                } else if start.elapsed() > qemu_timeout {
                    let defined = manager
                        .list_all_domains()
                        .is_ok_and(|l| l.iter().any(|d| d.name == vmi.domain_name()));
                    return Err(LauncherError::runtime(no_qemu_message(
                        defined,
                        manager.awaits_incoming(),
                        qemu_timeout,
                    )));
                } else if shutdown_at.is_some() {
                    return Ok(());
                }
            }
            Some(p) if !alive(p) => return finished(vmi, manager, shutdown_at.is_some()),
            Some(_) => {}
        }
        crate::footprint::release_if_due();
        let mut tick = if pid.is_some() { TICK } else { PID_FILE_TICK };
        if let Some(t) = shutdown_at.filter(|_| !killed) {
            // Wake just after the grace period ends (the check is `>`).
            tick = tick.min(grace.saturating_sub(t.elapsed()) + Duration::from_millis(1));
        }
        sleep_or_wake(qemu_fd.as_ref(), tick);
    }
}

/// SignalTargetPodCleanup reached this pod (virt-handler's target side
/// sends it once the migration failed): the launcher stops waiting.
/// KubeVirt v1.6.6's launcher ends one of two ways. While no domain was
/// ever defined here (`waitForDomainUUID`) it panics with `received
/// early exit signal`: the container fails (Go's exit code 2, pod phase
/// `Failed`). This is a runtime failure here (exit 1, so the pod phase is
/// `Failed` too, with the same words); the exit code differs as for every
/// Go panic the launcher maps (`--qemu-timeout`'s): nothing in KubeVirt
/// reads it, virt-controller takes either phase as the pod being down
/// (`PodIsDown`). Once a domain was there (its QEMU watched, or the
/// incoming one seen) the monitor stops waiting and the launcher ends
/// cleanly (exit 0).
///
/// # Errors
/// The runtime failure above when no domain ever came.
fn early_exit(
    vmi: &VirtualMachineInstance,
    manager: &LibvirtDomainManager,
    watching: bool,
) -> Result<(), LauncherError> {
    let incoming = manager.incoming_outcome();
    let defined = || {
        manager
            .list_all_domains()
            .is_ok_and(|l| l.iter().any(|d| d.name == vmi.domain_name()))
    };
    if !watching && incoming == IncomingOutcome::Awaited && !defined() {
        return Err(LauncherError::runtime(format!(
            "received early exit signal: virt-handler's SignalTargetPodCleanup for this pod (POD_NAME) came before any domain was defined here{}",
            if manager.awaits_incoming() {
                " (the migration this target was prepared for failed before it reached it)"
            } else {
                ""
            }
        )));
    }
    tracing::info!(
        "received early exit signal - stop waiting for {}",
        vmi.domain_name()
    );
    if incoming != IncomingOutcome::Running && manager.awaits_incoming() {
        tracing::info!(
            domain = %vmi.domain_name(),
            "the incoming migration failed or was aborted (virt-handler's SignalTargetPodCleanup): the incoming domain never ran here; this launcher is done"
        );
    }
    Ok(())
}

/// Logs why a migration target is done although no guest ran here: the
/// incoming migration failed or was aborted, and libvirt dropped the
/// incoming domain (KubeVirt's target sees its QEMU gone and exits 0).
fn incoming_failed(vmi: &VirtualMachineInstance) {
    tracing::info!(
        domain = %vmi.domain_name(),
        "the incoming migration failed or was aborted: the domain went away from this migration target before it ran here (the source keeps the guest and records why); this launcher is done"
    );
}

/// The error when `--qemu-timeout` passed with no QEMU: KubeVirt's words
/// when libvirt has no domain (`waitForDomainUUID`: "timed out waiting for
/// domain to be defined"), and, for a prepared migration target
/// (`incoming`), that no incoming migration reached it; otherwise the
/// domain exists and its QEMU never appeared.
fn no_qemu_message(defined: bool, incoming: bool, timeout: Duration) -> String {
    let secs = timeout.as_secs();
    match (defined, incoming) {
        (false, true) => format!(
            "timed out waiting for domain to be defined (--qemu-timeout {secs} s): this launcher was prepared as a migration target and no incoming migration reached it (it failed before libvirt made the domain here, or never started: see the source's migration record)"
        ),
        (false, false) => {
            format!("timed out waiting for domain to be defined (--qemu-timeout {secs} s)")
        }
        (true, _) => format!(
            "timed out waiting for the domain's QEMU process (--qemu-timeout {secs} s): the domain is defined but QEMU never appeared"
        ),
    }
}

/// Sends the shutdown request; true when it must be asked again (the
/// guest is paused for a memory dump). `again`: this is a retry (logged
/// only when it goes out).
fn request_shutdown(
    vmi: &VirtualMachineInstance,
    manager: &LibvirtDomainManager,
    again: bool,
) -> bool {
    match manager.signal_shutdown_vmi(vmi) {
        Ok(ShutdownRequest::DeferredForDump) => {
            if !again {
                tracing::info!("guest paused for a memory dump: shutdown requested when it ends");
            }
            true
        }
        Ok(ShutdownRequest::Sent) => {
            if again {
                tracing::info!("memory dump over: shutdown requested");
            }
            false
        }
        Ok(ShutdownRequest::Paused | ShutdownRequest::NotRunning) => false,
        Err(e) => {
            tracing::warn!("shutdown request failed: {e}");
            false
        }
    }
}

/// Reports how the domain ended: a guest power-off or a requested shutdown
/// is success; a crash is an error.
fn finished(
    vmi: &VirtualMachineInstance,
    manager: &LibvirtDomainManager,
    requested: bool,
) -> Result<(), LauncherError> {
    // libvirt notices QEMU's exit through its monitor socket; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut last = ("Unknown", "Unknown");
    while Instant::now() < deadline {
        match manager.list_all_domains() {
            Ok(list) => {
                if let Some(d) = list.iter().find(|d| d.name == vmi.domain_name()) {
                    last = (d.state, d.reason);
                    // ShuttingDown is transient while libvirt tears QEMU down.
                    if matches!(d.state, "Shutoff" | "Crashed") {
                        break;
                    }
                } else if let Some(ended) = manager.ended() {
                    // virt-handler deleted it once it saw it shut off.
                    last = ended;
                    break;
                }
            }
            Err(e) => tracing::warn!("reading the final state: {e}"),
        }
        thread::sleep(Duration::from_millis(50));
    }
    tracing::info!(state = last.0, reason = last.1, "QEMU exited");
    if last == ("Shutoff", "Migrated") {
        tracing::info!(domain = %vmi.domain_name(), "the domain migrated away: this launcher is done");
    } else if manager.awaits_incoming() && manager.incoming_outcome() != IncomingOutcome::Running {
        incoming_failed(vmi);
        return Ok(());
    }
    match last.1 {
        "Crashed" | "Failed" | "Panicked" if !requested => Err(LauncherError::runtime(format!(
            "the guest ended abnormally: {} ({})",
            last.0, last.1
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::no_qemu_message;
    use std::time::Duration;

    #[test]
    fn the_timeout_says_what_never_came() {
        let t = Duration::from_secs(240);
        let kubevirt = "timed out waiting for domain to be defined (--qemu-timeout 240 s)";
        assert_eq!(no_qemu_message(false, false, t), kubevirt);
        let target = no_qemu_message(false, true, t);
        assert!(
            target.starts_with(kubevirt)
                && target.contains(
                    "prepared as a migration target and no incoming migration reached it"
                ),
            "{target}"
        );
        let defined = no_qemu_message(true, true, t);
        assert!(
            defined.starts_with(
                "timed out waiting for the domain's QEMU process (--qemu-timeout 240 s)"
            ),
            "{defined}"
        );
    }
}
