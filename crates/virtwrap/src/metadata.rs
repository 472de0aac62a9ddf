//! The launcher's runtime metadata (KubeVirt v1.6.6
//! `pkg/virt-launcher/metadata`): what KubeVirt keeps in the launcher's
//! memory instead of the domain XML, and injects into
//! `Spec.Metadata.KubeVirt` of every domain it reports (GetDomain and the
//! notifications; kubevirt-facts §3.4).
//!
//! Every change that alters a value calls the notifier given to
//! [`MetadataCache::new`], as KubeVirt's cache pokes its domain notifier:
//! the launcher re-reads the domain and sends virt-handler a MODIFIED
//! event carrying the new metadata.

use std::sync::{Mutex, MutexGuard};

use wire::api_domain::{GracePeriod, RuntimeMetadata};

/// The current time as Kubernetes writes `metav1.Time` (RFC 3339, whole
/// seconds, UTC: `2026-12-01T10:00:00Z`), the form of every timestamp in
/// the metadata.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Called after a change, outside the cache's lock.
pub type ChangeNotifier = Box<dyn Fn() + Send + Sync>;

/// The metadata cache: one [`RuntimeMetadata`] behind a lock, with a
/// notifier for changes.
pub struct MetadataCache {
    inner: Mutex<RuntimeMetadata>,
    changed: ChangeNotifier,
}

impl MetadataCache {
    /// An empty cache (every part `None`) calling `changed` after each
    /// change.
    pub fn new(changed: ChangeNotifier) -> Self {
        MetadataCache {
            inner: Mutex::new(RuntimeMetadata::default()),
            changed,
        }
    }

    fn lock(&self) -> MutexGuard<'_, RuntimeMetadata> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of the current metadata.
    pub fn snapshot(&self) -> RuntimeMetadata {
        self.lock().clone()
    }

    /// Changes the metadata with `f` (KubeVirt's `WithSafeBlock`); calls
    /// the notifier, once the lock is released, when a value changed.
    pub fn update(&self, f: impl FnOnce(&mut RuntimeMetadata)) {
        let changed = {
            let mut g = self.lock();
            let before = g.clone();
            f(&mut g);
            *g != before
        };
        if changed {
            (self.changed)();
        }
    }

    /// Sets `GracePeriod.DeletionGracePeriodSeconds` to `seconds` (the
    /// VMI's `terminationGracePeriodSeconds`, default 30), keeping what
    /// the rest of the record says. KubeVirt writes it when it defines the
    /// domain and on every SyncVMI (`syncGracePeriod`); virt-handler reads
    /// it when the VMI it holds has no grace period of its own.
    pub fn set_grace_period_seconds(&self, seconds: i64) {
        self.update(|m| {
            m.grace_period
                .get_or_insert_with(GracePeriod::default)
                .deletion_grace_period_seconds = seconds;
        });
    }

    /// Records that the guest was asked to shut down: sets
    /// `GracePeriod.DeletionTimestamp` to `now()` (RFC 3339) the first time
    /// only, as KubeVirt's SignalShutdownVMI does. virt-handler's
    /// `hasGracePeriodExpired` counts the grace period from it and, once
    /// it has passed, sends KillVirtualMachine; without it virt-handler
    /// re-sends ShutdownVirtualMachine every 5 s and never kills.
    pub fn record_shutdown_request(&self, now: impl FnOnce() -> String) {
        self.update(|m| {
            let g = m.grace_period.get_or_insert_with(GracePeriod::default);
            if g.deletion_timestamp.is_none() {
                g.deletion_timestamp = Some(now());
            }
        });
    }

    /// Sets `GracePeriod.MarkedForGracefulShutdown` (KubeVirt's
    /// MarkGracefulShutdownVMI, on the launcher's first termination
    /// signal): virt-handler's `hasGracefulShutdownTrigger` then shuts the
    /// VMI down (ShutdownVirtualMachine, then the grace period).
    pub fn mark_graceful_shutdown(&self) {
        self.update(|m| {
            m.grace_period
                .get_or_insert_with(GracePeriod::default)
                .marked_for_graceful_shutdown = Some(true);
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use wire::api_domain::MemoryDumpMetadata;

    #[test]
    fn notifies_only_real_changes() {
        let n = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&n);
        let c = MetadataCache::new(Box::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        }));
        let dump = MemoryDumpMetadata {
            file_name: "a.memory.dump".into(),
            ..MemoryDumpMetadata::default()
        };
        c.update(|m| m.memory_dump = Some(dump.clone()));
        assert_eq!(n.load(Ordering::SeqCst), 1);
        c.update(|m| m.memory_dump = Some(dump.clone()));
        assert_eq!(n.load(Ordering::SeqCst), 1, "same value: no notification");
        c.update(|m| {
            if let Some(d) = m.memory_dump.as_mut() {
                d.completed = true;
            }
        });
        assert_eq!(n.load(Ordering::SeqCst), 2);
        assert!(c.snapshot().memory_dump.unwrap().completed);
    }

    /// KubeVirt's grace-period record: seconds on every sync, the
    /// shutdown request's time once, the termination signal's mark; each
    /// keeps the others, and only a change notifies.
    #[test]
    fn grace_period_record() {
        let n = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&n);
        let c = MetadataCache::new(Box::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        }));
        c.set_grace_period_seconds(30);
        c.set_grace_period_seconds(30);
        assert_eq!(n.load(Ordering::SeqCst), 1);
        c.record_shutdown_request(|| "2026-12-01T10:00:00Z".into());
        c.record_shutdown_request(|| "2026-12-01T10:00:05Z".into());
        assert_eq!(n.load(Ordering::SeqCst), 2, "the first request only");
        c.mark_graceful_shutdown();
        c.mark_graceful_shutdown();
        assert_eq!(n.load(Ordering::SeqCst), 3);
        c.set_grace_period_seconds(5);
        assert_eq!(
            c.snapshot().grace_period,
            Some(GracePeriod {
                deletion_grace_period_seconds: 5,
                deletion_timestamp: Some("2026-12-01T10:00:00Z".into()),
                marked_for_graceful_shutdown: Some(true),
            })
        );
        // A signal before the first sync: the mark alone.
        let c = MetadataCache::new(Box::new(|| {}));
        c.mark_graceful_shutdown();
        let g = c.snapshot().grace_period.unwrap();
        assert_eq!(g.marked_for_graceful_shutdown, Some(true));
        assert_eq!(g.deletion_timestamp, None);
    }
}
