//! Termination signals (recorded, never fatal: the guest is shut down in
//! order) and the grace period they start.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use api::VirtualMachineInstance;

use crate::error::LauncherError;

static SIGNALS: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// The last termination signal received (0: none yet).
pub(crate) fn signals() -> Arc<AtomicUsize> {
    Arc::clone(SIGNALS.get_or_init(|| Arc::new(AtomicUsize::new(0))))
}

/// Records SIGTERM, SIGINT, SIGHUP and SIGQUIT instead of dying on them
/// (KubeVirt's launcher does the same): called first thing, so a signal
/// during start-up is never lost; as PID 1 an unhandled one would be
/// ignored. The domain is then shut down in order.
///
/// # Errors
/// a runtime failure ([`LauncherError`], exit 1) when a handler cannot be installed.
pub fn install_signal_handlers() -> Result<(), LauncherError> {
    let flag = signals();
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
    ] {
        signal_hook::flag::register_usize(sig, Arc::clone(&flag), sig as usize)
            .map_err(|e| LauncherError::runtime(format!("cannot install signal handler: {e}")))?;
        // Then wake the monitor, which sleeps between its ticks.
        if let Some(w) = crate::monitor::wake_writer() {
            signal_hook::low_level::pipe::register_raw(sig, w).map_err(|e| {
                LauncherError::runtime(format!("cannot install signal handler: {e}"))
            })?;
        }
    }
    Ok(())
}

pub(crate) fn ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The grace period: `--grace-period-seconds` when given, else the VMI's
/// `terminationGracePeriodSeconds` + 15, as virt-controller computes the flag.
pub fn grace_period(flag: Option<i64>, vmi: &VirtualMachineInstance) -> i64 {
    flag.unwrap_or_else(|| vmi.grace_period_seconds().saturating_add(15))
}
