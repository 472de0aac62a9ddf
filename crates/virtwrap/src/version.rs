//! The QEMU version GetQemuVersion reports, probed once at start.
//!
//! KubeVirt's launcher asks libvirt (`virConnectGetVersion`) on every
//! GetQemuVersion. libvirt answers from its QEMU capabilities, which it
//! probes the first time they are needed: in a fresh pod (empty
//! `/var/cache/libvirt`) that first call takes seconds (3.2 s measured
//! here), while virt-handler's downward-metrics scraper gives the call 5 s.
//! Here a thread asks once, on the launcher's connection, as soon as the
//! daemon is up (which also warms libvirt's capabilities for the first
//! define), and every GetQemuVersion answers from memory.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::connection::Shared;
use crate::manager::ManagerError;

/// Longest a GetQemuVersion waits for the probe: virt-handler's client
/// gives the call 5 s, and the answer must be back before that. On a fresh
/// pod the probe took 3.9–4.1 s on the loaded 2-core test host
/// (`bench/qemu_version.py`): with 4 s, two first calls in five failed
/// that KubeVirt's launcher (which asks libvirt, blocking) would have
/// answered.
pub const WAIT: Duration = Duration::from_millis(4500);

/// Stack of the probe's thread: one libvirt call (its RPC client, no XML)
/// and the [`QemuVersion::then`] functions (log lines, a few `stat`s).
/// 512 KiB: libvirt's client code is C whose depth this launcher does not
/// control; a quarter of std's default, and glibc can reuse the cached
/// stack of a 2 MiB thread for it (at most 4 times the size asked).
const PROBE_STACK: usize = 512 * 1024;

/// `QEMU <major>.<minor>.<micro>` from libvirt's version number
/// (`major * 1_000_000 + minor * 1000 + micro`), as KubeVirt formats it.
pub fn format(v: u32) -> String {
    format!(
        "QEMU {}.{}.{}",
        v / 1_000_000,
        (v % 1_000_000) / 1000,
        v % 1000
    )
}

/// Why the QEMU version is not known; the text is GetQemuVersion's
/// `Response.message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QemuVersionError {
    /// libvirt's error from the probe (`virConnectGetVersion`), as text:
    /// the result is shared by every caller.
    #[error("{0}")]
    Libvirt(String),
    /// The probe's thread could not be started.
    #[error("cannot start the QEMU version probe: {0}")]
    Spawn(String),
    /// The probe is still running after the caller's wait.
    #[error("the QEMU version is not known yet: libvirt is still probing QEMU")]
    Probing,
}

/// What runs once the probe has answered ([`QemuVersion::then`]).
type Then = Box<dyn FnOnce(&Result<String, QemuVersionError>) + Send>;

/// The probe's result, shared by the probing thread and the callers.
#[derive(Default)]
pub struct QemuVersion {
    value: Mutex<Option<Result<String, QemuVersionError>>>,
    ready: Condvar,
    then: Mutex<Vec<Then>>,
}

impl QemuVersion {
    /// Starts the probe on a thread of its own, asking on `conn`; the
    /// result (or libvirt's error) is kept for every later
    /// [`QemuVersion::get`].
    pub fn probe(conn: Arc<Shared>) -> Arc<QemuVersion> {
        let v = Arc::new(QemuVersion::default());
        let shared = Arc::clone(&v);
        let spawned = std::thread::Builder::new()
            .name("qemu-version".into())
            .stack_size(PROBE_STACK)
            .spawn(move || {
                let started = Instant::now();
                let r = conn
                    .with(|c| c.get_hyp_version().map_err(ManagerError::from))
                    .map(format)
                    .map_err(|e| QemuVersionError::Libvirt(e.to_string()));
                match &r {
                    Ok(s) => tracing::debug!(
                        ms = started.elapsed().as_millis(),
                        version = %s,
                        "QEMU version probed"
                    ),
                    Err(e) => tracing::warn!("probing the QEMU version: {e}"),
                }
                shared.set(r);
            });
        if let Err(e) = spawned {
            v.set(Err(QemuVersionError::Spawn(e.to_string())));
        }
        v
    }

    /// A value known in advance (tests).
    pub fn known(version: Result<String, QemuVersionError>) -> Arc<QemuVersion> {
        let v = Arc::new(QemuVersion::default());
        v.set(version);
        v
    }

    fn set(&self, r: Result<String, QemuVersionError>) {
        let then = {
            // `then` is locked first, as in [`QemuVersion::then`]: a
            // function is either queued before the value is set or sees it.
            let mut then = self.then.lock().unwrap_or_else(PoisonError::into_inner);
            *self.value.lock().unwrap_or_else(PoisonError::into_inner) = Some(r.clone());
            std::mem::take(&mut *then)
        };
        self.ready.notify_all();
        for f in then {
            f(&r);
        }
    }

    /// Runs `f` with the probe's result once it is known: at once, on the
    /// caller's thread, when it is; else on the probe's thread right after
    /// the probe (no thread of its own that waits). `f` must be brief.
    pub fn then(&self, f: impl FnOnce(&Result<String, QemuVersionError>) + Send + 'static) {
        let mut then = self.then.lock().unwrap_or_else(PoisonError::into_inner);
        let known = self
            .value
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match known {
            Some(r) => {
                drop(then);
                f(&r);
            }
            None => then.push(Box::new(f)),
        }
    }

    /// The probed version (`QEMU 10.0.2`), waiting up to `wait` for a probe
    /// still running.
    ///
    /// # Errors
    /// libvirt's error from the probe ([`QemuVersionError::Libvirt`]), or
    /// [`QemuVersionError::Probing`] when it is still running after `wait`.
    pub fn get(&self, wait: Duration) -> Result<String, QemuVersionError> {
        let guard = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = self
            .ready
            .wait_timeout_while(guard, wait, |v| v.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        guard.clone().unwrap_or(Err(QemuVersionError::Probing))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn formats_libvirts_number_as_kubevirt() {
        assert_eq!(format(10_000_002), "QEMU 10.0.2");
        assert_eq!(format(8_002_010), "QEMU 8.2.10");
    }

    #[test]
    fn waits_for_the_probe_then_answers_from_memory() {
        let v = Arc::new(QemuVersion::default());
        let e = v.get(Duration::from_millis(10)).unwrap_err();
        assert_eq!(e, QemuVersionError::Probing);
        assert_eq!(
            e.to_string(),
            "the QEMU version is not known yet: libvirt is still probing QEMU"
        );
        let setter = Arc::clone(&v);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            setter.set(Ok("QEMU 10.0.2".into()));
        });
        assert_eq!(v.get(Duration::from_secs(5)).unwrap(), "QEMU 10.0.2");
        t.join().unwrap();
        assert_eq!(
            QemuVersion::known(Err(QemuVersionError::Libvirt("no daemon".into())))
                .get(Duration::ZERO)
                .map_err(|e| e.to_string()),
            Err("no daemon".into())
        );
    }

    /// `then` runs once with the result: queued before the probe answers
    /// (on the probe's thread), at once after.
    #[test]
    fn then_runs_with_the_result_before_or_after_the_probe() {
        let v = Arc::new(QemuVersion::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let early = tx.clone();
        v.then(move |r| early.send(("early", r.clone())).unwrap());
        assert!(rx.try_recv().is_err(), "ran before the probe answered");
        let setter = Arc::clone(&v);
        std::thread::spawn(move || setter.set(Ok("QEMU 10.0.2".into())))
            .join()
            .unwrap();
        assert_eq!(rx.try_recv().unwrap(), ("early", Ok("QEMU 10.0.2".into())));
        v.then(move |r| tx.send(("late", r.clone())).unwrap());
        assert_eq!(rx.try_recv().unwrap(), ("late", Ok("QEMU 10.0.2".into())));
        assert!(rx.try_recv().is_err(), "ran twice");
    }
}
