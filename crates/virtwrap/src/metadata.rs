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

use domain::kubevirt_json::RuntimeMetadata;

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
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use domain::kubevirt_json::MemoryDumpMetadata;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

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
}
