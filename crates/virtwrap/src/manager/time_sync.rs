//! Setting the guest's clock after Unpause, as KubeVirt v1.6.6 does
//! (`manager.go` `setGuestTime`, called by `UnpauseVMI` once the domain
//! resumed): a paused guest's clock stood still, and the drift can exceed
//! what NTP corrects.
//!
//! KubeVirt's timing and errors: on a thread of its own, every second
//! (the first try one second after the resume) `virDomainSetTime(now, 0)`
//! (libvirt's `guest-set-time` with the host's time through the guest
//! agent) until it succeeds, for at most 60 s. An unresponsive agent and
//! other errors are retried (the last one logged as a warning at the
//! end); libvirt's "operation unsupported" or "argument unsupported" (no
//! agent configured) stop at once with a warning. Success logs `guest VM
//! time sync finished successfully`; the deadline logs `failed to sync
//! guest time`. KubeVirt guards the whole with a `sync.Once` of the
//! domain manager: only the first resume in a launcher's life sets the
//! clock (later Unpauses do not), and so here.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use virt::domain::Domain as VirtDomain;
use virt::sys;

use super::LibvirtDomainManager;

/// KubeVirt's log text of a failed sync.
pub const FAILED_SYNC_GUEST_TIME: &str = "failed to sync guest time";
/// How long KubeVirt keeps trying.
pub const TIME_SYNC_DEADLINE: Duration = Duration::from_secs(60);
/// KubeVirt's interval between tries (and before the first).
pub const TIME_SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// What to do after a failed `virDomainSetTime` with libvirt error `code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Try again at the next tick (keep the error for the final warning).
    Again,
    /// Stop: the guest cannot set its time (KubeVirt's warning text).
    Stop(&'static str),
}

/// KubeVirt's decision for libvirt error `code`.
pub fn after_error(code: u32) -> Retry {
    match code {
        sys::VIR_ERR_OPERATION_UNSUPPORTED => Retry::Stop("failed to set time: not supported"),
        sys::VIR_ERR_ARGUMENT_UNSUPPORTED => {
            Retry::Stop("failed to set time: agent not configured")
        }
        _ => Retry::Again,
    }
}

/// The text KubeVirt keeps for the final warning after error `code` with
/// libvirt's error `e` (as Go prints a libvirt error).
fn kept_error(code: u32, e: &virt::error::Error) -> String {
    let vir = format!(
        "virError(Code={}, Domain={}, Message='{}')",
        e.code().to_raw(),
        e.domain().to_raw(),
        e.message()
    );
    if code == sys::VIR_ERR_AGENT_UNRESPONSIVE {
        format!("failed to set time: QEMU agent unresponsive, {vir}")
    } else {
        format!("{FAILED_SYNC_GUEST_TIME}, {vir}")
    }
}

/// KubeVirt's loop on `dom` (see the module's documentation).
fn run(dom: &VirtDomain, name: &str) {
    let start = std::time::Instant::now();
    let mut latest: Option<String> = None;
    loop {
        std::thread::sleep(TIME_SYNC_INTERVAL);
        if start.elapsed() > TIME_SYNC_DEADLINE {
            tracing::error!(domain = %name, "{FAILED_SYNC_GUEST_TIME}");
            break;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        let nsecs = i32::try_from(now.subsec_nanos()).unwrap_or(0);
        match dom.set_time(secs, nsecs, 0) {
            Ok(_) => {
                latest = None;
                tracing::info!(domain = %name, "guest VM time sync finished successfully");
                break;
            }
            Err(e) => {
                let code = e.code().to_raw();
                match after_error(code) {
                    Retry::Stop(why) => {
                        tracing::warn!(domain = %name, reason = %e.message(), "{why}");
                        break;
                    }
                    Retry::Again => {
                        tracing::debug!(domain = %name, reason = %e.message(), "{FAILED_SYNC_GUEST_TIME}");
                        latest = Some(kept_error(code, &e));
                    }
                }
            }
        }
    }
    if let Some(e) = latest {
        tracing::warn!(domain = %name, "{e}");
    }
}

impl LibvirtDomainManager {
    /// Starts KubeVirt's guest time sync for `dom` (just resumed) on a
    /// thread of its own, the first time only (see the module's
    /// documentation). Returns at once.
    pub(super) fn set_guest_time(&self, dom: &VirtDomain) {
        self.set_time_once.call_once(|| {
            let dom = dom.clone();
            let name = dom.get_name().unwrap_or_default();
            let spawned = std::thread::Builder::new()
                .name("guest-time".into())
                .spawn(move || run(&dom, &name));
            if let Err(e) = spawned {
                tracing::error!("{FAILED_SYNC_GUEST_TIME}: cannot start its thread: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubevirts_stop_and_retry_cases() {
        assert_eq!(
            after_error(sys::VIR_ERR_OPERATION_UNSUPPORTED),
            Retry::Stop("failed to set time: not supported")
        );
        assert_eq!(
            after_error(sys::VIR_ERR_ARGUMENT_UNSUPPORTED),
            Retry::Stop("failed to set time: agent not configured")
        );
        assert_eq!(after_error(sys::VIR_ERR_AGENT_UNRESPONSIVE), Retry::Again);
        assert_eq!(after_error(sys::VIR_ERR_INTERNAL_ERROR), Retry::Again);
    }
}
